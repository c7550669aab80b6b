/* Side by side (issue 27; SPEC XD-01, XD-02; gRFC A27, A28): the same
 * scenarios through grit's xds resolver and through the gRPC team's
 * client (@grpc/grpc-js with @grpc/grpc-js-xds, test/xds/xds_client.js),
 * against one control plane (test/xds/control_plane.js serving
 * test/xds/side.json) and the same three grpcio backends
 * (test/peers/health_server.py), with one bootstrap file both accept.
 * Each step applies a control-plane update, waits until both clients have
 * answered it (ACK or NACK, read on the control plane's log), lets each
 * client settle (bounded: the decisions asserted are the clients' own, not
 * timings), then makes the same calls through both and asserts that both
 * made the decision the step expects: which backends take the calls, a
 * round-robin spread, a weighted split (0.8 +- 0.05 of 1 000 calls), the
 * NACK of an invalid resource. The steps of issue 27's remaining bars run
 * a function of their own (the `run` of their entry) with the same
 * discipline: RING_HASH with a header hash_policy (every key on one
 * backend), an xDS retry_policy (attempts counted per key by the backend,
 * test/peers/retry_server.py), max_stream_duration (DEADLINE_EXCEEDED well
 * before the call's own deadline), circuit_breakers max_requests (calls
 * held by the backends) and drop_overloads 50 %.
 *
 *   test_xds_side STEP...   (the steps of the table below, in order)
 */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grit/grit.h"
#include "test/xds/cp.h"
#include "xdsclient/xdsclient.h"

/* ---- The scenarios ---- */

#define NB 3 /* backends b0, b1, b2; a mask has bit i for bi */

typedef struct check {
  const char *header; /* "key=value" sent with every call, or NULL */
  int n;              /* calls measured */
  unsigned mask;      /* every call answered by a backend of |mask| */
  bool even;          /* round robin: each of |mask| within 10 % of n/k */
  unsigned split;     /* weighted: calls on |split| ... */
  int split_pct;      /* ... are this percentage of n, +- 5 points */
} check;

typedef struct step step;
/* A step's own checks through both clients (NULL: |checks|). */
typedef void (*step_fn)(const step *s);

struct step {
  const char *name;
  const char *update; /* the control plane's update, NULL: none */
  bool nack;          /* both clients must NACK the update */
  bool route_choice;  /* a per-call route choice step (several clusters) */
  check checks[2];    /* n == 0: none */
  step_fn run;        /* checks of its own, after |checks| */
};

static void ring_hash_step(const step *s);
static void retry_step(const step *s);
static void max_stream_duration_step(const step *s);
static void circuit_breaker_step(const step *s);
static void drop_overloads_step(const step *s);

/* side.json: c1 starts as {b0, b1, b2}, c2 is {b2}. */
static const step steps[] = {
    /* The cluster's endpoints all used, round robin. */
    {"spread", NULL, false, false, {{NULL, 300, 7, true, 0, 0}}, NULL},
    /* An EDS update moves every call. */
    {"eds_move", "only_b2", false, false, {{NULL, 100, 4, false, 0, 0}}, NULL},
    /* Priority 0 {b0, b1}, priority 1 {b2}: priority 0 serves. */
    {"p0_healthy",
     "p0_healthy",
     false,
     false,
     {{NULL, 100, 3, true, 0, 0}},
     NULL},
    /* Priority 0 all UNHEALTHY or DRAINING: priority 1. */
    {"p0_unhealthy",
     "p0_unhealthy",
     false,
     false,
     {{NULL, 100, 4, false, 0, 0}},
     NULL},
    /* ... and back when it recovers. */
    {"p0_recovered",
     "p0_healthy",
     false,
     false,
     {{NULL, 100, 3, true, 0, 0}},
     NULL},
    /* An invalid Cluster (STATIC) is NACKed; the previous one stays. */
    {"nack_cluster",
     "bad_cluster",
     true,
     false,
     {{NULL, 100, 3, true, 0, 0}},
     NULL},
    {"cluster_fixed",
     "c1_fixed",
     false,
     false,
     {{NULL, 100, 3, true, 0, 0}},
     NULL},
    /* The listener's route names a second cluster (c2: {b2}). */
    {"route_c2", "route_c2", false, false, {{NULL, 100, 4, false, 0, 0}}, NULL},
    /* weighted_clusters c1 80 / c2 20 (c1 {b0, b1} after p0_healthy). */
    {"weighted_80_20",
     "weighted_80_20",
     false,
     true,
     {{NULL, 1000, 7, false, 4, 20}},
     NULL},
    /* x-route: canary -> c2, the rest -> c1. */
    {"header_route",
     "header_route",
     false,
     true,
     {{"x-route=canary", 100, 4, false, 0, 0}, {NULL, 100, 3, true, 0, 0}},
     NULL},
    /* The steps below use clusters side.json holds from the start (chash,
     * cr, cmax, cdrop); each update is one RouteConfiguration. */
    /* RING_HASH (chash: b0, b1, b2), hash_policy header x-user (A42). */
    {.name = "ring_hash", .update = "ring_hash", .run = ring_hash_step},
    /* retry_policy on /retry.Svc/ with x-retry: unavailable, 2 retries
     * (cr: the retry server); without x-retry no policy (A44). */
    {.name = "retry", .update = "retry", .run = retry_step},
    /* /lb.Svc/Hold capped at 500 ms; everything on c2 (b2) (A31). */
    {.name = "max_stream_duration",
     .update = "max_stream_duration",
     .run = max_stream_duration_step},
    /* cmax (b0, b1): circuit_breakers max_requests 2 (A32). */
    {.name = "circuit_breaker",
     .update = "circuit_breaker",
     .checks = {{NULL, 100, 3, true, 0, 0}},
     .run = circuit_breaker_step},
    /* cdrop (b0, b1): drop_overloads category lb, 50 % (A32). */
    {.name = "drop_overloads",
     .update = "drop_overloads",
     .run = drop_overloads_step},
};

/* ---- One client's calls ---- */

typedef struct tally {
  int n;
  int backend[NB];
  int ok, other;     /* calls answered OK by a bi, and the rest */
  int codes[17];     /* the status codes */
  char message[256]; /* the first failure's message */
} tally;

typedef struct client {
  const char *name;
  grit_channel *ch; /* grit */
  xcp *node;        /* grpc-js-xds */
  int seq;
} client;

static int backend_of(const char *answer, size_t len) {
  if (len == 2 && answer[0] == 'b' && answer[1] >= '0' && answer[1] < '0' + NB)
    return answer[1] - '0';
  return -1;
}

static void count(tally *t, int code, int b, const char *msg) {
  t->n++;
  if (code >= 0 && code < 17)
    t->codes[code]++;
  if (code == 0 && b >= 0) {
    t->backend[b]++;
    t->ok++;
  } else {
    t->other++;
    if (!t->message[0])
      snprintf(t->message, sizeof(t->message), "%d %s", code, msg ? msg : "");
  }
}

static void grit_calls(grit_channel *ch, int n, const char *header, bool wfr,
                       uint64_t timeout_ms, tally *t) {
  grit_metadata *md = NULL;
  if (header) {
    const char *eq = strchr(header, '=');
    char key[64];
    snprintf(key, sizeof(key), "%.*s", (int)(eq - header), header);
    if (grit_metadata_create(&md) != GRIT_OK ||
        grit_metadata_add(md, key, eq + 1, strlen(eq + 1)) != GRIT_OK)
      abort();
  }
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms,
                      .wait_for_ready = wfr ? GRIT_WFR_ON : GRIT_WFR_OFF,
                      .metadata = md};
  for (int i = 0; i < n; i++) {
    grit_status st = {0};
    grit_bytes resp = {0};
    (void)grit_unary_call(ch, "/lb.Svc/Call", "", 0, &o, &resp, &st, NULL);
    count(t, (int)st.code,
          resp.data ? backend_of((const char *)resp.data, resp.len) : -1,
          st.message);
    grit_bytes_free(&resp);
    grit_status_free(&st);
  }
  grit_metadata_destroy(md);
}

/* One command to xds_client.js --serve, its answer parsed into |t|. */
static void node_calls(client *c, int n, const char *header, tally *t) {
  char cmd[256], md[128] = "{}", want[32];
  if (header) {
    const char *eq = strchr(header, '=');
    snprintf(md, sizeof(md), "{\"%.*s\":\"%s\"}", (int)(eq - header), header,
             eq + 1);
  }
  snprintf(cmd, sizeof(cmd),
           "{\"calls\":%d,\"metadata\":%s,\"timeout_ms\":10000}", n, md);
  int from = xcp_nlines(c->node) - 1;
  xcp_cmd(c->node, cmd);
  snprintf(want, sizeof(want), "\"seq\":%d}", ++c->seq);
  /* n calls of at most 10 s each: bounded by the calls' own deadlines. */
  int i = xcp_wait(c->node, from, 20000 + n * 10000, want, (char *)NULL);
  json_t *j = i >= 0 ? json_loads(xcp_line(c->node, i), 0, NULL) : NULL;
  if (!j) {
    fprintf(stderr, "%s: no answer to %s\n", c->name, cmd);
    xcp_failures++;
    return;
  }
  const char *k;
  json_t *v;
  json_object_foreach(json_object_get(j, "backends"), k, v) {
    int b = backend_of(k, strlen(k));
    for (json_int_t m = 0; m < json_integer_value(v); m++)
      count(t, 0, b, "an answer from no known backend");
  }
  json_t *msg = json_object_get(j, "message");
  json_object_foreach(json_object_get(j, "statuses"), k, v) {
    if (atoi(k) == 0)
      continue;
    for (json_int_t m = 0; m < json_integer_value(v); m++)
      count(t, atoi(k), -1, json_string_value(msg));
  }
  json_decref(j);
}

static void calls(client *c, int n, const char *header, tally *t) {
  memset(t, 0, sizeof(*t));
  if (c->ch)
    grit_calls(c->ch, n, header, true, 10000, t);
  else
    node_calls(c, n, header, t);
}

/* Until the client's decisions are those of |k|: calls one at a time until
 * the last 20 were all on |mask| and, for a spread, every backend of
 * |mask| answered since the last call outside it, for a split, both sides
 * answered. Bounded (60 s); false when it did not settle. */
static bool settle(client *c, const check *k) {
  uint64_t t0 = xcp_now_ms();
  unsigned seen = 0;
  int run = 0, made = 0;
  while (xcp_now_ms() - t0 < 60000) {
    tally t;
    calls(c, 1, k->header, &t);
    made++;
    int b = -1;
    for (int i = 0; i < NB; i++)
      if (t.backend[i])
        b = i;
    if (b >= 0 && (k->mask & (1u << b))) {
      run++;
      seen |= 1u << b;
    } else {
      run = 0;
      seen = 0;
    }
    bool all = true;
    if (k->even)
      all = (seen & k->mask) == k->mask;
    if (k->split)
      all = (seen & k->split) && (seen & k->mask & ~k->split);
    if (run >= 20 && all)
      return true;
  }
  fprintf(stderr, "%s: did not settle after %d calls (mask %u)\n", c->name,
          made, k->mask);
  return false;
}

/* The decision of |k| in |t|; "" when it holds, else why not. */
static void judge(const check *k, const tally *t, char *why, size_t size) {
  why[0] = '\0';
  if (t->ok != t->n) {
    snprintf(why, size, "%d of %d calls failed (%s)", t->other, t->n,
             t->message);
    return;
  }
  int in = 0, nmask = 0;
  for (int i = 0; i < NB; i++)
    if (k->mask & (1u << i)) {
      in += t->backend[i];
      nmask++;
    }
  if (in != t->n) {
    snprintf(why, size, "%d of %d calls outside backends %u", t->n - in, t->n,
             k->mask);
    return;
  }
  if (k->even)
    for (int i = 0; i < NB; i++) {
      if (!(k->mask & (1u << i)))
        continue;
      double fair = (double)t->n / nmask;
      if (t->backend[i] < fair * 0.9 || t->backend[i] > fair * 1.1)
        snprintf(why, size, "b%d took %d of %d calls (round robin: %.0f)", i,
                 t->backend[i], t->n, fair);
    }
  if (k->split) {
    /* Issue 27's bar: the share within 5 points of the weight. For 1 000
     * calls at 20 % that is [150, 250], 3.95 sigma of binomial(1000, 0.2)
     * (sigma 12.6): a correct client fails it with probability 6.9e-5 per
     * run (exact binomial tails). */
    int on = 0;
    for (int i = 0; i < NB; i++)
      if (k->split & (1u << i))
        on += t->backend[i];
    double lo = t->n * (k->split_pct - 5) / 100.0;
    double hi = t->n * (k->split_pct + 5) / 100.0;
    if (on < lo || on > hi)
      snprintf(why, size, "%d of %d calls on backends %u (%d %%: %.0f..%.0f)",
               on, t->n, k->split, k->split_pct, lo, hi);
  }
}

static void print_tally(const char *name, const tally *t) {
  printf("\"%s\": {\"calls\": %d, \"b0\": %d, \"b1\": %d, \"b2\": %d, "
         "\"failed\": %d%s%s%s}",
         name, t->n, t->backend[0], t->backend[1], t->backend[2], t->other,
         t->message[0] ? ", \"first_failure\": \"" : "", t->message,
         t->message[0] ? "\"" : "");
}

/* ---- The steps with checks of their own ---- */

static grit_channel *g_ctl;   /* the backends' /ctl.Ctl service */
static grit_channel *g_retry; /* the retry server's /retry.Svc/Log */
static client *g_both[2];     /* grit, grpc-js-xds */

/* One call's outcome. */
typedef struct one {
  int code;
  char answer[64]; /* the response bytes ("b0".."b2", an echo) */
  char msg[160];   /* the status message */
  uint64_t ms;     /* from its start to its end */
} one;

#define MAXB 8 /* calls of one batch at most */

/* |n| calls of |method| with the metadata pairs |kv| (NULL-terminated key,
 * value list), one after the other or all at once (|parallel|); started
 * by batch_start, their outcomes in |res| (in the order they ended) after
 * batch_wait. */
typedef struct batch {
  client *c;
  const char *method, *request;
  const char *const *kv;
  int n;
  bool parallel;
  uint64_t timeout_ms;
  one res[MAXB];
  /* grit */
  pthread_t th[MAXB];
  int ended;
  pthread_mutex_t mu;
  /* grpc-js-xds */
  int from;
  char want[32];
} batch;

static void grit_one(batch *b, one *o) {
  grit_metadata *md = NULL;
  if (grit_metadata_create(&md) != GRIT_OK)
    abort();
  for (size_t i = 0; b->kv && b->kv[i]; i += 2)
    if (grit_metadata_add(md, b->kv[i], b->kv[i + 1], strlen(b->kv[i + 1])) !=
        GRIT_OK)
      abort();
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = b->timeout_ms,
                         .wait_for_ready = GRIT_WFR_ON,
                         .metadata = md};
  grit_status st = {0};
  grit_bytes resp = {0};
  uint64_t t0 = xcp_now_ms();
  grit_err e = grit_unary_call(b->c->ch, b->method, b->request,
                               strlen(b->request), &opts, &resp, &st, NULL);
  o->ms = xcp_now_ms() - t0;
  o->code = e == GRIT_OK ? (int)st.code : -1;
  snprintf(o->answer, sizeof(o->answer), "%.*s", (int)resp.len,
           resp.data ? (const char *)resp.data : "");
  snprintf(o->msg, sizeof(o->msg), "%s", st.message ? st.message : "");
  grit_bytes_free(&resp);
  grit_status_free(&st);
  grit_metadata_destroy(md);
}

static void *grit_one_thread(void *arg) {
  batch *b = arg;
  one o;
  grit_one(b, &o);
  pthread_mutex_lock(&b->mu);
  b->res[b->ended++] = o;
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

static void batch_start(batch *b) {
  if (b->n > MAXB)
    abort();
  if (!b->request)
    b->request = "";
  if (b->c->ch) {
    b->ended = 0;
    pthread_mutex_init(&b->mu, NULL);
    if (!b->parallel) {
      for (int i = 0; i < b->n; i++)
        grit_one(b, &b->res[b->ended++]);
      return;
    }
    for (int i = 0; i < b->n; i++)
      if (pthread_create(&b->th[i], NULL, grit_one_thread, b) != 0)
        abort();
    return;
  }
  json_t *md = json_object();
  for (size_t i = 0; b->kv && b->kv[i]; i += 2)
    json_object_set_new(md, b->kv[i], json_string(b->kv[i + 1]));
  json_t *cmd = json_pack(
      "{s:i, s:o, s:I, s:s, s:s, s:b, s:b}", "calls", b->n, "metadata", md,
      "timeout_ms", (json_int_t)b->timeout_ms, "method", b->method, "request",
      b->request, "parallel", b->parallel, "detail", 1);
  char *line = json_dumps(cmd, JSON_COMPACT);
  json_decref(cmd);
  b->from = xcp_nlines(b->c->node) - 1;
  xcp_cmd(b->c->node, line);
  free(line);
  snprintf(b->want, sizeof(b->want), "\"seq\":%d}", ++b->c->seq);
}

/* false when the client gave no answer (each call is bounded by its own
 * deadline, so this wait is bounded too). */
static bool batch_wait(batch *b) {
  if (b->c->ch) {
    if (b->parallel)
      for (int i = 0; i < b->n; i++)
        pthread_join(b->th[i], NULL);
    pthread_mutex_destroy(&b->mu);
    return b->ended == b->n;
  }
  int i = xcp_wait(b->c->node, b->from,
                   20000 + (int)(b->n * (b->timeout_ms + 1000)), b->want,
                   (char *)NULL);
  json_t *j = i >= 0 ? json_loads(xcp_line(b->c->node, i), 0, NULL) : NULL;
  json_t *rs = json_object_get(j, "results");
  if (!j || json_array_size(rs) != (size_t)b->n) {
    fprintf(stderr, "%s: no answer to %d calls of %s\n", b->c->name, b->n,
            b->method);
    json_decref(j);
    return false;
  }
  size_t k;
  json_t *r;
  json_array_foreach(rs, k, r) {
    one *o = &b->res[k];
    const char *a = json_string_value(json_object_get(r, "answer"));
    const char *m = json_string_value(json_object_get(r, "message"));
    o->code = (int)json_integer_value(json_object_get(r, "code"));
    o->ms = (uint64_t)json_integer_value(json_object_get(r, "ms"));
    snprintf(o->answer, sizeof(o->answer), "%s", a ? a : "");
    snprintf(o->msg, sizeof(o->msg), "%s", m ? m : "");
  }
  json_decref(j);
  return true;
}

/* One call through |c|, waited for. */
static one call1(client *c, const char *method, const char *request,
                 const char *const *kv, uint64_t timeout_ms) {
  batch b = {.c = c,
             .method = method,
             .request = request,
             .kv = kv,
             .n = 1,
             .timeout_ms = timeout_ms};
  batch_start(&b);
  if (!batch_wait(&b))
    b.res[0] = (one){.code = -1};
  return b.res[0];
}

/* A call on the backends' control service; its answer, "" on failure. */
static void ctl_call(const char *method, const char *req, char *out,
                     size_t size) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = 10000,
                      .wait_for_ready = GRIT_WFR_ON};
  grit_status st = {0};
  grit_bytes resp = {0};
  (void)grit_unary_call(g_ctl, method, req, strlen(req), &o, &resp, &st, NULL);
  snprintf(out, size, "%.*s", st.code == GRIT_STATUS_OK ? (int)resp.len : 0,
           resp.data ? (const char *)resp.data : "");
  grit_bytes_free(&resp);
  grit_status_free(&st);
}

static int held_now(void) {
  char n[16];
  ctl_call("/ctl.Ctl/Held", "", n, sizeof(n));
  return n[0] ? atoi(n) : -1;
}

/* A42: with hash_policy header x-user over chash (b0, b1, b2), each
 * client settles (the key "settle" 20 times in a row on one backend; round
 * robin on c1 as side.json starts it never does that), then 20 keys of 5
 * calls each: every key's calls on one backend, and the keys over more
 * than one backend (all 20 on one of three is 3^-19 even for a fair ring).
 * Which backend a key chose in each client is printed and compared, not
 * asserted: both hash the header with XXH64 (A42) but the ring's points
 * come from each one's address strings. */
#define NKEYS 20
static void ring_hash_step(const step *s) {
  int chose[2][NKEYS];
  for (int c = 0; c < 2; c++) {
    client *cl = g_both[c];
    const char *settle_kv[] = {"x-user", "settle", NULL};
    uint64_t t0 = xcp_now_ms();
    int run = 0, last = -1;
    while (run < 20 && xcp_now_ms() - t0 < 60000) {
      one o = call1(cl, "/lb.Svc/Call", "", settle_kv, 10000);
      int b = o.code == 0 ? backend_of(o.answer, strlen(o.answer)) : -1;
      run = b >= 0 && b == last ? run + 1 : 1;
      last = b;
    }
    if (run < 20) {
      fprintf(stderr, "%s: ring_hash did not settle\n", cl->name);
      xcp_failures++;
    }
    unsigned used = 0;
    int sticky = 0;
    for (int u = 0; u < NKEYS; u++) {
      char key[16];
      snprintf(key, sizeof(key), "user-%d", u);
      const char *kv[] = {"x-user", key, NULL};
      batch b = {.c = cl, .method = "/lb.Svc/Call", .kv = kv, .n = 5};
      b.timeout_ms = 10000;
      batch_start(&b);
      chose[c][u] = -1;
      if (!batch_wait(&b)) {
        xcp_failures++;
        continue;
      }
      int first = backend_of(b.res[0].answer, strlen(b.res[0].answer));
      bool same = first >= 0;
      for (int i = 0; i < 5; i++)
        same = same && b.res[i].code == 0 &&
               backend_of(b.res[i].answer, strlen(b.res[i].answer)) == first;
      if (same) {
        chose[c][u] = first;
        used |= 1u << first;
        sticky++;
      } else {
        fprintf(stderr, "%s: key %s spread (%s %s ... %s)\n", cl->name, key,
                b.res[0].answer, b.res[1].answer, b.res[4].msg);
      }
    }
    int nused = 0;
    for (int i = 0; i < NB; i++)
      nused += (used >> i) & 1;
    printf("{\"step\": \"%s\", \"client\": \"%s\", \"keys\": %d, "
           "\"sticky\": %d, \"backends_used\": %d, \"chosen\": \"",
           s->name, cl->name, NKEYS, sticky, nused);
    for (int u = 0; u < NKEYS; u++)
      printf("%s%d", u ? " " : "", chose[c][u]);
    printf("\"}\n");
    CHECK(sticky == NKEYS);
    CHECK(nused >= 2);
  }
  int same = 0;
  for (int u = 0; u < NKEYS; u++)
    same += chose[0][u] >= 0 && chose[0][u] == chose[1][u];
  printf("{\"step\": \"%s\", \"same_backend_in_both\": %d, \"of\": %d}\n",
         s->name, same, NKEYS);
}

/* The attempts the retry server saw for |key| (lines of its Log), -1 when
 * it cannot say. */
static int attempts_of(const char *key) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = 10000,
                      .wait_for_ready = GRIT_WFR_ON};
  grit_status st = {0};
  grit_bytes resp = {0};
  (void)grit_unary_call(g_retry, "/retry.Svc/Log", key, strlen(key), &o, &resp,
                        &st, NULL);
  int n = st.code == GRIT_STATUS_OK ? 0 : -1;
  for (size_t i = 0; n >= 0 && i < resp.len; i++)
    n += resp.data[i] == '\n';
  grit_bytes_free(&resp);
  grit_status_free(&st);
  return n;
}

/* A44: retry_on unavailable, num_retries 2. Each client settles (a call
 * of /retry.Svc/Call answered by the retry server: before the update it
 * goes to c1, whose backends do not serve it), then three calls with keys
 * of its own: the backend fails the first attempt (OK after 2 attempts),
 * the first 5 (UNAVAILABLE after 3), and, on the route without a policy,
 * the first (UNAVAILABLE after 1). The attempts are the server's count. */
static void retry_step(const step *s) {
  static const struct {
    const char *suffix, *fail;
    bool policy;
    int code, attempts;
  } cases[] = {{"r1", "1", true, 0, 2},
               {"r5", "5", true, 14, 3},
               {"p1", "1", false, 14, 1}};
  for (int c = 0; c < 2; c++) {
    client *cl = g_both[c];
    uint64_t t0 = xcp_now_ms();
    int code = -1;
    while (code != 0 && xcp_now_ms() - t0 < 60000) {
      const char *kv[] = {"x-retry", "1", NULL};
      one o = call1(cl, "/retry.Svc/Call", "x", kv, 10000);
      code = o.code == 0 && strcmp(o.answer, "x") == 0 ? 0 : o.code;
      if (code != 0)
        usleep(50000);
    }
    if (code != 0) {
      fprintf(stderr, "%s: the retry route is not in force\n", cl->name);
      xcp_failures++;
    }
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
      char key[48];
      snprintf(key, sizeof(key), "%s-%s", c ? "node" : "grit", cases[k].suffix);
      const char *kv[] = {"x-call-key",
                          key,
                          "x-fail",
                          cases[k].fail,
                          cases[k].policy ? "x-retry" : NULL,
                          "1",
                          NULL};
      one o = call1(cl, "/retry.Svc/Call", "x", kv, 10000);
      int n = attempts_of(key);
      printf("{\"step\": \"%s\", \"client\": \"%s\", \"key\": \"%s\", "
             "\"policy\": %s, \"fail_first\": %s, \"status\": %d, "
             "\"attempts\": %d, \"message\": \"%s\"}\n",
             s->name, cl->name, key, cases[k].policy ? "true" : "false",
             cases[k].fail, o.code, n, o.msg);
      CHECK(o.code == cases[k].code);
      CHECK(n == cases[k].attempts);
    }
  }
}

/* A31: /lb.Svc/Hold (the backend holds the call) capped at 500 ms by the
 * route; the call's own deadline is 20 s. Each client settles (20 calls in
 * a row on b2, which only this route config sends everything to), then 2
 * held calls: DEADLINE_EXCEEDED, not before the cap (400 ms leaves room
 * for timer rounding) and well before the own deadline (under 10 s, half
 * of it). The backends then release what they hold. */
static void max_stream_duration_step(const step *s) {
  static const check on_b2 = {NULL, 20, 4, false, 0, 0};
  for (int c = 0; c < 2; c++) {
    client *cl = g_both[c];
    CHECK(settle(cl, &on_b2));
    for (int i = 0; i < 2; i++) {
      one o = call1(cl, "/lb.Svc/Hold", "", NULL, 20000);
      printf("{\"step\": \"%s\", \"client\": \"%s\", \"status\": %d, "
             "\"ms\": %llu, \"message\": \"%s\"}\n",
             s->name, cl->name, o.code, (unsigned long long)o.ms, o.msg);
      CHECK(o.code == GRIT_STATUS_DEADLINE_EXCEEDED);
      CHECK(o.ms >= 400 && o.ms < 10000);
    }
  }
  char ans[16];
  ctl_call("/ctl.Ctl/Release", "", ans, sizeof(ans));
}

/* A32: max_requests 2 on cmax. Per client, one after the other (each has
 * its own counter; the backends' count of held calls is shared): 2 calls
 * of /lb.Svc/Hold at once, which the backends hold (their count reaches
 * 2); then, while those are in flight, 2 more at once (deadline 5 s):
 * both fail UNAVAILABLE before their deadline (one that reached a backend
 * would be held past it, one queued would end DEADLINE_EXCEEDED), and the
 * backends still hold 2; once released, the first 2 end OK. (The 2 held
 * calls are started before the other 2 rather than all 4 at once:
 * grpc-js-xds counts a call when it starts on the transport, after the
 * pick, so 4 picks in one turn of its event loop all pass; see
 * docs/xds.md.) */
static void circuit_breaker_step(const step *s) {
  for (int c = 0; c < 2; c++) {
    client *cl = g_both[c];
    uint64_t t0 = xcp_now_ms();
    while (held_now() != 0 && xcp_now_ms() - t0 < 35000)
      usleep(50000); /* the backends hold a call at most 30 s */
    CHECK(held_now() == 0);
    batch in = {.c = cl,
                .method = "/lb.Svc/Hold",
                .n = 2,
                .parallel = true,
                .timeout_ms = 20000};
    batch_start(&in);
    t0 = xcp_now_ms();
    while (held_now() < 2 && xcp_now_ms() - t0 < 15000)
      usleep(20000);
    batch over = {.c = cl,
                  .method = "/lb.Svc/Hold",
                  .n = 2,
                  .parallel = true,
                  .timeout_ms = 5000};
    batch_start(&over);
    CHECK(batch_wait(&over));
    int held = held_now();
    char ans[16];
    ctl_call("/ctl.Ctl/Release", "", ans, sizeof(ans));
    CHECK(batch_wait(&in));
    int ok = 0, refused = 0;
    for (int i = 0; i < 2; i++) {
      ok += in.res[i].code == 0;
      refused +=
          over.res[i].code == GRIT_STATUS_UNAVAILABLE && over.res[i].ms < 5000;
      if (in.res[i].code != 0 || over.res[i].code != GRIT_STATUS_UNAVAILABLE)
        fprintf(stderr, "%s: held call %d %s, call over the limit %d %s\n",
                cl->name, in.res[i].code, in.res[i].msg, over.res[i].code,
                over.res[i].msg);
    }
    printf("{\"step\": \"%s\", \"client\": \"%s\", \"held_by_backends\": %d, "
           "\"held_calls_ok\": %d, \"over_limit_unavailable\": %d, "
           "\"over_limit_ms\": [%llu, %llu], \"message\": \"%s\"}\n",
           s->name, cl->name, held, ok, refused,
           (unsigned long long)over.res[0].ms,
           (unsigned long long)over.res[1].ms, over.res[0].msg);
    CHECK(held == 2);
    CHECK(ok == 2 && refused == 2);
  }
}

/* A32: drop_overloads 50 % on cdrop (b0, b1). Each client settles (until
 * a call fails UNAVAILABLE: only cdrop drops, and a wait-for-ready call
 * fails nothing else here), then 1 000 calls: every one served by b0 or b1
 * or failed UNAVAILABLE, and the dropped share within [400, 600]: 6.3
 * sigma of binomial(1000, 0.5), a correct client fails it with
 * probability 1.8e-10 per run. */
static void drop_overloads_step(const step *s) {
  static const check drop = {NULL, 1000, 3, false, 0, 0};
  for (int c = 0; c < 2; c++) {
    client *cl = g_both[c];
    uint64_t t0 = xcp_now_ms();
    bool dropping = false;
    while (!dropping && xcp_now_ms() - t0 < 60000) {
      tally t;
      calls(cl, 1, NULL, &t);
      dropping = t.codes[GRIT_STATUS_UNAVAILABLE] == 1;
    }
    CHECK(dropping);
    tally t;
    calls(cl, drop.n, NULL, &t);
    int served = t.backend[0] + t.backend[1];
    int dropped = t.codes[GRIT_STATUS_UNAVAILABLE];
    printf("{\"step\": \"%s\", \"client\": \"%s\", \"calls\": %d, "
           "\"dropped\": %d, \"served_b0\": %d, \"served_b1\": %d, "
           "\"first_failure\": \"%s\"}\n",
           s->name, cl->name, t.n, dropped, t.backend[0], t.backend[1],
           t.message);
    CHECK(t.n == drop.n);
    CHECK(served + dropped == drop.n);
    CHECK(dropped >= 400 && dropped <= 600);
  }
}

/* ---- The control plane's log ---- */

/* The number of the ADS stream whose Node says |agent|, or -1. */
static int stream_of(xcp *cp, const char *agent, int ms) {
  char want[96];
  snprintf(want, sizeof(want), "\"agent\":\"%s\"", agent);
  int i = xcp_wait(cp, -1, ms, "\"event\":\"request\"", want, (char *)NULL);
  json_t *j = i >= 0 ? json_loads(xcp_line(cp, i), 0, NULL) : NULL;
  int s = j ? (int)json_integer_value(json_object_get(j, "stream")) : -1;
  json_decref(j);
  return s;
}

/* After line |from|: the first response on |stream|, and that stream's
 * request answering it (same nonce). Its error ("" for an ACK) into
 * |err|; false when either is missing after 30 s. */
static bool answered(xcp *cp, int from, int stream, char *err, size_t size) {
  char want[64];
  snprintf(want, sizeof(want), "\"stream\":%d,", stream);
  int i =
      xcp_wait(cp, from, 30000, "\"event\":\"response\"", want, (char *)NULL);
  json_t *j = i >= 0 ? json_loads(xcp_line(cp, i), 0, NULL) : NULL;
  if (!j)
    return false;
  char nonce[64], s[64];
  snprintf(nonce, sizeof(nonce), "\"nonce\":\"%s\"",
           json_string_value(json_object_get(j, "nonce")));
  json_decref(j);
  snprintf(s, sizeof(s), "\"stream\":%d,", stream);
  i = xcp_wait(cp, i, 30000, "\"event\":\"request\"", nonce, s, (char *)NULL);
  j = i >= 0 ? json_loads(xcp_line(cp, i), 0, NULL) : NULL;
  if (!j)
    return false;
  const char *e = json_string_value(json_object_get(j, "error"));
  snprintf(err, size, "%s", e ? e : "");
  json_decref(j);
  return true;
}

/* ---- main ---- */

static const step *find_step(const char *name) {
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
    if (strcmp(steps[i].name, name) == 0)
      return &steps[i];
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_xds_side STEP...\n");
    return 2;
  }
  for (int a = 1; a < argc; a++)
    if (!find_step(argv[a])) {
      fprintf(stderr, "no step %s\n", argv[a]);
      return 2;
    }
  const char *src = getenv("XDS_SCENARIOS");
  if (!src) {
    fprintf(stderr, "XDS_SCENARIOS is not set (run through run.sh)\n");
    return 2;
  }
  char client_js[1024];
  snprintf(client_js, sizeof(client_js), "%s/xds_client.js", src);
  char rscript[1024];
  snprintf(rscript, sizeof(rscript), "%s/../peers/retry_server.py", src);

  /* The three grpcio backends; their ports into B0..B2 for side.json. */
  xcp *backends = xcp_backends_start();
  if (!backends)
    return 1;
  grit_channel *ctl = NULL;
  if (xcp_backends_ports(backends, &ctl) != NB)
    return 1;
  char target[64];
  /* The retry server (cluster cr of side.json): its port into R. */
  char *const rargv[] = {(char *)"/usr/bin/python3", rscript, NULL};
  xcp *retry = xcp_spawn(rargv);
  if (!retry) {
    fprintf(stderr, "cannot start the retry server\n");
    return 1;
  }
  {
    char buf[16];
    snprintf(buf, sizeof(buf), "%d", xcp_port(retry));
    setenv("R", buf, 1);
    snprintf(target, sizeof(target), "ipv4:127.0.0.1:%d", xcp_port(retry));
    CHECK(grit_channel_create(NULL, target, NULL, NULL, &g_retry) == GRIT_OK);
  }
  g_ctl = ctl;
  xcp *cp = xcp_start_scenario("side.json", 0);
  if (!cp)
    return 1;

  /* One bootstrap file for both clients: grpc-js-xds wants "node" with a
   * "locality"; grit ignores server features it does not know. */
  char dir[] = "/tmp/grit-xds-side-XXXXXX", boot[64];
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(boot, sizeof(boot), "%s/bootstrap.json", dir);
  FILE *f = fopen(boot, "w");
  if (!f) {
    perror(boot);
    return 1;
  }
  fprintf(f,
          "{\"xds_servers\": [{\"server_uri\": \"127.0.0.1:%d\",\n"
          "  \"channel_creds\": [{\"type\": \"insecure\"}],\n"
          "  \"server_features\": [\"xds_v3\"]}],\n"
          " \"node\": {\"id\": \"side-by-side\", \"cluster\": \"side\",\n"
          "  \"locality\": {\"region\": \"r\", \"zone\": \"z\"}}}\n",
          xcp_port(cp));
  fclose(f);
  setenv("GRPC_XDS_BOOTSTRAP", boot, 1);
  unsetenv("GRPC_XDS_BOOTSTRAP_CONFIG");

  client gc = {.name = "grit"}, nc = {.name = "grpc-js-xds"};
  CHECK(grit_xds_resolver_register() == GRIT_OK);
  CHECK(grit_channel_create(NULL, "xds:///svc", NULL, NULL, &gc.ch) == GRIT_OK);
  char *const nargv[] = {(char *)"node",     client_js,
                         (char *)"--target", (char *)"xds:///svc",
                         (char *)"--serve",  NULL};
  nc.node = xcp_spawn_until(nargv, "READY ");
  if (!gc.ch || !nc.node) {
    fprintf(stderr, "cannot start the clients\n");
    return 1;
  }
  /* The first call of each makes its ADS stream; the streams' numbers
   * then tell the two clients apart on the control plane's log. */
  client *both[2] = {&gc, &nc};
  g_both[0] = &gc;
  g_both[1] = &nc;
  tally t;
  for (int c = 0; c < 2; c++) {
    calls(both[c], 1, NULL, &t);
    CHECK(t.ok == 1);
  }
  int sg = stream_of(cp, "grit", 30000);
  int sn = stream_of(cp, "gRPC Node Pure JS", 30000);
  CHECK(sg > 0 && sn > 0 && sg != sn);

  for (int a = 1; a < argc; a++) {
    const step *s = find_step(argv[a]);
    int before = xcp_failures;
    if (s->update) {
      int mark = xcp_nlines(cp) - 1;
      char cmd[96];
      snprintf(cmd, sizeof(cmd), "update %s", s->update);
      xcp_cmd(cp, cmd);
      int u = xcp_wait(cp, mark, 10000, "\"updated\"", (char *)NULL);
      CHECK(u >= 0);
      /* Both clients answer the update: both ACK, or both NACK. */
      char eg[512] = "", en[512] = "";
      bool ag = answered(cp, u, sg, eg, sizeof(eg));
      bool an = answered(cp, u, sn, en, sizeof(en));
      CHECK(ag && an);
      printf("{\"step\": \"%s\", \"grit_nack\": \"%s\", "
             "\"grpc_js_xds_nack\": \"%s\"}\n",
             s->name, eg, en);
      CHECK(s->nack == (eg[0] != '\0'));
      CHECK(s->nack == (en[0] != '\0'));
    }
    for (int k = 0; k < 2 && s->checks[k].n; k++) {
      const check *ck = &s->checks[k];
      tally res[2];
      char why[2][256];
      for (int c = 0; c < 2; c++) {
        CHECK(settle(both[c], ck));
        calls(both[c], ck->n, ck->header, &res[c]);
        judge(ck, &res[c], why[c], sizeof(why[c]));
      }
      printf("{\"step\": \"%s\", \"header\": \"%s\", ", s->name,
             ck->header ? ck->header : "");
      print_tally("grit", &res[0]);
      printf(", ");
      print_tally("grpc-js-xds", &res[1]);
      printf("}\n");
      for (int c = 0; c < 2; c++)
        if (why[c][0]) {
          fprintf(stderr, "step %s: %s: %s\n", s->name, both[c]->name, why[c]);
          xcp_failures++;
        }
      /* Agreement: the same backends took calls in both. */
      for (int i = 0; i < NB; i++)
        CHECK((res[0].backend[i] > 0) == (res[1].backend[i] > 0));
    }
    if (s->run)
      s->run(s);
    printf("step %s: %s\n", s->name,
           xcp_failures > before ? "FAILED" : "both agree");
  }

  grit_channel_destroy(gc.ch);
  grit_channel_destroy(ctl);
  grit_channel_destroy(g_retry);
  xcp_stop(nc.node);
  xcp_dump_if_failed(cp);
  xcp_stop(cp);
  xcp_stop(backends);
  xcp_stop(retry);
  unlink(boot);
  rmdir(dir);
  CHECK(grit_xdsc_wait_all_freed(10000));
  grit_default_runtime_shutdown();
  return xcp_exit_status();
}
