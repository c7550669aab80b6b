/* Retry throttling token bucket (SPEC TH-01..TH-03; gRFC A6). Arithmetic is
 * done in 64 bits so no input can overflow. */
#include "throttle/throttle.h"

void grit_throttle_init(grit_throttle *t, uint32_t max_tokens_milli,
                        uint32_t token_ratio_milli) {
  t->max_tokens_milli = max_tokens_milli;
  t->token_ratio_milli = token_ratio_milli;
  t->tokens_milli = max_tokens_milli;
}

void grit_throttle_on_failure(grit_throttle *t) {
  t->tokens_milli = t->tokens_milli > 1000 ? t->tokens_milli - 1000 : 0;
}

void grit_throttle_on_success(grit_throttle *t) {
  uint64_t n = (uint64_t)t->tokens_milli + t->token_ratio_milli;
  t->tokens_milli = n > t->max_tokens_milli ? t->max_tokens_milli : (uint32_t)n;
}

bool grit_throttle_allows(const grit_throttle *t) {
  /* tokens > max / 2 without rounding max / 2 for odd max. */
  return (uint64_t)t->tokens_milli * 2 > t->max_tokens_milli;
}

void grit_throttle_reconfigure(grit_throttle *t, uint32_t max_tokens_milli,
                               uint32_t token_ratio_milli) {
  /* grpc-core scales the same way: tokens * new_max / old_max. */
  uint64_t tokens =
      t->max_tokens_milli
          ? (uint64_t)t->tokens_milli * max_tokens_milli / t->max_tokens_milli
          : max_tokens_milli;
  if (tokens > max_tokens_milli)
    tokens = max_tokens_milli;
  t->max_tokens_milli = max_tokens_milli;
  t->token_ratio_milli = token_ratio_milli;
  t->tokens_milli = (uint32_t)tokens;
}
