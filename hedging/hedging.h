/*
 * hedging: the pure hedging schedule (SPEC HG-01, HG-03..HG-06) that
 * channel/ drives per call on top of the same attempts, replay buffer and
 * throttle as retries. It says what an attempt's status means and when the
 * next hedge is due; it knows nothing of the loop, streams or the channel:
 * time comes in as |now_ms|, throttling as a yes/no the caller computed.
 * Layout: floor 2 of docs/layout.md.
 */
#ifndef GRIT_HEDGING_H
#define GRIT_HEDGING_H

#include "retry/retry.h"

/* grit_hedge_wait_ms's "no hedge is due, ever". */
#define GRIT_HEDGE_NONE UINT64_MAX

/* One call's schedule; a value type in the call's storage. */
typedef struct grit_hedge_sched {
  uint32_t max_attempts;
  uint64_t delay_ms;        /* hedgingDelay, rounded up */
  uint32_t non_fatal_codes; /* GRIT_CODE_BIT set */
  uint32_t sent;            /* attempts started (HG-01 numbering) */
  bool stopped;             /* no further hedge (HG-05, HG-06, commit) */
  grit_attempt_reason stop_why;
  uint64_t due_at_ms; /* when the next hedge goes, if any */
  uint64_t wait_ms;   /* the wait before it, for its attempt record */
  bool wait_pushback; /* that wait came from grpc-retry-pushback-ms */
} grit_hedge_sched;

/* How an attempt's status counts (HG-02, HG-03). */
typedef enum grit_hedge_verdict {
  GRIT_HEDGE_WIN = 0,      /* OK (Trailers-Only): the call ends with it */
  GRIT_HEDGE_FATAL = 1,    /* not in nonFatalStatusCodes: final */
  GRIT_HEDGE_NON_FATAL = 2 /* call grit_hedge_on_non_fatal */
} grit_hedge_verdict;

/* grit_hedge_init: a schedule for |p| whose first attempt is due at
 * |now_ms| (HG-01: attempt 1 at t = 0). */
void grit_hedge_init(grit_hedge_sched *h, const grit_hedging_policy *p,
                     uint64_t now_ms);
/* grit_hedge_more: whether another attempt may still be started. */
bool grit_hedge_more(const grit_hedge_sched *h);
/* grit_hedge_wait_ms: ms from |now_ms| until the next attempt is due (0:
 * now), or GRIT_HEDGE_NONE when none will be. */
uint64_t grit_hedge_wait_ms(const grit_hedge_sched *h, uint64_t now_ms);
/* grit_hedge_on_sent: an attempt started at |now_ms|; the next one is due
 * hedgingDelay later (HG-01). */
void grit_hedge_on_sent(grit_hedge_sched *h, uint64_t now_ms);
/* grit_hedge_stop: no further hedge, for |why| (the first reason stays). */
void grit_hedge_stop(grit_hedge_sched *h, grit_attempt_reason why);
/* grit_hedge_classify: what an attempt ending with |code| means. */
grit_hedge_verdict grit_hedge_classify(const grit_hedge_sched *h,
                                       grit_status_code code);
/* grit_hedge_on_non_fatal: a non-fatal status at |now_ms| with pushback
 * |pb| (may be NULL); |tokens_left| is the throttle's answer after the
 * failure was recorded (HG-06, TH-02). Pushback stop ends hedging (those
 * in flight continue), pushback n moves the next hedge to now + n, none
 * makes it due at once (HG-03, HG-05); hedgingDelay spacing resumes after
 * it. */
void grit_hedge_on_non_fatal(grit_hedge_sched *h, const grit_pushback *pb,
                             bool tokens_left, uint64_t now_ms);
/* grit_hedge_final_reason: why no attempt followed the last one. */
grit_attempt_reason grit_hedge_final_reason(const grit_hedge_sched *h);

#endif
