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
 * round-robin spread, a weighted split (bounds of 6 standard deviations),
 * the NACK of an invalid resource.
 *
 *   test_xds_side STEP...   (the steps of the table below, in order)
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grit/grit.h"
#include "test/xds/cp.h"
#include "xdsclient/xdsclient.h"

static int failures;
#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);    \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- The scenarios ---- */

#define NB 3 /* backends b0, b1, b2; a mask has bit i for bi */

typedef struct check {
  const char *header; /* "key=value" sent with every call, or NULL */
  int n;              /* calls measured */
  unsigned mask;      /* every call answered by a backend of |mask| */
  bool even;          /* round robin: each of |mask| within 10 % of n/k */
  unsigned split;     /* weighted: calls on |split| ... */
  int split_pct;      /* ... are this percentage of n (6 sd bounds) */
} check;

typedef struct step {
  const char *name;
  const char *update; /* the control plane's update, NULL: none */
  bool nack;          /* both clients must NACK the update */
  bool route_choice;  /* a per-call route choice step (several clusters) */
  check checks[2];    /* n == 0: none */
} step;

/* side.json: c1 starts as {b0, b1, b2}, c2 is {b2}. */
static const step steps[] = {
    /* The cluster's endpoints all used, round robin. */
    {"spread", NULL, false, false, {{NULL, 300, 7, true, 0, 0}}},
    /* An EDS update moves every call. */
    {"eds_move", "only_b2", false, false, {{NULL, 100, 4, false, 0, 0}}},
    /* Priority 0 {b0, b1}, priority 1 {b2}: priority 0 serves. */
    {"p0_healthy", "p0_healthy", false, false, {{NULL, 100, 3, true, 0, 0}}},
    /* Priority 0 all UNHEALTHY or DRAINING: priority 1. */
    {"p0_unhealthy",
     "p0_unhealthy",
     false,
     false,
     {{NULL, 100, 4, false, 0, 0}}},
    /* ... and back when it recovers. */
    {"p0_recovered", "p0_healthy", false, false, {{NULL, 100, 3, true, 0, 0}}},
    /* An invalid Cluster (STATIC) is NACKed; the previous one stays. */
    {"nack_cluster", "bad_cluster", true, false, {{NULL, 100, 3, true, 0, 0}}},
    {"cluster_fixed", "c1_fixed", false, false, {{NULL, 100, 3, true, 0, 0}}},
    /* The listener's route names a second cluster (c2: {b2}). */
    {"route_c2", "route_c2", false, false, {{NULL, 100, 4, false, 0, 0}}},
    /* weighted_clusters c1 80 / c2 20 (c1 {b0, b1} after p0_healthy). */
    {"weighted_80_20",
     "weighted_80_20",
     false,
     true,
     {{NULL, 1000, 7, false, 4, 20}}},
    /* x-route: canary -> c2, the rest -> c1. */
    {"header_route",
     "header_route",
     false,
     true,
     {{"x-route=canary", 100, 4, false, 0, 0}, {NULL, 100, 3, true, 0, 0}}},
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
    failures++;
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
  uint64_t t0 = now_ms();
  unsigned seen = 0;
  int run = 0, made = 0;
  while (now_ms() - t0 < 60000) {
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
    int on = 0;
    for (int i = 0; i < NB; i++)
      if (k->split & (1u << i))
        on += t->backend[i];
    double p = k->split_pct / 100.0;
    double mean = t->n * p, sd = sqrt(t->n * p * (1 - p));
    if (on < mean - 6 * sd || on > mean + 6 * sd)
      snprintf(why, size, "%d of %d calls on backends %u (%d %%: %.0f +- %.0f)",
               on, t->n, k->split, k->split_pct, mean, 6 * sd);
  }
}

static void print_tally(const char *name, const tally *t) {
  printf("\"%s\": {\"calls\": %d, \"b0\": %d, \"b1\": %d, \"b2\": %d, "
         "\"failed\": %d%s%s%s}",
         name, t->n, t->backend[0], t->backend[1], t->backend[2], t->other,
         t->message[0] ? ", \"first_failure\": \"" : "", t->message,
         t->message[0] ? "\"" : "");
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
  char script[1024], scenario[1024], client_js[1024];
  snprintf(script, sizeof(script), "%s/../peers/health_server.py", src);
  snprintf(scenario, sizeof(scenario), "%s/side.json", src);
  snprintf(client_js, sizeof(client_js), "%s/xds_client.js", src);

  /* The three grpcio backends; their ports into B0..B2 for side.json. */
  char *const bargv[] = {(char *)"/usr/bin/python3", script, NULL};
  xcp *backends = xcp_spawn(bargv);
  if (!backends) {
    fprintf(stderr, "cannot start the grpcio backends\n");
    return 1;
  }
  char target[64];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%d", xcp_port(backends));
  grit_channel *ctl = NULL;
  CHECK(grit_channel_create(NULL, target, NULL, NULL, &ctl) == GRIT_OK);
  char ports[64] = "";
  {
    grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                        .timeout_ms = 10000,
                        .wait_for_ready = GRIT_WFR_ON};
    grit_status st = {0};
    grit_bytes resp = {0};
    (void)grit_unary_call(ctl, "/ctl.Ctl/Ports", "", 0, &o, &resp, &st, NULL);
    snprintf(ports, sizeof(ports), "%.*s", (int)resp.len,
             resp.data ? (const char *)resp.data : "");
    grit_bytes_free(&resp);
    grit_status_free(&st);
  }
  int p[NB];
  if (sscanf(ports, "%d %d %d", &p[0], &p[1], &p[2]) != 3) {
    fprintf(stderr, "no backend ports (%s)\n", ports);
    return 1;
  }
  for (int i = 0; i < NB; i++) {
    char name[4] = {'B', (char)('0' + i), 0}, buf[16];
    snprintf(buf, sizeof(buf), "%d", p[i]);
    setenv(name, buf, 1);
  }
  xcp *cp = xcp_start(scenario, 0);
  if (!cp) {
    fprintf(stderr, "cannot start the control plane\n");
    return 1;
  }

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
    int before = failures;
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
          failures++;
        }
      /* Agreement: the same backends took calls in both. */
      for (int i = 0; i < NB; i++)
        CHECK((res[0].backend[i] > 0) == (res[1].backend[i] > 0));
    }
    printf("step %s: %s\n", s->name,
           failures > before ? "FAILED" : "both agree");
  }

  grit_channel_destroy(gc.ch);
  grit_channel_destroy(ctl);
  xcp_stop(nc.node);
  if (failures)
    for (int i = 0; i < xcp_nlines(cp); i++)
      fprintf(stderr, "cp: %s\n", xcp_line(cp, i));
  xcp_stop(cp);
  xcp_stop(backends);
  unlink(boot);
  rmdir(dir);
  CHECK(grit_xdsc_wait_all_freed(10000));
  grit_default_runtime_shutdown();
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
