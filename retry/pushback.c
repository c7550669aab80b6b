/* grpc-retry-pushback-ms (SPEC RT-04): one non-negative decimal integer
 * means "retry after exactly that many ms"; anything else present means
 * "do not retry". */
#include "retry/retry.h"

#include <string.h>

#define PUSHBACK_KEY "grpc-retry-pushback-ms"

static bool parse_ms(const uint8_t *v, size_t len, uint64_t *out) {
  if (len == 0 || len > 18)
    return false; /* empty, or too large to be a sane delay */
  uint64_t ms = 0;
  for (size_t i = 0; i < len; i++) {
    if (v[i] < '0' || v[i] > '9')
      return false; /* a sign, spaces or garbage */
    ms = ms * 10 + (uint64_t)(v[i] - '0');
  }
  *out = ms;
  return true;
}

grit_pushback grit_retry_parse_pushback(const grit_metadata *trailers) {
  grit_pushback pb = {.kind = GRIT_PUSHBACK_NONE, .ms = 0};
  size_t seen = 0;
  for (size_t i = 0; i < grit_metadata_count(trailers); i++) {
    const char *k;
    const uint8_t *v;
    size_t len;
    grit_metadata_get(trailers, i, &k, &v, &len);
    if (strcmp(k, PUSHBACK_KEY) != 0)
      continue;
    if (++seen > 1 || !parse_ms(v, len, &pb.ms)) {
      pb.kind = GRIT_PUSHBACK_STOP;
      pb.ms = 0;
      return pb;
    }
    pb.kind = GRIT_PUSHBACK_DELAY;
  }
  return pb;
}
