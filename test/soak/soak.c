/*
 * Chaos soak (issue 7): many concurrent unary and client-streaming calls
 * through a retry policy (UNAVAILABLE retryable, maxAttempts 5, small
 * backoffs) over round_robin against 3 h2server backends that randomly
 * answer UNAVAILABLE, refuse streams, drop connections and send GOAWAY,
 * while a chaos thread kills, restarts and drains them.
 *
 * The backends run in a child process, so the client's RSS is the client's
 * own. Every call carries a unique key (x-soak-key); afterwards the child
 * writes its ledger (every request each backend answered) and the parent
 * checks:
 *   1. every call the client reports OK was executed (answered OK) by a
 *      backend;
 *   2. no call was executed twice unless the first execution's answer was
 *      lost to the chaos (the client saw that attempt end retryable):
 *      grit never retries after a non-retryable outcome reached it;
 *   3. every call finished, none past its deadline;
 *   4. RSS after the soak is within 10 % of RSS after warm-up (under ASan,
 *      whose quarantine keeps freed memory resident, only grit's live
 *      heap, counted through grit_set_allocator, is held to that bound).
 *      Both are measured in the same quiet state (see quiesce()): chaos
 *      off, one open connection per backend, no call in flight, so the
 *      only difference left between the two is what the soak leaked.
 *
 *   soak [--calls N] [--concurrency C] [--rate R] [--seed S] [--quiet]
 *
 * Calls start at R per second (default 1000), at most C in flight.
 */
#include <grit/grit.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "h2server.h"

/* ASan's quarantine keeps freed memory resident, so under ASan the bound
 * applies to grit's live heap instead of RSS. */
#if defined(__SANITIZE_ADDRESS__)
#  define SOAK_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define SOAK_ASAN 1
#  endif
#endif
#ifndef SOAK_ASAN
#  define SOAK_ASAN 0
#endif

#define NBACKENDS 3
#define DEADLINE_MS 20000
#define WARMUP_CALLS 1000
#define MAX_ATTEMPTS 5

static const char soak_config[] =
    "{\"loadBalancingConfig\":[{\"round_robin\":{}}],"
    "\"methodConfig\":[{\"name\":[{\"service\":\"soak.Svc\"}],"
    "\"retryPolicy\":{\"maxAttempts\":5,\"initialBackoff\":\"0.005s\","
    "\"maxBackoff\":\"0.05s\",\"backoffMultiplier\":2,"
    "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}";

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (!f)
    return 0;
  if (fscanf(f, "%ld %ld", &size, &res) != 2)
    res = 0;
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Bytes grit holds right now (nghttp2's included), through a counting
 * allocator: growth here is the library's, whatever RSS says. */
static atomic_long live_bytes;

static void *cnt_malloc(size_t n, void *ud) {
  (void)ud;
  void *p = malloc(n);
  if (p)
    atomic_fetch_add(&live_bytes, (long)malloc_usable_size(p));
  return p;
}
static void cnt_free(void *p, void *ud) {
  (void)ud;
  if (p)
    atomic_fetch_sub(&live_bytes, (long)malloc_usable_size(p));
  free(p);
}
static void *cnt_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  void *p = calloc(n, m);
  if (p)
    atomic_fetch_add(&live_bytes, (long)malloc_usable_size(p));
  return p;
}
static void *cnt_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  long old = p ? (long)malloc_usable_size(p) : 0;
  void *q = realloc(p, n);
  if (q || n == 0)
    atomic_fetch_add(&live_bytes, (q ? (long)malloc_usable_size(q) : 0) - old);
  return q;
}
static const grit_allocator counting = {NULL, cnt_malloc, cnt_free, cnt_calloc,
                                        cnt_realloc};

/* ------------------------------------------------------------------ */
/* The backends (child process)                                        */
/* ------------------------------------------------------------------ */

typedef struct backend {
  h2s_server *srv;
  unsigned seed; /* rand_r state, used on the server's own thread */
  atomic_bool chaos;
} backend;

static backend backends[NBACKENDS];
static atomic_bool chaos_on, chaos_stop;
/* Held by the chaos thread while it strikes, so that once 'S' has taken it
 * no kill or GOAWAY is still under way. */
static pthread_mutex_t chaos_mu = PTHREAD_MUTEX_INITIALIZER;

/* Decide per attempt, at END_STREAM. Keys starting 'w' are warm-up and
 * quiesce() calls: always answered OK. */
static void soak_handler(const h2s_request *req, bool at_end, h2s_action *act,
                         void *ud) {
  backend *b = ud;
  const char *key = h2s_request_header(req, "x-soak-key");
  if (!at_end || !key || key[0] == 'w' || !atomic_load(&chaos_on))
    return; /* the echo default: OK */
  int r = rand_r(&b->seed) % 1000;
  if (r < 120) { /* 12 %: UNAVAILABLE, Trailers-Only (retryable) */
    act->kind = H2S_TRAILERS_ONLY;
    act->grpc_status = 14;
    act->grpc_message = "soak: unavailable";
  } else if (r < 180) { /* 6 %: refuse the stream (TR-02) */
    act->kind = H2S_RST;
    act->rst_code = 7;  /* REFUSED_STREAM */
  } else if (r < 200) { /* 2 %: drop the connection, no answer */
    act->kind = H2S_DROP;
  } else if (r < 250) { /* 5 %: a non-retryable error, executed */
    act->kind = H2S_TRAILERS_ONLY;
    act->grpc_status = 3; /* INVALID_ARGUMENT */
    act->grpc_message = "soak: rejected";
  } else if (r < 300) { /* 5 %: answer, then a graceful GOAWAY that does
                           not disown any stream already seen */
    act->goaway = true;
    act->goaway_last_delta = 1000;
  }
}

static void *chaos_thread(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  while (!atomic_load(&chaos_stop)) {
    usleep(20000 + (useconds_t)(rand_r(&seed) % 80000));
    pthread_mutex_lock(&chaos_mu);
    if (atomic_load(&chaos_on)) {
      backend *b = &backends[rand_r(&seed) % NBACKENDS];
      int r = rand_r(&seed) % 4;
      if (r < 2) {
        h2s_server_restart(b->srv); /* killed: connections cut, no GOAWAY */
      } else if (r == 2) {
        h2s_server_goaway(b->srv, 0, false);
      }
    }
    pthread_mutex_unlock(&chaos_mu);
  }
  return NULL;
}

/* Ledger lines: "<key> <previous attempts> <status sent> <backend>" for
 * every request a backend answered with a status. */
static void write_ledger(FILE *f) {
  for (int i = 0; i < NBACKENDS; i++) {
    size_t n = h2s_server_request_count(backends[i].srv);
    for (size_t s = 0; s < n; s++) {
      const h2s_request *r = h2s_server_request(backends[i].srv, s);
      const char *key = r ? h2s_request_header(r, "x-soak-key") : NULL;
      if (!key || key[0] == 'w' || !r->acted || r->status_sent < 0)
        continue;
      const char *prev = h2s_request_header(r, "grpc-previous-rpc-attempts");
      fprintf(f, "%s %d %d %d\n", key, prev ? atoi(prev) : 0, r->status_sent,
              i);
    }
  }
}

/* Commands over the pipe: 'C' chaos on, 'S' chaos off (replied once no
 * strike is under way), 'O' open connections per backend (NBACKENDS
 * uint32_t before the reply), 'L' write the ledger to the file named at
 * start, 'Q' quit. Every command is answered by echoing it. */
static int child_main(int cmd_fd, int reply_fd, const char *ledger_path,
                      unsigned seed) {
  for (int i = 0; i < NBACKENDS; i++) {
    backends[i].seed = seed * 31u + (unsigned)i;
    h2s_config cfg = {
        .quiet = true, .handler = soak_handler, .handler_data = &backends[i]};
    if (h2s_server_start(&cfg, &backends[i].srv) != 0)
      return 1;
  }
  uint16_t ports[NBACKENDS];
  for (int i = 0; i < NBACKENDS; i++)
    ports[i] = h2s_server_port(backends[i].srv);
  if (write(reply_fd, ports, sizeof(ports)) != (ssize_t)sizeof(ports))
    return 1;
  pthread_t th;
  pthread_create(&th, NULL, chaos_thread, (void *)(uintptr_t)seed);
  char c;
  while (read(cmd_fd, &c, 1) == 1) {
    if (c == 'C') {
      atomic_store(&chaos_on, true);
    } else if (c == 'S') {
      pthread_mutex_lock(&chaos_mu);
      atomic_store(&chaos_on, false);
      pthread_mutex_unlock(&chaos_mu);
    } else if (c == 'O') {
      uint32_t open[NBACKENDS];
      for (int i = 0; i < NBACKENDS; i++) {
        h2s_stats st;
        h2s_server_get_stats(backends[i].srv, &st);
        open[i] = (uint32_t)st.connections_open;
      }
      if (write(reply_fd, open, sizeof(open)) != (ssize_t)sizeof(open))
        break;
    } else if (c == 'L') {
      FILE *f = fopen(ledger_path, "w");
      if (f) {
        write_ledger(f);
        fclose(f);
      }
    }
    if (write(reply_fd, &c, 1) != 1 || c == 'Q')
      break;
  }
  atomic_store(&chaos_stop, true);
  pthread_join(th, NULL);
  for (int i = 0; i < NBACKENDS; i++)
    h2s_server_stop(backends[i].srv);
  return 0;
}

/* ------------------------------------------------------------------ */
/* The client (parent process)                                         */
/* ------------------------------------------------------------------ */

typedef struct soak_call {
  int index;
  bool streaming;
  uint64_t start_ms, end_ms;
  atomic_int done;
  grit_status_code code;
  uint64_t call_id;
  uint32_t attempts;
  char message[96];
} soak_call;

/* Attempt records from the observer (MX-03), joined to calls afterwards
 * by call id. */
typedef struct attempt_rec {
  uint64_t call_id;
  uint32_t attempt;
  grit_status_code code;
} attempt_rec;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int in_flight;
static attempt_rec *arecs;
static size_t narecs, caparecs;
static bool quiet;

static void on_attempt(const grit_attempt_record *r, void *ud) {
  (void)ud;
  pthread_mutex_lock(&mu);
  if (narecs == caparecs) {
    size_t cap = caparecs ? caparecs * 2 : 4096;
    attempt_rec *n = realloc(arecs, cap * sizeof(*n));
    if (n) {
      arecs = n;
      caparecs = cap;
    }
  }
  if (narecs < caparecs)
    arecs[narecs++] = (attempt_rec){
        .call_id = r->call_id, .attempt = r->attempt, .code = r->code};
  pthread_mutex_unlock(&mu);
}

static void call_finished(soak_call *c, const grit_status *st, uint64_t id,
                          uint32_t attempts) {
  c->end_ms = now_ms();
  c->code = st->code;
  c->call_id = id;
  c->attempts = attempts;
  snprintf(c->message, sizeof(c->message), "%s",
           st->message ? st->message : "");
  atomic_store(&c->done, atomic_load(&c->done) + 1);
  pthread_mutex_lock(&mu);
  in_flight--;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
}

static void on_unary(const grit_status *st, const uint8_t *resp,
                     size_t resp_len, const grit_call_info *info, void *ud) {
  (void)resp;
  (void)resp_len;
  call_finished(ud, st, info->call_id, info->attempts);
}

static void on_stream_done(grit_call *call, const grit_status *st, void *ud) {
  grit_call_info info = GRIT_CALL_INFO_INIT;
  grit_call_get_info(call, &info);
  call_finished(ud, st, info.call_id, info.attempts);
  grit_call_destroy(call);
}

static const grit_call_cbs stream_cbs = {.version = GRIT_CALL_CBS_VERSION,
                                         .on_done = on_stream_done};

/* Start call |c| with key |key|; false if it could not start. */
static bool start_call(grit_channel *ch, soak_call *c, const char *key) {
  grit_metadata *md = NULL;
  if (grit_metadata_create(&md) != GRIT_OK ||
      grit_metadata_add(md, "x-soak-key", key, strlen(key)) != GRIT_OK) {
    grit_metadata_destroy(md);
    return false;
  }
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = DEADLINE_MS,
                      .metadata = md};
  c->start_ms = now_ms();
  pthread_mutex_lock(&mu);
  in_flight++;
  pthread_mutex_unlock(&mu);
  grit_err rv;
  if (!c->streaming) {
    rv = grit_unary_call_async(ch, "/soak.Svc/Unary", key, strlen(key), &o,
                               on_unary, c);
  } else {
    grit_call *call = NULL;
    rv = grit_call_start(ch, "/soak.Svc/Stream", &o, &stream_cbs, c, &call);
    for (int i = 0; rv == GRIT_OK && i < 3; i++)
      grit_call_send(call, key, strlen(key));
    if (rv == GRIT_OK)
      grit_call_close_send(call);
  }
  grit_metadata_destroy(md);
  if (rv != GRIT_OK) {
    fprintf(stderr, "soak: cannot start call %s: %s\n", key, grit_err_name(rv));
    pthread_mutex_lock(&mu);
    in_flight--;
    pthread_mutex_unlock(&mu);
    return false;
  }
  return true;
}

/* Run |n| calls with keys "<prefix><i>", at most |conc| in flight; wait for
 * all of them (bounded by the deadline plus slack). */
static int rate = 1000; /* calls started per second */

static int run_calls(grit_channel *ch, soak_call *calls, int n, int conc,
                     char prefix, unsigned *seed) {
  uint64_t t0 = now_ms();
  for (int i = 0; i < n; i++) {
    /* Paced, so that the chaos has time to strike during the run. */
    uint64_t due = t0 + (uint64_t)i * 1000 / (uint64_t)rate;
    uint64_t now = now_ms();
    if (due > now)
      usleep((useconds_t)(due - now) * 1000);
    pthread_mutex_lock(&mu);
    while (in_flight >= conc)
      pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    char key[32];
    snprintf(key, sizeof(key), "%c%d", prefix, i);
    calls[i].index = i;
    calls[i].streaming = rand_r(seed) % 4 == 0;
    if (!start_call(ch, &calls[i], key))
      return -1;
  }
  uint64_t end = now_ms() + DEADLINE_MS + 5000;
  pthread_mutex_lock(&mu);
  while (in_flight > 0 && now_ms() < end) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&cv, &mu, &ts);
  }
  int left = in_flight;
  pthread_mutex_unlock(&mu);
  return left;
}

typedef struct ledger_entry {
  int key;
  int prev;
  int status;
} ledger_entry;

static int cmp_ledger(const void *a, const void *b) {
  const ledger_entry *x = a, *y = b;
  return x->key != y->key ? (x->key > y->key) - (x->key < y->key)
                          : (x->prev > y->prev) - (x->prev < y->prev);
}

static int cmp_arec(const void *a, const void *b) {
  const attempt_rec *x = a, *y = b;
  return (x->call_id > y->call_id) - (x->call_id < y->call_id);
}

/* Did the client see attempt |attempt| of call |id| end with a retryable
 * code (the answer lost to the chaos)? */
static bool attempt_lost(uint64_t id, uint32_t attempt) {
  attempt_rec k = {.call_id = id};
  attempt_rec *r = bsearch(&k, arecs, narecs, sizeof(*arecs), cmp_arec);
  if (!r)
    return false;
  while (r > arecs && r[-1].call_id == id)
    r--;
  for (; r < arecs + narecs && r->call_id == id; r++)
    if (r->attempt == attempt && r->code == GRIT_STATUS_UNAVAILABLE)
      return true;
  return false;
}

static void cmd(int fd, int reply, char c) {
  char got;
  if (write(fd, &c, 1) != 1 || read(reply, &got, 1) != 1 || got != c) {
    fprintf(stderr, "soak: backend process is gone\n");
    exit(1);
  }
}

/* Open connections per backend, as the backends count them. */
static void query_open(int fd, int reply, uint32_t open[NBACKENDS]) {
  char c = 'O', got;
  if (write(fd, &c, 1) != 1 ||
      read(reply, open, NBACKENDS * sizeof(*open)) !=
          (ssize_t)(NBACKENDS * sizeof(*open)) ||
      read(reply, &got, 1) != 1 || got != c) {
    fprintf(stderr, "soak: backend process is gone\n");
    exit(1);
  }
}

/* Bring client and backends to the state both memory samples are taken
 * in, so that they differ only by what the calls in between leaked: chaos
 * off with no strike under way, every backend listening and holding
 * exactly one connection (the client's round_robin subchannel to it, so no
 * killed or draining connection is left, nor a subchannel in backoff), and
 * a batch of plain calls completed on them. Returns false if that state
 * is not reached within QUIESCE_MS. */
#define QUIET_CALLS 200
#define QUIESCE_MS 15000

static bool quiesce(grit_channel *ch, int wr, int rd, soak_call *batch,
                    int conc, unsigned *seed) {
  cmd(wr, rd, 'S');
  uint64_t end = now_ms() + QUIESCE_MS;
  int rounds = 0;
  for (;;) {
    rounds++;
    memset(batch, 0, QUIET_CALLS * sizeof(*batch));
    if (run_calls(ch, batch, QUIET_CALLS, conc, 'w', seed) != 0)
      return false;
    uint32_t open[NBACKENDS];
    query_open(wr, rd, open);
    bool settled = true;
    for (int i = 0; i < NBACKENDS; i++)
      settled = settled && open[i] == 1;
    if (settled)
      break;
    if (now_ms() > end) {
      fprintf(stderr, "soak: connections did not settle:");
      for (int i = 0; i < NBACKENDS; i++)
        fprintf(stderr, " %u", open[i]);
      fputc('\n', stderr);
      return false;
    }
    usleep(50000);
  }
  /* A completion callback runs just before its call is freed. */
  usleep(50000);
  if (!quiet)
    fprintf(stderr, "soak: quiet after %d round(s) of %d calls\n", rounds,
            QUIET_CALLS);
  return true;
}

int main(int argc, char **argv) {
  int ncalls = 2000, conc = 64;
  unsigned seed = (unsigned)time(NULL);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--calls") && i + 1 < argc)
      ncalls = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--concurrency") && i + 1 < argc)
      conc = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
      seed = (unsigned)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
      rate = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quiet"))
      quiet = true;
    else {
      fprintf(stderr, "usage: soak [--calls N] [--concurrency C] [--rate R] "
                      "[--seed S] [--quiet]\n");
      return 2;
    }
  }
  if (ncalls < 1 || conc < 1 || rate < 1)
    return 2;
  char ledger_path[] = "/tmp/grit-soak-ledger-XXXXXX";
  int lfd = mkstemp(ledger_path);
  if (lfd < 0)
    return 1;
  close(lfd);
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0)
    return 1;
  pid_t pid = fork();
  if (pid < 0)
    return 1;
  if (pid == 0) {
    close(to_child[1]);
    close(from_child[0]);
    _exit(child_main(to_child[0], from_child[1], ledger_path, seed));
  }
  close(to_child[0]);
  close(from_child[1]);
  int wr = to_child[1], rd = from_child[0];
  uint16_t ports[NBACKENDS];
  if (read(rd, ports, sizeof(ports)) != (ssize_t)sizeof(ports)) {
    fprintf(stderr, "soak: backends did not start\n");
    return 1;
  }
  fprintf(stderr, "soak: seed %u, %d calls, %d in flight, backends %u %u %u\n",
          seed, ncalls, conc, ports[0], ports[1], ports[2]);

  grit_set_allocator(&counting);
  grit_runtime *rt = NULL;
  grit_channel_args *a = NULL;
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  char target[128];
  snprintf(target, sizeof(target),
           "ipv4:127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1],
           ports[2]);
  if (grit_runtime_create(&rt) != GRIT_OK ||
      grit_channel_args_create(&a) != GRIT_OK ||
      grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, soak_config) ||
      grit_channel_args_set_int(a, GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20) ||
      grit_channel_args_set_int(a, GRIT_ARG_MAX_RECONNECT_BACKOFF_MS, 200) ||
      grit_channel_args_set_int(a, GRIT_ARG_RNG_SEED, seed) ||
      grit_channel_args_set_observer(a, on_attempt, NULL) ||
      grit_channel_create(rt, target, a, &d, &ch) != GRIT_OK) {
    fprintf(stderr, "soak: set-up failed: %s %s\n", d.path, d.reason);
    return 1;
  }
  grit_channel_args_destroy(a);

  /* Warm-up: connections, buffers and arenas, chaos on for the second
   * half so that the failure paths are warm too. */
  soak_call *warm = calloc(WARMUP_CALLS, sizeof(*warm));
  soak_call *quiet_calls = calloc(QUIET_CALLS, sizeof(*quiet_calls));
  unsigned cseed = seed;
  int left = run_calls(ch, warm, WARMUP_CALLS / 2, conc, 'w', &cseed);
  cmd(wr, rd, 'C');
  left += run_calls(ch, warm + WARMUP_CALLS / 2, WARMUP_CALLS / 2, conc, 'v',
                    &cseed);
  if (left != 0) {
    fprintf(stderr, "soak: warm-up calls did not finish\n");
    return 1;
  }
  /* The test's own bookkeeping is allocated before the measurement. */
  soak_call *calls = calloc((size_t)ncalls, sizeof(*calls));
  pthread_mutex_lock(&mu);
  size_t want = narecs + (size_t)ncalls * (MAX_ATTEMPTS + 2) +
                QUIET_CALLS * 50; /* quiesce() loops a few times */
  attempt_rec *grown = realloc(arecs, want * sizeof(*arecs));
  if (grown) {
    arecs = grown;
    caparecs = want;
  }
  pthread_mutex_unlock(&mu);
  /* Touch every page now, or they would count as growth when written. */
  for (size_t i = 0; i < (size_t)ncalls * sizeof(*calls); i += 4096)
    ((volatile char *)calls)[i] = 0;
  for (size_t i = narecs * sizeof(*arecs); i < caparecs * sizeof(*arecs);
       i += 4096)
    ((volatile char *)arecs)[i] = 0;
  if (!quiesce(ch, wr, rd, quiet_calls, conc, &cseed)) {
    fprintf(stderr, "soak: no quiet state after warm-up\n");
    return 1;
  }
  long rss_warm = rss_kb();
  long live_warm = atomic_load(&live_bytes);
  cmd(wr, rd, 'C');
  uint64_t t0 = now_ms();
  left = run_calls(ch, calls, ncalls, conc, 'k', &cseed);
  uint64_t elapsed = now_ms() - t0;
  if (!quiesce(ch, wr, rd, quiet_calls, conc, &cseed)) {
    fprintf(stderr, "soak: no quiet state after the soak\n");
    return 1;
  }
  long rss_after = rss_kb();
  long live_after = atomic_load(&live_bytes);
  cmd(wr, rd, 'L');

  /* The ledger. */
  FILE *lf = fopen(ledger_path, "r");
  size_t nl = 0, capl = 1024;
  ledger_entry *led = malloc(capl * sizeof(*led));
  char kbuf[32];
  int prev, status, be;
  while (lf && fscanf(lf, "%31s %d %d %d", kbuf, &prev, &status, &be) == 4) {
    if (kbuf[0] != 'k')
      continue; /* 'v': warm-up under chaos */
    if (nl == capl) {
      capl *= 2;
      led = realloc(led, capl * sizeof(*led));
    }
    led[nl++] = (ledger_entry){atoi(kbuf + 1), prev, status};
  }
  if (lf)
    fclose(lf);
  unlink(ledger_path);
  qsort(led, nl, sizeof(*led), cmp_ledger);
  qsort(arecs, narecs, sizeof(*arecs), cmp_arec);

  int codes[GRIT_STATUS_COUNT] = {0};
  int unfinished = 0, late = 0, ok_not_executed = 0, dup_lost = 0,
      dup_unexplained = 0, executed_but_failed = 0, streaming = 0;
  uint64_t attempts = 0, max_ms = 0;
  size_t li = 0;
  for (int i = 0; i < ncalls; i++) {
    soak_call *c = &calls[i];
    streaming += c->streaming;
    if (atomic_load(&c->done) != 1) {
      unfinished++;
      continue;
    }
    codes[c->code]++;
    attempts += c->attempts;
    uint64_t ms = c->end_ms - c->start_ms;
    max_ms = ms > max_ms ? ms : max_ms;
    if (ms > DEADLINE_MS + 1000)
      late++;
    if (c->code == GRIT_STATUS_DEADLINE_EXCEEDED && !quiet) {
      fprintf(stderr,
              "soak: k%d%s DEADLINE_EXCEEDED after %llu ms, %u "
              "attempts:",
              i, c->streaming ? " (streaming)" : "", (unsigned long long)ms,
              c->attempts);
      for (size_t j = 0; j < narecs; j++)
        if (arecs[j].call_id == c->call_id)
          fprintf(stderr, " #%u=%s", arecs[j].attempt,
                  grit_status_code_name(arecs[j].code));
      fputc('\n', stderr);
    }
    while (li < nl && led[li].key < i)
      li++;
    int executions = 0, ok_execs = 0;
    size_t first = li;
    for (size_t j = li; j < nl && led[j].key == i; j++) {
      if (led[j].status == 14)
        continue; /* answered UNAVAILABLE: not executed */
      executions++;
      ok_execs += led[j].status == 0;
    }
    if (c->code == GRIT_STATUS_OK && ok_execs == 0) {
      ok_not_executed++;
      fprintf(stderr, "soak: k%d OK on the client, never executed\n", i);
    }
    if (c->code != GRIT_STATUS_OK && c->code != GRIT_STATUS_INVALID_ARGUMENT &&
        executions > 0)
      executed_but_failed++;
    if (executions > 1) {
      /* Every execution but the last must have been lost on the way. */
      int lost = 0, seen = 0;
      for (size_t j = first; j < nl && led[j].key == i; j++) {
        if (led[j].status == 14)
          continue;
        if (++seen == executions)
          break;
        lost += attempt_lost(c->call_id, (uint32_t)led[j].prev + 1);
      }
      if (lost == executions - 1) {
        dup_lost++;
      } else {
        dup_unexplained++;
        fprintf(stderr, "soak: k%d executed %d times, final %s \"%s\"\n", i,
                executions, grit_status_code_name(c->code), c->message);
      }
    }
  }

  grit_channel_stats stats = GRIT_CHANNEL_STATS_INIT;
  grit_channel_get_stats(ch, &stats);
  fprintf(stderr,
          "soak: %d calls (%d streaming) in %llu ms, %llu attempts "
          "(%llu retries, %llu transparent), slowest %llu ms\n",
          ncalls, streaming, (unsigned long long)elapsed,
          (unsigned long long)attempts, (unsigned long long)stats.retries,
          (unsigned long long)stats.transparent_retries,
          (unsigned long long)max_ms);
  fprintf(stderr, "soak: outcomes:");
  for (int i = 0; i < GRIT_STATUS_COUNT; i++)
    if (codes[i])
      fprintf(stderr, " %s=%d", grit_status_code_name((grit_status_code)i),
              codes[i]);
  fprintf(stderr, "\n");
  fprintf(stderr,
          "soak: ledger: %zu executions logged; OK but not executed %d; "
          "executed twice: %d explained by a lost answer, %d unexplained; "
          "executed yet failed on the client %d\n",
          nl, ok_not_executed, dup_lost, dup_unexplained, executed_but_failed);
  double growth =
      rss_warm ? 100.0 * (double)(rss_after - rss_warm) / (double)rss_warm : 0;
  fprintf(stderr,
          "soak: unfinished %d, past deadline %d; RSS warm %ld KiB, after "
          "%ld KiB (%+.1f %%); grit's live heap warm %ld KiB, after %ld "
          "KiB\n",
          unfinished, late, rss_warm, rss_after, growth, live_warm / 1024,
          live_after / 1024);

  grit_channel_destroy(ch);
  grit_runtime_destroy(rt);
  cmd(wr, rd, 'Q');
  int wst = 0;
  waitpid(pid, &wst, 0);
  free(led);
  free(arecs);
  free(calls);
  free(quiet_calls);
  free(warm);
  bool heap_ok = live_after <= live_warm + live_warm / 10 + 65536;
  bool pass = unfinished == 0 && late == 0 && ok_not_executed == 0 &&
              dup_unexplained == 0 && (SOAK_ASAN || growth <= 10.0) &&
              heap_ok && left == 0;
  fprintf(stderr, "soak: %s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
