/* Unary calls with generated stubs (protoc-gen-grit): the blocking
 * ..._unary_call__call, the asynchronous ..._call_async, and ..._call_ex
 * with the response headers, trailers and call info, against a
 * grpc.testing.TestService server.   usage: unary TARGET */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test.grit.h"

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  grit_status_code code;
  size_t body_len;
} waiter;

/* Runs on grit's I/O thread: copy what is needed, free the response. */
static void on_done(const grit_status *st, Grpc__Testing__SimpleResponse *resp,
                    void *user_data) {
  waiter *w = user_data;
  pthread_mutex_lock(&w->mu);
  w->code = st->code;
  w->body_len = resp && resp->payload ? resp->payload->body.len : 0;
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (resp)
    grpc__testing__simple_response__free_unpacked(resp, NULL);
}

/* What ..._call_async_ex's callbacks saw (grit's I/O thread). */
typedef struct ex_waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  bool header_echoed;
  bool trailer_echoed;
  grit_status_code code;
  size_t body_len;
  uint32_t attempts;
  bool peer_known;
} ex_waiter;

static void ex_on_headers(const grit_metadata *headers, void *user_data) {
  ex_waiter *w = user_data;
  size_t len = 0;
  const uint8_t *v =
      grit_metadata_find(headers, "x-grpc-test-echo-initial", &len);
  pthread_mutex_lock(&w->mu);
  w->header_echoed = v && len == 2 && memcmp(v, "hi", 2) == 0;
  pthread_mutex_unlock(&w->mu);
}

static void ex_on_done(const grit_status *st,
                       Grpc__Testing__SimpleResponse *resp,
                       const grit_call_info *info, void *user_data) {
  ex_waiter *w = user_data;
  size_t len = 0;
  const uint8_t *t =
      grit_metadata_find(st->trailers, "x-grpc-test-echo-trailing-bin", &len);
  pthread_mutex_lock(&w->mu);
  w->trailer_echoed = t && len == 2 && memcmp(t, "\x01\x02", 2) == 0;
  w->code = st->code;
  w->body_len = resp && resp->payload ? resp->payload->body.len : 0;
  w->attempts = info->attempts;
  w->peer_known = info->peer[0] != '\0';
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (resp)
    grpc__testing__simple_response__free_unpacked(resp, NULL);
}

/* ..._call_ex and ..._call_async_ex: the server echoes one header and one
 * trailer. */
static int unary_ex(grit_channel *ch) {
  grit_metadata *md;
  if (grit_metadata_create(&md) != GRIT_OK ||
      grit_metadata_add(md, "x-grpc-test-echo-initial", "hi", 2) != GRIT_OK ||
      grit_metadata_add(md, "x-grpc-test-echo-trailing-bin", "\x01\x02", 2) !=
          GRIT_OK) {
    grit_metadata_destroy(md);
    return 1;
  }
  Grpc__Testing__SimpleRequest req = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  req.response_size = 3;
  grit_call_opts opts = {
      .version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 10000, .metadata = md};
  Grpc__Testing__SimpleResponse *resp;
  grit_status st;
  grit_stub_result res = GRIT_STUB_RESULT_INIT;
  grit_err rv = grpc__testing__test_service__unary_call__call_ex(
      ch, &req, &opts, &resp, &st, &res);
  size_t hlen = 0, tlen = 0;
  const uint8_t *h =
      grit_metadata_find(res.headers, "x-grpc-test-echo-initial", &hlen);
  const uint8_t *t =
      grit_metadata_find(st.trailers, "x-grpc-test-echo-trailing-bin", &tlen);
  bool ok = rv == GRIT_OK && st.code == GRIT_STATUS_OK && resp &&
            resp->payload && resp->payload->body.len == 3 && h && hlen == 2 &&
            memcmp(h, "hi", 2) == 0 && t && tlen == 2 &&
            memcmp(t, "\x01\x02", 2) == 0 && res.info.attempts == 1 &&
            res.info.call_id != 0 && res.info.peer[0] != '\0' &&
            strcmp(res.info.request_encoding, "identity") == 0;
  printf("call_ex: %s, header %s, trailer %s, attempts %u, peer %s, "
         "encoding %s\n",
         grit_status_code_name(st.code), h ? "echoed" : "missing",
         t ? "echoed" : "missing", (unsigned)res.info.attempts,
         res.info.peer[0] ? "known" : "missing", res.info.request_encoding);
  if (resp)
    grpc__testing__simple_response__free_unpacked(resp, NULL);
  grit_status_free(&st);
  grit_stub_result_free(&res);
  /* A call that cannot start: the status says why, the result is empty. */
  rv = grpc__testing__test_service__unary_call__call_ex(NULL, &req, &opts,
                                                        &resp, &st, &res);
  ok = ok && rv == GRIT_ERR_INVALID_ARG &&
       st.code == GRIT_STATUS_INVALID_ARGUMENT && !resp && !res.headers &&
       res.info.call_id == 0;
  grit_status_free(&st);
  grit_stub_result_free(&res);

  static const grpc__testing__test_service__unary_call__unary_cbs cbs = {
      .on_headers = ex_on_headers, .on_done = ex_on_done};
  ex_waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER,
                 .cv = PTHREAD_COND_INITIALIZER};
  if (grpc__testing__test_service__unary_call__call_async_ex(
          ch, &req, &opts, &cbs, &w) == GRIT_OK) {
    pthread_mutex_lock(&w.mu);
    while (!w.done)
      pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
  }
  printf("call_async_ex: %s, %zu bytes, header %s, trailer %s, attempts %u, "
         "peer %s\n",
         grit_status_code_name(w.code), w.body_len,
         w.header_echoed ? "echoed" : "missing",
         w.trailer_echoed ? "echoed" : "missing", (unsigned)w.attempts,
         w.peer_known ? "known" : "missing");
  ok = ok && w.done && w.code == GRIT_STATUS_OK && w.body_len == 3 &&
       w.header_echoed && w.trailer_echoed && w.attempts == 1 && w.peer_known;
  ok = ok && grpc__testing__test_service__unary_call__call_async_ex(
                 ch, &req, &opts, NULL, &w) == GRIT_ERR_INVALID_ARG;
  grit_metadata_destroy(md);
  return ok ? 0 : 1;
}

/* Whether |s| occurs in the |len| bytes at |d|. */
static bool contains(const uint8_t *d, size_t len, const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i + n <= len; i++)
    if (memcmp(d + i, s, n) == 0)
      return true;
  return false;
}

/* The stubs register their file's methods (issue 28, gRFC A66), so the
 * metrics name the method the calls above used instead of "other". */
static int metrics_name_the_method(grit_channel *ch) {
  grit_bytes text;
  if (grit_metrics_write_prometheus(ch, &text) != GRIT_OK)
    return 1;
  const char *want = "grpc_method=\"grpc.testing.TestService/UnaryCall\"";
  bool named = contains(text.data, text.len, want);
  bool other = contains(text.data, text.len, "grpc_method=\"other\"");
  printf("metrics: %s %s, %s grpc_method=\"other\"\n", want,
         named ? "present" : "MISSING", other ? "with" : "no");
  grit_bytes_free(&text);
  return named && !other ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: unary TARGET\n");
    return 2;
  }
  grit_channel *ch;
  if (grit_channel_create(NULL, argv[1], NULL, NULL, &ch) != GRIT_OK)
    return 1;
  Grpc__Testing__SimpleRequest req = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  req.response_size = 5;
  req.fill_server_id = 1;
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 10000};
  Grpc__Testing__SimpleResponse *resp;
  grit_status st;
  grit_err rv = grpc__testing__test_service__unary_call__call(ch, &req, &opts,
                                                              &resp, &st);
  int rc = 1;
  if (rv == GRIT_OK && st.code == GRIT_STATUS_OK) {
    printf("blocking: OK, payload.body %zu bytes, server_id '%s'\n",
           resp->payload ? resp->payload->body.len : 0,
           resp->server_id ? resp->server_id : "");
    rc = resp->payload && resp->payload->body.len == 5 ? 0 : 1;
    grpc__testing__simple_response__free_unpacked(resp, NULL);
  } else {
    printf("blocking: %s: %s\n", grit_status_code_name(st.code), st.message);
  }
  grit_status_free(&st);

  waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  req.response_size = 7;
  rv = grpc__testing__test_service__unary_call__call_async(ch, &req, &opts,
                                                           on_done, &w);
  if (rv == GRIT_OK) {
    pthread_mutex_lock(&w.mu);
    while (!w.done)
      pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    printf("async: %s, payload.body %zu bytes\n", grit_status_code_name(w.code),
           w.body_len);
    if (w.code != GRIT_STATUS_OK || w.body_len != 7)
      rc = 1;
  } else {
    rc = 1;
  }
  if (unary_ex(ch) != 0)
    rc = 1;
  if (metrics_name_the_method(ch) != 0)
    rc = 1;
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return rc;
}
