/* Load balancing and connection management through the public API against
 * h2server backends (SPEC CB-01, LB-01..LB-04, TR-01/TR-02): round_robin
 * spread and recovery, pick_first order and stickiness, a backend dying
 * mid-call, GOAWAY draining, keepalive timeout, connectivity states and the
 * client idle timeout. Bounds are generous; nothing asserts tight timing. */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "bh.h"

#define RR_CONFIG "{\"loadBalancingConfig\":[{\"round_robin\":{}}]}"
#define METHOD "/x.Y/Z"

static void sleep_ms(unsigned ms) {
  usleep(ms * 1000u);
}

/* Small reconnect backoff so restarts are noticed quickly. */
static grit_channel *lb_channel(h2s_server **s, size_t n, const char *cfg,
                                const char *extra_key, int64_t extra_val) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel_args_set_int(a, GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  grit_channel_args_set_int(a, GRIT_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  if (extra_key)
    grit_channel_args_set_int(a, extra_key, extra_val);
  grit_channel *ch = bh_channel_args(s, n, cfg, a);
  grit_channel_args_destroy(a);
  return ch;
}

static size_t reqs(h2s_server *s) {
  return h2s_server_request_count(s);
}

/* Make calls until every server of |s| has seen one (all READY). */
static bool warm_up(grit_channel *ch, h2s_server **s, size_t n) {
  uint64_t until = test_now_ms() + 5000;
  while (test_now_ms() < until) {
    bool all = true;
    for (size_t i = 0; i < n; i++)
      all = all && reqs(s[i]) > 0;
    if (all)
      return true;
    bh_unary(ch, METHOD, "w", 2000, NULL);
  }
  return false;
}

/* Wait until the channel reports |want| (polling, bounded). */
static bool wait_state(grit_channel *ch, grit_connectivity_state want,
                       bool try_connect, int timeout_ms) {
  uint64_t until = test_now_ms() + (uint64_t)timeout_ms;
  while (test_now_ms() < until) {
    if (grit_channel_get_state(ch, try_connect) == want)
      return true;
    sleep_ms(10);
  }
  return grit_channel_get_state(ch, false) == want;
}

/* ---- async calls ---- */

typedef struct async_call {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  grit_status_code code;
  char peer[128];
} async_call;

static void async_cb(const grit_status *st, const uint8_t *resp,
                     size_t resp_len, const grit_call_info *info, void *ud) {
  (void)resp;
  (void)resp_len;
  async_call *a = ud;
  pthread_mutex_lock(&a->mu);
  a->done = true;
  a->code = st->code;
  snprintf(a->peer, sizeof(a->peer), "%s", info ? info->peer : "");
  pthread_cond_signal(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

static grit_err async_start(grit_channel *ch, const char *method,
                            uint64_t timeout_ms, async_call *a) {
  memset(a, 0, sizeof(*a));
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->cv, NULL);
  a->code = (grit_status_code)-1;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms};
  return grit_unary_call_async(ch, method, "a", 1, &o, async_cb, a);
}

/* Wait (bounded) and return the status code, -1 if it never ended. */
static int async_wait(async_call *a, int timeout_ms) {
  uint64_t until = test_now_ms() + (uint64_t)timeout_ms;
  pthread_mutex_lock(&a->mu);
  while (!a->done && test_now_ms() < until) {
    pthread_mutex_unlock(&a->mu);
    sleep_ms(5);
    pthread_mutex_lock(&a->mu);
  }
  int code = a->done ? (int)a->code : -1;
  pthread_mutex_unlock(&a->mu);
  return code;
}

static void async_free(async_call *a) {
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->cv);
}

/* ---- round_robin ---- */

static void test_rr_even_skip_restart(void) {
  h2s_server *s[3] = {bh_server(NULL), bh_server(NULL), bh_server(NULL)};
  grit_channel *ch = lb_channel(s, 3, RR_CONFIG, NULL, 0);
  ASSERT_NOT_NULL(ch);
  ASSERT(warm_up(ch, s, 3));
  /* Even spread over three READY backends: exactly 10 each. */
  size_t before[3] = {reqs(s[0]), reqs(s[1]), reqs(s[2])};
  for (int i = 0; i < 30; i++)
    ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(reqs(s[i]) - before[i], 10);
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(h2s_server_request(s[i], reqs(s[i]) - 1)->conn_index, 0);

  /* Kill one: once the client has seen the close, calls skip it. */
  h2s_server_kill(s[1]);
  sleep_ms(300);
  before[0] = reqs(s[0]);
  before[1] = reqs(s[1]);
  before[2] = reqs(s[2]);
  for (int i = 0; i < 20; i++)
    ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(reqs(s[1]), before[1]);
  ASSERT_EQ(reqs(s[0]) - before[0], 10);
  ASSERT_EQ(reqs(s[2]) - before[2], 10);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_READY);

  /* Restart it: after its (small) backoff it is used again. */
  ASSERT_EQ(h2s_server_restart(s[1]), 0);
  uint64_t until = test_now_ms() + 5000;
  while (reqs(s[1]) == before[1] && test_now_ms() < until) {
    ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
    sleep_ms(20);
  }
  ASSERT_CMP(reqs(s[1]), >, before[1]);
  /* And the spread is even again. */
  sleep_ms(100);
  for (int i = 0; i < 3; i++)
    before[i] = reqs(s[i]);
  for (int i = 0; i < 30; i++)
    ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(reqs(s[i]) - before[i], 10);
  grit_channel_destroy(ch);
  for (int i = 0; i < 3; i++)
    h2s_server_stop(s[i]);
}

/* ---- pick_first ---- */

static void test_pf_order_failover_sticky(void) {
  h2s_server *s[3] = {bh_server(NULL), bh_server(NULL), bh_server(NULL)};
  grit_channel *ch = lb_channel(s, 3, NULL, NULL, 0);
  ASSERT_NOT_NULL(ch);
  for (int i = 0; i < 10; i++)
    ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(reqs(s[0]), 10);
  ASSERT_EQ(reqs(s[1]), 0);
  ASSERT_EQ(reqs(s[2]), 0);
  h2s_stats st;
  h2s_server_get_stats(s[1], &st);
  ASSERT_EQ(st.connections, 0); /* Happy Eyeballs never needed it */

  /* The first dies: fail over to the second, in order. */
  h2s_server_kill(s[0]);
  sleep_ms(200);
  for (int i = 0; i < 10; i++)
    ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(reqs(s[0]), 10);
  ASSERT_EQ(reqs(s[1]), 10);
  ASSERT_EQ(reqs(s[2]), 0);

  /* The first comes back: pick_first sticks to the second. */
  ASSERT_EQ(h2s_server_restart(s[0]), 0);
  sleep_ms(300);
  for (int i = 0; i < 10; i++)
    ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(reqs(s[0]), 10);
  ASSERT_EQ(reqs(s[1]), 20);
  ASSERT_EQ(reqs(s[2]), 0);
  grit_channel_destroy(ch);
  for (int i = 0; i < 3; i++)
    h2s_server_stop(s[i]);
}

/* A backend killed with calls in flight: they fail UNAVAILABLE (the
 * requests were sent, TR-04), new calls go to the other backend. */
static void test_killed_mid_run(void) {
  h2s_server *s[2] = {bh_server("path=/x.Y/Hang repeat=forever hang"),
                      bh_server(NULL)};
  grit_channel *ch = lb_channel(s, 2, NULL, NULL, 0);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  async_call a[3];
  for (int i = 0; i < 3; i++)
    ASSERT_OK(async_start(ch, "/x.Y/Hang", 20000, &a[i]));
  ASSERT(h2s_server_wait_requests(s[0], 4, 5000));
  h2s_server_kill(s[0]);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(async_wait(&a[i], 10000), GRIT_STATUS_UNAVAILABLE);
    async_free(&a[i]);
  }
  for (int i = 0; i < 5; i++)
    ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(reqs(s[1]), 5);
  grit_channel_destroy(ch);
  h2s_server_stop(s[0]);
  h2s_server_stop(s[1]);
}

/* ---- GOAWAY ---- */

static void test_goaway_drains(void) {
  h2s_server *s = bh_server("path=/x.Y/Slow repeat=forever delay=600");
  grit_channel *ch = lb_channel(&s, 1, NULL, NULL, 0);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  async_call a[3];
  for (int i = 0; i < 3; i++)
    ASSERT_OK(async_start(ch, "/x.Y/Slow", 20000, &a[i]));
  ASSERT(h2s_server_wait_requests(s, 4, 5000));
  /* GOAWAY(last seen stream): the three slow calls are at or below it. */
  h2s_server_goaway(s, 0, false);
  sleep_ms(100);
  /* A new call must not use the draining connection. */
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  const h2s_request *r = h2s_server_request(s, reqs(s) - 1);
  ASSERT_NOT_NULL(r);
  ASSERT_STR_EQ(r->path, METHOD);
  ASSERT_EQ(r->conn_index, 1);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(async_wait(&a[i], 10000), GRIT_STATUS_OK);
    async_free(&a[i]);
  }
  for (size_t i = 1; i < 4; i++)
    ASSERT_EQ(h2s_server_request(s, i)->conn_index, 0);
  /* The old connection closed once drained; the new one serves on. */
  h2s_stats st;
  uint64_t until = test_now_ms() + 5000;
  do {
    h2s_server_get_stats(s, &st);
    if (st.connections_open == 1)
      break;
    sleep_ms(10);
  } while (test_now_ms() < until);
  ASSERT_EQ(st.connections, 2);
  ASSERT_EQ(st.connections_open, 1);
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  h2s_server_stop(s);
}

/* Channel destroy with calls in flight does not wait for them: a dropped
 * subchannel lets its connection drain the calls on it (lb/README.md), but
 * destroy cancels every call first. So destroy returns at once, the calls
 * end CANCELLED and the servers see every connection close. */
static void test_destroy_with_calls_in_flight(void) {
  h2s_server *s[2] = {bh_server("path=/x.Y/Hang repeat=forever hang"),
                      bh_server("path=/x.Y/Hang repeat=forever hang")};
  grit_channel *ch = lb_channel(s, 2, RR_CONFIG, NULL, 0);
  ASSERT_NOT_NULL(ch);
  ASSERT(warm_up(ch, s, 2));
  static async_call a[4]; /* static: may outlive a failed ASSERT */
  for (int i = 0; i < 4; i++)
    ASSERT_OK(async_start(ch, "/x.Y/Hang", 20000, &a[i]));
  ASSERT(h2s_server_wait_requests(s[0], 3, 5000));
  ASSERT(h2s_server_wait_requests(s[1], 3, 5000));
  uint64_t t0 = test_now_ms();
  grit_channel_destroy(ch);
  ASSERT_CMP(test_now_ms() - t0, <, 2000);
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(async_wait(&a[i], 2000), GRIT_STATUS_CANCELLED);
    async_free(&a[i]);
  }
  for (int i = 0; i < 2; i++) {
    h2s_stats st;
    uint64_t until = test_now_ms() + 2000;
    do {
      h2s_server_get_stats(s[i], &st);
      if (st.connections_open == 0)
        break;
      sleep_ms(5);
    } while (test_now_ms() < until);
    ASSERT_EQ(st.connections_open, 0);
    h2s_server_stop(s[i]);
  }
}

/* ---- keepalive (LB-04) ---- */

static void test_keepalive_timeout(void) {
  h2s_config cfg = {.quiet = true,
                    .no_ping_ack = true,
                    .script_text = "path=/x.Y/Hang repeat=forever hang"};
  h2s_server *s = NULL;
  ASSERT_EQ(h2s_server_start(&cfg, &s), 0);
  grit_channel_args *args = NULL;
  grit_channel_args_create(&args);
  grit_channel_args_set_int(args, GRIT_ARG_KEEPALIVE_TIME_MS, 200);
  grit_channel_args_set_int(args, GRIT_ARG_KEEPALIVE_TIMEOUT_MS, 200);
  grit_channel *ch = bh_channel_args(&s, 1, NULL, args);
  grit_channel_args_destroy(args);
  ASSERT_NOT_NULL(ch);
  uint64_t t0 = test_now_ms();
  grit_status st;
  ASSERT_EQ(bh_unary(ch, "/x.Y/Hang", "x", 20000, &st),
            GRIT_STATUS_UNAVAILABLE);
  grit_status_free(&st);
  uint64_t took = test_now_ms() - t0;
  ASSERT_CMP(took, >=, 300);  /* one ping interval plus its timeout */
  ASSERT_CMP(took, <, 10000); /* long before the deadline */
  h2s_stats hs;
  h2s_server_get_stats(s, &hs);
  ASSERT_CMP(hs.pings_received, >=, 1);
  grit_channel_destroy(ch);
  h2s_server_stop(s);
}

/* ---- connectivity states (LB-03) ---- */

typedef struct recorder {
  pthread_mutex_t mu;
  grit_connectivity_state seen[64];
  size_t n;
} recorder;

static void rec_cb(grit_channel *ch, grit_connectivity_state s, bool timed_out,
                   void *ud) {
  recorder *r = ud;
  if (timed_out)
    return;
  pthread_mutex_lock(&r->mu);
  if (r->n < 64)
    r->seen[r->n++] = s;
  pthread_mutex_unlock(&r->mu);
  if (s != GRIT_STATE_SHUTDOWN)
    grit_channel_watch_state(ch, s, 0, rec_cb, r);
}

/* Index of the first |want| in r->seen at or after |from|, or r->n. */
static size_t rec_find(recorder *r, size_t from, grit_connectivity_state want) {
  pthread_mutex_lock(&r->mu);
  size_t i = from;
  while (i < r->n && r->seen[i] != want)
    i++;
  pthread_mutex_unlock(&r->mu);
  return i;
}

static void test_states(void) {
  h2s_server *s[2] = {bh_server(NULL), bh_server(NULL)};
  grit_channel *ch = lb_channel(s, 2, RR_CONFIG, NULL, 0);
  ASSERT_NOT_NULL(ch);
  recorder rec = {.n = 0};
  pthread_mutex_init(&rec.mu, NULL);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_IDLE);
  ASSERT_OK(grit_channel_watch_state(ch, GRIT_STATE_IDLE, 0, rec_cb, &rec));
  sleep_ms(50);
  ASSERT_EQ(rec.n, 0); /* nothing happens without a call or a request */
  grit_channel_get_state(ch, true);
  ASSERT(wait_state(ch, GRIT_STATE_READY, false, 5000));
  size_t c = rec_find(&rec, 0, GRIT_STATE_CONNECTING);
  size_t r = rec_find(&rec, 0, GRIT_STATE_READY);
  ASSERT_EQ(c, 0); /* IDLE -> CONNECTING -> READY */
  ASSERT_CMP(r, >, c);
  ASSERT_CMP(r, <, rec.n);

  /* Every backend dead: TRANSIENT_FAILURE, and non-wait-for-ready calls
   * fail UNAVAILABLE at once. */
  h2s_server_kill(s[0]);
  h2s_server_kill(s[1]);
  ASSERT(wait_state(ch, GRIT_STATE_TRANSIENT_FAILURE, false, 5000));
  ASSERT_CMP(rec_find(&rec, r, GRIT_STATE_TRANSIENT_FAILURE), <, rec.n);
  uint64_t t0 = test_now_ms();
  uint64_t until = t0 + 5000;
  grit_status_code code = GRIT_STATUS_OK;
  while (test_now_ms() < until) { /* TF may blink to CONNECTING on a retry */
    code = bh_unary(ch, METHOD, "x", 3000, NULL);
    if (code == GRIT_STATUS_UNAVAILABLE)
      break;
  }
  ASSERT_EQ(code, GRIT_STATUS_UNAVAILABLE);

  /* One returns: READY again, and calls work. */
  size_t tf_at = rec_find(&rec, r, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT_EQ(h2s_server_restart(s[1]), 0);
  ASSERT(wait_state(ch, GRIT_STATE_READY, false, 5000));
  ASSERT_CMP(rec_find(&rec, tf_at, GRIT_STATE_READY), <, rec.n);
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  /* The last watcher saw SHUTDOWN (or was refused); wait for it. */
  until = test_now_ms() + 2000;
  while (rec_find(&rec, 0, GRIT_STATE_SHUTDOWN) == rec.n &&
         test_now_ms() < until)
    sleep_ms(5);
  ASSERT_CMP(rec_find(&rec, 0, GRIT_STATE_SHUTDOWN), <, rec.n);
  pthread_mutex_destroy(&rec.mu);
  h2s_server_stop(s[0]);
  h2s_server_stop(s[1]);
}

/* pick_first: after the chosen connection drops the channel goes IDLE (no
 * reconnect without a call); with every address dead a connect attempt
 * ends in TRANSIENT_FAILURE, which stays until one is READY. */
static void test_pf_states(void) {
  h2s_server *s = bh_server(NULL);
  grit_channel *ch = lb_channel(&s, 1, NULL, NULL, 0);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_READY);
  h2s_server_kill(s);
  ASSERT(wait_state(ch, GRIT_STATE_IDLE, false, 5000));
  sleep_ms(200);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_IDLE);
  grit_channel_get_state(ch, true);
  ASSERT(wait_state(ch, GRIT_STATE_TRANSIENT_FAILURE, false, 5000));
  /* Sticky: reconnect attempts (50..200 ms backoff) keep it in TF. */
  for (int i = 0; i < 20; i++) {
    ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_TRANSIENT_FAILURE);
    sleep_ms(20);
  }
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 3000, NULL), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(h2s_server_restart(s), 0);
  ASSERT(wait_state(ch, GRIT_STATE_READY, false, 5000));
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  h2s_server_stop(s);
}

/* ---- idle timeout ---- */

static void test_idle_timeout(void) {
  h2s_server *s = bh_server(NULL);
  grit_channel *ch = lb_channel(&s, 1, NULL, GRIT_ARG_IDLE_TIMEOUT_MS, 300);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_READY);
  /* Busy calls keep it connected past the timeout. */
  for (int i = 0; i < 6; i++) {
    ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
    sleep_ms(100);
  }
  h2s_stats st;
  h2s_server_get_stats(s, &st);
  ASSERT_EQ(st.connections, 1);
  /* Then idle: IDLE, and the server sees the connection close. */
  ASSERT(wait_state(ch, GRIT_STATE_IDLE, false, 5000));
  uint64_t until = test_now_ms() + 5000;
  do {
    h2s_server_get_stats(s, &st);
    if (st.connections_open == 0)
      break;
    sleep_ms(10);
  } while (test_now_ms() < until);
  ASSERT_EQ(st.connections_open, 0);
  /* The next call reconnects. */
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  h2s_server_get_stats(s, &st);
  ASSERT_EQ(st.connections, 2);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_READY);
  grit_channel_destroy(ch);
  h2s_server_stop(s);
}

int main(int argc, char **argv) {
  static const test_case tests[] = {
      {"rr_even_skip_restart", test_rr_even_skip_restart},
      {"pf_order_failover_sticky", test_pf_order_failover_sticky},
      {"killed_mid_run", test_killed_mid_run},
      {"goaway_drains", test_goaway_drains},
      {"destroy_with_calls_in_flight", test_destroy_with_calls_in_flight},
      {"keepalive_timeout", test_keepalive_timeout},
      {"states", test_states},
      {"pf_states", test_pf_states},
      {"idle_timeout", test_idle_timeout},
      {NULL, NULL},
  };
  return test_main(tests, argc, argv);
}
