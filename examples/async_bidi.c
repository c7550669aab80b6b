/* A bidi-streaming call with the callback stubs, driven from the
 * callbacks as a reactor: each response to FullDuplexCall sends the next
 * request (try_send, which never blocks grit's I/O thread; on
 * GRIT_ERR_AGAIN on_send_ready sends it), the third half-closes, and
 * on_done releases the call and wakes main. Then calls to a closed port,
 * whose on_done may run before the start has returned.
 *   usage: async_bidi TARGET */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.grit.h"

#define M(x) grpc__testing__test_service__full_duplex_call__##x
#define MU(x) GRPC__TESTING__TEST_SERVICE__FULL_DUPLEX_CALL__##x

#define ROUNDS 3

typedef struct pingpong {
  M(async) s;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int sent;     /* requests accepted */
  int got;      /* responses, each of 10 * its number bytes */
  bool pending; /* a request refused with GRIT_ERR_AGAIN */
  bool sizes_ok;
  bool done;
  grit_status_code code;
} pingpong;

/* Send request number pp->sent + 1, asking for 10 * that many bytes; the
 * last one half-closes. Runs on grit's I/O thread or before it is busy. */
static void send_next(pingpong *pp) {
  Grpc__Testing__ResponseParameters p =
      GRPC__TESTING__RESPONSE_PARAMETERS__INIT;
  p.size = 10 * (pp->sent + 1);
  Grpc__Testing__ResponseParameters *ps = &p;
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  req.n_response_parameters = 1;
  req.response_parameters = &ps;
  grit_err rv = M(async_try_send)(&pp->s, &req);
  pp->pending = rv == GRIT_ERR_AGAIN;
  if (rv == GRIT_OK && ++pp->sent == ROUNDS)
    M(async_close_send)(&pp->s);
  else if (rv != GRIT_OK && rv != GRIT_ERR_AGAIN)
    M(async_cancel)(&pp->s);
}

static void on_message(M(async) * s,
                       Grpc__Testing__StreamingOutputCallResponse *msg,
                       void *ud) {
  pingpong *pp = ud;
  size_t len = msg->payload ? msg->payload->body.len : 0;
  grpc__testing__streaming_output_call_response__free_unpacked(msg, NULL);
  (void)s;
  pthread_mutex_lock(&pp->mu);
  pp->got++;
  pp->sizes_ok = pp->sizes_ok && len == (size_t)(10 * pp->got);
  bool more = pp->sent < ROUNDS && pp->got == pp->sent;
  if (more)
    send_next(pp);
  pthread_mutex_unlock(&pp->mu);
}

static void on_send_ready(M(async) * s, void *ud) {
  pingpong *pp = ud;
  (void)s;
  pthread_mutex_lock(&pp->mu);
  if (pp->pending)
    send_next(pp);
  pthread_mutex_unlock(&pp->mu);
}

static void on_done(M(async) * s, const grit_status *st, void *ud) {
  pingpong *pp = ud;
  M(async_destroy)(s); /* allowed here: on_done is the last callback */
  pthread_mutex_lock(&pp->mu);
  pp->code = st->code;
  pp->done = true;
  pthread_cond_signal(&pp->cv);
  pthread_mutex_unlock(&pp->mu);
}

/* Calls that fail at once: on_done may run before async_start returns,
 * and it destroys the stream and releases its struct. */
typedef struct quick {
  M(async) s;
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  int *left;
  grit_status_code code;
} quick;

static void quick_done(M(async) * s, const grit_status *st, void *ud) {
  quick *q = ud;
  M(async_destroy)(s);
  pthread_mutex_lock(q->mu);
  q->code = st->code;
  --*q->left;
  pthread_cond_signal(q->cv);
  pthread_mutex_unlock(q->mu);
}

/* A loopback port with nobody listening: bound, then closed. */
static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  int port = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                     getsockname(fd, (struct sockaddr *)&a, &len) == 0
                 ? ntohs(a.sin_port)
                 : -1;
  if (fd >= 0)
    close(fd);
  return port;
}

#define QUICK 20

static int quick_failures(void) {
  char target[64];
  int port = closed_port();
  if (port < 0)
    return 1;
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%d", port);
  grit_channel *ch;
  if (grit_channel_create(NULL, target, NULL, NULL, &ch) != GRIT_OK)
    return 1;
  static const M(async_cbs) cbs = {.on_done = quick_done};
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  quick q[QUICK];
  int left = 0;
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 10000};
  for (int i = 0; i < QUICK; i++) {
    q[i] = (quick){.s = MU(ASYNC_INIT), .mu = &mu, .cv = &cv, .left = &left};
    pthread_mutex_lock(&mu);
    left++;
    pthread_mutex_unlock(&mu);
    if (M(async_start)(ch, &opts, &cbs, &q[i], &q[i].s) != GRIT_OK) {
      pthread_mutex_lock(&mu);
      left--;
      pthread_mutex_unlock(&mu);
      q[i].code = GRIT_STATUS_OK; /* counted as wrong below */
    }
  }
  pthread_mutex_lock(&mu);
  while (left > 0)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  int unavailable = 0;
  for (int i = 0; i < QUICK; i++)
    unavailable += q[i].code == GRIT_STATUS_UNAVAILABLE && q[i].s.ctx == NULL;
  printf("%d of %d calls to a closed port ended UNAVAILABLE\n", unavailable,
         QUICK);
  grit_channel_destroy(ch);
  return unavailable == QUICK ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: async_bidi TARGET\n");
    return 2;
  }
  grit_channel *ch;
  if (grit_channel_create(NULL, argv[1], NULL, NULL, &ch) != GRIT_OK)
    return 1;
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 10000};
  static const M(async_cbs) cbs = {.on_message = on_message,
                                   .on_send_ready = on_send_ready,
                                   .on_done = on_done};
  pingpong pp = {.s = MU(ASYNC_INIT),
                 .mu = PTHREAD_MUTEX_INITIALIZER,
                 .cv = PTHREAD_COND_INITIALIZER,
                 .sizes_ok = true};
  int rc = 1;
  pthread_mutex_lock(&pp.mu);
  if (M(async_start)(ch, &opts, &cbs, &pp, &pp.s) == GRIT_OK) {
    send_next(&pp);
    while (!pp.done)
      pthread_cond_wait(&pp.cv, &pp.mu);
    printf("%d pings, %d pongs (sizes %s), status %s\n", pp.sent, pp.got,
           pp.sizes_ok ? "10,20,30" : "wrong", grit_status_code_name(pp.code));
    rc = pp.sent == ROUNDS && pp.got == ROUNDS && pp.sizes_ok &&
                 pp.code == GRIT_STATUS_OK && pp.s.ctx == NULL
             ? 0
             : 1;
  }
  pthread_mutex_unlock(&pp.mu);
  if (quick_failures() != 0)
    rc = 1;
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return rc;
}
