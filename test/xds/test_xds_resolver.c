/* grit_channel_create("xds:///svc") against the test control plane on
 * @grpc/grpc-js and three grpcio backends (test/peers/health_server.py)
 * (issue 27; SPEC XD-01, XD-02; gRFC A27, A28): 300 calls spread evenly
 * over a cluster of 3 endpoints; an EDS update moves traffic within one
 * second; all of priority 0 unhealthy sends calls to priority 1 and back
 * when they recover; a LEAST_REQUEST cluster runs least_request; an
 * invalid Cluster is NACKed with its reason (the control
 * plane's log) and calls go on with the previous one; the control plane
 * restarting mid-run loses no call that had a deadline to spare. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grit/grit.h"
#include "test/xds/cp.h"
#include "xdsclient/xdsclient.h"

/* One unary call; its answer ("b0".."b2") into |out|. */
static grit_status_code call(grit_channel *ch, const char *method,
                             uint64_t timeout_ms, char *out, size_t size) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms,
                      .wait_for_ready = GRIT_WFR_ON};
  grit_status st = {0};
  grit_bytes resp = {0};
  grit_err e = grit_unary_call(ch, method, "", 0, &o, &resp, &st, NULL);
  if (e != GRIT_OK)
    return GRIT_STATUS_INTERNAL;
  snprintf(out, size, "%.*s", (int)resp.len,
           resp.data ? (const char *)resp.data : "");
  grit_bytes_free(&resp);
  grit_status_code code = st.code;
  if (code != GRIT_STATUS_OK)
    fprintf(stderr, "call failed: %d %s\n", (int)code,
            st.message ? st.message : "");
  grit_status_free(&st);
  return code;
}

static int backend_of(const char *answer) {
  return answer[0] == 'b' ? atoi(answer + 1) : -1;
}

/* Within 10 s, |n| calls in a row answered by backends in |mask| (bit i:
 * bi). */
static bool run_on(grit_channel *ch, unsigned mask, int n) {
  uint64_t t0 = xcp_now_ms();
  int run = 0;
  char ans[32];
  while (run < n && xcp_now_ms() - t0 < 10000) {
    int b = -1;
    if (call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK)
      b = backend_of(ans);
    run = b >= 0 && b < 3 && (mask & (1u << b)) ? run + 1 : 0;
  }
  return run == n;
}

/* Calls made while the control plane restarts. */
typedef struct runner {
  grit_channel *ch;
  volatile bool stop;
  int ok, failed;
} runner;

static void *run_calls(void *arg) {
  runner *r = arg;
  while (!r->stop) {
    char ans[32];
    if (call(r->ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK)
      r->ok++;
    else
      r->failed++;
    usleep(5000);
  }
  return NULL;
}

int main(void) {
  xcp *backends = xcp_backends_start();
  if (!backends)
    return 1;
  /* The three ports, from the backends themselves. */
  grit_channel *ctl = NULL;
  CHECK(xcp_backends_ports(backends, &ctl) == 3);
  xcp *cp = xcp_start_scenario("basic.json", 0);
  if (!cp)
    return 1;
  int cp_port = xcp_port(cp);
  grit_channel *ch = xcp_xds_channel("grit-xds-resolver-test", cp_port);
  if (!ch)
    return 1;

  /* Warm up until every endpoint has answered (round_robin over READY
   * subchannels), then 300 calls: round robin gives each its third. */
  char ans[32];
  bool seen[3] = {false, false, false};
  for (int i = 0; i < 200 && !(seen[0] && seen[1] && seen[2]); i++) {
    if (call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK) {
      int b = backend_of(ans);
      if (b >= 0 && b < 3)
        seen[b] = true;
    }
  }
  CHECK(seen[0] && seen[1] && seen[2]);
  int count[3] = {0, 0, 0}, bad = 0;
  for (int i = 0; i < 300; i++) {
    int b = -1;
    if (call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK)
      b = backend_of(ans);
    if (b >= 0 && b < 3)
      count[b]++;
    else
      bad++;
  }
  printf("300 calls: b0 %d, b1 %d, b2 %d, failed %d\n", count[0], count[1],
         count[2], bad);
  CHECK(bad == 0);
  for (int i = 0; i < 3; i++)
    CHECK(count[i] >= 90 && count[i] <= 110);

  /* EDS update: only b2. Traffic moves within one second. */
  uint64_t t0 = xcp_now_ms();
  xcp_cmd(cp, "update only_b2");
  int run = 0;
  uint64_t moved_ms = 0;
  while (xcp_now_ms() - t0 < 10000) {
    if (call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK &&
        backend_of(ans) == 2) {
      if (run++ == 0)
        moved_ms = xcp_now_ms() - t0;
      if (run == 20)
        break;
    } else {
      run = 0;
    }
  }
  printf("EDS update: every call on b2 after %llu ms\n",
         (unsigned long long)moved_ms);
  CHECK(run == 20);
  CHECK(moved_ms < 1000);

  /* Priorities (A27's EDS; without the failover timer): every endpoint
   * of priority 0 UNHEALTHY or DRAINING sends every call to priority 1
   * (b2), and calls go back to priority 0 (b0, b1) when they recover. */
  xcp_cmd(cp, "update p0_unhealthy");
  CHECK(run_on(ch, 4, 20)); /* b2 only */
  xcp_cmd(cp, "update p0_recovered");
  CHECK(run_on(ch, 3, 20)); /* b0 and b1 only */
  xcp_cmd(cp, "update only_b2");
  CHECK(run_on(ch, 4, 20));

  /* An invalid Cluster is NACKed with its reason; calls go on (b2). */
  int mark = xcp_nlines(cp) - 1;
  xcp_cmd(cp, "update bad_cluster");
  int nack = xcp_wait(cp, mark, 10000, "\"request\"",
                      "envoy.config.cluster.v3.Cluster", "c1: cluster type",
                      (char *)NULL);
  CHECK(nack >= 0);
  if (nack >= 0)
    printf("NACK: %s\n", xcp_line(cp, nack));
  for (int i = 0; i < 30; i++) {
    CHECK(call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK);
    CHECK(backend_of(ans) == 2);
  }

  /* A LEAST_REQUEST cluster maps onto lb/'s least_request_experimental
   * with its choice_count; calls go on. */
  xcp_cmd(cp, "update least_request");
  bool lr = false;
  for (int i = 0; i < 1000 && !lr; i++) {
    grit_service_config_info info = GRIT_SERVICE_CONFIG_INFO_INIT;
    if (grit_channel_get_service_config(ch, &info) == GRIT_OK && info.json &&
        strstr(info.json, "\"least_request_experimental\"") &&
        strstr(info.json, "\"choiceCount\":3"))
      lr = true;
    grit_service_config_info_free(&info);
    if (!lr)
      usleep(10000);
  }
  CHECK(lr);
  CHECK(call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK);

  /* The control plane restarts mid-run: calls with a deadline to spare
   * (10 s) all succeed; the new control plane's EDS (all three) is
   * applied once the stream is back. */
  runner r = {.ch = ch};
  pthread_t th;
  pthread_create(&th, NULL, run_calls, &r);
  usleep(200000);
  xcp_stop(cp);
  usleep(500000);
  cp = xcp_start_scenario("basic.json", cp_port);
  CHECK(cp != NULL);
  bool back = false;
  for (int i = 0; i < 2000 && cp && !back; i++) {
    if (call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK &&
        backend_of(ans) != 2)
      back = true;
    else
      usleep(10000);
  }
  r.stop = true;
  pthread_join(th, NULL);
  printf("restart: %d calls succeeded, %d failed\n", r.ok, r.failed);
  CHECK(back);
  CHECK(r.failed == 0);
  CHECK(r.ok > 0);

  grit_channel_destroy(ch);
  grit_channel_destroy(ctl);
  xcp_dump_if_failed(cp);
  if (cp)
    xcp_stop(cp);
  xcp_stop(backends);
  CHECK(grit_xdsc_wait_all_freed(10000)); /* the ADS stream's worker */
  grit_default_runtime_shutdown();
  return xcp_exit_status();
}
