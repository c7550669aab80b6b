/*
 * Hedging against a real gRPC server (SPEC HG-01..HG-04, HG-09): grpcio
 * running test/peers/hedge_server.py, whose generic handlers delay or fail
 * chosen attempts by grpc-previous-rpc-attempts and log each attempt (with
 * whether grpcio saw it cancelled). Exits 77 (skipped) when /usr/bin/python3
 * has no grpc module.
 */
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bh.h"
#include "pypeer.h"

#define CALL_MS 5000
#define M "/pkg.Svc/M"
#define MS "/pkg.Svc/MStream"

static pypeer g_peer = {.pid = -1, .stdin_fd = -1};
#define g_port g_peer.port

#define now_ms pypeer_now_ms

static bool server_start(void) {
  return pypeer_start(&g_peer, "hedge_server.py");
}

static void server_stop(void) {
  pypeer_stop(&g_peer);
}

/* Start times of the attempts of |M| the client made (observer, MX-03),
 * by attempt number: the client's clock, not grpcio's, whose handlers
 * start as its thread pool gets to them. */
#define MAX_ATTEMPT 8
static pthread_mutex_t g_obs_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_start_us[MAX_ATTEMPT + 1];

static void observe(const grit_attempt_record *r, void *ud) {
  (void)ud;
  if (strcmp(r->method, M) != 0 || r->attempt > MAX_ATTEMPT)
    return;
  pthread_mutex_lock(&g_obs_mu);
  g_start_us[r->attempt] = r->start_us;
  pthread_mutex_unlock(&g_obs_mu);
}

/* Start of attempt |n| in µs, 0 if none was recorded. */
static uint64_t start_us(uint32_t n) {
  pthread_mutex_lock(&g_obs_mu);
  uint64_t t = n <= MAX_ATTEMPT ? g_start_us[n] : 0;
  pthread_mutex_unlock(&g_obs_mu);
  return t;
}

static grit_channel *chan(int max_attempts, const char *delay) {
  char cfg[512], target[64];
  snprintf(cfg, sizeof(cfg),
           "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Svc\"}],"
           "\"hedgingPolicy\":{\"maxAttempts\":%d,\"hedgingDelay\":\"%s\","
           "\"nonFatalStatusCodes\":[\"UNAVAILABLE\"]}}]}",
           max_attempts, delay);
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%u", (unsigned)g_port);
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, cfg);
  pthread_mutex_lock(&g_obs_mu);
  memset(g_start_us, 0, sizeof(g_start_us));
  pthread_mutex_unlock(&g_obs_mu);
  grit_channel_args_set_observer(a, observe, NULL);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, a, &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel: %s\n", d.reason);
  grit_channel_args_destroy(a);
  /* Start from an empty log. */
  bh_unary(ch, "/hedge.Log/Clear", "", CALL_MS, NULL);
  return ch;
}

/* One attempt as the server logged it. */
typedef struct entry {
  char method[64];
  int prev;
  long start, end;
  char outcome[16];
  char msgs[256];
} entry;

/* Fetch the log's entries for |method| into |e| (at most |max|). */
static size_t log_get(grit_channel *ch, const char *method, entry *e,
                      size_t max) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  grit_bytes resp = {0};
  grit_status st;
  if (grit_unary_call(ch, "/hedge.Log/Get", "", 0, &o, &resp, &st, NULL) !=
      GRIT_OK)
    return 0;
  grit_status_free(&st);
  size_t n = 0;
  char *text = strndup((const char *)resp.data, resp.len);
  grit_bytes_free(&resp);
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line && n < max;
       line = strtok_r(NULL, "\n", &save)) {
    entry x = {.msgs = ""};
    if (sscanf(line, "%63s prev=%d start=%ld end=%ld %15s msgs=%255s", x.method,
               &x.prev, &x.start, &x.end, x.outcome, x.msgs) < 5)
      continue;
    if (strcmp(x.method, method) == 0)
      e[n++] = x;
  }
  free(text);
  return n;
}

/* Wait (bounded) until |want| attempts of |method| are logged. */
static size_t log_wait(grit_channel *ch, const char *method, entry *e,
                       size_t want) {
  /* Bounded at 15 s: the grpcio server logs a cancelled attempt when its
   * handler notices, which a loaded machine can delay by seconds. */
  size_t n = 0;
  for (int i = 0; i < 750 && (n = log_get(ch, method, e, 8)) < want; i++)
    usleep(20 * 1000);
  return n;
}

static const entry *by_prev(const entry *e, size_t n, int prev) {
  for (size_t i = 0; i < n; i++)
    if (e[i].prev == prev)
      return &e[i];
  return NULL;
}

static grit_status_code unary(grit_channel *ch, const char *body,
                              uint64_t timeout_ms, grit_call_info *info) {
  grit_call *c;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms};
  if (grit_call_start(ch, M, &o, NULL, NULL, &c) != GRIT_OK)
    return (grit_status_code)-1;
  grit_call_send(c, body, strlen(body));
  grit_call_close_send(c);
  grit_status st;
  grit_call_finish(c, &st);
  if (info)
    grit_call_get_info(c, info);
  grit_call_destroy(c);
  grit_status_code code = st.code;
  grit_status_free(&st);
  return code;
}

static bool outcome_is(const entry *e, const char *what) {
  return e && strcmp(e->outcome, what) == 0;
}

/* HG-02: the second hedge answers first; grpcio sees the first cancelled. */
static void test_second_hedge_wins(void) {
  grit_channel *ch = chan(2, "0.05s");
  uint64_t t0 = now_ms();
  ASSERT_EQ(unary(ch, "d0=3000", CALL_MS, NULL), GRIT_STATUS_OK);
  ASSERT_CMP(now_ms() - t0, <, 2500); /* not attempt 0's 3 s */
  entry e[8];
  ASSERT_EQ(log_wait(ch, M, e, 2), 2);
  ASSERT(outcome_is(by_prev(e, 2, 0), "cancelled"));
  ASSERT(outcome_is(by_prev(e, 2, 1), "ok"));
  grit_channel_destroy(ch);
}

/* HG-01, RT-08: attempt k carries grpc-previous-rpc-attempts k-1, and the
 * client starts it (k-1) x hedgingDelay after the first (its own clock:
 * grpcio's handler start times carry its thread pool's delays). */
static void test_previous_rpc_attempts(void) {
  grit_channel *ch = chan(3, "0.1s"); /* connected and idle */
  uint64_t t0_us = now_ms() * 1000;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, "d0=3000 d1=3000", CALL_MS, &info), GRIT_STATUS_OK);
  ASSERT_EQ(info.hedges, 2);
  entry e[8];
  ASSERT_EQ(log_wait(ch, M, e, 3), 3);
  const entry *a0 = by_prev(e, 3, 0), *a1 = by_prev(e, 3, 1),
              *a2 = by_prev(e, 3, 2);
  ASSERT(a0 && a1 && a2);
  uint64_t s1 = start_us(1), s2 = start_us(2), s3 = start_us(3);
  ASSERT(s1 && s2 && s3);
  ASSERT(t0_us <= s1 && s1 <= s2 && s2 <= s3);
  /* From before the call, less 5 ms: the hedge timer runs on the loop's
   * cached millisecond clock. */
  ASSERT_CMP((s2 - t0_us) / 1000, >=, 95);
  ASSERT_CMP((s3 - t0_us) / 1000, >=, 195);
  ASSERT(outcome_is(a0, "cancelled"));
  ASSERT(outcome_is(a1, "cancelled"));
  ASSERT(outcome_is(a2, "ok"));
  grit_channel_destroy(ch);
}

/* HG-03: a non-fatal status sends the next hedge at once. */
static void test_nonfatal_next_at_once(void) {
  grit_channel *ch = chan(2, "2s");
  uint64_t t0 = now_ms();
  ASSERT_EQ(unary(ch, "f0=14", CALL_MS, NULL), GRIT_STATUS_OK);
  ASSERT_CMP(now_ms() - t0, <, 1500); /* not after the 2 s hedgingDelay */
  entry e[8];
  ASSERT_EQ(log_wait(ch, M, e, 2), 2);
  ASSERT(outcome_is(by_prev(e, 2, 0), "14"));
  ASSERT(outcome_is(by_prev(e, 2, 1), "ok"));
  grit_channel_destroy(ch);
}

/* HG-03: a fatal status is final and cancels the hedge in flight. */
static void test_fatal_cancels_rest(void) {
  grit_channel *ch = chan(3, "0.05s");
  ASSERT_EQ(unary(ch, "d0=3000 f1=13", CALL_MS, NULL), GRIT_STATUS_INTERNAL);
  entry e[8];
  ASSERT_EQ(log_wait(ch, M, e, 2), 2);
  ASSERT(outcome_is(by_prev(e, 2, 0), "cancelled"));
  usleep(150 * 1000);
  ASSERT_EQ(log_get(ch, M, e, 8), 2); /* no third hedge */
  grit_channel_destroy(ch);
}

/* HG-04: all attempts fail non-fatally: the last status. */
static void test_all_nonfatal(void) {
  grit_channel *ch = chan(3, "0.05s");
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, "f0=14 f1=14 f2=14", CALL_MS, &info),
            GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 3);
  entry e[8];
  ASSERT_EQ(log_wait(ch, M, e, 3), 3);
  grit_channel_destroy(ch);
}

/* HG-09: the deadline cancels every hedge. The deadline leaves grpcio
 * time to start a handler for each of the three (due at 0, 50, 100 ms). */
static void test_deadline_cancels_all(void) {
  grit_channel *ch = chan(3, "0.05s");
  ASSERT_EQ(unary(ch, "d0=3000 d1=3000 d2=3000", 1500, NULL),
            GRIT_STATUS_DEADLINE_EXCEEDED);
  entry e[8];
  ASSERT_EQ(log_wait(ch, M, e, 3), 3);
  for (int k = 0; k < 3; k++)
    ASSERT(outcome_is(by_prev(e, 3, k), "cancelled"));
  grit_channel_destroy(ch);
}

/* RT-13 for hedges: a hedge started mid-stream replays what was sent
 * before it, so both attempts log the same messages. */
static void test_streaming_replay(void) {
  grit_channel *ch = chan(2, "0.1s");
  grit_call *c;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  ASSERT_OK(grit_call_start(ch, MS, &o, NULL, NULL, &c));
  grit_call_send(c, "d0=3000", 7);
  grit_call_send(c, "b", 1);
  /* The hedge starts meanwhile: wait (bounded) until the client has. */
  grit_channel_stats cs = GRIT_CHANNEL_STATS_INIT;
  for (int i = 0; i < 500 && cs.hedges == 0; i++) {
    usleep(10 * 1000);
    ASSERT_OK(grit_channel_get_stats(ch, &cs));
  }
  ASSERT_EQ(cs.hedges, 1);
  grit_call_send(c, "c", 1);
  grit_call_close_send(c);
  grit_bytes b;
  ASSERT_OK(grit_call_recv(c, &b));
  ASSERT(b.len == 1 && b.data[0] == '3');
  grit_bytes_free(&b);
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(c);
  entry e[8];
  ASSERT_EQ(log_wait(ch, MS, e, 2), 2);
  const entry *a0 = by_prev(e, 2, 0), *a1 = by_prev(e, 2, 1);
  ASSERT(a0 && a1);
  ASSERT_STR_EQ(a1->msgs, "64303d33303030,62,63");
  /* grpcio hands a handler its messages one by one, so a loaded server
   * may see attempt 0 cancelled before it read them all. */
  ASSERT(strncmp(a1->msgs, a0->msgs, strlen(a0->msgs)) == 0);
  ASSERT(outcome_is(a0, "cancelled"));
  grit_channel_destroy(ch);
}

static const test_case tests[] = {
    {"second_hedge_wins", test_second_hedge_wins},
    {"previous_rpc_attempts", test_previous_rpc_attempts},
    {"nonfatal_next_at_once", test_nonfatal_next_at_once},
    {"fatal_cancels_rest", test_fatal_cancels_rest},
    {"all_nonfatal", test_all_nonfatal},
    {"deadline_cancels_all", test_deadline_cancels_all},
    {"streaming_replay", test_streaming_replay},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  if (!pypeer_has_grpc()) {
    fprintf(stderr, "skip: %s has no grpc module\n", PYPEER_PYTHON);
    return 77;
  }
  signal(SIGPIPE, SIG_IGN);
  if (!server_start()) {
    server_stop();
    return 1;
  }
  int rc = test_main(tests, argc, argv);
  server_stop();
  return rc;
}
