/*
 * Behaviour tests of hedging (SPEC HG-01..HG-09, with TH-02/TH-03 and
 * MX-01..MX-03) against h2server/. The server's script answers
 * requests in arrival order; assertions are on its log (grpc-previous-rpc-
 * attempts, the client's RST_STREAM, arrival times) and on the attempt
 * records the observer receives. Every wait is bounded.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bh.h"

#define WAIT_MS 5000
#define CALL_MS 5000
#define H2_CANCEL 8 /* RST_STREAM error code CANCEL */
#define M "/pkg.Svc/M"

/* ---- helpers ---- */

/* A hedging service config for pkg.Svc; |delay| is a duration string or
 * NULL (absent: all at once); |extra| is more top-level JSON or "". */
static const char *hedge_cfg(char *buf, size_t len, int max_attempts,
                             const char *delay, const char *extra) {
  char d[64] = "";
  if (delay)
    snprintf(d, sizeof(d), "\"hedgingDelay\":\"%s\",", delay);
  snprintf(buf, len,
           "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Svc\"}],"
           "\"hedgingPolicy\":{\"maxAttempts\":%d,%s"
           "\"nonFatalStatusCodes\":[\"UNAVAILABLE\"]}}]%s}",
           max_attempts, d, extra);
  return buf;
}

/* Attempt records from the observer (MX-03). */
#define MAX_RECS 32
typedef struct recs {
  pthread_mutex_t mu;
  grit_attempt_record r[MAX_RECS];
  size_t n;
} recs;

static recs g_recs;

static void observe(const grit_attempt_record *r, void *ud) {
  recs *rs = ud;
  pthread_mutex_lock(&rs->mu);
  if (rs->n < MAX_RECS) {
    rs->r[rs->n] = *r;
    rs->r[rs->n].method = NULL; /* borrowed: not kept */
    rs->r[rs->n].peer = NULL;
    rs->r[rs->n].message = NULL;
    rs->n++;
  }
  pthread_mutex_unlock(&rs->mu);
}

/* The record of attempt |number| (1-based) of the channel's calls; false
 * if none came. Every record is in by the time the call has finished
 * (the observer runs before the call's completion). */
static bool rec_of(uint32_t number, grit_attempt_record *out) {
  bool found = false;
  pthread_mutex_lock(&g_recs.mu);
  for (size_t i = 0; i < g_recs.n && !found; i++) {
    if (g_recs.r[i].attempt == number) {
      *out = g_recs.r[i];
      found = true;
    }
  }
  pthread_mutex_unlock(&g_recs.mu);
  return found;
}

/* |later| - |earlier| on the client's clock (microseconds), in ms; negative
 * if |later| is not. */
static int64_t gap_ms(uint64_t later_us, uint64_t earlier_us) {
  return ((int64_t)later_us - (int64_t)earlier_us) / 1000;
}

static size_t recs_with_reason(grit_attempt_reason why) {
  size_t k = 0;
  pthread_mutex_lock(&g_recs.mu);
  for (size_t i = 0; i < g_recs.n; i++)
    k += g_recs.r[i].reason == why;
  pthread_mutex_unlock(&g_recs.mu);
  return k;
}

/* A channel to |n| servers with |cfg| and the observer; extra int args
 * as (key, value) pairs ending with NULL. */
static grit_channel *chan(h2s_server **s, size_t n, const char *cfg,
                          const char *key, int64_t val) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  pthread_mutex_lock(&g_recs.mu);
  g_recs.n = 0;
  pthread_mutex_unlock(&g_recs.mu);
  grit_channel_args_set_observer(a, observe, &g_recs);
  grit_channel_args_set_int(a, GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  if (key)
    grit_channel_args_set_int(a, key, val);
  grit_channel *ch = bh_channel_args(s, n, cfg, a);
  grit_channel_args_destroy(a);
  return ch;
}

typedef struct closed_pred {
  size_t seq;
} closed_pred;

static bool pred_closed(h2s_server *srv, void *ud) {
  closed_pred *p = ud;
  if (h2s_server_request_count(srv) <= p->seq)
    return false;
  const h2s_request *r = h2s_server_request(srv, p->seq);
  return r && r->closed;
}

/* Request |seq| once its stream has closed on the server, or NULL. */
static const h2s_request *req_closed(h2s_server *srv, size_t seq) {
  closed_pred p = {seq};
  if (!h2s_server_wait(srv, pred_closed, &p, WAIT_MS))
    return NULL;
  return h2s_server_request(srv, seq);
}

static bool cancelled_by_client(const h2s_request *r) {
  return r && r->client_rst && r->client_rst_code == H2_CANCEL;
}

/* A unary call with its info. */
static grit_status_code unary_info(grit_channel *ch, uint64_t timeout_ms,
                                   grit_status *st, grit_call_info *info) {
  grit_call *c;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms};
  if (grit_call_start(ch, M, &o, NULL, NULL, &c) != GRIT_OK)
    return (grit_status_code)-1;
  grit_call_send(c, "hi", 2);
  grit_call_close_send(c);
  grit_call_finish(c, st);
  if (info)
    grit_call_get_info(c, info);
  grit_call_destroy(c);
  return st->code;
}

static grit_status_code unary(grit_channel *ch, uint64_t timeout_ms, char *msg,
                              size_t msg_len) {
  grit_status st;
  grit_status_code code = unary_info(ch, timeout_ms, &st, NULL);
  if ((int)code < 0)
    return code;
  if (msg)
    snprintf(msg, msg_len, "%s", st.message);
  grit_status_free(&st);
  return code;
}

static const char *prev_attempts(h2s_server *srv, size_t seq) {
  const h2s_request *r = h2s_server_request(srv, seq);
  return r ? h2s_request_header(r, "grpc-previous-rpc-attempts") : NULL;
}

/* ---- cases ---- */

/* HG-02: the second hedge answers first; the first is cancelled with
 * RST_STREAM CANCEL and its record says HEDGE_LOST. */
static void test_second_hedge_wins(void) {
  h2s_server *srv = bh_server("path=" M " hang\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 2, "0.05s", ""), NULL, 0);
  ASSERT_EQ(unary(ch, CALL_MS, NULL, 0), GRIT_STATUS_OK);
  const h2s_request *r0 = req_closed(srv, 0);
  ASSERT_NOT_NULL(r0);
  ASSERT(cancelled_by_client(r0));
  const h2s_request *r1 = req_closed(srv, 1);
  ASSERT_NOT_NULL(r1);
  ASSERT(!r1->client_rst);
  ASSERT_EQ(r1->status_sent, 0);
  ASSERT_EQ(recs_with_reason(GRIT_REASON_HEDGE_LOST), 1);
  ASSERT_EQ(recs_with_reason(GRIT_REASON_OK), 1);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.hedges, 1);
  ASSERT_EQ(s.attempts, 2);
  for (int i = 0; i < 8; i++) /* MX-01: a hedge is not a retry */
    ASSERT_EQ(s.retries_per_call[i], 0);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* HG-04: every attempt fails non-fatally: the call ends with the status
 * of the attempt that ended last, once all have ended. The first answers
 * a second late, so the hedges (due at 50 ms) end first even on a stalled
 * machine. */
static void test_all_nonfatal_last_status(void) {
  h2s_server *srv = bh_server(
      "path=" M " delay=1000 trailers_only status=UNAVAILABLE message=slow\n"
      "path=" M " trailers_only status=UNAVAILABLE message=b\n"
      "path=" M " trailers_only status=UNAVAILABLE message=c\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, "0.05s", ""), NULL, 0);
  char msg[64];
  uint64_t t0 = test_now_ms();
  ASSERT_EQ(unary(ch, CALL_MS, msg, sizeof(msg)), GRIT_STATUS_UNAVAILABLE);
  ASSERT_CMP(test_now_ms() - t0, >=, 950); /* it waited for the slow one */
  ASSERT_STR_EQ(msg, "slow");
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  ASSERT_EQ(recs_with_reason(GRIT_REASON_EXHAUSTED), 1);
  ASSERT_EQ(recs_with_reason(GRIT_REASON_NONE), 2);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* HG-03: a fatal status is final and cancels the hedges in flight. */
static void test_fatal_cancels_rest(void) {
  h2s_server *srv =
      bh_server("path=" M " hang\n"
                "path=" M " trailers_only status=INTERNAL message=boom\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, "0.05s", ""), NULL, 0);
  char msg[64];
  ASSERT_EQ(unary(ch, CALL_MS, msg, sizeof(msg)), GRIT_STATUS_INTERNAL);
  ASSERT_STR_EQ(msg, "boom");
  ASSERT(cancelled_by_client(req_closed(srv, 0)));
  usleep(200 * 1000); /* a third hedge would be due by now */
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  ASSERT_EQ(recs_with_reason(GRIT_REASON_FATAL), 1);
  ASSERT_EQ(recs_with_reason(GRIT_REASON_HEDGE_LOST), 1);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* HG-03: a non-fatal status sends the next hedge at once, long before
 * hedgingDelay; the one after resumes hedgingDelay apart. */
static void test_nonfatal_next_at_once(void) {
  h2s_server *srv = bh_server("path=" M " trailers_only status=UNAVAILABLE\n"
                              "path=" M " hang\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, "0.3s", ""), NULL, 0);
  ASSERT_EQ(unary(ch, CALL_MS, NULL, 0), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  /* On the client's clock: attempt 2 starts as attempt 1 ends (before its
   * record, which follows the next hedge), having waited nothing; attempt
   * 3 waited hedgingDelay. The upper bound only has to stay below
   * hedgingDelay; the loop may lag its cached clock by a busy iteration,
   * hence the lower bound's 50 ms. */
  grit_attempt_record a1, a2, a3;
  ASSERT(rec_of(1, &a1) && rec_of(2, &a2) && rec_of(3, &a3));
  ASSERT_EQ(a1.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(a2.backoff_ms, 0);
  ASSERT_EQ(a3.backoff_ms, 300);
  ASSERT_CMP(gap_ms(a2.start_us, a1.end_us), <, 200);
  ASSERT_CMP(gap_ms(a3.start_us, a2.start_us), >=, 250);
  ASSERT_STR_EQ(prev_attempts(srv, 1), "1");
  ASSERT_STR_EQ(prev_attempts(srv, 2), "2");
  ASSERT(cancelled_by_client(req_closed(srv, 1)));
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* HG-05: pushback "-1" stops new hedges; the one in flight goes on and
 * wins (a second late, so that the hedge due at 50 ms comes first even
 * on a stalled machine). */
static void test_pushback_stop(void) {
  h2s_server *srv =
      bh_server("path=" M " delay=1000\n"
                "path=" M " trailers_only status=UNAVAILABLE pushback=-1\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, "0.05s", ""), NULL, 0);
  ASSERT_EQ(unary(ch, CALL_MS, NULL, 0), GRIT_STATUS_OK);
  usleep(150 * 1000);
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  ASSERT_EQ(h2s_server_request(srv, 0)->status_sent, 0);
  ASSERT_EQ(recs_with_reason(GRIT_REASON_PUSHBACK), 0); /* one followed */
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* HG-05: pushback n >= 0 sends the next hedge after n ms, not at once
 * and not after hedgingDelay. */
static void test_pushback_delay(void) {
  h2s_server *srv =
      bh_server("path=" M " trailers_only status=UNAVAILABLE pushback=150\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, "2s", ""), NULL, 0);
  ASSERT_EQ(unary(ch, CALL_MS, NULL, 0), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  /* On the client's clock, from attempt 1's end: 150 ms less what the
   * loop's cached clock may lag in a busy iteration; well below the 2 s
   * hedgingDelay. */
  grit_attempt_record a1, a2;
  ASSERT(rec_of(1, &a1) && rec_of(2, &a2));
  ASSERT(a2.pushback);
  ASSERT_EQ(a2.backoff_ms, 150);
  ASSERT_CMP(gap_ms(a2.start_us, a1.end_us), >=, 120);
  ASSERT_CMP(gap_ms(a2.start_us, a1.start_us), <, 1500);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* HG-06, TH-02, TH-03: with maxTokens 3 the first failure leaves 2 (> 1.5,
 * a hedge may go), the second 1 (throttled). A later call still sends its
 * first attempt, and no hedge. */
static void test_throttled_hedges(void) {
  h2s_server *srv =
      bh_server("path=" M " repeat=* trailers_only status=UNAVAILABLE\n");
  char cfg[512];
  grit_channel *ch = chan(
      &srv, 1,
      hedge_cfg(cfg, sizeof(cfg), 3, "2s",
                ",\"retryThrottling\":{\"maxTokens\":3,\"tokenRatio\":0.1}"),
      NULL, 0);
  ASSERT_EQ(unary(ch, CALL_MS, NULL, 0), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  ASSERT_EQ(unary(ch, CALL_MS, NULL, 0), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.hedges, 1);
  ASSERT_EQ(s.throttled, 2);
  ASSERT_EQ(recs_with_reason(GRIT_REASON_THROTTLED), 2);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* SC-11, HG-01: no hedgingDelay sends every attempt at once. */
static void test_delay_zero_all_at_once(void) {
  h2s_server *srv = bh_server("path=" M " repeat=2 hang\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, NULL, ""), NULL, 0);
  ASSERT_EQ(unary(ch, CALL_MS, NULL, 0), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  grit_attempt_record a1, a3;
  ASSERT(rec_of(1, &a1) && rec_of(3, &a3));
  ASSERT_EQ(a3.backoff_ms, 0); /* nothing waited: in the same loop turn */
  ASSERT_CMP(gap_ms(a3.start_us, a1.start_us), <, 500);
  ASSERT(cancelled_by_client(req_closed(srv, 0)));
  ASSERT(cancelled_by_client(req_closed(srv, 1)));
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* HG-09: the deadline covers every hedge: all are cancelled. */
static void test_deadline_cancels_all(void) {
  h2s_server *srv = bh_server("path=" M " repeat=* hang\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, "0.03s", ""), NULL, 0);
  /* Hedges at 30 and 60 ms; the deadline leaves time for all three to
   * reach the server on a slow first connection. */
  ASSERT_EQ(unary(ch, 1000, NULL, 0), GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  for (size_t i = 0; i < 3; i++)
    ASSERT(cancelled_by_client(req_closed(srv, i)));
  ASSERT_EQ(recs_with_reason(GRIT_REASON_DEADLINE), 3);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* HG-09, RT-11: an application cancel covers every hedge. */
static void test_cancel_cancels_all(void) {
  h2s_server *srv = bh_server("path=" M " repeat=* hang\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, "0.03s", ""), NULL, 0);
  grit_call *c;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  ASSERT_OK(grit_call_start(ch, M, &o, NULL, NULL, &c));
  grit_call_send(c, "x", 1);
  grit_call_close_send(c);
  ASSERT(h2s_server_wait_requests(srv, 3, WAIT_MS));
  grit_call_cancel(c);
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_CANCELLED);
  grit_status_free(&st);
  grit_call_destroy(c);
  for (size_t i = 0; i < 3; i++)
    ASSERT(cancelled_by_client(req_closed(srv, i)));
  ASSERT_EQ(recs_with_reason(GRIT_REASON_CANCELLED), 3);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static bool same_msgs(const h2s_request *r, const char *const *want, size_t n) {
  if (!r || r->n_msgs != n)
    return false;
  for (size_t i = 0; i < n; i++) {
    if (r->msgs[i].len != strlen(want[i]) ||
        memcmp(r->msgs[i].data, want[i], r->msgs[i].len) != 0)
      return false;
  }
  return true;
}

/* RT-13 for hedges: a hedge started mid-stream replays what was sent
 * before it; both hedges see the same messages. */
static void test_streaming_replay(void) {
  h2s_server *srv = bh_server("path=" M " hang\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 2, "0.1s", ""), NULL, 0);
  grit_call *c;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  ASSERT_OK(grit_call_start(ch, M, &o, NULL, NULL, &c));
  grit_call_send(c, "a", 1);
  grit_call_send(c, "bb", 2);
  ASSERT(h2s_server_wait_requests(srv, 2, WAIT_MS));
  grit_call_send(c, "ccc", 3);
  grit_call_close_send(c);
  int got = 0;
  grit_bytes b;
  while (grit_call_recv(c, &b) == GRIT_OK) {
    got++;
    grit_bytes_free(&b);
  }
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(c);
  ASSERT_EQ(got, 3);
  static const char *const want[] = {"a", "bb", "ccc"};
  ASSERT(same_msgs(req_closed(srv, 0), want, 3));
  ASSERT(same_msgs(req_closed(srv, 1), want, 3));
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* HG-07, RT-07: a send over the replay limit commits to the attempt that
 * has sent the most (a tie goes to the oldest); the others are cancelled
 * and no hedge follows. The third hedge would be due 1 s in: the test's
 * second send, made once the second hedge is seen, must come before it. */
static void test_buffer_overflow_commits(void) {
  h2s_server *srv = bh_server(NULL);
  char cfg[512];
  grit_channel *ch = chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, "0.5s", ""),
                          GRIT_ARG_PER_CALL_RETRY_BUFFER, 100);
  uint64_t t0 = test_now_ms();
  grit_call *c;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  ASSERT_OK(grit_call_start(ch, M, &o, NULL, NULL, &c));
  char big[60];
  memset(big, 'x', sizeof(big));
  grit_call_send(c, big, sizeof(big));
  ASSERT(h2s_server_wait_requests(srv, 2, WAIT_MS));
  grit_call_send(c, big, sizeof(big)); /* 130 framed bytes > 100 */
  grit_call_close_send(c);
  int got = 0;
  grit_bytes b;
  while (grit_call_recv(c, &b) == GRIT_OK) {
    got++;
    grit_bytes_free(&b);
  }
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(c);
  ASSERT_EQ(got, 2);
  const h2s_request *r0 = req_closed(srv, 0);
  const h2s_request *r1 = req_closed(srv, 1);
  ASSERT(r0 && r1);
  ASSERT(!r0->client_rst);
  ASSERT_EQ(r0->n_msgs, 2);
  ASSERT(cancelled_by_client(r1));
  uint64_t now = test_now_ms();
  if (now < t0 + 1250) /* past the time the third hedge would be due */
    usleep((useconds_t)(t0 + 1250 - now) * 1000);
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.hedges, 1);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Hang every attempt except the third (grpc-previous-rpc-attempts 2). */
static void third_wins(const h2s_request *req, bool at_end, h2s_action *act,
                       void *ud) {
  (void)at_end;
  (void)ud;
  if (strcmp(req->path, M) != 0)
    return;
  const char *p = h2s_request_header(req, "grpc-previous-rpc-attempts");
  if (!p || strcmp(p, "2") != 0)
    act->kind = H2S_HANG;
}

static size_t count_path(h2s_server *srv, const char *path) {
  size_t k = 0, n = h2s_server_request_count(srv);
  for (size_t i = 0; i < n; i++) {
    const h2s_request *r = h2s_server_request(srv, i);
    k += r && r->path && strcmp(r->path, path) == 0;
  }
  return k;
}

typedef struct path_pred {
  const char *path;
  size_t n;
} path_pred;

static bool pred_path(h2s_server *srv, void *ud) {
  path_pred *p = ud;
  return count_path(srv, p->path) >= p->n;
}

/* HG-08: each hedge is a fresh round_robin pick, so three hedges land on
 * three backends. */
static void test_round_robin_spread(void) {
  h2s_server *s[3];
  for (int i = 0; i < 3; i++) {
    h2s_config cfg = {.quiet = true, .handler = third_wins};
    ASSERT_EQ(h2s_server_start(&cfg, &s[i]), 0);
  }
  char cfg[512];
  grit_channel *ch =
      chan(s, 3,
           hedge_cfg(cfg, sizeof(cfg), 3, "0.03s",
                     ",\"loadBalancingConfig\":[{\"round_robin\":{}}]"),
           NULL, 0);
  /* Warm up until every backend has answered once: all READY. Bounded
   * by time, not by a number of calls: on a loaded machine one backend
   * may connect long after the others. */
  uint64_t until = test_now_ms() + WAIT_MS;
  bool all = false;
  while (!all && test_now_ms() < until) {
    bh_unary(ch, "/pkg.Warm/Up", "w", CALL_MS, NULL);
    all = true;
    for (int k = 0; k < 3; k++)
      all &= count_path(s[k], "/pkg.Warm/Up") > 0;
    if (!all)
      usleep(10 * 1000);
  }
  ASSERT(all);
  ASSERT_EQ(unary(ch, CALL_MS, NULL, 0), GRIT_STATUS_OK);
  /* The losers went to other backends, whose threads may log them after
   * the winner answered: wait for them (bounded). */
  for (int k = 0; k < 3; k++) {
    path_pred p = {M, 1};
    ASSERT(h2s_server_wait(s[k], pred_path, &p, WAIT_MS));
    ASSERT_EQ(count_path(s[k], M), 1);
  }
  grit_channel_destroy(ch);
  for (int k = 0; k < 3; k++)
    h2s_server_stop(s[k]);
}

/* HG-01, RT-08: attempt k carries grpc-previous-rpc-attempts k-1 and
 * starts (k-1) x hedgingDelay after the call (on the client's clock: the
 * attempt records' start_us, not arrival at the server, which a slow first
 * connection delays for the first attempt only). */
static void test_previous_rpc_attempts(void) {
  h2s_config hc = {.quiet = true, .handler = third_wins};
  h2s_server *srv = NULL;
  ASSERT_EQ(h2s_server_start(&hc, &srv), 0);
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 3, "0.05s", ""), NULL, 0);
  /* Connected and idle first (an unhedged method), so the call's loop
   * wake-up, on which hedgingDelay is timed, comes after t0. */
  ASSERT_EQ(bh_unary(ch, "/pkg.Warm/Up", "w", CALL_MS, NULL), GRIT_STATUS_OK);
  size_t base = h2s_server_request_count(srv);
  pthread_mutex_lock(&g_recs.mu);
  g_recs.n = 0;
  pthread_mutex_unlock(&g_recs.mu);
  uint64_t t0_us = test_now_ms() * 1000;
  grit_status st;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary_info(ch, CALL_MS, &st, &info), GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_EQ(h2s_server_request_count(srv), base + 3);
  ASSERT_NULL(prev_attempts(srv, base));
  ASSERT_STR_EQ(prev_attempts(srv, base + 1), "1");
  ASSERT_STR_EQ(prev_attempts(srv, base + 2), "2");
  grit_attempt_record a1, a2, a3;
  ASSERT(rec_of(1, &a1) && rec_of(2, &a2) && rec_of(3, &a3));
  ASSERT_EQ(a2.kind, GRIT_ATTEMPT_HEDGE);
  ASSERT_EQ(a3.kind, GRIT_ATTEMPT_HEDGE);
  ASSERT_EQ(a2.backoff_ms, 50); /* the wait the client recorded */
  ASSERT_EQ(a3.backoff_ms, 50);
  ASSERT_CMP(a1.start_us, <=, a2.start_us);
  ASSERT_CMP(a2.start_us, <=, a3.start_us);
  /* The hedge timer runs on the loop's millisecond clock (possibly the
   * coarse one, and truncated): allow 5 ms of that, no more. */
  ASSERT_CMP(gap_ms(a2.start_us, t0_us), >=, 45);
  ASSERT_CMP(gap_ms(a3.start_us, t0_us), >=, 95);
  ASSERT_EQ(info.attempts, 3);
  ASSERT_EQ(info.hedges, 2);
  ASSERT_EQ(info.transparent_retries, 0);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* TR-02, TR-03 with hedging: REFUSED_STREAM on a hedge is replayed
 * transparently in its place; the number of hedges stays maxAttempts and
 * the replay keeps grpc-previous-rpc-attempts. */
static void test_transparent_retry_of_hedge(void) {
  h2s_server *srv = bh_server("path=" M " rst=REFUSED_STREAM\n"
                              "path=" M " repeat=* hang\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 2, "0.1s", ""), NULL, 0);
  grit_status st;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  /* The hedge is due at 100 ms; the deadline leaves time for the three
   * streams to reach the server on a slow first connection. */
  ASSERT_EQ(unary_info(ch, 1500, &st, &info), GRIT_STATUS_DEADLINE_EXCEEDED);
  grit_status_free(&st);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  ASSERT_NULL(prev_attempts(srv, 0));
  ASSERT_NULL(prev_attempts(srv, 1)); /* the transparent replay */
  ASSERT_STR_EQ(prev_attempts(srv, 2), "1");
  ASSERT_EQ(info.attempts, 3);
  ASSERT_EQ(info.transparent_retries, 1);
  ASSERT_EQ(info.hedges, 1);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* MX-04: GRIT_TRACE=hedging (set in main) logs each hedge sent, the
 * commit and the cancelled loser. stderr goes to a file for the call. */
static void test_trace_hedging(void) {
  h2s_server *srv = bh_server("path=" M " hang\n");
  char cfg[512];
  grit_channel *ch =
      chan(&srv, 1, hedge_cfg(cfg, sizeof(cfg), 2, "0.05s", ""), NULL, 0);
  char path[] = "/tmp/grit-trace-XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  ASSERT_EQ(unary(ch, CALL_MS, NULL, 0), GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char log[8192] = "";
  ssize_t n = pread(fd, log, sizeof(log) - 1, 0);
  log[n > 0 ? n : 0] = '\0';
  close(fd);
  unlink(path);
  ASSERT(strstr(log, "grit hedging: call") != NULL);
  ASSERT(strstr(log, ": hedge 2 sent after 50 ms") != NULL);
  ASSERT(strstr(log, ": committed to attempt 2") != NULL);
  ASSERT(strstr(log, ": attempt 1 cancelled (attempt 2 won)") != NULL);
  h2s_server_stop(srv);
}

static const test_case tests[] = {
    {"second_hedge_wins", test_second_hedge_wins},
    {"all_nonfatal_last_status", test_all_nonfatal_last_status},
    {"fatal_cancels_rest", test_fatal_cancels_rest},
    {"nonfatal_next_at_once", test_nonfatal_next_at_once},
    {"pushback_stop", test_pushback_stop},
    {"pushback_delay", test_pushback_delay},
    {"throttled_hedges", test_throttled_hedges},
    {"delay_zero_all_at_once", test_delay_zero_all_at_once},
    {"deadline_cancels_all", test_deadline_cancels_all},
    {"cancel_cancels_all", test_cancel_cancels_all},
    {"streaming_replay", test_streaming_replay},
    {"buffer_overflow_commits", test_buffer_overflow_commits},
    {"round_robin_spread", test_round_robin_spread},
    {"previous_rpc_attempts", test_previous_rpc_attempts},
    {"transparent_retry_of_hedge", test_transparent_retry_of_hedge},
    {"trace_hedging", test_trace_hedging},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  pthread_mutex_init(&g_recs.mu, NULL);
  setenv("GRIT_TRACE", "hedging", 1); /* read once, at the first trace */
  return test_main(tests, argc, argv);
}
