/* For the suite only: a response that does not decode as the stub's type
 * ends the call INTERNAL (issue 14), for the blocking unary stub and for a
 * server stream (recv says GRIT_ERR_PARSE, finish says INTERNAL).
 *   usage: check_decode TARGET */
#include <stdio.h>
#include <string.h>

#include "mismatch.grit.h"

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
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return rc;
}
