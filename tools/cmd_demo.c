/* grit demo: start local gRPC backends inside this process (the
 * h2server/ engine) and show calls succeeding against them: load
 * spread, a streaming call, a backend going away and coming back, the
 * statuses of failing calls; then what retries, retry throttling and
 * hedging change against a flaky, a failing and a sometimes-slow backend
 * (each scene checks its outcome; the exit status says whether all did). */
#include "tools.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h2server.h"

#include "demo_dedup.h"

#define METHOD "/grit.demo.Echo/Unary"

typedef struct demo_tally {
  uint64_t lat_us[1000];
  size_t n;
  uint64_t codes[GRIT_STATUS_COUNT];
  char peers[4][128];
  uint64_t peer_calls[4];
  uint64_t attempts; /* grit_call_info.attempts, summed */
} demo_tally;

static void tally_peer(demo_tally *t, const char *peer) {
  for (int i = 0; i < 4; i++) {
    if (!t->peers[i][0])
      snprintf(t->peers[i], sizeof(t->peers[i]), "%s", peer);
    if (strcmp(t->peers[i], peer) == 0) {
      t->peer_calls[i]++;
      return;
    }
  }
}

/* |n| sequential unary calls; each outcome goes into |t|. */
static void run_unary(grit_channel *ch, size_t n, uint64_t deadline_ms,
                      demo_tally *t) {
  memset(t, 0, sizeof(*t));
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = deadline_ms};
  for (size_t i = 0; i < n && i < 1000; i++) {
    grit_status st;
    grit_bytes resp;
    uint64_t t0 = tool_now_us();
    grit_unary_call(ch, METHOD, "hello", 5, &o, &resp, &st, NULL);
    t->lat_us[t->n++] = tool_now_us() - t0;
    t->codes[st.code]++;
    grit_status_free(&st);
    grit_bytes_free(&resp);
  }
}

static void print_tally(const char *title, demo_tally *t, grit_channel *ch) {
  (void)ch;
  tool_pcts p = tool_percentiles(t->lat_us, t->n);
  printf("  %-34s %4zu calls, %4" PRIu64 " OK", title, t->n, t->codes[0]);
  for (int c = 1; c < GRIT_STATUS_COUNT; c++) {
    if (t->codes[c])
      printf(", %" PRIu64 " %s", t->codes[c],
             grit_status_code_name((grit_status_code)c));
  }
  printf("; p50 %" PRIu64 " us, p99 %" PRIu64 " us\n", p.p50, p.p99);
}

static void count_peers(grit_channel *ch, size_t n, demo_tally *t) {
  memset(t, 0, sizeof(*t));
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 2000};
  for (size_t i = 0; i < n; i++) {
    grit_call *c;
    if (grit_call_start(ch, METHOD, &o, NULL, NULL, &c) != GRIT_OK)
      continue;
    grit_call_send(c, "x", 1);
    grit_call_close_send(c);
    grit_status st;
    grit_call_finish(c, &st);
    grit_call_info info = GRIT_CALL_INFO_INIT;
    grit_call_get_info(c, &info);
    t->codes[st.code]++;
    if (st.code == GRIT_STATUS_OK)
      tally_peer(t, info.peer);
    grit_status_free(&st);
    grit_call_destroy(c);
  }
}

static void print_peers(const char *title, const demo_tally *t) {
  printf("  %-34s", title);
  for (int i = 0; i < 4 && t->peers[i][0]; i++)
    printf(" %s: %" PRIu64 "%s", t->peers[i], t->peer_calls[i],
           i < 3 && t->peers[i + 1][0] ? "," : "");
  for (int c = 1; c < GRIT_STATUS_COUNT; c++) {
    if (t->codes[c])
      printf("  (%" PRIu64 " %s)", t->codes[c],
             grit_status_code_name((grit_status_code)c));
  }
  printf("\n");
}

static int scene_streaming(grit_channel *ch) {
  grit_call *c;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 5000};
  if (grit_call_start(ch, "/grit.demo.Echo/Chat", &o, NULL, NULL, &c) !=
      GRIT_OK)
    return 1;
  const char *words[] = {"one", "two", "three", "four", "five"};
  for (int i = 0; i < 5; i++)
    grit_call_send(c, words[i], strlen(words[i]));
  grit_call_close_send(c);
  int got = 0;
  grit_bytes b;
  printf("  bidi stream: sent 5 messages, received:");
  while (grit_call_recv(c, &b) == GRIT_OK) {
    printf(" %.*s", (int)b.len, (const char *)b.data);
    got++;
    grit_bytes_free(&b);
  }
  grit_status st;
  grit_call_finish(c, &st);
  printf(" -> %s\n", grit_status_code_name(st.code));
  int rc = st.code == GRIT_STATUS_OK && got == 5 ? 0 : 1;
  grit_status_free(&st);
  grit_call_destroy(c);
  return rc;
}

static void scene_errors(h2s_server *b) {
  h2s_server_script_add_text(
      b, "path=" METHOD " trailers_only status=UNAVAILABLE message=overloaded\n"
         "path=" METHOD " delay=300\n"
         "path=" METHOD " status=PERMISSION_DENIED message=no%20entry\n");
}

static int start_backends(h2s_server **a, h2s_server **b) {
  h2s_config cfg = {.quiet = true};
  if (h2s_server_start(&cfg, a) != 0 || h2s_server_start(&cfg, b) != 0) {
    fprintf(stderr, "grit demo: cannot start local backends\n");
    return 1;
  }
  return 0;
}

static grit_channel *demo_channel(h2s_server *a, h2s_server *b) {
  char target[128];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%u,127.0.0.1:%u",
           h2s_server_port(a), h2s_server_port(b));
  grit_channel_args *args;
  grit_channel_args_create(&args);
  grit_channel_args_set_string(
      args, GRIT_ARG_SERVICE_CONFIG,
      "{\"loadBalancingConfig\":[{\"round_robin\":{}}]}");
  grit_channel_args_set_int(args, GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  grit_channel_args_set_int(args, GRIT_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, args, &d, &ch) != GRIT_OK)
    fprintf(stderr, "grit demo: channel: %s\n", d.reason);
  grit_channel_args_destroy(args);
  printf("channel to %s (round_robin)\n\n", target);
  return ch;
}

static void wait_ready(grit_channel *ch) {
  grit_connectivity_state s = grit_channel_get_state(ch, true);
  for (int i = 0; i < 50 && s != GRIT_STATE_READY; i++)
    s = grit_channel_wait_for_state_change(ch, s, 100);
}

/* ---- scenes 5-7: retries, throttling, hedging ---- */

#define FLAKY "/grit.demo.Echo/Flaky"
#define SLOW "/grit.demo.Echo/Slow"

typedef struct async_run async_run;

typedef struct async_slot {
  async_run *r;
  uint64_t start_us;
} async_slot;

/* |n| async unary calls (at most 1000), |conc| in flight at a time. */
struct async_run {
  grit_channel *ch;
  const char *method;
  size_t n, started, finished;
  async_slot slots[1000];
  demo_tally *t;
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

static void async_next(async_run *r);

static void async_done(const grit_status *st, const uint8_t *resp, size_t len,
                       const grit_call_info *info, void *ud) {
  (void)resp;
  (void)len;
  async_slot *slot = ud;
  async_run *r = slot->r;
  uint64_t lat = tool_now_us() - slot->start_us;
  pthread_mutex_lock(&r->mu);
  demo_tally *t = r->t;
  t->lat_us[t->n++] = lat;
  t->codes[st->code]++;
  t->attempts += info->attempts;
  bool all = ++r->finished == r->n;
  if (all)
    pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
  if (!all)
    async_next(r);
}

static void async_next(async_run *r) {
  pthread_mutex_lock(&r->mu);
  if (r->started == r->n) {
    pthread_mutex_unlock(&r->mu);
    return;
  }
  async_slot *slot = &r->slots[r->started++];
  slot->r = r;
  slot->start_us = tool_now_us();
  pthread_mutex_unlock(&r->mu);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 5000};
  if (grit_unary_call_async(r->ch, r->method, "hello", 5, &o, async_done,
                            slot) != GRIT_OK) {
    grit_status st = {.code = GRIT_STATUS_INTERNAL, .message = (char *)""};
    grit_call_info info = GRIT_CALL_INFO_INIT;
    async_done(&st, NULL, 0, &info, slot);
  }
}

/* |n| unary calls to |method|, |conc| in flight; outcomes into |t|. */
static void run_async(grit_channel *ch, const char *method, size_t n,
                      size_t conc, demo_tally *t) {
  memset(t, 0, sizeof(*t));
  async_run *r = calloc(1, sizeof(*r));
  if (!r)
    return;
  r->ch = ch;
  r->method = method;
  r->n = n < 1000 ? n : 1000;
  r->t = t;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  for (size_t i = 0; i < conc && i < r->n; i++)
    async_next(r);
  pthread_mutex_lock(&r->mu);
  while (r->finished < r->n)
    pthread_cond_wait(&r->cv, &r->mu);
  pthread_mutex_unlock(&r->mu);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
}

/* The backends of scenes 5 and 7: every |fail_every|-th request fails
 * UNAVAILABLE (Trailers-Only), every |slow_every|-th waits |slow_ms|. */
typedef struct fault_plan {
  uint32_t fail_every, slow_every, slow_ms;
} fault_plan;

static void fault_handler(const h2s_request *req, bool at_end, h2s_action *act,
                          void *ud) {
  (void)at_end;
  const fault_plan *p = ud;
  size_t k = req->seq + 1;
  if (p->fail_every && k % p->fail_every == 0) {
    act->kind = H2S_TRAILERS_ONLY;
    act->grpc_status = GRIT_STATUS_UNAVAILABLE;
    act->grpc_message = "flaky backend";
  }
  if (p->slow_every && k % p->slow_every == 0)
    act->delay_ms = p->slow_ms;
}

static h2s_server *fault_backend(const fault_plan *plan,
                                 const h2s_action *def) {
  h2s_config cfg = {.quiet = true,
                    .handler = plan ? fault_handler : NULL,
                    .handler_data = (void *)plan,
                    .default_action = def};
  h2s_server *s = NULL;
  if (h2s_server_start(&cfg, &s) != 0)
    fprintf(stderr, "grit demo: cannot start a backend\n");
  return s;
}

/* A channel to |n| backends with |config| (a service config JSON). */
static grit_channel *scene_channel(h2s_server **b, size_t n,
                                   const char *config) {
  char target[256];
  size_t k = (size_t)snprintf(target, sizeof(target), "ipv4:");
  for (size_t i = 0; i < n; i++)
    k += (size_t)snprintf(target + k, sizeof(target) - k, "%s127.0.0.1:%u",
                          i ? "," : "", h2s_server_port(b[i]));
  grit_channel_args *args;
  if (grit_channel_args_create(&args) != GRIT_OK)
    return NULL;
  grit_channel_args_set_string(args, GRIT_ARG_SERVICE_CONFIG, config);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, args, &d, &ch) != GRIT_OK)
    fprintf(stderr, "grit demo: channel: %s %s\n", d.path, d.reason);
  grit_channel_args_destroy(args);
  return ch;
}

static double ms(uint64_t us) {
  return (double)us / 1000.0;
}

/* 5: a backend failing every 3rd request, without and with retries. */
static int scene_flaky(void) {
  static const fault_plan plan = {.fail_every = 3};
  h2s_server *b = fault_backend(&plan, NULL);
  if (!b)
    return 1;
  static const char *const cfgs[2] = {
      "{}", "{\"methodConfig\":[{\"name\":[{\"service\":\"grit.demo.Echo\"}],"
            "\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":\"0.002s\","
            "\"maxBackoff\":\"0.01s\",\"backoffMultiplier\":2,"
            "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}"};
  static const char *const titles[2] = {"no retry policy:",
                                        "retryPolicy, maxAttempts 3:"};
  printf("  %-31s %-16s %9s %12s %12s\n", "300 calls, one at a time", "success",
         "att/call", "p50", "p99");
  demo_tally t[2];
  for (int i = 0; i < 2; i++) {
    grit_channel *ch = scene_channel(&b, 1, cfgs[i]);
    if (!ch)
      return 1;
    run_async(ch, FLAKY, 300, 1, &t[i]);
    tool_pcts p = tool_percentiles(t[i].lat_us, t[i].n);
    printf("  %-31s %3" PRIu64 "/%zu (%5.1f%%) %9.2f %9.2f ms %9.2f ms\n",
           titles[i], t[i].codes[0], t[i].n,
           t[i].n ? 100.0 * (double)t[i].codes[0] / (double)t[i].n : 0.0,
           t[i].n ? (double)t[i].attempts / (double)t[i].n : 0.0, ms(p.p50),
           ms(p.p99));
    grit_channel_destroy(ch);
  }
  h2s_server_stop(b);
  /* Without a policy a third fail; with one, each retry lands on the next
   * request, which succeeds. */
  return t[0].codes[0] < 300 && t[1].codes[0] == 300 ? 0 : 1;
}

/* 6: a backend failing everything: retries multiply the load unless
 * retryThrottling stops them (TH-02, TH-03). */
static int scene_storm(void) {
  h2s_action fail = {.kind = H2S_TRAILERS_ONLY,
                     .grpc_status = GRIT_STATUS_UNAVAILABLE,
                     .grpc_message = "overloaded"};
  h2s_server *b = fault_backend(NULL, &fail);
  if (!b)
    return 1;
  static const char retry[] =
      "\"methodConfig\":[{\"name\":[{\"service\":\"grit.demo.Echo\"}],"
      "\"retryPolicy\":{\"maxAttempts\":5,\"initialBackoff\":\"0.001s\","
      "\"maxBackoff\":\"0.005s\",\"backoffMultiplier\":2,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]";
  char cfgs[2][512];
  snprintf(cfgs[0], sizeof(cfgs[0]), "{%s}", retry);
  snprintf(cfgs[1], sizeof(cfgs[1]),
           "{%s,\"retryThrottling\":{\"maxTokens\":10,\"tokenRatio\":0.1}}",
           retry);
  static const char *const titles[2] = {"retryPolicy, maxAttempts 5:",
                                        "+ retryThrottling maxTokens 10:"};
  uint64_t sent[2], throttled[2];
  for (int i = 0; i < 2; i++) {
    grit_channel *ch = scene_channel(&b, 1, cfgs[i]);
    if (!ch)
      return 1;
    size_t before = h2s_server_request_count(b);
    demo_tally t;
    run_async(ch, FLAKY, 40, 1, &t);
    grit_channel_stats st = GRIT_CHANNEL_STATS_INIT;
    grit_channel_get_stats(ch, &st);
    sent[i] = h2s_server_request_count(b) - before;
    throttled[i] = st.throttled;
    printf("  %-31s 40 calls failed, %3" PRIu64 " attempts sent "
           "(%.1f per call), stats.throttled %" PRIu64 "\n",
           titles[i], sent[i], (double)sent[i] / 40.0, throttled[i]);
    grit_channel_destroy(ch);
  }
  h2s_server_stop(b);
  return sent[1] * 2 < sent[0] && throttled[1] > 0 && throttled[0] == 0 ? 0 : 1;
}

/* 7: two backends, one of which answers one request in five after 200 ms
 * (one call in ten over both); a hedge after 20 ms picks again (HG-01,
 * HG-08) and most likely lands on the quick one. */
static int scene_hedging(void) {
  static const fault_plan plan = {.slow_every = 5, .slow_ms = 200};
  h2s_server *b[2] = {fault_backend(&plan, NULL), fault_backend(NULL, NULL)};
  if (!b[0] || !b[1])
    return 1;
  static const char *const cfgs[2] = {
      "{\"loadBalancingConfig\":[{\"round_robin\":{}}]}",
      "{\"loadBalancingConfig\":[{\"round_robin\":{}}],"
      "\"methodConfig\":[{\"name\":[{\"service\":\"grit.demo.Echo\"}],"
      "\"hedgingPolicy\":{\"maxAttempts\":3,\"hedgingDelay\":\"0.02s\"}}]}"};
  static const char *const titles[2] = {"no policy:",
                                        "hedgingDelay 20 ms, maxAttempts 3:"};
  printf("  %-35s %9s %12s %12s  %s\n", "500 calls, 8 in flight", "p50", "p99",
         "p999", "requests sent");
  tool_pcts p[2];
  uint64_t ok[2], hedges[2];
  for (int i = 0; i < 2; i++) {
    grit_channel *ch = scene_channel(b, 2, cfgs[i]);
    if (!ch)
      return 1;
    wait_ready(ch);
    size_t before =
        h2s_server_request_count(b[0]) + h2s_server_request_count(b[1]);
    demo_tally t;
    run_async(ch, SLOW, 500, 8, &t);
    grit_channel_stats st = GRIT_CHANNEL_STATS_INIT;
    grit_channel_get_stats(ch, &st);
    size_t sent = h2s_server_request_count(b[0]) +
                  h2s_server_request_count(b[1]) - before;
    p[i] = tool_percentiles(t.lat_us, t.n);
    ok[i] = t.codes[0];
    hedges[i] = st.hedges;
    printf("  %-35s %6.2f ms %9.2f ms %9.2f ms  %zu (%" PRIu64
           " hedges, +%.0f%%)\n",
           titles[i], ms(p[i].p50), ms(p[i].p99), ms(p[i].p999), sent,
           st.hedges, 100.0 * (double)st.hedges / 500.0);
    grit_channel_destroy(ch);
  }
  h2s_server_stop(b[0]);
  h2s_server_stop(b[1]);
  return ok[0] == 500 && ok[1] == 500 && hedges[0] == 0 && hedges[1] > 0 &&
                 p[0].p99 >= 150000 && p[1].p99 * 2 < p[0].p99
             ? 0
             : 1;
}

void demo_usage(FILE *f) {
  fprintf(f, "usage: grit demo\n"
             "starts two gRPC backends inside this process and runs scenes "
             "against\nthem: load spread, a bidi stream, a backend restart, "
             "failing calls,\nretries, retry throttling and hedging; then "
             "outlier detection and health\nchecking over three more, and "
             "exactly-once CreateGroup calls under\nhedging and retries with "
             "a dedup store (about 12 s); each scene checks\nits outcome\n");
}

int cmd_demo(int argc, char **argv) {
  if (argc == 2 && tool_is_help(argv[1])) {
    demo_usage(stdout);
    return TOOL_EXIT_OK;
  }
  if (argc != 1) {
    demo_usage(stderr);
    return TOOL_EXIT_USAGE;
  }
  h2s_server *a = NULL, *b = NULL;
  if (start_backends(&a, &b) != 0)
    return 1;
  printf("grit %s demo: two gRPC backends embedded in this process\n",
         GRIT_VERSION);
  grit_channel *ch = demo_channel(a, b);
  if (!ch)
    return 1;
  wait_ready(ch);
  int rc = 0;
  demo_tally t;

  printf("1. Unary calls spread over both backends\n");
  run_unary(ch, 400, 2000, &t);
  print_tally("400 sequential unary calls:", &t, ch);
  rc |= t.codes[0] != 400;
  count_peers(ch, 40, &t);
  print_peers("40 calls per backend:", &t);

  printf("\n2. Streaming\n");
  rc |= scene_streaming(ch);

  printf("\n3. A backend goes away and comes back\n");
  h2s_server_kill(a);
  count_peers(ch, 40, &t);
  print_peers("backend A killed, 40 calls:", &t);
  h2s_server_restart(a);
  usleep(700 * 1000); /* past the 500 ms max reconnect backoff */
  count_peers(ch, 40, &t);
  print_peers("backend A restarted, 40 calls:", &t);

  printf("\n4. Failures keep their status and message\n");
  scene_errors(a);
  scene_errors(b);
  run_unary(ch, 6, 100, &t);
  print_tally("6 calls, 100 ms deadline:", &t, ch);
  printf("  (Trailers-Only UNAVAILABLE, a 300 ms delay past the deadline,\n"
         "   PERMISSION_DENIED: one of each per backend. Retries come with "
         "a retry policy.)\n");

  grit_channel_destroy(ch);
  h2s_server_stop(a);
  h2s_server_stop(b);

  printf("\n5. A flaky backend: every 3rd request fails UNAVAILABLE\n");
  rc |= scene_flaky();
  printf("\n6. Retry throttling stops a retry storm (a backend failing "
         "every call)\n");
  rc |= scene_storm();
  printf("\n7. Hedging trims the tail (2 backends, 1 request in 10 takes "
         "200 ms)\n");
  rc |= scene_hedging();
  printf("\n8. Outlier detection ejects a backend failing 60 %% of calls "
         "(3 backends)\n");
  rc |= demo_scene_outlier();
  printf("\n9. Health checking: a backend turns NOT_SERVING mid-run\n");
  rc |= demo_scene_health();
  printf("\n10. Exactly-once CreateGroup under hedging and retries (two "
         "replicas,\n    one dedup store)\n");
  rc |= demo_scene_dedup(200, NULL);
  printf("\n%s\n", rc ? "demo: FAILED" : "demo: all good");
  return rc;
}
