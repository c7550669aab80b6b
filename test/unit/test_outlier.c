/* lb/od_algo: gRFC A50's ejection algorithm (SPEC OD-01) with a fake clock
 * and a seeded rng: who is ejected, the maxEjectionPercent cap, ejection
 * time growth and its cap, multiplier decay, un-ejection, enforcement
 * draws reproducible from the seed. */
#include "lb/od_algo.h"

#include "test/harness.h"

/* A50's defaults with failure percentage as the done-when sets it:
 * threshold 50, minimumHosts 2, requestVolume 10, interval 1 s. */
static grit_od_params fp_params(void) {
  return (grit_od_params){
      .interval_ms = 1000,
      .base_ejection_time_ms = 30000,
      .max_ejection_time_ms = 300000,
      .max_ejection_percent = 10,
      .failure_percentage = true,
      .fp_threshold = 50,
      .fp_enforcement_percentage = 100,
      .fp_minimum_hosts = 2,
      .fp_request_volume = 10,
  };
}

static void feed(grit_od_addr *a, unsigned ok, unsigned bad) {
  for (unsigned i = 0; i < ok; i++)
    grit_od_record(a, true);
  for (unsigned i = 0; i < bad; i++)
    grit_od_record(a, false);
}

static void test_failure_percentage_ejects_bad(void) {
  grit_od_params p = fp_params();
  grit_rng rng;
  grit_rng_seed(&rng, 1);
  grit_od_addr a[3] = {{0}};
  feed(&a[0], 20, 0);
  feed(&a[1], 0, 20); /* fails every call */
  feed(&a[2], 19, 1);
  ASSERT_EQ(grit_od_run(&p, a, 3, 1000, &rng), 1);
  ASSERT_EQ(a[0].ejected, false);
  ASSERT_EQ(a[1].ejected, true);
  ASSERT_EQ(a[1].changed, true);
  ASSERT_EQ(a[1].multiplier, 1);
  ASSERT_EQ(a[1].ejected_at_ms, 1000);
  ASSERT_EQ(a[2].ejected, false);
  ASSERT_EQ(a[2].changed, false);
  /* The buckets were swapped: this interval starts from zero. */
  ASSERT_EQ(a[0].successes, 0);
  ASSERT_EQ(a[0].last_successes, 20);
}

static void test_threshold_is_strict(void) {
  grit_od_params p = fp_params();
  grit_rng rng;
  grit_rng_seed(&rng, 1);
  grit_od_addr a[2] = {{0}};
  feed(&a[0], 10, 10); /* exactly 50 %: not above the threshold */
  feed(&a[1], 20, 0);
  ASSERT_EQ(grit_od_run(&p, a, 2, 1000, &rng), 0);
  feed(&a[0], 9, 11); /* 55 % */
  feed(&a[1], 20, 0);
  ASSERT_EQ(grit_od_run(&p, a, 2, 2000, &rng), 1);
  ASSERT_EQ(a[0].ejected, true);
}

static void test_request_volume_and_minimum_hosts(void) {
  grit_od_params p = fp_params();
  grit_rng rng;
  grit_rng_seed(&rng, 1);
  grit_od_addr a[3] = {{0}};
  /* Only one address has 10 requests: fewer candidates than minimumHosts. */
  feed(&a[0], 0, 10);
  feed(&a[1], 9, 0);
  feed(&a[2], 0, 9);
  ASSERT_EQ(grit_od_run(&p, a, 3, 1000, &rng), 0);
  /* Two candidates; the one below requestVolume is never ejected. */
  feed(&a[0], 0, 10);
  feed(&a[1], 10, 0);
  feed(&a[2], 0, 9);
  ASSERT_EQ(grit_od_run(&p, a, 3, 2000, &rng), 1);
  ASSERT_EQ(a[0].ejected, true);
  ASSERT_EQ(a[2].ejected, false);
}

/* SPEC OD-01: never a new ejection while the ejected share is at or above
 * maxEjectionPercent. */
static void test_max_ejection_percent(void) {
  grit_od_params p = fp_params();
  p.max_ejection_percent = 50;
  grit_rng rng;
  grit_rng_seed(&rng, 1);
  grit_od_addr a[4] = {{0}};
  for (int i = 0; i < 4; i++)
    feed(&a[i], 0, 20); /* all bad */
  /* 0/4 < 50 %: eject; 1/4 < 50 %: eject; 2/4 >= 50 %: stop. */
  ASSERT_EQ(grit_od_run(&p, a, 4, 1000, &rng), 2);
  size_t ejected = 0;
  for (int i = 0; i < 4; i++)
    ejected += a[i].ejected;
  ASSERT_EQ(ejected, 2);
  /* Next interval the other two still fail: the cap holds. */
  for (int i = 0; i < 4; i++)
    feed(&a[i], 0, 20);
  ASSERT_EQ(grit_od_run(&p, a, 4, 2000, &rng), 0);
  /* With 0 %, nothing is ever ejected. */
  p.max_ejection_percent = 0;
  grit_od_addr b[2] = {{0}};
  feed(&b[0], 0, 20);
  feed(&b[1], 20, 0);
  ASSERT_EQ(grit_od_run(&p, b, 2, 1000, &rng), 0);
  /* A50's rule with the default 10 % and 3 backends: one may go (0 < 10),
   * the second may not (33 % >= 10 %). */
  p.max_ejection_percent = 10;
  grit_od_addr c[3] = {{0}};
  feed(&c[0], 0, 20);
  feed(&c[1], 0, 20);
  feed(&c[2], 20, 0);
  ASSERT_EQ(grit_od_run(&p, c, 3, 1000, &rng), 1);
  ASSERT_EQ(c[0].ejected, true);
  ASSERT_EQ(c[1].ejected, false);
}

/* Ejection time: base x multiplier, capped at max(base, max); the
 * multiplier decays by one per interval spent not ejected. */
static void test_ejection_time_grows_and_decays(void) {
  grit_od_params p = fp_params();
  p.base_ejection_time_ms = 3000;
  p.max_ejection_time_ms = 7000;
  ASSERT_EQ(grit_od_ejection_ms(&p, 1), 3000);
  ASSERT_EQ(grit_od_ejection_ms(&p, 2), 6000);
  ASSERT_EQ(grit_od_ejection_ms(&p, 3), 7000);
  ASSERT_EQ(grit_od_ejection_ms(&p, UINT32_MAX), 7000);
  p.max_ejection_time_ms = 1000; /* below base: base is the cap */
  ASSERT_EQ(grit_od_ejection_ms(&p, 5), 3000);
  p.max_ejection_time_ms = 7000;

  grit_rng rng;
  grit_rng_seed(&rng, 1);
  grit_od_addr a[2] = {{0}};
  uint64_t now = 1000;
  feed(&a[0], 0, 20);
  feed(&a[1], 20, 0);
  ASSERT_EQ(grit_od_run(&p, a, 2, now, &rng), 1);
  ASSERT_EQ(a[0].multiplier, 1);
  /* Still out at +2 s (no calls reach it), back at +3 s. */
  now += 2000;
  feed(&a[1], 20, 0);
  grit_od_run(&p, a, 2, now, &rng);
  ASSERT_EQ(a[0].ejected, true);
  now += 1000;
  feed(&a[1], 20, 0);
  grit_od_run(&p, a, 2, now, &rng);
  ASSERT_EQ(a[0].ejected, false);
  ASSERT_EQ(a[0].changed, true);
  ASSERT_EQ(a[0].multiplier, 1); /* un-ejected this run: no decay yet */
  /* Fails again at once: second ejection, 6 s. */
  now += 1000;
  feed(&a[0], 0, 20);
  feed(&a[1], 20, 0);
  ASSERT_EQ(grit_od_run(&p, a, 2, now, &rng), 1);
  ASSERT_EQ(a[0].multiplier, 2);
  uint64_t out_at = now;
  while (a[0].ejected) {
    now += 1000;
    feed(&a[1], 20, 0);
    grit_od_run(&p, a, 2, now, &rng);
  }
  ASSERT_EQ(now - out_at, 6000);
  /* Healthy from now on: the multiplier decays one per interval. */
  for (uint32_t want = 1; want <= 2; want++) {
    now += 1000;
    feed(&a[0], 20, 0);
    feed(&a[1], 20, 0);
    grit_od_run(&p, a, 2, now, &rng);
    ASSERT_EQ(a[0].multiplier, 2 - want);
  }
}

/* enforcementPercentage draws come from the rng: the same seed gives the
 * same ejections, and 0 % never ejects. */
static void test_enforcement_reproducible(void) {
  grit_od_params p = fp_params();
  p.max_ejection_percent = 100;
  p.fp_enforcement_percentage = 50;
  p.fp_minimum_hosts = 1;
  unsigned pattern[2][64];
  for (int run = 0; run < 2; run++) {
    grit_rng rng;
    grit_rng_seed(&rng, 1234);
    for (int k = 0; k < 64; k++) {
      grit_od_addr a[1] = {{0}};
      feed(&a[0], 0, 20);
      pattern[run][k] = (unsigned)grit_od_run(&p, a, 1, 1000, &rng);
    }
  }
  unsigned ones = 0;
  for (int k = 0; k < 64; k++) {
    ASSERT_EQ(pattern[0][k], pattern[1][k]);
    ones += pattern[0][k];
  }
  ASSERT_CMP(ones, >, 0);
  ASSERT_CMP(ones, <, 64);
  p.fp_enforcement_percentage = 0;
  grit_rng rng;
  grit_rng_seed(&rng, 1234);
  for (int k = 0; k < 64; k++) {
    grit_od_addr a[1] = {{0}};
    feed(&a[0], 0, 20);
    ASSERT_EQ(grit_od_run(&p, a, 1, 1000, &rng), 0);
  }
}

/* Success rate: mean - stdevFactor/1000 x stdev over the candidates. */
static void test_success_rate(void) {
  grit_od_params p = {
      .interval_ms = 1000,
      .base_ejection_time_ms = 30000,
      .max_ejection_time_ms = 300000,
      .max_ejection_percent = 100,
      .success_rate = true,
      .sr_stdev_factor = 1000,
      .sr_enforcement_percentage = 100,
      .sr_minimum_hosts = 5,
      .sr_request_volume = 100,
  };
  grit_rng rng;
  grit_rng_seed(&rng, 7);
  grit_od_addr a[6] = {{0}};
  /* Rates 1, 1, 1, 1, 1, 0.5: mean 0.9167, stdev 0.186, limit 0.73. */
  for (int i = 0; i < 5; i++)
    feed(&a[i], 100, 0);
  feed(&a[5], 50, 50);
  ASSERT_EQ(grit_od_run(&p, a, 6, 1000, &rng), 1);
  ASSERT_EQ(a[5].ejected, true);
  /* Only 4 candidates with >= 100 requests: fewer than minimumHosts. */
  grit_od_addr b[6] = {{0}};
  for (int i = 0; i < 4; i++)
    feed(&b[i], 100, 0);
  feed(&b[4], 99, 0);
  feed(&b[5], 49, 50);
  ASSERT_EQ(grit_od_run(&p, b, 6, 1000, &rng), 0);
  /* All equal: stdev 0, nobody below the mean. */
  grit_od_addr c[5] = {{0}};
  for (int i = 0; i < 5; i++)
    feed(&c[i], 60, 40);
  ASSERT_EQ(grit_od_run(&p, c, 5, 1000, &rng), 0);
}

static void test_no_rule_no_ejection(void) {
  grit_od_params p = fp_params();
  p.failure_percentage = false;
  grit_rng rng;
  grit_rng_seed(&rng, 1);
  grit_od_addr a[2] = {{0}};
  feed(&a[0], 0, 100);
  feed(&a[1], 100, 0);
  ASSERT_EQ(grit_od_run(&p, a, 2, 1000, &rng), 0);
  ASSERT_EQ(grit_od_run(&p, NULL, 0, 1000, &rng), 0);
}

int main(int argc, char **argv) {
  static const test_case tests[] = {
      {"failure_percentage_ejects_bad", test_failure_percentage_ejects_bad},
      {"threshold_is_strict", test_threshold_is_strict},
      {"request_volume_and_minimum_hosts",
       test_request_volume_and_minimum_hosts},
      {"max_ejection_percent", test_max_ejection_percent},
      {"ejection_time_grows_and_decays", test_ejection_time_grows_and_decays},
      {"enforcement_reproducible", test_enforcement_reproducible},
      {"success_rate", test_success_rate},
      {"no_rule_no_ejection", test_no_rule_no_ejection},
      {NULL, NULL},
  };
  return test_main(tests, argc, argv);
}
