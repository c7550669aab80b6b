/*
 * grit_default_runtime_shutdown (issue 19 point 8): the shared default
 * runtime refuses to stop while a channel on it exists, stops once none
 * does (also after real calls that left connections, backoff timers and
 * resolvers to close), is a no-op when not running, refuses from its own
 * thread, and starts anew for the next channel. Calls go to a port nothing
 * listens on, so every one ends UNAVAILABLE: the client controls all of it.
 * Cases run in order in one process; "not_started" must be first.
 */
#include <grit/grit.h>

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test/harness.h"

/* A loopback port that refuses connections: bound, never listened on. */
static int closed_fd = -1;
static char closed_target[64];

static const char *closed_port_target(void) {
  if (closed_fd >= 0)
    return closed_target;
  closed_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (closed_fd < 0 || bind(closed_fd, (struct sockaddr *)&a, len) != 0 ||
      getsockname(closed_fd, (struct sockaddr *)&a, &len) != 0)
    return NULL;
  snprintf(closed_target, sizeof(closed_target), "127.0.0.1:%u",
           (unsigned)ntohs(a.sin_port));
  return closed_target;
}

/* One blocking call on |ch|: its status code, or -1 if it was not made. */
static int call_code(grit_channel *ch) {
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 10000};
  grit_status st = {0};
  grit_err rv = grit_unary_call(ch, "/x.Svc/M", "", 0, &opts, NULL, &st, NULL);
  int code = rv == GRIT_OK ? (int)st.code : -1;
  grit_status_free(&st);
  return code;
}

static void test_not_started(void) {
  ASSERT_EQ(grit_default_runtime_shutdown(), GRIT_OK);
  ASSERT_EQ(grit_default_runtime_shutdown(), GRIT_OK);
}

static void test_busy_until_destroyed(void) {
  const char *target = closed_port_target();
  ASSERT_NOT_NULL(target);
  grit_channel *a = NULL, *b = NULL;
  ASSERT_OK(grit_channel_create(NULL, target, NULL, NULL, &a));
  ASSERT_OK(grit_channel_create(NULL, target, NULL, NULL, &b));
  ASSERT_EQ(call_code(a), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(grit_default_runtime_shutdown(), GRIT_ERR_BUSY);
  grit_channel_destroy(a);
  ASSERT_EQ(grit_default_runtime_shutdown(), GRIT_ERR_BUSY);
  /* b still works: the refused shutdown stopped nothing. */
  ASSERT_EQ(call_code(b), GRIT_STATUS_UNAVAILABLE);
  grit_channel_destroy(b);
  ASSERT_EQ(grit_default_runtime_shutdown(), GRIT_OK);
  ASSERT_EQ(grit_default_runtime_shutdown(), GRIT_OK);
}

static void test_restarts(void) {
  const char *target = closed_port_target();
  ASSERT_NOT_NULL(target);
  for (int round = 0; round < 3; round++) {
    grit_channel *ch = NULL;
    ASSERT_OK(grit_channel_create(NULL, target, NULL, NULL, &ch));
    ASSERT_EQ(call_code(ch), GRIT_STATUS_UNAVAILABLE);
    grit_channel_destroy(ch);
    ASSERT_EQ(grit_default_runtime_shutdown(), GRIT_OK);
  }
}

typedef struct cb_result {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  grit_err shutdown_rv;
} cb_result;

static void on_done(const grit_status *st, const uint8_t *resp, size_t resp_len,
                    const grit_call_info *info, void *user_data) {
  cb_result *r = user_data;
  grit_err rv = grit_default_runtime_shutdown();
  pthread_mutex_lock(&r->mu);
  r->shutdown_rv = rv;
  r->done = true;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static void test_refused_on_its_thread(void) {
  const char *target = closed_port_target();
  ASSERT_NOT_NULL(target);
  grit_channel *ch = NULL;
  ASSERT_OK(grit_channel_create(NULL, target, NULL, NULL, &ch));
  cb_result r = {.mu = PTHREAD_MUTEX_INITIALIZER,
                 .cv = PTHREAD_COND_INITIALIZER,
                 .shutdown_rv = GRIT_OK};
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 10000};
  ASSERT_OK(grit_unary_call_async(ch, "/x.Svc/M", "", 0, &opts, on_done, &r));
  /* Bounded: the call's own deadline is 10 s. */
  uint64_t end = test_now_ms() + 30000;
  pthread_mutex_lock(&r.mu);
  while (!r.done && test_now_ms() < end) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&r.cv, &r.mu, &ts);
  }
  bool done = r.done;
  pthread_mutex_unlock(&r.mu);
  ASSERT(done);
  ASSERT_EQ(r.shutdown_rv, GRIT_ERR_WOULD_DEADLOCK);
  grit_channel_destroy(ch);
  ASSERT_EQ(grit_default_runtime_shutdown(), GRIT_OK);
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"not_started", test_not_started},
      {"busy_until_destroyed", test_busy_until_destroyed},
      {"restarts", test_restarts},
      {"refused_on_its_thread", test_refused_on_its_thread},
      {NULL, NULL},
  };
  int rc = test_main(cases, argc, argv);
  if (closed_fd >= 0)
    close(closed_fd);
  return rc;
}
