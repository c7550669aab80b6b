/* A real grit_transport on a uv loop against a small nghttp2 server that
 * runs on the same loop, scripted per test (SPEC HS-01..03, TR-01..04). */
#include "transport/transport.h"

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <unistd.h>

#include "test/harness.h"
#include "transport/transport_int.h" /* t->writing, t->nsegs (SC_STALL) */

/* ------------------------------------------------------------------ */
/* The in-test server                                                  */
/* ------------------------------------------------------------------ */

typedef enum scenario {
  SC_UNARY,
  SC_TRAILERS_ONLY,
  SC_REFUSED,
  SC_GOAWAY,
  SC_DROP,
  SC_TOO_LARGE,
  SC_HTTP_503,
  SC_SILENT, /* never answers, never acks pings */
  SC_BIG_HEADERS,
  SC_EARLY_TRAILERS,
  SC_ECHO,
  SC_HOLD,      /* headers and a message at once, then nothing */
  SC_CALM,      /* GOAWAY ENHANCE_YOUR_CALM "too_many_pings" */
  SC_NO_STATUS, /* trailers without grpc-status */
  SC_PARTIAL,   /* OK trailers after half a message */
  SC_STALL,     /* widest windows, then stops reading at the request */
  SC_INFO_EOS,  /* 100 (with grpc-status 0), then an empty END_STREAM DATA */
} scenario;

typedef struct srv_stream {
  int32_t id;
  uint8_t *body; /* response DATA payload */
  size_t body_len, body_off;
  bool send_trailers;
  bool hold;
  nghttp2_nv trailers[4];
  size_t ntrailers;
  uint8_t req[4096]; /* request body as received */
  size_t req_len;
} srv_stream;

typedef struct server server;

/* TCP, or a unix socket for the unix-address test. */
typedef union srv_io {
  uv_tcp_t tcp;
  uv_pipe_t pipe;
} srv_io;

typedef struct srv_conn {
  srv_io tcp;
  nghttp2_session *h2;
  server *srv;
  bool closing;
  srv_stream *streams[64]; /* open ones, freed with the connection */
  SSL *ssl;                /* TLS through memory BIOs, like the client */
  BIO *rbio, *wbio;
} srv_conn;

struct server {
  uv_loop_t *loop;
  srv_io listener;
  int port;
  const char *unix_path; /* listen there instead of 127.0.0.1 */
  scenario sc;
  uint32_t max_concurrent; /* 0: not announced */
  srv_conn *conn;
  int conns;
  /* What the server saw: headers of the last request, its body, resets. */
  char hname[40][64];
  char hval[40][256];
  uint8_t hflags[40]; /* NGHTTP2_NV_FLAG_NO_INDEX: sent "never indexed" */
  int nheaders;
  size_t hblock_len; /* the last request's HEADERS payload, in bytes */
  uint8_t req_body[4096];
  size_t req_body_len;
  int requests;
  int rst_received;
  uint32_t rst_code;
  int pings;
  /* SC_STALL: DATA payload bytes received, and how many of them differ
   * from stall_byte(their offset in the stream's body). */
  size_t stall_bytes, stall_bad;
  bool stopped;
  SSL_CTX *tls; /* NULL: cleartext */
  bool no_alpn; /* TLS without selecting h2 */
};

static void srv_conn_close(srv_conn *c);

static void srv_on_write(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

/* The server's buffers use libc directly, so that the OOM sweep below
 * fails only the client's allocations. */
typedef struct srv_buf {
  uint8_t *data;
  size_t len, cap;
} srv_buf;

static void srv_buf_append(srv_buf *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2;
    b->data = realloc(b->data, b->cap);
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static void srv_flush(srv_conn *c) {
  if (c->closing)
    return;
  srv_buf b = {0};
  /* Over TLS, HTTP/2 bytes wait for the handshake to finish. */
  bool h2_ok = !c->ssl || SSL_is_init_finished(c->ssl);
  while (h2_ok) {
    const uint8_t *d;
    ssize_t n = nghttp2_session_mem_send(c->h2, &d);
    if (n <= 0)
      break;
    if (c->ssl)
      SSL_write(c->ssl, d, (int)n);
    else
      srv_buf_append(&b, d, (size_t)n);
  }
  if (c->ssl) {
    char tmp[16384];
    int r;
    while ((r = BIO_read(c->wbio, tmp, sizeof(tmp))) > 0)
      srv_buf_append(&b, tmp, (size_t)r);
  }
  if (b.len) {
    uv_write_t *req = malloc(sizeof(*req) + b.len);
    memcpy(req + 1, b.data, b.len);
    uv_buf_t ub = uv_buf_init((char *)(req + 1), (unsigned)b.len);
    if (uv_write(req, (uv_stream_t *)&c->tcp, &ub, 1, srv_on_write) < 0)
      free(req);
  }
  free(b.data);
}

#define NV(n, v)                                                               \
  ((nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v),          \
                NGHTTP2_NV_FLAG_NONE})

static ssize_t srv_data_read(nghttp2_session *session, int32_t stream_id,
                             uint8_t *buf, size_t length, uint32_t *flags,
                             nghttp2_data_source *source, void *ud) {
  (void)ud;
  srv_stream *st = source->ptr;
  size_t left = st->body_len - st->body_off;
  size_t n = left < length ? left : length;
  memcpy(buf, st->body + st->body_off, n);
  st->body_off += n;
  if (st->body_off == st->body_len && st->hold)
    return n ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
  if (st->body_off == st->body_len) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (st->send_trailers) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      nghttp2_submit_trailer(session, stream_id, st->trailers, st->ntrailers);
    }
  }
  return (ssize_t)n;
}

/* Respond with headers, one framed message of |msg_len| bytes and
 * trailers. */
static void srv_respond(srv_conn *c, srv_stream *st, const char *msg,
                        size_t msg_len, const nghttp2_nv *tr, size_t ntr) {
  nghttp2_nv hdrs[] = {NV(":status", "200"),
                       NV("content-type", "application/grpc"),
                       NV("x-resp", "hello"), NV("x-resp-bin", "AP8")};
  free(st->body);
  st->body = malloc(5 + msg_len);
  st->body[0] = 0;
  st->body[1] = (uint8_t)(msg_len >> 24);
  st->body[2] = (uint8_t)(msg_len >> 16);
  st->body[3] = (uint8_t)(msg_len >> 8);
  st->body[4] = (uint8_t)msg_len;
  memcpy(st->body + 5, msg, msg_len);
  st->body_len = 5 + msg_len;
  st->body_off = 0;
  st->send_trailers = true;
  st->ntrailers = ntr;
  if (ntr)
    memcpy(st->trailers, tr, ntr * sizeof(*tr));
  nghttp2_data_provider prd = {.source = {.ptr = st},
                               .read_callback = srv_data_read};
  nghttp2_submit_response(c->h2, st->id, hdrs, 4, &prd);
}

static void srv_on_request_headers(srv_conn *c, srv_stream *st) {
  server *s = c->srv;
  s->requests++;
  switch (s->sc) {
  case SC_REFUSED:
    nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, st->id,
                              NGHTTP2_REFUSED_STREAM);
    break;
  case SC_GOAWAY:
    /* The second stream arrives: refuse it by GOAWAY, finish the first. */
    if (st->id == 3) {
      nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, 1, NGHTTP2_NO_ERROR, NULL,
                            0);
      nghttp2_nv tro[] = {NV(":status", "200"),
                          NV("content-type", "application/grpc"),
                          NV("grpc-status", "0")};
      nghttp2_submit_response(c->h2, 1, tro, 3, NULL);
    }
    break;
  case SC_BIG_HEADERS: {
    static char big[2000];
    memset(big, 'v', sizeof(big) - 1);
    nghttp2_nv h[] = {NV(":status", "200"),
                      NV("content-type", "application/grpc"), NV("x-big", big)};
    nghttp2_submit_headers(c->h2, NGHTTP2_FLAG_NONE, st->id, NULL, h, 3, NULL);
    break;
  }
  case SC_CALM:
    nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, 0,
                          NGHTTP2_ENHANCE_YOUR_CALM,
                          (const uint8_t *)"too_many_pings", 14);
    break;
  case SC_STALL: /* the client's writes back up until reading resumes */
    uv_read_stop((uv_stream_t *)&c->tcp);
    break;
  case SC_HOLD:
    srv_respond(c, st, "held", 4, NULL, 0);
    st->hold = true;
    break;
  case SC_EARLY_TRAILERS: {
    nghttp2_nv h[] = {NV(":status", "200"),
                      NV("content-type", "application/grpc"),
                      NV("grpc-status", "3"), NV("grpc-message", "early")};
    nghttp2_submit_response(c->h2, st->id, h, 4, NULL);
    break;
  }
  default:
    break;
  }
}

static void srv_on_request_end(srv_conn *c, srv_stream *st) {
  server *s = c->srv;
  memcpy(s->req_body, st->req, st->req_len);
  s->req_body_len = st->req_len;
  switch (s->sc) {
  case SC_UNARY: {
    nghttp2_nv tr[] = {NV("grpc-status", "0"),
                       NV("grpc-message", "caf%C3%A9 100%25 %zz"),
                       NV("trail-bin", "AAH/"), NV("x-trail", "t")};
    srv_respond(c, st, "pong", 4, tr, 4);
    break;
  }
  case SC_ECHO: {
    nghttp2_nv tr[] = {NV("grpc-status", "0")};
    /* st->req holds framed messages: echo the first body back. */
    size_t n = st->req_len >= 5 ? st->req_len - 5 : 0;
    srv_respond(c, st, (const char *)st->req + 5, n, tr, 1);
    break;
  }
  case SC_TRAILERS_ONLY: {
    nghttp2_nv h[] = {NV(":status", "200"),
                      NV("content-type", "application/grpc"),
                      NV("grpc-status", "5"), NV("grpc-message", "no such"),
                      NV("x-why", "gone")};
    nghttp2_submit_response(c->h2, st->id, h, 5, NULL);
    break;
  }
  case SC_DROP:
    srv_conn_close(c);
    break;
  case SC_TOO_LARGE: {
    char big[100];
    memset(big, 'x', sizeof(big));
    nghttp2_nv tr[] = {NV("grpc-status", "0")};
    srv_respond(c, st, big, sizeof(big), tr, 1);
    break;
  }
  case SC_NO_STATUS: {
    nghttp2_nv tr[] = {NV("x-trail", "t")};
    srv_respond(c, st, "pong", 4, tr, 1);
    break;
  }
  case SC_PARTIAL: {
    nghttp2_nv tr[] = {NV("grpc-status", "0")};
    srv_respond(c, st, "0123456789", 10, tr, 1);
    st->body_len -= 4;
    break;
  }
  case SC_INFO_EOS: {
    /* No final response: the stream ends on an empty DATA frame (which
     * brings no data chunk callback) after an informational one. */
    nghttp2_nv h[] = {NV(":status", "100"), NV("grpc-status", "0")};
    nghttp2_submit_headers(c->h2, NGHTTP2_FLAG_NONE, st->id, NULL, h, 2, NULL);
    free(st->body);
    st->body = malloc(1); /* read from, 0 bytes */
    st->body_len = st->body_off = 0;
    st->send_trailers = false;
    nghttp2_data_provider prd = {.source = {.ptr = st},
                                 .read_callback = srv_data_read};
    nghttp2_submit_data(c->h2, NGHTTP2_FLAG_END_STREAM, st->id, &prd);
    break;
  }
  case SC_HTTP_503: {
    nghttp2_nv h[] = {NV(":status", "503"), NV("content-type", "text/plain")};
    nghttp2_submit_response(c->h2, st->id, h, 2, NULL);
    break;
  }
  default:
    break;
  }
}

static int srv_on_begin_headers(nghttp2_session *session,
                                const nghttp2_frame *frame, void *ud) {
  srv_conn *c = ud;
  if (frame->hd.type != NGHTTP2_HEADERS ||
      frame->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  srv_stream *st = calloc(1, sizeof(*st));
  st->id = frame->hd.stream_id;
  nghttp2_session_set_stream_user_data(session, st->id, st);
  for (int i = 0; i < 64; i++) {
    if (!c->streams[i]) {
      c->streams[i] = st;
      break;
    }
  }
  c->srv->nheaders = 0;
  return 0;
}

static int srv_on_header(nghttp2_session *session, const nghttp2_frame *frame,
                         const uint8_t *name, size_t namelen,
                         const uint8_t *value, size_t valuelen, uint8_t flags,
                         void *ud) {
  (void)session;
  (void)frame;
  server *s = ((srv_conn *)ud)->srv;
  if (s->nheaders < 40 && namelen < 64 && valuelen < 256) {
    s->hflags[s->nheaders] = flags;
    memcpy(s->hname[s->nheaders], name, namelen);
    s->hname[s->nheaders][namelen] = '\0';
    memcpy(s->hval[s->nheaders], value, valuelen);
    s->hval[s->nheaders][valuelen] = '\0';
    s->nheaders++;
  }
  return 0;
}

static int srv_on_frame_recv(nghttp2_session *session,
                             const nghttp2_frame *frame, void *ud) {
  srv_conn *c = ud;
  srv_stream *st =
      nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
  if (frame->hd.type == NGHTTP2_PING && !(frame->hd.flags & NGHTTP2_FLAG_ACK))
    c->srv->pings++;
  if (frame->hd.type == NGHTTP2_RST_STREAM) {
    c->srv->rst_received++;
    c->srv->rst_code = frame->rst_stream.error_code;
  }
  if (!st)
    return 0;
  if (frame->hd.type == NGHTTP2_HEADERS &&
      frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    c->srv->hblock_len = frame->hd.length;
    srv_on_request_headers(c, st);
  }
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !c->closing)
    srv_on_request_end(c, st);
  return 0;
}

/* Byte |i| of SC_STALL's request body (after the 5-byte prefix): changes
 * with the offset, so a piece written twice, late or out of order shows. */
static uint8_t stall_byte(size_t i) {
  return (uint8_t)(i ^ (i >> 8) ^ (i >> 16) ^ (i >> 24));
}

static int srv_on_data(nghttp2_session *session, uint8_t flags, int32_t id,
                       const uint8_t *data, size_t len, void *ud) {
  (void)flags;
  server *s = ((srv_conn *)ud)->srv;
  for (size_t i = 0; s->sc == SC_STALL && i < len; i++, s->stall_bytes++) {
    if (s->stall_bytes >= 5 && data[i] != stall_byte(s->stall_bytes - 5))
      s->stall_bad++;
  }
  srv_stream *st = nghttp2_session_get_stream_user_data(session, id);
  if (st && st->req_len + len <= sizeof(st->req)) {
    memcpy(st->req + st->req_len, data, len);
    st->req_len += len;
  }
  return 0;
}

static int srv_on_stream_close(nghttp2_session *session, int32_t id,
                               uint32_t code, void *ud) {
  (void)code;
  srv_conn *c = ud;
  srv_stream *st = nghttp2_session_get_stream_user_data(session, id);
  for (int i = 0; st && i < 64; i++) {
    if (c->streams[i] == st)
      c->streams[i] = NULL;
  }
  if (st) {
    free(st->body);
    free(st);
  }
  return 0;
}

static void srv_conn_on_close(uv_handle_t *h) {
  srv_conn *c = h->data;
  for (int i = 0; i < 64; i++) {
    if (c->streams[i]) {
      free(c->streams[i]->body);
      free(c->streams[i]);
    }
  }
  nghttp2_session_del(c->h2);
  SSL_free(c->ssl);
  free(c);
}

static void srv_conn_close(srv_conn *c) {
  if (c->closing)
    return;
  c->closing = true;
  if (c->srv->conn == c)
    c->srv->conn = NULL;
  uv_close((uv_handle_t *)&c->tcp, srv_conn_on_close);
}

static void srv_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
  (void)h;
  static char rb[65536];
  (void)sz;
  *buf = uv_buf_init(rb, sizeof(rb));
}

static void srv_on_read(uv_stream_t *stream, ssize_t nread,
                        const uv_buf_t *buf) {
  srv_conn *c = stream->data;
  if (nread < 0) {
    srv_conn_close(c);
    return;
  }
  if (nread == 0 || c->closing)
    return;
  if (!c->ssl) {
    if (nghttp2_session_mem_recv(c->h2, (const uint8_t *)buf->base,
                                 (size_t)nread) < 0) {
      srv_conn_close(c);
      return;
    }
    srv_flush(c);
    return;
  }
  BIO_write(c->rbio, buf->base, (int)nread);
  if (!SSL_is_init_finished(c->ssl)) {
    int r = SSL_do_handshake(c->ssl);
    if (r != 1 && SSL_get_error(c->ssl, r) != SSL_ERROR_WANT_READ) {
      ERR_clear_error();
      srv_flush(c); /* the alert */
      srv_conn_close(c);
      return;
    }
  }
  char plain[16384];
  int r;
  while ((r = SSL_read(c->ssl, plain, sizeof(plain))) > 0) {
    if (nghttp2_session_mem_recv(c->h2, (const uint8_t *)plain, (size_t)r) <
        0) {
      srv_conn_close(c);
      return;
    }
  }
  ERR_clear_error();
  srv_flush(c);
}

static void srv_on_connection(uv_stream_t *listener, int status) {
  server *s = listener->data;
  if (status < 0)
    return;
  srv_conn *c = calloc(1, sizeof(*c));
  c->srv = s;
  if (s->unix_path)
    uv_pipe_init(s->loop, &c->tcp.pipe, 0);
  else
    uv_tcp_init(s->loop, &c->tcp.tcp);
  ((uv_handle_t *)&c->tcp)->data = c;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
    uv_close((uv_handle_t *)&c->tcp, NULL);
    return;
  }
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
                                                          srv_on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, srv_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, srv_on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb,
                                                         srv_on_stream_close);
  nghttp2_option *opt;
  nghttp2_option_new(&opt);
  if (s->sc == SC_SILENT)
    nghttp2_option_set_no_auto_ping_ack(opt, 1);
  nghttp2_session_server_new2(&c->h2, cb, c, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry iv[1] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->max_concurrent}};
  nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv,
                          s->max_concurrent ? 1 : 0);
  if (s->sc == SC_STALL) { /* flow control never stops the client */
    nghttp2_settings_entry w = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
                                NGHTTP2_MAX_WINDOW_SIZE};
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, &w, 1);
    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0,
                                          NGHTTP2_MAX_WINDOW_SIZE);
  }
  if (s->tls) {
    c->ssl = SSL_new(s->tls);
    c->rbio = BIO_new(BIO_s_mem());
    c->wbio = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(c->rbio, -1);
    SSL_set_bio(c->ssl, c->rbio, c->wbio);
    SSL_set_accept_state(c->ssl);
  }
  s->conn = c;
  s->conns++;
  uv_read_start((uv_stream_t *)&c->tcp, srv_alloc, srv_on_read);
  srv_flush(c);
}

static void server_start(server *s, uv_loop_t *loop, scenario sc) {
  const char *unix_path = s->unix_path;
  memset(s, 0, sizeof(*s));
  s->loop = loop;
  s->sc = sc;
  s->unix_path = unix_path;
  if (unix_path) {
    unlink(unix_path);
    uv_pipe_init(loop, &s->listener.pipe, 0);
    s->listener.pipe.data = s;
    uv_pipe_bind(&s->listener.pipe, unix_path);
    uv_listen((uv_stream_t *)&s->listener, 16, srv_on_connection);
    return;
  }
  uv_tcp_init(loop, &s->listener.tcp);
  s->listener.tcp.data = s;
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", 0, &a);
  uv_tcp_bind(&s->listener.tcp, (const struct sockaddr *)&a, 0);
  uv_listen((uv_stream_t *)&s->listener, 16, srv_on_connection);
  struct sockaddr_in b;
  int len = sizeof(b);
  uv_tcp_getsockname(&s->listener.tcp, (struct sockaddr *)&b, &len);
  s->port = ntohs(b.sin_port);
}

static void server_stop(server *s) {
  if (s->stopped)
    return;
  s->stopped = true;
  if (s->conn)
    srv_conn_close(s->conn);
  uv_close((uv_handle_t *)&s->listener, NULL);
}

static const char *srv_header(server *s, const char *name) {
  for (int i = 0; i < s->nheaders; i++) {
    if (strcmp(s->hname[i], name) == 0)
      return s->hval[i];
  }
  return NULL;
}

/* The HPACK flags the last request's |name| came with (-1: not sent). */
static int srv_header_flags(server *s, const char *name) {
  for (int i = 0; i < s->nheaders; i++) {
    if (strcmp(s->hname[i], name) == 0)
      return s->hflags[i];
  }
  return -1;
}

/* ------------------------------------------------------------------ */
/* The client side                                                     */
/* ------------------------------------------------------------------ */

typedef struct client {
  grit_transport *t;
  int ready, closed, goaways, capacity;
  uint32_t goaway_last, goaway_code;
  grit_status_code close_code;
  char close_reason[256];
  bool close_was_ready, close_keepalive, close_pings;
} client;

typedef struct call {
  grit_stream *s;
  int headers_calls, done;
  grit_metadata *headers;
  grit_slice *msgs[8];
  int nmsgs;
  grit_status_code code;
  char message[256];
  grit_metadata *trailers;
  bool trailers_only, headers_received;
  grit_wire_state wire;
  bool cancel_in_headers;
} call;

static void cl_on_ready(grit_transport *t, void *ud) {
  (void)t;
  ((client *)ud)->ready++;
}

static void cl_on_goaway(grit_transport *t, uint32_t last, uint32_t code,
                         void *ud) {
  (void)t;
  client *c = ud;
  c->goaways++;
  c->goaway_last = last;
  c->goaway_code = code;
}

static void cl_on_closed(grit_transport *t, const grit_transport_close_info *ci,
                         void *ud) {
  (void)t;
  client *c = ud;
  c->closed++;
  c->close_code = ci->code;
  snprintf(c->close_reason, sizeof(c->close_reason), "%s", ci->reason);
  c->close_was_ready = ci->was_ready;
  c->close_keepalive = ci->keepalive_timeout;
  c->close_pings = ci->too_many_pings;
}

static void cl_on_capacity(grit_transport *t, void *ud) {
  (void)t;
  ((client *)ud)->capacity++;
}

static const grit_transport_cbs client_cbs = {
    .on_ready = cl_on_ready,
    .on_goaway = cl_on_goaway,
    .on_closed = cl_on_closed,
    .on_capacity = cl_on_capacity,
};

static void call_on_headers(grit_stream *s, const grit_metadata *md, void *ud) {
  call *c = ud;
  c->headers_calls++;
  grit_metadata_copy(md, &c->headers);
  if (c->cancel_in_headers)
    grit_stream_cancel(s, GRIT_STATUS_CANCELLED, "cancelled in on_headers");
}

static void call_on_message(grit_stream *s, grit_slice *msg, void *ud) {
  (void)s;
  call *c = ud;
  if (c->nmsgs < 8)
    c->msgs[c->nmsgs++] = msg;
  else
    grit_slice_unref(msg);
}

static void call_on_done(grit_stream *s, const grit_stream_result *r,
                         void *ud) {
  (void)s;
  call *c = ud;
  c->done++;
  c->s = NULL;
  c->code = r->code;
  snprintf(c->message, sizeof(c->message), "%s", r->message);
  grit_metadata_copy(r->trailers, &c->trailers);
  c->trailers_only = r->trailers_only;
  c->headers_received = r->headers_received;
  c->wire = r->wire;
}

static const grit_stream_cbs call_cbs = {
    .on_headers = call_on_headers,
    .on_message = call_on_message,
    .on_done = call_on_done,
};

static void call_free(call *c) {
  grit_metadata_destroy(c->headers);
  grit_metadata_destroy(c->trailers);
  for (int i = 0; i < c->nmsgs; i++)
    grit_slice_unref(c->msgs[i]);
  memset(c, 0, sizeof(*c));
}

/* ------------------------------------------------------------------ */
/* Per-test fixture: loop, server, client, a 5 s guard                 */
/* ------------------------------------------------------------------ */

typedef struct fixture {
  uv_loop_t loop;
  uv_timer_t guard;
  bool expired;
  server srv;
  client cl;
} fixture;

static void fx_on_guard(uv_timer_t *t) {
  ((fixture *)t->data)->expired = true;
}

/* Run the loop until |*flag| >= |want| or the guard fires. */
static bool fx_run_until(fixture *f, const int *flag, int want) {
  while (*flag < want && !f->expired)
    uv_run(&f->loop, UV_RUN_ONCE);
  return *flag >= want;
}

static const char *fx_unix_path; /* next fx_start listens there */

static void fx_start(fixture *f, scenario sc, const grit_transport_opts *o) {
  (void)o;
  memset(f, 0, sizeof(*f));
  f->srv.unix_path = fx_unix_path;
  uv_loop_init(&f->loop);
  uv_timer_init(&f->loop, &f->guard);
  f->guard.data = f;
  uv_timer_start(&f->guard, fx_on_guard, 5000, 0);
  server_start(&f->srv, &f->loop, sc);
}

static grit_err fx_connect(fixture *f, const grit_transport_opts *o) {
  grit_addr a;
  if (f->srv.unix_path)
    grit_addr_from_unix(&a, f->srv.unix_path);
  else
    grit_addr_from_ip(&a, "127.0.0.1", (uint16_t)f->srv.port);
  grit_transport_opts def = {.max_recv_message_bytes = -1,
                             .user_agent = "grit-test/1.0"};
  return grit_transport_create(&f->loop, &a, o ? o : &def, &client_cbs, &f->cl,
                               &f->cl.t);
}

/* Destroy everything and check that the loop ends with no handle left. */
static int fx_finish(fixture *f) {
  if (f->cl.t) {
    grit_transport_destroy(f->cl.t);
    f->cl.t = NULL;
  }
  server_stop(&f->srv);
  uv_close((uv_handle_t *)&f->guard, NULL);
  for (int i = 0; i < 1000 && uv_run(&f->loop, UV_RUN_NOWAIT); i++)
    ;
  return uv_loop_close(&f->loop);
}

static grit_stream_head default_head(void) {
  grit_stream_head h = {.path = "/pkg.Svc/Method",
                        .authority = "test.example:1234",
                        .timeout_ns = -1,
                        .metadata = NULL,
                        .previous_attempts = 0,
                        .max_recv_message_bytes = 0};
  return h;
}

/* Connect, start one stream with |h|, send "ping", half-close, wait for
 * on_done. */
static bool fx_unary(fixture *f, const grit_stream_head *h, call *c) {
  if (fx_connect(f, NULL) != GRIT_OK)
    return false;
  if (!fx_run_until(f, &f->cl.ready, 1))
    return false;
  if (grit_transport_start_stream(f->cl.t, h, &call_cbs, c, &c->s) != GRIT_OK)
    return false;
  grit_slice *m = grit_frame_message("ping", 4);
  grit_err rv = grit_stream_send(c->s, m);
  grit_slice_unref(m);
  if (rv != GRIT_OK || grit_stream_close_send(c->s) != GRIT_OK)
    return false;
  return fx_run_until(f, &c->done, 1);
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */
/* ------------------------------------------------------------------ */

static void test_unary(void) {
  fixture f;
  fx_start(&f, SC_UNARY, NULL);
  grit_metadata *md;
  ASSERT_OK(grit_metadata_create(&md));
  ASSERT_OK(grit_metadata_add(md, "x-app", "v1", 2));
  ASSERT_OK(grit_metadata_add(md, "x-raw-bin", "\0\1\xff\xfe", 4));
  grit_stream_head h = default_head();
  h.timeout_ns = 1500000000; /* 1.5 s */
  h.previous_attempts = 2;
  h.metadata = md;
  call c = {0};
  bool ok = fx_unary(&f, &h, &c);
  grit_metadata_destroy(md);
  ASSERT(ok);
  ASSERT_EQ(f.cl.ready, 1);

  /* What the server saw (SPEC HS-01, HS-04, HS-06, RT-08). */
  server *s = &f.srv;
  ASSERT_STR_EQ(srv_header(s, ":method"), "POST");
  ASSERT_STR_EQ(srv_header(s, ":scheme"), "http");
  ASSERT_STR_EQ(srv_header(s, ":path"), "/pkg.Svc/Method");
  ASSERT_STR_EQ(srv_header(s, ":authority"), "test.example:1234");
  ASSERT_STR_EQ(srv_header(s, "te"), "trailers");
  ASSERT_STR_EQ(srv_header(s, "content-type"), "application/grpc");
  ASSERT_STR_EQ(srv_header(s, "user-agent"), "grit-test/1.0");
  ASSERT_STR_EQ(srv_header(s, "grpc-timeout"), "1500000u");
  ASSERT_STR_EQ(srv_header(s, "grpc-previous-rpc-attempts"), "2");
  ASSERT_STR_EQ(srv_header(s, "x-app"), "v1");
  ASSERT_STR_EQ(srv_header(s, "x-raw-bin"), "AAH//g"); /* unpadded */
  ASSERT_EQ(s->req_body_len, 9);
  ASSERT_MEM_EQ(s->req_body, "\0\0\0\0\4ping", 9);

  /* What the client got. */
  ASSERT_EQ(c.headers_calls, 1);
  size_t n;
  const uint8_t *v = grit_metadata_find(c.headers, "x-resp", &n);
  ASSERT_NOT_NULL(v);
  ASSERT_MEM_EQ(v, "hello", 5);
  v = grit_metadata_find(c.headers, "x-resp-bin", &n);
  ASSERT_NOT_NULL(v);
  ASSERT_EQ(n, 2);
  ASSERT_MEM_EQ(v, "\0\xff", 2);
  ASSERT_NULL(grit_metadata_find(c.headers, "content-type", NULL));
  ASSERT_EQ(c.nmsgs, 1);
  ASSERT_EQ(c.msgs[0]->len, 4);
  ASSERT_MEM_EQ(c.msgs[0]->data, "pong", 4);
  ASSERT_EQ(c.code, GRIT_STATUS_OK);
  ASSERT_STR_EQ(c.message, "caf\xc3\xa9 100% %zz");
  v = grit_metadata_find(c.trailers, "trail-bin", &n);
  ASSERT_NOT_NULL(v);
  ASSERT_EQ(n, 3);
  ASSERT_MEM_EQ(v, "\0\1\xff", 3);
  ASSERT_NOT_NULL(grit_metadata_find(c.trailers, "x-trail", NULL));
  ASSERT_NULL(grit_metadata_find(c.trailers, "grpc-status", NULL));
  ASSERT(!c.trailers_only);
  ASSERT(c.headers_received);
  ASSERT_EQ(c.wire, GRIT_WIRE_SENT);
  ASSERT_EQ(grit_transport_stream_count(f.cl.t), 0);
  ASSERT(grit_transport_is_ready(f.cl.t));

  /* Destroy: on_closed once, and the loop closes cleanly. */
  grit_transport_destroy(f.cl.t);
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  f.cl.t = NULL;
  ASSERT_EQ(f.cl.close_code, GRIT_STATUS_UNAVAILABLE);
  ASSERT(f.cl.close_was_ready);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
  ASSERT_EQ(f.cl.closed, 1);
}

static void test_trailers_only(void) {
  fixture f;
  fx_start(&f, SC_TRAILERS_ONLY, NULL);
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_NOT_FOUND);
  ASSERT_STR_EQ(c.message, "no such");
  ASSERT(c.trailers_only);
  ASSERT(!c.headers_received);
  ASSERT_EQ(c.headers_calls, 0);
  ASSERT_EQ(c.nmsgs, 0);
  ASSERT_NOT_NULL(grit_metadata_find(c.trailers, "x-why", NULL));
  ASSERT_EQ(c.wire, GRIT_WIRE_SENT);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_refused_stream(void) {
  fixture f;
  fx_start(&f, SC_REFUSED, NULL);
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(c.wire, GRIT_WIRE_REFUSED);
  /* The connection itself is fine. */
  ASSERT(grit_transport_is_ready(f.cl.t));
  ASSERT_EQ(f.cl.closed, 0);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_goaway(void) {
  fixture f;
  fx_start(&f, SC_GOAWAY, NULL);
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c1 = {0}, c2 = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c1, &c1.s));
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c2, &c2.s));
  ASSERT_EQ(grit_transport_stream_count(f.cl.t), 2);
  ASSERT_OK(grit_stream_close_send(c1.s));
  ASSERT_OK(grit_stream_close_send(c2.s));
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  /* Stream 3 is above last_stream_id 1: refused; stream 1 completes. */
  ASSERT_EQ(c2.done, 1);
  ASSERT_EQ(c2.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(c2.wire, GRIT_WIRE_REFUSED);
  ASSERT_EQ(c1.done, 1);
  ASSERT_EQ(c1.code, GRIT_STATUS_OK);
  ASSERT(c1.trailers_only);
  ASSERT_EQ(f.cl.goaways, 1);
  ASSERT_EQ(f.cl.goaway_last, 1);
  ASSERT_EQ(f.cl.goaway_code, NGHTTP2_NO_ERROR);
  ASSERT(!grit_transport_is_ready(f.cl.t));
  call c3 = {0};
  ASSERT_EQ(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c3, &c3.s),
            GRIT_ERR_SHUTDOWN);
  call_free(&c1);
  call_free(&c2);
  ASSERT_EQ(fx_finish(&f), 0);
  ASSERT_EQ(f.cl.closed, 1);
}

static void test_connection_dropped(void) {
  fixture f;
  fx_start(&f, SC_DROP, NULL);
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  /* SPEC TR-04: written, then the connection died without GOAWAY. */
  ASSERT_EQ(c.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(c.wire, GRIT_WIRE_SENT);
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  ASSERT_EQ(f.cl.close_code, GRIT_STATUS_UNAVAILABLE);
  ASSERT(f.cl.close_was_ready);
  ASSERT(strstr(f.cl.close_reason, "closed by peer") != NULL);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_message_too_large(void) {
  fixture f;
  fx_start(&f, SC_TOO_LARGE, NULL);
  grit_stream_head h = default_head();
  h.max_recv_message_bytes = 10;
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_STR_EQ(c.message, "received message larger than max (100 vs. 10)");
  ASSERT_EQ(c.nmsgs, 0);
  /* The server sees RST_STREAM CANCEL. */
  int one = 1;
  (void)one;
  while (f.srv.rst_received == 0 && !f.expired)
    uv_run(&f.loop, UV_RUN_ONCE);
  ASSERT_EQ(f.srv.rst_code, NGHTTP2_CANCEL);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_http_503(void) {
  fixture f;
  fx_start(&f, SC_HTTP_503, NULL);
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT(strstr(c.message, "503") != NULL);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

/* SPEC HS-08: an informational response the stream ends after, here by
 * an empty DATA frame with END_STREAM (no final response at all), is
 * malformed: INTERNAL, as when nghttp2 checked it (RFC 9113 8.1). Not the
 * grpc-status the 100 block carried. */
static void test_info_then_empty_data(void) {
  fixture f;
  fx_start(&f, SC_INFO_EOS, NULL);
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_INTERNAL);
  ASSERT(strstr(c.message, "malformed response") != NULL);
  ASSERT(!c.headers_received);
  ASSERT_EQ(c.nmsgs, 0);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_missing_status(void) {
  fixture f;
  fx_start(&f, SC_NO_STATUS, NULL);
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_UNKNOWN);
  ASSERT(strstr(c.message, "missing grpc-status") != NULL);
  ASSERT_EQ(c.nmsgs, 1);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_partial_message(void) {
  fixture f;
  fx_start(&f, SC_PARTIAL, NULL);
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_INTERNAL);
  ASSERT(strstr(c.message, "middle of a message") != NULL);
  ASSERT_EQ(c.nmsgs, 0);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_header_list_limit(void) {
  fixture f;
  fx_start(&f, SC_BIG_HEADERS, NULL);
  ASSERT_OK(
      fx_connect(&f, &(grit_transport_opts){.max_header_list_bytes = 1024,
                                            .max_recv_message_bytes = -1}));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c, &c.s));
  ASSERT(fx_run_until(&f, &c.done, 1));
  ASSERT_EQ(c.code, GRIT_STATUS_INTERNAL);
  ASSERT(strstr(c.message, "header list") != NULL);
  ASSERT_EQ(c.headers_calls, 0);
  /* Only the call failed: the connection is still up. */
  ASSERT(grit_transport_is_ready(f.cl.t));
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_early_trailers(void) {
  fixture f;
  fx_start(&f, SC_EARLY_TRAILERS, NULL);
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c, &c.s));
  ASSERT(fx_run_until(&f, &c.done, 1));
  ASSERT_EQ(c.code, GRIT_STATUS_INVALID_ARGUMENT);
  ASSERT_STR_EQ(c.message, "early");
  /* SPEC HS-03: we had not half-closed: RST_STREAM NO_ERROR. */
  while (f.srv.rst_received == 0 && !f.expired)
    uv_run(&f.loop, UV_RUN_ONCE);
  ASSERT_EQ(f.srv.rst_code, NGHTTP2_NO_ERROR);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_cancel(void) {
  fixture f;
  fx_start(&f, SC_SILENT, NULL);
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c, &c.s));
  while (f.srv.requests == 0 && !f.expired)
    uv_run(&f.loop, UV_RUN_ONCE);
  grit_stream_cancel(c.s, GRIT_STATUS_DEADLINE_EXCEEDED, "too slow");
  ASSERT_EQ(c.done, 0); /* deferred */
  ASSERT(fx_run_until(&f, &c.done, 1));
  ASSERT_EQ(c.code, GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_STR_EQ(c.message, "too slow");
  ASSERT_EQ(c.wire, GRIT_WIRE_SENT);
  while (f.srv.rst_received == 0 && !f.expired)
    uv_run(&f.loop, UV_RUN_ONCE);
  ASSERT_EQ(f.srv.rst_code, NGHTTP2_CANCEL);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_keepalive_timeout(void) {
  fixture f;
  fx_start(&f, SC_SILENT, NULL);
  grit_transport_opts o = {.max_recv_message_bytes = -1,
                           .keepalive_time_ms = 50,
                           .keepalive_timeout_ms = 100,
                           .keepalive_permit_without_calls = false};
  ASSERT_OK(fx_connect(&f, &o));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c, &c.s));
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  ASSERT_EQ(c.done, 1);
  ASSERT_EQ(c.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_STR_EQ(c.message, "keepalive ping timed out");
  ASSERT(f.cl.close_keepalive);
  ASSERT_CMP(f.srv.pings, >=, 1);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_connect_refused(void) {
  fixture f;
  fx_start(&f, SC_UNARY, NULL);
  server_stop(&f.srv); /* nothing listens on the port any more */
  for (int i = 0; i < 10; i++)
    uv_run(&f.loop, UV_RUN_NOWAIT);
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  ASSERT_EQ(f.cl.ready, 0);
  ASSERT_EQ(f.cl.close_code, GRIT_STATUS_UNAVAILABLE);
  ASSERT(!f.cl.close_was_ready);
  ASSERT(strstr(f.cl.close_reason, "connect") != NULL);
  ASSERT_EQ(fx_finish(&f), 0);
}

/* Destroy with a stream open, called from inside a callback. */
static grit_transport *destroy_target;
static void destroy_on_headers(grit_stream *s, const grit_metadata *md,
                               void *ud) {
  call_on_headers(s, md, ud);
  grit_transport_destroy(destroy_target);
}

static void test_destroy_in_callback(void) {
  fixture f;
  fx_start(&f, SC_BIG_HEADERS, NULL);
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c = {0}, c2 = {0};
  grit_stream_cbs cbs = call_cbs;
  cbs.on_headers = destroy_on_headers;
  destroy_target = f.cl.t;
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &cbs, &c, &c.s));
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c2, &c2.s));
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  f.cl.t = NULL;
  ASSERT_EQ(c.done, 1);
  ASSERT_EQ(c2.done, 1);
  ASSERT_EQ(c.code, GRIT_STATUS_UNAVAILABLE);
  call_free(&c);
  call_free(&c2);
  ASSERT_EQ(fx_finish(&f), 0);
  ASSERT_EQ(f.cl.closed, 1);
}

/* Cancel from inside on_headers: no message after, on_done once. */
static void test_cancel_in_callback(void) {
  fixture f;
  fx_start(&f, SC_HOLD, NULL);
  grit_stream_head h = default_head();
  call c = {0};
  c.cancel_in_headers = true;
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_CANCELLED);
  ASSERT_STR_EQ(c.message, "cancelled in on_headers");
  ASSERT_EQ(c.headers_calls, 1);
  ASSERT_EQ(c.nmsgs, 0);
  ASSERT_EQ(c.done, 1);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

/* MAX_CONCURRENT_STREAMS 1: the second stream waits NOT_SENT, and goes
 * out when the first ends. */
static void test_max_concurrent(void) {
  fixture f;
  fx_start(&f, SC_ECHO, NULL);
  f.srv.max_concurrent = 1;
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c1 = {0}, c2 = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c1, &c1.s));
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c2, &c2.s));
  grit_slice *m = grit_frame_message("one", 3);
  ASSERT_OK(grit_stream_send(c2.s, m));
  grit_slice_unref(m);
  ASSERT_EQ(grit_stream_pending_bytes(c2.s), 8);
  ASSERT_OK(grit_stream_close_send(c2.s));
  for (int i = 0; i < 20; i++)
    uv_run(&f.loop, UV_RUN_NOWAIT);
  ASSERT_EQ(f.srv.requests, 1);
  ASSERT_EQ(grit_transport_stream_count(f.cl.t), 2);
  ASSERT_EQ(grit_stream_pending_bytes(c2.s), 8);
  m = grit_frame_message("two", 3);
  ASSERT_OK(grit_stream_send(c1.s, m));
  ASSERT_OK(grit_stream_close_send(c1.s));
  ASSERT_EQ(grit_stream_send(c1.s, m), GRIT_ERR_CALL_STATE);
  grit_slice_unref(m);
  ASSERT(fx_run_until(&f, &c2.done, 1));
  ASSERT_EQ(c1.done, 1);
  ASSERT_EQ(c1.code, GRIT_STATUS_OK);
  ASSERT_EQ(c1.nmsgs, 1);
  ASSERT_MEM_EQ(c1.msgs[0]->data, "two", 3);
  ASSERT_EQ(c2.code, GRIT_STATUS_OK);
  ASSERT_EQ(c2.nmsgs, 1);
  ASSERT_MEM_EQ(c2.msgs[0]->data, "one", 3);
  ASSERT_CMP(f.cl.capacity, >=, 1);
  call_free(&c1);
  call_free(&c2);
  ASSERT_EQ(fx_finish(&f), 0);
}

/* Held back by MAX_CONCURRENT_STREAMS, then the connection drops: the
 * waiting stream is NOT_SENT (TR-01), the written one SENT (TR-04). */
static void test_queued_not_sent(void) {
  fixture f;
  fx_start(&f, SC_DROP, NULL);
  f.srv.max_concurrent = 1;
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c1 = {0}, c2 = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c1, &c1.s));
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c2, &c2.s));
  ASSERT_OK(grit_stream_close_send(c1.s));
  ASSERT(fx_run_until(&f, &c2.done, 1));
  ASSERT_EQ(c1.done, 1);
  ASSERT_EQ(c1.wire, GRIT_WIRE_SENT);
  ASSERT_EQ(c2.wire, GRIT_WIRE_NOT_SENT);
  ASSERT_EQ(c2.code, GRIT_STATUS_UNAVAILABLE);
  call_free(&c1);
  call_free(&c2);
  ASSERT_EQ(fx_finish(&f), 0);
}

/* A large message each way, through flow control and many DATA frames. */
static void test_large_echo(void) {
  fixture f;
  fx_start(&f, SC_ECHO, NULL);
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c, &c.s));
  char body[4000];
  for (size_t i = 0; i < sizeof(body); i++)
    body[i] = (char)('a' + i % 26);
  grit_slice *m = grit_frame_message(body, sizeof(body) - 10);
  ASSERT_OK(grit_stream_send(c.s, m));
  grit_slice_unref(m);
  ASSERT_OK(grit_stream_close_send(c.s));
  ASSERT(fx_run_until(&f, &c.done, 1));
  ASSERT_EQ(c.code, GRIT_STATUS_OK);
  ASSERT_EQ(c.nmsgs, 1);
  ASSERT_EQ(c.msgs[0]->len, sizeof(body) - 10);
  ASSERT_MEM_EQ(c.msgs[0]->data, body, sizeof(body) - 10);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

/* Start SC_STALL's stream with a body of |len| bytes and half-close, then
 * run until the client's write waits for the socket with payloads taken
 * from their slices (ec5e80c: cleartext DATA written from the slices, the
 * slices referenced until the write completes). Only the transport holds
 * the message then. */
static bool fx_stall(fixture *f, call *c, size_t len) {
  if (fx_connect(f, NULL) != GRIT_OK || !fx_run_until(f, &f->cl.ready, 1))
    return false;
  grit_stream_head h = default_head();
  if (grit_transport_start_stream(f->cl.t, &h, &call_cbs, c, &c->s) != GRIT_OK)
    return false;
  uint8_t *body = malloc(len);
  for (size_t i = 0; i < len; i++)
    body[i] = stall_byte(i);
  grit_slice *m = grit_frame_message(body, len);
  free(body);
  grit_err rv = grit_stream_send(c->s, m);
  grit_slice_unref(m);
  if (rv != GRIT_OK || grit_stream_close_send(c->s) != GRIT_OK)
    return false;
  grit_transport *t = f->cl.t;
  while (!(t->writing && t->nsegs > 0) && !f->expired)
    uv_run(&f->loop, UV_RUN_ONCE);
  return t->writing && t->nsegs > 0;
}

/* The socket backs up (the server stopped reading): the client's write of
 * uncopied DATA payloads waits in uv_write. The stream is cancelled and
 * freed meanwhile; when the server reads again, every byte that went out
 * is the message's, in order (the slices outlived their stream), then the
 * RST_STREAM. Under ASan: no use after free, no leak. */
static void test_zero_copy_cancel_while_writing(void) {
  fixture f;
  fx_start(&f, SC_STALL, NULL);
  call c = {0};
  const size_t len = 32 * 1024 * 1024; /* more than loopback buffers */
  ASSERT(fx_stall(&f, &c, len));
  grit_stream_cancel(c.s, GRIT_STATUS_CANCELLED, "gone");
  ASSERT(fx_run_until(&f, &c.done, 1)); /* the stream is freed after this */
  ASSERT_EQ(c.code, GRIT_STATUS_CANCELLED);
  ASSERT(f.cl.t->writing); /* the server still does not read */
  uv_read_start((uv_stream_t *)&f.srv.conn->tcp, srv_alloc, srv_on_read);
  ASSERT(fx_run_until(&f, &f.srv.rst_received, 1));
  ASSERT(f.srv.stall_bytes > 1024 * 1024);
  ASSERT(f.srv.stall_bytes < 5 + len); /* cancelled before the end */
  ASSERT_EQ(f.srv.stall_bad, 0);
  ASSERT_EQ(f.srv.rst_code, NGHTTP2_CANCEL);
  ASSERT(grit_transport_is_ready(f.cl.t)); /* the connection goes on */
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

/* As above, but the transport is destroyed while the write waits: the
 * write is cancelled when the socket closes and the payloads' references
 * go with it (under ASan: no leak, no use after free). */
static void test_zero_copy_destroy_while_writing(void) {
  fixture f;
  fx_start(&f, SC_STALL, NULL);
  call c = {0};
  ASSERT(fx_stall(&f, &c, 32 * 1024 * 1024));
  grit_transport_destroy(f.cl.t);
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  f.cl.t = NULL;
  ASSERT_EQ(c.done, 1);
  ASSERT_EQ(c.code, GRIT_STATUS_UNAVAILABLE);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_drain(void) {
  fixture f;
  fx_start(&f, SC_UNARY, NULL);
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_OK);
  grit_transport_drain(f.cl.t);
  ASSERT(!grit_transport_is_ready(f.cl.t));
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
  ASSERT_EQ(f.cl.closed, 1);
}

/* Many streams at once, most of them queued by MAX_CONCURRENT_STREAMS:
 * every one completes with its own echo. */
static void test_many_streams(void) {
  enum { N = 200 };
  fixture f;
  fx_start(&f, SC_ECHO, NULL);
  f.srv.max_concurrent = 16;
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  static call calls[N];
  memset(calls, 0, sizeof(calls));
  grit_stream_head h = default_head();
  for (int i = 0; i < N; i++) {
    char body[1000];
    memset(body, 'a' + i % 26, sizeof(body));
    snprintf(body, 8, "%05d", i);
    ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &calls[i],
                                          &calls[i].s));
    grit_slice *m = grit_frame_message(body, sizeof(body));
    ASSERT_OK(grit_stream_send(calls[i].s, m));
    grit_slice_unref(m);
    ASSERT_OK(grit_stream_close_send(calls[i].s));
  }
  ASSERT_EQ(grit_transport_stream_count(f.cl.t), N);
  int done = 0;
  while (done < N && !f.expired) {
    uv_run(&f.loop, UV_RUN_ONCE);
    done = 0;
    for (int i = 0; i < N; i++)
      done += calls[i].done;
  }
  ASSERT_EQ(done, N);
  for (int i = 0; i < N; i++) {
    char want[8];
    snprintf(want, sizeof(want), "%05d", i);
    ASSERT_EQ(calls[i].code, GRIT_STATUS_OK);
    ASSERT_EQ(calls[i].nmsgs, 1);
    ASSERT_EQ(calls[i].msgs[0]->len, 1000);
    ASSERT_MEM_EQ(calls[i].msgs[0]->data, want, 6);
    call_free(&calls[i]);
  }
  ASSERT_EQ(grit_transport_stream_count(f.cl.t), 0);
  ASSERT_EQ(fx_finish(&f), 0);
}

/* One stream on the connected fixture, run to its end; the size of its
 * HEADERS payload as the server read it, or 0. */
static size_t fx_stream(fixture *f, const grit_stream_head *h) {
  call c = {0};
  if (grit_transport_start_stream(f->cl.t, h, &call_cbs, &c, &c.s) != GRIT_OK)
    return 0;
  grit_slice *m = grit_frame_message("ping", 4);
  bool ok = grit_stream_send(c.s, m) == GRIT_OK &&
            grit_stream_close_send(c.s) == GRIT_OK &&
            fx_run_until(f, &c.done, 1) && c.code == GRIT_STATUS_OK;
  grit_slice_unref(m);
  call_free(&c);
  return ok ? f->srv.hblock_len : 0;
}

/* grpc-timeout and traceparent differ on every call: the first on a
 * connection enters the HPACK table, the later ones are "never indexed"
 * literals that name the header by that entry's index (2 bytes) instead
 * of spelling the name out again (1 + 9 bytes for "traceparent" in
 * Huffman code, 1 + 9 for "grpc-timeout"). */
static void test_hpack_per_call_values(void) {
  fixture f;
  fx_start(&f, SC_UNARY, NULL);
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  server *s = &f.srv;
  const char *tp1 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const char *tp2 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  grit_stream_head h = default_head();
  h.timeout_ns = 1500000000;
  h.traceparent = tp1;
  ASSERT_CMP(fx_stream(&f, &h), >, 0); /* 1: both enter the table */
  ASSERT_EQ(srv_header_flags(s, "traceparent") & NGHTTP2_NV_FLAG_NO_INDEX, 0);
  ASSERT_EQ(srv_header_flags(s, "grpc-timeout") & NGHTTP2_NV_FLAG_NO_INDEX, 0);
  h.traceparent = NULL;
  size_t with_timeout = fx_stream(&f, &h); /* 2: timeout only */
  ASSERT_CMP(with_timeout, >, 0);
  ASSERT_EQ(srv_header_flags(s, "traceparent"), -1);
  h.traceparent = tp2;
  size_t with_tp = fx_stream(&f, &h); /* 3: both, never indexed */
  ASSERT_CMP(with_tp, >, 0);
  ASSERT_STR_EQ(srv_header(s, "traceparent"), tp2);
  ASSERT_STR_EQ(srv_header(s, "grpc-timeout"), "1500000u");
  ASSERT_EQ(srv_header_flags(s, "traceparent") & NGHTTP2_NV_FLAG_NO_INDEX,
            NGHTTP2_NV_FLAG_NO_INDEX);
  ASSERT_EQ(srv_header_flags(s, "grpc-timeout") & NGHTTP2_NV_FLAG_NO_INDEX,
            NGHTTP2_NV_FLAG_NO_INDEX);
  /* The traceparent: 2 (name) + 1 (length) + at most 42 (55 characters of
   * 5 or 6 bits); its name spelled out would make at least 46. */
  ASSERT_CMP(with_tp - with_timeout, <=, 45);
  h.traceparent = NULL;
  h.timeout_ns = -1;
  size_t plain = fx_stream(&f, &h); /* 4: neither */
  ASSERT_CMP(plain, >, 0);
  /* "1500000u": 2 + 1 + 6; the name spelled out would make 19. */
  ASSERT_CMP(with_timeout - plain, <=, 9);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_unix_socket(void) {
  char path[64];
  snprintf(path, sizeof(path), "/tmp/grit-test-%d.sock", (int)getpid());
  fx_unix_path = path;
  fixture f;
  fx_start(&f, SC_UNARY, NULL);
  fx_unix_path = NULL;
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT(fx_unary(&f, &h, &c));
  ASSERT_EQ(c.code, GRIT_STATUS_OK);
  ASSERT_EQ(c.nmsgs, 1);
  ASSERT(strncmp(grit_transport_peer(f.cl.t)->text, "unix:", 5) == 0);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
  unlink(path);
}

/* TCP connects but the server never speaks: the connect timeout covers
 * the wait for SETTINGS. */
static void mute_on_connection(uv_stream_t *listener, int status) {
  (void)listener;
  (void)status;
}

static void test_connect_timeout(void) {
  fixture f;
  fx_start(&f, SC_UNARY, NULL);
  uv_tcp_t mute;
  uv_tcp_init(&f.loop, &mute);
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", 0, &a);
  uv_tcp_bind(&mute, (const struct sockaddr *)&a, 0);
  uv_listen((uv_stream_t *)&mute, 4, mute_on_connection);
  struct sockaddr_in b;
  int len = sizeof(b);
  uv_tcp_getsockname(&mute, (struct sockaddr *)&b, &len);
  int real_port = f.srv.port;
  f.srv.port = ntohs(b.sin_port);
  grit_transport_opts o = {.max_recv_message_bytes = -1,
                           .connect_timeout_ms = 100};
  uint64_t start = uv_now(&f.loop);
  ASSERT_OK(fx_connect(&f, &o));
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  f.srv.port = real_port;
  ASSERT_CMP(uv_now(&f.loop) - start, >=, 90);
  ASSERT_EQ(f.cl.ready, 0);
  ASSERT_EQ(f.cl.close_code, GRIT_STATUS_UNAVAILABLE);
  ASSERT(strstr(f.cl.close_reason, "timed out") != NULL);
  ASSERT(strstr(f.cl.close_reason, "SETTINGS") != NULL);
  uv_close((uv_handle_t *)&mute, NULL);
  ASSERT_EQ(fx_finish(&f), 0);
}

static void test_too_many_pings(void) {
  fixture f;
  fx_start(&f, SC_CALM, NULL);
  ASSERT_OK(fx_connect(&f, NULL));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c, &c.s));
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  ASSERT_EQ(c.done, 1);
  ASSERT_EQ(c.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(c.wire, GRIT_WIRE_REFUSED);
  ASSERT_EQ(f.cl.goaways, 1);
  ASSERT_EQ(f.cl.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
  ASSERT(f.cl.close_pings);
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
}

/* ------------------------------------------------------------------ */
/* TLS: a self-signed certificate made here, for localhost/127.0.0.1  */
/* ------------------------------------------------------------------ */

static EVP_PKEY *tls_key;
static X509 *tls_cert;
static char tls_cert_file[64];

static bool tls_make_cert(void) {
  if (tls_cert)
    return true;
  tls_key = EVP_EC_gen("P-256");
  tls_cert = X509_new();
  if (!tls_key || !tls_cert)
    return false;
  X509_set_version(tls_cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(tls_cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(tls_cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(tls_cert), 24 * 3600);
  X509_set_pubkey(tls_cert, tls_key);
  X509_NAME *name = X509_get_subject_name(tls_cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             (const unsigned char *)"grit test", -1, -1, 0);
  X509_set_issuer_name(tls_cert, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, tls_cert, tls_cert, NULL, NULL, 0);
  const struct {
    int nid;
    const char *value;
  } exts[] = {
      {NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1"},
      {NID_basic_constraints, "critical,CA:TRUE"},
      {NID_key_usage, "critical,digitalSignature,keyCertSign"},
  };
  for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
    X509_EXTENSION *e =
        X509V3_EXT_conf_nid(NULL, &ctx, exts[i].nid, exts[i].value);
    if (!e)
      return false;
    X509_add_ext(tls_cert, e, -1);
    X509_EXTENSION_free(e);
  }
  if (!X509_sign(tls_cert, tls_key, EVP_sha256()))
    return false;
  snprintf(tls_cert_file, sizeof(tls_cert_file), "/tmp/grit-test-XXXXXX");
  int fd = mkstemp(tls_cert_file);
  if (fd < 0)
    return false;
  FILE *fp = fdopen(fd, "w");
  PEM_write_X509(fp, tls_cert);
  fclose(fp);
  return true;
}

static void tls_free_cert(void) {
  if (tls_cert_file[0])
    unlink(tls_cert_file);
  X509_free(tls_cert);
  EVP_PKEY_free(tls_key);
  tls_cert = NULL;
  tls_key = NULL;
}

static int tls_alpn_select(SSL *ssl, const unsigned char **out,
                           unsigned char *outlen, const unsigned char *in,
                           unsigned int inlen, void *arg) {
  (void)ssl;
  server *s = arg;
  if (s->no_alpn)
    return SSL_TLSEXT_ERR_NOACK;
  unsigned char *sel;
  if (SSL_select_next_proto(&sel, outlen, (const unsigned char *)"\2h2", 3, in,
                            inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

static void server_enable_tls(server *s) {
  s->tls = SSL_CTX_new(TLS_server_method());
  SSL_CTX_use_certificate(s->tls, tls_cert);
  SSL_CTX_use_PrivateKey(s->tls, tls_key);
  SSL_CTX_set_alpn_select_cb(s->tls, tls_alpn_select, s);
}

/* Connect over TLS with |roots| (NULL: system store) to |name|. */
static grit_err fx_connect_tls(fixture *f, const char *roots, const char *name,
                               grit_tls_ctx **ctx) {
  grit_tls_opts to = {.root_certs_file = roots};
  grit_error_detail d;
  grit_err rv = grit_tls_ctx_create(&to, &d, ctx);
  if (rv != GRIT_OK)
    return rv;
  grit_transport_opts o = {.tls = *ctx,
                           .tls_server_name = name,
                           .tls_verify_hostname = true,
                           .max_recv_message_bytes = -1,
                           .connect_timeout_ms = 3000};
  return fx_connect(f, &o);
}

static void test_tls_unary(void) {
  ASSERT(tls_make_cert());
  fixture f;
  fx_start(&f, SC_UNARY, NULL);
  server_enable_tls(&f.srv);
  grit_tls_ctx *ctx = NULL;
  /* A port in the name is ignored for SNI and the hostname check. */
  ASSERT_OK(fx_connect_tls(&f, tls_cert_file, "localhost:443", &ctx));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  grit_stream_head h = default_head();
  call c = {0};
  ASSERT_OK(grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c, &c.s));
  grit_slice *m = grit_frame_message("ping", 4);
  ASSERT_OK(grit_stream_send(c.s, m));
  grit_slice_unref(m);
  ASSERT_OK(grit_stream_close_send(c.s));
  ASSERT(fx_run_until(&f, &c.done, 1));
  ASSERT_EQ(c.code, GRIT_STATUS_OK);
  ASSERT_EQ(c.nmsgs, 1);
  ASSERT_MEM_EQ(c.msgs[0]->data, "pong", 4);
  ASSERT_STR_EQ(srv_header(&f.srv, ":scheme"), "https");
  call_free(&c);
  ASSERT_EQ(fx_finish(&f), 0);
  grit_tls_ctx_unref(ctx);
  SSL_CTX_free(f.srv.tls);
}

/* Certificate and ALPN failures: UNAVAILABLE with a reason that says so. */
static void tls_expect_failure(scenario sc, bool no_alpn, const char *roots,
                               const char *name, const char *want) {
  ASSERT(tls_make_cert());
  fixture f;
  fx_start(&f, sc, NULL);
  server_enable_tls(&f.srv);
  f.srv.no_alpn = no_alpn;
  grit_tls_ctx *ctx = NULL;
  ASSERT_OK(fx_connect_tls(&f, roots, name, &ctx));
  ASSERT(fx_run_until(&f, &f.cl.closed, 1));
  ASSERT_EQ(f.cl.ready, 0);
  ASSERT_EQ(f.cl.close_code, GRIT_STATUS_UNAVAILABLE);
  if (!strstr(f.cl.close_reason, want))
    TEST_FAIL_AT(__FILE__, __LINE__, "reason \"%s\" lacks \"%s\"",
                 f.cl.close_reason, want);
  ASSERT_EQ(fx_finish(&f), 0);
  grit_tls_ctx_unref(ctx);
  SSL_CTX_free(f.srv.tls);
}

static void test_tls_untrusted(void) {
  /* The system store does not know our self-signed root. */
  tls_expect_failure(SC_UNARY, false, NULL, "localhost",
                     "certificate verification failed");
}

static void test_tls_wrong_host(void) {
  ASSERT(tls_make_cert());
  tls_expect_failure(SC_UNARY, false, tls_cert_file, "other.example",
                     "hostname mismatch");
}

static void test_tls_no_alpn(void) {
  ASSERT(tls_make_cert());
  tls_expect_failure(SC_UNARY, true, tls_cert_file, "localhost", "ALPN");
}

static void test_tls_ip_san(void) {
  ASSERT(tls_make_cert());
  fixture f;
  fx_start(&f, SC_UNARY, NULL);
  server_enable_tls(&f.srv);
  grit_tls_ctx *ctx = NULL;
  ASSERT_OK(fx_connect_tls(&f, tls_cert_file, "127.0.0.1", &ctx));
  ASSERT(fx_run_until(&f, &f.cl.ready, 1));
  ASSERT_EQ(fx_finish(&f), 0);
  grit_tls_ctx_unref(ctx);
  SSL_CTX_free(f.srv.tls);
}

/* ------------------------------------------------------------------ */
/* OOM sweep: fail the i-th grit allocation (nghttp2's included)       */
/* ------------------------------------------------------------------ */

static long oom_fail_at = -1, oom_count;

static bool oom_hit(void) {
  return ++oom_count == oom_fail_at;
}
static void *oom_malloc(size_t n, void *ud) {
  (void)ud;
  return oom_hit() ? NULL : malloc(n);
}
static void oom_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *oom_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  return oom_hit() ? NULL : calloc(n, m);
}
static void *oom_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  return oom_hit() ? NULL : realloc(p, n);
}

/* One unary exchange with allocation |fail_at| failing. Whatever fails,
 * everything must end (no hang), and the loop must close with no handle
 * left; ASan checks for leaks. Returns the number of allocations. */
static int oom_ok_runs;
static long oom_run(long fail_at, bool tls, bool *hung) {
  static const grit_allocator failing = {NULL, oom_malloc, oom_free, oom_calloc,
                                         oom_realloc};
  fixture f;
  fx_start(&f, SC_UNARY, NULL);
  if (tls)
    server_enable_tls(&f.srv);
  oom_count = 0;
  oom_fail_at = fail_at;
  grit_set_allocator(&failing);
  call c = {0};
  grit_metadata *md = NULL;
  grit_tls_ctx *ctx = NULL;
  grit_err crv = tls ? fx_connect_tls(&f, tls_cert_file, "localhost", &ctx)
                     : fx_connect(&f, NULL);
  if (crv == GRIT_OK) {
    while (!f.cl.ready && !f.cl.closed && !f.expired)
      uv_run(&f.loop, UV_RUN_ONCE);
    grit_stream_head h = default_head();
    if (grit_metadata_create(&md) == GRIT_OK &&
        grit_metadata_add(md, "x-raw-bin", "\1\2\3\4", 4) == GRIT_OK)
      h.metadata = md;
    h.timeout_ns = 1000000000;
    if (f.cl.ready && !f.cl.closed &&
        grit_transport_start_stream(f.cl.t, &h, &call_cbs, &c, &c.s) ==
            GRIT_OK) {
      grit_slice *m = grit_frame_message("ping", 4);
      if (m) {
        grit_stream_send(c.s, m);
        grit_slice_unref(m);
      }
      grit_stream_close_send(c.s);
      while (!c.done && !f.expired)
        uv_run(&f.loop, UV_RUN_ONCE);
    }
  }
  *hung = f.expired;
  if (c.done && c.code == GRIT_STATUS_OK && c.nmsgs == 1)
    oom_ok_runs++;
  grit_metadata_destroy(md);
  call_free(&c);
  if (fx_finish(&f) != 0)
    *hung = true;
  grit_tls_ctx_unref(ctx);
  grit_set_allocator(NULL);
  SSL_CTX_free(f.srv.tls);
  return oom_count;
}

static void oom_sweep(bool tls) {
  bool hung;
  oom_ok_runs = 0;
  long total = oom_run(-1, tls, &hung);
  ASSERT(!hung);
  ASSERT_EQ(oom_ok_runs, 1);
  ASSERT_CMP(total, >, 10);
  for (long i = 1; i <= total; i++) {
    oom_run(i, tls, &hung);
    if (hung)
      TEST_FAIL_AT(__FILE__, __LINE__,
                   "hang with allocation %ld of %ld failing", i, total);
  }
  fprintf(stderr, "oom_sweep%s: %ld allocations, %d runs still succeeded\n",
          tls ? " (TLS)" : "", total, oom_ok_runs - 1);
}

static void test_oom_sweep(void) {
  oom_sweep(false);
}

static void test_oom_sweep_tls(void) {
  ASSERT(tls_make_cert());
  oom_sweep(true);
}

static const test_case tests[] = {
    {"unary", test_unary},
    {"trailers_only", test_trailers_only},
    {"refused_stream", test_refused_stream},
    {"goaway", test_goaway},
    {"connection_dropped", test_connection_dropped},
    {"message_too_large", test_message_too_large},
    {"http_503", test_http_503},
    {"header_list_limit", test_header_list_limit},
    {"missing_status", test_missing_status},
    {"info_then_empty_data", test_info_then_empty_data},
    {"partial_message", test_partial_message},
    {"early_trailers", test_early_trailers},
    {"cancel", test_cancel},
    {"keepalive_timeout", test_keepalive_timeout},
    {"connect_refused", test_connect_refused},
    {"destroy_in_callback", test_destroy_in_callback},
    {"cancel_in_callback", test_cancel_in_callback},
    {"max_concurrent", test_max_concurrent},
    {"queued_not_sent", test_queued_not_sent},
    {"large_echo", test_large_echo},
    {"zero_copy_cancel_while_writing", test_zero_copy_cancel_while_writing},
    {"zero_copy_destroy_while_writing", test_zero_copy_destroy_while_writing},
    {"drain", test_drain},
    {"many_streams", test_many_streams},
    {"hpack_per_call_values", test_hpack_per_call_values},
    {"unix_socket", test_unix_socket},
    {"connect_timeout", test_connect_timeout},
    {"too_many_pings", test_too_many_pings},
    {"tls_unary", test_tls_unary},
    {"tls_untrusted", test_tls_untrusted},
    {"tls_wrong_host", test_tls_wrong_host},
    {"tls_no_alpn", test_tls_no_alpn},
    {"tls_ip_san", test_tls_ip_san},
    {"oom_sweep", test_oom_sweep},
    {"oom_sweep_tls", test_oom_sweep_tls},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  int rc = test_main(tests, argc, argv);
  tls_free_cert();
  return rc;
}
