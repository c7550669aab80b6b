/*
 * DNS that stays fresh and fails visibly (issue 28 part 4, SPEC OP-04,
 * DNS-05, DNS-07, DNS-10), against a scripted UDP DNS responder
 * (test/peers/dnsresp.h, whose answers' TTL the test sets) and dnsmasq
 * (test/peers/dnsmasq.h), with h2server backends:
 *  - a healthy, connected channel resolves again when the answers' TTL
 *    runs out, so a changed TXT config reaches it without a connection
 *    drop; never more often than the minimum re-resolution interval, and
 *    the max config age stays the ceiling;
 *  - a DNS server that reads queries and never answers fails a lookup
 *    within GRIT_ARG_DNS_LOOKUP_TIMEOUT_MS (default 10 s), counted, logged
 *    once per run of failures, and named in the call's error;
 *  - a deleted TXT record is a NOTICE naming the policies that went away,
 *    with a wall-clock ISO 8601 timestamp.
 *
 * Each case starts its own backend and responder and stops both. Every
 * wait is bounded. Upper time bounds include generous slack for valgrind
 * on a busy machine; the only lower bounds are on timers grit itself runs.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "test/behaviour/bh.h"
#include "test/behaviour/metric.h"
#include "test/peers/dnsmasq.h"
#include "test/peers/dnsresp.h"

#define FAST "/test.S/Fast"
#define SLACK_MS 4000 /* valgrind on 2 busy cores */

static dnsr g_dns;
static dnsm g_dnsm;
static h2s_server *g_srv;

static void sleep_ms(unsigned ms) {
  usleep(ms * 1000u);
}

static void teardown(void) {
  dnsr_stop(&g_dns);
  dnsm_stop(&g_dnsm);
  h2s_server_stop(g_srv);
  g_srv = NULL;
}

/* A fresh echo backend and a responder answering A 127.0.0.1 and TXT
 * "grpc_config=<txt>" (NULL: NXDOMAIN), every record with |ttl|. */
static bool fresh(const char *txt, uint32_t ttl) {
  teardown();
  g_srv = bh_server(NULL);
  char v[4096];
  if (txt)
    snprintf(v, sizeof(v), "grpc_config=%s", txt);
  if (!g_srv || dnsr_start(&g_dns, "127.0.0.1", txt ? v : NULL) != 0)
    return false;
  dnsr_set_ttl(&g_dns, ttl);
  return true;
}

typedef struct cb_log {
  pthread_mutex_t mu;
  int n;
  char last_json[1024];
} cb_log;

static void on_config(grit_channel *ch, const grit_service_config_info *info,
                      void *ud) {
  cb_log *l = ud;
  pthread_mutex_lock(&l->mu);
  l->n++;
  snprintf(l->last_json, sizeof(l->last_json), "%s",
           info->json ? info->json : "");
  pthread_mutex_unlock(&l->mu);
}

/* Wait until the config in force (per the callback) contains |needle|;
 * returns the monotonic ms it was seen, or 0 after |timeout_ms|. */
static uint64_t wait_config(cb_log *l, const char *needle, int timeout_ms) {
  uint64_t end = test_now_ms() + (uint64_t)timeout_ms;
  do {
    pthread_mutex_lock(&l->mu);
    bool has = strstr(l->last_json, needle) != NULL;
    pthread_mutex_unlock(&l->mu);
    if (has)
      return test_now_ms();
    sleep_ms(5);
  } while (test_now_ms() < end);
  return 0;
}

typedef struct ch_opts {
  const char *server;      /* NULL: the scripted responder */
  bool txt;                /* GRIT_ARG_DNS_ENABLE_TXT */
  int64_t reresolve_ms;    /* 0: default; -1: none */
  int64_t max_age_ms;      /* 0: off */
  int64_t lookup_ms;       /* 0: default */
  int use_ttl;             /* -1: default */
  const char *default_cfg; /* GRIT_ARG_SERVICE_CONFIG */
  cb_log *log;
} ch_opts;

static grit_channel *channel(const ch_opts *o) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel_args_set_string(a, GRIT_ARG_DNS_SERVER,
                               o->server ? o->server : g_dns.server);
  if (o->txt)
    grit_channel_args_set_int(a, GRIT_ARG_DNS_ENABLE_TXT, 1);
  if (o->reresolve_ms) /* -1: 0, no minimum interval */
    grit_channel_args_set_int(a, GRIT_ARG_DNS_MIN_RERESOLVE_MS,
                              o->reresolve_ms < 0 ? 0 : o->reresolve_ms);
  if (o->max_age_ms)
    grit_channel_args_set_int(a, GRIT_ARG_MAX_CONFIG_AGE_MS, o->max_age_ms);
  if (o->lookup_ms)
    grit_channel_args_set_int(a, GRIT_ARG_DNS_LOOKUP_TIMEOUT_MS, o->lookup_ms);
  if (o->use_ttl >= 0)
    grit_channel_args_set_int(a, GRIT_ARG_DNS_USE_TTL, o->use_ttl);
  if (o->default_cfg)
    grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, o->default_cfg);
  if (o->log)
    grit_channel_args_set_config_watcher(a, on_config, o->log);
  char target[128];
  snprintf(target, sizeof(target), "dns:///svc.test:%u",
           h2s_server_port(g_srv));
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, a, &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel %s: %s: %s\n", target, d.path, d.reason);
  grit_channel_args_destroy(a);
  return ch;
}

static grit_channel_stats stats(grit_channel *ch) {
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT; /* docs/abi.md */
  grit_channel_get_stats(ch, &s);
  return s;
}

static uint64_t server_connections(void) {
  h2s_stats s;
  h2s_server_get_stats(g_srv, &s);
  return s.connections;
}

#define MC_TIMEOUT(t)                                                          \
  "{\"methodConfig\":[{\"name\":[{\"service\":\"test.S\"}],\"timeout\":\"" t   \
  "\"}]}"
#define TXT_OF(t) "[{\"serviceConfig\":" MC_TIMEOUT(t) "}]"

/* ---- stderr capture: grit's NOTICE lines, written on its loop thread ---- */

static int g_saved_err = -1;
static char g_err_path[64];

static void capture_start(void) {
  snprintf(g_err_path, sizeof(g_err_path), "/tmp/grit-dnsfresh-XXXXXX");
  int fd = mkstemp(g_err_path);
  fflush(stderr);
  g_saved_err = dup(2);
  dup2(fd, 2);
  close(fd);
}

/* Restore stderr; the captured text (malloc'ed, NUL-terminated), which is
 * also echoed to the real stderr. */
static char *capture_stop(void) {
  fflush(stderr);
  dup2(g_saved_err, 2);
  close(g_saved_err);
  g_saved_err = -1;
  FILE *f = fopen(g_err_path, "r");
  char *text = calloc(1, 1 << 16);
  if (f) {
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    text[n] = '\0';
    fclose(f);
  }
  unlink(g_err_path);
  fprintf(stderr, "%s", text);
  return text;
}

static int count_of(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* ---- OP-04: TTLs honoured ---- */

/* The scripted responder's records live 1 s; the minimum interval is
 * 500 ms. A connected channel that makes no call sees a changed TXT config
 * within about TTL + interval, over the connection it already has. */
static void test_ttl_refresh_txt_change(void) {
  ASSERT(fresh(TXT_OF("3s"), 1));
  cb_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
  grit_channel *ch = channel(
      &(ch_opts){.txt = true, .reresolve_ms = 500, .use_ttl = -1, .log = &l});
  ASSERT_EQ(bh_unary(ch, FAST, "ping", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_CMP(wait_config(&l, "\"3s\"", 3000), >, 0);
  ASSERT_EQ(server_connections(), 1);
  for (int round = 0; round < 2; round++) {
    const char *want = round ? "\"5s\"" : "\"4s\"";
    dnsr_set_txt(&g_dns, DNSR_ANSWER,
                 round ? "grpc_config=" TXT_OF("5s")
                       : "grpc_config=" TXT_OF("4s"));
    uint64_t t0 = test_now_ms();
    uint64_t seen = wait_config(&l, want, 1000 + 500 + SLACK_MS);
    ASSERT_CMP(seen, >, 0);
    fprintf(stderr, "  config %s seen %llu ms after the TXT changed\n", want,
            (unsigned long long)(seen - t0));
  }
  /* The same connection all along: no drop was needed. */
  ASSERT_EQ(server_connections(), 1);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_READY);
  ASSERT_EQ(stats(ch).config_updates, 3);
  grit_channel_destroy(ch);
  teardown();
}

/* TTL 0 means "at once": still no more than one resolution per minimum
 * interval (1500 ms here), on a channel that stays connected; and with no
 * minimum interval at all, no more than one a second (TTLs are whole
 * seconds), never a loop. */
static void test_ttl_floor_is_min_interval(void) {
  ASSERT(fresh(NULL, 0));
  static const int64_t intervals[] = {1500, 0};
  for (size_t k = 0; k < 2; k++) {
    grit_channel *ch = channel(&(ch_opts){
        .reresolve_ms = intervals[k] ? intervals[k] : -1, .use_ttl = -1});
    ASSERT_EQ(bh_unary(ch, FAST, "ping", 5000, NULL), GRIT_STATUS_OK);
    uint64_t l0 = stats(ch).dns_lookups;
    uint64_t t0 = test_now_ms();
    sleep_ms(3200);
    uint64_t l1 = stats(ch).dns_lookups;
    uint64_t span = test_now_ms() - t0;
    uint64_t floor_ms = intervals[k] ? (uint64_t)intervals[k] : 1000;
    fprintf(stderr, "  interval %lld ms: %llu lookups in %llu ms\n",
            (long long)intervals[k], (unsigned long long)(l1 - l0),
            (unsigned long long)span);
    ASSERT_CMP(l1 - l0, >=, 1);                   /* refreshed, connected */
    ASSERT_CMP(l1 - l0, <=, span / floor_ms + 1); /* never more often */
    grit_channel_destroy(ch);
  }
  ASSERT_EQ(server_connections(), 2); /* one per channel, none dropped */
  teardown();
}

/* A long TTL is honoured too: no lookup before it runs out, however short
 * the minimum interval; GRIT_ARG_MAX_CONFIG_AGE_MS stays the ceiling; and
 * GRIT_ARG_DNS_USE_TTL 0 switches TTL refresh off. */
static void test_ttl_long_and_ceiling(void) {
  ASSERT(fresh(NULL, 3600));
  grit_channel *ch = channel(&(ch_opts){.reresolve_ms = 100, .use_ttl = -1});
  ASSERT_EQ(bh_unary(ch, FAST, "ping", 5000, NULL), GRIT_STATUS_OK);
  unsigned a0 = dnsr_count_a(&g_dns);
  sleep_ms(1500);
  ASSERT_EQ(dnsr_count_a(&g_dns), a0);
  ASSERT_EQ(stats(ch).dns_lookups, 1);
  grit_channel_destroy(ch);

  ch = channel(
      &(ch_opts){.reresolve_ms = 100, .max_age_ms = 300, .use_ttl = -1});
  ASSERT_EQ(bh_unary(ch, FAST, "ping", 5000, NULL), GRIT_STATUS_OK);
  uint64_t end = test_now_ms() + 300 + SLACK_MS;
  while (stats(ch).dns_lookups < 3 && test_now_ms() < end)
    sleep_ms(10);
  ASSERT_CMP(stats(ch).dns_lookups, >=, 3); /* the ceiling, not the TTL */
  grit_channel_destroy(ch);

  dnsr_set_ttl(&g_dns, 0);
  ch = channel(&(ch_opts){.reresolve_ms = 100, .use_ttl = 0});
  ASSERT_EQ(bh_unary(ch, FAST, "ping", 5000, NULL), GRIT_STATUS_OK);
  sleep_ms(1000);
  ASSERT_EQ(stats(ch).dns_lookups, 1); /* off: only on request */
  grit_channel_destroy(ch);
  teardown();
}

/* The same with dnsmasq: records with local-ttl=1, changed by rewriting
 * its configuration and restarting it on the same port (SIGHUP does not
 * re-read txt-record lines). The channel keeps its one connection. */
static void test_ttl_refresh_dnsmasq(void) {
  teardown();
  g_srv = bh_server(NULL);
  ASSERT_NOT_NULL(g_srv);
#define DNSM_RECORDS(t)                                                        \
  "local-ttl=1\n"                                                              \
  "host-record=svc.test,127.0.0.1\n"                                           \
  "txt-record=_grpc_config.svc.test,\"grpc_config=[{\\\"serviceConfig\\\":"    \
  "{\\\"methodConfig\\\":[{\\\"name\\\":[{\\\"service\\\":\\\"test.S\\\"}],"   \
  "\\\"timeout\\\":\\\"" t "\\\"}]}}]\"\n"
  if (dnsm_start(&g_dnsm, DNSM_RECORDS("3s")) != 0) {
    fprintf(stderr, "  no dnsmasq: case skipped\n");
    teardown();
    return;
  }
  cb_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
  grit_channel *ch = channel(&(ch_opts){.server = g_dnsm.server,
                                        .txt = true,
                                        .reresolve_ms = 500,
                                        .use_ttl = -1,
                                        .log = &l});
  ASSERT_EQ(bh_unary(ch, FAST, "ping", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_CMP(wait_config(&l, "\"3s\"", 3000), >, 0);
  ASSERT_EQ(dnsm_restart(&g_dnsm, DNSM_RECORDS("4s")), 0);
  uint64_t t0 = test_now_ms();
  /* A refresh that landed while dnsmasq was restarting failed and backs
   * off (DNS-05: 1 s, then 1.6 s, ...) before the next one. */
  uint64_t seen = wait_config(&l, "\"4s\"", 1000 + 500 + 2600 + SLACK_MS);
  ASSERT_CMP(seen, >, 0);
  fprintf(stderr, "  dnsmasq: config seen %llu ms after the restart\n",
          (unsigned long long)(seen - t0));
  ASSERT_EQ(server_connections(), 1);
  ASSERT_EQ(bh_unary(ch, FAST, "ping", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(server_connections(), 1);
  grit_channel_destroy(ch);
  teardown();
#undef DNSM_RECORDS
}

/* ---- OP-04: a DNS server that never answers ---- */

/* The responder reads every query and answers none. A call without a
 * deadline on a new channel ends within the lookup bound (1 s here),
 * UNAVAILABLE, its message naming DNS resolution; the failure is counted
 * (stats and metric) and logged once, however many lookups fail; and once
 * when DNS answers again. */
static void test_blackhole_bounded(void) {
  ASSERT(fresh(NULL, 0));
  dnsr_set_a(&g_dns, DNSR_DROP);
  capture_start();
  grit_channel *ch = channel(&(ch_opts){.lookup_ms = 1000, .use_ttl = -1});
  grit_status st = {0};
  uint64_t t0 = test_now_ms();
  grit_status_code c = bh_unary(ch, FAST, "ping", 0, &st);
  uint64_t el = test_now_ms() - t0;
  /* Several failures (backoff 1 s, 1.6 s): still one line. */
  uint64_t end = test_now_ms() + 3000 + 3 * SLACK_MS;
  while (stats(ch).dns_lookup_failures < 3 && test_now_ms() < end)
    sleep_ms(20);
  uint64_t failures = stats(ch).dns_lookup_failures;
  double metric = test_metric(ch, "grit_client_dns_lookup_failures_total");
  dnsr_set_a(&g_dns, DNSR_ANSWER);
  end = test_now_ms() + 3000 + SLACK_MS;
  grit_status_code ok = GRIT_STATUS_UNAVAILABLE;
  while (ok != GRIT_STATUS_OK && test_now_ms() < end) {
    ok = bh_unary(ch, FAST, "ping", 1000, NULL);
    if (ok != GRIT_STATUS_OK)
      sleep_ms(50);
  }
  char *err = capture_stop();
  fprintf(stderr, "  call ended after %llu ms: %s\n", (unsigned long long)el,
          st.message ? st.message : "");
  ASSERT_EQ(c, GRIT_STATUS_UNAVAILABLE);
  ASSERT_CMP(el, >=, 900); /* grit's own timer, not a lucky failure */
  ASSERT_CMP(el, <, 1000 + SLACK_MS);
  ASSERT_NOT_NULL(st.message);
  ASSERT_NOT_NULL(strstr(st.message,
                         "DNS resolution failed for svc.test: timeout "
                         "after 1000 ms"));
  grit_status_free(&st);
  ASSERT_CMP(failures, >=, 3);
  ASSERT_CMP(metric, >=, 3);
  ASSERT_EQ(ok, GRIT_STATUS_OK);
  ASSERT_EQ(count_of(err, "grit dns: DNS resolution failed for svc.test"), 1);
  ASSERT_EQ(count_of(err, "grit dns: DNS resolution for svc.test succeeds"), 1);
  /* The NOTICE line: "W <ISO 8601 UTC> grit dns: ...". */
  const char *line = strstr(err, "W 20");
  ASSERT_NOT_NULL(line);
  ASSERT_EQ(line[12], 'T');
  ASSERT_EQ(line[25], 'Z');
  free(err);
  grit_channel_destroy(ch);
  teardown();
}

/* The default bound is 10 s: a call without a deadline on a new channel
 * ends then (c-ares alone: about 75 s). */
static void test_blackhole_default_bound(void) {
  ASSERT(fresh(NULL, 0));
  dnsr_set_a(&g_dns, DNSR_DROP);
  grit_channel *ch = channel(&(ch_opts){.use_ttl = -1});
  grit_status st = {0};
  uint64_t t0 = test_now_ms();
  ASSERT_EQ(bh_unary(ch, FAST, "ping", 0, &st), GRIT_STATUS_UNAVAILABLE);
  uint64_t el = test_now_ms() - t0;
  fprintf(stderr, "  ended after %llu ms: %s\n", (unsigned long long)el,
          st.message);
  ASSERT_CMP(el, >=, 9900);
  ASSERT_CMP(el, <, 10000 + SLACK_MS);
  ASSERT_NOT_NULL(strstr(st.message, "DNS resolution failed for svc.test: "
                                     "timeout after 10000 ms"));
  grit_status_free(&st);
  ASSERT_EQ(stats(ch).dns_lookup_failures, 1);
  grit_channel_destroy(ch);
  teardown();
}

/* A channel that has addresses keeps them through a silent DNS server
 * (DNS-08): the refresh fails within the bound, is counted, and calls go
 * on over the connection. */
static void test_blackhole_keeps_addresses(void) {
  ASSERT(fresh(NULL, 0));
  grit_channel *ch =
      channel(&(ch_opts){.reresolve_ms = 100, .lookup_ms = 300, .use_ttl = -1});
  ASSERT_EQ(bh_unary(ch, FAST, "ping", 5000, NULL), GRIT_STATUS_OK);
  dnsr_set_a(&g_dns, DNSR_DROP);
  uint64_t end = test_now_ms() + 400 + SLACK_MS;
  while (stats(ch).dns_lookup_failures < 1 && test_now_ms() < end)
    sleep_ms(10);
  ASSERT_CMP(stats(ch).dns_lookup_failures, >=, 1);
  for (int i = 0; i < 5; i++)
    ASSERT_EQ(bh_unary(ch, FAST, "ping", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(server_connections(), 1);
  grit_channel_destroy(ch);
  teardown();
}

/* ---- DNS-10: a deleted TXT record says what went away ---- */

static void test_txt_deleted_notice(void) {
  ASSERT(fresh("[{\"serviceConfig\":{\"methodConfig\":[{\"name\":[{"
               "\"service\":\"test.S\"}],\"retryPolicy\":{\"maxAttempts\":3,"
               "\"initialBackoff\":\"0.1s\",\"maxBackoff\":\"1s\","
               "\"backoffMultiplier\":2,\"retryableStatusCodes\":["
               "\"UNAVAILABLE\"]}}]}}]",
               0));
  cb_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
  capture_start();
  grit_channel *ch = channel(
      &(ch_opts){.txt = true, .reresolve_ms = 200, .use_ttl = -1, .log = &l});
  grit_status_code c = bh_unary(ch, FAST, "ping", 5000, NULL);
  uint64_t got = wait_config(&l, "retryPolicy", 3000);
  dnsr_set_txt(&g_dns, DNSR_NXDOMAIN, NULL);
  uint64_t end = test_now_ms() + 200 + SLACK_MS;
  while (stats(ch).config_updates < 2 && test_now_ms() < end)
    sleep_ms(10);
  uint64_t updates = stats(ch).config_updates;
  grit_channel_destroy(ch);
  char *err = capture_stop();
  ASSERT_EQ(c, GRIT_STATUS_OK);
  ASSERT_CMP(got, >, 0);
  ASSERT_EQ(updates, 2);
  const char *line = strstr(err, "service config from DNS dropped");
  ASSERT_NOT_NULL(line);
  ASSERT_NOT_NULL(strstr(line, "now using no config; policies lost: "
                               "retryPolicy (3 attempts) for /test.S/* "
                               "(every method of test.S)"));
  ASSERT_EQ(count_of(err, "service config from DNS dropped"), 1);
  free(err);
  teardown();
}

static const test_case tests[] = {
    {"ttl_refresh_txt_change", test_ttl_refresh_txt_change},
    {"ttl_floor_is_min_interval", test_ttl_floor_is_min_interval},
    {"ttl_long_and_ceiling", test_ttl_long_and_ceiling},
    {"ttl_refresh_dnsmasq", test_ttl_refresh_dnsmasq},
    {"blackhole_bounded", test_blackhole_bounded},
    {"blackhole_default_bound", test_blackhole_default_bound},
    {"blackhole_keeps_addresses", test_blackhole_keeps_addresses},
    {"txt_deleted_notice", test_txt_deleted_notice},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  int rv = test_main(tests, argc, argv);
  teardown();
  return rv;
}
