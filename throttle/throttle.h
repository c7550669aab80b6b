/*
 * throttle: the retry throttling token bucket of gRFC A6 (SPEC TH-01..TH-03)
 * as a value type in fixed point (thousandths of a token), shaped like
 * nghttp2_ratelim. retry/ and hedging/ feed it outcomes; channel/ owns the
 * per-server-name table and its locking. No allocation, no clock.
 * Layout: floor 1 of docs/layout.md.
 */
#ifndef GRIT_THROTTLE_H
#define GRIT_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct grit_throttle {
  uint32_t max_tokens_milli;  /* maxTokens * 1000 */
  uint32_t token_ratio_milli; /* added per success */
  uint32_t tokens_milli;      /* in [0, max_tokens_milli] */
} grit_throttle;

/* grit_throttle_init: a full bucket (TH-01). Values are those of
 * grit_svccfg_global; a max of 0 makes a bucket that never allows. */
void grit_throttle_init(grit_throttle *t, uint32_t max_tokens_milli,
                        uint32_t token_ratio_milli);
/* grit_throttle_on_failure: a retryable or non-fatal status, or a
 * don't-retry pushback: minus one token, floored at 0 (TH-02). */
void grit_throttle_on_failure(grit_throttle *t);
/* grit_throttle_on_success: a call ended OK: plus the ratio, capped. */
void grit_throttle_on_success(grit_throttle *t);
/* grit_throttle_allows: tokens > max / 2, strictly (TH-03). Ask after
 * recording the failure that prompts the retry. */
bool grit_throttle_allows(const grit_throttle *t);
/* grit_throttle_reconfigure: new limits from a new config; the current
 * count is scaled by new_max / old_max, truncated (TH-01). */
void grit_throttle_reconfigure(grit_throttle *t, uint32_t max_tokens_milli,
                               uint32_t token_ratio_milli);

#endif
