/*
 * Channel arguments that change connection and resolver behaviour, through
 * the public API against h2server backends and dnsmasq on loopback:
 *
 * - GRIT_ARG_MIN_CONNECT_TIMEOUT_MS (SPEC CB-01): a connection attempt to a
 *   peer that never answers (TCP blackhole, or a server that accepts and
 *   stays silent) fails after that long, not sooner, and not after the
 *   20 s default.
 * - pick_first's shuffleAddressList (SC-08): channels with different PRNG
 *   seeds start on different addresses; the same seed picks the same one;
 *   without the flag every channel starts on the first address.
 * - GRIT_ARG_DNS_MIN_RERESOLVE_MS (DNS-05): re-resolution requests within
 *   the interval make no DNS query; a deferred one runs once the interval
 *   has passed. dnsmasq logs every query, and a channel without the limit,
 *   hit by the same GOAWAYs, is the positive control.
 * - GRIT_ARG_READ_SPIN_US: streams arrive whole with polling off, on and at
 *   its maximum; values out of range are rejected.
 * - GRIT_ARG_DNS_SERVER: a malformed value fails grit_channel_create with
 *   GRIT_ERR_INVALID_ARG, the detail naming the argument; so does
 *   grit_service_config_check_dns.
 *
 * Timing assertions are lower bounds set by the argument under test, with
 * upper bounds seconds away; every wait is bounded.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test/behaviour/bh.h"
#include "test/peers/dnsmasq.h"

#define METHOD "/opt.Svc/M"

/* ---- GRIT_ARG_MIN_CONNECT_TIMEOUT_MS ---- */

#define MIN_CONNECT_MS 1000
#define CONNECT_CALL_MS 10000 /* the call's deadline: far above the bound */

/* One call on a channel to |target| whose connection attempt cannot
 * complete: it must fail UNAVAILABLE, naming the connect timeout, no
 * sooner than MIN_CONNECT_MS and long before the call's deadline (so not
 * after the 20 s default either). The reconnect backoff is longer than the
 * whole case, so only the first attempt's timeout is measured. */
static void expect_connect_timeout(const char *target, const char *phase) {
  grit_channel_args *a = NULL;
  ASSERT_OK(grit_channel_args_create(&a));
  ASSERT_OK(grit_channel_args_set_int(a, GRIT_ARG_MIN_CONNECT_TIMEOUT_MS,
                                      MIN_CONNECT_MS));
  ASSERT_OK(grit_channel_args_set_int(a, GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                                      60000));
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  grit_err rv = grit_channel_create(NULL, target, a, &d, &ch);
  grit_channel_args_destroy(a);
  ASSERT_OK(rv);
  uint64_t t0 = test_now_ms();
  grit_status st;
  grit_status_code c = bh_unary(ch, METHOD, "x", CONNECT_CALL_MS, &st);
  uint64_t elapsed = test_now_ms() - t0;
  ASSERT_CMP((int)c, >=, 0);
  fprintf(stderr, "  %s: %s after %llu ms: \"%s\"\n", phase,
          grit_status_code_name(c), (unsigned long long)elapsed, st.message);
  char want[64];
  snprintf(want, sizeof(want), "timed out after %d ms", MIN_CONNECT_MS);
  bool named = st.message && strstr(st.message, want) != NULL;
  grit_status_free(&st);
  grit_channel_destroy(ch);
  ASSERT_EQ(c, GRIT_STATUS_UNAVAILABLE);
  ASSERT(named);
  /* libuv timers run on loop time, which can lag the clock by a few ms. */
  ASSERT_CMP(elapsed, >=, MIN_CONNECT_MS - 20);
  ASSERT_CMP(elapsed, <, CONNECT_CALL_MS);
}

/* The HTTP/2 phase: the server accepts the TCP connection and then never
 * reads nor writes, so no SETTINGS ever arrives. */
static void test_min_connect_timeout_silent_server(void) {
  h2s_config cfg = {.quiet = true, .accept = H2S_ACCEPT_SILENT};
  h2s_server *srv = NULL;
  ASSERT_EQ(h2s_server_start(&cfg, &srv), 0);
  char target[64];
  expect_connect_timeout(bh_target(target, sizeof(target), &srv, 1),
                         "silent server");
  h2s_stats hs;
  h2s_server_get_stats(srv, &hs);
  ASSERT_EQ(hs.connections, 1); /* one attempt, within the backoff */
  ASSERT_EQ(hs.requests, 0);
  h2s_server_stop(srv);
}

/* The TCP phase: a listener with backlog 0 whose accept queue this test
 * fills with one connection it never accepts; Linux then drops further
 * SYNs, so grit's connect stays in SYN_SENT. A probe connect checks that
 * the blackhole holds before grit is pointed at it. */
static int connect_nb(const struct sockaddr_in *a) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd >= 0 && connect(fd, (const struct sockaddr *)a, sizeof(*a)) != 0 &&
      errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

static bool connected_within(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  if (poll(&p, 1, ms) != 1)
    return false;
  int err = 0;
  socklen_t len = sizeof(err);
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

static void test_min_connect_timeout_tcp_blackhole(void) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_CMP(lfd, >=, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof(a);
  ASSERT_EQ(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
  ASSERT_EQ(listen(lfd, 0), 0);
  ASSERT_EQ(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
  int filler = connect_nb(&a);
  bool filled = filler >= 0 && connected_within(filler, 2000);
  int probe = connect_nb(&a);
  bool holds = probe >= 0 && !connected_within(probe, 300);
  if (probe >= 0)
    close(probe);
  if (filled && holds) {
    char target[64];
    snprintf(target, sizeof(target), "ipv4:127.0.0.1:%u",
             (unsigned)ntohs(a.sin_port));
    expect_connect_timeout(target, "TCP blackhole");
  } else {
    fprintf(stderr, "  skipped: no TCP blackhole on this kernel\n");
  }
  if (filler >= 0)
    close(filler);
  close(lfd);
}

/* ---- pick_first shuffleAddressList ---- */

#define NSHUF 8   /* backends */
#define NCHANS 10 /* channels per variant */
#define PF_SHUFFLE                                                             \
  "{\"loadBalancingConfig\":[{\"pick_first\":{\"shuffleAddressList\":true}}]}"
#define PF_PLAIN "{\"loadBalancingConfig\":[{\"pick_first\":{}}]}"

/* A new channel over all |s| with |config| and PRNG |seed| makes one call;
 * returns the index of the backend that served it (-1 on failure). */
static int first_pick(h2s_server **s, const char *config, int64_t seed) {
  size_t before[NSHUF];
  for (int i = 0; i < NSHUF; i++)
    before[i] = h2s_server_request_count(s[i]);
  grit_channel_args *a = NULL;
  if (grit_channel_args_create(&a) != GRIT_OK)
    return -1;
  grit_channel_args_set_int(a, GRIT_ARG_RNG_SEED, seed);
  grit_channel *ch = bh_channel_args(s, NSHUF, config, a);
  grit_channel_args_destroy(a);
  if (!ch)
    return -1;
  grit_status_code c = bh_unary(ch, METHOD, "x", 5000, NULL);
  grit_channel_destroy(ch);
  if (c != GRIT_STATUS_OK)
    return -1;
  int got = -1;
  for (int i = 0; i < NSHUF; i++)
    if (h2s_server_request_count(s[i]) != before[i])
      got = got == -1 ? i : -2; /* -2: more than one backend served */
  return got;
}

static void test_shuffle_address_list(void) {
  h2s_server *s[NSHUF] = {0};
  for (int i = 0; i < NSHUF; i++) {
    s[i] = bh_server(NULL);
    ASSERT_NOT_NULL(s[i]);
  }
  /* Without the flag: always the first address (LB-01). */
  for (int k = 0; k < NCHANS; k++)
    ASSERT_EQ(first_pick(s, PF_PLAIN, k + 1), 0);
  /* With it: seeds 1..NCHANS spread the first pick. */
  int picks[NCHANS], distinct = 0;
  bool seen[NSHUF] = {false};
  for (int k = 0; k < NCHANS; k++) {
    picks[k] = first_pick(s, PF_SHUFFLE, k + 1);
    ASSERT_CMP(picks[k], >=, 0);
    distinct += !seen[picks[k]];
    seen[picks[k]] = true;
  }
  fprintf(stderr, "  shuffled first picks:");
  for (int k = 0; k < NCHANS; k++)
    fprintf(stderr, " %d", picks[k]);
  fprintf(stderr, " (%d distinct)\n", distinct);
  ASSERT_CMP(distinct, >=, 2);
  /* The shuffle draws on the channel's PRNG: a seed replays it (RT-03). */
  for (int k = 0; k < 3; k++)
    ASSERT_EQ(first_pick(s, PF_SHUFFLE, k + 1), picks[k]);
  for (int i = 0; i < NSHUF; i++)
    h2s_server_stop(s[i]);
}

/* ---- GRIT_ARG_DNS_MIN_RERESOLVE_MS ---- */

static dnsm g_dns; /* global: dnsmasq.h's atexit cleanup may see it */

static grit_channel *dns_channel(const char *host, uint16_t port,
                                 int64_t reresolve_ms) {
  grit_channel_args *a = NULL;
  if (grit_channel_args_create(&a) != GRIT_OK)
    return NULL;
  grit_channel_args_set_string(a, GRIT_ARG_DNS_SERVER, g_dns.server);
  grit_channel_args_set_int(a, GRIT_ARG_DNS_MIN_RERESOLVE_MS, reresolve_ms);
  grit_channel_args_set_int(a, GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  grit_channel_args_set_int(a, GRIT_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  char target[128];
  snprintf(target, sizeof(target), "dns:///%s:%u", host, (unsigned)port);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, a, &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel %s: %s: %s\n", target, d.path, d.reason);
  grit_channel_args_destroy(a);
  return ch;
}

#define LIMITED_Q "query[A] limited.test"
#define FREE_Q "query[A] free.test"
#define KICKS 3

/* A GOAWAY makes pick_first ask for re-resolution (DNS-05). Two channels
 * share one backend, so every GOAWAY reaches both: "free.test" (no rate
 * limit) must query again each time, "limited.test" (60 s limit, longer
 * than the case) never. Each round also makes a call on the limited
 * channel that must land on a new connection, proving it saw the GOAWAY. */
static void test_dns_reresolve_rate_limited(void) {
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  ASSERT_OK(dnsm_start(&g_dns, "log-queries\n"
                               "host-record=limited.test,127.0.0.1\n"
                               "host-record=free.test,127.0.0.1"));
  uint16_t port = h2s_server_port(srv);
  grit_channel *lim = dns_channel("limited.test", port, 60000);
  grit_channel *fre = dns_channel("free.test", port, 0);
  ASSERT_NOT_NULL(lim);
  ASSERT_NOT_NULL(fre);
  ASSERT_EQ(bh_unary(lim, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(bh_unary(fre, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT(dnsm_wait_log(&g_dns, LIMITED_Q, 1, 3000));
  ASSERT(dnsm_wait_log(&g_dns, FREE_Q, 1, 3000));
  for (int k = 1; k <= KICKS; k++) {
    h2s_stats hs;
    h2s_server_get_stats(srv, &hs);
    uint64_t conns = hs.connections;
    h2s_server_goaway(srv, 0, false);
    ASSERT(dnsm_wait_log(&g_dns, FREE_Q, 1 + k,
                         3000)); /* the control re-resolved */
    /* The limited channel reconnects: its old connection is gone. */
    ASSERT_EQ(bh_unary(lim, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
    const h2s_request *r =
        h2s_server_request(srv, h2s_server_request_count(srv) - 1);
    ASSERT_NOT_NULL(r);
    ASSERT_CMP(r->conn_index, >=, conns);
    ASSERT_EQ(bh_unary(fre, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  }
  /* The control's queries were sent when the limited channel's would have
   * been; they have all arrived, and the limited name has no new one. */
  int limited = dnsm_log_count(&g_dns, LIMITED_Q),
      free_q = dnsm_log_count(&g_dns, FREE_Q);
  fprintf(stderr, "  A queries after %d GOAWAYs: limited %d, unlimited %d\n",
          KICKS, limited, free_q);
  ASSERT_EQ(limited, 1);
  ASSERT_CMP(free_q, >=, 1 + KICKS);
  grit_channel_destroy(lim);
  grit_channel_destroy(fre);
  dnsm_stop(&g_dns);
  h2s_server_stop(srv);
}

#define DEFER_MS 1500

/* A request inside the interval is deferred, not dropped: the second query
 * comes no sooner than DEFER_MS after the first could have started (the
 * channel's creation), and it does come. */
static void test_dns_reresolve_deferred(void) {
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  ASSERT_OK(dnsm_start(&g_dns, "log-queries\n"
                               "host-record=limited.test,127.0.0.1"));
  uint64_t t0 = test_now_ms();
  grit_channel *ch =
      dns_channel("limited.test", h2s_server_port(srv), DEFER_MS);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  ASSERT(dnsm_wait_log(&g_dns, LIMITED_Q, 1, 3000));
  h2s_server_goaway(srv, 0, false);
  uint64_t seen = dnsm_wait_log(&g_dns, LIMITED_Q, 2, DEFER_MS + 5000);
  fprintf(stderr, "  second query seen %llu ms after channel creation\n",
          (unsigned long long)(seen ? seen - t0 : 0));
  ASSERT(seen);
  ASSERT_CMP(seen - t0, >=, DEFER_MS - 20);
  ASSERT_EQ(dnsm_log_count(&g_dns, LIMITED_Q), 2);
  ASSERT_EQ(bh_unary(ch, METHOD, "x", 5000, NULL), GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  dnsm_stop(&g_dns);
  h2s_server_stop(srv);
}

/* ---- GRIT_ARG_DNS_SERVER ---- */

static int g_out_not_null; /* failed creates that left |*out| set */
static int g_no_detail;    /* rejections whose detail names another path */

static grit_err create_with_dns_server(const char *target, const char *v) {
  grit_channel_args *a = NULL;
  if (grit_channel_args_create(&a) != GRIT_OK)
    return GRIT_ERR_NOMEM;
  grit_err rv = grit_channel_args_set_string(a, GRIT_ARG_DNS_SERVER, v);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (rv == GRIT_OK)
    rv = grit_channel_create(NULL, target, a, &d, &ch);
  if (rv == GRIT_ERR_INVALID_ARG && strcmp(d.path, GRIT_ARG_DNS_SERVER) != 0)
    g_no_detail++; /* the detail names the argument */
  grit_channel_args_destroy(a);
  if (rv != GRIT_OK && ch) {
    g_out_not_null++;
    ch = NULL; /* not a channel: never destroy it */
  }
  grit_channel_destroy(ch);
  return rv;
}

static void test_dns_server_validation(void) {
  static const char *const good[] = {
      "127.0.0.1:53",
      "127.0.0.1:5353,[::1]:53",
      "[::1]:1",
      "[2001:db8::1]:65535",
      "[::ffff:10.0.0.1]:53",
      "10.0.0.1:53,10.0.0.2:54,10.0.0.3:55",
  };
  static const char *const bad[] = {
      "",
      "127.0.0.1",        /* no port */
      "127.0.0.1:",       /* empty port */
      "127.0.0.1:0",      /* port out of range */
      "127.0.0.1:65536",  /* port out of range */
      "127.0.0.1:053535", /* too many digits */
      "127.0.0.1:53x",    /* junk after the port */
      "127.0.0.1:-53",    /* sign */
      "127.0.0.1:+53",    /* sign */
      "127.0.0.1:53:54",  /* two ports */
      "localhost:53",     /* a host name */
      "dns.test:53",      /* a host name */
      "256.0.0.1:53",     /* not an IPv4 address */
      "1.2.3:53",         /* not an IPv4 address */
      "::1:53",           /* IPv6 without brackets */
      "[::1]",            /* no port */
      "[::1]53",          /* no colon */
      "[::1:53",          /* unclosed bracket */
      "[]:53",            /* empty address */
      "[127.0.0.1]:53",   /* IPv4 in brackets */
      "[::g]:53",         /* not an IPv6 address */
      "127.0.0.1:53,",    /* empty entry */
      ",127.0.0.1:53",    /* empty entry */
      "127.0.0.1:53,,[::1]:53",
      " 127.0.0.1:53", /* spaces */
      "127.0.0.1:53 ",
      "127.0.0.1:53, [::1]:53",
  };
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    grit_err rv = create_with_dns_server("dns:///svc.test:443", good[i]);
    if (rv != GRIT_OK)
      fprintf(stderr, "  \"%s\" rejected: %s\n", good[i], grit_err_name(rv));
    ASSERT_EQ(rv, GRIT_OK);
  }
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    grit_err rv = create_with_dns_server("dns:///svc.test:443", bad[i]);
    if (rv != GRIT_ERR_INVALID_ARG)
      fprintf(stderr, "  \"%s\" gave %s\n", bad[i], grit_err_name(rv));
    ASSERT_EQ(rv, GRIT_ERR_INVALID_ARG);
  }
  /* Checked whatever the target, so the typo is found before it matters. */
  ASSERT_EQ(create_with_dns_server("ipv4:127.0.0.1:1", "127.0.0.1"),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(create_with_dns_server("ipv4:127.0.0.1:1", "127.0.0.1:53"),
            GRIT_OK);
  ASSERT_EQ(g_out_not_null, 0);
  ASSERT_EQ(g_no_detail, 0);
  /* The config check over DNS takes the same form. */
  char *report = NULL;
  ASSERT_EQ(
      grit_service_config_check_dns("svc.test", "localhost:53", 100, &report),
      GRIT_ERR_INVALID_ARG);
  grit_free(report);
}

/* ---- GRIT_ARG_READ_SPIN_US ---- */

/* A server stream of 200 messages, read to the end through a channel with
 * |spin_us|; returns the messages received (the status must be OK). */
static int stream_with_spin(h2s_server **srv, int64_t spin_us) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel_args_set_int(a, GRIT_ARG_READ_SPIN_US, spin_us);
  grit_channel *ch = bh_channel_args(srv, 1, NULL, a);
  grit_channel_args_destroy(a);
  if (!ch)
    return -1;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 10000};
  grit_call *c = NULL;
  int n = -1;
  if (grit_call_start(ch, "/opt.Svc/Down", &o, NULL, NULL, &c) == GRIT_OK) {
    grit_call_send(c, "go", 2);
    grit_call_close_send(c);
    grit_bytes b;
    for (n = 0; grit_call_recv(c, &b) == GRIT_OK; n++)
      grit_bytes_free(&b);
    grit_status st;
    if (grit_call_finish(c, &st) != GRIT_OK || st.code != GRIT_STATUS_OK)
      n = -2;
    if (n != -2)
      grit_status_free(&st);
    grit_call_destroy(c);
  }
  grit_channel_destroy(ch);
  return n;
}

/* Polling after stream DATA is an optimisation only: with it off (0), at
 * the default and at its 10 ms maximum every message arrives; values out
 * of 0..10000 are rejected. */
static void test_read_spin(void) {
  grit_channel_args *a = NULL;
  ASSERT_OK(grit_channel_args_create(&a));
  ASSERT_EQ(grit_channel_args_set_int(a, GRIT_ARG_READ_SPIN_US, -1),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(grit_channel_args_set_int(a, GRIT_ARG_READ_SPIN_US, 10001),
            GRIT_ERR_INVALID_ARG);
  grit_channel_args_destroy(a);
  h2s_server *srv = bh_server("text=chunk count=200\n"
                              "text=chunk count=200\n"
                              "text=chunk count=200");
  ASSERT_NOT_NULL(srv);
  ASSERT_EQ(stream_with_spin(&srv, 0), 200);
  ASSERT_EQ(stream_with_spin(&srv, 50), 200);
  ASSERT_EQ(stream_with_spin(&srv, 10000), 200);
  h2s_server_stop(srv);
}

static const test_case tests[] = {
    {"min_connect_timeout_silent_server",
     test_min_connect_timeout_silent_server},
    {"min_connect_timeout_tcp_blackhole",
     test_min_connect_timeout_tcp_blackhole},
    {"shuffle_address_list", test_shuffle_address_list},
    {"dns_reresolve_rate_limited", test_dns_reresolve_rate_limited},
    {"dns_reresolve_deferred", test_dns_reresolve_deferred},
    {"dns_server_validation", test_dns_server_validation},
    {"read_spin", test_read_spin},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  int rv = test_main(tests, argc, argv);
  dnsm_stop(&g_dns);
  return rv;
}
