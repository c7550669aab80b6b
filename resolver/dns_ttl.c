/* How long a DNS answer may be cached, from the raw message (SPEC OP-04):
 * c-ares 1.18 gives TTLs for A/AAAA (ares_addrinfo_node.ai_ttl) but not for
 * TXT (ares_parse_txt_reply_ext drops them), so the resolver reads the TXT
 * answer's TTL here. Pure: bytes in, a number out; every read is bounds
 * checked, and a message that does not parse is an error, never a guess. */
#include "resolver/resolver.h"

#define DNS_HEADER_LEN 12
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_SOA 6
#define DNS_RCODE_NXDOMAIN 3

static uint16_t rd16(const uint8_t *p) {
  return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

/* Skip the (possibly compressed) name at |*off| (RFC 1035 4.1.4): labels up
 * to a zero byte, or up to a two-byte pointer, which ends the name here.
 * Returns false if it runs past |len| or uses a reserved label type. */
static bool skip_name(const uint8_t *msg, size_t len, size_t *off) {
  size_t i = *off;
  for (;;) {
    if (i >= len)
      return false;
    uint8_t b = msg[i];
    if (b == 0) {
      *off = i + 1;
      return true;
    }
    if ((b & 0xc0) == 0xc0) {
      if (i + 2 > len)
        return false;
      *off = i + 2;
      return true;
    }
    if (b & 0xc0)
      return false; /* 0x40 / 0x80 label types: not in use (RFC 6891) */
    i += 1 + (size_t)b;
  }
}

/* RFC 2181 8: a TTL with the top bit set is treated as zero. */
static uint32_t ttl_value(uint32_t raw) {
  return raw & 0x80000000u ? 0 : raw;
}

grit_err grit_dns_answer_ttl(const uint8_t *msg, size_t len, uint16_t qtype,
                             uint32_t *ttl_s) {
  *ttl_s = 0;
  if (!msg || len < DNS_HEADER_LEN)
    return GRIT_ERR_PARSE;
  unsigned rcode = msg[3] & 0x0f;
  size_t qd = rd16(msg + 4), an = rd16(msg + 6), ns = rd16(msg + 8);
  size_t off = DNS_HEADER_LEN;
  for (size_t i = 0; i < qd; i++) {
    if (!skip_name(msg, len, &off) || off + 4 > len)
      return GRIT_ERR_PARSE;
    off += 4; /* QTYPE, QCLASS */
  }
  bool found = false, neg_found = false;
  uint32_t best = UINT32_MAX, neg = UINT32_MAX;
  for (size_t i = 0; i < an + ns; i++) {
    if (!skip_name(msg, len, &off) || off + 10 > len)
      return GRIT_ERR_PARSE;
    uint16_t type = rd16(msg + off);
    uint32_t ttl = ttl_value(rd32(msg + off + 4));
    size_t rdlen = rd16(msg + off + 8);
    off += 10;
    if (off + rdlen > len)
      return GRIT_ERR_PARSE;
    if (i < an && (type == qtype || type == DNS_TYPE_CNAME)) {
      /* The answer lives as long as its shortest link (RFC 2181 5.2). */
      found = true;
      best = ttl < best ? ttl : best;
    } else if (i >= an && type == DNS_TYPE_SOA) {
      /* RFC 2308 5: a negative answer lives min(SOA TTL, SOA MINIMUM);
       * MINIMUM is the last 32 bits of the SOA's RDATA. */
      size_t m = off;
      if (!skip_name(msg, off + rdlen, &m) ||
          !skip_name(msg, off + rdlen, &m) || m + 20 != off + rdlen)
        return GRIT_ERR_PARSE;
      uint32_t minimum = ttl_value(rd32(msg + m + 16));
      uint32_t t = ttl < minimum ? ttl : minimum;
      neg_found = true;
      neg = t < neg ? t : neg;
    }
    off += rdlen;
  }
  if (found) {
    *ttl_s = best;
    return GRIT_OK;
  }
  if (neg_found && (an == 0 || rcode == DNS_RCODE_NXDOMAIN)) {
    *ttl_s = neg;
    return GRIT_OK;
  }
  return GRIT_ERR_NOT_FOUND;
}
