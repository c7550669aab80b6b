/* The xDS cluster policies end to end (issue 27; SPEC XD-03; gRFCs A27,
 * A32, A56): grit_channel_create("xds:///svc") against the test control
 * plane on @grpc/grpc-js (test/xds/cluster.json) and three grpcio
 * backends (test/peers/health_server.py):
 *  - locality weights 3:1 (b0:b1) split 1000 calls within 6-sigma
 *    binomial bounds;
 *  - circuit_breakers max_requests 2: of 4 calls held by the backends at
 *    once, 2 are served and 2 fail UNAVAILABLE at once (not queued);
 *  - drop_overloads 50 %: 1000 calls dropped within 6-sigma bounds, each
 *    dropped call UNAVAILABLE "dropped by xDS drop config", wait-for-ready
 *    or not;
 *  - priority 0 on a listener that never answers (TCP accepted by the
 *    kernel, no HTTP/2 SETTINGS): calls go to priority 1 once the 10 s
 *    failover timer fires, not before; priority 0 back on a live backend
 *    takes the calls back;
 *  - a LOGICAL_DNS cluster naming localhost is resolved by grit's DNS
 *    resolver and served;
 *  - outlier detection from CDS over a priority's two localities ejects
 *    the backend that fails every call. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "grit/grit.h"
#include "test/xds/cp.h"
#include "xdsclient/xdsclient.h"

/* One unary call: its status, the answer ("b0".."b2") into |out| and the
 * status message into |msg|. */
static grit_status_code call_msg(grit_channel *ch, const char *method,
                                 uint64_t timeout_ms, char *out, size_t size,
                                 char *msg, size_t msize) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms,
                      .wait_for_ready = GRIT_WFR_ON};
  grit_status st = {0};
  grit_bytes resp = {0};
  out[0] = '\0';
  if (msg)
    msg[0] = '\0';
  grit_err e = grit_unary_call(ch, method, "", 0, &o, &resp, &st, NULL);
  if (e != GRIT_OK)
    return GRIT_STATUS_INTERNAL;
  snprintf(out, size, "%.*s", (int)resp.len,
           resp.data ? (const char *)resp.data : "");
  if (msg)
    snprintf(msg, msize, "%s", st.message ? st.message : "");
  grit_bytes_free(&resp);
  grit_status_code code = st.code;
  grit_status_free(&st);
  return code;
}

static grit_status_code call(grit_channel *ch, const char *method,
                             uint64_t timeout_ms, char *out, size_t size) {
  return call_msg(ch, method, timeout_ms, out, size, NULL, 0);
}

static int backend_of(const char *answer) {
  return answer[0] == 'b' ? atoi(answer + 1) : -1;
}

/* Within 10 s, |n| calls in a row answered by backends in |mask|. */
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

/* A call held by the backend until released. */
typedef struct held {
  grit_channel *ch;
  grit_status_code code;
  char ans[32], msg[256];
  volatile bool done;
} held;

static void *hold_call(void *arg) {
  held *h = arg;
  h->code = call_msg(h->ch, "/lb.Svc/Hold", 20000, h->ans, sizeof(h->ans),
                     h->msg, sizeof(h->msg));
  h->done = true;
  return NULL;
}

/* A listener nobody accepts on: connects complete in the kernel and no
 * HTTP/2 SETTINGS ever come, so a subchannel stays CONNECTING. */
static int blackhole(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

int main(void) {
  xcp *backends = xcp_backends_start();
  if (!backends)
    return 1;
  grit_channel *ctl = NULL;
  CHECK(xcp_backends_ports(backends, &ctl) == 3);
  char buf[16];
  int bh_port = 0;
  int bh = blackhole(&bh_port);
  CHECK(bh >= 0);
  snprintf(buf, sizeof(buf), "%d", bh_port);
  setenv("BH", buf, 1);
  xcp *cp = xcp_start_scenario("cluster.json", 0);
  if (!cp)
    return 1;
  grit_channel *ch = xcp_xds_channel("grit-xds-cluster-test", xcp_port(cp));
  if (!ch)
    return 1;

  /* Locality weights 3:1: both localities READY first (only READY ones
   * count), then 1000 calls. */
  char ans[32], msg[256];
  bool seen[2] = {false, false};
  for (int i = 0; i < 500 && !(seen[0] && seen[1]); i++)
    if (call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK) {
      int b = backend_of(ans);
      if (b == 0 || b == 1)
        seen[b] = true;
    }
  CHECK(seen[0] && seen[1]);
  const int n = 1000;
  int count[3] = {0, 0, 0}, bad = 0;
  for (int i = 0; i < n; i++) {
    int b = -1;
    if (call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) == GRIT_STATUS_OK)
      b = backend_of(ans);
    if (b >= 0 && b < 3)
      count[b]++;
    else
      bad++;
  }
  double sd = sqrt(n * 0.75 * 0.25);
  printf("locality weights 3:1 over %d calls: b0 %d, b1 %d (expected %.0f "
         "+- %.0f), failed %d\n",
         n, count[0], count[1], n * 0.75, 6 * sd, bad);
  CHECK(bad == 0 && count[2] == 0);
  CHECK(fabs(count[0] - n * 0.75) < 6 * sd);

  /* max_requests 2 (A32): 4 calls held at once; 2 reach the backends, 2
   * fail at once. */
  held h[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    h[i] = (held){.ch = ch};
    pthread_create(&th[i], NULL, hold_call, &h[i]);
  }
  uint64_t t0 = xcp_now_ms();
  int done = 0;
  while (xcp_now_ms() - t0 < 15000) {
    done = 0;
    for (int i = 0; i < 4; i++)
      done += h[i].done;
    if (done >= 2)
      break;
    usleep(10000);
  }
  char heldn[16] = "";
  for (int i = 0; i < 500; i++) { /* the backends hold the other two */
    CHECK(call(ctl, "/ctl.Ctl/Held", 10000, heldn, sizeof(heldn)) ==
          GRIT_STATUS_OK);
    if (atoi(heldn) >= 2)
      break;
    usleep(10000);
  }
  usleep(200000); /* a third call reaching a backend would show by now */
  CHECK(call(ctl, "/ctl.Ctl/Held", 10000, heldn, sizeof(heldn)) ==
        GRIT_STATUS_OK);
  int held_now = atoi(heldn);
  CHECK(call(ctl, "/ctl.Ctl/Release", 10000, ans, sizeof(ans)) ==
        GRIT_STATUS_OK);
  int ok = 0, cb = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    if (h[i].code == GRIT_STATUS_OK)
      ok++;
    else if (h[i].code == GRIT_STATUS_UNAVAILABLE &&
             strstr(h[i].msg, "circuit breaker"))
      cb++;
    else
      fprintf(stderr, "held call: %d %s\n", (int)h[i].code, h[i].msg);
  }
  printf("max_requests 2, 4 calls held: %d failed at once, %d held by the "
         "backends, %d served, %d failed by the circuit breaker\n",
         done, held_now, ok, cb);
  CHECK(done == 2);
  CHECK(held_now == 2);
  CHECK(ok == 2 && cb == 2);

  /* drop_overloads 50 %. */
  xcp_cmd(cp, "update drops");
  bool dropping = false;
  t0 = xcp_now_ms();
  while (!dropping && xcp_now_ms() - t0 < 10000)
    dropping = call_msg(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans), msg,
                        sizeof(msg)) == GRIT_STATUS_UNAVAILABLE &&
               strstr(msg, "dropped by xDS drop config");
  CHECK(dropping);
  int dropped = 0, served = 0;
  char drop_msg[256] = "";
  for (int i = 0; i < n; i++) {
    grit_status_code c =
        call_msg(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans), msg, sizeof(msg));
    if (c == GRIT_STATUS_OK)
      served++;
    else if (c == GRIT_STATUS_UNAVAILABLE &&
             strstr(msg, "dropped by xDS drop config") &&
             strstr(msg, "category lb")) {
      dropped++;
      snprintf(drop_msg, sizeof(drop_msg), "%s", msg);
    } else
      fprintf(stderr, "call: %d %s\n", (int)c, msg);
  }
  sd = sqrt(n * 0.5 * 0.5);
  printf("drop_overloads 50 %% over %d calls: %d dropped (expected %d +- "
         "%.0f), %d served; a dropped call: UNAVAILABLE \"%s\"\n",
         n, dropped, n / 2, 6 * sd, served, drop_msg);
  CHECK(dropped + served == n);
  CHECK(fabs(dropped - n * 0.5) < 6 * sd);

  /* Priority failover (A56): priority 0 never becomes READY, so priority 1
   * takes the calls once the 10 s timer fires, not before. */
  xcp_cmd(cp, "update failover");
  t0 = xcp_now_ms();
  int b = -1;
  while (b != 2 && xcp_now_ms() - t0 < 30000) {
    if (call(ch, "/lb.Svc/Call", 30000, ans, sizeof(ans)) == GRIT_STATUS_OK)
      b = backend_of(ans);
  }
  uint64_t took = xcp_now_ms() - t0;
  printf("priority 0 never connecting: calls on priority 1 after %llu ms\n",
         (unsigned long long)took);
  CHECK(b == 2);
  CHECK(took >= 9000 && took < 30000);
  CHECK(run_on(ch, 4, 20));
  /* Priority 0 on a live backend takes back. */
  xcp_cmd(cp, "update p0_back");
  CHECK(run_on(ch, 1, 20));
  /* Outlier detection from CDS (A50) over the priority's two localities:
   * b1 failing every call is ejected (failure percentage, 1 s interval)
   * and the calls go to b0 alone. */
  grit_call_opts so = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 10000};
  grit_bytes sr = {0};
  grit_status sst = {0};
  CHECK(grit_unary_call(ctl, "/ctl.Ctl/Set", "1 fail", 6, &so, &sr, &sst,
                        NULL) == GRIT_OK &&
        sst.code == GRIT_STATUS_OK);
  grit_bytes_free(&sr);
  grit_status_free(&sst);
  xcp_cmd(cp, "update outlier");
  t0 = xcp_now_ms();
  bool ejected = false;
  int failed_b1 = 0;
  /* In force once b1 takes calls (and fails them). */
  while (failed_b1 == 0 && xcp_now_ms() - t0 < 10000)
    failed_b1 += call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans)) ==
                 GRIT_STATUS_UNAVAILABLE;
  CHECK(failed_b1 > 0);
  while (failed_b1 > 0 && !ejected && xcp_now_ms() - t0 < 20000) {
    int run = 0;
    for (int i = 0; i < 20; i++) {
      grit_status_code c = call(ch, "/lb.Svc/Call", 10000, ans, sizeof(ans));
      if (c == GRIT_STATUS_OK && backend_of(ans) == 0)
        run++;
      else if (c == GRIT_STATUS_UNAVAILABLE)
        failed_b1++;
    }
    ejected = run == 20;
  }
  printf("outlier detection: b1 failing, ejected after %llu ms and %d failed "
         "calls; 20 calls in a row on b0\n",
         (unsigned long long)(xcp_now_ms() - t0), failed_b1);
  CHECK(ejected);
  /* A LOGICAL_DNS cluster: "localhost" resolved by grit's DNS resolver
   * (c-ares), pick_first over its addresses (b2 listens on 127.0.0.1). */
  xcp_cmd(cp, "update logical_dns");
  CHECK(run_on(ch, 4, 20));
  printf("LOGICAL_DNS localhost:%s: 20 calls in a row on b2\n",
         getenv("B2") ? getenv("B2") : "?");

  grit_channel_destroy(ch);
  grit_channel_destroy(ctl);
  xcp_dump_if_failed(cp);
  xcp_stop(cp);
  xcp_stop(backends);
  close(bh);
  CHECK(grit_xdsc_wait_all_freed(10000));
  grit_default_runtime_shutdown();
  return xcp_exit_status();
}
