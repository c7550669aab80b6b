/* ORCA load reports (SPEC LP-01; gRFC A51): the hand-written decoder of
 * xds.data.orca.v3.OrcaLoadReport (the endpoint-load-metrics-bin trailer
 * and the messages of the out-of-band stream), the OrcaLoadReportRequest
 * encoder, and the out-of-band watch: one
 * xds.service.orca.v3.OpenRcaService/StreamCoreMetrics stream per READY
 * subchannel of a policy that asks for it (weighted_round_robin with
 * enableOobLoadReport), restarted as the health Watch is (at once after a
 * stream that delivered a report, else with the CB-01 backoff). */
#include "lb/lb_int.h"

#include <string.h>

#define ORCA_PATH "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics"

/* ---- the wire format ---- */

static bool orca_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
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

static double orca_double(const uint8_t *p) {
  uint64_t bits = 0;
  for (int k = 7; k >= 0; k--)
    bits = bits << 8 | p[k];
  double d;
  memcpy(&d, &bits, sizeof(d));
  return d;
}

/* Skip the value of a field of wire type |wt| at *i. */
static bool orca_skip(const uint8_t *p, size_t n, size_t *i, unsigned wt) {
  uint64_t v;
  switch (wt) {
  case 0:
    return orca_varint(p, n, i, &v);
  case 1:
    if (n - *i < 8)
      return false;
    *i += 8;
    return true;
  case 2:
    if (!orca_varint(p, n, i, &v) || v > n - *i)
      return false;
    *i += (size_t)v;
    return true;
  case 5:
    if (n - *i < 4)
      return false;
    *i += 4;
    return true;
  default:
    return false;
  }
}

/* A map<string, double> entry: key = 1 (string), value = 2 (double); both
 * may be absent (proto3 defaults). */
static bool orca_entry(const uint8_t *p, size_t n, const uint8_t **key,
                       size_t *key_len, double *value) {
  size_t i = 0;
  *key = p;
  *key_len = 0;
  *value = 0;
  while (i < n) {
    uint64_t tag, len;
    if (!orca_varint(p, n, &i, &tag) || (tag >> 3) == 0)
      return false;
    unsigned field = (unsigned)(tag >> 3), wt = (unsigned)(tag & 7);
    if (field == 1) {
      if (wt != 2 || !orca_varint(p, n, &i, &len) || len > n - i)
        return false;
      *key = p + i;
      *key_len = (size_t)len;
      i += (size_t)len;
    } else if (field == 2) {
      if (wt != 1 || n - i < 8)
        return false;
      *value = orca_double(p + i);
      i += 8;
    } else if (!orca_skip(p, n, &i, wt)) {
      return false;
    }
  }
  return true;
}

/* One pass over the message. |r->metrics| NULL: count the map entries and
 * name bytes into |counts| and |name_bytes|; else fill them in. */
static bool orca_pass(const uint8_t *p, size_t n, grit_orca_report *r,
                      bool maps, size_t counts[3], size_t *name_bytes) {
  size_t i = 0, filled[3] = {0, 0, 0}, name_at = 0;
  while (i < n) {
    uint64_t tag, v;
    if (!orca_varint(p, n, &i, &tag) || (tag >> 3) == 0)
      return false;
    uint64_t field = tag >> 3;
    unsigned wt = (unsigned)(tag & 7);
    double *dst = NULL;
    switch (field) {
    case 1:
      dst = &r->cpu_utilization;
      break;
    case 2:
      dst = &r->mem_utilization;
      break;
    case 6:
      dst = &r->rps_fractional;
      break;
    case 7:
      dst = &r->eps;
      break;
    case 9:
      dst = &r->application_utilization;
      break;
    case 3:
      if (wt != 0 || !orca_varint(p, n, &i, &v))
        return false;
      r->rps = v;
      continue;
    case 4:
    case 5:
    case 8: {
      if (wt != 2 || !orca_varint(p, n, &i, &v) || v > n - i)
        return false;
      const uint8_t *key;
      size_t key_len;
      double value;
      if (!orca_entry(p + i, (size_t)v, &key, &key_len, &value))
        return false;
      i += (size_t)v;
      if (!maps)
        continue;
      size_t which = field == 4 ? 0 : field == 5 ? 1 : 2;
      if (!r->metrics) {
        counts[which]++;
        *name_bytes += key_len + 1;
        continue;
      }
      size_t at = (which > 0 ? counts[0] : 0) + (which > 1 ? counts[1] : 0) +
                  filled[which]++;
      memcpy(r->names + name_at, key, key_len);
      r->names[name_at + key_len] = '\0';
      r->metrics[at].name = r->names + name_at;
      r->metrics[at].value = value;
      name_at += key_len + 1;
      continue;
    }
    default:
      if (!orca_skip(p, n, &i, wt))
        return false;
      continue;
    }
    if (wt != 1 || n - i < 8)
      return false;
    *dst = orca_double(p + i);
    i += 8;
  }
  return true;
}

grit_err grit_orca_decode(const uint8_t *p, size_t n, bool maps,
                          grit_orca_report *out) {
  memset(out, 0, sizeof(*out));
  size_t counts[3] = {0, 0, 0}, name_bytes = 0;
  if (!orca_pass(p, n, out, maps, counts, &name_bytes)) {
    memset(out, 0, sizeof(*out));
    return GRIT_ERR_PARSE;
  }
  size_t total = counts[0] + counts[1] + counts[2];
  if (!maps || total == 0)
    return GRIT_OK;
  grit_orca_report r = {0};
  r.metrics = grit_calloc(total, sizeof(*r.metrics));
  r.names = grit_malloc(name_bytes);
  if (!r.metrics || !r.names) {
    grit_free(r.metrics);
    grit_free(r.names);
    memset(out, 0, sizeof(*out));
    return GRIT_ERR_NOMEM;
  }
  orca_pass(p, n, &r, true, counts, &name_bytes); /* cannot fail now */
  r.n_request_cost = counts[0];
  r.n_utilization = counts[1];
  r.n_named_metrics = counts[2];
  *out = r;
  return GRIT_OK;
}

void grit_orca_report_free(grit_orca_report *r) {
  if (!r)
    return;
  grit_free(r->metrics);
  grit_free(r->names);
  r->metrics = NULL;
  r->names = NULL;
  r->n_request_cost = r->n_utilization = r->n_named_metrics = 0;
}

void grit_orca_to_public(const grit_orca_report *r, const char *peer, bool oob,
                         grit_load_report *out) {
  *out = (grit_load_report){
      .peer = peer,
      .out_of_band = oob,
      .cpu_utilization = r->cpu_utilization,
      .mem_utilization = r->mem_utilization,
      .application_utilization = r->application_utilization,
      .rps_fractional = r->rps_fractional,
      .eps = r->eps,
      .rps = r->rps,
      .request_cost = r->metrics,
      .n_request_cost = r->n_request_cost,
      .utilization = r->metrics ? r->metrics + r->n_request_cost : NULL,
      .n_utilization = r->n_utilization,
      .named_metrics =
          r->metrics ? r->metrics + r->n_request_cost + r->n_utilization : NULL,
      .n_named_metrics = r->n_named_metrics,
  };
}

static size_t orca_put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    p[n++] = b | (v ? 0x80 : 0);
  } while (v);
  return n;
}

grit_slice *grit_orca_encode_request(uint64_t interval_ms) {
  /* google.protobuf.Duration{seconds = 1, nanos = 2} inside field 1. */
  uint8_t dur[24], body[32];
  size_t d = 0, b = 0;
  uint64_t secs = interval_ms / 1000;
  uint64_t nanos = interval_ms % 1000 * 1000000;
  if (secs) {
    dur[d++] = 0x08;
    d += orca_put_varint(dur + d, secs);
  }
  if (nanos) {
    dur[d++] = 0x10;
    d += orca_put_varint(dur + d, nanos);
  }
  body[b++] = 0x0a; /* report_interval, length-delimited */
  b += orca_put_varint(body + b, d);
  memcpy(body + b, dur, d);
  b += d;
  grit_slice *s = grit_slice_new(5 + b);
  if (!s)
    return NULL;
  s->data[0] = 0;
  s->data[1] = (uint8_t)(b >> 24);
  s->data[2] = (uint8_t)(b >> 16);
  s->data[3] = (uint8_t)(b >> 8);
  s->data[4] = (uint8_t)b;
  memcpy(s->data + 5, body, b);
  return s;
}

/* ---- the out-of-band watch ---- */

struct grit_orca_watch {
  grit_rng *rng;
  grit_transport *t;
  const char *authority; /* the channel's, borrowed */
  const grit_lb_shared *shared;
  uint64_t interval_ms;
  char addr[120];
  grit_orca_cb cb;
  void *ud;
  grit_stream *stream;
  uv_timer_t *timer; /* restart backoff; freed in its close callback */
  uint64_t backoff_ms;
  bool seen_report;
  bool stopped;
};

static void orca_maybe_free(grit_orca_watch *w) {
  if (w->stopped && !w->stream && !w->timer)
    grit_free(w);
}

static void orca_start_stream(grit_orca_watch *w);

static void orca_timer_fire(uv_timer_t *t) {
  orca_start_stream(t->data);
}

static void orca_retry(grit_orca_watch *w, const char *why) {
  if (w->seen_report) {
    w->backoff_ms = 0; /* A51, as the health Watch: a working stream */
    w->seen_report = false;
    uv_timer_start(w->timer, orca_timer_fire, 0, 0);
    return;
  }
  w->backoff_ms = grit_lb_backoff_next_ms(w->backoff_ms, 1000, 120000, NULL);
  uint64_t wait = grit_lb_backoff_jitter_ms(w->backoff_ms, w->rng);
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
             "orca %s: StreamCoreMetrics ended (%s), retry in %llu ms", w->addr,
             why, (unsigned long long)wait);
  uv_timer_start(w->timer, orca_timer_fire, wait, 0);
}

static void orca_on_headers(grit_stream *s, const grit_metadata *md, void *ud) {
  (void)s;
  (void)md;
  (void)ud;
}

static void orca_on_message(grit_stream *s, grit_slice *msg, void *ud) {
  grit_orca_watch *w = ud;
  if (w->stopped) {
    grit_slice_unref(msg);
    return;
  }
  const grit_lb_shared *sh = w->shared;
  bool app = sh && sh->load_report_cb;
  grit_orca_report r;
  grit_err rv = grit_orca_decode(msg->data, msg->len, app, &r);
  grit_slice_unref(msg);
  if (rv == GRIT_ERR_NOMEM)
    return; /* this report is lost; the next one may fit */
  if (rv != GRIT_OK) {
    grit_stream_cancel(s, GRIT_STATUS_INTERNAL, "bad OrcaLoadReport");
    return;
  }
  w->seen_report = true;
  if (app) {
    grit_load_report pub;
    grit_orca_to_public(&r, w->addr, true, &pub);
    sh->load_report_cb(&pub, sh->load_report_data);
  }
  w->cb(&r, w->ud);
  grit_orca_report_free(&r);
}

static void orca_on_done(grit_stream *s, const grit_stream_result *r,
                         void *ud) {
  grit_orca_watch *w = ud;
  (void)s;
  w->stream = NULL;
  if (w->stopped) {
    orca_maybe_free(w);
    return;
  }
  if (!grit_transport_is_ready(w->t))
    return; /* the connection is going; the policy stops the watch */
  if (r->code == GRIT_STATUS_UNIMPLEMENTED) {
    /* A51: a backend without the service; said once, not retried on this
     * connection. */
    GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_ERROR,
               "orca %s: the server does not implement "
               "xds.service.orca.v3.OpenRcaService; no out-of-band load "
               "reports on this connection",
               w->addr);
    return;
  }
  orca_retry(w, r->message[0] ? r->message : grit_status_code_name(r->code));
}

static const grit_stream_cbs orca_stream_cbs = {
    .on_headers = orca_on_headers,
    .on_message = orca_on_message,
    .on_done = orca_on_done,
};

static void orca_start_stream(grit_orca_watch *w) {
  if (w->stopped || w->stream)
    return;
  grit_stream_head h = {
      .path = ORCA_PATH,
      .authority = w->authority,
      .timeout_ns = -1,
      .discard_headers = true,
  };
  grit_slice *req = grit_orca_encode_request(w->interval_ms);
  grit_err rv = req ? grit_transport_start_stream(w->t, &h, &orca_stream_cbs, w,
                                                  &w->stream)
                    : GRIT_ERR_NOMEM;
  if (rv == GRIT_OK) {
    rv = grit_stream_send(w->stream, req);
    if (rv == GRIT_OK)
      rv = grit_stream_close_send(w->stream);
  }
  grit_slice_unref(req);
  if (rv != GRIT_OK && !w->stream)
    orca_retry(w, grit_strerror(rv));
  else if (rv != GRIT_OK)
    grit_stream_cancel(w->stream, GRIT_STATUS_INTERNAL, grit_strerror(rv));
}

grit_err grit_orca_watch_start(const grit_subchannel_args *a, grit_transport *t,
                               uint64_t interval_ms, const char *addr_text,
                               grit_orca_cb cb, void *user_data,
                               grit_orca_watch **out) {
  grit_orca_watch *w = grit_calloc(1, sizeof(*w));
  uv_timer_t *timer = grit_calloc(1, sizeof(*timer));
  *out = NULL;
  if (!w || !timer) {
    grit_free(w);
    grit_free(timer);
    return GRIT_ERR_NOMEM;
  }
  w->rng = a->rng;
  w->t = t;
  w->shared = a->shared;
  w->authority =
      a->shared && a->shared->authority ? a->shared->authority : addr_text;
  w->interval_ms = interval_ms;
  grit_str_copy(w->addr, sizeof(w->addr), addr_text);
  w->cb = cb;
  w->ud = user_data;
  w->timer = timer;
  uv_timer_init(a->loop, timer);
  timer->data = w;
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
             "orca %s: out-of-band reports every %llu ms", w->addr,
             (unsigned long long)interval_ms);
  *out = w;
  orca_start_stream(w);
  return GRIT_OK;
}

static void orca_timer_closed(uv_handle_t *h) {
  grit_orca_watch *w = h->data;
  grit_free(h);
  w->timer = NULL;
  orca_maybe_free(w);
}

void grit_orca_watch_stop(grit_orca_watch *w) {
  if (!w || w->stopped)
    return;
  w->stopped = true;
  if (w->stream)
    grit_stream_cancel(w->stream, GRIT_STATUS_CANCELLED, "load reports off");
  uv_close((uv_handle_t *)w->timer, orca_timer_closed);
}
