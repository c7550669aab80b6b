/*
 * xds_bench: the figures of docs/xds.md "Performance" (issue 27), run by
 * bench/xds-cost. Linked with xdsclient/ as the tests link it (a static
 * library outside libgrit for now), and with
 * -Wl,--wrap=grit_channel_ext_result so the moment the xds resolver's
 * result is in force in the channel can be stamped without touching the
 * library.
 *
 *   xds_bench --decode N [--iters R]
 *       Unit level (xds/, no I/O): a ClusterLoadAssignment of N endpoints
 *       (one locality, 127.0.x.y addresses) decoded R times
 *       (decode_once), and the same as a DiscoveryResponse applied R
 *       times by the ADS machine with a watcher (apply_once: unwrap,
 *       decode, validate, replace the cached resource, notify, ACK; two
 *       contents alternate so each is a change). Prints
 *       RESULT what=decode endpoints=N wire_bytes=.. us_per_op=..
 *         heap_bytes=.. (grit's live heap holding one decoded resource)
 *       RESULT what=ads_apply endpoints=N wire_bytes=.. us_per_op=..
 *   xds_bench --target T --calls N [--warmup W] [--concurrency C]
 *       [--method M]
 *       Unary calls with an empty request, C in flight
 *       (grit_unary_call_async), after W warmup calls; T may be xds:///
 *       (GRPC_XDS_BOOTSTRAP names the bootstrap). Prints
 *       RESULT what=calls target=T calls=N ok=.. qps=.. cpu_s=..
 *         cpu_us_per_call=..
 *   xds_bench --target xds:///NAME --watch [--count-heap]
 *       Creates the channel, makes one call, then prints one line each time
 *       the xds resolver's result has been applied by the channel, until
 *       stdin closes:
 *       STATE n=<addresses> t_ms=<CLOCK_REALTIME ms when in force>
 *         apply_us=<the channel applying it: LB policy update included>
 *         heap=<grit's live heap bytes then, -1 without --count-heap>
 *         rss_kib=<the process's resident set then> error=<its error>
 *       --count-heap counts grit's heap through grit_set_allocator (its
 *       calloc then clears every block, which libc's may skip: time
 *       figures are taken without it). --decode always counts.
 */
#include "channel/channel.h"
#include "lb/lb.h"
#include "xds/ads.h"
#include "xdsclient/xdsclient.h"

#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * grit's heap, counted (a 16-byte header holds the size).
 */
static atomic_llong g_live;
static bool g_counting;

static void *ca_malloc(size_t size, void *ud) {
  (void)ud;
  size_t *p = malloc(size + 16);
  if (!p)
    return NULL;
  p[0] = size;
  atomic_fetch_add_explicit(&g_live, (long long)size, memory_order_relaxed);
  return (char *)p + 16;
}

static void ca_free(void *ptr, void *ud) {
  (void)ud;
  if (!ptr)
    return;
  size_t *p = (size_t *)((char *)ptr - 16);
  atomic_fetch_sub_explicit(&g_live, (long long)p[0], memory_order_relaxed);
  free(p);
}

static void *ca_calloc(size_t n, size_t size, void *ud) {
  if (size && n > SIZE_MAX / 2 / size)
    return NULL;
  void *p = ca_malloc(n * size, ud);
  if (p)
    memset(p, 0, n * size);
  return p;
}

static void *ca_realloc(void *ptr, size_t size, void *ud) {
  if (!ptr)
    return ca_malloc(size, ud);
  size_t *old = (size_t *)((char *)ptr - 16);
  size_t oldsize = old[0];
  size_t *p = realloc(old, size + 16);
  if (!p)
    return NULL;
  p[0] = size;
  atomic_fetch_add_explicit(&g_live, (long long)size - (long long)oldsize,
                            memory_order_relaxed);
  return (char *)p + 16;
}

static const grit_allocator counting = {
    .malloc = ca_malloc,
    .free = ca_free,
    .calloc = ca_calloc,
    .realloc = ca_realloc,
};

static double mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The resident set now (/proc/self/statm), KiB; -1 when unreadable. */
static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &res) != 2)
      res = -1;
    fclose(f);
  }
  return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ------------------------------------------------------------------------
 * A protobuf writer (bottom-up), for the unit-level figures.
 */
typedef struct pw {
  uint8_t *b;
  size_t n, cap;
} pw;

static void pw_raw(pw *w, const void *p, size_t n) {
  if (w->n + n > w->cap) {
    w->cap = (w->n + n) * 2 + 64;
    w->b = realloc(w->b, w->cap);
    if (!w->b) {
      perror("xds_bench");
      exit(1);
    }
  }
  memcpy(w->b + w->n, p, n);
  w->n += n;
}

static void pw_uvarint(pw *w, uint64_t v) {
  uint8_t buf[10];
  size_t n = 0;
  do {
    buf[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      buf[n] |= 0x80;
    n++;
  } while (v);
  pw_raw(w, buf, n);
}

static void pw_varint(pw *w, uint32_t field, uint64_t v) {
  pw_uvarint(w, (uint64_t)field << 3);
  pw_uvarint(w, v);
}

static void pw_bytes(pw *w, uint32_t field, const void *p, size_t n) {
  pw_uvarint(w, (uint64_t)field << 3 | 2);
  pw_uvarint(w, n);
  if (n)
    pw_raw(w, p, n);
}

static void pw_str(pw *w, uint32_t field, const char *s) {
  pw_bytes(w, field, s, strlen(s));
}

/* Append |sub| as field |field| and reset it. */
static void pw_msg(pw *w, uint32_t field, pw *sub) {
  pw_bytes(w, field, sub->b, sub->n);
  free(sub->b);
  memset(sub, 0, sizeof(*sub));
}

/* envoy.config.endpoint.v3.ClusterLoadAssignment |name| with |n| HEALTHY
 * endpoints 127.0.x.y:|port| in one locality of weight 1. */
static void make_cla(pw *cla, const char *name, int n, uint32_t port) {
  pw loc = {0}, id = {0}, wt = {0};
  pw_str(cla, 1, name);
  pw_str(&id, 1, "r");
  pw_str(&id, 2, "z");
  pw_msg(&loc, 1, &id);
  for (int i = 0; i < n; i++) {
    pw lbe = {0}, ep = {0}, addr = {0}, sa = {0};
    char ip[32];
    snprintf(ip, sizeof(ip), "127.0.%d.%d", (i / 250) & 255, i % 250 + 1);
    pw_str(&sa, 2, ip);
    pw_varint(&sa, 3, port);
    pw_msg(&addr, 1, &sa);
    pw_msg(&ep, 1, &addr);
    pw_msg(&lbe, 1, &ep);
    pw_varint(&lbe, 2, 1); /* HEALTHY */
    pw_msg(&loc, 2, &lbe);
  }
  pw_varint(&wt, 1, 1);
  pw_msg(&loc, 3, &wt);
  pw_msg(cla, 2, &loc);
}

#define EDS_TYPE                                                               \
  "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"

/* A DiscoveryResponse holding |cla| (consumed). */
static void make_response(pw *resp, pw *cla, const char *version,
                          const char *nonce) {
  pw any = {0};
  pw_str(&any, 1, EDS_TYPE);
  pw_msg(&any, 2, cla);
  pw_str(resp, 1, version);
  pw_msg(resp, 2, &any);
  pw_str(resp, 4, EDS_TYPE);
  pw_str(resp, 5, nonce);
}

/* ------------------------------------------------------------------------
 * --decode: unit level.
 */
static long g_notified;

static void on_res(void *ud, xds_kind k, const char *name, xds_resource *r) {
  (void)ud;
  (void)k;
  (void)name;
  (void)r;
  g_notified++;
}

static void on_err(void *ud, xds_kind k, const char *name, const char *why) {
  (void)ud;
  (void)k;
  fprintf(stderr, "xds_bench: %s refused: %s\n", name, why);
  exit(1);
}

static void on_dne(void *ud, xds_kind k, const char *name) {
  (void)ud;
  (void)k;
  (void)name;
}

static const xds_ads_cbs cbs = {on_res, on_err, on_dne};

/* Named for callgrind's --toggle-collect: one decode, freed. */
__attribute__((noinline)) static void decode_once(const pw *cla) {
  xds_resource *r = NULL;
  char name[64], err[256];
  if (grit_xds_resource_decode(XDS_ENDPOINTS, cla->b, cla->n, &r, name,
                               sizeof(name), err, sizeof(err)) != GRIT_OK) {
    fprintf(stderr, "xds_bench: decode: %s\n", err);
    exit(1);
  }
  grit_xds_resource_unref(r);
}

/* One response applied by the ADS machine, and its ACK taken. */
__attribute__((noinline)) static void apply_once(xds_ads *a, const pw *resp) {
  if (grit_xds_ads_on_response(a, resp->b, resp->n, 0) != GRIT_OK) {
    fprintf(stderr, "xds_bench: response refused\n");
    exit(1);
  }
  grit_bytes req;
  while (grit_xds_ads_next_request(a, &req))
    grit_free(req.data);
}

static int run_decode(int n, int iters) {
  pw cla = {0};
  make_cla(&cla, "c1", n, 8080);
  size_t wire = cla.n;

  /* The heap one decoded resource holds. */
  long long before = atomic_load(&g_live);
  xds_resource *r = NULL;
  char name[64], err[256];
  if (grit_xds_resource_decode(XDS_ENDPOINTS, cla.b, cla.n, &r, name,
                               sizeof(name), err, sizeof(err)) != GRIT_OK) {
    fprintf(stderr, "xds_bench: decode: %s\n", err);
    return 1;
  }
  long long held = atomic_load(&g_live) - before;
  size_t got =
      r->u.endpoints.nlocalities ? r->u.endpoints.localities[0].nendpoints : 0;
  grit_xds_resource_unref(r);
  if (got != (size_t)n) {
    fprintf(stderr, "xds_bench: decoded %zu endpoints, want %d\n", got, n);
    return 1;
  }
  double t0 = mono_us();
  for (int i = 0; i < iters; i++)
    decode_once(&cla);
  double us = (mono_us() - t0) / iters;
  printf("RESULT what=decode endpoints=%d wire_bytes=%zu us_per_op=%.1f "
         "heap_bytes=%lld\n",
         n, wire, us, held);

  /* The ADS machine: two responses with different contents. */
  static const char boot[] =
      "{\"xds_servers\": [{\"server_uri\": \"127.0.0.1:1\", "
      "\"channel_creds\": [{\"type\": \"insecure\"}]}], "
      "\"node\": {\"id\": \"bench\"}}";
  xds_bootstrap *b = NULL;
  grit_error_detail d = {0};
  xds_ads *a = NULL;
  if (grit_xds_bootstrap_parse(boot, strlen(boot), &b, &d) != GRIT_OK ||
      grit_xds_ads_create(b, "bench", &cbs, NULL, &a) != GRIT_OK) {
    fprintf(stderr, "xds_bench: cannot make the ADS machine\n");
    return 1;
  }
  grit_xds_ads_stream_started(a, 0);
  if (grit_xds_ads_watch(a, XDS_ENDPOINTS, "c1", 0) != GRIT_OK)
    return 1;
  grit_bytes req;
  while (grit_xds_ads_next_request(a, &req))
    grit_free(req.data);
  pw resp[2] = {{0}, {0}};
  for (int k = 0; k < 2; k++) {
    pw c = {0};
    make_cla(&c, "c1", n, 8080 + (uint32_t)k);
    make_response(&resp[k], &c, k ? "2" : "1", k ? "n2" : "n1");
  }
  t0 = mono_us();
  for (int i = 0; i < iters; i++)
    apply_once(a, &resp[i & 1]);
  us = (mono_us() - t0) / iters;
  if (g_notified != iters) {
    fprintf(stderr, "xds_bench: %ld notifications for %d responses\n",
            g_notified, iters);
    return 1;
  }
  printf("RESULT what=ads_apply endpoints=%d wire_bytes=%zu us_per_op=%.1f\n",
         n, resp[0].n, us);
  grit_xds_ads_destroy(a);
  grit_xds_bootstrap_free(b);
  free(cla.b);
  free(resp[0].b);
  free(resp[1].b);
  return 0;
}

/* ------------------------------------------------------------------------
 * --watch: the resolver's results as the channel applies them.
 */
static bool g_watch;

void __real_grit_channel_ext_result(grit_channel *ch, const grit_addr *addrs,
                                    size_t n, const char *config_json,
                                    const char *error);
void __wrap_grit_channel_ext_result(grit_channel *ch, const grit_addr *addrs,
                                    size_t n, const char *config_json,
                                    const char *error);

static void watch_line(size_t n, double t1, double t2, const char *error) {
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  printf("STATE n=%zu t_ms=%.3f apply_us=%.1f heap=%lld rss_kib=%ld "
         "error=%s\n",
         n, (double)rt.tv_sec * 1e3 + (double)rt.tv_nsec / 1e6, t2 - t1,
         g_counting ? (long long)atomic_load(&g_live) : -1LL, rss_kib(),
         error ? error : "-");
  fflush(stdout);
}

/* Runs on the channel's loop, inside the xds resolver's kick: the
 * addresses are with the LB policy when __real returns. */
void __wrap_grit_channel_ext_result(grit_channel *ch, const grit_addr *addrs,
                                    size_t n, const char *config_json,
                                    const char *error) {
  double t1 = mono_us();
  __real_grit_channel_ext_result(ch, addrs, n, config_json, error);
  double t2 = mono_us();
  if (g_watch)
    watch_line(n, t1, t2, error);
}

/* Every address in an xDS cluster's policy tree. */
static size_t node_addrs(const grit_lb_node *n) {
  size_t c = n->naddrs;
  for (size_t i = 0; i < n->nchildren; i++)
    c += node_addrs(n->children[i].node);
  return c;
}

/* The routed resolver's result: one child policy per cluster, each an
 * xDS cluster's policy tree (cluster_impl, priority, weighted_target,
 * one round_robin per locality); n= counts every address of every tree. */
void __real_grit_channel_ext_result_clusters(grit_channel *ch,
                                             const grit_lb_cm_child *kids,
                                             size_t n, const char *config_json);
void __wrap_grit_channel_ext_result_clusters(grit_channel *ch,
                                             const grit_lb_cm_child *kids,
                                             size_t n, const char *config_json);
void __wrap_grit_channel_ext_result_clusters(grit_channel *ch,
                                             const grit_lb_cm_child *kids,
                                             size_t n,
                                             const char *config_json) {
  double t1 = mono_us();
  __real_grit_channel_ext_result_clusters(ch, kids, n, config_json);
  double t2 = mono_us();
  if (!g_watch)
    return;
  size_t addrs = 0;
  for (size_t i = 0; i < n; i++)
    addrs += kids[i].tree ? node_addrs(kids[i].tree) : kids[i].naddrs;
  watch_line(addrs, t1, t2, NULL);
}

/* ------------------------------------------------------------------------
 * Calls.
 */
typedef struct load {
  grit_channel *ch;
  const char *method;
  grit_call_opts o;
  uint64_t total;
  atomic_uint_fast64_t started, finished, ok;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} load;

static void start_one(load *l);

static void on_done(const grit_status *st, const uint8_t *resp, size_t resp_len,
                    const grit_call_info *info, void *ud) {
  (void)resp;
  (void)resp_len;
  (void)info;
  load *l = ud;
  static atomic_bool told;
  if (st->code == GRIT_STATUS_OK)
    atomic_fetch_add(&l->ok, 1);
  else if (!atomic_exchange(&told, true))
    fprintf(stderr, "xds_bench: a call failed: %d %s\n", (int)st->code,
            st->message ? st->message : "");
  if (atomic_fetch_add(&l->finished, 1) + 1 == l->total) {
    pthread_mutex_lock(&l->mu);
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return;
  }
  start_one(l);
}

static void start_one(load *l) {
  if (atomic_fetch_add(&l->started, 1) >= l->total)
    return;
  grit_err e =
      grit_unary_call_async(l->ch, l->method, "", 0, &l->o, on_done, l);
  if (e != GRIT_OK) {
    fprintf(stderr, "xds_bench: call: %s\n", grit_strerror(e));
    exit(1);
  }
}

/* |n| calls, |c| in flight; the number that ended OK. */
static uint64_t run_calls(load *l, uint64_t n, uint64_t c) {
  l->total = n;
  atomic_store(&l->started, 0);
  atomic_store(&l->finished, 0);
  atomic_store(&l->ok, 0);
  if (n == 0)
    return 0;
  for (uint64_t i = 0; i < c && i < n; i++)
    start_one(l);
  pthread_mutex_lock(&l->mu);
  while (atomic_load(&l->finished) < n)
    pthread_cond_wait(&l->cv, &l->mu);
  pthread_mutex_unlock(&l->mu);
  return atomic_load(&l->ok);
}

static void usage(void) {
  fprintf(stderr, "usage: xds_bench --decode N [--iters R]\n"
                  "       xds_bench --target T --calls N [--warmup W] "
                  "[--concurrency C] [--method M]\n"
                  "       xds_bench --target xds:///NAME --watch "
                  "[--count-heap]\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *target = NULL, *method = "/grpc.testing.TestService/EmptyCall";
  long decode = 0, iters = 200;
  uint64_t calls = 0, warmup = 0, conc = 32;
  static const struct option opts[] = {
      {"decode", required_argument, NULL, 'd'},
      {"iters", required_argument, NULL, 'i'},
      {"target", required_argument, NULL, 't'},
      {"calls", required_argument, NULL, 'n'},
      {"warmup", required_argument, NULL, 'w'},
      {"concurrency", required_argument, NULL, 'c'},
      {"method", required_argument, NULL, 'm'},
      {"watch", no_argument, NULL, 'W'},
      {"count-heap", no_argument, NULL, 'H'},
      {NULL, 0, NULL, 0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (opt) {
    case 'd':
      decode = strtol(optarg, NULL, 10);
      break;
    case 'i':
      iters = strtol(optarg, NULL, 10);
      break;
    case 't':
      target = optarg;
      break;
    case 'n':
      calls = strtoull(optarg, NULL, 10);
      break;
    case 'w':
      warmup = strtoull(optarg, NULL, 10);
      break;
    case 'c':
      conc = strtoull(optarg, NULL, 10);
      break;
    case 'm':
      method = optarg;
      break;
    case 'W':
      g_watch = true;
      break;
    case 'H':
      g_counting = true;
      break;
    default:
      usage();
    }
  }
  if (decode > 0)
    g_counting = true;
  if (g_counting)
    grit_set_allocator(&counting);
  if (decode > 0)
    return run_decode((int)decode, iters > 0 ? (int)iters : 1);
  if (!target || (!g_watch && calls == 0) || conc == 0)
    usage();
  if (grit_xds_resolver_register() != GRIT_OK)
    return 1;
  load l = {.method = method,
            .o = {.version = GRIT_CALL_OPTS_VERSION,
                  .timeout_ms = 30000,
                  .wait_for_ready = GRIT_WFR_ON}};
  pthread_mutex_init(&l.mu, NULL);
  pthread_cond_init(&l.cv, NULL);
  grit_error_detail d = {0};
  grit_err e = grit_channel_create(NULL, target, NULL, &d, &l.ch);
  if (e != GRIT_OK) {
    fprintf(stderr, "xds_bench: %s: %s\n", target, grit_strerror(e));
    return 1;
  }
  int rc = 0;
  if (g_watch) {
    /* One call so the channel starts; then states until stdin closes. */
    if (run_calls(&l, 1, 1) != 1)
      rc = 1;
    char buf[256];
    while (rc == 0 && fgets(buf, sizeof(buf), stdin))
      ;
  } else {
    run_calls(&l, warmup, conc);
    double c0 = cpu_s(), t0 = mono_us();
    uint64_t ok = run_calls(&l, calls, conc);
    double cpu = cpu_s() - c0, wall = (mono_us() - t0) / 1e6;
    printf("RESULT what=calls target=%s calls=%llu ok=%llu qps=%.0f "
           "cpu_s=%.3f cpu_us_per_call=%.2f\n",
           target, (unsigned long long)calls, (unsigned long long)ok,
           (double)calls / wall, cpu, cpu * 1e6 / (double)calls);
    rc = ok == calls ? 0 : 1;
  }
  grit_channel_destroy(l.ch);
  (void)grit_xdsc_wait_all_freed(10000);
  grit_default_runtime_shutdown();
  return rc;
}
