/*
 * Flow-controlled sends (SPEC AP-03, issue 19): a call's unsent request
 * bytes stay within GRIT_ARG_PER_CALL_SEND_BUFFER. grit_call_send waits for
 * room and returns when the call ends; grit_call_try_send refuses with
 * GRIT_ERR_AGAIN and on_send_ready says when to go on.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "test/behaviour/bh.h"

#define MSG 16384

typedef struct sender {
  grit_call *call;
  atomic_int accepted;
  atomic_int result; /* grit_err of the send that stopped the loop */
  atomic_bool done;
} sender;

static void *send_loop(void *arg) {
  sender *s = arg;
  static uint8_t msg[MSG];
  for (int i = 0; i < 2000; i++) {
    grit_err rv = grit_call_send(s->call, msg, sizeof(msg));
    if (rv != GRIT_OK) {
      s->result = rv;
      break;
    }
    s->accepted++;
  }
  s->done = true;
  return NULL;
}

/* Wait up to |ms| for |*flag|. */
static bool wait_flag(atomic_bool *flag, uint64_t ms) {
  uint64_t end = test_now_ms() + ms;
  while (!*flag && test_now_ms() < end)
    usleep(5000);
  return *flag;
}

/* A server that never grants window past its initial 64 KiB: the sender
 * blocks once the call's 64 KiB of unsent bytes are queued, and returns
 * GRIT_ERR_CALL_STATE as soon as the call ends (here: cancelled). */
static void test_blocking_send_waits(void) {
  h2s_server *srv = bh_server("at_headers freeze_window hang");
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 60000};
  sender s = {0};
  ASSERT_OK(grit_call_start(ch, "/flow.Svc/Up", &o, NULL, NULL, &s.call));
  pthread_t th;
  pthread_create(&th, NULL, send_loop, &s);
  /* It stops accepting: 3 messages fill the 64 KiB bound, and the 64 KiB
   * stream window lets about 4 more go out. Wait for it to settle: no
   * new message for 500 ms (after the first 3). */
  int last = -1;
  uint64_t since = test_now_ms(), end = since + 20000;
  while (test_now_ms() < end && !s.done) {
    usleep(20000);
    if (s.accepted != last) {
      last = s.accepted;
      since = test_now_ms();
    } else if (last >= 3 && test_now_ms() - since >= 500) {
      break;
    }
  }
  bool was_done = s.done;
  int accepted = s.accepted;
  grit_call_cancel(s.call);
  bool ended = wait_flag(&s.done, 10000);
  if (ended)
    pthread_join(th, NULL);
  ASSERT(ended);
  ASSERT(!was_done);
  ASSERT_CMP(accepted, >=, 3);
  ASSERT_CMP(accepted, <=, 10);
  ASSERT_EQ(s.result, GRIT_ERR_CALL_STATE);
  grit_status st = {0};
  ASSERT_OK(grit_call_finish(s.call, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_CANCELLED);
  grit_status_free(&st);
  grit_call_destroy(s.call);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* A bound set by the channel argument: 1 byte means one message at a
 * time, yet every message arrives, in order. */
static void test_blocking_send_small_bound(void) {
  h2s_server *srv = bh_server("path=/flow.Svc/Up size=1");
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  ASSERT_EQ(grit_channel_args_set_int(a, GRIT_ARG_PER_CALL_SEND_BUFFER, 0),
            GRIT_ERR_INVALID_ARG);
  ASSERT_OK(grit_channel_args_set_int(a, GRIT_ARG_PER_CALL_SEND_BUFFER, 1));
  grit_channel *ch = bh_channel_args(&srv, 1, NULL, a);
  grit_channel_args_destroy(a);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 60000};
  grit_call *call = NULL;
  ASSERT_OK(grit_call_start(ch, "/flow.Svc/Up", &o, NULL, NULL, &call));
  for (uint32_t i = 0; i < 200; i++)
    ASSERT_OK(grit_call_send(call, &i, sizeof(i)));
  ASSERT_OK(grit_call_close_send(call));
  grit_status st = {0};
  ASSERT_OK(grit_call_finish(call, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(call);
  ASSERT(h2s_server_wait_closed(srv, 1, 10000));
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_EQ(r->n_msgs, 200);
  for (uint32_t i = 0; i < r->n_msgs; i++)
    ASSERT_MEM_EQ(r->msgs[i].data, &i, sizeof(i));
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Callback mode: try_send refuses instead of queueing without bound, and
 * on_send_ready comes once after each refusal. */
typedef struct cb_state {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ready;
  bool done;
  grit_status_code code;
} cb_state;

static void cb_ready(grit_call *call, void *ud) {
  (void)call;
  cb_state *s = ud;
  pthread_mutex_lock(&s->mu);
  s->ready++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void cb_done(grit_call *call, const grit_status *st, void *ud) {
  (void)call;
  cb_state *s = ud;
  pthread_mutex_lock(&s->mu);
  s->done = true;
  s->code = st->code;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Wait for the ready count to pass |n| (or the call's end). */
static bool cb_wait_ready(cb_state *s, int n) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 20;
  pthread_mutex_lock(&s->mu);
  while (s->ready <= n && !s->done)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
      break;
  bool ok = s->ready > n;
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static void test_try_send_and_ready(void) {
  h2s_server *srv = bh_server("path=/flow.Svc/Up size=1");
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  cb_state s = {.mu = PTHREAD_MUTEX_INITIALIZER,
                .cv = PTHREAD_COND_INITIALIZER};
  grit_call_cbs cbs = {.version = GRIT_CALL_CBS_VERSION,
                       .on_done = cb_done,
                       .on_send_ready = cb_ready};
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 60000};
  grit_call *call = NULL;
  ASSERT_OK(grit_call_start(ch, "/flow.Svc/Up", &o, &cbs, &s, &call));
  static uint8_t msg[MSG];
  int sent = 0, refused = 0;
  while (sent < 400) {
    msg[0] = (uint8_t)sent;
    grit_err rv = grit_call_try_send(call, msg, sizeof(msg));
    if (rv == GRIT_OK) {
      sent++;
      continue;
    }
    ASSERT_EQ(rv, GRIT_ERR_AGAIN);
    ASSERT(cb_wait_ready(&s, refused));
    refused++;
  }
  ASSERT_CMP(refused, >=, 1);
  ASSERT_EQ(s.ready, refused);
  ASSERT_OK(grit_call_close_send(call));
  ASSERT(h2s_server_wait_closed(srv, 1, 20000));
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_EQ(r->n_msgs, 400);
  for (size_t i = 0; i < r->n_msgs; i++)
    ASSERT_EQ(r->msgs[i].data[0], (uint8_t)i);
  ASSERT(!cb_wait_ready(&s, refused)); /* returns at the call's end */
  ASSERT(s.done);
  ASSERT_EQ(s.code, GRIT_STATUS_OK);
  grit_call_destroy(call);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"blocking_send_waits", test_blocking_send_waits},
      {"blocking_send_small_bound", test_blocking_send_small_bound},
      {"try_send_and_ready", test_try_send_and_ready},
      {NULL, NULL},
  };
  return test_main(cases, argc, argv);
}
