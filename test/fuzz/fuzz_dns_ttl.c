/* libFuzzer target: the TTL of a raw DNS answer (SPEC OP-04), which the
 * resolver reads from every TXT response a DNS server sends. The first
 * byte picks the query type (TXT, A, AAAA); the rest is the message. */
#include "channel/channel_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const uint16_t types[] = {16, 1, 28};
  if (size < 1)
    return 0;
  uint16_t qtype = types[data[0] % 3];
  uint32_t ttl = 12345;
  grit_err rv = grit_dns_answer_ttl(data + 1, size - 1, qtype, &ttl);
  GRIT_ASSERT(rv == GRIT_OK || rv == GRIT_ERR_NOT_FOUND ||
              rv == GRIT_ERR_PARSE);
  /* RFC 2181 8: never more than 2^31 - 1; 0 unless found. */
  GRIT_ASSERT(ttl <= 0x7fffffffu);
  GRIT_ASSERT(rv == GRIT_OK || ttl == 0);
  return 0;
}
