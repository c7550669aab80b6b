/* The admin HTTP endpoint (SPEC OP-03): GET /metrics (Prometheus text of
 * the whole process) and GET /channelz (grit_channelz_json), on a libuv
 * loop and thread of its own. Own thread, not a channel runtime's: a
 * scrape that renders a large exposition or waits for a channel's loop
 * (channelz) never holds up calls' I/O, and it keeps the runtime
 * untouched. Every connection is read and written by events, so an idle
 * or slow scraper never blocks another; HTTP/1.1 keep-alive is honoured,
 * one request at a time per connection. Loopback only unless asked. */
#include "channel/channel_int.h"

#include <arpa/inet.h>
#include <string.h>

#define ADMIN_MAX_CONNS 64

typedef struct admin_conn {
  grit_list link;
  grit_admin *a;
  uv_tcp_t tcp;
  uv_write_t wr;
  char in[GRIT_HTTP_MAX_HEAD + 1];
  size_t in_len;
  grit_buf out;
  bool writing;
  bool close_after;
  bool closing;
} admin_conn;

struct grit_admin {
  uv_loop_t loop;
  uv_tcp_t server;
  uv_async_t stop;
  uv_thread_t thread;
  uint16_t port;
  grit_list conns;
  size_t nconns;
};

static void conn_closed(uv_handle_t *h) {
  admin_conn *c = h->data;
  grit_buf_free(&c->out);
  grit_free(c);
}

static void conn_close(admin_conn *c) {
  if (c->closing)
    return;
  c->closing = true;
  grit_list_remove(&c->link);
  c->a->nconns--;
  uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void conn_serve(admin_conn *c);
static void conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b);
static void conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void conn_wrote(uv_write_t *w, int status) {
  admin_conn *c = w->data;
  c->writing = false;
  c->out.len = 0;
  if (status < 0 || c->close_after ||
      uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read) != 0) {
    conn_close(c);
    return;
  }
  conn_serve(c); /* a pipelined request may be waiting already */
}

/* The response for |req|: status line, headers, body. */
static grit_err respond(admin_conn *c, const grit_http_req *req, bool bad) {
  const char *status = "200 OK";
  const char *type = "text/plain; charset=utf-8";
  grit_bytes json = {0};
  grit_buf body;
  grit_buf_init(&body);
  grit_err rv = GRIT_OK;
  if (bad) {
    status = "400 Bad Request";
    rv = grit_buf_appendf(&body, "bad request\n");
  } else if (strcmp(req->method, "GET") != 0) {
    status = "405 Method Not Allowed";
    rv = grit_buf_appendf(&body, "only GET\n");
  } else if (strcmp(req->path, "/metrics") == 0) {
    type = "text/plain; version=0.0.4; charset=utf-8";
    rv = grit_obs_write_prometheus(NULL, &body);
  } else if (strcmp(req->path, "/channelz") == 0) {
    type = "application/json";
    rv = grit_channelz_json(NULL, &json);
    if (rv == GRIT_OK)
      rv = grit_buf_append(&body, json.data, json.len);
    grit_bytes_free(&json);
  } else if (strcmp(req->path, "/") == 0) {
    rv = grit_buf_appendf(&body, "grit admin: /metrics /channelz\n");
  } else {
    status = "404 Not Found";
    rv = grit_buf_appendf(&body, "not found\n");
  }
  if (rv != GRIT_OK) {
    grit_buf_free(&body);
    grit_buf_init(&body);
    status = "500 Internal Server Error";
    c->close_after = true;
  }
  rv = grit_buf_appendf(&c->out,
                        "HTTP/1.1 %s\r\nContent-Type: %s\r\n"
                        "Content-Length: %zu\r\nCache-Control: no-store\r\n%s"
                        "\r\n",
                        status, type, body.len,
                        c->close_after ? "Connection: close\r\n" : "");
  if (rv == GRIT_OK && body.len)
    rv = grit_buf_append(&c->out, body.data, body.len);
  grit_buf_free(&body);
  return rv;
}

/* Answer the next complete request in the input, if any. */
static void conn_serve(admin_conn *c) {
  if (c->writing || c->closing)
    return;
  grit_http_req req;
  int r = grit_http_parse_request(c->in, c->in_len, &req);
  if (r == GRIT_HTTP_INCOMPLETE)
    return;
  bool bad = r == GRIT_HTTP_BAD;
  c->close_after = bad || !req.keep_alive;
  if (!bad) {
    memmove(c->in, c->in + req.consumed, c->in_len - req.consumed);
    c->in_len -= req.consumed;
  }
  if (respond(c, &req, bad) != GRIT_OK) {
    conn_close(c);
    return;
  }
  uv_buf_t b = uv_buf_init((char *)c->out.data, (unsigned)c->out.len);
  c->wr.data = c;
  if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, conn_wrote) != 0) {
    conn_close(c);
    return;
  }
  c->writing = true;
  uv_read_stop((uv_stream_t *)&c->tcp); /* one request at a time */
}

static void conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  admin_conn *c = h->data;
  (void)hint;
  b->base = c->in + c->in_len;
  b->len = sizeof(c->in) - c->in_len;
}

static void conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  admin_conn *c = s->data;
  (void)b;
  if (n < 0) {
    conn_close(c);
    return;
  }
  c->in_len += (size_t)n;
  conn_serve(c); /* a head that cannot fit is BAD: answered, then closed */
}

static void on_connection(uv_stream_t *server, int status) {
  grit_admin *a = server->data;
  if (status < 0)
    return;
  admin_conn *c = grit_calloc(1, sizeof(*c));
  if (!c)
    return; /* the connection stays in the backlog; tried again later */
  c->a = a;
  grit_buf_init(&c->out);
  uv_tcp_init(&a->loop, &c->tcp);
  c->tcp.data = c;
  grit_list_insert_tail(&a->conns, &c->link);
  a->nconns++;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 ||
      a->nconns > ADMIN_MAX_CONNS ||
      uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read) != 0)
    conn_close(c);
}

static void admin_on_stop(uv_async_t *h) {
  grit_admin *a = h->data;
  while (!grit_list_empty(&a->conns))
    conn_close(GRIT_CONTAINER_OF(a->conns.next, admin_conn, link));
  uv_close((uv_handle_t *)&a->server, NULL);
  uv_close((uv_handle_t *)&a->stop, NULL);
}

static void admin_thread(void *arg) {
  grit_admin *a = arg;
  uv_run(&a->loop, UV_RUN_DEFAULT);
}

static bool is_loopback(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
  return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

static grit_err admin_fail(grit_error_detail *d, grit_err rv, const char *what,
                           int uv_rv) {
  if (d) {
    d->code = rv;
    snprintf(d->reason, sizeof(d->reason), "%s%s%s", what, uv_rv ? ": " : "",
             uv_rv ? uv_strerror(uv_rv) : "");
  }
  return rv;
}

grit_err grit_admin_start(const char *host, uint16_t port, unsigned flags,
                          grit_error_detail *d, grit_admin **out) {
  if (!out)
    return GRIT_ERR_INVALID_ARG;
  *out = NULL;
  if (!host)
    host = "127.0.0.1";
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof(ss));
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0)
    return admin_fail(d, GRIT_ERR_INVALID_ARG,
                      "admin address is not an IP literal", 0);
  if (!is_loopback(&ss) && !(flags & GRIT_ADMIN_ALLOW_REMOTE))
    return admin_fail(d, GRIT_ERR_INVALID_ARG,
                      "admin address is not loopback (set "
                      "GRIT_ADMIN_ALLOW_REMOTE to serve it)",
                      0);
  grit_admin *a = grit_calloc(1, sizeof(*a));
  if (!a)
    return GRIT_ERR_NOMEM;
  grit_list_init(&a->conns);
  int r = uv_loop_init(&a->loop);
  if (r != 0) {
    grit_free(a);
    return admin_fail(d, GRIT_ERR_SYSTEM, "loop", r);
  }
  uv_tcp_init(&a->loop, &a->server);
  uv_async_init(&a->loop, &a->stop, admin_on_stop);
  a->server.data = a;
  a->stop.data = a;
  r = uv_tcp_bind(&a->server, (const struct sockaddr *)&ss, 0);
  if (r == 0)
    r = uv_listen((uv_stream_t *)&a->server, 64, on_connection);
  struct sockaddr_storage bound;
  int blen = sizeof(bound);
  if (r == 0)
    r = uv_tcp_getsockname(&a->server, (struct sockaddr *)&bound, &blen);
  if (r == 0)
    a->port = ntohs(bound.ss_family == AF_INET
                        ? ((struct sockaddr_in *)&bound)->sin_port
                        : ((struct sockaddr_in6 *)&bound)->sin6_port);
  if (r == 0)
    r = uv_thread_create(&a->thread, admin_thread, a);
  if (r != 0) {
    uv_close((uv_handle_t *)&a->server, NULL);
    uv_close((uv_handle_t *)&a->stop, NULL);
    uv_run(&a->loop, UV_RUN_DEFAULT);
    uv_loop_close(&a->loop);
    grit_free(a);
    return admin_fail(d, GRIT_ERR_SYSTEM, "listen", r);
  }
  *out = a;
  return GRIT_OK;
}

uint16_t grit_admin_port(const grit_admin *a) {
  return a ? a->port : 0;
}

void grit_admin_stop(grit_admin *a) {
  if (!a)
    return;
  uv_async_send(&a->stop);
  uv_thread_join(&a->thread);
  uv_loop_close(&a->loop);
  grit_free(a);
}
