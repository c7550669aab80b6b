/*
 * Behaviour tests of grit-dedup (SPEC DD-01..DD-04), the same cases against
 * both stores: `test_dedup mem [case]` and `test_dedup pg [case]` (the
 * latter starts a throwaway PostgreSQL server and stops it at the end).
 * A small in-test "domain" records every execution of a handler per key
 * and whether its write committed; it is the heal callback's source of
 * truth and the ledger the cases assert on.
 */
#include "grit/dedup.h"
#include "grit/grit.h" /* grit_set_allocator: util is inside libgrit-dedup */

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "pgtmp.h"

static bool use_pg;
static pgtmp pg;
static int table_seq;

/* ---- the domain: executions and commits per key ---- */

#define MAX_KEYS 4096

typedef struct domain {
  pthread_mutex_t mu;
  char keys[MAX_KEYS][40];
  int executed[MAX_KEYS];
  bool committed[MAX_KEYS];
  size_t n;
} domain;

static domain dom = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void dom_reset(void) {
  pthread_mutex_lock(&dom.mu);
  dom.n = 0;
  memset(dom.executed, 0, sizeof(dom.executed));
  memset(dom.committed, 0, sizeof(dom.committed));
  pthread_mutex_unlock(&dom.mu);
}

static size_t dom_slot(const char *key) {
  for (size_t i = 0; i < dom.n; i++)
    if (strcmp(dom.keys[i], key) == 0)
      return i;
  snprintf(dom.keys[dom.n], sizeof(dom.keys[0]), "%s", key);
  return dom.n++;
}

/* The handler's domain write: counts an execution, commits if asked. */
static void dom_execute(const char *key, bool commit) {
  pthread_mutex_lock(&dom.mu);
  size_t i = dom_slot(key);
  dom.executed[i]++;
  dom.committed[i] |= commit;
  pthread_mutex_unlock(&dom.mu);
}

static int dom_executed(const char *key) {
  pthread_mutex_lock(&dom.mu);
  int n = dom.executed[dom_slot(key)];
  pthread_mutex_unlock(&dom.mu);
  return n;
}

static atomic_int heal_calls;

static grit_dedup_verdict heal_from_domain(const char *key,
                                           grit_dedup_heal_ctx *ctx, void *ud) {
  (void)ud;
  atomic_fetch_add(&heal_calls, 1);
  pthread_mutex_lock(&dom.mu);
  bool c = dom.committed[dom_slot(key)];
  pthread_mutex_unlock(&dom.mu);
  if (!c)
    return GRIT_DEDUP_NOT_COMMITTED;
  char resp[64];
  int n = snprintf(resp, sizeof(resp), "rebuilt:%s", key);
  grit_dedup_heal_set_response(ctx, resp, (size_t)n);
  return GRIT_DEDUP_COMMITTED;
}

static grit_dedup_store *new_store(grit_dedup_opts o) {
  o.version = GRIT_DEDUP_OPTS_VERSION;
  if (!o.heal)
    o.heal = heal_from_domain;
  grit_dedup_store *s = NULL;
  dom_reset();
  atomic_store(&heal_calls, 0);
  if (!use_pg) {
    if (grit_dedup_store_create_mem(&o, &s) != GRIT_DEDUP_OK)
      return NULL;
    return s;
  }
  char table[32], err[256];
  snprintf(table, sizeof(table), "dd_t%d", ++table_seq);
  o.table = table;
  if (!o.pool_size)
    o.pool_size = 8;
  grit_dedup_err e =
      grit_dedup_store_create_pg(pg.conninfo, &o, &s, err, sizeof(err));
  if (e != GRIT_DEDUP_OK)
    fprintf(stderr, "create_pg: %s: %s\n", grit_dedup_strerror(e), err);
  return s;
}

#define FP(s) (s), strlen(s)

/* ---- DD-01: 32 threads race for each key; one executes ---- */

typedef struct race {
  grit_dedup_store *s;
  pthread_barrier_t go;
  atomic_int leaders, replays, bad;
} race;

static void *race_thread(void *arg) {
  race *r = arg;
  for (int k = 0; k < 8; k++) {
    char key[32];
    snprintf(key, sizeof(key), "race-%d", k);
    pthread_barrier_wait(&r->go);
    grit_dedup_result res;
    if (grit_dedup_claim(r->s, key, FP("req"), 20000, &res) != GRIT_DEDUP_OK) {
      atomic_fetch_add(&r->bad, 1);
      continue;
    }
    if (res.outcome == GRIT_DEDUP_LEADER) {
      atomic_fetch_add(&r->leaders, 1);
      dom_execute(key, true);
      usleep(20000); /* followers arrive while we run */
      if (grit_dedup_succeed(r->s, key, res.token, key, strlen(key)) !=
          GRIT_DEDUP_OK)
        atomic_fetch_add(&r->bad, 1);
    } else if (res.outcome == GRIT_DEDUP_REPLAY && res.status == 0 &&
               res.response_len == strlen(key) &&
               memcmp(res.response, key, res.response_len) == 0) {
      atomic_fetch_add(&r->replays, 1);
    } else {
      atomic_fetch_add(&r->bad, 1);
    }
    grit_dedup_result_free(&res);
  }
  return NULL;
}

static void test_race32(void) {
  race r = {.s = new_store((grit_dedup_opts){0})};
  ASSERT_NOT_NULL(r.s);
  pthread_barrier_init(&r.go, NULL, 32);
  pthread_t th[32];
  for (int i = 0; i < 32; i++)
    pthread_create(&th[i], NULL, race_thread, &r);
  for (int i = 0; i < 32; i++)
    pthread_join(th[i], NULL);
  pthread_barrier_destroy(&r.go);
  grit_dedup_store_destroy(r.s);
  ASSERT_EQ(atomic_load(&r.bad), 0);
  ASSERT_EQ(atomic_load(&r.leaders), 8);
  ASSERT_EQ(atomic_load(&r.replays), 8 * 31);
  for (int k = 0; k < 8; k++) {
    char key[32];
    snprintf(key, sizeof(key), "race-%d", k);
    ASSERT_EQ(dom_executed(key), 1);
  }
}

/* ---- DD-01, DD-02: healing ---- */

/* The leader commits and dies before succeed: after its lease the next
 * claimer asks the domain and replays the rebuilt response. */
static void test_heal_committed(void) {
  grit_dedup_store *s = new_store((grit_dedup_opts){.lease_ms = 200});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b;
  uint64_t t0 = test_now_ms();
  ASSERT_OK(grit_dedup_claim(s, "k1", FP("req"), 0, &a));
  ASSERT_EQ(a.outcome, GRIT_DEDUP_LEADER);
  dom_execute("k1", true); /* ... and the replica dies here */
  ASSERT_OK(grit_dedup_claim(s, "k1", FP("req"), 10000, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_REPLAY);
  ASSERT(b.healed);
  /* It waited for the lease (the PostgreSQL clock may differ by a ms). */
  ASSERT_CMP(test_now_ms() - t0, >=, 195);
  ASSERT_EQ(b.response_len, strlen("rebuilt:k1"));
  ASSERT_MEM_EQ(b.response, "rebuilt:k1", b.response_len);
  ASSERT_EQ(atomic_load(&heal_calls), 1);
  /* The old leader, back from the dead, no longer holds the key. */
  ASSERT_EQ(grit_dedup_succeed(s, "k1", a.token, "x", 1), GRIT_DEDUP_ERR_STALE);
  grit_dedup_result_free(&b);
  ASSERT_OK(grit_dedup_claim(s, "k1", FP("req"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_REPLAY);
  ASSERT(!b.healed);
  grit_dedup_result_free(&b);
  ASSERT_EQ(dom_executed("k1"), 1);
  grit_dedup_store_destroy(s);
}

/* The leader could not tell whether it committed (abandon): the next
 * claimer heals at once; nothing committed, so it runs the handler. */
static void test_heal_not_committed(void) {
  grit_dedup_store *s = new_store((grit_dedup_opts){0}); /* lease 30 s */
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b, c;
  ASSERT_OK(grit_dedup_claim(s, "k2", FP("req"), 0, &a));
  ASSERT_EQ(a.outcome, GRIT_DEDUP_LEADER);
  ASSERT_OK(grit_dedup_abandon(s, "k2", a.token));
  uint64_t t0 = test_now_ms();
  ASSERT_OK(grit_dedup_claim(s, "k2", FP("req"), 10000, &b));
  ASSERT_CMP(test_now_ms() - t0, <, 5000); /* not the 30 s lease */
  ASSERT_EQ(b.outcome, GRIT_DEDUP_LEADER);
  ASSERT(b.healed);
  ASSERT_NE(b.token, a.token);
  dom_execute("k2", true);
  ASSERT_OK(grit_dedup_succeed(s, "k2", b.token, "done", 4));
  ASSERT_OK(grit_dedup_claim(s, "k2", FP("req"), 0, &c));
  ASSERT_EQ(c.outcome, GRIT_DEDUP_REPLAY);
  ASSERT_MEM_EQ(c.response, "done", 4);
  grit_dedup_result_free(&c);
  ASSERT_EQ(dom_executed("k2"), 1);
  grit_dedup_store_destroy(s);
}

static grit_dedup_verdict heal_unknown(const char *key,
                                       grit_dedup_heal_ctx *ctx, void *ud) {
  (void)key;
  (void)ctx;
  (void)ud;
  return GRIT_DEDUP_UNKNOWN;
}

/* The source of truth cannot answer: the key stays pending, nothing runs. */
static void test_heal_unknown(void) {
  grit_dedup_store *s =
      new_store((grit_dedup_opts){.heal = heal_unknown, .lease_ms = 100});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b;
  ASSERT_OK(grit_dedup_claim(s, "k3", FP("req"), 0, &a));
  ASSERT_OK(grit_dedup_abandon(s, "k3", a.token));
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(grit_dedup_claim(s, "k3", FP("req"), 0, &b));
    ASSERT_EQ(b.outcome, GRIT_DEDUP_IN_PROGRESS);
    ASSERT(b.healed);
  }
  grit_dedup_store_destroy(s);
}

/* ---- DD-02: a recorded failure is replayed, never retried ---- */

static void test_fail_replay(void) {
  grit_dedup_store *s = new_store((grit_dedup_opts){0});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b;
  ASSERT_OK(grit_dedup_claim(s, "k4", FP("req"), 0, &a));
  ASSERT_EQ(grit_dedup_fail(s, "k4", a.token, 0, NULL),
            GRIT_DEDUP_ERR_INVALID_ARG);
  ASSERT_OK(grit_dedup_fail(s, "k4", a.token, 9, "group exists"));
  ASSERT_OK(grit_dedup_claim(s, "k4", FP("req"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_REPLAY);
  ASSERT_EQ(b.status, 9);
  ASSERT_STR_EQ(b.message, "group exists");
  grit_dedup_result_free(&b);
  ASSERT_EQ(grit_dedup_fail(s, "k4", a.token, 9, NULL), GRIT_DEDUP_ERR_STALE);
  grit_dedup_store_destroy(s);
}

/* ---- DD-03: same key, different request ---- */

static void test_mismatch(void) {
  grit_dedup_store *s = new_store((grit_dedup_opts){0});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b;
  ASSERT_OK(grit_dedup_claim(s, "k5", FP("create alice"), 0, &a));
  /* while pending */
  ASSERT_OK(grit_dedup_claim(s, "k5", FP("create bob"), 1000, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_MISMATCH);
  ASSERT_OK(grit_dedup_succeed(s, "k5", a.token, "alice", 5));
  /* and once succeeded: never a replay of alice's response */
  ASSERT_OK(grit_dedup_claim(s, "k5", FP("create bob"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_MISMATCH);
  ASSERT_NULL(b.response);
  ASSERT_OK(grit_dedup_claim(s, "k5", FP("create alicf"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_MISMATCH);
  grit_dedup_stats st = GRIT_DEDUP_STATS_INIT;
  grit_dedup_get_stats(s, &st);
  ASSERT_EQ(st.mismatches, 3);
  grit_dedup_store_destroy(s);
}

/* ---- SPEC OP-01: the counters as Prometheus text ---- */

static void test_metrics_text(void) {
  grit_dedup_store *s = new_store((grit_dedup_opts){0});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b;
  ASSERT_OK(grit_dedup_claim(s, "m1", FP("req"), 0, &a));
  ASSERT_OK(grit_dedup_succeed(s, "m1", a.token, "ok", 2));
  ASSERT_OK(grit_dedup_claim(s, "m1", FP("req"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_REPLAY);
  grit_dedup_result_free(&b);
  /* snprintf-style: the length first, then the text in a small buffer
   * (cut, NUL-terminated) and in one that fits. */
  size_t need = grit_dedup_metrics_text(NULL, 0, s);
  ASSERT_CMP(need, >, 100);
  char small[16];
  ASSERT_EQ(grit_dedup_metrics_text(small, sizeof(small), s), need);
  ASSERT_EQ(strlen(small), sizeof(small) - 1);
  char *text = malloc(need + 1);
  ASSERT_EQ(grit_dedup_metrics_text(text, need + 1, s), need);
  ASSERT_EQ(strlen(text), need);
  ASSERT(strstr(text, "# TYPE grit_dedup_claims_total counter\n"
                      "grit_dedup_claims_total 2\n") != NULL);
  ASSERT(strstr(text, "\ngrit_dedup_replays_total 1\n") != NULL);
  ASSERT(strstr(text, "\ngrit_dedup_heals_total 0\n") != NULL);
  ASSERT(strstr(text, "\ngrit_dedup_in_progress_total 0\n") != NULL);
  ASSERT(strstr(text, "\ngrit_dedup_store_errors_total 0\n") != NULL);
  ASSERT(strstr(text, "# TYPE grit_dedup_records gauge\n") != NULL);
  free(text);
  grit_dedup_store_destroy(s);
}

/* ---- a follower's wait is bounded ---- */

static void test_in_progress(void) {
  grit_dedup_store *s = new_store((grit_dedup_opts){0});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b;
  ASSERT_OK(grit_dedup_claim(s, "k6", FP("req"), 0, &a));
  uint64_t t0 = test_now_ms();
  ASSERT_OK(grit_dedup_claim(s, "k6", FP("req"), 100, &b));
  uint64_t took = test_now_ms() - t0;
  ASSERT_EQ(b.outcome, GRIT_DEDUP_IN_PROGRESS);
  ASSERT_CMP(took, >=, 100);
  ASSERT_CMP(took, <, 10000);
  ASSERT_OK(grit_dedup_claim(s, "k6", FP("req"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_IN_PROGRESS);
  ASSERT_EQ(atomic_load(&heal_calls), 0); /* the lease holds */
  grit_dedup_store_destroy(s);
}

/* ---- DD-04: TTL ---- */

static void test_ttl(void) {
  grit_dedup_store *s = new_store((grit_dedup_opts){.ttl_ms = 1000});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b;
  ASSERT_OK(grit_dedup_claim(s, "k7", FP("req"), 0, &a));
  uint64_t t0 = test_now_ms();
  ASSERT_OK(grit_dedup_succeed(s, "k7", a.token, "r1", 2));
  ASSERT_OK(grit_dedup_claim(s, "k7", FP("req"), 0, &b));
  if (test_now_ms() - t0 < 900) /* still inside the TTL */
    ASSERT_EQ(b.outcome, GRIT_DEDUP_REPLAY);
  grit_dedup_result_free(&b);
  ASSERT_OK(grit_dedup_claim(s, "k7b", FP("req"), 0, &b));
  usleep(1200 * 1000);
  /* Past the TTL the key protects nothing: a new execution (docs/dedup.md). */
  ASSERT_OK(grit_dedup_claim(s, "k7", FP("req"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_LEADER);
  uint64_t removed = 0;
  ASSERT_OK(grit_dedup_purge(s, &removed));
  ASSERT_EQ(removed, 1); /* k7b; k7 was replaced by its new claim */
  grit_dedup_store_destroy(s);
}

/* ---- response size limit ---- */

static void test_response_limit(void) {
  grit_dedup_store *s = new_store((grit_dedup_opts){.max_response = 16});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b;
  char big[17] = {0};
  ASSERT_OK(grit_dedup_claim(s, "k8", FP("req"), 0, &a));
  ASSERT_EQ(grit_dedup_succeed(s, "k8", a.token, big, 17),
            GRIT_DEDUP_ERR_TOO_LARGE);
  ASSERT_OK(grit_dedup_claim(s, "k8", FP("req"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_IN_PROGRESS); /* still pending */
  ASSERT_OK(grit_dedup_succeed(s, "k8", a.token, big, 16));
  ASSERT_OK(grit_dedup_claim(s, "k8", FP("req"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_REPLAY);
  ASSERT_EQ(b.response_len, 16);
  grit_dedup_result_free(&b);
  grit_dedup_store_destroy(s);
}

/* ---- DD-04: the in-process memory bound ---- */

static void test_memory_bound(void) {
  if (use_pg) {
    fprintf(stderr, "  (PostgreSQL: no memory bound; rows live in the "
                    "database)\n");
    return;
  }
  grit_dedup_store *s =
      new_store((grit_dedup_opts){.max_bytes = 8192, .ttl_ms = 1500});
  ASSERT_NOT_NULL(s);
  int claimed = 0;
  grit_dedup_err e = GRIT_DEDUP_OK;
  grit_dedup_result r;
  for (int i = 0; i < 1000 && e == GRIT_DEDUP_OK; i++) {
    char key[32];
    snprintf(key, sizeof(key), "mb-%d", i);
    e = grit_dedup_claim(s, key, FP("req"), 0, &r);
    if (e == GRIT_DEDUP_OK) {
      claimed++;
      ASSERT_OK(grit_dedup_succeed(s, key, r.token, "ok", 2));
    }
  }
  ASSERT_EQ(e, GRIT_DEDUP_ERR_FULL);
  ASSERT_CMP(claimed, >, 10);
  grit_dedup_stats st = GRIT_DEDUP_STATS_INIT;
  grit_dedup_get_stats(s, &st);
  ASSERT_CMP(st.bytes, <=, 8192);
  ASSERT_EQ(st.records, claimed);
  /* Live records were kept, not evicted: they still protect. */
  ASSERT_OK(grit_dedup_claim(s, "mb-0", FP("req"), 0, &r));
  ASSERT_EQ(r.outcome, GRIT_DEDUP_REPLAY);
  grit_dedup_result_free(&r);
  usleep(1700 * 1000); /* past the TTL: room again */
  ASSERT_OK(grit_dedup_claim(s, "mb-new", FP("req"), 0, &r));
  ASSERT_EQ(r.outcome, GRIT_DEDUP_LEADER);
  grit_dedup_get_stats(s, &st);
  ASSERT_EQ(st.records, 1);
  grit_dedup_store_destroy(s);
}

/* ---- PostgreSQL: connection loss ---- */

static int pg_admin(const char *sql) {
  PGconn *c = PQconnectdb(pg.conninfo);
  PGresult *r = PQexec(c, sql);
  int ok = PQresultStatus(r) == PGRES_TUPLES_OK ||
           PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  PQfinish(c);
  return ok ? 0 : -1;
}

static int kill_backends(void) {
  return pg_admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                  "WHERE pid <> pg_backend_pid() AND backend_type = "
                  "'client backend'");
}

static void test_conn_loss(void) {
  if (!use_pg) {
    fprintf(stderr, "  (in-process: no connection to lose)\n");
    return;
  }
  grit_dedup_store *s =
      new_store((grit_dedup_opts){.pool_size = 1, .lease_ms = 300});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a, b;
  /* A leader commits its domain write, then the database connection
   * goes before its succeed. */
  ASSERT_OK(grit_dedup_claim(s, "c1", FP("req"), 0, &a));
  ASSERT_EQ(a.outcome, GRIT_DEDUP_LEADER);
  dom_execute("c1", true);
  ASSERT_OK(kill_backends());
  ASSERT_EQ(grit_dedup_succeed(s, "c1", a.token, "r", 1), GRIT_DEDUP_ERR_STORE);
  ASSERT(strstr(grit_dedup_last_error(), "connection lost") != NULL);
  /* The pool reconnects on the next use ... */
  ASSERT_OK(grit_dedup_purge(s, NULL));
  /* ... and a claim on a connection lost again: a clear error, nothing
   * runs. */
  ASSERT_OK(kill_backends());
  ASSERT_EQ(grit_dedup_claim(s, "c2", FP("req"), 0, &b), GRIT_DEDUP_ERR_STORE);
  ASSERT(strstr(grit_dedup_last_error(), "connection lost") != NULL);
  /* The database goes away entirely, mid-run. */
  pgtmp_down(&pg);
  ASSERT_EQ(grit_dedup_claim(s, "c2", FP("req"), 0, &b), GRIT_DEDUP_ERR_STORE);
  ASSERT_EQ(pgtmp_up(&pg), 0);
  /* Back: the pool reconnects; c2 was never recorded, so it runs once. */
  ASSERT_OK(grit_dedup_claim(s, "c2", FP("req"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_LEADER);
  dom_execute("c2", true);
  ASSERT_OK(grit_dedup_succeed(s, "c2", b.token, "r2", 2));
  /* c1 is healed from the domain after its lease: replayed, not re-run. */
  ASSERT_OK(grit_dedup_claim(s, "c1", FP("req"), 5000, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_REPLAY);
  ASSERT(b.healed);
  grit_dedup_result_free(&b);
  ASSERT_EQ(dom_executed("c1"), 1);
  ASSERT_EQ(dom_executed("c2"), 1);
  /* SPEC OP-01: the three store failures are counted. */
  grit_dedup_stats st = GRIT_DEDUP_STATS_INIT;
  grit_dedup_get_stats(s, &st);
  ASSERT_EQ(st.store_errors, 3);
  grit_dedup_store_destroy(s);
}

/* ---- PostgreSQL: succeed inside the domain transaction ---- */

static void test_pg_tx(void) {
  if (!use_pg) {
    fprintf(stderr, "  (PostgreSQL only)\n");
    return;
  }
  grit_dedup_store *s = new_store((grit_dedup_opts){.lease_ms = 100});
  ASSERT_NOT_NULL(s);
  PGconn *c = PQconnectdb(pg.conninfo);
  ASSERT_EQ(PQstatus(c), CONNECTION_OK);
  PQclear(PQexec(c, "CREATE TABLE IF NOT EXISTS groups (key text, name text)"));
  grit_dedup_result a, b;
  ASSERT_OK(grit_dedup_claim(s, "t1", FP("req"), 0, &a));
  PQclear(PQexec(c, "BEGIN"));
  PQclear(PQexec(c, "INSERT INTO groups VALUES ('t1', 'g')"));
  ASSERT_OK(grit_dedup_pg_succeed_tx(s, c, "t1", a.token, "g", 1));
  PQclear(PQexec(c, "COMMIT"));
  ASSERT_OK(grit_dedup_claim(s, "t1", FP("req"), 0, &b));
  ASSERT_EQ(b.outcome, GRIT_DEDUP_REPLAY);
  grit_dedup_result_free(&b);
  /* A leader that outlived its lease: the key was healed meanwhile, so its
   * transaction learns it is stale and rolls back its domain write. */
  ASSERT_OK(grit_dedup_claim(s, "t2", FP("req"), 0, &a));
  usleep(200 * 1000);
  ASSERT_OK(grit_dedup_claim(s, "t2", FP("req"), 0, &b)); /* heals: leader */
  ASSERT_EQ(b.outcome, GRIT_DEDUP_LEADER);
  PQclear(PQexec(c, "BEGIN"));
  PQclear(PQexec(c, "INSERT INTO groups VALUES ('t2', 'late')"));
  ASSERT_EQ(grit_dedup_pg_succeed_tx(s, c, "t2", a.token, "x", 1),
            GRIT_DEDUP_ERR_STALE);
  PQclear(PQexec(c, "ROLLBACK"));
  PGresult *r = PQexec(c, "SELECT count(*) FROM groups WHERE key = 't2'");
  ASSERT_STR_EQ(PQgetvalue(r, 0, 0), "0");
  PQclear(r);
  PQfinish(c);
  grit_dedup_store_destroy(s);
}

/* ---- out of memory: fail the i-th allocation, for every i ---- */

static atomic_long oom_n, oom_fail_at, oom_live;

static void *oom_malloc(size_t n, void *ud) {
  (void)ud;
  if (atomic_fetch_add(&oom_n, 1) + 1 == atomic_load(&oom_fail_at))
    return NULL;
  void *p = malloc(n);
  if (p)
    atomic_fetch_add(&oom_live, 1);
  return p;
}

static void oom_free(void *p, void *ud) {
  (void)ud;
  if (p)
    atomic_fetch_sub(&oom_live, 1);
  free(p);
}

static void *oom_calloc(size_t n, size_t size, void *ud) {
  void *p = oom_malloc(n * size, ud);
  if (p)
    memset(p, 0, n * size);
  return p;
}

static void *oom_realloc(void *p, size_t size, void *ud) {
  (void)ud;
  if (!p)
    return oom_malloc(size, ud);
  if (atomic_fetch_add(&oom_n, 1) + 1 == atomic_load(&oom_fail_at))
    return NULL;
  return realloc(p, size);
}

/* One pass of the in-process store's life; returns how many calls failed
 * with NOMEM, or -1 on any other error. */
static int oom_pass(void) {
  grit_dedup_opts o = {.version = GRIT_DEDUP_OPTS_VERSION};
  grit_dedup_store *s = NULL;
  grit_dedup_err e = grit_dedup_store_create_mem(&o, &s);
  if (e != GRIT_DEDUP_OK)
    return e == GRIT_DEDUP_ERR_NOMEM && s == NULL ? 1 : -1;
  int nomem = 0;
  for (int i = 0; i < 80; i++) { /* past the first table growth */
    char key[16];
    snprintf(key, sizeof(key), "o%d", i);
    grit_dedup_result r;
    e = grit_dedup_claim(s, key, "fp", 2, 0, &r);
    if (e == GRIT_DEDUP_OK && r.outcome == GRIT_DEDUP_LEADER) {
      e = i % 2 ? grit_dedup_succeed(s, key, r.token, "resp", 4)
                : grit_dedup_fail(s, key, r.token, 5, "not found");
      if (e == GRIT_DEDUP_ERR_NOMEM)
        nomem++;
      else if (e != GRIT_DEDUP_OK)
        return -1;
      e = grit_dedup_claim(s, key, "fp", 2, 0, &r);
    }
    if (e == GRIT_DEDUP_ERR_NOMEM)
      nomem++;
    else if (e != GRIT_DEDUP_OK)
      return -1;
    grit_dedup_result_free(&r);
  }
  grit_dedup_store_destroy(s);
  return nomem;
}

static void test_oom(void) {
  if (use_pg) {
    fprintf(stderr, "  (in-process store only)\n");
    return;
  }
  static const grit_allocator a = {.malloc = oom_malloc,
                                   .free = oom_free,
                                   .calloc = oom_calloc,
                                   .realloc = oom_realloc};
  grit_set_allocator(&a);
  atomic_store(&oom_fail_at, 0);
  atomic_store(&oom_n, 0);
  ASSERT_EQ(oom_pass(), 0);
  long total = atomic_load(&oom_n);
  ASSERT_EQ(atomic_load(&oom_live), 0);
  ASSERT_CMP(total, >, 100);
  for (long i = 1; i <= total; i++) {
    atomic_store(&oom_n, 0);
    atomic_store(&oom_fail_at, i);
    int r = oom_pass();
    /* One failed allocation: one clean NOMEM, or none where the store
     * carries on without it (a hash table that could not grow). */
    if (r < 0 || r > 1 || atomic_load(&oom_live) != 0) {
      grit_set_allocator(NULL);
      TEST_FAIL_AT(__FILE__, __LINE__,
                   "fail_at %ld: %d NOMEM results, %ld blocks leaked", i, r,
                   atomic_load(&oom_live));
    }
  }
  grit_set_allocator(NULL);
}

/* docs/abi.md (issue 23 point 7): a program built when grit_dedup_stats
 * ended before |records| gets its counters and nothing written past its
 * struct, held in a heap block of exactly its size (ASan, valgrind); an
 * unset size is refused with nothing written. */
typedef struct old_dedup_stats {
  size_t size;
  uint64_t claims, leaders, replays, mismatches, in_progress, heals;
} old_dedup_stats;

static void test_stats_layout(void) {
  grit_dedup_store *s = new_store((grit_dedup_opts){0});
  ASSERT_NOT_NULL(s);
  grit_dedup_result a;
  ASSERT_OK(grit_dedup_claim(s, "k", FP("x"), 0, &a));
  old_dedup_stats *o = malloc(sizeof(*o));
  ASSERT_NOT_NULL(o);
  memset(o, 0xab, sizeof(*o));
  o->size = sizeof(*o);
  ASSERT_EQ(grit_dedup_get_stats(s, (grit_dedup_stats *)o), GRIT_DEDUP_OK);
  ASSERT_EQ(o->size, sizeof(*o));
  ASSERT_EQ(o->claims, 1);
  ASSERT_EQ(o->leaders, 1);
  free(o);
  grit_dedup_stats unset = {0};
  ASSERT_EQ(grit_dedup_get_stats(s, &unset), GRIT_DEDUP_ERR_INVALID_ARG);
  ASSERT_EQ(unset.claims, 0);
  ASSERT_OK(grit_dedup_abandon(s, "k", a.token));
  grit_dedup_result_free(&a);
  grit_dedup_store_destroy(s);
}

static const test_case tests[] = {
    {"stats_layout", test_stats_layout},
    {"race32", test_race32},
    {"heal_committed", test_heal_committed},
    {"heal_not_committed", test_heal_not_committed},
    {"heal_unknown", test_heal_unknown},
    {"fail_replay", test_fail_replay},
    {"mismatch", test_mismatch},
    {"metrics_text", test_metrics_text},
    {"in_progress", test_in_progress},
    {"ttl", test_ttl},
    {"response_limit", test_response_limit},
    {"memory_bound", test_memory_bound},
    {"conn_loss", test_conn_loss},
    {"pg_tx", test_pg_tx},
    {"oom", test_oom},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "mem") != 0 && strcmp(argv[1], "pg") != 0)) {
    fprintf(stderr, "usage: test_dedup mem|pg [case]\n");
    return 2;
  }
  use_pg = strcmp(argv[1], "pg") == 0;
  if (use_pg) {
    int r = pgtmp_start(&pg);
    if (r == -1) {
      fprintf(stderr, "PostgreSQL server not installed: skipped\n");
      return 77;
    }
    if (r != 0) {
      fprintf(stderr, "cannot start PostgreSQL (see %s)\n", pg.dir);
      return 1;
    }
  }
  int rc = test_main(tests, argc - 1, argv + 1);
  if (use_pg)
    pgtmp_stop(&pg);
  return rc;
}
