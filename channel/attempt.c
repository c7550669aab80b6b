/* Attempts as the call machine (callsm/, SPEC SM-01) asks for them: each
 * is a fresh LB pick (RT-12, HG-08) and a stream that replays the buffered
 * sends in order (RT-13) with grpc-previous-rpc-attempts (RT-08) and the
 * remaining grpc-timeout (RT-09). What the streams report goes back to the
 * machine as events; nothing here decides a retry, a hedge or a commit. */
#include "channel/channel_int.h"

#include <string.h>

call_attempt *grit_call_winner(const grit_call *c) {
  uint8_t w = grit_callsm_winner(&c->sm);
  return w == GRIT_CALLSM_NO_SLOT ? NULL : c->att[w];
}

static void attempt_pick(call_attempt *a);

/* The policy that counted the pick hears that its stream is over. */
static void attempt_pick_done(call_attempt *a) {
  grit_pick_done *done = a->pick_done;
  if (done) {
    a->pick_done = NULL;
    done->fn(done);
  }
}

static void attempt_free(call_attempt *a) {
  grit_call *c = a->c;
  grit_free(a->picked);
  a->picked = NULL;
  grit_attempt_creds_release(a); /* CR-01: a fetch still running lets go */
  grit_free(a->pick_msg);
  grit_free(a->skipped);
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
  /* Zero as the call's creation left it, unless an attempt used it. */
  if (c->attempt0_dirty)
    memset(&c->attempt0, 0, sizeof(c->attempt0));
  c->attempt0_dirty = true;
  return &c->attempt0;
}

/* ---- sending ---- */

/* Hand |a|'s stream every replay item it has not sent yet, then the
 * half-close. After commit the winner's items are released at once. */
void grit_attempt_flush(call_attempt *a) {
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
  grit_callsm_note_sent(&c->sm, a->slot, (uint32_t)a->sent); /* HG-07 */
  if (c->sends.closed && !a->close_sent) {
    a->close_sent = true;
    grit_stream_close_send(a->stream);
  }
  if (grit_callsm_winner(&c->sm) == a->slot) {
    c->sends_dropped += c->sends.count; /* the stream holds its own refs */
    grit_replay_free(&c->sends);
  }
}

void grit_attempt_flush_all(grit_call *c) {
  /* Only up to the highest live slot (one, on most calls); the mask is
   * read again each time, as a flush may end or start attempts. */
  for (int i = 0; i < GRIT_CALLSM_SLOTS && (c->att_live >> i) != 0; i++)
    if (c->att[i])
      grit_attempt_flush(c->att[i]);
}

/* ---- stream callbacks: events for the machine ---- */

static void attempt_on_headers(grit_stream *s, const grit_metadata *md,
                               void *ud) {
  call_attempt *a = ud;
  grit_call *c = a->c;
  if (a->stream != s || a->ended)
    return;
  grit_callsm_event ev = {.kind = GRIT_CALLSM_EV_HEADERS, .slot = a->slot};
  c->hooks->feed(c, &ev); /* RT-05, HG-02: commits */
  if (grit_call_winner(c) == a && !grit_callsm_done(&c->sm))
    c->hooks->deliver_headers(c, md);
}

static void attempt_on_message(grit_stream *s, grit_slice *msg, void *ud) {
  call_attempt *a = ud;
  grit_call *c = a->c;
  if (a->stream != s || a->ended) {
    grit_slice_unref(msg);
    return;
  }
  a->rcvd_msg_bytes += msg->len; /* A66 */
  grit_callsm_event ev = {.kind = GRIT_CALLSM_EV_MESSAGE, .slot = a->slot};
  c->hooks->feed(c, &ev); /* RT-05 */
  if (grit_call_winner(c) == a && !grit_callsm_done(&c->sm))
    c->hooks->deliver_message(c, msg);
  else
    grit_slice_unref(msg);
}

static void attempt_on_done(grit_stream *s, const grit_stream_result *r,
                            void *ud) {
  call_attempt *a = ud;
  grit_call *c = a->c;
  attempt_pick_done(a);
  if (a->ended) { /* dropped earlier: the call let go of it */
    attempt_free(a);
    c->hooks->loop_release(c);
    return;
  }
  a->stream = NULL;
  /* gRFC A50: count the status of every stream the server saw. */
  if (a->transport && r->wire != GRIT_WIRE_NOT_SENT &&
      r->wire != GRIT_WIRE_REFUSED)
    grit_channel_lb_on_call_result(c->ch, grit_transport_peer(a->transport),
                                   r->code == GRIT_STATUS_OK, r->trailers);
  if (r->encoding && r->encoding[0]) /* mostly none: "" already */
    grit_str_copy(a->response_encoding, sizeof(a->response_encoding),
                  r->encoding);
  grit_callsm_event ev = {
      .kind = GRIT_CALLSM_EV_STREAM_END,
      .slot = a->slot,
      .code = r->code,
      .message = r->message,
      .trailers = r->trailers,
      .wire = r->wire == GRIT_WIRE_NOT_SENT  ? GRIT_CALLSM_WIRE_NOT_SENT
              : r->wire == GRIT_WIRE_REFUSED ? GRIT_CALLSM_WIRE_REFUSED
                                             : GRIT_CALLSM_WIRE_SENT,
      .headers_received = r->headers_received,
  };
  if (c->pol) /* RT-04, HG-05: only a policy reads it */
    ev.pushback = grit_retry_parse_pushback(r->trailers);
  c->hooks->feed(c, &ev);
  c->hooks->loop_release(c); /* the stream's hold */
}

/* AP-03: how far this attempt's request has gone out. */
static void attempt_on_send_progress(grit_stream *s, void *ud) {
  call_attempt *a = ud;
  if (a->stream == s)
    a->c->hooks->send_progress(a->c,
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
  /* OB-02: this attempt's traceparent, made when its stream starts (the
   * transport copies it) rather than kept in every attempt. */
  char tp_text[GRIT_TRACEPARENT_LEN + 1];
  if (c->tr) /* from the ids grit_obs_attempt_start put in hex */
    grit_traceparent_compose(c->tr->trace_id, a->span_id, c->tr->tp.flags,
                             tp_text);
  grit_stream_head h = {
      .path = c->method,
      .path_len = c->method_len,
      .authority = c->authority ? c->authority : c->ch->target.authority,
      .timeout_ns = attempt_timeout_ns(c),
      .metadata = a->creds_md ? a->creds_md : c->metadata, /* CR-01 */
      .previous_attempts = a->number - 1,                  /* RT-08, HG-01 */
      .max_recv_message_bytes = c->max_recv,
      /* Only blocking calls and on_headers callbacks read them. */
      .discard_headers = !(c->auth && c->auth->ic) &&
                         (c->unary_cb || (!c->blocking && !c->cbs.on_headers)),
      .encoding = c->codec != GRIT_CODEC_IDENTITY ? grit_codec_name(c->codec)
                                                  : NULL, /* CP-01 */
      .traceparent = c->tr ? tp_text : NULL,              /* OB-02 */
  };
  grit_stream *s;
  const grit_stream_cbs *cbs =
      c->unary_cb ? &attempt_stream_cbs : &attempt_stream_cbs_flow;
  grit_err rv = grit_transport_start_stream(t, &h, cbs, a, &s);
  if (rv != GRIT_OK)
    attempt_pick_done(a);
  if (rv == GRIT_ERR_SHUTDOWN) {
    attempt_queue(a); /* the connection is going away: nothing sent */
    return;
  }
  if (rv != GRIT_OK) {
    a->c->hooks->attempt_event(a, GRIT_CALLSM_EV_PICK_FAILED,
                               GRIT_STATUS_RESOURCE_EXHAUSTED,
                               "out of memory starting a stream");
    return;
  }
  a->stream = s;
  a->transport = t;
  c->loop_holds++;
  a->peer_len = (uint8_t)grit_str_copy(a->peer, sizeof(a->peer),
                                       grit_transport_peer(t)->text);
  grit_attempt_flush(a);
  a->c->hooks->attempt_event(a, GRIT_CALLSM_EV_STREAM_STARTED, GRIT_STATUS_OK,
                             NULL);
}

static void attempt_pick(call_attempt *a) {
  grit_call *c = a->c;
  grit_pick_args pa = {.metadata = c->metadata, /* LP-03 */
                       .want_detail = c->ch->o.observer != NULL,
                       .route = c->route ? &c->route->pick : NULL};
  grit_pick_result r = grit_channel_pick(c->ch, &pa);
  grit_free(a->skipped); /* issue 15: kept only when the pick passed over */
  a->skipped = r.skipped && r.skipped[0] ? grit_strdup(r.skipped) : NULL;
  /* Only an observer reads it (MX-03); a policy may name itself anyway
   * (pick_first, round_robin): no copy per call without an observer. */
  if (r.detail && pa.want_detail) {
    grit_free(a->picked);
    a->picked = grit_strdup(r.detail); /* NULL on out-of-memory: "" */
  }
  if (r.kind == GRIT_PICK_COMPLETE) {
    a->pick_done = r.done;
    attempt_start_stream(a, r.transport);
    return;
  }
  /* An xDS drop (issue 27) fails wait-for-ready calls too. */
  if ((r.kind == GRIT_PICK_FAIL && !c->wait_for_ready) ||
      r.kind == GRIT_PICK_DROP) {
    /* RT-12, LB-03: the attempt fails and the policy decides; a drop ends
     * the call (never retried, as grpc-core and grpc-go). */
    a->pick_drop = r.kind == GRIT_PICK_DROP;
    a->c->hooks->attempt_event(a, GRIT_CALLSM_EV_PICK_FAILED, r.code,
                               r.message);
    return;
  }
  attempt_queue(a);
}

void grit_attempt_pick_now(call_attempt *a) {
  attempt_pick(a);
}

void grit_attempt_on_pick_ready(call_attempt *a) {
  a->queued = false;
  attempt_pick(a);
}

/* The counters of MX-01 move here and in grit_attempt_repick only. */
void grit_attempt_start(grit_call *c, const grit_callsm_action *act) {
  call_attempt *a = attempt_alloc(c);
  if (!a) {
    c->hooks->fail(c, GRIT_STATUS_RESOURCE_EXHAUSTED,
                   "out of memory starting an attempt");
    return;
  }
  a->c = c;
  a->slot = act->slot;
  a->number = act->number;
  a->kind = act->attempt_kind;
  a->backoff_ms = act->backoff_ms;
  a->pushback = act->pushback;
  a->start_us = grit_clock_now_us();
  grit_list_init(&a->qlink);
  c->att[a->slot] = a;
  c->att_live |= (uint8_t)(1u << a->slot);
  grit_chan_stats *st = &c->ch->stats;
  __atomic_add_fetch(&st->attempts, 1, __ATOMIC_RELAXED);
  if (a->kind == GRIT_ATTEMPT_RETRY)
    __atomic_add_fetch(&st->retries, 1, __ATOMIC_RELAXED);
  else if (a->kind == GRIT_ATTEMPT_HEDGE)
    __atomic_add_fetch(&st->hedges, 1, __ATOMIC_RELAXED);
  c->info.attempts = c->sm.counts.attempts;
  c->info.hedges = c->sm.counts.hedges;
  grit_obs_attempt_start(a);
  grit_attempt_begin(a); /* CR-01: credentials first, then the pick */
}

/* TR-01..TR-03: the same attempt, replayed from the first send. */
void grit_attempt_repick(call_attempt *a) {
  grit_call *c = a->c;
  __atomic_add_fetch(&c->ch->stats.transparent_retries, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->ch->stats.attempts, 1, __ATOMIC_RELAXED);
  c->info.transparent_retries = c->sm.counts.transparent;
  c->info.attempts = c->sm.counts.attempts;
  GRIT_TRACE(GRIT_TRACE_RETRY, GRIT_LEVEL_DEBUG,
             "call %llu attempt %u: transparent retry",
             (unsigned long long)c->id, a->number);
  a->kind = GRIT_ATTEMPT_TRANSPARENT;
  a->sent = 0;
  a->handed_bytes = 0;
  a->close_sent = false;
  a->backoff_ms = 0;
  a->pushback = false;
  a->start_us = grit_clock_now_us();
  a->transparent_retry = true;
  grit_obs_attempt_start(a); /* OB-01, OB-02: its own count and span */
  grit_attempt_begin(a);     /* CR-01: a transparent retry asks again */
}

void grit_attempt_drop(call_attempt *a) {
  grit_call *c = a->c;
  c->att[a->slot] = NULL;
  c->att_live &= (uint8_t) ~(1u << a->slot);
  c->sm_waiting &= (uint8_t) ~(1u << a->slot);
  if (a->queued) {
    grit_list_remove(&a->qlink);
    a->queued = false;
  }
  if (a->stream) {
    grit_stream *s = a->stream;
    a->ended = true;
    grit_stream_cancel(s, GRIT_STATUS_CANCELLED, "attempt dropped");
    return;
  }
  attempt_free(a);
}
