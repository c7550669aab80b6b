/* A subchannel: one transport to one address, its connectivity state and
 * its reconnect backoff (SPEC CB-01). After a failed connect it stays
 * TRANSIENT_FAILURE for the backoff, then goes IDLE; its policy decides
 * when to connect again. A READY connection that closes, or that receives
 * a GOAWAY, goes IDLE at once (a GOAWAY'd transport drains on its own).
 * A close caused by GOAWAY "too_many_pings" doubles the keepalive time of
 * later connections (LB-04, as grpc-core). A subchannel destroyed with
 * calls in flight lets its connection drain instead of aborting them.
 * Health checks (A17) and ejection (A50) change only the state the policy
 * sees: |state| is the connection's, what grit_subchannel_state returns
 * and on_state reports is derived from it (sc_visible).
 * See lb/README.md. */
#include "lb/lb_int.h"
#include "observe/observe.h"

#include <stdio.h>
#include <string.h>

struct grit_subchannel {
  grit_subchannel_args a;
  grit_addr addr;
  grit_subchannel_state_cb cb;
  void *ud;
  grit_connectivity_state state;      /* the connection's */
  grit_connectivity_state shown;      /* what the policy sees */
  grit_connectivity_state prev_state; /* shown before the last change */
  grit_list group_link;               /* in a->group->scs, if any */
  grit_list shared_link;              /* in a->shared->scs, if any */
  grit_health_watch *health;          /* while READY and checking */
  grit_health_status health_status;
  bool ejected;
  grit_transport *t;
  uv_timer_t timer; /* backoff; closed in destroy, memory freed after */
  uint64_t backoff_ms;
  uint64_t keepalive_time_ms; /* starts at topts'; doubled on too_many_pings */
  char error[256];
  grit_transport_calls calls; /* OP-03: of its transports closed so far */
  unsigned live_transports;   /* created, on_closed not yet seen */
  bool timer_closed;
  bool destroyed;
};

/* The channel's metric series (the per-target subchannel gauge), if any. */
static grit_obs_target *sc_obs(const grit_subchannel *sc) {
  return sc->a.shared ? sc->a.shared->obs : NULL;
}

static void sc_maybe_free(grit_subchannel *sc) {
  if (sc->destroyed && sc->timer_closed && sc->live_transports == 0)
    grit_free(sc);
}

/* SPEC HC-01, OD-01: ejected shows TRANSIENT_FAILURE whatever the
 * connection does; a READY connection whose health watch has not said
 * SERVING yet shows CONNECTING, and NOT_SERVING shows TRANSIENT_FAILURE. */
static grit_connectivity_state sc_visible(const grit_subchannel *sc) {
  if (sc->ejected)
    return GRIT_STATE_TRANSIENT_FAILURE;
  if (sc->state == GRIT_STATE_READY && sc->health) {
    switch (sc->health_status) {
    case GRIT_HEALTH_WAITING:
      return GRIT_STATE_CONNECTING;
    case GRIT_HEALTH_SERVING:
      return GRIT_STATE_READY;
    case GRIT_HEALTH_NOT_SERVING:
      return GRIT_STATE_TRANSIENT_FAILURE;
    }
  }
  return sc->state;
}

static void sc_publish(grit_subchannel *sc) {
  grit_connectivity_state v = sc_visible(sc);
  if (sc->shown == v || sc->destroyed)
    return;
  if (v != sc->state)
    GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
               "subchannel %s: shown as %s (%s)", sc->addr.text,
               grit_connectivity_state_name(v),
               grit_subchannel_skip_reason(sc));
  sc->prev_state = sc->shown;
  sc->shown = v;
  sc->cb(sc, v, sc->ud);
}

static void sc_on_health(grit_health_status hs, void *ud) {
  grit_subchannel *sc = ud;
  if (hs == GRIT_HEALTH_NOT_SERVING &&
      sc->health_status == GRIT_HEALTH_SERVING && sc->a.shared) {
    __atomic_fetch_add(&sc->a.shared->health_not_serving, 1, __ATOMIC_RELAXED);
    grit_obs_target_add(sc->a.shared->obs, GRIT_OBS_LB_HEALTH_NOT_SERVING, 1);
  }
  sc->health_status = hs;
  sc_publish(sc);
}

/* SPEC HC-01: a Watch per READY connection when the config asks for one,
 * the channel allows it and the policy honours it (not pick_first). */
static void sc_health_update(grit_subchannel *sc) {
  const grit_lb_shared *sh = sc->a.shared;
  bool want = sc->state == GRIT_STATE_READY && sc->t && !sc->destroyed &&
              sc->a.health_applies && sh && sh->health_service &&
              !sh->health_disabled;
  if (!want && sc->health) {
    grit_health_watch_stop(sc->health);
    sc->health = NULL;
  } else if (want && !sc->health) {
    sc->health_status = GRIT_HEALTH_WAITING;
    if (grit_health_watch_start(&sc->a, sc->t, sh->health_service,
                                sc->addr.text, sc_on_health, sc,
                                &sc->health) != GRIT_OK)
      sc->health = NULL; /* out of memory: unchecked, as if disabled */
  }
}

void grit_lb_shared_refresh_health(grit_lb_shared *sh) {
  grit_list *it;
  GRIT_LIST_FOREACH(it, &sh->scs) {
    grit_subchannel *sc = GRIT_CONTAINER_OF(it, grit_subchannel, shared_link);
    grit_health_watch_stop(sc->health);
    sc->health = NULL;
    sc_health_update(sc);
    sc_publish(sc);
  }
}

static void sc_set_state(grit_subchannel *sc, grit_connectivity_state s) {
  if (sc->state == s)
    return;
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO, "subchannel %s: %s -> %s",
             sc->addr.text, grit_connectivity_state_name(sc->state),
             grit_connectivity_state_name(s));
  grit_obs_subchannel_state(sc_obs(sc), (int)sc->state, (int)s); /* OP-01 */
  sc->state = s;
  sc_health_update(sc);
  sc_publish(sc);
}

static void sc_on_ready(grit_transport *t, void *ud) {
  grit_subchannel *sc = ud;
  /* A transport let go of (destroy) before its event came: ignore it. */
  if (sc->destroyed || sc->t != t)
    return;
  sc->backoff_ms = 0; /* CB-01: reset after a successful connection */
  sc->error[0] = '\0';
  sc_set_state(sc, GRIT_STATE_READY);
}

static void sc_on_goaway(grit_transport *t, uint32_t last, uint32_t code,
                         void *ud) {
  grit_subchannel *sc = ud;
  (void)last;
  if (sc->destroyed || sc->t != t)
    return;
  snprintf(sc->error, sizeof(sc->error), "GOAWAY received (error %u)", code);
  grit_transport_drain(t);
  if (sc->state != GRIT_STATE_READY)
    return; /* still connecting: on_closed counts it as a failed attempt */
  /* No new streams may go here: the subchannel leaves READY at once and
   * the draining transport finishes its streams on its own. */
  sc->t = NULL;
  sc_set_state(sc, GRIT_STATE_IDLE);
}

/* +-20 % jitter (CB-01) on the current backoff, then TRANSIENT_FAILURE
 * until the timer puts the subchannel back to IDLE. */
static void sc_backoff_done(uv_timer_t *timer);
static void sc_start_backoff(grit_subchannel *sc, const char *why) {
  sc->backoff_ms = grit_lb_backoff_next_ms(
      sc->backoff_ms, sc->a.initial_backoff_ms, sc->a.max_backoff_ms, NULL);
  uint64_t wait = grit_lb_backoff_jitter_ms(sc->backoff_ms, sc->a.rng);
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
             "subchannel %s: connect failed (%s), retry in %llu ms",
             sc->addr.text, why, (unsigned long long)wait);
  uv_timer_start(&sc->timer, sc_backoff_done, wait, 0);
  sc_set_state(sc, GRIT_STATE_TRANSIENT_FAILURE);
}

static void sc_backoff_done(uv_timer_t *timer) {
  grit_subchannel *sc = timer->data;
  sc_set_state(sc, GRIT_STATE_IDLE);
}

static void sc_on_closed(grit_transport *t, const grit_transport_close_info *ci,
                         void *ud) {
  grit_subchannel *sc = ud;
  grit_transport_calls_add(t, &sc->calls);
  grit_transport_destroy(t);
  sc->live_transports--;
  if (sc->destroyed) {
    sc_maybe_free(sc);
    return;
  }
  /* Checked before the drained-transport test: the GOAWAY that carries
   * "too_many_pings" has already detached |t| from |sc|. */
  if (ci->too_many_pings && sc->keepalive_time_ms > 0) {
    sc->keepalive_time_ms =
        grit_lb_keepalive_after_too_many_pings_ms(sc->keepalive_time_ms);
    GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
               "subchannel %s: too_many_pings, keepalive time now %llu ms",
               sc->addr.text, (unsigned long long)sc->keepalive_time_ms);
  }
  if (sc->t != t) /* a drained transport from before a GOAWAY */
    return;
  sc->t = NULL;
  snprintf(sc->error, sizeof(sc->error), "%s", ci->reason);
  if (ci->was_ready) {
    sc_set_state(sc, GRIT_STATE_IDLE);
    return;
  }
  sc_start_backoff(sc, ci->reason);
}

static const grit_transport_cbs sc_transport_cbs = {
    .on_ready = sc_on_ready,
    .on_goaway = sc_on_goaway,
    .on_closed = sc_on_closed,
};

grit_err grit_subchannel_create(const grit_subchannel_args *a,
                                const grit_addr *addr,
                                grit_subchannel_state_cb cb, void *user_data,
                                grit_subchannel **out) {
  grit_subchannel *sc = grit_calloc(1, sizeof(*sc));
  *out = sc;
  if (!sc)
    return GRIT_ERR_NOMEM;
  sc->a = *a;
  sc->addr = *addr;
  sc->cb = cb;
  sc->ud = user_data;
  sc->state = GRIT_STATE_IDLE;
  sc->prev_state = GRIT_STATE_IDLE;
  grit_obs_subchannel_state(sc_obs(sc), -1, GRIT_STATE_IDLE);
  sc->keepalive_time_ms = a->topts.keepalive_time_ms;
  uv_timer_init(a->loop, &sc->timer);
  sc->timer.data = sc;
  grit_list_init(&sc->group_link);
  grit_list_init(&sc->shared_link);
  if (a->shared)
    grit_list_insert_tail(&a->shared->scs, &sc->shared_link);
  if (a->group) {
    grit_list_insert_tail(&a->group->scs, &sc->group_link);
    sc->ejected = a->group->is_ejected(a->group, addr);
  }
  sc->shown = sc_visible(sc);
  return GRIT_OK;
}

void grit_subchannel_connect(grit_subchannel *sc) {
  if (sc->state != GRIT_STATE_IDLE || sc->destroyed)
    return;
  grit_transport_opts o = sc->a.topts;
  /* CB-01: the attempt may take max(min connect timeout, current backoff). */
  o.connect_timeout_ms = sc->a.min_connect_timeout_ms > sc->backoff_ms
                             ? sc->a.min_connect_timeout_ms
                             : sc->backoff_ms;
  o.keepalive_time_ms = sc->keepalive_time_ms;
  grit_err rv = grit_transport_create(sc->a.loop, &sc->addr, &o,
                                      &sc_transport_cbs, sc, &sc->t);
  if (rv != GRIT_OK) {
    sc->t = NULL;
    snprintf(sc->error, sizeof(sc->error), "connect: %s", grit_strerror(rv));
    sc_start_backoff(sc, sc->error);
    return;
  }
  sc->live_transports++;
  sc_set_state(sc, GRIT_STATE_CONNECTING);
}

grit_connectivity_state grit_subchannel_state(const grit_subchannel *sc) {
  return sc->shown;
}

grit_connectivity_state grit_subchannel_prev_state(const grit_subchannel *sc) {
  return sc->prev_state;
}

grit_transport *grit_subchannel_transport(const grit_subchannel *sc) {
  return sc->shown == GRIT_STATE_READY ? sc->t : NULL;
}

grit_subchannel *grit_lb_group_sc(grit_list *link) {
  return GRIT_CONTAINER_OF(link, grit_subchannel, group_link);
}

bool grit_subchannel_ejected(const grit_subchannel *sc) {
  return sc->ejected;
}

void grit_subchannel_set_ejected(grit_subchannel *sc, bool ejected) {
  if (sc->ejected == ejected)
    return;
  sc->ejected = ejected;
  sc_publish(sc);
}

const char *grit_subchannel_skip_reason(const grit_subchannel *sc) {
  if (sc->ejected)
    return "ejected by outlier detection";
  if (sc->state == GRIT_STATE_READY && sc->health) {
    if (sc->health_status == GRIT_HEALTH_WAITING)
      return "health: no answer yet";
    if (sc->health_status == GRIT_HEALTH_NOT_SERVING)
      return "health: not SERVING";
  }
  return "";
}

const grit_addr *grit_subchannel_addr(const grit_subchannel *sc) {
  return &sc->addr;
}

uint64_t grit_subchannel_keepalive_time_ms(const grit_subchannel *sc) {
  return sc->keepalive_time_ms;
}

void grit_subchannel_calls(const grit_subchannel *sc,
                           grit_transport_calls *out) {
  *out = sc->calls;
  grit_transport_calls_add(sc->t, out);
}

void grit_lb_shared_foreach(grit_lb_shared *sh,
                            void (*fn)(const grit_subchannel *sc, void *ud),
                            void *ud) {
  grit_list *it;
  GRIT_LIST_FOREACH(it, &sh->scs) {
    fn(GRIT_CONTAINER_OF(it, grit_subchannel, shared_link), ud);
  }
}

const char *grit_subchannel_error(const grit_subchannel *sc) {
  return sc->error;
}

void grit_subchannel_reset_backoff(grit_subchannel *sc) {
  sc->backoff_ms = 0;
  if (sc->state == GRIT_STATE_TRANSIENT_FAILURE && !sc->t) {
    uv_timer_stop(&sc->timer);
    sc_set_state(sc, GRIT_STATE_IDLE);
  }
}

static void sc_timer_closed(uv_handle_t *h) {
  grit_subchannel *sc = h->data;
  sc->timer_closed = true;
  sc_maybe_free(sc);
}

/* Calls in flight on a connection finish normally when its subchannel
 * goes away (address removed, policy replaced): as after a GOAWAY, the
 * transport takes no new stream (the client sends GOAWAY too) and closes
 * after its last one, as grpc-core and grpc-java do. An idle or unready
 * connection closes at once. Channel destroy cancels its calls first, so
 * nothing is left to wait for then. */
static void sc_release_transport(grit_transport *t) {
  if (grit_transport_stream_count(t) > 0)
    grit_transport_drain(t);
  else
    grit_transport_destroy(t);
}

void grit_subchannel_destroy(grit_subchannel *sc) {
  if (!sc)
    return;
  grit_health_watch_stop(sc->health);
  sc->health = NULL;
  grit_list_remove(&sc->group_link);
  grit_list_remove(&sc->shared_link);
  sc->destroyed = true;
  grit_obs_subchannel_state(sc_obs(sc), (int)sc->state, -1);
  grit_transport *t = sc->t;
  sc->t = NULL;
  /* Its on_closed arrives later and releases the last hold on |sc|. */
  if (t)
    sc_release_transport(t);
  uv_close((uv_handle_t *)&sc->timer, sc_timer_closed);
}
