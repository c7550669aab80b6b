/*
 * examples/dedup_server as two real replicas sharing PostgreSQL, called by
 * grit with hedging (5 ms, 3 attempts) and idempotency keys (SPEC ID-01,
 * DD-01..DD-03). Replica B commits its 5th group and dies (SIGKILL) before
 * it records success; replica A heals that key from the groups table once
 * B's lease (1 s) has run out. The caller supplies its own keys and
 * retries a call whose hedges all failed (same key). Asserts: every call
 * returns its own group, B was killed, the groups table has exactly one row per
 * call. `test_dedup_example PATH_TO_dedup_server`.
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

static const test_case tests[] = {{"two_replicas", test_two_replicas},
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
