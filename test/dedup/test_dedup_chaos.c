/*
 * Chaos test of grit-dedup (issue 17): 300 keys, each requested 4 times at
 * once (hedges and followers) by 16 handler threads standing for two
 * replicas; leaders die between their domain commit and succeed (1 in 5)
 * or before committing (1 in 10), without a word to the store; every
 * failed request is retried until it gets an answer; a purge thread
 * runs throughout. The ledger must show every key committed exactly once, and
 * every request answered with its key's response. Then expiring keys: claims,
 * replays and purges at once on a 300 ms TTL. `test_dedup_chaos mem|pg`.
 */
#include "grit/dedup.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "pgtmp.h"

#define KEYS 300
#define COPIES 4
#define THREADS 16

static struct {
  pthread_mutex_t mu;
  int queue[KEYS * COPIES * 64]; /* key indexes still to request */
  size_t head, tail;
  int answered;
  int commits[KEYS]; /* the ledger: domain commits per key */
  int wrong;
  int deaths_after_commit, deaths_before_commit;
} st = {.mu = PTHREAD_MUTEX_INITIALIZER};

static grit_dedup_store *store;
static atomic_bool stop_purge;
static bool use_pg;
static pgtmp pg;
static int table_seq;

static void key_of(int k, char *buf, size_t n) {
  snprintf(buf, n, "chaos-%d", k);
}

static grit_dedup_verdict heal(const char *key, grit_dedup_heal_ctx *ctx,
                               void *ud) {
  (void)ud;
  int k = atoi(key + 6);
  pthread_mutex_lock(&st.mu);
  int c = st.commits[k];
  pthread_mutex_unlock(&st.mu);
  if (!c)
    return GRIT_DEDUP_NOT_COMMITTED;
  char resp[32];
  snprintf(resp, sizeof(resp), "resp:%d", k);
  grit_dedup_heal_set_response(ctx, resp, strlen(resp));
  return GRIT_DEDUP_COMMITTED;
}

static grit_dedup_store *new_store(uint64_t ttl_ms) {
  grit_dedup_opts o = {.version = GRIT_DEDUP_OPTS_VERSION,
                       .ttl_ms = ttl_ms,
                       .lease_ms = 100,
                       .heal = heal,
                       .pool_size = 8};
  grit_dedup_store *s = NULL;
  if (!use_pg)
    return grit_dedup_store_create_mem(&o, &s) == GRIT_DEDUP_OK ? s : NULL;
  char table[32], err[256];
  snprintf(table, sizeof(table), "chaos_t%d", ++table_seq);
  o.table = table;
  if (grit_dedup_store_create_pg(pg.conninfo, &o, &s, err, sizeof(err)) !=
      GRIT_DEDUP_OK)
    fprintf(stderr, "store: %s\n", err);
  return s;
}

static void push(int k) {
  pthread_mutex_lock(&st.mu);
  st.queue[st.tail++ % (sizeof(st.queue) / sizeof(st.queue[0]))] = k;
  pthread_mutex_unlock(&st.mu);
}

static void *handler_thread(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  uint64_t deadline = test_now_ms() + 60000;
  while (test_now_ms() < deadline) {
    pthread_mutex_lock(&st.mu);
    if (st.answered == KEYS * COPIES) {
      pthread_mutex_unlock(&st.mu);
      break;
    }
    if (st.head == st.tail) {
      pthread_mutex_unlock(&st.mu);
      usleep(1000);
      continue;
    }
    int k = st.queue[st.head++ % (sizeof(st.queue) / sizeof(st.queue[0]))];
    pthread_mutex_unlock(&st.mu);
    char key[32], want[32];
    key_of(k, key, sizeof(key));
    snprintf(want, sizeof(want), "resp:%d", k);
    grit_dedup_result r;
    if (grit_dedup_claim(store, key, "fp", 2, 20, &r) != GRIT_DEDUP_OK) {
      push(k); /* store trouble: the client retries */
      continue;
    }
    if (r.outcome == GRIT_DEDUP_LEADER) {
      int dice = rand_r(&seed) % 10;
      if (dice == 0) { /* dies before committing */
        pthread_mutex_lock(&st.mu);
        st.deaths_before_commit++;
        pthread_mutex_unlock(&st.mu);
        push(k);
        continue;
      }
      pthread_mutex_lock(&st.mu);
      st.commits[k]++; /* the domain commit */
      if (dice <= 2)
        st.deaths_after_commit++;
      pthread_mutex_unlock(&st.mu);
      if (dice <= 2) { /* dies between commit and succeed */
        push(k);
        continue;
      }
      grit_dedup_succeed(store, key, r.token, want, strlen(want));
      pthread_mutex_lock(&st.mu);
      st.answered++;
      pthread_mutex_unlock(&st.mu);
    } else if (r.outcome == GRIT_DEDUP_REPLAY) {
      bool ok = r.status == 0 && r.response_len == strlen(want) &&
                memcmp(r.response, want, r.response_len) == 0;
      pthread_mutex_lock(&st.mu);
      st.answered++;
      st.wrong += !ok;
      pthread_mutex_unlock(&st.mu);
    } else if (r.outcome == GRIT_DEDUP_IN_PROGRESS) {
      push(k);
    } else {
      pthread_mutex_lock(&st.mu);
      st.wrong++;
      st.answered++;
      pthread_mutex_unlock(&st.mu);
    }
    grit_dedup_result_free(&r);
  }
  return NULL;
}

static void *purge_thread(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_purge)) {
    grit_dedup_purge(store, NULL);
    usleep(20000);
  }
  return NULL;
}

static void test_chaos(void) {
  for (int c = 0; c < COPIES; c++)
    for (int k = 0; k < KEYS; k++)
      push(k);
  pthread_t th[THREADS], pt;
  pthread_create(&pt, NULL, purge_thread, NULL);
  for (uintptr_t i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, handler_thread, (void *)(i + 1));
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  atomic_store(&stop_purge, true);
  pthread_join(pt, NULL);
  grit_dedup_stats s = GRIT_DEDUP_STATS_INIT;
  grit_dedup_get_stats(store, &s);
  fprintf(stderr,
          "  %d answered, %d died after commit, %d before; %llu claims, "
          "%llu heals, %llu in progress\n",
          st.answered, st.deaths_after_commit, st.deaths_before_commit,
          (unsigned long long)s.claims, (unsigned long long)s.heals,
          (unsigned long long)s.in_progress);
  ASSERT_EQ(st.answered, KEYS * COPIES);
  ASSERT_EQ(st.wrong, 0);
  ASSERT_CMP(st.deaths_after_commit, >, 0);
  ASSERT_CMP(s.heals, >, 0);
  for (int k = 0; k < KEYS; k++)
    if (st.commits[k] != 1)
      TEST_FAIL_AT(__FILE__, __LINE__, "key %d committed %d times", k,
                   st.commits[k]);
}

/* Expired keys: records with a 300 ms TTL are claimed, finished, replayed
 * and purged by several threads at once; past the TTL every record is gone
 * and a key re-sent then runs again (docs/dedup.md "When a key protects you,
 * and when it cannot"). */
static void *expiry_thread(void *arg) {
  grit_dedup_store *s = arg;
  for (int k = 0; k < 100; k++) {
    char key[32];
    snprintf(key, sizeof(key), "exp-%d", k);
    grit_dedup_result r;
    if (grit_dedup_claim(s, key, "fp", 2, 1000, &r) != GRIT_DEDUP_OK)
      continue;
    if (r.outcome == GRIT_DEDUP_LEADER)
      grit_dedup_succeed(s, key, r.token, "x", 1);
    grit_dedup_result_free(&r);
    grit_dedup_purge(s, NULL);
  }
  return NULL;
}

static void test_expiry(void) {
  grit_dedup_store *s = new_store(300);
  ASSERT_NOT_NULL(s);
  pthread_t th[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, expiry_thread, s);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  usleep(400 * 1000);
  ASSERT_OK(grit_dedup_purge(s, NULL));
  grit_dedup_stats st2 = GRIT_DEDUP_STATS_INIT;
  grit_dedup_get_stats(s, &st2);
  ASSERT_EQ(st2.records, 0); /* in-process count; 0 for PostgreSQL too */
  for (int k = 0; k < 100; k += 10) {
    char key[32];
    snprintf(key, sizeof(key), "exp-%d", k);
    grit_dedup_result r;
    ASSERT_OK(grit_dedup_claim(s, key, "fp", 2, 0, &r));
    ASSERT_EQ(r.outcome, GRIT_DEDUP_LEADER);
  }
  grit_dedup_store_destroy(s);
}

static const test_case tests[] = {
    {"chaos", test_chaos}, {"expiry", test_expiry}, {NULL, NULL}};

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "mem") && strcmp(argv[1], "pg"))) {
    fprintf(stderr, "usage: test_dedup_chaos mem|pg [case]\n");
    return 2;
  }
  use_pg = strcmp(argv[1], "pg") == 0;
  if (use_pg) {
    int r = pgtmp_start(&pg);
    if (r == -1)
      return 77;
    if (r != 0)
      return 1;
  }
  /* The main phase's TTL outlasts the run, however slow the machine: a
   * request after the TTL would rightly run again. */
  store = new_store(120000);
  if (!store) {
    pgtmp_stop(&pg);
    return 1;
  }
  int rc = test_main(tests, argc - 1, argv + 1);
  grit_dedup_store_destroy(store);
  pgtmp_stop(&pg);
  return rc;
}
