/*
 * Configured retries against a real gRPC server: test/peers/retry_server.py
 * (grpcio), which fails the first N attempts of each call key with a chosen
 * status and pushback and logs what each attempt carried. Proves retry then
 * success (SPEC RT-02, RT-08), non-retryable codes (RT-14), pushback
 * (RT-04), maxAttempts exhausted (RT-02), streaming replay (RT-13) and
 * idempotency keys (ID-01) against grpcio's wire behaviour. Exits 77
 * (skipped) when /usr/bin/python3 lacks grpc.
 */
#include <grit/grit.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pypeer.h"
#include "test/harness.h"

#define CALL_MS 10000

static pypeer g_peer = {.pid = -1, .stdin_fd = -1};
#define g_port g_peer.port

#define now_ms pypeer_now_ms

static bool server_start(void) {
  return pypeer_start(&g_peer, "retry_server.py");
}

static void server_stop(void) {
  pypeer_stop(&g_peer);
}

/* ---- observer ---- */

typedef struct obs {
  pthread_mutex_t mu;
  size_t n;
  grit_attempt_kind kind[32];
  grit_attempt_reason reason[32];
  grit_status_code code[32];
  uint64_t backoff_ms[32];
  bool pushback[32];
} obs;

static void obs_cb(const grit_attempt_record *r, void *ud) {
  obs *o = ud;
  pthread_mutex_lock(&o->mu);
  if (o->n < 32) {
    o->kind[o->n] = r->kind;
    o->reason[o->n] = r->reason;
    o->code[o->n] = r->code;
    o->backoff_ms[o->n] = r->backoff_ms;
    o->pushback[o->n] = r->pushback;
    o->n++;
  }
  pthread_mutex_unlock(&o->mu);
}

static obs g_obs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void obs_reset(void) {
  pthread_mutex_lock(&g_obs.mu);
  g_obs.n = 0;
  pthread_mutex_unlock(&g_obs.mu);
}

/* A channel with a retryPolicy for retry.Svc (10 ms backoff, x2, max 50),
 * idempotency keys on, the observer installed. */
static grit_channel *chan(int max_attempts, const char *codes) {
  char cfg[512], target[64];
  snprintf(cfg, sizeof(cfg),
           "{\"methodConfig\":[{\"name\":[{\"service\":\"retry.Svc\","
           "\"method\":\"Call\"},{\"service\":\"retry.Svc\","
           "\"method\":\"Stream\"}],"
           "\"retryPolicy\":{\"maxAttempts\":%d,\"initialBackoff\":\"0.01s\","
           "\"maxBackoff\":\"0.05s\",\"backoffMultiplier\":2,"
           "\"retryableStatusCodes\":[%s]}}]}",
           max_attempts, codes);
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%u", (unsigned)g_port);
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, cfg);
  grit_channel_args_set_int(a, GRIT_ARG_IDEMPOTENCY_KEYS, 1);
  grit_channel_args_set_observer(a, obs_cb, &g_obs);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, a, &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel: %s\n", d.reason);
  grit_channel_args_destroy(a);
  obs_reset();
  return ch;
}

/* Metadata from "k=v" pairs, NULL-terminated. */
static grit_metadata *md_of(const char *const *kv) {
  grit_metadata *md = NULL;
  grit_metadata_create(&md);
  for (; md && *kv; kv++) {
    const char *eq = strchr(*kv, '=');
    char key[64];
    snprintf(key, sizeof(key), "%.*s", (int)(eq - *kv), *kv);
    grit_metadata_add(md, key, eq + 1, strlen(eq + 1));
  }
  return md;
}

static uint64_t g_call_ms = CALL_MS; /* the next call's timeout */

/* A unary retry.Svc/Call with metadata |kv|; fills |st| and |info|. */
static grit_status_code call(grit_channel *ch, const char *const *kv,
                             grit_bytes *resp, grit_status *st,
                             grit_call_info *info) {
  grit_metadata *md = md_of(kv);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = g_call_ms,
                      .metadata = md};
  g_call_ms = CALL_MS;
  grit_call *c = NULL;
  grit_status_code code = (grit_status_code)-1;
  if (grit_call_start(ch, "/retry.Svc/Call", &o, NULL, NULL, &c) == GRIT_OK) {
    grit_call_send(c, "ping", 4);
    grit_call_close_send(c);
    grit_bytes b = {0};
    if (grit_call_recv(c, &b) == GRIT_OK && resp)
      *resp = b;
    else
      grit_bytes_free(&b);
    if (grit_call_finish(c, st) == GRIT_OK)
      code = st->code;
    grit_call_get_info(c, info);
    grit_call_destroy(c);
  }
  grit_metadata_destroy(md);
  return code;
}

/* The server's log for |key|, one line per attempt, in |out|. */
static size_t server_log(grit_channel *ch, const char *key, char *out,
                         size_t len) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  grit_bytes resp = {0};
  grit_status st = {0};
  out[0] = '\0';
  pthread_mutex_lock(&g_obs.mu);
  size_t n0 = g_obs.n; /* the Log call's own record is not the test's */
  pthread_mutex_unlock(&g_obs.mu);
  grit_err rv = grit_unary_call(ch, "/retry.Svc/Log", key, strlen(key), &o,
                                &resp, &st, NULL);
  pthread_mutex_lock(&g_obs.mu);
  g_obs.n = n0;
  pthread_mutex_unlock(&g_obs.mu);
  if (rv != GRIT_OK)
    return 0;
  size_t lines = 0;
  if (st.code == GRIT_STATUS_OK) {
    snprintf(out, len, "%.*s", (int)resp.len, (const char *)resp.data);
    for (size_t i = 0; i < resp.len; i++)
      lines += resp.data[i] == '\n';
  }
  grit_bytes_free(&resp);
  grit_status_free(&st);
  return lines;
}

/* Line |i| (0-based) of |log| into |out|. */
static const char *log_line(const char *log, size_t i, char *out, size_t len) {
  const char *p = log;
  for (; i > 0 && p; i--) {
    p = strchr(p, '\n');
    if (p)
      p++;
  }
  if (!p)
    p = "";
  const char *e = strchr(p, '\n');
  snprintf(out, len, "%.*s", e ? (int)(e - p) : (int)strlen(p), p);
  return out;
}

/* "prev=P idem=K OUTCOME" -> the idem value. */
static const char *idem_of(const char *line, char *out, size_t len) {
  const char *p = strstr(line, "idem=");
  out[0] = '\0';
  if (p) {
    p += 5;
    const char *e = strchr(p, ' ');
    snprintf(out, len, "%.*s", e ? (int)(e - p) : (int)strlen(p), p);
  }
  return out;
}

/* ---- cases ---- */

/* RT-02, RT-08, ID-01: two UNAVAILABLE then OK, against grpcio. */
static void test_retry_then_ok(void) {
  grit_channel *ch = chan(4, "\"UNAVAILABLE\"");
  ASSERT_NOT_NULL(ch);
  static const char *const kv[] = {"x-call-key=k-ok", "x-fail=2", NULL};
  grit_bytes resp = {0};
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(call(ch, kv, &resp, &st, &info), GRIT_STATUS_OK);
  ASSERT_EQ(resp.len, 4);
  ASSERT_MEM_EQ(resp.data, "ping", 4);
  grit_bytes_free(&resp);
  grit_status_free(&st);
  ASSERT_EQ(info.attempts, 3);
  char log[1024], l[256], k0[64], k[64];
  ASSERT_EQ(server_log(ch, "k-ok", log, sizeof(log)), 3);
  ASSERT(strncmp(log_line(log, 0, l, sizeof(l)), "prev=- ", 7) == 0);
  ASSERT(strstr(l, " 14") != NULL);
  idem_of(l, k0, sizeof(k0));
  ASSERT_EQ(strlen(k0), 32); /* ID-01: 128 random bits in hex */
  ASSERT(strncmp(log_line(log, 1, l, sizeof(l)), "prev=1 ", 7) == 0);
  ASSERT_STR_EQ(idem_of(l, k, sizeof(k)), k0);
  ASSERT(strncmp(log_line(log, 2, l, sizeof(l)), "prev=2 ", 7) == 0);
  ASSERT_STR_EQ(idem_of(l, k, sizeof(k)), k0);
  ASSERT(strstr(l, " ok") != NULL);
  ASSERT_EQ(g_obs.n, 3);
  ASSERT_EQ(g_obs.kind[1], GRIT_ATTEMPT_RETRY);
  ASSERT_EQ(g_obs.reason[2], GRIT_REASON_OK);
  grit_channel_destroy(ch);
}

/* RT-14: a code not listed is returned at once. */
static void test_non_retryable(void) {
  grit_channel *ch = chan(4, "\"UNAVAILABLE\"");
  ASSERT_NOT_NULL(ch);
  static const char *const kv[] = {"x-call-key=k-nr", "x-fail=1",
                                   "x-code=INVALID_ARGUMENT",
                                   "x-message=bad request", NULL};
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(call(ch, kv, NULL, &st, &info), GRIT_STATUS_INVALID_ARGUMENT);
  ASSERT_STR_EQ(st.message, "bad request");
  grit_status_free(&st);
  ASSERT_EQ(info.attempts, 1);
  char log[1024];
  ASSERT_EQ(server_log(ch, "k-nr", log, sizeof(log)), 1);
  ASSERT_EQ(g_obs.n, 1);
  ASSERT_EQ(g_obs.reason[0], GRIT_REASON_NON_RETRYABLE);
  grit_channel_destroy(ch);
}

/* RT-04: grpcio's grpc-retry-pushback-ms trailer: negative stops the
 * retries; a delay is honoured. */
static void test_pushback(void) {
  grit_channel *ch = chan(4, "\"UNAVAILABLE\"");
  ASSERT_NOT_NULL(ch);
  static const char *const stop[] = {"x-call-key=k-pb-stop", "x-fail=3",
                                     "x-pushback=-1", NULL};
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(call(ch, stop, NULL, &st, &info), GRIT_STATUS_UNAVAILABLE);
  grit_status_free(&st);
  ASSERT_EQ(info.attempts, 1);
  char log[1024];
  ASSERT_EQ(server_log(ch, "k-pb-stop", log, sizeof(log)), 1);
  ASSERT_EQ(g_obs.n, 1);
  ASSERT_EQ(g_obs.reason[0], GRIT_REASON_PUSHBACK);

  obs_reset();
  static const char *const delay[] = {"x-call-key=k-pb-delay", "x-fail=1",
                                      "x-pushback=250", NULL};
  uint64_t t0 = now_ms();
  ASSERT_EQ(call(ch, delay, NULL, &st, &info), GRIT_STATUS_OK);
  ASSERT_CMP(now_ms() - t0, >=, 250);
  grit_status_free(&st);
  ASSERT_EQ(info.attempts, 2);
  ASSERT_EQ(info.backoff_ms, 250);
  ASSERT_EQ(server_log(ch, "k-pb-delay", log, sizeof(log)), 2);
  ASSERT_EQ(g_obs.n, 2);
  ASSERT(g_obs.pushback[1]);
  ASSERT_EQ(g_obs.backoff_ms[1], 250);
  grit_channel_destroy(ch);
}

/* RT-02: maxAttempts reached: the last attempt's status and message. */
static void test_exhausted(void) {
  grit_channel *ch = chan(3, "\"UNAVAILABLE\"");
  ASSERT_NOT_NULL(ch);
  static const char *const kv[] = {"x-call-key=k-ex", "x-fail=10", NULL};
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(call(ch, kv, NULL, &st, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_STR_EQ(st.message, "attempt 3 failed");
  grit_status_free(&st);
  ASSERT_EQ(info.attempts, 3);
  char log[1024], l[256];
  ASSERT_EQ(server_log(ch, "k-ex", log, sizeof(log)), 3);
  ASSERT(strncmp(log_line(log, 2, l, sizeof(l)), "prev=2 ", 7) == 0);
  ASSERT_EQ(g_obs.n, 3);
  ASSERT_EQ(g_obs.reason[2], GRIT_REASON_EXHAUSTED);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.retries, 2);
  ASSERT_EQ(s.retries_per_call[1], 1);
  grit_channel_destroy(ch);
}

/* RT-13: a client stream failed after grpcio read it all is replayed in
 * order. */
static void test_stream_replay(void) {
  grit_channel *ch = chan(3, "\"UNAVAILABLE\"");
  ASSERT_NOT_NULL(ch);
  static const char *const kv[] = {"x-call-key=k-st", "x-fail=1", NULL};
  grit_metadata *md = md_of(kv);
  grit_call_opts o = {
      .version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS, .metadata = md};
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/retry.Svc/Stream", &o, NULL, NULL, &c));
  grit_metadata_destroy(md);
  ASSERT_OK(grit_call_send(c, "alpha", 5));
  ASSERT_OK(grit_call_send(c, "beta", 4));
  ASSERT_OK(grit_call_send(c, "gamma", 5));
  ASSERT_OK(grit_call_close_send(c));
  grit_bytes b = {0};
  ASSERT_OK(grit_call_recv(c, &b));
  ASSERT_EQ(b.len, 16);
  ASSERT_MEM_EQ(b.data, "alpha,beta,gamma", 16);
  grit_bytes_free(&b);
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(c);
  char log[1024];
  ASSERT_EQ(server_log(ch, "k-st", log, sizeof(log)), 2);
  grit_channel_destroy(ch);
}

/* RT-09: a pushback past the deadline makes no further attempt; the call
 * ends DEADLINE_EXCEEDED at its deadline, not after the pushback. */
static void test_pushback_past_deadline(void) {
  grit_channel *ch = chan(4, "\"UNAVAILABLE\"");
  ASSERT_NOT_NULL(ch);
  static const char *const kv[] = {"x-call-key=k-pb-dl", "x-fail=3",
                                   "x-pushback=3000", NULL};
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  g_call_ms = 600;
  uint64_t t0 = now_ms();
  ASSERT_EQ(call(ch, kv, NULL, &st, &info), GRIT_STATUS_DEADLINE_EXCEEDED);
  uint64_t took = now_ms() - t0;
  ASSERT_CMP(took, >=, 550);
  ASSERT_CMP(took, <, 2500);
  grit_status_free(&st);
  ASSERT_EQ(info.attempts, 1);
  char log[1024];
  ASSERT_EQ(server_log(ch, "k-pb-dl", log, sizeof(log)), 1);
  ASSERT_EQ(g_obs.n, 1);
  ASSERT_EQ(g_obs.reason[0], GRIT_REASON_DEADLINE);
  grit_channel_destroy(ch);
}

/* RT-14: a server's DEADLINE_EXCEEDED is retried when the policy lists
 * it, and grpcio sees the same idempotency key again (ID-01). */
static void test_listed_deadline_code(void) {
  grit_channel *ch = chan(3, "\"UNAVAILABLE\",\"deadline_exceeded\"");
  ASSERT_NOT_NULL(ch);
  static const char *const kv[] = {"x-call-key=k-dl", "x-fail=1",
                                   "x-code=DEADLINE_EXCEEDED", NULL};
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(call(ch, kv, NULL, &st, &info), GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_EQ(info.attempts, 2);
  char log[1024], l[256], k0[64], k1[64];
  ASSERT_EQ(server_log(ch, "k-dl", log, sizeof(log)), 2);
  ASSERT(strstr(log_line(log, 0, l, sizeof(l)), " 4") != NULL);
  idem_of(l, k0, sizeof(k0));
  ASSERT_STR_EQ(idem_of(log_line(log, 1, l, sizeof(l)), k1, sizeof(k1)), k0);
  grit_channel_destroy(ch);
}

/* SC-10: maxAttempts above the cap (default 5) is lowered to it. */
static void test_max_attempts_cap(void) {
  grit_channel *ch = chan(9, "\"UNAVAILABLE\"");
  ASSERT_NOT_NULL(ch);
  static const char *const kv[] = {"x-call-key=k-cap", "x-fail=20", NULL};
  grit_status st = {0};
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(call(ch, kv, NULL, &st, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_STR_EQ(st.message, "attempt 5 failed");
  grit_status_free(&st);
  ASSERT_EQ(info.attempts, 5);
  char log[1024];
  ASSERT_EQ(server_log(ch, "k-cap", log, sizeof(log)), 5);
  grit_channel_destroy(ch);
}

static const test_case tests[] = {
    {"retry_then_ok", test_retry_then_ok},
    {"non_retryable", test_non_retryable},
    {"pushback", test_pushback},
    {"exhausted", test_exhausted},
    {"stream_replay", test_stream_replay},
    {"pushback_past_deadline", test_pushback_past_deadline},
    {"listed_deadline_code", test_listed_deadline_code},
    {"max_attempts_cap", test_max_attempts_cap},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  if (!pypeer_has_grpc()) {
    fprintf(stderr, "skip: %s has no grpc module\n", PYPEER_PYTHON);
    return 77;
  }
  if (!server_start()) {
    server_stop();
    return 1;
  }
  int rv = test_main(tests, argc, argv);
  server_stop();
  return rv;
}
