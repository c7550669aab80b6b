/* A call on the loop: config lookup, deadline, LB pick, one stream at a
 * time, transparent retry of attempts the server never saw (SPEC TR-01,
 * TR-02), and delivery of headers, messages and the final status. */
#include "channel/channel_int.h"

#include <stdio.h>
#include <string.h>

#define TRANSPARENT_CAP 1000 /* SPEC TR-01 */

static void call_pick(grit_call *c);

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
  grit_slice_unref(c->unary_resp);
  grit_metadata_destroy(c->headers);
  grit_metadata_destroy(c->metadata);
  grit_status_free(&c->status);
  grit_free(c->method);
  grit_free(c->authority);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  grit_channel_unref(c->ch);
  grit_free(c);
}

void grit_call_unref(grit_call *c) {
  if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
    call_free(c);
}

static void call_drop_sent(grit_call *c) {
  grit_list *e;
  while ((e = grit_list_pop_head(&c->sent)) != NULL) {
    call_op *op = GRIT_CONTAINER_OF(e, call_op, link);
    grit_slice_unref(op->slice);
    grit_free(op);
  }
}

/* The loop's hold on the call ends when its timer is closed and its stream
 * has reported on_done. */
static void call_loop_release(grit_call *c) {
  if (--c->loop_holds == 0)
    grit_call_unref(c);
}

static void call_timer_closed(uv_handle_t *h) {
  call_loop_release(h->data);
}

static void call_commit(grit_call *c) {
  if (c->committed)
    return;
  c->committed = true; /* SPEC RT-05: no more retries of any kind */
  call_drop_sent(c);
}

/* Deliver the final status, then let go of loop resources. */
static void call_deliver_done(grit_call *c, grit_status_code code,
                              const char *msg, const grit_metadata *trailers) {
  pthread_mutex_lock(&c->mu);
  if (grit_status_set(&c->status, code, msg, trailers) != GRIT_OK &&
      !c->status.trailers) {
    c->status.code = GRIT_STATUS_RESOURCE_EXHAUSTED;
  }
  c->done = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  static const char empty[] = "";
  grit_status st = c->status;
  if (!st.message)
    st.message = (char *)empty;
  if (c->unary_cb) {
    grit_slice *r = code == GRIT_STATUS_OK ? c->unary_resp : NULL;
    c->unary_cb(&st, r ? r->data : NULL, r ? r->len : 0, &c->info,
                c->user_data);
    grit_call_unref(c); /* the async unary call's own handle */
  } else if (c->cbs.on_done) {
    c->cbs.on_done(c, &st, c->user_data);
  }
}

static void call_finish(grit_call *c, grit_status_code code, const char *msg,
                        const grit_metadata *trailers) {
  if (c->state == CALL_DONE)
    return;
  bool was_started = c->started_on_loop;
  if (c->state == CALL_PICKING)
    grit_list_remove(&c->link);
  c->state = CALL_DONE;
  if (was_started)
    grit_list_remove(&c->live_link);
  if (c->stream) {
    grit_stream *s = c->stream;
    c->stream = NULL; /* its on_done still comes and releases a hold */
    grit_stream_cancel(s, code, msg);
  }
  call_drop_sent(c);
  grit_svccfg_unref(c->config);
  c->config = NULL;
  c->mcfg = NULL;
  GRIT_TRACE(GRIT_TRACE_CHANNEL, GRIT_LEVEL_DEBUG, "call %llu %s: %s %s",
             (unsigned long long)c->id, c->method,
             grit_status_code_name(code), msg ? msg : "");
  call_deliver_done(c, code, msg, trailers);
  if (was_started) {
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, call_timer_closed);
  } else {
    call_loop_release(c);
  }
}

void grit_call_fail_on_loop(grit_call *c, grit_status_code code,
                            const char *msg) {
  call_finish(c, code, msg, NULL);
}

/* ---- stream callbacks ---- */

static void call_on_headers(grit_stream *s, const grit_metadata *md,
                            void *ud) {
  grit_call *c = ud;
  if (c->stream != s)
    return;
  call_commit(c);
  if (c->cbs.on_headers && !c->blocking)
    c->cbs.on_headers(c, md, c->user_data);
  if (!c->blocking)
    return;
  grit_metadata *copy = NULL;
  grit_metadata_copy(md, &copy);
  pthread_mutex_lock(&c->mu);
  c->headers = copy;
  c->headers_set = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static void call_on_message(grit_stream *s, grit_slice *msg, void *ud) {
  grit_call *c = ud;
  if (c->stream != s) {
    grit_slice_unref(msg);
    return;
  }
  call_commit(c);
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
    call_finish(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                "out of memory queueing a response message", NULL);
    return;
  }
  m->slice = msg;
  pthread_mutex_lock(&c->mu);
  grit_list_insert_tail(&c->recvq, &m->link);
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* SPEC TR-01..TR-03: may this ended attempt be replayed transparently? */
static bool call_transparent_ok(grit_call *c, const grit_stream_result *r) {
  if (c->committed || r->headers_received || !c->ch->o.enable_retries)
    return false;
  if (r->wire == GRIT_WIRE_NOT_SENT)
    return true;
  if (r->wire == GRIT_WIRE_REFUSED && !c->refused_retry_used) {
    c->refused_retry_used = true; /* TR-02: once per call */
    return true;
  }
  return false;
}

static void call_on_done(grit_stream *s, const grit_stream_result *r,
                         void *ud) {
  grit_call *c = ud;
  bool mine = c->stream == s;
  if (mine)
    c->stream = NULL;
  if (mine && c->state == CALL_ACTIVE) {
    if (call_transparent_ok(c, r)) {
      if (++c->transparent > TRANSPARENT_CAP) {
        call_finish(c, GRIT_STATUS_INTERNAL,
                    "transparent retry limit reached", NULL);
      } else {
        c->info.transparent_retries++;
        GRIT_TRACE(GRIT_TRACE_RETRY, GRIT_LEVEL_DEBUG,
                   "call %llu: transparent retry (%s)",
                   (unsigned long long)c->id, r->message);
        c->state = CALL_NEW;
        call_pick(c);
      }
    } else {
      call_finish(c, r->code, r->message, r->trailers);
    }
  }
  call_loop_release(c); /* the stream's hold */
}

static const grit_stream_cbs call_stream_cbs = {
    .on_headers = call_on_headers,
    .on_message = call_on_message,
    .on_done = call_on_done,
};

/* ---- attempts ---- */

static int64_t call_timeout_ns(grit_call *c) {
  if (!c->deadline_at_ms)
    return -1;
  uint64_t now = uv_now(&c->ch->rt->loop);
  if (now >= c->deadline_at_ms)
    return 0;
  return (int64_t)(c->deadline_at_ms - now) * 1000000;
}

static void call_start_stream(grit_call *c, grit_transport *t) {
  grit_stream_head h = {
      .path = c->method,
      .authority = c->authority ? c->authority : c->ch->target.authority,
      .timeout_ns = call_timeout_ns(c),
      .metadata = c->metadata,
      .previous_attempts = 0,
      .max_recv_message_bytes = c->max_recv,
  };
  grit_stream *s;
  grit_err rv = grit_transport_start_stream(t, &h, &call_stream_cbs, c, &s);
  if (rv == GRIT_ERR_SHUTDOWN) {
    /* The connection is going away under us: nothing was sent (TR-01). */
    c->state = CALL_PICKING;
    grit_list_insert_tail(&c->ch->queued_calls, &c->link);
    return;
  }
  if (rv != GRIT_OK) {
    call_finish(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                "out of memory starting a stream", NULL);
    return;
  }
  c->stream = s;
  c->transport = t;
  c->state = CALL_ACTIVE;
  c->loop_holds++;
  c->info.attempts++;
  snprintf(c->info.peer, sizeof(c->info.peer), "%s",
           grit_transport_peer(t)->text);
  grit_list *e;
  GRIT_LIST_FOREACH(e, &c->sent) {
    call_op *op = GRIT_CONTAINER_OF(e, call_op, link);
    grit_stream_send(s, grit_slice_ref(op->slice));
  }
  if (c->close_sent)
    grit_stream_close_send(s);
}

static void call_pick(grit_call *c) {
  grit_pick_result r = grit_channel_pick(c->ch);
  switch (r.kind) {
  case GRIT_PICK_COMPLETE:
    call_start_stream(c, r.transport);
    return;
  case GRIT_PICK_FAIL:
    if (!c->wait_for_ready) { /* LB-03 */
      call_finish(c, r.code, r.message, NULL);
      return;
    }
    break;
  case GRIT_PICK_QUEUE:
    break;
  }
  c->state = CALL_PICKING;
  grit_list_insert_tail(&c->ch->queued_calls, &c->link);
}

void grit_call_on_pick_ready(grit_call *c) {
  if (c->state == CALL_PICKING) {
    c->state = CALL_NEW;
    call_pick(c);
  }
}

static void call_deadline(uv_timer_t *t) {
  call_finish(t->data, GRIT_STATUS_DEADLINE_EXCEEDED, "Deadline Exceeded",
              NULL);
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

/* SPEC SC-07: timeout, waitForReady and message limits from the config. */
static void call_apply_config(grit_call *c) {
  c->config = grit_channel_config_ref(c->ch);
  c->mcfg = c->config ? grit_svccfg_find(c->config, c->method) : NULL;
  const grit_method_cfg *m = c->mcfg;
  uint64_t timeout_ms = c->timeout_ms;
  if (m && m->has_timeout) {
    uint64_t cfg_ms = (uint64_t)((m->timeout_ns + 999999) / 1000000);
    timeout_ms = min_nonzero(timeout_ms, cfg_ms ? cfg_ms : 1);
  }
  if (timeout_ms)
    c->deadline_at_ms = uv_now(&c->ch->rt->loop) + timeout_ms;
  if (c->wait_for_ready_opt >= 0)
    c->wait_for_ready = c->wait_for_ready_opt == 1;
  else
    c->wait_for_ready = m && m->wait_for_ready == GRIT_WFR_TRUE;
  c->max_send = limit_min(c->ch->o.max_send_message,
                          m && m->has_max_request_bytes,
                          m ? m->max_request_bytes : 0);
  c->max_recv = limit_min(c->ch->o.max_recv_message,
                          m && m->has_max_response_bytes,
                          m ? m->max_response_bytes : 0);
}

static void call_start_on_loop(grit_call *c) {
  grit_channel *ch = c->ch;
  if (ch->shutting_down) {
    call_finish(c, GRIT_STATUS_UNAVAILABLE, "channel is shutting down", NULL);
    return;
  }
  c->started_on_loop = true;
  grit_list_insert_tail(&ch->live_calls, &c->live_link);
  uv_timer_init(&ch->rt->loop, &c->timer);
  c->timer.data = c;
  call_apply_config(c);
  if (c->deadline_at_ms)
    uv_timer_start(&c->timer, call_deadline,
                   c->deadline_at_ms - uv_now(&ch->rt->loop), 0);
  call_pick(c);
}

static void call_send_on_loop(grit_call *c, call_op *op) {
  if (c->state == CALL_DONE) {
    grit_slice_unref(op->slice);
    grit_free(op);
    return;
  }
  if (c->max_send >= 0 && op->slice->len - 5 > (uint64_t)c->max_send) {
    char msg[128];
    snprintf(msg, sizeof(msg),
             "sent message larger than max (%zu vs. %lld)",
             op->slice->len - 5, (long long)c->max_send);
    grit_slice_unref(op->slice);
    grit_free(op);
    call_finish(c, GRIT_STATUS_RESOURCE_EXHAUSTED, msg, NULL); /* SC-07 */
    return;
  }
  if (c->stream)
    grit_stream_send(c->stream, grit_slice_ref(op->slice));
  if (c->committed) {
    grit_slice_unref(op->slice);
    grit_free(op);
    return;
  }
  grit_list_insert_tail(&c->sent, &op->link); /* kept for replay */
}

static void call_run_op(grit_call *c, call_op *op) {
  switch (op->kind) {
  case CALL_OP_START:
    grit_free(op);
    call_start_on_loop(c);
    return;
  case CALL_OP_SEND:
    call_send_on_loop(c, op);
    return;
  case CALL_OP_CLOSE:
    grit_free(op);
    c->close_sent = true;
    if (c->stream)
      grit_stream_close_send(c->stream);
    return;
  case CALL_OP_CANCEL:
    grit_free(op);
    call_finish(c, GRIT_STATUS_CANCELLED, "Cancelled", NULL); /* RT-11 */
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
  pthread_mutex_unlock(&c->mu);
  grit_list *e;
  while ((e = grit_list_pop_head(&ops)) != NULL)
    call_run_op(c, GRIT_CONTAINER_OF(e, call_op, link));
  grit_call_unref(c); /* the ref taken when the task was posted */
}

/* Queue an op and wake the loop. Returns GRIT_ERR_NOMEM on failure. */
static grit_err call_post(grit_call *c, call_op_kind kind, grit_slice *s) {
  call_op *op = grit_malloc(sizeof(*op));
  if (!op) {
    grit_slice_unref(s);
    return GRIT_ERR_NOMEM;
  }
  op->kind = kind;
  op->slice = s;
  pthread_mutex_lock(&c->mu);
  grit_list_insert_tail(&c->ops, &op->link);
  bool post = !c->task.queued;
  if (post)
    __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&c->mu);
  if (post)
    grit_rt_post(c->ch->rt, &c->task);
  return GRIT_OK;
}

/* ---- creation, shared by the public entry points ---- */

static uint64_t next_call_id;

grit_err grit_call_create_internal(grit_channel *ch, const char *method,
                                   const grit_call_opts *opts,
                                   grit_call **out) {
  *out = NULL;
  if (!ch || !method || method[0] != '/')
    return GRIT_ERR_INVALID_ARG;
  if (opts && opts->version != GRIT_CALL_OPTS_VERSION)
    return GRIT_ERR_INVALID_ARG;
  grit_call *c = grit_calloc(1, sizeof(*c));
  if (!c)
    return GRIT_ERR_NOMEM;
  c->ch = ch;
  grit_channel_ref(ch);
  c->refs = 1;
  c->loop_holds = 1;
  c->id = __atomic_add_fetch(&next_call_id, 1, __ATOMIC_RELAXED);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  grit_list_init(&c->ops);
  grit_list_init(&c->recvq);
  grit_list_init(&c->sent);
  grit_list_init(&c->link);
  grit_list_init(&c->live_link);
  c->task.fn = call_task;
  c->wait_for_ready_opt = -1;
  c->method = grit_strdup(method);
  grit_err rv = c->method ? GRIT_OK : GRIT_ERR_NOMEM;
  if (opts && rv == GRIT_OK) {
    c->timeout_ms = opts->timeout_ms;
    if (opts->wait_for_ready_set)
      c->wait_for_ready_opt = opts->wait_for_ready ? 1 : 0;
    else if (opts->wait_for_ready == 1)
      c->wait_for_ready_opt = 1;
    if (opts->metadata)
      rv = grit_metadata_copy(opts->metadata, &c->metadata);
    if (rv == GRIT_OK && opts->authority) {
      c->authority = grit_strdup(opts->authority);
      rv = c->authority ? GRIT_OK : GRIT_ERR_NOMEM;
    }
  }
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

grit_err grit_call_queue_send(grit_call *c, grit_slice *framed) {
  return call_post(c, CALL_OP_SEND, framed);
}

grit_err grit_call_queue_close(grit_call *c) {
  return call_post(c, CALL_OP_CLOSE, NULL);
}

grit_err grit_call_queue_cancel(grit_call *c) {
  return call_post(c, CALL_OP_CANCEL, NULL);
}
