/* The retry decision, in the exact order of SPEC RT-14 (gRFC A6). */
#include "retry/retry.h"

static grit_retry_decision no(grit_attempt_reason why) {
  grit_retry_decision d = {.retry = false, .reason = why};
  return d;
}

grit_retry_decision grit_retry_decide(const grit_retry_policy *p,
                                      grit_retry_state *st,
                                      grit_status_code code,
                                      const grit_pushback *pb,
                                      grit_throttle *thr, uint64_t now_ms,
                                      uint64_t deadline_ms, grit_rng *rng) {
  if (!p)
    return no(GRIT_REASON_NO_POLICY);
  if (code == GRIT_STATUS_OK)
    return no(GRIT_REASON_OK);
  if (!(p->retryable_codes & GRIT_CODE_BIT(code)))
    return no(GRIT_REASON_NON_RETRYABLE); /* throttle untouched */
  if (thr) {
    grit_throttle_on_failure(thr); /* TH-02 */
    if (!grit_throttle_allows(thr))
      return no(GRIT_REASON_THROTTLED); /* TH-03, TH-04 */
  }
  if (st->committed)
    return no(GRIT_REASON_COMMITTED);
  if (st->attempts >= p->max_attempts)
    return no(GRIT_REASON_EXHAUSTED);
  if (pb && pb->kind == GRIT_PUSHBACK_STOP)
    return no(GRIT_REASON_PUSHBACK);
  grit_retry_decision d = {.retry = true};
  if (pb && pb->kind == GRIT_PUSHBACK_DELAY) {
    d.delay_ms = pb->ms;
    d.pushback_used = true;
    st->backoff_n = 0; /* RT-04: backoff restarts after a pushback */
  } else {
    d.delay_ms = grit_backoff_next_ms(p, ++st->backoff_n, rng);
  }
  if (deadline_ms && grit_add_sat_u64(now_ms, d.delay_ms) >= deadline_ms)
    return no(GRIT_REASON_DEADLINE); /* RT-09 */
  return d;
}
