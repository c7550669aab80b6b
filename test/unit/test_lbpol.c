/* The load-aware policies' pure parts and configs (issue 26; SPEC
 * LP-01..LP-04): XXH64 against the reference library's values, the ring
 * against grpc-core's construction, the stride scheduler, the ORCA
 * decoder and request encoder against python3-protobuf's bytes, config
 * validation with JSON paths, and out-of-memory sweeps over the new
 * constructors.
 *
 * Reference values: XXH64 from Debian's libxxhash (XXH64 through ctypes);
 * ring entries from grpc-core's Ring construction
 * (src/core/load_balancing/ring_hash/ring_hash.cc) re-run in Python on
 * libxxhash; ORCA bytes from python3-protobuf 4.21 serializing
 * test/peers/orca/xds/data/orca/v3/orca_load_report.proto (field numbers
 * of cncf/xds), deterministic. */
#include "lb/lb.h"
#include "service_config/service_config.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test/harness.h"

/* ---- XXH64 ---- */

static void test_xxh64_vectors(void) {
  static const uint8_t seq[] = {
      0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
      17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
      34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,
      51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67,
      68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84,
      85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99};
  ASSERT_EQ(grit_xxh64("", 0, 0), 0xef46db3751d8e999ULL);
  ASSERT_EQ(grit_xxh64("a", 1, 0), 0xd24ec4f1a98c6e5bULL);
  ASSERT_EQ(grit_xxh64("abc", 3, 0), 0x44bc2cf5ad770999ULL);
  ASSERT_EQ(grit_xxh64("abc", 3, 1), 0xbea9ca8199328908ULL);
  ASSERT_EQ(grit_xxh64("127.0.0.1:5000_0", 16, 0), 0x9cd063db86dc742eULL);
  const char *s = "Nobody inspects the spammish repetition";
  ASSERT_EQ(grit_xxh64(s, strlen(s), 0), 0xfbcea83c8a378bf1ULL);
  ASSERT_EQ(grit_xxh64(seq, sizeof(seq), 0), 0x6ac1e58032166597ULL);
}

/* ---- the ring (LP-03) ---- */

static const char *const three[] = {"127.0.0.1:5000", "127.0.0.1:5001",
                                    "127.0.0.1:5002"};

static void test_ring_matches_grpc(void) {
  grit_ring_entry *r;
  size_t n;
  ASSERT_OK(grit_ring_build(three, NULL, 3, 1024, 4096, &r, &n));
  /* scale = ceil(1/3 x 1024) / (1/3) = 1026 entries. */
  ASSERT_EQ(n, 1026);
  ASSERT_EQ(r[0].hash, 0xfa20ad3dfaa2dULL);
  ASSERT_EQ(r[0].index, 2);
  ASSERT_EQ(r[1].hash, 0x5a85c9c0ceca4cULL);
  ASSERT_EQ(r[1].index, 0);
  ASSERT_EQ(r[2].hash, 0x6ca0c6bc8cf6a2ULL);
  ASSERT_EQ(r[2].index, 1);
  ASSERT_EQ(r[500].hash, 0x82c0925fd00c8240ULL);
  ASSERT_EQ(r[500].index, 2);
  ASSERT_EQ(r[1025].hash, 0xff7a39939972aad3ULL);
  ASSERT_EQ(r[1025].index, 1);
  for (size_t i = 1; i < n; i++)
    ASSERT(r[i - 1].hash <= r[i].hash);
  /* Request keys as grpc places them: XXH64 of the header value. */
  static const struct {
    const char *key;
    uint64_t hash;
    size_t entry;
    uint32_t backend;
  } keys[] = {
      {"user-1", 0xa173746b114c6be8ULL, 632, 1},
      {"user-2", 0x7395dd9943ab55e9ULL, 452, 2},
      {"session-42", 0x2389e998631f091eULL, 142, 1},
      {"x", 0x5c80c09683041123ULL, 356, 0},
  };
  for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
    uint64_t h = grit_xxh64(keys[k].key, strlen(keys[k].key), 0);
    ASSERT_EQ(h, keys[k].hash);
    size_t e = grit_ring_lookup(r, n, h);
    ASSERT_EQ(e, keys[k].entry);
    ASSERT_EQ(r[e].index, keys[k].backend);
  }
  /* Past the last entry wraps to the first; hash 0 is entry 0. */
  ASSERT_EQ(grit_ring_lookup(r, n, UINT64_MAX), 0);
  ASSERT_EQ(grit_ring_lookup(r, n, 0), 0);
  ASSERT_EQ(grit_ring_lookup(r, n, r[7].hash), 7);
  ASSERT_EQ(grit_ring_lookup(r, n, r[7].hash + 1), 8);
  grit_free(r);
}

static void test_ring_sizes_and_weights(void) {
  grit_ring_entry *r;
  size_t n;
  /* min = max = 10: the ring is capped at 10. */
  ASSERT_OK(grit_ring_build(three, NULL, 3, 10, 10, &r, &n));
  ASSERT_EQ(n, 10);
  grit_free(r);
  /* Weights 1 and 3 (an address listed three times), min 16. */
  static const char *const two[] = {"[::1]:443", "10.0.0.1:80"};
  static const uint32_t w[] = {1, 3};
  ASSERT_OK(grit_ring_build(two, w, 2, 16, 4096, &r, &n));
  ASSERT_EQ(n, 16);
  ASSERT_EQ(r[0].hash, 0x18341d927ea10691ULL);
  ASSERT_EQ(r[0].index, 1);
  ASSERT_EQ(r[1].hash, 0x2280f449e0da3ca6ULL);
  ASSERT_EQ(r[2].hash, 0x4abe204356f68c82ULL);
  size_t of[2] = {0, 0};
  for (size_t i = 0; i < n; i++)
    of[r[i].index]++;
  ASSERT_EQ(of[0], 4);
  ASSERT_EQ(of[1], 12);
  grit_free(r);
  ASSERT_OK(grit_ring_build(two, NULL, 0, 16, 4096, &r, &n));
  ASSERT_EQ(n, 0);
}

/* LP-03 done-when: removing one of three backends moves about a third of
 * the keys, and only the removed backend's. */
static void test_ring_remove_one_of_three(void) {
  grit_ring_entry *r3, *r2;
  size_t n3, n2;
  ASSERT_OK(grit_ring_build(three, NULL, 3, 1024, 4096, &r3, &n3));
  ASSERT_OK(grit_ring_build(three, NULL, 2, 1024, 4096, &r2, &n2));
  unsigned moved = 0, on_removed = 0;
  const unsigned keys = 10000;
  for (unsigned k = 0; k < keys; k++) {
    char key[32];
    int len = snprintf(key, sizeof(key), "key-%u", k);
    uint64_t h = grit_xxh64(key, (size_t)len, 0);
    uint32_t before = r3[grit_ring_lookup(r3, n3, h)].index;
    uint32_t after = r2[grit_ring_lookup(r2, n2, h)].index;
    if (before == 2)
      on_removed++;
    if (before != after)
      moved++;
    else
      ASSERT(before != 2);
  }
  fprintf(stderr, "  %u of %u keys moved (%u were on the removed one)\n", moved,
          keys, on_removed);
  ASSERT_CMP(moved, >=, on_removed); /* the removed one's keys all move */
  ASSERT_CMP(moved, >, keys / 4);
  ASSERT_CMP(moved, <=, keys / 2);
  grit_free(r3);
  grit_free(r2);
}

/* ---- the stride scheduler (LP-02) ---- */

static void shares(const float *w, size_t n, unsigned picks, double *out) {
  grit_stride_sched s;
  ASSERT_OK(grit_stride_sched_build(w, n, &s));
  ASSERT_NOT_NULL(s.weights);
  unsigned count[16] = {0};
  uint32_t seq = 12345;
  for (unsigned i = 0; i < picks; i++)
    count[grit_stride_sched_pick(&s, &seq)]++;
  for (size_t i = 0; i < n; i++)
    out[i] = (double)count[i] / picks;
  grit_stride_sched_free(&s);
}

static void test_stride_proportions(void) {
  /* A58's weights for cpu 0.2 / 0.4 / 0.8 at equal qps: 4:2:1. */
  const float w[] = {100 / 0.2f, 100 / 0.4f, 100 / 0.8f};
  double sh[3];
  shares(w, 3, 70000, sh);
  ASSERT(fabs(sh[0] - 4.0 / 7) < 0.01);
  ASSERT(fabs(sh[1] - 2.0 / 7) < 0.01);
  ASSERT(fabs(sh[2] - 1.0 / 7) < 0.01);
  /* An unknown weight (0) gets the mean of the known ones. */
  const float u[] = {0, 2, 4};
  shares(u, 3, 90000, sh);
  ASSERT(fabs(sh[0] - 3.0 / 9) < 0.01);
  ASSERT(fabs(sh[1] - 2.0 / 9) < 0.01);
  ASSERT(fabs(sh[2] - 4.0 / 9) < 0.01);
}

static void test_stride_fallback_and_caps(void) {
  grit_stride_sched s;
  /* Fewer than two known weights: no scheduler (round robin). */
  const float one[] = {0, 5, 0};
  ASSERT_OK(grit_stride_sched_build(one, 3, &s));
  ASSERT_NULL(s.weights);
  const float single[] = {5};
  ASSERT_OK(grit_stride_sched_build(single, 1, &s));
  ASSERT_NULL(s.weights);
  const float bad[] = {-1, NAN, 3};
  ASSERT_OK(grit_stride_sched_build(bad, 3, &s));
  ASSERT_NULL(s.weights);
  /* The largest is 65535; one far above 10 x mean is capped to it, and a
   * tiny one is raised to mean x 0.01 (never 0, which would never be
   * picked). */
  float w[20];
  for (int i = 0; i < 19; i++)
    w[i] = 1;
  w[19] = 1e6f;
  ASSERT_OK(grit_stride_sched_build(w, 20, &s));
  ASSERT_NOT_NULL(s.weights);
  ASSERT_EQ(s.weights[19], 65535);
  ASSERT_CMP(s.weights[0], >=, 60);
  ASSERT_CMP(s.weights[0], <=, 70);
  /* Every index comes up: 20 x 65535 sequence numbers are one full
   * round of generations. */
  unsigned seen[20] = {0};
  uint32_t seq = 0;
  while (seq < 20u * 65535u)
    seen[grit_stride_sched_pick(&s, &seq)]++;
  for (int i = 0; i < 19; i++)
    ASSERT_EQ(seen[i], s.weights[i]);
  ASSERT_EQ(seen[19], 65535);
  grit_stride_sched_free(&s);
  grit_stride_sched_free(&s); /* idempotent */
}

/* ---- ORCA (LP-01) ---- */

/* OrcaLoadReport{cpu 0.25, mem 0.5, rps 7, request_cost{db: 3.5},
 * utilization{gpu: 0.125}, rps_fractional 123.5, eps 1.5,
 * named_metrics{q2: 1, queue: 42}, application_utilization 0.75}. */
static const uint8_t orca_full[] = {
    0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0x3f, 0x11, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f, 0x18, 0x07, 0x22, 0x0d, 0x0a, 0x02,
    0x64, 0x62, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x40, 0x2a,
    0x0e, 0x0a, 0x03, 0x67, 0x70, 0x75, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xc0, 0x3f, 0x31, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x5e, 0x40,
    0x39, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, 0x42, 0x0d, 0x0a,
    0x02, 0x71, 0x32, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f,
    0x42, 0x10, 0x0a, 0x05, 0x71, 0x75, 0x65, 0x75, 0x65, 0x11, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x45, 0x40, 0x49, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xe8, 0x3f};

static void test_orca_decode(void) {
  grit_orca_report r;
  ASSERT_OK(grit_orca_decode(orca_full, sizeof(orca_full), true, &r));
  ASSERT(r.cpu_utilization == 0.25);
  ASSERT(r.mem_utilization == 0.5);
  ASSERT_EQ(r.rps, 7);
  ASSERT(r.rps_fractional == 123.5);
  ASSERT(r.eps == 1.5);
  ASSERT(r.application_utilization == 0.75);
  ASSERT_EQ(r.n_request_cost, 1);
  ASSERT_EQ(r.n_utilization, 1);
  ASSERT_EQ(r.n_named_metrics, 2);
  grit_load_report pub;
  grit_orca_to_public(&r, "127.0.0.1:1", false, &pub);
  ASSERT_STR_EQ(pub.request_cost[0].name, "db");
  ASSERT(pub.request_cost[0].value == 3.5);
  ASSERT_STR_EQ(pub.utilization[0].name, "gpu");
  ASSERT(pub.utilization[0].value == 0.125);
  ASSERT_STR_EQ(pub.named_metrics[0].name, "q2");
  ASSERT(pub.named_metrics[0].value == 1.0);
  ASSERT_STR_EQ(pub.named_metrics[1].name, "queue");
  ASSERT(pub.named_metrics[1].value == 42.0);
  ASSERT_STR_EQ(pub.peer, "127.0.0.1:1");
  grit_orca_report_free(&r);
  /* Without maps: the same scalars, nothing allocated. */
  ASSERT_OK(grit_orca_decode(orca_full, sizeof(orca_full), false, &r));
  ASSERT(r.application_utilization == 0.75);
  ASSERT_NULL(r.metrics);
  ASSERT_EQ(r.n_named_metrics, 0);
  /* Empty message: all zero. */
  ASSERT_OK(grit_orca_decode(orca_full, 0, true, &r));
  ASSERT(r.cpu_utilization == 0 && r.rps == 0 && !r.metrics);
  /* Unknown fields of every wire type are skipped. */
  static const uint8_t unknown[] = {
      0x78, 0x05, /* field 15 varint */
      0x81, 0x01, 1, 2, 3, 4, 5,    6, 7, 8, 0x8a, 0x01, 0x02, 'h',  'i',
      0x95, 0x01, 1, 2, 3, 4, 0x09, 0, 0, 0, 0,    0,    0,    0xf0, 0x3f};
  ASSERT_OK(grit_orca_decode(unknown, sizeof(unknown), true, &r));
  ASSERT(r.cpu_utilization == 1.0);
  /* Every truncation of the full report is refused cleanly, except at a
   * field boundary. */
  static const size_t boundaries[] = {0, 9, 18, 20, 35, 51, 60, 69, 84, 102};
  for (size_t len = 0; len < sizeof(orca_full); len++) {
    bool boundary = false;
    for (size_t k = 0; k < sizeof(boundaries) / sizeof(boundaries[0]); k++)
      boundary |= boundaries[k] == len;
    grit_err rv = grit_orca_decode(orca_full, len, true, &r);
    if (boundary) {
      ASSERT_OK(rv);
      grit_orca_report_free(&r);
    } else {
      ASSERT_EQ(rv, GRIT_ERR_PARSE);
      ASSERT_NULL(r.metrics);
    }
  }
  /* A known field with the wrong wire type, field 0, a bad map entry. */
  static const uint8_t wrong_type[] = {0x08, 0x01};
  ASSERT_EQ(grit_orca_decode(wrong_type, 2, false, &r), GRIT_ERR_PARSE);
  static const uint8_t field0[] = {0x01, 0, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(grit_orca_decode(field0, 9, false, &r), GRIT_ERR_PARSE);
  static const uint8_t bad_entry[] = {0x42, 0x02, 0x10, 0x01};
  ASSERT_EQ(grit_orca_decode(bad_entry, 4, true, &r), GRIT_ERR_PARSE);
  static const uint8_t long_varint[] = {0x18, 0xff, 0xff, 0xff, 0xff, 0xff,
                                        0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  ASSERT_EQ(grit_orca_decode(long_varint, sizeof(long_varint), false, &r),
            GRIT_ERR_PARSE);
}

static void test_orca_encode_request(void) {
  /* python3-protobuf: OrcaLoadReportRequest{report_interval 1.5s}, {10s},
   * {0.1s}. */
  static const uint8_t r1500[] = {0x0a, 0x08, 0x08, 0x01, 0x10,
                                  0x80, 0xca, 0xb5, 0xee, 0x01};
  static const uint8_t r10000[] = {0x0a, 0x02, 0x08, 0x0a};
  static const uint8_t r100[] = {0x0a, 0x05, 0x10, 0x80, 0xc2, 0xd7, 0x2f};
  struct {
    uint64_t ms;
    const uint8_t *want;
    size_t len;
  } cases[] = {{1500, r1500, sizeof(r1500)},
               {10000, r10000, sizeof(r10000)},
               {100, r100, sizeof(r100)}};
  for (size_t i = 0; i < 3; i++) {
    grit_slice *s = grit_orca_encode_request(cases[i].ms);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(s->len, cases[i].len + 5);
    ASSERT_EQ(s->data[0], 0);
    ASSERT_EQ(s->data[4], cases[i].len);
    ASSERT_MEM_EQ(s->data + 5, cases[i].want, cases[i].len);
    grit_slice_unref(s);
  }
}

/* ---- configs (LP-02..LP-04): values, and errors with JSON paths ---- */

static const grit_svccfg_global *parse_ok(const char *json, grit_svccfg **cfg) {
  grit_error_detail d = {0};
  *cfg = grit_svccfg_parse(json, strlen(json), NULL, &d);
  if (!*cfg) {
    fprintf(stderr, "%s: %s: %s\n", json, d.path, d.reason);
    return NULL;
  }
  return grit_svccfg_get_global(*cfg);
}

static void expect_bad(int line, const char *json, const char *path,
                       const char *reason) {
  grit_error_detail d = {0};
  grit_svccfg *cfg = grit_svccfg_parse(json, strlen(json), NULL, &d);
  if (cfg || d.code != GRIT_ERR_INVALID_CONFIG || strcmp(d.path, path) != 0 ||
      !strstr(d.reason, reason))
    TEST_FAIL_AT(__FILE__, line, "%s: got %s: %s; want %s: %s", json, d.path,
                 d.reason, path, reason);
  grit_svccfg_unref(cfg);
}

static void test_config_values(void) {
  grit_svccfg *cfg;
  const grit_svccfg_global *g = parse_ok(
      "{\"loadBalancingConfig\":[{\"weighted_round_robin\":{}}]}", &cfg);
  ASSERT_NOT_NULL(g);
  ASSERT_EQ(g->lb, GRIT_LB_WEIGHTED_ROUND_ROBIN);
  ASSERT_EQ(g->wrr.enable_oob_load_report, false);
  ASSERT_EQ(g->wrr.blackout_period_ns, 10000000000LL);
  ASSERT_EQ(g->wrr.oob_reporting_period_ns, 10000000000LL);
  ASSERT_EQ(g->wrr.weight_expiration_ns, 180000000000LL);
  ASSERT_EQ(g->wrr.weight_update_period_ns, 1000000000LL);
  ASSERT(g->wrr.error_utilization_penalty == 1.0);
  grit_svccfg_unref(cfg);
  g = parse_ok("{\"loadBalancingConfig\":[{\"weighted_round_robin\":{"
               "\"enableOobLoadReport\":true,\"oobReportingPeriod\":\"0.5s\","
               "\"blackoutPeriod\":\"0s\",\"weightExpirationPeriod\":\"60s\","
               "\"weightUpdatePeriod\":\"0.01s\","
               "\"errorUtilizationPenalty\":0.5}}]}",
               &cfg);
  ASSERT_NOT_NULL(g);
  ASSERT_EQ(g->wrr.enable_oob_load_report, true);
  ASSERT_EQ(g->wrr.oob_reporting_period_ns, 500000000LL);
  ASSERT_EQ(g->wrr.blackout_period_ns, 0);
  ASSERT_EQ(g->wrr.weight_expiration_ns, 60000000000LL);
  ASSERT_EQ(g->wrr.weight_update_period_ns, 100000000LL); /* A58 floor */
  ASSERT(g->wrr.error_utilization_penalty == 0.5);
  grit_svccfg_unref(cfg);
  g = parse_ok("{\"loadBalancingConfig\":[{\"ring_hash_experimental\":{"
               "\"minRingSize\":10,\"maxRingSize\":8388608,"
               "\"requestHashHeader\":\"x-user\"}}]}",
               &cfg);
  ASSERT_NOT_NULL(g);
  ASSERT_EQ(g->lb, GRIT_LB_RING_HASH);
  ASSERT_EQ(g->ring_hash.min_ring_size, 10);
  ASSERT_EQ(g->ring_hash.max_ring_size, 8388608);
  ASSERT_STR_EQ(g->ring_hash.request_hash_header, "x-user");
  grit_svccfg_unref(cfg);
  g = parse_ok("{\"loadBalancingConfig\":[{\"ring_hash_experimental\":{}}]}",
               &cfg);
  ASSERT_NOT_NULL(g);
  ASSERT_EQ(g->ring_hash.min_ring_size, 1024);
  ASSERT_EQ(g->ring_hash.max_ring_size, 4096);
  ASSERT_NULL(g->ring_hash.request_hash_header);
  grit_svccfg_unref(cfg);
  g = parse_ok("{\"loadBalancingConfig\":[{\"least_request_experimental\":{"
               "\"choiceCount\":25}}]}",
               &cfg);
  ASSERT_NOT_NULL(g);
  ASSERT_EQ(g->lb, GRIT_LB_LEAST_REQUEST);
  ASSERT_EQ(g->choice_count, 10); /* clamped */
  grit_svccfg_unref(cfg);
  g = parse_ok(
      "{\"loadBalancingConfig\":[{\"least_request_experimental\":{}}]}", &cfg);
  ASSERT_NOT_NULL(g);
  ASSERT_EQ(g->choice_count, 2);
  grit_svccfg_unref(cfg);
  /* Under outlier detection, as its child. */
  g = parse_ok("{\"loadBalancingConfig\":[{\"outlier_detection_experimental\":"
               "{\"childPolicy\":[{\"weighted_round_robin\":{"
               "\"blackoutPeriod\":\"1s\"}}]}}]}",
               &cfg);
  ASSERT_NOT_NULL(g);
  ASSERT_EQ(g->has_outlier_detection, true);
  ASSERT_EQ(g->lb, GRIT_LB_WEIGHTED_ROUND_ROBIN);
  ASSERT_EQ(g->wrr.blackout_period_ns, 1000000000LL);
  grit_svccfg_unref(cfg);
  /* An unknown policy first, then a known one (A21). */
  g = parse_ok("{\"loadBalancingConfig\":[{\"xds_wrr_locality\":{}},"
               "{\"least_request_experimental\":{\"choiceCount\":3}}]}",
               &cfg);
  ASSERT_NOT_NULL(g);
  ASSERT_EQ(g->choice_count, 3);
  grit_svccfg_unref(cfg);
  char *text = NULL;
  g = parse_ok("{\"loadBalancingConfig\":[{\"ring_hash_experimental\":{"
               "\"requestHashHeader\":\"x-user\",\"maxRingSize\":10000}}]}",
               &cfg);
  ASSERT_NOT_NULL(g);
  ASSERT_OK(grit_svccfg_describe(cfg, &text));
  ASSERT_NOT_NULL(strstr(text, "ring_hash_experimental"));
  ASSERT_NOT_NULL(strstr(text, "\"x-user\" header"));
  ASSERT_NOT_NULL(strstr(text, "capped at 4096"));
  grit_free(text);
  grit_svccfg_unref(cfg);
}

#define LBC "{\"loadBalancingConfig\":[{"
static void test_config_errors(void) {
  expect_bad(__LINE__, LBC "\"weighted_round_robin\":{\"blackoutPeriod\":5}}]}",
             "$.loadBalancingConfig[0].weighted_round_robin.blackoutPeriod",
             "duration");
  expect_bad(__LINE__,
             LBC "\"weighted_round_robin\":{\"enableOobLoadReport\":1}}]}",
             "$.loadBalancingConfig[0].weighted_round_robin."
             "enableOobLoadReport",
             "true or false");
  expect_bad(__LINE__,
             LBC "\"weighted_round_robin\":{\"oobReportingPeriod\":\"-1s\"}}]}",
             "$.loadBalancingConfig[0].weighted_round_robin.oobReportingPeriod",
             "");
  expect_bad(__LINE__,
             LBC "\"weighted_round_robin\":{\"weightExpirationPeriod\":"
                 "\"3m\"}}]}",
             "$.loadBalancingConfig[0].weighted_round_robin."
             "weightExpirationPeriod",
             "");
  expect_bad(__LINE__,
             LBC "\"weighted_round_robin\":{\"weightUpdatePeriod\":true}}]}",
             "$.loadBalancingConfig[0].weighted_round_robin.weightUpdatePeriod",
             "duration");
  expect_bad(__LINE__,
             LBC "\"weighted_round_robin\":{\"errorUtilizationPenalty\":"
                 "-0.5}}]}",
             "$.loadBalancingConfig[0].weighted_round_robin."
             "errorUtilizationPenalty",
             ">= 0");
  expect_bad(__LINE__, LBC "\"weighted_round_robin\":[]}]}",
             "$.loadBalancingConfig[0].weighted_round_robin", "object");
  expect_bad(__LINE__, LBC "\"ring_hash_experimental\":{\"minRingSize\":0}}]}",
             "$.loadBalancingConfig[0].ring_hash_experimental.minRingSize",
             "1..8388608");
  expect_bad(__LINE__,
             LBC "\"ring_hash_experimental\":{\"maxRingSize\":8388609}}]}",
             "$.loadBalancingConfig[0].ring_hash_experimental.maxRingSize",
             "1..8388608");
  expect_bad(
      __LINE__, LBC "\"ring_hash_experimental\":{\"minRingSize\":\"5\"}}]}",
      "$.loadBalancingConfig[0].ring_hash_experimental.minRingSize", "integer");
  expect_bad(__LINE__,
             LBC "\"ring_hash_experimental\":{\"minRingSize\":100,"
                 "\"maxRingSize\":10}}]}",
             "$.loadBalancingConfig[0].ring_hash_experimental",
             "cannot be smaller");
  expect_bad(__LINE__,
             LBC "\"ring_hash_experimental\":{\"requestHashHeader\":"
                 "\"X-User\"}}]}",
             "$.loadBalancingConfig[0].ring_hash_experimental."
             "requestHashHeader",
             "header name");
  expect_bad(__LINE__,
             LBC "\"ring_hash_experimental\":{\"requestHashHeader\":"
                 "\"x-bin\"}}]}",
             "$.loadBalancingConfig[0].ring_hash_experimental."
             "requestHashHeader",
             "binary");
  expect_bad(__LINE__,
             LBC "\"ring_hash_experimental\":{\"requestHashHeader\":7}}]}",
             "$.loadBalancingConfig[0].ring_hash_experimental."
             "requestHashHeader",
             "header name");
  expect_bad(__LINE__,
             LBC "\"least_request_experimental\":{\"choiceCount\":1}}]}",
             "$.loadBalancingConfig[0].least_request_experimental."
             "choiceCount",
             ">= 2");
  expect_bad(__LINE__,
             LBC "\"least_request_experimental\":{\"choiceCount\":2.5}}]}",
             "$.loadBalancingConfig[0].least_request_experimental."
             "choiceCount",
             "integer");
  expect_bad(__LINE__,
             LBC "\"outlier_detection_experimental\":{\"childPolicy\":[{"
                 "\"least_request_experimental\":{\"choiceCount\":0}}]}}]}",
             "$.loadBalancingConfig[0].outlier_detection_experimental."
             "childPolicy[0].least_request_experimental.choiceCount",
             ">= 2");
}

/* ---- out-of-memory sweeps over the new constructors ---- */

static atomic_long oom_count, oom_fail_at;
static void *oom_malloc(size_t n, void *ud) {
  (void)ud;
  long c = atomic_fetch_add(&oom_count, 1) + 1;
  return c == atomic_load(&oom_fail_at) ? NULL : malloc(n);
}
static void oom_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *oom_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  long c = atomic_fetch_add(&oom_count, 1) + 1;
  return c == atomic_load(&oom_fail_at) ? NULL : calloc(n, m);
}
static void *oom_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  long c = atomic_fetch_add(&oom_count, 1) + 1;
  return c == atomic_load(&oom_fail_at) ? NULL : realloc(p, n);
}
static const grit_allocator oom_alloc = {NULL, oom_malloc, oom_free, oom_calloc,
                                         oom_realloc};

typedef grit_err (*oom_fn)(void);

static void oom_sweep(const char *name, oom_fn fn) {
  grit_set_allocator(&oom_alloc);
  atomic_store(&oom_fail_at, 0);
  atomic_store(&oom_count, 0);
  grit_err rv = fn();
  long total = atomic_load(&oom_count);
  if (rv != GRIT_OK)
    TEST_FAIL_AT(__FILE__, __LINE__, "%s: clean run: %s", name,
                 grit_err_name(rv));
  ASSERT_CMP(total, >, 0);
  long nomem = 0;
  for (long i = 1; i <= total; i++) {
    atomic_store(&oom_count, 0);
    atomic_store(&oom_fail_at, i);
    rv = fn();
    if (rv == GRIT_ERR_NOMEM)
      nomem++;
    else if (rv != GRIT_OK)
      TEST_FAIL_AT(__FILE__, __LINE__, "%s: allocation %ld: %s", name, i,
                   grit_err_name(rv));
  }
  atomic_store(&oom_fail_at, 0);
  grit_set_allocator(NULL);
  fprintf(stderr, "  %-28s %4ld allocations, %4ld runs returned NOMEM\n", name,
          total, nomem);
  ASSERT_CMP(nomem, >, 0);
}

static grit_err oom_configs(void) {
  static const char *const cfgs[] = {
      LBC "\"weighted_round_robin\":{\"enableOobLoadReport\":true,"
          "\"blackoutPeriod\":\"1s\"}}]}",
      LBC "\"ring_hash_experimental\":{\"requestHashHeader\":\"x-k\","
          "\"minRingSize\":4}}]}",
      LBC "\"least_request_experimental\":{\"choiceCount\":4}}]}",
  };
  for (size_t i = 0; i < 3; i++) {
    grit_error_detail d = {0};
    grit_svccfg *cfg = grit_svccfg_parse(cfgs[i], strlen(cfgs[i]), NULL, &d);
    if (!cfg)
      return d.code;
    grit_svccfg_unref(cfg);
  }
  return GRIT_OK;
}

static grit_err oom_orca(void) {
  grit_orca_report r;
  grit_err rv = grit_orca_decode(orca_full, sizeof(orca_full), true, &r);
  if (rv == GRIT_OK && (r.n_named_metrics != 2 || !r.metrics))
    rv = GRIT_ERR_INVALID_ARG;
  grit_orca_report_free(&r);
  if (rv != GRIT_OK)
    return rv;
  grit_slice *s = grit_orca_encode_request(1000);
  if (!s)
    return GRIT_ERR_NOMEM;
  grit_slice_unref(s);
  grit_ring_entry *ring;
  size_t n;
  rv = grit_ring_build(three, NULL, 3, 16, 64, &ring, &n);
  grit_free(ring);
  if (rv != GRIT_OK)
    return rv;
  const float w[] = {1, 2, 3};
  grit_stride_sched sched;
  rv = grit_stride_sched_build(w, 3, &sched);
  grit_stride_sched_free(&sched);
  return rv;
}

/* Policies on a real loop: create, configure, three addresses (nothing
 * connects before exit_idle; ring_hash connects only on picks), a second
 * update dropping one, destroy. */
static uv_loop_t g_loop;
static grit_rng g_rng;
static void nop_state(void *ctx, grit_connectivity_state s) {
  (void)ctx;
  (void)s;
}
static void nop_reresolve(void *ctx) {
  (void)ctx;
}

static grit_err policy_run(const grit_lb_policy_vtable *vt) {
  grit_subchannel_args a = {.loop = &g_loop,
                            .rng = &g_rng,
                            .initial_backoff_ms = 1000,
                            .max_backoff_ms = 120000,
                            .min_connect_timeout_ms = 20000};
  grit_lb_helper h = {.update_state = nop_state,
                      .request_reresolution = nop_reresolve};
  grit_lb_policy *p = NULL;
  grit_err rv = vt->create(&a, &h, &p);
  if (rv != GRIT_OK) {
    if (p)
      return GRIT_ERR_INVALID_ARG; /* out-param must be NULL on failure */
    return rv;
  }
  grit_lb_params params;
  grit_lb_params_default(&params);
  params.request_hash_header = "x-key";
  params.min_ring_size = 30;
  params.choice_count = 3;
  if (vt->configure)
    rv = vt->configure(p, &params);
  grit_addr addrs[3];
  for (int i = 0; rv == GRIT_OK && i < 3; i++)
    rv = grit_addr_from_ip(&addrs[i], "127.0.0.1", (uint16_t)(1 + i));
  if (rv == GRIT_OK)
    rv = vt->update_addresses(p, addrs, 3, false);
  if (rv == GRIT_OK)
    rv = vt->update_addresses(p, addrs + 1, 2, false);
  vt->destroy(p);
  uv_run(&g_loop, UV_RUN_NOWAIT);
  return rv;
}

static grit_err oom_wrr(void) {
  return policy_run(&grit_lb_weighted_round_robin);
}
static grit_err oom_ring_hash(void) {
  return policy_run(&grit_lb_ring_hash);
}
static grit_err oom_least_request(void) {
  return policy_run(&grit_lb_least_request);
}

static void test_oom(void) {
  uv_loop_init(&g_loop);
  grit_rng_seed(&g_rng, 26);
  oom_sweep("lb configs", oom_configs);
  oom_sweep("orca, ring, scheduler", oom_orca);
  oom_sweep("weighted_round_robin", oom_wrr);
  oom_sweep("ring_hash_experimental", oom_ring_hash);
  oom_sweep("least_request_experimental", oom_least_request);
  uv_run(&g_loop, UV_RUN_DEFAULT);
  ASSERT_EQ(uv_loop_close(&g_loop), 0);
}

static void test_find_new(void) {
  ASSERT_EQ(grit_lb_find("weighted_round_robin"),
            &grit_lb_weighted_round_robin);
  ASSERT_EQ(grit_lb_find("ring_hash_experimental"), &grit_lb_ring_hash);
  ASSERT_EQ(grit_lb_find("least_request_experimental"), &grit_lb_least_request);
}

int main(int argc, char **argv) {
  static const test_case tests[] = {
      {"xxh64_vectors", test_xxh64_vectors},
      {"ring_matches_grpc", test_ring_matches_grpc},
      {"ring_sizes_and_weights", test_ring_sizes_and_weights},
      {"ring_remove_one_of_three", test_ring_remove_one_of_three},
      {"stride_proportions", test_stride_proportions},
      {"stride_fallback_and_caps", test_stride_fallback_and_caps},
      {"orca_decode", test_orca_decode},
      {"orca_encode_request", test_orca_encode_request},
      {"config_values", test_config_values},
      {"config_errors", test_config_errors},
      {"find_new", test_find_new},
      {"oom", test_oom},
      {NULL, NULL},
  };
  return test_main(tests, argc, argv);
}
