/* xds:/// on the installed library (issue 27; SPEC XD-01), built with
 * pkg-config alone: the xds resolver is built into libgrit, the bootstrap
 * comes from GRPC_XDS_BOOTSTRAP_CONFIG. Makes 3 EmptyCalls on
 * "xds:///svc" (the test control plane's listener, whose one endpoint is
 * the grpcio interop server), then shuts the default runtime down (it
 * waits for the xDS client's stream by itself). Exit 0 when all is well.
 *
 *   xds_smoke            (GRPC_XDS_BOOTSTRAP_CONFIG set) */
#include <grit/grit.h>
#include <stdio.h>

int main(void) {
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  grit_err e = grit_channel_create(NULL, "xds:///svc", NULL, &d, &ch);
  if (e != GRIT_OK) {
    fprintf(stderr, "xds_smoke: channel: %s: %s: %s\n", grit_strerror(e),
            d.path, d.reason);
    return 1;
  }
  int ok = 0;
  for (int i = 0; i < 3; i++) {
    grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                        .timeout_ms = 20000,
                        .wait_for_ready = GRIT_WFR_ON};
    grit_bytes resp = {0};
    grit_status st = {0};
    e = grit_unary_call(ch, "/grpc.testing.TestService/EmptyCall", "", 0, &o,
                        &resp, &st, NULL);
    if (e == GRIT_OK && st.code == GRIT_STATUS_OK)
      ok++;
    else
      fprintf(stderr, "xds_smoke: call %d: %s %d %s\n", i, grit_strerror(e),
              (int)st.code, st.message ? st.message : "");
    grit_bytes_free(&resp);
    grit_status_free(&st);
  }
  grit_channel_destroy(ch);
  e = grit_default_runtime_shutdown();
  if (e != GRIT_OK) {
    fprintf(stderr, "xds_smoke: shutdown: %s\n", grit_strerror(e));
    return 1;
  }
  printf("xds_smoke: %d of 3 calls over xds:///svc OK\n", ok);
  return ok == 3 ? 0 : 1;
}
