/* A server-streaming call with generated stubs: ask StreamingOutputCall
 * for three responses of 1, 2 and 3 bytes and read them as they come.
 *   usage: server_stream TARGET */
#include <stdio.h>

#include "test.grit.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: server_stream TARGET\n");
    return 2;
  }
  grit_channel *ch;
  if (grit_channel_create(NULL, argv[1], NULL, NULL, &ch) != GRIT_OK)
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
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 10000};
  grpc__testing__test_service__streaming_output_call__stream s =
      GRPC__TESTING__TEST_SERVICE__STREAMING_OUTPUT_CALL__STREAM_INIT;
  int rc = 1;
  if (grpc__testing__test_service__streaming_output_call__start(
          ch, &req, &opts, &s) == GRIT_OK) {
    Grpc__Testing__StreamingOutputCallResponse *m;
    size_t n = 0;
    bool sizes_ok = true;
    while (grpc__testing__test_service__streaming_output_call__recv(&s, &m) ==
           GRIT_OK) {
      size_t len = m->payload ? m->payload->body.len : 0;
      printf("response %zu: %zu bytes\n", ++n, len);
      sizes_ok = sizes_ok && len == n;
      grpc__testing__streaming_output_call_response__free_unpacked(m, NULL);
    }
    grit_status st;
    grpc__testing__test_service__streaming_output_call__finish(&s, &st);
    printf("status %s\n", grit_status_code_name(st.code));
    rc = st.code == GRIT_STATUS_OK && n == 3 && sizes_ok ? 0 : 1;
    grit_status_free(&st);
    grpc__testing__test_service__streaming_output_call__destroy(&s);
  }
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return rc;
}
