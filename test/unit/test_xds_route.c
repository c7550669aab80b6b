/* Unit tests of the per-call xDS route choice (xdsclient/route_choice.c;
 * issue 27; SPEC XD-02; gRFC A28, A31, A42, A44) and of the cluster
 * manager policy (lb/cluster_manager.c): routes built as xds/ decodes them,
 * chosen with a fixed RNG seed. */
#include "lb/lb.h"
#include "lb/lb_algo.h"
#include "xds/xds_int.h"
#include "xdsclient/route_choice.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/harness.h"

static grit_metadata *md_of(const char *k1, const char *v1, const char *k2,
                            const char *v2) {
  grit_metadata *md = NULL;
  grit_metadata_create(&md);
  if (k1)
    grit_metadata_add(md, k1, v1, strlen(v1));
  if (k2)
    grit_metadata_add(md, k2, v2, strlen(v2));
  return md;
}

/* A28: weighted_clusters 80/20 drawn per call. With seed 1 the split of
 * 100 000 choices is within 6 sigma of 80/20 (binomial: sigma 126.5), and
 * the same seed gives the same sequence. */
static void test_weighted_split(void) {
  xds_cluster_weight w[] = {{"A", 80}, {"B", 20}};
  xds_route r = {.match = {.path_kind = XDS_PATH_PREFIX, .path = ""},
                 .action = XDS_ACTION_WEIGHTED,
                 .weighted = w,
                 .nweighted = 2,
                 .total_weight = 100};
  xds_vhost vh = {.routes = &r, .nroutes = 1};
  grit_rng rng, again;
  grit_rng_seed(&rng, 1);
  grit_rng_seed(&again, 1);
  char msg[128];
  int b = 0, n = 100000;
  for (int i = 0; i < n; i++) {
    xds_choice c, c2;
    ASSERT_EQ(grit_xds_choose(&vh, "/s/M", NULL, &rng, 0, &c, msg, sizeof(msg)),
              GRIT_STATUS_OK);
    ASSERT_EQ(
        grit_xds_choose(&vh, "/s/M", NULL, &again, 0, &c2, msg, sizeof(msg)),
        GRIT_STATUS_OK);
    ASSERT_STR_EQ(c.cluster, c2.cluster); /* fixed seed: reproducible */
    ASSERT_EQ(c.index, 0);
    ASSERT(!c.has_hash);
    b += strcmp(c.cluster, "B") == 0;
  }
  double sigma = sqrt(n * 0.2 * 0.8);
  ASSERT_CMP(fabs(b - n * 0.2), <, 6 * sigma);
  /* A zero-weight cluster is never chosen (decoded weights skip zeros,
   * but the pick itself must not land on it either). */
  xds_cluster_weight w2[] = {{"A", 0}, {"B", 5}};
  r.weighted = w2;
  r.total_weight = 5;
  for (int i = 0; i < 1000; i++) {
    xds_choice c;
    ASSERT_EQ(grit_xds_choose(&vh, "/s/M", NULL, &rng, 0, &c, msg, sizeof(msg)),
              GRIT_STATUS_OK);
    ASSERT_STR_EQ(c.cluster, "B");
  }
}

/* A28: header matchers pick the route; the first match wins; no match and
 * a non-forwarding action fail UNAVAILABLE with grpc-core's messages. */
static void test_header_routing(void) {
  xds_arena *a = grit_xds_arena_create();
  ASSERT_NOT_NULL(a);
  const char *why = NULL;
  xds_regex *re = grit_xds_regex_compile(a, "v[0-9]+", &why);
  ASSERT_NOT_NULL(re);
  xds_header_matcher exact = {
      .name = "x-cluster", .kind = XDS_HM_EXACT, .value = "b"};
  xds_header_matcher prefix_ic = {.name = "x-user",
                                  .kind = XDS_HM_PREFIX,
                                  .value = "ADM",
                                  .ignore_case = true};
  xds_header_matcher suffix_inv = {
      .name = "x-env", .kind = XDS_HM_SUFFIX, .value = "-prod", .invert = true};
  xds_header_matcher present = {
      .name = "x-debug", .kind = XDS_HM_PRESENT, .present = true};
  xds_header_matcher regex = {.name = "x-ver", .kind = XDS_HM_REGEX, .re = re};
  xds_header_matcher range = {
      .name = "x-shard", .kind = XDS_HM_RANGE, .start = 10, .end = 20};
  xds_route routes[] = {
      {.match = {.path_kind = XDS_PATH_PREFIX, .path = "/nf."},
       .action = XDS_ACTION_NON_FORWARDING},
      {.match = {.path_kind = XDS_PATH_PREFIX,
                 .path = "/svc.",
                 .headers = &exact,
                 .nheaders = 1},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "B"},
      {.match = {.path_kind = XDS_PATH_PREFIX,
                 .path = "/svc.",
                 .headers = &prefix_ic,
                 .nheaders = 1},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "admin"},
      {.match = {.path_kind = XDS_PATH_PREFIX,
                 .path = "/svc.",
                 .headers = &suffix_inv,
                 .nheaders = 1},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "notprod"},
      {.match = {.path_kind = XDS_PATH_PREFIX,
                 .path = "/svc.",
                 .headers = &present,
                 .nheaders = 1},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "debug"},
      {.match = {.path_kind = XDS_PATH_PREFIX,
                 .path = "/svc.",
                 .headers = &regex,
                 .nheaders = 1},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "ver"},
      {.match = {.path_kind = XDS_PATH_PREFIX,
                 .path = "/svc.",
                 .headers = &range,
                 .nheaders = 1},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "shard"},
      {.match = {.path_kind = XDS_PATH_EXACT,
                 .path = "/SVC.S/CASE",
                 .case_sensitive = false},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "nocase"},
      {.match = {.path_kind = XDS_PATH_PREFIX,
                 .path = "/svc.",
                 .case_sensitive = true},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "A"},
  };
  xds_vhost vh = {.routes = routes,
                  .nroutes = sizeof(routes) / sizeof(*routes)};
  grit_rng rng;
  grit_rng_seed(&rng, 7);
  char msg[128];
  struct {
    const char *path, *k1, *v1, *k2, *v2, *want;
  } cases[] = {
      {"/svc.S/M", "x-cluster", "b", "x-env", "a-prod", "B"},
      {"/svc.S/M", "x-cluster", "c", "x-env", "a-prod", "A"},
      {"/svc.S/M", "x-user", "admin-1", "x-env", "a-prod", "admin"},
      {"/svc.S/M", "x-env", "a-dev", NULL, NULL, "notprod"},
      {"/svc.S/M", "x-debug", "", "x-env", "a-prod", "debug"},
      {"/svc.S/M", "x-ver", "v12", "x-env", "a-prod", "ver"},
      {"/svc.S/M", "x-ver", "v12a", "x-env", "a-prod", "A"},
      {"/svc.S/M", "x-shard", "15", "x-env", "a-prod", "shard"},
      {"/svc.S/M", "x-shard", "20", "x-env", "a-prod", "A"},
      {"/svc.s/case", "x-env", "a-prod", NULL, NULL, "nocase"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
    grit_metadata *md =
        md_of(cases[i].k1, cases[i].v1, cases[i].k2, cases[i].v2);
    xds_choice c;
    ASSERT_EQ(
        grit_xds_choose(&vh, cases[i].path, md, &rng, 0, &c, msg, sizeof(msg)),
        GRIT_STATUS_OK);
    if (c.cluster && strcmp(c.cluster, cases[i].want) != 0)
      TEST_FAIL_AT(__FILE__, __LINE__, "case %zu: %s, want %s", i, c.cluster,
                   cases[i].want);
    grit_metadata_destroy(md);
  }
  grit_metadata *md = md_of("x-env", "a-prod", NULL, NULL);
  xds_choice c;
  ASSERT_EQ(
      grit_xds_choose(&vh, "/other.S/M", md, &rng, 0, &c, msg, sizeof(msg)),
      GRIT_STATUS_UNAVAILABLE);
  ASSERT_STR_EQ(msg, "No matching route found in xDS route config");
  ASSERT_EQ(grit_xds_choose(&vh, "/nf.S/M", md, &rng, 0, &c, msg, sizeof(msg)),
            GRIT_STATUS_UNAVAILABLE);
  ASSERT_STR_EQ(msg, "Matching route has inappropriate action");
  grit_metadata_destroy(md);
  grit_xds_arena_destroy(a);
}

/* A28: a runtime fraction of 25 % lets a quarter of the calls (drawn from
 * the seeded RNG, within 6 sigma over 100 000) take the route. */
static void test_runtime_fraction(void) {
  xds_route routes[] = {
      {.match = {.path_kind = XDS_PATH_PREFIX,
                 .path = "",
                 .has_fraction = true,
                 .fraction_per_million = 250000},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "canary"},
      {.match = {.path_kind = XDS_PATH_PREFIX, .path = ""},
       .action = XDS_ACTION_CLUSTER,
       .cluster = "main"},
  };
  xds_vhost vh = {.routes = routes, .nroutes = 2};
  grit_rng rng;
  grit_rng_seed(&rng, 3);
  char msg[64];
  int canary = 0, n = 100000;
  for (int i = 0; i < n; i++) {
    xds_choice c;
    ASSERT_EQ(grit_xds_choose(&vh, "/s/M", NULL, &rng, 0, &c, msg, sizeof(msg)),
              GRIT_STATUS_OK);
    canary += c.index == 0;
  }
  ASSERT_CMP(fabs(canary - n * 0.25), <, 6 * sqrt(n * 0.25 * 0.75));
}

/* A44: retry_on's codes, num_retries + 1 attempts capped at 5, backoff
 * base and max, multiplier 2; no code: no policy. */
static void test_retry_convert(void) {
  xds_retry_policy in = {
      .codes = GRIT_CODE_BIT(GRIT_STATUS_UNAVAILABLE) |
               GRIT_CODE_BIT(GRIT_STATUS_CANCELLED),
      .max_attempts = 3,
      .base_ns = 25000000,
      .max_ns = 250000000,
  };
  grit_retry_policy out;
  ASSERT(grit_xds_retry_convert(&in, &out));
  ASSERT_EQ(out.max_attempts, 3);
  ASSERT_EQ(out.initial_backoff_ns, 25000000);
  ASSERT_EQ(out.max_backoff_ns, 250000000);
  ASSERT(out.backoff_multiplier == 2.0);
  ASSERT_EQ(out.retryable_codes, in.codes);
  ASSERT(!out.has_per_attempt_recv_timeout);
  in.max_attempts = 11; /* num_retries 10 */
  ASSERT(grit_xds_retry_convert(&in, &out));
  ASSERT_EQ(out.max_attempts, GRIT_XDS_MAX_ATTEMPTS);
  in.codes = 0;
  ASSERT(!grit_xds_retry_convert(&in, &out));
}

/* A31: grpc_timeout_header_max, else max_stream_duration, else the
 * listener's; zero is no cap; ns round up to ms. */
static void test_timeouts(void) {
  xds_route r = {0};
  ASSERT_EQ(grit_xds_route_timeout_ms(&r, false, 0), 0);
  ASSERT_EQ(grit_xds_route_timeout_ms(&r, true, 1500000000), 1500);
  r.has_max_stream_duration = true;
  r.max_stream_duration_ns = 2000000001;
  ASSERT_EQ(grit_xds_route_timeout_ms(&r, true, 1500000000), 2001);
  r.has_grpc_timeout_header_max = true;
  r.grpc_timeout_header_max_ns = 300000000;
  ASSERT_EQ(grit_xds_route_timeout_ms(&r, true, 1500000000), 300);
  r.grpc_timeout_header_max_ns = 0;
  ASSERT_EQ(grit_xds_route_timeout_ms(&r, true, 1500000000), 0);
}

/* A42: a header's XXH64 (repeated values joined with ","), channel_id,
 * combined with a rotation; terminal stops; none: no hash. */
static void test_hash(void) {
  xds_hash_policy pol[] = {
      {.kind = XDS_HASH_HEADER, .header = "x-user"},
      {.kind = XDS_HASH_CHANNEL_ID},
  };
  xds_route r = {.hash = pol, .nhash = 1};
  uint64_t h;
  grit_metadata *md = md_of("x-user", "alice", "x-user", "bob");
  ASSERT(grit_xds_route_hash(&r, md, 99, &h));
  ASSERT_EQ(h, grit_xxh64("alice,bob", 9, 0));
  grit_metadata *none = md_of("x-other", "1", NULL, NULL);
  ASSERT(!grit_xds_route_hash(&r, none, 99, &h));
  r.nhash = 2;
  ASSERT(grit_xds_route_hash(&r, none, 99, &h));
  ASSERT_EQ(h, 99);
  uint64_t hu = grit_xxh64("alice,bob", 9, 0);
  ASSERT(grit_xds_route_hash(&r, md, 99, &h));
  ASSERT_EQ(h, ((hu << 1) | (hu >> 63)) ^ 99);
  pol[0].terminal = true;
  ASSERT(grit_xds_route_hash(&r, md, 99, &h));
  ASSERT_EQ(h, hu);
  grit_metadata_destroy(md);
  grit_metadata_destroy(none);
}

/* ---- the cluster manager (lb/cluster_manager.c) ---- */

static grit_connectivity_state cm_state;
static int cm_updates;
static void cm_update_state(void *ctx, grit_connectivity_state s) {
  (void)ctx;
  cm_state = s;
  cm_updates++;
}
static void cm_reresolve(void *ctx) {
  (void)ctx;
}

/* A pick goes to the child its cluster names: a waiting cluster queues,
 * a failed one fails with its error, an unknown one fails; a child no
 * longer listed is gone; the state aggregates the children's. */
static void test_cluster_manager(void) {
  grit_subchannel_args a = {0};
  grit_lb_helper h = {cm_update_state, cm_reresolve, NULL};
  grit_lb_policy *p = NULL;
  ASSERT_OK(grit_lb_cluster_manager.create(&a, &h, &p));
  ASSERT_EQ(p->vt->update_addresses(p, NULL, 0, false), GRIT_ERR_INVALID_ARG);
  grit_lb_cm_child kids[] = {
      {.name = "wait", .waiting = true},
      {.name = "bad", .error = "xds: cluster bad does not exist"},
  };
  ASSERT_OK(grit_lb_cm_update(p, kids, 2));
  ASSERT_EQ(cm_state, GRIT_STATE_CONNECTING);
  p->vt->exit_idle(p);
  grit_pick_route pr = {.cluster = "wait"};
  grit_pick_args pa = {.route = &pr};
  ASSERT_EQ(p->vt->pick(p, &pa).kind, GRIT_PICK_QUEUE);
  pr.cluster = "bad";
  grit_pick_result r = p->vt->pick(p, &pa);
  ASSERT_EQ(r.kind, GRIT_PICK_FAIL);
  ASSERT_EQ(r.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_STR_EQ(r.message, "xds: cluster bad does not exist");
  pr.cluster = "nope";
  r = p->vt->pick(p, &pa);
  ASSERT_EQ(r.kind, GRIT_PICK_FAIL);
  ASSERT_STR_EQ(r.message, "xds cluster manager picker: unknown cluster");
  /* A name listed twice counts once (its first entry). */
  grit_lb_cm_child twice[] = {kids[1], kids[1], kids[0]};
  twice[1].error = "second";
  ASSERT_OK(grit_lb_cm_update(p, twice, 3));
  pr.cluster = "bad";
  ASSERT_STR_EQ(p->vt->pick(p, &pa).message, "xds: cluster bad does not exist");
  /* Only the failed one left: TRANSIENT_FAILURE; "wait" is gone. */
  ASSERT_OK(grit_lb_cm_update(p, &kids[1], 1));
  ASSERT_EQ(cm_state, GRIT_STATE_TRANSIENT_FAILURE);
  pr.cluster = "wait";
  ASSERT_EQ(p->vt->pick(p, &pa).kind, GRIT_PICK_FAIL);
  ASSERT_OK(grit_lb_cm_update(p, NULL, 0));
  ASSERT_EQ(cm_state, GRIT_STATE_IDLE);
  p->vt->destroy(p);
}

/* ---- out of memory (STYLE 3.4): fail each allocation of create and two
 * updates in turn; each returns GRIT_OK or GRIT_ERR_NOMEM, the policy stays
 * usable, nothing leaks (valgrind, ASan). ---- */

static long oom_count, oom_fail_at;
static void *oom_malloc(size_t n, void *ud) {
  (void)ud;
  return ++oom_count == oom_fail_at ? NULL : malloc(n);
}
static void oom_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *oom_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  return ++oom_count == oom_fail_at ? NULL : calloc(n, m);
}
static void *oom_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  return ++oom_count == oom_fail_at ? NULL : realloc(p, n);
}
static const grit_allocator oom_alloc = {NULL, oom_malloc, oom_free, oom_calloc,
                                         oom_realloc};

static void cm_oom_run(void) {
  grit_subchannel_args a = {0};
  grit_lb_helper h = {cm_update_state, cm_reresolve, NULL};
  grit_lb_policy *p = NULL;
  grit_err e = grit_lb_cluster_manager.create(&a, &h, &p);
  ASSERT(e == GRIT_OK || e == GRIT_ERR_NOMEM);
  if (e != GRIT_OK)
    return;
  grit_lb_cm_child one[] = {
      {.name = "a", .waiting = true},
      {.name = "b", .error = "b is broken"},
      {.name = "c", .waiting = true},
  };
  grit_lb_cm_child two[] = {
      {.name = "c", .error = "c is broken"},
      {.name = "d", .waiting = true},
  };
  e = grit_lb_cm_update(p, one, 3);
  ASSERT(e == GRIT_OK || e == GRIT_ERR_NOMEM);
  e = grit_lb_cm_update(p, two, 2);
  ASSERT(e == GRIT_OK || e == GRIT_ERR_NOMEM);
  grit_pick_route pr = {.cluster = "d"};
  grit_pick_args pa = {.route = &pr};
  grit_pick_result r = p->vt->pick(p, &pa); /* any outcome, no crash */
  ASSERT(r.kind == GRIT_PICK_QUEUE || r.kind == GRIT_PICK_FAIL);
  p->vt->destroy(p);
}

static void test_cluster_manager_oom(void) {
  grit_set_allocator(&oom_alloc);
  oom_fail_at = 0;
  oom_count = 0;
  cm_oom_run();
  long total = oom_count;
  ASSERT_CMP(total, >, 3);
  for (long i = 1; i <= total; i++) {
    oom_count = 0;
    oom_fail_at = i;
    cm_oom_run();
  }
  grit_set_allocator(NULL);
}

static const test_case tests[] = {
    {"weighted_split", test_weighted_split},
    {"header_routing", test_header_routing},
    {"runtime_fraction", test_runtime_fraction},
    {"retry_convert", test_retry_convert},
    {"timeouts", test_timeouts},
    {"hash", test_hash},
    {"cluster_manager", test_cluster_manager},
    {"cluster_manager_oom", test_cluster_manager_oom},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
