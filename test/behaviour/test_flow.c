/*
 * Flow control and stream limits against h2server/ peers that behave
 * like real HTTP/2 servers: wide windows and silence (C-core), windows that
 * change, slow readers, stream limits, early responses (issue 12).
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "test/behaviour/bh.h"

#define MiB (1024 * 1024)
#define CALL_MS 60000

/* Request bytes: a pattern the server side checks byte for byte. */
static uint8_t *flow_pattern(size_t len) {
  uint8_t *req = malloc(len);
  for (size_t i = 0; i < len; i++)
    req[i] = (uint8_t)(i * 7);
  return req;
}

/* The server got exactly flow_pattern(len) as one message. */
static bool flow_intact(const h2s_request *r, size_t len) {
  if (r == NULL || r->n_msgs != 1 || r->msgs[0].len != len)
    return false;
  for (size_t i = 0; i < len; i++)
    if (r->msgs[0].data[i] != (uint8_t)(i * 7))
      return false;
  return true;
}

/* A blocking unary call of |len| pattern bytes; returns the status code
 * and, if |resp_len|, the response length. */
static grit_status_code flow_call_buf(grit_channel *ch, const char *method,
                                      const uint8_t *req, size_t len,
                                      uint64_t timeout_ms, grit_status *st,
                                      size_t *resp_len) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms};
  grit_bytes resp = {0};
  grit_err rv = grit_unary_call(ch, method, req, len, &o, &resp, st, NULL);
  if (resp_len)
    *resp_len = resp.len;
  grit_bytes_free(&resp);
  return rv == GRIT_OK ? st->code : (grit_status_code)-1;
}

static grit_status_code flow_call(grit_channel *ch, const char *method,
                                  size_t len, uint64_t timeout_ms,
                                  grit_status *st, size_t *resp_len) {
  uint8_t *req = flow_pattern(len);
  grit_status_code code =
      flow_call_buf(ch, method, req, len, timeout_ms, st, resp_len);
  free(req);
  return code;
}

static grit_status_code flow_unary(grit_channel *ch, const char *method,
                                   size_t len, uint64_t timeout_ms,
                                   grit_status *st) {
  return flow_call(ch, method, len, timeout_ms, st, NULL);
}

/* TLS material from test/peers/gen_certs.sh, made on first use. */
static char g_certs[256];

static const char *flow_certs(void) {
  if (g_certs[0])
    return g_certs;
  char script[PATH_MAX];
  const char *src = getenv("GRIT_SOURCE_ROOT");
  if (src) {
    snprintf(script, sizeof(script), "%s/test/peers/gen_certs.sh", src);
  } else {
    snprintf(script, sizeof(script), "%s", __FILE__);
    char *slash = strrchr(script, '/');
    if (!slash)
      return NULL;
    snprintf(slash, sizeof(script) - (size_t)(slash - script),
             "/../peers/gen_certs.sh");
  }
  char tmpl[] = "/tmp/grit-flow-certs-XXXXXX";
  if (!mkdtemp(tmpl))
    return NULL;
  char cmd[PATH_MAX * 2 + 64];
  snprintf(cmd, sizeof(cmd), "bash '%s' '%s' >/dev/null 2>&1", script, tmpl);
  if (system(cmd) != 0) {
    fprintf(stderr, "cannot run %s\n", script);
    return NULL;
  }
  snprintf(g_certs, sizeof(g_certs), "%s", tmpl);
  return g_certs;
}

/* Starts |cfg| (quiet), over TLS with the test server certificate if
 * |tls|; NULL on failure. */
static h2s_server *flow_server(h2s_config cfg, bool tls) {
  char cert[PATH_MAX], key[PATH_MAX];
  cfg.quiet = true;
  if (tls) {
    const char *dir = flow_certs();
    if (dir == NULL)
      return NULL;
    snprintf(cert, sizeof(cert), "%s/server.pem", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    cfg.tls_cert_file = cert;
    cfg.tls_key_file = key;
  }
  h2s_server *srv = NULL;
  if (h2s_server_start(&cfg, &srv) != 0)
    fprintf(stderr, "cannot start h2server\n");
  return srv;
}

/* A channel to |srv|, trusting the test CA if |tls|. */
static grit_channel *flow_channel(h2s_server *srv, bool tls) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  if (tls) {
    char ca[PATH_MAX];
    snprintf(ca, sizeof(ca), "%s/ca.pem", g_certs);
    grit_channel_args_set_int(a, GRIT_ARG_TLS, 1);
    grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS_FILE, ca);
  }
  grit_channel *ch = bh_channel_args(&srv, 1, NULL, a);
  grit_channel_args_destroy(a);
  return ch;
}

static h2s_stats flow_stats(h2s_server *srv) {
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  return st;
}

/* This process's resident set, in KiB (0 if unknown). */
static uint64_t flow_rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL)
    return 0;
  char line[256];
  uint64_t kib = 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kib) == 1)
      break;
  fclose(f);
  return kib;
}

/* FINDINGS, issue 12: a peer that grants wide windows up front and then
 * sends nothing (no WINDOW_UPDATE, no PING) until the request is whole.
 * Every request must still go out completely; before the fix the write
 * loop stopped after the first 1 MiB chunk the socket took at once. */
static void test_silent_wide_window_peer(void) {
  h2s_config cfg = {.quiet = true,
                    .initial_window_size = 16 * MiB,
                    .connection_window_size = 64 * MiB,
                    .script_text = "repeat=* size=10"};
  h2s_server *srv = NULL;
  ASSERT_EQ(h2s_server_start(&cfg, &srv), 0);
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  ASSERT_NOT_NULL(ch);
  size_t sizes[] = {1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB - 5, 3 * MiB + 17};
  for (int round = 0; round < 4; round++) {
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
      grit_status st = {0};
      ASSERT_EQ(flow_unary(ch, "/flow.Svc/Big", sizes[i], 30000, &st),
                GRIT_STATUS_OK);
      grit_status_free(&st);
    }
  }
  size_t n = h2s_server_request_count(srv);
  ASSERT_EQ(n, 20);
  for (size_t i = 0; i < n; i++)
    ASSERT_EQ(h2s_server_request(srv, i)->msg_bytes, sizes[i % 5]);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Bytes of DATA the server has written so far. */
static uint64_t flow_sent(h2s_server *srv) {
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  return st.data_bytes_sent;
}

/* Wait (at most |max_ms|) until the server's DATA output has not grown for
 * 300 ms; returns the bytes sent then. */
static uint64_t flow_sent_settled(h2s_server *srv, uint64_t max_ms) {
  uint64_t end = test_now_ms() + max_ms, last = flow_sent(srv);
  uint64_t since = test_now_ms();
  while (test_now_ms() < end) {
    usleep(20000);
    uint64_t now = flow_sent(srv);
    if (now != last) {
      last = now;
      since = test_now_ms();
    } else if (test_now_ms() - since >= 300) {
      break;
    }
  }
  return last;
}

#define SLOW_MSGS 2000
#define SLOW_SIZE 16384

/* A blocking call to the server stream, request sent and half-closed. */
static grit_call *flow_stream_call(grit_channel *ch) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 60000};
  grit_call *call = NULL;
  if (grit_call_start(ch, "/flow.Svc/Stream", &o, NULL, NULL, &call) !=
          GRIT_OK ||
      grit_call_send(call, "go", 2) != GRIT_OK ||
      grit_call_close_send(call) != GRIT_OK)
    fprintf(stderr, "flow: cannot start the stream call\n");
  return call;
}

/* SPEC FC-04: an application that stops reading a server stream stops the
 * server within one stream window of what it has read, and the stream
 * resumes when it reads again. Before, the window went back as bytes
 * arrived and all 32 MiB were sent into the call's queue. */
static void test_slow_reader_server_stream(void) {
  h2s_server *srv = bh_server("path=/flow.Svc/Stream count=2000 size=16384");
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  grit_call *call = flow_stream_call(ch);
  ASSERT_NOT_NULL(call);
  grit_bytes m = {0};
  ASSERT_OK(grit_call_recv(call, &m));
  ASSERT_EQ(m.len, SLOW_SIZE);
  grit_bytes_free(&m);
  /* Not reading: at most the 256 KiB queue bound plus the 4 MiB stream
   * window (and the frames under way) may come. */
  uint64_t sent = flow_sent_settled(srv, 10000);
  ASSERT_CMP(sent, <, (uint64_t)6 * MiB);
  ASSERT_CMP(sent, >, (uint64_t)256 * 1024);
  int got = 1;
  grit_err rv;
  while ((rv = grit_call_recv(call, &m)) == GRIT_OK) {
    ASSERT_EQ(m.len, SLOW_SIZE);
    grit_bytes_free(&m);
    got++;
  }
  ASSERT_EQ(got, SLOW_MSGS);
  grit_status st = {0};
  ASSERT_OK(grit_call_finish(call, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(call);
  ASSERT_EQ(flow_sent(srv), (uint64_t)SLOW_MSGS * (SLOW_SIZE + 5));
  /* The connection's window came back whole: another call goes through. */
  ASSERT_EQ(bh_unary(ch, "/flow.Svc/Echo", "again", 10000, NULL),
            GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* grit_call_finish discards unread messages: a paused stream must resume,
 * or the server could never send its status. */
static void test_finish_without_reading(void) {
  h2s_server *srv = bh_server("path=/flow.Svc/Stream count=2000 size=16384");
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  grit_call *call = flow_stream_call(ch);
  ASSERT_NOT_NULL(call);
  flow_sent_settled(srv, 10000); /* paused by now */
  grit_status st = {0};
  ASSERT_OK(grit_call_finish(call, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(call);
  ASSERT_EQ(flow_sent(srv), (uint64_t)SLOW_MSGS * (SLOW_SIZE + 5));
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Issue 12: the server moves SETTINGS_INITIAL_WINDOW_SIZE while a large
 * request is being sent: down to 1000 bytes while more than that is
 * unacknowledged (the stream window goes negative, RFC 9113 §6.9.2), up to
 * 4 MB, down to 16 KiB. Each change is per stream, on byte marks. */
static void flow_iws_changes(bool tls) {
  h2s_config cfg = {.initial_window_size = MiB,
                    .connection_window_size = 64 * MiB,
                    .script_text = "repeat=* size=10 iws_at=300000:1000 "
                                   "iws_at=1000000:4000000 "
                                   "iws_at=2500000:16384"};
  h2s_server *srv = flow_server(cfg, tls);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = flow_channel(srv, tls);
  ASSERT_NOT_NULL(ch);
  size_t sizes[] = {4 * MiB - 5, 3 * MiB + 17, 3 * MiB};
  size_t n = sizeof(sizes) / sizeof(sizes[0]);
  for (size_t i = 0; i < n; i++) {
    grit_status st = {0};
    ASSERT_EQ(flow_unary(ch, "/flow.Svc/Iws", sizes[i], CALL_MS, &st),
              GRIT_STATUS_OK);
    grit_status_free(&st);
  }
  ASSERT_EQ(h2s_server_request_count(srv), n);
  for (size_t i = 0; i < n; i++) {
    const h2s_request *r = h2s_server_request(srv, i);
    ASSERT(flow_intact(r, sizes[i]));
    ASSERT_EQ(r->iws_sent, 3);
    ASSERT_CMP(r->window_low, <, 0);
  }
  h2s_stats st = flow_stats(srv);
  ASSERT_EQ(st.connections, 1);
  ASSERT_EQ(st.settings_sent, 1 + 3 * n);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static void test_iws_changes_mid_stream(void) {
  flow_iws_changes(false);
}

static void test_iws_changes_mid_stream_tls(void) {
  flow_iws_changes(true);
}

/* Issue 12: default 65535-byte windows (stream and connection) returned in
 * WINDOW_UPDATEs of 1, 2, ... 100 bytes as the DATA arrives. */
static void test_tiny_window_updates(void) {
  h2s_config cfg = {.script_text = "repeat=* size=10 window_step=100"};
  h2s_server *srv = flow_server(cfg, false);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = flow_channel(srv, false);
  ASSERT_NOT_NULL(ch);
  size_t len = 2 * MiB + 3;
  grit_status st = {0};
  ASSERT_EQ(flow_unary(ch, "/flow.Svc/Tiny", len, CALL_MS, &st),
            GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT(flow_intact(h2s_server_request(srv, 0), len));
  /* Everything past the first 64 KiB needed those updates (average 50.5
   * bytes each, stream and connection). */
  h2s_stats hs = flow_stats(srv);
  ASSERT_CMP(hs.window_updates_sent, >=, 2 * (len - 65535) / 100);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Issue 12: a server that reads slowly: 64 KiB stream and connection
 * windows it refills only every 50 ms. A 4 MiB request needs 63 refills;
 * it completes, and the process (grit and the in-process server, which
 * keeps the whole request) grows by far less than 64 MiB. */
static void test_slow_reader_bounded_memory(void) {
  h2s_config cfg = {.script_text = "repeat=* size=10 window_every=50"};
  h2s_server *srv = flow_server(cfg, false);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = flow_channel(srv, false);
  ASSERT_NOT_NULL(ch);
  grit_status st = {0};
  ASSERT_EQ(flow_unary(ch, "/flow.Svc/Warm", 10, CALL_MS, &st), GRIT_STATUS_OK);
  grit_status_free(&st);
  uint64_t rss0 = flow_rss_kib();
  ASSERT_CMP(rss0, >, 0);
  size_t len = 4 * MiB;
  uint64_t t0 = test_now_ms();
  ASSERT_EQ(flow_unary(ch, "/flow.Svc/Slow", len, CALL_MS, &st),
            GRIT_STATUS_OK);
  grit_status_free(&st);
  uint64_t took = test_now_ms() - t0;
  uint64_t rss1 = flow_rss_kib();
  fprintf(stderr,
          "slow reader: 4 MiB in %" PRIu64 " ms, RSS %" PRIu64 " -> %" PRIu64
          " KiB\n",
          took, rss0, rss1);
  ASSERT(flow_intact(h2s_server_request(srv, 1), len));
  /* The server paced it: 63 refills 50 ms apart at the very least. */
  const h2s_request *r = h2s_server_request(srv, 1);
  ASSERT_CMP(r->end_ms - r->headers_ms, >=, 63 * 50);
  ASSERT_CMP(rss1, <, rss0 + 64 * 1024);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Issue 12: the server's SETTINGS_MAX_FRAME_SIZE (its receive limit,
 * which bounds our DATA frames) at the minimum and the maximum: large
 * requests and large responses complete, and no DATA frame is larger. */
static void flow_max_frame(uint32_t max_frame) {
  h2s_config cfg = {.initial_window_size = 16 * MiB,
                    .connection_window_size = 64 * MiB,
                    .settings = {{5, max_frame}}, /* MAX_FRAME_SIZE */
                    .script_text = "repeat=* size=3145728"};
  h2s_server *srv = flow_server(cfg, false);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = flow_channel(srv, false);
  ASSERT_NOT_NULL(ch);
  size_t sizes[] = {4 * MiB - 5, 3 * MiB + 17, 1};
  size_t n = sizeof(sizes) / sizeof(sizes[0]);
  for (size_t i = 0; i < n; i++) {
    grit_status st = {0};
    size_t resp_len = 0;
    ASSERT_EQ(
        flow_call(ch, "/flow.Svc/Frame", sizes[i], CALL_MS, &st, &resp_len),
        GRIT_STATUS_OK);
    grit_status_free(&st);
    ASSERT_EQ(resp_len, 3 * MiB);
  }
  for (size_t i = 0; i < n; i++)
    ASSERT(flow_intact(h2s_server_request(srv, i), sizes[i]));
  h2s_stats hs = flow_stats(srv);
  ASSERT_EQ(hs.connections, 1);
  ASSERT_CMP(hs.max_data_frame_received, >, 0);
  ASSERT_CMP(hs.max_data_frame_received, <=, max_frame);
  /* At least one frame per max_frame bytes of request. */
  ASSERT_CMP(hs.data_frames_received, >=, (7 * MiB) / max_frame);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static void test_max_frame_size_16k(void) {
  flow_max_frame(16384);
}

static void test_max_frame_size_16m(void) {
  flow_max_frame(16777215);
}

/* Completions of flow_burst's calls, counted on the I/O thread. */
typedef struct flow_burst_state {
  atomic_int done;
  atomic_int ok;
  atomic_int transparent;
} flow_burst_state;

static void flow_burst_cb(const grit_status *st, const uint8_t *resp,
                          size_t resp_len, const grit_call_info *info,
                          void *user_data) {
  flow_burst_state *b = user_data;
  if (st->code == GRIT_STATUS_OK && resp_len == 3 && resp &&
      memcmp(resp, "abc", 3) == 0)
    atomic_fetch_add(&b->ok, 1);
  else
    fprintf(stderr, "call failed: %s %s\n", grit_status_code_name(st->code),
            st->message ? st->message : "");
  atomic_fetch_add(&b->transparent, (int)info->transparent_retries);
  atomic_fetch_add(&b->done, 1);
}

static bool flow_requests_at_least(h2s_server *srv, void *arg) {
  return h2s_server_request_count(srv) >= *(size_t *)arg;
}

/* Starts |n| async calls on |ch| at once. */
static bool flow_burst_start(grit_channel *ch, flow_burst_state *b, int n) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  for (int i = 0; i < n; i++)
    if (grit_unary_call_async(ch, "/flow.Svc/Limit", "abc", 3, &o,
                              flow_burst_cb, b) != GRIT_OK)
      return false;
  return true;
}

static bool flow_burst_wait(flow_burst_state *b, int n, uint64_t timeout_ms) {
  uint64_t end = test_now_ms() + timeout_ms;
  while (atomic_load(&b->done) < n && test_now_ms() < end)
    usleep(2000);
  return atomic_load(&b->done) == n;
}

/* Issue 12: SETTINGS_MAX_CONCURRENT_STREAMS with 500 calls in flight on
 * one channel: every call waits for a free stream and completes; the
 * server never has more streams open than the limit. */
static void flow_mcs(uint32_t limit, const char *script) {
  h2s_config cfg = {.max_concurrent_streams = limit, .script_text = script};
  h2s_server *srv = flow_server(cfg, false);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = flow_channel(srv, false);
  ASSERT_NOT_NULL(ch);
  /* Connected, so the server's SETTINGS are known before the burst. */
  grit_status st = {0};
  ASSERT_EQ(flow_unary(ch, "/flow.Svc/Warm", 1, CALL_MS, &st), GRIT_STATUS_OK);
  grit_status_free(&st);
  enum { N = 500 };
  flow_burst_state b = {0};
  ASSERT(flow_burst_start(ch, &b, N));
  ASSERT(flow_burst_wait(&b, N, 2 * CALL_MS));
  ASSERT_EQ(atomic_load(&b.ok), N);
  ASSERT_EQ(atomic_load(&b.transparent), 0);
  ASSERT_EQ(h2s_server_request_count(srv), N + 1);
  h2s_stats hs = flow_stats(srv);
  ASSERT_EQ(hs.connections, 1);
  ASSERT_EQ(hs.rst_received, 0);
  ASSERT_CMP(hs.max_open_streams, <=, limit);
  if (limit > 1) /* the calls did run side by side */
    ASSERT_CMP(hs.max_open_streams, >, 1);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static void test_max_concurrent_streams_1(void) {
  flow_mcs(1, "path=/flow.Svc/Limit repeat=* text=abc");
}

static void test_max_concurrent_streams_10(void) {
  flow_mcs(10, "path=/flow.Svc/Limit repeat=* text=abc delay=5");
}

/* Issue 12: the limit changes mid-connection, 10 -> 2 -> 20, while 500
 * calls are in flight. Streams the client opened before it saw the lower
 * limit may be refused (REFUSED_STREAM, retried transparently); every
 * call still completes OK on the one connection. Once the client has read
 * the lower limit it opens no third stream: with R1 requests seen when the
 * SETTINGS went out, the client had opened at most R1 + 10 streams (its
 * limit was 10) and can open at most 10 more on responses sent before the
 * SETTINGS, so requests R1 + 20 up to the raise saw at most 2 open. */
static void test_max_concurrent_streams_change(void) {
  h2s_config cfg = {.max_concurrent_streams = 10,
                    .script_text = "path=/flow.Svc/Limit repeat=* text=abc "
                                   "delay=5"};
  h2s_server *srv = flow_server(cfg, false);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = flow_channel(srv, false);
  ASSERT_NOT_NULL(ch);
  grit_status st = {0};
  ASSERT_EQ(flow_unary(ch, "/flow.Svc/Warm", 1, CALL_MS, &st), GRIT_STATUS_OK);
  grit_status_free(&st);
  enum { N = 500 };
  flow_burst_state b = {0};
  ASSERT(flow_burst_start(ch, &b, N));
  size_t seen = 100;
  ASSERT(h2s_server_wait(srv, flow_requests_at_least, &seen, CALL_MS));
  h2s_server_settings(srv, (h2s_setting[]){{3, 2}, {0}});
  size_t r1 = h2s_server_request_count(srv);
  seen = 350;
  ASSERT(h2s_server_wait(srv, flow_requests_at_least, &seen, CALL_MS));
  size_t r2 = h2s_server_request_count(srv);
  h2s_server_settings(srv, (h2s_setting[]){{3, 20}, {0}});
  ASSERT(flow_burst_wait(&b, N, 2 * CALL_MS));
  ASSERT_EQ(atomic_load(&b.ok), N);
  h2s_stats hs = flow_stats(srv);
  ASSERT_EQ(hs.connections, 1);
  ASSERT_EQ(hs.settings_sent, 3);
  ASSERT_CMP(hs.max_open_streams, <=, 20);
  /* Each call was processed once; each stream the server refused (before
   * its log sees it) was replayed once, transparently. */
  ASSERT_EQ(h2s_server_request_count(srv), N + 1);
  ASSERT_EQ((uint64_t)atomic_load(&b.transparent), hs.refused_sent);
  ASSERT_CMP(r2, >, r1 + 20);
  for (size_t i = r1 + 20; i < r2; i++)
    ASSERT_CMP(h2s_server_request(srv, i)->open_streams, <=, 2);
  fprintf(stderr,
          "limit change: lowered at request %zu, raised at %zu, %d "
          "transparent retries, max open %" PRIu64 "\n",
          r1, r2, atomic_load(&b.transparent), hs.max_open_streams);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Issue 12, RFC 9113 §8.1: the server answers while a 16 MiB request body
 * is still being sent, with windows wide enough (16 MiB stream, 64 MiB
 * connection) that only the client can stop the body: |script| answers at
 * HEADERS. The call ends with the server's status at once; the server's
 * received bytes stop growing far short of the body (grit writes up to
 * 1 MiB per gather, so a few MiB already in the socket still arrive); a
 * next call succeeds on the same connection. */
static void flow_early(const char *script, grit_status_code want,
                       const char *want_msg, size_t want_resp) {
  h2s_config cfg = {.initial_window_size = 16 * MiB,
                    .connection_window_size = 64 * MiB,
                    .script_text = script};
  h2s_server *srv = flow_server(cfg, false);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = flow_channel(srv, false);
  ASSERT_NOT_NULL(ch);
  grit_status st = {0};
  ASSERT_EQ(flow_unary(ch, "/flow.Svc/Warm", 10, CALL_MS, &st), GRIT_STATUS_OK);
  grit_status_free(&st);
  uint64_t before = flow_stats(srv).bytes_received;
  size_t len = 16 * MiB, resp_len = 0;
  uint8_t *req = flow_pattern(len);
  uint64_t t0 = test_now_ms();
  grit_status_code code =
      flow_call_buf(ch, "/flow.Svc/Early", req, len, CALL_MS, &st, &resp_len);
  uint64_t took = test_now_ms() - t0;
  free(req);
  ASSERT_EQ(code, want);
  ASSERT_STR_EQ(st.message, want_msg);
  grit_status_free(&st);
  ASSERT_EQ(resp_len, want_resp);
  ASSERT_CMP(took, <, 2000);
  /* Nothing more on that stream once the call is over: the count settles
   * (two samples 200 ms apart agree) far short of the body. */
  uint64_t at_end = flow_stats(srv).bytes_received - before, later = at_end;
  bool settled = false;
  for (int i = 0; i < 25 && !settled; i++) {
    usleep(200 * 1000);
    uint64_t now = flow_stats(srv).bytes_received - before;
    settled = now == later;
    later = now;
  }
  fprintf(stderr,
          "early: %" PRIu64 " ms, server got %" PRIu64
          " bytes at the end, %" PRIu64 " in all\n",
          took, at_end, later);
  ASSERT(settled);
  ASSERT_CMP(later, <, len / 2);
  const h2s_request *r = h2s_server_request(srv, 1);
  ASSERT(!r->half_closed);
  ASSERT_CMP(r->data_bytes, <, len / 2);
  ASSERT_EQ(r->n_msgs, 0);
  /* The connection stays usable. */
  ASSERT_EQ(flow_unary(ch, "/flow.Svc/After", 1000, CALL_MS, &st),
            GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT(flow_intact(h2s_server_request(srv, 2), 1000));
  h2s_stats hs = flow_stats(srv);
  ASSERT_EQ(hs.connections, 1);
  ASSERT_EQ(hs.goaways_received, 0);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static void test_early_trailers_only(void) {
  flow_early("path=/flow.Svc/Early at_headers trailers_only "
             "status=RESOURCE_EXHAUSTED message=too%20large",
             GRIT_STATUS_RESOURCE_EXHAUSTED, "too large", 0);
}

static void test_early_headers_then_status(void) {
  flow_early("path=/flow.Svc/Early at_headers status=RESOURCE_EXHAUSTED "
             "message=too%20large",
             GRIT_STATUS_RESOURCE_EXHAUSTED, "too large", 0);
}

/* The full response (a message and OK) then RST_STREAM(NO_ERROR): the
 * call keeps the response (RFC 9113 §8.1). */
static void test_early_response_then_rst_no_error(void) {
  flow_early("path=/flow.Svc/Early at_headers size=7 message=done",
             GRIT_STATUS_OK, "done", 7);
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"silent_wide_window_peer", test_silent_wide_window_peer},
      {"slow_reader_server_stream", test_slow_reader_server_stream},
      {"finish_without_reading", test_finish_without_reading},
      {"iws_changes_mid_stream", test_iws_changes_mid_stream},
      {"iws_changes_mid_stream_tls", test_iws_changes_mid_stream_tls},
      {"tiny_window_updates", test_tiny_window_updates},
      {"slow_reader_bounded_memory", test_slow_reader_bounded_memory},
      {"max_frame_size_16k", test_max_frame_size_16k},
      {"max_frame_size_16m", test_max_frame_size_16m},
      {"max_concurrent_streams_1", test_max_concurrent_streams_1},
      {"max_concurrent_streams_10", test_max_concurrent_streams_10},
      {"max_concurrent_streams_change", test_max_concurrent_streams_change},
      {"early_trailers_only", test_early_trailers_only},
      {"early_headers_then_status", test_early_headers_then_status},
      {"early_response_then_rst_no_error",
       test_early_response_then_rst_no_error},
      {NULL, NULL},
  };
  int rc = test_main(cases, argc, argv);
  if (g_certs[0]) {
    char cmd[sizeof(g_certs) + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_certs);
    if (system(cmd) != 0)
      fprintf(stderr, "cannot remove %s\n", g_certs);
  }
  return rc;
}
