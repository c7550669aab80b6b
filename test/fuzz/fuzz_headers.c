/* libFuzzer target: response header and trailer handling with arbitrary
 * header lists. Each line "name:value" (split at the first ':' after the
 * first byte, so ":status:200" works) goes through what the transport does
 * per header (SPEC HS-02, HS-05, HS-06): grpc-status text, :status to a
 * code, grpc-message percent-decoding, -bin base64; then the list as
 * trailers through pushback parsing (RT-04) and metadata copy and lookup. */
#include "retry/retry.h"
#include "transport/transport.h"
#include "transport/transport_int.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool hd_is(const uint8_t *p, size_t n, const char *lit) {
  return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

/* SPEC HS-08: the transport's field check equals RFC 9113 8.2.1 read
 * byte by byte. */
static void hd_check_field(const uint8_t *name, size_t nlen, const uint8_t *v,
                           size_t vlen) {
  static const char tchar[] = "!#$%&'*+-.^_`|~";
  bool ok = nlen > (name[0] == ':' ? 1u : 0u);
  for (size_t i = name[0] == ':' ? 1 : 0; ok && i < nlen; i++)
    ok = (name[i] >= 'a' && name[i] <= 'z') ||
         (name[i] >= '0' && name[i] <= '9') ||
         (name[i] != 0 && memchr(tchar, name[i], sizeof(tchar) - 1) != NULL);
  if (ok && vlen > 0)
    ok = v[0] != ' ' && v[0] != '\t' && v[vlen - 1] != ' ' &&
         v[vlen - 1] != '\t';
  for (size_t i = 0; ok && i < vlen; i++)
    ok = v[i] == '\t' || (v[i] >= 0x20 && v[i] != 0x7f);
  GRIT_ASSERT(grit_h2_field_ok(name, nlen, v, vlen) == ok);
}

static void hd_check_value(const uint8_t *name, size_t nlen, const uint8_t *v,
                           size_t vlen) {
  if (hd_is(name, nlen, "grpc-status")) {
    grit_status_code c = grit_status_from_text((const char *)v, vlen);
    GRIT_ASSERT((int)c >= 0 && (int)c < GRIT_STATUS_COUNT);
    /* Only plain decimal 0..16 is taken at face value (HS-02). */
    int num = 0;
    for (size_t i = 0; i < vlen && i < 3 && num >= 0; i++)
      num = v[i] >= '0' && v[i] <= '9' ? num * 10 + v[i] - '0' : -1;
    if (vlen >= 1 && vlen <= 3 && num >= 0 && num <= 16)
      GRIT_ASSERT((int)c == num);
    else
      GRIT_ASSERT(c == GRIT_STATUS_UNKNOWN);
    grit_status_code named;
    if (grit_status_code_parse((const char *)v, vlen, &named) == GRIT_OK)
      GRIT_ASSERT((int)named >= 0 && (int)named < GRIT_STATUS_COUNT);
  } else if (hd_is(name, nlen, ":status")) {
    int http = 0;
    for (size_t i = 0; i < vlen && i < 4; i++)
      http = http * 10 + (v[i] - '0');
    grit_status_code c = grit_status_from_http(http);
    GRIT_ASSERT((int)c >= 0 && (int)c < GRIT_STATUS_COUNT && c != 0);
  } else if (hd_is(name, nlen, "grpc-message")) {
    size_t dlen = 0;
    char *dec = grit_percent_decode(v, vlen, &dlen);
    if (!dec)
      return; /* out of memory */
    GRIT_ASSERT(dlen <= vlen && dec[dlen] == '\0');
    /* decode(encode(x)) == x for every byte string. */
    size_t elen = 0;
    char *enc = grit_percent_encode((const uint8_t *)dec, dlen, &elen);
    if (enc) {
      for (size_t i = 0; i < elen; i++)
        GRIT_ASSERT(enc[i] >= 0x20 && enc[i] <= 0x7e);
      size_t rlen = 0;
      char *back = grit_percent_decode((const uint8_t *)enc, elen, &rlen);
      if (back)
        GRIT_ASSERT(rlen == dlen && memcmp(back, dec, dlen) == 0);
      grit_free(back);
    }
    grit_free(enc);
    grit_free(dec);
  } else if (nlen > 4 && memcmp(name + nlen - 4, "-bin", 4) == 0) {
    size_t blen = 0;
    uint8_t *bin = grit_base64_decode((const char *)v, vlen, &blen);
    if (!bin)
      return; /* not base64 (kept verbatim by the transport) */
    GRIT_ASSERT(blen <= vlen);
    size_t elen = 0;
    char *enc = grit_base64_encode(bin, blen, &elen);
    if (enc) {
      size_t rlen = 0;
      uint8_t *back = grit_base64_decode(enc, elen, &rlen);
      if (back)
        GRIT_ASSERT(rlen == blen && memcmp(back, bin, blen) == 0);
      grit_free(back);
    }
    grit_free(enc);
    grit_free(bin);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  grit_metadata *md = NULL;
  if (grit_metadata_create(&md) != GRIT_OK)
    return 0;
  size_t start = 0;
  for (size_t i = 0; i <= size; i++) {
    if (i < size && data[i] != '\n')
      continue;
    const uint8_t *line = data + start;
    size_t len = i - start;
    start = i + 1;
    if (len == 0)
      continue;
    size_t colon = 1;
    while (colon < len && line[colon] != ':')
      colon++;
    const uint8_t *v = colon < len ? line + colon + 1 : line + len;
    size_t vlen = colon < len ? len - colon - 1 : 0;
    hd_check_value(line, colon, v, vlen);
    hd_check_field(line, colon, v, vlen);
    /* The transport keeps every non-reserved header unchecked; the
     * application's add validates. Neither may misbehave. */
    if (line[0] != ':')
      grit_metadata_add_unchecked(md, (const char *)line, colon, v, vlen);
    char key[64];
    if (colon < sizeof(key)) {
      memcpy(key, line, colon);
      key[colon] = '\0';
      if (strlen(key) == colon)
        (void)grit_metadata_add(md, key, v, vlen);
    }
  }
  grit_pushback pb = grit_retry_parse_pushback(md);
  GRIT_ASSERT(pb.kind == GRIT_PUSHBACK_NONE || pb.kind == GRIT_PUSHBACK_DELAY ||
              pb.kind == GRIT_PUSHBACK_STOP);
  if (pb.kind != GRIT_PUSHBACK_DELAY)
    GRIT_ASSERT(pb.ms == 0);

  grit_metadata *copy = NULL;
  if (grit_metadata_copy(md, &copy) == GRIT_OK) {
    GRIT_ASSERT(grit_metadata_count(copy) == grit_metadata_count(md));
    for (size_t i = 0; i < grit_metadata_count(md); i++) {
      const char *k1, *k2;
      const uint8_t *v1, *v2;
      size_t l1, l2;
      GRIT_ASSERT(grit_metadata_get(md, i, &k1, &v1, &l1) == GRIT_OK);
      GRIT_ASSERT(grit_metadata_get(copy, i, &k2, &v2, &l2) == GRIT_OK);
      GRIT_ASSERT(strcmp(k1, k2) == 0 && l1 == l2 && v2[l2] == '\0');
      GRIT_ASSERT(l1 == 0 || memcmp(v1, v2, l1) == 0);
      size_t fl = 0;
      GRIT_ASSERT(grit_metadata_find(copy, k1, &fl) != NULL);
    }
    grit_metadata_destroy(copy);
  }
  /* A reset code from the first four bytes maps to a status too (HS-03). */
  if (size >= 4) {
    uint32_t rst = (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 |
                   (uint32_t)data[2] << 8 | data[3];
    grit_status_code c = grit_status_from_rst(rst);
    GRIT_ASSERT(c != GRIT_STATUS_OK && (int)c < GRIT_STATUS_COUNT);
  }
  grit_metadata_destroy(md);
  return 0;
}
