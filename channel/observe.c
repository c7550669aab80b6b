/* The calls' side of observe/: channel/ reports call start, attempt start,
 * attempt end and call end here, and only here. The MX-03 attempt
 * observer, the OB-01 metrics and the OB-02 trace context all hang off
 * these four points, so the attempt lifecycle is reported from one place.
 * Loop only, except the public writer at the end. */
#include "channel/channel_int.h"

#include <string.h>

/* ---- trace context (SPEC OB-02; W3C Trace Context; gRFC A72) ---- */

static void random_bytes(grit_rng *r, uint8_t *out, size_t n) {
  while (n > 0) {
    uint64_t v = grit_rng_next(r);
    for (int i = 0; i < 8 && n > 0; i++, n--, v >>= 8)
      *out++ = (uint8_t)v;
  }
}

/* The caller's parent, from grit_call_opts.traceparent or the call's own
 * "traceparent" metadata (which is then dropped from the list: each
 * attempt sends its own). Runs on the user thread at creation. */
grit_err grit_call_trace_setup(grit_call *c, const char *opt_tp,
                               const char **why) {
  grit_channel *ch = c->ch;
  const char *tp = opt_tp;
  size_t tp_len = tp ? strlen(tp) : 0;
  size_t n = grit_metadata_count(c->metadata), at = n;
  for (size_t i = 0; i < n && (opt_tp || ch->o.trace_context); i++) {
    const char *key;
    const uint8_t *val;
    size_t len;
    grit_metadata_get(c->metadata, i, &key, &val, &len);
    if (strcmp(key, "traceparent") == 0) {
      at = i;
      if (!tp) {
        tp = (const char *)val;
        tp_len = len;
      }
    }
  }
  if (!tp && !ch->o.trace_context)
    return GRIT_OK; /* off: metadata passes through unchanged */
  call_trace_part *tr = c->tr = grit_calloc(1, sizeof(*c->tr));
  if (!tr)
    return GRIT_ERR_NOMEM;
  if (tp) {
    if (grit_traceparent_parse(tp, tp_len, &tr->tp) != GRIT_OK) {
      *why = "traceparent is not a W3C traceparent "
             "(00-<32 hex>-<16 hex>-<2 hex>)";
      return GRIT_ERR_INVALID_ARG;
    }
    tr->has_parent = true;
    grit_obs_hex(tr->tp.trace_id, 16, tr->trace_id);
    grit_obs_hex(tr->tp.span_id, 8, tr->parent_span_id);
  }
  if (at < n) { /* rebuild the list without the caller's traceparent */
    grit_metadata *md;
    if (grit_metadata_create(&md) != GRIT_OK)
      return GRIT_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
      const char *key;
      const uint8_t *val;
      size_t len;
      grit_metadata_get(c->metadata, i, &key, &val, &len);
      if (strcmp(key, "traceparent") != 0 &&
          grit_metadata_add_unchecked(md, key, strlen(key), val, len) !=
              GRIT_OK) {
        grit_metadata_destroy(md);
        return GRIT_ERR_NOMEM;
      }
    }
    grit_metadata_destroy(c->metadata);
    c->metadata = md;
  }
  return GRIT_OK;
}

/* ---- the four points ---- */

void grit_obs_call_start(grit_call *c) {
  c->start_us = grit_clock_now_us();
  c->obs = grit_obs_method_get(c->ch->obs, c->method);
  call_trace_part *tr = c->tr;
  if (tr && !tr->has_parent) {
    /* A fresh trace for this call; sampled, as nobody said otherwise. */
    do
      random_bytes(&c->ch->rng, tr->tp.trace_id, 16);
    while (tr->tp.trace_id[0] == 0 && tr->tp.trace_id[15] == 0);
    tr->tp.flags = 1;
    grit_obs_hex(tr->tp.trace_id, 16, tr->trace_id);
  }
}

void grit_obs_attempt_start(call_attempt *a) {
  grit_call *c = a->c;
  grit_obs_add(c->obs, GRIT_OBS_ATTEMPT_STARTED, 1);
  a->sent_msg_bytes = 0;
  a->rcvd_msg_bytes = 0;
  if (!c->tr) {
    a->span_id[0] = '\0';
    return;
  }
  grit_traceparent tp = c->tr->tp;
  do /* a new span per attempt, transparent ones included (A72) */
    random_bytes(&c->ch->rng, tp.span_id, 8);
  while (tp.span_id[0] == 0 && tp.span_id[7] == 0);
  grit_obs_hex(tp.span_id, 8, a->span_id);
  grit_traceparent_format(&tp, a->traceparent);
  GRIT_TRACE(GRIT_TRACE_CHANNEL, GRIT_LEVEL_INFO,
             "call %llu attempt %u: trace=%s span=%s%s",
             (unsigned long long)c->id, a->number, c->tr->trace_id, a->span_id,
             a->transparent_retry ? " (transparent retry)" : "");
}

void grit_attempt_observe(call_attempt *a, grit_status_code code,
                          const char *msg, grit_attempt_reason reason) {
  grit_call *c = a->c;
  grit_channel *ch = c->ch;
  uint64_t end_us = grit_clock_now_us();
  /* OB-01 (A66): per attempt, labelled by the status it ended with. */
  int st = (int)code;
  grit_obs_record(c->obs, GRIT_OBS_ATTEMPT_DURATION, st,
                  end_us > a->start_us ? end_us - a->start_us : 0);
  grit_obs_record(c->obs, GRIT_OBS_ATTEMPT_SENT_SIZE, st, a->sent_msg_bytes);
  grit_obs_record(c->obs, GRIT_OBS_ATTEMPT_RCVD_SIZE, st, a->rcvd_msg_bytes);
  if (!ch->o.observer)
    return;
  grit_attempt_record r = {
      .call_id = c->id,
      .method = c->method,
      .attempt = a->number,
      .kind = a->kind,
      .peer = a->peer,
      .start_us = a->start_us,
      .end_us = end_us,
      .code = code,
      .message = msg ? msg : "",
      .backoff_ms = a->backoff_ms,
      .pushback = a->pushback,
      .reason = reason,
      .skipped = a->skipped ? a->skipped : "",
      .request_encoding = grit_codec_name(c->codec),
      .response_encoding = a->response_encoding,
      .trace_id = c->tr ? c->tr->trace_id : "",
      .span_id = a->span_id,
      .parent_span_id = c->tr ? c->tr->parent_span_id : "",
      .previous_rpc_attempts = a->number - 1,
      .transparent_retry = a->transparent_retry,
  };
  ch->o.observer(&r, ch->o.observer_data);
}

void grit_obs_call_end(grit_call *c, grit_status_code code) {
  uint64_t now = grit_clock_now_us();
  grit_obs_method *m = c->obs;
  grit_obs_record(m, GRIT_OBS_CALL_DURATION, (int)code,
                  now > c->start_us ? now - c->start_us : 0);
  /* A96: attempts after the first are retries or hedges; a transparent
   * retry keeps its attempt's number. Each is recorded only when there
   * were some; the delay for calls that retried or hedged. */
  const grit_callsm_counts *n = &c->sm.counts;
  if (n->retries)
    grit_obs_record(m, GRIT_OBS_CALL_RETRIES, -1, n->retries);
  if (n->transparent)
    grit_obs_record(m, GRIT_OBS_CALL_TRANSPARENT_RETRIES, -1, n->transparent);
  if (n->hedges)
    grit_obs_record(m, GRIT_OBS_CALL_HEDGES, -1, n->hedges);
  if (n->retries || n->hedges)
    grit_obs_record(m, GRIT_OBS_CALL_RETRY_DELAY, -1, n->backoff_ms * 1000);
}

/* ---- buffer bytes per target, read at scrape time ---- */

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static grit_list live = {&live, &live};

/* RT-07's per-channel replay bytes, summed per target (at most 64 targets
 * per scrape). */
static grit_err buffers_collect(grit_buf *out, const char *target) {
  const char *names[64];
  double bytes[64];
  size_t n = 0;
  pthread_mutex_lock(&live_mu);
  grit_list *e;
  GRIT_LIST_FOREACH(e, &live) {
    grit_channel *ch = GRIT_CONTAINER_OF(e, grit_channel, obs_link);
    const char *name = grit_obs_target_name(ch->obs);
    if (target && strcmp(target, name) != 0)
      continue;
    size_t i = 0;
    while (i < n && strcmp(names[i], name) != 0)
      i++;
    if (i == n && n < 64) {
      names[n] = name; /* lives with the process */
      bytes[n++] = 0;
    }
    if (i < n)
      bytes[i] += (double)__atomic_load_n(&ch->replay_bytes, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&live_mu);
  return grit_obs_write_gauge(
      out, "grit_client_retry_buffer_bytes",
      "Bytes held in retry buffers (RT-07) of the target's live channels.",
      "grpc_target", n, names, bytes);
}

void grit_obs_channel_register(grit_channel *ch) {
  static bool collecting;
  if (!ch->obs)
    return;
  if (!__atomic_exchange_n(&collecting, true, __ATOMIC_ACQ_REL))
    grit_obs_add_collector(buffers_collect);
  pthread_mutex_lock(&live_mu);
  grit_list_insert_tail(&live, &ch->obs_link);
  pthread_mutex_unlock(&live_mu);
}

void grit_obs_channel_unregister(grit_channel *ch) {
  if (!ch->obs_link.next)
    return; /* never registered */
  pthread_mutex_lock(&live_mu);
  grit_list_remove(&ch->obs_link);
  pthread_mutex_unlock(&live_mu);
  ch->obs_link.next = NULL;
}

bool grit_obs_release_if_idle(void) {
  pthread_mutex_lock(&live_mu);
  bool idle = grit_list_empty(&live);
  if (idle)
    grit_obs_release();
  pthread_mutex_unlock(&live_mu);
  return idle;
}

/* ---- the public writer (any thread) ---- */

grit_err grit_metrics_write_prometheus(grit_channel *ch, grit_bytes *out) {
  if (!out)
    return GRIT_ERR_INVALID_ARG;
  out->data = NULL;
  out->len = 0;
  if (ch && !ch->obs)
    return GRIT_OK; /* its series could not be made: nothing recorded */
  grit_buf b;
  grit_buf_init(&b);
  grit_err rv =
      grit_obs_write_prometheus(ch ? grit_obs_target_name(ch->obs) : NULL, &b);
  if (rv != GRIT_OK) {
    grit_buf_free(&b);
    return rv;
  }
  out->data = b.data;
  out->len = b.len;
  return GRIT_OK;
}
