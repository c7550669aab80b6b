/* Retry backoff (SPEC RT-03; gRFC A6 with grit's +-20 % jitter). */
#include "retry/retry.h"

#include <math.h>

uint64_t grit_backoff_next_ms(const grit_retry_policy *p, uint32_t n,
                              grit_rng *rng) {
  double base = (double)p->initial_backoff_ns;
  if (n > 1)
    base *= pow(p->backoff_multiplier, (double)(n - 1));
  if (!(base < (double)p->max_backoff_ns)) /* also catches inf and nan */
    base = (double)p->max_backoff_ns;
  double ns = base * grit_rng_uniform(rng, 0.8, 1.2);
  return (uint64_t)ceil(ns / 1e6);
}
