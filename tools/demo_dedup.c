/* `grit demo` scene 8: exactly-once effects under hedging and retries
 * (issue 17, SPEC DD-01..DD-03, ID-01). Two replicas of a CreateGroup
 * service (h2server/ engines with a handler) share one grit-dedup
 * store. Their backend is sometimes slow (hedges arrive while the first
 * attempt still runs) and sometimes fails after committing (the response
 * is lost: the client retries, and the next replica heals the key from the
 * domain table). The domain table counts rows per idempotency key. */
#include "demo_dedup.h"

#include <grit/dedup.h>
#include <grit/grit.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h2server.h"

#define CREATE "/grit.demo.Groups/CreateGroup"

/* The domain: one row per created group, with the key that created it. */
typedef struct groups {
  pthread_mutex_t mu;
  char (*keys)[48];
  char (*names)[48];
  size_t n, cap;
} groups;

typedef struct replica {
  grit_dedup_store *store;
  groups *g;
  int id;
  unsigned leads; /* executions on this replica (its thread only) */
  char resp[128];
} replica;

static long groups_find(groups *g, const char *key) {
  for (size_t i = 0; i < g->n; i++)
    if (strcmp(g->keys[i], key) == 0)
      return (long)i;
  return -1;
}

/* The domain write: INSERT INTO groups (key, name). */
static void groups_insert(groups *g, const char *key, const char *name) {
  pthread_mutex_lock(&g->mu);
  if (g->n < g->cap) {
    snprintf(g->keys[g->n], sizeof(g->keys[0]), "%s", key);
    snprintf(g->names[g->n], sizeof(g->names[0]), "%s", name);
    g->n++;
  }
  pthread_mutex_unlock(&g->mu);
}

/* Heal: the domain table is the source of truth (DD-02). */
static grit_dedup_verdict groups_heal(const char *key, grit_dedup_heal_ctx *ctx,
                                      void *ud) {
  groups *g = ud;
  pthread_mutex_lock(&g->mu);
  long i = groups_find(g, key);
  char resp[64] = "";
  if (i >= 0)
    snprintf(resp, sizeof(resp), "created %s", g->names[i]);
  pthread_mutex_unlock(&g->mu);
  if (i < 0)
    return GRIT_DEDUP_NOT_COMMITTED;
  grit_dedup_heal_set_response(ctx, resp, strlen(resp));
  return GRIT_DEDUP_COMMITTED;
}

static void fingerprint(const h2s_request *req, uint8_t out[8]) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a of path and message */
  for (const char *p = req->path ? req->path : ""; *p; p++)
    h = (h ^ (uint8_t)*p) * 1099511628211ull;
  for (size_t i = 0; i < req->n_msgs; i++)
    for (size_t j = 0; j < req->msgs[i].len; j++)
      h = (h ^ req->msgs[i].data[j]) * 1099511628211ull;
  memcpy(out, &h, 8);
}

static void status_only(h2s_action *act, int code, const char *msg) {
  act->kind = H2S_TRAILERS_ONLY;
  act->grpc_status = code;
  act->grpc_message = msg;
}

/* The CreateGroup handler, on the replica's server thread. A handler runs
 * to its end (claim to succeed) before the next on the same replica, so a
 * pending key is the other replica's: a follower waits up to 100 ms for
 * it (delaying this replica meanwhile), then answers ABORTED, which the
 * client's policy retries. */
static void create_group(const h2s_request *req, bool at_end, h2s_action *act,
                         void *ud) {
  replica *r = ud;
  if (!at_end || !req->path || strcmp(req->path, CREATE) != 0)
    return;
  const char *key = h2s_request_header(req, "idempotency-key");
  if (!key) {
    status_only(act, 9, "idempotency-key required");
    return;
  }
  uint8_t fp[8];
  fingerprint(req, fp);
  grit_dedup_result res;
  grit_dedup_err e = grit_dedup_claim(r->store, key, fp, sizeof(fp), 100, &res);
  if (e != GRIT_DEDUP_OK) {
    status_only(act, 14, "dedup store unavailable"); /* nothing ran */
    return;
  }
  switch (res.outcome) {
  case GRIT_DEDUP_LEADER: {
    char name[48];
    size_t len = req->n_msgs ? req->msgs[0].len : 0;
    if (len >= sizeof(name))
      len = sizeof(name) - 1;
    memcpy(name, req->n_msgs ? (const char *)req->msgs[0].data : "", len);
    name[len] = '\0';
    groups_insert(r->g, key, name); /* the domain commit */
    unsigned k = ++r->leads;
    if (k % 4 == 0) {
      /* Fails after committing: the reply is lost and this replica cannot
       * tell whether the write landed. The key stays pending for healing
       * (DD-02), never "failed". */
      grit_dedup_abandon(r->store, key, res.token);
      status_only(act, 14, "backend failed after commit");
      break;
    }
    snprintf(r->resp, sizeof(r->resp), "created %s", name);
    grit_dedup_succeed(r->store, key, res.token, r->resp, strlen(r->resp));
    act->body = H2S_BODY_BYTES;
    act->data = r->resp;
    act->len = strlen(r->resp);
    if (k % 3 == 0)
      act->delay_ms = 40; /* slow: the hedges arrive meanwhile */
    break;
  }
  case GRIT_DEDUP_REPLAY:
    if (res.status != 0) {
      status_only(act, res.status, "replayed failure");
      break;
    }
    snprintf(r->resp, sizeof(r->resp), "%.*s", (int)res.response_len,
             (const char *)res.response);
    act->body = H2S_BODY_BYTES;
    act->data = r->resp;
    act->len = strlen(r->resp);
    break;
  case GRIT_DEDUP_MISMATCH:
    status_only(act, 9, "idempotency-key reused for another request");
    break;
  case GRIT_DEDUP_IN_PROGRESS:
    status_only(act, 10, "in progress");
    break;
  }
  grit_dedup_result_free(&res);
}

typedef struct worker {
  grit_channel *ch;
  size_t from, to;
  size_t ok, app_retries;
  const char *tag;
} worker;

static void *worker_run(void *arg) {
  worker *w = arg;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 10000};
  for (size_t i = w->from; i < w->to; i++) {
    char name[48];
    int len = snprintf(name, sizeof(name), "%s-group-%zu", w->tag, i);
    /* The application's own key: should every attempt of a call fail (a
     * busy machine), the application retries the whole call with it. */
    char key[64];
    snprintf(key, sizeof(key), "%s-key-%zu", w->tag, i);
    o.idempotency_key = key;
    grit_bytes resp;
    grit_status st;
    for (int t = 0; t < 4; t++) {
      grit_unary_call(w->ch, CREATE, name, (size_t)len, &o, &resp, &st, NULL);
      if (st.code != GRIT_STATUS_UNAVAILABLE && st.code != GRIT_STATUS_ABORTED)
        break;
      w->app_retries++;
      grit_status_free(&st);
      grit_bytes_free(&resp);
    }
    char want[64];
    snprintf(want, sizeof(want), "created %s", name);
    if (st.code == GRIT_STATUS_OK && resp.len == strlen(want) &&
        memcmp(resp.data, want, resp.len) == 0)
      w->ok++;
    grit_status_free(&st);
    grit_bytes_free(&resp);
  }
  return NULL;
}

static grit_channel *channel_to(h2s_server **b, const char *policy) {
  char target[128], cfg[768];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%u,127.0.0.1:%u",
           h2s_server_port(b[0]), h2s_server_port(b[1]));
  snprintf(cfg, sizeof(cfg),
           "{\"loadBalancingConfig\":[{\"round_robin\":{}}],"
           "\"methodConfig\":[{\"name\":[{\"service\":\"grit.demo.Groups\"}],"
           "%s}]}",
           policy);
  grit_channel_args *args;
  if (grit_channel_args_create(&args) != GRIT_OK)
    return NULL;
  grit_channel_args_set_string(args, GRIT_ARG_SERVICE_CONFIG, cfg);
  grit_channel_args_set_int(args, GRIT_ARG_IDEMPOTENCY_KEYS, 1);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, target, args, &d, &ch) != GRIT_OK)
    fprintf(stderr, "grit demo: channel: %s %s\n", d.path, d.reason);
  grit_channel_args_destroy(args);
  return ch;
}

/* |n| calls from 8 threads; returns how many got their own group back. */
static size_t run_calls(grit_channel *ch, size_t n, const char *tag,
                        size_t *app_retries) {
  worker w[8];
  pthread_t th[8];
  for (int i = 0; i < 8; i++) {
    w[i] = (worker){.ch = ch,
                    .from = n * (size_t)i / 8,
                    .to = n * (size_t)(i + 1) / 8,
                    .tag = tag};
    pthread_create(&th[i], NULL, worker_run, &w[i]);
  }
  size_t ok = 0;
  for (int i = 0; i < 8; i++) {
    pthread_join(th[i], NULL);
    ok += w[i].ok;
    *app_retries += w[i].app_retries;
  }
  return ok;
}

int demo_scene_dedup(size_t n, const char *pg_conninfo) {
  groups g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cap = 2 * n * 4 + 16};
  g.keys = calloc(g.cap, sizeof(*g.keys));
  g.names = calloc(g.cap, sizeof(*g.names));
  grit_dedup_opts o = {.version = GRIT_DEDUP_OPTS_VERSION,
                       .heal = groups_heal,
                       .heal_data = &g,
                       .table = "grit_demo_dedup"};
  grit_dedup_store *store = NULL;
  char err[256] = "";
  grit_dedup_err e = pg_conninfo
                         ? grit_dedup_store_create_pg(pg_conninfo, &o, &store,
                                                      err, sizeof(err))
                         : grit_dedup_store_create_mem(&o, &store);
  if (e != GRIT_DEDUP_OK || !g.keys || !g.names) {
    fprintf(stderr, "grit demo: dedup store: %s %s\n", grit_dedup_strerror(e),
            err);
    free(g.keys);
    free(g.names);
    return 1;
  }
  replica rep[2] = {{.store = store, .g = &g, .id = 0},
                    {.store = store, .g = &g, .id = 1}};
  h2s_server *b[2] = {NULL, NULL};
  int rc = 0;
  for (int i = 0; i < 2; i++) {
    h2s_config cfg = {
        .quiet = true, .handler = create_group, .handler_data = &rep[i]};
    if (h2s_server_start(&cfg, &b[i]) != 0)
      rc = 1;
  }
  static const char *const policies[2] = {
      "\"hedgingPolicy\":{\"maxAttempts\":3,\"hedgingDelay\":\"0.005s\","
      "\"nonFatalStatusCodes\":[\"UNAVAILABLE\",\"ABORTED\"]}",
      "\"retryPolicy\":{\"maxAttempts\":5,\"initialBackoff\":\"0.005s\","
      "\"maxBackoff\":\"0.05s\",\"backoffMultiplier\":2,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\",\"ABORTED\"]}"};
  static const char *const titles[2] = {"hedging 5 ms, 3 attempts:",
                                        "retries, 5 attempts:"};
  static const char *const tags[2] = {"h", "r"};
  printf("  store: %s; backend: 1 execution in 3 slow (40 ms), 1 in 4 "
         "fails after commit\n",
         pg_conninfo ? "PostgreSQL" : "in-process");
  printf("  %-27s %6s %6s %14s %12s %11s\n", "CreateGroup", "calls", "OK",
         "requests sent", "domain rows", "duplicates");
  for (int p = 0; p < 2 && rc == 0; p++) {
    grit_channel *ch = channel_to(b, policies[p]);
    if (!ch) {
      rc = 1;
      break;
    }
    size_t before =
        h2s_server_request_count(b[0]) + h2s_server_request_count(b[1]);
    size_t rows_before = g.n;
    size_t app_retries = 0;
    size_t ok = run_calls(ch, n, tags[p], &app_retries);
    grit_channel_destroy(ch);
    size_t sent = h2s_server_request_count(b[0]) +
                  h2s_server_request_count(b[1]) - before;
    pthread_mutex_lock(&g.mu);
    size_t rows = g.n - rows_before, dups = 0;
    for (size_t i = rows_before; i < g.n; i++)
      for (size_t j = rows_before; j < i; j++)
        if (strcmp(g.keys[i], g.keys[j]) == 0) {
          dups++;
          break;
        }
    pthread_mutex_unlock(&g.mu);
    printf("  %-27s %6zu %6zu %14zu %12zu %11zu\n", titles[p], n, ok, sent,
           rows, dups);
    if (app_retries)
      printf("  (%zu calls retried by the application with their key)\n",
             app_retries);
    if (ok != n || rows != n || dups != 0 || sent <= n)
      rc = 1;
  }
  grit_dedup_stats st = GRIT_DEDUP_STATS_INIT;
  grit_dedup_get_stats(store, &st);
  printf("  dedup store: %" PRIu64 " claims, %" PRIu64 " executions, %" PRIu64
         " replays, %" PRIu64 " heals, %" PRIu64 " in progress\n",
         st.claims, st.leaders, st.replays, st.heals, st.in_progress);
  for (int i = 0; i < 2; i++)
    h2s_server_stop(b[i]);
  grit_dedup_store_destroy(store);
  free(g.keys);
  free(g.names);
  return rc;
}
