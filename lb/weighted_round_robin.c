/* weighted_round_robin (SPEC LP-02; gRFC A58): round_robin's connection
 * handling (a subchannel per address, each reconnecting on its own, health
 * honoured) with picks spread by weights the backends' ORCA load reports
 * give (LP-01): weight = qps / (utilization + eps / qps x
 * errorUtilizationPenalty), utilization being application_utilization
 * when set, else cpu_utilization. Reports come from each call's trailer,
 * or, with enableOobLoadReport, from an OOB stream per READY subchannel.
 *
 * A weight counts only after the backend has reported for blackoutPeriod
 * (counted from its first report since it last became READY or since its
 * weight expired) and until weightExpirationPeriod passes without a report.
 * Every weightUpdatePeriod (and whenever the READY set changes) the
 * weights of the READY subchannels go into a static stride scheduler
 * (stride.c) whose picks are O(1) and need only a sequence counter; with
 * fewer than two known weights picks are round robin. Per-endpoint weight
 * state is kept by address across address updates, as grpc-core keeps it.
 */
#include "lb/lb_int.h"

#include <stdio.h>
#include <string.h>

#define WRR_NEVER UINT64_MAX

typedef struct wrr wrr;

typedef struct wrr_ep {
  wrr *owner;
  char addr[120];
  double weight;            /* last computed; 0: none */
  uint64_t non_empty_since; /* loop ms of the first report; WRR_NEVER */
  uint64_t last_update;     /* loop ms of the last report used */
  grit_orca_watch *oob;     /* while READY with enableOobLoadReport */
  float used;               /* the weight the scheduler has */
  char detail[96];          /* what a pick of it says */
} wrr_ep;

struct wrr {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  grit_lb_params cfg;
  grit_lb_sclist list;
  wrr_ep *eps;     /* parallel to |list| */
  uint32_t *slots; /* address hash table: index + 1, 0 empty */
  size_t nslots;   /* a power of two, >= 2n */
  size_t *ready;   /* indices of READY endpoints, |nready| of them */
  size_t nready;
  grit_stride_sched sched; /* over |ready|; weights NULL: round robin */
  uint32_t seq;
  size_t cursor;
  bool started;
  bool updating; /* connecting them all: rebuild and publish at the end */
  grit_connectivity_state state;
  uv_timer_t *timer; /* weightUpdatePeriod; freed in its close callback */
  char error[300];
  char why[1024]; /* a failed pick's message, issue 28 */
  grit_lb_skipcache skipped;
};

static const grit_lb_policy_vtable *wrr_vt(void);

/* ---- the address index (per-call reports name their peer) ---- */

static size_t wrr_slot_of(const wrr *w, const char *addr) {
  size_t len = strlen(addr);
  return (size_t)grit_xxh64(addr, len, 0) & (w->nslots - 1);
}

/* The endpoint of |addr| among the |n| of the current table, or |n|. */
static size_t wrr_find(const wrr *w, size_t n, const char *addr) {
  if (!w->nslots)
    return n;
  for (size_t s = wrr_slot_of(w, addr);; s = (s + 1) & (w->nslots - 1)) {
    uint32_t v = w->slots[s];
    if (v == 0)
      return n;
    if (strcmp(w->eps[v - 1].addr, addr) == 0)
      return v - 1;
  }
}

/* ---- weights (A58) ---- */

static double wrr_weight_now(const wrr *w, wrr_ep *e, uint64_t now) {
  if (e->non_empty_since == WRR_NEVER)
    return 0;
  if (now - e->last_update >= w->cfg.wrr.expiration_ms) {
    e->non_empty_since = WRR_NEVER; /* blackout again when reports resume */
    return 0;
  }
  if (w->cfg.wrr.blackout_ms > 0 &&
      now - e->non_empty_since < w->cfg.wrr.blackout_ms)
    return 0;
  return e->weight;
}

static void wrr_on_report(wrr *w, wrr_ep *e, const grit_orca_report *r) {
  double util = r->application_utilization > 0 ? r->application_utilization
                                               : r->cpu_utilization;
  double qps = r->rps_fractional, eps = r->eps;
  double weight = 0;
  if (qps > 0 && util > 0) {
    double penalty = 0;
    if (eps > 0 && w->cfg.wrr.error_penalty > 0)
      penalty = eps / qps * w->cfg.wrr.error_penalty;
    weight = qps / (util + penalty);
  }
  if (!(weight > 0))
    return; /* A58: a report without qps or utilization changes nothing */
  uint64_t now = uv_now(w->a.loop);
  if (e->non_empty_since == WRR_NEVER)
    e->non_empty_since = now;
  e->last_update = now;
  e->weight = weight;
}

/* The READY endpoints and their scheduler, from the weights as of now. */
static void wrr_rebuild(wrr *w) {
  uint64_t now = uv_now(w->a.loop);
  size_t nr = 0;
  for (size_t i = 0; i < w->list.n; i++) {
    if (grit_subchannel_transport(w->list.scs[i]))
      w->ready[nr++] = i;
  }
  w->nready = nr;
  float *fw = grit_calloc(nr ? nr : 1, sizeof(*fw));
  grit_stride_sched fresh = {0};
  if (fw) {
    for (size_t k = 0; k < nr; k++) {
      wrr_ep *e = &w->eps[w->ready[k]];
      fw[k] = (float)wrr_weight_now(w, e, now);
      e->used = fw[k];
    }
    if (grit_stride_sched_build(fw, nr, &fresh) != GRIT_OK)
      fresh = (grit_stride_sched){0}; /* out of memory: round robin */
  }
  double total = 0;
  for (size_t k = 0; fw && k < nr; k++)
    total += fw[k];
  for (size_t k = 0; k < nr; k++) {
    wrr_ep *e = &w->eps[w->ready[k]];
    if (fresh.weights)
      snprintf(e->detail, sizeof(e->detail),
               "weighted_round_robin: weight %.4g (%.3g%% of picks)",
               (double)e->used,
               e->used > 0 ? 100.0 * e->used / total
                           : 100.0 * fresh.weights[k] / 65535.0 / (double)nr);
    else
      snprintf(e->detail, sizeof(e->detail),
               "weighted_round_robin: round robin (%s)",
               e->used > 0 ? "fewer than two weights known" : "no weight yet");
  }
  grit_free(fw);
  grit_stride_sched_free(&w->sched);
  w->sched = fresh;
}

static void wrr_timer_fire(uv_timer_t *t) {
  wrr_rebuild(t->data);
}

/* ---- OOB reports (A51) ---- */

/* |e| lives in the policy's array; its watch is stopped before the array
 * is replaced, so |e| is current here. */
static void wrr_on_oob(const grit_orca_report *r, void *ud) {
  wrr_ep *e = ud;
  wrr_on_report(e->owner, e, r);
}

static void wrr_oob_update(wrr *w, size_t i) {
  wrr_ep *e = &w->eps[i];
  grit_transport *t = grit_subchannel_transport(w->list.scs[i]);
  bool want = w->cfg.wrr.enable_oob && t;
  if (!want && e->oob) {
    grit_orca_watch_stop(e->oob);
    e->oob = NULL;
  } else if (want && !e->oob) {
    if (grit_orca_watch_start(&w->a, t, w->cfg.wrr.oob_period_ms, e->addr,
                              wrr_on_oob, e, &e->oob) != GRIT_OK)
      e->oob = NULL; /* out of memory: per-call weights stay unknown */
  }
}

/* ---- connections and state (as round_robin, LB-02) ---- */

static void wrr_publish(wrr *w) {
  grit_connectivity_state s = grit_lb_sclist_aggregate(&w->list);
  w->skipped.valid = false;
  if (s == GRIT_STATE_IDLE && w->started)
    s = GRIT_STATE_CONNECTING;
  w->state = s;
  w->h.update_state(w->h.ctx, s);
}

static void wrr_on_sc_state(grit_subchannel *sc, grit_connectivity_state s,
                            void *ud) {
  wrr *w = ud;
  grit_lb_sc_changed(sc, s, &w->h, w->started, w->error, sizeof(w->error));
  /* Issue 27: while an update or exit_idle connects them all (none gets
   * READY before it returns), the list is rebuilt and published once at
   * its end rather than once per subchannel. */
  if (w->updating)
    return;
  size_t i = grit_lb_sclist_index(&w->list, sc);
  if (i < w->list.n) {
    /* A58: a backend that becomes READY starts its blackout afresh. */
    if (s == GRIT_STATE_READY)
      w->eps[i].non_empty_since = WRR_NEVER;
    wrr_oob_update(w, i);
  }
  wrr_rebuild(w);
  wrr_publish(w);
}

static grit_err wrr_create(const grit_subchannel_args *a,
                           const grit_lb_helper *h, grit_lb_policy **out) {
  wrr *w = grit_calloc(1, sizeof(*w));
  uv_timer_t *t = grit_calloc(1, sizeof(*t));
  *out = NULL;
  if (!w || !t) {
    grit_free(w);
    grit_free(t);
    return GRIT_ERR_NOMEM;
  }
  w->base.vt = wrr_vt();
  w->a = *a;
  w->a.health_applies = true; /* as round_robin (HC-01) */
  w->h = *h;
  grit_lb_params_default(&w->cfg);
  w->state = GRIT_STATE_IDLE;
  w->seq = grit_rng_below(a->rng, UINT32_MAX);
  w->timer = t;
  uv_timer_init(a->loop, t);
  t->data = w;
  uv_timer_start(t, wrr_timer_fire, w->cfg.wrr.update_ms, w->cfg.wrr.update_ms);
  *out = &w->base;
  return GRIT_OK;
}

static grit_err wrr_configure(grit_lb_policy *p, const grit_lb_params *params) {
  wrr *w = (wrr *)p;
  bool oob_changed = params->wrr.enable_oob != w->cfg.wrr.enable_oob ||
                     params->wrr.oob_period_ms != w->cfg.wrr.oob_period_ms;
  bool period_changed = params->wrr.update_ms != w->cfg.wrr.update_ms;
  w->cfg.wrr = params->wrr;
  if (period_changed)
    uv_timer_start(w->timer, wrr_timer_fire, w->cfg.wrr.update_ms,
                   w->cfg.wrr.update_ms);
  for (size_t i = 0; oob_changed && i < w->list.n; i++) {
    grit_orca_watch_stop(w->eps[i].oob); /* restart with the new period */
    w->eps[i].oob = NULL;
    wrr_oob_update(w, i);
  }
  wrr_rebuild(w);
  return GRIT_OK;
}

static void wrr_connect_all(wrr *w) {
  w->updating = true;
  for (size_t i = 0; i < w->list.n; i++)
    grit_subchannel_connect(w->list.scs[i]);
  w->updating = false;
}

static grit_err wrr_update(grit_lb_policy *p, const grit_addr *addrs, size_t n,
                           bool shuffle) {
  wrr *w = (wrr *)p;
  (void)shuffle;
  size_t nslots = 4;
  while (nslots < 2 * n)
    nslots *= 2;
  wrr_ep *eps = grit_calloc(n ? n : 1, sizeof(*eps));
  uint32_t *slots = grit_calloc(nslots, sizeof(*slots));
  size_t *ready = grit_calloc(n ? n : 1, sizeof(*ready));
  if (!eps || !slots || !ready) {
    grit_free(eps);
    grit_free(slots);
    grit_free(ready);
    return GRIT_ERR_NOMEM;
  }
  /* OOB watches stop first (their subchannels may go) and restart on
   * the new entries. */
  size_t oldn = w->list.n;
  for (size_t i = 0; i < oldn; i++) {
    grit_orca_watch_stop(w->eps[i].oob);
    w->eps[i].oob = NULL;
  }
  grit_lb_sclist fresh;
  grit_err rv = grit_lb_sclist_reconcile(&w->list, addrs, n, &w->a,
                                         wrr_on_sc_state, w, &fresh);
  if (rv != GRIT_OK) {
    grit_free(eps);
    grit_free(slots);
    grit_free(ready);
    return rv; /* watches restart on the next READY */
  }
  /* Weights survive by address (A58, as grpc-core). */
  for (size_t i = 0; i < n; i++) {
    wrr_ep *e = &eps[i];
    e->owner = w;
    grit_str_copy(e->addr, sizeof(e->addr), addrs[i].text);
    size_t old = wrr_find(w, oldn, addrs[i].text);
    if (old < oldn) {
      e->weight = w->eps[old].weight;
      e->non_empty_since = w->eps[old].non_empty_since;
      e->last_update = w->eps[old].last_update;
    } else {
      e->non_empty_since = WRR_NEVER;
    }
    size_t s = (size_t)grit_xxh64(e->addr, strlen(e->addr), 0) & (nslots - 1);
    while (slots[s])
      s = (s + 1) & (nslots - 1);
    slots[s] = (uint32_t)i + 1;
  }
  grit_free(w->eps);
  grit_free(w->slots);
  grit_free(w->ready);
  w->eps = eps;
  w->slots = slots;
  w->nslots = nslots;
  w->ready = ready;
  w->list = fresh;
  if (w->list.n)
    w->cursor = grit_rng_below(w->a.rng, (uint32_t)w->list.n);
  for (size_t i = 0; i < w->list.n; i++)
    wrr_oob_update(w, i);
  if (w->started)
    wrr_connect_all(w);
  wrr_rebuild(w);
  wrr_publish(w);
  return GRIT_OK;
}

static void wrr_exit_idle(grit_lb_policy *p) {
  wrr *w = (wrr *)p;
  w->started = true;
  wrr_connect_all(w);
  wrr_rebuild(w);
  wrr_publish(w);
}

static grit_pick_result wrr_pick(grit_lb_policy *p,
                                 const grit_pick_args *args) {
  wrr *w = (wrr *)p;
  (void)args;
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  r.skipped = grit_lb_skipped_cached(&w->list, &w->skipped);
  if (w->nready) {
    size_t k = w->sched.weights ? grit_stride_sched_pick(&w->sched, &w->seq)
                                : w->cursor++ % w->nready;
    size_t i = w->ready[k];
    grit_transport *t = grit_subchannel_transport(w->list.scs[i]);
    if (t) {
      r.kind = GRIT_PICK_COMPLETE;
      r.transport = t;
      r.detail = w->eps[i].detail;
      return r;
    }
  }
  if (!w->started)
    wrr_exit_idle(p);
  if (w->state == GRIT_STATE_TRANSIENT_FAILURE) {
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    /* Every backend and why it cannot take the call (issue 28). */
    r.message = w->list.n ? grit_lb_sclist_why_unusable(&w->list, w->why,
                                                        sizeof(w->why))
                          : w->error;
  }
  return r;
}

static void wrr_on_call_result(grit_lb_policy *p, const grit_addr *peer,
                               bool ok, const grit_orca_report *report) {
  wrr *w = (wrr *)p;
  (void)ok;
  if (!report || w->cfg.wrr.enable_oob)
    return; /* A58: with OOB reporting, per-call reports are not used */
  size_t i = wrr_find(w, w->list.n, peer->text);
  if (i < w->list.n)
    wrr_on_report(w, &w->eps[i], report);
}

static bool wrr_wants_load_reports(const grit_lb_policy *p) {
  return !((const wrr *)p)->cfg.wrr.enable_oob;
}

static void wrr_timer_closed(uv_handle_t *h) {
  grit_free(h);
}

static void wrr_destroy(grit_lb_policy *p) {
  wrr *w = (wrr *)p;
  if (!w)
    return;
  for (size_t i = 0; i < w->list.n; i++)
    grit_orca_watch_stop(w->eps[i].oob);
  grit_lb_sclist_free(&w->list);
  uv_close((uv_handle_t *)w->timer, wrr_timer_closed);
  grit_stride_sched_free(&w->sched);
  grit_free(w->eps);
  grit_free(w->slots);
  grit_free(w->ready);
  grit_free(w);
}

const grit_lb_policy_vtable grit_lb_weighted_round_robin = {
    .name = "weighted_round_robin",
    .create = wrr_create,
    .update_addresses = wrr_update,
    .exit_idle = wrr_exit_idle,
    .pick = wrr_pick,
    .destroy = wrr_destroy,
    .on_call_result = wrr_on_call_result,
    .configure = wrr_configure,
    .wants_load_reports = wrr_wants_load_reports,
};

static const grit_lb_policy_vtable *wrr_vt(void) {
  return &grit_lb_weighted_round_robin;
}
