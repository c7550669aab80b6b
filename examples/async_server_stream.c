/* A server-streaming call with the callback stubs: ask StreamingOutputCall
 * for three responses of 1, 2 and 3 bytes; each arrives decoded in
 * on_message, the status in on_done (grit's I/O thread). Then a call the
 * server ends FAILED_PRECONDITION, with its message and echoed headers.
 *   usage: async_server_stream TARGET */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test.grit.h"

#define M(x) grpc__testing__test_service__streaming_output_call__##x
#define MU(x) GRPC__TESTING__TEST_SERVICE__STREAMING_OUTPUT_CALL__##x

typedef struct result {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  size_t n;      /* responses seen */
  bool sizes_ok; /* response i had i bytes */
  bool echoed;   /* the echo header came back */
  grit_status_code code;
  char message[64];
} result;

static void on_headers(M(async) * s, const grit_metadata *headers, void *ud) {
  result *r = ud;
  size_t len = 0;
  const uint8_t *v =
      grit_metadata_find(headers, "x-grpc-test-echo-initial", &len);
  (void)s;
  pthread_mutex_lock(&r->mu);
  r->echoed = v && len == 5 && memcmp(v, "hello", 5) == 0;
  pthread_mutex_unlock(&r->mu);
}

static void on_message(M(async) * s,
                       Grpc__Testing__StreamingOutputCallResponse *msg,
                       void *ud) {
  result *r = ud;
  size_t len = msg->payload ? msg->payload->body.len : 0;
  (void)s;
  pthread_mutex_lock(&r->mu);
  r->n++;
  r->sizes_ok = r->sizes_ok && len == r->n;
  pthread_mutex_unlock(&r->mu);
  grpc__testing__streaming_output_call_response__free_unpacked(msg, NULL);
}

static void on_done(M(async) * s, const grit_status *st, void *ud) {
  result *r = ud;
  (void)s;
  pthread_mutex_lock(&r->mu);
  r->code = st->code;
  snprintf(r->message, sizeof(r->message), "%s", st->message);
  r->done = true;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* One call of StreamingOutputCall; 0 when it ran and |r| holds the end. */
static int run(grit_channel *ch,
               const Grpc__Testing__StreamingOutputCallRequest *req,
               const grit_call_opts *opts, result *r) {
  static const M(async_cbs) cbs = {
      .on_headers = on_headers, .on_message = on_message, .on_done = on_done};
  M(async) s = MU(ASYNC_INIT);
  *r = (result){.mu = PTHREAD_MUTEX_INITIALIZER,
                .cv = PTHREAD_COND_INITIALIZER,
                .sizes_ok = true};
  if (M(async_start)(ch, req, opts, &cbs, r, &s) != GRIT_OK)
    return 1;
  pthread_mutex_lock(&r->mu);
  while (!r->done)
    pthread_cond_wait(&r->cv, &r->mu);
  pthread_mutex_unlock(&r->mu);
  grit_call_info info = GRIT_CALL_INFO_INIT; /* docs/abi.md */
  int rc = M(async_info)(&s, &info) == GRIT_OK && info.attempts == 1 ? 0 : 1;
  M(async_destroy)(&s);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: async_server_stream TARGET\n");
    return 2;
  }
  grit_channel *ch;
  if (grit_channel_create(NULL, argv[1], NULL, NULL, &ch) != GRIT_OK)
    return 1;
  grit_metadata *md;
  if (grit_metadata_create(&md) != GRIT_OK ||
      grit_metadata_add(md, "x-grpc-test-echo-initial", "hello", 5) != GRIT_OK)
    return 1;
  Grpc__Testing__ResponseParameters params[3];
  Grpc__Testing__ResponseParameters *pp[3];
  for (int i = 0; i < 3; i++) {
    grpc__testing__response_parameters__init(&params[i]);
    params[i].size = i + 1;
    pp[i] = &params[i];
  }
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  req.n_response_parameters = 3;
  req.response_parameters = pp;
  grit_call_opts opts = {
      .version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 10000, .metadata = md};
  result r;
  int rc = run(ch, &req, &opts, &r);
  printf("responses %zu (sizes %s), echoed header %s, status %s\n", r.n,
         r.sizes_ok ? "1,2,3" : "wrong", r.echoed ? "yes" : "no",
         grit_status_code_name(r.code));
  if (rc != 0 || r.n != 3 || !r.sizes_ok || !r.echoed ||
      r.code != GRIT_STATUS_OK)
    rc = 1;

  /* The server ends this one with the status it is asked for. */
  Grpc__Testing__EchoStatus es = GRPC__TESTING__ECHO_STATUS__INIT;
  es.code = GRIT_STATUS_FAILED_PRECONDITION;
  char not_now[] = "not now";
  es.message = not_now;
  req.response_status = &es;
  req.n_response_parameters = 0;
  if (run(ch, &req, &opts, &r) != 0)
    rc = 1;
  printf("echo status: %s \"%s\", responses %zu\n",
         grit_status_code_name(r.code), r.message, r.n);
  if (r.code != GRIT_STATUS_FAILED_PRECONDITION ||
      strcmp(r.message, "not now") != 0 || r.n != 0)
    rc = 1;

  /* Bad arguments are refused before anything starts. */
  M(async) s = MU(ASYNC_INIT);
  M(async_cbs) no_done = {.on_message = on_message};
  if (M(async_start)(ch, &req, &opts, &no_done, &r, &s) !=
          GRIT_ERR_INVALID_ARG ||
      M(async_start)(NULL, &req, &opts, &no_done, &r, &s) !=
          GRIT_ERR_INVALID_ARG ||
      s.ctx != NULL)
    rc = 1;
  grit_metadata_destroy(md);
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return rc;
}
