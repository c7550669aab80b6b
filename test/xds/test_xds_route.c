/* The per-call xDS route choice against the test control plane
 * (test/xds/routes.json) with grpcio backends (issue 27; SPEC XD-02;
 * gRFC A28, A44): a header-matched route sends calls with the header to
 * cluster cb (backend b1) and the rest to ca (b0); weighted_clusters 80/20
 * over ca and cb puts 0.8 +- 0.05 of 1 000 calls on ca; a path
 * with no route and a non-forwarding route fail UNAVAILABLE with
 * grpc-core's messages; a route with a retry policy (retry_on unavailable,
 * num_retries 2) retries a call the backend (test/peers/retry_server.py)
 * fails once and gives up after 3 attempts, and a route without one does
 * not retry; max_stream_duration (and grpc_timeout_header_max over it, A31)
 * caps a call's deadline; a route config no longer naming cb and cslow
 * makes the client drop its CDS watch of cb at once but of cslow only when
 * the call that chose cslow ends, and calls with the header go to ca. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grit/grit.h"
#include "test/xds/cp.h"
#include "xdsclient/xdsclient.h"

/* One unary call with the metadata pairs |kv| (NULL-terminated key,
 * value list; NULL: none); its answer into |out| and its status message
 * into |msg|. */
static grit_status_code call(grit_channel *ch, const char *method,
                             const char *req, const char *const *kv, char *out,
                             size_t size, char *msg, size_t msg_size) {
  grit_metadata *md = NULL;
  if (grit_metadata_create(&md) != GRIT_OK)
    return GRIT_STATUS_INTERNAL;
  for (size_t i = 0; kv && kv[i]; i += 2)
    grit_metadata_add(md, kv[i], kv[i + 1], strlen(kv[i + 1]));
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = 20000,
                      .metadata = md,
                      .wait_for_ready = GRIT_WFR_ON};
  grit_status st = {0};
  grit_bytes resp = {0};
  grit_err e =
      grit_unary_call(ch, method, req, strlen(req), &o, &resp, &st, NULL);
  grit_metadata_destroy(md);
  if (e != GRIT_OK)
    return GRIT_STATUS_INTERNAL;
  if (out)
    snprintf(out, size, "%.*s", (int)resp.len,
             resp.data ? (const char *)resp.data : "");
  if (msg)
    snprintf(msg, msg_size, "%s", st.message ? st.message : "");
  grit_bytes_free(&resp);
  grit_status_code code = st.code;
  grit_status_free(&st);
  return code;
}

/* |n| calls of /lb.Svc/Call with |k|: |v| (NULL: none); how many each of
 * b0, b1 answered, and how many failed. */
static void run_lb(grit_channel *ch, int n, const char *k, const char *v,
                   int count[2], int *failed) {
  count[0] = count[1] = 0;
  *failed = 0;
  for (int i = 0; i < n; i++) {
    char ans[32], msg[256];
    const char *kv[] = {k, v, NULL};
    if (call(ch, "/lb.Svc/Call", "", k ? kv : NULL, ans, sizeof(ans), msg,
             sizeof(msg)) != GRIT_STATUS_OK) {
      fprintf(stderr, "call failed: %s\n", msg);
      ++*failed;
    } else if (strcmp(ans, "b0") == 0) {
      count[0]++;
    } else if (strcmp(ans, "b1") == 0) {
      count[1]++;
    } else {
      ++*failed;
    }
  }
}

/* The attempts the retry server saw for |key| (lines of its Log). */
static int attempts_of(grit_channel *ch, const char *key) {
  char log[512];
  if (call(ch, "/retry.Svc/Log", key, NULL, log, sizeof(log), NULL, 0) !=
      GRIT_STATUS_OK)
    return -1;
  int n = 0;
  for (const char *p = log; *p; p++)
    n += *p == '\n';
  return n;
}

/* Within 10 s, the first CDS request after log line |from| whose names
 * lack |gone|; its index, or -1. */
static int cds_without(xcp *cp, int from, const char *gone) {
  uint64_t t0 = xcp_now_ms();
  char quoted[32];
  snprintf(quoted, sizeof(quoted), "\"%s\"", gone);
  while (xcp_now_ms() - t0 < 10000) {
    for (int i = from; i < xcp_nlines(cp); i++) {
      const char *l = xcp_line(cp, i);
      if (strstr(l, "\"event\":\"request\"") &&
          strstr(l, "envoy.config.cluster.v3.Cluster") && !strstr(l, quoted))
        return i;
    }
    usleep(20000);
  }
  return -1;
}

/* A listening socket nobody accepts on: a connection to it never gets
 * HTTP/2 settings, so calls routed there wait. Its port, or -1. */
static int dead_listener(int *fd) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  if (*fd < 0 || bind(*fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      listen(*fd, 64) != 0 ||
      getsockname(*fd, (struct sockaddr *)&a, &len) != 0)
    return -1;
  return ntohs(a.sin_port);
}

/* A call held on cslow (no cap) until its own 8 s deadline. */
typedef struct held {
  grit_channel *ch;
  grit_status_code code;
} held;

static void *hold_call(void *arg) {
  held *h = arg;
  grit_metadata *md = NULL;
  grit_metadata_create(&md);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = 8000,
                      .metadata = md,
                      .wait_for_ready = GRIT_WFR_ON};
  grit_status st = {0};
  grit_bytes resp = {0};
  if (grit_unary_call(h->ch, "/slow.Svc/Hold", "", 0, &o, &resp, &st, NULL) ==
      GRIT_OK)
    h->code = st.code;
  grit_metadata_destroy(md);
  grit_bytes_free(&resp);
  grit_status_free(&st);
  return NULL;
}

static uint64_t calls_started(grit_channel *ch) {
  grit_channel_stats st = GRIT_CHANNEL_STATS_INIT;
  grit_channel_get_stats(ch, &st);
  return st.calls_started;
}

int main(void) {
  const char *src = getenv("XDS_SCENARIOS");
  char rscript[1024];
  snprintf(rscript, sizeof(rscript), "%s/../peers/retry_server.py", src);
  char *const rargv[] = {(char *)"/usr/bin/python3", rscript, NULL};
  xcp *backends = xcp_backends_start();
  xcp *retry = xcp_spawn(rargv);
  if (!backends || !retry) {
    fprintf(stderr, "cannot start the grpcio backends\n");
    return 1;
  }
  char buf[16];
  grit_channel *ctl = NULL;
  CHECK(xcp_backends_ports(backends, &ctl) == 3);
  snprintf(buf, sizeof(buf), "%d", xcp_port(retry));
  setenv("R", buf, 1);
  int dead_fd;
  int dead = dead_listener(&dead_fd);
  CHECK(dead > 0);
  snprintf(buf, sizeof(buf), "%d", dead);
  setenv("DEAD", buf, 1);
  xcp *cp = xcp_start_scenario("routes.json", 0);
  if (!cp)
    return 1;
  grit_channel *ch = xcp_xds_channel("grit-xds-route-test", xcp_port(cp));
  if (!ch)
    return 1;

  /* Header routing (A28): x-cluster: b -> cb (b1), anything else -> ca. */
  int count[2], failed;
  run_lb(ch, 50, "x-cluster", "b", count, &failed);
  printf("x-cluster: b: b0 %d, b1 %d, failed %d\n", count[0], count[1], failed);
  CHECK(count[1] == 50);
  run_lb(ch, 50, "x-cluster", "c", count, &failed);
  printf("x-cluster: c: b0 %d, b1 %d, failed %d\n", count[0], count[1], failed);
  CHECK(count[0] == 50);
  run_lb(ch, 50, NULL, NULL, count, &failed);
  CHECK(count[0] == 50);

  /* weighted_clusters 80/20: 1 000 calls; issue 27's bar is 0.8 +- 0.05,
   * so b1 (the 20 % side) takes [150, 250]. b1's count is binomial(1000,
   * 0.2): mean 200, sigma 12.6, the bounds 3.95 sigma; a correct client
   * fails this with probability 6.9e-5 per run (exact binomial tails). */
  run_lb(ch, 1000, "x-split", "1", count, &failed);
  printf("weighted 80/20: b0 %d, b1 %d, failed %d\n", count[0], count[1],
         failed);
  CHECK(failed == 0);
  CHECK(count[0] + count[1] == 1000);
  CHECK(count[1] >= 150 && count[1] <= 250);

  /* A42 end to end: a route's hash_policy (header x-user) over a
   * RING_HASH cluster of b0 and b1: every call of one user goes to one
   * backend, and 20 users use both (all on one side: p = 2^-19). */
  int users[2] = {0, 0}, split_users = 0;
  for (int u = 0; u < 20; u++) {
    char user[8];
    snprintf(user, sizeof(user), "u%d", u);
    run_lb(ch, 5, "x-user", user, count, &failed);
    CHECK(failed == 0);
    if (count[0] == 5)
      users[0]++;
    else if (count[1] == 5)
      users[1]++;
    else
      split_users++;
  }
  printf("ring_hash by x-user: %d users on b0, %d on b1, %d split\n", users[0],
         users[1], split_users);
  CHECK(split_users == 0);
  CHECK(users[0] > 0 && users[1] > 0);

  /* No route, and a non-forwarding route: UNAVAILABLE (grpc-core's
   * messages). */
  char msg[256];
  CHECK(call(ch, "/other.Svc/Call", "", NULL, NULL, 0, msg, sizeof(msg)) ==
        GRIT_STATUS_UNAVAILABLE);
  printf("no route: %s\n", msg);
  CHECK(strcmp(msg, "No matching route found in xDS route config") == 0);
  CHECK(call(ch, "/nf.Svc/Call", "", NULL, NULL, 0, msg, sizeof(msg)) ==
        GRIT_STATUS_UNAVAILABLE);
  printf("non-forwarding: %s\n", msg);
  CHECK(strcmp(msg, "Matching route has inappropriate action") == 0);

  /* A44: the route with retry_policy retries UNAVAILABLE (the server fails
   * the first attempt: 2 attempts, OK); 3 attempts at most (num_retries
   * 2); the route without one makes one attempt. */
  const char *retry1[] = {"x-retry",    "1",  "x-fail", "1",
                          "x-call-key", "r1", NULL};
  CHECK(call(ch, "/retry.Svc/Call", "x", retry1, NULL, 0, msg, sizeof(msg)) ==
        GRIT_STATUS_OK);
  int n1 = attempts_of(ch, "r1");
  const char *retry5[] = {"x-retry",    "1",  "x-fail", "5",
                          "x-call-key", "r5", NULL};
  CHECK(call(ch, "/retry.Svc/Call", "x", retry5, NULL, 0, msg, sizeof(msg)) ==
        GRIT_STATUS_UNAVAILABLE);
  int n5 = attempts_of(ch, "r5");
  const char *plain[] = {"x-fail", "1", "x-call-key", "p1", NULL};
  CHECK(call(ch, "/retry.Svc/Call", "x", plain, NULL, 0, msg, sizeof(msg)) ==
        GRIT_STATUS_UNAVAILABLE);
  int np = attempts_of(ch, "p1");
  printf("retry route: 1 failure -> %d attempts, 5 failures -> %d attempts; "
         "plain route: %d attempt (%s)\n",
         n1, n5, np, msg);
  CHECK(n1 == 2);
  CHECK(n5 == 3);
  CHECK(np == 1);

  /* A31: max_stream_duration 300 ms caps a call whose own deadline is 20 s
   * (the cluster never becomes usable); grpc_timeout_header_max 300 ms wins
   * over max_stream_duration 60 s. */
  const char *paths[] = {"/slow.Svc/Cap", "/slow.Svc/HeaderMax"};
  for (int i = 0; i < 2; i++) {
    uint64_t t0 = xcp_now_ms();
    grit_status_code code =
        call(ch, paths[i], "", NULL, NULL, 0, msg, sizeof(msg));
    uint64_t took = xcp_now_ms() - t0;
    printf("%s: %s after %llu ms\n", paths[i], grit_status_code_name(code),
           (unsigned long long)took);
    CHECK(code == GRIT_STATUS_DEADLINE_EXCEEDED);
    CHECK(took >= 290 && took < 15000);
  }

  /* A route config no longer naming cb and cslow: the client stops
   * watching cb at once, but cslow only once the call that chose it ends
   * (grpc-core keeps a cluster while a call uses it); x-cluster: b then
   * goes to ca. */
  held h = {.ch = ch, .code = GRIT_STATUS_OK};
  uint64_t held_t0 = xcp_now_ms();
  uint64_t before = calls_started(ch);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, hold_call, &h) == 0);
  for (int i = 0; i < 1000 && calls_started(ch) == before; i++)
    usleep(10000); /* started on the loop: its route is chosen */
  int mark = xcp_nlines(cp);
  xcp_cmd(cp, "update drop_cb");
  int no_cb = cds_without(cp, mark, "cb");
  CHECK(no_cb >= 0);
  if (no_cb >= 0) {
    printf("after the update: %s\n", xcp_line(cp, no_cb));
    CHECK(strstr(xcp_line(cp, no_cb), "\"cslow\"") != NULL);
  }
  pthread_join(th, NULL);
  printf("held call: %s after %llu ms\n", grit_status_code_name(h.code),
         (unsigned long long)(xcp_now_ms() - held_t0));
  CHECK(h.code == GRIT_STATUS_DEADLINE_EXCEEDED);
  int no_slow = cds_without(cp, no_cb >= 0 ? no_cb : mark, "cslow");
  CHECK(no_slow >= 0);
  if (no_slow >= 0)
    printf("after the held call ended: %s\n", xcp_line(cp, no_slow));
  run_lb(ch, 20, "x-cluster", "b", count, &failed);
  printf("after drop_cb: x-cluster: b: b0 %d, b1 %d, failed %d\n", count[0],
         count[1], failed);
  CHECK(count[0] == 20);
  xcp_dump_if_failed(cp);
  grit_channel_destroy(ch);
  grit_channel_destroy(ctl);
  xcp_stop(cp);
  xcp_stop(retry);
  xcp_stop(backends);
  close(dead_fd);
  CHECK(grit_xdsc_wait_all_freed(10000)); /* the ADS stream's worker */
  grit_default_runtime_shutdown();
  return xcp_exit_status();
}
