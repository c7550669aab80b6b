/* The calls' side of observe/: channel/ reports call start, attempt start,
 * attempt end and call end here, and only here. The MX-03 attempt
 * observer, the OB-01 metrics and the OB-02 trace context all hang off
 * these four points, so the attempt lifecycle is reported from one place.
 * Loop only, except the public writer at the end. */
#include "channel/channel_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- trace context (SPEC OB-02; W3C Trace Context; gRFC A72) ---- */

/* |n| random bytes: 8 at a time, as the generator makes them. */
static void random_bytes(grit_rng *r, uint8_t *out, size_t n) {
  for (; n >= 8; n -= 8, out += 8) {
    uint64_t v = grit_rng_next(r);
    memcpy(out, &v, 8);
  }
  if (n > 0) {
    uint64_t v = grit_rng_next(r);
    memcpy(out, &v, n);
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
  /* An earlier call's, kept by the channel (call.c), saves an allocation. */
  call_trace_part *tr =
      __atomic_exchange_n(&ch->spare_tr, NULL, __ATOMIC_ACQUIRE);
  if (tr) {
    memset(tr, 0, sizeof(*tr));
  } else if ((tr = grit_calloc(1, sizeof(*tr))) == NULL) {
    return GRIT_ERR_NOMEM;
  }
  c->tr = tr;
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

/* ---- labels (SPEC OP-01, gRFC A66) ---- */

/* A66's grpc.target is the canonical target URI: a bare "host:port" is
 * "dns:///host:port", "dns:host" is "dns:///host"; the other schemes are
 * kept as written. */
grit_obs_target *grit_obs_channel_series(const char *target) {
  static const char *const schemes[] = {
      "dns://", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "xds:"};
  for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
    if (strncmp(target, schemes[i], strlen(schemes[i])) == 0)
      return grit_obs_target_get(target);
  const char *rest = strncmp(target, "dns:", 4) == 0 ? target + 4 : target;
  grit_buf b;
  grit_buf_init(&b);
  grit_obs_target *t = NULL;
  if (grit_buf_appendf(&b, "dns:///%s", rest) == GRIT_OK)
    t = grit_obs_target_get((const char *)b.data);
  grit_buf_free(&b);
  return t;
}

/* The method's series: its own when it has one already, or when the
 * method is known (registered by the application, or named by the service
 * config in force); else "other", A66's rule for generic methods, so a
 * caller of arbitrary names cannot grow the registry. The label has no
 * leading '/', as grpc-go, Java and C++ write it. */
static grit_obs_method *call_series(grit_call *c) {
  grit_channel *ch = c->ch;
  const char *name = c->method[0] == '/' ? c->method + 1 : c->method;
  grit_obs_method *m = grit_obs_method_find(ch->obs, name);
  if (m || !ch->obs)
    return m;
  bool known = grit_obs_method_registered(name) ||
               grit_svccfg_names_method(ch->config, c->method);
  return grit_obs_method_get(ch->obs, known ? name : GRIT_OBS_OTHER);
}

/* ---- the four points ---- */

/* The wall clock (Unix ns) at the monotonic |mono_us|: the monotonic time
 * plus the clocks' offset, read again at most every SPAN_WALL_REFRESH_US
 * by whichever loop thread comes first, so a sampled call's start reads no
 * clock of its own; a step of the wall clock shows in spans within that
 * time. Relaxed atomics: two threads refreshing at once store two readings
 * of the same offset; |wall_at_us| is stored after the offset (release)
 * and loaded before it (acquire), so a set time has its offset. */
#define SPAN_WALL_REFRESH_US 100000
static uint64_t wall_off_ns, wall_at_us;

static uint64_t span_wall_ns(uint64_t mono_us) {
  uint64_t at = __atomic_load_n(&wall_at_us, __ATOMIC_ACQUIRE);
  if (at != 0 && mono_us - at < SPAN_WALL_REFRESH_US)
    return mono_us * 1000u + __atomic_load_n(&wall_off_ns, __ATOMIC_RELAXED);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  /* Modulo 2^64: adding it back gives |now| whatever the sign. */
  __atomic_store_n(&wall_off_ns, now - mono_us * 1000u, __ATOMIC_RELAXED);
  __atomic_store_n(&wall_at_us, mono_us, __ATOMIC_RELEASE);
  return now;
}

/* OP-02: the call's own span: its id, its wall-clock start, and its
 * method's length and whether it is ASCII (for every span of the call).
 * Out of line: a call without spans pays nothing for its locals. */
__attribute__((noinline)) static void span_start(grit_call *c,
                                                 call_trace_part *tr) {
  do
    random_bytes(&c->ch->rng, tr->span_id, 8);
  while (tr->span_id[0] == 0 && tr->span_id[7] == 0);
  tr->real0_ns = span_wall_ns(c->start_us);
  /* The method's own series knows its name (measured once); else measured
   * here, once per call. */
  const grit_obs_method_text *t = grit_obs_method_text_of(c->obs);
  size_t n;
  bool ascii;
  if (t && t->own) {
    n = t->len;
    ascii = t->ascii;
  } else {
    const char *m = c->method[0] == '/' ? c->method + 1 : c->method;
    n = strnlen(m, GRIT_OTLP_METHOD_MAX);
    ascii = grit_otlp_ascii(m, n);
  }
  tr->name_len =
      (uint16_t)(n < GRIT_OTLP_METHOD_MAX ? n : GRIT_OTLP_METHOD_MAX);
  tr->name_ascii = ascii;
}

void grit_obs_call_start(grit_call *c) {
  c->start_us = grit_clock_now_us();
  __atomic_store_n(&c->ch->cz_last_call_us, c->start_us, __ATOMIC_RELAXED);
  c->obs = call_series(c);
  call_trace_part *tr = c->tr;
  if (tr && !tr->has_parent) {
    /* A fresh trace for this call; sampled, as nobody said otherwise. */
    do
      random_bytes(&c->ch->rng, tr->tp.trace_id, 16);
    while (tr->tp.trace_id[0] == 0 && tr->tp.trace_id[15] == 0);
    tr->tp.flags = 1;
    grit_obs_hex(tr->tp.trace_id, 16, tr->trace_id);
  }
  /* OP-02: a sampled call has a span of its own, the attempts' parent. */
  if (tr) {
    tr->span = c->ch->spans && (tr->tp.flags & 1);
    if (tr->span)
      span_start(c, tr);
  }
}

/* ---- spans (SPEC OP-02, gRFC A72) ---- */

/* Unix ns of the monotonic microsecond time |mono_us| of call |c|. */
static uint64_t span_unix_ns(const grit_call *c, uint64_t mono_us) {
  uint64_t r = c->tr->real0_ns;
  return mono_us >= c->start_us ? r + (mono_us - c->start_us) * 1000u
                                : r - (c->start_us - mono_us) * 1000u;
}

/* |src| into |dst| (|cap| bytes), cut to fit, NUL-terminated. */
static void span_copy(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* "Sent." or "Attempt." and the method without its '/', into |out|. */
static void span_name(const grit_call *c, const char *prefix, char *out,
                      size_t cap) {
  size_t k = strlen(prefix); /* "Attempt." fits in any |cap| used here */
  memcpy(out, prefix, k);
  span_copy(out + k, cap - k, c->method[0] == '/' ? c->method + 1 : c->method);
}

/* The span for grit_channel_opts.span_cb: a grit_span with its name. Out
 * of line: its name buffer and struct stay off span_emit's frame. */
__attribute__((noinline)) static void
span_callback(grit_call *c, const call_attempt *a, uint64_t start_ns,
              uint64_t end_ns, grit_status_code code, const char *msg) {
  grit_channel *ch = c->ch;
  const call_trace_part *tr = c->tr;
  char name[160];
  span_name(c, a ? "Attempt." : "Sent.", name, sizeof(name));
  grit_span sp = {
      .name = name,
      .attempt = a != NULL,
      .flags = tr->tp.flags,
      .start_unix_ns = start_ns,
      .end_unix_ns = end_ns,
      .code = code,
      .message = msg,
      .call_id = c->id,
      .previous_rpc_attempts = a ? a->number - 1 : 0,
      .transparent_retry = a ? a->transparent_retry : false,
      .peer = a ? a->peer : "",
      .attempts = a ? 0 : c->info.attempts,
  };
  memcpy(sp.trace_id, tr->tp.trace_id, 16);
  if (a) {
    memcpy(sp.span_id, a->span_raw, 8);
    memcpy(sp.parent_span_id, tr->span_id, 8);
  } else {
    memcpy(sp.span_id, tr->span_id, 8);
    if (tr->has_parent)
      memcpy(sp.parent_span_id, tr->tp.span_id, 8);
  }
  ch->o.span_cb(&sp, ch->o.span_cb_data);
}

/* The span of call |c| (|a| NULL) or of its attempt |a|, ended at the
 * monotonic |end_us| with |code| and |msg|. For the callback, a grit_span
 * with its name; for OTLP, a record filled in place in the exporter's
 * ring: fixed-size fields and three short copies, no name building, no
 * clock read, no allocation (the encoder names it, off the I/O thread). */
static void span_emit(grit_call *c, const call_attempt *a, uint64_t end_us,
                      grit_status_code code, const char *msg) {
  grit_channel *ch = c->ch;
  const call_trace_part *tr = c->tr;
  uint64_t start_ns = span_unix_ns(c, a ? a->start_us : c->start_us);
  uint64_t end_ns = span_unix_ns(c, end_us);
  if (ch->o.span_cb)
    span_callback(c, a, start_ns, end_ns, code, msg);
  grit_otlp_span *o = ch->otlp ? grit_otlp_reserve(ch->otlp) : NULL;
  if (!o)
    return; /* no exporter, or its queue is full (dropped and counted) */
  memcpy(o->trace_id, tr->tp.trace_id, 16);
  o->start_ns = start_ns;
  o->end_ns = end_ns;
  o->code = (int32_t)code;
  o->attempt = a != NULL;
  o->method_ascii = tr->name_ascii;
  o->flags = tr->tp.flags;
  const char *m = c->method[0] == '/' ? c->method + 1 : c->method;
  if (a) {
    memcpy(o->span_id, a->span_raw, 8);
    memcpy(o->parent_span_id, tr->span_id, 8);
    o->has_parent = true;
    o->previous_rpc_attempts = a->number - 1;
    o->transparent_retry = a->transparent_retry;
    o->attempts = 0;
    grit_otlp_set_texts(o, m, tr->name_len, a->peer, a->peer_len, msg);
  } else {
    memcpy(o->span_id, tr->span_id, 8);
    o->has_parent = tr->has_parent;
    if (tr->has_parent)
      memcpy(o->parent_span_id, tr->tp.span_id, 8);
    o->previous_rpc_attempts = 0;
    o->transparent_retry = false;
    o->attempts = c->info.attempts;
    grit_otlp_set_texts(o, m, tr->name_len, "", 0, msg);
  }
  grit_otlp_commit(ch->otlp, o);
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
  memcpy(a->span_raw, tp.span_id, 8); /* the header is made from it */
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
  if (c->tr && c->tr->span && a->span_id[0])
    span_emit(c, a, end_us, code, msg ? msg : "");
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
      .picked_by = a->picked ? a->picked : "",
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

void grit_obs_call_end(grit_call *c, grit_status_code code, const char *msg) {
  uint64_t now = grit_clock_now_us();
  grit_obs_method *m = c->obs;
  if (c->tr && c->tr->span)
    span_emit(c, NULL, now, code, msg ? msg : "");
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
    if (!ch->obs)
      continue;
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
  static uint64_t next_id;
  ch->cz_id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
  if (!__atomic_exchange_n(&collecting, true, __ATOMIC_ACQ_REL))
    grit_obs_add_collector(buffers_collect);
  pthread_mutex_lock(&live_mu);
  grit_list_insert_tail(&live, &ch->obs_link);
  pthread_mutex_unlock(&live_mu);
}

void grit_obs_channel_unregister(grit_channel *ch) {
  pthread_mutex_lock(&live_mu);
  if (ch->obs_link.next) { /* else never registered, or already out */
    grit_list_remove(&ch->obs_link);
    ch->obs_link.next = NULL;
  }
  pthread_mutex_unlock(&live_mu);
}

/* OP-03: a reference and a runtime count on every live channel, so each
 * stays readable, and its runtime running, while a reader waits on it. A
 * channel in the list has not been destroyed by its user: its runtime is
 * alive (the default runtime's shutdown sees the count and says BUSY). */
grit_err grit_obs_channels_hold(grit_channel ***out, size_t *n) {
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&live_mu);
  size_t cnt = 0;
  grit_list *e;
  GRIT_LIST_FOREACH(e, &live) {
    cnt++;
  }
  grit_channel **v = cnt ? grit_calloc(cnt, sizeof(*v)) : NULL;
  if (cnt && !v) {
    pthread_mutex_unlock(&live_mu);
    return GRIT_ERR_NOMEM;
  }
  size_t k = 0;
  GRIT_LIST_FOREACH(e, &live) {
    grit_channel *ch = GRIT_CONTAINER_OF(e, grit_channel, obs_link);
    grit_channel_ref(ch);
    grit_rt_channel_opened(ch->rt);
    v[k++] = ch;
  }
  pthread_mutex_unlock(&live_mu);
  *out = v;
  *n = k;
  return GRIT_OK;
}

void grit_obs_channels_release(grit_channel **v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    grit_runtime *rt = v[i]->rt;
    grit_channel_unref(v[i]);
    grit_rt_channel_closed(rt);
  }
  grit_free(v);
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

/* Lock order as grit_obs_release_if_idle: live channels, then registry. */
void grit_obs_fork_lock(void) {
  pthread_mutex_lock(&live_mu);
  grit_obs_registry_fork_lock();
}

void grit_obs_fork_unlock(void) {
  grit_obs_registry_fork_unlock();
  pthread_mutex_unlock(&live_mu);
}
