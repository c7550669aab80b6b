/* A call's lifecycle on the loop: ops from user threads, config lookup
 * (SC-07), the deadline (RT-09), sends into the replay buffer (RT-07),
 * the final status and its delivery. What happens to attempts is the
 * call machine's (callsm/), run by call_exec.c; attempts live in
 * attempt.c. */
#include "channel/channel_int.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static void call_route_release(grit_call *c);

/* Free a call that is no one's (the channel's spare slot was taken): its
 * mutex and condition variable too (channel.c frees the spare itself). */
static void call_spare_free(grit_call *c) {
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  grit_free(c);
}

static void call_free(grit_call *c) {
  grit_list *e;
  while ((e = grit_list_pop_head(&c->ops)) != NULL) {
    call_op *op = GRIT_CONTAINER_OF(e, call_op, link);
    grit_slice_unref(op->slice);
    grit_free(op);
  }
  while ((e = grit_list_pop_head(&c->recvq)) != NULL) {
    recv_msg *m = GRIT_CONTAINER_OF(e, recv_msg, link);
    grit_slice_unref(m->slice);
    grit_free(m);
  }
  grit_replay_free(&c->sends);
  grit_slice_unref(c->unary_req);
  grit_slice_unref(c->unary_resp);
  grit_metadata_destroy(c->headers);
  grit_metadata_destroy(c->metadata);
  if (c->pol) {
    grit_metadata_destroy(c->pol->last_trailers);
    grit_free(c->pol->last_message);
    grit_free(c->pol); /* its timers were closed before the last hold */
  }
  grit_status_free(&c->status);
  call_trace_part *no_tr = NULL; /* kept for the channel's next traced call */
  if (c->tr &&
      !__atomic_compare_exchange_n(&c->ch->spare_tr, &no_tr, c->tr, false,
                                   __ATOMIC_RELEASE, __ATOMIC_RELAXED))
    grit_free(c->tr);
  grit_call_auth_free(c);
  grit_free(c->deadline_timer); /* closed before the last hold went */
  if (c->method != c->method_inline)
    grit_free(c->method);
  grit_free(c->authority);
  grit_free(c->idempotency_key);
  grit_channel *ch = c->ch;
  grit_call *none = NULL; /* keep it for the channel's next call */
  if (!__atomic_compare_exchange_n(&ch->spare_call, &none, c, false,
                                   __ATOMIC_RELEASE, __ATOMIC_RELAXED))
    call_spare_free(c);
  grit_channel_unref(ch); /* last: it may free the channel and its spare */
}

void grit_call_unref(grit_call *c) {
  if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
    call_free(c);
}

/* The loop's hold on the call ends when its timers are closed and every
 * stream has reported on_done. */
void grit_call_loop_release(grit_call *c) {
  if (--c->loop_holds == 0)
    grit_call_unref(c);
}

static void call_timer_closed(uv_handle_t *h) {
  grit_call_loop_release(h->data);
}

/* ---- delivery to the application ---- */

void grit_call_deliver_headers(grit_call *c, const grit_metadata *md) {
  grit_call_auth_headers(c, md); /* IC-01 */
  if (!c->blocking) {
    if (c->cbs.on_headers)
      c->cbs.on_headers(c, md, c->user_data);
    return;
  }
  grit_metadata *copy = NULL;
  grit_metadata_copy(md, &copy);
  pthread_mutex_lock(&c->mu);
  c->headers = copy;
  c->headers_set = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* FC-04: make the committed stream's window follow c->recv_paused, which
 * the loop sets when the queue fills and the reader clears as it drains. */
static void call_apply_recv_pause(grit_call *c) {
  pthread_mutex_lock(&c->mu);
  bool paused = c->recv_paused;
  c->recv_state_dirty = false;
  pthread_mutex_unlock(&c->mu);
  call_attempt *w = grit_call_winner(c);
  if (c->state != CALL_DONE && w && w->stream)
    grit_stream_set_read_paused(w->stream, paused);
}

static bool call_one_response(const grit_call *c) {
  return c->kind == GRIT_METHOD_UNARY ||
         c->kind == GRIT_METHOD_CLIENT_STREAMING;
}

/* Issue 19: a unary or client-streaming call ends at a second message,
 * its stream cancelled (grit_call_end), as in grpc-go and grpc-java. */
static bool call_extra_response(grit_call *c) {
  if (++c->responses < 2 || !call_one_response(c))
    return false;
  char msg[128];
  snprintf(msg, sizeof(msg),
           "cardinality violation: %s method sent more than one response "
           "message",
           grit_method_kind_name(c->kind));
  grit_call_fail_on_loop(c, GRIT_STATUS_INTERNAL, msg);
  return true;
}

void grit_call_deliver_message(grit_call *c, grit_slice *msg) {
  if (call_extra_response(c)) {
    grit_slice_unref(msg);
    return;
  }
  grit_call_auth_message(c, msg->data, msg->len); /* IC-01 */
  if (c->unary_cb) {
    if (!c->unary_resp)
      c->unary_resp = msg;
    else
      grit_slice_unref(msg);
    return;
  }
  if (!c->blocking) {
    if (c->cbs.on_message)
      c->cbs.on_message(c, msg->data, msg->len, c->user_data);
    grit_slice_unref(msg);
    return;
  }
  recv_msg *m = grit_malloc(sizeof(*m));
  if (!m) {
    grit_slice_unref(msg);
    grit_call_fail_on_loop(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                           "out of memory queueing a response message");
    return;
  }
  m->slice = msg;
  pthread_mutex_lock(&c->mu);
  if (c->recv_discard) {
    pthread_mutex_unlock(&c->mu);
    grit_slice_unref(msg);
    grit_free(m);
    return;
  }
  grit_list_insert_tail(&c->recvq, &m->link);
  c->recv_bytes += msg->len;
  bool pause = !c->recv_paused && c->recv_bytes > CALL_RECV_QUEUE_HIGH;
  c->recv_paused = c->recv_paused || pause;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (pause)
    call_apply_recv_pause(c);
}

/* Blocking mode keeps a copy of the status for grit_call_finish; the
 * callbacks of an async call borrow it (grit.h), so nothing is copied. */
static void call_deliver_done(grit_call *c, grit_status_code code,
                              const char *msg, const grit_metadata *trailers,
                              const call_attempt *peer) {
  static const char empty[] = "";
  grit_status st = {
      .code = code,
      .message = (char *)(msg ? msg : empty),
      .trailers = trailers ? (grit_metadata *)trailers : grit_metadata_empty(),
  };
  pthread_mutex_lock(&c->mu);
  if (c->blocking &&
      grit_status_set(&c->status, code, msg, trailers) != GRIT_OK)
    c->status.code = GRIT_STATUS_RESOURCE_EXHAUSTED; /* not all of it */
  c->info.call_id = c->id;
  c->info.backoff_ms = c->sm.counts.backoff_ms; /* MX-02 */
  c->info.attempts = c->sm.counts.attempts;
  c->info.hedges = c->sm.counts.hedges;
  c->info.transparent_retries = c->sm.counts.transparent;
  if (peer) {
    grit_str_copy(c->info.peer, sizeof(c->info.peer), peer->peer);
    if (peer->response_encoding[0]) /* mostly none: "" already */
      grit_str_copy(c->info.response_encoding,
                    sizeof(c->info.response_encoding), peer->response_encoding);
  }
  c->done = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (c->unary_cb) {
    grit_slice *r = code == GRIT_STATUS_OK ? c->unary_resp : NULL;
    c->unary_cb(&st, r ? r->data : NULL, r ? r->len : 0, &c->info,
                c->user_data);
    grit_call_unref(c); /* the async unary call's own handle */
  } else if (c->cbs.on_done) {
    c->cbs.on_done(c, &st, c->user_data);
  }
}

/* MX-01: the retries-per-call histogram (gRFC A96 buckets; calls without
 * retries are not recorded). */
static void call_count(grit_call *c, grit_status_code code) {
  grit_chan_stats *s = &c->ch->stats;
  __atomic_add_fetch(code == GRIT_STATUS_OK ? &s->calls_succeeded
                                            : &s->calls_failed,
                     1, __ATOMIC_RELAXED);
  uint32_t retries = c->sm.counts.retries; /* hedges are not counted */
  static const uint32_t bounds[GRIT_RETRY_BUCKETS] = {1, 2,  3,   4,
                                                      5, 10, 100, 1000};
  for (int i = 0; retries && i < GRIT_RETRY_BUCKETS; i++) {
    if (retries <= bounds[i] || i == GRIT_RETRY_BUCKETS - 1) {
      __atomic_add_fetch(&s->retries_hist[i], 1, __ATOMIC_RELAXED);
      break;
    }
  }
}

/* The machine's FINISH (call_exec.c): the machine has recorded and
 * dropped (or will drop, right after) every attempt. */
void grit_call_end(grit_call *c, grit_status_code code, const char *msg,
                   const grit_metadata *trailers, grit_attempt_reason reason,
                   const call_attempt *peer) {
  if (c->state == CALL_DONE)
    return;
  /* Issue 19: OK without the one response is INTERNAL. Decided here, after
   * any retry or hedging decision (which saw the server's OK), so it is
   * final; the throttle still counted the server's success (TH-02). */
  char nomsg[128];
  if (code == GRIT_STATUS_OK && call_one_response(c) && c->responses == 0) {
    snprintf(nomsg, sizeof(nomsg),
             "cardinality violation: %s method sent no response message",
             grit_method_kind_name(c->kind));
    code = GRIT_STATUS_INTERNAL;
    msg = nomsg;
  }
  bool was_started = c->started_on_loop;
  c->state = CALL_DONE;
  if (!grit_list_empty(&c->link))
    grit_list_remove(&c->link); /* waiting for the first config */
  if (was_started) {
    grit_list_remove(&c->live_link);
    grit_channel_idle_arm(c->ch); /* the last call ended: idle timer */
  }
  grit_replay_free(&c->sends);
  grit_svccfg_unref(c->config);
  c->config = NULL;
  c->mcfg = NULL;
  if (c->route) /* issue 27: the route's cluster may go now */
    call_route_release(c);
  if (was_started) {
    call_count(c, code);
    grit_obs_call_end(c, code, msg);
  }
  GRIT_TRACE(GRIT_TRACE_CHANNEL, GRIT_LEVEL_DEBUG,
             "call %llu %s: %s %s (%s)%s%s", (unsigned long long)c->id,
             c->method, grit_status_code_name(code), msg ? msg : "",
             grit_attempt_reason_name(reason), c->tr ? " trace=" : "",
             c->tr ? c->tr->trace_id : "");
  grit_call_auth_done(c, code, msg, trailers); /* IC-01: before the app */
  call_deliver_done(c, code, msg, trailers, peer);
  if (c->timers & CALL_TIMER_DEADLINE)
    uv_close((uv_handle_t *)c->deadline_timer, call_timer_closed);
  if (c->timers & CALL_TIMER_RETRY)
    uv_close((uv_handle_t *)&c->pol->retry_timer, call_timer_closed);
  if (c->timers & CALL_TIMER_RECV)
    uv_close((uv_handle_t *)&c->pol->recv_timer, call_timer_closed);
  /* The hold the call was created with. The machine's feed holds the call
   * too, so nothing is freed before the current list has run. */
  grit_call_loop_release(c);
}

void grit_call_fail_on_loop(grit_call *c, grit_status_code code,
                            const char *msg) {
  grit_callsm_event ev = {
      .kind = GRIT_CALLSM_EV_FAIL, .code = code, .message = msg};
  grit_call_sm_feed(c, &ev); /* CANCELLED: reason CANCELLED */
}

/* ---- start ---- */

/* Each initialized timer holds the call on the loop until it is closed. */
static void call_timer_init(grit_call *c, uv_timer_t *t) {
  uv_timer_init(&c->ch->rt->loop, t);
  t->data = c;
  c->loop_holds++;
}

static void call_deadline(uv_timer_t *t) {
  grit_callsm_event ev = {.kind = GRIT_CALLSM_EV_DEADLINE};
  grit_call_sm_feed(t->data, &ev); /* RT-09, HG-09: final */
}

static uint64_t min_nonzero(uint64_t a, uint64_t b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return a < b ? a : b;
}

static int64_t limit_min(int64_t channel_limit, bool has_cfg,
                         uint64_t cfg_limit) {
  if (!has_cfg)
    return channel_limit;
  int64_t cfg = cfg_limit > INT64_MAX ? INT64_MAX : (int64_t)cfg_limit;
  return channel_limit < 0 || cfg < channel_limit ? cfg : channel_limit;
}

/* The method's config in c->config; a channel's calls mostly repeat one
 * method, so the last lookup is kept (loop thread only). */
static const grit_method_cfg *call_find_method(grit_call *c) {
  grit_channel *ch = c->ch;
  if (!c->config)
    return NULL;
  if (ch->last_find.config == c->config &&
      strcmp(ch->last_find.method, c->method) == 0)
    return ch->last_find.mcfg;
  const grit_method_cfg *m = grit_svccfg_find(c->config, c->method);
  size_t len = strlen(c->method);
  if (len < sizeof(ch->last_find.method)) {
    grit_svccfg_unref(ch->last_find.config);
    ch->last_find.config = grit_svccfg_ref(c->config);
    ch->last_find.mcfg = m;
    memcpy(ch->last_find.method, c->method, len + 1);
  }
  return m;
}

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

/* Issue 27 (gRFC A28): an ext front (xDS) chooses the call's route before
 * its first attempt: the cluster, the retry policy and timeout that replace
 * the method config's, the ring_hash hash. False: the call was failed
 * (no route, a non-forwarding route, out of memory). Kept out of line: its
 * message buffer must not cost the calls of other channels a frame. */
__attribute__((noinline)) static bool call_route_select(grit_call *c) {
  grit_channel *ch = c->ch;
  if (!ch->ext_ops->select)
    return true; /* the front does not route calls */
  grit_ext_route *r = grit_calloc(1, sizeof(*r));
  if (!r) {
    grit_call_fail_on_loop(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                           "out of memory choosing the route");
    return false;
  }
  char msg[256] = "";
  grit_status_code code = GRIT_STATUS_UNAVAILABLE;
  if (ch->ext_started)
    code = ch->ext_ops->select(ch->ext_state, c->method, c->metadata, r, msg,
                               sizeof(msg));
  else /* its start failed (resolve_error says why) */
    snprintf(msg, sizeof(msg), "%s",
             ch->resolve_error[0] ? ch->resolve_error
                                  : "the target's resolver is not running");
  if (code != GRIT_STATUS_OK) {
    grit_free(r);
    grit_call_fail_on_loop(c, code, msg);
    return false;
  }
  c->route = r;
  /* A31: max_stream_duration caps the deadline (the call's own timeout is
   * only ever read to set the deadline). */
  c->timeout_ms = min_nonzero(c->timeout_ms, r->timeout_ms);
  return true;
}

static void call_route_release(grit_call *c) {
  c->ch->ext_ops->release(c->route);
  grit_free(c->route);
  c->route = NULL;
}

/* What the machine is told of the config: the policy (RT-01: none when
 * retries are off, which also stops transparent retries), the throttle
 * bucket for the server name (TH-01), the deadline. */
static void call_policy_setup(grit_call *c, grit_callsm_config *k) {
  const grit_method_cfg *m = c->mcfg;
  const grit_svccfg_global *g =
      c->config ? grit_svccfg_get_global(c->config) : NULL;
  bool enabled = c->ch->o.enable_retries != 0;
  if (g && g->has_throttling)
    c->throttle = grit_channel_throttle(c->ch, g);
  *k = (grit_callsm_config){
      .policy_disabled = !enabled && m && m->policy != GRIT_POLICY_NONE,
      .transparent = enabled,
      .deadline_at_ms = c->deadline_at_ms,
  };
  if (c->route) { /* issue 27: the route's policy (A44), never hedging */
    k->policy_disabled = !enabled && c->route->retry;
    k->retry = enabled ? c->route->retry : NULL;
  } else if (m && enabled && m->policy == GRIT_POLICY_RETRY)
    k->retry = &m->retry;
  else if (m && enabled && m->policy == GRIT_POLICY_HEDGING)
    k->hedge = &m->hedging;
  if ((k->retry || k->hedge) &&
      (c->ch->o.idempotency_keys || c->idempotency_key) &&
      call_add_idempotency_key(c) != GRIT_OK)
    c->setup_failed = true;
  if (grit_call_sm_policy_init(c, k) != GRIT_OK)
    c->setup_failed = true;
}

/* SPEC SC-07: timeout, waitForReady and message limits from the config. */
static void call_apply_config(grit_call *c, uint64_t start_ms,
                              grit_callsm_config *k) {
  c->config = grit_channel_config_ref(c->ch);
  /* Issue 27: a routed call has no method config (its route replaces it). */
  c->mcfg = c->route ? NULL : call_find_method(c);
  const grit_method_cfg *m = c->mcfg;
  uint64_t timeout_ms = c->timeout_ms;
  if (m && m->has_timeout) {
    uint64_t cfg_ms = grit_ns_to_ms_ceil(m->timeout_ns);
    timeout_ms = min_nonzero(timeout_ms, cfg_ms ? cfg_ms : 1);
  }
  c->deadline_at_ms = timeout_ms ? grit_add_sat_u64(start_ms, timeout_ms) : 0;
  if (c->wait_for_ready_opt != GRIT_WFR_DEFAULT)
    c->wait_for_ready = c->wait_for_ready_opt == GRIT_WFR_ON;
  else
    c->wait_for_ready = m && m->wait_for_ready == GRIT_WFR_TRUE;
  c->max_send =
      limit_min(c->ch->o.max_send_message, m && m->has_max_request_bytes,
                m ? m->max_request_bytes : 0);
  c->max_recv =
      limit_min(c->ch->o.max_recv_message, m && m->has_max_response_bytes,
                m ? m->max_response_bytes : 0);
  call_policy_setup(c, k);
}

/* A call without a deadline has no timer (issue 24: a small call). */
static bool call_arm_deadline(grit_call *c) {
  if (!c->deadline_at_ms)
    return true;
  if (!c->deadline_timer) {
    c->deadline_timer = grit_malloc(sizeof(*c->deadline_timer));
    if (!c->deadline_timer)
      return false;
    call_timer_init(c, c->deadline_timer);
    c->timers |= CALL_TIMER_DEADLINE;
  }
  uint64_t now = uv_now(&c->ch->rt->loop);
  uv_timer_start(c->deadline_timer, call_deadline,
                 c->deadline_at_ms > now ? c->deadline_at_ms - now : 0, 0);
  return true;
}

/* SC-07: a message is over the send limit. */
static void call_fail_oversize(grit_call *c, size_t len) {
  char msg[128];
  snprintf(msg, sizeof(msg), "sent message larger than max (%zu vs. %lld)", len,
           (long long)c->max_send);
  grit_call_fail_on_loop(c, GRIT_STATUS_RESOURCE_EXHAUSTED, msg);
}

/* The config is known: fix the deadline and send the first attempt(s). */
void grit_call_config_ready(grit_call *c) {
  if (c->state == CALL_DONE)
    return;
  if (c->ch->ext_ops && !call_route_select(c))
    return;
  grit_callsm_config k;
  call_apply_config(c, c->start_ms, &k);
  if (c->setup_failed) {
    grit_call_fail_on_loop(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                           "out of memory setting up the retry policy");
    return;
  }
  if (!call_arm_deadline(c)) {
    grit_call_fail_on_loop(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                           "out of memory arming the deadline");
    return;
  }
  /* Sent while waiting; CP-03: the limit is on the uncompressed size. */
  if (c->max_send >= 0 && c->sends_max_raw > (uint64_t)c->max_send) {
    call_fail_oversize(c, c->sends_max_raw);
    return;
  }
  c->state = CALL_ACTIVE;
  grit_callsm_event ev = {.kind = GRIT_CALLSM_EV_CONFIG, .config = &k};
  /* The first attempt(s): RT-*, HG-01. Each stream, once open, sends
   * what was buffered; the call may be gone after this (FINISH). */
  grit_call_sm_feed(c, &ev);
}

static void call_start_on_loop(grit_call *c) {
  grit_channel *ch = c->ch;
  if (ch->shutting_down) {
    grit_call_fail_on_loop(c, GRIT_STATUS_UNAVAILABLE,
                           "channel is shutting down");
    return;
  }
  c->started_on_loop = true;
  grit_list_insert_tail(&ch->live_calls, &c->live_link); /* idle.c sees it */
  __atomic_add_fetch(&ch->stats.calls_started, 1, __ATOMIC_RELAXED);
  grit_obs_call_start(c);               /* OB-01, OB-02 */
  if (!grit_call_auth_check_on_loop(c)) /* IC-01, AP-05: nothing sent */
    return;
  grit_replay_init(&c->sends, (size_t)ch->o.per_call_retry_buffer,
                   &ch->replay_bytes, (size_t)ch->o.per_channel_retry_buffer);
  c->start_ms = uv_now(&ch->rt->loop);
  c->max_send = ch->o.max_send_message; /* until the config is known */
  c->max_recv = ch->o.max_recv_message;
  if (grit_channel_config_pending(ch)) {
    /* SC-03/SC-07: the config comes with the first resolver result; until
     * then only the call's own deadline runs. */
    if (c->timeout_ms) {
      c->deadline_at_ms = grit_add_sat_u64(c->start_ms, c->timeout_ms);
      if (!call_arm_deadline(c)) {
        grit_call_fail_on_loop(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                               "out of memory arming the deadline");
        return;
      }
    }
    grit_list_insert_tail(&ch->config_waiters, &c->link);
    return;
  }
  grit_call_config_ready(c);
}

/* ---- sends ---- */

static void call_send_on_loop(grit_call *c, grit_slice *s, size_t raw_len) {
  if (c->state == CALL_DONE) {
    grit_slice_unref(s);
    return;
  }
  /* SC-07, CP-03: the uncompressed size, before anything is written. */
  if (c->max_send >= 0 && raw_len > (uint64_t)c->max_send) {
    grit_slice_unref(s);
    call_fail_oversize(c, raw_len);
    return;
  }
  if (c->state != CALL_ACTIVE && raw_len > c->sends_max_raw)
    c->sends_max_raw = raw_len; /* checked again once the config is known */
  /* RT-07, HG-07: a send over a limit commits the call (the machine
   * says to which attempt); it is still sent. */
  if (!grit_callsm_committed(&c->sm) && !grit_replay_fits(&c->sends, s->len)) {
    GRIT_TRACE(GRIT_TRACE_RETRY, GRIT_LEVEL_INFO,
               "call %llu: replay buffer full, committing",
               (unsigned long long)c->id);
    grit_callsm_event ev = {.kind = GRIT_CALLSM_EV_SEND, .fits = false};
    grit_call_sm_feed(c, &ev);
  }
  grit_err rv = grit_replay_add(&c->sends, s);
  grit_slice_unref(s);
  if (rv != GRIT_OK) {
    grit_call_fail_on_loop(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                           "out of memory buffering a message");
    return;
  }
  if (c->state == CALL_ACTIVE)
    grit_attempt_flush_all(c);
}

static void call_close_on_loop(grit_call *c) {
  if (c->state == CALL_DONE)
    return;
  c->close_sent = true;
  c->sends.closed = true;
  if (c->state == CALL_ACTIVE)
    grit_attempt_flush_all(c);
}

/* grit_unary_call_async's start, send and half-close. */
static void call_unary_on_loop(grit_call *c) {
  grit_slice *req = c->unary_req;
  c->unary_req = NULL;
  call_start_on_loop(c);
  call_send_on_loop(c, req, c->unary_req_raw);
  call_close_on_loop(c);
}

static void call_cancel_on_loop(grit_call *c) {
  grit_callsm_event ev = {.kind = GRIT_CALLSM_EV_CANCEL,
                          .message = "Cancelled"};
  grit_call_sm_feed(c, &ev);
}

static void call_run_op(grit_call *c, call_op *op) {
  call_op_kind kind = op->kind;
  grit_slice *s = op->slice;
  size_t raw_len = op->raw_len;
  grit_free(op);
  switch (kind) {
  case CALL_OP_START:
    call_start_on_loop(c);
    return;
  case CALL_OP_SEND:
    call_send_on_loop(c, s, raw_len);
    return;
  case CALL_OP_CLOSE:
    call_close_on_loop(c);
    return;
  case CALL_OP_CANCEL:
    call_cancel_on_loop(c); /* RT-11 */
    return;
  }
}

static void call_task(grit_task *t) {
  grit_call *c = GRIT_CONTAINER_OF(t, grit_call, task);
  grit_list ops;
  grit_list_init(&ops);
  pthread_mutex_lock(&c->mu);
  while (!grit_list_empty(&c->ops))
    grit_list_insert_tail(&ops, grit_list_pop_head(&c->ops));
  bool cancel = c->cancel_requested;
  c->cancel_requested = false;
  bool unary = c->unary_launch;
  c->unary_launch = false;
  bool recv_state = c->recv_state_dirty;
  pthread_mutex_unlock(&c->mu);
  if (unary)
    call_unary_on_loop(c);
  grit_list *e;
  while ((e = grit_list_pop_head(&ops)) != NULL)
    call_run_op(c, GRIT_CONTAINER_OF(e, call_op, link));
  if (recv_state)
    call_apply_recv_pause(c);
  if (cancel)
    call_cancel_on_loop(c); /* RT-11 */
  grit_call_unref(c);       /* the ref taken when the task was posted */
}

/* Queue an op and wake the loop. Returns GRIT_ERR_NOMEM on failure. */
static grit_err call_post_raw(grit_call *c, call_op_kind kind, grit_slice *s,
                              size_t raw_len) {
  call_op *op = grit_malloc(sizeof(*op));
  if (!op) {
    grit_slice_unref(s);
    return GRIT_ERR_NOMEM;
  }
  op->kind = kind;
  op->slice = s;
  op->raw_len = raw_len;
  pthread_mutex_lock(&c->mu);
  grit_list_insert_tail(&c->ops, &op->link);
  pthread_mutex_unlock(&c->mu);
  /* A queued task holds one ref; take it before the task can run. */
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  if (!grit_rt_post(c->ch->rt, &c->task))
    __atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  return GRIT_OK;
}

static grit_err call_post(grit_call *c, call_op_kind kind, grit_slice *s) {
  return call_post_raw(c, kind, s, 0);
}

/* ---- creation, shared by the public entry points ---- */

static uint64_t next_call_id;

static grit_err call_copy_opts(grit_call *c, const grit_call_opts *opts) {
  c->timeout_ms = opts->timeout_ms;
  c->wait_for_ready_opt = opts->wait_for_ready;
  c->kind = opts->kind;
  c->codec = grit_call_codec(&c->ch->o, opts->compression); /* CP-01 */
  grit_str_copy(c->info.request_encoding, sizeof(c->info.request_encoding),
                grit_codec_name(c->codec));
  if (opts->metadata &&
      grit_metadata_copy(opts->metadata, &c->metadata) != GRIT_OK)
    return GRIT_ERR_NOMEM;
  if (opts->authority && !(c->authority = grit_strdup(opts->authority)))
    return GRIT_ERR_NOMEM;
  if (opts->idempotency_key &&
      !(c->idempotency_key = grit_strdup(opts->idempotency_key)))
    return GRIT_ERR_NOMEM;
  return GRIT_OK;
}

/* Whether a call may start with these arguments; |*why| says why not. */
static grit_err call_check_args(grit_channel *ch, const char *method,
                                const grit_call_opts *opts, const char **why) {
  if (!ch)
    *why = "the channel is NULL";
  else if (!method)
    *why = "the method is NULL";
  else if (method[0] != '/')
    *why = "the method must be \"/package.Service/Method\"";
  else if (opts && opts->version != GRIT_CALL_OPTS_VERSION &&
           opts->version != 2)
    *why = "unknown grit_call_opts version (expected "
           "GRIT_CALL_OPTS_VERSION, 3, or 2)";
  else if (opts && opts->version >= 3 && opts->interceptor_count &&
           !opts->interceptors)
    *why = "interceptor_count without interceptors";
  else if (opts && (unsigned)opts->wait_for_ready > GRIT_WFR_ON)
    *why = "wait_for_ready is not a grit_wait_for_ready value";
  else if (opts && !grit_method_kind_name(opts->kind))
    *why = "kind is not a grit_method_kind value";
  else if (opts && !grit_compression_name(opts->compression))
    *why = "compression is not a grit_compression value";
  else if (grit_channel_get_state(ch, false) == GRIT_STATE_SHUTDOWN) {
    *why = "the channel is shut down";
    return GRIT_ERR_SHUTDOWN;
  } else
    return GRIT_OK;
  return GRIT_ERR_INVALID_ARG;
}

static const grit_call_hooks call_hooks = {
    .feed = grit_call_sm_feed,
    .attempt_event = grit_call_sm_attempt_event,
    .fail = grit_call_fail_on_loop,
    .deliver_headers = grit_call_deliver_headers,
    .deliver_message = grit_call_deliver_message,
    .loop_release = grit_call_loop_release,
    .send_progress = grit_call_on_send_progress,
    .config_ready = grit_call_config_ready,
    .pick_ready = grit_attempt_on_pick_ready,
};

grit_err grit_call_create_internal(grit_channel *ch, const char *method,
                                   const grit_call_opts *opts, grit_call **out,
                                   const char **why) {
  *out = NULL;
  grit_err rv = call_check_args(ch, method, opts, why);
  if (rv != GRIT_OK)
    return rv;
  *why = "out of memory creating the call";
  /* The channel's spare (the last call freed) saves a large malloc and
   * free per call; it is zeroed like calloc's from |ch| on, its mutex and
   * condition variable kept as they are (unlocked, no waiter). */
  grit_call *c = __atomic_exchange_n(&ch->spare_call, NULL, __ATOMIC_ACQUIRE);
  if (c) {
    memset(&c->ch, 0, sizeof(*c) - offsetof(grit_call, ch));
  } else {
    if ((c = grit_calloc(1, sizeof(*c))) == NULL)
      return GRIT_ERR_NOMEM;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
  }
  c->ch = ch;
  c->hooks = &call_hooks;
  grit_channel_ref(ch);
  c->refs = 1;
  c->loop_holds = 1; /* until the call ends (grit_call_end) */
  c->id = __atomic_add_fetch(&next_call_id, 1, __ATOMIC_RELAXED);
  c->info.size = sizeof(c->info); /* handed to grit_unary_cb (abi.md) */
  c->info.call_id = c->id;        /* grit_call_get_info reads it at once */
  grit_list_init(&c->ops);
  grit_list_init(&c->recvq);
  grit_callsm_init(&c->sm);
  grit_list_init(&c->link);
  grit_list_init(&c->live_link);
  grit_replay_init(&c->sends, 0, NULL, 0);
  c->send_limit = (uint64_t)ch->o.per_call_send_buffer;
  c->codec = grit_call_codec(&ch->o, GRIT_COMPRESSION_DEFAULT);
  grit_str_copy(c->info.request_encoding, sizeof(c->info.request_encoding),
                grit_codec_name(c->codec));
  c->task.fn = call_task;
  size_t mlen = strlen(method);
  c->method_len = mlen <= UINT32_MAX ? (uint32_t)mlen : 0;
  if (mlen < sizeof(c->method_inline)) {
    memcpy(c->method_inline, method, mlen + 1);
    c->method = c->method_inline;
  } else {
    c->method = grit_strndup(method, mlen);
  }
  rv = c->method ? GRIT_OK : GRIT_ERR_NOMEM;
  if (opts && rv == GRIT_OK)
    rv = call_copy_opts(c, opts);
  if (rv == GRIT_OK) /* CR-01, IC-01 */
    rv = grit_call_auth_setup(c, opts);
  if (rv == GRIT_OK) /* OB-02 */
    rv = grit_call_trace_setup(c, opts ? opts->traceparent : NULL, why);
  if (rv != GRIT_OK) {
    call_free(c);
    return rv;
  }
  *out = c;
  return GRIT_OK;
}

/* Hand a created call to the loop: it holds one more ref until done. */
grit_err grit_call_launch(grit_call *c) {
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED); /* the loop's */
  grit_err rv = call_post(c, CALL_OP_START, NULL);
  if (rv != GRIT_OK)
    __atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  return rv;
}

grit_err grit_call_queue_send(grit_call *c, grit_slice *framed,
                              size_t raw_len) {
  return call_post_raw(c, CALL_OP_SEND, framed, raw_len);
}

grit_err grit_call_queue_close(grit_call *c) {
  return call_post(c, CALL_OP_CLOSE, NULL);
}

grit_err grit_call_queue_cancel(grit_call *c) {
  if (call_post(c, CALL_OP_CANCEL, NULL) == GRIT_OK)
    return GRIT_OK;
  /* Out of memory must not lose a cancel (STYLE 3.4): a flag needs no op,
   * and call_task reads it after the ops already queued. */
  pthread_mutex_lock(&c->mu);
  c->cancel_requested = true;
  pthread_mutex_unlock(&c->mu);
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  if (!grit_rt_post(c->ch->rt, &c->task))
    __atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  return GRIT_OK;
}

bool grit_call_send_room_locked(const grit_call *c, size_t framed_len) {
  uint64_t unsent = c->send_queued - c->send_out;
  return unsent == 0 || unsent + framed_len <= c->send_limit;
}

void grit_call_on_send_progress(grit_call *c, uint64_t out) {
  pthread_mutex_lock(&c->mu);
  if (out <= c->send_out) {
    pthread_mutex_unlock(&c->mu);
    return;
  }
  c->send_out = out;
  bool ready =
      c->send_ready_wanted && c->send_queued - c->send_out <= c->send_limit / 2;
  c->send_ready_wanted = c->send_ready_wanted && !ready;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (ready && !c->blocking && c->cbs.on_send_ready && c->state != CALL_DONE)
    c->cbs.on_send_ready(c, c->user_data);
}

/* With c->mu held: the reader took |len| bytes (or discards the queue);
 * wake the loop to resume the stream once the queue has drained. */
void grit_call_recv_taken_locked(grit_call *c, size_t len) {
  c->recv_bytes -= len < c->recv_bytes ? len : c->recv_bytes;
  if (!c->recv_paused || c->recv_bytes > CALL_RECV_QUEUE_HIGH / 2)
    return;
  c->recv_paused = false;
  if (c->recv_state_dirty)
    return; /* a task is already on its way */
  c->recv_state_dirty = true;
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  if (!grit_rt_post(c->ch->rt, &c->task))
    __atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

grit_err grit_call_launch_unary(grit_call *c, grit_slice *framed,
                                size_t raw_len) {
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED); /* the loop's */
  pthread_mutex_lock(&c->mu);
  c->unary_req = framed;
  c->unary_req_raw = raw_len;
  c->unary_launch = true;
  pthread_mutex_unlock(&c->mu);
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED); /* the task's */
  if (!grit_rt_post(c->ch->rt, &c->task))
    __atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  return GRIT_OK;
}
