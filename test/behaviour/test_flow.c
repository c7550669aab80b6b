/*
 * Flow control and stream limits against test/h2server peers that behave
 * like real HTTP/2 servers: wide windows and silence (C-core), windows that
 * change, slow readers, stream limits, early responses (issue 12).
 */
#include <stdlib.h>

#include "test/behaviour/bh.h"

#define MiB (1024 * 1024)

/* A blocking unary call of |len| pattern bytes; returns the status code. */
static grit_status_code flow_unary(grit_channel *ch, const char *method,
                                   size_t len, uint64_t timeout_ms,
                                   grit_status *st) {
  uint8_t *req = malloc(len);
  for (size_t i = 0; i < len; i++)
    req[i] = (uint8_t)(i * 7);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms};
  grit_bytes resp = {0};
  grit_err rv = grit_unary_call(ch, method, req, len, &o, &resp, st, NULL);
  free(req);
  grit_bytes_free(&resp);
  return rv == GRIT_OK ? st->code : (grit_status_code)-1;
}

/* FINDINGS, issue 12: a peer that grants wide windows up front and then
 * sends nothing (no WINDOW_UPDATE, no PING) until the request is whole.
 * Every request must still go out completely; before the fix the write
 * loop stopped after the first 1 MiB chunk the socket took at once. */
static void test_silent_wide_window_peer(void) {
  h2s_config cfg = {.quiet = true,
                    .initial_window_size = 16 * MiB,
                    .connection_window_size = 64 * MiB,
                    .script_text = "repeat=* size=10"};
  h2s_server *srv = NULL;
  ASSERT_EQ(h2s_server_start(&cfg, &srv), 0);
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  ASSERT_NOT_NULL(ch);
  size_t sizes[] = {1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB - 5, 3 * MiB + 17};
  for (int round = 0; round < 4; round++) {
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
      grit_status st = {0};
      ASSERT_EQ(flow_unary(ch, "/flow.Svc/Big", sizes[i], 30000, &st),
                GRIT_STATUS_OK);
      grit_status_free(&st);
    }
  }
  size_t n = h2s_server_request_count(srv);
  ASSERT_EQ(n, 20);
  for (size_t i = 0; i < n; i++)
    ASSERT_EQ(h2s_server_request(srv, i)->msg_bytes, sizes[i % 5]);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"silent_wide_window_peer", test_silent_wide_window_peer},
      {NULL, NULL},
  };
  return test_main(cases, argc, argv);
}
