/* lb: reconnect backoff arithmetic (SPEC CB-01), the too_many_pings
 * keepalive rule (LB-04), and subchannels and policies on a real loop
 * against raw HTTP/2 listeners that only speak SETTINGS (and GOAWAY). */
#include "lb/lb.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test/harness.h"

/* ---- pure ---- */

static void test_backoff_sequence(void) {
  const uint64_t want[] = {1000, 1600, 2560, 4096, 6554, 10486, 16778};
  uint64_t cur = 0;
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    cur = grit_lb_backoff_next_ms(cur, 1000, 120000, NULL);
    ASSERT_EQ(cur, want[i]);
  }
  for (int i = 0; i < 20; i++) {
    uint64_t next = grit_lb_backoff_next_ms(cur, 1000, 120000, NULL);
    ASSERT_CMP(next, >=, cur);
    ASSERT_CMP(next, <=, 120000);
    cur = next;
  }
  ASSERT_EQ(cur, 120000);
  ASSERT_EQ(grit_lb_backoff_next_ms(120000, 1000, 120000, NULL), 120000);
  /* Initial above the cap, and small configured values. */
  ASSERT_EQ(grit_lb_backoff_next_ms(0, 5000, 2000, NULL), 2000);
  ASSERT_EQ(grit_lb_backoff_next_ms(0, 20, 100, NULL), 20);
  ASSERT_EQ(grit_lb_backoff_next_ms(20, 20, 100, NULL), 32);
  ASSERT_EQ(grit_lb_backoff_next_ms(82, 20, 100, NULL), 100);
}

static void test_backoff_jitter(void) {
  grit_rng rng;
  grit_rng_seed(&rng, 42);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < 10000; i++) {
    uint64_t j = grit_lb_backoff_jitter_ms(1000, &rng);
    ASSERT_CMP(j, >=, 800);
    ASSERT_CMP(j, <=, 1200);
    lo = j < lo ? j : lo;
    hi = j > hi ? j : hi;
  }
  ASSERT_CMP(lo, <, 820); /* the whole +-20 % range is used */
  ASSERT_CMP(hi, >, 1180);
  /* Same seed, same sequence. */
  grit_rng a, b;
  grit_rng_seed(&a, 7);
  grit_rng_seed(&b, 7);
  for (int i = 0; i < 100; i++)
    ASSERT_EQ(grit_lb_backoff_jitter_ms(120000, &a),
              grit_lb_backoff_jitter_ms(120000, &b));
  ASSERT_EQ(grit_lb_backoff_jitter_ms(0, &a), 0);
}

static void test_keepalive_doubling(void) {
  ASSERT_EQ(grit_lb_keepalive_after_too_many_pings_ms(200), 400);
  ASSERT_EQ(grit_lb_keepalive_after_too_many_pings_ms(30000), 60000);
  ASSERT_EQ(grit_lb_keepalive_after_too_many_pings_ms(0), 0);
  ASSERT_EQ(grit_lb_keepalive_after_too_many_pings_ms(INT32_MAX), INT32_MAX);
  ASSERT_EQ(grit_lb_keepalive_after_too_many_pings_ms(INT32_MAX / 2 + 1),
            INT32_MAX);
}

static void test_find(void) {
  ASSERT(grit_lb_find("pick_first") == &grit_lb_pick_first);
  ASSERT(grit_lb_find("round_robin") == &grit_lb_round_robin);
  ASSERT_NULL(grit_lb_find("grpclb"));
}

/* ---- a raw listener ---- */

static const uint8_t settings_frame[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
static const uint8_t goaway_tmp[] = {
    0,   0,   22,  7,   0,   0,   0,   0,   0, /* GOAWAY, 22 bytes */
    0,   0,   0,   0,                          /* last stream 0 */
    0,   0,   0,   11,                         /* ENHANCE_YOUR_CALM */
    't', 'o', 'o', '_', 'm', 'a', 'n', 'y', '_', 'p', 'i', 'n', 'g', 's'};

typedef struct raw_conn {
  uv_tcp_t tcp;
  uv_write_t w[2];
  struct raw_server *srv;
} raw_conn;

typedef struct raw_server {
  uint16_t port; /* first, so listener.data != &listener */
  uv_tcp_t listener;
  bool send_goaway;
  bool no_accept; /* leave connections in the backlog: connects hang */
  int accepted;
  int closed;
} raw_server;

static void raw_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
  static char scratch[65536];
  (void)h;
  (void)sz;
  *buf = uv_buf_init(scratch, sizeof(scratch));
}

static void raw_conn_closed(uv_handle_t *h) {
  raw_conn *c = h->data;
  c->srv->closed++;
  free(c);
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)buf;
  if (n < 0)
    uv_close((uv_handle_t *)s, raw_conn_closed);
}

static void raw_written(uv_write_t *w, int status) {
  (void)w;
  (void)status;
}

static void raw_on_conn(uv_stream_t *l, int status) {
  raw_server *srv = l->data;
  if (status < 0 || srv->no_accept)
    return;
  raw_conn *c = calloc(1, sizeof(*c));
  c->srv = srv;
  uv_tcp_init(l->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
    uv_close((uv_handle_t *)&c->tcp, raw_conn_closed);
    return;
  }
  srv->accepted++;
  uv_buf_t b = uv_buf_init((char *)settings_frame, sizeof(settings_frame));
  uv_write(&c->w[0], (uv_stream_t *)&c->tcp, &b, 1, raw_written);
  if (srv->send_goaway) {
    uv_buf_t g = uv_buf_init((char *)goaway_tmp, sizeof(goaway_tmp));
    uv_write(&c->w[1], (uv_stream_t *)&c->tcp, &g, 1, raw_written);
  }
  uv_read_start((uv_stream_t *)&c->tcp, raw_alloc, raw_read);
}

static void raw_start(raw_server *srv, uv_loop_t *loop, bool goaway) {
  memset(srv, 0, sizeof(*srv));
  srv->send_goaway = goaway;
  uv_tcp_init(loop, &srv->listener);
  srv->listener.data = srv;
  struct sockaddr_in sin;
  uv_ip4_addr("127.0.0.1", 0, &sin);
  uv_tcp_bind(&srv->listener, (const struct sockaddr *)&sin, 0);
  uv_listen((uv_stream_t *)&srv->listener, 16, raw_on_conn);
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len);
  srv->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Serve on an already bound socket |fd| (a "dead" port made live). */
static void raw_start_fd(raw_server *srv, uv_loop_t *loop, int fd,
                         uint16_t port) {
  memset(srv, 0, sizeof(*srv));
  uv_tcp_init(loop, &srv->listener);
  srv->listener.data = srv;
  uv_tcp_open(&srv->listener, fd);
  uv_listen((uv_stream_t *)&srv->listener, 16, raw_on_conn);
  srv->port = port;
}

/* Close what is left: server connections (their data is themselves)
 * free their memory, listeners and timers need nothing. */
static void walk_close(uv_handle_t *h, void *arg) {
  (void)arg;
  if (uv_is_closing(h))
    return;
  uv_close(h,
           h->type == UV_TCP && h->data == (void *)h ? raw_conn_closed : NULL);
}

/* ---- fixture: a loop, a guard timer and a condition ---- */

typedef struct fixture {
  uv_loop_t loop;
  uv_timer_t guard;
  bool timed_out;
  grit_rng rng;
  grit_subchannel_args a;
  int states[5]; /* state callbacks seen, per state */
  int policy_states[5];
  grit_connectivity_state policy_state;
  int reresolutions; /* pol_reresolve_count's */
} fixture;

static void fx_guard(uv_timer_t *t) {
  fixture *f = t->data;
  f->timed_out = true;
}

static void fx_init(fixture *f) {
  memset(f, 0, sizeof(*f));
  uv_loop_init(&f->loop);
  uv_timer_init(&f->loop, &f->guard);
  f->guard.data = f;
  grit_rng_seed(&f->rng, 1);
  f->a = (grit_subchannel_args){
      .loop = &f->loop,
      .topts = {.user_agent = "test", .keepalive_timeout_ms = 1000},
      .rng = &f->rng,
      .initial_backoff_ms = 20,
      .max_backoff_ms = 100,
      .min_connect_timeout_ms = 2000,
  };
}

/* Run the loop until |pred| holds or 5 s pass. */
static bool fx_run(fixture *f, bool (*pred)(void *), void *ud) {
  f->timed_out = false;
  uv_timer_start(&f->guard, fx_guard, 5000, 0);
  while (!pred(ud) && !f->timed_out)
    uv_run(&f->loop, UV_RUN_ONCE);
  uv_timer_stop(&f->guard);
  return pred(ud);
}

static void fx_finish(fixture *f) {
  /* Let transports and subchannels finish closing, then close the rest. */
  for (int i = 0; i < 50; i++)
    uv_run(&f->loop, UV_RUN_NOWAIT);
  uv_walk(&f->loop, walk_close, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  ASSERT_EQ(uv_loop_close(&f->loop), 0);
}

static void sc_cb(grit_subchannel *sc, grit_connectivity_state s, void *ud) {
  (void)sc;
  fixture *f = ud;
  f->states[s]++;
}

typedef struct ka_wait {
  grit_subchannel *sc;
  uint64_t want;
} ka_wait;

static bool ka_reached(void *ud) {
  ka_wait *w = ud;
  return grit_subchannel_keepalive_time_ms(w->sc) == w->want;
}

/* GOAWAY ENHANCE_YOUR_CALM "too_many_pings" doubles the keepalive time of
 * the subchannel's later connections. */
static void test_too_many_pings(void) {
  fixture f;
  fx_init(&f);
  f.a.topts.keepalive_time_ms = 300;
  raw_server srv;
  raw_start(&srv, &f.loop, true);
  grit_addr addr;
  ASSERT_OK(grit_addr_from_ip(&addr, "127.0.0.1", srv.port));
  grit_subchannel *sc = NULL;
  ASSERT_OK(grit_subchannel_create(&f.a, &addr, sc_cb, &f, &sc));
  ASSERT_EQ(grit_subchannel_keepalive_time_ms(sc), 300);
  grit_subchannel_connect(sc);
  ka_wait w = {sc, 600};
  ASSERT(fx_run(&f, ka_reached, &w));
  ASSERT_EQ(f.states[GRIT_STATE_READY], 1);
  ASSERT_CMP(f.states[GRIT_STATE_IDLE], >=, 1); /* left READY at GOAWAY */
  /* Again: 1200 on the next connection's GOAWAY. */
  grit_subchannel_connect(sc);
  w.want = 1200;
  ASSERT(fx_run(&f, ka_reached, &w));
  ASSERT_EQ(srv.accepted, 2);
  grit_subchannel_destroy(sc);
  fx_finish(&f);
}

/* ---- policies through their vtables ---- */

static void pol_state(void *ctx, grit_connectivity_state s) {
  fixture *f = ctx;
  f->policy_state = s;
  f->policy_states[s]++;
}

static void pol_reresolve(void *ctx) {
  (void)ctx;
}

typedef struct pick_wait {
  grit_lb_policy *p;
  size_t want_distinct;
  grit_transport *seen[4];
  size_t nseen;
} pick_wait;

/* Pick (a few times per check) until |want_distinct| different
 * transports came back. */
static bool picks_distinct(void *ud) {
  pick_wait *w = ud;
  for (int k = 0; k < 4 && w->nseen < w->want_distinct; k++) {
    grit_pick_result r = w->p->vt->pick(w->p, NULL);
    if (r.kind != GRIT_PICK_COMPLETE)
      return false;
    bool known = false;
    for (size_t i = 0; i < w->nseen; i++)
      known = known || w->seen[i] == r.transport;
    if (!known && w->nseen < 4)
      w->seen[w->nseen++] = r.transport;
  }
  return w->nseen >= w->want_distinct;
}

/* An address update keeps the connections of addresses still listed
 * (grit_lb_sclist_reconcile) and closes the others. */
static void test_rr_update_keeps_connections(void) {
  fixture f;
  fx_init(&f);
  raw_server s1, s2, s3;
  raw_start(&s1, &f.loop, false);
  raw_start(&s2, &f.loop, false);
  raw_start(&s3, &f.loop, false);
  grit_addr addrs[3];
  ASSERT_OK(grit_addr_from_ip(&addrs[0], "127.0.0.1", s1.port));
  ASSERT_OK(grit_addr_from_ip(&addrs[1], "127.0.0.1", s2.port));
  ASSERT_OK(grit_addr_from_ip(&addrs[2], "127.0.0.1", s3.port));
  grit_lb_helper h = {pol_state, pol_reresolve, &f};
  grit_lb_policy *p = NULL;
  ASSERT_OK(grit_lb_round_robin.create(&f.a, &h, &p));
  ASSERT_OK(p->vt->update_addresses(p, addrs, 2, false));
  ASSERT_EQ(f.policy_state, GRIT_STATE_IDLE); /* lazy until exit_idle */
  ASSERT_EQ(s1.accepted + s2.accepted, 0);
  p->vt->exit_idle(p);
  ASSERT_EQ(f.policy_state, GRIT_STATE_CONNECTING);
  pick_wait w = {.p = p, .want_distinct = 2};
  ASSERT(fx_run(&f, picks_distinct, &w));
  ASSERT_EQ(f.policy_state, GRIT_STATE_READY);
  grit_transport *t2 = NULL;
  for (size_t i = 0; i < 2; i++) {
    if (grit_transport_peer(w.seen[i])->u.sa.sa_family == AF_INET &&
        strcmp(grit_transport_peer(w.seen[i])->text, addrs[1].text) == 0)
      t2 = w.seen[i];
  }
  ASSERT_NOT_NULL(t2);
  /* Now [s2, s3]: s1's connection goes, s2's stays, s3 gets one. */
  ASSERT_OK(p->vt->update_addresses(p, &addrs[1], 2, false));
  pick_wait w2 = {.p = p, .want_distinct = 2};
  ASSERT(fx_run(&f, picks_distinct, &w2));
  ASSERT(w2.seen[0] == t2 || w2.seen[1] == t2);
  ASSERT_EQ(s1.accepted, 1);
  ASSERT_EQ(s2.accepted, 1);
  ASSERT_EQ(s3.accepted, 1);
  p->vt->destroy(p);
  fx_finish(&f);
}

/* A refused port, held while *|fd| is open: bound but not listening, so
 * no other process (nor a connect's ephemeral port, which could connect
 * to itself) takes it during the case. 0 on error. */
static uint16_t dead_port_hold(int *fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (*fd < 0 || bind(*fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      getsockname(*fd, (struct sockaddr *)&a, &len) != 0)
    return 0;
  return ntohs(a.sin_port);
}

static bool state_is_tf(void *ud) {
  fixture *f = ud;
  return f->policy_state == GRIT_STATE_TRANSIENT_FAILURE;
}

static bool state_is_ready(void *ud) {
  fixture *f = ud;
  return f->policy_state == GRIT_STATE_READY;
}

static void pol_reresolve_count(void *ctx) {
  fixture *f = ctx;
  f->reresolutions++;
}

typedef struct rr_cycle_wait {
  fixture *f;
  int want;
} rr_cycle_wait;

static bool reresolutions_reached(void *ud) {
  rr_cycle_wait *w = ud;
  return w->f->reresolutions >= w->want;
}

/* Issue 27: round_robin picks from its list of READY subchannels, rebuilt
 * on state changes. Two live backends among eight refused ones: picks
 * alternate strictly between the two, and while the refused ones go
 * through TRANSIENT_FAILURE, IDLE and CONNECTING again and again (each
 * failure asks for re-resolution, counted here) the policy publishes
 * nothing: its state and its READY set stay, so queued calls are not
 * picked again for each of them. */
static void test_rr_ready_list(void) {
  enum { NDEAD = 8 };
  fixture f;
  fx_init(&f);
  raw_server s1, s2;
  raw_start(&s1, &f.loop, false);
  raw_start(&s2, &f.loop, false);
  int dead_fd[NDEAD];
  grit_addr addrs[NDEAD + 2];
  for (int i = 0; i < NDEAD; i++) {
    uint16_t port = dead_port_hold(&dead_fd[i]);
    ASSERT_NE(port, 0);
    ASSERT_OK(grit_addr_from_ip(&addrs[i < 4 ? i : i + 2], "127.0.0.1", port));
  }
  ASSERT_OK(grit_addr_from_ip(&addrs[4], "127.0.0.1", s1.port));
  ASSERT_OK(grit_addr_from_ip(&addrs[5], "127.0.0.1", s2.port));
  grit_lb_helper h = {pol_state, pol_reresolve_count, &f};
  grit_lb_policy *p = NULL;
  ASSERT_OK(grit_lb_round_robin.create(&f.a, &h, &p));
  ASSERT_OK(p->vt->update_addresses(p, addrs, NDEAD + 2, false));
  p->vt->exit_idle(p);
  pick_wait w = {.p = p, .want_distinct = 2};
  ASSERT(fx_run(&f, picks_distinct, &w));
  ASSERT_EQ(f.policy_state, GRIT_STATE_READY);
  grit_transport *prev = NULL;
  for (int i = 0; i < 10; i++) {
    grit_pick_result r = p->vt->pick(p, NULL);
    ASSERT_EQ(r.kind, GRIT_PICK_COMPLETE);
    ASSERT(r.transport == w.seen[0] || r.transport == w.seen[1]);
    ASSERT(r.transport != prev);
    prev = r.transport;
  }
  int published = f.policy_states[GRIT_STATE_READY] +
                  f.policy_states[GRIT_STATE_CONNECTING] +
                  f.policy_states[GRIT_STATE_TRANSIENT_FAILURE] +
                  f.policy_states[GRIT_STATE_IDLE];
  /* Every refused backend fails twice more. */
  rr_cycle_wait cw = {&f, f.reresolutions + 2 * NDEAD};
  ASSERT(fx_run(&f, reresolutions_reached, &cw));
  ASSERT_EQ(f.policy_states[GRIT_STATE_READY] +
                f.policy_states[GRIT_STATE_CONNECTING] +
                f.policy_states[GRIT_STATE_TRANSIENT_FAILURE] +
                f.policy_states[GRIT_STATE_IDLE],
            published);
  ASSERT_EQ(f.policy_state, GRIT_STATE_READY);
  grit_pick_result r = p->vt->pick(p, NULL);
  ASSERT_EQ(r.kind, GRIT_PICK_COMPLETE);
  ASSERT(r.transport != prev);
  p->vt->destroy(p);
  fx_finish(&f);
  for (int i = 0; i < NDEAD; i++)
    close(dead_fd[i]);
}

/* pick_first over a dead address and a live one: the live one wins; with
 * every address dead the state is TRANSIENT_FAILURE and picks fail. */
static void test_pf_failover_and_tf(void) {
  fixture f;
  fx_init(&f);
  raw_server live;
  raw_start(&live, &f.loop, false);
  int dead_fd = -1;
  uint16_t dead_port = dead_port_hold(&dead_fd);
  ASSERT_NE(dead_port, 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  grit_addr addrs[2];
  ASSERT_OK(grit_addr_from_ip(&addrs[0], "127.0.0.1", dead_port));
  ASSERT_OK(grit_addr_from_ip(&addrs[1], "127.0.0.1", live.port));
  grit_lb_helper h = {pol_state, pol_reresolve, &f};
  grit_lb_policy *p = NULL;
  ASSERT_OK(grit_lb_pick_first.create(&f.a, &h, &p));
  ASSERT_OK(p->vt->update_addresses(p, addrs, 2, false));
  p->vt->exit_idle(p);
  ASSERT(fx_run(&f, state_is_ready, &f));
  grit_pick_result r = p->vt->pick(p, NULL);
  ASSERT_EQ(r.kind, GRIT_PICK_COMPLETE);
  ASSERT_STR_EQ(grit_transport_peer(r.transport)->text, addrs[1].text);
  ASSERT_EQ(f.policy_states[GRIT_STATE_TRANSIENT_FAILURE], 0);
  /* Only the dead address: sticky TRANSIENT_FAILURE, picks fail. */
  ASSERT_OK(p->vt->update_addresses(p, addrs, 1, false));
  ASSERT(fx_run(&f, state_is_tf, &f));
  r = p->vt->pick(p, NULL);
  ASSERT_EQ(r.kind, GRIT_PICK_FAIL);
  ASSERT_EQ(r.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_NOT_NULL(strstr(r.message, addrs[0].text));
  /* Reconnect attempts under backoff do not leave TRANSIENT_FAILURE. */
  int connecting_before = f.policy_states[GRIT_STATE_CONNECTING];
  uv_timer_start(&f.guard, fx_guard, 400, 0);
  f.timed_out = false;
  while (!f.timed_out)
    uv_run(&f.loop, UV_RUN_ONCE);
  ASSERT_EQ(f.policy_state, GRIT_STATE_TRANSIENT_FAILURE);
  ASSERT_EQ(f.policy_states[GRIT_STATE_CONNECTING], connecting_before);
  p->vt->destroy(p);
  fx_finish(&f);
  close(dead_fd);
}

/* A refused address, then one whose connect hangs: after the hanging one
 * times out the pass is over and the policy must end in TRANSIENT_FAILURE
 * (the refused one, back from backoff meanwhile, keeps being retried)
 * rather than wait forever in CONNECTING. */
static void test_pf_pass_ends_in_tf(void) {
  fixture f;
  fx_init(&f);
  f.a.min_connect_timeout_ms = 300;
  raw_server hang;
  int dead_fd = -1;
  uint16_t dead_port = dead_port_hold(&dead_fd);
  ASSERT_NE(dead_port, 0);
  raw_start(&hang, &f.loop, false);
  hang.no_accept = true;
  grit_addr addrs[2];
  ASSERT_OK(grit_addr_from_ip(&addrs[0], "127.0.0.1", dead_port));
  ASSERT_OK(grit_addr_from_ip(&addrs[1], "127.0.0.1", hang.port));
  grit_lb_helper h = {pol_state, pol_reresolve, &f};
  grit_lb_policy *p = NULL;
  ASSERT_OK(grit_lb_pick_first.create(&f.a, &h, &p));
  ASSERT_OK(p->vt->update_addresses(p, addrs, 2, false));
  p->vt->exit_idle(p);
  ASSERT_EQ(f.policy_state, GRIT_STATE_CONNECTING);
  ASSERT(fx_run(&f, state_is_tf, &f));
  grit_pick_result r = p->vt->pick(p, NULL);
  ASSERT_EQ(r.kind, GRIT_PICK_FAIL);
  p->vt->destroy(p);
  fx_finish(&f);
  close(dead_fd);
}

/* SPEC LP-05 (gRFC A62): in sticky TRANSIENT_FAILURE pick_first keeps
 * reconnecting on its own, without picks, and goes straight to READY when
 * an address comes up, never showing CONNECTING in between. */
static void test_pf_sticky_tf_recovers(void) {
  fixture f;
  fx_init(&f);
  int fd[2] = {-1, -1};
  grit_addr addrs[2];
  for (int i = 0; i < 2; i++) {
    uint16_t port = dead_port_hold(&fd[i]);
    ASSERT_NE(port, 0);
    ASSERT_OK(grit_addr_from_ip(&addrs[i], "127.0.0.1", port));
  }
  grit_lb_helper h = {pol_state, pol_reresolve, &f};
  grit_lb_policy *p = NULL;
  ASSERT_OK(grit_lb_pick_first.create(&f.a, &h, &p));
  ASSERT_OK(p->vt->update_addresses(p, addrs, 2, false));
  p->vt->exit_idle(p);
  ASSERT(fx_run(&f, state_is_tf, &f));
  int connecting = f.policy_states[GRIT_STATE_CONNECTING];
  /* A few backoff rounds (20 ms, x1.6, at most 100 ms) pass. */
  uv_timer_start(&f.guard, fx_guard, 300, 0);
  f.timed_out = false;
  while (!f.timed_out)
    uv_run(&f.loop, UV_RUN_ONCE);
  ASSERT_EQ(f.policy_state, GRIT_STATE_TRANSIENT_FAILURE);
  /* The second address comes up: READY with no pick and no exit_idle. */
  raw_server live;
  raw_start_fd(&live, &f.loop, fd[1],
               ntohs(((struct sockaddr_in *)&addrs[1].u.ss)->sin_port));
  fd[1] = -1;
  ASSERT(fx_run(&f, state_is_ready, &f));
  ASSERT_EQ(f.policy_states[GRIT_STATE_CONNECTING], connecting);
  grit_pick_result r = p->vt->pick(p, NULL);
  ASSERT_EQ(r.kind, GRIT_PICK_COMPLETE);
  ASSERT_STR_EQ(grit_transport_peer(r.transport)->text, addrs[1].text);
  p->vt->destroy(p);
  fx_finish(&f);
  close(fd[0]);
}

typedef struct rh_pick_wait {
  grit_lb_policy *p;
  const grit_pick_args *pa;
} rh_pick_wait;

static bool rh_pick_fails(void *ud) {
  rh_pick_wait *w = ud;
  return w->p->vt->pick(w->p, w->pa).kind == GRIT_PICK_FAIL;
}

/* SPEC LP-03 (gRFC A42): ring_hash connects on demand and follows A42's
 * TRANSIENT_FAILURE rules: nothing connects before a pick; one failing
 * endpoint among three is CONNECTING, two are TRANSIENT_FAILURE (with
 * one IDLE endpoint started by the policy itself); an endpoint stays
 * failed until READY; a header pick walks past failed endpoints. */
static void test_ring_hash_connection_rules(void) {
  fixture f;
  fx_init(&f);
  int fd[3];
  grit_addr addrs[3];
  for (int i = 0; i < 3; i++) {
    uint16_t port = dead_port_hold(&fd[i]);
    ASSERT_NE(port, 0);
    ASSERT_OK(grit_addr_from_ip(&addrs[i], "127.0.0.1", port));
  }
  grit_lb_helper h = {pol_state, pol_reresolve, &f};
  grit_lb_policy *p = NULL;
  ASSERT_OK(grit_lb_ring_hash.create(&f.a, &h, &p));
  grit_lb_params params;
  grit_lb_params_default(&params);
  params.request_hash_header = "x-k";
  ASSERT_OK(p->vt->configure(p, &params));
  ASSERT_OK(p->vt->update_addresses(p, addrs, 3, false));
  p->vt->exit_idle(p);
  for (int i = 0; i < 20; i++)
    uv_run(&f.loop, UV_RUN_NOWAIT);
  ASSERT_EQ(f.policy_state, GRIT_STATE_IDLE);
  ASSERT_EQ(f.policy_states[GRIT_STATE_CONNECTING], 0);
  /* A pick starts its endpoint; refused connects fail them one by one,
   * the policy starting the rest, until all three failed. */
  grit_metadata *md = NULL;
  ASSERT_OK(grit_metadata_create(&md));
  ASSERT_OK(grit_metadata_add(md, "x-k", "key-1", 5));
  grit_pick_args pa = {.metadata = md};
  grit_pick_result r = p->vt->pick(p, &pa);
  ASSERT_EQ(r.kind, GRIT_PICK_QUEUE);
  ASSERT(fx_run(&f, state_is_tf, &f));
  ASSERT_CMP(f.policy_states[GRIT_STATE_CONNECTING], >, 0);
  /* The third may still be connecting (started by the policy): the pick
   * waits on it; once it failed too, picks fail. */
  rh_pick_wait w = {p, &pa};
  ASSERT(fx_run(&f, rh_pick_fails, &w));
  r = p->vt->pick(p, &pa);
  ASSERT_EQ(r.kind, GRIT_PICK_FAIL);
  ASSERT_EQ(r.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_NOT_NULL(strstr(r.message, "ring hash cannot find"));
  /* Issue 28: every backend named, with why it is unusable. */
  for (int i = 0; i < 3; i++)
    ASSERT_NOT_NULL(strstr(r.message, addrs[i].text));
  ASSERT_NOT_NULL(strstr(r.message, "no usable backend among 3 addresses"));
  /* One comes up: its sticky failure ends with READY, by itself. */
  raw_server live;
  raw_start_fd(&live, &f.loop, fd[2],
               ntohs(((struct sockaddr_in *)&addrs[2].u.ss)->sin_port));
  fd[2] = -1;
  ASSERT(fx_run(&f, state_is_ready, &f));
  /* Every key now reaches the live one, walking past failed ones. */
  for (int k = 0; k < 20; k++) {
    char key[16];
    int len = snprintf(key, sizeof(key), "key-%d", k);
    grit_metadata *m = NULL;
    ASSERT_OK(grit_metadata_create(&m));
    ASSERT_OK(grit_metadata_add(m, "x-k", key, (size_t)len));
    grit_pick_args a = {.metadata = m, .want_detail = true};
    r = p->vt->pick(p, &a);
    ASSERT_EQ(r.kind, GRIT_PICK_COMPLETE);
    ASSERT_STR_EQ(grit_transport_peer(r.transport)->text, addrs[2].text);
    ASSERT_NOT_NULL(strstr(r.detail, "ring entry"));
    grit_metadata_destroy(m);
  }
  grit_metadata_destroy(md);
  p->vt->destroy(p);
  fx_finish(&f);
  close(fd[0]);
  close(fd[1]);
}

/* Happy Eyeballs: the first address hangs, so 250 ms in the second is
 * tried too, wins, and picks use it. */
static void test_pf_happy_eyeballs(void) {
  fixture f;
  fx_init(&f);
  raw_server hang, live;
  raw_start(&hang, &f.loop, false);
  hang.no_accept = true;
  raw_start(&live, &f.loop, false);
  grit_addr addrs[2];
  ASSERT_OK(grit_addr_from_ip(&addrs[0], "127.0.0.1", hang.port));
  ASSERT_OK(grit_addr_from_ip(&addrs[1], "127.0.0.1", live.port));
  grit_lb_helper h = {pol_state, pol_reresolve, &f};
  grit_lb_policy *p = NULL;
  ASSERT_OK(grit_lb_pick_first.create(&f.a, &h, &p));
  ASSERT_OK(p->vt->update_addresses(p, addrs, 2, false));
  uint64_t t0 = uv_now(&f.loop);
  p->vt->exit_idle(p);
  ASSERT(fx_run(&f, state_is_ready, &f));
  uv_update_time(&f.loop);
  ASSERT_CMP(uv_now(&f.loop) - t0, >=, 240);
  ASSERT_CMP(uv_now(&f.loop) - t0, <, 2000); /* well before 2 s timeout */
  grit_pick_result r = p->vt->pick(p, NULL);
  ASSERT_EQ(r.kind, GRIT_PICK_COMPLETE);
  ASSERT_STR_EQ(grit_transport_peer(r.transport)->text, addrs[1].text);
  ASSERT_EQ(live.accepted, 1);
  p->vt->destroy(p);
  fx_finish(&f);
}

/* Issue 28: when weighted_round_robin or least_request fail a pick (every
 * address refused: TRANSIENT_FAILURE), the status message names every
 * backend and why it is unusable, as round_robin and pick_first do. */
static void check_fail_names_backends(const grit_lb_policy_vtable *vt) {
  fixture f;
  fx_init(&f);
  int fd[2];
  grit_addr addrs[2];
  for (int i = 0; i < 2; i++) {
    uint16_t port = dead_port_hold(&fd[i]);
    ASSERT_NE(port, 0);
    ASSERT_OK(grit_addr_from_ip(&addrs[i], "127.0.0.1", port));
  }
  grit_lb_helper h = {pol_state, pol_reresolve, &f};
  grit_lb_policy *p = NULL;
  ASSERT_OK(vt->create(&f.a, &h, &p));
  ASSERT_OK(p->vt->update_addresses(p, addrs, 2, false));
  p->vt->exit_idle(p);
  ASSERT(fx_run(&f, state_is_tf, &f));
  grit_pick_result r = p->vt->pick(p, NULL);
  ASSERT_EQ(r.kind, GRIT_PICK_FAIL);
  ASSERT_EQ(r.code, GRIT_STATUS_UNAVAILABLE);
  ASSERT_NOT_NULL(strstr(r.message, "no usable backend among 2 addresses"));
  for (int i = 0; i < 2; i++)
    ASSERT_NOT_NULL(strstr(r.message, addrs[i].text));
  p->vt->destroy(p);
  fx_finish(&f);
  close(fd[0]);
  close(fd[1]);
}

static void test_wrr_fail_names_backends(void) {
  check_fail_names_backends(&grit_lb_weighted_round_robin);
}

static void test_lr_fail_names_backends(void) {
  check_fail_names_backends(&grit_lb_least_request);
}

int main(int argc, char **argv) {
  static const test_case tests[] = {
      {"backoff_sequence", test_backoff_sequence},
      {"backoff_jitter", test_backoff_jitter},
      {"keepalive_doubling", test_keepalive_doubling},
      {"find", test_find},
      {"too_many_pings", test_too_many_pings},
      {"rr_update_keeps_connections", test_rr_update_keeps_connections},
      {"rr_ready_list", test_rr_ready_list},
      {"pf_failover_and_tf", test_pf_failover_and_tf},
      {"pf_pass_ends_in_tf", test_pf_pass_ends_in_tf},
      {"pf_happy_eyeballs", test_pf_happy_eyeballs},
      {"pf_sticky_tf_recovers", test_pf_sticky_tf_recovers},
      {"ring_hash_connection_rules", test_ring_hash_connection_rules},
      {"wrr_fail_names_backends", test_wrr_fail_names_backends},
      {"lr_fail_names_backends", test_lr_fail_names_backends},
      {NULL, NULL},
  };
  return test_main(tests, argc, argv);
}
