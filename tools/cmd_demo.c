/* grit demo: start local gRPC backends inside this process (the
 * test/h2server engine) and show calls succeeding against them: load
 * spread, a streaming call, a backend going away and coming back, and the
 * statuses of failing calls. */
#include "tools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h2server.h"

#define METHOD "/grit.demo.Echo/Unary"

typedef struct demo_tally {
  uint64_t lat_us[1000];
  size_t n;
  uint64_t codes[GRIT_STATUS_COUNT];
  char peers[4][128];
  uint64_t peer_calls[4];
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
    grit_unary_call(ch, METHOD, "hello", 5, &o, &resp, &st);
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
    grit_call_info info;
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

int cmd_demo(int argc, char **argv) {
  (void)argc;
  (void)argv;
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
  printf("\n%s\n", rc ? "demo: FAILED" : "demo: all good");
  return rc;
}
