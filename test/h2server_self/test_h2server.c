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
#include <stdio.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

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
  const char *extra[] = {"grpc-timeout",
                         "1S",
                         "idempotency-key",
                         "k1",
                         "grpc-previous-rpc-attempts",
                         "2",
                         NULL};
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
  h2s_config cfg = {.script_text =
                        "trailers_only status=UNAVAILABLE pushback=100 "
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
  ASSERT_STR_EQ(tc_find(s->headers, "grpc-retry-pushback-ms", buf, sizeof(buf)),
                "100");
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
  h2s_step step = {
      .path = "/pkg.Svc/Refuse",
      .repeat = 2,
      .action = {.kind = H2S_RST, .rst_code = NGHTTP2_REFUSED_STREAM}};
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
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  ASSERT_EQ(st.refused_sent, 2);
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
  h2s_server *srv =
      start(&(h2s_config){.handler = fail_first_attempts, .handler_data = &at});
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
  ASSERT_OK(h2s_step_parse("setting=MAX_FRAME_SIZE:20000 setting=3:1 "
                           "window_step=9 window_every=50 iws_at=10:0 "
                           "iws_at=0:5",
                           &st, err, sizeof(err)));
  ASSERT_EQ(st.action.settings[0].id, NGHTTP2_SETTINGS_MAX_FRAME_SIZE);
  ASSERT_EQ(st.action.settings[0].value, 20000);
  ASSERT_EQ(st.action.settings[1].id, 3);
  ASSERT_EQ(st.action.settings[1].value, 1);
  ASSERT_EQ(st.action.window_step, 9);
  ASSERT_EQ(st.action.window_every_ms, 50);
  ASSERT_EQ(st.action.iws_at[0].after_bytes, 10);
  ASSERT_EQ(st.action.iws_at[0].value, 0);
  ASSERT_EQ(st.action.iws_at[1].after_bytes, 0);
  ASSERT_EQ(st.action.iws_at[1].value, 5);
  h2s_step_free(&st);
  ASSERT_EQ(h2s_step_parse("setting=BOGUS:1", &st, err, sizeof(err)), -EINVAL);
  ASSERT_EQ(h2s_step_parse("iws_at=0:0", &st, err, sizeof(err)), -EINVAL);
  ASSERT_EQ(h2s_status_from_name("unavailable"), 14);
  ASSERT_EQ(h2s_h2_error_from_name("ENHANCE_YOUR_CALM"), 11);
  h2s_server *srv = NULL;
  ASSERT_EQ(
      h2s_server_start(&(h2s_config){.script_text = "x=1", .quiet = 1}, &srv),
      -EINVAL);
  ASSERT_NULL(srv);
}

/* Runs one request on a fresh connection to a server with |script|. */
typedef struct one {
  h2s_server *srv;
  tclient tc;
  int i;
  tc_stream *s;
  char buf[256];
} one;

static bool one_start(one *o, const char *script, const char *path,
                      const char *msg, int run_ms) {
  memset(o, 0, sizeof(*o));
  o->srv = start(&(h2s_config){.script_text = script});
  if (o->srv == NULL || tc_connect(&o->tc, h2s_server_port(o->srv)) != 0)
    return false;
  o->i = tc_request(&o->tc, path ? path : "/p.S/M", msg, msg ? strlen(msg) : 0,
                    true, NULL);
  o->s = &o->tc.streams[o->i];
  if (run_ms)
    tc_run(&o->tc, NULL, NULL, run_ms);
  else
    tc_run_closed(&o->tc, o->i, WAIT_MS);
  return true;
}

static void one_end(one *o) {
  tc_close(&o->tc);
  h2s_server_stop(o->srv);
}

static const char *hdr(one *o, const char *name) {
  return tc_find(o->s->headers, name, o->buf, sizeof(o->buf));
}

static const char *trl(one *o, const char *name) {
  return tc_find(o->s->trailers, name, o->buf, sizeof(o->buf));
}

static void test_headers_then_error(void) {
  one o;
  ASSERT(one_start(&o,
                   "status=INTERNAL message=boom header=x-a:1 "
                   "trailer=x-t:2",
                   NULL, "m", 0));
  ASSERT(o.s->closed);
  ASSERT_EQ(o.s->header_blocks, 2);
  ASSERT_NULL(hdr(&o, "grpc-status"));
  ASSERT_STR_EQ(hdr(&o, "x-a"), "1");
  ASSERT_EQ(o.s->data_len, 0); /* echo stays empty on error */
  ASSERT_STR_EQ(trl(&o, "grpc-status"), "13");
  ASSERT_STR_EQ(trl(&o, "grpc-message"), "boom");
  ASSERT_STR_EQ(trl(&o, "x-t"), "2");
  one_end(&o);
}

static void test_http_status_and_content_type(void) {
  one o;
  ASSERT(one_start(&o,
                   "trailers_only http=503 no_grpc_status "
                   "content_type=text/html",
                   NULL, "m", 0));
  ASSERT(o.s->headers_ended);
  ASSERT_STR_EQ(hdr(&o, ":status"), "503");
  ASSERT_STR_EQ(hdr(&o, "content-type"), "text/html");
  ASSERT_NULL(hdr(&o, "grpc-status"));
  one_end(&o);
  ASSERT(one_start(&o, "trailers_only status_raw=abc content_type=", NULL, "m",
                   0));
  ASSERT_STR_EQ(hdr(&o, "grpc-status"), "abc");
  ASSERT_NULL(hdr(&o, "content-type"));
  one_end(&o);
}

static void test_bodies(void) {
  one o;
  ASSERT(one_start(&o, "size=100 count=3", NULL, "m", 0));
  ASSERT_EQ(o.s->data_len, 3 * 105);
  ASSERT_EQ(o.s->data[4], 100);
  ASSERT_EQ(o.s->data[5], 'a');
  ASSERT_STR_EQ(trl(&o, "grpc-status"), "0");
  one_end(&o);
  /* A prefix claiming 4 GiB - 1, and a compressed-flag message. */
  ASSERT(one_start(&o, "hex=0102 prefix_len=0xffffffff", NULL, "m", 0));
  static const uint8_t huge[] = {0, 0xff, 0xff, 0xff, 0xff, 1, 2};
  ASSERT_EQ(o.s->data_len, sizeof(huge));
  ASSERT_MEM_EQ(o.s->data, huge, sizeof(huge));
  one_end(&o);
  ASSERT(one_start(&o, "text=zz compressed count=2", NULL, "m", 0));
  static const uint8_t zz[] = {1, 0, 0, 0, 2, 'z', 'z'};
  ASSERT_EQ(o.s->data_len, 14);
  ASSERT_MEM_EQ(o.s->data + 7, zz, sizeof(zz));
  one_end(&o);
  ASSERT(one_start(&o, "raw=00000000", NULL, "m", 0));
  ASSERT_EQ(o.s->data_len, 4);
  one_end(&o);
}

static void test_big_header(void) {
  one o;
  /* 100 kB: HEADERS + 6 CONTINUATIONs (Debian's nghttp2 allows 8). */
  ASSERT(one_start(&o, "big_header=100000", NULL, "m", 0));
  ASSERT(o.s->closed);
  /* tclient keeps 4 KiB of headers; the value must fill it. */
  ASSERT_CMP(strlen(o.s->headers), >, 4000);
  ASSERT(data_is_msg(o.s, "m"));
  one_end(&o);
}

static void test_end_modes(void) {
  one o;
  ASSERT(one_start(&o, "end_rst=CANCEL", NULL, "m", 0));
  ASSERT(data_is_msg(o.s, "m"));
  ASSERT(o.s->rst);
  ASSERT_EQ(o.s->close_code, NGHTTP2_CANCEL);
  ASSERT_EQ(o.s->header_blocks, 1);
  one_end(&o);
  ASSERT(one_start(&o, "end=drop", NULL, "m", WAIT_MS));
  ASSERT(data_is_msg(o.s, "m"));
  ASSERT(o.tc.eof);
  ASSERT(!o.tc.goaway);
  one_end(&o);
  ASSERT(one_start(&o, "end=drop tcp_reset", NULL, "m", WAIT_MS));
  ASSERT(o.tc.eof);
  ASSERT(!o.tc.goaway);
  one_end(&o);
  ASSERT(one_start(&o, "end=hang", NULL, "m", 300));
  ASSERT(data_is_msg(o.s, "m"));
  ASSERT(!o.s->closed);
  one_end(&o);
}

static void test_hang_then_client_cancel(void) {
  one o;
  ASSERT(one_start(&o, "hang", NULL, "m", 200));
  ASSERT(!o.s->closed);
  nghttp2_submit_rst_stream(o.tc.ng, NGHTTP2_FLAG_NONE, o.s->id,
                            NGHTTP2_CANCEL);
  tc_run(&o.tc, NULL, NULL, 50);
  ASSERT(h2s_server_wait_closed(o.srv, 1, WAIT_MS));
  const h2s_request *r = h2s_server_request(o.srv, 0);
  ASSERT(r->client_rst);
  ASSERT_EQ(r->client_rst_code, NGHTTP2_CANCEL);
  ASSERT(r->half_closed);
  ASSERT_EQ(r->kind, H2S_HANG);
  ASSERT_EQ(r->status_sent, -1);
  one_end(&o);
}

static void test_goaway_now(void) {
  one o;
  ASSERT(one_start(&o, "goaway_now goaway_code=ENHANCE_YOUR_CALM", NULL, "m",
                   WAIT_MS));
  ASSERT(o.tc.goaway);
  ASSERT_EQ(o.tc.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
  ASSERT_EQ(o.tc.goaway_last, o.s->id);
  ASSERT(o.tc.eof);
  one_end(&o);
}

static void test_floods_and_inject(void) {
  one o;
  ASSERT(one_start(&o, "ping_flood=10 settings_flood=5", NULL, "m", 0));
  tc_run(&o.tc, NULL, NULL, 100);
  ASSERT_EQ(o.tc.pings_received, 10);
  ASSERT_EQ(o.tc.settings_received, 6);
  ASSERT(data_is_msg(o.s, "m"));
  one_end(&o);
  /* A raw PING frame, then the stream hangs. */
  ASSERT(one_start(&o, "inject=0000080600000000000102030405060708", NULL, "m",
                   300));
  ASSERT_EQ(o.tc.pings_received, 1);
  ASSERT(!o.s->closed);
  one_end(&o);
  /* Debian's nghttp2 1.52 carries the CVE-2024-28182 fix: more than 8
   * CONTINUATIONs kill the session, which tclient reports as eof. */
  ASSERT(one_start(&o, "continuation_flood=1000", NULL, "m", WAIT_MS));
  ASSERT_EQ(o.s->header_blocks, 0);
  ASSERT(o.tc.eof);
  ASSERT_EQ(o.tc.recv_error, -905); /* NGHTTP2_ERR_TOO_MANY_CONTINUATIONS */
  ASSERT_EQ(h2s_server_request(o.srv, 0)->kind, H2S_CONTINUATION_FLOOD);
  one_end(&o);
}

/* data_chunk and data_pad shape the response DATA frames (grpc's
 * data_frame_padding and no_df_padding_sanity_test); PING ACKs from the
 * client are counted. */
static void test_data_frames(void) {
  one o;
  ASSERT(one_start(&o, "text=abcdefghijklmnopqrst data_chunk=5 data_pad=255",
                   NULL, "m", 0));
  ASSERT(data_is_msg(o.s, "abcdefghijklmnopqrst"));
  h2s_stats st;
  h2s_server_get_stats(o.srv, &st);
  ASSERT_EQ(st.data_frames_sent, 5); /* 25 framed bytes, 5 a frame */
  ASSERT_EQ(st.padded_frames_sent, 5);
  ASSERT_EQ(st.data_bytes_sent, 5 * (5 + 1 + 255));
  one_end(&o);
  ASSERT(one_start(&o, "text=abcdefghijklmnopqrst data_chunk=5", NULL, "m", 0));
  ASSERT(data_is_msg(o.s, "abcdefghijklmnopqrst"));
  h2s_server_get_stats(o.srv, &st);
  ASSERT_EQ(st.data_frames_sent, 5);
  ASSERT_EQ(st.padded_frames_sent, 0);
  one_end(&o);
  ASSERT(one_start(&o, "ping_flood=3", NULL, "m", 0));
  tc_run(&o.tc, NULL, NULL, 100);
  h2s_server_get_stats(o.srv, &st);
  ASSERT_EQ(st.ping_acks_received, 3);
  one_end(&o);
}

static void test_ping_ack_control(void) {
  h2s_server *srv = start(&(h2s_config){.no_ping_ack = true});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  nghttp2_submit_ping(tc.ng, NGHTTP2_FLAG_NONE, NULL);
  tc_run(&tc, NULL, NULL, 200);
  ASSERT_EQ(tc.pings_acked, 0);
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  ASSERT_EQ(st.pings_received, 1);
  ASSERT_EQ(st.ping_acks_sent, 0);
  tc_close(&tc);
  h2s_server_stop(srv);

  /* An action stops acks on its connection from then on. */
  one o;
  ASSERT(one_start(&o, "no_ping_ack", NULL, "m", 0));
  nghttp2_submit_ping(o.tc.ng, NGHTTP2_FLAG_NONE, NULL);
  tc_run(&o.tc, NULL, NULL, 200);
  ASSERT_EQ(o.tc.pings_acked, 0);
  one_end(&o);
}

static bool got_settings(tclient *tc, void *arg) {
  return tc->settings_received > 0;
}

static void test_settings_and_flow_control(void) {
  h2s_server *srv =
      start(&(h2s_config){.max_concurrent_streams = 1,
                          .initial_window_size = 100,
                          .script_text = "at_headers freeze_window hang"});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  ASSERT(tc_run(&tc, got_settings, NULL, WAIT_MS));
  char big[60];
  memset(big, 'b', sizeof(big));
  int a = tc_request(&tc, "/p.S/Up", big, sizeof(big), false, NULL);
  tc_send(&tc, a, big, sizeof(big), false);
  tc_send(&tc, a, big, sizeof(big), true);
  tc_run(&tc, NULL, NULL, 300);
  ASSERT_EQ(nghttp2_session_get_remote_settings(
                tc.ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS),
            1);
  ASSERT_EQ(
      nghttp2_session_get_stream_remote_window_size(tc.ng, tc.streams[a].id),
      0);
  ASSERT_CMP(tc.streams[a].send_off, <, tc.streams[a].send_len);
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_EQ(r->n_msgs, 1);
  ASSERT(!r->half_closed);
  tc_close(&tc);
  h2s_server_stop(srv);
}

/* |n| pattern bytes as one request message on a new stream of |tc|. */
static int big_request(tclient *tc, const char *path, size_t n) {
  uint8_t *p = malloc(n);
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(i * 7);
  int i = tc_request(tc, path, p, n, true, NULL);
  free(p);
  return i;
}

static bool big_request_intact(const h2s_request *r, size_t n) {
  if (r == NULL || r->n_msgs != 1 || r->msgs[0].len != n)
    return false;
  for (size_t i = 0; i < n; i++)
    if (r->msgs[0].data[i] != (uint8_t)(i * 7))
      return false;
  return true;
}

static void test_window_step(void) {
  /* Default 65535-byte windows, returned in WINDOW_UPDATEs of 1..100. */
  h2s_server *srv = start(&(h2s_config){.script_text = "window_step=100"});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  size_t n = 300000;
  int a = big_request(&tc, "/p.S/Step", n);
  ASSERT(tc_run_closed(&tc, a, 4 * WAIT_MS));
  ASSERT_EQ(tc.streams[a].data_len, n + 5);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  ASSERT(big_request_intact(h2s_server_request(srv, 0), n));
  ASSERT_EQ(h2s_server_request(srv, 0)->data_bytes, n + 5);
  /* Without those updates the client could not send past 65535 bytes. */
  ASSERT_EQ(tc.wu_min, 1);
  ASSERT_EQ(tc.wu_max, 100);
  ASSERT_CMP(tc.window_updates, >=, (int)((n - 65535) / 100));
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  ASSERT_CMP(st.window_updates_sent, >=, (uint64_t)tc.window_updates);
  ASSERT_CMP(st.data_frames_received, >, tc.streams[a].send_len / 16384);
  ASSERT_EQ(st.max_data_frame_received, 16384);
  ASSERT_CMP(st.bytes_received, >, n);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void test_window_every(void) {
  /* A slow reader: 64 KiB windows refilled every 50 ms, so 256 KiB need
   * at least three refills after the first window. */
  h2s_server *srv = start(&(h2s_config){.script_text = "window_every=50"});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  size_t n = 256 * 1024;
  int a = big_request(&tc, "/p.S/Slow", n);
  ASSERT(tc_run_closed(&tc, a, 4 * WAIT_MS));
  ASSERT_EQ(tc.streams[a].data_len, n + 5);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT(big_request_intact(r, n));
  ASSERT_CMP(r->end_ms - r->headers_ms, >=, 150);
  /* Each refill returns everything received: far fewer, larger updates. */
  ASSERT_CMP(tc.window_updates, <=, 2 * (int)(r->end_ms - r->headers_ms));
  ASSERT_CMP(tc.wu_max, >, 16384);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void test_iws_changes(void) {
  /* 1 MiB stream windows; at 100 kB the window drops to 1000 bytes while
   * more than that is unacknowledged (the client's window goes negative),
   * at 400 kB it rises to 4 MB. */
  h2s_config cfg = {.initial_window_size = 1 << 20,
                    .connection_window_size = 64 << 20,
                    .script_text = "iws_at=100000:1000 iws_at=400000:4000000"};
  h2s_server *srv = start(&cfg);
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  size_t n = 2 << 20;
  int a = big_request(&tc, "/p.S/Iws", n);
  ASSERT(tc_run_closed(&tc, a, 4 * WAIT_MS));
  ASSERT_EQ(tc.streams[a].data_len, n + 5);
  ASSERT(h2s_server_wait_closed(srv, 1, WAIT_MS));
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT(big_request_intact(r, n));
  ASSERT_EQ(r->iws_sent, 2);
  ASSERT_CMP(r->window_low, <, 0);
  ASSERT_EQ(tc.streams[a].settings_window_min, 0); /* clipped negative */
  ASSERT_EQ(nghttp2_session_get_remote_settings(
                tc.ng, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE),
            4000000);
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  ASSERT_EQ(st.settings_sent, 3);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static bool got_mcs(tclient *tc, void *arg) {
  return nghttp2_session_get_remote_settings(
             tc->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS) ==
         *(uint32_t *)arg;
}

static void test_settings_at_runtime(void) {
  /* The second request's action sends SETTINGS; the test thread too. */
  h2s_server *srv = start(&(h2s_config){
      .script_text = "at_headers hang; at_headers hang "
                     "setting=MAX_CONCURRENT_STREAMS:7 setting=5:20000"});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  ASSERT(tc_run(&tc, got_settings, NULL, WAIT_MS));
  h2s_server_settings(
      srv, (h2s_setting[]){{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 5}, {0}});
  uint32_t want = 5;
  ASSERT(tc_run(&tc, got_mcs, &want, WAIT_MS));
  tc_request(&tc, "/p.S/A", "a", 1, false, NULL);
  tc_request(&tc, "/p.S/B", "b", 1, false, NULL);
  want = 7;
  ASSERT(tc_run(&tc, got_mcs, &want, WAIT_MS));
  ASSERT_EQ(nghttp2_session_get_remote_settings(
                tc.ng, NGHTTP2_SETTINGS_MAX_FRAME_SIZE),
            20000);
  int c = tc_request(&tc, "/p.S/C", "c", 1, true, NULL);
  ASSERT(tc_run_closed(&tc, c, WAIT_MS));
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  ASSERT_EQ(st.settings_sent, 3);
  ASSERT_EQ(st.max_open_streams, 3);
  ASSERT_EQ(h2s_server_request(srv, 0)->open_streams, 1);
  ASSERT_EQ(h2s_server_request(srv, 2)->open_streams, 3);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void test_testservice(void) {
  one o;
  /* SimpleRequest{response_size = 7} */
  ASSERT(one_start(&o, NULL, "/grpc.testing.TestService/UnaryCall", "\x10\x07",
                   0));
  static const uint8_t want[] = {0,    0, 0, 0, 11, 0x0a, 9, 0x12,
                                 0x07, 0, 0, 0, 0,  0,    0, 0};
  ASSERT_EQ(o.s->data_len, sizeof(want));
  ASSERT_MEM_EQ(o.s->data, want, sizeof(want));
  one_end(&o);
  /* response_status{code = 2, message = "x"} */
  ASSERT(one_start(&o, NULL, "/grpc.testing.TestService/UnaryCall",
                   "\x3a\x05\x08\x02\x12\x01x", 0));
  ASSERT_EQ(o.s->data_len, 0);
  ASSERT_STR_EQ(trl(&o, "grpc-status"), "2");
  ASSERT_STR_EQ(trl(&o, "grpc-message"), "x");
  one_end(&o);
}

static void test_unix_socket(void) {
  char path[64];
  snprintf(path, sizeof(path), "/tmp/h2s-test-%d.sock", (int)getpid());
  h2s_server *srv = start(&(h2s_config){.unix_path = path});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect_unix(&tc, path));
  int a = tc_request(&tc, "/p.S/M", "u", 1, true, NULL);
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  ASSERT(data_is_msg(&tc.streams[a], "u"));
  tc_close(&tc);
  h2s_server_stop(srv);
  ASSERT_NE(access(path, F_OK), 0);
}

/* Self-signed P-256 certificate for CN=localhost into |cert| and |key|. */
static bool make_cert(const char *cert, const char *key) {
  EVP_PKEY *pkey = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  bool ok = false;
  if (pkey && x) {
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, pkey);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(x, name);
    FILE *fc = fopen(cert, "w"), *fk = fopen(key, "w");
    ok = X509_sign(x, pkey, EVP_sha256()) > 0 && fc && fk &&
         PEM_write_X509(fc, x) == 1 &&
         PEM_write_PrivateKey(fk, pkey, NULL, NULL, 0, NULL, NULL) == 1;
    if (fc)
      fclose(fc);
    if (fk)
      fclose(fk);
  }
  X509_free(x);
  EVP_PKEY_free(pkey);
  return ok;
}

static void test_tls(void) {
  char cert[64], key[64];
  snprintf(cert, sizeof(cert), "/tmp/h2s-test-%d.crt", (int)getpid());
  snprintf(key, sizeof(key), "/tmp/h2s-test-%d.key", (int)getpid());
  ASSERT(make_cert(cert, key));
  h2s_server *srv =
      start(&(h2s_config){.tls_cert_file = cert, .tls_key_file = key});
  h2s_server *bad =
      start(&(h2s_config){.tls_cert_file = key, .tls_key_file = cert});
  unlink(cert);
  unlink(key);
  ASSERT_NULL(bad);
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect_tls(&tc, h2s_server_port(srv)));
  ASSERT_STR_EQ(tc.alpn, "h2");
  int a = tc_request(&tc, "/p.S/M", "secret", 6, true, NULL);
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  ASSERT(data_is_msg(&tc.streams[a], "secret"));
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void at_headers_handler(const h2s_request *req, bool at_end,
                               h2s_action *act, void *user_data) {
  int *calls = user_data;
  calls[at_end]++;
  if (!at_end && strcmp(req->path, "/p.S/Now") == 0) {
    act->kind = H2S_TRAILERS_ONLY;
    act->grpc_status = 9;
  }
}

static bool two_closed(h2s_server *srv, void *arg) {
  const h2s_request *a = h2s_server_request(srv, 0);
  const h2s_request *b = h2s_server_request(srv, 1);
  return a && b && a->closed && b->closed;
}

static void test_handler_at_headers(void) {
  int calls[2] = {0, 0};
  h2s_server *srv = start(&(h2s_config){.handler = at_headers_handler,
                                        .handler_data = calls,
                                        .handler_at_headers = true});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  int a = tc_request(&tc, "/p.S/Now", "a", 1, false, NULL);
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  char buf[16];
  ASSERT_STR_EQ(tc_find(tc.streams[a].headers, "grpc-status", buf, 16), "9");
  int b = tc_request(&tc, "/p.S/Later", "b", 1, true, NULL);
  ASSERT(tc_run_closed(&tc, b, WAIT_MS));
  ASSERT(data_is_msg(&tc.streams[b], "b"));
  tc_close(&tc);
  ASSERT(h2s_server_wait(srv, two_closed, NULL, WAIT_MS));
  ASSERT_EQ(calls[0], 2);
  ASSERT_EQ(calls[1], 1);
  h2s_server_stop(srv);
}

static void test_stop_reading(void) {
  h2s_server *srv = start(&(h2s_config){.script_text = "at_headers "
                                                       "stop_reading hang"});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  int a = tc_request(&tc, "/p.S/M", NULL, 0, false, NULL);
  tc_run(&tc, NULL, NULL, 100);
  ASSERT(h2s_server_wait_requests(srv, 1, WAIT_MS));
  tc_send(&tc, a, "late", 4, true);
  tc_run(&tc, NULL, NULL, 200);
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_EQ(r->n_msgs, 0);
  ASSERT(!r->half_closed);
  ASSERT(r->acted);
  tc_close(&tc);
  h2s_server_stop(srv);
}

static void test_accept_modes(void) {
  h2s_server *srv = start(&(h2s_config){.accept = H2S_ACCEPT_CLOSE});
  ASSERT_NOT_NULL(srv);
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  tc_run(&tc, NULL, NULL, WAIT_MS);
  ASSERT(tc.eof);
  ASSERT_EQ(tc.settings_received, 0);
  tc_close(&tc);
  h2s_server_set_accept(srv, H2S_ACCEPT_SILENT);
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  tc_run(&tc, NULL, NULL, 200);
  ASSERT(!tc.eof);
  ASSERT_EQ(tc.settings_received, 0);
  tc_close(&tc);
  h2s_server_set_accept(srv, H2S_ACCEPT_SERVE);
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  ASSERT(tc_run(&tc, got_settings, NULL, WAIT_MS));
  tc_close(&tc);
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  ASSERT_EQ(st.connections, 3);
  h2s_server_stop(srv);
}

static void test_script_at_runtime(void) {
  h2s_server *srv = start(&(h2s_config){0});
  ASSERT_NOT_NULL(srv);
  ASSERT_OK(h2s_server_script_add_text(srv, "repeat=2 rst=CANCEL; hang"));
  ASSERT_EQ(h2s_server_script_add_text(srv, "ok; bad_token"), -EINVAL);
  ASSERT_EQ(h2s_server_script_left(srv), 2);
  h2s_server_script_clear(srv);
  h2s_server_set_default(
      srv, &(h2s_action){.kind = H2S_TRAILERS_ONLY, .grpc_status = 5});
  tclient tc;
  ASSERT_OK(tc_connect(&tc, h2s_server_port(srv)));
  int a = tc_request(&tc, "/p.S/M", "a", 1, true, NULL);
  ASSERT(tc_run_closed(&tc, a, WAIT_MS));
  char buf[16];
  ASSERT_STR_EQ(tc_find(tc.streams[a].headers, "grpc-status", buf, 16), "5");
  tc_close(&tc);
  h2s_server_stop(srv);
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
    {"headers_then_error", test_headers_then_error},
    {"http_status_and_content_type", test_http_status_and_content_type},
    {"bodies", test_bodies},
    {"big_header", test_big_header},
    {"end_modes", test_end_modes},
    {"hang_then_client_cancel", test_hang_then_client_cancel},
    {"goaway_now", test_goaway_now},
    {"floods_and_inject", test_floods_and_inject},
    {"ping_ack_control", test_ping_ack_control},
    {"settings_and_flow_control", test_settings_and_flow_control},
    {"window_step", test_window_step},
    {"window_every", test_window_every},
    {"iws_changes", test_iws_changes},
    {"settings_at_runtime", test_settings_at_runtime},
    {"testservice", test_testservice},
    {"data_frames", test_data_frames},
    {"unix_socket", test_unix_socket},
    {"tls", test_tls},
    {"handler_at_headers", test_handler_at_headers},
    {"script_at_runtime", test_script_at_runtime},
    {"stop_reading", test_stop_reading},
    {"accept_modes", test_accept_modes},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  return test_main(tests, argc, argv);
}
