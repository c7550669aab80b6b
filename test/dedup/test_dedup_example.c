/*
 * examples/dedup_server as two real replicas sharing PostgreSQL, called by
 * grit with hedging (5 ms, 3 attempts) and idempotency keys (SPEC ID-01,
 * DD-01..DD-03). Replica B commits its 5th group and dies (SIGKILL) before
 * it records success; replica A heals that key from the groups table once
 * B's lease (1 s) has run out. The caller supplies its own keys and
 * retries a call whose hedges all failed (same key). Asserts: every call
 * returns its own group, B was killed, the groups table has exactly one row per
 * call.
 *
 * pg_restart (issue 28 part 5): one replica, PostgreSQL restarted (pg_ctl
 * stop -m immediate, then start on the same port) while four threads make
 * calls with a retry policy and no retry loop of their own, until 40 calls
 * have finished after the restart. Every call ends OK with its own group; the
 * groups table has exactly one row per call and every dedup record succeeded.
 * Before the example borrowed the store's self-healing connections, every write
 * after the restart failed. `test_dedup_example PATH_TO_dedup_server`.
 */
#include <grit/grit.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "pgtmp.h"

#define N 120

static const char *server_path;
static pgtmp pg;

typedef struct replica {
  pid_t pid;
  int port;
} replica;

/* Start the example; returns 0 once it printed "listening PORT". */
static int replica_start(replica *r, const char *name, const char *crash) {
  fflush(NULL);
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  r->pid = fork();
  if (r->pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(server_path, server_path, "--port", "0", "--pg", pg.conninfo,
          "--name", name, "--crash-after-commit", crash, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  FILE *f = fdopen(fds[0], "r");
  char line[64] = "";
  int ok = f && fgets(line, sizeof(line), f) &&
           sscanf(line, "listening %d", &r->port) == 1;
  if (f)
    fclose(f);
  return ok ? 0 : -1;
}

static grit_channel *ch;
static int ok_calls;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *caller(void *arg) {
  int from = (int)(intptr_t)arg;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 20000};
  for (int i = from; i < N; i += 4) {
    char name[32], want[48];
    int len = snprintf(name, sizeof(name), "g%d", i);
    snprintf(want, sizeof(want), "created %s", name);
    /* The application's own key, so that its own retries of the call
     * (hedges exhausted on the replica that died) keep the key too. */
    char key[32];
    snprintf(key, sizeof(key), "call-%d", i);
    o.idempotency_key = key;
    grit_bytes resp;
    grit_status st;
    for (int t = 0; t < 5; t++) {
      grit_unary_call(ch, "/grit.demo.Groups/CreateGroup", name, (size_t)len,
                      &o, &resp, &st, NULL);
      if (st.code != GRIT_STATUS_UNAVAILABLE && st.code != GRIT_STATUS_ABORTED)
        break;
      grit_status_free(&st);
      grit_bytes_free(&resp);
    }
    if (st.code == GRIT_STATUS_OK && resp.len == strlen(want) &&
        memcmp(resp.data, want, resp.len) == 0) {
      pthread_mutex_lock(&mu);
      ok_calls++;
      pthread_mutex_unlock(&mu);
    } else {
      fprintf(stderr, "call %d: %s %s\n", i, grit_status_code_name(st.code),
              st.message ? st.message : "");
    }
    grit_status_free(&st);
    grit_bytes_free(&resp);
  }
  return NULL;
}

static void test_two_replicas(void) {
  replica a = {0}, b = {0};
  ASSERT_OK(replica_start(&a, "A", "0"));
  ASSERT_OK(replica_start(&b, "B", "5"));
  char target[96];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%d,127.0.0.1:%d", a.port,
           b.port);
  grit_channel_args *args;
  ASSERT_OK(grit_channel_args_create(&args));
  grit_channel_args_set_string(
      args, GRIT_ARG_SERVICE_CONFIG,
      "{\"loadBalancingConfig\":[{\"round_robin\":{}}],"
      "\"methodConfig\":[{\"name\":[{\"service\":\"grit.demo.Groups\"}],"
      "\"hedgingPolicy\":{\"maxAttempts\":3,\"hedgingDelay\":\"0.005s\","
      "\"nonFatalStatusCodes\":[\"UNAVAILABLE\",\"ABORTED\"]}}]}");
  grit_channel_args_set_int(args, GRIT_ARG_IDEMPOTENCY_KEYS, 1);
  ASSERT_OK(grit_channel_create(NULL, target, args, NULL, &ch));
  grit_channel_args_destroy(args);
  pthread_t th[4];
  for (intptr_t i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, caller, (void *)i);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  grit_channel_destroy(ch);
  int bst = 0;
  pid_t got = waitpid(b.pid, &bst, WNOHANG);
  kill(a.pid, SIGKILL);
  waitpid(a.pid, NULL, 0);
  if (got == 0) {
    kill(b.pid, SIGKILL);
    waitpid(b.pid, NULL, 0);
  }
  ASSERT_EQ(ok_calls, N);
  ASSERT_EQ(got, b.pid); /* B died by itself, after its 5th commit */
  ASSERT(WIFSIGNALED(bst) && WTERMSIG(bst) == SIGKILL);
  PGconn *c = PQconnectdb(pg.conninfo);
  PGresult *r = PQexec(c, "SELECT count(*), count(DISTINCT key), "
                          "count(DISTINCT name) FROM groups");
  ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK);
  fprintf(stderr, "  groups: %s rows, %s keys, %s names\n", PQgetvalue(r, 0, 0),
          PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
  ASSERT_EQ(atoi(PQgetvalue(r, 0, 0)), N);
  ASSERT_EQ(atoi(PQgetvalue(r, 0, 2)), N);
  PQclear(r);
  PQfinish(c);
}

/* ---- pg_restart ---- */

#define R_BEFORE 40 /* calls done before PostgreSQL goes down */
#define R_AFTER 40  /* calls done after it is back */
#define R_MAX 5000  /* bound on the calls of one run */

static grit_channel *rch;
static uint64_t r_end_ms; /* bound on the run */
static int r_next, r_done, r_ok, r_done_at_down = -1, r_done_at_up = -1;
static bool r_restarted;
static pthread_mutex_t r_mu = PTHREAD_MUTEX_INITIALIZER;

/* The next call's number, or -1 once the run is over: PostgreSQL went
 * down and came back, and R_AFTER calls finished after that. */
static int r_take(void) {
  pthread_mutex_lock(&r_mu);
  bool over = (r_restarted && r_done >= r_done_at_up + R_AFTER) ||
              r_next >= R_MAX || test_now_ms() > r_end_ms;
  int i = over ? -1 : r_next++;
  pthread_mutex_unlock(&r_mu);
  return i;
}

static void *restart_caller(void *arg) {
  (void)arg;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 60000};
  for (int i = r_take(); i >= 0; i = r_take()) {
    char name[32], want[48], key[32];
    int len = snprintf(name, sizeof(name), "r%d", i);
    snprintf(want, sizeof(want), "created %s", name);
    snprintf(key, sizeof(key), "restart-%d", i);
    o.idempotency_key = key; /* the same for every attempt of the call */
    grit_bytes resp = {0};
    grit_status st = {0};
    grit_unary_call(rch, "/grit.demo.Groups/CreateGroup", name, (size_t)len, &o,
                    &resp, &st, NULL);
    bool ok = st.code == GRIT_STATUS_OK && resp.len == strlen(want) &&
              memcmp(resp.data, want, resp.len) == 0;
    if (!ok)
      fprintf(stderr, "call %d: %s %s\n", i, grit_status_code_name(st.code),
              st.message ? st.message : "");
    pthread_mutex_lock(&r_mu);
    r_done++;
    r_ok += ok;
    pthread_mutex_unlock(&r_mu);
    grit_status_free(&st);
    grit_bytes_free(&resp);
  }
  return NULL;
}

static int r_count(void) {
  pthread_mutex_lock(&r_mu);
  int n = r_done;
  pthread_mutex_unlock(&r_mu);
  return n;
}

/* After R_BEFORE calls: PostgreSQL goes down hard (pg_ctl -m immediate),
 * stays down for 500 ms while the calls go on, and comes back on the same
 * port. */
static void *restarter(void *arg) {
  (void)arg;
  while (r_count() < R_BEFORE && test_now_ms() < r_end_ms)
    usleep(2000);
  pgtmp_down(&pg);
  pthread_mutex_lock(&r_mu);
  r_done_at_down = r_done;
  pthread_mutex_unlock(&r_mu);
  usleep(500000);
  int up = pgtmp_up(&pg);
  pthread_mutex_lock(&r_mu);
  r_done_at_up = up == 0 ? r_done : -2;
  r_restarted = true;
  pthread_mutex_unlock(&r_mu);
  return NULL;
}

static int query_int(PGconn *c, const char *sql) {
  PGresult *r = PQexec(c, sql);
  int v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
              ? atoi(PQgetvalue(r, 0, 0))
              : -1;
  PQclear(r);
  return v;
}

static void test_pg_restart(void) {
  replica a = {0};
  ASSERT_OK(replica_start(&a, "A", "0"));
  char target[64];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%d", a.port);
  grit_channel_args *args;
  ASSERT_OK(grit_channel_args_create(&args));
  /* The client's retry turns the restart's UNAVAILABLE (the store or the
   * domain write failed: nothing ran or it is left pending) and ABORTED
   * (the key is in progress, or healed meanwhile) into OK. About 8 s of
   * backoff in all, for a restart of about 1 s. */
  grit_channel_args_set_string(
      args, GRIT_ARG_SERVICE_CONFIG,
      "{\"methodConfig\":[{\"name\":[{\"service\":\"grit.demo.Groups\"}],"
      "\"retryPolicy\":{\"maxAttempts\":12,\"initialBackoff\":\"0.1s\","
      "\"maxBackoff\":\"1s\",\"backoffMultiplier\":2,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\",\"ABORTED\"]}}]}");
  grit_channel_args_set_int(args, GRIT_ARG_MAX_ATTEMPTS_CAP, 12);
  grit_channel_args_set_int(args, GRIT_ARG_IDEMPOTENCY_KEYS, 1);
  ASSERT_OK(grit_channel_create(NULL, target, args, NULL, &rch));
  grit_channel_args_destroy(args);
  pthread_t th[4], rs;
  r_end_ms = test_now_ms() + 120000;
  pthread_create(&rs, NULL, restarter, NULL);
  for (intptr_t i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, restart_caller, (void *)i);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  pthread_join(rs, NULL);
  grit_channel_stats cs = GRIT_CHANNEL_STATS_INIT;
  grit_channel_get_stats(rch, &cs);
  grit_channel_destroy(rch);
  int alive = waitpid(a.pid, NULL, WNOHANG) == 0;
  kill(a.pid, SIGKILL);
  waitpid(a.pid, NULL, 0);
  fprintf(stderr,
          "  %d of %d calls OK; PostgreSQL down after %d calls, up after %d; "
          "%llu retries\n",
          r_ok, r_done, r_done_at_down, r_done_at_up,
          (unsigned long long)cs.retries);
  ASSERT(alive);
  ASSERT_CMP(r_done, >, 0);
  ASSERT_EQ(r_ok, r_done);
  /* The restart happened mid-run, and calls went on after it. */
  ASSERT_CMP(r_done_at_down, >=, R_BEFORE);
  ASSERT_CMP(r_done_at_up, >=, r_done_at_down);
  ASSERT_CMP(r_done, >=, r_done_at_up + R_AFTER);
  ASSERT_CMP(cs.retries, >=, 1); /* the restart was felt, and retried */
  PGconn *c = PQconnectdb(pg.conninfo);
  ASSERT_EQ(PQstatus(c), CONNECTION_OK);
  int rows = query_int(c, "SELECT count(*) FROM groups "
                          "WHERE key LIKE 'restart-%'");
  int names = query_int(c, "SELECT count(DISTINCT name) FROM groups "
                           "WHERE key LIKE 'restart-%'");
  int bad = query_int(c, "SELECT count(*) FROM groups g WHERE g.key LIKE "
                         "'restart-%' AND g.name <> 'r' || "
                         "substr(g.key, 9)");
  int done = query_int(c, "SELECT count(*) FROM grit_dedup WHERE key LIKE "
                          "'restart-%' AND state = 1");
  PQfinish(c);
  fprintf(stderr, "  groups: %d rows, %d names; %d dedup records succeeded\n",
          rows, names, done);
  ASSERT_EQ(rows, r_done);  /* every call wrote once: zero duplicates */
  ASSERT_EQ(names, r_done); /* ... and none is missing */
  ASSERT_EQ(bad, 0);        /* each key holds its own call's group */
  ASSERT_EQ(done, r_done);  /* no key left pending */
}

static const test_case tests[] = {{"two_replicas", test_two_replicas},
                                  {"pg_restart", test_pg_restart},
                                  {NULL, NULL}};

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_dedup_example PATH_TO_dedup_server\n");
    return 2;
  }
  server_path = argv[1];
  signal(SIGPIPE, SIG_IGN);
  int r = pgtmp_start(&pg);
  if (r == -1)
    return 77;
  if (r != 0)
    return 1;
  int rc = test_main(tests, argc - 1, argv + 1);
  grit_default_runtime_shutdown();
  pgtmp_stop(&pg);
  return rc;
}
