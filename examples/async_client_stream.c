/* A client-streaming call with the callback stubs and flow control: send
 * 40 payloads of 32 KiB to StreamingInputCall with try_send, which never
 * waits: on GRIT_ERR_AGAIN wait for on_send_ready, then go on. on_done
 * brings the status and the one response (the total size), decoded.
 *   usage: async_client_stream TARGET */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "test.grit.h"

#define M(x) grpc__testing__test_service__streaming_input_call__##x
#define MU(x) GRPC__TESTING__TEST_SERVICE__STREAMING_INPUT_CALL__##x

#define COUNT 40
#define SIZE (32 * 1024)

typedef struct state {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool ready; /* on_send_ready ran since the last refusal */
  bool done;
  grit_status_code code;
  int32_t total; /* aggregated_payload_size; -1 without a response */
} state;

static void on_send_ready(M(async) * s, void *ud) {
  state *st = ud;
  (void)s;
  pthread_mutex_lock(&st->mu);
  st->ready = true;
  pthread_cond_signal(&st->cv);
  pthread_mutex_unlock(&st->mu);
}

static void on_done(M(async) * s, const grit_status *status,
                    Grpc__Testing__StreamingInputCallResponse *resp, void *ud) {
  state *st = ud;
  (void)s;
  pthread_mutex_lock(&st->mu);
  st->code = status->code;
  st->total = resp ? resp->aggregated_payload_size : -1;
  st->done = true;
  pthread_cond_signal(&st->cv);
  pthread_mutex_unlock(&st->mu);
  if (resp)
    grpc__testing__streaming_input_call_response__free_unpacked(resp, NULL);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: async_client_stream TARGET\n");
    return 2;
  }
  grit_channel *ch;
  if (grit_channel_create(NULL, argv[1], NULL, NULL, &ch) != GRIT_OK)
    return 1;
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 20000};
  static const M(async_cbs)
      cbs = {.on_done = on_done, .on_send_ready = on_send_ready};
  state st = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  M(async) s = MU(ASYNC_INIT);
  uint8_t *body = calloc(1, SIZE);
  if (!body || M(async_start)(ch, &opts, &cbs, &st, &s) != GRIT_OK)
    return 1;
  Grpc__Testing__Payload p = GRPC__TESTING__PAYLOAD__INIT;
  p.body.data = body;
  p.body.len = SIZE;
  Grpc__Testing__StreamingInputCallRequest req =
      GRPC__TESTING__STREAMING_INPUT_CALL_REQUEST__INIT;
  req.payload = &p;
  int sent = 0, refused = 0;
  bool ok = true;
  while (ok && sent < COUNT) {
    pthread_mutex_lock(&st.mu);
    st.ready = false;
    pthread_mutex_unlock(&st.mu);
    grit_err rv = M(async_try_send)(&s, &req);
    if (rv == GRIT_OK) {
      sent++;
    } else if (rv == GRIT_ERR_AGAIN) {
      refused++;
      pthread_mutex_lock(&st.mu);
      while (!st.ready && !st.done)
        pthread_cond_wait(&st.cv, &st.mu);
      ok = !st.done;
      pthread_mutex_unlock(&st.mu);
    } else {
      ok = false;
    }
  }
  if (M(async_close_send)(&s) != GRIT_OK)
    ok = false;
  pthread_mutex_lock(&st.mu);
  while (!st.done)
    pthread_cond_wait(&st.cv, &st.mu);
  pthread_mutex_unlock(&st.mu);
  grit_call_info info = GRIT_CALL_INFO_INIT; /* docs/abi.md */
  bool info_ok = M(async_info)(&s, &info) == GRIT_OK && info.peer[0] != '\0';
  M(async_destroy)(&s);
  M(async_destroy)(&s); /* a second destroy is a no-op */
  printf("sent %d x %d bytes (try_send refused %s), status %s, "
         "aggregated_payload_size %d, peer %s\n",
         sent, SIZE, refused ? "at times" : "never",
         grit_status_code_name(st.code), (int)st.total,
         info_ok ? "known" : "missing");
  int rc =
      ok && info_ok && st.code == GRIT_STATUS_OK && st.total == COUNT * SIZE
          ? 0
          : 1;
  /* Not started: every stub refuses or does nothing. */
  if (M(async_try_send)(&s, &req) != GRIT_ERR_INVALID_ARG ||
      M(async_send)(NULL, &req) != GRIT_ERR_INVALID_ARG ||
      M(async_close_send)(&s) != GRIT_ERR_INVALID_ARG ||
      M(async_info)(&s, &info) != GRIT_ERR_INVALID_ARG)
    rc = 1;
  M(async_cancel)(NULL);
  M(async_destroy)(NULL);
  free(body);
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return rc;
}
