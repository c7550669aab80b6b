/* Unit tests for hedging/: the schedule (SPEC HG-01, HG-03..HG-06) on a
 * fake clock. */
#include "hedging/hedging.h"

#include "test/harness.h"

static grit_hedging_policy policy(uint32_t max, int64_t delay_ms) {
  grit_hedging_policy p = {
      .max_attempts = max,
      .hedging_delay_ns = delay_ms * 1000000,
      .non_fatal_codes = GRIT_CODE_BIT(GRIT_STATUS_UNAVAILABLE),
  };
  return p;
}

/* HG-01: attempt 1 at t=0, attempt k at (k-1) x hedgingDelay, up to
 * maxAttempts. */
static void test_delay_spacing(void) {
  grit_hedging_policy p = policy(3, 50);
  grit_hedge_sched h;
  grit_hedge_init(&h, &p, 1000);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 1000), 0);
  grit_hedge_on_sent(&h, 1000);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 1000), 50);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 1030), 20);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 1060), 0);
  ASSERT_EQ(h.wait_ms, 50);
  grit_hedge_on_sent(&h, 1050);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 1050), 50);
  grit_hedge_on_sent(&h, 1100);
  ASSERT(!grit_hedge_more(&h));
  ASSERT_EQ(grit_hedge_wait_ms(&h, 5000), GRIT_HEDGE_NONE);
  ASSERT_EQ(grit_hedge_final_reason(&h), GRIT_REASON_EXHAUSTED);
}

/* SC-11: no hedgingDelay means every attempt is due at once. */
static void test_delay_zero(void) {
  grit_hedging_policy p = policy(4, 0);
  grit_hedge_sched h;
  grit_hedge_init(&h, &p, 7);
  int sent = 0;
  while (grit_hedge_wait_ms(&h, 7) == 0) {
    grit_hedge_on_sent(&h, 7);
    sent++;
  }
  ASSERT_EQ(sent, 4);
}

/* HG-02, HG-03: OK wins, a listed code is non-fatal, others are fatal. */
static void test_classify(void) {
  grit_hedging_policy p = policy(3, 10);
  grit_hedge_sched h;
  grit_hedge_init(&h, &p, 0);
  ASSERT_EQ(grit_hedge_classify(&h, GRIT_STATUS_OK), GRIT_HEDGE_WIN);
  ASSERT_EQ(grit_hedge_classify(&h, GRIT_STATUS_UNAVAILABLE),
            GRIT_HEDGE_NON_FATAL);
  ASSERT_EQ(grit_hedge_classify(&h, GRIT_STATUS_INTERNAL), GRIT_HEDGE_FATAL);
  p.non_fatal_codes = 0;
  grit_hedge_init(&h, &p, 0);
  ASSERT_EQ(grit_hedge_classify(&h, GRIT_STATUS_UNAVAILABLE), GRIT_HEDGE_FATAL);
}

/* HG-03: a non-fatal status makes the next hedge due at once; the one
 * after it is hedgingDelay later again. */
static void test_non_fatal_at_once(void) {
  grit_hedging_policy p = policy(3, 1000);
  grit_hedge_sched h;
  grit_hedge_init(&h, &p, 0);
  grit_hedge_on_sent(&h, 0);
  grit_hedge_on_non_fatal(&h, NULL, true, 20);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 20), 0);
  ASSERT_EQ(h.wait_ms, 0);
  grit_hedge_on_sent(&h, 20);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 20), 1000);
}

/* HG-05: pushback n delays the next hedge by exactly n; negative stops. */
static void test_pushback(void) {
  grit_hedging_policy p = policy(3, 1000);
  grit_hedge_sched h;
  grit_hedge_init(&h, &p, 0);
  grit_hedge_on_sent(&h, 0);
  grit_pushback pb = {.kind = GRIT_PUSHBACK_DELAY, .ms = 150};
  grit_hedge_on_non_fatal(&h, &pb, true, 10);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 10), 150);
  ASSERT(h.wait_pushback);
  ASSERT_EQ(h.wait_ms, 150);
  grit_hedge_on_sent(&h, 160);
  ASSERT(!h.wait_pushback);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 160), 1000);
  pb.kind = GRIT_PUSHBACK_STOP;
  grit_hedge_on_non_fatal(&h, &pb, true, 200);
  ASSERT(!grit_hedge_more(&h));
  ASSERT_EQ(grit_hedge_wait_ms(&h, 200), GRIT_HEDGE_NONE);
  ASSERT_EQ(grit_hedge_final_reason(&h), GRIT_REASON_PUSHBACK);
  grit_hedge_on_non_fatal(&h, NULL, false, 300); /* the first reason stays */
  ASSERT_EQ(grit_hedge_final_reason(&h), GRIT_REASON_PUSHBACK);
}

/* HG-06: no tokens left after the failure: no further hedge. */
static void test_throttled(void) {
  grit_hedging_policy p = policy(5, 10);
  grit_hedge_sched h;
  grit_hedge_init(&h, &p, 0);
  grit_hedge_on_sent(&h, 0);
  grit_hedge_on_non_fatal(&h, NULL, false, 1);
  ASSERT(!grit_hedge_more(&h));
  ASSERT_EQ(grit_hedge_final_reason(&h), GRIT_REASON_THROTTLED);
  grit_hedge_init(&h, &p, 0);
  grit_hedge_stop(&h, GRIT_REASON_THROTTLED);
  ASSERT_EQ(grit_hedge_wait_ms(&h, 0), GRIT_HEDGE_NONE);
}

/* SC-06's longest hedgingDelay: the schedule saturates, no wrap. */
static void test_delay_max(void) {
  grit_hedging_policy p = policy(2, 0);
  p.hedging_delay_ns = INT64_MAX;
  grit_hedge_sched h;
  grit_hedge_init(&h, &p, 1000);
  grit_hedge_on_sent(&h, 1000);
  ASSERT(grit_hedge_wait_ms(&h, 1000) > 9000000000000ull);
  p.max_attempts = 3;
  grit_hedge_init(&h, &p, UINT64_MAX - 10);
  grit_hedge_on_sent(&h, UINT64_MAX - 10);
  ASSERT_EQ(grit_hedge_wait_ms(&h, UINT64_MAX - 10), 10);
}

static const test_case tests[] = {
    {"delay_max", test_delay_max},
    {"delay_spacing", test_delay_spacing},
    {"delay_zero", test_delay_zero},
    {"classify", test_classify},
    {"non_fatal_at_once", test_non_fatal_at_once},
    {"pushback", test_pushback},
    {"throttled", test_throttled},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
