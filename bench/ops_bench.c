/* Figures of the operator's view (issue 28; SPEC OP-01, OP-03):
 *
 *   ops_bench exposition N     N targets attempted, one call's worth of
 *                              series each (attempt started, attempt and
 *                              call duration, sent and received sizes, as
 *                              an OK unary call records them): exposition
 *                              size and render time (median of 9) with the
 *                              default bound (100 targets, then "other")
 *                              and with the bound lifted to N.
 *   ops_bench admin TARGET N   N channels to TARGET (a gRPC server), one
 *                              EmptyCall each, the admin endpoint on
 *                              127.0.0.1: time of GET /metrics and GET
 *                              /channelz over one keep-alive connection
 *                              (median and p90 of 200), and their sizes.
 *
 * Prints one line per figure. Timing only: no pass/fail.
 */
#include <grit/grit.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "observe/observe.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void exposition_round(size_t n, size_t bound) {
  grit_obs_release();
  grit_obs_set_max_targets(bound);
  for (size_t i = 0; i < n; i++) {
    char t[64];
    snprintf(t, sizeof(t), "dns:///backend-%zu.example:443", i);
    grit_obs_method *m =
        grit_obs_method_get(grit_obs_target_get(t), "pkg.Svc/Method");
    grit_obs_target_add(grit_obs_target_get(t), GRIT_OBS_CHANNELS_CREATED, 1);
    grit_obs_add(m, GRIT_OBS_ATTEMPT_STARTED, 1);
    grit_obs_record(m, GRIT_OBS_ATTEMPT_DURATION, 0, 350);
    grit_obs_record(m, GRIT_OBS_ATTEMPT_SENT_SIZE, 0, 12);
    grit_obs_record(m, GRIT_OBS_ATTEMPT_RCVD_SIZE, 0, 30);
    grit_obs_record(m, GRIT_OBS_CALL_DURATION, 0, 420);
  }
  uint64_t t[9];
  size_t size = 0;
  for (int r = 0; r < 9; r++) {
    grit_buf b;
    grit_buf_init(&b);
    uint64_t t0 = now_ns();
    grit_obs_write_prometheus(NULL, &b);
    t[r] = now_ns() - t0;
    size = b.len;
    grit_buf_free(&b);
  }
  qsort(t, 9, sizeof(t[0]), cmp_u64);
  printf("exposition targets_attempted=%zu bound=%zu bytes=%zu "
         "render_ms_median=%.3f\n",
         n, bound, size, (double)t[4] / 1e6);
}

/* One GET over |fd| (keep-alive): the body's length, or 0 on error. */
static size_t get(int fd, const char *path) {
  char req[128];
  int n =
      snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
  if (send(fd, req, (size_t)n, 0) != n)
    return 0;
  static char buf[1 << 22];
  size_t have = 0, need = 0, head = 0;
  for (;;) {
    ssize_t r = recv(fd, buf + have, sizeof(buf) - have, 0);
    if (r <= 0)
      return 0;
    have += (size_t)r;
    if (!head) {
      char *e = memmem(buf, have, "\r\n\r\n", 4);
      if (!e)
        continue;
      head = (size_t)(e - buf) + 4;
      char *cl = memmem(buf, head, "Content-Length: ", 16);
      if (!cl)
        return 0;
      need = head + strtoull(cl + 16, NULL, 10);
    }
    if (have >= need)
      return need - head;
  }
}

static int admin_bench(const char *target, int n) {
  grit_channel **chs = calloc((size_t)n, sizeof(*chs));
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 5000};
  grit_metrics_register_method("/grpc.testing.TestService/EmptyCall");
  for (int i = 0; i < n; i++) {
    if (grit_channel_create(NULL, target, NULL, NULL, &chs[i]) != GRIT_OK)
      return 1;
    grit_status st = {0};
    grit_unary_call(chs[i], "/grpc.testing.TestService/EmptyCall", "", 0, &o,
                    NULL, &st, NULL);
    grit_status_free(&st);
  }
  grit_admin *a = NULL;
  if (grit_admin_start(NULL, 0, 0, NULL, &a) != GRIT_OK)
    return 1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons(grit_admin_port(a)),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
    return 1;
  static const char *const paths[] = {"/metrics", "/channelz"};
  for (int p = 0; p < 2; p++) {
    uint64_t t[200];
    size_t len = 0;
    for (int r = 0; r < 200; r++) {
      uint64_t t0 = now_ns();
      len = get(fd, paths[p]);
      t[r] = now_ns() - t0;
    }
    qsort(t, 200, sizeof(t[0]), cmp_u64);
    printf("admin channels=%d path=%s bytes=%zu scrape_ms_median=%.3f "
           "p90=%.3f\n",
           n, paths[p], len, (double)t[100] / 1e6, (double)t[180] / 1e6);
  }
  close(fd);
  grit_admin_stop(a);
  for (int i = 0; i < n; i++)
    grit_channel_destroy(chs[i]);
  free(chs);
  grit_default_runtime_shutdown();
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "exposition") == 0) {
    size_t n = strtoul(argv[2], NULL, 10);
    exposition_round(n, 100);
    exposition_round(n, n);
    grit_obs_release();
    return 0;
  }
  if (argc == 4 && strcmp(argv[1], "admin") == 0)
    return admin_bench(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: ops_bench exposition N | admin TARGET N\n");
  return 2;
}
