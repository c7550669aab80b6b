/* A bidi-streaming call with generated stubs: ping-pong on FullDuplexCall,
 * one request and one response at a time, then half-close.
 *   usage: bidi TARGET */
#include <stdio.h>

#include "test.grit.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: bidi TARGET\n");
    return 2;
  }
  grit_channel *ch;
  if (grit_channel_create(NULL, argv[1], NULL, NULL, &ch) != GRIT_OK)
    return 1;
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = 10000};
  grpc__testing__test_service__full_duplex_call__stream s;
  int rc = 1;
  if (grpc__testing__test_service__full_duplex_call__start(ch, &opts, &s) ==
      GRIT_OK) {
    bool ok = true;
    for (int i = 1; ok && i <= 3; i++) {
      Grpc__Testing__ResponseParameters p =
          GRPC__TESTING__RESPONSE_PARAMETERS__INIT;
      p.size = 10 * i;
      Grpc__Testing__ResponseParameters *pp = &p;
      Grpc__Testing__StreamingOutputCallRequest req =
          GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
      req.n_response_parameters = 1;
      req.response_parameters = &pp;
      Grpc__Testing__StreamingOutputCallResponse *m;
      ok = grpc__testing__test_service__full_duplex_call__send(&s, &req) ==
               GRIT_OK &&
           grpc__testing__test_service__full_duplex_call__recv(&s, &m) ==
               GRIT_OK;
      if (ok) {
        size_t len = m->payload ? m->payload->body.len : 0;
        printf("ping %d: pong of %zu bytes\n", i, len);
        ok = len == (size_t)(10 * i);
        grpc__testing__streaming_output_call_response__free_unpacked(m, NULL);
      }
    }
    grpc__testing__test_service__full_duplex_call__close_send(&s);
    Grpc__Testing__StreamingOutputCallResponse *m;
    grit_err end = grpc__testing__test_service__full_duplex_call__recv(&s, &m);
    grit_status st;
    grpc__testing__test_service__full_duplex_call__finish(&s, &st);
    printf("status %s\n", grit_status_code_name(st.code));
    rc = ok && end == GRIT_END_OF_STREAM && st.code == GRIT_STATUS_OK ? 0 : 1;
    grit_status_free(&st);
    grpc__testing__test_service__full_duplex_call__destroy(&s);
  }
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return rc;
}
