/*
 * Metrics and trace context against a real gRPC server (SPEC OB-01,
 * OB-02): test/peers/observe_server.py (grpcio behind a TCP front that
 * refuses the first connection's first stream with GOAWAY, so that call
 * is retried transparently). One scripted run makes a transparent retry,
 * a call with two retries and a hedged call, then checks the Prometheus
 * text with promtool and its counters and histogram counts against the
 * run (grit's throttle gauge too), and checks that the server saw one trace id
 * per call and a new span id on every attempt. Exits 77 (skipped) when
 * /usr/bin/python3 lacks grpc.
 */
#include <dirent.h>
#include <grit/grit.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pypeer.h"
#include "test/harness.h"

#define CALL_MS 10000

static pypeer g_peer = {.pid = -1, .stdin_fd = -1};
static char g_target[64];

/* ---- the observer: every record of the run ---- */

typedef struct rec {
  uint64_t call_id;
  uint32_t attempt;
  grit_attempt_kind kind;
  grit_status_code code;
  char trace_id[33], span_id[17], parent[17];
  uint32_t prev;
  bool transparent;
} rec;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static rec g_recs[64];
static size_t g_nrecs;

static void obs_cb(const grit_attempt_record *r, void *ud) {
  pthread_mutex_lock(&g_mu);
  if (g_nrecs < 64) {
    rec *o = &g_recs[g_nrecs++];
    o->call_id = r->call_id;
    o->attempt = r->attempt;
    o->kind = r->kind;
    o->code = r->code;
    snprintf(o->trace_id, sizeof(o->trace_id), "%s", r->trace_id);
    snprintf(o->span_id, sizeof(o->span_id), "%s", r->span_id);
    snprintf(o->parent, sizeof(o->parent), "%s", r->parent_span_id);
    o->prev = r->previous_rpc_attempts;
    o->transparent = r->transparent_retry;
  }
  pthread_mutex_unlock(&g_mu);
}

/* Records of call |id| into |out|; how many. */
static size_t recs_of(uint64_t id, rec *out, size_t max) {
  size_t n = 0;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_nrecs; i++)
    if (g_recs[i].call_id == id && n < max)
      out[n++] = g_recs[i];
  pthread_mutex_unlock(&g_mu);
  return n;
}

/* Retry for obs.Svc/Retry (UNAVAILABLE, 3 attempts, 10 ms backoff),
 * hedging for obs.Svc/Hedge (2 attempts, 50 ms apart); trace context on
 * when |trace|. */
static grit_channel *chan(bool trace) {
  static const char cfg[] =
      "{\"methodConfig\":["
      "{\"name\":[{\"service\":\"obs.Svc\",\"method\":\"Retry\"}],"
      "\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":\"0.01s\","
      "\"maxBackoff\":\"0.01s\",\"backoffMultiplier\":1,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}},"
      "{\"name\":[{\"service\":\"obs.Svc\",\"method\":\"Hedge\"}],"
      "\"hedgingPolicy\":{\"maxAttempts\":2,\"hedgingDelay\":\"0.05s\"}}],"
      "\"retryThrottling\":{\"maxTokens\":10,\"tokenRatio\":0.1}}";
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, cfg);
  if (trace)
    grit_channel_args_set_int(a, GRIT_ARG_TRACE_CONTEXT, 1);
  grit_channel_args_set_observer(a, obs_cb, NULL);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, g_target, a, &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel: %s\n", d.reason);
  grit_channel_args_destroy(a);
  return ch;
}

/* A unary call of obs.Svc/|m| with call key |key| and body |body|;
 * |tp| the caller's traceparent, |ts| a tracestate (NULL: none). */
static grit_err call(grit_channel *ch, const char *m, const char *key,
                     const char *body, const char *tp, const char *ts,
                     grit_status *st, grit_call_info *info) {
  grit_metadata *md = NULL;
  grit_metadata_create(&md);
  grit_metadata_add(md, "x-call-key", key, strlen(key));
  if (ts)
    grit_metadata_add(md, "tracestate", ts, strlen(ts));
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = CALL_MS,
                      .metadata = md,
                      .traceparent = tp};
  char path[64];
  snprintf(path, sizeof(path), "/obs.Svc/%s", m);
  grit_bytes resp = {0};
  grit_err rv =
      grit_unary_call(ch, path, body, strlen(body), &o, &resp, st, info);
  grit_bytes_free(&resp);
  grit_metadata_destroy(md);
  return rv;
}

/* What the server logged for |key|: one line per attempt. */
static size_t server_log(grit_channel *ch, const char *key, char lines[][256],
                         size_t max) {
  grit_bytes resp = {0};
  grit_status st = {0};
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  size_t n = 0;
  if (grit_unary_call(ch, "/obs.Svc/Log", key, strlen(key), &o, &resp, &st,
                      NULL) == GRIT_OK &&
      st.code == GRIT_STATUS_OK) {
    const char *p = (const char *)resp.data, *end = p + resp.len;
    while (p < end && n < max) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      if (!nl)
        break;
      snprintf(lines[n++], 256, "%.*s", (int)(nl - p), p);
      p = nl + 1;
    }
  }
  grit_bytes_free(&resp);
  grit_status_free(&st);
  return n;
}

/* The traceparent a log line shows ("" if none), and its header count. */
static void line_tp(const char *line, char *tp, size_t cap, int *count) {
  const char *p = strstr(line, " tp=");
  const char *n = strstr(line, " n=");
  *count = n ? atoi(n + 3) : -1;
  size_t len = p ? strcspn(p + 4, " ") : 0;
  snprintf(tp, cap, "%.*s", (int)len, p ? p + 4 : "");
}

/* ---- the Prometheus text ---- */

/* The value of the sample "NAME{LABELS}" in |text|, or -1. */
static double sample(const char *text, const char *name, const char *labels) {
  char key[512];
  snprintf(key, sizeof(key), "\n%s{%s} ", name, labels);
  const char *p = strstr(text, key);
  return p ? strtod(p + strlen(key), NULL) : -1;
}

/* Labels for method |m| of obs.Svc, with |status| unless NULL. */
static const char *lbl(const char *m, const char *status) {
  static char buf[4][256];
  static int k;
  char *b = buf[k++ & 3];
  if (status)
    snprintf(b, 256,
             "grpc_method=\"obs.Svc/%s\",grpc_status=\"%s\",grpc_target=\"%s\"",
             m, status, g_target);
  else
    snprintf(b, 256, "grpc_method=\"obs.Svc/%s\",grpc_target=\"%s\"", m,
             g_target);
  return b;
}

/* promtool check metrics on |text|: its exit status (127: not found). */
static int promtool(const char *text, size_t len) {
  char path[] = "/tmp/grit-observe-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return -1;
  bool ok = write(fd, text, len) == (ssize_t)len;
  close(fd);
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
  int st = ok ? system(cmd) : -1;
  unlink(path);
  return st < 0 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- the scripted run ---- */

static void test_scripted_run(void) {
  grit_channel *ch = chan(true);
  ASSERT_NOT_NULL(ch);
  grit_status st = {0};
  grit_call_info info[4] = {GRIT_CALL_INFO_INIT, GRIT_CALL_INFO_INIT,
                            GRIT_CALL_INFO_INIT, GRIT_CALL_INFO_INIT};
  /* The config names Retry and Hedge; Plain is known by registration
   * (SPEC OP-01: other methods would be "other"). */
  ASSERT_OK(grit_metrics_register_method("/obs.Svc/Plain"));

  /* 1. The front refuses the first stream (GOAWAY, last stream 0): one
   * transparent retry, then OK (SPEC TR-02). */
  ASSERT_OK(call(ch, "Plain", "t", "", NULL, NULL, &st, &info[0]));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_EQ(info[0].transparent_retries, 1u);
  /* 2. Two UNAVAILABLE attempts, then OK: two retries. */
  ASSERT_OK(call(ch, "Retry", "r", "f0=14 f1=14", NULL, NULL, &st, &info[1]));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_EQ(info[1].attempts, 3u);
  /* 3. The first attempt sleeps 3 s; the hedge 50 ms later answers. */
  ASSERT_OK(call(ch, "Hedge", "h", "d0=3000", NULL, NULL, &st, &info[2]));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_EQ(info[2].hedges, 1u);
  /* 4. The caller's trace, with a tracestate to pass through. */
  static const char parent[] =
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  ASSERT_OK(call(ch, "Retry", "p", "", parent, "vendor=x", &st, &info[3]));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);

  /* Metrics: promtool-clean, and the counts of what the run did. */
  grit_bytes m = {0};
  ASSERT_OK(grit_metrics_write_prometheus(ch, &m));
  char *text = calloc(1, m.len + 2);
  ASSERT_NOT_NULL(text);
  text[0] = '\n'; /* so every sample follows a newline */
  memcpy(text + 1, m.data, m.len);
  int pt = promtool((const char *)m.data, m.len);
  grit_bytes_free(&m);
  if (pt != 0)
    fprintf(stderr, "%s", text);
  ASSERT_EQ(pt, 0);
  /* A66: every attempt started, transparent ones included. */
  const char *started = "grpc_client_attempt_started_total";
  ASSERT_EQ(sample(text, started, lbl("Plain", NULL)), 2.0);
  ASSERT_EQ(sample(text, started, lbl("Retry", NULL)), 4.0);
  ASSERT_EQ(sample(text, started, lbl("Hedge", NULL)), 2.0);
  /* Per attempt, by the status it ended with. */
  const char *ad = "grpc_client_attempt_duration_seconds_count";
  ASSERT_EQ(sample(text, ad, lbl("Retry", "UNAVAILABLE")), 2.0);
  ASSERT_EQ(sample(text, ad, lbl("Retry", "OK")), 2.0);
  ASSERT_EQ(sample(text, ad, lbl("Hedge", "OK")), 1.0);
  ASSERT_EQ(sample(text, ad, lbl("Hedge", "CANCELLED")), 1.0);
  ASSERT_EQ(sample(text, ad, lbl("Plain", "OK")), 1.0);
  /* Sizes: "f0=14 f1=14" is 11 bytes, sent by each Retry attempt of call
   * 2; the echo came back once. */
  const char *ss =
      "grpc_client_attempt_sent_total_compressed_message_size_bytes";
  char name[128];
  snprintf(name, sizeof(name), "%s_sum", ss);
  ASSERT_EQ(sample(text, name, lbl("Retry", "UNAVAILABLE")), 22.0);
  snprintf(name, sizeof(name), "%s_bucket", ss);
  char le[300];
  snprintf(le, sizeof(le), "%s,le=\"0\"", lbl("Retry", "UNAVAILABLE"));
  ASSERT_EQ(sample(text, name, le), 0.0);
  snprintf(le, sizeof(le), "%s,le=\"1024\"", lbl("Retry", "UNAVAILABLE"));
  ASSERT_EQ(sample(text, name, le), 2.0);
  /* Per call. */
  const char *cd = "grpc_client_call_duration_seconds_count";
  ASSERT_EQ(sample(text, cd, lbl("Plain", "OK")), 1.0);
  ASSERT_EQ(sample(text, cd, lbl("Retry", "OK")), 2.0);
  ASSERT_EQ(sample(text, cd, lbl("Hedge", "OK")), 1.0);
  /* A96: only calls that had some are recorded. */
  ASSERT_EQ(sample(text, "grpc_client_call_retries_count", lbl("Retry", NULL)),
            1.0);
  ASSERT_EQ(sample(text, "grpc_client_call_retries_sum", lbl("Retry", NULL)),
            2.0);
  snprintf(le, sizeof(le), "%s,le=\"2\"", lbl("Retry", NULL));
  ASSERT_EQ(sample(text, "grpc_client_call_retries_bucket", le), 1.0);
  snprintf(le, sizeof(le), "%s,le=\"1\"", lbl("Retry", NULL));
  ASSERT_EQ(sample(text, "grpc_client_call_retries_bucket", le), 0.0);
  ASSERT_EQ(sample(text, "grpc_client_call_transparent_retries_count",
                   lbl("Plain", NULL)),
            1.0);
  ASSERT_EQ(sample(text, "grpc_client_call_transparent_retries_sum",
                   lbl("Plain", NULL)),
            1.0);
  ASSERT_EQ(sample(text, "grpc_client_call_hedges_count", lbl("Hedge", NULL)),
            1.0);
  ASSERT_EQ(sample(text, "grpc_client_call_hedges_sum", lbl("Hedge", NULL)),
            1.0);
  ASSERT_EQ(sample(text, "grpc_client_call_retries_count", lbl("Plain", NULL)),
            -1.0);
  ASSERT_EQ(sample(text, "grpc_client_call_retry_delay_seconds_count",
                   lbl("Retry", NULL)),
            1.0);
  /* Two 10 ms backoffs, as the client waited them (at least). */
  ASSERT_CMP(sample(text, "grpc_client_call_retry_delay_seconds_sum",
                    lbl("Retry", NULL)),
             >=, 0.02);
  /* grit's own: nothing throttled; the bucket lost a token per failure
   * (two UNAVAILABLE, TH-02) and won 0.1 per success, so it is below its
   * maximum of 10 and well above half. */
  ASSERT_EQ(
      sample(text, "grit_client_call_throttled_total", lbl("Retry", NULL)),
      0.0);
  const char *tok = strstr(text, "\ngrit_client_retry_throttle_tokens{");
  ASSERT_NOT_NULL(tok);
  double tokens = strtod(strstr(tok, "} ") + 2, NULL);
  ASSERT_CMP(tokens, <, 10.0);
  ASSERT_CMP(tokens, >, 7.0);
  /* This target's one channel; its connection READY (per target). */
  char tl[128];
  snprintf(tl, sizeof(tl), "grpc_target=\"%s\"", g_target);
  ASSERT_EQ(sample(text, "grit_client_channel_created_total", tl), 1.0);
  /* Every call has ended: its retry buffer is given back (RT-07). */
  ASSERT_EQ(sample(text, "grit_client_retry_buffer_bytes", tl), 0.0);
  char sl[160];
  snprintf(sl, sizeof(sl), "grpc_connectivity_state=\"READY\",%s", tl);
  ASSERT_CMP(sample(text, "grit_client_subchannels", sl), >=, 1.0);
  free(text);

  /* Trace context: per call, one trace id in every attempt's single
   * traceparent, and a new span id per attempt; the observer's records
   * carry the same ids (SPEC OB-02). */
  static const char *const keys[] = {"t", "r", "h", "p"};
  static const size_t want[] = {1, 3, 2, 1}; /* attempts the server saw */
  char seen_trace[4][33];
  for (size_t k = 0; k < 4; k++) {
    char lines[8][256];
    size_t n = server_log(ch, keys[k], lines, 8);
    /* The hedge's loser logs once it notices the cancel. */
    for (uint64_t end = test_now_ms() + 5000;
         n < want[k] && test_now_ms() < end;
         n = server_log(ch, keys[k], lines, 8))
      usleep(20000);
    ASSERT_EQ(n, want[k]);
    rec r[8];
    size_t nr = recs_of(info[k].call_id, r, 8);
    ASSERT_EQ(nr, k == 0 ? 2u : want[k]);
    char spans[8][17];
    for (size_t i = 0; i < n; i++) {
      char tp[64];
      int count;
      line_tp(lines[i], tp, sizeof(tp), &count);
      ASSERT_EQ(count, 1);
      ASSERT_EQ(strlen(tp), 55u);
      ASSERT_MEM_EQ(tp, "00-", 3);
      char trace[33];
      snprintf(trace, sizeof(trace), "%.32s", tp + 3);
      snprintf(spans[i], sizeof(spans[i]), "%.16s", tp + 36);
      if (i == 0)
        snprintf(seen_trace[k], sizeof(seen_trace[k]), "%s", trace);
      ASSERT_STR_EQ(trace, seen_trace[k]);
      for (size_t j = 0; j < i; j++)
        ASSERT(strcmp(spans[i], spans[j]) != 0);
      bool in_recs = false;
      for (size_t j = 0; j < nr; j++)
        in_recs |= strcmp(r[j].span_id, spans[i]) == 0;
      ASSERT(in_recs);
      ASSERT_STR_EQ(tp + 53, "01"); /* sampled: fresh, or the caller's */
    }
    for (size_t j = 0; j < nr; j++) {
      ASSERT_STR_EQ(r[j].trace_id, seen_trace[k]);
      ASSERT_EQ(strlen(r[j].span_id), 16u);
      for (size_t i = 0; i < j; i++)
        ASSERT(strcmp(r[i].span_id, r[j].span_id) != 0);
    }
    for (size_t j = 0; j < k; j++)
      ASSERT(strcmp(seen_trace[j], seen_trace[k]) != 0);
  }
  /* The transparent retry: its own span, marked so (A72). */
  rec r[4];
  ASSERT_EQ(recs_of(info[0].call_id, r, 4), 2u);
  ASSERT(!r[0].transparent);
  ASSERT(r[1].transparent);
  ASSERT_EQ(r[1].kind, GRIT_ATTEMPT_TRANSPARENT);
  /* Retries number their previous attempts (A72 previous-rpc-attempts). */
  ASSERT_EQ(recs_of(info[1].call_id, r, 4), 3u);
  ASSERT_EQ(r[0].prev + r[1].prev + r[2].prev, 0u + 1u + 2u);
  /* The caller's trace: its id, a span of our own, its parent recorded,
   * the tracestate passed through unchanged. */
  ASSERT_STR_EQ(seen_trace[3], "0af7651916cd43dd8448eb211c80319c");
  ASSERT_EQ(recs_of(info[3].call_id, r, 4), 1u);
  ASSERT_STR_EQ(r[0].parent, "b7ad6b7169203331");
  ASSERT(strcmp(r[0].span_id, "b7ad6b7169203331") != 0);
  char lines[2][256];
  ASSERT_EQ(server_log(ch, "p", lines, 2), 1u);
  ASSERT(strstr(lines[0], " ts=vendor=x ") != NULL);
  grit_channel_destroy(ch);
}

/* Off by default: no traceparent is sent and the records carry "". */
static void test_off_by_default(void) {
  grit_channel *ch = chan(false);
  ASSERT_NOT_NULL(ch);
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_OK(call(ch, "Plain", "off", "", NULL, NULL, &st, &info));
  grit_status_free(&st);
  char lines[2][256];
  ASSERT_EQ(server_log(ch, "off", lines, 2), 1u);
  ASSERT(strstr(lines[0], " n=0 tp=- ") != NULL);
  rec r[2];
  ASSERT_EQ(recs_of(info.call_id, r, 2), 1u);
  ASSERT_STR_EQ(r[0].trace_id, "");
  ASSERT_STR_EQ(r[0].span_id, "");
  grit_channel_destroy(ch);
}

/* A malformed caller value is an argument error (OB-02), from the options
 * or from the call's own metadata; the call never runs. */
static void test_malformed_traceparent(void) {
  grit_channel *ch = chan(true);
  ASSERT_NOT_NULL(ch);
  static const char *const bad[] = {
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0",   /* short */
      "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  /* upper */
      "00-00000000000000000000000000000000-b7ad6b7169203331-01",  /* zero */
      "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  /* zero */
      "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  /* ff */
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-", /* 00+ */
  };
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ASSERT_EQ(call(ch, "Plain", "bad", "", bad[i], NULL, &st, &info),
              GRIT_ERR_INVALID_ARG);
    ASSERT_EQ(st.code, GRIT_STATUS_INVALID_ARGUMENT);
    ASSERT(strstr(st.message, "traceparent") != NULL);
    grit_status_free(&st);
  }
  /* The same, as the call's own metadata. */
  grit_metadata *md = NULL;
  grit_metadata_create(&md);
  grit_metadata_add(md, "traceparent", bad[0], strlen(bad[0]));
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .metadata = md};
  ASSERT_EQ(grit_unary_call(ch, "/obs.Svc/Plain", "", 0, &o, NULL, &st, NULL),
            GRIT_ERR_INVALID_ARG);
  grit_status_free(&st);
  grit_metadata_destroy(md);
  /* A later version with more fields is accepted (W3C §3.2.4). */
  ASSERT_OK(call(ch, "Plain", "v1", "",
                 "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-xyz",
                 NULL, &st, &info));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_channel_destroy(ch);
}

/* ---- the span callback (SPEC OP-02) ---- */

typedef struct span_rec {
  char name[64];
  bool attempt;
  uint8_t trace_id[16], span_id[8], parent[8];
  uint64_t call_id, start_ns, end_ns;
  grit_status_code code;
  uint32_t prev, attempts;
} span_rec;

static span_rec g_spans[16];
static size_t g_nspans;

static void span_cb(const grit_span *sp, void *ud) {
  (void)ud;
  pthread_mutex_lock(&g_mu);
  if (g_nspans < 16) {
    span_rec *o = &g_spans[g_nspans++];
    snprintf(o->name, sizeof(o->name), "%s", sp->name);
    o->attempt = sp->attempt;
    memcpy(o->trace_id, sp->trace_id, 16);
    memcpy(o->span_id, sp->span_id, 8);
    memcpy(o->parent, sp->parent_span_id, 8);
    o->call_id = sp->call_id;
    o->start_ns = sp->start_unix_ns;
    o->end_ns = sp->end_unix_ns;
    o->code = sp->code;
    o->prev = sp->previous_rpc_attempts;
    o->attempts = sp->attempts;
  }
  pthread_mutex_unlock(&g_mu);
}

static void hex8(const uint8_t *p, char *out) {
  for (int i = 0; i < 8; i++)
    snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* A span callback without an exporter: the call's span and one per
 * attempt, attempts first, their ids those of the attempt records (and so
 * of the traceparents sent), the call's span a child of the caller's. */
static void test_span_callback(void) {
  static const char cfg[] =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"obs.Svc\"}],"
      "\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":\"0.01s\","
      "\"maxBackoff\":\"0.01s\",\"backoffMultiplier\":1,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}";
  grit_channel_args *a = NULL;
  ASSERT_OK(grit_channel_args_create(&a));
  ASSERT_OK(grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, cfg));
  ASSERT_OK(grit_channel_args_set_observer(a, obs_cb, NULL));
  ASSERT_OK(grit_channel_args_set_span_callback(a, span_cb, NULL));
  grit_channel *ch = NULL;
  ASSERT_OK(grit_channel_create(NULL, g_target, a, NULL, &ch));
  grit_channel_args_destroy(a);
  static const char tp[] =
      "00-11112222333344445555666677778888-aaaabbbbccccdddd-01";
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_OK(call(ch, "Retry", "span-cb", "f0=14", tp, NULL, &st, &info));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  rec recs[8];
  size_t nr = recs_of(info.call_id, recs, 8);
  ASSERT_EQ(nr, (size_t)info.attempts);
  span_rec sp[16];
  size_t ns = 0;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_nspans; i++)
    if (g_spans[i].call_id == info.call_id)
      sp[ns++] = g_spans[i];
  pthread_mutex_unlock(&g_mu);
  ASSERT_EQ(ns, nr + 1);
  span_rec *c = &sp[ns - 1]; /* the call's span comes last */
  ASSERT(!c->attempt);
  ASSERT_STR_EQ(c->name, "Sent.obs.Svc/Retry");
  ASSERT_EQ(c->attempts, info.attempts);
  ASSERT_EQ(c->code, GRIT_STATUS_OK);
  char h[17];
  hex8(c->parent, h);
  ASSERT_STR_EQ(h, "aaaabbbbccccdddd");
  for (size_t i = 0; i < nr; i++) {
    ASSERT(sp[i].attempt);
    ASSERT_STR_EQ(sp[i].name, "Attempt.obs.Svc/Retry");
    ASSERT(memcmp(sp[i].trace_id, c->trace_id, 16) == 0);
    ASSERT(memcmp(sp[i].parent, c->span_id, 8) == 0);
    hex8(sp[i].span_id, h);
    ASSERT_STR_EQ(h, recs[i].span_id);
    ASSERT_EQ(sp[i].prev, recs[i].prev);
    ASSERT_EQ(sp[i].code, recs[i].code);
    ASSERT(c->start_ns <= sp[i].start_ns && sp[i].start_ns <= sp[i].end_ns &&
           sp[i].end_ns <= c->end_ns);
  }
  ASSERT_EQ(sp[nr - 1].code, GRIT_STATUS_OK);
  ASSERT_EQ(sp[nr - 2].code, GRIT_STATUS_UNAVAILABLE);
  grit_channel_destroy(ch);
}

/* The thread of this process named |name|: its scheduling policy (field
 * 41 of /proc/self/task/TID/stat), or -1 when there is none. */
static int thread_policy(const char *name) {
  DIR *d = opendir("/proc/self/task");
  int policy = -1;
  for (struct dirent *e; d && policy < 0 && (e = readdir(d));) {
    char path[300], buf[512];
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    bool named = f && fgets(buf, sizeof(buf), f) &&
                 strncmp(buf, name, strlen(name)) == 0 &&
                 buf[strlen(name)] == '\n';
    if (f)
      fclose(f);
    snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
    f = named ? fopen(path, "r") : NULL;
    const char *p = f && fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
    for (int field = 2; p && field < 41; field++) /* ')' ends field 2 */
      p = strchr(p + 1, ' ');
    if (p)
      policy = atoi(p + 1);
    if (f)
      fclose(f);
  }
  if (d)
    closedir(d);
  return policy;
}

/* OP-02: the exporter's thread is named "grit-otlp" and runs SCHED_BATCH
 * (it does not preempt the I/O thread, "grit-io", when it wakes); it
 * lives as long as a channel names its collector. */
static void test_exporter_thread(void) {
  grit_channel_args *args = NULL;
  ASSERT_OK(grit_channel_args_create(&args));
  ASSERT_OK(grit_channel_args_set_string(args, GRIT_ARG_OTLP_ENDPOINT,
                                         "ipv4:127.0.0.1:1"));
  grit_channel *ch = NULL;
  ASSERT_OK(grit_channel_create(NULL, g_target, args, NULL, &ch));
  grit_channel_args_destroy(args);
  int policy = -1;
  for (int i = 0; i < 500 && policy < 0; i++) { /* the thread names itself */
    policy = thread_policy("grit-otlp");
    if (policy < 0)
      usleep(10000);
  }
  ASSERT_EQ(policy, SCHED_BATCH);
  ASSERT_CMP(thread_policy("grit-io"), >=, 0);
  grit_channel_destroy(ch); /* the last channel of that collector */
  for (int i = 0; i < 500 && policy >= 0; i++) { /* joined, or detached */
    policy = thread_policy("grit-otlp");
    if (policy >= 0)
      usleep(10000);
  }
  ASSERT_EQ(policy, -1);
}

static const test_case tests[] = {
    {"scripted_run", test_scripted_run},
    {"span_callback", test_span_callback},
    {"off_by_default", test_off_by_default},
    {"malformed_traceparent", test_malformed_traceparent},
    {"exporter_thread", test_exporter_thread},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  if (!pypeer_has_grpc()) {
    fprintf(stderr, "skip: %s has no grpc module\n", PYPEER_PYTHON);
    return 77;
  }
  if (!pypeer_start(&g_peer, "observe_server.py")) {
    pypeer_stop(&g_peer);
    return 1;
  }
  snprintf(g_target, sizeof(g_target), "ipv4:127.0.0.1:%u",
           (unsigned)g_peer.port);
  int rv = test_main(tests, argc, argv);
  pypeer_stop(&g_peer);
  grit_default_runtime_shutdown();
  return rv;
}
