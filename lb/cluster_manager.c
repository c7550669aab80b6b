/* xds_cluster_manager_experimental (issue 27; gRFC A28, as grpc-core's
 * xds_cluster_manager.cc): one child policy per cluster the xDS routes (or
 * calls still running) use. A pick goes to the child the call's route
 * chose (grit_pick_args.cluster). The policy's state is READY if a child
 * is, else CONNECTING if one is, else IDLE if one is, else
 * TRANSIENT_FAILURE. Children come and go with grit_lb_cm_update only: the
 * xds resolver drops a cluster once no route names it and no call holds it
 * (docs/xds.md). Loop thread only. */
#include <string.h>

#include "lb/lb.h"

typedef struct cm_policy cm_policy;

typedef struct cm_child {
  cm_policy *cm;
  char *name;
  bool waiting;
  char *error;
  grit_lb_policy *p; /* NULL while waiting or failed */
  grit_connectivity_state state;
} cm_child;

struct cm_policy {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  cm_child **kids;
  size_t n;
  bool started;  /* exit_idle was called */
  bool updating; /* inside grit_lb_cm_update: publish once at its end */
};

static grit_connectivity_state cm_aggregate(const cm_policy *cm) {
  bool connecting = false, idle = false;
  for (size_t i = 0; i < cm->n; i++) {
    grit_connectivity_state s = cm->kids[i]->state;
    if (s == GRIT_STATE_READY)
      return GRIT_STATE_READY;
    connecting = connecting || s == GRIT_STATE_CONNECTING;
    idle = idle || s == GRIT_STATE_IDLE;
  }
  if (connecting)
    return GRIT_STATE_CONNECTING;
  if (idle || cm->n == 0)
    return GRIT_STATE_IDLE;
  return GRIT_STATE_TRANSIENT_FAILURE;
}

static void cm_publish(cm_policy *cm) {
  if (!cm->updating)
    cm->h.update_state(cm->h.ctx, cm_aggregate(cm));
}

static void kid_update_state(void *ctx, grit_connectivity_state s) {
  cm_child *k = ctx;
  k->state = s;
  cm_publish(k->cm);
}

static void kid_reresolve(void *ctx) {
  cm_child *k = ctx;
  k->cm->h.request_reresolution(k->cm->h.ctx);
}

static void kid_free(cm_child *k) {
  if (k->p)
    k->p->vt->destroy(k->p);
  grit_free(k->name);
  grit_free(k->error);
  grit_free(k);
}

static grit_err cm_create(const grit_subchannel_args *a,
                          const grit_lb_helper *h, grit_lb_policy **out) {
  cm_policy *cm = grit_calloc(1, sizeof(*cm));
  *out = NULL;
  if (!cm)
    return GRIT_ERR_NOMEM;
  cm->base.vt = &grit_lb_cluster_manager;
  cm->a = *a;
  cm->h = *h;
  *out = &cm->base;
  return GRIT_OK;
}

static grit_err cm_update_addresses(grit_lb_policy *p, const grit_addr *addrs,
                                    size_t n, bool shuffle) {
  /* Fed per cluster by grit_lb_cm_update only. */
  (void)p;
  (void)addrs;
  (void)n;
  (void)shuffle;
  return GRIT_ERR_INVALID_ARG;
}

static cm_child *cm_find(const cm_policy *cm, const char *name) {
  for (size_t i = 0; i < cm->n; i++)
    if (strcmp(cm->kids[i]->name, name) == 0)
      return cm->kids[i];
  return NULL;
}

/* Bring |k| to what |d| says. */
static grit_err kid_apply(cm_policy *cm, cm_child *k,
                          const grit_lb_cm_child *d) {
  k->waiting = d->waiting;
  grit_free(k->error);
  k->error = NULL;
  if (d->waiting || d->error) {
    if (d->error && !(k->error = grit_strdup(d->error)))
      return GRIT_ERR_NOMEM;
    if (k->p) { /* the cluster went away or broke: its connections drain */
      k->p->vt->destroy(k->p);
      k->p = NULL;
    }
    k->state =
        d->waiting ? GRIT_STATE_CONNECTING : GRIT_STATE_TRANSIENT_FAILURE;
    return GRIT_OK;
  }
  const grit_lb_policy_vtable *vt = d->tree ? grit_lb_node_vt(d->tree) : d->vt;
  if (k->p && k->p->vt != vt) {
    k->p->vt->destroy(k->p);
    k->p = NULL;
  }
  bool fresh = !k->p;
  if (fresh) {
    grit_lb_helper h = {.update_state = kid_update_state,
                        .request_reresolution = kid_reresolve,
                        .ctx = k};
    k->state = GRIT_STATE_IDLE;
    grit_err rv = vt->create(&cm->a, &h, &k->p);
    if (rv != GRIT_OK) {
      k->p = NULL;
      return rv;
    }
  }
  grit_err rv =
      k->p->vt->configure ? k->p->vt->configure(k->p, &d->params) : GRIT_OK;
  if (rv == GRIT_OK)
    rv = d->tree ? k->p->vt->update_node(k->p, d->tree)
                 : k->p->vt->update_addresses(k->p, d->addrs, d->naddrs, false);
  if (rv != GRIT_OK)
    return rv;
  if (cm->started)
    k->p->vt->exit_idle(k->p);
  return GRIT_OK;
}

grit_err grit_lb_cm_update(grit_lb_policy *p, const grit_lb_cm_child *kids,
                           size_t n) {
  cm_policy *cm = (cm_policy *)p;
  cm_child **next = grit_calloc(n ? n : 1, sizeof(*next));
  if (!next)
    return GRIT_ERR_NOMEM;
  grit_err rv = GRIT_OK;
  size_t made = 0;
  const grit_lb_cm_child **src = grit_calloc(n ? n : 1, sizeof(*src));
  if (!src) {
    grit_free(next);
    return GRIT_ERR_NOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    bool dup = false; /* a name listed twice: its first entry counts */
    for (size_t j = 0; j < made && !dup; j++)
      dup = strcmp(next[j]->name, kids[i].name) == 0;
    if (dup)
      continue;
    cm_child *k = cm_find(cm, kids[i].name);
    if (!k) {
      k = grit_calloc(1, sizeof(*k));
      if (!k || !(k->name = grit_strdup(kids[i].name))) {
        grit_free(k);
        rv = GRIT_ERR_NOMEM;
        break;
      }
      k->cm = cm;
      k->state = GRIT_STATE_CONNECTING;
    }
    src[made] = &kids[i];
    next[made++] = k;
  }
  if (rv != GRIT_OK) { /* free the new ones only; the old list stays */
    for (size_t i = 0; i < made; i++)
      if (!cm_find(cm, next[i]->name))
        kid_free(next[i]);
    grit_free(next);
    grit_free(src);
    return rv;
  }
  /* Children no longer listed go (their connections drain). */
  for (size_t i = 0; i < cm->n; i++) {
    bool kept = false;
    for (size_t j = 0; j < made && !kept; j++)
      kept = next[j] == cm->kids[i];
    if (!kept)
      kid_free(cm->kids[i]);
  }
  grit_free(cm->kids);
  cm->kids = next;
  cm->n = made;
  cm->updating = true;
  for (size_t i = 0; i < made; i++) {
    grit_err e = kid_apply(cm, next[i], src[i]);
    if (e != GRIT_OK)
      rv = e;
  }
  grit_free(src);
  cm->updating = false;
  cm_publish(cm);
  return rv;
}

static void cm_exit_idle(grit_lb_policy *p) {
  cm_policy *cm = (cm_policy *)p;
  cm->started = true;
  for (size_t i = 0; i < cm->n; i++)
    if (cm->kids[i]->p)
      cm->kids[i]->p->vt->exit_idle(cm->kids[i]->p);
}

static grit_pick_result cm_pick(grit_lb_policy *p, const grit_pick_args *args) {
  cm_policy *cm = (cm_policy *)p;
  grit_pick_result r = {.kind = GRIT_PICK_FAIL,
                        .code = GRIT_STATUS_UNAVAILABLE};
  const char *name = args && args->route ? args->route->cluster : NULL;
  cm_child *k = name ? cm_find(cm, name) : NULL;
  if (!k) {
    r.message = name ? "xds cluster manager picker: unknown cluster"
                     : "xds cluster manager picker: the call has no cluster";
    return r;
  }
  if (k->waiting) {
    r.kind = GRIT_PICK_QUEUE;
    return r;
  }
  if (k->error) {
    r.message = k->error;
    return r;
  }
  return k->p->vt->pick(k->p, args);
}

static void cm_destroy(grit_lb_policy *p) {
  cm_policy *cm = (cm_policy *)p;
  for (size_t i = 0; i < cm->n; i++)
    kid_free(cm->kids[i]);
  grit_free(cm->kids);
  grit_free(cm);
}

/* A50 counting and A51 reports are per address: every child that counts
 * is told (a child ignores a peer it does not serve). */
static void cm_on_call_result(grit_lb_policy *p, const grit_addr *peer, bool ok,
                              const grit_orca_report *report) {
  cm_policy *cm = (cm_policy *)p;
  for (size_t i = 0; i < cm->n; i++) {
    grit_lb_policy *c = cm->kids[i]->p;
    if (c && c->vt->on_call_result)
      c->vt->on_call_result(c, peer, ok, report);
  }
}

static bool cm_wants_load_reports(const grit_lb_policy *p) {
  const cm_policy *cm = (const cm_policy *)p;
  for (size_t i = 0; i < cm->n; i++) {
    const grit_lb_policy *c = cm->kids[i]->p;
    if (c && c->vt->wants_load_reports && c->vt->wants_load_reports(c))
      return true;
  }
  return false;
}

const grit_lb_policy_vtable grit_lb_cluster_manager = {
    .name = "xds_cluster_manager_experimental",
    .create = cm_create,
    .update_addresses = cm_update_addresses,
    .exit_idle = cm_exit_idle,
    .pick = cm_pick,
    .destroy = cm_destroy,
    .on_call_result = cm_on_call_result,
    .wants_load_reports = cm_wants_load_reports,
};
