/* Lifetimes in grit.h, made true and run under valgrind and ASan (SPEC
 * AP-06, issue 23 point 2): a call that outlives its channel keeps
 * working (it ends CANCELLED and its handle stays valid until
 * grit_call_destroy), a call destroyed from its own callback, a channel
 * destroyed from a call's callback, and the runtime (default or own) shut
 * down while call handles are still open: each is clean, with nothing
 * read after it was freed and nothing leaked. */
#include <pthread.h>
#include <unistd.h>

#include "bh.h"

#define CALL_MS 10000
#define HANG "path=/pkg.Svc/Hang repeat=* hang"

static grit_call_opts opts(void) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  return o;
}

/* An async call's record, written on the I/O thread. */
typedef struct done_rec {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int dones;
  grit_status_code code;
  bool destroy_in_headers, destroy_in_done;
  grit_channel *destroy_channel; /* grit_channel_destroy it in on_done */
} done_rec;

static void rec_init(done_rec *r) {
  memset(r, 0, sizeof(*r));
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
}

static void rec_free(done_rec *r) {
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
}

/* Wait (bounded) for |n| on_done calls; returns how many came. */
static int rec_wait(done_rec *r, int n) {
  uint64_t end = test_now_ms() + CALL_MS;
  pthread_mutex_lock(&r->mu);
  while (r->dones < n && test_now_ms() < end) {
    pthread_mutex_unlock(&r->mu);
    usleep(2000);
    pthread_mutex_lock(&r->mu);
  }
  int d = r->dones;
  pthread_mutex_unlock(&r->mu);
  return d;
}

static void on_headers(grit_call *c, const grit_metadata *md, void *ud) {
  done_rec *r = ud;
  if (r->destroy_in_headers)
    grit_call_destroy(c); /* from its own callback, mid-call */
}

static void on_done(grit_call *c, const grit_status *st, void *ud) {
  done_rec *r = ud;
  if (r->destroy_channel)
    grit_channel_destroy(r->destroy_channel); /* from a call's callback */
  if (r->destroy_in_done)
    grit_call_destroy(c); /* from its own last callback */
  pthread_mutex_lock(&r->mu);
  r->code = st->code;
  r->dones++;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static const grit_call_cbs cbs = {.version = GRIT_CALL_CBS_VERSION,
                                  .on_headers = on_headers,
                                  .on_done = on_done};

/* A blocking call on a hanging method, request sent and half-closed;
 * NULL if any step failed. */
static grit_call *hanging_call(grit_channel *ch) {
  grit_call_opts o = opts();
  grit_call *c = NULL;
  if (grit_call_start(ch, "/pkg.Svc/Hang", &o, NULL, NULL, &c) != GRIT_OK ||
      grit_call_send(c, "x", 1) != GRIT_OK ||
      grit_call_close_send(c) != GRIT_OK) {
    grit_call_destroy(c);
    return NULL;
  }
  return c;
}

/* The handle of a call whose channel is gone: every function works on it
 * and says the call has ended CANCELLED. */
static void use_orphan(grit_call *c) {
  grit_bytes b;
  ASSERT_EQ(grit_call_recv(c, &b), GRIT_END_OF_STREAM);
  ASSERT_EQ(grit_call_send(c, "y", 1), GRIT_ERR_CALL_STATE);
  ASSERT_EQ(grit_call_try_send(c, "y", 1), GRIT_ERR_CALL_STATE);
  ASSERT_EQ(grit_call_close_send(c), GRIT_ERR_CALL_STATE);
  grit_call_cancel(c);
  ASSERT_NOT_NULL(grit_call_headers(c));
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_OK(grit_call_get_info(c, &info));
  ASSERT_NE(info.call_id, 0);
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_CANCELLED);
  grit_status_free(&st);
  grit_call_destroy(c);
}

/* grit.h: a call may outlive its channel; it ends CANCELLED with the
 * channel's destroy, and its handle stays valid until grit_call_destroy.
 * The channel's memory goes with the last call. */
static void test_call_outlives_channel(void) {
  h2s_server *srv = bh_server(HANG);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call *blocking = hanging_call(ch);
  ASSERT_NOT_NULL(blocking);
  done_rec r;
  rec_init(&r);
  grit_call_opts o = opts();
  grit_call *async = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Hang", &o, &cbs, &r, &async));
  ASSERT_OK(grit_call_close_send(async));
  ASSERT(h2s_server_wait_requests(srv, 2, CALL_MS));
  grit_channel_destroy(ch); /* ch must not be used from here on */
  /* The async call's on_done ran before the destroy returned. */
  ASSERT_EQ(rec_wait(&r, 1), 1);
  ASSERT_EQ(r.code, GRIT_STATUS_CANCELLED);
  use_orphan(blocking);
  grit_call_cancel(async);
  grit_call_destroy(async);
  ASSERT_EQ(r.dones, 1);
  rec_free(&r);
  h2s_server_stop(srv);
}

/* grit.h: grit_call_destroy is safe inside the call's own callbacks; on_done
 * still runs exactly once. */
static void test_call_destroyed_in_own_callback(void) {
  h2s_server *srv = bh_server(NULL); /* echo, OK */
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  ASSERT_NOT_NULL(ch);
  for (int where = 0; where < 2; where++) {
    done_rec r;
    rec_init(&r);
    r.destroy_in_headers = where == 0;
    r.destroy_in_done = where == 1;
    grit_call_opts o = opts();
    grit_call *c = NULL;
    ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Echo", &o, &cbs, &r, &c));
    ASSERT_OK(grit_call_send(c, "hi", 2));
    ASSERT_OK(grit_call_close_send(c));
    ASSERT_EQ(rec_wait(&r, 1), 1);
    /* c is released: only the callback destroyed it. */
    ASSERT_EQ(bh_unary(ch, "/pkg.Svc/Echo", "x", CALL_MS, NULL),
              GRIT_STATUS_OK);
    ASSERT_EQ(r.dones, 1);
    rec_free(&r);
  }
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* grit.h: grit_channel_destroy from a call's callback returns at once; the
 * channel's other calls end CANCELLED, and their handles stay valid. */
static void test_channel_destroyed_in_call_callback(void) {
  h2s_server *srv = bh_server(HANG);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  ASSERT_NOT_NULL(ch);
  done_rec hang, echo;
  rec_init(&hang);
  rec_init(&echo);
  echo.destroy_channel = ch;
  grit_call_opts o = opts();
  grit_call *h = NULL, *e = NULL;
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Hang", &o, &cbs, &hang, &h));
  ASSERT_OK(grit_call_close_send(h));
  ASSERT(h2s_server_wait_requests(srv, 1, CALL_MS));
  ASSERT_OK(grit_call_start(ch, "/pkg.Svc/Echo", &o, &cbs, &echo, &e));
  ASSERT_OK(grit_call_send(e, "hi", 2));
  ASSERT_OK(grit_call_close_send(e));
  ASSERT_EQ(rec_wait(&echo, 1), 1);
  ASSERT_EQ(echo.code, GRIT_STATUS_OK);
  ASSERT_EQ(rec_wait(&hang, 1), 1);
  ASSERT_EQ(hang.code, GRIT_STATUS_CANCELLED);
  /* The handles outlive the channel. */
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_OK(grit_call_get_info(h, &info));
  ASSERT_EQ(grit_call_try_send(h, "x", 1), GRIT_ERR_CALL_STATE);
  grit_call_destroy(h);
  grit_call_destroy(e);
  rec_free(&hang);
  rec_free(&echo);
  h2s_server_stop(srv);
}

/* grit.h: the default runtime can be shut down once its channels are
 * destroyed, even while call handles made on them are open; they keep
 * working and the last one frees what is left. The same for a runtime of
 * the caller's own. */
static void test_runtime_shutdown_with_calls_open(void) {
  h2s_server *srv = bh_server(HANG);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call *c = hanging_call(ch);
  ASSERT_NOT_NULL(c);
  ASSERT(h2s_server_wait_requests(srv, 1, CALL_MS));
  /* With the channel still there the runtime stays. */
  ASSERT_EQ(grit_default_runtime_shutdown(), GRIT_ERR_BUSY);
  grit_channel_destroy(ch);
  ASSERT_OK(grit_default_runtime_shutdown());
  use_orphan(c); /* after the runtime's thread has ended */

  grit_runtime *rt = NULL;
  ASSERT_OK(grit_runtime_create(&rt));
  char target[64];
  grit_channel *own = NULL;
  ASSERT_OK(grit_channel_create(rt, bh_target(target, sizeof(target), &srv, 1),
                                NULL, NULL, &own));
  done_rec r;
  rec_init(&r);
  grit_call_opts o = opts();
  grit_call *a = NULL;
  ASSERT_OK(grit_call_start(own, "/pkg.Svc/Hang", &o, &cbs, &r, &a));
  grit_call *b = hanging_call(own);
  ASSERT_NOT_NULL(b);
  ASSERT(h2s_server_wait_requests(srv, 2, CALL_MS));
  grit_channel_destroy(own);
  grit_runtime_destroy(rt);
  ASSERT_EQ(r.dones, 1);
  ASSERT_EQ(r.code, GRIT_STATUS_CANCELLED);
  grit_call_cancel(a);
  grit_call_destroy(a);
  use_orphan(b);
  rec_free(&r);
  h2s_server_stop(srv);
}

static const test_case tests[] = {
    {"call_outlives_channel", test_call_outlives_channel},
    {"call_destroyed_in_own_callback", test_call_destroyed_in_own_callback},
    {"channel_destroyed_in_call_callback",
     test_channel_destroyed_in_call_callback},
    {"runtime_shutdown_with_calls_open", test_runtime_shutdown_with_calls_open},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  int rc = test_main(tests, argc, argv);
  grit_default_runtime_shutdown();
  return rc;
}
