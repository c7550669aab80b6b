/* grit demo, issue 15: stop sending calls to bad backends. Outlier
 * detection (gRFC A50) against round_robin + retries over three backends
 * of which one fails 60 % of calls; and client-side health checking (gRFC
 * A17), where one backend turns NOT_SERVING mid-run. The backends are
 * h2server/ engines in this process; their grpc.health.v1.Health/Watch
 * answers after 50 ms and ends, so the client's restarted Watch polls it
 * (a Watch that ends after a response is restarted at once, HC-02). */
#include "tools.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "h2server.h"

#define LB_METHOD "/grit.demo.Echo/Unary"
#define WATCH "/grpc.health.v1.Health/Watch"

typedef struct lb_backend {
  h2s_server *srv;
  unsigned fail_percent; /* of /grit.demo.Echo calls, deterministic */
  int serving;           /* health status sent: 1 SERVING, 2 NOT_SERVING */
  uint64_t calls;        /* non-Watch requests seen (atomic) */
} lb_backend;

static void lb_handler(const h2s_request *req, bool at_end, h2s_action *act,
                       void *ud) {
  (void)at_end;
  lb_backend *b = ud;
  if (req->path && strcmp(req->path, WATCH) == 0) {
    static const uint8_t msgs[3][2] = {{0}, {0x08, 1}, {0x08, 2}};
    int s = __atomic_load_n(&b->serving, __ATOMIC_RELAXED);
    act->kind = H2S_REPLY;
    act->body = H2S_BODY_BYTES;
    act->data = msgs[s];
    act->len = 2;
    act->delay_ms = 50;
    return;
  }
  uint64_t k = __atomic_fetch_add(&b->calls, 1, __ATOMIC_RELAXED);
  /* fail_percent in steps of 20: with 60, requests 0, 1, 2 of every 5. */
  if ((k % 5) * 20 < b->fail_percent) {
    act->kind = H2S_TRAILERS_ONLY;
    act->grpc_status = GRIT_STATUS_UNAVAILABLE;
    act->grpc_message = "bad backend";
  }
}

static int lb_start(lb_backend *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h2s_config cfg = {
        .quiet = true, .handler = lb_handler, .handler_data = &b[i]};
    b[i].serving = 1;
    if (h2s_server_start(&cfg, &b[i].srv) != 0) {
      fprintf(stderr, "grit demo: cannot start a backend\n");
      return -1;
    }
  }
  return 0;
}

static void lb_stop(lb_backend *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    h2s_server_stop(b[i].srv);
}

static grit_channel *lb_channel(lb_backend *b, size_t n, const char *config) {
  char target[256];
  size_t k = (size_t)snprintf(target, sizeof(target), "ipv4:");
  for (size_t i = 0; i < n; i++)
    k += (size_t)snprintf(target + k, sizeof(target) - k, "%s127.0.0.1:%u",
                          i ? "," : "", h2s_server_port(b[i].srv));
  grit_channel_args *args;
  if (grit_channel_args_create(&args) != GRIT_OK)
    return NULL;
  grit_channel_args_set_string(args, GRIT_ARG_SERVICE_CONFIG, config);
  grit_channel_args_set_int(args, GRIT_ARG_RNG_SEED, 15);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, args, &d, &ch) != GRIT_OK)
    fprintf(stderr, "grit demo: channel: %s %s\n", d.path, d.reason);
  grit_channel_args_destroy(args);
  return ch;
}

typedef struct lb_tally {
  uint64_t lat_us[600];
  size_t n, ok, attempts;
} lb_tally;

static void lb_calls(grit_channel *ch, size_t n, lb_tally *t) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 5000};
  for (size_t i = 0; i < n && t->n < 600; i++) {
    grit_status st;
    grit_call_info info = GRIT_CALL_INFO_INIT;
    uint64_t t0 = tool_now_us();
    grit_unary_call(ch, LB_METHOD, "hello", 5, &o, NULL, &st, &info);
    t->lat_us[t->n++] = tool_now_us() - t0;
    t->ok += st.code == GRIT_STATUS_OK;
    t->attempts += info.attempts;
    grit_status_free(&st);
  }
}

static uint64_t lb_load(uint64_t *p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

#define LB_RETRY                                                               \
  "\"methodConfig\":[{\"name\":[{\"service\":\"grit.demo.Echo\"}],"            \
  "\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":\"0.001s\","          \
  "\"maxBackoff\":\"0.005s\",\"backoffMultiplier\":2,"                         \
  "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]"

/* Outlier detection: 600 calls in 12 rounds of 50, 30 ms apart, so the
 * 0.1 s interval runs between rounds. */
int demo_scene_outlier(void) {
  static const char *const cfgs[2] = {
      "{\"loadBalancingConfig\":[{\"round_robin\":{}}]," LB_RETRY "}",
      "{\"loadBalancingConfig\":[{\"outlier_detection_experimental\":{"
      "\"interval\":\"0.1s\",\"failurePercentageEjection\":{\"threshold\":50,"
      "\"minimumHosts\":2,\"requestVolume\":10},"
      "\"childPolicy\":[{\"round_robin\":{}}]}}]," LB_RETRY "}"};
  static const char *const titles[2] = {"round_robin + retries:",
                                        "+ outlier detection:"};
  printf("  %-26s %8s %9s %9s %9s  %s\n", "600 calls", "success", "att/call",
         "last 300", "p99", "calls to the bad backend");
  double per_call[2], late[2];
  uint64_t bad_calls[2], ejections[2];
  size_t ok[2];
  for (int i = 0; i < 2; i++) {
    lb_backend b[3] = {{0}};
    b[1].fail_percent = 60;
    if (lb_start(b, 3) != 0) {
      lb_stop(b, 3);
      return 1;
    }
    grit_channel *ch = lb_channel(b, 3, cfgs[i]);
    if (!ch) {
      lb_stop(b, 3);
      return 1;
    }
    static lb_tally t;
    memset(&t, 0, sizeof(t));
    size_t att_half = 0;
    for (int round = 0; round < 12; round++) {
      if (round == 6)
        att_half = t.attempts;
      lb_calls(ch, 50, &t);
      usleep(30000);
    }
    grit_channel_stats st = GRIT_CHANNEL_STATS_INIT;
    grit_channel_get_stats(ch, &st);
    tool_pcts p = tool_percentiles(t.lat_us, t.n);
    per_call[i] = t.n ? (double)t.attempts / (double)t.n : 0;
    late[i] = (double)(t.attempts - att_half) / 300.0;
    bad_calls[i] = lb_load(&b[1].calls);
    ejections[i] = st.ejections;
    ok[i] = t.ok;
    printf("  %-26s %3zu/%zu %9.2f %9.2f %6.2f ms  %" PRIu64 " (%" PRIu64
           " ejection%s)\n",
           titles[i], t.ok, t.n, per_call[i], late[i], (double)p.p99 / 1000.0,
           bad_calls[i], st.ejections, st.ejections == 1 ? "" : "s");
    grit_channel_destroy(ch);
    lb_stop(b, 3);
  }
  return ok[1] >= ok[0] && ejections[0] == 0 && ejections[1] >= 1 &&
                 late[1] < 1.05 && late[1] < late[0] &&
                 bad_calls[1] < bad_calls[0]
             ? 0
             : 1;
}

/* Health checking: round_robin over three backends with healthCheckConfig;
 * backend C turns NOT_SERVING after 100 of 300 calls. */
int demo_scene_health(void) {
  lb_backend b[3] = {{0}};
  if (lb_start(b, 3) != 0) {
    lb_stop(b, 3);
    return 1;
  }
  grit_channel *ch =
      lb_channel(b, 3,
                 "{\"loadBalancingConfig\":[{\"round_robin\":{}}],"
                 "\"healthCheckConfig\":{\"serviceName\":\"grit.demo\"}}");
  if (!ch) {
    lb_stop(b, 3);
    return 1;
  }
  static lb_tally t;
  memset(&t, 0, sizeof(t));
  lb_calls(ch, 100, &t);
  uint64_t before[3];
  for (int i = 0; i < 3; i++)
    before[i] = lb_load(&b[i].calls);
  printf("  100 calls, all SERVING:        A %3" PRIu64 "  B %3" PRIu64
         "  C %3" PRIu64 "\n",
         before[0], before[1], before[2]);
  __atomic_store_n(&b[2].serving, 2, __ATOMIC_RELAXED);
  grit_channel_stats st = GRIT_CHANNEL_STATS_INIT;
  uint64_t t0 = tool_now_us();
  for (int i = 0; i < 200 && st.health_not_serving == 0; i++) {
    usleep(10000);
    grit_channel_get_stats(ch, &st);
  }
  uint64_t seen_ms = (tool_now_us() - t0) / 1000;
  lb_calls(ch, 200, &t);
  uint64_t after[3];
  for (int i = 0; i < 3; i++)
    after[i] = lb_load(&b[i].calls) - before[i];
  printf("  C says NOT_SERVING (seen after %" PRIu64 " ms), 200 calls: "
         "A %3" PRIu64 "  B %3" PRIu64 "  C %3" PRIu64 "\n",
         seen_ms, after[0], after[1], after[2]);
  grit_channel_destroy(ch);
  lb_stop(b, 3);
  return t.ok == 300 && before[2] > 0 && after[2] == 0 &&
                 st.health_not_serving == 1
             ? 0
             : 1;
}
