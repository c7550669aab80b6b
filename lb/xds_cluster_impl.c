/* xds_cluster_impl (SPEC XD-03; gRFC A27 drops, A32 circuit breaking, as
 * grpc-core's xds_cluster_impl.cc): above the cluster's priority policy.
 * Each pick first draws every EDS drop category in turn (a call is
 * dropped with probability per_million / 1e6 by the first category that
 * draws it), then checks the cluster's calls in flight against
 * max_requests (1024 unless CDS says otherwise) before the child picks:
 * a dropped call fails
 * UNAVAILABLE at once, wait-for-ready or not, and is counted. A call
 * counts as in flight from its pick until its stream ends; the counter is
 * shared with the calls, so replacing the policy cannot leak it. */
#include "lb/lb_int.h"

#include <stdio.h>
#include <string.h>

#define CI_DEFAULT_MAX_REQUESTS 1024U /* A32 */

typedef struct ci_counter {
  grit_pick_done done; /* first: a call's end hook */
  uint64_t refs;       /* atomic: the policy and each call in flight */
  uint64_t in_flight;  /* atomic */
} ci_counter;

typedef struct cluster_impl {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  grit_lb_kid *kid;
  ci_counter *counter;
  grit_lb_drop *drops; /* categories owned */
  size_t ndrops;
  uint32_t max_requests;
  char *cluster;
  uint64_t dropped, dropped_max; /* atomic */
  char msg[300];
} cluster_impl;

static void counter_unref(ci_counter *c) {
  if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
    grit_free(c);
}

static void ci_call_done(grit_pick_done *d) {
  ci_counter *c = GRIT_CONTAINER_OF(d, ci_counter, done);
  __atomic_sub_fetch(&c->in_flight, 1, __ATOMIC_RELAXED);
  counter_unref(c);
}

static void ci_on_kid_state(grit_lb_kid *k) {
  cluster_impl *ci = k->parent;
  ci->h.update_state(ci->h.ctx, k->state);
}

static grit_err ci_create(const grit_subchannel_args *a,
                          const grit_lb_helper *h, grit_lb_policy **out) {
  cluster_impl *ci = grit_calloc(1, sizeof(*ci));
  ci_counter *c = grit_calloc(1, sizeof(*c));
  if (!ci || !c) {
    grit_free(ci);
    grit_free(c);
    *out = NULL;
    return GRIT_ERR_NOMEM;
  }
  ci->base.vt = &grit_lb_xds_cluster_impl;
  ci->a = *a;
  ci->h = *h;
  c->refs = 1;
  c->done.fn = ci_call_done;
  ci->counter = c;
  ci->max_requests = CI_DEFAULT_MAX_REQUESTS;
  *out = &ci->base;
  return GRIT_OK;
}

static void drops_free(grit_lb_drop *d, size_t n) {
  for (size_t i = 0; d && i < n; i++)
    grit_free((char *)d[i].category);
  grit_free(d);
}

static grit_err ci_update_node(grit_lb_policy *p, const grit_lb_node *n) {
  cluster_impl *ci = (cluster_impl *)p;
  if (n->nchildren != 1)
    return GRIT_ERR_INVALID_ARG;
  grit_lb_drop *drops =
      n->ndrops ? grit_calloc(n->ndrops, sizeof(*drops)) : NULL;
  char *cluster = grit_strdup(n->cluster ? n->cluster : "");
  bool ok = cluster && (!n->ndrops || drops);
  for (size_t i = 0; ok && i < n->ndrops; i++) {
    drops[i].per_million = n->drops[i].per_million;
    drops[i].category =
        grit_strdup(n->drops[i].category ? n->drops[i].category : "");
    ok = drops[i].category != NULL;
  }
  if (!ok) {
    drops_free(drops, n->ndrops);
    grit_free(cluster);
    return GRIT_ERR_NOMEM;
  }
  drops_free(ci->drops, ci->ndrops);
  grit_free(ci->cluster);
  ci->drops = drops;
  ci->ndrops = n->ndrops;
  ci->cluster = cluster;
  ci->max_requests =
      n->max_requests ? n->max_requests : CI_DEFAULT_MAX_REQUESTS;
  if (!ci->kid) {
    ci->kid = grit_lb_kid_new(n->children[0].name, &ci->h, ci_on_kid_state, ci);
    if (!ci->kid)
      return GRIT_ERR_NOMEM;
  }
  grit_err rv = grit_lb_kid_update(ci->kid, &ci->a, n->children[0].node);
  if (rv != GRIT_OK && !ci->kid->p) {
    grit_lb_kid_free(ci->kid);
    ci->kid = NULL;
  }
  return rv;
}

static void ci_exit_idle(grit_lb_policy *p) {
  cluster_impl *ci = (cluster_impl *)p;
  if (ci->kid) {
    ci->kid->started = true;
    ci->kid->p->vt->exit_idle(ci->kid->p);
  }
}

static grit_pick_result ci_pick(grit_lb_policy *p, const grit_pick_args *args) {
  cluster_impl *ci = (cluster_impl *)p;
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  /* A27: every category draws once per call, in order. */
  for (size_t i = 0; i < ci->ndrops; i++) {
    if (grit_rng_below(ci->a.rng, 1000000) < ci->drops[i].per_million) {
      __atomic_add_fetch(&ci->dropped, 1, __ATOMIC_RELAXED);
      snprintf(ci->msg, sizeof(ci->msg),
               "dropped by xDS drop config: cluster %s, category %s",
               ci->cluster, ci->drops[i].category);
      r.kind = GRIT_PICK_DROP;
      r.code = GRIT_STATUS_UNAVAILABLE;
      r.message = ci->msg;
      return r;
    }
  }
  /* A32, as grpc-core: over the limit the call fails before the child
   * is asked. */
  ci_counter *c = ci->counter;
  if (__atomic_load_n(&c->in_flight, __ATOMIC_RELAXED) >= ci->max_requests) {
    __atomic_add_fetch(&ci->dropped_max, 1, __ATOMIC_RELAXED);
    snprintf(ci->msg, sizeof(ci->msg),
             "dropped by circuit breaker: cluster %s has %u calls in flight "
             "(max_requests)",
             ci->cluster, ci->max_requests);
    r.kind = GRIT_PICK_DROP;
    r.code = GRIT_STATUS_UNAVAILABLE;
    r.message = ci->msg;
    return r;
  }
  if (!ci->kid)
    return r;
  r = ci->kid->p->vt->pick(ci->kid->p, args);
  if (r.kind != GRIT_PICK_COMPLETE)
    return r;
  __atomic_add_fetch(&c->in_flight, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  r.done = &c->done;
  return r;
}

void grit_lb_xds_cluster_impl_stats(const grit_lb_policy *p,
                                    grit_lb_cluster_stats *out) {
  const cluster_impl *ci = (const cluster_impl *)p;
  out->dropped = __atomic_load_n(&ci->dropped, __ATOMIC_RELAXED);
  out->dropped_max_requests =
      __atomic_load_n(&ci->dropped_max, __ATOMIC_RELAXED);
  out->in_flight = __atomic_load_n(&ci->counter->in_flight, __ATOMIC_RELAXED);
}

static void ci_on_call_result(grit_lb_policy *p, const grit_addr *peer, bool ok,
                              const grit_orca_report *report) {
  const cluster_impl *ci = (const cluster_impl *)p;
  grit_lb_kids_call_result(&ci->kid, ci->kid ? 1 : 0, peer, ok, report);
}

static bool ci_wants_load_reports(const grit_lb_policy *p) {
  const cluster_impl *ci = (const cluster_impl *)p;
  return grit_lb_kids_want_load_reports(&ci->kid, ci->kid ? 1 : 0);
}

static void ci_destroy(grit_lb_policy *p) {
  cluster_impl *ci = (cluster_impl *)p;
  if (!ci)
    return;
  grit_lb_kid_free(ci->kid);
  drops_free(ci->drops, ci->ndrops);
  grit_free(ci->cluster);
  counter_unref(ci->counter);
  grit_free(ci);
}

const grit_lb_policy_vtable grit_lb_xds_cluster_impl = {
    .name = "xds_cluster_impl_experimental",
    .create = ci_create,
    .update_addresses = grit_lb_node_update_addresses,
    .exit_idle = ci_exit_idle,
    .pick = ci_pick,
    .destroy = ci_destroy,
    .on_call_result = ci_on_call_result,
    .wants_load_reports = ci_wants_load_reports,
    .update_node = ci_update_node,
};
