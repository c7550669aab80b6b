/*
 * One accepted connection: socket I/O, optional TLS through memory BIOs, and
 * the nghttp2 server session. nghttp2 callbacks only record events and mark
 * streams for work; h2s_conn_flush() then runs that work (handlers, actions)
 * outside nghttp2, drains nghttp2's output, appends injected raw bytes and
 * writes. A connection closes when nghttp2 wants neither to read nor write,
 * or when an action drops it, once its writes are out.
 */
#include "h2s_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static h2s_stream *conn_stream(h2s_conn *c, int32_t id) {
  return nghttp2_session_get_stream_user_data(c->ng, id);
}

static void conn_count(h2s_server *srv, uint64_t *counter) {
  h2s_log_lock(srv);
  (*counter)++;
  h2s_log_unlock(srv);
}

static int conn_on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f,
                                 void *user_data) {
  h2s_conn *c = user_data;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  h2s_stream *s = h2s_stream_new(c, f->hd.stream_id);
  nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, s);
  return 0;
}

static int conn_on_header(nghttp2_session *ng, const nghttp2_frame *f,
                          const uint8_t *name, size_t namelen,
                          const uint8_t *value, size_t valuelen, uint8_t flags,
                          void *user_data) {
  h2s_conn *c = user_data;
  h2s_stream *s = conn_stream(c, f->hd.stream_id);
  /* Trailers from the client are logged as headers too. */
  if (s != NULL)
    h2s_log_add_header(c->srv, s->rec, name, namelen, value, valuelen);
  return 0;
}

static int conn_on_data_chunk(nghttp2_session *ng, uint8_t flags,
                              int32_t stream_id, const uint8_t *data,
                              size_t len, void *user_data) {
  h2s_conn *c = user_data;
  h2s_stream *s = conn_stream(c, stream_id);
  if (s != NULL)
    h2s_stream_on_data(s, data, len);
  else if (!c->freeze_window)
    nghttp2_session_consume_connection(ng, len);
  return 0;
}

static int conn_on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f,
                              void *user_data) {
  h2s_conn *c = user_data;
  h2s_server *srv = c->srv;
  h2s_stream *s = f->hd.stream_id ? conn_stream(c, f->hd.stream_id) : NULL;
  switch (f->hd.type) {
  case NGHTTP2_HEADERS:
    if (s && !s->headers_done)
      h2s_stream_on_headers_done(s);
    if (s && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
      h2s_stream_on_end(s);
    break;
  case NGHTTP2_DATA:
    h2s_log_lock(srv);
    srv->stats.data_frames_received++;
    if (f->hd.length > srv->stats.max_data_frame_received)
      srv->stats.max_data_frame_received = f->hd.length;
    h2s_log_unlock(srv);
    if (s && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
      h2s_stream_on_end(s);
    break;
  case NGHTTP2_RST_STREAM:
    h2s_log_lock(srv);
    srv->stats.rst_received++;
    if (s) {
      s->rec->pub.client_rst = true;
      s->rec->pub.client_rst_code = f->rst_stream.error_code;
    }
    h2s_log_unlock(srv);
    break;
  case NGHTTP2_PING:
    if (f->hd.flags & NGHTTP2_FLAG_ACK) {
      conn_count(srv, &srv->stats.ping_acks_received);
      break;
    }
    conn_count(srv, &srv->stats.pings_received);
    /* Acked by hand (no_auto_ping_ack) so an action can stop it. */
    if (!c->no_ping_ack) {
      nghttp2_submit_ping(ng, NGHTTP2_FLAG_ACK, f->ping.opaque_data);
      conn_count(srv, &srv->stats.ping_acks_sent);
    }
    break;
  case NGHTTP2_SETTINGS:
    if (!(f->hd.flags & NGHTTP2_FLAG_ACK))
      conn_count(srv, &srv->stats.settings_received);
    break;
  case NGHTTP2_GOAWAY:
    conn_count(srv, &srv->stats.goaways_received);
    break;
  case NGHTTP2_WINDOW_UPDATE:
    conn_count(srv, &srv->stats.window_updates_received);
    /* A blocked data provider may go on now: nghttp2 resumes it itself. */
    break;
  default:
    break;
  }
  return 0;
}

static int conn_on_frame_send(nghttp2_session *ng, const nghttp2_frame *f,
                              void *user_data) {
  h2s_conn *c = user_data;
  if (f->hd.type == NGHTTP2_GOAWAY)
    conn_count(c->srv, &c->srv->stats.goaways_sent);
  if (f->hd.type == NGHTTP2_RST_STREAM &&
      f->rst_stream.error_code == NGHTTP2_REFUSED_STREAM)
    conn_count(c->srv, &c->srv->stats.refused_sent);
  if (f->hd.type == NGHTTP2_WINDOW_UPDATE)
    conn_count(c->srv, &c->srv->stats.window_updates_sent);
  if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK))
    conn_count(c->srv, &c->srv->stats.settings_sent);
  if (f->hd.type == NGHTTP2_DATA) {
    h2s_log_lock(c->srv);
    c->srv->stats.data_bytes_sent += f->hd.length;
    c->srv->stats.data_frames_sent++;
    if (f->data.padlen > 0)
      c->srv->stats.padded_frames_sent++;
    h2s_log_unlock(c->srv);
  }
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    h2s_stream *s = conn_stream(c, f->hd.stream_id);
    if (s && !s->rec->pub.half_closed) {
      s->rst_after_end = true;
      c->work = true;
    }
  }
  return 0;
}

static int conn_on_stream_close(nghttp2_session *ng, int32_t stream_id,
                                uint32_t error_code, void *user_data) {
  h2s_conn *c = user_data;
  h2s_stream *s = conn_stream(c, stream_id);
  if (s == NULL)
    return 0;
  h2s_log_lock(c->srv);
  s->rec->pub.close_code = error_code;
  h2s_log_unlock(c->srv);
  nghttp2_session_set_stream_user_data(ng, stream_id, NULL);
  h2s_stream_free(s);
  return 0;
}

/* h2s_action.data_pad: pad each DATA frame of the stream with a Pad
 * Length of data_pad, when the window allows (nghttp2 counts the Pad
 * Length byte in the padded length). */
static ssize_t conn_select_padding(nghttp2_session *ng, const nghttp2_frame *f,
                                   size_t max_payloadlen, void *user_data) {
  h2s_conn *c = user_data;
  h2s_stream *s = f->hd.type == NGHTTP2_DATA && f->hd.stream_id
                      ? conn_stream(c, f->hd.stream_id)
                      : NULL;
  if (s == NULL || s->act.data_pad == 0)
    return (ssize_t)f->hd.length;
  size_t want = f->hd.length + 1 + s->act.data_pad;
  return (ssize_t)(want < max_payloadlen ? want : max_payloadlen);
}

static nghttp2_session *conn_session_new(h2s_conn *c) {
  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_begin_headers_callback(
      cbs, conn_on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, conn_on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs,
                                                            conn_on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, conn_on_frame_recv);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, conn_on_frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs,
                                                         conn_on_stream_close);
  nghttp2_session_callbacks_set_select_padding_callback(cbs,
                                                        conn_select_padding);
  nghttp2_option *opt;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_ping_ack(opt, 1);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_send_header_block_length(opt, 64u << 20);
  nghttp2_session *ng = NULL;
  nghttp2_session_server_new2(&ng, cbs, c, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  return ng;
}

static void conn_submit_settings(h2s_conn *c) {
  const h2s_config *cfg = &c->srv->cfg;
  nghttp2_settings_entry iv[16];
  size_t n = 0;
  if (cfg->max_concurrent_streams)
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
                                       cfg->max_concurrent_streams};
  if (cfg->initial_window_size)
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
                                       cfg->initial_window_size};
  for (size_t i = 0; i < 8 && cfg->settings[i].id; i++)
    iv[n++] =
        (nghttp2_settings_entry){cfg->settings[i].id, cfg->settings[i].value};
  c->iws_current = NGHTTP2_INITIAL_WINDOW_SIZE;
  for (size_t i = 0; i < n; i++)
    if (iv[i].settings_id == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE)
      c->iws_current = iv[i].value;
  nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, n);
  /* A wide connection window up front, as C-core grants it. */
  if (cfg->connection_window_size > 65535)
    nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0,
                                          (int32_t)cfg->connection_window_size);
}

static void conn_on_close(uv_handle_t *h) {
  free(h->data);
}

void h2s_conn_close(h2s_conn *c) {
  if (c->closing)
    return;
  c->closing = true;
  h2s_server *srv = c->srv;
  while (c->streams)
    h2s_stream_free(c->streams);
  nghttp2_session_del(c->ng);
  c->ng = NULL;
  SSL_free(c->ssl); /* frees the BIOs too */
  c->ssl = NULL;
  h2s_buf_free(&c->raw);
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  h2s_log_lock(srv);
  srv->stats.connections_open--;
  h2s_log_unlock(srv);
  if (c->drop_reset && c->is_tcp &&
      uv_tcp_close_reset(&c->h.tcp, conn_on_close) == 0)
    return;
  uv_close(&c->h.handle, conn_on_close);
}

static void conn_on_shutdown(uv_shutdown_t *req, int status) {
  h2s_conn *c = req->data;
  if (status < 0 && !c->closing)
    h2s_conn_close(c);
}

/* Close |c| once its writes are done: at once, or for a graceful end
 * with a FIN first, the socket closing when the peer's EOF comes. */
static void conn_close_flushed(h2s_conn *c) {
  if (c->lingering || c->closing)
    return;
  if (!c->graceful || c->stop_reading || c->drop_reset) {
    h2s_conn_close(c);
    return;
  }
  c->lingering = true;
  c->shutdown_req.data = c;
  if (uv_shutdown(&c->shutdown_req, &c->h.stream, conn_on_shutdown) != 0)
    h2s_conn_close(c);
}

static void conn_on_write(uv_write_t *req, int status) {
  h2s_conn *c = req->data;
  free(req);
  c->pending_writes--;
  if (c->closing)
    return;
  if (status < 0)
    c->close_on_flush = true;
  if (c->close_on_flush && c->pending_writes == 0)
    conn_close_flushed(c);
}

static void conn_write_plain(h2s_conn *c, const uint8_t *p, size_t n) {
  if (n == 0)
    return;
  /* One allocation: the request, then the bytes it writes. */
  uv_write_t *req = h2s_xmalloc(sizeof(*req) + n);
  memcpy(req + 1, p, n);
  req->data = c;
  uv_buf_t buf = uv_buf_init((char *)(req + 1), (unsigned)n);
  if (uv_write(req, &c->h.stream, &buf, 1, conn_on_write) != 0) {
    free(req);
    c->close_on_flush = true;
    return;
  }
  c->pending_writes++;
}

static void conn_write_tls_out(h2s_conn *c) {
  uint8_t tmp[16384];
  int n;
  while ((n = BIO_read(c->wbio, tmp, sizeof(tmp))) > 0)
    conn_write_plain(c, tmp, (size_t)n);
}

static void conn_write(h2s_conn *c, const uint8_t *p, size_t n) {
  if (c->ssl == NULL) {
    conn_write_plain(c, p, n);
    return;
  }
  while (n > 0) {
    int w = SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
    if (w <= 0) {
      c->close_on_flush = true;
      break;
    }
    p += w;
    n -= (size_t)w;
  }
  conn_write_tls_out(c);
}

void h2s_conn_flush(h2s_conn *c) {
  if (c->closing || c->flushing || c->lingering)
    return;
  c->flushing = true;
  for (int round = 0; round < 64; round++) {
    while (c->work && !c->close_on_flush) {
      c->work = false;
      for (h2s_stream *s = c->streams, *next; s; s = next) {
        next = s->next;
        h2s_stream_work(s);
      }
    }
    if (c->close_on_flush)
      break; /* dropping: no more frames, let queued writes finish */
    if (c->ssl && !c->handshake_done)
      break;
    h2s_buf out = {0};
    for (;;) {
      const uint8_t *p;
      ssize_t n = nghttp2_session_mem_send(c->ng, &p);
      if (n < 0) {
        c->close_on_flush = true;
        break;
      }
      if (n == 0)
        break;
      h2s_buf_add(&out, p, (size_t)n);
    }
    /* Raw bytes go after every frame nghttp2 had queued before them. */
    h2s_buf_add(&out, c->raw.p, c->raw.len);
    c->raw.len = 0;
    conn_write(c, out.p, out.len);
    h2s_buf_free(&out);
    if (!c->work)
      break;
  }
  c->flushing = false;
  if (!c->close_on_flush && !nghttp2_session_want_read(c->ng) &&
      !nghttp2_session_want_write(c->ng))
    c->close_on_flush = c->graceful = true;
  if (c->close_on_flush && c->pending_writes == 0)
    conn_close_flushed(c);
}

static void conn_recv_plain(h2s_conn *c, const uint8_t *p, size_t n) {
  h2s_log_lock(c->srv);
  c->srv->stats.bytes_received += n;
  h2s_log_unlock(c->srv);
  ssize_t rv = nghttp2_session_mem_recv(c->ng, p, n);
  if (rv < 0) {
    if (!c->srv->cfg.quiet)
      fprintf(stderr, "h2server: conn %u: %s\n", c->index,
              nghttp2_strerror((int)rv));
    c->close_on_flush = true;
  }
}

static void conn_recv_tls(h2s_conn *c, const uint8_t *p, size_t n) {
  BIO_write(c->rbio, p, (int)n);
  if (!c->handshake_done) {
    int rv = SSL_do_handshake(c->ssl);
    conn_write_tls_out(c);
    if (rv != 1) {
      int err = SSL_get_error(c->ssl, rv);
      if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
        c->close_on_flush = true;
      return;
    }
    c->handshake_done = true;
  }
  uint8_t buf[16384];
  for (;;) {
    int r = SSL_read(c->ssl, buf, sizeof(buf));
    if (r <= 0) {
      int err = SSL_get_error(c->ssl, r);
      if (err != SSL_ERROR_WANT_READ)
        c->close_on_flush = true;
      break;
    }
    conn_recv_plain(c, buf, (size_t)r);
    if (c->close_on_flush || c->closing)
      break;
  }
  conn_write_tls_out(c);
}

static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  buf->base = h2s_xmalloc(suggested);
  buf->len = suggested;
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread,
                         const uv_buf_t *buf) {
  h2s_conn *c = stream->data;
  if (nread < 0) {
    /* EOF or error: the peer is gone, nothing more can be delivered. */
    h2s_conn_close(c);
  } else if (c->lingering) {
    /* Half-closed after a graceful end: what comes now is dropped. */
  } else if (nread > 0 && !c->close_on_flush) {
    if (c->ssl)
      conn_recv_tls(c, (const uint8_t *)buf->base, (size_t)nread);
    else
      conn_recv_plain(c, (const uint8_t *)buf->base, (size_t)nread);
    h2s_conn_flush(c);
  }
  free(buf->base);
}

void h2s_conn_accept(h2s_server *srv, uv_stream_t *listener, bool is_tcp) {
  h2s_conn *c = h2s_xcalloc(1, sizeof(*c));
  c->srv = srv;
  c->is_tcp = is_tcp;
  c->no_ping_ack = srv->cfg.no_ping_ack;
  if (is_tcp)
    uv_tcp_init(&srv->loop, &c->h.tcp);
  else
    uv_pipe_init(&srv->loop, &c->h.pipe, 0);
  c->h.handle.data = c;
  if (uv_accept(listener, &c->h.stream) != 0) {
    uv_close(&c->h.handle, conn_on_close);
    return;
  }
  if (is_tcp)
    uv_tcp_nodelay(&c->h.tcp, 1);
  c->index = srv->next_conn_index++;
  c->next = srv->conns;
  if (c->next)
    c->next->prev = c;
  srv->conns = c;
  h2s_log_lock(srv);
  srv->stats.connections++;
  srv->stats.connections_open++;
  h2s_accept mode = srv->accept;
  h2s_log_unlock(srv);
  c->ng = conn_session_new(c);
  switch (mode) {
  case H2S_ACCEPT_SERVE:
    break;
  case H2S_ACCEPT_RESET:
    c->drop_reset = true;
    /* fall through */
  case H2S_ACCEPT_CLOSE:
    h2s_conn_close(c);
    return;
  case H2S_ACCEPT_SILENT:
    return; /* kept in srv->conns until kill or stop */
  }
  conn_submit_settings(c);
  if (srv->ssl_ctx) {
    c->ssl = SSL_new(srv->ssl_ctx);
    c->rbio = BIO_new(BIO_s_mem());
    c->wbio = BIO_new(BIO_s_mem());
    SSL_set_bio(c->ssl, c->rbio, c->wbio);
    SSL_set_accept_state(c->ssl);
  }
  uv_read_start(&c->h.stream, conn_alloc, conn_on_read);
  h2s_conn_flush(c);
}

void h2s_conn_goaway(h2s_conn *c, uint32_t code, bool now) {
  int32_t last = nghttp2_session_get_last_proc_stream_id(c->ng);
  if (now)
    nghttp2_session_terminate_session2(c->ng, last, code);
  else
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, last, code, NULL, 0);
  h2s_conn_flush(c);
}

void h2s_conn_settings(h2s_conn *c, const h2s_setting *list, size_t max) {
  nghttp2_settings_entry iv[8];
  size_t n = 0;
  for (size_t i = 0; i < max && n < 8 && list[i].id; i++) {
    iv[n++] = (nghttp2_settings_entry){list[i].id, list[i].value};
    if (list[i].id == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE)
      c->iws_current = list[i].value;
  }
  nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, n);
  c->work = true;
}
