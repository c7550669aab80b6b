/* least_request_experimental (SPEC LP-04), as grpc-java and grpc-go have
 * it: round_robin's connection handling (a subchannel per address, each
 * reconnecting on its own, health honoured), and each pick draws
 * choiceCount READY subchannels at random (with replacement, as
 * grpc-java) and takes the one with the fewest calls outstanding.
 *
 * Outstanding calls are the streams open on the subchannel's connection
 * (grit_transport_stream_count): a call counts from the moment the pick's
 * stream starts, which channel/ does right after the pick, until the
 * stream ends, however it ends (status, cancel, reset, GOAWAY), so the
 * count cannot leak or go stale when a policy is replaced while calls
 * are in flight. A health Watch stream counts on every subchannel alike. */
#include "lb/lb_int.h"

#include <stdio.h>
#include <string.h>

typedef struct least_request {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  grit_lb_sclist list;
  size_t *ready; /* indices of subchannels with a READY transport */
  size_t nready;
  uint32_t choice_count;
  bool updating; /* connecting them all: publish once at the end */
  bool started;
  grit_connectivity_state state;
  char error[300];
  char why[1024]; /* a failed pick's message, issue 28 */
  grit_lb_skipcache skipped;
  char detail[96];
} least_request;

static const grit_lb_policy_vtable *lr_vt(void);

static void lr_collect_ready(least_request *lr) {
  size_t nr = 0;
  for (size_t i = 0; i < lr->list.n; i++) {
    if (grit_subchannel_transport(lr->list.scs[i]))
      lr->ready[nr++] = i;
  }
  lr->nready = nr;
}

static void lr_publish(least_request *lr) {
  lr_collect_ready(lr);
  lr->skipped.valid = false;
  grit_connectivity_state s = grit_lb_sclist_aggregate(&lr->list);
  if (s == GRIT_STATE_IDLE && lr->started)
    s = GRIT_STATE_CONNECTING;
  lr->state = s;
  lr->h.update_state(lr->h.ctx, s);
}

static void lr_on_sc_state(grit_subchannel *sc, grit_connectivity_state s,
                           void *ud) {
  least_request *lr = ud;
  grit_lb_sc_changed(sc, s, &lr->h, lr->started, lr->error, sizeof(lr->error));
  if (!lr->updating) /* issue 27: not once per subchannel of an update */
    lr_publish(lr);
}

static grit_err lr_create(const grit_subchannel_args *a,
                          const grit_lb_helper *h, grit_lb_policy **out) {
  least_request *lr = grit_calloc(1, sizeof(*lr));
  *out = lr ? &lr->base : NULL;
  if (!lr)
    return GRIT_ERR_NOMEM;
  lr->base.vt = lr_vt();
  lr->a = *a;
  lr->a.health_applies = true;
  lr->h = *h;
  lr->choice_count = 2;
  lr->state = GRIT_STATE_IDLE;
  return GRIT_OK;
}

static grit_err lr_configure(grit_lb_policy *p, const grit_lb_params *params) {
  least_request *lr = (least_request *)p;
  uint32_t c = params->choice_count;
  lr->choice_count = c < 2 ? 2 : c > 10 ? 10 : c; /* clamped, as grpc-java */
  return GRIT_OK;
}

static void lr_connect_all(least_request *lr) {
  lr->updating = true;
  for (size_t i = 0; i < lr->list.n; i++)
    grit_subchannel_connect(lr->list.scs[i]);
  lr->updating = false;
}

static grit_err lr_update(grit_lb_policy *p, const grit_addr *addrs, size_t n,
                          bool shuffle) {
  least_request *lr = (least_request *)p;
  (void)shuffle;
  size_t *ready = grit_calloc(n ? n : 1, sizeof(*ready));
  if (!ready)
    return GRIT_ERR_NOMEM;
  grit_lb_sclist fresh;
  grit_err rv = grit_lb_sclist_reconcile(&lr->list, addrs, n, &lr->a,
                                         lr_on_sc_state, lr, &fresh);
  if (rv != GRIT_OK) {
    grit_free(ready);
    return rv;
  }
  grit_free(lr->ready);
  lr->ready = ready;
  lr->list = fresh;
  if (lr->started)
    lr_connect_all(lr);
  lr_publish(lr);
  return GRIT_OK;
}

static void lr_exit_idle(grit_lb_policy *p) {
  least_request *lr = (least_request *)p;
  lr->started = true;
  lr_connect_all(lr);
  lr_publish(lr);
}

/* "least_request_experimental: N outstanding (best of C)", without
 * snprintf: it is on every pick. */
static void lr_detail(least_request *lr, size_t outstanding) {
  static const char head[] = "least_request_experimental: ";
  static const char mid[] = " outstanding (best of ";
  char *o = lr->detail;
  memcpy(o, head, sizeof(head) - 1);
  o += sizeof(head) - 1;
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + outstanding % 10);
    outstanding /= 10;
  } while (outstanding);
  while (n)
    *o++ = tmp[--n];
  memcpy(o, mid, sizeof(mid) - 1);
  o += sizeof(mid) - 1;
  if (lr->choice_count >= 10)
    *o++ = (char)('0' + lr->choice_count / 10);
  *o++ = (char)('0' + lr->choice_count % 10);
  *o++ = ')';
  *o = '\0';
}

static grit_pick_result lr_pick(grit_lb_policy *p, const grit_pick_args *args) {
  least_request *lr = (least_request *)p;
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  r.skipped = grit_lb_skipped_cached(&lr->list, &lr->skipped);
  if (lr->nready) {
    grit_transport *best = NULL;
    size_t best_n = SIZE_MAX;
    for (uint32_t c = 0; c < lr->choice_count; c++) {
      size_t i = lr->ready[grit_rng_below(lr->a.rng, (uint32_t)lr->nready)];
      grit_transport *t = grit_subchannel_transport(lr->list.scs[i]);
      size_t out = grit_transport_stream_count(t);
      if (t && out < best_n) {
        best = t;
        best_n = out;
      }
    }
    if (best) {
      if (args && args->want_detail)
        lr_detail(lr, best_n);
      r.kind = GRIT_PICK_COMPLETE;
      r.transport = best;
      r.detail = args && args->want_detail ? lr->detail : NULL;
      return r;
    }
  }
  if (!lr->started)
    lr_exit_idle(p);
  if (lr->state == GRIT_STATE_TRANSIENT_FAILURE) {
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    /* Every backend and why it cannot take the call (issue 28). */
    r.message = lr->list.n ? grit_lb_sclist_why_unusable(&lr->list, lr->why,
                                                         sizeof(lr->why))
                           : lr->error;
  }
  return r;
}

static void lr_destroy(grit_lb_policy *p) {
  least_request *lr = (least_request *)p;
  if (!lr)
    return;
  grit_lb_sclist_free(&lr->list);
  grit_free(lr->ready);
  grit_free(lr);
}

const grit_lb_policy_vtable grit_lb_least_request = {
    .name = "least_request_experimental",
    .create = lr_create,
    .update_addresses = lr_update,
    .exit_idle = lr_exit_idle,
    .pick = lr_pick,
    .destroy = lr_destroy,
    .configure = lr_configure,
};

static const grit_lb_policy_vtable *lr_vt(void) {
  return &grit_lb_least_request;
}
