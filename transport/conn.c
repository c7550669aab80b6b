/* The uv side of a transport: connect, read, coalesced writes, timers,
 * deferred delivery of callbacks and the two-phase teardown (STYLE 3.5). */
#include "transport/transport.h"
#include "transport/transport_int.h"

#include <stdio.h>
#include <string.h>

/* Gather at most this much nghttp2 output into one write; the rest goes
 * out when that write completes, or from the pump when the socket took it
 * all at once. */
#define CONN_WRITE_CHUNK GRIT_CONN_WRITE_CHUNK
/* A flush's copied bytes from which its uncopied payloads are counted
 * against CONN_WRITE_CHUNK (below it, the chunk is full only when the
 * payloads alone fill it: grit_conn_data_frame stops the flush then). */
#define CONN_FLUSH_LOOK (64 * 1024)
#define CONN_DEFAULT_MAX_HEADER_LIST (16 * 1024)
#define CONN_DEFAULT_MAX_RECV (4 * 1024 * 1024)
#define CONN_DEFAULT_KEEPALIVE_TIMEOUT_MS 20000

static void conn_process(grit_transport *t);
static void conn_flush(grit_transport *t);

static const char *conn_phase_name(grit_tp_phase p) {
  switch (p) {
  case GRIT_TP_CONNECTING:
    return "connecting";
  case GRIT_TP_HANDSHAKE:
    return "TLS handshake";
  case GRIT_TP_SETTINGS:
    return "waiting for SETTINGS";
  case GRIT_TP_READY:
    return "ready";
  case GRIT_TP_CLOSED:
    return "closed";
  }
  return "?";
}

/* Drop the references of the flush's uncopied payloads: their write
 * completed, failed, or never started. */
static void conn_segs_release(grit_transport *t) {
  for (size_t i = 0; i < t->nsegs; i++)
    grit_slice_unref(t->segs[i].sl);
  t->nsegs = 0;
  t->seg_bytes = 0;
}

static void conn_free(grit_transport *t) {
  conn_segs_release(t);
  grit_free(t->segs);
  grit_free(t->iov);
  while (!grit_list_empty(&t->streams)) {
    grit_stream *s = GRIT_CONTAINER_OF(t->streams.next, grit_stream, node);
    grit_stream_free(s);
  }
  grit_stream_cache_free(t);
  nghttp2_session_del(t->h2);
  grit_h2mem_release(&t->h2mem);
  grit_free(t->rbuf);
  grit_tls_conn_destroy(t->tls);
  grit_tls_ctx_unref(t->tls_ctx);
  grit_buf_free(&t->wbuf);
  grit_buf_free(&t->plain);
  grit_buf_free(&t->staged);
  grit_free(t->server_name);
  grit_free(t->user_agent);
  grit_free(t);
}

static void conn_on_handle_close(uv_handle_t *h) {
  grit_transport *t = h->data;
  if (--t->open_handles == 0)
    conn_free(t);
}

/* Phase two of teardown: close every handle; the last close frees. */
static void conn_shutdown(grit_transport *t) {
  if (t->shut)
    return;
  t->shut = true;
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG, "transport %s: freed",
             t->addr.text);
  uv_handle_t *hs[] = {&t->sock.handle, (uv_handle_t *)&t->connect_timer,
                       (uv_handle_t *)&t->keepalive_timer,
                       (uv_handle_t *)&t->pump};
  for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
    if (hs[i]->data == t && !uv_is_closing(hs[i]))
      uv_close(hs[i], conn_on_handle_close);
  }
}

static void conn_on_pump(uv_idle_t *idle);

/* DATA came for a stream that stays open: keep the pump (an idle handle,
 * so the loop polls without blocking) running for read_spin_ns, and the
 * stream's next messages are read without a sleep and wake-up each. */
static void conn_spin(grit_transport *t) {
  if (t->read_spin_ns == 0)
    return;
  t->spin_until_ns = uv_hrtime() + t->read_spin_ns;
  grit_transport_schedule(t);
}

static bool conn_spinning(const grit_transport *t) {
  return t->spin_until_ns != 0 && uv_hrtime() < t->spin_until_ns;
}

void grit_transport_schedule(grit_transport *t) {
  if (!t->shut && t->pump.data && !uv_is_active((uv_handle_t *)&t->pump))
    uv_idle_start(&t->pump, conn_on_pump);
}

void grit_transport_fail(grit_transport *t, grit_status_code code,
                         const char *reason) {
  if (t->phase == GRIT_TP_CLOSED)
    return;
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_INFO,
             "transport %s: closed while %s: %s", t->addr.text,
             conn_phase_name(t->phase), reason);
  t->close_info.was_ready = t->phase == GRIT_TP_READY;
  t->phase = GRIT_TP_CLOSED;
  t->going_away = true;
  snprintf(t->close_reason, sizeof(t->close_reason), "%s", reason);
  t->close_info.code = code;
  t->close_info.reason = t->close_reason;
  if (t->connected)
    uv_read_stop(&t->sock.stream);
  if (t->connect_timer.data)
    uv_timer_stop(&t->connect_timer);
  if (t->keepalive_timer.data)
    uv_timer_stop(&t->keepalive_timer);
  /* SPEC TR-04: a stream whose HEADERS went out may have been processed;
   * one that never left is safe to retry transparently (TR-01). */
  grit_list *it;
  GRIT_LIST_FOREACH(it, &t->streams) {
    grit_stream *s = GRIT_CONTAINER_OF(it, grit_stream, node);
    grit_stream_finish(s, GRIT_STATUS_UNAVAILABLE, reason,
                       s->headers_sent ? GRIT_WIRE_SENT : GRIT_WIRE_NOT_SENT,
                       false, -1);
  }
  t->ev_closed = true;
  grit_transport_schedule(t);
}

/* The connection itself is unusable: no more reads or writes. */
static void conn_io_fail(grit_transport *t, const char *reason) {
  t->io_dead = true;
  grit_transport_fail(t, GRIT_STATUS_UNAVAILABLE, reason);
}

/* nghttp2 gives up on a session after a connection error (it has queued
 * GOAWAY): once that is handed over there is nothing left to do. Checked
 * after reads and after writes, since the GOAWAY may wait for a write in
 * flight. */
static void conn_check_terminated(grit_transport *t) {
  if (!t->shut && t->phase != GRIT_TP_CLOSED && t->h2 &&
      !nghttp2_session_want_read(t->h2) && !nghttp2_session_want_write(t->h2)) {
    grit_transport_fail(t, GRIT_STATUS_UNAVAILABLE,
                        "HTTP/2 session terminated");
    conn_process(t);
  }
}

static void conn_on_write(uv_write_t *req, int status) {
  grit_transport *t = req->data;
  t->writing = false;
  conn_segs_release(t);
  if (t->shut)
    return;
  if (status < 0) {
    char why[160];
    snprintf(why, sizeof(why), "write to %s failed: %s", t->addr.text,
             uv_strerror(status));
    conn_io_fail(t, why);
    conn_process(t);
    return;
  }
  conn_flush(t);
  conn_check_terminated(t);
}

/* Payload pieces below this are copied into wbuf: a piece of its own
 * costs a uv_buf_t and a slice reference. */
#define CONN_SEG_MIN 512

int grit_conn_data_frame(grit_transport *t, grit_stream *s,
                         const uint8_t *framehd, size_t length) {
  grit_buf *out = t->flush_out;
  if (out->len + t->seg_bytes >= CONN_WRITE_CHUNK) {
    /* Full: nghttp2 keeps the frame and asks again on the next flush. */
    t->more_output = true;
    return NGHTTP2_ERR_WOULDBLOCK;
  }
  if (t->tls) { /* the plaintext is encrypted in one go: copy it there */
    if (grit_buf_reserve(out, 9 + length) != GRIT_OK)
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    memcpy(out->data + out->len, framehd, 9);
    size_t n = grit_stream_take_send(s, out->data + out->len + 9, length);
    out->len += 9 + n; /* n == length: pending_bytes said so */
    return 0;
  }
  /* Room first, for the header, the small pieces and a segment per large
   * one, so that nothing fails once bytes leave the stream's queue. */
  size_t pieces = 0, copied = 0, off = s->send_off;
  for (size_t i = 0, left = length; left > 0; i++) {
    const grit_slice *sl = s->sendq.v[(s->sendq.head + i) % s->sendq.cap];
    size_t take = sl->len - off < left ? sl->len - off : left;
    if (take >= CONN_SEG_MIN)
      pieces++;
    else
      copied += take;
    left -= take;
    off = 0;
  }
  if (grit_buf_reserve(out, 9 + copied) != GRIT_OK)
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  if (t->nsegs + pieces > t->segs_cap) {
    size_t cap = (t->nsegs + pieces) * 2;
    grit_conn_seg *v = grit_realloc(t->segs, cap * sizeof(*v));
    if (!v)
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    t->segs = v;
    t->segs_cap = cap;
  }
  memcpy(out->data + out->len, framehd, 9);
  out->len += 9;
  for (size_t left = length; left > 0;) {
    grit_slice *head = s->sendq.v[s->sendq.head];
    size_t take =
        head->len - s->send_off < left ? head->len - s->send_off : left;
    const uint8_t *p = head->data + s->send_off;
    left -= take;
    if (take < CONN_SEG_MIN) {
      memcpy(out->data + out->len, p, take);
      out->len += take;
    } else {
      grit_conn_seg *g = &t->segs[t->nsegs++];
      g->at = out->len;
      g->sl = grit_slice_ref(head); /* until the write completes */
      g->p = p;
      g->len = take;
      t->seg_bytes += take;
    }
    s->send_off += take;
    if (s->send_off == head->len) {
      grit_slice_unref(grit_slice_fifo_pop(&s->sendq));
      s->send_off = 0;
    }
  }
  grit_stream_sent(s, length);
  return 0;
}

/* The write of |b| with the flush's uncopied payloads in their places:
 * t->iov, how many entries. */
static size_t conn_iov(grit_transport *t, const grit_buf *b) {
  size_t need = 2 * t->nsegs + 1;
  if (need > t->iov_cap) {
    uv_buf_t *v = grit_realloc(t->iov, need * 2 * sizeof(*v));
    if (!v)
      return 0;
    t->iov = v;
    t->iov_cap = need * 2;
  }
  size_t n = 0, at = 0;
  for (size_t i = 0; i < t->nsegs; i++) {
    const grit_conn_seg *g = &t->segs[i];
    if (g->at > at)
      t->iov[n++] = uv_buf_init((char *)b->data + at, (unsigned)(g->at - at));
    t->iov[n++] = uv_buf_init((char *)g->p, (unsigned)g->len);
    at = g->at;
  }
  if (b->len > at)
    t->iov[n++] = uv_buf_init((char *)b->data + at, (unsigned)(b->len - at));
  return n;
}

/* A write that failed to start: the connection is done. */
static void conn_write_failed(grit_transport *t, int r) {
  conn_segs_release(t);
  char why[160];
  snprintf(why, sizeof(why), "write to %s failed: %s", t->addr.text,
           uv_strerror(r));
  conn_io_fail(t, why);
}

/* Write |b| (and the flush's uncopied payloads, in their places) now if
 * the socket takes it all (no request, no completion callback, no poll
 * for writability); what it does not take goes through uv_write, and the
 * next flush waits for that to complete. */
static void conn_write(grit_transport *t, grit_buf *b) {
  uv_buf_t one = uv_buf_init((char *)b->data, (unsigned)b->len);
  uv_buf_t *iov = &one;
  size_t n = 1, total = b->len + t->seg_bytes;
  if (t->nsegs > 0) {
    n = conn_iov(t, b);
    iov = t->iov;
  }
  int r = n ? uv_try_write(&t->sock.stream, iov, (unsigned)n) : UV_ENOMEM;
  if (r >= 0 && (size_t)r == total) {
    conn_segs_release(t);
    return;
  }
  if (r >= 0 || r == UV_EAGAIN) {
    /* Skip what went out: whole entries, then part of one. (uv_write
     * copies the entries, so |one| may live on this stack.) */
    size_t off = r > 0 ? (size_t)r : 0;
    while (off >= iov->len) {
      off -= iov->len;
      iov++;
      n--;
    }
    iov->base += off;
    iov->len -= off;
    r = uv_write(&t->write_req, &t->sock.stream, iov, (unsigned)n,
                 conn_on_write);
  }
  if (r < 0) {
    conn_write_failed(t, r);
    return;
  }
  t->writing = true;
}

/* The flush's copied and uncopied bytes fill a chunk. (Through
 * t->flush_out, so that the flush loop's own test stays one compare.) */
static bool conn_flush_full(const grit_transport *t) {
  return t->flush_out->len + t->seg_bytes >= CONN_WRITE_CHUNK;
}

static void conn_flush(grit_transport *t) {
  if (t->writing || t->shut || !t->connected || t->io_dead)
    return;
  grit_buf *b = &t->wbuf;
  b->len = 0;
  char why[256];
  /* With TLS, the frames of one flush are staged and encrypted together,
   * so that small frames share records instead of one record each. */
  grit_buf *out = t->tls ? &t->staged : b;
  out->len = 0;
  bool h2_ok = !t->tls || grit_tls_conn_ready(t->tls);
  t->more_output = false;
  t->flush_out = out; /* grit_conn_data_frame's frames go here */
  while (h2_ok) {
    /* The uncopied payloads count too, once the copied bytes are many:
     * a cheap test per frame, and at most CONN_FLUSH_LOOK more. */
    if (out->len >= CONN_FLUSH_LOOK && conn_flush_full(t)) {
      /* nghttp2 may have more: the next flush takes it (conn_on_pump). */
      t->more_output = true;
      break;
    }
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(t->h2, &data);
    if (n < 0) {
      t->flush_out = NULL;
      conn_segs_release(t);
      snprintf(why, sizeof(why), "HTTP/2 send failed: %s",
               nghttp2_strerror((int)n));
      conn_io_fail(t, why);
      return;
    }
    if (n == 0)
      break;
    if (grit_buf_append(out, data, (size_t)n) != GRIT_OK) {
      t->flush_out = NULL;
      conn_segs_release(t);
      conn_io_fail(t, "out of memory writing to the connection");
      return;
    }
  }
  t->flush_out = NULL;
  if (t->tls) {
    grit_err rv = GRIT_OK;
    if (out->len > 0)
      rv = grit_tls_conn_send(t->tls, out->data, out->len, why, sizeof(why));
    if (rv == GRIT_OK && grit_tls_conn_take(t->tls, b) != GRIT_OK) {
      rv = GRIT_ERR_NOMEM;
      snprintf(why, sizeof(why), "out of memory writing TLS records");
    }
    out->len = 0;
    if (rv != GRIT_OK) {
      conn_io_fail(t, why);
      return;
    }
  }
  if (b->len > 0)
    conn_write(t, b);
  /* The socket took the whole chunk at once: no write completion will
   * come to start the next flush, so the pump must (FINDINGS: the stall
   * of large requests against C-core servers, which send nothing back). */
  if (t->more_output && !t->writing)
    grit_transport_schedule(t);
}

/* A chunk went out whole while nghttp2 still had output. */
static bool conn_more_output(const grit_transport *t) {
  return t->more_output && !t->writing && !t->io_dead;
}

static bool conn_has_events(const grit_transport *t) {
  return t->ev_ready || t->ev_goaway || t->ev_capacity ||
         (t->ev_closed && grit_list_empty(&t->streams)) ||
         !grit_list_empty(&t->ev_streams);
}

/* Deliver queued callbacks. Never called from inside nghttp2 or OpenSSL. A
 * callback may destroy |t|: the memory lives until the handles' close
 * callbacks, which libuv never runs from here. */
static void conn_deliver(grit_transport *t) {
  if (t->delivering || t->shut)
    return;
  t->delivering = true;
  while (!t->closed_delivered) {
    if (t->ev_ready) {
      t->ev_ready = false;
      if (t->cbs.on_ready)
        t->cbs.on_ready(t, t->user_data);
      continue;
    }
    if (!grit_list_empty(&t->ev_streams)) {
      grit_stream *s =
          GRIT_CONTAINER_OF(t->ev_streams.next, grit_stream, ev_node);
      grit_stream_deliver(s);
      continue;
    }
    if (t->ev_goaway) {
      t->ev_goaway = false;
      if (t->cbs.on_goaway)
        t->cbs.on_goaway(t, t->ev_goaway_last_id, t->ev_goaway_code,
                         t->user_data);
      continue;
    }
    if (t->ev_capacity) {
      t->ev_capacity = false;
      if (t->cbs.on_capacity && !t->going_away)
        t->cbs.on_capacity(t, t->user_data);
      continue;
    }
    if (t->ev_closed && grit_list_empty(&t->streams)) {
      t->ev_closed = false;
      t->closed_delivered = true;
      if (t->cbs.on_closed)
        t->cbs.on_closed(t, &t->close_info, t->user_data);
      continue;
    }
    break;
  }
  t->delivering = false;
  if (t->destroying && t->closed_delivered)
    conn_shutdown(t);
}

/* Deliver, and leave the write to the pump: it runs before the loop next
 * polls, so what the callbacks and the rest of this loop turn add (streams
 * started from completion callbacks) goes out in the same write. */
static void conn_process(grit_transport *t) {
  conn_deliver(t);
  if (t->shut)
    return;
  if (conn_has_events(t) || t->tls ||
      (t->h2 && nghttp2_session_want_write(t->h2)))
    grit_transport_schedule(t);
}

/* The pump: an idle handle, started only while there is something to
 * deliver or write, and stopped as soon as there is not (an active idle
 * handle makes the loop poll without blocking). */
static void conn_on_pump(uv_idle_t *idle) {
  grit_transport *t = idle->data;
  conn_deliver(t);
  if (t->shut)
    return;
  conn_flush(t);
  if (!t->writing)
    conn_check_terminated(t);
  if (!t->shut && !conn_has_events(t) && !conn_spinning(t) &&
      !conn_more_output(t))
    uv_idle_stop(&t->pump);
}

/* LB-04: a PING after keepalive_time; no ACK within keepalive_timeout
 * closes the connection. */
static void conn_on_keepalive(uv_timer_t *timer) {
  grit_transport *t = timer->data;
  if (t->phase != GRIT_TP_READY)
    return;
  if (t->ping_outstanding) {
    t->close_info.keepalive_timeout = true;
    conn_io_fail(t, "keepalive ping timed out");
    conn_process(t);
    return;
  }
  if (t->active == 0 && !t->keepalive_permit_without_calls) {
    uv_timer_start(&t->keepalive_timer, conn_on_keepalive, t->keepalive_time_ms,
                   0);
    return;
  }
  if (nghttp2_submit_ping(t->h2, NGHTTP2_FLAG_NONE, NULL) != 0) {
    conn_io_fail(t, "out of memory sending a keepalive ping");
    conn_process(t);
    return;
  }
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG,
             "transport %s: keepalive ping", t->addr.text);
  t->ping_outstanding = true;
  uint64_t to = t->keepalive_timeout_ms ? t->keepalive_timeout_ms
                                        : CONN_DEFAULT_KEEPALIVE_TIMEOUT_MS;
  uv_timer_start(&t->keepalive_timer, conn_on_keepalive, to, 0);
  conn_flush(t);
}

void grit_transport_on_ping_ack(grit_transport *t) {
  if (!t->ping_outstanding)
    return;
  t->ping_outstanding = false;
  if (t->phase == GRIT_TP_READY)
    uv_timer_start(&t->keepalive_timer, conn_on_keepalive, t->keepalive_time_ms,
                   0);
}

void grit_transport_on_settings(grit_transport *t) {
  if (t->phase != GRIT_TP_SETTINGS)
    return;
  t->phase = GRIT_TP_READY;
  t->close_info.was_ready = true;
  uv_timer_stop(&t->connect_timer);
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_INFO, "transport %s: ready",
             t->addr.text);
  if (t->keepalive_time_ms > 0)
    uv_timer_start(&t->keepalive_timer, conn_on_keepalive, t->keepalive_time_ms,
                   0);
  t->ev_ready = true;
  grit_transport_schedule(t);
}

static void conn_on_connect_timeout(uv_timer_t *timer) {
  grit_transport *t = timer->data;
  char why[200];
  snprintf(why, sizeof(why), "connect to %s timed out after %llu ms (%s)",
           t->addr.text, (unsigned long long)t->connect_timeout_ms,
           conn_phase_name(t->phase));
  conn_io_fail(t, why);
  conn_process(t);
}

static void conn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  grit_transport *t = h->data;
  (void)suggested;
  *buf = uv_buf_init((char *)t->rbuf, GRIT_TRANSPORT_RBUF_SIZE);
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread,
                         const uv_buf_t *buf) {
  grit_transport *t = stream->data;
  char why[300];
  if (nread == 0 || t->phase == GRIT_TP_CLOSED)
    return;
  if (nread < 0) {
    if (nread == UV_EOF)
      snprintf(why, sizeof(why), "connection to %s closed by peer%s",
               t->addr.text, t->goaway_received ? " after GOAWAY" : "");
    else
      snprintf(why, sizeof(why), "read from %s failed: %s", t->addr.text,
               uv_strerror((int)nread));
    conn_io_fail(t, why);
    conn_process(t);
    return;
  }
  const uint8_t *p = (const uint8_t *)buf->base;
  size_t n = (size_t)nread;
  if (t->tls) {
    bool was_ready = grit_tls_conn_ready(t->tls);
    t->plain.len = 0;
    grit_err rv = grit_tls_conn_recv(t->tls, p, n, &t->plain, why, sizeof(why));
    if (rv != GRIT_OK) {
      conn_io_fail(t, why);
      conn_process(t);
      return;
    }
    if (!was_ready && grit_tls_conn_ready(t->tls)) {
      GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG,
                 "transport %s: TLS handshake done", t->addr.text);
      t->phase = GRIT_TP_SETTINGS;
    }
    p = t->plain.data;
    n = t->plain.len;
  }
  if (n > 0) {
    ssize_t r = nghttp2_session_mem_recv(t->h2, p, n);
    if (r < 0) {
      snprintf(why, sizeof(why), "HTTP/2 error from %s: %s", t->addr.text,
               nghttp2_strerror((int)r));
      conn_io_fail(t, why);
    } else if (grit_h2_ack_received(t)) {
      conn_spin(t);
    }
  }
  conn_process(t);
  conn_check_terminated(t);
}

static void conn_on_connect(uv_connect_t *req, int status) {
  grit_transport *t = req->data;
  char why[300];
  if (t->shut || t->phase == GRIT_TP_CLOSED)
    return;
  if (status < 0) {
    snprintf(why, sizeof(why), "connect to %s failed: %s", t->addr.text,
             uv_strerror(status));
    conn_io_fail(t, why);
    conn_process(t);
    return;
  }
  t->connected = true;
  /* Issue 27: the read buffer and the HTTP/2 session (its SETTINGS then
   * go out with the preface) are made only now that there is a
   * connection; a failure fails this connection attempt like any other. */
  t->rbuf = grit_malloc(GRIT_TRANSPORT_RBUF_SIZE);
  if (!t->rbuf || grit_h2_session_new(t) != GRIT_OK) {
    snprintf(why, sizeof(why), "connect to %s: out of memory", t->addr.text);
    conn_io_fail(t, why);
    conn_process(t);
    return;
  }
  if (t->addr.u.sa.sa_family != AF_UNIX)
    uv_tcp_nodelay(&t->sock.tcp, 1);
  int r = uv_read_start(&t->sock.stream, conn_on_alloc, conn_on_read);
  if (r < 0) {
    snprintf(why, sizeof(why), "read from %s failed: %s", t->addr.text,
             uv_strerror(r));
    conn_io_fail(t, why);
    conn_process(t);
    return;
  }
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG, "transport %s: connected",
             t->addr.text);
  if (t->tls_ctx) {
    t->phase = GRIT_TP_HANDSHAKE;
    grit_err rv =
        grit_tls_conn_create(t->tls_ctx, t->server_name, t->verify_hostname,
                             &t->tls, why, sizeof(why));
    if (rv == GRIT_OK)
      rv = grit_tls_conn_start(t->tls, why, sizeof(why));
    if (rv != GRIT_OK) {
      conn_io_fail(t, why);
      conn_process(t);
      return;
    }
  } else {
    t->phase = GRIT_TP_SETTINGS;
  }
  conn_process(t);
}

static grit_err conn_copy_opts(grit_transport *t,
                               const grit_transport_opts *o) {
  if (o) {
    t->tls_ctx = grit_tls_ctx_ref(o->tls);
    t->verify_hostname = o->tls_verify_hostname;
    t->max_header_list_bytes = o->max_header_list_bytes;
    t->max_recv_message_bytes = o->max_recv_message_bytes;
    t->connect_timeout_ms = o->connect_timeout_ms;
    t->keepalive_time_ms = o->keepalive_time_ms;
    t->keepalive_timeout_ms = o->keepalive_timeout_ms;
    t->keepalive_permit_without_calls = o->keepalive_permit_without_calls;
    t->read_spin_ns = (uint64_t)o->read_spin_us * 1000;
    if (o->tls_server_name) {
      t->server_name = grit_strdup(o->tls_server_name);
      if (!t->server_name)
        return GRIT_ERR_NOMEM;
    }
  } else {
    t->max_recv_message_bytes = CONN_DEFAULT_MAX_RECV;
  }
  if (t->max_header_list_bytes == 0)
    t->max_header_list_bytes = CONN_DEFAULT_MAX_HEADER_LIST;
  /* A zeroed options struct means the SPEC SC-07 default, not "0 bytes". */
  if (t->max_recv_message_bytes == 0)
    t->max_recv_message_bytes = CONN_DEFAULT_MAX_RECV;
  t->user_agent =
      grit_strdup(o && o->user_agent ? o->user_agent : "grit-c/" GRIT_VERSION);
  return t->user_agent ? GRIT_OK : GRIT_ERR_NOMEM;
}

grit_err grit_transport_create(uv_loop_t *loop, const grit_addr *addr,
                               const grit_transport_opts *o,
                               const grit_transport_cbs *cbs, void *user_data,
                               grit_transport **out) {
  *out = NULL;
  if (!loop || !addr || addr->len == 0)
    return GRIT_ERR_INVALID_ARG;
  grit_transport *t = grit_calloc(1, sizeof(*t));
  if (!t)
    return GRIT_ERR_NOMEM;
  t->loop = loop;
  t->addr = *addr;
  if (cbs)
    t->cbs = *cbs;
  t->user_data = user_data;
  grit_list_init(&t->streams);
  grit_list_init(&t->free_streams);
  grit_list_init(&t->ev_streams);
  grit_list_init(&t->rx_streams);
  grit_buf_init(&t->wbuf);
  grit_buf_init(&t->plain);
  grit_buf_init(&t->staged);
  t->close_info.code = GRIT_STATUS_UNAVAILABLE;
  t->close_info.reason = t->close_reason;
  t->write_req.data = t;
  t->connect_req.data = t;

  grit_err rv = conn_copy_opts(t, o);
  if (rv != GRIT_OK) {
    conn_free(t);
    return rv;
  }

  /* From here on the memory belongs to the handles. */
  int r = 0;
  if (addr->u.sa.sa_family == AF_UNIX)
    r = uv_pipe_init(loop, &t->sock.pipe, 0);
  else
    r = uv_tcp_init(loop, &t->sock.tcp);
  if (r < 0) {
    conn_free(t);
    return GRIT_ERR_SYSTEM;
  }
  t->sock.handle.data = t;
  t->open_handles = 4;
  uv_timer_init(loop, &t->connect_timer);
  t->connect_timer.data = t;
  uv_timer_init(loop, &t->keepalive_timer);
  t->keepalive_timer.data = t;
  uv_idle_init(loop, &t->pump);
  t->pump.data = t;

  if (addr->u.sa.sa_family == AF_UNIX) {
    uv_pipe_connect(&t->connect_req, &t->sock.pipe, addr->u.un.sun_path,
                    conn_on_connect);
  } else {
    r = uv_tcp_connect(&t->connect_req, &t->sock.tcp, &addr->u.sa,
                       conn_on_connect);
  }
  if (r < 0) {
    GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_INFO,
               "transport %s: connect failed: %s", addr->text, uv_strerror(r));
    t->closed_delivered = true; /* nothing may be called back */
    conn_shutdown(t);
    return GRIT_ERR_SYSTEM;
  }
  if (t->connect_timeout_ms > 0)
    uv_timer_start(&t->connect_timer, conn_on_connect_timeout,
                   t->connect_timeout_ms, 0);
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_INFO,
             "transport %s: connecting%s", addr->text,
             t->tls_ctx ? " (TLS)" : "");
  *out = t;
  return GRIT_OK;
}

void grit_transport_destroy(grit_transport *t) {
  if (!t || t->destroying)
    return;
  t->destroying = true;
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG, "transport %s: destroy",
             t->addr.text);
  t->io_dead = true;
  grit_transport_fail(t, GRIT_STATUS_UNAVAILABLE, "transport destroyed");
  if (!t->delivering) {
    if (t->closed_delivered)
      conn_shutdown(t);
    else
      grit_transport_schedule(t);
  }
}

void grit_transport_drain(grit_transport *t) {
  if (!t || t->phase == GRIT_TP_CLOSED || t->going_away)
    return;
  t->going_away = true;
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_INFO,
             "transport %s: draining (%zu streams)", t->addr.text, t->active);
  if (t->phase != GRIT_TP_READY) {
    conn_io_fail(t, "transport drained before it was ready");
    return;
  }
  /* A client's GOAWAY names the last server-initiated stream: none. */
  nghttp2_submit_goaway(t->h2, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0);
  if (t->active == 0)
    grit_transport_fail(t, GRIT_STATUS_UNAVAILABLE, "transport drained");
  grit_transport_schedule(t);
}

bool grit_transport_is_ready(const grit_transport *t) {
  return t && t->phase == GRIT_TP_READY && !t->going_away;
}

void grit_transport_calls_add(const grit_transport *t,
                              grit_transport_calls *acc) {
  if (!t)
    return;
  acc->started += t->calls.started;
  acc->succeeded += t->calls.succeeded;
  acc->failed += t->calls.failed;
}

size_t grit_transport_stream_count(const grit_transport *t) {
  return t ? t->active : 0;
}

const grit_addr *grit_transport_peer(const grit_transport *t) {
  return &t->addr;
}
