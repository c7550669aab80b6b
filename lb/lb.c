/* Policy lookup, reconnect backoff arithmetic and the subchannel-list
 * reconciliation both policies use on address updates. */
#include "lb/lb_int.h"

#include <stdio.h>
#include <string.h>

const grit_lb_policy_vtable *grit_lb_find(const char *name) {
  static const grit_lb_policy_vtable *const all[] = {
      &grit_lb_pick_first,        &grit_lb_round_robin,
      &grit_lb_outlier_detection, &grit_lb_weighted_round_robin,
      &grit_lb_ring_hash,         &grit_lb_least_request};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    if (strcmp(all[i]->name, name) == 0)
      return all[i];
  }
  return NULL;
}

/* A58 and A42 defaults; least_request's choiceCount 2. */
void grit_lb_params_default(grit_lb_params *p) {
  *p = (grit_lb_params){
      .wrr =
          {
              .enable_oob = false,
              .oob_period_ms = 10000,
              .blackout_ms = 10000,
              .expiration_ms = 180000,
              .update_ms = 1000,
              .error_penalty = 1.0,
          },
      .min_ring_size = 1024,
      .max_ring_size = 4096,
      .request_hash_header = NULL,
      .choice_count = 2,
  };
}

/* SPEC CB-01: 1 s, then x1.6 up to the maximum. Jitter is applied by the
 * caller, so this stays a pure function of its inputs. */
uint64_t grit_lb_backoff_next_ms(uint64_t current_ms, uint64_t initial_ms,
                                 uint64_t max_ms, grit_rng *rng) {
  (void)rng;
  if (current_ms == 0)
    return initial_ms < max_ms ? initial_ms : max_ms;
  double next = (double)current_ms * 1.6 + 0.5;
  return next >= (double)max_ms ? max_ms : (uint64_t)next;
}

uint64_t grit_lb_backoff_jitter_ms(uint64_t ms, grit_rng *rng) {
  return (uint64_t)((double)ms * grit_rng_uniform(rng, 0.8, 1.2) + 0.5);
}

uint64_t grit_lb_keepalive_after_too_many_pings_ms(uint64_t keepalive_ms) {
  const uint64_t cap = INT32_MAX;
  if (keepalive_ms == 0)
    return 0;
  return keepalive_ms >= cap / 2 ? cap : keepalive_ms * 2;
}

const char *grit_lb_sclist_skipped(const grit_lb_sclist *l, char *buf,
                                   size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < l->n && used + 1 < len; i++) {
    const char *why = grit_subchannel_skip_reason(l->scs[i]);
    if (!why[0])
      continue;
    int w = snprintf(buf + used, len - used, "%s%s (%s)", used ? ", " : "",
                     grit_subchannel_addr(l->scs[i])->text, why);
    if (w < 0)
      break;
    used += (size_t)w < len - used ? (size_t)w : len - used - 1;
  }
  return used ? buf : NULL;
}

static const char *sclist_unusable_reason(const grit_subchannel *sc, char *buf,
                                          size_t len) {
  const char *why = grit_subchannel_skip_reason(sc);
  if (why[0])
    return why;
  switch (grit_subchannel_state(sc)) {
  case GRIT_STATE_TRANSIENT_FAILURE: {
    const char *err = grit_subchannel_error(sc);
    snprintf(buf, len, "transient failure: %s",
             err[0] ? err : "no error recorded");
    return buf;
  }
  case GRIT_STATE_CONNECTING:
    return "connecting";
  case GRIT_STATE_IDLE:
    return "idle";
  case GRIT_STATE_READY:
    return "ready";
  case GRIT_STATE_SHUTDOWN:
    return "shut down";
  }
  return "?";
}

const char *grit_lb_sclist_why_unusable(const grit_lb_sclist *l, char *buf,
                                        size_t len) {
  int w = snprintf(buf, len, "no usable backend among %zu address%s: ", l->n,
                   l->n == 1 ? "" : "es");
  size_t used = w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1;
  for (size_t i = 0; i < l->n && used + 1 < len; i++) {
    char tmp[300];
    const char *why = sclist_unusable_reason(l->scs[i], tmp, sizeof(tmp));
    w = snprintf(buf + used, len - used, "%s%s (%s)", i ? ", " : "",
                 grit_subchannel_addr(l->scs[i])->text, why);
    if (w < 0)
      break;
    used += (size_t)w < len - used ? (size_t)w : len - used - 1;
  }
  if (used + 1 >= len && len > 4)
    memcpy(buf + len - 4, "...", 4); /* truncated: say so */
  return buf;
}

const char *grit_lb_skipped_cached(const grit_lb_sclist *l,
                                   grit_lb_skipcache *c) {
  if (!c->valid) {
    c->text = grit_lb_sclist_skipped(l, c->buf, sizeof(c->buf));
    c->valid = true;
  }
  return c->text;
}

size_t grit_lb_sclist_index(const grit_lb_sclist *l,
                            const grit_subchannel *sc) {
  for (size_t i = 0; i < l->n; i++) {
    if (l->scs[i] == sc)
      return i;
  }
  return l->n;
}

/* |hint| first: an update that keeps the order of the addresses (an EDS
 * update changing a few of 1 000 endpoints) matches each in O(1), not by
 * a scan (issue 27). */
static grit_subchannel *take_matching(grit_lb_sclist *old, const grit_addr *a,
                                      size_t hint, size_t *from) {
  if (old && hint < old->n && old->scs[hint] &&
      strcmp(grit_subchannel_addr(old->scs[hint])->text, a->text) == 0) {
    grit_subchannel *sc = old->scs[hint];
    old->scs[hint] = NULL;
    *from = hint;
    return sc;
  }
  for (size_t i = 0; old && i < old->n; i++) {
    grit_subchannel *sc = old->scs[i];
    if (sc && strcmp(grit_subchannel_addr(sc)->text, a->text) == 0) {
      old->scs[i] = NULL;
      *from = i;
      return sc;
    }
  }
  return NULL;
}

grit_err grit_lb_sclist_reconcile(grit_lb_sclist *old, const grit_addr *addrs,
                                  size_t n, const grit_subchannel_args *a,
                                  grit_subchannel_state_cb cb, void *ud,
                                  grit_lb_sclist *out) {
  out->n = 0;
  out->scs = grit_calloc(n ? n : 1, sizeof(*out->scs));
  size_t *from = grit_calloc(n ? n : 1, sizeof(*from));
  if (!out->scs || !from) {
    grit_free(out->scs);
    grit_free(from);
    out->scs = NULL;
    return GRIT_ERR_NOMEM;
  }
  grit_err rv = GRIT_OK;
  for (size_t i = 0; i < n && rv == GRIT_OK; i++) {
    from[i] = SIZE_MAX;
    grit_subchannel *sc = take_matching(old, &addrs[i], i, &from[i]);
    if (!sc)
      rv = grit_subchannel_create(a, &addrs[i], cb, ud, &sc);
    if (rv == GRIT_OK)
      out->scs[out->n++] = sc;
  }
  if (rv != GRIT_OK) {
    /* Out of memory: |old| gets back what was taken from it, so it is
     * unchanged; only the new subchannels go. */
    for (size_t i = 0; i < out->n; i++) {
      if (from[i] != SIZE_MAX) {
        old->scs[from[i]] = out->scs[i];
        out->scs[i] = NULL;
      }
    }
    grit_free(from);
    grit_lb_sclist_free(out);
    return rv;
  }
  grit_free(from);
  grit_lb_sclist_free(old);
  return GRIT_OK;
}

void grit_lb_sclist_free(grit_lb_sclist *l) {
  if (!l)
    return;
  for (size_t i = 0; i < l->n; i++)
    grit_subchannel_destroy(l->scs[i]);
  grit_free(l->scs);
  l->scs = NULL;
  l->n = 0;
}

grit_connectivity_state grit_lb_sclist_aggregate(const grit_lb_sclist *l) {
  bool connecting = false, idle = false;
  for (size_t i = 0; i < l->n; i++) {
    switch (grit_subchannel_state(l->scs[i])) {
    case GRIT_STATE_READY:
      return GRIT_STATE_READY;
    case GRIT_STATE_CONNECTING:
      connecting = true;
      break;
    case GRIT_STATE_IDLE:
      idle = true;
      break;
    case GRIT_STATE_TRANSIENT_FAILURE:
    case GRIT_STATE_SHUTDOWN:
      break;
    }
  }
  if (connecting)
    return GRIT_STATE_CONNECTING;
  if (idle)
    return GRIT_STATE_IDLE;
  return l->n ? GRIT_STATE_TRANSIENT_FAILURE : GRIT_STATE_IDLE;
}

void grit_lb_sc_changed(grit_subchannel *sc, grit_connectivity_state s,
                        const grit_lb_helper *h, bool started, char *error,
                        size_t error_size) {
  if (s == GRIT_STATE_TRANSIENT_FAILURE)
    snprintf(error, error_size, "%s: %s", grit_subchannel_addr(sc)->text,
             grit_subchannel_error(sc));
  /* SPEC DNS-05: re-resolve on a failed connect, and on a lost connection
   * (closed or GOAWAY) even if the address still answers: the name may
   * have moved (as grpc-core, which re-resolves on IDLE too). */
  if (s == GRIT_STATE_TRANSIENT_FAILURE ||
      grit_subchannel_prev_state(sc) == GRIT_STATE_READY)
    h->request_reresolution(h->ctx);
  if (s == GRIT_STATE_IDLE && started)
    grit_subchannel_connect(sc); /* after backoff or a dropped connection */
}
