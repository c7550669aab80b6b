/* gRPC streams on a transport: request HEADERS (SPEC HS-01), the send
 * queue behind nghttp2's data provider, the result of a stream and the
 * delivery of its events. */
#include "transport/transport.h"
#include "transport/transport_int.h"

#include <stdio.h>
#include <string.h>

bool grit_slice_fifo_push(grit_slice_fifo *f, grit_slice *s) {
  if (f->count == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 4;
    grit_slice **v = grit_malloc(cap * sizeof(*v));
    if (!v)
      return false;
    for (size_t i = 0; i < f->count; i++)
      v[i] = f->v[(f->head + i) % f->cap];
    grit_free(f->v);
    f->v = v;
    f->head = 0;
    f->cap = cap;
  }
  f->v[(f->head + f->count) % f->cap] = s;
  f->count++;
  return true;
}

grit_slice *grit_slice_fifo_pop(grit_slice_fifo *f) {
  if (f->count == 0)
    return NULL;
  grit_slice *s = f->v[f->head];
  f->head = (f->head + 1) % f->cap;
  f->count--;
  return s;
}

void grit_slice_fifo_clear(grit_slice_fifo *f) {
  grit_slice *s;
  while ((s = grit_slice_fifo_pop(f)) != NULL)
    grit_slice_unref(s);
  f->head = 0;
}

void grit_slice_fifo_free(grit_slice_fifo *f) {
  grit_slice_fifo_clear(f);
  grit_free(f->v);
  memset(f, 0, sizeof(*f));
}

static void stream_clear_send(grit_stream *s) {
  grit_slice_fifo_clear(&s->sendq);
  s->send_off = 0;
  s->pending_bytes = 0;
}

/* Freed streams stay with their transport, rings included, up to this
 * many: a steady call rate then allocates no stream memory. */
#define STREAM_CACHE_MAX 32

static grit_stream *stream_alloc(grit_transport *t) {
  grit_list *e = grit_list_pop_head(&t->free_streams);
  if (!e)
    return grit_calloc(1, sizeof(grit_stream));
  t->nfree_streams--;
  grit_stream *s = GRIT_CONTAINER_OF(e, grit_stream, node);
  grit_slice_fifo sendq = s->sendq, recvq = s->recvq;
  memset(s, 0, sizeof(*s));
  s->sendq = sendq;
  s->recvq = recvq;
  return s;
}

static void stream_release(grit_stream *s) {
  grit_transport *t = s->t;
  if (t->nfree_streams < STREAM_CACHE_MAX) {
    grit_list_insert_tail(&t->free_streams, &s->node);
    t->nfree_streams++;
    return;
  }
  grit_slice_fifo_free(&s->sendq);
  grit_slice_fifo_free(&s->recvq);
  grit_free(s);
}

void grit_stream_cache_free(grit_transport *t) {
  grit_list *e;
  while ((e = grit_list_pop_head(&t->free_streams)) != NULL) {
    grit_stream *s = GRIT_CONTAINER_OF(e, grit_stream, node);
    grit_slice_fifo_free(&s->sendq);
    grit_slice_fifo_free(&s->recvq);
    grit_free(s);
  }
  t->nfree_streams = 0;
}

void grit_stream_free(grit_stream *s) {
  grit_transport *t = s->t;
  /* The connection's window must not shrink by what a gone stream held. */
  grit_h2_release_withheld(t, s);
  grit_list_remove(&s->node);
  grit_list_remove(&s->ev_node);
  grit_list_remove(&s->rx_node);
  if (s->id > 0 && t->slots[GRIT_STREAM_SLOT(s->id)] == s)
    t->slots[GRIT_STREAM_SLOT(s->id)] = NULL;
  /* Detach from nghttp2 so no later callback can find this memory; this
   * also works for a request still queued under MAX_CONCURRENT_STREAMS. */
  if (s->id > 0 && t->h2)
    nghttp2_session_set_stream_user_data(t->h2, s->id, NULL);
  stream_clear_send(s);
  grit_slice_fifo_clear(&s->recvq);
  grit_deframer_free(&s->deframer);
  grit_metadata_destroy(s->blk);
  grit_metadata_destroy(s->ev_headers);
  grit_metadata_destroy(s->trailers);
  grit_free(s->grpc_message);
  grit_free(s->message);
  stream_release(s);
}

void grit_stream_queue_event(grit_stream *s) {
  if (s->in_ev)
    return;
  s->in_ev = true;
  grit_list_insert_tail(&s->t->ev_streams, &s->ev_node);
  grit_transport_schedule(s->t);
}

void grit_stream_finish(grit_stream *s, grit_status_code code,
                        const char *message, grit_wire_state wire, bool drop,
                        int rst_code) {
  grit_transport *t = s->t;
  if (s->finished)
    return;
  s->finished = true;
  t->active--;
  if (code == GRIT_STATUS_OK)
    t->calls.succeeded++;
  else
    t->calls.failed++;
  s->code = code;
  s->wire = wire;
  /* The decoded grpc-message is handed over rather than copied; "" needs
   * no copy; on out-of-memory the message is "" too (stream_deliver). */
  if (message && message == s->grpc_message) {
    s->message = s->grpc_message;
    s->grpc_message = NULL;
  } else if (message && message[0]) {
    s->message = grit_strdup(message);
  }
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG,
             "transport %s: stream %d: done %s \"%s\" wire=%d", t->addr.text,
             (int)s->id, grit_status_code_name(code), message ? message : "",
             (int)wire);
  if (rst_code >= 0 && s->id > 0 && t->h2 && !t->io_dead) {
    nghttp2_submit_rst_stream(t->h2, NGHTTP2_FLAG_NONE, s->id,
                              (uint32_t)rst_code);
    grit_transport_schedule(t);
  }
  if (drop) {
    grit_metadata_destroy(s->ev_headers);
    s->ev_headers = NULL;
    s->ev_headers_pending = false;
    grit_slice_fifo_clear(&s->recvq);
  }
  stream_clear_send(s);
  grit_stream_queue_event(s);

  if (t->at_capacity && t->h2 &&
      t->active < nghttp2_session_get_remote_settings(
                      t->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)) {
    t->at_capacity = false;
    t->ev_capacity = true;
  }
  /* A GOAWAY (either way) closes the connection once its streams end. */
  if (t->going_away && t->active == 0 && t->phase != GRIT_TP_CLOSED)
    grit_transport_fail(t, GRIT_STATUS_UNAVAILABLE,
                        t->goaway_received ? "server GOAWAY, streams drained"
                                           : "transport drained");
}

void grit_stream_deliver(grit_stream *s) {
  /* The stream stays on t->ev_streams while its callbacks run, so a
   * re-entrant grit_stream_cancel cannot queue it twice. */
  if (s->ev_send_progress) {
    s->ev_send_progress = false;
    if (!s->finished)
      s->cbs.on_send_progress(s, s->user_data);
    return;
  }
  if (s->ev_headers_pending) {
    grit_metadata *md = s->ev_headers;
    s->ev_headers = NULL;
    s->ev_headers_pending = false;
    if (s->cbs.on_headers)
      s->cbs.on_headers(s, md ? md : grit_metadata_empty(), s->user_data);
    grit_metadata_destroy(md);
    return;
  }
  if (s->recvq.count > 0) {
    grit_slice *msg = grit_slice_fifo_pop(&s->recvq);
    if (s->cbs.on_message)
      s->cbs.on_message(s, msg, s->user_data);
    else
      grit_slice_unref(msg);
    return;
  }
  if (!s->finished) {
    s->in_ev = false;
    grit_list_remove(&s->ev_node);
    return;
  }
  grit_stream_result r = {
      .code = s->code,
      .message = s->message ? s->message : "",
      .trailers = s->trailers ? s->trailers : grit_metadata_empty(),
      .trailers_only = s->trailers_only,
      .headers_received = s->headers_received,
      .wire = s->wire,
      .encoding = s->deframer.enc_name,
  };
  if (s->cbs.on_done)
    s->cbs.on_done(s, &r, s->user_data);
  grit_stream_free(s);
}

size_t grit_stream_take_send(grit_stream *s, uint8_t *buf, size_t len) {
  size_t n = 0;
  while (n < len && s->sendq.count > 0) {
    grit_slice *head = s->sendq.v[s->sendq.head];
    size_t left = head->len - s->send_off;
    size_t take = left < len - n ? left : len - n;
    memcpy(buf + n, head->data + s->send_off, take);
    n += take;
    s->send_off += take;
    if (s->send_off == head->len) {
      grit_slice_unref(grit_slice_fifo_pop(&s->sendq));
      s->send_off = 0;
    }
  }
  grit_stream_sent(s, n);
  return n;
}

void grit_stream_sent(grit_stream *s, size_t n) {
  s->pending_bytes -= n;
  if (n > 0 && s->cbs.on_send_progress && !s->ev_send_progress) {
    s->ev_send_progress = true;
    grit_stream_queue_event(s);
  }
}

/* nghttp2 copies what it is not told to keep: names and values that live
 * as long as the session (literals, the user agent) go uncopied. */
#define STREAM_NV_LIT(n, v)                                                    \
  ((nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1,  \
                NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE})

static nghttp2_nv stream_nv(const char *name, const void *value, size_t len,
                            uint8_t flags) {
  return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), len,
                      flags};
}

/* The flags of a header whose value differs on every call (a timeout, a
 * traceparent): sent without entering the HPACK table, where each would
 * push out entries later calls could have sent as one byte; but the first
 * on a connection (|*named| false, set here) is indexed, so the later ones
 * name it by that entry's index instead of Huffman-coding the name again
 * (while the entry lasts). */
static uint8_t stream_vary_flags(bool *named) {
  uint8_t f = NGHTTP2_NV_FLAG_NO_COPY_NAME;
  if (*named)
    f |= NGHTTP2_NV_FLAG_NO_INDEX;
  *named = true;
  return f;
}

static grit_err stream_submit(grit_stream *s, const grit_stream_head *h) {
  grit_transport *t = s->t;
  size_t nmd = grit_metadata_count(h->metadata);
  nghttp2_nv stack_nva[24];
  char **bins = NULL;
  nghttp2_nv *nva = stack_nva;
  size_t cap = 12 + nmd;
  grit_err rv = GRIT_ERR_NOMEM;
  if (cap > sizeof(stack_nva) / sizeof(stack_nva[0])) {
    nva = grit_malloc(cap * sizeof(*nva));
    if (!nva)
      return GRIT_ERR_NOMEM;
  }
  if (nmd > 0) {
    bins = grit_calloc(nmd, sizeof(*bins));
    if (!bins)
      goto done;
  }
  const uint8_t nc = NGHTTP2_NV_FLAG_NO_COPY_NAME;
  const char *path = h->path ? h->path : "/";
  size_t path_len = h->path && h->path_len ? h->path_len : strlen(path);
  if (t->user_agent_len == 0) /* measured once per transport */
    t->user_agent_len = strlen(t->user_agent);
  const char *auth = h->authority     ? h->authority
                     : t->server_name ? t->server_name
                                      : t->addr.text;
  size_t n = 0;
  /* SPEC HS-01, in this order: pseudo-headers first, then te, the
   * content-type, the user-agent, then grpc-* and application metadata. */
  nva[n++] = STREAM_NV_LIT(":method", "POST");
  nva[n++] = t->tls_ctx ? STREAM_NV_LIT(":scheme", "https")
                        : STREAM_NV_LIT(":scheme", "http");
  nva[n++] = stream_nv(":path", path, path_len, nc);
  nva[n++] = stream_nv(":authority", auth, strlen(auth), nc);
  nva[n++] = STREAM_NV_LIT("te", "trailers");
  nva[n++] = STREAM_NV_LIT("content-type", "application/grpc");
  nva[n++] = stream_nv("user-agent", t->user_agent, t->user_agent_len,
                       nc | NGHTTP2_NV_FLAG_NO_COPY_VALUE);
  char timeout[10];
  if (h->timeout_ns >= 0) {
    grit_timeout_encode(h->timeout_ns, timeout);
    nva[n++] = stream_nv("grpc-timeout", timeout, strlen(timeout),
                         stream_vary_flags(&t->timeout_named));
  }
  char attempts[16];
  if (h->previous_attempts > 0) {
    snprintf(attempts, sizeof(attempts), "%u", (unsigned)h->previous_attempts);
    nva[n++] =
        stream_nv("grpc-previous-rpc-attempts", attempts, strlen(attempts), nc);
  }
  /* SPEC CP-01: what grit decodes, and what the messages are in. */
  nva[n++] = STREAM_NV_LIT("grpc-accept-encoding", GRIT_ACCEPT_ENCODING);
  if (h->encoding)
    nva[n++] = stream_nv("grpc-encoding", h->encoding, strlen(h->encoding), nc);
  if (h->traceparent) /* SPEC OB-02: this attempt's span */
    nva[n++] = stream_nv("traceparent", h->traceparent, strlen(h->traceparent),
                         stream_vary_flags(&t->traceparent_named));
  for (size_t i = 0; i < nmd; i++) {
    const char *key;
    const uint8_t *val;
    size_t len;
    grit_metadata_get(h->metadata, i, &key, &val, &len);
    size_t klen = strlen(key);
    if (klen > 4 && memcmp(key + klen - 4, "-bin", 4) == 0) {
      /* SPEC HS-06: -bin values travel as unpadded base64. */
      bins[i] = grit_base64_encode(val, len, &len);
      if (!bins[i])
        goto done;
      val = (const uint8_t *)bins[i];
    }
    nva[n++] = stream_nv(key, val, len, NGHTTP2_NV_FLAG_NONE);
  }

  nghttp2_data_provider prd = {.source = {.ptr = s},
                               .read_callback = grit_h2_data_read};
  int32_t id = nghttp2_submit_request(t->h2, NULL, nva, n, &prd, s);
  if (id < 0) {
    if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
      /* Stream ids are used up: this connection takes no more. */
      t->going_away = true;
      rv = GRIT_ERR_SHUTDOWN;
    }
    goto done;
  }
  s->id = id;
  t->slots[GRIT_STREAM_SLOT(id)] = s; /* h2.c h2_lookup */
  rv = GRIT_OK;

done:
  for (size_t i = 0; bins && i < nmd; i++)
    grit_free(bins[i]);
  grit_free(bins);
  if (nva != stack_nva)
    grit_free(nva);
  return rv;
}

grit_err grit_transport_start_stream(grit_transport *t,
                                     const grit_stream_head *h,
                                     const grit_stream_cbs *cbs,
                                     void *user_data, grit_stream **out) {
  *out = NULL;
  if (!t || !h || t->phase != GRIT_TP_READY || t->going_away || t->destroying)
    return GRIT_ERR_SHUTDOWN;
  grit_stream *s = stream_alloc(t);
  if (!s)
    return GRIT_ERR_NOMEM;
  s->t = t;
  grit_list_init(&s->node);
  grit_list_init(&s->ev_node);
  grit_list_init(&s->rx_node);
  if (cbs)
    s->cbs = *cbs;
  s->user_data = user_data;
  int64_t max = h->max_recv_message_bytes != 0 ? h->max_recv_message_bytes
                                               : t->max_recv_message_bytes;
  s->deframer.max_len = max; /* grit_deframer_init: the rest is zero */
  s->discard_headers = h->discard_headers;
  s->content_length = -1; /* none received yet (HS-08) */
  grit_err rv = stream_submit(s, h);
  if (rv != GRIT_OK) {
    grit_stream_free(s);
    return rv;
  }
  grit_list_insert_tail(&t->streams, &s->node);
  t->active++;
  t->calls.started++;
  uint32_t max_streams = nghttp2_session_get_remote_settings(
      t->h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  if (t->active > max_streams)
    t->at_capacity = true; /* nghttp2 holds the HEADERS back (TR-01) */
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG,
             "transport %s: stream %d: start %s", t->addr.text, (int)s->id,
             h->path ? h->path : "/");
  grit_transport_schedule(t);
  *out = s;
  return GRIT_OK;
}

static void stream_resume(grit_stream *s) {
  if (s->data_deferred && s->id > 0) {
    s->data_deferred = false;
    nghttp2_session_resume_data(s->t->h2, s->id);
  }
  grit_transport_schedule(s->t);
}

grit_err grit_stream_send(grit_stream *s, grit_slice *framed) {
  /* The stream takes a reference of its own; the caller keeps its. */
  if (!s || !framed || s->finished || s->half_close)
    return GRIT_ERR_CALL_STATE;
  if (!grit_slice_fifo_push(&s->sendq, framed)) {
    /* Out of memory fails this stream only (STYLE 3.4). */
    grit_stream_finish(s, GRIT_STATUS_RESOURCE_EXHAUSTED,
                       "out of memory queueing a message",
                       s->headers_sent ? GRIT_WIRE_SENT : GRIT_WIRE_NOT_SENT,
                       true, NGHTTP2_CANCEL);
    return GRIT_ERR_NOMEM;
  }
  grit_slice_ref(framed);
  s->pending_bytes += framed->len;
  stream_resume(s);
  return GRIT_OK;
}

grit_err grit_stream_close_send(grit_stream *s) {
  if (!s || s->finished || s->half_close)
    return GRIT_ERR_CALL_STATE;
  s->half_close = true;
  stream_resume(s);
  return GRIT_OK;
}

void grit_stream_cancel(grit_stream *s, grit_status_code code,
                        const char *message) {
  if (!s || s->finished)
    return;
  grit_stream_finish(s, code, message ? message : "cancelled",
                     s->headers_sent ? GRIT_WIRE_SENT : GRIT_WIRE_NOT_SENT,
                     true, NGHTTP2_CANCEL);
}

void grit_stream_set_read_paused(grit_stream *s, bool paused) {
  if (!s || s->read_paused == paused)
    return;
  s->read_paused = paused;
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG,
             "transport %s: stream %d: reading %s (%zu bytes withheld)",
             s->t->addr.text, (int)s->id, paused ? "paused" : "resumed",
             s->withheld);
  if (!paused)
    grit_h2_release_withheld(s->t, s);
}

size_t grit_stream_pending_bytes(const grit_stream *s) {
  return s ? s->pending_bytes : 0;
}
