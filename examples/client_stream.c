/* A client-streaming call with generated stubs: send three payloads to
 * StreamingInputCall, then take the one response (the total size).
 *   usage: client_stream TARGET */
#include <stdio.h>
#include <string.h>

#include "test.grit.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: client_stream TARGET\n");
    return 2;
  }
  grit_channel *ch;
  if (grit_channel_create(NULL, argv[1], NULL, NULL, &ch) != GRIT_OK)
    return 1;
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 10000};
  grpc__testing__test_service__streaming_input_call__stream s;
  int rc = 1;
  if (grpc__testing__test_service__streaming_input_call__start(ch, &opts, &s) ==
      GRIT_OK) {
    uint8_t body[3] = {1, 2, 3};
    for (size_t n = 1; n <= 3; n++) {
      Grpc__Testing__Payload p = GRPC__TESTING__PAYLOAD__INIT;
      p.body.data = body;
      p.body.len = n;
      Grpc__Testing__StreamingInputCallRequest req =
          GRPC__TESTING__STREAMING_INPUT_CALL_REQUEST__INIT;
      req.payload = &p;
      if (grpc__testing__test_service__streaming_input_call__send(&s, &req) !=
          GRIT_OK)
        break;
    }
    Grpc__Testing__StreamingInputCallResponse *resp;
    grit_status st;
    grpc__testing__test_service__streaming_input_call__finish(&s, &resp, &st);
    printf("status %s, aggregated_payload_size %d\n",
           grit_status_code_name(st.code),
           resp ? resp->aggregated_payload_size : -1);
    if (resp && resp->aggregated_payload_size == 6)
      rc = 0;
    if (resp)
      grpc__testing__streaming_input_call_response__free_unpacked(resp, NULL);
    grit_status_free(&st);
    grpc__testing__test_service__streaming_input_call__destroy(&s);
  }
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return rc;
}
