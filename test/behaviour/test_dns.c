/*
 * DNS resolution and service config from TXT records, against dnsmasq on a
 * loopback port (SPEC DNS-01..DNS-06, SC-03, SC-07), and the service config
 * swap on re-resolution: a call keeps the config it started with, new calls
 * see the new one, an invalid update leaves the old one in force.
 *
 * Each case starts its own h2server backend and dnsmasq (test/peers/
 * dnsmasq.h) and stops both; dnsmasq logs every query (log-queries), so
 * cases can assert which TXT queries were made. Every wait is bounded.
 */
#include <pthread.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "test/behaviour/bh.h"
#include "test/peers/dnsmasq.h"

#define SLOW "/test.S/Slow" /* the backend answers after SLOW_MS */
#define FAST "/test.S/Fast" /* echo at once */
#define SLOW_MS 1000

static dnsm g_dns;        /* global: the atexit cleanup may see it */
static h2s_server *g_srv; /* the backend of the current case */
static char g_rec[8192];  /* dnsmasq records of the current case */
/* More backends of a case on 127.0.0.2, .3 (g_srv's port), so one name
 * with several A records reaches several servers. */
#define MORE_MAX 2
static h2s_server *g_more[MORE_MAX];

/* ---- helpers ---- */

static void sleep_ms(unsigned ms) {
  usleep(ms * 1000u);
}

static void stop_more(void) {
  for (int i = 0; i < MORE_MAX; i++) {
    h2s_server_stop(g_more[i]);
    g_more[i] = NULL;
  }
}

/* Stop what a failed case may have left behind, then start a backend
 * whose SLOW method answers after |slow_ms|. */
static h2s_server *fresh(uint32_t slow_ms) {
  dnsm_stop(&g_dns);
  h2s_server_stop(g_srv);
  stop_more();
  char script[128];
  snprintf(script, sizeof(script), "path=%s delay=%u repeat=forever", SLOW,
           (unsigned)slow_ms);
  g_srv = bh_server(script);
  g_rec[0] = '\0';
  return g_srv;
}

/* fresh(), plus |n| more backends like it on 127.0.0.2, 127.0.0.3. Every
 * backend is back[i], on 127.0.0.(i+1). */
static bool fresh_many(uint32_t slow_ms, int n, h2s_server **back) {
  back[0] = fresh(slow_ms);
  if (!back[0])
    return false;
  char script[128], host[32];
  snprintf(script, sizeof(script), "path=%s delay=%u repeat=forever", SLOW,
           (unsigned)slow_ms);
  for (int i = 0; i < n && i < MORE_MAX; i++) {
    snprintf(host, sizeof(host), "127.0.0.%d", i + 2);
    h2s_config cfg = {.quiet = true,
                      .host = host,
                      .port = h2s_server_port(g_srv),
                      .script_text = script};
    if (h2s_server_start(&cfg, &g_more[i]) != 0)
      return false;
    back[i + 1] = g_more[i];
  }
  return true;
}

static void teardown(void) {
  dnsm_stop(&g_dns);
  h2s_server_stop(g_srv);
  g_srv = NULL;
  stop_more();
}

/* Append one conf-file line to g_rec. */
static void rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rec(const char *fmt, ...) {
  size_t k = strlen(g_rec);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_rec + k, sizeof(g_rec) - k, fmt, ap);
  va_end(ap);
  k = strlen(g_rec);
  if (k + 1 < sizeof(g_rec)) {
    g_rec[k] = '\n';
    g_rec[k + 1] = '\0';
  }
}

/* txt-record=<name>,"<s1>"[,"<s2>"...]: each string quoted, with '"' and
 * '\' escaped, so commas in JSON stay inside one string. */
static void rec_txt(const char *name, int n, ...) {
  char line[4096];
  size_t k = (size_t)snprintf(line, sizeof(line), "txt-record=%s", name);
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    const char *s = va_arg(ap, const char *);
    k += (size_t)snprintf(line + k, sizeof(line) - k, ",\"");
    for (; *s && k + 4 < sizeof(line); s++) {
      if (*s == '"' || *s == '\\')
        line[k++] = '\\';
      line[k++] = *s;
    }
    k += (size_t)snprintf(line + k, sizeof(line) - k, "\"");
  }
  va_end(ap);
  rec("%s", line);
}

/* The usual records: svc.test A 127.0.0.1 and, if |json| is set, the
 * _grpc_config.svc.test record "grpc_config=<json>". */
static void rec_svc(const char *json) {
  rec("log-queries");
  rec("host-record=svc.test,127.0.0.1");
  if (json) {
    char v[4096];
    snprintf(v, sizeof(v), "grpc_config=%s", json);
    rec_txt("_grpc_config.svc.test", 1, v);
  }
}

/* Choices with one serviceConfig whose default method config has
 * |timeout| ("0.2s"). */
static const char *cfg_timeout(char *buf, size_t len, const char *timeout) {
  snprintf(buf, len,
           "[{\"serviceConfig\":{\"methodConfig\":[{\"name\":[{}],"
           "\"timeout\":\"%s\"}]}}]",
           timeout);
  return buf;
}

typedef struct chan_opts {
  const char *host; /* NULL: svc.test */
  bool txt;
  const char *default_config;
  bool ignore_resolver_config;
  int reresolve_ms;       /* 0: default */
  bool bare;              /* "host:port" instead of "dns:///host:port" */
  int connect_timeout_ms; /* 0: default */
} chan_opts;

static grit_channel *dns_channel(const chan_opts *o) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel_args_set_string(a, GRIT_ARG_DNS_SERVER, g_dns.server);
  if (o->txt)
    grit_channel_args_set_int(a, GRIT_ARG_DNS_ENABLE_TXT, 1);
  if (o->default_config)
    grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, o->default_config);
  if (o->ignore_resolver_config)
    grit_channel_args_set_int(a, GRIT_ARG_IGNORE_RESOLVER_CONFIG, 1);
  if (o->reresolve_ms)
    grit_channel_args_set_int(a, GRIT_ARG_DNS_MIN_RERESOLVE_MS,
                              o->reresolve_ms);
  if (o->connect_timeout_ms)
    grit_channel_args_set_int(a, GRIT_ARG_MIN_CONNECT_TIMEOUT_MS,
                              o->connect_timeout_ms);
  /* These cases drive re-resolution themselves (GOAWAY, connection loss,
   * the max config age), so that is what they test: no TTL refresh (its
   * records have TTL 0), which test_dns_fresh.c covers (SPEC OP-04). */
  grit_channel_args_set_int(a, GRIT_ARG_DNS_USE_TTL, 0);
  /* Fail fast on connection errors; tests never wait out a real backoff. */
  grit_channel_args_set_int(a, GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  grit_channel_args_set_int(a, GRIT_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  char target[300];
  snprintf(target, sizeof(target), "%s%s:%u", o->bare ? "" : "dns:///",
           o->host ? o->host : "svc.test", h2s_server_port(g_srv));
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, a, &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel %s: %s: %s\n", target, d.path, d.reason);
  grit_channel_args_destroy(a);
  return ch;
}

/* grpc-timeout value ("199m", "2S", "199999u") in ms, rounded up; -1 when
 * absent or unparsable. */
static int64_t timeout_hdr_ms(const char *v) {
  if (!v || !*v)
    return -1;
  char *end;
  unsigned long long n = strtoull(v, &end, 10);
  if (end == v || end[1] != '\0')
    return -1;
  switch (*end) {
  case 'H':
    return (int64_t)n * 3600000;
  case 'M':
    return (int64_t)n * 60000;
  case 'S':
    return (int64_t)n * 1000;
  case 'm':
    return (int64_t)n;
  case 'u':
    return (int64_t)((n + 999) / 1000);
  case 'n':
    return (int64_t)((n + 999999) / 1000000);
  default:
    return -1;
  }
}

/* grpc-timeout of the server's last request, in ms (-1: none). */
static int64_t last_timeout_ms(void) {
  size_t n = h2s_server_request_count(g_srv);
  if (n == 0)
    return -2;
  return timeout_hdr_ms(h2s_server_request(g_srv, n - 1)->grpc_timeout);
}

/* A blocking unary call; |*elapsed| in ms. */
static grit_status_code call(grit_channel *ch, const char *method,
                             uint64_t timeout_ms, uint64_t *elapsed,
                             grit_status *st) {
  uint64_t t0 = test_now_ms();
  grit_status_code c = bh_unary(ch, method, "ping", timeout_ms, st);
  if (elapsed)
    *elapsed = test_now_ms() - t0;
  return c;
}

#define TXT_Q "query[TXT] _grpc_config.svc.test"

/* An asynchronous call's outcome. */
typedef struct async_res {
  pthread_mutex_t mu;
  bool done;
  grit_status_code code;
  char message[256];
  uint64_t done_ms;
} async_res;

static void async_cb(const grit_status *st, const uint8_t *resp,
                     size_t resp_len, const grit_call_info *info, void *ud) {
  async_res *r = ud;
  pthread_mutex_lock(&r->mu);
  r->code = st->code;
  snprintf(r->message, sizeof(r->message), "%s", st->message);
  r->done_ms = test_now_ms();
  r->done = true;
  pthread_mutex_unlock(&r->mu);
}

static bool async_wait(async_res *r, int timeout_ms) {
  uint64_t end = test_now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    pthread_mutex_lock(&r->mu);
    bool d = r->done;
    pthread_mutex_unlock(&r->mu);
    if (d)
      return true;
    if (test_now_ms() >= end)
      return false;
    sleep_ms(5);
  }
}

/* The config timeout new calls get, as the server saw it in grpc-timeout
 * of a FAST call with no call deadline (-1: none). */
static int64_t probe_timeout(grit_channel *ch) {
  grit_status_code c = call(ch, FAST, 0, NULL, NULL);
  if (c != GRIT_STATUS_OK)
    return -100 - (int64_t)c;
  return last_timeout_ms();
}

/* Probe until new calls see a config timeout in (lo, hi] ms. */
static bool wait_config_timeout(grit_channel *ch, int64_t lo, int64_t hi,
                                int timeout_ms) {
  uint64_t end = test_now_ms() + (uint64_t)timeout_ms;
  do {
    int64_t t = probe_timeout(ch);
    if (t > lo && t <= hi)
      return true;
    sleep_ms(20);
  } while (test_now_ms() < end);
  return false;
}

/* Wait (bounded) until |ch| is READY. */
static bool wait_ready(grit_channel *ch, int ms) {
  uint64_t end = test_now_ms() + (uint64_t)ms;
  grit_connectivity_state s = grit_channel_get_state(ch, true);
  while (s != GRIT_STATE_READY && test_now_ms() < end)
    s = grit_channel_wait_for_state_change(ch, s, 100);
  return s == GRIT_STATE_READY;
}

/* A TXT config with a 200 ms method timeout is applied to a call on a
 * fresh channel: DEADLINE_EXCEEDED at ~200 ms against a 1 s backend, and
 * the request carries grpc-timeout <= 200 ms. On a slow machine (valgrind)
 * the fresh channel may not connect within those 200 ms, so the call ends
 * before its request is sent; the header is then checked on a second call,
 * once the channel is READY. */
static void expect_timeout_applied(grit_channel *ch) {
  uint64_t el;
  size_t before = h2s_server_request_count(g_srv);
  grit_status_code c = call(ch, SLOW, 0, &el, NULL);
  ASSERT_EQ(c, GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_CMP(el, >=, 150);
  ASSERT_CMP(el, <, 900);
  if (!h2s_server_wait_requests(g_srv, before + 1, 1000)) {
    fprintf(stderr, "  (the first call ended before its request was sent)\n");
    ASSERT(wait_ready(ch, 5000));
    ASSERT_EQ(call(ch, SLOW, 0, &el, NULL), GRIT_STATUS_DEADLINE_EXCEEDED);
    ASSERT(h2s_server_wait_requests(g_srv, before + 1, 2000));
  }
  int64_t t = last_timeout_ms();
  ASSERT_CMP(t, >, 0);
  ASSERT_CMP(t, <=, 200);
}

/* The TXT config is not applied: the 1 s call succeeds, no grpc-timeout. */
static void expect_no_config(grit_channel *ch) {
  uint64_t el;
  grit_status_code c = call(ch, SLOW, 0, &el, NULL);
  ASSERT_EQ(c, GRIT_STATUS_OK);
  ASSERT_CMP(el, >=, SLOW_MS - 50);
  ASSERT_EQ(last_timeout_ms(), -1);
}

/* ---- A / AAAA and targets (DNS-05, DNS-06) ---- */

/* DNS-05/06: dns:///svc.test:PORT resolves through the configured server
 * to the backend on 127.0.0.1; the authority is the target's host:port. */
static void test_a_record(void) {
  fresh(SLOW_MS);
  rec_svc(NULL);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){0});
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(call(ch, FAST, 2000, NULL, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(g_srv), 1);
  char want[64];
  snprintf(want, sizeof(want), "svc.test:%u", h2s_server_port(g_srv));
  ASSERT_STR_EQ(h2s_server_request(g_srv, 0)->authority, want);
  ASSERT(dnsm_wait_log(&g_dns, "query[A] svc.test", 1, 1000));
  ASSERT_EQ(dnsm_log_count(&g_dns, "query[TXT]"),
            0); /* DNS-01: off by default */
  grit_channel_destroy(ch);
  teardown();
}

/* DNS-05: AAAA through c-ares: an IPv6-only name reaches a backend on ::1;
 * a name with both A and AAAA reaches a backend on 127.0.0.1 whichever
 * family is tried first. */
static void test_aaaa_record(void) {
  fresh(SLOW_MS);
  h2s_config cfg = {.quiet = true, .host = "::1"};
  h2s_server *v6 = NULL;
  if (h2s_server_start(&cfg, &v6) != 0) {
    fprintf(stderr, "  (no IPv6 loopback: skipping the ::1 part)\n");
  }
  rec("log-queries");
  rec("host-record=both.test,127.0.0.1,::1");
  if (v6)
    rec("host-record=v6.test,::1");
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){.host = "both.test"});
  ASSERT_EQ(call(ch, FAST, 3000, NULL, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(g_srv), 1);
  ASSERT(dnsm_wait_log(&g_dns, "query[AAAA] both.test", 1, 1000));
  grit_channel_destroy(ch);
  if (v6) {
    char target[64];
    snprintf(target, sizeof(target), "dns:///v6.test:%u", h2s_server_port(v6));
    grit_channel_args *a = NULL;
    grit_channel_args_create(&a);
    grit_channel_args_set_string(a, GRIT_ARG_DNS_SERVER, g_dns.server);
    ch = NULL;
    ASSERT_OK(grit_channel_create(NULL, target, a, NULL, &ch));
    grit_channel_args_destroy(a);
    ASSERT_EQ(bh_unary(ch, FAST, "x", 3000, NULL), GRIT_STATUS_OK);
    ASSERT_EQ(h2s_server_request_count(v6), 1);
    grit_channel_destroy(ch);
    h2s_server_stop(v6);
  }
  teardown();
}

/* DNS-05: NXDOMAIN fails calls UNAVAILABLE with a message naming the host,
 * and nothing reaches the backend. */
static void test_nxdomain(void) {
  fresh(SLOW_MS);
  rec_svc(NULL);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){.host = "nope.test"});
  grit_status st = {0};
  uint64_t el;
  ASSERT_EQ(call(ch, FAST, 3000, &el, &st), GRIT_STATUS_UNAVAILABLE);
  ASSERT_NOT_NULL(strstr(st.message, "nope.test"));
  ASSERT_CMP(el, <, 2000);
  grit_status_free(&st);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT_EQ(h2s_server_request_count(g_srv), 0);
  grit_channel_destroy(ch);
  teardown();
}

/* DNS-06: a bare host:port means dns. */
static void test_bare_host_port(void) {
  fresh(SLOW_MS);
  rec_svc(NULL);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){.bare = true});
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(call(ch, FAST, 2000, NULL, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(g_srv), 1);
  ASSERT(dnsm_wait_log(&g_dns, "query[A] svc.test", 1, 1000));
  grit_channel_destroy(ch);
  teardown();
}

/* ---- TXT service config (DNS-01..DNS-04, SC-03, SC-07) ---- */

/* DNS-02/03, SC-07: a TXT config's method timeout applies to the first
 * call of a fresh channel and to later ones. */
static void test_txt_timeout(void) {
  char cfg[512];
  fresh(SLOW_MS);
  rec_svc(cfg_timeout(cfg, sizeof(cfg), "0.2s"));
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){.txt = true});
  int before = test_failures;
  expect_timeout_applied(ch); /* the first call waits for the config */
  if (test_failures != before)
    return;
  expect_timeout_applied(ch);
  ASSERT_EQ(dnsm_log_count(&g_dns, TXT_Q), 1);
  grit_channel_destroy(ch);
  teardown();
}

/* SC-07: waitForReady from the TXT config: with the backend down a call
 * waits (DEADLINE_EXCEEDED) instead of failing UNAVAILABLE; without the
 * config it fails UNAVAILABLE. */
static void test_txt_wait_for_ready(void) {
  fresh(SLOW_MS);
  rec_svc("[{\"serviceConfig\":{\"methodConfig\":[{\"name\":[{\"service\":"
          "\"test.S\"}],\"waitForReady\":true}]}}]");
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  h2s_server_kill(g_srv); /* connections refused */
  grit_channel *ch = dns_channel(&(chan_opts){.txt = true});
  uint64_t el;
  ASSERT_EQ(call(ch, FAST, 500, &el, NULL), GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_CMP(el, >=, 450);
  grit_channel_destroy(ch);
  /* Control: the same without TXT fails fast. */
  ch = dns_channel(&(chan_opts){.txt = false});
  grit_status st = {0};
  ASSERT_EQ(call(ch, FAST, 2000, &el, &st), GRIT_STATUS_UNAVAILABLE);
  ASSERT_CMP(el, <, 1500);
  grit_status_free(&st);
  grit_channel_destroy(ch);
  /* With the backend back, the waiting call goes through. */
  ch = dns_channel(&(chan_opts){.txt = true});
  async_res r = {.mu = PTHREAD_MUTEX_INITIALIZER};
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 5000};
  ASSERT_OK(grit_unary_call_async(ch, FAST, "x", 1, &o, async_cb, &r));
  ASSERT(grit_channel_wait_for_state_change(ch, GRIT_STATE_CONNECTING, 2000) ==
             GRIT_STATE_TRANSIENT_FAILURE ||
         grit_channel_get_state(ch, false) == GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT(!r.done);
  ASSERT_OK(h2s_server_restart(g_srv));
  ASSERT(async_wait(&r, 3000));
  ASSERT_EQ(r.code, GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  teardown();
}

/* How many strings the first TXT answer for |name| has (-1: no answer). */
static int txt_string_count(const char *name) {
  /* One question and an EDNS0 OPT record (4096-byte UDP payload), so a
   * long answer is not truncated. */
  uint8_t q[320] = {0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1};
  size_t k = 12;
  const char *p = name;
  while (*p) {
    const char *dot = strchr(p, '.');
    size_t l = dot ? (size_t)(dot - p) : strlen(p);
    q[k++] = (uint8_t)l;
    memcpy(q + k, p, l);
    k += l;
    p += l + (dot ? 1 : 0);
  }
  q[k++] = 0;
  q[k++] = 0, q[k++] = 16, q[k++] = 0, q[k++] = 1;
  size_t qlen = k; /* the answer follows the question */
  static const uint8_t opt[] = {0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};
  memcpy(q + k, opt, sizeof(opt));
  k += sizeof(opt);
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(g_dns.port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sendto(s, q, k, 0, (struct sockaddr *)&a, sizeof(a));
  struct pollfd pf = {.fd = s, .events = POLLIN};
  uint8_t buf[4096];
  ssize_t n = -1;
  if (poll(&pf, 1, 1000) == 1)
    n = recv(s, buf, sizeof(buf), 0);
  close(s);
  /* header, question, then one answer: name ptr(2) type class ttl rdlen. */
  if (n < (ssize_t)(qlen + 12) || (buf[7] | buf[6] << 8) == 0)
    return -1;
  size_t rdlen = (size_t)(buf[qlen + 10] << 8 | buf[qlen + 11]);
  size_t off = qlen + 12, end = off + rdlen, count = 0;
  if (end > (size_t)n)
    return -1;
  while (off < end) {
    off += 1 + buf[off];
    count++;
  }
  return (int)count;
}

/* DNS-02: a config longer than 255 bytes is split over several strings of
 * one record (dnsmasq splits one long quoted string at 255 bytes itself;
 * the second record writes the strings explicitly) and grit joins them. */
static void test_txt_long_split(void) {
  char json[1024];
  size_t k = (size_t)snprintf(json, sizeof(json),
                              "[{\"serviceConfig\":{\"methodConfig\":[");
  for (int i = 0; i < 8; i++)
    k += (size_t)snprintf(json + k, sizeof(json) - k,
                          "{\"name\":[{\"service\":\"pad.Service%d\"}],"
                          "\"timeout\":\"%d.5s\"},",
                          i, i + 1);
  snprintf(json + k, sizeof(json) - k,
           "{\"name\":[{\"service\":\"test.S\"}],\"timeout\":\"0.2s\"}]}}]");
  ASSERT_CMP(strlen(json), >, 400);
  char v[1100];
  snprintf(v, sizeof(v), "grpc_config=%s", json);

  /* One long quoted string. */
  fresh(SLOW_MS);
  rec("log-queries");
  rec("host-record=svc.test,127.0.0.1");
  rec_txt("_grpc_config.svc.test", 1, v);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  ASSERT_CMP(txt_string_count("_grpc_config.svc.test"), >=, 2);
  grit_channel *ch = dns_channel(&(chan_opts){.txt = true});
  expect_timeout_applied(ch);
  grit_channel_destroy(ch);

  /* Explicit strings, split mid-token (inside a key and a value). */
  char a[200], b[200], c[1100];
  size_t la = 100, lb = 150;
  memcpy(a, v, la);
  a[la] = '\0';
  memcpy(b, v + la, lb);
  b[lb] = '\0';
  snprintf(c, sizeof(c), "%s", v + la + lb);
  fresh(SLOW_MS);
  rec("log-queries");
  rec("host-record=svc.test,127.0.0.1");
  rec_txt("_grpc_config.svc.test", 3, a, b, c);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  ASSERT_CMP(txt_string_count("_grpc_config.svc.test"), >=, 3);
  ch = dns_channel(&(chan_opts){.txt = true});
  expect_timeout_applied(ch);
  grit_channel_destroy(ch);
  teardown();
}

/* DNS-02: a record without the grpc_config= prefix is ignored: alone it
 * gives no config; next to a prefixed record the prefixed one counts. */
static void test_txt_no_prefix_ignored(void) {
  char cfg[512];
  fresh(SLOW_MS);
  rec("log-queries");
  rec("host-record=svc.test,127.0.0.1");
  char v[600];
  snprintf(v, sizeof(v), "grpc_cfg=%s", cfg_timeout(cfg, sizeof(cfg), "0.2s"));
  rec_txt("_grpc_config.svc.test", 1, v);
  rec_txt("_grpc_config.svc.test", 1, "v=spf1 -all");
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){.txt = true});
  expect_no_config(ch);
  ASSERT(dnsm_wait_log(&g_dns, TXT_Q, 1, 1000));
  grit_channel_destroy(ch);

  fresh(SLOW_MS);
  rec("log-queries");
  rec("host-record=svc.test,127.0.0.1");
  rec_txt("_grpc_config.svc.test", 1, v);
  snprintf(v, sizeof(v), "grpc_config=%s",
           cfg_timeout(cfg, sizeof(cfg), "0.2s"));
  rec_txt("_grpc_config.svc.test", 1, v);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  ch = dns_channel(&(chan_opts){.txt = true});
  expect_timeout_applied(ch);
  grit_channel_destroy(ch);
  teardown();
}

/* Run a channel with TXT on against a record holding |choices|; |applied|
 * says whether the 200 ms timeout must be in force. */
static void choice_case(const char *choices, bool applied) {
  int before = test_failures;
  fresh(SLOW_MS);
  rec_svc(choices);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){.txt = true});
  if (applied)
    expect_timeout_applied(ch);
  else
    expect_no_config(ch);
  if (test_failures != before)
    fprintf(stderr, "  choices: %s\n", choices);
  grit_channel_destroy(ch);
  teardown();
}

#define MC200 "\"methodConfig\":[{\"name\":[{}],\"timeout\":\"0.2s\"}]"

/* DNS-03/04: clientLanguage is matched case-insensitively against "c"; no
 * matching choice means no config; the first matching choice wins. */
static void test_txt_client_language(void) {
  choice_case("[{\"clientLanguage\":[\"go\",\"java\"],\"serviceConfig\":{" MC200
              "}}]",
              false);
  choice_case("[{\"clientLanguage\":[\"go\",\"C\"],\"serviceConfig\":{" MC200
              "}}]",
              true);
  choice_case("[{\"clientLanguage\":[\"go\"],\"serviceConfig\":{}},"
              "{\"clientLanguage\":[\"c\"],\"serviceConfig\":{" MC200 "}},"
              "{\"serviceConfig\":{}}]",
              true);
}

/* DNS-03: percentage 0 never matches, 100 always. */
static void test_txt_percentage(void) {
  choice_case("[{\"percentage\":0,\"serviceConfig\":{" MC200 "}}]", false);
  choice_case("[{\"percentage\":100,\"serviceConfig\":{" MC200 "}}]", true);
  choice_case("[{\"percentage\":0,\"serviceConfig\":{}},"
              "{\"percentage\":100,\"serviceConfig\":{" MC200 "}}]",
              true);
}

/* DNS-03: clientHostname is an exact match to gethostname(). */
static void test_txt_client_hostname(void) {
  char host[256] = "";
  ASSERT_OK(gethostname(host, sizeof(host) - 1));
  ASSERT(host[0] != '\0');
  char choices[1024];
  snprintf(choices, sizeof(choices),
           "[{\"clientHostname\":[\"not-%s\",\"%s\"],\"serviceConfig\":{" MC200
           "}}]",
           host, host);
  choice_case(choices, true);
  snprintf(choices, sizeof(choices),
           "[{\"clientHostname\":[\"not-%s\"],\"serviceConfig\":{" MC200 "}}]",
           host);
  choice_case(choices, false);
}

/* An invalid resolver config on a fresh channel: TRANSIENT_FAILURE, calls
 * fail UNAVAILABLE naming |want| (a JSON path or rule), none is sent. */
static void expect_invalid_config(const char *choices, const char *want) {
  fresh(SLOW_MS);
  rec_svc(choices);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){.txt = true});
  grit_status st = {0};
  uint64_t el;
  ASSERT_EQ(call(ch, FAST, 3000, &el, &st), GRIT_STATUS_UNAVAILABLE);
  if (!strstr(st.message, want) || !strstr(st.message, "service config")) {
    fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", st.message, want);
    test_failures++;
  }
  grit_status_free(&st);
  ASSERT_CMP(el, <, 2000);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_TRANSIENT_FAILURE);
  /* Still so for the next call. */
  ASSERT_EQ(call(ch, FAST, 3000, NULL, NULL), GRIT_STATUS_UNAVAILABLE);
  ASSERT_EQ(h2s_server_request_count(g_srv), 0);
  grit_channel_destroy(ch);
  teardown();
}

/* DNS-03: an unknown key in any choice makes the whole TXT config invalid
 * (SC-03 then applies). */
static void test_txt_unknown_key(void) {
  expect_invalid_config("[{\"serviceConfig\":{" MC200
                        "},\"clientColour\":[\"red\"]}]",
                        "clientColour");
  expect_invalid_config("[{\"clientLanguage\":[\"go\"],\"serviceConfig\":{},"
                        "\"bogus\":1},{\"serviceConfig\":{" MC200 "}}]",
                        "bogus");
}

/* SC-03, DNS-04: an invalid chosen config on a fresh channel. */
static void test_txt_invalid_chosen_config(void) {
  expect_invalid_config("[{\"serviceConfig\":{\"methodConfig\":[{\"name\":[{"
                        "}],\"timeout\":\"1\"}]}}]",
                        "$.methodConfig[0].timeout");
  /* Only the chosen config's validity matters (DNS-04). */
  choice_case("[{\"clientLanguage\":[\"go\"],\"serviceConfig\":{"
              "\"methodConfig\":[{\"name\":[{}],\"timeout\":\"1\"}]}},"
              "{\"serviceConfig\":{" MC200 "}}]",
              true);
}

/* SC-07 through TXT on a fresh channel: a request message sent before
 * the config arrived is still checked against its maxRequestMessageBytes
 * (RESOURCE_EXHAUSTED, nothing written); a smaller one goes through. */
static void test_txt_max_request_bytes(void) {
  fresh(SLOW_MS);
  rec_svc("[{\"serviceConfig\":{\"methodConfig\":[{\"name\":[{}],"
          "\"maxRequestMessageBytes\":3}]}}]");
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){.txt = true});
  grit_status st = {0};
  ASSERT_EQ(bh_unary(ch, FAST, "ping", 3000, &st),
            GRIT_STATUS_RESOURCE_EXHAUSTED);
  grit_status_free(&st);
  ASSERT_EQ(h2s_server_request_count(g_srv), 0);
  ASSERT_EQ(bh_unary(ch, FAST, "pin", 3000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(g_srv), 1);
  grit_channel_destroy(ch);
  teardown();
}

/* DNS-01: TXT is off unless enabled: no query, the config is not used. */
static void test_txt_disabled_by_default(void) {
  char cfg[512];
  fresh(SLOW_MS);
  rec_svc(cfg_timeout(cfg, sizeof(cfg), "0.2s"));
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){.txt = false});
  expect_no_config(ch);
  grit_channel_destroy(ch);
  /* A channel with TXT on makes the query: the log would show it. */
  ch = dns_channel(&(chan_opts){.txt = true});
  expect_timeout_applied(ch);
  grit_channel_destroy(ch);
  ASSERT(dnsm_wait_log(&g_dns, TXT_Q, 1, 1000));
  ASSERT_EQ(dnsm_log_count(&g_dns, "query[TXT]"), 1);
  teardown();
}

/* DNS-01: never TXT for IP-literal or localhost targets. */
static void test_txt_never_for_literals(void) {
  char cfg[512];
  fresh(SLOW_MS);
  rec_svc(cfg_timeout(cfg, sizeof(cfg), "0.2s"));
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  const char *hosts[] = {"127.0.0.1", "localhost"};
  for (size_t i = 0; i < 2; i++) {
    grit_channel *ch = dns_channel(&(chan_opts){.host = hosts[i], .txt = true});
    ASSERT_NOT_NULL(ch);
    ASSERT_EQ(call(ch, FAST, 3000, NULL, NULL), GRIT_STATUS_OK);
    int64_t t = last_timeout_ms(); /* the call's 3 s, not the TXT 0.2 s */
    ASSERT_CMP(t, >, 2000);
    grit_channel_destroy(ch);
  }
  /* The positive control comes last, so earlier queries would be logged. */
  grit_channel *ch = dns_channel(&(chan_opts){.txt = true});
  expect_timeout_applied(ch);
  grit_channel_destroy(ch);
  ASSERT(dnsm_wait_log(&g_dns, TXT_Q, 1, 1000));
  ASSERT_EQ(dnsm_log_count(&g_dns, "query[TXT]"), 1);
  ASSERT_EQ(dnsm_log_count(&g_dns, "_grpc_config.127"), 0);
  ASSERT_EQ(dnsm_log_count(&g_dns, "_grpc_config.localhost"), 0);
  teardown();
}

/* SC-03, DNS-04: no TXT record (NODATA) or no grpc_config record: the
 * channel's default config applies. */
static void test_no_txt_uses_default(void) {
  fresh(SLOW_MS);
  rec_svc(NULL);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){
      .txt = true,
      .default_config =
          "{\"methodConfig\":[{\"name\":[{}],\"timeout\":\"0.2s\"}]}"});
  expect_timeout_applied(ch);
  ASSERT(dnsm_wait_log(&g_dns, TXT_Q, 1, 1000));
  grit_channel_destroy(ch);
  teardown();
}

/* SC-03: with GRIT_ARG_IGNORE_RESOLVER_CONFIG the channel's default config
 * is used, not the TXT one. */
static void test_ignore_resolver_config(void) {
  char cfg[512];
  fresh(300);
  rec_svc(cfg_timeout(cfg, sizeof(cfg), "0.2s"));
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){
      .txt = true,
      .ignore_resolver_config = true,
      .default_config =
          "{\"methodConfig\":[{\"name\":[{}],\"timeout\":\"2s\"}]}"});
  uint64_t el;
  ASSERT_EQ(call(ch, SLOW, 0, &el, NULL), GRIT_STATUS_OK);
  int64_t t = last_timeout_ms();
  ASSERT_CMP(t, >, 1000);
  ASSERT_CMP(t, <=, 2000);
  ASSERT_EQ(probe_timeout(ch) > 1000, 1);
  grit_channel_destroy(ch);
  teardown();
}

/* ---- config swap on re-resolution ---- */

/* Trigger re-resolution: GOAWAY closes the connection; pick_first asks the
 * resolver again (rate limit GRIT_ARG_DNS_MIN_RERESOLVE_MS = 100). */
static void kick(void) {
  h2s_server_goaway(g_srv, 0, false);
}

/* A call in flight keeps the config it started with; new calls see the new
 * one after re-resolution; an invalid update leaves the old one in force;
 * a later valid update still applies. */
static void test_config_swap(void) {
  char cfg[512];
  fresh(700);
  rec_svc(cfg_timeout(cfg, sizeof(cfg), "1.5s"));
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch =
      dns_channel(&(chan_opts){.txt = true, .reresolve_ms = 100});
  int64_t t = probe_timeout(ch);
  ASSERT_CMP(t, >, 1000);
  ASSERT_CMP(t, <=, 1500);

  /* A 700 ms call starts under the 1.5 s config ... */
  async_res r = {.mu = PTHREAD_MUTEX_INITIALIZER};
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION};
  size_t before = h2s_server_request_count(g_srv);
  uint64_t t0 = test_now_ms();
  ASSERT_OK(grit_unary_call_async(ch, SLOW, "x", 1, &o, async_cb, &r));
  ASSERT(h2s_server_wait_requests(g_srv, before + 1, 2000));
  /* ... then the record changes to 0.2 s and re-resolution happens. */
  g_rec[0] = '\0';
  rec_svc(cfg_timeout(cfg, sizeof(cfg), "0.2s"));
  ASSERT_OK(dnsm_restart(&g_dns, g_rec));
  kick();
  ASSERT(wait_config_timeout(ch, 0, 200, 3000));
  /* The in-flight call was not cut to 0.2 s. */
  ASSERT(async_wait(&r, 3000));
  ASSERT_EQ(r.code, GRIT_STATUS_OK);
  ASSERT_CMP(r.done_ms - t0, >=, 650);
  /* New calls: DEADLINE_EXCEEDED at ~200 ms. */
  uint64_t el;
  ASSERT_EQ(call(ch, SLOW, 0, &el, NULL), GRIT_STATUS_DEADLINE_EXCEEDED);
  ASSERT_CMP(el, <, 900); /* well before the backend answers, at 1 s */

  /* An invalid update: re-resolution happens (dnsmasq sees the query) but
   * the 0.2 s config stays in force, and the channel keeps working. */
  g_rec[0] = '\0';
  rec_svc("[{\"serviceConfig\":{\"methodConfig\":[{\"name\":[{}],"
          "\"timeout\":\"1\"}]}}]");
  ASSERT_OK(dnsm_restart(&g_dns, g_rec)); /* a new log: counts restart */
  kick();
  ASSERT(dnsm_wait_log(&g_dns, TXT_Q, 1, 3000));
  uint64_t end = test_now_ms() + 400;
  while (test_now_ms() < end) {
    t = probe_timeout(ch);
    ASSERT_CMP(t, >, 0);
    ASSERT_CMP(t, <=, 200);
  }
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_READY);

  /* A valid update after the invalid one still applies. */
  g_rec[0] = '\0';
  rec_svc(cfg_timeout(cfg, sizeof(cfg), "0.5s"));
  ASSERT_OK(dnsm_restart(&g_dns, g_rec));
  kick();
  ASSERT(wait_config_timeout(ch, 300, 500, 3000));

  /* The record disappears: no config from DNS, so no timeout (SC-03). */
  g_rec[0] = '\0';
  rec_svc(NULL);
  ASSERT_OK(dnsm_restart(&g_dns, g_rec));
  kick();
  uint64_t deadline = test_now_ms() + 3000;
  while ((t = probe_timeout(ch)) != -1 && test_now_ms() < deadline)
    sleep_ms(20);
  ASSERT_EQ(t, -1);
  grit_channel_destroy(ch);
  teardown();
}

/* SC-03: a channel whose first config was invalid recovers when a valid
 * one arrives: calls go through with the new config. */
static void test_invalid_then_valid(void) {
  char cfg[512];
  fresh(SLOW_MS);
  rec_svc("[{\"serviceConfig\":{\"loadBalancingPolicy\":\"no_such_lb\"}}]");
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch =
      dns_channel(&(chan_opts){.txt = true, .reresolve_ms = 100});
  grit_status st = {0};
  ASSERT_EQ(call(ch, FAST, 3000, NULL, &st), GRIT_STATUS_UNAVAILABLE);
  ASSERT_NOT_NULL(strstr(st.message, "loadBalancingPolicy"));
  grit_status_free(&st);
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_TRANSIENT_FAILURE);
  g_rec[0] = '\0';
  rec_svc(cfg_timeout(cfg, sizeof(cfg), "0.5s"));
  ASSERT_OK(dnsm_restart(&g_dns, g_rec));
  /* No connection fails here: the resolver retries a rejected result with
   * its failure backoff (1 s first), and the channel recovers. */
  ASSERT(wait_config_timeout(ch, 300, 500, 3000));
  ASSERT_EQ(grit_channel_get_state(ch, false), GRIT_STATE_READY);
  grit_channel_destroy(ch);
  teardown();
}

/* ---- LB policy switch, address removal, re-resolution ---- */

#define TXT_RR                                                                 \
  "[{\"serviceConfig\":{\"loadBalancingConfig\":[{\"round_robin\":{}}]}}]"
#define TXT_PF                                                                 \
  "[{\"serviceConfig\":{\"loadBalancingConfig\":[{\"pick_first\":{}}]}}]"
#define SC_RR "{\"loadBalancingConfig\":[{\"round_robin\":{}}]}"
#define SC_PF "{\"loadBalancingConfig\":[{\"pick_first\":{}}]}"
#define A_Q "query[A] svc.test"
#define HOLD_MS 2000 /* the SLOW call in flight while things change */

/* g_rec = log-queries, svc.test A 127.0.0.(i+1) for each bit i of |mask|
 * and, if |json| is set, the TXT record "grpc_config=<json>". */
static void rec_hosts(unsigned mask, const char *json) {
  g_rec[0] = '\0';
  rec("log-queries");
  for (int i = 0; i < 3; i++)
    if (mask & (1u << i))
      rec("host-record=svc.test,127.0.0.%d", i + 1);
  if (json) {
    char v[4096];
    snprintf(v, sizeof(v), "grpc_config=%s", json);
    rec_txt("_grpc_config.svc.test", 1, v);
  }
}

/* FAST calls until each of the |n| backends has seen one. */
static bool warm_all(grit_channel *ch, h2s_server **back, int n) {
  uint64_t end = test_now_ms() + 5000;
  while (test_now_ms() < end) {
    int seen = 0;
    for (int i = 0; i < n; i++)
      seen += h2s_server_request_count(back[i]) > 0;
    if (seen == n)
      return true;
    if (call(ch, FAST, 2000, NULL, NULL) != GRIT_STATUS_OK)
      return false;
  }
  return false;
}

/* Index of the backend that got the SLOW request (-1: none within 2 s). */
static int slow_backend(h2s_server **back, int n) {
  uint64_t end = test_now_ms() + 2000;
  do {
    for (int i = 0; i < n; i++) {
      size_t k = h2s_server_request_count(back[i]);
      for (size_t j = 0; j < k; j++) {
        const char *p = h2s_server_request(back[i], j)->path;
        if (p && strcmp(p, SLOW) == 0)
          return i;
      }
    }
    sleep_ms(5);
  } while (test_now_ms() < end);
  return -1;
}

/* The client sent |s| a GOAWAY (a graceful close of its connection). */
static bool wait_client_goaway(h2s_server *s, int timeout_ms) {
  uint64_t end = test_now_ms() + (uint64_t)timeout_ms;
  h2s_stats st;
  do {
    h2s_server_get_stats(s, &st);
    if (st.goaways_received > 0)
      return true;
    sleep_ms(5);
  } while (test_now_ms() < end);
  return false;
}

static bool wait_open_connections(h2s_server *s, uint64_t n, int timeout_ms) {
  uint64_t end = test_now_ms() + (uint64_t)timeout_ms;
  h2s_stats st;
  do {
    h2s_server_get_stats(s, &st);
    if (st.connections_open == n)
      return true;
    sleep_ms(5);
  } while (test_now_ms() < end);
  return false;
}

static async_res g_slow; /* static: a failed ASSERT may leave it running */

static bool start_slow(grit_channel *ch, uint64_t *t0) {
  memset(&g_slow, 0, sizeof(g_slow));
  pthread_mutex_init(&g_slow.mu, NULL);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 10000};
  *t0 = test_now_ms();
  return grit_unary_call_async(ch, SLOW, "x", 1, &o, async_cb, &g_slow) ==
         GRIT_OK;
}

/* The client is draining its connection to |s| (GOAWAY sent) while the
 * SLOW call still runs on it. */
static bool draining_with_call(h2s_server *s) {
  bool goaway = wait_client_goaway(s, HOLD_MS / 2);
  bool running = !async_wait(&g_slow, 0);
  if (!running)
    fprintf(stderr, "  slow call ended early: %s: %s\n",
            grit_status_code_name(g_slow.code), g_slow.message);
  return goaway && running;
}

/* The SLOW call ends OK after the server's full delay. */
static bool slow_ok(uint64_t t0) {
  if (!async_wait(&g_slow, 3 * HOLD_MS))
    return false;
  if (g_slow.code != GRIT_STATUS_OK)
    fprintf(stderr, "  slow call: %s: %s\n", grit_status_code_name(g_slow.code),
            g_slow.message);
  return g_slow.code == GRIT_STATUS_OK && g_slow.done_ms - t0 >= HOLD_MS - 100;
}

/* SC-08, LB-01/02: the TXT config switches round_robin to pick_first
 * while a call is in flight. The call ends OK on its old connection, which
 * the client then closes gracefully (GOAWAY, and closed once the call
 * ended); new calls go to the new policy. Re-resolution comes from killing
 * the other backend (round_robin sees it fail). The SPEC is silent on
 * calls in flight; grpc-core and grpc-java let them finish. */
static void test_lb_switch_keeps_calls(void) {
  h2s_server *back[2];
  ASSERT(fresh_many(HOLD_MS, 1, back));
  rec_hosts(3u, TXT_RR);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch =
      dns_channel(&(chan_opts){.txt = true, .reresolve_ms = 100});
  ASSERT(warm_all(ch, back, 2));
  uint64_t t0;
  ASSERT(start_slow(ch, &t0));
  int v = slow_backend(back, 2);
  ASSERT_CMP(v, >=, 0);
  h2s_server *busy = back[v];
  rec_hosts(3u, TXT_PF);
  ASSERT_OK(dnsm_restart(&g_dns, g_rec));
  int before = dnsm_log_count(&g_dns, TXT_Q);
  h2s_server_kill(back[1 - v]);
  ASSERT(dnsm_wait_log(&g_dns, TXT_Q, before + 1, 3000));
  /* pick_first took over (a new connection to the live backend) and the
   * round_robin connection is draining, with the call still on it. */
  ASSERT(draining_with_call(busy));
  h2s_stats st;
  h2s_server_get_stats(busy, &st);
  ASSERT_EQ(st.connections, 2);
  ASSERT(slow_ok(t0));
  ASSERT(wait_open_connections(busy, 1, 3000));
  ASSERT_EQ(call(ch, FAST, 2000, NULL, NULL), GRIT_STATUS_OK);
  h2s_server_get_stats(busy, &st);
  ASSERT_EQ(st.connections, 2);
  grit_channel_destroy(ch);
  teardown();
}

/* A switch costs no gap in service: while the new policy connects, new
 * calls still go to the current one (grpc-core's pending policy). Here
 * pick_first cannot connect (the live backend accepts but never answers
 * new connections) and round_robin's connection serves on; when its
 * attempt times out pick_first takes over and, the backend answering
 * again, connects and serves. */
static void test_lb_switch_serves_until_ready(void) {
  h2s_server *back[2];
  ASSERT(fresh_many(SLOW_MS, 1, back));
  rec_hosts(3u, TXT_RR);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(&(chan_opts){
      .txt = true, .reresolve_ms = 100, .connect_timeout_ms = 1500});
  ASSERT(warm_all(ch, back, 2));
  h2s_server_set_accept(back[0], H2S_ACCEPT_SILENT);
  rec_hosts(3u, TXT_PF);
  ASSERT_OK(dnsm_restart(&g_dns, g_rec));
  int before = dnsm_log_count(&g_dns, TXT_Q);
  h2s_server_kill(back[1]);
  ASSERT(dnsm_wait_log(&g_dns, TXT_Q, before + 1, 3000));
  ASSERT(h2s_server_wait_connections(back[0], 2, 2000)); /* pick_first's */
  size_t n = h2s_server_request_count(back[0]);
  for (int i = 0; i < 5; i++)
    ASSERT_EQ(call(ch, FAST, 1000, NULL, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(back[0]), n + 5);
  ASSERT_EQ(h2s_server_request(back[0], n + 4)->conn_index, 0);
  h2s_server_set_accept(back[0], H2S_ACCEPT_SERVE);
  uint64_t end = test_now_ms() + 5000;
  bool moved = false;
  while (!moved && test_now_ms() < end) {
    if (call(ch, FAST, 1000, NULL, NULL) == GRIT_STATUS_OK) {
      n = h2s_server_request_count(back[0]);
      moved = h2s_server_request(back[0], n - 1)->conn_index >= 2;
    }
    sleep_ms(20);
  }
  ASSERT(moved);
  grit_channel_destroy(ch);
  teardown();
}

/* LB-02: round_robin over three backends; the address of the one serving
 * a call disappears from DNS. The call ends OK; its connection drains
 * (client GOAWAY) and closes after it; new calls avoid that backend. */
static void test_address_removed_keeps_calls(void) {
  h2s_server *back[3];
  ASSERT(fresh_many(HOLD_MS, 2, back));
  rec_hosts(7u, NULL);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch =
      dns_channel(&(chan_opts){.default_config = SC_RR, .reresolve_ms = 100});
  ASSERT(warm_all(ch, back, 3));
  uint64_t t0;
  ASSERT(start_slow(ch, &t0));
  int v = slow_backend(back, 3);
  ASSERT_CMP(v, >=, 0);
  int keep = (v + 1) % 3, dead = (v + 2) % 3;
  rec_hosts(1u << keep, NULL);
  ASSERT_OK(dnsm_restart(&g_dns, g_rec));
  int before = dnsm_log_count(&g_dns, A_Q);
  h2s_server_kill(back[dead]); /* round_robin asks to re-resolve */
  ASSERT(dnsm_wait_log(&g_dns, A_Q, before + 1, 3000));
  ASSERT(draining_with_call(back[v]));
  ASSERT(slow_ok(t0));
  ASSERT(wait_open_connections(back[v], 0, 3000));
  size_t old = h2s_server_request_count(back[v]);
  for (int i = 0; i < 6; i++)
    ASSERT_EQ(call(ch, FAST, 2000, NULL, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(back[v]), old);
  grit_channel_destroy(ch);
  teardown();
}

/* DNS-05: a GOAWAY from the backend (which stays up) makes the policy ask
 * for re-resolution: dnsmasq sees a new A query, and new calls follow the
 * name to its new address. */
static void reresolve_case(const char *service_config) {
  h2s_server *back[2];
  ASSERT(fresh_many(SLOW_MS, 1, back));
  rec_hosts(1u, NULL);
  ASSERT_OK(dnsm_start(&g_dns, g_rec));
  grit_channel *ch = dns_channel(
      &(chan_opts){.default_config = service_config, .reresolve_ms = 100});
  ASSERT_EQ(call(ch, FAST, 2000, NULL, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(back[0]), 1);
  rec_hosts(2u, NULL);
  ASSERT_OK(dnsm_restart(&g_dns, g_rec));
  int before = dnsm_log_count(&g_dns, A_Q);
  h2s_server_goaway(back[0], 0, false);
  ASSERT(dnsm_wait_log(&g_dns, A_Q, before + 1, 3000));
  uint64_t end = test_now_ms() + 3000;
  while (h2s_server_request_count(back[1]) == 0 && test_now_ms() < end)
    ASSERT_EQ(call(ch, FAST, 2000, NULL, NULL), GRIT_STATUS_OK);
  ASSERT_CMP(h2s_server_request_count(back[1]), >, 0);
  grit_channel_destroy(ch);
  teardown();
}

static void test_reresolve_on_goaway_rr(void) {
  reresolve_case(SC_RR);
}

static void test_reresolve_on_goaway_pf(void) {
  reresolve_case(SC_PF);
}

/* ---- grit_service_config_check_dns ---- */

static void test_check_dns(void) {
  fresh(SLOW_MS);
  rec("log-queries");
  rec_txt("_grpc_config.good.test", 1,
          "grpc_config=[{\"clientLanguage\":[\"go\"],\"serviceConfig\":{}},"
          "{\"serviceConfig\":{\"methodConfig\":[{\"name\":[{\"service\":"
          "\"test.S\"}],\"timeout\":\"0.25s\"}]}}]");
  rec_txt("_grpc_config.bad.test", 1,
          "grpc_config=[{\"serviceConfig\":{\"methodConfig\":[{\"name\":[{"
          "\"service\":\"test.S\"}],\"timeout\":\"-1s\"}]}}]");
  rec_txt("_grpc_config.noprefix.test", 1, "v=spf1 -all");
  rec("host-record=nodata.test,127.0.0.1");
  ASSERT_OK(dnsm_start(&g_dns, g_rec));

  char *report = NULL;
  ASSERT_EQ(
      grit_service_config_check_dns("good.test", g_dns.server, 2000, &report),
      GRIT_OK);
  ASSERT_NOT_NULL(report);
  if (!strstr(report, "test.S") || !strstr(report, "0.25")) {
    fprintf(stderr, "  report:\n%s\n", report);
    test_failures++;
  }
  grit_free(report);
  report = NULL;

  ASSERT_EQ(
      grit_service_config_check_dns("bad.test", g_dns.server, 2000, &report),
      GRIT_ERR_INVALID_CONFIG);
  ASSERT_NOT_NULL(report);
  if (!strstr(report, "methodConfig[0].timeout")) {
    fprintf(stderr, "  report:\n%s\n", report);
    test_failures++;
  }
  grit_free(report);

  const char *none[] = {"missing.test", "nodata.test", "noprefix.test"};
  for (size_t i = 0; i < 3; i++) {
    report = NULL;
    ASSERT_EQ(
        grit_service_config_check_dns(none[i], g_dns.server, 2000, &report),
        GRIT_ERR_NOT_FOUND);
    grit_free(report);
  }
  ASSERT_EQ(
      grit_service_config_check_dns("good.test", "not an address", 2000, NULL),
      GRIT_ERR_INVALID_ARG);
  teardown();
}

static const test_case tests[] = {
    {"a_record", test_a_record},
    {"aaaa_record", test_aaaa_record},
    {"nxdomain", test_nxdomain},
    {"bare_host_port", test_bare_host_port},
    {"txt_timeout", test_txt_timeout},
    {"txt_wait_for_ready", test_txt_wait_for_ready},
    {"txt_long_split", test_txt_long_split},
    {"txt_no_prefix_ignored", test_txt_no_prefix_ignored},
    {"txt_client_language", test_txt_client_language},
    {"txt_percentage", test_txt_percentage},
    {"txt_client_hostname", test_txt_client_hostname},
    {"txt_unknown_key", test_txt_unknown_key},
    {"txt_invalid_chosen_config", test_txt_invalid_chosen_config},
    {"txt_max_request_bytes", test_txt_max_request_bytes},
    {"txt_disabled_by_default", test_txt_disabled_by_default},
    {"txt_never_for_literals", test_txt_never_for_literals},
    {"no_txt_uses_default", test_no_txt_uses_default},
    {"ignore_resolver_config", test_ignore_resolver_config},
    {"config_swap", test_config_swap},
    {"invalid_then_valid", test_invalid_then_valid},
    {"lb_switch_keeps_calls", test_lb_switch_keeps_calls},
    {"lb_switch_serves_until_ready", test_lb_switch_serves_until_ready},
    {"address_removed_keeps_calls", test_address_removed_keeps_calls},
    {"reresolve_on_goaway_rr", test_reresolve_on_goaway_rr},
    {"reresolve_on_goaway_pf", test_reresolve_on_goaway_pf},
    {"check_dns", test_check_dns},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  int rv = test_main(tests, argc, argv);
  teardown();
  return rv;
}
