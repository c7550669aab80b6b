/*
 * Large messages against a grpcio server (C-core), cleartext and TLS
 * (issue 12): requests of 1-4 MiB and 3 MiB responses, 20 of each with no
 * failure; a request over the server's limit and a server that answers
 * before reading the request end with the server's status at once.
 * Skipped (77) without Debian's python3-grpcio.
 */
#include <stdlib.h>

#include "test/behaviour/bh.h"
#include "test/behaviour/pypeer.h"

#define MiB (1024 * 1024)
#define ROUNDS 20

static char g_certs[64]; /* the TLS material of this run */

/* A grpcio flow_server.py, over TLS when |tls|, with the given receive
 * limit (0: its default of 8 MiB). */
static bool flow_peer(pypeer *p, bool tls, size_t max_recv) {
  char n[32];
  snprintf(n, sizeof(n), "%zu", max_recv);
  if (max_recv)
    setenv("FLOW_MAX_RECV", n, 1);
  if (tls)
    setenv("FLOW_TLS_DIR", g_certs, 1);
  bool ok = pypeer_start(p, "flow_server.py");
  unsetenv("FLOW_MAX_RECV");
  unsetenv("FLOW_TLS_DIR");
  return ok;
}

static grit_channel *flow_channel(const pypeer *p, bool tls) {
  char target[64], ca[128];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%u", p->port);
  snprintf(ca, sizeof(ca), "%s/ca.pem", g_certs);
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  if (tls) {
    grit_channel_args_set_int(a, GRIT_ARG_TLS, 1);
    grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS_FILE, ca);
    grit_channel_args_set_string(a, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE,
                                 "foo.test.google.fr");
  }
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, a, &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel: %s %s\n", d.path, d.reason);
  grit_channel_args_destroy(a);
  return ch;
}

static uint8_t *flow_pattern(size_t n) {
  uint8_t *b = malloc(n);
  for (size_t i = 0; b && i < n; i++)
    b[i] = (uint8_t)i;
  return b;
}

/* Requests of 1, 2, 3 and 4 MiB, ROUNDS times each: the server must see
 * every byte (it answers with the length it got). */
static void flow_requests(grit_channel *ch) {
  static const size_t sizes[] = {1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB};
  uint8_t *req = flow_pattern(4 * MiB);
  ASSERT_NOT_NULL(req);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 30000};
  for (int r = 0; r < ROUNDS; r++) {
    for (size_t i = 0; i < 4; i++) {
      grit_bytes resp = {0};
      grit_status st = {0};
      ASSERT_OK(grit_unary_call(ch, "/flow.Flow/Size", req, sizes[i], &o, &resp,
                                &st));
      ASSERT_EQ(st.code, GRIT_STATUS_OK);
      char want[32];
      snprintf(want, sizeof(want), "%zu", sizes[i]);
      ASSERT_EQ(resp.len, strlen(want));
      ASSERT_MEM_EQ(resp.data, want, resp.len);
      grit_bytes_free(&resp);
      grit_status_free(&st);
    }
  }
  free(req);
}

/* 3 MiB responses, ROUNDS times, checked byte for byte. */
static void flow_responses(grit_channel *ch) {
  grit_metadata *md = NULL;
  grit_metadata_create(&md);
  char n[32];
  snprintf(n, sizeof(n), "%d", 3 * MiB);
  ASSERT_OK(grit_metadata_add(md, "x-respond", n, strlen(n)));
  uint8_t *want = flow_pattern(3 * MiB);
  grit_call_opts o = {
      .version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 30000, .metadata = md};
  for (int r = 0; r < ROUNDS; r++) {
    grit_bytes resp = {0};
    grit_status st = {0};
    ASSERT_OK(grit_unary_call(ch, "/flow.Flow/Size", "x", 1, &o, &resp, &st));
    ASSERT_EQ(st.code, GRIT_STATUS_OK);
    ASSERT_EQ(resp.len, (size_t)3 * MiB);
    ASSERT_MEM_EQ(resp.data, want, resp.len);
    grit_bytes_free(&resp);
    grit_status_free(&st);
  }
  free(want);
  grit_metadata_destroy(md);
}

static void flow_both(bool tls) {
  pypeer p;
  ASSERT(flow_peer(&p, tls, 0));
  grit_channel *ch = flow_channel(&p, tls);
  ASSERT_NOT_NULL(ch);
  flow_requests(ch);
  flow_responses(ch);
  grit_channel_destroy(ch);
  pypeer_stop(&p);
}

static void test_large_cleartext(void) {
  flow_both(false);
}

static void test_large_tls(void) {
  flow_both(true);
}

/* A 4.3 MB request to a server with C-core's 4 MiB limit: the server's
 * RESOURCE_EXHAUSTED comes as soon as the request is in (it hung to the
 * deadline before the flush fix). */
static void test_over_limit_request(void) {
  pypeer p;
  ASSERT(flow_peer(&p, false, 4 * MiB));
  grit_channel *ch = flow_channel(&p, false);
  ASSERT_EQ(bh_unary(ch, "/flow.Flow/Size", "warm", 10000, NULL),
            GRIT_STATUS_OK);
  size_t len = 4300000;
  uint8_t *req = flow_pattern(len);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 20000};
  grit_status st = {0};
  uint64_t t0 = test_now_ms();
  ASSERT_OK(grit_unary_call(ch, "/flow.Flow/Size", req, len, &o, NULL, &st));
  uint64_t took = test_now_ms() - t0;
  ASSERT_EQ(st.code, GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_CMP(took, <, 5000); /* the deadline is 20 s */
  grit_status_free(&st);
  free(req);
  grit_channel_destroy(ch);
  pypeer_stop(&p);
}

/* SPEC FC-03: the server fails a client stream before reading any of it
 * while grit is still sending 8 MiB: the call ends with the server's
 * status, not at the deadline, and the channel goes on working. */
static void test_early_reject(void) {
  pypeer p;
  ASSERT(flow_peer(&p, false, 0));
  grit_channel *ch = flow_channel(&p, false);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 20000};
  uint8_t *msg = flow_pattern(2 * MiB);
  uint64_t t0 = test_now_ms();
  grit_call *call = NULL;
  ASSERT_OK(grit_call_start(ch, "/flow.Flow/Reject", &o, NULL, NULL, &call));
  for (int i = 0; i < 4; i++)
    if (grit_call_send(call, msg, 2 * MiB) != GRIT_OK)
      break; /* the call has ended already */
  grit_call_close_send(call);
  grit_status st = {0};
  ASSERT_OK(grit_call_finish(call, &st));
  uint64_t took = test_now_ms() - t0;
  ASSERT_EQ(st.code, GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_STR_EQ(st.message, "rejected before reading the request");
  ASSERT_CMP(took, <, 5000);
  grit_status_free(&st);
  grit_call_destroy(call);
  ASSERT_EQ(bh_unary(ch, "/flow.Flow/Size", "after", 10000, NULL),
            GRIT_STATUS_OK);
  free(msg);
  grit_channel_destroy(ch);
  pypeer_stop(&p);
}

int main(int argc, char **argv) {
  if (!pypeer_has_grpc()) {
    fprintf(stderr, "skipped: no python3-grpcio\n");
    return 77;
  }
  snprintf(g_certs, sizeof(g_certs), "/tmp/grit-flow-certs-XXXXXX");
  if (!mkdtemp(g_certs)) {
    fprintf(stderr, "cannot make a temporary directory\n");
    return 1;
  }
  static const test_case cases[] = {
      {"large_cleartext", test_large_cleartext},
      {"large_tls", test_large_tls},
      {"over_limit_request", test_over_limit_request},
      {"early_reject", test_early_reject},
      {NULL, NULL},
  };
  int rc = test_main(cases, argc, argv);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_certs);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", g_certs);
  return rc;
}
