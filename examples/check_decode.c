/* For the suite only: a response that does not decode as the stub's type
 * ends the call INTERNAL (issue 14), for the blocking unary stub and for a
 * server stream (recv says GRIT_ERR_PARSE, finish says INTERNAL), and for
 * ..._call_ex, ..._call_async_ex and the callback stream (no on_message;
 * on_done INTERNAL; issue 29).
 *   usage: check_decode TARGET */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "mismatch.grit.h"

#define SO(x) grpc__testing__test_service__streaming_output_call__##x

typedef struct async_end {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int messages;
  bool done;
  grit_status_code code;
  bool names_type; /* the message names the response type */
} async_end;

static void on_message(SO(async) * s, Grpc__Testing__MismatchResponse *m,
                       void *ud) {
  async_end *e = ud;
  (void)s;
  grpc__testing__mismatch_response__free_unpacked(m, NULL);
  pthread_mutex_lock(&e->mu);
  e->messages++;
  pthread_mutex_unlock(&e->mu);
}

static void on_done(SO(async) * s, const grit_status *st, void *ud) {
  async_end *e = ud;
  (void)s;
  pthread_mutex_lock(&e->mu);
  e->code = st->code;
  e->names_type = strstr(st->message, "grpc.testing.MismatchResponse");
  e->done = true;
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

static void unary_done(const grit_status *st,
                       Grpc__Testing__MismatchResponse *resp,
                       const grit_call_info *info, void *ud) {
  async_end *e = ud;
  (void)info;
  if (resp)
    grpc__testing__mismatch_response__free_unpacked(resp, NULL);
  pthread_mutex_lock(&e->mu);
  e->messages = resp != NULL;
  e->code = st->code;
  e->names_type = strstr(st->message, "grpc.testing.MismatchResponse");
  e->done = true;
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

/* ..._call_async_ex: no response, INTERNAL naming the type. */
static int check_unary_async_ex(grit_channel *ch, const grit_call_opts *opts,
                                const Grpc__Testing__MismatchRequest *req) {
  static const grpc__testing__test_service__unary_call__unary_cbs cbs = {
      .on_done = unary_done};
  async_end e = {.mu = PTHREAD_MUTEX_INITIALIZER,
                 .cv = PTHREAD_COND_INITIALIZER};
  if (grpc__testing__test_service__unary_call__call_async_ex(
          ch, req, opts, &cbs, &e) != GRIT_OK)
    return 1;
  pthread_mutex_lock(&e.mu);
  while (!e.done)
    pthread_cond_wait(&e.cv, &e.mu);
  pthread_mutex_unlock(&e.mu);
  printf("unary call_async_ex: %s%s\n", grit_status_code_name(e.code),
         e.names_type ? " naming the type" : "");
  return e.messages == 0 && e.code == GRIT_STATUS_INTERNAL && e.names_type ? 0
                                                                           : 1;
}

static int check_async(grit_channel *ch, const grit_call_opts *opts,
                       const Grpc__Testing__MismatchStreamRequest *sreq) {
  static const SO(async_cbs)
      cbs = {.on_message = on_message, .on_done = on_done};
  async_end e = {.mu = PTHREAD_MUTEX_INITIALIZER,
                 .cv = PTHREAD_COND_INITIALIZER};
  SO(async) s = GRPC__TESTING__TEST_SERVICE__STREAMING_OUTPUT_CALL__ASYNC_INIT;
  if (SO(async_start)(ch, sreq, opts, &cbs, &e, &s) != GRIT_OK)
    return 1;
  pthread_mutex_lock(&e.mu);
  while (!e.done)
    pthread_cond_wait(&e.cv, &e.mu);
  pthread_mutex_unlock(&e.mu);
  SO(async_destroy)(&s);
  printf("async stream: %d messages, status %s%s\n", e.messages,
         grit_status_code_name(e.code), e.names_type ? " naming the type" : "");
  return e.messages == 0 && e.code == GRIT_STATUS_INTERNAL && e.names_type ? 0
                                                                           : 1;
}

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  grit_channel *ch;
  if (grit_channel_create(NULL, argv[1], NULL, NULL, &ch) != GRIT_OK)
    return 1;
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 10000};
  Grpc__Testing__MismatchRequest req = GRPC__TESTING__MISMATCH_REQUEST__INIT;
  req.response_size = 5;
  Grpc__Testing__MismatchResponse *resp = NULL;
  grit_status st;
  grit_err rv = grpc__testing__test_service__unary_call__call(ch, &req, &opts,
                                                              &resp, &st);
  printf("unary: %s %s: %s\n", grit_err_name(rv),
         grit_status_code_name(st.code), st.message);
  int rc = rv == GRIT_OK && st.code == GRIT_STATUS_INTERNAL && !resp &&
                   strstr(st.message, "grpc.testing.MismatchResponse")
               ? 0
               : 1;
  grit_status_free(&st);

  Grpc__Testing__MismatchParams p = GRPC__TESTING__MISMATCH_PARAMS__INIT;
  p.size = 3;
  Grpc__Testing__MismatchParams *pp = &p;
  Grpc__Testing__MismatchStreamRequest sreq =
      GRPC__TESTING__MISMATCH_STREAM_REQUEST__INIT;
  sreq.n_response_parameters = 1;
  sreq.response_parameters = &pp;
  grpc__testing__test_service__streaming_output_call__stream s;
  if (grpc__testing__test_service__streaming_output_call__start(
          ch, &sreq, &opts, &s) != GRIT_OK)
    return 1;
  rv = grpc__testing__test_service__streaming_output_call__recv(&s, &resp);
  grpc__testing__test_service__streaming_output_call__finish(&s, &st);
  printf("stream: recv %s, status %s: %s\n", grit_err_name(rv),
         grit_status_code_name(st.code), st.message);
  if (rv != GRIT_ERR_PARSE || resp || st.code != GRIT_STATUS_INTERNAL)
    rc = 1;
  grit_status_free(&st);
  grpc__testing__test_service__streaming_output_call__destroy(&s);

  grit_stub_result res = GRIT_STUB_RESULT_INIT;
  rv = grpc__testing__test_service__unary_call__call_ex(ch, &req, &opts, &resp,
                                                        &st, &res);
  printf("unary call_ex: %s %s, attempts %u\n", grit_err_name(rv),
         grit_status_code_name(st.code), (unsigned)res.info.attempts);
  if (rv != GRIT_OK || st.code != GRIT_STATUS_INTERNAL || resp ||
      res.info.attempts != 1)
    rc = 1;
  grit_status_free(&st);
  grit_stub_result_free(&res);
  sreq.n_response_parameters = 1;
  if (check_async(ch, &opts, &sreq) != 0 ||
      check_unary_async_ex(ch, &opts, &req) != 0)
    rc = 1;
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return rc;
}
