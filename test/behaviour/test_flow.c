/*
 * Flow control and stream limits against test/h2server peers that behave
 * like real HTTP/2 servers: wide windows and silence (C-core), windows that
 * change, slow readers, stream limits, early responses (issue 12).
 */
#include <stdlib.h>
#include <unistd.h>

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

/* Bytes of DATA the server has written so far. */
static uint64_t flow_sent(h2s_server *srv) {
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  return st.data_bytes_sent;
}

/* Wait (at most |max_ms|) until the server's DATA output has not grown for
 * 300 ms; returns the bytes sent then. */
static uint64_t flow_sent_settled(h2s_server *srv, uint64_t max_ms) {
  uint64_t end = test_now_ms() + max_ms, last = flow_sent(srv);
  uint64_t since = test_now_ms();
  while (test_now_ms() < end) {
    usleep(20000);
    uint64_t now = flow_sent(srv);
    if (now != last) {
      last = now;
      since = test_now_ms();
    } else if (test_now_ms() - since >= 300) {
      break;
    }
  }
  return last;
}

#define SLOW_MSGS 2000
#define SLOW_SIZE 16384

/* A blocking call to the server stream, request sent and half-closed. */
static grit_call *flow_stream_call(grit_channel *ch) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 60000};
  grit_call *call = NULL;
  if (grit_call_start(ch, "/flow.Svc/Stream", &o, NULL, NULL, &call) !=
          GRIT_OK ||
      grit_call_send(call, "go", 2) != GRIT_OK ||
      grit_call_close_send(call) != GRIT_OK)
    fprintf(stderr, "flow: cannot start the stream call\n");
  return call;
}

/* SPEC FC-04: an application that stops reading a server stream stops the
 * server within one stream window of what it has read, and the stream
 * resumes when it reads again. Before, the window went back as bytes
 * arrived and all 32 MiB were sent into the call's queue. */
static void test_slow_reader_server_stream(void) {
  h2s_server *srv = bh_server("path=/flow.Svc/Stream count=2000 size=16384");
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  grit_call *call = flow_stream_call(ch);
  ASSERT_NOT_NULL(call);
  grit_bytes m = {0};
  ASSERT_OK(grit_call_recv(call, &m));
  ASSERT_EQ(m.len, SLOW_SIZE);
  grit_bytes_free(&m);
  /* Not reading: at most the 256 KiB queue bound plus the 4 MiB stream
   * window (and the frames under way) may come. */
  uint64_t sent = flow_sent_settled(srv, 10000);
  ASSERT_CMP(sent, <, (uint64_t)6 * MiB);
  ASSERT_CMP(sent, >, (uint64_t)256 * 1024);
  int got = 1;
  grit_err rv;
  while ((rv = grit_call_recv(call, &m)) == GRIT_OK) {
    ASSERT_EQ(m.len, SLOW_SIZE);
    grit_bytes_free(&m);
    got++;
  }
  ASSERT_EQ(got, SLOW_MSGS);
  grit_status st = {0};
  ASSERT_OK(grit_call_finish(call, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(call);
  ASSERT_EQ(flow_sent(srv), (uint64_t)SLOW_MSGS * (SLOW_SIZE + 5));
  /* The connection's window came back whole: another call goes through. */
  ASSERT_EQ(bh_unary(ch, "/flow.Svc/Echo", "again", 10000, NULL),
            GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* grit_call_finish discards unread messages: a paused stream must resume,
 * or the server could never send its status. */
static void test_finish_without_reading(void) {
  h2s_server *srv = bh_server("path=/flow.Svc/Stream count=2000 size=16384");
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  grit_call *call = flow_stream_call(ch);
  ASSERT_NOT_NULL(call);
  flow_sent_settled(srv, 10000); /* paused by now */
  grit_status st = {0};
  ASSERT_OK(grit_call_finish(call, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(call);
  ASSERT_EQ(flow_sent(srv), (uint64_t)SLOW_MSGS * (SLOW_SIZE + 5));
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"silent_wide_window_peer", test_silent_wide_window_peer},
      {"slow_reader_server_stream", test_slow_reader_server_stream},
      {"finish_without_reading", test_finish_without_reading},
      {NULL, NULL},
  };
  return test_main(cases, argc, argv);
}
