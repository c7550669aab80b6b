/*
 * Self-test of the fault-injecting server: a raw nghttp2 client (tclient.c)
 * talks to it on the test thread and checks the frames each action produces
 * and what the server logged. Every wait is bounded.
 */
#include "h2server.h"
#include "tclient.h"

#include "test/harness.h"

#include <errno.h>
#include <signal.h>

#define WAIT_MS 5000

static h2s_server *start(const h2s_config *cfg) {
  h2s_server *srv = NULL;
  h2s_config quiet = *cfg;
  quiet.quiet = true;
  if (h2s_server_start(&quiet, &srv) != 0)
    return NULL;
  return srv;
}

static bool data_is_msg(const tc_stream *s, const char *msg) {
  size_t len = strlen(msg);
  return s->data_len == len + 5 && s->data[0] == 0 && s->data[4] == len &&
         memcmp(s->data + 5, msg, len) == 0;
}

static void test_echo_and_log(void) {
  h2s_server *srv = start(&(h2s_config){0});
  ASSERT_NOT_NULL(srv);
  ASSERT_NE(h2s_server_port(srv), 0);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  const char *extra[] = {"grpc-timeout", "1S", "idempotency-key", "k1",
                         "grpc-previous-rpc-attempts", "2", NULL};
  int i = tc_request(&tc, "/pkg.Svc/Echo", "hello", 5, true, extra);
  ASSERT(tc_run_closed(&tc, i, WAIT_MS));
  tc_stream *s = &tc.streams[i];
  char buf[64];
  ASSERT_STR_EQ(tc_find(s->headers, ":status", buf, sizeof(buf)), "200");
  ASSERT_STR_EQ(tc_find(s->headers, "content-type", buf, sizeof(buf)),
                "application/grpc");
  ASSERT(data_is_msg(s, "hello"));
  ASSERT_STR_EQ(tc_find(s->trailers, "grpc-status", buf, sizeof(buf)), "0");
  ASSERT_EQ(s->close_code, 0);

  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_NOT_NULL(r);
  ASSERT_EQ(r->seq, 0);
  ASSERT_EQ(r->conn_index, 0);
  ASSERT_EQ(r->stream_id, 1);
  ASSERT_STR_EQ(r->path, "/pkg.Svc/Echo");
  ASSERT_STR_EQ(r->authority, "test.local");
  ASSERT_STR_EQ(r->grpc_timeout, "1S");
  ASSERT_STR_EQ(h2s_request_header(r, "idempotency-key"), "k1");
  ASSERT_STR_EQ(h2s_request_header(r, "grpc-previous-rpc-attempts"), "2");
  ASSERT_STR_EQ(h2s_request_header(r, "te"), "trailers");
  ASSERT_EQ(r->n_msgs, 1);
  ASSERT_EQ(r->msg_bytes, 5);
  ASSERT_MEM_EQ(r->msgs[0].data, "hello", 5);
  ASSERT(r->half_closed);
  ASSERT(r->closed);
  ASSERT(!r->client_rst);
  ASSERT(r->acted);
  ASSERT_EQ(r->kind, H2S_REPLY);
  ASSERT_EQ(r->status_sent, 0);
  ASSERT_NULL(h2s_server_request(srv, 1));

  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  ASSERT_EQ(st.connections, 1);
  ASSERT_EQ(st.requests, 1);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void test_trailers_only_pushback(void) {
  h2s_config cfg = {
      .script_text = "trailers_only status=UNAVAILABLE pushback=100 "
                     "message=try%20later"};
  h2s_server *srv = start(&cfg);
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  int a = tc_request(&tc, "/pkg.Svc/M", "x", 1, true, NULL);
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  tc_stream *s = &tc.streams[a];
  char buf[64];
  ASSERT(s->headers_ended);
  ASSERT_EQ(s->header_blocks, 1);
  ASSERT_EQ(s->data_len, 0);
  ASSERT_STR_EQ(tc_find(s->headers, ":status", buf, sizeof(buf)), "200");
  ASSERT_STR_EQ(tc_find(s->headers, "grpc-status", buf, sizeof(buf)), "14");
  ASSERT_STR_EQ(
      tc_find(s->headers, "grpc-retry-pushback-ms", buf, sizeof(buf)), "100");
  ASSERT_STR_EQ(tc_find(s->headers, "grpc-message", buf, sizeof(buf)),
                "try later");
  ASSERT_EQ(h2s_server_script_left(srv), 0);

  /* The script ran out: echo again. */
  int b = tc_request(&tc, "/pkg.Svc/M", "y", 1, true, NULL);
  ASSERT(tc_run_closed(&tc, b, WAIT_MS));
  ASSERT(data_is_msg(&tc.streams[b], "y"));
  ASSERT(h2s_server_wait_closed(srv, 2, WAIT_MS));
  ASSERT_EQ(h2s_server_request(srv, 0)->kind, H2S_TRAILERS_ONLY);
  ASSERT_EQ(h2s_server_request(srv, 0)->status_sent, 14);
  ASSERT_EQ(h2s_server_request(srv, 1)->status_sent, 0);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void test_rst_refused(void) {
  h2s_step step = {.path = "/pkg.Svc/Refuse",
                   .repeat = 2,
                   .action = {.kind = H2S_RST,
                              .rst_code = NGHTTP2_REFUSED_STREAM}};
  h2s_server *srv = start(&(h2s_config){.script = &step, .script_len = 1});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  /* Other paths do not use up the step. */
  int a = tc_request(&tc, "/pkg.Svc/Other", "a", 1, true, NULL);
  int b = tc_request(&tc, "/pkg.Svc/Refuse", "b", 1, true, NULL);
  int c = tc_request(&tc, "/pkg.Svc/Refuse", "c", 1, true, NULL);
  int d = tc_request(&tc, "/pkg.Svc/Refuse", "d", 1, true, NULL);
  ASSERT(tc_run_closed(&tc, d, WAIT_MS));
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  ASSERT(data_is_msg(&tc.streams[a], "a"));
  ASSERT(tc.streams[b].rst);
  ASSERT_EQ(tc.streams[b].close_code, NGHTTP2_REFUSED_STREAM);
  ASSERT(tc.streams[c].rst);
  ASSERT(!tc.streams[d].rst);
  ASSERT(data_is_msg(&tc.streams[d], "d"));
  ASSERT(h2s_server_wait_closed(srv, 4, WAIT_MS));
  ASSERT_EQ(h2s_server_request(srv, 1)->rst_sent, NGHTTP2_REFUSED_STREAM);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void test_goaway_refuses_stream(void) {
  /* The second request's action: GOAWAY(last = its id - 2), so the server
   * never processes it; the first finishes, then the connection drains. */
  h2s_config cfg = {.script_text = "path=/s/Slow delay=100\n"
                                   "path=/s/Bye goaway=-2 "
                                   "goaway_code=NO_ERROR"};
  h2s_server *srv = start(&cfg);
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  int a = tc_request(&tc, "/s/Slow", "a", 1, true, NULL);
  int b = tc_request(&tc, "/s/Bye", "b", 1, true, NULL);
  ASSERT(tc_run_closed(&tc, b, WAIT_MS));
  ASSERT(tc.goaway);
  ASSERT_EQ(tc.goaway_last, tc.streams[a].id);
  ASSERT_EQ(tc.goaway_code, NGHTTP2_NO_ERROR);
  ASSERT_EQ(tc.streams[b].close_code, NGHTTP2_REFUSED_STREAM);
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  ASSERT(data_is_msg(&tc.streams[a], "a"));
  /* Drained: the server closes the connection. */
  tc_run(&tc, NULL, NULL, WAIT_MS);
  ASSERT(tc.eof);
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  ASSERT_EQ(st.goaways_sent, 1);
  const h2s_request *r = h2s_server_request(srv, 1);
  ASSERT(r->goaway_sent);
  ASSERT_EQ(r->status_sent, -1);
  r = h2s_server_request(srv, 0);
  ASSERT_CMP(r->acted_ms - r->end_ms, >=, 100);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void test_drop_and_restart(void) {
  h2s_server *srv = start(&(h2s_config){.script_text = "drop"});
  ASSERT_NOT_NULL(srv);
  uint16_t port = h2s_server_port(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, port));
  int a = tc_request(&tc, "/pkg.Svc/M", "a", 1, true, NULL);
  tc_run(&tc, NULL, NULL, WAIT_MS);
  ASSERT(tc.eof);
  ASSERT(!tc.goaway);
  ASSERT(!tc.streams[a].closed);
  tc_close(&tc);

  h2s_server_kill(srv);
  ASSERT_EQ(tc_connect(&tc, port), -ECONNREFUSED);
  ASSERT_OK(h2s_server_restart(srv));
  ASSERT_EQ(h2s_server_port(srv), port);
  ASSERT_OK(tc_connect(&tc, port));
  a = tc_request(&tc, "/pkg.Svc/M", "again", 5, true, NULL);
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  ASSERT(data_is_msg(&tc.streams[a], "again"));
  ASSERT(h2s_server_wait_connections(srv, 2, WAIT_MS));
  ASSERT_EQ(h2s_server_request(srv, 1)->conn_index, 1);

  /* A graceful GOAWAY from the test thread closes the idle connection. */
  h2s_server_goaway(srv, NGHTTP2_NO_ERROR, false);
  tc_run(&tc, NULL, NULL, WAIT_MS);
  ASSERT(tc.goaway);
  ASSERT(tc.eof);
  tc_close(&tc);

  /* Stop, then start a new server on the same port. */
  h2s_server_stop(srv);
  srv = start(&(h2s_config){.port = port});
  ASSERT_NOT_NULL(srv);
  ASSERT_OK(tc_connect(&tc, port));
  tc_close(&tc);
  h2s_server_stop(srv);
}

typedef struct attempts {
  int fail_until;
} attempts;

static void fail_first_attempts(const h2s_request *req, bool at_end,
                                h2s_action *act, void *user_data) {
  const attempts *at = user_data;
  const char *prev = h2s_request_header(req, "grpc-previous-rpc-attempts");
  int n = prev ? atoi(prev) : 0;
  if (n < at->fail_until) {
    act->kind = H2S_TRAILERS_ONLY;
    act->grpc_status = 14;
  }
}

static void test_handler(void) {
  attempts at = {.fail_until = 1};
  h2s_server *srv = start(
      &(h2s_config){.handler = fail_first_attempts, .handler_data = &at});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  int a = tc_request(&tc, "/p.S/M", "a", 1, true, NULL);
  const char *retry[] = {"grpc-previous-rpc-attempts", "1", NULL};
  int b = tc_request(&tc, "/p.S/M", "b", 1, true, retry);
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  ASSERT(tc_run_closed(&tc, b, WAIT_MS));
  char buf[16];
  ASSERT_STR_EQ(tc_find(tc.streams[a].headers, "grpc-status", buf, 16), "14");
  ASSERT(data_is_msg(&tc.streams[b], "b"));
  tc_close(&tc);
  h2s_server_stop(srv);
}

static bool got_data(tclient *tc, void *arg) {
  return tc->streams[*(int *)arg].data_len > 0;
}

static void test_live_echo_and_ping(void) {
  h2s_server *srv = start(&(h2s_config){.script_text = "at_headers"});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  int a = tc_request(&tc, "/p.S/Bidi", "one", 3, false, NULL);
  ASSERT(tc_run(&tc, got_data, &a, WAIT_MS));
  ASSERT(data_is_msg(&tc.streams[a], "one"));
  ASSERT(!tc.streams[a].closed);
  tc_send(&tc, a, "two", 3, true);
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  ASSERT_EQ(tc.streams[a].data_len, 16);
  nghttp2_submit_ping(tc.ng, NGHTTP2_FLAG_NONE, NULL);
  tc_run(&tc, NULL, NULL, 200);
  ASSERT_EQ(tc.pings_acked, 1);
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  ASSERT_EQ(st.pings_received, 1);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void test_step_parse(void) {
  h2s_step st;
  char err[128];
  ASSERT_OK(h2s_step_parse("path=/a/b repeat=3 rst=CANCEL delay=5", &st, err,
                           sizeof(err)));
  ASSERT_STR_EQ(st.path, "/a/b");
  ASSERT_EQ(st.repeat, 3);
  ASSERT_EQ(st.action.kind, H2S_RST);
  ASSERT_EQ(st.action.rst_code, NGHTTP2_CANCEL);
  ASSERT_EQ(st.action.delay_ms, 5);
  h2s_step_free(&st);
  ASSERT_OK(h2s_step_parse("header=x-a:1,trailer=x-b:2 status_raw=abc", &st,
                           err, sizeof(err)));
  ASSERT_STR_EQ(st.action.headers[0].name, "x-a");
  ASSERT_STR_EQ(st.action.trailers[0].value, "2");
  ASSERT_STR_EQ(st.action.grpc_status_raw, "abc");
  h2s_step_free(&st);
  ASSERT_EQ(h2s_step_parse("status=BOGUS", &st, err, sizeof(err)), -EINVAL);
  ASSERT_EQ(h2s_step_parse("frobnicate", &st, err, sizeof(err)), -EINVAL);
  ASSERT_EQ(h2s_status_from_name("unavailable"), 14);
  ASSERT_EQ(h2s_h2_error_from_name("ENHANCE_YOUR_CALM"), 11);
  h2s_server *srv = NULL;
  ASSERT_EQ(h2s_server_start(&(h2s_config){.script_text = "x=1", .quiet = 1},
                             &srv),
            -EINVAL);
  ASSERT_NULL(srv);
}

static const test_case tests[] = {
    {"echo_and_log", test_echo_and_log},
    {"trailers_only_pushback", test_trailers_only_pushback},
    {"rst_refused", test_rst_refused},
    {"goaway_refuses_stream", test_goaway_refuses_stream},
    {"drop_and_restart", test_drop_and_restart},
    {"handler", test_handler},
    {"live_echo_and_ping", test_live_echo_and_ping},
    {"step_parse", test_step_parse},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  return test_main(tests, argc, argv);
}
