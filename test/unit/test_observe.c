/* observe/: W3C traceparent parsing and formatting, histogram buckets
 * (A66 boundaries, le inclusive), the Prometheus names and label escaping,
 * the method cap ("other"), and scrape-time gauges (SPEC OB-01, OB-02). */
#include "observe/observe.h"
#include "test/harness.h"

#include <stdio.h>
#include <string.h>

static char *render(const char *target) {
  grit_buf b;
  grit_buf_init(&b);
  if (grit_obs_write_prometheus(target, &b) != GRIT_OK ||
      grit_buf_append(&b, "", 1) != GRIT_OK) {
    grit_buf_free(&b);
    return NULL;
  }
  return (char *)b.data;
}

static void test_traceparent_roundtrip(void) {
  static const char tp[] =
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  grit_traceparent p;
  ASSERT_OK(grit_traceparent_parse(tp, strlen(tp), &p));
  ASSERT_EQ(p.trace_id[0], 0x4b);
  ASSERT_EQ(p.trace_id[15], 0x36);
  ASSERT_EQ(p.span_id[7], 0xb7);
  ASSERT_EQ(p.flags, 1);
  char out[GRIT_TRACEPARENT_LEN + 1];
  grit_traceparent_format(&p, out);
  ASSERT_STR_EQ(out, tp);
  /* From the ids in hex (an attempt's header): the same text. */
  char compose[GRIT_TRACEPARENT_LEN + 1];
  grit_traceparent_compose("4bf92f3577b34da6a3ce929d0e0e4736",
                           "00f067aa0ba902b7", 0x01, compose);
  ASSERT_STR_EQ(compose, tp);
  /* Flags pass through as given, sampled or not. */
  static const char unsampled[] =
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
  ASSERT_OK(grit_traceparent_parse(unsampled, strlen(unsampled), &p));
  ASSERT_EQ(p.flags, 0);
}

static void test_traceparent_invalid(void) {
  static const char *const bad[] = {
      "",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
  };
  grit_traceparent p;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (grit_traceparent_parse(bad[i], strlen(bad[i]), &p) !=
        GRIT_ERR_INVALID_ARG)
      TEST_FAIL_AT(__FILE__, __LINE__, "accepted '%s'", bad[i]);
  }
  ASSERT_EQ(grit_traceparent_parse(NULL, 0, &p), GRIT_ERR_INVALID_ARG);
  /* A later version may carry more after a '-' (W3C §3.2.4). */
  static const char v1[] =
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more";
  ASSERT_OK(grit_traceparent_parse(v1, strlen(v1), &p));
}

/* A value on a boundary lands in that bucket (le is inclusive); the
 * buckets are cumulative, and count and sum follow. */
static void test_histogram_buckets(void) {
  grit_obs_target *t = grit_obs_target_get("unit:hist");
  grit_obs_method *m = grit_obs_method_get(t, "/a.B/C");
  ASSERT_NOT_NULL(m);
  grit_obs_record(m, GRIT_OBS_CALL_DURATION, 0, 0);       /* le 0 */
  grit_obs_record(m, GRIT_OBS_CALL_DURATION, 0, 300);     /* le 0.0003 */
  grit_obs_record(m, GRIT_OBS_CALL_DURATION, 0, 301);     /* le 0.0006 */
  grit_obs_record(m, GRIT_OBS_CALL_DURATION, 0, 2500000); /* le 5 */
  grit_obs_record(m, GRIT_OBS_CALL_DURATION, 0, UINT64_C(200000000));
  grit_obs_record(m, GRIT_OBS_CALL_DURATION, 14, 1000); /* UNAVAILABLE */
  grit_obs_record(m, GRIT_OBS_ATTEMPT_SENT_SIZE, 0, 1024);
  grit_obs_record(m, GRIT_OBS_ATTEMPT_SENT_SIZE, 0, UINT64_C(5000000000));
  grit_obs_add(m, GRIT_OBS_ATTEMPT_STARTED, 3);
  char *s = render("unit:hist");
  ASSERT_NOT_NULL(s);
#define L "{grpc_method=\"/a.B/C\",grpc_status=\"OK\",grpc_target=\"unit:hist\""
  const char *want[] = {
      "# TYPE grpc_client_call_duration_seconds histogram\n",
      "grpc_client_call_duration_seconds_bucket" L ",le=\"0\"} 1\n",
      "grpc_client_call_duration_seconds_bucket" L ",le=\"0.00001\"} 1\n",
      "grpc_client_call_duration_seconds_bucket" L ",le=\"0.0003\"} 2\n",
      "grpc_client_call_duration_seconds_bucket" L ",le=\"0.0006\"} 3\n",
      "grpc_client_call_duration_seconds_bucket" L ",le=\"2\"} 3\n",
      "grpc_client_call_duration_seconds_bucket" L ",le=\"5\"} 4\n",
      "grpc_client_call_duration_seconds_bucket" L ",le=\"100\"} 4\n",
      "grpc_client_call_duration_seconds_bucket" L ",le=\"+Inf\"} 5\n",
      "grpc_client_call_duration_seconds_sum" L "} 202.500601\n",
      "grpc_client_call_duration_seconds_count" L "} 5\n",
      "grpc_client_call_duration_seconds_count{grpc_method=\"/a.B/C\","
      "grpc_status=\"UNAVAILABLE\",grpc_target=\"unit:hist\"} 1\n",
      "grpc_client_attempt_sent_total_compressed_message_size_bytes_bucket" L
      ",le=\"1024\"} 1\n",
      "grpc_client_attempt_sent_total_compressed_message_size_bytes_bucket" L
      ",le=\"4294967296\"} 1\n",
      "grpc_client_attempt_sent_total_compressed_message_size_bytes_bucket" L
      ",le=\"+Inf\"} 2\n",
      "# TYPE grpc_client_attempt_started_total counter\n",
      "grpc_client_attempt_started_total{grpc_method=\"/a.B/C\","
      "grpc_target=\"unit:hist\"} 3\n",
  };
#undef L
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    if (!strstr(s, want[i])) {
      fprintf(stderr, "%s", s);
      grit_free(s);
      TEST_FAIL_AT(__FILE__, __LINE__, "missing: %s", want[i]);
    }
  }
  /* Unused families and statuses are left out. */
  ASSERT_NULL(strstr(s, "grpc_client_call_hedges"));
  ASSERT_NULL(strstr(s, "CANCELLED"));
  grit_free(s);
}

/* Label values are escaped; other targets are not rendered. */
static void test_escaping_and_filter(void) {
  grit_obs_target *t = grit_obs_target_get("unit:\"q\"\\x");
  grit_obs_add(grit_obs_method_get(t, "/a\nb"), GRIT_OBS_ATTEMPT_STARTED, 1);
  grit_obs_add(grit_obs_method_get(grit_obs_target_get("unit:other"), "/x"),
               GRIT_OBS_ATTEMPT_STARTED, 1);
  char *s = render("unit:\"q\"\\x");
  ASSERT_NOT_NULL(s);
  ASSERT_NOT_NULL(strstr(s, "{grpc_method=\"/a\\nb\",grpc_target=\"unit:\\\"q"
                            "\\\"\\\\x\"} 1\n"));
  ASSERT_NULL(strstr(s, "unit:other"));
  grit_free(s);
  s = render(NULL); /* every target */
  ASSERT_NOT_NULL(s);
  ASSERT_NOT_NULL(strstr(s, "grpc_target=\"unit:other\""));
  grit_free(s);
}

/* Past GRIT_OBS_MAX_METHODS names, methods share "other" (A66). */
static void test_method_cap(void) {
  grit_obs_target *t = grit_obs_target_get("unit:cap");
  grit_obs_method *first = grit_obs_method_get(t, "/m/0");
  for (int i = 1; i < GRIT_OBS_MAX_METHODS; i++) {
    char name[16];
    snprintf(name, sizeof(name), "/m/%d", i);
    ASSERT_NOT_NULL(grit_obs_method_get(t, name));
  }
  grit_obs_method *o1 = grit_obs_method_get(t, "/late/1");
  grit_obs_method *o2 = grit_obs_method_get(t, "/late/2");
  ASSERT_NOT_NULL(o1);
  ASSERT(o1 == o2);
  ASSERT(grit_obs_method_get(t, "/m/0") == first); /* known ones stay */
  grit_obs_add(o1, GRIT_OBS_ATTEMPT_STARTED, 2);
  char *s = render("unit:cap");
  ASSERT_NOT_NULL(s);
  ASSERT_NOT_NULL(strstr(s, "{grpc_method=\"other\",grpc_target=\"unit:cap\"} "
                            "2\n"));
  grit_free(s);
}

/* Per-target instruments carry only grpc_target (the room other modules'
 * counters go in: resolutions, config updates, ejections). */
static void test_target_scope(void) {
  grit_obs_target *t = grit_obs_target_get("unit:scope");
  ASSERT_NOT_NULL(t);
  grit_obs_target_add(t, GRIT_OBS_CHANNELS_CREATED, 2);
  grit_obs_target_add(t, GRIT_OBS_ATTEMPT_STARTED, 5); /* not per target */
  grit_obs_add(grit_obs_method_get(t, "/x/y"), GRIT_OBS_CHANNELS_CREATED, 7);
  char *s = render("unit:scope");
  ASSERT_NOT_NULL(s);
  ASSERT_NOT_NULL(strstr(s, "# TYPE grit_client_channel_created_total counter\n"
                            "grit_client_channel_created_total{grpc_target="
                            "\"unit:scope\"} 2\n"));
  /* The wrong-scope adds went nowhere. */
  ASSERT_NOT_NULL(strstr(s, "grpc_client_attempt_started_total{grpc_method="
                            "\"/x/y\",grpc_target=\"unit:scope\"} 0\n"));
  grit_free(s);
}

/* The subchannel gauge follows moves between states, per target
 * (OP-01). */
static void test_subchannel_gauge(void) {
  grit_obs_target *t = grit_obs_target_get("unit:sc");
  grit_obs_subchannel_state(t, -1, 0);    /* created: IDLE */
  grit_obs_subchannel_state(t, 0, 1);     /* CONNECTING */
  grit_obs_subchannel_state(t, 1, 2);     /* READY */
  grit_obs_subchannel_state(t, -1, 0);    /* another, IDLE */
  grit_obs_subchannel_state(NULL, -1, 0); /* no series: not recorded */
  char *s = render("unit:sc");
  ASSERT_NOT_NULL(s);
#define SC(st) "grit_client_subchannels{grpc_connectivity_state=\"" st "\","
#define TG "grpc_target=\"unit:sc\"}"
  ASSERT_NOT_NULL(strstr(s,
                         "# TYPE grit_client_subchannels gauge\n" SC("IDLE") TG
                         " 1\n" SC("CONNECTING") TG " 0\n" SC("READY") TG
                         " 1\n" SC("TRANSIENT_FAILURE") TG " 0\n"));
#undef SC
#undef TG
  grit_free(s);
  s = render("unit:none"); /* another target: none of these */
  ASSERT_NOT_NULL(s);
  ASSERT_NULL(strstr(s, "grit_client_subchannels"));
  grit_free(s);
  grit_obs_subchannel_state(t, 2, -1);
  grit_obs_subchannel_state(t, 0, -1);
}

/* OP-01: past the bound, targets are "other"; named ones stay named. */
static void test_target_bound(void) {
  grit_obs_target *named = grit_obs_target_get("unit:bound-named");
  ASSERT_NOT_NULL(named);
  grit_obs_set_max_targets(0);
  grit_obs_target *a = grit_obs_target_get("unit:bound-a");
  grit_obs_target *b = grit_obs_target_get("unit:bound-b");
  ASSERT_NOT_NULL(a);
  ASSERT(a == b);
  ASSERT_STR_EQ(grit_obs_target_name(a), "other");
  ASSERT(grit_obs_target_get("unit:bound-named") == named);
  grit_obs_target_add(a, GRIT_OBS_CHANNELS_CREATED, 3);
  char *s = render(NULL);
  ASSERT_NOT_NULL(s);
  ASSERT_NOT_NULL(strstr(
      s, "grit_client_channel_created_total{grpc_target=\"other\"} 3\n"));
  ASSERT_NULL(strstr(s, "unit:bound-a"));
  grit_free(s);
  grit_obs_set_max_targets(GRIT_OBS_DEFAULT_MAX_TARGETS);
}

static bool no_secrets(const char *target, void *data) {
  (*(int *)data)++;
  return strncmp(target, "unit:secret", 11) != 0;
}

/* OP-01: the user's filter decides, once per target. */
static void test_target_filter(void) {
  int calls = 0;
  grit_obs_set_target_filter(no_secrets, &calls);
  grit_obs_target *s1 = grit_obs_target_get("unit:secret-1");
  grit_obs_target *p = grit_obs_target_get("unit:public");
  ASSERT_NOT_NULL(s1);
  ASSERT_STR_EQ(grit_obs_target_name(s1), "other");
  ASSERT_STR_EQ(grit_obs_target_name(p), "unit:public");
  ASSERT(grit_obs_target_get("unit:public") == p);
  ASSERT_EQ(calls, 2);
  grit_obs_set_target_filter(NULL, NULL);
}

/* OP-01 (A66 generic methods): registration, with or without the '/'. */
static void test_method_register(void) {
  ASSERT_EQ(grit_obs_method_register(NULL), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(grit_obs_method_register("/"), GRIT_ERR_INVALID_ARG);
  ASSERT(!grit_obs_method_registered("unit.S/M"));
  ASSERT_OK(grit_obs_method_register("/unit.S/M"));
  ASSERT_OK(grit_obs_method_register("unit.S/M")); /* the same: no-op */
  ASSERT(grit_obs_method_registered("unit.S/M"));
  ASSERT(grit_obs_method_registered("/unit.S/M"));
  ASSERT(!grit_obs_method_registered("unit.S/N"));
  grit_obs_target *t = grit_obs_target_get("unit:reg");
  ASSERT_NULL(grit_obs_method_find(t, "unit.S/M"));
  grit_obs_method *m = grit_obs_method_get(t, "unit.S/M");
  ASSERT(grit_obs_method_find(t, "unit.S/M") == m);
}

static size_t src_text(char *buf, size_t cap, void *data) {
  /* More than the first offer (4096), to exercise the second call. */
  const char *line = data;
  size_t need = 0;
  for (int i = 0; i < 300; i++) {
    int n = snprintf(need < cap ? buf + need : NULL,
                     need < cap ? cap - need : 0, "%s %d\n", line, i);
    need += (size_t)n;
  }
  return need;
}

/* OP-01: other libraries' text joins the process's exposition. */
static void test_sources(void) {
  static char tag[] = "unit_src_sample";
  ASSERT_EQ(grit_obs_add_source(NULL, NULL), GRIT_ERR_INVALID_ARG);
  ASSERT_OK(grit_obs_add_source(src_text, tag));
  ASSERT_OK(grit_obs_add_source(src_text, tag)); /* once only */
  char *s = render(NULL);
  ASSERT_NOT_NULL(s);
  ASSERT_NOT_NULL(strstr(s, "\nunit_src_sample 0\nunit_src_sample 1\n"));
  ASSERT_NOT_NULL(strstr(s, "\nunit_src_sample 299\n"));
  ASSERT_NULL(strstr(strstr(s, "unit_src_sample 299") + 1, "unit_src_sample"));
  grit_free(s);
  s = render("unit:sc"); /* one target: no sources */
  ASSERT_NOT_NULL(s);
  ASSERT_NULL(strstr(s, "unit_src_sample"));
  grit_free(s);
  ASSERT_OK(grit_obs_remove_source(src_text, tag));
  ASSERT_EQ(grit_obs_remove_source(src_text, tag), GRIT_ERR_NOT_FOUND);
  s = render(NULL);
  ASSERT_NOT_NULL(s);
  ASSERT_NULL(strstr(s, "unit_src_sample"));
  grit_free(s);
}

static grit_err gauges(grit_buf *out, const char *target) {
  static const char *const names[] = {"a.example", "b.example"};
  static const double v[] = {10, 2.5};
  if (target)
    return GRIT_OK;
  return grit_obs_write_gauge(out, "grit_test_tokens", "Test gauge.",
                              "server_name", 2, names, v);
}

static void test_collector(void) {
  grit_obs_add_collector(gauges);
  grit_obs_add_collector(gauges); /* once only */
  char *s = render(NULL);
  ASSERT_NOT_NULL(s);
  ASSERT_NOT_NULL(strstr(s,
                         "# TYPE grit_test_tokens gauge\n"
                         "grit_test_tokens{server_name=\"a.example\"} 10\n"
                         "grit_test_tokens{server_name=\"b.example\"} 2.5\n"));
  ASSERT_EQ(
      strstr(strstr(s, "grit_test_tokens gauge") + 1, "grit_test_tokens gauge"),
      NULL);
  grit_free(s);
}

/* OP-03: the admin endpoint's request heads. */
static void test_http_request(void) {
  grit_http_req r;
  static const char prom[] = "GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\n"
                             "Accept: text/plain\r\n\r\nGET /";
  ASSERT_EQ(grit_http_parse_request(prom, strlen(prom), &r), GRIT_HTTP_DONE);
  ASSERT_STR_EQ(r.method, "GET");
  ASSERT_STR_EQ(r.path, "/metrics");
  ASSERT(r.keep_alive);
  ASSERT_EQ(r.consumed, strlen(prom) - 5); /* the next request stays */
  /* Every prefix of the head is incomplete, never bad. */
  for (size_t n = 0; n < r.consumed; n++)
    ASSERT_EQ(grit_http_parse_request(prom, n, &r), GRIT_HTTP_INCOMPLETE);
  static const char close_[] =
      "GET / HTTP/1.1\r\nConnection: Upgrade, Close\r\n\r\n";
  ASSERT_EQ(grit_http_parse_request(close_, strlen(close_), &r),
            GRIT_HTTP_DONE);
  ASSERT(!r.keep_alive);
  static const char h10[] = "GET /channelz HTTP/1.0\r\n\r\n";
  ASSERT_EQ(grit_http_parse_request(h10, strlen(h10), &r), GRIT_HTTP_DONE);
  ASSERT(!r.keep_alive);
  static const char h10ka[] =
      "GET /channelz HTTP/1.0\r\nconnection: keep-alive\r\n\r\n";
  ASSERT_EQ(grit_http_parse_request(h10ka, strlen(h10ka), &r), GRIT_HTTP_DONE);
  ASSERT(r.keep_alive);
  static const char *const bad[] = {
      "GET /m HTTP/2.0\r\n\r\n",
      "GET m HTTP/1.1\r\n\r\n",
      "GET  /m HTTP/1.1\r\n\r\n",
      "G(T /m HTTP/1.1\r\n\r\n",
      "GET /m HTTP/1.1\r\n folded: x\r\n\r\n",
      "GET /m HTTP/1.1\r\nno-colon\r\n\r\n",
      "POST /m HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
      "POST /m HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
      "GET /m\x01 HTTP/1.1\r\n\r\n",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (grit_http_parse_request(bad[i], strlen(bad[i]), &r) != GRIT_HTTP_BAD)
      TEST_FAIL_AT(__FILE__, __LINE__, "accepted '%s'", bad[i]);
  /* A head that never ends is bad once it is over the limit. */
  char big[GRIT_HTTP_MAX_HEAD + 2];
  memset(big, 'a', sizeof(big));
  memcpy(big, "GET / HTTP/1.1\r\nx: ", 20);
  ASSERT_EQ(grit_http_parse_request(big, GRIT_HTTP_MAX_HEAD, &r),
            GRIT_HTTP_INCOMPLETE);
  ASSERT_EQ(grit_http_parse_request(big, sizeof(big), &r), GRIT_HTTP_BAD);
}

/* A protobuf field walker for the OTLP check: the next field of [*p, end)
 * (tag, and for LEN its bytes; for VARINT/I64/I32 its value). */
typedef struct pbf {
  unsigned field, wt;
  const uint8_t *data;
  size_t len;
  uint64_t v;
} pbf;

static uint64_t pb_varint(const uint8_t **p, const uint8_t *end) {
  uint64_t v = 0;
  for (int sh = 0; *p < end && sh < 64; sh += 7) {
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << sh;
    if (!(b & 0x80))
      break;
  }
  return v;
}

static bool pb_next(const uint8_t **p, const uint8_t *end, pbf *f) {
  if (*p >= end)
    return false;
  uint64_t tag = pb_varint(p, end);
  f->field = (unsigned)(tag >> 3);
  f->wt = (unsigned)(tag & 7);
  f->data = NULL;
  f->len = 0;
  f->v = 0;
  if (f->wt == 0) {
    f->v = pb_varint(p, end);
  } else if (f->wt == 2) {
    f->len = (size_t)pb_varint(p, end);
    f->data = *p;
    *p += f->len;
  } else {
    size_t n = f->wt == 1 ? 8 : 4;
    for (size_t i = 0; i < n; i++)
      f->v |= (uint64_t)(*p)[i] << (8 * i);
    *p += n;
  }
  return *p <= end;
}

/* The first field |field| of message [p, p + n). */
static bool pb_find(const uint8_t *p, size_t n, unsigned field, pbf *out) {
  const uint8_t *end = p + n;
  while (pb_next(&p, end, out))
    if (out->field == field)
      return true;
  return false;
}

/* OP-02: the ExportTraceServiceRequest nesting and the span fields at
 * the opentelemetry-proto numbers. */
static void test_otlp_encode(void) {
  grit_otlp_span sp[2] = {{.attempt = false,
                           .flags = 1,
                           .code = 0,
                           .attempts = 2,
                           .start_ns = 1000,
                           .end_ns = 5000},
                          {.attempt = true,
                           .has_parent = true,
                           .flags = 1,
                           .code = 14,
                           .previous_rpc_attempts = 1,
                           .transparent_retry = true,
                           .start_ns = 2000,
                           .end_ns = 3000}};
  memset(sp[0].trace_id, 0xab, 16);
  memset(sp[0].span_id, 0x01, 8);
  grit_otlp_set_texts(&sp[0], "a.B/C", 5, "", 0, "");
  memcpy(sp[1].trace_id, sp[0].trace_id, 16);
  memset(sp[1].span_id, 0x02, 8);
  memcpy(sp[1].parent_span_id, sp[0].span_id, 8);
  /* Raw bytes as the I/O thread copies them: the encoder makes them
   * valid UTF-8 ("d\xffwn" is sent as "d?wn"). */
  grit_otlp_set_texts(&sp[1], "a.B/C", 5, "127.0.0.1:1", 11, "d\xffwn");
  static const char *const names[2] = {"Sent.a.B/C", "Attempt.a.B/C"};
  grit_buf b;
  grit_buf_init(&b);
  ASSERT_OK(grit_otlp_encode(sp, 2, "svc", &b));
  pbf rs, ss, f;
  ASSERT(pb_find(b.data, b.len, 1, &rs));               /* resource_spans */
  ASSERT(pb_find(rs.data, rs.len, 2, &ss));             /* scope_spans */
  ASSERT(pb_find(ss.data, ss.len, 1, &f));              /* scope */
  ASSERT(pb_find(f.data, f.len, 1, &f) && f.len == 4 && /* name */
         memcmp(f.data, "grit", 4) == 0);
  const uint8_t *p = ss.data, *end = ss.data + ss.len;
  size_t nspans = 0;
  pbf span;
  while (pb_next(&p, end, &span)) {
    if (span.field != 2)
      continue;
    const char *want_name = names[nspans];
    const grit_otlp_span *want = &sp[nspans++];
    ASSERT(pb_find(span.data, span.len, 1, &f) && f.len == 16 &&
           memcmp(f.data, want->trace_id, 16) == 0);
    ASSERT(pb_find(span.data, span.len, 2, &f) && f.len == 8 &&
           memcmp(f.data, want->span_id, 8) == 0);
    ASSERT_EQ(pb_find(span.data, span.len, 4, &f), want->has_parent);
    ASSERT(pb_find(span.data, span.len, 5, &f) && f.len == strlen(want_name) &&
           memcmp(f.data, want_name, f.len) == 0);
    ASSERT(pb_find(span.data, span.len, 6, &f));
    ASSERT_EQ(f.v, want->attempt ? 1u : 3u); /* INTERNAL / CLIENT */
    ASSERT(pb_find(span.data, span.len, 7, &f) && f.wt == 1);
    ASSERT_EQ(f.v, want->start_ns);
    ASSERT(pb_find(span.data, span.len, 8, &f) && f.wt == 1);
    ASSERT_EQ(f.v, want->end_ns);
    ASSERT(pb_find(span.data, span.len, 16, &f) && f.wt == 5);
    ASSERT_EQ(f.v, 1u);
    ASSERT_EQ(pb_find(span.data, span.len, 15, &f), want->code != 0);
    if (want->code) { /* Status {2: message, 3: code ERROR} */
      pbf c;
      ASSERT(pb_find(f.data, f.len, 3, &c));
      ASSERT_EQ(c.v, 2u);
      ASSERT(pb_find(f.data, f.len, 2, &c) && c.len == 4 &&
             memcmp(c.data, "d?wn", 4) == 0);
    }
    /* Attributes (field 9): the status code always, the peer when set. */
    size_t nattr = 0;
    bool peer_seen = false;
    const uint8_t *q = span.data, *qend = span.data + span.len;
    while (pb_next(&q, qend, &f)) {
      if (f.field != 9)
        continue;
      nattr++;
      pbf k, v;
      ASSERT(pb_find(f.data, f.len, 1, &k));
      ASSERT(pb_find(f.data, f.len, 2, &v));
      if (k.len == 18 && memcmp(k.data, "net.sock.peer.addr", 18) == 0) {
        pbf sv;
        ASSERT(pb_find(v.data, v.len, 1, &sv) && sv.len == 11 &&
               memcmp(sv.data, "127.0.0.1:1", 11) == 0);
        peer_seen = true;
      }
      if (k.len == 20 && memcmp(k.data, "rpc.grpc.status_code", 20) == 0) {
        pbf iv;
        ASSERT(pb_find(v.data, v.len, 3, &iv));
        ASSERT_EQ(iv.v, (uint64_t)want->code);
      }
    }
    ASSERT_EQ(nattr, want->attempt ? 4u : 2u);
    ASSERT_EQ(peer_seen, want->attempt);
  }
  ASSERT_EQ(nspans, 2u);
  grit_buf_free(&b);
}

/* The int_value of attribute |key| in span [p, p + n), or -1 if absent. */
static int64_t pb_attr_int(const uint8_t *p, size_t n, const char *key) {
  const uint8_t *end = p + n;
  pbf f, k, v, iv;
  while (pb_next(&p, end, &f))
    if (f.field == 9 && pb_find(f.data, f.len, 1, &k) && k.len == strlen(key) &&
        memcmp(k.data, key, k.len) == 0 && pb_find(f.data, f.len, 2, &v) &&
        (pb_find(v.data, v.len, 3, &iv) || pb_find(v.data, v.len, 2, &iv)))
      return (int64_t)iv.v;
  return -1;
}

/* OP-02: spans of every shape the encoder sizes apart (the usual OK span
 * with small counts, and the rest: error status, counts of 128 and more,
 * names of 128 bytes and more, the longest peer, no peer, no parent)
 * encode to exactly the bytes their lengths say, field by field. */
static void test_otlp_shapes(void) {
  static const uint16_t method_lens[] = {1, 34, 119, 120, 160};
  static const uint16_t peer_lens[] = {0, 15, GRIT_OTLP_PEER_MAX};
  static const int32_t codes[] = {0, 14, 200};
  static const uint32_t counts[] = {0, 1, 127, 128, 300};
  char method[GRIT_OTLP_METHOD_MAX], peer[GRIT_OTLP_PEER_MAX];
  memset(method, 'm', sizeof(method));
  memset(peer, 'p', sizeof(peer));
  size_t nshapes = 2 * 2 * 5 * 3 * 3 * 5;
  grit_otlp_span *sp = calloc(nshapes, sizeof(*sp));
  ASSERT(sp != NULL);
  size_t n = 0;
  for (int att = 0; att < 2; att++)
    for (int par = 0; par < 2; par++)
      for (size_t m = 0; m < 5; m++)
        for (size_t pl = 0; pl < 3; pl++)
          for (size_t c = 0; c < 3; c++)
            for (size_t k = 0; k < 5; k++) {
              grit_otlp_span *o = &sp[n++];
              o->attempt = att;
              o->has_parent = par;
              o->method_ascii = m % 2 == 0;
              o->code = codes[c];
              o->previous_rpc_attempts = att ? counts[k] : 0;
              o->attempts = att ? 0 : counts[k];
              o->transparent_retry = k % 2;
              o->flags = 1;
              o->start_ns = 1000u * n;
              o->end_ns = 1000u * n + 7;
              memset(o->trace_id, (int)n, 16);
              memset(o->span_id, (int)n + 1, 8);
              grit_otlp_set_texts(o, method, method_lens[m], peer,
                                  peer_lens[pl], c ? "failed" : "");
            }
  ASSERT_EQ(n, nshapes);
  grit_buf b;
  grit_buf_init(&b);
  ASSERT_OK(grit_otlp_encode(sp, n, "svc", &b));
  pbf rs, ss, span, f;
  ASSERT(pb_find(b.data, b.len, 1, &rs) && rs.data + rs.len == b.data + b.len);
  ASSERT(pb_find(rs.data, rs.len, 2, &ss) &&
         ss.data + ss.len == b.data + b.len);
  const uint8_t *p = ss.data, *end = ss.data + ss.len;
  size_t i = 0;
  while (pb_next(&p, end, &span)) {
    if (span.field != 2)
      continue;
    ASSERT(i < n);
    const grit_otlp_span *want = &sp[i++];
    /* Every field parses and the last one ends where the span does. */
    const uint8_t *q = span.data, *qend = span.data + span.len;
    size_t fields = 0;
    while (pb_next(&q, qend, &f))
      fields++;
    ASSERT(q == qend);
    ASSERT(fields >= 8);
    ASSERT(pb_find(span.data, span.len, 5, &f));
    ASSERT_EQ(f.len, (want->attempt ? 8u : 5u) + want->method_len);
    ASSERT(pb_find(span.data, span.len, 8, &f));
    ASSERT_EQ(f.v, want->end_ns);
    ASSERT(pb_find(span.data, span.len, 16, &f));
    ASSERT_EQ(f.v, 1u);
    ASSERT_EQ(pb_attr_int(span.data, span.len, "rpc.grpc.status_code"),
              (int64_t)want->code);
    if (want->attempt) {
      ASSERT_EQ(pb_attr_int(span.data, span.len, "previous-rpc-attempts"),
                (int64_t)want->previous_rpc_attempts);
      ASSERT_EQ(pb_attr_int(span.data, span.len, "transparent-retry"),
                (int64_t)want->transparent_retry);
    } else {
      ASSERT_EQ(pb_attr_int(span.data, span.len, "grpc.attempts"),
                (int64_t)want->attempts);
    }
    ASSERT_EQ(pb_find(span.data, span.len, 15, &f), want->code != 0);
  }
  ASSERT(p == end);
  ASSERT_EQ(i, n);
  grit_buf_free(&b);
  free(sp);
}

/* OP-02: span text is made valid UTF-8 in place, length kept; the call
 * path copies at most the room there is. */
static void fix(const char *in, const char *want) {
  char buf[16];
  size_t n = strlen(in);
  memcpy(buf, in, n);
  grit_otlp_fix_text(buf, n);
  ASSERT(memcmp(buf, want, n) == 0 && strlen(want) == n);
}

static void test_otlp_text(void) {
  fix("caf\xc3\xa9", "caf\xc3\xa9");
  fix("a\xff\xc3(\xed\xa0\x80", "a?"
                                "?("
                                "???"); /* stray, truncated, surrogate */
  fix("abcdef\xc3", "abcdef?");         /* a sequence cut by the end */
  fix("\xc0\xaf", "??");                /* overlong */
  fix("\xf0\x9f\x98\x80!", "\xf0\x9f\x98\x80!");
  char out[8];
  ASSERT_EQ(grit_otlp_put_text(out, sizeof(out), "abc"), 3u);
  ASSERT(memcmp(out, "abc", 3) == 0);
  ASSERT_EQ(grit_otlp_put_text(out, sizeof(out), "abcdefghij"), 8u);
  ASSERT(memcmp(out, "abcdefgh", 8) == 0);
  ASSERT_EQ(grit_otlp_put_text(out, sizeof(out), ""), 0u);
}

static const test_case tests[] = {
    {"traceparent_roundtrip", test_traceparent_roundtrip},
    {"traceparent_invalid", test_traceparent_invalid},
    {"histogram_buckets", test_histogram_buckets},
    {"escaping_and_filter", test_escaping_and_filter},
    {"method_cap", test_method_cap},
    {"collector", test_collector},
    {"target_scope", test_target_scope},
    {"subchannel_gauge", test_subchannel_gauge},
    {"target_bound", test_target_bound},
    {"target_filter", test_target_filter},
    {"method_register", test_method_register},
    {"sources", test_sources},
    {"http_request", test_http_request},
    {"otlp_encode", test_otlp_encode},
    {"otlp_text", test_otlp_text},
    {"otlp_shapes", test_otlp_shapes},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
