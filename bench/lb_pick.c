/*
 * What one LB pick costs (issue 26, SPEC LP-02..LP-04): pick_first,
 * round_robin, weighted_round_robin (with weights from load reports),
 * ring_hash_experimental (a request header hashed per pick) and
 * least_request_experimental, each over N backends whose connections are
 * READY. The backends are in-process HTTP/2 listeners that answer every
 * connection with SETTINGS, one per loopback address 127.0.x.y (Linux
 * routes all of 127/8 to lo) on one port, so N can be 1000 without 1000
 * processes. Prints one line per policy:
 *
 *   RESULT policy=round_robin backends=1000 picks=2000000 ns_per_pick=11.3
 *     ns_per_pick_with_detail=.. us_per_same_update=..
 *
 * us_per_same_update: an update_addresses with the same N addresses in the
 * same order (every connection kept), as an EDS update that changes
 * nothing of 1 000 endpoints but a weight (issue 27).
 *
 *   lb_pick [--backends N] [--picks N] [--policy NAME]
 */
#include "lb/lb.h"

#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the backends: SETTINGS and nothing else ---- */

static const uint8_t settings_frame[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};

typedef struct conn {
  uv_tcp_t tcp;
  uv_write_t w;
} conn;

static unsigned g_accepted;

static void on_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
  static char scratch[65536];
  (void)h;
  (void)sz;
  *buf = uv_buf_init(scratch, sizeof(scratch));
}

static void conn_closed(uv_handle_t *h) {
  free(h->data);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)buf;
  if (n < 0)
    uv_close((uv_handle_t *)s, conn_closed);
}

static void on_written(uv_write_t *w, int status) {
  (void)w;
  (void)status;
}

static void on_conn(uv_stream_t *l, int status) {
  if (status < 0)
    return;
  conn *c = calloc(1, sizeof(*c));
  uv_tcp_init(l->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
    return;
  }
  g_accepted++;
  uv_buf_t b = uv_buf_init((char *)settings_frame, sizeof(settings_frame));
  uv_write(&c->w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---- a policy over N READY backends ---- */

static grit_connectivity_state g_state;
static void on_state(void *ctx, grit_connectivity_state s) {
  (void)ctx;
  g_state = s;
}
static void on_reresolve(void *ctx) {
  (void)ctx;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void spin(uv_loop_t *loop, unsigned rounds) {
  for (unsigned i = 0; i < rounds; i++)
    uv_run(loop, UV_RUN_NOWAIT);
}

static void run_ms(uv_loop_t *loop, uint64_t ms) {
  uint64_t end = uv_now(loop) + ms;
  while (uv_now(loop) < end) {
    uv_run(loop, UV_RUN_NOWAIT);
    uv_update_time(loop);
  }
}

enum { KEYS = 1024 };

static void backend_host(size_t i, char *host, size_t len) {
  snprintf(host, len, "127.0.%zu.%zu", (i + 1) / 250, (i + 1) % 250 + 1);
}

static int bench(uv_loop_t *loop, uint16_t port, const char *name, size_t n,
                 uint64_t picks) {
  const grit_lb_policy_vtable *vt = grit_lb_find(name);
  if (!vt) {
    fprintf(stderr, "lb_pick: unknown policy %s\n", name);
    return 2;
  }
  grit_rng rng;
  grit_rng_seed(&rng, 26);
  grit_subchannel_args a = {.loop = loop,
                            .topts = {.user_agent = "lb_pick"},
                            .rng = &rng,
                            .initial_backoff_ms = 1000,
                            .max_backoff_ms = 120000,
                            .min_connect_timeout_ms = 20000};
  grit_lb_helper h = {on_state, on_reresolve, NULL};
  grit_lb_policy *p = NULL;
  if (vt->create(&a, &h, &p) != GRIT_OK)
    return 1;
  grit_lb_params params;
  grit_lb_params_default(&params);
  params.request_hash_header = "x-key";
  params.wrr.blackout_ms = 0;
  params.wrr.update_ms = 100;
  if (vt->configure && vt->configure(p, &params) != GRIT_OK)
    return 1;
  grit_addr *addrs = calloc(n, sizeof(*addrs));
  for (size_t i = 0; i < n; i++) {
    char host[32];
    backend_host(i, host, sizeof(host));
    grit_addr_from_ip(&addrs[i], host, port);
  }
  if (vt->update_addresses(p, addrs, n, false) != GRIT_OK)
    return 1;
  unsigned before = g_accepted;
  p->vt->exit_idle(p);
  /* Every backend connected (ring_hash connects on demand: a header pick
   * landing on an IDLE endpoint starts it). */
  grit_metadata *md[KEYS];
  for (int k = 0; k < KEYS; k++) {
    char v[32];
    int len = snprintf(v, sizeof(v), "user-%d", k);
    grit_metadata_create(&md[k]);
    grit_metadata_add(md[k], "x-key", v, (size_t)len);
  }
  grit_pick_args pa[KEYS];
  for (int k = 0; k < KEYS; k++)
    pa[k] = (grit_pick_args){.metadata = md[k]};
  size_t want = strcmp(name, "pick_first") == 0 ? 1 : n;
  double deadline = now_ns() + 60e9;
  for (uint64_t i = 0; g_accepted - before < want && now_ns() < deadline; i++) {
    if (vt == &grit_lb_ring_hash)
      p->vt->pick(p, &pa[i % KEYS]);
    uv_run(loop, UV_RUN_NOWAIT);
  }
  spin(loop, 200);
  run_ms(loop, 50);
  /* weighted_round_robin: one report per backend, weights 1..4, then an
   * update period for the scheduler to take them. */
  if (vt == &grit_lb_weighted_round_robin) {
    for (size_t i = 0; i < n; i++) {
      grit_orca_report r = {.cpu_utilization = 0.2 * (double)(1 + i % 4),
                            .rps_fractional = 100};
      p->vt->on_call_result(p, &addrs[i], true, &r);
    }
    run_ms(loop, 250);
  }
  uint64_t ok = 0;
  for (uint64_t i = 0; i < picks / 10; i++) /* warm-up */
    ok += p->vt->pick(p, &pa[i % KEYS]).kind == GRIT_PICK_COMPLETE;
  ok = 0;
  double t0 = now_ns();
  for (uint64_t i = 0; i < picks; i++)
    ok += p->vt->pick(p, &pa[i % KEYS]).kind == GRIT_PICK_COMPLETE;
  double ns = (now_ns() - t0) / (double)picks;
  /* The same with the detail text asked for (an attempt observer). */
  for (int k = 0; k < KEYS; k++)
    pa[k].want_detail = true;
  double t1 = now_ns();
  for (uint64_t i = 0; i < picks; i++)
    ok += p->vt->pick(p, &pa[i % KEYS]).kind == GRIT_PICK_COMPLETE;
  double ns_detail = (now_ns() - t1) / (double)picks;
  ok /= 2;
  const char *detail = p->vt->pick(p, &pa[0]).detail;
  enum { UPDATES = 20 };
  double t2 = now_ns();
  for (int u = 0; u < UPDATES; u++)
    if (p->vt->update_addresses(p, addrs, n, false) != GRIT_OK)
      return 1;
  double us_update = (now_ns() - t2) / UPDATES / 1e3;
  printf("RESULT policy=%s backends=%zu picks=%llu complete=%llu "
         "ns_per_pick=%.1f ns_per_pick_with_detail=%.1f "
         "us_per_same_update=%.1f\n",
         name, n, (unsigned long long)picks, (unsigned long long)ok, ns,
         ns_detail, us_update);
  if (detail)
    printf("  e.g. %s\n", detail);
  fflush(stdout);
  p->vt->destroy(p);
  spin(loop, 200);
  for (int k = 0; k < KEYS; k++)
    grit_metadata_destroy(md[k]);
  free(addrs);
  return ok == picks ? 0 : 1;
}

int main(int argc, char **argv) {
  size_t n = 3;
  uint64_t picks = 2000000;
  const char *only = NULL;
  static const struct option opts[] = {{"backends", required_argument, 0, 'n'},
                                       {"picks", required_argument, 0, 'p'},
                                       {"policy", required_argument, 0, 'P'},
                                       {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    if (c == 'n')
      n = strtoul(optarg, NULL, 10);
    else if (c == 'p')
      picks = strtoull(optarg, NULL, 10);
    else if (c == 'P')
      only = optarg;
    else {
      fprintf(stderr, "usage: lb_pick [--backends N] [--picks N] "
                      "[--policy NAME]\n");
      return 2;
    }
  }
  if (n < 1 || n > 60000) {
    fprintf(stderr, "lb_pick: --backends 1..60000\n");
    return 2;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  uv_tcp_t *listeners = calloc(n, sizeof(*listeners));
  uint16_t port = 0;
  for (size_t i = 0; i < n; i++) {
    char host[32];
    backend_host(i, host, sizeof(host));
    struct sockaddr_in sin;
    uv_ip4_addr(host, port, &sin);
    uv_tcp_init(&loop, &listeners[i]);
    if (uv_tcp_bind(&listeners[i], (const struct sockaddr *)&sin, 0) != 0 ||
        uv_listen((uv_stream_t *)&listeners[i], 256, on_conn) != 0) {
      fprintf(stderr, "lb_pick: cannot listen on %s:%u\n", host, port);
      return 1;
    }
    if (i == 0) {
      struct sockaddr_storage ss;
      int len = sizeof(ss);
      uv_tcp_getsockname(&listeners[0], (struct sockaddr *)&ss, &len);
      port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
  }
  static const char *const all[] = {
      "pick_first", "round_robin", "weighted_round_robin",
      "ring_hash_experimental", "least_request_experimental"};
  int rv = 0;
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    if (!only || strcmp(only, all[i]) == 0)
      rv |= bench(&loop, port, all[i], n, picks);
  }
  return rv;
}
