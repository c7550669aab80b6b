/* weighted_target (SPEC XD-03; gRFC A27, as grpc-core's
 * weighted_target.cc): one child per target (an xDS locality) with a
 * weight. A pick draws a READY child with probability weight / (sum of the
 * READY children's weights) and asks that child. The state is READY if
 * any child is, else CONNECTING if any is, else IDLE if any is, else
 * TRANSIENT_FAILURE. A target gone from an update is dropped at once
 * (grpc-core keeps it 15 minutes; docs/xds.md). */
#include "lb/lb_int.h"

#include <string.h>

typedef struct wtarget {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  grit_lb_kid **kids;
  size_t nkids;
  /* The READY children and their running weight sums, rebuilt when a
   * child's state changes. */
  grit_lb_kid **ready;
  uint64_t *cum;
  size_t nready;
  grit_connectivity_state state;
  bool started; /* exit_idle came: children are started as they come */
  bool busy;
  bool destroying;
} wtarget;

static void wt_publish(wtarget *wt) {
  size_t m = 0;
  uint64_t sum = 0;
  bool connecting = false, idle = false;
  for (size_t i = 0; i < wt->nkids; i++) {
    grit_lb_kid *k = wt->kids[i];
    if (k->state == GRIT_STATE_READY && k->weight) {
      sum += k->weight;
      wt->ready[m] = k;
      wt->cum[m++] = sum;
    }
    connecting = connecting || k->state == GRIT_STATE_CONNECTING;
    idle = idle || k->state == GRIT_STATE_IDLE;
  }
  wt->nready = m;
  wt->state = m            ? GRIT_STATE_READY
              : connecting ? GRIT_STATE_CONNECTING
              : idle       ? GRIT_STATE_IDLE
                           : GRIT_STATE_TRANSIENT_FAILURE;
  wt->h.update_state(wt->h.ctx, wt->state);
}

static void wt_on_kid_state(grit_lb_kid *k) {
  wtarget *wt = k->parent;
  if (!wt->busy && !wt->destroying)
    wt_publish(wt);
}

static grit_err wt_create(const grit_subchannel_args *a,
                          const grit_lb_helper *h, grit_lb_policy **out) {
  wtarget *wt = grit_calloc(1, sizeof(*wt));
  *out = wt ? &wt->base : NULL;
  if (!wt)
    return GRIT_ERR_NOMEM;
  wt->base.vt = &grit_lb_weighted_target;
  wt->a = *a;
  wt->h = *h;
  wt->state = GRIT_STATE_CONNECTING;
  return GRIT_OK;
}

static grit_lb_kid *wt_take(wtarget *wt, const char *name) {
  for (size_t i = 0; i < wt->nkids; i++) {
    grit_lb_kid *k = wt->kids[i];
    if (k && strcmp(k->name, name) == 0) {
      wt->kids[i] = NULL;
      return k;
    }
  }
  return NULL;
}

static grit_err wt_update_node(grit_lb_policy *p, const grit_lb_node *n) {
  wtarget *wt = (wtarget *)p;
  size_t m = n->nchildren;
  grit_lb_kid **kids = grit_calloc(m ? m : 1, sizeof(*kids));
  grit_lb_kid **ready = grit_calloc(m ? m : 1, sizeof(*ready));
  uint64_t *cum = grit_calloc(m ? m : 1, sizeof(*cum));
  if (!kids || !ready || !cum) {
    grit_free(kids);
    grit_free(ready);
    grit_free(cum);
    return GRIT_ERR_NOMEM;
  }
  grit_err rv = GRIT_OK;
  wt->busy = true;
  size_t got = 0;
  for (size_t i = 0; i < m; i++) {
    const grit_lb_child_cfg *c = &n->children[i];
    grit_lb_kid *k = wt_take(wt, c->name);
    if (!k)
      k = grit_lb_kid_new(c->name, &wt->h, wt_on_kid_state, wt);
    if (!k) {
      rv = GRIT_ERR_NOMEM;
      continue;
    }
    k->weight = c->weight;
    grit_err e = grit_lb_kid_update(k, &wt->a, c->node);
    if (e != GRIT_OK && !k->p) {
      grit_lb_kid_free(k);
      rv = e;
      continue;
    }
    if (e != GRIT_OK)
      rv = e;
    if (wt->started && !k->started) {
      k->started = true;
      k->p->vt->exit_idle(k->p);
    }
    kids[got++] = k;
  }
  for (size_t i = 0; i < wt->nkids; i++) /* targets gone */
    grit_lb_kid_free(wt->kids[i]);
  grit_free(wt->kids);
  grit_free(wt->ready);
  grit_free(wt->cum);
  wt->kids = kids;
  wt->nkids = got;
  wt->ready = ready;
  wt->cum = cum;
  wt->busy = false;
  wt_publish(wt);
  return rv;
}

static void wt_exit_idle(grit_lb_policy *p) {
  wtarget *wt = (wtarget *)p;
  wt->started = true;
  wt->busy = true;
  for (size_t i = 0; i < wt->nkids; i++) {
    wt->kids[i]->started = true;
    wt->kids[i]->p->vt->exit_idle(wt->kids[i]->p);
  }
  wt->busy = false;
  wt_publish(wt);
}

static grit_pick_result wt_pick(grit_lb_policy *p, const grit_pick_args *args) {
  wtarget *wt = (wtarget *)p;
  if (wt->nready) {
    uint64_t total = wt->cum[wt->nready - 1];
    uint64_t r = grit_rng_next(wt->a.rng) % total;
    size_t lo = 0, hi = wt->nready - 1;
    while (lo < hi) { /* the first running sum above r */
      size_t mid = (lo + hi) / 2;
      if (wt->cum[mid] > r)
        hi = mid;
      else
        lo = mid + 1;
    }
    grit_lb_policy *c = wt->ready[lo]->p;
    return c->vt->pick(c, args);
  }
  if (wt->state == GRIT_STATE_TRANSIENT_FAILURE && wt->nkids) {
    grit_lb_policy *c = wt->kids[0]->p; /* its failure's message */
    return c->vt->pick(c, args);
  }
  if (wt->state == GRIT_STATE_IDLE)
    wt_exit_idle(p);
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  if (!wt->nkids) {
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    r.message = "weighted_target: no targets";
  }
  return r;
}

static void wt_on_call_result(grit_lb_policy *p, const grit_addr *peer, bool ok,
                              const grit_orca_report *report) {
  const wtarget *wt = (const wtarget *)p;
  grit_lb_kids_call_result(wt->kids, wt->nkids, peer, ok, report);
}

static bool wt_wants_load_reports(const grit_lb_policy *p) {
  const wtarget *wt = (const wtarget *)p;
  return grit_lb_kids_want_load_reports(wt->kids, wt->nkids);
}

static void wt_destroy(grit_lb_policy *p) {
  wtarget *wt = (wtarget *)p;
  if (!wt)
    return;
  wt->destroying = true;
  for (size_t i = 0; i < wt->nkids; i++)
    grit_lb_kid_free(wt->kids[i]);
  grit_free(wt->kids);
  grit_free(wt->ready);
  grit_free(wt->cum);
  grit_free(wt);
}

const grit_lb_policy_vtable grit_lb_weighted_target = {
    .name = "weighted_target_experimental",
    .create = wt_create,
    .update_addresses = grit_lb_node_update_addresses,
    .exit_idle = wt_exit_idle,
    .pick = wt_pick,
    .destroy = wt_destroy,
    .on_call_result = wt_on_call_result,
    .wants_load_reports = wt_wants_load_reports,
    .update_node = wt_update_node,
};
