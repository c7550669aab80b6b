/* Client-side health checking (SPEC HC-01, HC-02; gRFC A17): a
 * grpc.health.v1.Health/Watch stream on a READY subchannel's own
 * transport. Each response's status is reported to the subchannel, which
 * shows NOT_SERVING as TRANSIENT_FAILURE to policies that honour health.
 * A stream that ends is restarted: at once if it had delivered a response,
 * else after a backoff (1 s, x1.6, at most 120 s, +-20 % jitter, as the
 * reconnect backoff, CB-01), reporting NOT_SERVING meanwhile as
 * grpc-core does. UNIMPLEMENTED means the server has no health service:
 * healthy, with one log line (grpc-core logs it too). The messages are
 * encoded by hand: field 1 of each, a string and an enum. */
#include "lb/lb_int.h"

#include <string.h>

#define HEALTH_PATH "/grpc.health.v1.Health/Watch"

struct grit_health_watch {
  uv_loop_t *loop;
  grit_rng *rng;
  grit_transport *t;
  const char *authority; /* the channel's, borrowed */
  char *service;
  char addr[64];
  grit_health_cb cb;
  void *ud;
  grit_stream *stream;
  uv_timer_t *timer; /* restart backoff; freed in its close callback */
  uint64_t backoff_ms;
  bool seen_response;
  bool stopped;
  grit_health_status last;
};

/* ---- the messages ---- */

static size_t put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    p[n++] = b | (v ? 0x80 : 0);
  } while (v);
  return n;
}

grit_slice *grit_health_encode_request(const char *service) {
  size_t len = strlen(service);
  uint8_t hdr[11];
  size_t h = 0;
  if (len > 0) {     /* proto3: an empty string is not written */
    hdr[h++] = 0x0a; /* field 1, length-delimited */
    h += put_varint(hdr + h, len);
  }
  size_t body = h + len;
  grit_slice *s = grit_slice_new(5 + body);
  if (!s)
    return NULL;
  s->data[0] = 0;
  s->data[1] = (uint8_t)(body >> 24);
  s->data[2] = (uint8_t)(body >> 16);
  s->data[3] = (uint8_t)(body >> 8);
  s->data[4] = (uint8_t)body;
  memcpy(s->data + 5, hdr, h);
  if (len)
    memcpy(s->data + 5 + h, service, len);
  return s;
}

static bool get_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
  *v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*i >= n)
      return false;
    uint8_t b = p[(*i)++];
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return true;
  }
  return false;
}

bool grit_health_decode_response(const uint8_t *p, size_t n, uint32_t *status) {
  size_t i = 0;
  *status = 0;
  while (i < n) {
    uint64_t key, v;
    if (!get_varint(p, n, &i, &key) || (key >> 3) == 0)
      return false;
    switch (key & 7) {
    case 0: /* varint */
      if (!get_varint(p, n, &i, &v))
        return false;
      if ((key >> 3) == 1)
        *status = (uint32_t)v;
      break;
    case 1: /* 64-bit */
      if (n - i < 8)
        return false;
      i += 8;
      break;
    case 2: /* length-delimited */
      if (!get_varint(p, n, &i, &v) || v > n - i)
        return false;
      i += (size_t)v;
      break;
    case 5: /* 32-bit */
      if (n - i < 4)
        return false;
      i += 4;
      break;
    default:
      return false;
    }
  }
  return true;
}

/* ---- the watch ---- */

static void health_report(grit_health_watch *w, grit_health_status s) {
  if (w->stopped || w->last == s)
    return;
  w->last = s;
  w->cb(s, w->ud);
}

static void health_maybe_free(grit_health_watch *w) {
  if (w->stopped && !w->stream && !w->timer) {
    grit_free(w->service);
    grit_free(w);
  }
}

static void health_start_stream(grit_health_watch *w);

static void health_timer_fire(uv_timer_t *t) {
  health_start_stream(t->data);
}

static void health_retry(grit_health_watch *w, const char *why) {
  if (w->seen_response) {
    w->backoff_ms = 0; /* grpc-core: a stream that worked restarts at once */
    w->seen_response = false;
    GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
               "health %s: Watch ended (%s), restarting", w->addr, why);
    uv_timer_start(w->timer, health_timer_fire, 0, 0);
    return;
  }
  w->backoff_ms = grit_lb_backoff_next_ms(w->backoff_ms, 1000, 120000, NULL);
  uint64_t wait = grit_lb_backoff_jitter_ms(w->backoff_ms, w->rng);
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
             "health %s: Watch failed (%s), retry in %llu ms", w->addr, why,
             (unsigned long long)wait);
  health_report(w, GRIT_HEALTH_NOT_SERVING);
  uv_timer_start(w->timer, health_timer_fire, wait, 0);
}

static void health_on_headers(grit_stream *s, const grit_metadata *md,
                              void *ud) {
  (void)s;
  (void)md;
  (void)ud;
}

static void health_on_message(grit_stream *s, grit_slice *msg, void *ud) {
  grit_health_watch *w = ud;
  uint32_t status;
  bool ok = grit_health_decode_response(msg->data, msg->len, &status);
  grit_slice_unref(msg);
  if (w->stopped)
    return;
  if (!ok) {
    grit_stream_cancel(s, GRIT_STATUS_INTERNAL, "bad HealthCheckResponse");
    return;
  }
  w->seen_response = true;
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO, "health %s: status %u%s", w->addr,
             status, status == 1 ? " (SERVING)" : "");
  /* SPEC HC-01: only SERVING counts as healthy; UNKNOWN, NOT_SERVING and
   * SERVICE_UNKNOWN take the subchannel out. */
  health_report(w, status == 1 ? GRIT_HEALTH_SERVING : GRIT_HEALTH_NOT_SERVING);
}

static void health_on_done(grit_stream *s, const grit_stream_result *r,
                           void *ud) {
  grit_health_watch *w = ud;
  (void)s;
  w->stream = NULL;
  if (w->stopped) {
    health_maybe_free(w);
    return;
  }
  /* The connection itself is going: the subchannel leaves READY next and
   * stops the watch; nothing to report or restart. */
  if (!grit_transport_is_ready(w->t))
    return;
  if (r->code == GRIT_STATUS_UNIMPLEMENTED) {
    /* SPEC HC-02: no health service there; healthy, said once. */
    GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_ERROR,
               "health %s: the server does not implement "
               "grpc.health.v1.Health; health checking disabled for this "
               "connection",
               w->addr);
    health_report(w, GRIT_HEALTH_SERVING);
    return;
  }
  health_retry(w, r->message[0] ? r->message : grit_status_code_name(r->code));
}

static const grit_stream_cbs health_stream_cbs = {
    .on_headers = health_on_headers,
    .on_message = health_on_message,
    .on_done = health_on_done,
};

static void health_start_stream(grit_health_watch *w) {
  if (w->stopped || w->stream)
    return;
  grit_stream_head h = {
      .path = HEALTH_PATH,
      .authority = w->authority,
      .timeout_ns = -1,
      .discard_headers = true,
  };
  grit_slice *req = grit_health_encode_request(w->service);
  grit_err rv = req ? grit_transport_start_stream(w->t, &h, &health_stream_cbs,
                                                  w, &w->stream)
                    : GRIT_ERR_NOMEM;
  if (rv == GRIT_OK) {
    rv = grit_stream_send(w->stream, req);
    if (rv == GRIT_OK)
      rv = grit_stream_close_send(w->stream);
  }
  grit_slice_unref(req);
  if (rv != GRIT_OK && !w->stream)
    health_retry(w, grit_strerror(rv));
  else if (rv != GRIT_OK)
    grit_stream_cancel(w->stream, GRIT_STATUS_INTERNAL, grit_strerror(rv));
}

grit_err grit_health_watch_start(const grit_subchannel_args *a,
                                 grit_transport *t, const char *service,
                                 const char *addr_text, grit_health_cb cb,
                                 void *user_data, grit_health_watch **out) {
  grit_health_watch *w = grit_calloc(1, sizeof(*w));
  uv_timer_t *timer = grit_calloc(1, sizeof(*timer));
  char *svc = grit_strdup(service);
  *out = NULL;
  if (!w || !timer || !svc) {
    grit_free(w);
    grit_free(timer);
    grit_free(svc);
    return GRIT_ERR_NOMEM;
  }
  w->loop = a->loop;
  w->rng = a->rng;
  w->t = t;
  w->authority =
      a->shared && a->shared->authority ? a->shared->authority : addr_text;
  w->service = svc;
  grit_str_copy(w->addr, sizeof(w->addr), addr_text);
  w->cb = cb;
  w->ud = user_data;
  w->last = GRIT_HEALTH_WAITING;
  w->timer = timer;
  uv_timer_init(a->loop, timer);
  timer->data = w;
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
             "health %s: watching service \"%s\"", w->addr, w->service);
  *out = w;
  health_start_stream(w);
  return GRIT_OK;
}

static void health_timer_closed(uv_handle_t *h) {
  grit_health_watch *w = h->data;
  grit_free(h);
  w->timer = NULL;
  health_maybe_free(w);
}

void grit_health_watch_stop(grit_health_watch *w) {
  if (!w || w->stopped)
    return;
  w->stopped = true;
  if (w->stream)
    grit_stream_cancel(w->stream, GRIT_STATUS_CANCELLED, "health check off");
  uv_close((uv_handle_t *)w->timer, health_timer_closed);
}
