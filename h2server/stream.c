/*
 * One request stream: collects the request (headers come through the log,
 * messages are unframed here), binds a script step at HEADERS, runs the
 * handler and applies the action. Everything that submits frames runs from
 * h2s_stream_work(), outside nghttp2's callbacks, except trailers, which
 * nghttp2 allows from the data source callback.
 */
#include "h2s_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* big_header is split into fields of at most STREAM_BIG_CHUNK bytes, so no
 * single field trips a decoder's per-field limit (nghttp2: 64 KiB). */
#define STREAM_BIG_CHUNK 8192
#define STREAM_MAX_BIG 1024
#define STREAM_MAX_NV (16 + 2 * H2S_MAX_MD + STREAM_MAX_BIG)

typedef struct stream_nv {
  nghttp2_nv nv[STREAM_MAX_NV];
  size_t n;
  char status[16];
  char grpc_status[16];
  char *big;
  char big_names[STREAM_MAX_BIG][16];
} stream_nv;

h2s_stream *h2s_stream_new(h2s_conn *c, int32_t id) {
  h2s_stream *s = h2s_xcalloc(1, sizeof(*s));
  s->c = c;
  s->id = id;
  s->rec = h2s_log_new_request(c->srv, c, id);
  c->n_open++;
  h2s_log_lock(c->srv);
  s->rec->pub.open_streams = c->n_open;
  if (c->n_open > c->srv->stats.max_open_streams)
    c->srv->stats.max_open_streams = c->n_open;
  h2s_log_unlock(c->srv);
  /* Appended, so work runs (and steps are taken) in arrival order. */
  s->prev = c->streams_tail;
  if (s->prev)
    s->prev->next = s;
  else
    c->streams = s;
  c->streams_tail = s;
  return s;
}

static void stream_free_timer(uv_handle_t *h) {
  free(h);
}

/* The action returns receive window by hand (window_step, window_every). */
static bool stream_manual_window(const h2s_stream *s) {
  return s->has_act && (s->act.window_step || s->act.window_every_ms);
}

static void stream_window_update(h2s_conn *c, int32_t id, uint64_t n) {
  while (n > 0) {
    int32_t inc = n > INT32_MAX ? INT32_MAX : (int32_t)n;
    nghttp2_submit_window_update(c->ng, NGHTTP2_FLAG_NONE, id, inc);
    n -= (uint64_t)inc;
  }
}

void h2s_stream_free(h2s_stream *s) {
  h2s_conn *c = s->c;
  if (s->prev)
    s->prev->next = s->next;
  else
    c->streams = s->next;
  if (s->next)
    s->next->prev = s->prev;
  else
    c->streams_tail = s->prev;
  if (s->timer) {
    uv_timer_stop(s->timer);
    s->timer->data = NULL;
    uv_close((uv_handle_t *)s->timer, stream_free_timer);
  }
  if (s->wtimer) {
    uv_timer_stop(s->wtimer);
    uv_close((uv_handle_t *)s->wtimer, stream_free_timer);
  }
  c->n_open--;
  /* Give back the connection window of data nobody consumed. */
  if (s->unconsumed && !c->closing && !c->freeze_window) {
    if (stream_manual_window(s))
      s->unreturned += s->unconsumed;
    else
      nghttp2_session_consume_connection(c->ng, s->unconsumed);
  }
  if (s->unreturned && !c->closing && !c->freeze_window)
    stream_window_update(c, 0, s->unreturned);
  h2s_log_lock(c->srv);
  s->rec->pub.closed = true;
  c->srv->n_closed++;
  h2s_log_unlock(c->srv);
  h2s_buf_free(&s->in);
  h2s_buf_free(&s->out);
  h2s_action_free(&s->act);
  free(s);
}

/* A status other than a plain OK: echo bodies stay empty then. */
static bool stream_status_ok(const h2s_action *a) {
  return a->grpc_status == 0 && !a->grpc_status_raw && !a->no_grpc_status &&
         (a->http_status == 0 || a->http_status == 200);
}

void h2s_stream_frame(h2s_stream *s, const void *p, size_t n) {
  const h2s_action *a = &s->act;
  uint32_t len = a->prefix_len ? a->prefix_len : (uint32_t)n;
  uint8_t prefix[5] = {a->compressed ? 1 : 0, (uint8_t)(len >> 24),
                       (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
  h2s_buf_add(&s->out, prefix, sizeof(prefix));
  h2s_buf_add(&s->out, p, n);
}

/* The echo body's answer to one request message. */
static void stream_answer_msg(h2s_stream *s, const uint8_t *p, size_t n) {
  if (!h2s_testservice_msg(s, p, n))
    h2s_stream_frame(s, p, n);
}

void h2s_stream_on_data(h2s_stream *s, const uint8_t *p, size_t n) {
  h2s_conn *c = s->c;
  s->unconsumed += n;
  h2s_log_lock(c->srv);
  s->rec->pub.data_bytes += n;
  h2s_log_unlock(c->srv);
  c->work = true;
  h2s_buf_add(&s->in, p, n);
  size_t off = 0;
  while (s->in.len - off >= 5) {
    const uint8_t *m = s->in.p + off;
    size_t len =
        (size_t)m[1] << 24 | (size_t)m[2] << 16 | (size_t)m[3] << 8 | m[4];
    if (s->in.len - off - 5 < len)
      break;
    h2s_log_add_msg(c->srv, s->rec, m + 5, len, m[0]);
    if (s->live)
      stream_answer_msg(s, m + 5, len);
    off += 5 + len;
  }
  memmove(s->in.p, s->in.p + off, s->in.len - off);
  s->in.len -= off;
}

void h2s_stream_on_headers_done(h2s_stream *s) {
  s->headers_done = true;
  s->c->work = true;
}

void h2s_stream_on_end(h2s_stream *s) {
  h2s_server *srv = s->c->srv;
  h2s_log_lock(srv);
  s->rec->pub.half_closed = true;
  s->rec->pub.end_ms = h2s_now_ms(srv);
  s->rec->pub.truncated = s->in.len > 0;
  h2s_log_unlock(srv);
  s->end_pending = true;
  s->c->work = true;
}

static void stream_nv_add(stream_nv *l, const char *name, const char *value,
                          size_t vlen, uint8_t flags) {
  if (l->n == STREAM_MAX_NV)
    return;
  l->nv[l->n++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name),
                               vlen, flags};
}

static void stream_nv_str(stream_nv *l, const char *name, const char *value) {
  stream_nv_add(l, name, value, strlen(value), NGHTTP2_NV_FLAG_NONE);
}

static void stream_nv_md(stream_nv *l, const h2s_header *md) {
  for (size_t i = 0; i < H2S_MAX_MD && md[i].name; i++)
    stream_nv_str(l, md[i].name, md[i].value);
}

static void stream_nv_headers(stream_nv *l, const h2s_action *a) {
  snprintf(l->status, sizeof(l->status), "%d",
           a->http_status ? a->http_status : 200);
  stream_nv_str(l, ":status", l->status);
  if (a->content_type == NULL)
    stream_nv_str(l, "content-type", "application/grpc");
  else if (a->content_type[0] != '\0')
    stream_nv_str(l, "content-type", a->content_type);
  stream_nv_md(l, a->headers);
  if (a->big_header) {
    l->big = h2s_xmalloc(STREAM_BIG_CHUNK);
    memset(l->big, 'x', STREAM_BIG_CHUNK);
    size_t left = a->big_header;
    for (size_t i = 0; left > 0 && i < STREAM_MAX_BIG; i++) {
      size_t n = left < STREAM_BIG_CHUNK ? left : STREAM_BIG_CHUNK;
      snprintf(l->big_names[i], sizeof(l->big_names[i]), "x-h2s-big-%zu", i);
      stream_nv_add(l, l->big_names[i], l->big, n, NGHTTP2_NV_FLAG_NO_INDEX);
      left -= n;
    }
  }
}

/* Adds grpc-status and friends; returns the status number sent or -1. */
static int stream_nv_status(stream_nv *l, const h2s_action *a) {
  int sent = -1;
  if (a->grpc_status_raw) {
    stream_nv_str(l, "grpc-status", a->grpc_status_raw);
  } else if (!a->no_grpc_status) {
    snprintf(l->grpc_status, sizeof(l->grpc_status), "%d", a->grpc_status);
    stream_nv_str(l, "grpc-status", l->grpc_status);
    sent = a->grpc_status;
  }
  if (a->grpc_message)
    stream_nv_str(l, "grpc-message", a->grpc_message);
  if (a->pushback)
    stream_nv_str(l, "grpc-retry-pushback-ms", a->pushback);
  stream_nv_md(l, a->trailers);
  return sent;
}

static void stream_set_sent(h2s_stream *s, int status, uint32_t rst) {
  h2s_log_lock(s->c->srv);
  if (status >= 0)
    s->rec->pub.status_sent = status;
  if (rst)
    s->rec->pub.rst_sent = rst;
  h2s_log_unlock(s->c->srv);
}

static ssize_t stream_read(nghttp2_session *ng, int32_t id, uint8_t *buf,
                           size_t length, uint32_t *flags,
                           nghttp2_data_source *src, void *user_data) {
  h2s_stream *s = src->ptr;
  if (s->act.data_chunk && length > s->act.data_chunk)
    length = s->act.data_chunk; /* one frame per read: data_chunk each */
  size_t avail = s->out.len - s->out_off;
  size_t n = avail < length ? avail : length;
  if (n)
    memcpy(buf, s->out.p + s->out_off, n);
  s->out_off += n;
  if (s->out_off == s->out.len)
    s->out_off = s->out.len = 0;
  if (n == 0 && !s->out_done) {
    s->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  if (s->out.len > 0 || !s->out_done)
    return (ssize_t)n;
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  switch (s->act.end) {
  case H2S_END_TRAILERS: {
    stream_nv l = {0};
    int sent = stream_nv_status(&l, &s->act);
    *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    nghttp2_submit_trailer(ng, id, l.nv, l.n);
    stream_set_sent(s, sent, 0);
    break;
  }
  case H2S_END_HANG:
    *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    break;
  case H2S_END_RST:
  case H2S_END_DROP:
    *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    s->post_eof = true;
    s->c->work = true;
    break;
  }
  return (ssize_t)n;
}

static void stream_fill_body(h2s_stream *s) {
  const h2s_action *a = &s->act;
  uint32_t count = a->count ? a->count : 1;
  switch (a->body) {
  case H2S_BODY_ECHO:
    if (!stream_status_ok(a))
      break;
    h2s_testservice_metadata(s);
    for (size_t i = 0; i < s->rec->pub.n_msgs; i++)
      stream_answer_msg(s, s->rec->msgs[i].data, s->rec->msgs[i].len);
    /* Acting before the request ended: answer the rest as it comes. */
    s->live = !s->rec->pub.half_closed;
    break;
  case H2S_BODY_BYTES:
    for (uint32_t i = 0; i < count; i++)
      h2s_stream_frame(s, a->data, a->len);
    break;
  case H2S_BODY_SIZE: {
    uint8_t *p = h2s_xmalloc(a->size);
    for (size_t i = 0; i < a->size; i++)
      p[i] = (uint8_t)('a' + i % 26);
    for (uint32_t i = 0; i < count; i++)
      h2s_stream_frame(s, p, a->size);
    free(p);
    break;
  }
  case H2S_BODY_NONE:
    break;
  case H2S_BODY_RAW:
    h2s_buf_add(&s->out, a->data, a->len);
    break;
  }
  s->out_done = !s->live;
}

static void stream_reply(h2s_stream *s) {
  stream_fill_body(s);
  stream_nv l = {0};
  stream_nv_headers(&l, &s->act);
  nghttp2_data_provider prd = {.source.ptr = s, .read_callback = stream_read};
  nghttp2_submit_response(s->c->ng, s->id, l.nv, l.n, &prd);
  free(l.big);
}

static void stream_trailers_only(h2s_stream *s) {
  stream_nv l = {0};
  stream_nv_headers(&l, &s->act);
  int sent = stream_nv_status(&l, &s->act);
  nghttp2_submit_response(s->c->ng, s->id, l.nv, l.n, NULL);
  free(l.big);
  stream_set_sent(s, sent, 0);
}

static void stream_raw_frame(h2s_buf *b, size_t len, uint8_t type,
                             uint8_t flags, int32_t id) {
  uint8_t hd[9] = {(uint8_t)(len >> 16),
                   (uint8_t)(len >> 8),
                   (uint8_t)len,
                   type,
                   flags,
                   (uint8_t)(id >> 24 & 0x7f),
                   (uint8_t)(id >> 16),
                   (uint8_t)(id >> 8),
                   (uint8_t)id};
  h2s_buf_add(b, hd, sizeof(hd));
}

/* HEADERS with ":status: 200" (static index 8) and no END_HEADERS, then
 * empty CONTINUATION frames that never end the header block. */
static void stream_continuation_flood(h2s_stream *s) {
  h2s_buf *raw = &s->c->raw;
  static const uint8_t status_200 = 0x88;
  stream_raw_frame(raw, 1, NGHTTP2_HEADERS, 0, s->id);
  h2s_buf_add(raw, &status_200, 1);
  for (uint32_t i = 0; i < s->act.count; i++)
    stream_raw_frame(raw, 0, NGHTTP2_CONTINUATION, 0, s->id);
}

/* Connection effects first; returns false when the stream is done for. */
static bool stream_conn_effects(h2s_stream *s) {
  h2s_conn *c = s->c;
  const h2s_action *a = &s->act;
  if (a->stop_reading && !c->stop_reading) {
    c->stop_reading = true;
    uv_read_stop(&c->h.stream);
  }
  c->freeze_window |= a->freeze_window;
  c->no_ping_ack |= a->no_ping_ack;
  for (uint32_t i = 0; i < a->ping_flood; i++) {
    uint8_t opaque[8] = {'h',
                         '2',
                         's',
                         0,
                         (uint8_t)(i >> 24),
                         (uint8_t)(i >> 16),
                         (uint8_t)(i >> 8),
                         (uint8_t)i};
    nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_NONE, opaque);
  }
  for (uint32_t i = 0; i < a->settings_flood; i++)
    nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, NULL, 0);
  if (a->settings[0].id)
    h2s_conn_settings(c, a->settings, H2S_MAX_SETTINGS);
  if (!a->goaway)
    return true;
  int64_t last = (int64_t)s->id + a->goaway_last_delta;
  last = last < 0 ? 0 : last > INT32_MAX ? INT32_MAX : last;
  if (last > 0 && last % 2 == 0)
    last--; /* client streams are odd; nghttp2 drops an even id silently */
  if (a->goaway_now)
    nghttp2_session_terminate_session2(c->ng, (int32_t)last, a->goaway_code);
  else
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, (int32_t)last,
                          a->goaway_code, NULL, 0);
  h2s_log_lock(c->srv);
  s->rec->pub.goaway_sent = true;
  h2s_log_unlock(c->srv);
  return !a->goaway_now && last >= s->id;
}

static void stream_apply(h2s_stream *s) {
  h2s_conn *c = s->c;
  const h2s_action *a = &s->act;
  h2s_log_lock(c->srv);
  s->rec->pub.acted = true;
  s->rec->pub.kind = a->kind;
  s->rec->pub.acted_ms = h2s_now_ms(c->srv);
  h2s_log_unlock(c->srv);
  s->acted = true;
  c->work = true;
  if (!stream_conn_effects(s))
    return;
  switch (a->kind) {
  case H2S_REPLY:
    stream_reply(s);
    break;
  case H2S_TRAILERS_ONLY:
    stream_trailers_only(s);
    break;
  case H2S_HANG:
  case H2S_DEFER:
    break;
  case H2S_RST:
    nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, a->rst_code);
    stream_set_sent(s, -1, a->rst_code);
    break;
  case H2S_DROP:
    c->drop_reset = a->drop_reset;
    c->close_on_flush = true;
    break;
  case H2S_INJECT:
    h2s_buf_add(&c->raw, a->data, a->len);
    break;
  case H2S_CONTINUATION_FLOOD:
    stream_continuation_flood(s);
    break;
  }
}

static void stream_on_timer(uv_timer_t *t) {
  h2s_stream *s = t->data;
  uv_close((uv_handle_t *)t, stream_free_timer);
  if (s == NULL)
    return;
  s->timer = NULL;
  stream_apply(s);
  h2s_conn_flush(s->c);
}

static void stream_start(h2s_stream *s) {
  s->started = true;
  if (s->act.delay_ms == 0) {
    stream_apply(s);
    return;
  }
  s->timer = h2s_xmalloc(sizeof(*s->timer));
  uv_timer_init(&s->c->srv->loop, s->timer);
  s->timer->data = s;
  uv_timer_start(s->timer, stream_on_timer, s->act.delay_ms, 0);
}

/* Runs the handler on |s->act| and keeps an owned copy of its result. */
static h2s_kind stream_call_handler(h2s_stream *s, bool at_end, h2s_kind kind) {
  h2s_server *srv = s->c->srv;
  h2s_action tmp = s->act;
  tmp.kind = kind;
  srv->cfg.handler(&s->rec->pub, at_end, &tmp, srv->cfg.handler_data);
  h2s_kind chosen = tmp.kind;
  if (chosen == H2S_DEFER)
    tmp.kind = s->act.kind;
  h2s_action copy;
  h2s_action_copy(&copy, &tmp);
  h2s_action_free(&s->act);
  s->act = copy;
  return chosen;
}

static void stream_pick(h2s_stream *s) {
  h2s_server *srv = s->c->srv;
  bool scripted = h2s_script_take(srv, s->rec->pub.path, &s->act);
  s->has_act = true;
  bool now = s->act.at_headers;
  /* A real servicer streams FullDuplexCall answers (interop ping_pong). */
  if (!scripted && s->act.kind == H2S_REPLY && s->act.body == H2S_BODY_ECHO &&
      h2s_testservice_live(s->rec->pub.path))
    now = true;
  if (srv->cfg.handler && srv->cfg.handler_at_headers)
    now = stream_call_handler(s, false, now ? s->act.kind : H2S_DEFER) !=
          H2S_DEFER;
  if (now)
    stream_start(s);
}

static void stream_on_end_work(h2s_stream *s) {
  h2s_server *srv = s->c->srv;
  if (!s->started) {
    if (srv->cfg.handler &&
        stream_call_handler(s, true, s->act.kind) == H2S_DEFER)
      s->act.kind = H2S_HANG; /* nothing later to decide at */
    stream_start(s);
  } else if (s->live) {
    s->out_done = true;
  }
}

static void stream_post_eof(h2s_stream *s) {
  h2s_conn *c = s->c;
  if (s->act.end == H2S_END_RST) {
    nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, s->act.rst_code);
    stream_set_sent(s, -1, s->act.rst_code);
  } else if (s->act.end == H2S_END_DROP) {
    c->drop_reset = s->act.drop_reset;
    c->close_on_flush = true;
  }
}

/* Returns the window of everything consumed: all at once, or in
 * increments of 1, 2, ... window_step bytes. */
static void stream_return_window(h2s_stream *s) {
  h2s_conn *c = s->c;
  uint32_t step = s->act.window_step;
  while (s->unreturned > 0) {
    uint64_t inc = s->unreturned;
    if (step) {
      if (s->step_next == 0 || s->step_next > step)
        s->step_next = 1;
      if (inc > s->step_next)
        inc = s->step_next;
      s->step_next++;
    }
    stream_window_update(c, s->id, inc);
    stream_window_update(c, 0, inc);
    s->unreturned -= inc;
  }
}

static void stream_on_wtimer(uv_timer_t *t) {
  h2s_stream *s = t->data;
  if (s->unreturned == 0)
    return;
  stream_return_window(s);
  h2s_conn_flush(s->c);
}

/* act.iws_at: SETTINGS_INITIAL_WINDOW_SIZE changes at byte marks. Runs
 * before this pass returns any window, so |pending| (received, no
 * WINDOW_UPDATE queued) is a lower bound of what the client has in flight
 * when it applies the new value: its window becomes at most value -
 * pending. */
static void stream_iws_check(h2s_stream *s) {
  h2s_conn *c = s->c;
  while (s->iws_next < H2S_MAX_IWS) {
    const h2s_iws_change *ch = &s->act.iws_at[s->iws_next];
    if (ch->after_bytes == 0 && ch->value == 0)
      break;
    if (s->rec->pub.data_bytes < ch->after_bytes)
      break;
    int64_t pending =
        nghttp2_session_get_stream_effective_recv_data_length(c->ng, s->id);
    if (pending < 0)
      break; /* the stream is gone */
    if (ch->value < c->iws_current && pending <= (int64_t)ch->value)
      break; /* wait until the window would go negative */
    h2s_setting set[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, ch->value}};
    h2s_conn_settings(c, set, 1);
    int64_t low = (int64_t)ch->value - pending;
    h2s_log_lock(c->srv);
    if (s->rec->pub.iws_sent == 0 || low < s->rec->pub.window_low)
      s->rec->pub.window_low = low;
    s->rec->pub.iws_sent++;
    h2s_log_unlock(c->srv);
    s->iws_next++;
  }
}

static void stream_flow(h2s_stream *s) {
  h2s_conn *c = s->c;
  if (c->freeze_window)
    return;
  if (s->has_act)
    stream_iws_check(s);
  if (s->unconsumed == 0)
    return;
  if (!stream_manual_window(s)) {
    nghttp2_session_consume(c->ng, s->id, s->unconsumed);
    s->unconsumed = 0;
    return;
  }
  s->unreturned += s->unconsumed;
  s->unconsumed = 0;
  if (s->act.window_every_ms == 0) {
    stream_return_window(s);
  } else if (s->wtimer == NULL) {
    s->wtimer = h2s_xmalloc(sizeof(*s->wtimer));
    uv_timer_init(&c->srv->loop, s->wtimer);
    s->wtimer->data = s;
    uv_timer_start(s->wtimer, stream_on_wtimer, s->act.window_every_ms,
                   s->act.window_every_ms);
  }
}

void h2s_stream_work(h2s_stream *s) {
  h2s_conn *c = s->c;
  if (s->headers_done && !s->has_act)
    stream_pick(s);
  if (s->end_pending && s->timer == NULL) {
    s->end_pending = false;
    stream_on_end_work(s);
  }
  stream_flow(s);
  if (s->post_eof) {
    s->post_eof = false;
    stream_post_eof(s);
  }
  if (s->rst_after_end) {
    /* Done before the client half-closed: tell it to stop sending, as
     * gRPC servers do (RFC 9113 §8.1). */
    s->rst_after_end = false;
    nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id,
                              NGHTTP2_NO_ERROR);
  }
  if (s->deferred && (s->out.len > 0 || s->out_done)) {
    s->deferred = false;
    nghttp2_session_resume_data(c->ng, s->id);
  }
}
