/* pick_first (SPEC LB-01): try addresses in order, starting the next one
 * 250 ms into an attempt without cancelling it (Happy Eyeballs); the first
 * READY wins. TRANSIENT_FAILURE is sticky until one becomes READY. When the
 * chosen connection drops the policy goes IDLE and reconnects on the next
 * pick. */
#include "lb/lb_int.h"

#include <stdio.h>

#define PF_HAPPY_EYEBALLS_MS 250

typedef struct pick_first {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  grit_lb_sclist list;
  grit_subchannel *selected;
  size_t next; /* next address to try in this pass */
  grit_connectivity_state state;
  bool connecting; /* a pass over the list is under way */
  uv_timer_t *he_timer;
  char error[300];
  grit_lb_skipcache skipped; /* issue 15 */
  char why[1024];            /* a failed pick's message, issue 28 */
} pick_first;

static void pf_set_state(pick_first *pf, grit_connectivity_state s) {
  if (pf->state == s)
    return;
  pf->state = s;
  pf->h.update_state(pf->h.ctx, s);
}

static void pf_he_fire(uv_timer_t *t);
static void pf_on_sc_state(grit_subchannel *sc, grit_connectivity_state s,
                           void *ud);

/* The pass is over when every address was tried and none is connecting:
 * from then on each subchannel reconnects as soon as its backoff ends. */
static bool pf_pass_exhausted(const pick_first *pf) {
  if (pf->next < pf->list.n)
    return false;
  for (size_t i = 0; i < pf->list.n; i++) {
    if (grit_subchannel_state(pf->list.scs[i]) == GRIT_STATE_CONNECTING)
      return false;
  }
  return true;
}

/* Start the next address of the pass, arming the Happy Eyeballs timer.
 * Addresses still in backoff are skipped; they rejoin when it ends. */
static void pf_try_next(pick_first *pf) {
  while (pf->connecting && !pf->selected && pf->next < pf->list.n) {
    grit_subchannel *sc = pf->list.scs[pf->next++];
    if (grit_subchannel_state(sc) == GRIT_STATE_IDLE) {
      if (pf->next < pf->list.n)
        uv_timer_start(pf->he_timer, pf_he_fire, PF_HAPPY_EYEBALLS_MS, 0);
      grit_subchannel_connect(sc); /* may fail at once and recurse */
      return;
    }
  }
}

static void pf_he_fire(uv_timer_t *t) {
  pf_try_next(t->data);
}

static void pf_start_pass(pick_first *pf) {
  pf->connecting = true;
  pf->next = 0;
  if (pf->state != GRIT_STATE_TRANSIENT_FAILURE) /* sticky TF */
    pf_set_state(pf, GRIT_STATE_CONNECTING);
  pf_try_next(pf);
  if (pf->connecting && !pf->selected && pf_pass_exhausted(pf)) {
    /* Nothing was IDLE: every address is in backoff. */
    pf_set_state(pf, GRIT_STATE_TRANSIENT_FAILURE);
  }
}

/* The winner keeps its connection; the other attempts of the pass are
 * abandoned (fresh IDLE subchannels take their places). */
static void pf_cancel_others(pick_first *pf) {
  for (size_t i = 0; i < pf->list.n; i++) {
    grit_subchannel *sc = pf->list.scs[i];
    grit_connectivity_state s = grit_subchannel_state(sc);
    if (sc == pf->selected ||
        (s != GRIT_STATE_CONNECTING && s != GRIT_STATE_READY))
      continue;
    grit_subchannel *fresh;
    if (grit_subchannel_create(&pf->a, grit_subchannel_addr(sc), pf_on_sc_state,
                               pf, &fresh) != GRIT_OK)
      continue; /* out of memory: keep the old one */
    grit_subchannel_destroy(sc);
    pf->list.scs[i] = fresh;
  }
}

static void pf_on_sc_state(grit_subchannel *sc, grit_connectivity_state s,
                           void *ud) {
  pick_first *pf = ud;
  pf->skipped.valid = false;
  if (pf->selected) {
    if (sc == pf->selected && s != GRIT_STATE_READY) {
      /* The chosen connection was lost (closed or GOAWAY): IDLE until the
       * next pick, and re-resolve (SPEC DNS-05). */
      pf->selected = NULL;
      pf->connecting = false;
      pf_set_state(pf, GRIT_STATE_IDLE);
      pf->h.request_reresolution(pf->h.ctx);
    }
    return;
  }
  if (!pf->connecting)
    return;
  switch (s) {
  case GRIT_STATE_READY:
    pf->selected = sc;
    pf->connecting = false;
    uv_timer_stop(pf->he_timer);
    pf_cancel_others(pf);
    pf_set_state(pf, GRIT_STATE_READY);
    return;
  case GRIT_STATE_TRANSIENT_FAILURE:
    snprintf(pf->error, sizeof(pf->error), "%s: %s",
             grit_subchannel_addr(sc)->text, grit_subchannel_error(sc));
    pf_try_next(pf); /* a failure starts the next address at once */
    if (pf->connecting && !pf->selected && pf_pass_exhausted(pf) &&
        pf->state != GRIT_STATE_TRANSIENT_FAILURE) {
      pf_set_state(pf, GRIT_STATE_TRANSIENT_FAILURE);
      pf->h.request_reresolution(pf->h.ctx);
    }
    return;
  case GRIT_STATE_IDLE:
    /* Backoff over. Within the pass pf_try_next reaches it; after the
     * pass it reconnects at once (sticky TF until one is READY). */
    if (pf->next >= pf->list.n)
      grit_subchannel_connect(sc);
    return;
  case GRIT_STATE_CONNECTING:
  case GRIT_STATE_SHUTDOWN:
    return;
  }
}

static grit_err pf_create(const grit_subchannel_args *a,
                          const grit_lb_helper *h, grit_lb_policy **out) {
  pick_first *pf = grit_calloc(1, sizeof(*pf));
  uv_timer_t *t = grit_calloc(1, sizeof(*t));
  if (!pf || !t) {
    grit_free(pf);
    grit_free(t);
    *out = NULL;
    return GRIT_ERR_NOMEM;
  }
  pf->base.vt = &grit_lb_pick_first;
  pf->a = *a;
  pf->h = *h;
  pf->state = GRIT_STATE_IDLE;
  pf->he_timer = t;
  uv_timer_init(a->loop, t);
  t->data = pf;
  *out = &pf->base;
  return GRIT_OK;
}

static void pf_shuffle(grit_addr *addrs, size_t n, grit_rng *rng) {
  for (size_t i = n; i > 1; i--) {
    size_t j = grit_rng_below(rng, (uint32_t)i);
    grit_addr tmp = addrs[i - 1];
    addrs[i - 1] = addrs[j];
    addrs[j] = tmp;
  }
}

static grit_err pf_update(grit_lb_policy *p, const grit_addr *addrs, size_t n,
                          bool shuffle) {
  pick_first *pf = (pick_first *)p;
  grit_addr *copy = grit_memdup(addrs, n * sizeof(*addrs));
  if (!copy)
    return GRIT_ERR_NOMEM;
  if (shuffle) /* SC-08: shuffleAddressList, per update */
    pf_shuffle(copy, n, pf->a.rng);
  grit_lb_sclist fresh;
  grit_err rv = grit_lb_sclist_reconcile(&pf->list, copy, n, &pf->a,
                                         pf_on_sc_state, pf, &fresh);
  grit_free(copy);
  if (rv != GRIT_OK)
    return rv;
  pf->list = fresh;
  pf->skipped.valid = false;
  if (pf->selected &&
      grit_lb_sclist_index(&pf->list, pf->selected) == pf->list.n)
    pf->selected = NULL; /* its address went away; it was destroyed */
  if (pf->selected)
    return GRIT_OK; /* its address is still listed: keep using it */
  /* Was in use or trying: start over on the new list. Still-connecting
   * attempts to kept addresses run on (pf_try_next skips them). */
  if (pf->connecting || pf->state == GRIT_STATE_READY ||
      pf->state == GRIT_STATE_TRANSIENT_FAILURE) {
    if (pf->list.n == 0) {
      pf->connecting = false;
      snprintf(pf->error, sizeof(pf->error), "empty address list");
      pf_set_state(pf, GRIT_STATE_TRANSIENT_FAILURE);
      return GRIT_OK;
    }
    pf_start_pass(pf);
  }
  return GRIT_OK;
}

static void pf_exit_idle(grit_lb_policy *p) {
  pick_first *pf = (pick_first *)p;
  if (!pf->selected && !pf->connecting && pf->list.n > 0)
    pf_start_pass(pf);
}

static grit_pick_result pf_pick(grit_lb_policy *p, const grit_pick_args *args) {
  (void)args;
  pick_first *pf = (pick_first *)p;
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  r.skipped = grit_lb_skipped_cached(&pf->list, &pf->skipped);
  if (pf->selected) {
    r.transport = grit_subchannel_transport(pf->selected);
    if (r.transport) {
      r.kind = GRIT_PICK_COMPLETE;
      r.detail = "pick_first"; /* LP: `grit call --attempts` */
      return r;
    }
  }
  if (pf->state == GRIT_STATE_TRANSIENT_FAILURE) {
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    /* Every address and why it cannot take the call (issue 28). */
    r.message = pf->list.n ? grit_lb_sclist_why_unusable(&pf->list, pf->why,
                                                         sizeof(pf->why))
                           : pf->error;
    return r;
  }
  pf_exit_idle(p);
  return r;
}

static void pf_timer_closed(uv_handle_t *h) {
  grit_free(h);
}

static void pf_destroy(grit_lb_policy *p) {
  pick_first *pf = (pick_first *)p;
  if (!pf)
    return;
  grit_lb_sclist_free(&pf->list);
  uv_close((uv_handle_t *)pf->he_timer, pf_timer_closed);
  grit_free(pf);
}

const grit_lb_policy_vtable grit_lb_pick_first = {
    .name = "pick_first",
    .create = pf_create,
    .update_addresses = pf_update,
    .exit_idle = pf_exit_idle,
    .pick = pf_pick,
    .destroy = pf_destroy,
};
