/*
 * Client-side health checking (SPEC HC-01, HC-02; gRFC A17) and outlier
 * detection (OD-01; gRFC A50) against real gRPC servers: three grpcio
 * backends in test/peers/health_server.py, which serve
 * grpc.health.v1.Health/Watch by hand and count the calls each receives.
 * Every assertion is on what reached which backend, or on the channel's
 * counters; waits are bounded polls. Exits 77 (skipped) when
 * /usr/bin/python3 lacks grpc.
 */
#include <arpa/inet.h>
#include <grit/grit.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metric.h"
#include "pypeer.h"
#include "test/harness.h"

#define CALL_MS 10000
#define WAIT_MS 20000 /* bounded waits; generous for valgrind */

static pypeer g_peer = {.pid = -1, .stdin_fd = -1};
static grit_channel *g_ctl; /* control channel to backend 0 */
static unsigned g_ports[3];
static char g_target[128];

static grit_err unary(grit_channel *ch, const char *method, const char *req,
                      grit_bytes *resp, grit_status *st) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  return grit_unary_call(ch, method, req, strlen(req), &o, resp, st, NULL);
}

static bool ctl(const char *method, const char *req, char *out, size_t len) {
  grit_bytes resp = {0};
  grit_status st = {0};
  bool ok = unary(g_ctl, method, req, &resp, &st) == GRIT_OK &&
            st.code == GRIT_STATUS_OK;
  if (ok && out)
    snprintf(out, len, "%.*s", (int)resp.len, (const char *)resp.data);
  grit_bytes_free(&resp);
  grit_status_free(&st);
  return ok;
}

static bool set(int backend, const char *what) {
  char req[64];
  snprintf(req, sizeof(req), "%d %s", backend, what);
  return ctl("/ctl.Ctl/Set", req, NULL, 0);
}

static bool counts(unsigned n[3]) {
  char buf[128];
  return ctl("/ctl.Ctl/Counts", "", buf, sizeof(buf)) &&
         sscanf(buf, "%u %u %u", &n[0], &n[1], &n[2]) == 3;
}

static bool peer_start(void) {
  if (!pypeer_start(&g_peer, "health_server.py"))
    return false;
  char t[64];
  snprintf(t, sizeof(t), "ipv4:127.0.0.1:%u", g_peer.port);
  if (grit_channel_create(NULL, t, NULL, NULL, &g_ctl) != GRIT_OK)
    return false;
  char buf[128];
  if (!ctl("/ctl.Ctl/Ports", "", buf, sizeof(buf)) ||
      sscanf(buf, "%u %u %u", &g_ports[0], &g_ports[1], &g_ports[2]) != 3)
    return false;
  snprintf(g_target, sizeof(g_target),
           "ipv4:127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", g_ports[0],
           g_ports[1], g_ports[2]);
  return true;
}

static void peer_stop(void) {
  grit_channel_destroy(g_ctl);
  g_ctl = NULL;
  pypeer_stop(&g_peer);
}

/* The last attempt record's "skipped" text (issue 15). */
static pthread_mutex_t g_obs_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_skipped[256];

static void obs_cb(const grit_attempt_record *r, void *ud) {
  (void)ud;
  pthread_mutex_lock(&g_obs_mu);
  snprintf(g_skipped, sizeof(g_skipped), "%s", r->skipped);
  pthread_mutex_unlock(&g_obs_mu);
}

static bool skipped_has(const char *needle) {
  pthread_mutex_lock(&g_obs_mu);
  bool has = strstr(g_skipped, needle) != NULL;
  pthread_mutex_unlock(&g_obs_mu);
  return has;
}

static grit_channel *channel(const char *config, int health_checks) {
  grit_channel_args *a = NULL;
  grit_channel *ch = NULL;
  if (grit_channel_args_create(&a) != GRIT_OK)
    return NULL;
  grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, config);
  grit_channel_args_set_int(a, GRIT_ARG_RNG_SEED, 15);
  grit_channel_args_set_observer(a, obs_cb, NULL);
  if (health_checks >= 0)
    grit_channel_args_set_int(a, GRIT_ARG_HEALTH_CHECKS, health_checks);
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, g_target, a, &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel: %s: %s\n", d.path, d.reason);
  grit_channel_args_destroy(a);
  return ch;
}

/* |n| calls of /lb.Svc/Call; how many ended OK. */
static unsigned calls(grit_channel *ch, unsigned n) {
  unsigned ok = 0;
  for (unsigned i = 0; i < n; i++) {
    grit_bytes resp = {0};
    grit_status st = {0};
    if (unary(ch, "/lb.Svc/Call", "x", &resp, &st) == GRIT_OK &&
        st.code == GRIT_STATUS_OK)
      ok++;
    grit_bytes_free(&resp);
    grit_status_free(&st);
  }
  return ok;
}

static uint64_t stat_health(grit_channel *ch) {
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  grit_channel_get_stats(ch, &s);
  return s.health_not_serving;
}

static uint64_t stat_ejections(grit_channel *ch) {
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  grit_channel_get_stats(ch, &s);
  return s.ejections;
}

#define RR_HEALTH                                                              \
  "{\"loadBalancingConfig\":[{\"round_robin\":{}}],"                           \
  "\"healthCheckConfig\":{\"serviceName\":\"lb.Svc\"}}"

/* SPEC HC-01: a backend whose health says NOT_SERVING receives no calls
 * under round_robin; once SERVING again it gets its share back. */
static void test_not_serving_gets_no_calls(void) {
  ASSERT(peer_start());
  grit_channel *ch = channel(RR_HEALTH, -1);
  ASSERT_NOT_NULL(ch);
  unsigned n[3];
  ASSERT_EQ(calls(ch, 30), 30);
  ASSERT(counts(n));
  ASSERT_CMP(n[0], >, 0);
  ASSERT_CMP(n[1], >, 0);
  ASSERT_CMP(n[2], >, 0);

  ASSERT(set(1, "NOT_SERVING"));
  uint64_t end = test_now_ms() + WAIT_MS;
  while (stat_health(ch) < 1 && test_now_ms() < end)
    usleep(10000);
  ASSERT_EQ(stat_health(ch), 1);
  ASSERT(ctl("/ctl.Ctl/Reset", "", NULL, 0));
  ASSERT_EQ(calls(ch, 60), 60);
  ASSERT(counts(n));
  ASSERT_EQ(n[1], 0);
  ASSERT_CMP(n[0], >, 0);
  ASSERT_CMP(n[2], >, 0);
  /* The attempt observer says which backend was passed over, and why. */
  char want[64];
  snprintf(want, sizeof(want), "127.0.0.1:%u (health: not SERVING)",
           g_ports[1]);
  ASSERT(skipped_has(want));

  ASSERT(set(1, "SERVING"));
  end = test_now_ms() + WAIT_MS;
  do {
    ASSERT_EQ(calls(ch, 3), 3);
    ASSERT(counts(n));
  } while (n[1] == 0 && test_now_ms() < end);
  ASSERT_CMP(n[1], >, 0);
  grit_channel_destroy(ch);
  peer_stop();
}

/* HC-01: UNKNOWN counts as not healthy too; with every backend out the
 * channel is TRANSIENT_FAILURE and calls fail UNAVAILABLE at once. */
static void test_all_unhealthy_fails(void) {
  ASSERT(peer_start());
  for (int i = 0; i < 3; i++)
    ASSERT(set(i, i == 0 ? "UNKNOWN" : "NOT_SERVING"));
  grit_channel *ch = channel(RR_HEALTH, -1);
  ASSERT_NOT_NULL(ch);
  grit_bytes resp = {0};
  grit_status st = {0};
  uint64_t end = test_now_ms() + WAIT_MS;
  do {
    grit_status_free(&st);
    ASSERT_OK(unary(ch, "/lb.Svc/Call", "x", &resp, &st));
  } while (st.code == GRIT_STATUS_DEADLINE_EXCEEDED && test_now_ms() < end);
  ASSERT_EQ(st.code, GRIT_STATUS_UNAVAILABLE);
  /* issue 28: the message names every backend and why (it was "addr: "). */
  ASSERT_NOT_NULL(st.message);
  fprintf(stderr, "  message: %s\n", st.message);
  ASSERT_NOT_NULL(strstr(st.message, "no usable backend among 3 addresses"));
  for (int i = 0; i < 3; i++) {
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%u (health: not SERVING)",
             g_ports[i]);
    ASSERT_NOT_NULL(strstr(st.message, want));
  }
  grit_status_free(&st);
  unsigned n[3];
  ASSERT(counts(n));
  ASSERT_EQ(n[0] + n[1] + n[2], 0);
  grit_channel_destroy(ch);
  peer_stop();
}

/* A loopback TCP port nobody listens on (bound, then closed), or 0. */
static unsigned dead_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof(a);
  unsigned port = 0;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &al) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* issue 28: with no backend usable, the call's error names each backend
 * and why it is not usable: one not SERVING, one ejected by outlier
 * detection, one refusing connections (with its last error). */
static void test_no_usable_backend_message(void) {
  ASSERT(peer_start());
  ASSERT(set(0, "fail"));
  ASSERT(set(1, "NOT_SERVING"));
  /* A port nobody listens on: bound, then closed. */
  unsigned dead = dead_port();
  ASSERT_CMP(dead, >, 0);
  char target[160];
  snprintf(target, sizeof(target),
           "ipv4:127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", g_ports[0],
           g_ports[1], dead);
  grit_channel_args *a = NULL;
  ASSERT_OK(grit_channel_args_create(&a));
  /* Backend 0 fails every call: ejected once it has 10 of them (A50,
   * maxEjectionPercent 100 so the one ejection is allowed). */
  grit_channel_args_set_string(
      a, GRIT_ARG_SERVICE_CONFIG,
      "{\"loadBalancingConfig\":[{\"outlier_detection_experimental\":{"
      "\"interval\":\"0.2s\",\"maxEjectionPercent\":100,"
      "\"failurePercentageEjection\":{\"threshold\":50,"
      "\"minimumHosts\":1,\"requestVolume\":10},"
      "\"childPolicy\":[{\"round_robin\":{}}]}}],"
      "\"healthCheckConfig\":{\"serviceName\":\"lb.Svc\"}}");
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  ASSERT_OK(grit_channel_create(NULL, target, a, &d, &ch));
  grit_channel_args_destroy(a);
  grit_status st = {0};
  grit_bytes resp = {0};
  uint64_t end = test_now_ms() + WAIT_MS;
  bool done = false;
  while (!done && test_now_ms() < end) {
    grit_status_free(&st);
    ASSERT_OK(unary(ch, "/lb.Svc/Call", "x", &resp, &st));
    grit_bytes_free(&resp);
    done = st.code == GRIT_STATUS_UNAVAILABLE && st.message &&
           strstr(st.message, "ejected by outlier detection");
    if (!done)
      usleep(20000);
  }
  ASSERT(done);
  fprintf(stderr, "  message: %s\n", st.message);
  char want[160];
  ASSERT_NOT_NULL(strstr(st.message, "no usable backend among 3 addresses"));
  snprintf(want, sizeof(want), "127.0.0.1:%u (ejected by outlier detection)",
           g_ports[0]);
  ASSERT_NOT_NULL(strstr(st.message, want));
  snprintf(want, sizeof(want), "127.0.0.1:%u (health: not SERVING)",
           g_ports[1]);
  ASSERT_NOT_NULL(strstr(st.message, want));
  snprintf(want, sizeof(want),
           "127.0.0.1:%u (transient failure: connect to 127.0.0.1:%u failed: "
           "connection refused)",
           dead, dead);
  ASSERT_NOT_NULL(strstr(st.message, want));
  grit_status_free(&st);
  grit_channel_destroy(ch);
  peer_stop();
}

/* HC-02: a server without the health service (UNIMPLEMENTED) is healthy;
 * the channel argument turns health checking off. */
static void test_unimplemented_and_disabled(void) {
  ASSERT(peer_start());
  ASSERT(set(0, "nohealth"));
  ASSERT(set(1, "NOT_SERVING"));
  grit_channel *ch = channel(RR_HEALTH, -1);
  ASSERT_NOT_NULL(ch);
  unsigned n[3];
  ASSERT_EQ(calls(ch, 30), 30);
  ASSERT(counts(n));
  ASSERT_CMP(n[0], >, 0); /* UNIMPLEMENTED: healthy */
  ASSERT_EQ(n[1], 0);     /* NOT_SERVING from its first answer */
  ASSERT_CMP(n[2], >, 0);
  grit_channel_destroy(ch);

  ASSERT(ctl("/ctl.Ctl/Reset", "", NULL, 0));
  ch = channel(RR_HEALTH, 0); /* GRIT_ARG_HEALTH_CHECKS 0 */
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(calls(ch, 30), 30);
  ASSERT(counts(n));
  ASSERT_CMP(n[1], >, 0);
  ASSERT_EQ(stat_health(ch), 0);
  grit_channel_destroy(ch);
  peer_stop();
}

/* HC-01, gRFC A17: pick_first ignores health checking. */
static void test_pick_first_ignores_health(void) {
  ASSERT(peer_start());
  ASSERT(set(0, "NOT_SERVING"));
  grit_channel *ch =
      channel("{\"healthCheckConfig\":{\"serviceName\":\"lb.Svc\"}}", -1);
  ASSERT_NOT_NULL(ch);
  unsigned n[3];
  ASSERT_EQ(calls(ch, 10), 10);
  ASSERT(counts(n));
  ASSERT_EQ(n[0], 10);
  grit_channel_destroy(ch);
  peer_stop();
}

#define OD_CONFIG(child, hosts)                                                \
  "{\"loadBalancingConfig\":[{\"outlier_detection_experimental\":{"            \
  "\"interval\":\"1s\",\"failurePercentageEjection\":{\"threshold\":50,"       \
  "\"minimumHosts\":" hosts ",\"requestVolume\":10},"                          \
  "\"childPolicy\":[{\"" child "\":{}}]}}]}"

/* OD-01, the done-when: failurePercentageEjection (threshold 50,
 * minimumHosts 2, requestVolume 10, interval 1 s) under round_robin; after
 * the first interval that ejects it, fewer than 5 % of calls reach the
 * backend that fails every call. */
static void test_od_round_robin(void) {
  ASSERT(peer_start());
  ASSERT(set(1, "fail"));
  grit_channel *ch = channel(OD_CONFIG("round_robin", "2"), -1);
  ASSERT_NOT_NULL(ch);
  uint64_t end = test_now_ms() + WAIT_MS;
  while (stat_ejections(ch) == 0 && test_now_ms() < end)
    calls(ch, 10);
  ASSERT_EQ(stat_ejections(ch), 1);
  ASSERT_EQ(test_metric(ch, "grit_client_lb_ejections_total"), 1); /* OB-01 */
  ASSERT(ctl("/ctl.Ctl/Reset", "", NULL, 0));
  ASSERT_EQ(calls(ch, 200), 200);
  unsigned n[3];
  ASSERT(counts(n));
  ASSERT_CMP(n[1] * 100, <, 5 * (n[0] + n[1] + n[2]));
  ASSERT_EQ(n[0] + n[2], 200);
  char want[64];
  snprintf(want, sizeof(want), "127.0.0.1:%u (ejected by outlier detection)",
           g_ports[1]);
  ASSERT(skipped_has(want));
  /* A50 with the default maxEjectionPercent 10: no second ejection. */
  ASSERT_EQ(stat_ejections(ch), 1);
  grit_channel_destroy(ch);
  peer_stop();
}

/* OD-01 under pick_first: the chosen backend fails every call, is
 * ejected, and pick_first moves to the next address. */
static void test_od_pick_first(void) {
  ASSERT(peer_start());
  ASSERT(set(0, "fail"));
  grit_channel *ch = channel(OD_CONFIG("pick_first", "1"), -1);
  ASSERT_NOT_NULL(ch);
  uint64_t end = test_now_ms() + WAIT_MS;
  while (stat_ejections(ch) == 0 && test_now_ms() < end)
    calls(ch, 10);
  ASSERT_EQ(stat_ejections(ch), 1);
  ASSERT(ctl("/ctl.Ctl/Reset", "", NULL, 0));
  ASSERT_EQ(calls(ch, 20), 20);
  unsigned n[3];
  ASSERT(counts(n));
  ASSERT_EQ(n[0], 0);
  ASSERT_EQ(n[1], 20);
  grit_channel_destroy(ch);
  peer_stop();
}

int main(int argc, char **argv) {
  if (!pypeer_has_grpc()) {
    fprintf(stderr, "no grpc for /usr/bin/python3: skipped\n");
    return 77;
  }
  static const test_case tests[] = {
      {"not_serving_gets_no_calls", test_not_serving_gets_no_calls},
      {"all_unhealthy_fails", test_all_unhealthy_fails},
      {"no_usable_backend_message", test_no_usable_backend_message},
      {"unimplemented_and_disabled", test_unimplemented_and_disabled},
      {"pick_first_ignores_health", test_pick_first_ignores_health},
      {"od_round_robin", test_od_round_robin},
      {"od_pick_first", test_od_pick_first},
      {NULL, NULL},
  };
  int rv = test_main(tests, argc, argv);
  grit_default_runtime_shutdown();
  return rv;
}
