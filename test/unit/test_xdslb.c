/* The xDS cluster policies (issue 27; SPEC XD-03): priority (A56: the
 * 10 s failover timer, failover on TRANSIENT_FAILURE, a higher priority
 * taking back, the 15 min retention of deactivated children) on a fake
 * clock; weighted_target (A27: READY children by weight, within 6-sigma
 * binomial bounds); xds_cluster_impl (A27 drop categories, A32
 * max_requests); the tree xdsclient/cluster_lb.c builds from a Cluster
 * and a ClusterLoadAssignment; out-of-memory sweeps. The leaves are a
 * scripted policy: the test sets each leaf's state and a READY leaf's
 * pick names it. */
#include "lb/lb.h"
#include "xdsclient/xdsclient.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test/harness.h"

static uv_loop_t g_loop;
static grit_rng g_rng;
static uint64_t g_now = 1000000;
static grit_connectivity_state g_state;
static int g_state_updates;

static uint64_t fake_now(void *ud) {
  (void)ud;
  return g_now;
}
static const grit_lb_clock g_clock = {fake_now, NULL};

/* ---- the scripted leaf ---- */

typedef struct fake_leaf {
  grit_lb_policy base;
  grit_lb_helper h;
  grit_connectivity_state state;
  int id; /* the port of its first address */
  int exit_idle_calls;
  char msg[64];
} fake_leaf;

#define MAX_LEAVES 32
static fake_leaf *g_leaves[MAX_LEAVES];

static const grit_lb_policy_vtable fake_vt;

static grit_err fl_create(const grit_subchannel_args *a,
                          const grit_lb_helper *h, grit_lb_policy **out) {
  (void)a;
  fake_leaf *f = grit_calloc(1, sizeof(*f));
  *out = f ? &f->base : NULL;
  if (!f)
    return GRIT_ERR_NOMEM;
  f->base.vt = &fake_vt;
  f->h = *h;
  f->state = GRIT_STATE_IDLE;
  for (int i = 0; i < MAX_LEAVES; i++)
    if (!g_leaves[i]) {
      g_leaves[i] = f;
      break;
    }
  return GRIT_OK;
}

static grit_err fl_update(grit_lb_policy *p, const grit_addr *addrs, size_t n,
                          bool shuffle) {
  (void)shuffle;
  fake_leaf *f = (fake_leaf *)p;
  f->id = n ? ntohs(((const struct sockaddr_in *)&addrs[0].u.sa)->sin_port) : 0;
  f->h.update_state(f->h.ctx, f->state); /* as round_robin does */
  return GRIT_OK;
}

static void fl_exit_idle(grit_lb_policy *p) {
  fake_leaf *f = (fake_leaf *)p;
  f->exit_idle_calls++;
  if (f->state == GRIT_STATE_IDLE) {
    f->state = GRIT_STATE_CONNECTING;
    f->h.update_state(f->h.ctx, f->state);
  }
}

static grit_pick_result fl_pick(grit_lb_policy *p, const grit_pick_args *a) {
  (void)a;
  fake_leaf *f = (fake_leaf *)p;
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  if (f->state == GRIT_STATE_READY) {
    r.kind = GRIT_PICK_COMPLETE;
    r.transport = (grit_transport *)(uintptr_t)f->id;
  } else if (f->state == GRIT_STATE_TRANSIENT_FAILURE) {
    snprintf(f->msg, sizeof(f->msg), "leaf %d failed", f->id);
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    r.message = f->msg;
  }
  return r;
}

static void fl_destroy(grit_lb_policy *p) {
  for (int i = 0; i < MAX_LEAVES; i++)
    if (g_leaves[i] == (fake_leaf *)p)
      g_leaves[i] = NULL;
  grit_free(p);
}

static const grit_lb_policy_vtable fake_vt = {
    .name = "fake_leaf",
    .create = fl_create,
    .update_addresses = fl_update,
    .exit_idle = fl_exit_idle,
    .pick = fl_pick,
    .destroy = fl_destroy,
};

static fake_leaf *leaf(int id) {
  for (int i = 0; i < MAX_LEAVES; i++)
    if (g_leaves[i] && g_leaves[i]->id == id)
      return g_leaves[i];
  return NULL;
}

static void leaf_set(int id, grit_connectivity_state s) {
  fake_leaf *f = leaf(id);
  ASSERT(f != NULL);
  f->state = s;
  f->h.update_state(f->h.ctx, s);
}

static void top_state(void *ctx, grit_connectivity_state s) {
  (void)ctx;
  g_state = s;
  g_state_updates++;
}
static void top_reresolve(void *ctx) {
  (void)ctx;
}

/* Create a top policy of |vt| on the test loop with the top helper. */
static grit_err create_top(const grit_lb_policy_vtable *vt,
                           grit_lb_policy **p) {
  grit_subchannel_args a = {.loop = &g_loop,
                            .rng = &g_rng,
                            .initial_backoff_ms = 1000,
                            .max_backoff_ms = 120000,
                            .min_connect_timeout_ms = 20000};
  grit_lb_helper h = {top_state, top_reresolve, NULL};
  *p = NULL;
  return vt->create(&a, &h, p);
}

static grit_lb_policy *make(const grit_lb_policy_vtable *vt) {
  grit_lb_policy *p = NULL;
  if (create_top(vt, &p) != GRIT_OK)
    abort(); /* out of memory with the real allocator */
  return p;
}

static int picked(grit_lb_policy *p) {
  grit_pick_args pa = {0};
  grit_pick_result r = p->vt->pick(p, &pa);
  if (r.kind == GRIT_PICK_COMPLETE)
    return (int)(uintptr_t)r.transport;
  return r.kind == GRIT_PICK_QUEUE ? -1 : -2;
}

typedef struct leaves3 {
  grit_addr addr[3];
  grit_lb_node leaf[3];
  grit_lb_child_cfg child[3];
} leaves3;

static void leaves_init(leaves3 *l, int first_port, const char *const *names,
                        const uint32_t *weights) {
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(grit_addr_from_ip(&l->addr[i], "127.0.0.1",
                                (uint16_t)(first_port + i)));
    l->leaf[i] = (grit_lb_node){.kind = GRIT_LB_NODE_LEAF,
                                .policy = &fake_vt,
                                .addrs = &l->addr[i],
                                .naddrs = 1};
    l->child[i] = (grit_lb_child_cfg){.name = names[i],
                                      .weight = weights ? weights[i] : 1,
                                      .node = &l->leaf[i]};
  }
}

/* ---- priority (A56) ---- */

static void test_priority_failover(void) {
  static const char *const names[] = {"p0", "p1", "p2"};
  leaves3 l;
  leaves_init(&l, 1, names, NULL);
  grit_lb_node node = {.kind = GRIT_LB_NODE_PRIORITY,
                       .children = l.child,
                       .nchildren = 3,
                       .clock = &g_clock};
  grit_lb_policy *p = make(&grit_lb_priority);
  ASSERT_OK(p->vt->update_node(p, &node));
  /* Only priority 0 is made, and it is started at once. */
  ASSERT(leaf(1) != NULL);
  ASSERT_EQ(leaf(1)->exit_idle_calls, 1);
  ASSERT(leaf(2) == NULL);
  ASSERT_EQ(g_state, GRIT_STATE_CONNECTING);
  ASSERT_EQ(grit_lb_priority_current(p), 0);
  ASSERT_EQ(picked(p), -1);
  /* Not READY within 10 s: priority 1 starts, and not a millisecond
   * earlier. */
  g_now += 9999;
  grit_lb_priority_tick(p);
  ASSERT(leaf(2) == NULL);
  ASSERT_EQ(grit_lb_priority_current(p), 0);
  g_now += 1;
  grit_lb_priority_tick(p);
  ASSERT(leaf(2) != NULL);
  ASSERT_EQ(grit_lb_priority_current(p), 1);
  /* TRANSIENT_FAILURE moves on at once, without the timer. */
  leaf_set(2, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT(leaf(3) != NULL);
  ASSERT_EQ(grit_lb_priority_current(p), 2);
  leaf_set(3, GRIT_STATE_READY);
  ASSERT_EQ(g_state, GRIT_STATE_READY);
  ASSERT_EQ(picked(p), 3);
  /* Priority 0 recovers and takes back; the lower ones are kept. */
  leaf_set(1, GRIT_STATE_READY);
  ASSERT_EQ(grit_lb_priority_current(p), 0);
  ASSERT_EQ(picked(p), 1);
  ASSERT_EQ(grit_lb_priority_children(p), 3);
  /* ... for 15 minutes. */
  g_now += 15 * 60000 - 1;
  grit_lb_priority_tick(p);
  ASSERT_EQ(grit_lb_priority_children(p), 3);
  g_now += 1;
  grit_lb_priority_tick(p);
  ASSERT_EQ(grit_lb_priority_children(p), 1);
  ASSERT(leaf(2) == NULL && leaf(3) == NULL);
  /* READY then CONNECTING (a lost connection) restarts the timer. */
  leaf_set(1, GRIT_STATE_CONNECTING);
  ASSERT_EQ(grit_lb_priority_current(p), 0);
  g_now += 10000;
  grit_lb_priority_tick(p);
  ASSERT_EQ(grit_lb_priority_current(p), 1);
  ASSERT(leaf(2) != NULL);
  ASSERT_EQ(picked(p), -1); /* priority 1 is CONNECTING */
  /* Priority 0 READY again before priority 1 is: back to 0. */
  leaf_set(1, GRIT_STATE_READY);
  ASSERT_EQ(grit_lb_priority_current(p), 0);
  ASSERT_EQ(picked(p), 1);
  /* Every priority failing: TRANSIENT_FAILURE with the last one's pick. */
  leaf_set(1, GRIT_STATE_TRANSIENT_FAILURE);
  leaf_set(2, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT(leaf(3) != NULL);
  leaf_set(3, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT_EQ(g_state, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT_EQ(grit_lb_priority_current(p), 2);
  ASSERT_EQ(picked(p), -2);
  /* An update without priority 2: its child is kept (deactivated), the
   * others keep their policies. */
  fake_leaf *keep = leaf(1);
  node.nchildren = 2;
  ASSERT_OK(p->vt->update_node(p, &node));
  ASSERT(leaf(1) == keep);
  ASSERT_EQ(grit_lb_priority_children(p), 3);
  leaf_set(1, GRIT_STATE_READY);
  ASSERT_EQ(picked(p), 1);
  g_now += 15 * 60000;
  grit_lb_priority_tick(p);
  ASSERT_EQ(grit_lb_priority_children(p), 1); /* 1 and 2 dropped */
  p->vt->destroy(p);
  uv_run(&g_loop, UV_RUN_DEFAULT);
}

/* The loop timer wakes the policy by itself (real clock, 30 ms). */
static void test_priority_loop_timer(void) {
  static const char *const names[] = {"a", "b", "c"};
  leaves3 l;
  leaves_init(&l, 101, names, NULL);
  grit_lb_node node = {.kind = GRIT_LB_NODE_PRIORITY,
                       .children = l.child,
                       .nchildren = 2,
                       .failover_ms = 30};
  grit_lb_policy *p = make(&grit_lb_priority);
  ASSERT_OK(p->vt->update_node(p, &node));
  ASSERT(leaf(102) == NULL);
  for (int i = 0; i < 200 && !leaf(102); i++) { /* at most ~2 s */
    uv_run(&g_loop, UV_RUN_NOWAIT);
    uv_sleep(10);
  }
  ASSERT(leaf(102) != NULL);
  ASSERT_EQ(grit_lb_priority_current(p), 1);
  p->vt->destroy(p);
  uv_run(&g_loop, UV_RUN_DEFAULT);
}

/* ---- weighted_target (A27) ---- */

static void test_weighted_target(void) {
  static const char *const names[] = {"z1", "z2", "z3"};
  static const uint32_t w[] = {3, 1, 1};
  leaves3 l;
  leaves_init(&l, 11, names, w);
  grit_lb_node node = {.kind = GRIT_LB_NODE_WEIGHTED_TARGET,
                       .children = l.child,
                       .nchildren = 2};
  grit_lb_policy *p = make(&grit_lb_weighted_target);
  ASSERT_OK(p->vt->update_node(p, &node));
  ASSERT_EQ(g_state, GRIT_STATE_IDLE);
  ASSERT_EQ(picked(p), -1); /* a pick starts the children */
  ASSERT_EQ(leaf(11)->exit_idle_calls, 1);
  ASSERT_EQ(g_state, GRIT_STATE_CONNECTING);
  leaf_set(11, GRIT_STATE_READY);
  leaf_set(12, GRIT_STATE_READY);
  ASSERT_EQ(g_state, GRIT_STATE_READY);
  /* 3:1 within 6 sigma of the binomial: 40000 x 0.75 +- 6 x 86.6. */
  const int n = 40000;
  int c11 = 0, c12 = 0;
  for (int i = 0; i < n; i++) {
    int id = picked(p);
    c11 += id == 11;
    c12 += id == 12;
  }
  ASSERT_EQ(c11 + c12, n);
  double sd = sqrt(n * 0.75 * 0.25);
  ASSERT_CMP(fabs(c11 - n * 0.75), <, 6 * sd);
  /* Only READY children count. */
  leaf_set(12, GRIT_STATE_CONNECTING);
  for (int i = 0; i < 1000; i++)
    ASSERT_EQ(picked(p), 11);
  leaf_set(11, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT_EQ(g_state, GRIT_STATE_CONNECTING);
  ASSERT_EQ(picked(p), -1);
  leaf_set(12, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT_EQ(g_state, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT_EQ(picked(p), -2);
  /* An update: a target kept by name keeps its policy, a gone one is
   * dropped, a new one starts (the policy was started). */
  fake_leaf *keep = leaf(12);
  node.children = &l.child[1];
  node.nchildren = 2;
  ASSERT_OK(p->vt->update_node(p, &node));
  ASSERT(leaf(11) == NULL);
  ASSERT(leaf(12) == keep);
  ASSERT(leaf(13) != NULL);
  ASSERT_EQ(leaf(13)->exit_idle_calls, 1);
  leaf_set(13, GRIT_STATE_READY);
  ASSERT_EQ(g_state, GRIT_STATE_READY);
  ASSERT_EQ(picked(p), 13);
  /* No targets: TRANSIENT_FAILURE. */
  node.nchildren = 0;
  ASSERT_OK(p->vt->update_node(p, &node));
  ASSERT_EQ(g_state, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT_EQ(picked(p), -2);
  p->vt->destroy(p);
}

/* ---- xds_cluster_impl (A27 drops, A32 circuit breaking) ---- */

static void test_cluster_impl_drops(void) {
  static const char *const names[] = {"prio", "x", "y"};
  leaves3 l;
  leaves_init(&l, 21, names, NULL);
  grit_lb_drop drops[] = {{"lb", 500000}};
  grit_lb_node node = {.kind = GRIT_LB_NODE_CLUSTER_IMPL,
                       .children = l.child,
                       .nchildren = 1,
                       .cluster = "c1",
                       .drops = drops,
                       .ndrops = 1};
  grit_lb_policy *p = make(&grit_lb_xds_cluster_impl);
  ASSERT_OK(p->vt->update_node(p, &node));
  p->vt->exit_idle(p);
  leaf_set(21, GRIT_STATE_READY);
  ASSERT_EQ(g_state, GRIT_STATE_READY);
  const int n = 10000;
  int dropped = 0;
  for (int i = 0; i < n; i++) {
    grit_pick_args pa = {0};
    grit_pick_result r = p->vt->pick(p, &pa);
    if (r.kind == GRIT_PICK_DROP) {
      dropped++;
      ASSERT_EQ(r.code, GRIT_STATUS_UNAVAILABLE);
      ASSERT(strstr(r.message, "dropped by xDS drop config") != NULL);
      ASSERT(strstr(r.message, "category lb") != NULL);
    } else {
      ASSERT_EQ(r.kind, GRIT_PICK_COMPLETE);
      ASSERT(r.done != NULL);
      r.done->fn(r.done);
    }
  }
  /* 50 % within 6 sigma: 5000 +- 300. */
  ASSERT_CMP(abs(dropped - n / 2), <, 300);
  grit_lb_cluster_stats st;
  grit_lb_xds_cluster_impl_stats(p, &st);
  ASSERT_EQ(st.dropped, (uint64_t)dropped);
  ASSERT_EQ(st.in_flight, 0);
  /* Categories draw in order: 100 % in the second names it. */
  grit_lb_drop two[] = {{"none", 0}, {"all", 1000000}};
  node.drops = two;
  node.ndrops = 2;
  ASSERT_OK(p->vt->update_node(p, &node));
  grit_pick_args pa = {0};
  grit_pick_result r = p->vt->pick(p, &pa);
  ASSERT_EQ(r.kind, GRIT_PICK_DROP);
  ASSERT(strstr(r.message, "category all") != NULL);
  p->vt->destroy(p);
}

static void test_cluster_impl_max_requests(void) {
  static const char *const names[] = {"prio", "x", "y"};
  leaves3 l;
  leaves_init(&l, 31, names, NULL);
  grit_lb_node node = {.kind = GRIT_LB_NODE_CLUSTER_IMPL,
                       .children = l.child,
                       .nchildren = 1,
                       .cluster = "c2",
                       .max_requests = 2};
  grit_lb_policy *p = make(&grit_lb_xds_cluster_impl);
  ASSERT_OK(p->vt->update_node(p, &node));
  p->vt->exit_idle(p);
  leaf_set(31, GRIT_STATE_READY);
  grit_pick_args pa = {0};
  grit_pick_result r1 = p->vt->pick(p, &pa);
  grit_pick_result r2 = p->vt->pick(p, &pa);
  ASSERT_EQ(r1.kind, GRIT_PICK_COMPLETE);
  ASSERT_EQ(r2.kind, GRIT_PICK_COMPLETE);
  grit_lb_cluster_stats st;
  grit_lb_xds_cluster_impl_stats(p, &st);
  ASSERT_EQ(st.in_flight, 2);
  /* The third fails at once, not queued. */
  grit_pick_result r3 = p->vt->pick(p, &pa);
  ASSERT_EQ(r3.kind, GRIT_PICK_DROP);
  ASSERT_EQ(r3.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT(strstr(r3.message, "circuit breaker") != NULL);
  ASSERT(strstr(r3.message, "c2") != NULL);
  grit_lb_xds_cluster_impl_stats(p, &st);
  ASSERT_EQ(st.dropped_max_requests, 1);
  /* One ends: the next is picked. */
  r1.done->fn(r1.done);
  grit_pick_result r4 = p->vt->pick(p, &pa);
  ASSERT_EQ(r4.kind, GRIT_PICK_COMPLETE);
  ASSERT_EQ(p->vt->pick(p, &pa).kind, GRIT_PICK_DROP);
  /* Under the limit, a non-READY child's picks queue, uncounted. */
  r4.done->fn(r4.done);
  leaf_set(31, GRIT_STATE_CONNECTING);
  grit_pick_result q = p->vt->pick(p, &pa);
  ASSERT_EQ(q.kind, GRIT_PICK_QUEUE);
  ASSERT(q.done == NULL);
  grit_lb_xds_cluster_impl_stats(p, &st);
  ASSERT_EQ(st.in_flight, 1);
  ASSERT_EQ(st.dropped_max_requests, 2);
  /* The default is 1024 (A32). */
  node.max_requests = 0;
  ASSERT_OK(p->vt->update_node(p, &node));
  leaf_set(31, GRIT_STATE_READY);
  grit_pick_result r5 = p->vt->pick(p, &pa);
  grit_pick_result r6 = p->vt->pick(p, &pa);
  ASSERT_EQ(r5.kind, GRIT_PICK_COMPLETE);
  ASSERT_EQ(r6.kind, GRIT_PICK_COMPLETE);
  grit_lb_xds_cluster_impl_stats(p, &st);
  ASSERT_EQ(st.in_flight, 3);
  /* Calls outlive the policy: their done hooks run after it is gone. */
  p->vt->destroy(p);
  r2.done->fn(r2.done);
  r5.done->fn(r5.done);
  r6.done->fn(r6.done);
}

/* ---- the tree from CDS + EDS (xdsclient/cluster_lb.c) ---- */

static void test_tree_from_resources(void) {
  xds_endpoint e0[] = {{"127.0.0.1", 1000, XDS_HEALTH_HEALTHY, 1},
                       {"127.0.0.1", 1001, XDS_HEALTH_UNHEALTHY, 1},
                       {"127.0.0.1", 1002, XDS_HEALTH_UNKNOWN, 1}};
  xds_endpoint e1[] = {{"::1", 1003, XDS_HEALTH_HEALTHY, 1}};
  xds_endpoint e2[] = {{"127.0.0.1", 1004, XDS_HEALTH_DRAINING, 1}};
  xds_endpoint e3[] = {{"127.0.0.1", 1005, XDS_HEALTH_HEALTHY, 1}};
  xds_endpoint e4[] = {{"127.0.0.1", 1006, XDS_HEALTH_HEALTHY, 1}};
  xds_locality locs[] = {
      {"r", "z0", "", 3, 0, e0, 3}, {"r", "z1", "", 1, 0, e1, 1},
      {"r", "z2", "", 5, 0, e2, 1}, /* nothing usable: left out */
      {"r", "z3", "", 0, 0, e3, 1}, /* weight 0: left out */
      {"r", "z4", "", 2, 1, e4, 1},
  };
  xds_drop drops[] = {{"throttle", 250000}};
  xds_endpoints eds = {.localities = locs,
                       .nlocalities = 5,
                       .npriorities = 2,
                       .drops = drops,
                       .ndrops = 1};
  xds_cluster cl = {.type = XDS_CLUSTER_EDS,
                    .lb = {.kind = XDS_LB_LEAST_REQUEST, .choice_count = 3},
                    .has_outlier = true,
                    .outlier = {.interval_ns = 2000000000LL,
                                .max_ejection_percent = 20,
                                .failure_percentage = true,
                                .fp_threshold = 50},
                    .max_requests = 7};
  grit_xds_lb_tree *t;
  ASSERT_OK(grit_xds_lb_tree_build("svc", &cl, &eds, &t));
  ASSERT_EQ(grit_xds_lb_tree_addresses(t), 4);
  const grit_lb_node *root = grit_xds_lb_tree_root(t);
  ASSERT_EQ(root->kind, GRIT_LB_NODE_CLUSTER_IMPL);
  ASSERT_STR_EQ(root->cluster, "svc");
  ASSERT_EQ(root->max_requests, 7);
  ASSERT_EQ(root->ndrops, 1);
  ASSERT_STR_EQ(root->drops[0].category, "throttle");
  ASSERT_EQ(root->drops[0].per_million, 250000);
  const grit_lb_node *pr = root->children[0].node;
  ASSERT_EQ(pr->kind, GRIT_LB_NODE_PRIORITY);
  ASSERT_EQ(pr->nchildren, 2);
  ASSERT_STR_EQ(pr->children[0].name, "priority-0");
  const grit_lb_node *wt0 = pr->children[0].node;
  ASSERT_EQ(wt0->kind, GRIT_LB_NODE_WEIGHTED_TARGET);
  ASSERT_EQ(wt0->nchildren, 2);
  ASSERT_EQ(wt0->children[0].weight, 3);
  ASSERT_EQ(wt0->children[1].weight, 1);
  ASSERT_STR_EQ(wt0->children[0].name, "{region=r, zone=z0, sub_zone=}");
  const grit_lb_node *leaf0 = wt0->children[0].node;
  ASSERT_EQ(leaf0->kind, GRIT_LB_NODE_LEAF);
  ASSERT(leaf0->policy == &grit_lb_least_request);
  ASSERT_EQ(leaf0->params->choice_count, 3);
  ASSERT_EQ(leaf0->naddrs, 2);
  ASSERT_STR_EQ(leaf0->addrs[0].text, "127.0.0.1:1000");
  ASSERT_STR_EQ(leaf0->addrs[1].text, "127.0.0.1:1002");
  /* A50 over the whole priority (grpc-core: above wrr_locality). */
  ASSERT(leaf0->od == NULL);
  ASSERT(wt0->od != NULL);
  ASSERT_EQ(wt0->od->interval_ms, 2000);
  ASSERT_EQ(wt0->od->base_ejection_time_ms, 30000);
  ASSERT_EQ(wt0->od->max_ejection_percent, 20);
  ASSERT(wt0->od->failure_percentage);
  ASSERT_EQ(wt0->od->fp_threshold, 50);
  ASSERT(grit_lb_node_vt(wt0) == &grit_lb_outlier_detection);
  ASSERT_STR_EQ(wt0->children[1].node->addrs[0].text, "[::1]:1003");
  const grit_lb_node *wt1 = pr->children[1].node;
  ASSERT_EQ(wt1->nchildren, 1);
  ASSERT_EQ(wt1->children[0].weight, 2);
  ASSERT_EQ(wt1->children[0].node->addrs[0].u.sa.sa_family, AF_INET);
  ASSERT(strstr(grit_xds_lb_tree_config_json(t),
                "\"least_request_experimental\":{\"choiceCount\":3}") != NULL);
  grit_xds_lb_tree_free(t);

  /* RING_HASH (A42): one ring_hash per priority over its localities. */
  cl.lb = (xds_lb_policy){
      .kind = XDS_LB_RING_HASH, .min_ring = 64, .max_ring = 128};
  cl.has_outlier = false;
  ASSERT_OK(grit_xds_lb_tree_build("svc", &cl, &eds, &t));
  pr = grit_xds_lb_tree_root(t)->children[0].node;
  const grit_lb_node *ring0 = pr->children[0].node;
  ASSERT_EQ(ring0->kind, GRIT_LB_NODE_LEAF);
  ASSERT(ring0->policy == &grit_lb_ring_hash);
  ASSERT(ring0->od == NULL);
  /* A42: locality weight x endpoint weight: z0's two at 3, z1's at 1. */
  ASSERT_EQ(ring0->naddrs, 7);
  int n1000 = 0, n1002 = 0, n1003 = 0;
  for (size_t i = 0; i < ring0->naddrs; i++) {
    n1000 += strcmp(ring0->addrs[i].text, "127.0.0.1:1000") == 0;
    n1002 += strcmp(ring0->addrs[i].text, "127.0.0.1:1002") == 0;
    n1003 += strcmp(ring0->addrs[i].text, "[::1]:1003") == 0;
  }
  ASSERT_EQ(n1000, 3);
  ASSERT_EQ(n1002, 3);
  ASSERT_EQ(n1003, 1);
  ASSERT_EQ(grit_xds_lb_tree_addresses(t), 4);
  ASSERT_EQ(ring0->params->min_ring_size, 64);
  ASSERT_EQ(ring0->params->max_ring_size, 128);
  grit_xds_lb_tree_free(t);
  {
    /* Weights far apart are scaled to at most 4 per endpoint + 256. */
    xds_endpoint big[] = {{"127.0.0.1", 2000, XDS_HEALTH_HEALTHY, 1000},
                          {"127.0.0.1", 2001, XDS_HEALTH_HEALTHY, 1}};
    xds_locality bl[] = {{"r", "z", "", 1, 0, big, 2}};
    xds_endpoints be = {.localities = bl, .nlocalities = 1, .npriorities = 1};
    ASSERT_OK(grit_xds_lb_tree_build("svc", &cl, &be, &t));
    const grit_lb_node *bring =
        grit_xds_lb_tree_root(t)->children[0].node->children[0].node;
    ASSERT_EQ(bring->naddrs, 263 + 1); /* 1000 x 264 / 1001, and 1 */
    ASSERT_STR_EQ(bring->addrs[263].text, "127.0.0.1:2001");
    grit_xds_lb_tree_free(t);
  }

  /* WRR (A58): its settings, defaults where unset. */
  cl.lb = (xds_lb_policy){
      .kind = XDS_LB_WRR, .blackout_ns = 2000000000LL, .error_penalty = -1};
  ASSERT_OK(grit_xds_lb_tree_build("svc", &cl, &eds, &t));
  const grit_lb_node *wl = grit_xds_lb_tree_root(t)
                               ->children[0]
                               .node->children[0]
                               .node->children[0]
                               .node;
  ASSERT(wl->policy == &grit_lb_weighted_round_robin);
  ASSERT_EQ(wl->params->wrr.blackout_ms, 2000);
  ASSERT_EQ(wl->params->wrr.update_ms, 1000);
  ASSERT(wl->params->wrr.error_penalty == 1.0);
  grit_xds_lb_tree_free(t);

  /* A typed PickFirst outside WrrLocality (A52): pick_first over each
   * priority's endpoints, shuffled as it asks. */
  cl.lb = (xds_lb_policy){
      .kind = XDS_LB_PICK_FIRST, .shuffle = true, .per_priority = true};
  ASSERT_OK(grit_xds_lb_tree_build("svc", &cl, &eds, &t));
  const grit_lb_node *pf = grit_xds_lb_tree_root(t)->children[0].node;
  ASSERT_EQ(pf->children[0].node->kind, GRIT_LB_NODE_LEAF);
  ASSERT(pf->children[0].node->policy == &grit_lb_pick_first);
  ASSERT(pf->children[0].node->shuffle);
  ASSERT_EQ(pf->children[0].node->naddrs, 3);
  ASSERT_EQ(pf->children[1].node->naddrs, 1);
  grit_xds_lb_tree_free(t);
  /* A priority with nothing usable fails over at once (no timer). */
  e4[0].health = XDS_HEALTH_UNHEALTHY;
  ASSERT_OK(grit_xds_lb_tree_build("svc", &cl, &eds, &t));
  pf = grit_xds_lb_tree_root(t)->children[0].node;
  ASSERT_EQ(pf->children[1].node->kind, GRIT_LB_NODE_WEIGHTED_TARGET);
  ASSERT_EQ(pf->children[1].node->nchildren, 0);
  e4[0].health = XDS_HEALTH_HEALTHY;
  ASSERT(strstr(grit_xds_lb_tree_config_json(t),
                "\"pick_first\":{\"shuffleAddressList\":true}") != NULL);
  grit_xds_lb_tree_free(t);

  /* LOGICAL_DNS: pick_first over the resolved addresses, under the
   * circuit breaker. */
  grit_addr da[2];
  ASSERT_OK(grit_addr_from_ip(&da[0], "127.0.0.1", 7));
  ASSERT_OK(grit_addr_from_ip(&da[1], "::1", 7));
  ASSERT_OK(grit_xds_lb_tree_build_dns("dns", &cl, da, 2, &t));
  const grit_lb_node *droot = grit_xds_lb_tree_root(t);
  ASSERT_EQ(droot->max_requests, 7);
  ASSERT_EQ(droot->ndrops, 0);
  const grit_lb_node *dl = droot->children[0].node->children[0].node;
  ASSERT(dl->policy == &grit_lb_pick_first);
  ASSERT_EQ(dl->naddrs, 2);
  ASSERT_STR_EQ(dl->addrs[1].text, "[::1]:7");
  grit_xds_lb_tree_free(t);
}

/* ---- the whole tree on a loop, and out-of-memory sweeps ---- */

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

/* cluster_impl over priority over weighted_target over round_robin (real
 * subchannels, never connected: nothing runs the loop but the close
 * callbacks), two updates, destroy. */
static grit_err tree_run(void) {
  grit_addr addrs[3];
  for (int i = 0; i < 3; i++)
    if (grit_addr_from_ip(&addrs[i], "127.0.0.1", (uint16_t)(9 + i)) != GRIT_OK)
      return GRIT_ERR_INVALID_ARG;
  grit_od_params od = {.interval_ms = 10000, .max_ejection_percent = 10};
  grit_lb_node leaves[2] = {{.kind = GRIT_LB_NODE_LEAF,
                             .policy = &grit_lb_round_robin,
                             .addrs = addrs,
                             .naddrs = 2,
                             .od = &od},
                            {.kind = GRIT_LB_NODE_LEAF,
                             .policy = &grit_lb_round_robin,
                             .addrs = addrs + 2,
                             .naddrs = 1}};
  grit_lb_child_cfg locs[2] = {{"l0", 2, &leaves[0]}, {"l1", 1, &leaves[1]}};
  grit_lb_node wts[2] = {{.kind = GRIT_LB_NODE_WEIGHTED_TARGET,
                          .children = locs,
                          .nchildren = 1,
                          .od = &od}, /* ... and over a priority's localities */
                         {.kind = GRIT_LB_NODE_WEIGHTED_TARGET,
                          .children = locs + 1,
                          .nchildren = 1}};
  grit_lb_child_cfg prios[2] = {{"p0", 1, &wts[0]}, {"p1", 1, &wts[1]}};
  grit_lb_node prio = {.kind = GRIT_LB_NODE_PRIORITY,
                       .children = prios,
                       .nchildren = 2,
                       .clock = &g_clock};
  grit_lb_child_cfg top = {"prio", 1, &prio};
  grit_lb_drop drop = {"lb", 10};
  grit_lb_node root = {.kind = GRIT_LB_NODE_CLUSTER_IMPL,
                       .children = &top,
                       .nchildren = 1,
                       .cluster = "c",
                       .drops = &drop,
                       .ndrops = 1};
  grit_lb_policy *p = NULL;
  grit_err rv = create_top(grit_lb_node_vt(&root), &p);
  if (rv != GRIT_OK)
    return p ? GRIT_ERR_INVALID_ARG : rv;
  grit_err r1 = p->vt->update_node(p, &root);
  wts[0].nchildren = 2;
  grit_err r2 = p->vt->update_node(p, &root);
  p->vt->destroy(p);
  uv_run(&g_loop, UV_RUN_NOWAIT);
  return r1 != GRIT_OK ? r1 : r2;
}

static grit_err tree_build_run(void) {
  xds_endpoint e0[] = {{"127.0.0.1", 1000, XDS_HEALTH_HEALTHY, 1}};
  xds_locality locs[] = {{"r", "z0", "", 3, 0, e0, 1},
                         {"r", "z1", "", 1, 1, e0, 1}};
  xds_drop drops[] = {{"throttle", 250000}};
  xds_endpoints eds = {.localities = locs,
                       .nlocalities = 2,
                       .npriorities = 2,
                       .drops = drops,
                       .ndrops = 1};
  xds_cluster cl = {.type = XDS_CLUSTER_EDS,
                    .lb = {.kind = XDS_LB_ROUND_ROBIN}};
  grit_xds_lb_tree *t;
  grit_err rv = grit_xds_lb_tree_build("svc", &cl, &eds, &t);
  if (rv == GRIT_OK)
    grit_xds_lb_tree_free(t);
  cl.lb.kind = XDS_LB_RING_HASH; /* the weighted lists */
  if (rv == GRIT_OK)
    rv = grit_xds_lb_tree_build("svc", &cl, &eds, &t);
  if (rv == GRIT_OK)
    grit_xds_lb_tree_free(t);
  return rv;
}

static void oom_sweep(const char *name, grit_err (*fn)(void)) {
  grit_set_allocator(&oom_alloc);
  atomic_store(&oom_fail_at, 0);
  atomic_store(&oom_count, 0);
  ASSERT_OK(fn());
  long total = atomic_load(&oom_count);
  ASSERT_CMP(total, >, 0);
  long nomem = 0;
  for (long i = 1; i <= total; i++) {
    atomic_store(&oom_count, 0);
    atomic_store(&oom_fail_at, i);
    grit_err rv = fn();
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

static void test_oom(void) {
  oom_sweep("xds cluster tree", tree_run);
  oom_sweep("tree from CDS+EDS", tree_build_run);
  uv_run(&g_loop, UV_RUN_DEFAULT);
}

int main(int argc, char **argv) {
  static const test_case tests[] = {
      {"priority_failover", test_priority_failover},
      {"priority_loop_timer", test_priority_loop_timer},
      {"weighted_target", test_weighted_target},
      {"cluster_impl_drops", test_cluster_impl_drops},
      {"cluster_impl_max_requests", test_cluster_impl_max_requests},
      {"tree_from_resources", test_tree_from_resources},
      {"oom", test_oom},
      {NULL, NULL},
  };
  uv_loop_init(&g_loop);
  grit_rng_seed(&g_rng, 27);
  int rv = test_main(tests, argc, argv);
  uv_run(&g_loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&g_loop) != 0)
    return 1;
  return rv;
}
