/* Unit tests for retry/: backoff (RT-03), pushback (RT-04), the decision
 * order (RT-14, TH-02..04) and the replay buffer (RT-07). */
#include "retry/retry.h"

#include "test/harness.h"

static grit_retry_policy policy(void) {
  grit_retry_policy p = {
      .max_attempts = 4,
      .initial_backoff_ns = 100 * 1000000ll,
      .max_backoff_ns = 1000 * 1000000ll,
      .backoff_multiplier = 2.0,
      .retryable_codes = GRIT_CODE_BIT(GRIT_STATUS_UNAVAILABLE) |
                         GRIT_CODE_BIT(GRIT_STATUS_DEADLINE_EXCEEDED),
  };
  return p;
}

/* RT-03: min(initial * mult^(n-1), max) * U(0.8, 1.2). */
static void test_backoff_bounds(void) {
  grit_retry_policy p = policy();
  grit_rng rng;
  grit_rng_seed(&rng, 7);
  static const uint64_t base_ms[] = {100, 200, 400, 800, 1000, 1000};
  for (int round = 0; round < 200; round++) {
    for (uint32_t n = 1; n <= 6; n++) {
      uint64_t ms = grit_backoff_next_ms(&p, n, &rng);
      ASSERT_CMP(ms, >=, base_ms[n - 1] * 8 / 10);
      ASSERT_CMP(ms, <=, base_ms[n - 1] * 12 / 10 + 1);
    }
  }
}

/* RT-03: the same seed replays the same sequence. */
static void test_backoff_replay(void) {
  grit_retry_policy p = policy();
  grit_rng a, b;
  grit_rng_seed(&a, 1234);
  grit_rng_seed(&b, 1234);
  for (uint32_t n = 1; n < 50; n++)
    ASSERT_EQ(grit_backoff_next_ms(&p, n, &a), grit_backoff_next_ms(&p, n, &b));
}

static grit_pushback pushback_of(const char *const *values, size_t n) {
  grit_metadata *md;
  grit_metadata_create(&md);
  grit_metadata_add_unchecked(md, "other", 5, "1", 1);
  for (size_t i = 0; i < n; i++)
    grit_metadata_add_unchecked(md, "grpc-retry-pushback-ms", 22, values[i],
                                strlen(values[i]));
  grit_pushback pb = grit_retry_parse_pushback(md);
  grit_metadata_destroy(md);
  return pb;
}

/* RT-04: 0, positive, negative, garbage, repeated, absent. */
static void test_pushback_parse(void) {
  const char *zero[] = {"0"}, *pos[] = {"250"}, *neg[] = {"-1"},
             *junk[] = {"12ms"}, *empty[] = {""}, *two[] = {"5", "5"};
  ASSERT_EQ(pushback_of(NULL, 0).kind, GRIT_PUSHBACK_NONE);
  grit_pushback pb = pushback_of(zero, 1);
  ASSERT_EQ(pb.kind, GRIT_PUSHBACK_DELAY);
  ASSERT_EQ(pb.ms, 0);
  pb = pushback_of(pos, 1);
  ASSERT_EQ(pb.kind, GRIT_PUSHBACK_DELAY);
  ASSERT_EQ(pb.ms, 250);
  ASSERT_EQ(pushback_of(neg, 1).kind, GRIT_PUSHBACK_STOP);
  ASSERT_EQ(pushback_of(junk, 1).kind, GRIT_PUSHBACK_STOP);
  ASSERT_EQ(pushback_of(empty, 1).kind, GRIT_PUSHBACK_STOP);
  ASSERT_EQ(pushback_of(two, 2).kind, GRIT_PUSHBACK_STOP);
}

/* RT-14 steps 1-3: no policy, OK, non-retryable (throttle untouched). */
static void test_decide_early_outs(void) {
  grit_retry_policy p = policy();
  grit_retry_state st = {.attempts = 1};
  grit_throttle thr;
  grit_throttle_init(&thr, 10000, 100);
  grit_rng rng;
  grit_rng_seed(&rng, 1);
  grit_retry_decision d = grit_retry_decide(NULL, &st, GRIT_STATUS_UNAVAILABLE,
                                            NULL, &thr, 0, 0, &rng);
  ASSERT(!d.retry);
  ASSERT_EQ(d.reason, GRIT_REASON_NO_POLICY);
  d = grit_retry_decide(&p, &st, GRIT_STATUS_OK, NULL, &thr, 0, 0, &rng);
  ASSERT_EQ(d.reason, GRIT_REASON_OK);
  d = grit_retry_decide(&p, &st, GRIT_STATUS_INTERNAL, NULL, &thr, 0, 0, &rng);
  ASSERT_EQ(d.reason, GRIT_REASON_NON_RETRYABLE);
  ASSERT_EQ(thr.tokens_milli, 10000); /* untouched */
}

/* RT-14 step 4 before 5-7: the failure is recorded even when committed or
 * exhausted, and throttling wins over them. */
static void test_decide_throttle_first(void) {
  grit_retry_policy p = policy();
  grit_throttle thr;
  grit_throttle_init(&thr, 10000, 100);
  grit_rng rng;
  grit_rng_seed(&rng, 1);
  grit_retry_state st = {.attempts = 4, .committed = true};
  grit_retry_decision d = grit_retry_decide(&p, &st, GRIT_STATUS_UNAVAILABLE,
                                            NULL, &thr, 0, 0, &rng);
  ASSERT_EQ(d.reason, GRIT_REASON_COMMITTED);
  ASSERT_EQ(thr.tokens_milli, 9000);
  st.committed = false;
  d = grit_retry_decide(&p, &st, GRIT_STATUS_UNAVAILABLE, NULL, &thr, 0, 0,
                        &rng);
  ASSERT_EQ(d.reason, GRIT_REASON_EXHAUSTED);
  ASSERT_EQ(thr.tokens_milli, 8000);
  st.attempts = 1;
  grit_throttle_init(&thr, 10000, 100);
  for (int i = 0; i < 4; i++) { /* TH-03: failures 1-4 allow */
    d = grit_retry_decide(&p, &st, GRIT_STATUS_UNAVAILABLE, NULL, &thr, 0, 0,
                          &rng);
    ASSERT(d.retry);
  }
  d = grit_retry_decide(&p, &st, GRIT_STATUS_UNAVAILABLE, NULL, &thr, 0, 0,
                        &rng);
  ASSERT_EQ(d.reason, GRIT_REASON_THROTTLED); /* 5.0 is not > 5 */
}

/* RT-04: pushback stop; a delay is exact and restarts the backoff; it never
 * beats maxAttempts or the deadline (RT-09). */
static void test_decide_pushback(void) {
  grit_retry_policy p = policy();
  grit_rng rng;
  grit_rng_seed(&rng, 1);
  grit_retry_state st = {.attempts = 1, .backoff_n = 3};
  grit_pushback stop = {.kind = GRIT_PUSHBACK_STOP};
  grit_retry_decision d = grit_retry_decide(&p, &st, GRIT_STATUS_UNAVAILABLE,
                                            &stop, NULL, 0, 0, &rng);
  ASSERT_EQ(d.reason, GRIT_REASON_PUSHBACK);
  grit_pushback delay = {.kind = GRIT_PUSHBACK_DELAY, .ms = 1234};
  d = grit_retry_decide(&p, &st, GRIT_STATUS_UNAVAILABLE, &delay, NULL, 0, 0,
                        &rng);
  ASSERT(d.retry);
  ASSERT(d.pushback_used);
  ASSERT_EQ(d.delay_ms, 1234);
  ASSERT_EQ(st.backoff_n, 0);
  d = grit_retry_decide(&p, &st, GRIT_STATUS_UNAVAILABLE, NULL, NULL, 0, 0,
                        &rng);
  ASSERT(d.retry);
  ASSERT_CMP(d.delay_ms, <=, 121); /* back to initialBackoff */
  st.attempts = 4;
  d = grit_retry_decide(&p, &st, GRIT_STATUS_UNAVAILABLE, &delay, NULL, 0, 0,
                        &rng);
  ASSERT_EQ(d.reason, GRIT_REASON_EXHAUSTED);
  st.attempts = 1;
  d = grit_retry_decide(&p, &st, GRIT_STATUS_UNAVAILABLE, &delay, NULL, 1000,
                        2000, &rng);
  ASSERT_EQ(d.reason, GRIT_REASON_DEADLINE);
  d = grit_retry_decide(&p, &st, GRIT_STATUS_DEADLINE_EXCEEDED, NULL, NULL,
                        1000, 60000, &rng);
  ASSERT(d.retry); /* RT-09: a server DEADLINE_EXCEEDED is retryable */
}

/* RT-07: per-call and per-channel limits, references not copies. */
static void test_replay_limits(void) {
  size_t channel = 0;
  grit_replay_buf a, b;
  grit_replay_init(&a, 100, &channel, 150);
  grit_replay_init(&b, 100, &channel, 150);
  grit_slice *s = grit_slice_new(60);
  ASSERT(grit_replay_fits(&a, 60));
  ASSERT_OK(grit_replay_add(&a, s));
  ASSERT_EQ(s->refs, 2);
  ASSERT(!grit_replay_fits(&a, 60)); /* 120 > 100 per call */
  ASSERT(grit_replay_fits(&b, 60));
  ASSERT_OK(grit_replay_add(&b, s));
  ASSERT_EQ(channel, 120);
  ASSERT(!grit_replay_fits(&b, 31)); /* 151 > 150 per channel */
  grit_replay_free(&a);
  ASSERT_EQ(channel, 60);
  grit_replay_free(&b);
  ASSERT_EQ(channel, 0);
  ASSERT_EQ(s->refs, 1);
  grit_slice_unref(s);
}

/* A counting allocator that can refuse: the replay buffer's first item
 * costs no allocation (issue 24), a later one does, and a refused one
 * loses nothing (RT-07: the items stay, in order). */
static int replay_allocs;
static bool replay_refuse;
static void *replay_malloc(size_t n, void *ud) {
  (void)ud;
  if (replay_refuse)
    return NULL;
  replay_allocs++;
  return malloc(n);
}
static void replay_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *replay_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  if (replay_refuse)
    return NULL;
  replay_allocs++;
  return calloc(n, m);
}
static void *replay_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  if (replay_refuse)
    return NULL;
  replay_allocs++;
  return realloc(p, n);
}
static const grit_allocator replay_alloc = {NULL, replay_malloc, replay_free,
                                            replay_calloc, replay_realloc};

static void test_replay_first_inline(void) {
  grit_set_allocator(&replay_alloc); /* before any grit object exists */
  grit_slice *s[3];
  for (int i = 0; i < 3; i++) {
    s[i] = grit_slice_new(10 + i);
    ASSERT(s[i] != NULL);
  }
  grit_replay_buf rb;
  grit_replay_init(&rb, 1000, NULL, 0);
  for (int round = 0; round < 2; round++) { /* the first slot is reused */
    replay_allocs = 0;
    ASSERT_OK(grit_replay_add(&rb, s[0]));
    ASSERT_EQ(replay_allocs, 0); /* a unary call's message: no malloc */
    replay_refuse = true;
    ASSERT_EQ(grit_replay_add(&rb, s[1]), GRIT_ERR_NOMEM);
    replay_refuse = false;
    ASSERT_EQ(rb.count, 1);
    ASSERT_EQ(rb.bytes, 10);
    ASSERT_OK(grit_replay_add(&rb, s[1]));
    ASSERT_OK(grit_replay_add(&rb, s[2]));
    ASSERT_EQ(replay_allocs, 2);
    size_t i = 0;
    grit_list *e;
    GRIT_LIST_FOREACH(e, &rb.items) {
      grit_replay_item *it = GRIT_CONTAINER_OF(e, grit_replay_item, link);
      ASSERT(i < 3 && it->slice == s[i]); /* in the order sent */
      i++;
    }
    ASSERT_EQ(i, 3);
    ASSERT_EQ(rb.bytes, 33);
    ASSERT_EQ(s[0]->refs, 2);
    grit_replay_free(&rb);
    ASSERT_EQ(rb.count, 0);
    for (int k = 0; k < 3; k++)
      ASSERT_EQ(s[k]->refs, 1);
  }
  for (int i = 0; i < 3; i++)
    grit_slice_unref(s[i]);
  grit_set_allocator(NULL);
}

static const test_case tests[] = {
    {"backoff_bounds", test_backoff_bounds},
    {"backoff_replay", test_backoff_replay},
    {"pushback_parse", test_pushback_parse},
    {"decide_early_outs", test_decide_early_outs},
    {"decide_throttle_first", test_decide_throttle_first},
    {"decide_pushback", test_decide_pushback},
    {"replay_limits", test_replay_limits},
    {"replay_first_inline", test_replay_first_inline},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
