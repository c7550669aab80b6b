/*
 * grit_bench: grit's load generator for bench/run, on the public API only.
 * Same flags and output line as bench/cpp/bench_client.cc.
 *
 *   grit_bench --target ipv4:127.0.0.1:PORT --method /pkg.Svc/M [--req FILE]
 *       [--mode unary|stream|hold|hedge] [--calls N] [--warmup W]
 *       [--concurrency C] [--channels K] [--service-config JSON]
 *       [--scenario NAME] [--count-alloc] [--hash-header KEY]
 *
 * unary   grit_unary_call_async, C calls in flight spread over K channels
 *         (all on the default runtime, one I/O thread).
 * stream  grit_call_start with on_message; one request, then half-close; a
 *         "call" in qps and CPU is one response message.
 * hold    C calls against a server that never answers (grit-h2server
 *         --default hang): heap bytes per in-flight call, counted by an
 *         allocator installed with grit_set_allocator, and glibc's mallinfo2.
 * upload  issue 19: one client-streaming StreamingInputCall of --bytes in
 *         --size messages with blocking grit_call_send (flow controlled,
 *         SPEC AP-03): MiB/s and peak RSS above the RSS before the call.
 * hedge   issue 6: two embedded h2server backends, one answering 10 % of its
 *         requests (5 % of calls) after 200 ms; no policy vs hedging
 *         (hedgingDelay 10 ms, maxAttempts 3) in one run, with the request
 *         amplification.
 *
 * Prints one line per run:
 *   RESULT scenario=.. client=grit calls=N ok=N msgs=M qps=.. p50_us=..
 *     p99_us=.. p999_us=.. cpu_s=.. cpu_us_per_call=.. maxrss_kib=..
 * --hash-header KEY (issue 26): unary calls carry KEY: user-<i mod 1024>,
 * for ring_hash_experimental's requestHashHeader.
 * --count-alloc adds allocs_per_call= and alloc_bytes_per_call= (grit's own
 * allocations during the measured calls, through the counting allocator).
 */
#include <grit/grit.h>

#include "h2server.h"

#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * Counting allocator: a 16-byte header holds the size.
 */
static atomic_llong g_live_bytes, g_allocs, g_alloc_bytes;
/* --count-alloc: allocations by size class (powers of two) in the measured
 * phase, to find the big ones. */
static atomic_llong g_size_hist[40];
static atomic_bool g_hist_on;

static void hist_add(size_t size) {
  if (!atomic_load_explicit(&g_hist_on, memory_order_relaxed))
    return;
  int b = 0;
  while (b < 39 && ((size_t)1 << b) < size)
    b++;
  atomic_fetch_add_explicit(&g_size_hist[b], 1, memory_order_relaxed);
}

static void *ca_malloc(size_t size, void *ud) {
  (void)ud;
  size_t *p = malloc(size + 16);
  if (p == NULL)
    return NULL;
  p[0] = size;
  atomic_fetch_add_explicit(&g_live_bytes, (long long)size,
                            memory_order_relaxed);
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_alloc_bytes, (long long)size,
                            memory_order_relaxed);
  hist_add(size);
  return (char *)p + 16;
}

static void ca_free(void *ptr, void *ud) {
  (void)ud;
  if (ptr == NULL)
    return;
  size_t *p = (size_t *)((char *)ptr - 16);
  atomic_fetch_sub_explicit(&g_live_bytes, (long long)p[0],
                            memory_order_relaxed);
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
  if (ptr == NULL)
    return ca_malloc(size, ud);
  size_t *old = (size_t *)((char *)ptr - 16);
  size_t oldsize = old[0];
  size_t *p = realloc(old, size + 16);
  if (p == NULL)
    return NULL;
  p[0] = size;
  atomic_fetch_add_explicit(&g_live_bytes, (long long)size - (long long)oldsize,
                            memory_order_relaxed);
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_alloc_bytes, (long long)size,
                            memory_order_relaxed);
  hist_add(size);
  return (char *)p + 16;
}

static const grit_allocator counting_allocator = {
    .malloc = ca_malloc,
    .free = ca_free,
    .calloc = ca_calloc,
    .realloc = ca_realloc,
};

/* ------------------------------------------------------------------------
 * Helpers.
 */
static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static long maxrss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint64_t pct(const uint64_t *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

static void die(const char *what, grit_err e) {
  fprintf(stderr, "grit_bench: %s: %s\n", what, grit_strerror(e));
  exit(1);
}

typedef struct opts {
  const char *target, *method, *req_file, *mode, *service_config, *scenario;
  uint64_t calls, warmup, concurrency, channels;
  uint64_t upload_bytes, upload_size; /* upload: --bytes, --size */
  bool count_alloc;
} opts;

/* ------------------------------------------------------------------------
 * Load: unary and streaming calls, C in flight.
 */
typedef struct slot {
  struct run *r;
  uint64_t start_us;
  atomic_int refs; /* stream mode: starter + on_done */
} slot;

typedef struct run {
  const opts *o;
  grit_channel **chans;
  uint8_t *req;
  size_t req_len;
  bool stream;
  uint64_t target;
  atomic_uint_fast64_t started, finished, ok, msgs, next_chan;
  uint64_t *lat; /* indexed by finish order */
  bool record;
  slot *slots; /* one per call of the phase */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
} run;

static void start_one(run *r);

/* --hash-header: 1024 metadata lists "KEY: user-<k>", or none. */
#define BENCH_KEYS 1024
static grit_metadata *bench_md[BENCH_KEYS];

static void bench_md_init(const char *key) {
  for (int k = 0; k < BENCH_KEYS; k++) {
    char v[32];
    int len = snprintf(v, sizeof(v), "user-%d", k);
    if (grit_metadata_create(&bench_md[k]) != GRIT_OK ||
        grit_metadata_add(bench_md[k], key, v, (size_t)len) != GRIT_OK) {
      fprintf(stderr, "grit_bench: bad --hash-header %s\n", key);
      exit(2);
    }
  }
}

static void finish_one(run *r, slot *s, bool ok) {
  uint64_t t = now_us();
  if (ok)
    atomic_fetch_add(&r->ok, 1);
  uint64_t idx = atomic_fetch_add(&r->finished, 1);
  if (r->record)
    r->lat[idx] = t - s->start_us;
  if (idx + 1 == r->target) {
    pthread_mutex_lock(&r->mu);
    r->done = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return;
  }
  start_one(r);
}

static void on_unary(const grit_status *st, const uint8_t *resp, size_t len,
                     const grit_call_info *info, void *ud) {
  slot *s = ud;
  static atomic_int complained;
  if (st->code != GRIT_STATUS_OK && atomic_fetch_add(&complained, 1) < 3)
    fprintf(stderr, "grit_bench: call failed: %s %s\n",
            grit_status_code_name(st->code), st->message ? st->message : "");
  finish_one(s->r, s, st->code == GRIT_STATUS_OK);
}

static void on_stream_msg(grit_call *call, const uint8_t *data, size_t len,
                          void *ud) {
  slot *s = ud;
  atomic_fetch_add_explicit(&s->r->msgs, 1, memory_order_relaxed);
}

static void release_stream(grit_call *call, slot *s) {
  if (atomic_fetch_sub(&s->refs, 1) == 1)
    grit_call_destroy(call);
}

static void on_stream_done(grit_call *call, const grit_status *st, void *ud) {
  slot *s = ud;
  run *r = s->r;
  if (st->code != GRIT_STATUS_OK)
    fprintf(stderr, "grit_bench: stream failed: %s %s\n",
            grit_status_code_name(st->code), st->message ? st->message : "");
  release_stream(call, s);
  finish_one(r, s, st->code == GRIT_STATUS_OK);
}

static const grit_call_cbs stream_cbs = {
    .version = GRIT_CALL_CBS_VERSION,
    .on_message = on_stream_msg,
    .on_done = on_stream_done,
};

static void start_one(run *r) {
  uint64_t i = atomic_fetch_add(&r->started, 1);
  if (i >= r->target)
    return;
  slot *s = &r->slots[i];
  s->r = r;
  grit_channel *ch = r->chans[atomic_fetch_add_explicit(&r->next_chan, 1,
                                                        memory_order_relaxed) %
                              r->o->channels];
  s->start_us = now_us();
  if (!r->stream) {
    grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION,
                         .metadata = bench_md[i % BENCH_KEYS]};
    grit_err e = grit_unary_call_async(ch, r->o->method, r->req, r->req_len,
                                       bench_md[0] ? &co : NULL, on_unary, s);
    if (e != GRIT_OK)
      die("grit_unary_call_async", e);
    return;
  }
  atomic_store(&s->refs, 2);
  grit_call *call;
  grit_err e = grit_call_start(ch, r->o->method, NULL, &stream_cbs, s, &call);
  if (e != GRIT_OK)
    die("grit_call_start", e);
  grit_call_send(call, r->req, r->req_len);
  grit_call_close_send(call);
  release_stream(call, s);
}

static void phase(run *r, uint64_t n, bool record) {
  r->target = n;
  atomic_store(&r->started, 0);
  atomic_store(&r->finished, 0);
  atomic_store(&r->ok, 0);
  atomic_store(&r->msgs, 0);
  r->record = record;
  r->done = n == 0;
  for (uint64_t i = 0; i < r->o->concurrency && i < n; i++)
    start_one(r);
  pthread_mutex_lock(&r->mu);
  while (!r->done)
    pthread_cond_wait(&r->cv, &r->mu);
  pthread_mutex_unlock(&r->mu);
}

/* --read-spin-us: GRIT_ARG_READ_SPIN_US for every channel; -1 = default. */
static int64_t bench_read_spin_us = -1;
/* --compression: GRIT_ARG_DEFAULT_COMPRESSION for every channel. */
static const char *bench_compression;

static grit_channel *make_channel(const char *target, const char *sc) {
  grit_channel_args *a;
  grit_err e = grit_channel_args_create(&a);
  if (e != GRIT_OK)
    die("grit_channel_args_create", e);
  if (sc && *sc &&
      (e = grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, sc)) !=
          GRIT_OK)
    die("service config", e);
  grit_channel_args_set_int(a, GRIT_ARG_MAX_RECV_MESSAGE, -1);
  if (bench_read_spin_us >= 0 &&
      (e = grit_channel_args_set_int(a, GRIT_ARG_READ_SPIN_US,
                                     bench_read_spin_us)) != GRIT_OK)
    die("read spin", e);
  if (bench_compression &&
      (e = grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_COMPRESSION,
                                        bench_compression)) != GRIT_OK)
    die("compression", e);
  grit_error_detail det;
  grit_channel *ch;
  e = grit_channel_create(NULL, target, a, &det, &ch);
  grit_channel_args_destroy(a);
  if (e != GRIT_OK) {
    fprintf(stderr, "grit_bench: channel: %s %s %s\n", grit_strerror(e),
            det.path, det.reason);
    exit(1);
  }
  return ch;
}

static void read_req(const opts *o, uint8_t **data, size_t *len) {
  *data = NULL;
  *len = 0;
  if (o->req_file == NULL)
    return;
  FILE *f = fopen(o->req_file, "rb");
  if (f == NULL) {
    perror(o->req_file);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *data = malloc((size_t)n + 1);
  if (fread(*data, 1, (size_t)n, f) != (size_t)n) {
    perror(o->req_file);
    exit(1);
  }
  fclose(f);
  *len = (size_t)n;
}

static int mode_load(const opts *o, bool stream) {
  run r = {.o = o, .stream = stream};
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  read_req(o, &r.req, &r.req_len);
  r.chans = calloc(o->channels, sizeof(*r.chans));
  for (uint64_t k = 0; k < o->channels; k++)
    r.chans[k] = make_channel(o->target, o->service_config);
  uint64_t most = o->calls > o->warmup ? o->calls : o->warmup;
  r.slots = calloc(most ? most : 1, sizeof(slot));
  r.lat = calloc(most ? most : 1, sizeof(uint64_t));
  phase(&r, o->warmup, false);
  long long a0 = atomic_load(&g_allocs), b0 = atomic_load(&g_alloc_bytes);
  atomic_store(&g_hist_on, true);
  double c0 = cpu_s();
  uint64_t t0 = now_us();
  phase(&r, o->calls, true);
  uint64_t el = now_us() - t0;
  double cpu = cpu_s() - c0;
  atomic_store(&g_hist_on, false);
  long long a1 = atomic_load(&g_allocs), b1 = atomic_load(&g_alloc_bytes);
  qsort(r.lat, o->calls, sizeof(uint64_t), cmp_u64);
  uint64_t ok = atomic_load(&r.ok), msgs = atomic_load(&r.msgs);
  uint64_t units = stream ? msgs : ok;
  printf("RESULT scenario=%s client=grit calls=%" PRIu64 " ok=%" PRIu64
         " msgs=%" PRIu64 " qps=%.0f p50_us=%" PRIu64 " p99_us=%" PRIu64
         " p999_us=%" PRIu64 " cpu_s=%.3f cpu_us_per_call=%.2f maxrss_kib=%ld",
         o->scenario, o->calls, ok, msgs,
         (double)units * 1e6 / (double)(el ? el : 1), pct(r.lat, o->calls, 0.5),
         pct(r.lat, o->calls, 0.99), pct(r.lat, o->calls, 0.999), cpu,
         units ? cpu * 1e6 / (double)units : 0.0, maxrss_kib());
  if (o->count_alloc && o->calls)
    printf(" allocs_per_call=%.2f alloc_bytes_per_call=%.0f",
           (double)(a1 - a0) / (double)o->calls,
           (double)(b1 - b0) / (double)o->calls);
  printf("\n");
  if (o->count_alloc && o->calls) {
    printf("alloc sizes per call:");
    for (int b = 0; b < 40; b++)
      if (atomic_load(&g_size_hist[b]))
        printf(" <=%zu:%.2f", (size_t)1 << b,
               (double)atomic_load(&g_size_hist[b]) / (double)o->calls);
    printf("\n");
  }
  fflush(stdout);
  for (uint64_t k = 0; k < o->channels; k++)
    grit_channel_destroy(r.chans[k]);
  free(r.chans);
  free(r.slots);
  free(r.lat);
  free(r.req);
  return ok == o->calls ? 0 : 1;
}

/* ------------------------------------------------------------------------
 * hold: heap per in-flight call.
 */
static atomic_uint_fast64_t g_hold_done;

static void on_hold(const grit_status *st, const uint8_t *resp, size_t len,
                    const grit_call_info *info, void *ud) {
  atomic_fetch_add(&g_hold_done, 1);
}

static int mode_hold(const opts *o) {
  uint8_t *req;
  size_t req_len;
  read_req(o, &req, &req_len);
  grit_channel *ch = make_channel(o->target, o->service_config);
  /* Connect first so the connection's own buffers are in the baseline. */
  if (grit_channel_get_state(ch, true) != GRIT_STATE_READY) {
    grit_connectivity_state s = GRIT_STATE_IDLE;
    for (int i = 0; i < 50 && s != GRIT_STATE_READY; i++)
      s = grit_channel_wait_for_state_change(
          ch, grit_channel_get_state(ch, true), 100);
  }
  usleep(200000);
  long long base = atomic_load(&g_live_bytes);
  size_t mbase = mallinfo2().uordblks;
  for (uint64_t i = 0; i < o->calls; i++) {
    grit_err e =
        grit_unary_call_async(ch, o->method, req, req_len, NULL, on_hold, NULL);
    if (e != GRIT_OK)
      die("grit_unary_call_async", e);
  }
  long long cur = 0, last = -1;
  size_t mcur = 0;
  for (int i = 0, stable = 0; i < 100 && stable < 3; i++) {
    usleep(100000);
    cur = atomic_load(&g_live_bytes);
    mcur = mallinfo2().uordblks;
    stable = cur == last ? stable + 1 : 0;
    last = cur;
  }
  printf("RESULT scenario=%s client=grit calls=%" PRIu64
         " heap_bytes=%lld heap_bytes_per_call=%.0f"
         " malloc_heap_bytes_per_call=%.0f req_bytes=%zu done_early=%" PRIu64
         " maxrss_kib=%ld\n",
         o->scenario, o->calls, cur - base,
         (double)(cur - base) / (double)o->calls,
         ((double)mcur - (double)mbase) / (double)o->calls, req_len,
         (uint64_t)atomic_load(&g_hold_done), maxrss_kib());
  fflush(stdout);
  grit_channel_destroy(ch);
  free(req);
  return 0;
}

/* ------------------------------------------------------------------------
 * hedge: issue 6's tail-latency scene.
 */
typedef struct slow_backend {
  unsigned permille; /* requests answered after delay_ms */
  uint32_t delay_ms;
  atomic_uint_fast64_t n, slowed;
} slow_backend;

static void slow_handler(const h2s_request *req, bool at_end, h2s_action *act,
                         void *ud) {
  slow_backend *b = ud;
  if (!at_end)
    return;
  uint64_t i = atomic_fetch_add(&b->n, 1);
  /* Deterministic spread: a multiplicative hash of the arrival number. */
  uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
  if ((h >> 32) % 1000 < b->permille) {
    act->delay_ms = b->delay_ms;
    atomic_fetch_add(&b->slowed, 1);
  }
}

static int hedge_run(const opts *o, const char *name, const char *target,
                     const char *sc, h2s_server *fast, h2s_server *slow) {
  opts oo = *o;
  oo.scenario = name;
  oo.target = target;
  oo.service_config = sc;
  oo.channels = 1;
  run r = {.o = &oo};
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  read_req(&oo, &r.req, &r.req_len);
  r.chans = calloc(1, sizeof(*r.chans));
  r.chans[0] = make_channel(target, sc);
  uint64_t most = oo.calls > oo.warmup ? oo.calls : oo.warmup;
  r.slots = calloc(most ? most : 1, sizeof(slot));
  r.lat = calloc(most ? most : 1, sizeof(uint64_t));
  phase(&r, oo.warmup, false);
  h2s_stats sa, sb;
  h2s_server_get_stats(fast, &sa);
  h2s_server_get_stats(slow, &sb);
  uint64_t req0 = sa.requests + sb.requests;
  grit_channel_stats cs0 = GRIT_CHANNEL_STATS_INIT,
                     cs1 = GRIT_CHANNEL_STATS_INIT;
  grit_channel_get_stats(r.chans[0], &cs0);
  uint64_t t0 = now_us();
  phase(&r, oo.calls, true);
  uint64_t el = now_us() - t0;
  grit_channel_get_stats(r.chans[0], &cs1);
  h2s_server_get_stats(fast, &sa);
  h2s_server_get_stats(slow, &sb);
  uint64_t reqs = sa.requests + sb.requests - req0;
  qsort(r.lat, oo.calls, sizeof(uint64_t), cmp_u64);
  uint64_t ok = atomic_load(&r.ok);
  printf("RESULT scenario=%s client=grit calls=%" PRIu64 " ok=%" PRIu64
         " qps=%.0f p50_us=%" PRIu64 " p99_us=%" PRIu64 " p999_us=%" PRIu64
         " server_requests=%" PRIu64 " hedges=%" PRIu64 " amplification=%.4f\n",
         name, oo.calls, ok, (double)ok * 1e6 / (double)(el ? el : 1),
         pct(r.lat, oo.calls, 0.5), pct(r.lat, oo.calls, 0.99),
         pct(r.lat, oo.calls, 0.999), reqs, cs1.hedges - cs0.hedges,
         oo.calls ? (double)(reqs - oo.calls) / (double)oo.calls : 0.0);
  fflush(stdout);
  grit_channel_destroy(r.chans[0]);
  free(r.chans);
  free(r.slots);
  free(r.lat);
  free(r.req);
  return ok == oo.calls ? 0 : 1;
}

static int mode_hedge(const opts *o) {
  static slow_backend none = {.permille = 0},
                      slowb = {.permille = 100, .delay_ms = 200};
  h2s_server *a, *b;
  h2s_config ca = {
      .quiet = true, .handler = slow_handler, .handler_data = &none};
  h2s_config cb = {
      .quiet = true, .handler = slow_handler, .handler_data = &slowb};
  if (h2s_server_start(&ca, &a) != 0 || h2s_server_start(&cb, &b) != 0) {
    fprintf(stderr, "grit_bench: cannot start h2server backends\n");
    return 1;
  }
  char target[128];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%u,127.0.0.1:%u",
           h2s_server_port(a), h2s_server_port(b));
  const char *rr = "{\"loadBalancingConfig\":[{\"round_robin\":{}}]}";
  const char *hedge =
      "{\"loadBalancingConfig\":[{\"round_robin\":{}}],"
      "\"methodConfig\":[{\"name\":[{\"service\":\"grpc.testing.TestService\"}]"
      ","
      "\"hedgingPolicy\":{\"maxAttempts\":3,\"hedgingDelay\":\"0.010s\","
      "\"nonFatalStatusCodes\":[\"UNAVAILABLE\"]}}]}";
  int rc = hedge_run(o, "hedge-none", target, rr, a, b);
  rc |= hedge_run(o, "hedge-10ms", target,
                  o->service_config ? o->service_config : hedge, a, b);
  printf("backends: slow one delayed %" PRIu64 " of %" PRIu64
         " requests by %u ms\n",
         (uint64_t)atomic_load(&slowb.slowed), (uint64_t)atomic_load(&slowb.n),
         slowb.delay_ms);
  h2s_server_stop(a);
  h2s_server_stop(b);
  return rc;
}

/* ------------------------------------------------------------------------
 * Upload: one client stream, blocking sends; memory stays bounded however
 * slowly the server reads.
 */
static long rss_kib_now(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
      break;
  if (f)
    fclose(f);
  return kib;
}

static size_t put_varint(uint8_t *b, uint64_t v) {
  size_t k = 0;
  for (; v >= 0x80; v >>= 7)
    b[k++] = (uint8_t)(v | 0x80);
  b[k++] = (uint8_t)v;
  return k;
}

/* A StreamingInputCallRequest whose payload body is |n| zero bytes. */
static uint8_t *upload_msg(size_t n, size_t *len) {
  uint8_t hdr[10];
  size_t body_hdr = 1 + put_varint(hdr, n); /* tag 2 + length */
  uint8_t *b = calloc(1, n + 32);
  if (!b)
    die("upload message", GRIT_ERR_NOMEM);
  size_t k = 0;
  b[k++] = 0x0a; /* field 1, payload */
  k += put_varint(b + k, body_hdr + n);
  b[k++] = 0x12; /* field 2 of Payload, body */
  k += put_varint(b + k, n);
  *len = k + n;
  return b;
}

static int mode_upload(const opts *o) {
  grit_channel *ch = make_channel(o->target, o->service_config);
  grit_call_opts co = {.version = GRIT_CALL_OPTS_VERSION,
                       .kind = GRIT_METHOD_CLIENT_STREAMING};
  grit_status st = {0};
  /* Connect first, so the baseline holds the connection. */
  grit_unary_call(ch, "/grpc.testing.TestService/EmptyCall", "", 0, NULL, NULL,
                  &st, NULL);
  grit_status_free(&st);
  size_t len;
  uint8_t *msg = upload_msg(o->upload_size, &len);
  long rss0 = rss_kib_now();
  uint64_t t0 = now_us();
  double c0 = cpu_s();
  grit_call *call;
  grit_err e =
      grit_call_start(ch, "/grpc.testing.TestService/StreamingInputCall", &co,
                      NULL, NULL, &call);
  if (e != GRIT_OK)
    die("grit_call_start", e);
  uint64_t sent = 0;
  while (sent < o->upload_bytes && grit_call_send(call, msg, len) == GRIT_OK)
    sent += o->upload_size;
  grit_call_close_send(call);
  grit_bytes resp = {0};
  grit_call_recv(call, &resp);
  grit_bytes_free(&resp);
  grit_call_finish(call, &st);
  grit_call_destroy(call);
  double secs = (double)(now_us() - t0) / 1e6;
  double cpu = cpu_s() - c0;
  long peak = maxrss_kib();
  printf("RESULT scenario=%s client=grit bytes=%" PRIu64 " ok=%d status=%s"
         " mib_per_s=%.1f cpu_s=%.3f rss_start_kib=%ld maxrss_kib=%ld"
         " peak_over_start_kib=%ld\n",
         o->scenario, sent, st.code == GRIT_STATUS_OK,
         grit_status_code_name(st.code), (double)sent / secs / 1048576.0, cpu,
         rss0, peak, peak - rss0);
  grit_status_free(&st);
  free(msg);
  grit_channel_destroy(ch);
  return 0;
}

/* ------------------------------------------------------------------------ */
static void usage(void) {
  fprintf(stderr,
          "usage: grit_bench --target T [--method M] [--req FILE]\n"
          "  [--mode unary|stream|hold|hedge] [--calls N] [--warmup W]\n"
          "  [--concurrency C] [--channels K] [--service-config JSON]\n"
          "  [--scenario NAME] [--count-alloc] [--read-spin-us US]\n"
          "  [--mode upload --bytes N --size S]\n"
          "  [--compression gzip|deflate] [--hash-header KEY]\n");
  exit(2);
}

int main(int argc, char **argv) {
  opts o = {.method = "/grpc.testing.TestService/EmptyCall",
            .mode = "unary",
            .scenario = "-",
            .calls = 10000,
            .warmup = 1000,
            .concurrency = 1,
            .channels = 1};
  static const struct option lo[] = {
      {"target", required_argument, 0, 't'},
      {"method", required_argument, 0, 'm'},
      {"req", required_argument, 0, 'r'},
      {"mode", required_argument, 0, 'M'},
      {"calls", required_argument, 0, 'n'},
      {"warmup", required_argument, 0, 'w'},
      {"concurrency", required_argument, 0, 'c'},
      {"channels", required_argument, 0, 'k'},
      {"service-config", required_argument, 0, 's'},
      {"scenario", required_argument, 0, 'S'},
      {"count-alloc", no_argument, 0, 'A'},
      {"read-spin-us", required_argument, 0, 'P'},
      {"bytes", required_argument, 0, 'B'},
      {"size", required_argument, 0, 'Z'},
      {"compression", required_argument, 0, 'G'},
      {"hash-header", required_argument, 0, 'H'},
      {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (ch) {
    case 't':
      o.target = optarg;
      break;
    case 'm':
      o.method = optarg;
      break;
    case 'r':
      o.req_file = optarg;
      break;
    case 'M':
      o.mode = optarg;
      break;
    case 'n':
      o.calls = strtoull(optarg, NULL, 10);
      break;
    case 'w':
      o.warmup = strtoull(optarg, NULL, 10);
      break;
    case 'c':
      o.concurrency = strtoull(optarg, NULL, 10);
      break;
    case 'k':
      o.channels = strtoull(optarg, NULL, 10);
      break;
    case 's':
      o.service_config = optarg;
      break;
    case 'S':
      o.scenario = optarg;
      break;
    case 'A':
      o.count_alloc = true;
      break;
    case 'P':
      bench_read_spin_us = strtoll(optarg, NULL, 10);
      break;
    case 'B':
      o.upload_bytes = strtoull(optarg, NULL, 10);
      break;
    case 'Z':
      o.upload_size = strtoull(optarg, NULL, 10);
      break;
    case 'H':
      bench_md_init(optarg);
      break;
    case 'G':
      bench_compression = optarg;
      break;
    default:
      usage();
    }
  }
  if (o.concurrency == 0 || o.channels == 0)
    usage();
  bool hold = strcmp(o.mode, "hold") == 0;
  if (o.count_alloc || hold)
    grit_set_allocator(&counting_allocator);
  if (strcmp(o.mode, "hedge") == 0)
    return mode_hedge(&o);
  if (o.target == NULL)
    usage();
  if (hold)
    return mode_hold(&o);
  if (strcmp(o.mode, "upload") == 0) {
    if (o.upload_bytes == 0)
      o.upload_bytes = (uint64_t)1 << 30;
    if (o.upload_size == 0)
      o.upload_size = 65536;
    return mode_upload(&o);
  }
  if (strcmp(o.mode, "unary") == 0 || strcmp(o.mode, "stream") == 0)
    return mode_load(&o, strcmp(o.mode, "stream") == 0);
  usage();
  return 2;
}
