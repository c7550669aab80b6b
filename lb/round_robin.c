/* round_robin (SPEC LB-02): a subchannel per address, each reconnecting
 * with its own backoff; picks rotate over the READY ones. The channel state
 * is READY if any is READY, else CONNECTING if any, else IDLE if any, else
 * TRANSIENT_FAILURE. */
#include "lb/lb_int.h"

#include <stdio.h>

typedef struct round_robin {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  grit_lb_sclist list;
  size_t cursor;
  bool started;
  grit_connectivity_state state;
  char error[300];
  grit_lb_skipcache skipped; /* issue 15 */
  char why[1024];            /* a failed pick's message, issue 28 */
} round_robin;

static void rr_publish(round_robin *rr) {
  grit_connectivity_state s = grit_lb_sclist_aggregate(&rr->list);
  rr->skipped.valid = false; /* a subchannel or the list changed */
  if (s == GRIT_STATE_IDLE && rr->started)
    s = GRIT_STATE_CONNECTING; /* idle ones are reconnecting right now */
  /* Published even when unchanged: the set of READY subchannels moved, and
   * attempts queued on a connection that just died must pick again. */
  rr->state = s;
  rr->h.update_state(rr->h.ctx, s);
}

static void rr_on_sc_state(grit_subchannel *sc, grit_connectivity_state s,
                           void *ud) {
  round_robin *rr = ud;
  grit_lb_sc_changed(sc, s, &rr->h, rr->started, rr->error, sizeof(rr->error));
  rr_publish(rr);
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
  for (size_t i = 0; i < rr->list.n; i++)
    grit_subchannel_connect(rr->list.scs[i]);
}

static grit_err rr_update(grit_lb_policy *p, const grit_addr *addrs, size_t n,
                          bool shuffle) {
  round_robin *rr = (round_robin *)p;
  grit_lb_sclist fresh;
  grit_err rv = grit_lb_sclist_reconcile(&rr->list, addrs, n, &rr->a,
                                         rr_on_sc_state, rr, &fresh);
  if (rv != GRIT_OK)
    return rv;
  rr->list = fresh;
  if (rr->list.n)
    rr->cursor = grit_rng_below(rr->a.rng, (uint32_t)rr->list.n);
  if (rr->started)
    rr_connect_all(rr);
  rr_publish(rr);
  return GRIT_OK;
}

static void rr_exit_idle(grit_lb_policy *p) {
  round_robin *rr = (round_robin *)p;
  rr->started = true;
  rr_connect_all(rr);
  rr_publish(rr);
}

static grit_pick_result rr_pick(grit_lb_policy *p, const grit_pick_args *args) {
  (void)args;
  round_robin *rr = (round_robin *)p;
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  r.skipped = grit_lb_skipped_cached(&rr->list, &rr->skipped);
  for (size_t k = 0; k < rr->list.n; k++) {
    size_t i = (rr->cursor + k) % rr->list.n;
    grit_transport *t = grit_subchannel_transport(rr->list.scs[i]);
    if (t) {
      rr->cursor = i + 1;
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
