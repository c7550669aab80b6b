/* Unit tests for throttle/ (SPEC TH-01..TH-03). */
#include "throttle/throttle.h"

#include "test/harness.h"

/* TH-03's worked example, step by step: maxTokens 10, tokenRatio 0.1. */
static void test_th03_worked_example(void) {
  grit_throttle t;
  grit_throttle_init(&t, 10000, 100);
  ASSERT_EQ(t.tokens_milli, 10000);
  ASSERT(grit_throttle_allows(&t));
  static const uint32_t after[4] = {9000, 8000, 7000, 6000};
  for (int i = 0; i < 4; i++) {
    grit_throttle_on_failure(&t);
    ASSERT_EQ(t.tokens_milli, after[i]);
    ASSERT(grit_throttle_allows(&t)); /* failures 1-4 allow a retry */
  }
  grit_throttle_on_failure(&t); /* failure 5: 5.0, throttled */
  ASSERT_EQ(t.tokens_milli, 5000);
  ASSERT(!grit_throttle_allows(&t));
  for (int i = 1; i <= 11; i++) {
    grit_throttle_on_success(&t);
    ASSERT_EQ(t.tokens_milli, 5000 + 100 * i);
  }
  ASSERT_EQ(t.tokens_milli, 6100);
  grit_throttle_on_failure(&t); /* 5.1 > 5: may retry */
  ASSERT_EQ(t.tokens_milli, 5100);
  ASSERT(grit_throttle_allows(&t));
}

/* Ten successes are one too few: the next failure leaves exactly 5.0. */
static void test_th03_ten_successes_not_enough(void) {
  grit_throttle t;
  grit_throttle_init(&t, 10000, 100);
  for (int i = 0; i < 5; i++)
    grit_throttle_on_failure(&t);
  for (int i = 0; i < 10; i++)
    grit_throttle_on_success(&t);
  grit_throttle_on_failure(&t);
  ASSERT_EQ(t.tokens_milli, 5000);
  ASSERT(!grit_throttle_allows(&t));
}

static void test_clamp_at_zero_and_max(void) {
  grit_throttle t;
  grit_throttle_init(&t, 2500, 700);
  for (int i = 0; i < 5; i++)
    grit_throttle_on_failure(&t);
  ASSERT_EQ(t.tokens_milli, 0);
  ASSERT(!grit_throttle_allows(&t));
  for (int i = 0; i < 10; i++)
    grit_throttle_on_success(&t);
  ASSERT_EQ(t.tokens_milli, 2500);
  /* 1500 partial: 2500 -> 1500 -> 500 -> 0 (not negative). */
  grit_throttle_on_failure(&t);
  grit_throttle_on_failure(&t);
  ASSERT_EQ(t.tokens_milli, 500);
  grit_throttle_on_failure(&t);
  ASSERT_EQ(t.tokens_milli, 0);
}

static void test_strict_half_odd_max(void) {
  /* max 1.001 tokens: half is 0.5005; 0.501 allows, 0.500 does not. */
  grit_throttle t;
  grit_throttle_init(&t, 1001, 1);
  t.tokens_milli = 501;
  ASSERT(grit_throttle_allows(&t));
  t.tokens_milli = 500;
  ASSERT(!grit_throttle_allows(&t));
  grit_throttle_init(&t, 1000, 1);
  t.tokens_milli = 500;
  ASSERT(!grit_throttle_allows(&t));
  t.tokens_milli = 501;
  ASSERT(grit_throttle_allows(&t));
}

static void test_no_overflow_at_extremes(void) {
  grit_throttle t;
  grit_throttle_init(&t, UINT32_MAX, UINT32_MAX);
  grit_throttle_on_success(&t);
  ASSERT_EQ(t.tokens_milli, UINT32_MAX);
  ASSERT(grit_throttle_allows(&t));
  grit_throttle_on_failure(&t);
  ASSERT_EQ(t.tokens_milli, UINT32_MAX - 1000);
  grit_throttle_reconfigure(&t, UINT32_MAX - 1, 1);
  ASSERT_EQ(t.tokens_milli, (uint32_t)((uint64_t)(UINT32_MAX - 1000) *
                                       (UINT32_MAX - 1) / UINT32_MAX));
}

static void test_zero_max_never_allows(void) {
  grit_throttle t;
  grit_throttle_init(&t, 0, 100);
  ASSERT(!grit_throttle_allows(&t));
  grit_throttle_on_success(&t);
  ASSERT_EQ(t.tokens_milli, 0);
}

/* TH-01: a config change scales the count by new_max / old_max. */
static void test_reconfigure_scales(void) {
  grit_throttle t;
  grit_throttle_init(&t, 10000, 100);
  for (int i = 0; i < 3; i++)
    grit_throttle_on_failure(&t); /* 7000 of 10000 */
  grit_throttle_reconfigure(&t, 20000, 500);
  ASSERT_EQ(t.max_tokens_milli, 20000);
  ASSERT_EQ(t.token_ratio_milli, 500);
  ASSERT_EQ(t.tokens_milli, 14000);
  grit_throttle_reconfigure(&t, 3000, 500); /* 14000 * 3000 / 20000 */
  ASSERT_EQ(t.tokens_milli, 2100);
  grit_throttle_reconfigure(&t, 7000, 1); /* 2100 * 7000 / 3000 = 4900 */
  ASSERT_EQ(t.tokens_milli, 4900);
  grit_throttle_on_success(&t);
  ASSERT_EQ(t.tokens_milli, 4901);
  /* Truncation: 1 * 1000 / 3 */
  grit_throttle_init(&t, 3000, 1);
  t.tokens_milli = 1;
  grit_throttle_reconfigure(&t, 1000, 1);
  ASSERT_EQ(t.tokens_milli, 0);
}

static void test_reconfigure_full_stays_full(void) {
  grit_throttle t;
  grit_throttle_init(&t, 10000, 100);
  grit_throttle_reconfigure(&t, 1000000, 100);
  ASSERT_EQ(t.tokens_milli, 1000000);
  grit_throttle_reconfigure(&t, 1000, 100);
  ASSERT_EQ(t.tokens_milli, 1000);
  grit_throttle_init(&t, 0, 100);
  grit_throttle_reconfigure(&t, 5000, 100); /* from an empty bucket: full */
  ASSERT_EQ(t.tokens_milli, 5000);
}

static const test_case tests[] = {
    {"th03_worked_example", test_th03_worked_example},
    {"th03_ten_successes_not_enough", test_th03_ten_successes_not_enough},
    {"clamp_at_zero_and_max", test_clamp_at_zero_and_max},
    {"strict_half_odd_max", test_strict_half_odd_max},
    {"no_overflow_at_extremes", test_no_overflow_at_extremes},
    {"zero_max_never_allows", test_zero_max_never_allows},
    {"reconfigure_scales", test_reconfigure_scales},
    {"reconfigure_full_stays_full", test_reconfigure_full_stays_full},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
