/*
 * Behaviour tests of configured retries (SPEC RT-01..RT-14), transparent
 * retries (TR-01..TR-04), retry throttling (TH-01..TH-04), observability
 * (MX-01..MX-03) and idempotency keys (ID-01), against h2server/.
 * Assertions are on the server's log and on the observer's records; every
 * wait is bounded and backoffs are small.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bh.h"

#define WAIT_MS 5000 /* generous bound for anything that should be quick */
#define CALL_MS 5000 /* deadline of ordinary calls */
#define M "/pkg.Svc/M"

/* ---- helpers ---- */

/* A service config with a retryPolicy for pkg.Svc. |codes| is the inside
 * of retryableStatusCodes, |more| extra retryPolicy fields (",..." or ""),
 * |top| extra top-level fields (",..." or ""). Backoff 10 ms, x2, max 50. */
static const char *cfg_retry(char *buf, size_t len, int max_attempts,
                             const char *codes, const char *more,
                             const char *top) {
  snprintf(buf, len,
           "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Svc\"}],"
           "\"retryPolicy\":{\"maxAttempts\":%d,\"initialBackoff\":\"0.01s\","
           "\"maxBackoff\":\"0.05s\",\"backoffMultiplier\":2,"
           "\"retryableStatusCodes\":[%s]%s}}]%s}",
           max_attempts, codes, more ? more : "", top ? top : "");
  return buf;
}

#define UNAVAIL "\"UNAVAILABLE\""

/* ---- observer ---- */

typedef struct obs_rec {
  uint64_t call_id;
  uint32_t attempt;
  grit_attempt_kind kind;
  char peer[128];
  uint64_t start_us, end_us;
  grit_status_code code;
  char message[128];
  uint64_t backoff_ms;
  bool pushback;
  grit_attempt_reason reason;
} obs_rec;

#define OBS_MAX 128

typedef struct obs {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  obs_rec r[OBS_MAX];
  size_t n;
} obs;

static void obs_init(obs *o) {
  memset(o, 0, sizeof(*o));
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->cv, NULL);
}

static void obs_destroy(obs *o) {
  pthread_mutex_destroy(&o->mu);
  pthread_cond_destroy(&o->cv);
}

static void obs_cb(const grit_attempt_record *rec, void *ud) {
  obs *o = ud;
  pthread_mutex_lock(&o->mu);
  if (o->n < OBS_MAX) {
    obs_rec *r = &o->r[o->n++];
    r->call_id = rec->call_id;
    r->attempt = rec->attempt;
    r->kind = rec->kind;
    snprintf(r->peer, sizeof(r->peer), "%s", rec->peer ? rec->peer : "");
    r->start_us = rec->start_us;
    r->end_us = rec->end_us;
    r->code = rec->code;
    snprintf(r->message, sizeof(r->message), "%s",
             rec->message ? rec->message : "");
    r->backoff_ms = rec->backoff_ms;
    r->pushback = rec->pushback;
    r->reason = rec->reason;
  }
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
}

/* Wait until |n| records are in; false after |ms|. */
static bool obs_wait(obs *o, size_t n, int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&o->mu);
  while (o->n < n)
    if (pthread_cond_timedwait(&o->cv, &o->mu, &ts) != 0)
      break;
  bool ok = o->n >= n;
  pthread_mutex_unlock(&o->mu);
  return ok;
}

static size_t obs_count(obs *o) {
  pthread_mutex_lock(&o->mu);
  size_t n = o->n;
  pthread_mutex_unlock(&o->mu);
  return n;
}

/* ---- channels and calls ---- */

/* A channel to |srv| with |cfg|, observer |o| (may be NULL) and |a| (may
 * be NULL; not consumed). */
static grit_channel *chan(h2s_server *srv, const char *cfg, obs *o,
                          grit_channel_args *a) {
  grit_channel_args *own = NULL;
  if (!a) {
    grit_channel_args_create(&own);
    a = own;
  }
  if (o)
    grit_channel_args_set_observer(a, obs_cb, o);
  grit_channel *ch = bh_channel_args(&srv, 1, cfg, a);
  grit_channel_args_destroy(own);
  return ch;
}

static grit_channel_args *args_int(const char *k, int64_t v) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel_args_set_int(a, k, v);
  return a;
}

/* A blocking unary call with |o| (NULL: CALL_MS deadline); fills |info|
 * and, if given, |st_out| (released by the caller). Returns the code. */
static grit_status_code call_info(grit_channel *ch, const char *method,
                                  const void *req, size_t len,
                                  const grit_call_opts *o, grit_call_info *info,
                                  grit_status *st_out) {
  grit_call_opts def = {.version = GRIT_CALL_OPTS_VERSION,
                        .timeout_ms = CALL_MS};
  grit_call *c = NULL;
  if (grit_call_start(ch, method, o ? o : &def, NULL, NULL, &c) != GRIT_OK)
    return (grit_status_code)-1;
  grit_call_send(c, req, len);
  grit_call_close_send(c);
  grit_status st;
  if (grit_call_finish(c, &st) != GRIT_OK) {
    grit_call_destroy(c);
    return (grit_status_code)-1;
  }
  if (info)
    grit_call_get_info(c, info);
  grit_call_destroy(c);
  grit_status_code code = st.code;
  if (st_out)
    *st_out = st;
  else
    grit_status_free(&st);
  return code;
}

static grit_status_code unary(grit_channel *ch, const char *method,
                              grit_call_info *info) {
  return call_info(ch, method, "x", 1, NULL, info, NULL);
}

static const char *prev_attempts(h2s_server *srv, size_t seq) {
  const h2s_request *r = h2s_server_request(srv, seq);
  return r ? h2s_request_header(r, "grpc-previous-rpc-attempts") : NULL;
}

/* Async completion recorder. */
typedef struct done_rec {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  grit_status_code code;
  grit_call_info info;
} done_rec;

static void done_init(done_rec *d) {
  memset(d, 0, sizeof(*d));
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, NULL);
}

static void done_destroy(done_rec *d) {
  pthread_mutex_destroy(&d->mu);
  pthread_cond_destroy(&d->cv);
}

static void done_unary_cb(const grit_status *st, const uint8_t *resp,
                          size_t resp_len, const grit_call_info *info,
                          void *ud) {
  (void)resp;
  (void)resp_len;
  done_rec *d = ud;
  pthread_mutex_lock(&d->mu);
  d->code = st->code;
  d->info = *info;
  d->done = true;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

static void done_call_cb(grit_call *call, const grit_status *st, void *ud) {
  (void)call;
  done_rec *d = ud;
  pthread_mutex_lock(&d->mu);
  d->code = st->code;
  d->done = true;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

static bool done_wait(done_rec *d, int ms) {
  uint64_t end = test_now_ms() + (uint64_t)ms;
  pthread_mutex_lock(&d->mu);
  while (!d->done && test_now_ms() < end) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 20 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&d->cv, &d->mu, &ts);
  }
  bool ok = d->done;
  pthread_mutex_unlock(&d->mu);
  return ok;
}

/* A grpc-timeout value in ms (rounded down), -1 if malformed. */
static int64_t timeout_ms_of(const char *v) {
  if (!v || strlen(v) < 2)
    return -1;
  char *end = NULL;
  long long x = strtoll(v, &end, 10);
  if (!end || end[0] == 0 || end[1] != 0 || x < 0)
    return -1;
  switch (*end) {
  case 'H':
    return x * 3600000;
  case 'M':
    return x * 60000;
  case 'S':
    return x * 1000;
  case 'm':
    return x;
  case 'u':
    return x / 1000;
  case 'n':
    return x / 1000000;
  default:
    return -1;
  }
}

static bool is_hex32(const char *s) {
  if (!s || strlen(s) != 32)
    return false;
  for (size_t i = 0; i < 32; i++)
    if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
      return false;
  return true;
}

/* ---- RT-02, RT-08, MX-01..MX-03: retry, then success ---- */

static void test_retry_then_ok(void) {
  h2s_server *srv =
      bh_server("path=/pkg.Svc/M repeat=2 trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 4, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_OK);
  ASSERT(h2s_server_wait_closed(srv, 3, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  /* RT-08: absent, "1", "2". */
  ASSERT_NULL(prev_attempts(srv, 0));
  ASSERT_STR_EQ(prev_attempts(srv, 1), "1");
  ASSERT_STR_EQ(prev_attempts(srv, 2), "2");
  for (size_t i = 0; i < 3; i++)
    ASSERT_EQ(h2s_server_request(srv, i)->n_msgs, 1); /* replayed */
  /* MX-03: one record per attempt, kinds and reasons. */
  ASSERT_EQ(obs_count(&o), 3);
  static const grit_attempt_kind kinds[] = {
      GRIT_ATTEMPT_FIRST, GRIT_ATTEMPT_RETRY, GRIT_ATTEMPT_RETRY};
  static const grit_attempt_reason why[] = {GRIT_REASON_NONE, GRIT_REASON_NONE,
                                            GRIT_REASON_OK};
  uint64_t backoff_sum = 0;
  char peer[64];
  snprintf(peer, sizeof(peer), "127.0.0.1:%u", h2s_server_port(srv));
  for (size_t i = 0; i < 3; i++) {
    ASSERT_EQ(o.r[i].call_id, info.call_id);
    ASSERT_EQ(o.r[i].attempt, i + 1);
    ASSERT_EQ(o.r[i].kind, kinds[i]);
    ASSERT_EQ(o.r[i].reason, why[i]);
    ASSERT_EQ(o.r[i].code, i < 2 ? GRIT_STATUS_UNAVAILABLE : GRIT_STATUS_OK);
    ASSERT_STR_EQ(o.r[i].peer, peer);
    ASSERT(!o.r[i].pushback);
    ASSERT_CMP(o.r[i].end_us, >=, o.r[i].start_us);
    backoff_sum += o.r[i].backoff_ms;
  }
  /* RT-03: 10 ms then 20 ms, each times U(0.8, 1.2). */
  ASSERT_EQ(o.r[0].backoff_ms, 0);
  ASSERT(o.r[1].backoff_ms >= 8 && o.r[1].backoff_ms <= 12);
  ASSERT(o.r[2].backoff_ms >= 16 && o.r[2].backoff_ms <= 24);
  /* The wait is real: the retry started after it (server clock). */
  ASSERT_CMP(h2s_server_request(srv, 1)->headers_ms, >=,
             h2s_server_request(srv, 0)->acted_ms + o.r[1].backoff_ms - 1);
  /* MX-02 */
  ASSERT_EQ(info.attempts, 3);
  ASSERT_EQ(info.transparent_retries, 0);
  ASSERT_EQ(info.hedges, 0);
  ASSERT_EQ(info.backoff_ms, backoff_sum);
  ASSERT_STR_EQ(info.peer, peer);
  /* MX-01 */
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.calls_started, 1);
  ASSERT_EQ(s.calls_succeeded, 1);
  ASSERT_EQ(s.calls_failed, 0);
  ASSERT_EQ(s.attempts, 3);
  ASSERT_EQ(s.retries, 2);
  ASSERT_EQ(s.transparent_retries, 0);
  ASSERT_EQ(s.throttled, 0);
  ASSERT_EQ(s.retries_per_call[1], 1); /* 2 retries: bucket "<= 2" */
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* RT-14: a code not in retryableStatusCodes ends the call at once. */
static void test_non_retryable(void) {
  h2s_server *srv = bh_server("trailers_only status=INVALID_ARGUMENT "
                              "message=bad%20arg");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_status st;
  ASSERT_EQ(call_info(ch, M, "x", 1, NULL, NULL, &st),
            GRIT_STATUS_INVALID_ARGUMENT);
  ASSERT_STR_EQ(st.message, "bad arg");
  grit_status_free(&st);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  ASSERT_EQ(obs_count(&o), 1);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_NON_RETRYABLE);
  ASSERT_EQ(o.r[0].code, GRIT_STATUS_INVALID_ARGUMENT);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* RT-02: maxAttempts counts the first attempt; the final status is the
 * last attempt's code and message. */
static void test_exhausted_last_status(void) {
  h2s_server *srv =
      bh_server("trailers_only status=UNAVAILABLE message=first\n"
                "trailers_only status=UNAVAILABLE message=second\n"
                "trailers_only status=RESOURCE_EXHAUSTED message=third\n"
                "trailers_only status=UNAVAILABLE message=never");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch = chan(
      srv,
      cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL ",\"RESOURCE_EXHAUSTED\"", "", ""),
      &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_status st;
  ASSERT_EQ(call_info(ch, M, "x", 1, NULL, NULL, &st),
            GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_STR_EQ(st.message, "third");
  grit_status_free(&st);
  ASSERT(h2s_server_wait_closed(srv, 3, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  ASSERT_EQ(obs_count(&o), 3);
  ASSERT_EQ(o.r[2].reason, GRIT_REASON_EXHAUSTED);
  ASSERT_STR_EQ(o.r[2].message, "third");
  ASSERT_EQ(h2s_server_script_left(srv), 1);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* SC-10: maxAttempts above the cap is lowered to it (default 5). */
static void test_max_attempts_cap(void) {
  h2s_server *srv = bh_server("repeat=* trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  cfg_retry(cfg, sizeof(cfg), 10, UNAVAIL, "", "");
  grit_channel *ch = chan(srv, cfg, NULL, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 5);
  ASSERT(h2s_server_wait_closed(srv, 5, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 5);
  grit_channel_destroy(ch);

  grit_channel_args *a = args_int(GRIT_ARG_MAX_ATTEMPTS_CAP, 3);
  ch = chan(srv, cfg, NULL, a);
  grit_channel_args_destroy(a);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 3);
  ASSERT(h2s_server_wait_closed(srv, 8, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 8);
  ASSERT_STR_EQ(prev_attempts(srv, 7), "2");
  grit_channel_destroy(ch);
  /* A cap above the default lets more through: 7 of the 10. */
  a = args_int(GRIT_ARG_MAX_ATTEMPTS_CAP, 7);
  ch = chan(srv, cfg, NULL, a);
  grit_channel_args_destroy(a);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 7);
  ASSERT(h2s_server_wait_closed(srv, 15, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 15);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* RT-05, RT-06: headers then an error status commits: not retried, and the
 * record says COMMITTED. (Trailers-Only is retried: test_retry_then_ok.) */
static void test_headers_then_error_committed(void) {
  h2s_server *srv = bh_server("nomsg status=UNAVAILABLE message=late");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_status st;
  ASSERT_EQ(call_info(ch, M, "x", 1, NULL, NULL, &st), GRIT_STATUS_UNAVAILABLE);
  ASSERT_STR_EQ(st.message, "late");
  grit_status_free(&st);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  ASSERT_EQ(obs_count(&o), 1);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_COMMITTED);
  ASSERT_EQ(o.r[0].code, GRIT_STATUS_UNAVAILABLE);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* RT-05: a streaming response committed by its first message (behind its
 * headers) is not retried when an error status follows. */
static void test_stream_committed_by_message(void) {
  h2s_server *srv = bh_server("text=hello status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION,
                       .timeout_ms = CALL_MS};
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Down", &co, NULL, NULL, &c));
  ASSERT_OK(grit_call_send(c, "q", 1));
  ASSERT_OK(grit_call_close_send(c));
  grit_bytes b;
  ASSERT_OK(grit_call_recv(c, &b));
  ASSERT_EQ(b.len, 5);
  ASSERT_MEM_EQ(b.data, "hello", 5);
  grit_bytes_free(&b);
  ASSERT_EQ(grit_call_recv(c, &b), GRIT_END_OF_STREAM);
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_UNAVAILABLE);
  grit_status_free(&st);
  grit_call_destroy(c);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  ASSERT_EQ(obs_count(&o), 1);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_COMMITTED);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* ---- RT-04: pushback ---- */

/* pushback=0: retried at once; the record says the wait was pushback. */
static void test_pushback_zero(void) {
  h2s_server *srv = bh_server("trailers_only status=UNAVAILABLE pushback=0");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  ASSERT_EQ(obs_count(&o), 2);
  ASSERT_EQ(o.r[1].kind, GRIT_ATTEMPT_RETRY);
  ASSERT(o.r[1].pushback);
  ASSERT_EQ(o.r[1].backoff_ms, 0);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* A positive pushback: the retry comes no sooner (server clock). */
static void test_pushback_positive(void) {
  h2s_server *srv = bh_server("trailers_only status=UNAVAILABLE pushback=300");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  const h2s_request *r0 = h2s_server_request(srv, 0);
  const h2s_request *r1 = h2s_server_request(srv, 1);
  ASSERT_CMP(r1->headers_ms, >=, r0->acted_ms + 299); /* ms rounding */
  ASSERT_EQ(o.r[1].backoff_ms, 300);
  ASSERT(o.r[1].pushback);
  ASSERT_EQ(info.backoff_ms, 300);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* Negative, unparsable or repeated: no retry, reason PUSHBACK. */
static void test_pushback_stop(void) {
  static const char *const scripts[] = {
      "trailers_only status=UNAVAILABLE pushback=-1",
      "trailers_only status=UNAVAILABLE pushback=abc",
      "trailers_only status=UNAVAILABLE pushback=1%200",
      ("trailers_only status=UNAVAILABLE pushback=10 "
       "trailer=grpc-retry-pushback-ms:10"), /* repeated */
  };
  for (size_t i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++) {
    h2s_server *srv = bh_server(scripts[i]);
    ASSERT_NOT_NULL(srv);
    char cfg[512];
    obs o;
    obs_init(&o);
    grit_channel *ch =
        chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, NULL);
    ASSERT_NOT_NULL(ch);
    ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_UNAVAILABLE);
    ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
    if (h2s_server_request_count(srv) != 1 || obs_count(&o) != 1 ||
        o.r[0].reason != GRIT_REASON_PUSHBACK)
      fprintf(stderr, "script: %s\n", scripts[i]);
    ASSERT_EQ(h2s_server_request_count(srv), 1);
    ASSERT_EQ(obs_count(&o), 1);
    ASSERT_EQ(o.r[0].reason, GRIT_REASON_PUSHBACK);
    grit_channel_destroy(ch);
    obs_destroy(&o);
    h2s_server_stop(srv);
  }
}

/* After a pushback, backoff restarts from initialBackoff. */
static void test_pushback_resets_backoff(void) {
  h2s_server *srv = bh_server("trailers_only status=UNAVAILABLE\n"
                              "trailers_only status=UNAVAILABLE\n"
                              "trailers_only status=UNAVAILABLE pushback=0\n"
                              "trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  /* initial 10 ms, x4, max 5 s: retries 1, 2, 3 without the pushback
   * would wait ~10, ~40, ~160 ms. */
  const char *cfg =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Svc\"}],"
      "\"retryPolicy\":{\"maxAttempts\":5,\"initialBackoff\":\"0.01s\","
      "\"maxBackoff\":\"5s\",\"backoffMultiplier\":4,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}";
  obs o;
  obs_init(&o);
  grit_channel *ch = chan(srv, cfg, &o, NULL);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 5);
  ASSERT_EQ(obs_count(&o), 5);
  ASSERT(o.r[1].backoff_ms >= 8 && o.r[1].backoff_ms <= 12);
  ASSERT(o.r[2].backoff_ms >= 32 && o.r[2].backoff_ms <= 48);
  ASSERT(o.r[3].pushback);
  ASSERT_EQ(o.r[3].backoff_ms, 0);
  /* Restarted: ~10 ms again, not ~640 ms. */
  ASSERT(!o.r[4].pushback);
  ASSERT(o.r[4].backoff_ms >= 8 && o.r[4].backoff_ms <= 12);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* Pushback never overrides maxAttempts or a non-retryable code. */
static void test_pushback_no_override(void) {
  h2s_server *srv =
      bh_server("repeat=2 trailers_only status=UNAVAILABLE pushback=0\n"
                "trailers_only status=INTERNAL pushback=0");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 2, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(obs_count(&o), 2);
  ASSERT_EQ(o.r[1].reason, GRIT_REASON_EXHAUSTED);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_INTERNAL);
  ASSERT_EQ(obs_count(&o), 3);
  ASSERT_EQ(o.r[2].reason, GRIT_REASON_NON_RETRYABLE);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* ---- RT-09: deadlines ---- */

/* A backoff (here a 2 s pushback) that would run past the call's
 * deadline: no further attempt is made and the record says DEADLINE; the
 * call ends DEADLINE_EXCEEDED when its deadline comes, as in grpc-core,
 * without sitting out the pushback (RT-09, RT-14 "if the deadline
 * allows"). */
static void test_deadline_during_backoff(void) {
  h2s_server *srv =
      bh_server("repeat=* trailers_only status=UNAVAILABLE pushback=2000");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 500};
  uint64_t t0 = test_now_ms();
  grit_status_code code = call_info(ch, M, "x", 1, &co, NULL, NULL);
  /* RT-09: the pushback does not fit; the deadline ends the call. */
  ASSERT_EQ(code, GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_CMP(test_now_ms() - t0, >=, 450);
  ASSERT_CMP(test_now_ms() - t0, <, 2000); /* did not sit out the pushback */
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  ASSERT_EQ(obs_count(&o), 1);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_DEADLINE);
  /* A pushback of 150 ms fits: the retry is made and hangs, the local
   * deadline ends it DEADLINE_EXCEEDED and nothing follows. */
  h2s_server_script_clear(srv);
  ASSERT_OK(h2s_server_script_add_text(
      srv, "trailers_only status=UNAVAILABLE pushback=150\nhang"));
  co.timeout_ms = 400;
  ASSERT_EQ(call_info(ch, M, "x", 1, &co, NULL, NULL),
            GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT(h2s_server_wait_closed(srv, 3, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  ASSERT(obs_wait(&o, 3, WAIT_MS));
  ASSERT_EQ(o.r[2].reason, GRIT_REASON_DEADLINE);
  ASSERT_EQ(o.r[2].code, GRIT_STATUS_DEADLINE_EXCEEDED);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* A server-sent DEADLINE_EXCEEDED is retried when listed. */
static void test_server_deadline_retried(void) {
  h2s_server *srv =
      bh_server("trailers_only status=DEADLINE_EXCEEDED pushback=200");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, "\"DEADLINE_EXCEEDED\"", "", ""),
           NULL, NULL);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  ASSERT_STR_EQ(prev_attempts(srv, 1), "1");
  /* Each attempt carries the remaining time as grpc-timeout (RT-09): the
   * second one at least the 200 ms pushback less. */
  int64_t t0 = timeout_ms_of(h2s_server_request(srv, 0)->grpc_timeout);
  int64_t t1 = timeout_ms_of(h2s_server_request(srv, 1)->grpc_timeout);
  ASSERT(t0 > 0 && t0 <= CALL_MS);
  ASSERT(t1 > 0 && t1 <= t0 - 200);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* RT-10: perAttemptRecvTimeout cancels a silent attempt (RST_STREAM) and
 * retries it. */
static void test_per_attempt_recv_timeout(void) {
  h2s_server *srv = bh_server("hang");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch = chan(srv,
                          cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL,
                                    ",\"perAttemptRecvTimeout\":\"0.2s\"", ""),
                          &o, NULL);
  ASSERT_NOT_NULL(ch);
  uint64_t t0 = test_now_ms();
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_OK);
  ASSERT_CMP(test_now_ms() - t0, >=, 190);
  ASSERT(h2s_server_wait_closed(srv, 2, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  const h2s_request *r0 = h2s_server_request(srv, 0);
  ASSERT(r0->client_rst);
  ASSERT_EQ(r0->client_rst_code, 8); /* CANCEL */
  ASSERT_STR_EQ(prev_attempts(srv, 1), "1");
  ASSERT_EQ(obs_count(&o), 2);
  ASSERT_EQ(o.r[0].code, GRIT_STATUS_CANCELLED);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_NONE);
  ASSERT_EQ(o.r[1].reason, GRIT_REASON_OK);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* RT-10: recv timeouts on every attempt: CANCELLED once maxAttempts is
 * used up, each attempt reset by the client. */
static void test_per_attempt_recv_timeout_exhausted(void) {
  h2s_server *srv = bh_server("repeat=* hang");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch = chan(srv,
                          cfg_retry(cfg, sizeof(cfg), 2, UNAVAIL,
                                    ",\"perAttemptRecvTimeout\":\"0.1s\"", ""),
                          &o, NULL);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_CANCELLED);
  ASSERT(h2s_server_wait_closed(srv, 2, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  for (size_t i = 0; i < 2; i++)
    ASSERT(h2s_server_request(srv, i)->client_rst);
  ASSERT_EQ(obs_count(&o), 2);
  ASSERT_EQ(o.r[1].code, GRIT_STATUS_CANCELLED);
  ASSERT_EQ(o.r[1].reason, GRIT_REASON_EXHAUSTED);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* ---- RT-11: application cancel ---- */

static void test_cancel_during_attempt(void) {
  h2s_server *srv = bh_server("hang");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  done_rec d;
  done_init(&d);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 10000};
  grit_call_cbs cbs = {.version = GRIT_CALL_CBS_VERSION,
                       .on_done = done_call_cb};
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, M, &co, &cbs, &d, &c));
  ASSERT_OK(grit_call_send(c, "x", 1));
  ASSERT_OK(grit_call_close_send(c));
  ASSERT(h2s_server_wait_requests(srv, 1, WAIT_MS));
  grit_call_cancel(c);
  ASSERT(done_wait(&d, WAIT_MS));
  ASSERT_EQ(d.code, GRIT_STATUS_CANCELLED);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  ASSERT(h2s_server_request(srv, 0)->client_rst);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_OK(grit_call_get_info(c, &info));
  ASSERT_EQ(info.attempts, 1);
  grit_call_destroy(c);
  /* No further attempt: a retry would come ~10 ms later; a later call on
   * another path is the next request the server sees. */
  ASSERT(!h2s_server_wait_requests(srv, 2, 200));
  ASSERT_EQ(obs_count(&o), 1);
  ASSERT_EQ(o.r[0].code, GRIT_STATUS_CANCELLED);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_CANCELLED);
  grit_channel_destroy(ch);
  done_destroy(&d);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

static void test_cancel_during_backoff(void) {
  h2s_server *srv = bh_server("trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  /* A 2 s backoff to cancel in. */
  const char *cfg =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Svc\"}],"
      "\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":\"2s\","
      "\"maxBackoff\":\"2s\",\"backoffMultiplier\":1,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}";
  obs o;
  obs_init(&o);
  grit_channel *ch = chan(srv, cfg, &o, NULL);
  ASSERT_NOT_NULL(ch);
  done_rec d;
  done_init(&d);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 20000};
  grit_call_cbs cbs = {.version = GRIT_CALL_CBS_VERSION,
                       .on_done = done_call_cb};
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, M, &co, &cbs, &d, &c));
  ASSERT_OK(grit_call_send(c, "x", 1));
  ASSERT_OK(grit_call_close_send(c));
  ASSERT(obs_wait(&o, 1, WAIT_MS)); /* attempt 1 ended: backoff runs */
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_NONE);
  uint64_t t0 = test_now_ms();
  grit_call_cancel(c);
  ASSERT(done_wait(&d, WAIT_MS));
  ASSERT_EQ(d.code, GRIT_STATUS_CANCELLED);
  ASSERT_CMP(test_now_ms() - t0, <, 1500); /* did not wait out the backoff */
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_OK(grit_call_get_info(c, &info));
  ASSERT_EQ(info.attempts, 1);
  grit_call_destroy(c);
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  ASSERT_EQ(obs_count(&o), 1);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.attempts, 1);
  ASSERT_EQ(s.retries, 0);
  grit_channel_destroy(ch);
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  done_destroy(&d);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* ---- RT-07: replay buffer overflow ---- */

/* The first send is over the per-call limit: committed before the first
 * attempt, still delivered, not retried. */
static void test_buffer_overflow_first_send(void) {
  h2s_server *srv = bh_server("repeat=2 trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel_args *a = args_int(GRIT_ARG_PER_CALL_RETRY_BUFFER, 100);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, a);
  grit_channel_args_destroy(a);
  ASSERT_NOT_NULL(ch);
  char big[200];
  memset(big, 'b', sizeof(big));
  ASSERT_EQ(call_info(ch, M, big, sizeof(big), NULL, NULL, NULL),
            GRIT_STATUS_UNAVAILABLE);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_EQ(r->n_msgs, 1);
  ASSERT_EQ(r->msg_bytes, sizeof(big));
  ASSERT_EQ(obs_count(&o), 1);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_COMMITTED);
  /* A small message on the same channel is still retried. */
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* A later send of a client stream overflows: committed to the attempt in
 * flight, every message delivered, not retried. */
static void test_buffer_overflow_later_send(void) {
  h2s_server *srv = bh_server("trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel_args *a = args_int(GRIT_ARG_PER_CALL_RETRY_BUFFER, 100);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, a);
  grit_channel_args_destroy(a);
  ASSERT_NOT_NULL(ch);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION,
                       .timeout_ms = CALL_MS};
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Up", &co, NULL, NULL, &c));
  char m[40];
  for (int i = 0; i < 3; i++) { /* 45, 90, then 135 framed bytes */
    memset(m, 'a' + i, sizeof(m));
    ASSERT_OK(grit_call_send(c, m, sizeof(m)));
  }
  ASSERT_OK(grit_call_close_send(c));
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_UNAVAILABLE);
  grit_status_free(&st);
  grit_call_destroy(c);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_EQ(r->n_msgs, 3);
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(r->msgs[i].data[0], 'a' + i);
  ASSERT_EQ(obs_count(&o), 1);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_COMMITTED);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* RT-07: a send over the limit while a retry waits for its backoff: no
 * attempt is live, so the next one is the committed one. It replays
 * everything, and its failure is final. */
static void test_buffer_overflow_during_backoff(void) {
  h2s_server *srv =
      bh_server("at_headers trailers_only status=UNAVAILABLE\n"
                "trailers_only status=UNAVAILABLE message=second\n"
                "text=never");
  ASSERT_NOT_NULL(srv);
  const char *cfg =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Svc\"}],"
      "\"retryPolicy\":{\"maxAttempts\":5,\"initialBackoff\":\"0.3s\","
      "\"maxBackoff\":\"0.3s\",\"backoffMultiplier\":1,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}";
  obs o;
  obs_init(&o);
  grit_channel_args *a = args_int(GRIT_ARG_PER_CALL_RETRY_BUFFER, 100);
  grit_channel *ch = chan(srv, cfg, &o, a);
  grit_channel_args_destroy(a);
  ASSERT_NOT_NULL(ch);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION,
                       .timeout_ms = CALL_MS};
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Up", &co, NULL, NULL, &c));
  char m[80];
  memset(m, 'a', 40);
  ASSERT_OK(grit_call_send(c, m, 40));
  ASSERT(obs_wait(&o, 1, WAIT_MS)); /* attempt 1 failed: backoff runs */
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_NONE);
  memset(m, 'b', sizeof(m));
  ASSERT_OK(grit_call_send(c, m, sizeof(m))); /* 45 + 85 > 100 */
  ASSERT_OK(grit_call_close_send(c));
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_STR_EQ(st.message, "second");
  grit_status_free(&st);
  grit_call_destroy(c);
  ASSERT(h2s_server_wait_closed(srv, 2, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  const h2s_request *r = h2s_server_request(srv, 1);
  ASSERT_EQ(r->n_msgs, 2);
  ASSERT_EQ(r->msgs[0].data[0], 'a');
  ASSERT_EQ(r->msgs[1].data[0], 'b');
  ASSERT_EQ(obs_count(&o), 2);
  ASSERT_EQ(o.r[1].kind, GRIT_ATTEMPT_RETRY);
  ASSERT_EQ(o.r[1].reason, GRIT_REASON_COMMITTED);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* RT-07: the per-channel limit counts every call's buffer: a second call
 * that would pass it commits; the first keeps its retries. */
static void test_buffer_overflow_channel(void) {
  h2s_server *srv =
      bh_server("path=/pkg.Svc/A trailers_only status=UNAVAILABLE\n"
                "path=/pkg.Svc/B trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel_args *a = args_int(GRIT_ARG_PER_CHANNEL_RETRY_BUFFER, 100);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), &o, a);
  grit_channel_args_destroy(a);
  ASSERT_NOT_NULL(ch);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION,
                       .timeout_ms = CALL_MS};
  char m[60];
  memset(m, 'a', sizeof(m));
  /* Call A holds 65 buffered bytes, not yet half-closed. */
  grit_call *ca = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/A", &co, NULL, NULL, &ca));
  ASSERT_OK(grit_call_send(ca, m, sizeof(m)));
  ASSERT(h2s_server_wait_requests(srv, 1, WAIT_MS));
  /* Call B's 65 bytes do not fit beside them: committed, not retried. */
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(call_info(ch, "/pkg.Svc/B", m, sizeof(m), NULL, &info, NULL),
            GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 1);
  /* Call A is retried. */
  ASSERT_OK(grit_call_close_send(ca));
  grit_status st;
  ASSERT_OK(grit_call_finish(ca, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_OK(grit_call_get_info(ca, &info));
  ASSERT_EQ(info.attempts, 2);
  grit_call_destroy(ca);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  /* Everything was released: a call as big as the limit allows retries
   * again. */
  ASSERT_OK(h2s_server_script_add_text(
      srv, "path=/pkg.Svc/B trailers_only status=UNAVAILABLE"));
  ASSERT_EQ(call_info(ch, "/pkg.Svc/B", m, sizeof(m), NULL, &info, NULL),
            GRIT_STATUS_OK);
  ASSERT_EQ(info.attempts, 2);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* RT-12: a pick failure of a non-wait-for-ready call fails the attempt
 * with UNAVAILABLE and the policy decides: every retry picks again. */
static void test_pick_failure_retried(void) {
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  h2s_server_kill(srv); /* nobody listens: connecting fails */
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 3);
  ASSERT_EQ(obs_count(&o), 3);
  ASSERT_EQ(o.r[1].kind, GRIT_ATTEMPT_RETRY);
  ASSERT_EQ(o.r[2].reason, GRIT_REASON_EXHAUSTED);
  ASSERT_STR_EQ(o.r[2].peer, "");
  ASSERT_EQ(h2s_server_request_count(srv), 0);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* An HTTP error status without grpc-status (HS-02: 503 -> UNAVAILABLE)
 * commits nothing and is retried. */
static void test_http_503_retried(void) {
  h2s_server *srv = bh_server("trailers_only http=503 no_grpc_status\n"
                              "http=503 content_type=text/html nomsg "
                              "no_grpc_status");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 4, UNAVAIL, "", ""), NULL, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_OK);
  ASSERT_EQ(info.attempts, 3);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* ---- RT-13: streaming replay ---- */

/* Client streaming: the server reads every message, then fails; the
 * second attempt receives the same messages in the same order. */
static void test_stream_replay_in_order(void) {
  h2s_server *srv = bh_server("trailers_only status=UNAVAILABLE\n"
                              "text=done");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), NULL, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION,
                       .timeout_ms = CALL_MS};
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Up", &co, NULL, NULL, &c));
  static const char *const msgs[] = {"one", "two", "three", "four", "five"};
  for (size_t i = 0; i < 5; i++)
    ASSERT_OK(grit_call_send(c, msgs[i], strlen(msgs[i])));
  ASSERT_OK(grit_call_close_send(c));
  grit_bytes b;
  ASSERT_OK(grit_call_recv(c, &b));
  ASSERT_EQ(b.len, 4);
  grit_bytes_free(&b);
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(c);
  ASSERT(h2s_server_wait_closed(srv, 2, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  for (size_t k = 0; k < 2; k++) {
    const h2s_request *r = h2s_server_request(srv, k);
    ASSERT_EQ(r->n_msgs, 5);
    ASSERT(r->half_closed);
    for (size_t i = 0; i < 5; i++) {
      ASSERT_EQ(r->msgs[i].len, strlen(msgs[i]));
      ASSERT_MEM_EQ(r->msgs[i].data, msgs[i], strlen(msgs[i]));
    }
  }
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Sends made after a retry began follow the replayed ones, in order. */
static void test_stream_replay_then_new_sends(void) {
  h2s_server *srv = bh_server("at_headers trailers_only status=UNAVAILABLE\n"
                              "text=done");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION,
                       .timeout_ms = CALL_MS};
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Up", &co, NULL, NULL, &c));
  ASSERT_OK(grit_call_send(c, "m0", 2));
  ASSERT_OK(grit_call_send(c, "m1", 2));
  /* The first attempt fails on its HEADERS; wait until the second one
   * reached the server, then send more. */
  ASSERT(h2s_server_wait_requests(srv, 2, WAIT_MS));
  ASSERT_OK(grit_call_send(c, "m2", 2));
  ASSERT_OK(grit_call_send(c, "m3", 2));
  ASSERT_OK(grit_call_close_send(c));
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(c);
  ASSERT(h2s_server_wait_closed(srv, 2, WAIT_MS));
  const h2s_request *r = h2s_server_request(srv, 1);
  ASSERT_EQ(r->n_msgs, 4);
  for (size_t i = 0; i < 4; i++) {
    char want[3] = {'m', (char)('0' + i), 0};
    ASSERT_EQ(r->msgs[i].len, 2);
    ASSERT_MEM_EQ(r->msgs[i].data, want, 2);
  }
  ASSERT_EQ(obs_count(&o), 2);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* ---- TR-01..TR-04 with a retry policy ---- */

/* TR-02, RT-08: GOAWAY below the stream: one transparent retry, the
 * attempt number and grpc-previous-rpc-attempts unchanged. */
static void test_goaway_transparent(void) {
  h2s_server *srv = bh_server("goaway=-1 goaway_now");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_OK);
  ASSERT(h2s_server_wait_closed(srv, 2, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  ASSERT(h2s_server_request(srv, 0)->goaway_sent);
  ASSERT_EQ(h2s_server_request(srv, 1)->conn_index, 1);
  ASSERT_NULL(prev_attempts(srv, 0));
  ASSERT_NULL(prev_attempts(srv, 1));
  ASSERT_EQ(info.attempts, 2);
  ASSERT_EQ(info.transparent_retries, 1);
  ASSERT_EQ(info.backoff_ms, 0);
  ASSERT_EQ(obs_count(&o), 2);
  ASSERT_EQ(o.r[0].kind, GRIT_ATTEMPT_FIRST);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_NONE);
  ASSERT_EQ(o.r[1].kind, GRIT_ATTEMPT_TRANSPARENT);
  ASSERT_EQ(o.r[1].attempt, 1); /* keeps the number */
  ASSERT_EQ(o.r[1].backoff_ms, 0);
  ASSERT_EQ(o.r[1].reason, GRIT_REASON_OK);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.attempts, 2);
  ASSERT_EQ(s.transparent_retries, 1);
  ASSERT_EQ(s.retries, 0);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* TR-02: REFUSED_STREAM is retried transparently once per call; after
 * that the policy decides (UNAVAILABLE), and a later attempt refused
 * again gets no second transparent retry. */
static void test_refused_once_per_call(void) {
  h2s_server *srv = bh_server("repeat=3 rst=REFUSED_STREAM");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_OK);
  ASSERT(h2s_server_wait_closed(srv, 4, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 4);
  ASSERT_NULL(prev_attempts(srv, 0));
  ASSERT_NULL(prev_attempts(srv, 1)); /* the transparent retry */
  ASSERT_STR_EQ(prev_attempts(srv, 2), "1");
  ASSERT_STR_EQ(prev_attempts(srv, 3), "2");
  ASSERT_EQ(info.attempts, 4);
  ASSERT_EQ(info.transparent_retries, 1);
  ASSERT_EQ(obs_count(&o), 4);
  ASSERT_EQ(o.r[1].kind, GRIT_ATTEMPT_TRANSPARENT);
  ASSERT_EQ(o.r[2].kind, GRIT_ATTEMPT_RETRY);
  ASSERT_EQ(o.r[3].kind, GRIT_ATTEMPT_RETRY);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* TR-04: the connection died after the request was written: no
 * transparent retry; the policy decides on UNAVAILABLE. */
static void test_drop_after_write(void) {
  h2s_server *srv = bh_server("drop");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  ASSERT_STR_EQ(prev_attempts(srv, 1), "1");
  ASSERT_EQ(info.transparent_retries, 0);
  ASSERT_EQ(obs_count(&o), 2);
  ASSERT_EQ(o.r[0].code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(o.r[1].kind, GRIT_ATTEMPT_RETRY);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  /* Not listed: the UNAVAILABLE stands, one request. */
  srv = bh_server("drop");
  ASSERT_NOT_NULL(srv);
  ch = chan(srv, cfg_retry(cfg, sizeof(cfg), 3, "\"ABORTED\"", "", ""), NULL,
            NULL);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 1);
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* TR-01: a stream waiting under MAX_CONCURRENT_STREAMS when a GOAWAY
 * arrives was never on the wire: replayed on a new connection. */
static void test_mcs_goaway_not_sent(void) {
  /* a is answered 1 s late: the GOAWAY must come while it holds the only
   * stream, even on a stalled machine. */
  h2s_action slow = {.delay_ms = 1000};
  h2s_config scfg = {
      .quiet = true, .max_concurrent_streams = 1, .default_action = &slow};
  h2s_server *srv = NULL;
  ASSERT_OK(h2s_server_start(&scfg, &srv));
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), &o, NULL);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_OK); /* SETTINGS known */
  done_rec a, b;
  done_init(&a);
  done_init(&b);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 10000};
  ASSERT_OK(grit_unary_call_async(ch, M, "a", 1, &co, done_unary_cb, &a));
  ASSERT(h2s_server_wait_requests(srv, 2, WAIT_MS));
  ASSERT_OK(grit_unary_call_async(ch, M, "b", 1, &co, done_unary_cb, &b));
  /* b reaches the transport's queue in the loop turn that starts its
   * attempt, before any GOAWAY can be read: wait (bounded) for that. */
  grit_channel_stats cs = GRIT_CHANNEL_STATS_INIT;
  for (int i = 0; i < 500 && cs.attempts < 3; i++) {
    usleep(10 * 1000);
    ASSERT_OK(grit_channel_get_stats(ch, &cs));
  }
  ASSERT_EQ(cs.attempts, 3);
  ASSERT_EQ(h2s_server_request_count(srv), 2); /* b is held back */
  h2s_server_goaway(srv, 0, false);
  ASSERT(done_wait(&a, WAIT_MS));
  ASSERT(done_wait(&b, WAIT_MS));
  ASSERT_EQ(a.code, GRIT_STATUS_OK);
  ASSERT_EQ(b.code, GRIT_STATUS_OK);
  ASSERT_EQ(a.info.transparent_retries, 0);
  ASSERT_EQ(b.info.transparent_retries, 1);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  const h2s_request *rb = h2s_server_request(srv, 2);
  ASSERT_EQ(rb->conn_index, 1);
  ASSERT_EQ(rb->n_msgs, 1);
  ASSERT_EQ(rb->msgs[0].data[0], 'b');
  ASSERT_NULL(h2s_request_header(rb, "grpc-previous-rpc-attempts"));
  done_destroy(&a);
  done_destroy(&b);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* TR-03, TH-04: a transparent retry costs neither an attempt of
 * maxAttempts nor a throttle token. maxAttempts 2 and maxTokens 3 leave
 * room for exactly one configured retry. */
static void test_transparent_free(void) {
  h2s_server *srv = bh_server("rst=REFUSED_STREAM\n"
                              "trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch = chan(
      srv,
      cfg_retry(cfg, sizeof(cfg), 2, UNAVAIL, "",
                ",\"retryThrottling\":{\"maxTokens\":3,\"tokenRatio\":0.001}"),
      &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, M, &info), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 3);
  ASSERT_NULL(prev_attempts(srv, 1));
  ASSERT_STR_EQ(prev_attempts(srv, 2), "1");
  ASSERT_EQ(info.attempts, 3);
  ASSERT_EQ(info.transparent_retries, 1);
  ASSERT_EQ(obs_count(&o), 3);
  ASSERT_EQ(o.r[2].reason, GRIT_REASON_OK);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.throttled, 0);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* RT-01: GRIT_ARG_ENABLE_RETRIES=0: neither configured nor transparent
 * retries. */
static void test_retries_disabled(void) {
  h2s_server *srv = bh_server("trailers_only status=UNAVAILABLE\n"
                              "rst=REFUSED_STREAM");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel_args *a = args_int(GRIT_ARG_ENABLE_RETRIES, 0);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, a);
  grit_channel_args_destroy(a);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_UNAVAILABLE);
  ASSERT(h2s_server_wait_closed(srv, 2, WAIT_MS));
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  ASSERT_EQ(h2s_server_request(srv, 1)->rst_sent, 7);
  ASSERT_EQ(obs_count(&o), 2);
  ASSERT_EQ(o.r[0].reason, GRIT_REASON_DISABLED);
  ASSERT_EQ(o.r[1].reason, GRIT_REASON_DISABLED);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.attempts, 2);
  ASSERT_EQ(s.retries, 0);
  ASSERT_EQ(s.transparent_retries, 0);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* ---- TH-01..TH-04: throttling ---- */

/* maxTokens 10, ratio 0.1, maxAttempts 2, a backend failing /Fail: the
 * exact sequence of TH-03, observed through retries the server sees. */
static void test_throttling_end_to_end(void) {
  h2s_server *srv =
      bh_server("path=/pkg.Svc/Fail repeat=* trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel *ch = chan(
      srv,
      cfg_retry(cfg, sizeof(cfg), 2, UNAVAIL, "",
                ",\"retryThrottling\":{\"maxTokens\":10,\"tokenRatio\":0.1}"),
      &o, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  /* 10 -> 9 (retry) -> 8 (exhausted); 7 (retry) -> 6 (exhausted). */
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(unary(ch, "/pkg.Svc/Fail", &info), GRIT_STATUS_UNAVAILABLE);
    ASSERT_EQ(info.attempts, 2);
  }
  ASSERT_EQ(obs_count(&o), 4);
  ASSERT_EQ(o.r[3].reason, GRIT_REASON_EXHAUSTED);
  /* 5: throttled, no retry. */
  ASSERT_EQ(unary(ch, "/pkg.Svc/Fail", &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 1);
  ASSERT_EQ(obs_count(&o), 5);
  ASSERT_EQ(o.r[4].reason, GRIT_REASON_THROTTLED);
  ASSERT_EQ(h2s_server_request_count(srv), 5);
  /* 10 successes: 6.0; a failure leaves 5.0: still throttled. */
  for (int i = 0; i < 10; i++)
    ASSERT_EQ(unary(ch, "/pkg.Svc/Ok", NULL), GRIT_STATUS_OK);
  ASSERT_EQ(unary(ch, "/pkg.Svc/Fail", &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 1);
  /* 11 successes: 6.1; a failure leaves 5.1: the retry is allowed (and its
   * own failure, 4.1, throttles what would follow). */
  for (int i = 0; i < 11; i++)
    ASSERT_EQ(unary(ch, "/pkg.Svc/Ok", NULL), GRIT_STATUS_OK);
  size_t before = obs_count(&o);
  ASSERT_EQ(unary(ch, "/pkg.Svc/Fail", &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 2);
  ASSERT_EQ(obs_count(&o), before + 2);
  ASSERT_EQ(o.r[before].reason, GRIT_REASON_NONE);
  ASSERT_EQ(o.r[before + 1].kind, GRIT_ATTEMPT_RETRY);
  ASSERT_EQ(o.r[before + 1].reason, GRIT_REASON_THROTTLED);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.throttled, 3);
  ASSERT_EQ(s.retries, 3);
  grit_channel_destroy(ch);
  obs_destroy(&o);
  h2s_server_stop(srv);
}

/* TH-01: channels with the same server name share one bucket: by the same
 * target, and by GRIT_ARG_DEFAULT_AUTHORITY across backends. maxTokens 4
 * allows one retry from full (3 > 2), none after two failures (2). */
static void test_throttling_shared(void) {
  h2s_server *srv[2] = {bh_server("repeat=* trailers_only status=UNAVAILABLE"),
                        bh_server("repeat=* trailers_only status=UNAVAILABLE")};
  ASSERT_NOT_NULL(srv[0]);
  ASSERT_NOT_NULL(srv[1]);
  char cfg[512];
  cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "",
            ",\"retryThrottling\":{\"maxTokens\":4,\"tokenRatio\":0.1}");
  grit_call_info info = GRIT_CALL_INFO_INIT;
  /* Same target. */
  grit_channel *a = chan(srv[0], cfg, NULL, NULL);
  grit_channel *b = chan(srv[0], cfg, NULL, NULL);
  ASSERT_NOT_NULL(a);
  ASSERT_NOT_NULL(b);
  ASSERT_EQ(unary(a, M, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 2); /* 3 (retry), then 2: throttled */
  ASSERT_EQ(unary(b, M, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 1); /* the other channel's tokens: 1 */
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(b, &s));
  ASSERT_EQ(s.throttled, 1);
  grit_channel_destroy(a);
  grit_channel_destroy(b);
  /* Different backends, one authority. */
  grit_channel_args *args = NULL;
  ASSERT_OK(grit_channel_args_create(&args));
  ASSERT_OK(grit_channel_args_set_string(args, GRIT_ARG_DEFAULT_AUTHORITY,
                                         "shared.retry.test"));
  a = chan(srv[0], cfg, NULL, args);
  b = chan(srv[1], cfg, NULL, args);
  grit_channel_args_destroy(args);
  ASSERT_NOT_NULL(a);
  ASSERT_NOT_NULL(b);
  ASSERT_EQ(unary(a, M, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 2);
  size_t before = h2s_server_request_count(srv[1]);
  ASSERT_EQ(unary(b, M, &info), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(info.attempts, 1);
  ASSERT_EQ(h2s_server_request_count(srv[1]), before + 1);
  ASSERT_EQ(h2s_server_request(srv[1], before)->authority != NULL, 1);
  ASSERT_STR_EQ(h2s_server_request(srv[1], before)->authority,
                "shared.retry.test");
  grit_channel_destroy(a);
  grit_channel_destroy(b);
  h2s_server_stop(srv[0]);
  h2s_server_stop(srv[1]);
}

/* ---- RT-03: a seeded PRNG replays the same backoffs ---- */

static void seeded_backoffs(h2s_server *srv, int64_t seed, uint64_t out[4]) {
  char cfg[512];
  obs o;
  obs_init(&o);
  grit_channel_args *a = args_int(GRIT_ARG_RNG_SEED, seed);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 5, UNAVAIL, "", ""), &o, a);
  grit_channel_args_destroy(a);
  memset(out, 0, 4 * sizeof(out[0]));
  if (ch) {
    unary(ch, M, NULL);
    for (size_t i = 1; i < 5 && i < obs_count(&o); i++)
      out[i - 1] = o.r[i].backoff_ms;
    grit_channel_destroy(ch);
  }
  obs_destroy(&o);
}

static void test_seeded_backoff(void) {
  h2s_server *srv = bh_server("repeat=* trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  /* Large backoffs make the jitter visible: 40, 80, 160, 320 ms nominal
   * would be slow, so use 10 ms x2 max 50 ms: 10, 20, 40, 50. */
  uint64_t x[4], y[4];
  seeded_backoffs(srv, 12345, x);
  seeded_backoffs(srv, 12345, y);
  static const uint64_t nominal[4] = {10, 20, 40, 50};
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(x[i], y[i]);
    ASSERT(x[i] * 10 >= nominal[i] * 8 && x[i] * 10 <= nominal[i] * 12 + 10);
  }
  ASSERT_EQ(h2s_server_request_count(srv), 10);
  h2s_server_stop(srv);
}

/* ---- MX-01, MX-02: counters after a known sequence ---- */

static void test_stats_sequence(void) {
  h2s_server *srv =
      bh_server("path=/pkg.Svc/A repeat=2 trailers_only status=UNAVAILABLE\n"
                "path=/pkg.Svc/B trailers_only status=PERMISSION_DENIED\n"
                "path=/pkg.Svc/C rst=REFUSED_STREAM\n"
                "path=/pkg.Svc/D repeat=* trailers_only status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 4, UNAVAIL, "", ""), NULL, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, "/pkg.Svc/Ok", &info), GRIT_STATUS_OK); /* 1 */
  ASSERT_EQ(info.attempts, 1);
  ASSERT_EQ(unary(ch, "/pkg.Svc/A", &info), GRIT_STATUS_OK); /* 3, 2 r */
  ASSERT_EQ(info.attempts, 3);
  ASSERT_EQ(unary(ch, "/pkg.Svc/B", &info),
            GRIT_STATUS_PERMISSION_DENIED);                  /* 1 */
  ASSERT_EQ(unary(ch, "/pkg.Svc/C", &info), GRIT_STATUS_OK); /* 2, 1 t */
  ASSERT_EQ(info.attempts, 2);
  ASSERT_EQ(info.transparent_retries, 1);
  ASSERT_EQ(unary(ch, "/pkg.Svc/D", &info),
            GRIT_STATUS_UNAVAILABLE); /* 4, 3 r */
  ASSERT_EQ(info.attempts, 4);
  ASSERT_CMP(info.backoff_ms, >=, 8 + 16 + 32);
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  ASSERT_OK(grit_channel_get_stats(ch, &s));
  ASSERT_EQ(s.calls_started, 5);
  ASSERT_EQ(s.calls_succeeded, 3);
  ASSERT_EQ(s.calls_failed, 2);
  ASSERT_EQ(s.attempts, 11);
  ASSERT_EQ(s.retries, 5);
  ASSERT_EQ(s.transparent_retries, 1);
  ASSERT_EQ(s.hedges, 0);
  ASSERT_EQ(s.throttled, 0);
  static const uint64_t hist[8] = {0, 1, 1, 0, 0, 0, 0, 0};
  for (int i = 0; i < 8; i++)
    ASSERT_EQ(s.retries_per_call[i], hist[i]);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* ---- ID-01: idempotency keys ---- */

static void test_idempotency_keys(void) {
  h2s_server *srv = bh_server("path=/pkg.Svc/M trailers_only "
                              "status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  char cfg[512];
  grit_channel_args *a = args_int(GRIT_ARG_IDEMPOTENCY_KEYS, 1);
  grit_channel *ch =
      chan(srv, cfg_retry(cfg, sizeof(cfg), 3, UNAVAIL, "", ""), NULL, a);
  grit_channel_args_destroy(a);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_OK);              /* 2 attempts */
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_OK);              /* 1 attempt */
  ASSERT_EQ(unary(ch, "/other.Svc/M", NULL), GRIT_STATUS_OK); /* no policy */
  ASSERT_EQ(h2s_server_request_count(srv), 4);
  const char *k0 =
      h2s_request_header(h2s_server_request(srv, 0), "idempotency-key");
  const char *k1 =
      h2s_request_header(h2s_server_request(srv, 1), "idempotency-key");
  const char *k2 =
      h2s_request_header(h2s_server_request(srv, 2), "idempotency-key");
  ASSERT(is_hex32(k0));
  ASSERT_STR_EQ(k1, k0); /* every attempt of a call */
  ASSERT(is_hex32(k2));
  ASSERT(strcmp(k0, k2) != 0); /* calls differ */
  ASSERT_NULL(
      h2s_request_header(h2s_server_request(srv, 3), "idempotency-key"));
  grit_channel_destroy(ch);

  /* The application's own key, on a channel without the argument; none
   * for calls that bring none. */
  ASSERT_OK(h2s_server_script_add_text(
      srv, "path=/pkg.Svc/M trailers_only status=UNAVAILABLE"));
  ch = chan(srv, cfg, NULL, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION,
                       .timeout_ms = CALL_MS,
                       .idempotency_key = "app-key-0042"};
  ASSERT_EQ(call_info(ch, M, "x", 1, &co, NULL, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(unary(ch, M, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 7);
  ASSERT_STR_EQ(
      h2s_request_header(h2s_server_request(srv, 4), "idempotency-key"),
      "app-key-0042");
  ASSERT_STR_EQ(
      h2s_request_header(h2s_server_request(srv, 5), "idempotency-key"),
      "app-key-0042");
  ASSERT_NULL(
      h2s_request_header(h2s_server_request(srv, 6), "idempotency-key"));
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static const test_case tests[] = {
    {"retry_then_ok", test_retry_then_ok},
    {"non_retryable", test_non_retryable},
    {"exhausted_last_status", test_exhausted_last_status},
    {"max_attempts_cap", test_max_attempts_cap},
    {"headers_then_error_committed", test_headers_then_error_committed},
    {"stream_committed_by_message", test_stream_committed_by_message},
    {"pushback_zero", test_pushback_zero},
    {"pushback_positive", test_pushback_positive},
    {"pushback_stop", test_pushback_stop},
    {"pushback_resets_backoff", test_pushback_resets_backoff},
    {"pushback_no_override", test_pushback_no_override},
    {"deadline_during_backoff", test_deadline_during_backoff},
    {"server_deadline_retried", test_server_deadline_retried},
    {"per_attempt_recv_timeout", test_per_attempt_recv_timeout},
    {"per_attempt_recv_timeout_exhausted",
     test_per_attempt_recv_timeout_exhausted},
    {"cancel_during_attempt", test_cancel_during_attempt},
    {"cancel_during_backoff", test_cancel_during_backoff},
    {"buffer_overflow_first_send", test_buffer_overflow_first_send},
    {"buffer_overflow_later_send", test_buffer_overflow_later_send},
    {"buffer_overflow_during_backoff", test_buffer_overflow_during_backoff},
    {"buffer_overflow_channel", test_buffer_overflow_channel},
    {"pick_failure_retried", test_pick_failure_retried},
    {"http_503_retried", test_http_503_retried},
    {"stream_replay_in_order", test_stream_replay_in_order},
    {"stream_replay_then_new_sends", test_stream_replay_then_new_sends},
    {"goaway_transparent", test_goaway_transparent},
    {"refused_once_per_call", test_refused_once_per_call},
    {"drop_after_write", test_drop_after_write},
    {"mcs_goaway_not_sent", test_mcs_goaway_not_sent},
    {"transparent_free", test_transparent_free},
    {"retries_disabled", test_retries_disabled},
    {"throttling_end_to_end", test_throttling_end_to_end},
    {"throttling_shared", test_throttling_shared},
    {"seeded_backoff", test_seeded_backoff},
    {"stats_sequence", test_stats_sequence},
    {"idempotency_keys", test_idempotency_keys},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
