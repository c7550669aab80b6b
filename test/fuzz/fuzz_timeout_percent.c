/* libFuzzer target: grpc-timeout parsing and encoding (SPEC HS-04) and
 * grpc-message percent-decoding (HS-05) on arbitrary bytes. */
#include "transport/transport.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The whole input as a grpc-timeout value. */
  int64_t ns = -1;
  if (grit_timeout_parse((const char *)data, size, &ns)) {
    GRIT_ASSERT(ns >= 0);
    GRIT_ASSERT(size >= 2 && size <= 9);
    /* Re-encoding never shortens the timeout, unless it is past the
     * largest encodable one (99999999H saturates). */
    char enc[10];
    grit_timeout_encode(ns, enc);
    int64_t back = -1;
    GRIT_ASSERT(grit_timeout_parse(enc, strlen(enc), &back));
    GRIT_ASSERT(back >= ns || ns == 0 || ns == INT64_MAX ||
                strcmp(enc, "99999999H") == 0);
  }
  /* The first 8 bytes as a duration in ns: the encoding is short, never
   * "0", and rounds up (HS-04). */
  if (size >= 8) {
    int64_t v = 0;
    memcpy(&v, data, 8);
    char enc[10];
    grit_timeout_encode(v, enc);
    size_t len = strlen(enc);
    GRIT_ASSERT(len >= 2 && len <= 9);
    GRIT_ASSERT(enc[0] != '0');
    int64_t back = -1;
    GRIT_ASSERT(grit_timeout_parse(enc, len, &back));
    GRIT_ASSERT(back > 0);
    if (v > 0 && strcmp(enc, "99999999H") != 0)
      GRIT_ASSERT(back >= v);
  }
  /* The whole input as a grpc-message: permissive decoding never grows,
   * always terminates, and encode/decode round-trips the result. */
  size_t dlen = 0;
  char *dec = grit_percent_decode(data, size, &dlen);
  if (dec) {
    GRIT_ASSERT(dlen <= size && dec[dlen] == '\0');
    /* Text without '%' decodes to itself. */
    if (!memchr(data, '%', size))
      GRIT_ASSERT(dlen == size && memcmp(dec, data, size) == 0);
    size_t elen = 0;
    char *enc = grit_percent_encode((const uint8_t *)dec, dlen, &elen);
    if (enc) {
      GRIT_ASSERT(strlen(enc) == elen);
      size_t rlen = 0;
      char *back = grit_percent_decode((const uint8_t *)enc, elen, &rlen);
      if (back)
        GRIT_ASSERT(rlen == dlen && memcmp(back, dec, dlen) == 0);
      grit_free(back);
    }
    grit_free(enc);
  }
  grit_free(dec);
  return 0;
}
