/*
 * The self-test's HTTP/2 client. Blocking socket, poll(2) for reads, and
 * nghttp2_session_mem_send/mem_recv in between; everything runs on the
 * test thread.
 */
#include "tclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static tc_stream *tc_find_stream(tclient *tc, int32_t id) {
  for (int i = 0; i < tc->n_streams; i++)
    if (tc->streams[i].id == id)
      return &tc->streams[i];
  return NULL;
}

static void tc_append(char *block, size_t cap, const uint8_t *name, size_t nlen,
                      const uint8_t *value, size_t vlen) {
  size_t used = strlen(block);
  snprintf(block + used, cap - used, "%.*s: %.*s\n", (int)nlen,
           (const char *)name, (int)vlen, (const char *)value);
}

static int tc_on_header(nghttp2_session *ng, const nghttp2_frame *f,
                        const uint8_t *name, size_t nlen, const uint8_t *value,
                        size_t vlen, uint8_t flags, void *user_data) {
  tc_stream *s = tc_find_stream(user_data, f->hd.stream_id);
  if (s == NULL)
    return 0;
  if (s->header_blocks == 0)
    tc_append(s->headers, sizeof(s->headers), name, nlen, value, vlen);
  else
    tc_append(s->trailers, sizeof(s->trailers), name, nlen, value, vlen);
  return 0;
}

static int tc_on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f,
                            void *user_data) {
  tclient *tc = user_data;
  tc_stream *s = tc_find_stream(tc, f->hd.stream_id);
  switch (f->hd.type) {
  case NGHTTP2_HEADERS:
    if (s) {
      if (s->header_blocks == 0 && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        s->headers_ended = true;
      s->header_blocks++;
    }
    break;
  case NGHTTP2_RST_STREAM:
    if (s)
      s->rst = true;
    break;
  case NGHTTP2_GOAWAY:
    tc->goaway = true;
    tc->goaway_last = f->goaway.last_stream_id;
    tc->goaway_code = f->goaway.error_code;
    break;
  case NGHTTP2_PING:
    if (f->hd.flags & NGHTTP2_FLAG_ACK)
      tc->pings_acked++;
    else
      tc->pings_received++;
    break;
  case NGHTTP2_SETTINGS:
    if (f->hd.flags & NGHTTP2_FLAG_ACK)
      break;
    tc->settings_received++;
    for (int i = 0; i < tc->n_streams; i++) {
      tc_stream *t = &tc->streams[i];
      int32_t w = nghttp2_session_get_stream_remote_window_size(ng, t->id);
      if (t->closed || w < 0)
        continue;
      if (t->settings_window_min < 0 || w < t->settings_window_min)
        t->settings_window_min = w;
    }
    break;
  case NGHTTP2_WINDOW_UPDATE: {
    uint32_t inc = (uint32_t)f->window_update.window_size_increment;
    if (tc->window_updates == 0 || inc < tc->wu_min)
      tc->wu_min = inc;
    if (inc > tc->wu_max)
      tc->wu_max = inc;
    tc->window_updates++;
    break;
  }
  default:
    break;
  }
  return 0;
}

static int tc_on_data(nghttp2_session *ng, uint8_t flags, int32_t id,
                      const uint8_t *data, size_t len, void *user_data) {
  tc_stream *s = tc_find_stream(user_data, id);
  if (s == NULL || len == 0)
    return 0;
  s->data = realloc(s->data, s->data_len + len);
  memcpy(s->data + s->data_len, data, len);
  s->data_len += len;
  return 0;
}

static int tc_on_close(nghttp2_session *ng, int32_t id, uint32_t code,
                       void *user_data) {
  tc_stream *s = tc_find_stream(user_data, id);
  if (s) {
    s->closed = true;
    s->close_code = code;
  }
  return 0;
}

static int tc_socket(tclient *tc, const struct sockaddr *sa, socklen_t len) {
  memset(tc, 0, sizeof(*tc));
  tc->fd = socket(sa->sa_family, SOCK_STREAM, 0);
  if (tc->fd < 0)
    return -errno;
  if (connect(tc->fd, sa, len) != 0) {
    int err = -errno;
    close(tc->fd);
    tc->fd = -1;
    return err;
  }
  return 0;
}

static void tc_session(tclient *tc) {
  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, tc_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, tc_on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, tc_on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, tc_on_close);
  nghttp2_session_client_new(&tc->ng, cbs, tc);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_submit_settings(tc->ng, NGHTTP2_FLAG_NONE, NULL, 0);
}

static int tc_tcp(tclient *tc, uint16_t port) {
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rv = tc_socket(tc, (struct sockaddr *)&sin, sizeof(sin));
  if (rv == 0) {
    int one = 1;
    setsockopt(tc->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return rv;
}

int tc_connect(tclient *tc, uint16_t port) {
  int rv = tc_tcp(tc, port);
  if (rv == 0)
    tc_session(tc);
  return rv;
}

int tc_connect_unix(tclient *tc, const char *path) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
  int rv = tc_socket(tc, (struct sockaddr *)&sun, sizeof(sun));
  if (rv == 0)
    tc_session(tc);
  return rv;
}

int tc_connect_tls(tclient *tc, uint16_t port) {
  int rv = tc_tcp(tc, port);
  if (rv != 0)
    return rv;
  static const unsigned char alpn[] = "\x02h2";
  tc->ssl_ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_alpn_protos(tc->ssl_ctx, alpn, sizeof(alpn) - 1);
  tc->ssl = SSL_new(tc->ssl_ctx);
  SSL_set_fd(tc->ssl, tc->fd);
  if (SSL_connect(tc->ssl) != 1) {
    tc_close(tc);
    return -EPROTO;
  }
  const unsigned char *proto;
  unsigned int plen;
  SSL_get0_alpn_selected(tc->ssl, &proto, &plen);
  snprintf(tc->alpn, sizeof(tc->alpn), "%.*s", (int)plen, proto);
  tc_session(tc);
  return 0;
}

void tc_close(tclient *tc) {
  for (int i = 0; i < tc->n_streams; i++) {
    free(tc->streams[i].data);
    free(tc->streams[i].send);
  }
  nghttp2_session_del(tc->ng);
  SSL_free(tc->ssl);
  SSL_CTX_free(tc->ssl_ctx);
  if (tc->fd >= 0)
    close(tc->fd);
  memset(tc, 0, sizeof(*tc));
  tc->fd = -1;
}

static ssize_t tc_read_body(nghttp2_session *ng, int32_t id, uint8_t *buf,
                            size_t length, uint32_t *flags,
                            nghttp2_data_source *src, void *user_data) {
  tc_stream *s = src->ptr;
  size_t n = s->send_len - s->send_off;
  if (n > length)
    n = length;
  if (n > 0)
    memcpy(buf, s->send + s->send_off, n);
  s->send_off += n;
  if (s->send_off < s->send_len)
    return (ssize_t)n;
  if (s->send_end)
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  else if (n == 0)
    return NGHTTP2_ERR_DEFERRED;
  return (ssize_t)n;
}

static void tc_frame(tc_stream *s, const void *msg, size_t len) {
  s->send = realloc(s->send, s->send_len + 5 + len);
  uint8_t *p = s->send + s->send_len;
  p[0] = 0;
  p[1] = (uint8_t)(len >> 24);
  p[2] = (uint8_t)(len >> 16);
  p[3] = (uint8_t)(len >> 8);
  p[4] = (uint8_t)len;
  if (len)
    memcpy(p + 5, msg, len);
  s->send_len += 5 + len;
}

#define TC_NV(n, v)                                                            \
  (nghttp2_nv) {                                                               \
    (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE \
  }

int tc_request(tclient *tc, const char *path, const void *msg, size_t len,
               bool end, const char *const *extra) {
  if (tc->n_streams == TC_MAX_STREAMS)
    return -1;
  int i = tc->n_streams++;
  tc_stream *s = &tc->streams[i];
  memset(s, 0, sizeof(*s));
  s->settings_window_min = -1;
  if (msg)
    tc_frame(s, msg, len);
  s->send_end = end;
  nghttp2_nv nv[32];
  size_t n = 0;
  nv[n++] = TC_NV(":method", "POST");
  nv[n++] = TC_NV(":scheme", "http");
  nv[n++] = TC_NV(":authority", "test.local");
  nv[n++] = TC_NV(":path", path);
  nv[n++] = TC_NV("content-type", "application/grpc");
  nv[n++] = TC_NV("te", "trailers");
  for (size_t k = 0; extra && extra[k] && n < 30; k += 2)
    nv[n++] = TC_NV(extra[k], extra[k + 1]);
  nghttp2_data_provider prd = {.source.ptr = s, .read_callback = tc_read_body};
  s->id = nghttp2_submit_request(tc->ng, NULL, nv, n, &prd, NULL);
  return s->id > 0 ? i : -1;
}

void tc_send(tclient *tc, int i, const void *msg, size_t len, bool end) {
  tc_stream *s = &tc->streams[i];
  if (msg)
    tc_frame(s, msg, len);
  s->send_end = end;
  nghttp2_session_resume_data(tc->ng, s->id);
}

static int64_t tc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void tc_flush(tclient *tc) {
  for (;;) {
    const uint8_t *p;
    ssize_t n = nghttp2_session_mem_send(tc->ng, &p);
    if (n <= 0)
      return;
    while (n > 0) {
      ssize_t w = tc->ssl ? SSL_write(tc->ssl, p, (int)n)
                          : send(tc->fd, p, (size_t)n, MSG_NOSIGNAL);
      if (w <= 0) {
        tc->eof = true;
        return;
      }
      p += w;
      n -= w;
    }
  }
}

bool tc_run(tclient *tc, tc_pred pred, void *arg, int timeout_ms) {
  int64_t deadline = tc_now_ms() + timeout_ms;
  for (;;) {
    if (!tc->eof)
      tc_flush(tc);
    if (pred && pred(tc, arg))
      return true;
    int64_t left = deadline - tc_now_ms();
    if (tc->eof || left <= 0)
      return pred ? pred(tc, arg) : false;
    struct pollfd pfd = {.fd = tc->fd, .events = POLLIN};
    if (!(tc->ssl && SSL_pending(tc->ssl)) && poll(&pfd, 1, (int)left) <= 0)
      continue;
    uint8_t buf[16384];
    ssize_t n = tc->ssl ? SSL_read(tc->ssl, buf, sizeof(buf))
                        : recv(tc->fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      tc->eof = true;
      continue;
    }
    ssize_t rv = nghttp2_session_mem_recv(tc->ng, buf, (size_t)n);
    if (rv < 0) {
      tc->recv_error = (int)rv;
      tc->eof = true;
    }
  }
}

static bool tc_closed_pred(tclient *tc, void *arg) {
  return tc->streams[*(int *)arg].closed;
}

bool tc_run_closed(tclient *tc, int i, int timeout_ms) {
  return tc_run(tc, tc_closed_pred, &i, timeout_ms);
}

const char *tc_find(const char *block, const char *name, char *buf,
                    size_t len) {
  size_t nlen = strlen(name);
  for (const char *p = block; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
    if (strncmp(p, name, nlen) == 0 && p[nlen] == ':' && p[nlen + 1] == ' ') {
      const char *v = p + nlen + 2;
      size_t vlen = strcspn(v, "\n");
      snprintf(buf, len, "%.*s", (int)vlen, v);
      return buf;
    }
  }
  return NULL;
}
