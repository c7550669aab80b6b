/* What follows an uncommitted attempt that failed: the configured retry
 * policy (gRFC A6, SPEC RT-*), or the hedging schedule (HG-*), with
 * throttling per server name (TH-*), server pushback (RT-04, HG-05) and
 * per-attempt recv timeouts (RT-10). */
#include "channel/channel_int.h"

#include <stdio.h>
#include <string.h>

/* MX-01 and OB-01: a retry or hedge that throttling refused. */
static void call_count_throttled(grit_call *c) {
  __atomic_add_fetch(&c->ch->stats.throttled, 1, __ATOMIC_RELAXED);
  grit_obs_add(c->obs, GRIT_OBS_CALL_THROTTLED, 1);
}

/* ---- set-up ---- */

static grit_err call_add_idempotency_key(grit_call *c) {
  char key[33];
  if (!c->idempotency_key) {
    /* ID-01: one random 128-bit value per logical call. */
    uint64_t hi = grit_rng_next(&c->ch->rng), lo = grit_rng_next(&c->ch->rng);
    snprintf(key, sizeof(key), "%016llx%016llx", (unsigned long long)hi,
             (unsigned long long)lo);
  }
  const char *k = c->idempotency_key ? c->idempotency_key : key;
  if (!c->metadata && grit_metadata_create(&c->metadata) != GRIT_OK)
    return GRIT_ERR_NOMEM;
  return grit_metadata_add_unchecked(c->metadata, "idempotency-key", 15, k,
                                     strlen(k));
}

void grit_call_retry_setup(grit_call *c) {
  const grit_method_cfg *m = c->mcfg;
  const grit_svccfg_global *g =
      c->config ? grit_svccfg_get_global(c->config) : NULL;
  if (g && g->has_throttling)
    c->throttle = grit_channel_throttle(c->ch, g);
  if (!m || !c->ch->o.enable_retries) /* RT-01 */
    return;
  if (m->policy == GRIT_POLICY_RETRY)
    c->retry = &m->retry;
  else if (m->policy == GRIT_POLICY_HEDGING)
    c->hedge = &m->hedging;
  bool with_policy = c->retry || c->hedge;
  if (with_policy && (c->ch->o.idempotency_keys || c->idempotency_key) &&
      call_add_idempotency_key(c) != GRIT_OK)
    grit_call_end(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                  "out of memory adding an idempotency key", NULL,
                  GRIT_REASON_COMMITTED);
}

void grit_call_retry_stop_timers(grit_call *c) {
  if (c->timers & CALL_TIMER_RETRY)
    uv_timer_stop(&c->retry_timer);
  if (c->timers & CALL_TIMER_RECV)
    uv_timer_stop(&c->recv_timer);
}

static void call_save_last(grit_call *c, grit_status_code code, const char *msg,
                           const grit_metadata *trailers) {
  c->last_code = code;
  grit_free(c->last_message);
  c->last_message = grit_strdup(msg ? msg : "");
  grit_metadata_destroy(c->last_trailers);
  c->last_trailers = NULL;
  if (trailers)
    grit_metadata_copy(trailers, &c->last_trailers);
}

/* ---- retries ---- */

static void call_retry_fire(uv_timer_t *t) {
  grit_call *c = t->data;
  /* A send that overflowed the replay buffer during the backoff committed
   * the call with no attempt live: this retry is the committed attempt
   * (RT-07; grit_attempt_start makes it the winner). */
  if (c->state != CALL_DONE && (!c->committed || !c->winner))
    grit_attempt_start(c, GRIT_ATTEMPT_RETRY, c->pending_backoff_ms,
                       c->pending_pushback);
}

void grit_call_recv_timeout(uv_timer_t *t) {
  grit_call *c = t->data;
  grit_list *e;
  GRIT_LIST_FOREACH(e, &c->attempts) {
    call_attempt *a = GRIT_CONTAINER_OF(e, call_attempt, link);
    if (a->stream && !a->headers) {
      a->recv_timed_out = true; /* RT-10: fails as CANCELLED, then decide */
      grit_stream_cancel(a->stream, GRIT_STATUS_CANCELLED,
                         "per-attempt recv timeout");
    }
  }
}

static void call_retry_decide(grit_call *c, call_attempt *a,
                              grit_status_code code, const char *msg,
                              const grit_metadata *trailers,
                              bool recv_timeout) {
  grit_retry_policy p = *c->retry;
  if (recv_timeout) /* RT-10: a recv timeout is retried as CANCELLED */
    p.retryable_codes |= GRIT_CODE_BIT(GRIT_STATUS_CANCELLED);
  grit_pushback pb = grit_retry_parse_pushback(trailers);
  uint64_t now = uv_now(&c->ch->rt->loop);
  grit_throttle *thr =
      c->throttle ? grit_throttle_table_lock(c->throttle) : NULL;
  grit_retry_decision d = grit_retry_decide(&p, &c->rs, code, &pb, thr, now,
                                            c->deadline_at_ms, &c->ch->rng);
  if (thr)
    grit_throttle_table_unlock(c->throttle);
  if (!d.retry && d.reason == GRIT_REASON_DEADLINE) {
    /* RT-09: no time for another attempt. As in grpc-core, the call waits
     * for its deadline and ends DEADLINE_EXCEEDED when it expires. The
     * attempt is freed before then, so keep its peer by value. */
    pthread_mutex_lock(&c->mu);
    snprintf(c->info.peer, sizeof(c->info.peer), "%s", a->peer);
    pthread_mutex_unlock(&c->mu);
    grit_attempt_observe(a, code, msg, d.reason);
    return;
  }
  if (!d.retry) {
    if (d.reason == GRIT_REASON_THROTTLED)
      call_count_throttled(c);
    c->winner = a; /* for the peer in the call's info */
    grit_attempt_observe(a, code, msg, d.reason);
    grit_call_end(c, code, msg, trailers, d.reason);
    return;
  }
  GRIT_TRACE(GRIT_TRACE_RETRY, GRIT_LEVEL_INFO,
             "call %llu attempt %u: %s, retry in %llu ms%s",
             (unsigned long long)c->id, a->number, grit_status_code_name(code),
             (unsigned long long)d.delay_ms,
             d.pushback_used ? " (pushback)" : "");
  grit_attempt_observe(a, code, msg, GRIT_REASON_NONE);
  c->pending_backoff_ms = d.delay_ms;
  c->pending_pushback = d.pushback_used;
  c->backoff_total_ms += d.delay_ms;
  uv_timer_start(&c->retry_timer, call_retry_fire, d.delay_ms, 0);
}

/* ---- hedging (HG-01..HG-09): the schedule is hedging/schedule.c ---- */

static void hedge_timer_fire(uv_timer_t *t);

static uint64_t hedge_now(grit_call *c) {
  return uv_now(&c->ch->rt->loop);
}

static bool hedge_more(grit_call *c) {
  return !c->committed && grit_hedge_more(&c->hs);
}

/* Start the timer for the next hedge, if one will be due. */
static void hedge_arm(grit_call *c) {
  uint64_t ms = grit_hedge_wait_ms(&c->hs, hedge_now(c));
  if (!c->committed && ms != GRIT_HEDGE_NONE)
    uv_timer_start(&c->retry_timer, hedge_timer_fire, ms, 0);
}

/* Send the next hedge if tokens allow (HG-06). */
static bool hedge_send(grit_call *c) {
  if (!hedge_more(c))
    return false;
  if (!grit_throttle_table_allows(c->throttle)) {
    call_count_throttled(c);
    grit_hedge_stop(&c->hs, GRIT_REASON_THROTTLED);
    GRIT_TRACE(GRIT_TRACE_HEDGING, GRIT_LEVEL_INFO,
               "call %llu: no more hedges (throttled)",
               (unsigned long long)c->id);
    return false;
  }
  uint64_t wait_ms = c->hs.wait_ms;
  bool pushback = c->hs.wait_pushback;
  grit_hedge_on_sent(&c->hs, hedge_now(c));
  GRIT_TRACE(GRIT_TRACE_HEDGING, GRIT_LEVEL_INFO,
             "call %llu: hedge %u sent after %llu ms%s",
             (unsigned long long)c->id, c->hs.sent, (unsigned long long)wait_ms,
             pushback ? " (pushback)" : "");
  grit_attempt_start(c, GRIT_ATTEMPT_HEDGE, wait_ms, pushback);
  return c->state != CALL_DONE;
}

/* Send every hedge that is due now (all of them when hedgingDelay is 0,
 * SC-11), then wait for the next. */
static void hedge_pump(grit_call *c) {
  while (c->state != CALL_DONE &&
         grit_hedge_wait_ms(&c->hs, hedge_now(c)) == 0 && hedge_send(c))
    ;
  if (c->state != CALL_DONE)
    hedge_arm(c);
}

static void hedge_timer_fire(uv_timer_t *t) {
  grit_call *c = t->data;
  if (c->state == CALL_DONE)
    return;
  if (hedge_send(c)) /* due by construction of the timer */
    hedge_pump(c);
}

void grit_call_hedge_start(grit_call *c) {
  grit_hedge_init(&c->hs, c->hedge, hedge_now(c));
  grit_hedge_on_sent(&c->hs, hedge_now(c));
  grit_attempt_start(c, GRIT_ATTEMPT_FIRST, 0, false); /* HG-01: t = 0 */
  hedge_pump(c);
}

static void hedge_on_failed(grit_call *c, call_attempt *a,
                            grit_status_code code, const char *msg,
                            const grit_metadata *trailers) {
  grit_hedge_verdict v = grit_hedge_classify(&c->hs, code);
  if (v != GRIT_HEDGE_NON_FATAL) { /* HG-02, HG-03 */
    grit_attempt_reason why =
        v == GRIT_HEDGE_WIN ? GRIT_REASON_OK : GRIT_REASON_FATAL;
    c->winner = a;
    grit_attempt_observe(a, code, msg, why);
    grit_call_end(c, code, msg, trailers, why);
    return;
  }
  call_save_last(c, code, msg, trailers);
  bool could = hedge_more(c);
  /* HG-06, TH-02: a non-fatal failure, or a stop pushback, costs tokens. */
  bool tokens = grit_throttle_table_failure_allows(c->throttle);
  grit_pushback pb = grit_retry_parse_pushback(trailers);
  grit_hedge_on_non_fatal(&c->hs, &pb, tokens, hedge_now(c));
  GRIT_TRACE(GRIT_TRACE_HEDGING, GRIT_LEVEL_INFO,
             "call %llu attempt %u: %s (non-fatal)%s%s",
             (unsigned long long)c->id, a->number, grit_status_code_name(code),
             c->hs.stopped ? ", no more hedges: " : "",
             c->hs.stopped ? grit_attempt_reason_name(c->hs.stop_why) : "");
  if (could && c->hs.stop_why == GRIT_REASON_THROTTLED)
    call_count_throttled(c);
  uv_timer_stop(&c->retry_timer);
  hedge_pump(c);
  if (c->state == CALL_DONE)
    return;
  bool last = grit_list_empty(&c->attempts) && !hedge_more(c);
  grit_attempt_reason why =
      last ? grit_hedge_final_reason(&c->hs) : GRIT_REASON_NONE;
  grit_attempt_observe(a, code, msg, why);
  if (last) { /* HG-04: the last status, once every attempt has ended */
    c->winner = a;
    grit_call_end(c, c->last_code, c->last_message, c->last_trailers, why);
  }
}

/* ---- the entry point ---- */

void grit_call_on_attempt_failed(grit_call *c, call_attempt *a,
                                 grit_status_code code, const char *msg,
                                 const grit_metadata *trailers,
                                 bool recv_timeout) {
  if (c->state == CALL_DONE)
    return;
  if (c->hedge) {
    hedge_on_failed(c, a, code, msg, trailers);
    return;
  }
  if (c->retry) {
    call_retry_decide(c, a, code, msg, trailers, recv_timeout);
    return;
  }
  grit_attempt_reason why = code == GRIT_STATUS_OK ? GRIT_REASON_OK
                            : c->mcfg && c->mcfg->policy != GRIT_POLICY_NONE
                                ? GRIT_REASON_DISABLED
                                : GRIT_REASON_NO_POLICY;
  c->winner = a;
  grit_attempt_observe(a, code, msg, why);
  grit_call_end(c, code, msg, trailers, why);
}
