/* The hedging schedule of gRFC A6 (SPEC HG-01, HG-03..HG-06): when the
 * next hedge is due and what a status or pushback changes. Pure: the
 * caller passes the time and the throttle's verdict. */
#include "hedging/hedging.h"

void grit_hedge_init(grit_hedge_sched *h, const grit_hedging_policy *p,
                     uint64_t now_ms) {
  *h = (grit_hedge_sched){
      .max_attempts = p->max_attempts,
      .delay_ms = grit_ns_to_ms_ceil(p->hedging_delay_ns),
      .non_fatal_codes = p->non_fatal_codes,
      .stop_why = GRIT_REASON_NONE,
      .due_at_ms = now_ms,
  };
}

bool grit_hedge_more(const grit_hedge_sched *h) {
  return !h->stopped && h->sent < h->max_attempts;
}

uint64_t grit_hedge_wait_ms(const grit_hedge_sched *h, uint64_t now_ms) {
  if (!grit_hedge_more(h))
    return GRIT_HEDGE_NONE;
  return h->due_at_ms > now_ms ? h->due_at_ms - now_ms : 0;
}

void grit_hedge_on_sent(grit_hedge_sched *h, uint64_t now_ms) {
  h->sent++;
  h->due_at_ms =
      grit_add_sat_u64(now_ms, h->delay_ms); /* HG-01: hedgingDelay apart */
  h->wait_ms = h->delay_ms;
  h->wait_pushback = false;
}

void grit_hedge_stop(grit_hedge_sched *h, grit_attempt_reason why) {
  if (h->stopped)
    return;
  h->stopped = true;
  h->stop_why = why;
}

grit_hedge_verdict grit_hedge_classify(const grit_hedge_sched *h,
                                       grit_status_code code) {
  if (code == GRIT_STATUS_OK)
    return GRIT_HEDGE_WIN; /* HG-02: a Trailers-Only OK wins */
  if (!(h->non_fatal_codes & GRIT_CODE_BIT(code)))
    return GRIT_HEDGE_FATAL; /* HG-03 */
  return GRIT_HEDGE_NON_FATAL;
}

void grit_hedge_on_non_fatal(grit_hedge_sched *h, const grit_pushback *pb,
                             bool tokens_left, uint64_t now_ms) {
  if (pb && pb->kind == GRIT_PUSHBACK_STOP)
    grit_hedge_stop(h, GRIT_REASON_PUSHBACK); /* HG-05 */
  if (!tokens_left)
    grit_hedge_stop(h, GRIT_REASON_THROTTLED); /* HG-06 */
  if (h->stopped)
    return;
  if (pb && pb->kind == GRIT_PUSHBACK_DELAY) {
    h->due_at_ms = grit_add_sat_u64(now_ms, pb->ms); /* HG-05 */
    h->wait_ms = pb->ms;
    h->wait_pushback = true;
    return;
  }
  h->due_at_ms = now_ms; /* HG-03: the next one at once */
  h->wait_ms = 0;
  h->wait_pushback = false;
}

grit_attempt_reason grit_hedge_final_reason(const grit_hedge_sched *h) {
  return h->stopped ? h->stop_why : GRIT_REASON_EXHAUSTED;
}
