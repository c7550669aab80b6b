/*
 * The call API without traps (issue 19) against h2server/: no status
 * that reads as a success for a call that never ran, the end of a response
 * stream as its own result, wait_for_ready as one three-valued field and
 * the opts version, the one-response check of unary and client-streaming
 * calls (also against grpcio). Every wait is bounded (call deadlines or
 * timed waits).
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "bh.h"
#include "pypeer.h"

#define WAIT_MS 5000 /* generous bound for anything that should be quick */
#define CALL_MS 5000 /* deadline of ordinary calls */

/* The tests' own runtime, joined at the end, so that nothing the I/O
 * thread still holds at exit looks like a leak to valgrind. */
static grit_runtime *g_rt;

static grit_channel *chan(h2s_server *srv, const char *service_config) {
  char target[64];
  grit_channel_args *a = NULL;
  if (grit_channel_args_create(&a) != GRIT_OK)
    return NULL;
  if (service_config)
    grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, service_config);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(g_rt, bh_target(target, sizeof(target), &srv, 1), a,
                          &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel: %s: %s\n", d.path, d.reason);
  grit_channel_args_destroy(a);
  return ch;
}

static grit_call_opts opts_ms(uint64_t ms) {
  return (grit_call_opts){.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = ms};
}

/* |st| holds a failure: |code|, with a message containing |word|. Then
 * release it. */
#define ASSERT_FAILED_STATUS(st, want_code, word)                              \
  do {                                                                         \
    ASSERT_EQ((st).code, (want_code));                                         \
    ASSERT_NOT_NULL((st).message);                                             \
    ASSERT_NOT_NULL(strstr((st).message, (word)));                             \
    ASSERT_NOT_NULL((st).trailers);                                            \
    grit_status_free(&(st));                                                   \
  } while (0)

/* ---- no false success (issue 19 point 1) ---- */

/* Every error return of grit_unary_call leaves a non-OK status with a
 * message saying why, and the server never sees such a call. */
static void test_unary_errors_fill_status(void) {
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts o = opts_ms(CALL_MS);
  grit_bytes resp;
  grit_status st;

  ASSERT_EQ(grit_unary_call(ch, "pkg.Svc/M", "x", 1, &o, &resp, &st, NULL),
            GRIT_ERR_INVALID_ARG);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INVALID_ARGUMENT, "/package.Service");
  ASSERT_NULL(resp.data);

  grit_call_opts v1 = {.version = 1, .timeout_ms = CALL_MS};
  ASSERT_EQ(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &v1, &resp, &st, NULL),
            GRIT_ERR_INVALID_ARG);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INVALID_ARGUMENT, "version");

  grit_call_opts bad_wfr = opts_ms(CALL_MS);
  bad_wfr.wait_for_ready = (grit_wait_for_ready)3;
  ASSERT_EQ(
      grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &bad_wfr, &resp, &st, NULL),
      GRIT_ERR_INVALID_ARG);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INVALID_ARGUMENT, "wait_for_ready");

  ASSERT_EQ(grit_unary_call(NULL, "/pkg.Svc/M", "x", 1, &o, &resp, &st, NULL),
            GRIT_ERR_INVALID_ARG);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INVALID_ARGUMENT, "channel");

  ASSERT_EQ(grit_unary_call(ch, NULL, "x", 1, &o, &resp, &st, NULL),
            GRIT_ERR_INVALID_ARG);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INVALID_ARGUMENT, "method");

  ASSERT_EQ(grit_unary_call(ch, "/pkg.Svc/M", NULL, 3, &o, &resp, &st, NULL),
            GRIT_ERR_INVALID_ARG);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INVALID_ARGUMENT, "request");

  /* None of these reached the server; a good call does, and its status is
   * a real OK with a message (""), not a zeroed struct. */
  ASSERT_EQ(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, &resp, &st, NULL),
            GRIT_OK);
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  ASSERT_NOT_NULL(st.message);
  ASSERT_EQ(resp.len, 1);
  grit_status_free(&st);
  grit_bytes_free(&resp);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  ASSERT(!h2s_server_wait_requests(srv, 2, 100));
  ASSERT_STR_EQ(h2s_server_request(srv, 0)->path, "/pkg.Svc/M");
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* A shut-down channel (destroyed while a call handle keeps its memory):
 * GRIT_ERR_SHUTDOWN and UNAVAILABLE, from both entry points. */
static void test_shutdown_channel_fills_status(void) {
  h2s_server *srv = bh_server("hang");
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts o = opts_ms(CALL_MS);
  grit_call *held = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Hang", &o, NULL, NULL, &held));
  ASSERT_OK(grit_call_close_send(held));
  ASSERT(h2s_server_wait_requests(srv, 1, WAIT_MS));
  grit_channel_destroy(ch); /* |held| keeps the channel's memory */

  grit_status st;
  ASSERT_EQ(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, NULL, &st, NULL),
            GRIT_ERR_SHUTDOWN);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_UNAVAILABLE, "shut down");
  grit_call *c = (grit_call *)1;
  ASSERT_EQ(grit_call_start(ch, "/pkg.Svc/M", &o, NULL, NULL, &c),
            GRIT_ERR_SHUTDOWN);
  ASSERT_NULL(c);

  /* The held call ended with the channel. */
  ASSERT_OK(grit_call_finish(held, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_CANCELLED);
  grit_status_free(&st);
  grit_call_destroy(held);
  ASSERT(!h2s_server_wait_requests(srv, 2, 100));
  h2s_server_stop(srv);
}

/* grit_call_finish's errors fill the status too. */
static void test_finish_errors_fill_status(void) {
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, NULL);
  ASSERT_NOT_NULL(ch);
  grit_status st;
  ASSERT_EQ(grit_call_finish(NULL, &st), GRIT_ERR_INVALID_ARG);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INVALID_ARGUMENT, "call");

  grit_call_opts o = opts_ms(CALL_MS);
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/M", &o, NULL, NULL, &c));
  ASSERT_OK(grit_call_send(c, "x", 1));
  ASSERT_OK(grit_call_close_send(c));
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_EQ(grit_call_finish(c, &st), GRIT_ERR_CALL_STATE);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_FAILED_PRECONDITION, "already");
  grit_call_destroy(c);

  /* An async call has no blocking finish. */
  static const grit_call_cbs no_cbs = {.version = GRIT_CALL_CBS_VERSION};
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/M", &o, &no_cbs, NULL, &c));
  ASSERT_EQ(grit_call_finish(c, &st), GRIT_ERR_CALL_STATE);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_FAILED_PRECONDITION, "async");
  grit_call_destroy(c);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* A blocking call made from a callback (the I/O thread) fails at once with
 * a status saying so, instead of deadlocking or reading as OK. */
typedef struct nested {
  grit_channel *ch;
  pthread_mutex_t mu;
  bool done;
  grit_err unary_rv;
  grit_status unary_st;
} nested;

static void nested_on_done(const grit_status *st, const uint8_t *resp,
                           size_t len, const grit_call_info *info, void *ud) {
  nested *n = ud;
  grit_call_opts o = opts_ms(CALL_MS);
  n->unary_rv = grit_unary_call(n->ch, "/pkg.Svc/M", "x", 1, &o, NULL,
                                &n->unary_st, NULL);
  pthread_mutex_lock(&n->mu);
  n->done = true;
  pthread_mutex_unlock(&n->mu);
}

static void test_io_thread_fills_status(void) {
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, NULL);
  ASSERT_NOT_NULL(ch);
  nested n = {.ch = ch};
  pthread_mutex_init(&n.mu, NULL);
  grit_call_opts o = opts_ms(CALL_MS);
  ASSERT_OK(
      grit_unary_call_async(ch, "/pkg.Svc/M", "x", 1, &o, nested_on_done, &n));
  uint64_t until = test_now_ms() + WAIT_MS;
  pthread_mutex_lock(&n.mu);
  while (!n.done && test_now_ms() < until) {
    pthread_mutex_unlock(&n.mu);
    usleep(2000);
    pthread_mutex_lock(&n.mu);
  }
  bool done = n.done;
  pthread_mutex_unlock(&n.mu);
  ASSERT(done);
  ASSERT_EQ(n.unary_rv, GRIT_ERR_WOULD_DEADLOCK);
  ASSERT_FAILED_STATUS(n.unary_st, GRIT_STATUS_FAILED_PRECONDITION,
                       "I/O thread");
  pthread_mutex_destroy(&n.mu);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* ---- names (issue 19 point 5) ---- */

/* grit_call_recv says GRIT_END_OF_STREAM (positive, not an error) at the
 * end of a response stream, and again if asked again; NOT_FOUND is left to
 * lookups. */
static void test_end_of_stream(void) {
  h2s_server *srv = bh_server("text=ab count=2");
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts o = opts_ms(CALL_MS);
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Stream", &o, NULL, NULL, &c));
  ASSERT_OK(grit_call_close_send(c));
  grit_bytes b;
  for (int i = 0; i < 2; i++) {
    ASSERT_OK(grit_call_recv(c, &b));
    ASSERT_EQ(b.len, 2);
    grit_bytes_free(&b);
  }
  grit_err rv = grit_call_recv(c, &b);
  ASSERT_EQ(rv, GRIT_END_OF_STREAM);
  ASSERT(rv > 0);
  ASSERT_NULL(b.data);
  ASSERT_EQ(grit_call_recv(c, &b), GRIT_END_OF_STREAM);
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(c);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Version 1 opts are refused by grit_call_start (the layout changed);
 * version 2 (before call credentials and interceptors) still works, and a
 * version from the future is refused. */
static void test_opts_version(void) {
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, NULL);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(GRIT_CALL_OPTS_VERSION, 3);
  grit_call *c = (grit_call *)1;
  grit_call_opts v1 = {.version = 1};
  ASSERT_EQ(grit_call_start(ch, "/pkg.Svc/M", &v1, NULL, NULL, &c),
            GRIT_ERR_INVALID_ARG);
  ASSERT_NULL(c);
  grit_call_opts v4 = {.version = 4};
  ASSERT_EQ(grit_call_start(ch, "/pkg.Svc/M", &v4, NULL, NULL, &c),
            GRIT_ERR_INVALID_ARG);
  ASSERT(!h2s_server_wait_requests(srv, 1, 100));
  /* A version-2 caller's struct ends before call_credentials: grit reads
   * none of the version-3 fields (ASan/valgrind see a read past it). */
  struct v2_opts {
    unsigned version;
    uint64_t timeout_ms;
    grit_wait_for_ready wait_for_ready;
    const grit_metadata *metadata;
    const char *authority;
    const char *idempotency_key;
    grit_method_kind kind;
    grit_compression compression;
    const char *traceparent;
  } *v2 = malloc(sizeof(*v2));
  memset(v2, 0, sizeof(*v2));
  v2->version = 2;
  v2->timeout_ms = 5000;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/M", (const grit_call_opts *)v2, NULL,
                            NULL, &c));
  free(v2);
  grit_call_close_send(c);
  grit_status st;
  grit_call_finish(c, &st);
  grit_status_free(&st);
  grit_call_destroy(c);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* The three values of wait_for_ready: DEFAULT follows the config, OFF and
 * ON override it either way. No server listens on the second address, so
 * a call that does not wait fails UNAVAILABLE at once and one that waits
 * runs into its (short) deadline. */
static void test_wait_for_ready_values(void) {
  static const char cfg[] =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Wfr\"}],"
      "\"waitForReady\":true}]}";
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  uint16_t port = h2s_server_port(srv);
  h2s_server_stop(srv); /* nothing listens there now */
  char target[64];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%u", port);
  grit_channel_args *a = NULL;
  ASSERT_OK(grit_channel_args_create(&a));
  ASSERT_OK(grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, cfg));
  grit_channel *ch = NULL;
  ASSERT_OK(grit_channel_create(g_rt, target, a, NULL, &ch));
  grit_channel_args_destroy(a);
  struct {
    const char *method;
    grit_wait_for_ready wfr;
    grit_status_code want;
  } cases[] = {
      {"/pkg.Svc/M", GRIT_WFR_DEFAULT, GRIT_STATUS_UNAVAILABLE},
      {"/pkg.Wfr/M", GRIT_WFR_DEFAULT, GRIT_STATUS_DEADLINE_EXCEEDED},
      {"/pkg.Wfr/M", GRIT_WFR_OFF, GRIT_STATUS_UNAVAILABLE},
      {"/pkg.Svc/M", GRIT_WFR_ON, GRIT_STATUS_DEADLINE_EXCEEDED},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    /* Only the waiting calls run into their deadline. */
    bool waits = cases[i].want == GRIT_STATUS_DEADLINE_EXCEEDED;
    grit_call_opts o = opts_ms(waits ? 300 : CALL_MS);
    o.wait_for_ready = cases[i].wfr;
    grit_status st;
    ASSERT_OK(
        grit_unary_call(ch, cases[i].method, "x", 1, &o, NULL, &st, NULL));
    if (st.code != cases[i].want)
      fprintf(stderr, "case %zu: %s\n", i, st.message);
    ASSERT_EQ(st.code, cases[i].want);
    grit_status_free(&st);
  }
  grit_channel_destroy(ch);
}

/* ---- one response for unary and client streaming (issue 19 point 2) ---- */

#define RST_CANCEL 8 /* HTTP/2 error code */

/* A unary call that gets a second message ends INTERNAL at once and
 * cancels its stream; the server hangs after its messages, so only the
 * client can have ended it. */
static void test_unary_second_message(void) {
  h2s_server *srv = bh_server("text=ab count=3 end=hang\n"
                              "text=ab count=3");
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts o = opts_ms(CALL_MS);
  grit_bytes resp;
  grit_status st;
  uint64_t t0 = test_now_ms();
  ASSERT_OK(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, &resp, &st, NULL));
  ASSERT_CMP(test_now_ms() - t0, <, CALL_MS); /* not the deadline */
  ASSERT_NULL(resp.data);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INTERNAL,
                       "cardinality violation: UNARY method sent more than "
                       "one response message");
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT(r->client_rst);
  ASSERT_EQ(r->client_rst_code, RST_CANCEL);

  /* The same when every message and the OK trailers come at once. */
  ASSERT_OK(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, &resp, &st, NULL));
  ASSERT_NULL(resp.data);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INTERNAL, "more than one");
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

typedef struct unary_rec {
  pthread_mutex_t mu;
  bool done;
  grit_status_code code;
  bool had_resp;
  char message[160];
} unary_rec;

static void unary_rec_cb(const grit_status *st, const uint8_t *resp, size_t len,
                         const grit_call_info *info, void *ud) {
  unary_rec *u = ud;
  pthread_mutex_lock(&u->mu);
  u->code = st->code;
  u->had_resp = resp != NULL;
  snprintf(u->message, sizeof(u->message), "%s", st->message);
  u->done = true;
  pthread_mutex_unlock(&u->mu);
}

static bool unary_rec_wait(unary_rec *u, uint64_t ms) {
  uint64_t until = test_now_ms() + ms;
  for (;;) {
    pthread_mutex_lock(&u->mu);
    bool done = u->done;
    pthread_mutex_unlock(&u->mu);
    if (done || test_now_ms() >= until)
      return done;
    usleep(2000);
  }
}

/* OK without a message is INTERNAL "no response message", whether the
 * server sent headers or Trailers-Only; a non-OK status without a message
 * is that status, unchanged. The async unary call does the same. */
static void test_unary_no_message(void) {
  h2s_server *srv = bh_server("nomsg\n"
                              "trailers_only\n"
                              "nomsg status=NOT_FOUND message=gone\n"
                              "nomsg");
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts o = opts_ms(CALL_MS);
  grit_bytes resp;
  grit_status st;
  for (int i = 0; i < 2; i++) {
    ASSERT_OK(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, &resp, &st, NULL));
    ASSERT_NULL(resp.data);
    ASSERT_FAILED_STATUS(st, GRIT_STATUS_INTERNAL,
                         "cardinality violation: UNARY method sent no "
                         "response message");
  }
  ASSERT_OK(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, &resp, &st, NULL));
  ASSERT_EQ(st.code, GRIT_STATUS_NOT_FOUND);
  ASSERT_STR_EQ(st.message, "gone");
  grit_status_free(&st);

  unary_rec u = {.done = false};
  pthread_mutex_init(&u.mu, NULL);
  ASSERT_OK(
      grit_unary_call_async(ch, "/pkg.Svc/M", "x", 1, &o, unary_rec_cb, &u));
  ASSERT(unary_rec_wait(&u, WAIT_MS));
  ASSERT_EQ(u.code, GRIT_STATUS_INTERNAL);
  ASSERT(!u.had_resp);
  ASSERT_NOT_NULL(strstr(u.message, "no response message"));
  pthread_mutex_destroy(&u.mu);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* The INTERNAL is the final outcome: a retry policy that retries INTERNAL
 * (and a hedging policy for which it is non-fatal) starts no other
 * attempt, and the observer's record shows the server's OK. */
typedef struct obs_rec {
  pthread_mutex_t mu;
  int n;
  grit_status_code code;
  grit_attempt_reason reason;
} obs_rec;

static void obs_rec_cb(const grit_attempt_record *r, void *ud) {
  obs_rec *o = ud;
  pthread_mutex_lock(&o->mu);
  o->n++;
  o->code = r->code;
  o->reason = r->reason;
  pthread_mutex_unlock(&o->mu);
}

static void test_no_message_not_retried(void) {
  static const char *cfgs[] = {
      "{\"methodConfig\":[{\"name\":[{}],\"retryPolicy\":{"
      "\"maxAttempts\":4,\"initialBackoff\":\"0.01s\",\"maxBackoff\":\"0.01s\","
      "\"backoffMultiplier\":1,\"retryableStatusCodes\":[\"INTERNAL\"]}}]}",
      "{\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":{"
      "\"maxAttempts\":4,\"hedgingDelay\":\"20s\","
      "\"nonFatalStatusCodes\":[\"INTERNAL\"]}}]}",
  };
  for (size_t i = 0; i < 2; i++) {
    h2s_server *srv = bh_server("repeat=* nomsg");
    ASSERT_NOT_NULL(srv);
    obs_rec obs = {.n = 0};
    pthread_mutex_init(&obs.mu, NULL);
    char target[64];
    grit_channel_args *a = NULL;
    ASSERT_OK(grit_channel_args_create(&a));
    ASSERT_OK(
        grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, cfgs[i]));
    ASSERT_OK(grit_channel_args_set_observer(a, obs_rec_cb, &obs));
    grit_channel *ch = NULL;
    ASSERT_OK(grit_channel_create(
        g_rt, bh_target(target, sizeof(target), &srv, 1), a, NULL, &ch));
    grit_channel_args_destroy(a);
    grit_call_opts o = opts_ms(CALL_MS);
    grit_status st;
    ASSERT_OK(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, NULL, &st, NULL));
    ASSERT_FAILED_STATUS(st, GRIT_STATUS_INTERNAL, "no response message");
    ASSERT(!h2s_server_wait_requests(srv, 2, 200));
    grit_channel_destroy(ch); /* the observer has run for every attempt */
    ASSERT_EQ(obs.n, 1);
    ASSERT_EQ(obs.code, GRIT_STATUS_OK);
    ASSERT_EQ(obs.reason, GRIT_REASON_OK);
    pthread_mutex_destroy(&obs.mu);
    h2s_server_stop(srv);
  }
}

/* grit_call_start learns the kind from the opts: CLIENT_STREAMING checks,
 * SERVER_STREAMING and UNKNOWN do not; a kind out of range is refused. */
static void test_call_start_kinds(void) {
  h2s_server *srv = bh_server("text=ab count=2 end=hang\n"
                              "repeat=2 text=ab count=2");
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts o = opts_ms(CALL_MS);
  o.kind = GRIT_METHOD_CLIENT_STREAMING;
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Up", &o, NULL, NULL, &c));
  ASSERT_OK(grit_call_send(c, "a", 1));
  ASSERT_OK(grit_call_send(c, "b", 1));
  ASSERT_OK(grit_call_close_send(c));
  grit_bytes b;
  ASSERT_OK(grit_call_recv(c, &b));
  grit_bytes_free(&b);
  ASSERT_EQ(grit_call_recv(c, &b), GRIT_END_OF_STREAM);
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INTERNAL,
                       "CLIENT_STREAMING method sent more than one");
  grit_call_destroy(c);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  ASSERT_EQ(h2s_server_request(srv, 0)->client_rst_code, RST_CANCEL);

  grit_method_kind free_kinds[] = {GRIT_METHOD_SERVER_STREAMING,
                                   GRIT_METHOD_UNKNOWN};
  for (int i = 0; i < 2; i++) {
    o.kind = free_kinds[i];
    ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Down", &o, NULL, NULL, &c));
    ASSERT_OK(grit_call_close_send(c));
    int n = 0;
    while (grit_call_recv(c, &b) == GRIT_OK) {
      grit_bytes_free(&b);
      n++;
    }
    ASSERT_EQ(n, 2);
    ASSERT_OK(grit_call_finish(c, &st));
    ASSERT_EQ(st.code, GRIT_STATUS_OK);
    grit_status_free(&st);
    grit_call_destroy(c);
  }
  o.kind = (grit_method_kind)5;
  ASSERT_EQ(grit_call_start(ch, "/pkg.Svc/Up", &o, NULL, NULL, &c),
            GRIT_ERR_INVALID_ARG);
  ASSERT_STR_EQ(grit_method_kind_name(GRIT_METHOD_BIDI_STREAMING),
                "BIDI_STREAMING");
  ASSERT_NULL(grit_method_kind_name((grit_method_kind)5));
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* The same against grpcio, whose handlers are registered with the kind
 * that breaks the caller's expectation (test/peers/cardinality_server.py). */
static void test_grpcio_cardinality(void) {
  if (!pypeer_has_grpc()) {
    fprintf(stderr, "skip: %s has no grpc module\n", PYPEER_PYTHON);
    return;
  }
  pypeer peer = {.pid = -1, .stdin_fd = -1};
  ASSERT(pypeer_start(&peer, "cardinality_server.py"));
  char target[64];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%u", peer.port);
  grit_channel *ch = NULL;
  ASSERT_OK(grit_channel_create(g_rt, target, NULL, NULL, &ch));
  grit_call_opts o = opts_ms(10000);
  grit_bytes resp;
  grit_status st;
  ASSERT_OK(grit_unary_call(ch, "/card.Svc/One", "x", 1, &o, &resp, &st, NULL));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  ASSERT_EQ(resp.len, 1);
  grit_bytes_free(&resp);
  grit_status_free(&st);
  ASSERT_OK(
      grit_unary_call(ch, "/card.Svc/Many", "x", 1, &o, &resp, &st, NULL));
  ASSERT_NULL(resp.data);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INTERNAL, "more than one");
  ASSERT_OK(
      grit_unary_call(ch, "/card.Svc/None", "x", 1, &o, &resp, &st, NULL));
  ASSERT_NULL(resp.data);
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INTERNAL, "no response message");

  /* A client stream to the empty bidi handler, and the server stream
   * read as what it is. */
  o.kind = GRIT_METHOD_CLIENT_STREAMING;
  grit_call *c = NULL;
  ASSERT_OK(grit_call_start(ch, "/card.Svc/None", &o, NULL, NULL, &c));
  ASSERT_OK(grit_call_send(c, "a", 1));
  ASSERT_OK(grit_call_close_send(c));
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_FAILED_STATUS(st, GRIT_STATUS_INTERNAL, "no response message");
  grit_call_destroy(c);
  o.kind = GRIT_METHOD_SERVER_STREAMING;
  ASSERT_OK(grit_call_start(ch, "/card.Svc/Many", &o, NULL, NULL, &c));
  ASSERT_OK(grit_call_send(c, "x", 1));
  ASSERT_OK(grit_call_close_send(c));
  int n = 0;
  grit_bytes b;
  while (grit_call_recv(c, &b) == GRIT_OK) {
    grit_bytes_free(&b);
    n++;
  }
  ASSERT_EQ(n, 3);
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(c);
  grit_channel_destroy(ch);
  pypeer_stop(&peer);
}

/* ---- per-call info for the blocking unary call (issue 19 point 4) ---- */

/* grit_unary_call fills |info| as grit_call_get_info does: attempts (a
 * retry after UNAVAILABLE), hedges, the peer, an increasing call id; all
 * zero when the call did not run. */
static void test_unary_info(void) {
  static const char retry_cfg[] =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Retry\"}],"
      "\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":\"0.01s\","
      "\"maxBackoff\":\"0.01s\",\"backoffMultiplier\":1,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}},"
      "{\"name\":[{\"service\":\"pkg.Hedge\"}],"
      "\"hedgingPolicy\":{\"maxAttempts\":2,\"hedgingDelay\":\"0s\"}}]}";
  h2s_server *srv = bh_server("path=/pkg.Retry/M trailers_only "
                              "status=UNAVAILABLE");
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = chan(srv, retry_cfg);
  ASSERT_NOT_NULL(ch);
  grit_call_opts o = opts_ms(CALL_MS);
  grit_status st;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  memset(&info, 0xab, sizeof(info));
  info.size = sizeof(info);
  ASSERT_OK(grit_unary_call(ch, "/pkg.Retry/M", "x", 1, &o, NULL, &st, &info));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_NE(info.call_id, 0);
  ASSERT_EQ(info.attempts, 2);
  ASSERT_EQ(info.hedges, 0);
  ASSERT_EQ(info.transparent_retries, 0);
  char peer[64];
  snprintf(peer, sizeof(peer), "127.0.0.1:%u", h2s_server_port(srv));
  ASSERT_STR_EQ(info.peer, peer);
  uint64_t first_id = info.call_id;

  ASSERT_OK(grit_unary_call(ch, "/pkg.Hedge/M", "x", 1, &o, NULL, &st, &info));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_CMP(info.call_id, >, first_id);
  ASSERT_EQ(info.attempts, 2);
  ASSERT_EQ(info.hedges, 1);
  ASSERT_STR_EQ(info.peer, peer);

  memset(&info, 0xab, sizeof(info));
  info.size = sizeof(info);
  ASSERT_EQ(grit_unary_call(ch, "nope", "x", 1, &o, NULL, &st, &info),
            GRIT_ERR_INVALID_ARG);
  grit_status_free(&st);
  ASSERT_EQ(info.call_id, 0);
  ASSERT_EQ(info.attempts, 0);
  ASSERT_STR_EQ(info.peer, "");
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static const test_case tests[] = {
    {"unary_errors_fill_status", test_unary_errors_fill_status},
    {"shutdown_channel_fills_status", test_shutdown_channel_fills_status},
    {"finish_errors_fill_status", test_finish_errors_fill_status},
    {"io_thread_fills_status", test_io_thread_fills_status},
    {"end_of_stream", test_end_of_stream},
    {"opts_version", test_opts_version},
    {"wait_for_ready_values", test_wait_for_ready_values},
    {"unary_second_message", test_unary_second_message},
    {"unary_no_message", test_unary_no_message},
    {"no_message_not_retried", test_no_message_not_retried},
    {"call_start_kinds", test_call_start_kinds},
    {"grpcio_cardinality", test_grpcio_cardinality},
    {"unary_info", test_unary_info},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  if (grit_runtime_create(&g_rt) != GRIT_OK)
    return 1;
  int rv = test_main(tests, argc, argv);
  /* A failed case may have left a channel open: the runtime would wait. */
  if (test_failures == 0)
    grit_runtime_destroy(g_rt);
  return rv;
}
