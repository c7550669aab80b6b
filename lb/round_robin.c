/* round_robin (SPEC LB-02): a subchannel per address, each reconnecting
 * with its own backoff; picks rotate over the READY ones. The channel state
 * is READY if any is READY, else CONNECTING if any, else IDLE if any, else
 * TRANSIENT_FAILURE.
 *
 * Issue 27 (1 000 endpoints in one update): as grpc-core's and grpc-js's
 * pickers, a pick rotates over a list of the READY subchannels, rebuilt
 * only when a subchannel enters or leaves READY; the other states are
 * counted, so a subchannel going through CONNECTING, TRANSIENT_FAILURE and
 * IDLE costs O(1) and is published only when the policy's state changes
 * (queued calls are not picked again for each of 1 000 reconnecting
 * endpoints). An update or exit_idle connects every subchannel, then
 * counts and publishes once. */
#include "lb/lb_int.h"

#include <stdio.h>

#define RR_NSTATES (GRIT_STATE_SHUTDOWN + 1)

typedef struct round_robin {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  grit_lb_sclist list;
  size_t *ready; /* indices in |list| of the subchannels with a READY
                    transport */
  size_t nready;
  size_t cursor;             /* the next pick's place in |ready| (modulo) */
  size_t counts[RR_NSTATES]; /* subchannels of |list| per state shown */
  bool updating;             /* connecting them all: publish at the end */
  bool started;
  grit_connectivity_state state;
  char error[300];
  grit_lb_skipcache skipped; /* issue 15 */
  char why[1024];            /* a failed pick's message, issue 28 */
} round_robin;

/* List the READY subchannels again; returns whether the list changed
 * (attempts queued on a connection that just died must pick again). */
static bool rr_list_ready(round_robin *rr) {
  bool moved = false;
  size_t nr = 0;
  for (size_t i = 0; i < rr->list.n; i++) {
    if (grit_subchannel_transport(rr->list.scs[i])) {
      moved = moved || nr >= rr->nready || rr->ready[nr] != i;
      rr->ready[nr++] = i;
    }
  }
  moved = moved || nr != rr->nready;
  rr->nready = nr;
  return moved;
}

/* Count every subchannel's state and list the READY ones. */
static bool rr_recount(round_robin *rr) {
  for (int k = 0; k < RR_NSTATES; k++)
    rr->counts[k] = 0;
  for (size_t i = 0; i < rr->list.n; i++)
    rr->counts[grit_subchannel_state(rr->list.scs[i])]++;
  return rr_list_ready(rr);
}

/* The state (grit_lb_sclist_aggregate's rule, from the counts), published
 * when |force|d, when it changed or when the READY list |moved|. */
static void rr_publish(round_robin *rr, bool force, bool moved) {
  grit_connectivity_state s =
      rr->nready                               ? GRIT_STATE_READY
      : rr->counts[GRIT_STATE_CONNECTING] != 0 ? GRIT_STATE_CONNECTING
      : rr->counts[GRIT_STATE_IDLE] != 0       ? GRIT_STATE_IDLE
      : rr->list.n                             ? GRIT_STATE_TRANSIENT_FAILURE
                                               : GRIT_STATE_IDLE;
  if (s == GRIT_STATE_IDLE && rr->started)
    s = GRIT_STATE_CONNECTING; /* idle ones are reconnecting right now */
  if (!force && !moved && s == rr->state)
    return;
  rr->state = s;
  rr->h.update_state(rr->h.ctx, s);
}

static void rr_on_sc_state(grit_subchannel *sc, grit_connectivity_state s,
                           void *ud) {
  round_robin *rr = ud;
  if (rr->updating) { /* counted and published at the end */
    grit_lb_sc_changed(sc, s, &rr->h, rr->started, rr->error,
                       sizeof(rr->error));
    return;
  }
  /* Counted before grit_lb_sc_changed, which may reconnect |sc| (a nested
   * callback from IDLE to CONNECTING). */
  grit_connectivity_state prev = grit_subchannel_prev_state(sc);
  bool moved;
  if (rr->counts[prev] == 0) { /* not counted as |prev|: count again */
    moved = rr_recount(rr);
  } else {
    rr->counts[prev]--;
    rr->counts[s]++;
    moved = (prev == GRIT_STATE_READY || s == GRIT_STATE_READY) &&
            rr_list_ready(rr);
  }
  /* The skipped text (connected but not picked: health, ejection) walks
   * the list: it stays valid while it names nobody and |sc| joins it not
   * (a reconnecting endpoint among 1 000). */
  if (rr->skipped.text || grit_subchannel_skip_reason(sc)[0])
    rr->skipped.valid = false;
  grit_lb_sc_changed(sc, s, &rr->h, rr->started, rr->error, sizeof(rr->error));
  rr_publish(rr, false, moved);
}

static grit_err rr_create(const grit_subchannel_args *a,
                          const grit_lb_helper *h, grit_lb_policy **out) {
  round_robin *rr = grit_calloc(1, sizeof(*rr));
  *out = rr ? &rr->base : NULL;
  if (!rr)
    return GRIT_ERR_NOMEM;
  rr->base.vt = &grit_lb_round_robin;
  rr->a = *a;
  rr->a.health_applies = true; /* SPEC HC-01: round_robin honours health */
  rr->h = *h;
  rr->state = GRIT_STATE_IDLE;
  return GRIT_OK;
}

static void rr_connect_all(round_robin *rr) {
  rr->updating = true;
  for (size_t i = 0; i < rr->list.n; i++)
    grit_subchannel_connect(rr->list.scs[i]);
  rr->updating = false;
}

static grit_err rr_update(grit_lb_policy *p, const grit_addr *addrs, size_t n,
                          bool shuffle) {
  round_robin *rr = (round_robin *)p;
  size_t *ready = grit_malloc((n ? n : 1) * sizeof(*ready));
  if (!ready)
    return GRIT_ERR_NOMEM;
  grit_lb_sclist fresh;
  grit_err rv = grit_lb_sclist_reconcile(&rr->list, addrs, n, &rr->a,
                                         rr_on_sc_state, rr, &fresh);
  if (rv != GRIT_OK) {
    grit_free(ready);
    return rv;
  }
  grit_free(rr->ready);
  rr->ready = ready;
  rr->nready = 0;
  rr->list = fresh;
  if (rr->list.n)
    rr->cursor = grit_rng_below(rr->a.rng, (uint32_t)rr->list.n);
  if (rr->started)
    rr_connect_all(rr);
  rr->skipped.valid = false; /* the list changed */
  rr_publish(rr, true, rr_recount(rr));
  return GRIT_OK;
}

static void rr_exit_idle(grit_lb_policy *p) {
  round_robin *rr = (round_robin *)p;
  rr->started = true;
  rr_connect_all(rr);
  rr->skipped.valid = false;
  rr_publish(rr, true, rr_recount(rr));
}

static grit_pick_result rr_pick(grit_lb_policy *p, const grit_pick_args *args) {
  (void)args;
  round_robin *rr = (round_robin *)p;
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  r.skipped = grit_lb_skipped_cached(&rr->list, &rr->skipped);
  if (rr->nready) {
    size_t k = rr->cursor % rr->nready;
    grit_transport *t = grit_subchannel_transport(rr->list.scs[rr->ready[k]]);
    if (t) {
      rr->cursor = k + 1;
      r.kind = GRIT_PICK_COMPLETE;
      r.transport = t;
      r.detail = "round_robin"; /* LP: `grit call --attempts` */
      return r;
    }
  }
  if (!rr->started)
    rr_exit_idle(p);
  if (rr->state == GRIT_STATE_TRANSIENT_FAILURE) {
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    /* Every backend and why it cannot take the call (issue 28). */
    r.message = rr->list.n ? grit_lb_sclist_why_unusable(&rr->list, rr->why,
                                                         sizeof(rr->why))
                           : rr->error;
  }
  return r;
}

static void rr_destroy(grit_lb_policy *p) {
  round_robin *rr = (round_robin *)p;
  if (!rr)
    return;
  grit_lb_sclist_free(&rr->list);
  grit_free(rr->ready);
  grit_free(rr);
}

const grit_lb_policy_vtable grit_lb_round_robin = {
    .name = "round_robin",
    .create = rr_create,
    .update_addresses = rr_update,
    .exit_idle = rr_exit_idle,
    .pick = rr_pick,
    .destroy = rr_destroy,
};
