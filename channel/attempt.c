/* Attempts: each is a fresh LB pick (RT-12) and a stream that replays the
 * buffered sends in order (RT-13) with grpc-previous-rpc-attempts (RT-08)
 * and the remaining grpc-timeout (RT-09). Response headers or a message
 * commit the call to the attempt (RT-05); an uncommitted attempt that the
 * server never saw is replayed transparently (TR-01..TR-04). */
#include "channel/channel_int.h"

#include <string.h>

#define TRANSPARENT_CAP 1000 /* SPEC TR-01 */

static void attempt_pick(call_attempt *a);

static void attempt_free(call_attempt *a) {
  grit_call *c = a->c;
  grit_free(a->picked);
  a->picked = NULL;
  if (c->winner == a)
    c->winner = NULL; /* never leave the call pointing at freed memory */
  if (a == &c->attempt0)
    c->attempt0_used = false;
  else
    grit_free(a);
}

/* The first attempt (and a later one, once it is free) lives in the call:
 * the call outlives its attempts, since each stream holds it. */
static call_attempt *attempt_alloc(grit_call *c) {
  if (c->attempt0_used)
    return grit_calloc(1, sizeof(call_attempt));
  c->attempt0_used = true;
  memset(&c->attempt0, 0, sizeof(c->attempt0));
  return &c->attempt0;
}

/* ---- sending ---- */

/* Hand |a|'s stream every replay item it has not sent yet, then the
 * half-close. After commit the winner's items are released at once. */
static void attempt_flush(call_attempt *a) {
  grit_call *c = a->c;
  if (!a->stream)
    return;
  size_t idx = c->sends_dropped;
  grit_list *e;
  GRIT_LIST_FOREACH(e, &c->sends.items) {
    if (idx++ < a->sent)
      continue;
    grit_replay_item *it = GRIT_CONTAINER_OF(e, grit_replay_item, link);
    grit_stream_send(a->stream, it->slice);
    a->sent = idx;
    a->handed_bytes += it->slice->len;
    a->sent_msg_bytes += it->slice->len - 5; /* A66: messages, not frames */
  }
  if (c->sends.closed && !a->close_sent) {
    a->close_sent = true;
    grit_stream_close_send(a->stream);
  }
  if (c->committed && c->winner == a) {
    c->sends_dropped += c->sends.count; /* the stream holds its own refs */
    grit_replay_free(&c->sends);
  }
}

void grit_attempt_flush_all(grit_call *c) {
  grit_list *e;
  GRIT_LIST_FOREACH(e, &c->attempts) {
    attempt_flush(GRIT_CONTAINER_OF(e, call_attempt, link));
  }
}

/* ---- commit ---- */

void grit_call_commit(grit_call *c, call_attempt *a) {
  if (c->committed)
    return;
  c->committed = true;
  c->rs.committed = true;
  c->winner = a;
  grit_call_retry_stop_timers(c); /* no further hedges or retries */
  GRIT_TRACE(c->hedge ? GRIT_TRACE_HEDGING : GRIT_TRACE_RETRY, GRIT_LEVEL_INFO,
             "call %llu: committed to attempt %u", (unsigned long long)c->id,
             a->number);
  grit_list *e = c->attempts.next;
  while (e != &c->attempts) {
    call_attempt *o = GRIT_CONTAINER_OF(e, call_attempt, link);
    e = e->next;
    if (o == a)
      continue;
    grit_list_remove(&o->link);
    grit_attempt_observe(o, GRIT_STATUS_CANCELLED, "another attempt won",
                         GRIT_REASON_HEDGE_LOST);
    GRIT_TRACE(GRIT_TRACE_HEDGING, GRIT_LEVEL_INFO,
               "call %llu: attempt %u cancelled (attempt %u won)",
               (unsigned long long)c->id, o->number, a->number);
    grit_attempt_cancel(o, GRIT_STATUS_CANCELLED, "another attempt won");
  }
  attempt_flush(a);
}

/* ---- stream callbacks ---- */

static void attempt_on_headers(grit_stream *s, const grit_metadata *md,
                               void *ud) {
  call_attempt *a = ud;
  grit_call *c = a->c;
  if (a->stream != s || c->state == CALL_DONE)
    return;
  a->headers = true;
  if (c->timers & CALL_TIMER_RECV)
    uv_timer_stop(&c->recv_timer);
  grit_call_commit(c, a); /* RT-05, HG-02 */
  if (c->winner == a)
    grit_call_deliver_headers(c, md);
}

static void attempt_on_message(grit_stream *s, grit_slice *msg, void *ud) {
  call_attempt *a = ud;
  grit_call *c = a->c;
  if (a->stream != s || c->state == CALL_DONE) {
    grit_slice_unref(msg);
    return;
  }
  a->rcvd_msg_bytes += msg->len; /* A66 */
  grit_call_commit(c, a);
  if (c->winner == a)
    grit_call_deliver_message(c, msg);
  else
    grit_slice_unref(msg);
}

/* SPEC TR-01..TR-03: may this ended stream be replayed transparently? */
static bool attempt_transparent_ok(call_attempt *a,
                                   const grit_stream_result *r) {
  grit_call *c = a->c;
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

static void attempt_transparent(call_attempt *a, const grit_stream_result *r) {
  grit_call *c = a->c;
  if (++c->transparent > TRANSPARENT_CAP) {
    grit_list_remove(&a->link);
    attempt_free(a);
    grit_call_end(c, GRIT_STATUS_INTERNAL, "transparent retry limit reached",
                  NULL, GRIT_REASON_EXHAUSTED);
    return;
  }
  grit_attempt_observe(a, r->code, r->message, GRIT_REASON_NONE);
  c->info.transparent_retries++;
  c->info.attempts++;
  __atomic_add_fetch(&c->ch->stats.transparent_retries, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->ch->stats.attempts, 1, __ATOMIC_RELAXED);
  GRIT_TRACE(GRIT_TRACE_RETRY, GRIT_LEVEL_DEBUG,
             "call %llu attempt %u: transparent retry (%s)",
             (unsigned long long)c->id, a->number, r->message);
  a->kind = GRIT_ATTEMPT_TRANSPARENT;
  a->sent = 0;
  a->handed_bytes = 0;
  a->close_sent = false;
  a->backoff_ms = 0;
  a->pushback = false;
  a->start_us = grit_clock_now_us();
  a->transparent_retry = true;
  grit_obs_attempt_start(a); /* OB-01, OB-02: its own count and span */
  attempt_pick(a);
}

static void attempt_on_done(grit_stream *s, const grit_stream_result *r,
                            void *ud) {
  call_attempt *a = ud;
  grit_call *c = a->c;
  if (a->ended) { /* cancelled earlier: the call let go of it */
    attempt_free(a);
    grit_call_loop_release(c);
    return;
  }
  a->stream = NULL;
  /* gRFC A50: count the status of every stream the server saw. */
  if (a->transport && r->wire != GRIT_WIRE_NOT_SENT &&
      r->wire != GRIT_WIRE_REFUSED)
    grit_channel_lb_on_call_result(c->ch, grit_transport_peer(a->transport),
                                   r->code == GRIT_STATUS_OK, r->trailers);
  grit_str_copy(a->response_encoding, sizeof(a->response_encoding),
                r->encoding ? r->encoding : "");
  if (c->winner == a) {
    grit_attempt_reason why =
        r->code == GRIT_STATUS_OK ? GRIT_REASON_OK : GRIT_REASON_COMMITTED;
    grit_list_remove(&a->link);
    grit_attempt_observe(a, r->code, r->message, why); /* MX-03 */
    grit_call_end(c, r->code, r->message, r->trailers, why);
    attempt_free(a);
  } else if (attempt_transparent_ok(a, r)) {
    attempt_transparent(a, r);
  } else {
    grit_list_remove(&a->link);
    grit_call_on_attempt_failed(c, a, r->code, r->message, r->trailers,
                                a->recv_timed_out);
    attempt_free(a);
  }
  grit_call_loop_release(c); /* the stream's hold */
}

/* AP-03: how far this attempt's request has gone out. */
static void attempt_on_send_progress(grit_stream *s, void *ud) {
  call_attempt *a = ud;
  if (a->stream == s)
    grit_call_on_send_progress(a->c,
                               a->handed_bytes - grit_stream_pending_bytes(s));
}

static const grit_stream_cbs attempt_stream_cbs = {
    .on_headers = attempt_on_headers,
    .on_message = attempt_on_message,
    .on_done = attempt_on_done,
};

/* Streaming calls follow their send progress; unary ones send at once. */
static const grit_stream_cbs attempt_stream_cbs_flow = {
    .on_headers = attempt_on_headers,
    .on_message = attempt_on_message,
    .on_done = attempt_on_done,
    .on_send_progress = attempt_on_send_progress,
};

/* ---- picks and streams ---- */

static int64_t attempt_timeout_ns(grit_call *c) {
  if (!c->deadline_at_ms)
    return -1;
  uint64_t now = uv_now(&c->ch->rt->loop);
  if (now >= c->deadline_at_ms)
    return 0;
  return grit_ms_to_ns_sat(c->deadline_at_ms - now);
}

static void attempt_queue(call_attempt *a) {
  a->queued = true;
  grit_list_insert_tail(&a->c->ch->queued_attempts, &a->qlink);
}

static void attempt_start_stream(call_attempt *a, grit_transport *t) {
  grit_call *c = a->c;
  grit_stream_head h = {
      .path = c->method,
      .authority = c->authority ? c->authority : c->ch->target.authority,
      .timeout_ns = attempt_timeout_ns(c),
      .metadata = c->metadata,
      .previous_attempts = a->number - 1, /* RT-08, HG-01 */
      .max_recv_message_bytes = c->max_recv,
      /* Only blocking calls and on_headers callbacks read them. */
      .discard_headers = c->unary_cb || (!c->blocking && !c->cbs.on_headers),
      .encoding = c->codec != GRIT_CODEC_IDENTITY ? grit_codec_name(c->codec)
                                                  : NULL, /* CP-01 */
      .traceparent = c->trace ? a->traceparent : NULL,    /* OB-02 */
  };
  grit_stream *s;
  const grit_stream_cbs *cbs =
      c->unary_cb ? &attempt_stream_cbs : &attempt_stream_cbs_flow;
  grit_err rv = grit_transport_start_stream(t, &h, cbs, a, &s);
  if (rv == GRIT_ERR_SHUTDOWN) {
    attempt_queue(a); /* the connection is going away: nothing sent */
    return;
  }
  if (rv != GRIT_OK) {
    grit_list_remove(&a->link);
    grit_call_on_attempt_failed(c, a, GRIT_STATUS_RESOURCE_EXHAUSTED,
                                "out of memory starting a stream", NULL, false);
    attempt_free(a);
    return;
  }
  a->stream = s;
  a->transport = t;
  c->loop_holds++;
  grit_str_copy(a->peer, sizeof(a->peer), grit_transport_peer(t)->text);
  if (c->retry && c->retry->has_per_attempt_recv_timeout && !c->committed) {
    uint64_t ms = grit_ns_to_ms_ceil(c->retry->per_attempt_recv_timeout_ns);
    uv_timer_start(&c->recv_timer, grit_call_recv_timeout, ms, 0); /* RT-10 */
  }
  attempt_flush(a);
}

static void attempt_pick(call_attempt *a) {
  grit_call *c = a->c;
  grit_pick_args pa = {.metadata = c->metadata, /* LP-03 */
                       .want_detail = c->ch->o.observer != NULL};
  grit_pick_result r = grit_channel_pick(c->ch, &pa);
  grit_str_copy(a->skipped, sizeof(a->skipped), r.skipped ? r.skipped : "");
  if (r.detail) { /* only asked for with an observer (want_detail) */
    grit_free(a->picked);
    a->picked = grit_strdup(r.detail); /* NULL on out-of-memory: "" */
  }
  if (r.kind == GRIT_PICK_COMPLETE) {
    attempt_start_stream(a, r.transport);
    return;
  }
  if (r.kind == GRIT_PICK_FAIL && !c->wait_for_ready) {
    /* RT-12, LB-03: the attempt fails and the policy decides. */
    grit_list_remove(&a->link);
    grit_call_on_attempt_failed(c, a, r.code, r.message, NULL, false);
    attempt_free(a);
    return;
  }
  attempt_queue(a);
}

void grit_attempt_on_pick_ready(call_attempt *a) {
  a->queued = false;
  attempt_pick(a);
}

void grit_attempt_start(grit_call *c, grit_attempt_kind kind,
                        uint64_t backoff_ms, bool pushback) {
  call_attempt *a = attempt_alloc(c);
  if (!a) {
    grit_call_end(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                  "out of memory starting an attempt", NULL,
                  GRIT_REASON_COMMITTED);
    return;
  }
  a->c = c;
  a->number = ++c->next_number;
  a->kind = kind;
  a->backoff_ms = backoff_ms;
  a->pushback = pushback;
  a->start_us = grit_clock_now_us();
  grit_list_init(&a->qlink);
  grit_list_insert_tail(&c->attempts, &a->link);
  c->rs.attempts++;
  c->info.attempts++;
  grit_chan_stats *st = &c->ch->stats;
  __atomic_add_fetch(&st->attempts, 1, __ATOMIC_RELAXED);
  if (kind == GRIT_ATTEMPT_RETRY)
    __atomic_add_fetch(&st->retries, 1, __ATOMIC_RELAXED);
  if (kind == GRIT_ATTEMPT_HEDGE) {
    __atomic_add_fetch(&st->hedges, 1, __ATOMIC_RELAXED);
    c->info.hedges++;
  }
  if (c->committed && !c->winner)
    c->winner = a; /* RT-07: committed before the first attempt */
  grit_obs_attempt_start(a);
  attempt_pick(a);
}

/* Stop |a|: RST_STREAM CANCEL if it has a stream (its on_done frees it
 * later), or just drop it. The caller has unlinked it from c->attempts. */
void grit_attempt_cancel(call_attempt *a, grit_status_code code,
                         const char *msg) {
  if (a->queued) {
    grit_list_remove(&a->qlink);
    a->queued = false;
  }
  if (a->stream) {
    grit_stream *s = a->stream;
    a->ended = true;
    grit_stream_cancel(s, code, msg);
    return;
  }
  attempt_free(a);
}
