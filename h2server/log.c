/*
 * The request log and the waits built on it. The server thread appends and
 * updates records under srv->mu and bumps srv->gen; test threads read
 * snapshots (one allocation each, owned by the server) and wait on srv->cond.
 */
#include "h2s_int.h"

#include <stdlib.h>
#include <string.h>

void h2s_log_lock(h2s_server *srv) {
  uv_mutex_lock(&srv->mu);
}

void h2s_log_unlock(h2s_server *srv) {
  srv->gen++;
  uv_cond_broadcast(&srv->cond);
  uv_mutex_unlock(&srv->mu);
}

void h2s_log_update(h2s_server *srv) {
  h2s_log_lock(srv);
  h2s_log_unlock(srv);
}

h2s_rec *h2s_log_new_request(h2s_server *srv, h2s_conn *c, int32_t id) {
  h2s_rec *r = h2s_xcalloc(1, sizeof(*r));
  r->pub.conn_index = c->index;
  r->pub.stream_id = id;
  r->pub.status_sent = -1;
  r->pub.headers_ms = h2s_now_ms(srv);
  h2s_log_lock(srv);
  if (srv->n_recs == srv->cap_recs) {
    srv->cap_recs = srv->cap_recs ? srv->cap_recs * 2 : 16;
    srv->recs = h2s_xrealloc(srv->recs, srv->cap_recs * sizeof(*srv->recs));
  }
  r->pub.seq = srv->n_recs;
  srv->recs[srv->n_recs++] = r;
  srv->stats.requests++;
  h2s_log_unlock(srv);
  return r;
}

static char *log_strndup(const uint8_t *p, size_t n) {
  char *s = h2s_xmalloc(n + 1);
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

/* Point the shortcut fields at the first value of each header. */
static void log_shortcuts(h2s_request *q) {
  q->path = h2s_request_header(q, ":path");
  q->authority = h2s_request_header(q, ":authority");
  q->method = h2s_request_header(q, ":method");
  q->content_type = h2s_request_header(q, "content-type");
  q->grpc_timeout = h2s_request_header(q, "grpc-timeout");
}

void h2s_log_add_header(h2s_server *srv, h2s_rec *r, const uint8_t *name,
                        size_t nlen, const uint8_t *value, size_t vlen) {
  h2s_header h = {log_strndup(name, nlen), log_strndup(value, vlen)};
  h2s_log_lock(srv);
  if (r->pub.n_headers == r->hcap) {
    r->hcap = r->hcap ? r->hcap * 2 : 16;
    r->hdrs = h2s_xrealloc(r->hdrs, r->hcap * sizeof(*r->hdrs));
  }
  r->hdrs[r->pub.n_headers++] = h;
  r->pub.headers = r->hdrs;
  log_shortcuts(&r->pub);
  h2s_log_unlock(srv);
}

void h2s_log_add_msg(h2s_server *srv, h2s_rec *r, const uint8_t *p, size_t n,
                     uint8_t flags) {
  uint8_t *d = h2s_xmalloc(n);
  memcpy(d, p, n);
  h2s_log_lock(srv);
  if (r->pub.n_msgs == r->mcap) {
    r->mcap = r->mcap ? r->mcap * 2 : 4;
    r->msgs = h2s_xrealloc(r->msgs, r->mcap * sizeof(*r->msgs));
  }
  r->msgs[r->pub.n_msgs++] = (h2s_msg){d, n, flags};
  r->pub.msgs = r->msgs;
  r->pub.msg_bytes += n;
  h2s_log_unlock(srv);
}

static void log_free_rec(h2s_rec *r) {
  for (size_t i = 0; i < r->pub.n_headers; i++) {
    free((char *)r->hdrs[i].name);
    free((char *)r->hdrs[i].value);
  }
  for (size_t i = 0; i < r->pub.n_msgs; i++)
    free((uint8_t *)r->msgs[i].data);
  free(r->hdrs);
  free(r->msgs);
  free(r);
}

void h2s_log_free(h2s_server *srv) {
  for (size_t i = 0; i < srv->n_recs; i++)
    log_free_rec(srv->recs[i]);
  free(srv->recs);
  for (size_t i = 0; i < srv->n_snaps; i++)
    free(srv->snaps[i]);
  free(srv->snaps);
  srv->recs = NULL;
  srv->snaps = NULL;
  srv->n_recs = srv->n_snaps = 0;
}

/* Copy |src| into one block: struct, arrays, then strings and payloads. */
static h2s_request *log_snapshot(const h2s_request *src) {
  size_t size = sizeof(h2s_request) + src->n_headers * sizeof(h2s_header) +
                src->n_msgs * sizeof(h2s_msg);
  for (size_t i = 0; i < src->n_headers; i++)
    size += strlen(src->headers[i].name) + strlen(src->headers[i].value) + 2;
  size += src->msg_bytes;
  uint8_t *block = h2s_xmalloc(size);
  h2s_request *q = (h2s_request *)block;
  *q = *src;
  h2s_header *hdrs = (h2s_header *)(q + 1);
  h2s_msg *msgs = (h2s_msg *)(hdrs + src->n_headers);
  char *p = (char *)(msgs + src->n_msgs);
  for (size_t i = 0; i < src->n_headers; i++) {
    size_t nl = strlen(src->headers[i].name) + 1;
    size_t vl = strlen(src->headers[i].value) + 1;
    memcpy(p, src->headers[i].name, nl);
    hdrs[i].name = p;
    p += nl;
    memcpy(p, src->headers[i].value, vl);
    hdrs[i].value = p;
    p += vl;
  }
  for (size_t i = 0; i < src->n_msgs; i++) {
    msgs[i] = src->msgs[i];
    if (src->msgs[i].len)
      memcpy(p, src->msgs[i].data, src->msgs[i].len);
    msgs[i].data = (uint8_t *)p;
    p += src->msgs[i].len;
  }
  q->headers = src->n_headers ? hdrs : NULL;
  q->msgs = src->n_msgs ? msgs : NULL;
  log_shortcuts(q);
  return q;
}

size_t h2s_server_request_count(h2s_server *srv) {
  uv_mutex_lock(&srv->mu);
  size_t n = srv->n_recs;
  uv_mutex_unlock(&srv->mu);
  return n;
}

const h2s_request *h2s_server_request(h2s_server *srv, size_t seq) {
  h2s_request *q = NULL;
  uv_mutex_lock(&srv->mu);
  if (seq < srv->n_recs) {
    q = log_snapshot(&srv->recs[seq]->pub);
    if (srv->n_snaps == srv->cap_snaps) {
      srv->cap_snaps = srv->cap_snaps ? srv->cap_snaps * 2 : 16;
      srv->snaps =
          h2s_xrealloc(srv->snaps, srv->cap_snaps * sizeof(*srv->snaps));
    }
    srv->snaps[srv->n_snaps++] = q;
  }
  uv_mutex_unlock(&srv->mu);
  return q;
}

void h2s_server_get_stats(h2s_server *srv, h2s_stats *out) {
  uv_mutex_lock(&srv->mu);
  *out = srv->stats;
  uv_mutex_unlock(&srv->mu);
}

const char *h2s_request_header(const h2s_request *req, const char *name) {
  for (size_t i = 0; i < req->n_headers; i++)
    if (strcmp(req->headers[i].name, name) == 0)
      return req->headers[i].value;
  return NULL;
}

bool h2s_server_wait(h2s_server *srv, h2s_pred_cb pred, void *user_data,
                     int timeout_ms) {
  uint64_t deadline = uv_hrtime() + (uint64_t)timeout_ms * 1000000u;
  for (;;) {
    uv_mutex_lock(&srv->mu);
    uint64_t gen = srv->gen;
    uv_mutex_unlock(&srv->mu);
    if (pred(srv, user_data))
      return true;
    uv_mutex_lock(&srv->mu);
    while (srv->gen == gen) {
      uint64_t now = uv_hrtime();
      if (now >= deadline ||
          uv_cond_timedwait(&srv->cond, &srv->mu, deadline - now) != 0)
        break;
    }
    bool timed_out = srv->gen == gen;
    uv_mutex_unlock(&srv->mu);
    if (timed_out)
      return pred(srv, user_data);
  }
}

typedef struct log_count {
  int what;
  uint64_t n;
} log_count;

static bool log_count_pred(h2s_server *srv, void *user_data) {
  const log_count *lc = user_data;
  uv_mutex_lock(&srv->mu);
  uint64_t have = lc->what == 0   ? srv->n_recs
                  : lc->what == 1 ? srv->n_closed
                                  : srv->stats.connections;
  uv_mutex_unlock(&srv->mu);
  return have >= lc->n;
}

bool h2s_server_wait_requests(h2s_server *srv, size_t n, int timeout_ms) {
  log_count lc = {0, n};
  return h2s_server_wait(srv, log_count_pred, &lc, timeout_ms);
}

bool h2s_server_wait_closed(h2s_server *srv, size_t n, int timeout_ms) {
  log_count lc = {1, n};
  return h2s_server_wait(srv, log_count_pred, &lc, timeout_ms);
}

bool h2s_server_wait_connections(h2s_server *srv, uint64_t n, int timeout_ms) {
  log_count lc = {2, n};
  return h2s_server_wait(srv, log_count_pred, &lc, timeout_ms);
}
