/* Unit tests for callsm/: the call machine (SPEC SM-01) driven by scripted
 * events on a fake clock, no sockets. Each case names the SPEC ids it
 * checks: every RT, HG, TR and TH behaviour, and the commit rules. */
#include "callsm/callsm.h"

#include "test/harness.h"

#define UNAV GRIT_STATUS_UNAVAILABLE

typedef struct sm {
  grit_callsm m;
  grit_callsm_actions out;
  grit_callsm_config cfg;
  grit_retry_policy rp;
  grit_hedging_policy hp;
  grit_throttle thr;
  bool use_thr;
  grit_rng rng;
  uint64_t now;
} sm;

static sm t; /* one machine per case */

static void setup(void) {
  memset(&t, 0, sizeof(t));
  grit_callsm_init(&t.m);
  grit_rng_seed(&t.rng, 42);
  t.cfg.transparent = true;
  t.now = 1000;
  t.rp = (grit_retry_policy){
      .max_attempts = 3,
      .initial_backoff_ns = 100 * 1000000LL,
      .max_backoff_ns = 1000 * 1000000LL,
      .backoff_multiplier = 2,
      .retryable_codes = GRIT_CODE_BIT(UNAV),
  };
  t.hp = (grit_hedging_policy){
      .max_attempts = 3,
      .hedging_delay_ns = 100 * 1000000LL,
      .non_fatal_codes = GRIT_CODE_BIT(UNAV),
  };
}

static void feed(grit_callsm_event ev) {
  ev.now_ms = t.now;
  ev.rng = &t.rng;
  if (t.use_thr)
    ev.throttle = &t.thr;
  grit_callsm_feed(&t.m, &ev, &t.out);
}

static void config(const grit_retry_policy *r, const grit_hedging_policy *h) {
  t.cfg.retry = r;
  t.cfg.hedge = h;
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_CONFIG, .config = &t.cfg});
}

static void ev_slot(grit_callsm_event_kind k, uint8_t slot) {
  feed((grit_callsm_event){.kind = k, .slot = slot});
}

static void ev_end(uint8_t slot, grit_status_code code, grit_callsm_wire wire,
                   grit_pushback pb) {
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_STREAM_END,
                           .slot = slot,
                           .code = code,
                           .message = "msg",
                           .wire = wire,
                           .pushback = pb});
}

static void fail_sent(uint8_t slot, grit_status_code code) {
  ev_end(slot, code, GRIT_CALLSM_WIRE_SENT, (grit_pushback){0});
}

static void timer(grit_callsm_timer which) {
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_TIMER, .timer = which});
}

/* The |nth| action of |kind| in the last output, or NULL. */
static const grit_callsm_action *act(grit_callsm_action_kind kind, int nth) {
  for (size_t i = 0; i < t.out.n; i++)
    if (t.out.a[i].kind == kind && nth-- == 0)
      return &t.out.a[i];
  return NULL;
}

static int count(grit_callsm_action_kind kind) {
  int n = 0;
  for (size_t i = 0; i < t.out.n; i++)
    n += t.out.a[i].kind == kind;
  return n;
}

/* The index of an action in the last output (for ordering checks). */
static int index_of(grit_callsm_action_kind kind, uint8_t slot) {
  for (size_t i = 0; i < t.out.n; i++)
    if (t.out.a[i].kind == kind && t.out.a[i].slot == slot)
      return (int)i;
  return -1;
}

static uint64_t timer_ms(grit_callsm_timer which) {
  for (size_t i = 0; i < t.out.n; i++)
    if (t.out.a[i].kind == GRIT_CALLSM_START_TIMER && t.out.a[i].timer == which)
      return t.out.a[i].ms;
  return UINT64_MAX;
}

/* ---- RT ---- */

/* RT-01: no policy: the first failure is final (NO_POLICY). */
static void test_rt01_no_policy(void) {
  setup();
  config(NULL, NULL);
  ASSERT_EQ(t.out.n, 1);
  const grit_callsm_action *a = act(GRIT_CALLSM_START_ATTEMPT, 0);
  ASSERT(a);
  ASSERT_EQ(a->slot, 0);
  ASSERT_EQ(a->number, 1);
  ASSERT_EQ(a->attempt_kind, GRIT_ATTEMPT_FIRST);
  ev_slot(GRIT_CALLSM_EV_STREAM_STARTED, 0);
  ASSERT_EQ(t.out.n, 0);
  fail_sent(0, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_NO_POLICY);
  const grit_callsm_action *f = act(GRIT_CALLSM_FINISH, 0);
  ASSERT(f);
  ASSERT_EQ(f->code, UNAV);
  ASSERT_EQ(f->slot, 0);
  ASSERT(strcmp(f->message, "msg") == 0);
  ASSERT(index_of(GRIT_CALLSM_FINISH, 0) <
         index_of(GRIT_CALLSM_DROP_ATTEMPT, 0));
  ASSERT(grit_callsm_done(&t.m));
}

/* RT-01: retries switched off: reason DISABLED, and no transparent retry
 * either. */
static void test_rt01_disabled(void) {
  setup();
  t.cfg.policy_disabled = true;
  t.cfg.transparent = false;
  config(NULL, NULL);
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_NOT_SENT, (grit_pushback){0});
  ASSERT_EQ(count(GRIT_CALLSM_REPICK), 0);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_DISABLED);
  ASSERT(act(GRIT_CALLSM_FINISH, 0));
}

/* RT-02: maxAttempts counts the first; the final status is the last
 * attempt's. RT-08: numbers 1, 2, 3. RT-12: each retry is a new pick. */
static void test_rt02_max_attempts(void) {
  setup();
  config(&t.rp, NULL);
  for (uint32_t n = 1; n <= 3; n++) {
    fail_sent(0, UNAV);
    if (n < 3) {
      ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_NONE);
      ASSERT(index_of(GRIT_CALLSM_RECORD, 0) <
             index_of(GRIT_CALLSM_DROP_ATTEMPT, 0));
      ASSERT_NE(timer_ms(GRIT_CALLSM_TIMER_RETRY), UINT64_MAX);
      ASSERT_EQ(count(GRIT_CALLSM_FINISH), 0);
      t.now += timer_ms(GRIT_CALLSM_TIMER_RETRY);
      timer(GRIT_CALLSM_TIMER_RETRY);
      const grit_callsm_action *a = act(GRIT_CALLSM_START_ATTEMPT, 0);
      ASSERT(a);
      ASSERT_EQ(a->number, n + 1);
      ASSERT_EQ(a->attempt_kind, GRIT_ATTEMPT_RETRY);
    }
  }
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_EXHAUSTED);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->code, UNAV);
  ASSERT_EQ(t.m.counts.attempts, 3);
  ASSERT_EQ(t.m.counts.retries, 2);
}

/* RT-03: backoff n is min(initial * mult^(n-1), max) * U(0.8, 1.2), from
 * the channel's PRNG: the same seed gives the same waits. */
static void test_rt03_backoff(void) {
  uint64_t first[4];
  for (int run = 0; run < 2; run++) {
    setup();
    t.rp.max_attempts = 5;
    config(&t.rp, NULL);
    uint64_t base = 100;
    for (int n = 0; n < 4; n++) {
      fail_sent(0, UNAV);
      uint64_t ms = timer_ms(GRIT_CALLSM_TIMER_RETRY);
      uint64_t cap = base > 1000 ? 1000 : base;
      ASSERT(ms >= cap * 8 / 10 && ms <= cap * 12 / 10 + 1);
      ASSERT_EQ(act(GRIT_CALLSM_START_TIMER, 0)->timer,
                GRIT_CALLSM_TIMER_RETRY);
      if (run == 0)
        first[n] = ms;
      else
        ASSERT_EQ(ms, first[n]);
      base *= 2;
      t.now += ms;
      timer(GRIT_CALLSM_TIMER_RETRY);
      ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 0)->backoff_ms, ms);
    }
  }
}

/* RT-04: pushback n retries after exactly n ms (and says so in the
 * attempt); a stop pushback ends the call (PUSHBACK). */
static void test_rt04_pushback(void) {
  setup();
  config(&t.rp, NULL);
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_SENT,
         (grit_pushback){.kind = GRIT_PUSHBACK_DELAY, .ms = 123});
  ASSERT_EQ(timer_ms(GRIT_CALLSM_TIMER_RETRY), 123);
  t.now += 123;
  timer(GRIT_CALLSM_TIMER_RETRY);
  const grit_callsm_action *a = act(GRIT_CALLSM_START_ATTEMPT, 0);
  ASSERT(a->pushback);
  ASSERT_EQ(a->backoff_ms, 123);
  ASSERT_EQ(t.m.counts.backoff_ms, 123);
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_SENT,
         (grit_pushback){.kind = GRIT_PUSHBACK_STOP});
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_PUSHBACK);
  ASSERT(act(GRIT_CALLSM_FINISH, 0));
}

/* RT-05: response headers commit; a later error is final (COMMITTED). */
static void test_rt05_commit_headers(void) {
  setup();
  config(&t.rp, NULL);
  ev_slot(GRIT_CALLSM_EV_STREAM_STARTED, 0);
  ev_slot(GRIT_CALLSM_EV_HEADERS, 0);
  ASSERT_EQ(act(GRIT_CALLSM_COMMIT, 0)->slot, 0);
  ASSERT(grit_callsm_committed(&t.m));
  ASSERT_EQ(grit_callsm_winner(&t.m), 0);
  ev_slot(GRIT_CALLSM_EV_HEADERS, 0);
  ASSERT_EQ(t.out.n, 0); /* committed once */
  fail_sent(0, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_COMMITTED);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_COMMITTED);
  ASSERT_EQ(count(GRIT_CALLSM_START_TIMER), 0);
}

/* RT-05: a response message commits too; an OK ends the call OK. */
static void test_rt05_commit_message(void) {
  setup();
  config(&t.rp, NULL);
  ev_slot(GRIT_CALLSM_EV_MESSAGE, 0);
  ASSERT(act(GRIT_CALLSM_COMMIT, 0));
  fail_sent(0, GRIT_STATUS_OK);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->code, GRIT_STATUS_OK);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_OK);
}

/* RT-06: a Trailers-Only error does not commit: it is retried. */
static void test_rt06_trailers_only(void) {
  setup();
  config(&t.rp, NULL);
  fail_sent(0, UNAV);
  ASSERT(!grit_callsm_committed(&t.m));
  ASSERT_NE(timer_ms(GRIT_CALLSM_TIMER_RETRY), UINT64_MAX);
}

/* RT-07: a send over the limit commits to the current attempt; before
 * the first attempt, the first attempt is the committed one. */
static void test_rt07_overflow(void) {
  setup();
  config(&t.rp, NULL);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_SEND, .fits = true});
  ASSERT_EQ(t.out.n, 0);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_SEND, .fits = false});
  ASSERT_EQ(act(GRIT_CALLSM_COMMIT, 0)->slot, 0);
  fail_sent(0, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_COMMITTED);

  setup();
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_SEND, .fits = false});
  ASSERT_EQ(act(GRIT_CALLSM_COMMIT, 0)->slot, GRIT_CALLSM_NO_SLOT);
  config(&t.rp, NULL);
  ASSERT(index_of(GRIT_CALLSM_START_ATTEMPT, 0) <
         index_of(GRIT_CALLSM_COMMIT, 0));
  ASSERT_EQ(grit_callsm_winner(&t.m), 0);
}

/* RT-07: an overflow during a backoff: the retry is the committed one. */
static void test_rt07_overflow_in_backoff(void) {
  setup();
  config(&t.rp, NULL);
  fail_sent(0, UNAV);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_SEND, .fits = false});
  ASSERT_EQ(act(GRIT_CALLSM_COMMIT, 0)->slot, GRIT_CALLSM_NO_SLOT);
  timer(GRIT_CALLSM_TIMER_RETRY);
  ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 0)->number, 2);
  ASSERT_EQ(act(GRIT_CALLSM_COMMIT, 0)->slot, 0);
  fail_sent(0, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_COMMITTED);
}

/* RT-08: a transparent retry keeps the number; a retry increments it. */
static void test_rt08_numbers(void) {
  setup();
  config(&t.rp, NULL);
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_NOT_SENT, (grit_pushback){0});
  ASSERT_EQ(act(GRIT_CALLSM_REPICK, 0)->number, 1);
  fail_sent(0, UNAV);
  timer(GRIT_CALLSM_TIMER_RETRY);
  ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 0)->number, 2);
}

/* RT-09: no time for the backoff: the attempt is recorded (DEADLINE),
 * the call waits for its deadline and ends DEADLINE_EXCEEDED. A deadline
 * during an attempt is final too. */
static void test_rt09_deadline(void) {
  setup();
  t.cfg.deadline_at_ms = t.now + 50; /* backoff is at least 80 ms */
  config(&t.rp, NULL);
  fail_sent(0, UNAV);
  const grit_callsm_action *r = act(GRIT_CALLSM_RECORD, 0);
  ASSERT_EQ(r->reason, GRIT_REASON_DEADLINE);
  ASSERT(r->keep_peer);
  ASSERT_EQ(count(GRIT_CALLSM_FINISH), 0);
  ASSERT_EQ(count(GRIT_CALLSM_START_TIMER), 0);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_DEADLINE});
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->code, GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->slot, GRIT_CALLSM_NO_SLOT);

  setup();
  config(&t.rp, NULL);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_DEADLINE});
  r = act(GRIT_CALLSM_RECORD, 0);
  ASSERT_EQ(r->code, GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_EQ(r->reason, GRIT_REASON_DEADLINE);
  ASSERT_EQ(act(GRIT_CALLSM_DROP_ATTEMPT, 0)->slot, 0);
  /* A server-sent DEADLINE_EXCEEDED may be retried if listed. */
  setup();
  t.rp.retryable_codes |= GRIT_CODE_BIT(GRIT_STATUS_DEADLINE_EXCEEDED);
  config(&t.rp, NULL);
  fail_sent(0, GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_NE(timer_ms(GRIT_CALLSM_TIMER_RETRY), UINT64_MAX);
}

/* RT-10: the recv timeout resets streams without headers; the attempt
 * fails CANCELLED and is retried; headers stop the timer. */
static void test_rt10_recv_timeout(void) {
  setup();
  t.rp.has_per_attempt_recv_timeout = true;
  t.rp.per_attempt_recv_timeout_ns = 30 * 1000000LL;
  config(&t.rp, NULL);
  ev_slot(GRIT_CALLSM_EV_STREAM_STARTED, 0);
  ASSERT_EQ(timer_ms(GRIT_CALLSM_TIMER_RECV), 30);
  timer(GRIT_CALLSM_TIMER_RECV);
  const grit_callsm_action *r = act(GRIT_CALLSM_RESET_STREAM, 0);
  ASSERT(r);
  ASSERT_EQ(r->slot, 0);
  ASSERT_EQ(r->code, GRIT_STATUS_CANCELLED);
  fail_sent(0, GRIT_STATUS_CANCELLED);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_NONE);
  timer(GRIT_CALLSM_TIMER_RETRY);
  ev_slot(GRIT_CALLSM_EV_STREAM_STARTED, 0);
  ASSERT_EQ(timer_ms(GRIT_CALLSM_TIMER_RECV), 30);
  ev_slot(GRIT_CALLSM_EV_HEADERS, 0);
  ASSERT(act(GRIT_CALLSM_STOP_TIMER, 0));
  ASSERT_EQ(act(GRIT_CALLSM_STOP_TIMER, 0)->timer, GRIT_CALLSM_TIMER_RECV);
  /* Without the timeout, a CANCELLED status is not retryable. */
  setup();
  config(&t.rp, NULL);
  fail_sent(0, GRIT_STATUS_CANCELLED);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_NON_RETRYABLE);
}

/* RT-11: a cancel in a backoff ends the call; in an attempt it records
 * and drops the attempt. */
static void test_rt11_cancel(void) {
  setup();
  config(&t.rp, NULL);
  fail_sent(0, UNAV);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_CANCEL});
  ASSERT_EQ(t.out.n, 1);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->code, GRIT_STATUS_CANCELLED);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_CANCELLED);
  timer(GRIT_CALLSM_TIMER_RETRY);
  ASSERT_EQ(t.out.n, 0); /* SM-01: nothing after FINISH */

  setup();
  config(&t.rp, NULL);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_CANCEL});
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_CANCELLED);
  ASSERT(index_of(GRIT_CALLSM_FINISH, GRIT_CALLSM_NO_SLOT) <
         index_of(GRIT_CALLSM_DROP_ATTEMPT, 0));
}

/* RT-12: a failed pick fails the attempt and the policy decides. */
static void test_rt12_pick_failed(void) {
  setup();
  config(&t.rp, NULL);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_PICK_FAILED,
                           .slot = 0,
                           .code = UNAV,
                           .message = "no ready subchannel"});
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->code, UNAV);
  ASSERT_NE(timer_ms(GRIT_CALLSM_TIMER_RETRY), UINT64_MAX);
  timer(GRIT_CALLSM_TIMER_RETRY);
  ASSERT(act(GRIT_CALLSM_START_ATTEMPT, 0));
}

/* Issue 27 (A27, A32): a pick the load balancer drops (an xDS drop
 * category, the circuit breaker) ends the call: no retry under a retry
 * policy, and under hedging the other attempts end with it. */
static void test_pick_dropped(void) {
  setup();
  config(&t.rp, NULL);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_PICK_FAILED,
                           .slot = 0,
                           .code = UNAV,
                           .drop = true,
                           .message = "dropped by xDS drop config"});
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_DROPPED);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->code, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_DROPPED);
  ASSERT_EQ(count(GRIT_CALLSM_START_TIMER), 0);
  ASSERT_EQ(count(GRIT_CALLSM_START_ATTEMPT), 0);

  setup();
  config(NULL, &t.hp);
  t.now += 100;
  timer(GRIT_CALLSM_TIMER_RETRY); /* the hedge, slot 1 */
  ASSERT(act(GRIT_CALLSM_START_ATTEMPT, 0));
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_PICK_FAILED,
                           .slot = 1,
                           .code = UNAV,
                           .drop = true,
                           .message = "dropped by circuit breaker"});
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_DROPPED);
  ASSERT_EQ(count(GRIT_CALLSM_START_ATTEMPT), 0);
  ASSERT(act(GRIT_CALLSM_DROP_ATTEMPT, 0)); /* the first attempt ends too */
}

/* RT-14: a non-retryable code leaves the throttle alone; a retryable one
 * records a failure first, and then throttling wins over maxAttempts. */
static void test_rt14_order(void) {
  setup();
  t.use_thr = true;
  grit_throttle_init(&t.thr, 10000, 100);
  config(&t.rp, NULL);
  fail_sent(0, GRIT_STATUS_INTERNAL);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_NON_RETRYABLE);
  ASSERT_EQ(t.thr.tokens_milli, 10000);

  setup();
  t.use_thr = true;
  grit_throttle_init(&t.thr, 10000, 100);
  t.thr.tokens_milli = 6000; /* the next failure leaves 5.0: throttled */
  t.rp.max_attempts = 2;
  config(&t.rp, NULL);
  fail_sent(0, UNAV);
  ASSERT_EQ(t.thr.tokens_milli, 5000);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_THROTTLED);
  ASSERT(act(GRIT_CALLSM_THROTTLED, 0));
  ASSERT(index_of(GRIT_CALLSM_THROTTLED, GRIT_CALLSM_NO_SLOT) <
         index_of(GRIT_CALLSM_FINISH, 0));
}

/* RT-13: replay is the caller's; the machine tracks what each attempt
 * sent only to pick the furthest (see HG-07). A re-pick starts over. */
static void test_rt13_repick_resets_sent(void) {
  setup();
  config(&t.rp, NULL);
  grit_callsm_note_sent(&t.m, 0, 3);
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_NOT_SENT, (grit_pushback){0});
  ASSERT(act(GRIT_CALLSM_REPICK, 0));
  ASSERT_EQ(t.m.slots[0].sent, 0);
}

/* ---- HG ---- */

/* HG-01: attempt 1 at t=0, attempt k at (k-1) x hedgingDelay, up to
 * maxAttempts, numbered k. */
static void test_hg01_schedule(void) {
  setup();
  config(NULL, &t.hp);
  ASSERT_EQ(count(GRIT_CALLSM_START_ATTEMPT), 1);
  ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 0)->attempt_kind,
            GRIT_ATTEMPT_FIRST);
  ASSERT_EQ(timer_ms(GRIT_CALLSM_TIMER_RETRY), 100);
  t.now += 100;
  timer(GRIT_CALLSM_TIMER_RETRY);
  const grit_callsm_action *a = act(GRIT_CALLSM_START_ATTEMPT, 0);
  ASSERT_EQ(a->attempt_kind, GRIT_ATTEMPT_HEDGE);
  ASSERT_EQ(a->number, 2);
  ASSERT_EQ(a->slot, 1);
  ASSERT_EQ(a->backoff_ms, 100);
  ASSERT_EQ(timer_ms(GRIT_CALLSM_TIMER_RETRY), 100);
  t.now += 100;
  timer(GRIT_CALLSM_TIMER_RETRY);
  ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 0)->number, 3);
  ASSERT_EQ(count(GRIT_CALLSM_START_TIMER), 0); /* maxAttempts reached */
  ASSERT_EQ(t.m.counts.hedges, 2);
  /* SC-11: no delay sends every attempt at once. */
  setup();
  t.hp.hedging_delay_ns = 0;
  config(NULL, &t.hp);
  ASSERT_EQ(count(GRIT_CALLSM_START_ATTEMPT), 3);
  ASSERT_EQ(count(GRIT_CALLSM_START_TIMER), 0);
}

/* HG-02: the first headers win: the others are recorded HEDGE_LOST and
 * dropped, the hedge timer stops. */
static void test_hg02_headers_win(void) {
  setup();
  t.hp.hedging_delay_ns = 0;
  t.hp.max_attempts = 4;
  config(NULL, &t.hp);
  ev_slot(GRIT_CALLSM_EV_STREAM_STARTED, 1);
  ev_slot(GRIT_CALLSM_EV_HEADERS, 1);
  ASSERT_EQ(act(GRIT_CALLSM_COMMIT, 0)->slot, 1);
  ASSERT_EQ(count(GRIT_CALLSM_RECORD), 3);
  ASSERT_EQ(count(GRIT_CALLSM_DROP_ATTEMPT), 3);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(act(GRIT_CALLSM_RECORD, i)->reason, GRIT_REASON_HEDGE_LOST);
    ASSERT_NE(act(GRIT_CALLSM_RECORD, i)->slot, 1);
  }
  ASSERT(index_of(GRIT_CALLSM_DROP_ATTEMPT, 3) <
         index_of(GRIT_CALLSM_COMMIT, 1));
  /* With a delay, the hedge timer stops. */
  setup();
  config(NULL, &t.hp);
  ev_slot(GRIT_CALLSM_EV_HEADERS, 0);
  ASSERT_EQ(act(GRIT_CALLSM_STOP_TIMER, 0)->timer, GRIT_CALLSM_TIMER_RETRY);
  timer(GRIT_CALLSM_TIMER_RETRY); /* fired before the stop took */
  ASSERT_EQ(t.out.n, 0);
}

/* HG-02: a Trailers-Only OK wins and ends the call. */
static void test_hg02_trailers_only_ok(void) {
  setup();
  t.hp.hedging_delay_ns = 0;
  config(NULL, &t.hp);
  fail_sent(2, GRIT_STATUS_OK);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->slot, 2);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_OK);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 1)->reason, GRIT_REASON_HEDGE_LOST);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->code, GRIT_STATUS_OK);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->slot, 2);
  ASSERT_EQ(count(GRIT_CALLSM_DROP_ATTEMPT), 3);
}

/* HG-03: a non-fatal status sends the next hedge at once, then
 * hedgingDelay apart; a fatal one ends the call and cancels the rest. */
static void test_hg03_fatal_and_non_fatal(void) {
  setup();
  config(NULL, &t.hp);
  t.now += 10;
  fail_sent(0, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_NONE);
  ASSERT_EQ(act(GRIT_CALLSM_STOP_TIMER, 0)->timer, GRIT_CALLSM_TIMER_RETRY);
  const grit_callsm_action *a = act(GRIT_CALLSM_START_ATTEMPT, 0);
  ASSERT(a);
  ASSERT_EQ(a->number, 2);
  ASSERT_EQ(a->backoff_ms, 0);
  ASSERT(index_of(GRIT_CALLSM_DROP_ATTEMPT, 0) <
         index_of(GRIT_CALLSM_START_ATTEMPT, 0)); /* slot 0 reused */
  ASSERT_EQ(timer_ms(GRIT_CALLSM_TIMER_RETRY), 100);
  t.now += 100;
  timer(GRIT_CALLSM_TIMER_RETRY);
  ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 0)->number, 3);
  fail_sent(1, GRIT_STATUS_INTERNAL); /* fatal */
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_FATAL);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 1)->reason, GRIT_REASON_HEDGE_LOST);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->code, GRIT_STATUS_INTERNAL);
}

/* HG-04: all failed non-fatally, none left: the last status, when the
 * last attempt has ended. */
static void test_hg04_last_status(void) {
  setup();
  t.hp.hedging_delay_ns = 0;
  config(NULL, &t.hp);
  fail_sent(0, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_SAVE_STATUS, 0)->code, UNAV);
  ASSERT_EQ(count(GRIT_CALLSM_FINISH), 0);
  fail_sent(1, UNAV);
  ASSERT_EQ(count(GRIT_CALLSM_FINISH), 0);
  fail_sent(2, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_EXHAUSTED);
  const grit_callsm_action *f = act(GRIT_CALLSM_FINISH, 0);
  ASSERT(f);
  ASSERT(f->use_saved);
  ASSERT_EQ(f->reason, GRIT_REASON_EXHAUSTED);
}

/* HG-05: pushback n sends the next hedge n ms later; a stop pushback
 * stops new hedges while those in flight go on. */
static void test_hg05_pushback(void) {
  setup();
  t.hp.max_attempts = 4;
  t.hp.hedging_delay_ns = 1000 * 1000000LL;
  config(NULL, &t.hp);
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_SENT,
         (grit_pushback){.kind = GRIT_PUSHBACK_DELAY, .ms = 40});
  ASSERT_EQ(timer_ms(GRIT_CALLSM_TIMER_RETRY), 40);
  t.now += 40;
  timer(GRIT_CALLSM_TIMER_RETRY);
  const grit_callsm_action *a = act(GRIT_CALLSM_START_ATTEMPT, 0);
  ASSERT(a->pushback);
  ASSERT_EQ(a->backoff_ms, 40);
  ASSERT_EQ(timer_ms(GRIT_CALLSM_TIMER_RETRY), 1000);
  t.now += 1000;
  timer(GRIT_CALLSM_TIMER_RETRY); /* attempt 3 in flight with 2 */
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_SENT,
         (grit_pushback){.kind = GRIT_PUSHBACK_STOP});
  ASSERT_EQ(count(GRIT_CALLSM_START_ATTEMPT), 0);
  ASSERT_EQ(count(GRIT_CALLSM_START_TIMER), 0);
  ASSERT_EQ(count(GRIT_CALLSM_FINISH), 0); /* attempt 3 goes on */
  fail_sent(1, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_PUSHBACK);
}

/* HG-06, TH-02: the first attempt always goes; a further hedge only if
 * tokens allow; a non-fatal failure costs a token. */
static void test_hg06_throttle(void) {
  setup();
  t.use_thr = true;
  grit_throttle_init(&t.thr, 10000, 100);
  t.thr.tokens_milli = 4000; /* throttled from the start */
  config(NULL, &t.hp);
  ASSERT_EQ(count(GRIT_CALLSM_START_ATTEMPT), 1);
  t.now += 100;
  timer(GRIT_CALLSM_TIMER_RETRY);
  ASSERT_EQ(count(GRIT_CALLSM_START_ATTEMPT), 0);
  ASSERT(act(GRIT_CALLSM_THROTTLED, 0));
  fail_sent(0, UNAV);
  ASSERT_EQ(t.thr.tokens_milli, 3000);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_THROTTLED);

  setup();
  t.use_thr = true;
  grit_throttle_init(&t.thr, 10000, 100);
  t.thr.tokens_milli = 6000;
  config(NULL, &t.hp);
  fail_sent(0, UNAV); /* leaves 5.0: no more hedges */
  ASSERT(act(GRIT_CALLSM_THROTTLED, 0));
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_THROTTLED);
}

/* HG-07: a buffer overflow commits to the attempt that sent the most. */
static void test_hg07_overflow_furthest(void) {
  setup();
  t.hp.hedging_delay_ns = 0;
  config(NULL, &t.hp);
  for (uint8_t i = 0; i < 3; i++)
    ev_slot(GRIT_CALLSM_EV_STREAM_STARTED, i);
  grit_callsm_note_sent(&t.m, 0, 1);
  grit_callsm_note_sent(&t.m, 1, 3);
  grit_callsm_note_sent(&t.m, 2, 2);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_SEND, .fits = false});
  ASSERT_EQ(act(GRIT_CALLSM_COMMIT, 0)->slot, 1);
  ASSERT_EQ(count(GRIT_CALLSM_DROP_ATTEMPT), 2);
}

/* HG-07, RT-07: an overflow while no hedge is live (the next one waits
 * for a pushback): the next hedge is the committed attempt. */
static void test_hg07_overflow_between_hedges(void) {
  setup();
  config(NULL, &t.hp);
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_SENT,
         (grit_pushback){.kind = GRIT_PUSHBACK_DELAY, .ms = 40});
  ASSERT_EQ(timer_ms(GRIT_CALLSM_TIMER_RETRY), 40);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_SEND, .fits = false});
  ASSERT_EQ(act(GRIT_CALLSM_COMMIT, 0)->slot, GRIT_CALLSM_NO_SLOT);
  t.now += 40;
  timer(GRIT_CALLSM_TIMER_RETRY);
  ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 0)->number, 2);
  ASSERT_EQ(act(GRIT_CALLSM_COMMIT, 0)->slot, 0);
  ASSERT_EQ(count(GRIT_CALLSM_START_TIMER), 0); /* no further hedges */
  fail_sent(0, UNAV);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_COMMITTED);
}

/* HG-08: each hedge is its own START_ATTEMPT, so its own pick. HG-09:
 * a cancel and the deadline cover every hedge. */
static void test_hg09_cancel_all(void) {
  setup();
  t.hp.hedging_delay_ns = 0;
  config(NULL, &t.hp);
  ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 2)->slot, 2);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_CANCEL});
  ASSERT_EQ(count(GRIT_CALLSM_RECORD), 3);
  ASSERT_EQ(count(GRIT_CALLSM_DROP_ATTEMPT), 3);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 2)->reason, GRIT_REASON_CANCELLED);
  setup();
  t.hp.hedging_delay_ns = 0;
  config(NULL, &t.hp);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_DEADLINE});
  ASSERT_EQ(count(GRIT_CALLSM_RECORD), 3);
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->reason, GRIT_REASON_DEADLINE);
}

/* More hedges than slots: the next waits for a slot. */
static void test_hg_slots_full(void) {
  setup();
  t.hp.hedging_delay_ns = 0;
  t.hp.max_attempts = GRIT_CALLSM_SLOTS + 2;
  config(NULL, &t.hp);
  ASSERT_EQ(count(GRIT_CALLSM_START_ATTEMPT), GRIT_CALLSM_SLOTS);
  fail_sent(3, UNAV);
  ASSERT_EQ(count(GRIT_CALLSM_START_ATTEMPT), 1);
  ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 0)->slot, 3);
  ASSERT_EQ(act(GRIT_CALLSM_START_ATTEMPT, 0)->number, GRIT_CALLSM_SLOTS + 1);
}

/* ---- TR ---- */

/* TR-01: not sent: re-picked at once, without limit up to the cap of
 * 1000, then INTERNAL. */
static void test_tr01_not_sent(void) {
  setup();
  config(&t.rp, NULL);
  for (int i = 0; i < GRIT_CALLSM_TRANSPARENT_CAP; i++) {
    ev_end(0, UNAV, GRIT_CALLSM_WIRE_NOT_SENT, (grit_pushback){0});
    if (!act(GRIT_CALLSM_REPICK, 0))
      break;
  }
  ASSERT_EQ(t.m.counts.transparent, GRIT_CALLSM_TRANSPARENT_CAP);
  ASSERT_EQ(act(GRIT_CALLSM_REPICK, 0)->attempt_kind, GRIT_ATTEMPT_TRANSPARENT);
  ASSERT_EQ(count(GRIT_CALLSM_START_TIMER), 0); /* no backoff */
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_NOT_SENT, (grit_pushback){0});
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->code, GRIT_STATUS_INTERNAL);
}

/* TR-02: refused: once per call. */
static void test_tr02_refused_once(void) {
  setup();
  config(NULL, NULL);
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_REFUSED, (grit_pushback){0});
  ASSERT(act(GRIT_CALLSM_REPICK, 0));
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_REFUSED, (grit_pushback){0});
  ASSERT_EQ(count(GRIT_CALLSM_REPICK), 0);
  ASSERT(act(GRIT_CALLSM_FINISH, 0));
}

/* TR-03: not counted against maxAttempts nor by throttling; never after
 * commit. */
static void test_tr03_not_counted(void) {
  setup();
  t.use_thr = true;
  grit_throttle_init(&t.thr, 10000, 100);
  t.rp.max_attempts = 2;
  config(&t.rp, NULL);
  for (int i = 0; i < 5; i++)
    ev_end(0, UNAV, GRIT_CALLSM_WIRE_NOT_SENT, (grit_pushback){0});
  ASSERT_EQ(t.thr.tokens_milli, 10000);
  fail_sent(0, UNAV);
  ASSERT_NE(timer_ms(GRIT_CALLSM_TIMER_RETRY), UINT64_MAX);
  ASSERT_EQ(t.m.counts.attempts, 6);

  setup();
  config(&t.rp, NULL);
  ev_slot(GRIT_CALLSM_EV_HEADERS, 0);
  ev_end(0, UNAV, GRIT_CALLSM_WIRE_NOT_SENT, (grit_pushback){0});
  ASSERT_EQ(count(GRIT_CALLSM_REPICK), 0);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_COMMITTED);
}

/* TR-04: written, no GOAWAY: no transparent retry; the policy decides. */
static void test_tr04_sent(void) {
  setup();
  config(NULL, NULL);
  fail_sent(0, UNAV);
  ASSERT_EQ(count(GRIT_CALLSM_REPICK), 0);
  ASSERT(act(GRIT_CALLSM_FINISH, 0));
  /* Headers seen (not Trailers-Only): no transparent retry either. */
  setup();
  config(NULL, NULL);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_STREAM_END,
                           .slot = 0,
                           .code = UNAV,
                           .wire = GRIT_CALLSM_WIRE_NOT_SENT,
                           .headers_received = true});
  ASSERT_EQ(count(GRIT_CALLSM_REPICK), 0);
}

/* ---- TH ---- */

/* TH-02: a call that ends OK adds tokenRatio. */
static void test_th02_success(void) {
  setup();
  t.use_thr = true;
  grit_throttle_init(&t.thr, 10000, 100);
  t.thr.tokens_milli = 5000;
  config(&t.rp, NULL);
  fail_sent(0, GRIT_STATUS_OK);
  ASSERT_EQ(t.thr.tokens_milli, 5100);
}

/* TH-03: maxTokens 10, ratio 0.1: failures 1-4 retry, 5 throttles. */
static void test_th03_sequence(void) {
  grit_throttle bucket;
  grit_throttle_init(&bucket, 10000, 100);
  for (int call = 1; call <= 5; call++) {
    setup();
    t.use_thr = true;
    t.thr = bucket;
    config(&t.rp, NULL);
    fail_sent(0, UNAV);
    bucket = t.thr;
    bool throttled = act(GRIT_CALLSM_THROTTLED, 0) != NULL;
    ASSERT_EQ(throttled, call == 5);
  }
  ASSERT_EQ(bucket.tokens_milli, 5000);
}

/* TH-04: a throttled call fails at once with its last attempt's status
 * (no timer, no queue). */
static void test_th04_fails_at_once(void) {
  setup();
  t.use_thr = true;
  grit_throttle_init(&t.thr, 10000, 100);
  t.thr.tokens_milli = 5500;
  config(&t.rp, NULL);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_STREAM_END,
                           .slot = 0,
                           .code = UNAV,
                           .message = "last",
                           .wire = GRIT_CALLSM_WIRE_SENT});
  ASSERT_EQ(count(GRIT_CALLSM_START_TIMER), 0);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->code, UNAV);
  ASSERT(strcmp(act(GRIT_CALLSM_FINISH, 0)->message, "last") == 0);
}

/* ---- SM ---- */

/* SM-01: events about a free slot, a stale timer and anything after
 * FINISH produce nothing; a FAIL ends the call with its own status. */
static void test_sm01_stale_events(void) {
  setup();
  config(NULL, NULL);
  ev_slot(GRIT_CALLSM_EV_HEADERS, 5);
  ASSERT_EQ(t.out.n, 0);
  ev_slot(GRIT_CALLSM_EV_MESSAGE, GRIT_CALLSM_NO_SLOT);
  ASSERT_EQ(t.out.n, 0);
  timer(GRIT_CALLSM_TIMER_RETRY);
  ASSERT_EQ(t.out.n, 0);
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_FAIL,
                           .code = GRIT_STATUS_RESOURCE_EXHAUSTED,
                           .message = "oom"});
  ASSERT_EQ(act(GRIT_CALLSM_RECORD, 0)->code, GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_EQ(act(GRIT_CALLSM_FINISH, 0)->reason, GRIT_REASON_COMMITTED);
  fail_sent(0, UNAV);
  ASSERT_EQ(t.out.n, 0);
  /* A FAIL before the config ends the call too. */
  setup();
  feed((grit_callsm_event){.kind = GRIT_CALLSM_EV_FAIL,
                           .code = GRIT_STATUS_UNAVAILABLE,
                           .message = "shutting down"});
  ASSERT_EQ(t.out.n, 1);
  config(NULL, NULL);
  ASSERT_EQ(t.out.n, 0);
}

/* SM-02: one RECORD per attempt, whatever ends it. */
static void test_sm02_one_record_each(void) {
  setup();
  t.hp.hedging_delay_ns = 0;
  t.hp.max_attempts = 3;
  config(NULL, &t.hp);
  int records = 0;
  fail_sent(0, UNAV);
  records += count(GRIT_CALLSM_RECORD);
  ev_slot(GRIT_CALLSM_EV_HEADERS, 1);
  records += count(GRIT_CALLSM_RECORD);
  fail_sent(1, GRIT_STATUS_OK);
  records += count(GRIT_CALLSM_RECORD);
  ASSERT_EQ(records, 3);
  ASSERT_EQ(t.m.counts.attempts, 3);
}

static const test_case cases[] = {
    {"rt01_no_policy", test_rt01_no_policy},
    {"rt01_disabled", test_rt01_disabled},
    {"rt02_max_attempts", test_rt02_max_attempts},
    {"rt03_backoff", test_rt03_backoff},
    {"rt04_pushback", test_rt04_pushback},
    {"rt05_commit_headers", test_rt05_commit_headers},
    {"rt05_commit_message", test_rt05_commit_message},
    {"rt06_trailers_only", test_rt06_trailers_only},
    {"rt07_overflow", test_rt07_overflow},
    {"rt07_overflow_in_backoff", test_rt07_overflow_in_backoff},
    {"rt08_numbers", test_rt08_numbers},
    {"rt09_deadline", test_rt09_deadline},
    {"rt10_recv_timeout", test_rt10_recv_timeout},
    {"rt11_cancel", test_rt11_cancel},
    {"rt12_pick_failed", test_rt12_pick_failed},
    {"pick_dropped", test_pick_dropped},
    {"rt13_repick_resets_sent", test_rt13_repick_resets_sent},
    {"rt14_order", test_rt14_order},
    {"hg01_schedule", test_hg01_schedule},
    {"hg02_headers_win", test_hg02_headers_win},
    {"hg02_trailers_only_ok", test_hg02_trailers_only_ok},
    {"hg03_fatal_and_non_fatal", test_hg03_fatal_and_non_fatal},
    {"hg04_last_status", test_hg04_last_status},
    {"hg05_pushback", test_hg05_pushback},
    {"hg06_throttle", test_hg06_throttle},
    {"hg07_overflow_furthest", test_hg07_overflow_furthest},
    {"hg07_overflow_between_hedges", test_hg07_overflow_between_hedges},
    {"hg09_cancel_all", test_hg09_cancel_all},
    {"hg_slots_full", test_hg_slots_full},
    {"tr01_not_sent", test_tr01_not_sent},
    {"tr02_refused_once", test_tr02_refused_once},
    {"tr03_not_counted", test_tr03_not_counted},
    {"tr04_sent", test_tr04_sent},
    {"th02_success", test_th02_success},
    {"th03_sequence", test_th03_sequence},
    {"th04_fails_at_once", test_th04_fails_at_once},
    {"sm01_stale_events", test_sm01_stale_events},
    {"sm02_one_record_each", test_sm02_one_record_each},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(cases, argc, argv);
}
