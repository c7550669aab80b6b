/* Call credentials and interceptors against a real server (grpcio, over TLS
 * with certificates made at test time by test/peers/gen_certs.sh):
 * SPEC CR-01, CR-02, IC-01, AP-05.
 * - the server sees the token on every attempt, and a token that changed
 *   after a failed attempt reaches the retry; a hedge carries it too;
 * - a plugin that answers late (from its own thread) holds back its attempt
 *   only: another call on the same channel completes meanwhile;
 * - a plugin's failure fails the attempt with the A54 mapping, and the
 *   retry policy treats it as any status;
 * - credentials on a cleartext channel: UNAUTHENTICATED, nothing sent,
 *   unless GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS;
 * - GRIT_TRACE=all output and the metrics never hold the token;
 * - interceptors on all four call kinds, in order, a call failed by one,
 *   metadata added by one. Skipped (77) without grpcio or openssl. */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bh.h"
#include "pypeer.h"

#define CALL_MS 10000

static char certs[256];
static pypeer tls_peer, plain_peer;
static char tls_target[64], plain_target[64];
static atomic_int key_seq;
static char
    self_path[PATH_MAX]; /* this program, for the child of secret_not_traced */

static bool make_certs(void) {
  if (system("command -v openssl >/dev/null 2>&1") != 0)
    return false;
  char script[PATH_MAX];
  pypeer_script_path("gen_certs.sh", script, sizeof(script));
  char tmpl[] = "/tmp/grit-creds-certs-XXXXXX";
  if (!mkdtemp(tmpl))
    return false;
  snprintf(certs, sizeof(certs), "%s", tmpl);
  char cmd[PATH_MAX * 2 + 64];
  snprintf(cmd, sizeof(cmd), "bash '%s' '%s' >/dev/null 2>&1", script, tmpl);
  return system(cmd) == 0;
}

static void cert_path(char *buf, size_t len, const char *name) {
  snprintf(buf, len, "%s/%s", certs, name);
}

/* A channel to the TLS server (|tls|) or the cleartext one, with |creds|
 * on the channel, |cfg| as its service config, and |ic| interceptors. */
static grit_channel *channel(bool tls, grit_call_credentials *creds,
                             const char *cfg, bool allow_insecure,
                             grit_interceptor **ic, size_t nic) {
  grit_channel_args *a;
  grit_channel_args_create(&a);
  if (tls) {
    char ca[PATH_MAX];
    cert_path(ca, sizeof(ca), "ca.pem");
    grit_channel_args_set_int(a, GRIT_ARG_TLS, 1);
    grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS_FILE, ca);
  }
  if (creds)
    grit_channel_args_set_call_credentials(a, creds);
  if (cfg)
    grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, cfg);
  if (allow_insecure)
    grit_channel_args_set_int(a, GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS, 1);
  for (size_t i = 0; i < nic; i++)
    grit_channel_args_add_interceptor(a, ic[i]);
  grit_channel_args_set_int(a, GRIT_ARG_RNG_SEED, 7);
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  grit_err rv =
      grit_channel_create(NULL, tls ? tls_target : plain_target, a, &d, &ch);
  if (rv != GRIT_OK)
    fprintf(stderr, "channel: %s %s\n", grit_strerror(rv), d.reason);
  grit_channel_args_destroy(a);
  return ch;
}

/* A unary call to creds.Svc/Unary under a fresh key; |extra| metadata
 * ("k=v" pairs, NULL-terminated) added. Returns the status code; the key
 * is left in |key|. */
static grit_status_code call_unary(grit_channel *ch, char *key, size_t klen,
                                   const char *const *extra,
                                   grit_call_credentials *call_creds, char *msg,
                                   size_t msglen) {
  snprintf(key, klen, "k%d", atomic_fetch_add(&key_seq, 1));
  grit_metadata *md;
  grit_metadata_create(&md);
  grit_metadata_add(md, "x-call-key", key, strlen(key));
  for (size_t i = 0; extra && extra[i]; i += 2)
    grit_metadata_add(md, extra[i], extra[i + 1], strlen(extra[i + 1]));
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = CALL_MS,
                      .metadata = md,
                      .call_credentials = call_creds};
  grit_bytes resp = {0};
  grit_status st = {0};
  grit_unary_call(ch, "/creds.Svc/Unary", "hi", 2, &o, &resp, &st, NULL);
  grit_status_code code = st.code;
  if (msg)
    snprintf(msg, msglen, "%s", st.message ? st.message : "");
  grit_bytes_free(&resp);
  grit_status_free(&st);
  grit_metadata_destroy(md);
  return code;
}

/* The server's log of |key| (lines "prev=P auth=A OUTCOME"). */
static void server_log(grit_channel *ch, const char *key, char *out,
                       size_t len) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  grit_bytes resp = {0};
  grit_status st = {0};
  grit_unary_call(ch, "/creds.Svc/Log", key, strlen(key), &o, &resp, &st, NULL);
  snprintf(out, len, "%.*s", (int)resp.len, resp.data ? (char *)resp.data : "");
  grit_bytes_free(&resp);
  grit_status_free(&st);
}

/* ---- a plugin: a counter token, optionally late, optionally failing ---- */

typedef struct plug {
  atomic_int asked;
  grit_status_code fail; /* OK: answer with a token */
  int fail_times;        /* fail the first N asks, then succeed */
  bool hold;             /* answer only when released */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool released;
  char last_url[256];
  char last_method[64];
} plug;

typedef struct held {
  plug *p;
  grit_credentials_request *req;
  int n;
} held;

static void plug_answer(plug *p, grit_credentials_request *req, int n) {
  if (p->fail != GRIT_STATUS_OK && n <= p->fail_times) {
    grit_credentials_request_done(req, p->fail, "identity provider said no");
    return;
  }
  char tok[64];
  snprintf(tok, sizeof(tok), "Bearer tok-%d", n);
  grit_credentials_request_add(req, "authorization", tok, strlen(tok));
  grit_credentials_request_done(req, GRIT_STATUS_OK, NULL);
}

static void *held_thread(void *arg) {
  held *h = arg;
  pthread_mutex_lock(&h->p->mu);
  while (!h->p->released)
    pthread_cond_wait(&h->p->cv, &h->p->mu);
  pthread_mutex_unlock(&h->p->mu);
  plug_answer(h->p, h->req, h->n);
  free(h);
  return NULL;
}

static void plug_get(void *ud, const grit_credentials_context *ctx,
                     grit_credentials_request *req) {
  plug *p = ud;
  int n = atomic_fetch_add(&p->asked, 1) + 1;
  snprintf(p->last_url, sizeof(p->last_url), "%s", ctx->service_url);
  snprintf(p->last_method, sizeof(p->last_method), "%s", ctx->method_name);
  if (!p->hold) {
    plug_answer(p, req, n);
    return;
  }
  held *h = malloc(sizeof(*h));
  h->p = p;
  h->req = req;
  h->n = n;
  pthread_t t;
  pthread_create(&t, NULL, held_thread, h);
  pthread_detach(t);
}

static grit_call_credentials *plug_creds(plug *p) {
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  grit_credentials_plugin def = {.version = GRIT_CREDENTIALS_PLUGIN_VERSION,
                                 .type = "test-idp",
                                 .get_metadata = plug_get};
  grit_call_credentials *c = NULL;
  grit_call_credentials_create_plugin(&def, p, &c);
  return c;
}

static const char *retry_cfg =
    "{\"methodConfig\":[{\"name\":[{\"service\":\"creds.Svc\",\"method\":"
    "\"Unary\"}],\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":"
    "\"0.01s\",\"maxBackoff\":\"0.05s\",\"backoffMultiplier\":2,"
    "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}";

/* CR-01: every attempt asks again; the retry carries the new token. */
static void test_token_every_attempt(void) {
  plug p = {0};
  grit_call_credentials *c = plug_creds(&p);
  grit_channel *ch = channel(true, c, retry_cfg, false, NULL, 0);
  ASSERT_NOT_NULL(ch);
  char key[32], log[512];
  static const char *const fail2[] = {"x-fail", "2", NULL};
  ASSERT_EQ(call_unary(ch, key, sizeof(key), fail2, NULL, NULL, 0),
            GRIT_STATUS_OK);
  server_log(ch, key, log, sizeof(log));
  ASSERT_STR_EQ(log, "prev=- auth=Bearer tok-1 14\n"
                     "prev=1 auth=Bearer tok-2 14\n"
                     "prev=2 auth=Bearer tok-3 ok\n");
  ASSERT_STR_EQ(p.last_method, "Log"); /* the log call asked too */
  grit_channel_destroy(ch);
  grit_call_credentials_unref(c);
}

/* The service URL as grpc builds it: authority and service. */
static void test_service_url(void) {
  plug p = {0};
  grit_call_credentials *c = plug_creds(&p);
  grit_channel *ch = channel(true, c, NULL, false, NULL, 0);
  char key[32], want[128];
  ASSERT_EQ(call_unary(ch, key, sizeof(key), NULL, NULL, NULL, 0),
            GRIT_STATUS_OK);
  snprintf(want, sizeof(want), "https://%s/creds.Svc", tls_target + 5);
  ASSERT_STR_EQ(p.last_url, want);
  ASSERT_STR_EQ(p.last_method, "Unary");
  grit_channel_destroy(ch);
  grit_call_credentials_unref(c);
}

/* CR-01: a hedge asks for credentials of its own. */
static void test_hedge_carries_credentials(void) {
  plug p = {0};
  grit_call_credentials *c = plug_creds(&p);
  static const char *cfg =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"creds.Svc\",\"method\":"
      "\"Unary\"}],\"hedgingPolicy\":{\"maxAttempts\":2,\"hedgingDelay\":"
      "\"0.05s\"}}]}";
  grit_channel *ch = channel(true, c, cfg, false, NULL, 0);
  char key[32], log[512];
  static const char *const slow[] = {"x-delay-ms", "3000", NULL};
  ASSERT_EQ(call_unary(ch, key, sizeof(key), slow, NULL, NULL, 0),
            GRIT_STATUS_OK);
  server_log(ch, key, log, sizeof(log));
  /* Both attempts reached the server with a token; the hedge won (the
   * server holds the original attempt, whichever arrived first). */
  ASSERT(strstr(log, "prev=- auth=Bearer tok-1") != NULL);
  ASSERT(strstr(log, "prev=1 auth=Bearer tok-2 ok") != NULL);
  grit_channel_destroy(ch);
  grit_call_credentials_unref(c);
}

typedef struct async_done {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  grit_status_code code;
} async_done;

static void on_unary_done(const grit_status *st, const uint8_t *resp,
                          size_t resp_len, const grit_call_info *info,
                          void *ud) {
  (void)resp, (void)resp_len, (void)info;
  async_done *d = ud;
  pthread_mutex_lock(&d->mu);
  d->code = st->code;
  d->done = true;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

/* CR-01: a plugin that answers late from its own thread holds back its own
 * attempt only: a call without credentials on the same channel completes
 * while the plugin still has not answered. */
static void test_slow_plugin_does_not_block(void) {
  plug p = {.hold = true};
  grit_call_credentials *c = plug_creds(&p);
  grit_channel *ch = channel(true, NULL, NULL, false, NULL, 0);
  char key[32];
  ASSERT_EQ(call_unary(ch, key, sizeof(key), NULL, NULL, NULL, 0),
            GRIT_STATUS_OK); /* connected */
  async_done d = {.mu = PTHREAD_MUTEX_INITIALIZER,
                  .cv = PTHREAD_COND_INITIALIZER};
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = CALL_MS,
                      .call_credentials = c};
  ASSERT_OK(grit_unary_call_async(ch, "/creds.Svc/Unary", "x", 1, &o,
                                  on_unary_done, &d));
  uint64_t end = pypeer_now_ms() + 5000;
  while (atomic_load(&p.asked) == 0 && pypeer_now_ms() < end)
    usleep(1000);
  ASSERT_EQ(atomic_load(&p.asked), 1);
  /* The plugin holds its answer; the loop is free. */
  ASSERT_EQ(call_unary(ch, key, sizeof(key), NULL, NULL, NULL, 0),
            GRIT_STATUS_OK);
  pthread_mutex_lock(&d.mu);
  bool early = d.done;
  pthread_mutex_unlock(&d.mu);
  ASSERT(!early);
  pthread_mutex_lock(&p.mu);
  p.released = true;
  pthread_cond_broadcast(&p.cv);
  pthread_mutex_unlock(&p.mu);
  pthread_mutex_lock(&d.mu);
  while (!d.done)
    pthread_cond_wait(&d.cv, &d.mu);
  pthread_mutex_unlock(&d.mu);
  ASSERT_EQ(d.code, GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  grit_call_credentials_unref(c);
}

/* CR-02: A54's control-plane codes become INTERNAL and nothing is sent;
 * a retryable failure is retried by the policy and the next ask works. */
static void test_plugin_failures(void) {
  plug p = {.fail = GRIT_STATUS_INVALID_ARGUMENT, .fail_times = 100};
  grit_call_credentials *c = plug_creds(&p);
  grit_channel *ch = channel(true, c, retry_cfg, false, NULL, 0);
  char key[32], msg[256], log[512];
  ASSERT_EQ(call_unary(ch, key, sizeof(key), NULL, NULL, msg, sizeof(msg)),
            GRIT_STATUS_INTERNAL);
  ASSERT_STR_EQ(msg, "call credentials (test-idp): identity provider said no");
  grit_channel_destroy(ch);

  plug q = {.fail = GRIT_STATUS_UNAVAILABLE, .fail_times = 1};
  grit_call_credentials *c2 = plug_creds(&q);
  ch = channel(true, c2, retry_cfg, false, NULL, 0);
  ASSERT_EQ(call_unary(ch, key, sizeof(key), NULL, NULL, NULL, 0),
            GRIT_STATUS_OK);
  server_log(ch, key, log, sizeof(log));
  /* The first attempt never reached the server; the retry did. */
  ASSERT_STR_EQ(log, "prev=1 auth=Bearer tok-2 ok\n");
  grit_channel_destroy(ch);
  grit_call_credentials_unref(c);
  grit_call_credentials_unref(c2);
}

/* AP-05: never in cleartext unless the channel opts in. */
static void test_cleartext_refused(void) {
  grit_call_credentials *c;
  ASSERT_OK(grit_call_credentials_create_bearer("secret-1", &c));
  grit_channel *ch = channel(false, c, NULL, false, NULL, 0);
  char key[32], msg[256], log[256];
  ASSERT_EQ(call_unary(ch, key, sizeof(key), NULL, NULL, msg, sizeof(msg)),
            GRIT_STATUS_UNAUTHENTICATED);
  ASSERT(strstr(msg, "secure channel") != NULL);
  ASSERT(strstr(msg, "secret-1") == NULL);
  grit_channel *plain = channel(false, NULL, NULL, false, NULL, 0);
  server_log(plain, key, log, sizeof(log));
  ASSERT_STR_EQ(log, ""); /* nothing reached the server */
  /* Per-call credentials on a plain channel: refused the same way. */
  ASSERT_EQ(call_unary(plain, key, sizeof(key), NULL, c, NULL, 0),
            GRIT_STATUS_UNAUTHENTICATED);
  grit_channel_destroy(ch);
  ch = channel(false, c, NULL, true, NULL, 0);
  ASSERT_EQ(call_unary(ch, key, sizeof(key), NULL, NULL, NULL, 0),
            GRIT_STATUS_OK);
  server_log(plain, key, log, sizeof(log));
  ASSERT_STR_EQ(log, "prev=- auth=Bearer secret-1 ok\n");
  grit_channel_destroy(ch);
  grit_channel_destroy(plain);
  grit_call_credentials_unref(c);
}

/* Channel and call credentials compose: both tokens go out. */
static void test_channel_and_call_compose(void) {
  grit_call_credentials *chan, *call;
  plug p = {0};
  chan = plug_creds(&p);
  ASSERT_OK(grit_call_credentials_create_bearer("call-token", &call));
  grit_channel *ch = channel(true, chan, NULL, false, NULL, 0);
  char key[32], log[512];
  ASSERT_EQ(call_unary(ch, key, sizeof(key), NULL, call, NULL, 0),
            GRIT_STATUS_OK);
  server_log(ch, key, log, sizeof(log));
  /* grpcio joins repeated headers with ","; both are there, in order. */
  ASSERT_STR_EQ(log, "prev=- auth=Bearer tok-1,Bearer call-token ok\n");
  grit_channel_destroy(ch);
  grit_call_credentials_unref(chan);
  grit_call_credentials_unref(call);
}

/* AP-05: the token appears in no trace line and no metric. Runs in a
 * child process started afresh with GRIT_TRACE=all (the trace settings
 * are read once per process). */
static void test_secret_not_traced(void) {
  char out[] = "/tmp/grit-creds-trace-XXXXXX";
  int fd = mkstemp(out);
  ASSERT(fd >= 0);
  /* The child's environment is made here: between fork() and exec() a
   * child of a threaded process calls nothing that may allocate. */
  extern char **environ;
  size_t ne = 0;
  while (environ[ne])
    ne++;
  char **envp = calloc(ne + 5, sizeof(*envp));
  ASSERT_NOT_NULL(envp);
  char env_target[600], env_certs[600];
  snprintf(env_target, sizeof(env_target), "GRIT_CREDS_CHILD_TARGET=%s",
           tls_target);
  snprintf(env_certs, sizeof(env_certs), "GRIT_CREDS_CHILD_CERTS=%s", certs);
  char env_trace[] = "GRIT_TRACE=all", env_verb[] = "GRIT_VERBOSITY=debug";
  envp[0] = env_trace;
  envp[1] = env_verb;
  envp[2] = env_target;
  envp[3] = env_certs;
  memcpy(envp + 4, environ, ne * sizeof(*envp));
  char *argv[] = {self_path, (char *)"secret_child", NULL};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 2);
    execve(self_path, argv, envp);
    _exit(127);
  }
  free(envp);
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  FILE *f = fdopen(fd, "r");
  fseek(f, 0, SEEK_SET);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = '\0';
  fclose(f);
  unlink(out);
  ASSERT_CMP(n, >, 1000); /* the trace did run */
  ASSERT(strstr(text, "creds.Svc/Unary") != NULL);
  ASSERT(strstr(text, "TOPSECRET") == NULL);
}

/* The child of test_secret_not_traced: one call with a bearer token, then
 * the metrics written to stderr too. */
static int secret_child(void) {
  snprintf(tls_target, sizeof(tls_target), "%s",
           getenv("GRIT_CREDS_CHILD_TARGET"));
  snprintf(certs, sizeof(certs), "%s", getenv("GRIT_CREDS_CHILD_CERTS"));
  grit_call_credentials *c;
  if (grit_call_credentials_create_bearer("TOPSECRET-42", &c) != GRIT_OK)
    return 1;
  grit_channel *ch = channel(true, c, retry_cfg, false, NULL, 0);
  char key[32];
  static const char *const fail1[] = {"x-fail", "1", NULL};
  grit_status_code code =
      call_unary(ch, key, sizeof(key), fail1, NULL, NULL, 0);
  grit_bytes m = {0};
  grit_metrics_write_prometheus(NULL, &m);
  fwrite(m.data, 1, m.len, stderr);
  grit_bytes_free(&m);
  grit_channel_destroy(ch);
  grit_call_credentials_unref(c);
  grit_default_runtime_shutdown();
  return code == GRIT_STATUS_OK ? 0 : 2;
}

/* ---- interceptors (IC-01) ---- */

typedef struct ic_rec {
  const char *name;
  pthread_mutex_t mu;
  char log[2048];
  grit_status_code fail;
} ic_rec;

static void ic_note(ic_rec *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ic_note(ic_rec *r, const char *fmt, ...) {
  pthread_mutex_lock(&r->mu);
  size_t n = strlen(r->log);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->log + n, sizeof(r->log) - n, fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&r->mu);
}

/* One shared log, to see the order across interceptors. */
static ic_rec shared = {.mu = PTHREAD_MUTEX_INITIALIZER};

static grit_status_code ic_start(void *ud, const grit_interceptor_call_info *i,
                                 grit_metadata *md, void **cd,
                                 const char **message) {
  ic_rec *r = ud;
  ic_note(&shared, "%s:start(%s) ", r->name, i->method);
  *cd = r;
  char v[16];
  snprintf(v, sizeof(v), "%s", r->name);
  grit_metadata_add(md, "x-ic", v, strlen(v));
  if (r->fail != GRIT_STATUS_OK) {
    *message = "refused by policy";
    return r->fail;
  }
  return GRIT_STATUS_OK;
}

static void ic_send(void *ud, void *cd, const uint8_t *d, size_t n) {
  (void)cd;
  ic_note(&shared, "%s:send(%.*s) ", ((ic_rec *)ud)->name, (int)n,
          (const char *)d);
}

static void ic_headers(void *ud, void *cd, const grit_metadata *md) {
  (void)cd, (void)md;
  ic_note(&shared, "%s:headers ", ((ic_rec *)ud)->name);
}

static void ic_message(void *ud, void *cd, const uint8_t *d, size_t n) {
  (void)cd;
  ic_note(&shared, "%s:recv(%.*s) ", ((ic_rec *)ud)->name, (int)n,
          (const char *)d);
}

static void ic_done(void *ud, void *cd, const grit_status *st) {
  (void)cd;
  ic_note(&shared, "%s:done(%s)", ((ic_rec *)ud)->name,
          grit_status_code_name(st->code));
}

static const grit_interceptor_ops ic_ops = {
    .version = GRIT_INTERCEPTOR_OPS_VERSION,
    .on_start = ic_start,
    .on_send = ic_send,
    .on_headers = ic_headers,
    .on_message = ic_message,
    .on_done = ic_done,
};

static void shared_reset(void) {
  pthread_mutex_lock(&shared.mu);
  shared.log[0] = '\0';
  pthread_mutex_unlock(&shared.mu);
}

/* Run one call of |kind| through a blocking call. */
static grit_status_code run_kind(grit_channel *ch, const char *method,
                                 const char *const *sends, grit_interceptor *ic,
                                 char *got, size_t glen) {
  grit_interceptor *per_call[] = {ic};
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = CALL_MS,
                      .interceptors = ic ? per_call : NULL,
                      .interceptor_count = ic ? 1 : 0};
  grit_call *call;
  if (grit_call_start(ch, method, &o, NULL, NULL, &call) != GRIT_OK)
    return (grit_status_code)-1;
  for (size_t i = 0; sends[i]; i++)
    grit_call_send(call, sends[i], strlen(sends[i]));
  grit_call_close_send(call);
  got[0] = '\0';
  grit_bytes m;
  while (grit_call_recv(call, &m) == GRIT_OK) {
    size_t n = strlen(got);
    snprintf(got + n, glen - n, "%s%.*s", n ? "|" : "", (int)m.len,
             (const char *)m.data);
    grit_bytes_free(&m);
  }
  grit_status st;
  grit_call_finish(call, &st);
  grit_status_code code = st.code;
  grit_status_free(&st);
  grit_call_destroy(call);
  return code;
}

static void test_interceptors_four_kinds(void) {
  ic_rec a = {.name = "A", .mu = PTHREAD_MUTEX_INITIALIZER};
  ic_rec b = {.name = "B", .mu = PTHREAD_MUTEX_INITIALIZER};
  ic_rec c = {.name = "C", .mu = PTHREAD_MUTEX_INITIALIZER};
  grit_interceptor *ia, *ib, *icc;
  ASSERT_OK(grit_interceptor_create(&ic_ops, &a, &ia));
  ASSERT_OK(grit_interceptor_create(&ic_ops, &b, &ib));
  ASSERT_OK(grit_interceptor_create(&ic_ops, &c, &icc));
  grit_interceptor *chain[] = {ia, ib};
  grit_channel *ch = channel(false, NULL, NULL, false, chain, 2);
  grit_interceptor_unref(ia); /* the channel keeps them */
  grit_interceptor_unref(ib);
  char got[256];

  static const char *const one[] = {"x", NULL};
  shared_reset();
  ASSERT_EQ(run_kind(ch, "/creds.Svc/Unary", one, icc, got, sizeof(got)),
            GRIT_STATUS_OK);
  ASSERT_STR_EQ(got, "x");
  ASSERT_STR_EQ(shared.log,
                "A:start(/creds.Svc/Unary) B:start(/creds.Svc/Unary) "
                "C:start(/creds.Svc/Unary) A:send(x) B:send(x) C:send(x) "
                "C:headers B:headers A:headers C:recv(x) B:recv(x) A:recv(x) "
                "C:done(OK)B:done(OK)A:done(OK)");

  static const char *const parts[] = {"p,q,r", NULL};
  shared_reset();
  ASSERT_EQ(run_kind(ch, "/creds.Svc/Server", parts, NULL, got, sizeof(got)),
            GRIT_STATUS_OK);
  ASSERT_STR_EQ(got, "p|q|r");
  ASSERT(strstr(shared.log,
                "B:recv(p) A:recv(p) B:recv(q) A:recv(q) "
                "B:recv(r) A:recv(r) B:done(OK)A:done(OK)") != NULL);

  static const char *const three[] = {"1", "2", "3", NULL};
  shared_reset();
  ASSERT_EQ(run_kind(ch, "/creds.Svc/Client", three, NULL, got, sizeof(got)),
            GRIT_STATUS_OK);
  ASSERT_STR_EQ(got, "1,2,3");
  ASSERT(strstr(shared.log, "A:send(1) B:send(1) A:send(2) B:send(2) "
                            "A:send(3) B:send(3)") != NULL);
  ASSERT(strstr(shared.log, "B:recv(1,2,3) A:recv(1,2,3) ") != NULL);

  shared_reset();
  ASSERT_EQ(run_kind(ch, "/creds.Svc/Bidi", three, NULL, got, sizeof(got)),
            GRIT_STATUS_OK);
  ASSERT_STR_EQ(got, "1|2|3");
  ASSERT(strstr(shared.log, "B:recv(3) A:recv(3) B:done(OK)A:done(OK)") !=
         NULL);

  /* The metadata the interceptors added reached the server, in order. */
  char key[32], log[256];
  static const char *const none[] = {NULL};
  (void)none;
  shared_reset();
  c.fail = GRIT_STATUS_PERMISSION_DENIED;
  ASSERT_EQ(run_kind(ch, "/creds.Svc/Unary", one, icc, got, sizeof(got)),
            GRIT_STATUS_PERMISSION_DENIED);
  /* C refused: A and B see done, C saw only its start, nothing was sent. */
  ASSERT_STR_EQ(shared.log,
                "A:start(/creds.Svc/Unary) B:start(/creds.Svc/Unary) "
                "C:start(/creds.Svc/Unary) C:done(PERMISSION_DENIED)"
                "B:done(PERMISSION_DENIED)A:done(PERMISSION_DENIED)");
  grit_channel *plain = channel(false, NULL, NULL, false, NULL, 0);
  ASSERT_EQ(call_unary(plain, key, sizeof(key), NULL, NULL, NULL, 0),
            GRIT_STATUS_OK);
  server_log(plain, key, log, sizeof(log));
  ASSERT_STR_EQ(log, "prev=- auth=- ok\n");
  grit_channel_destroy(plain);
  grit_channel_destroy(ch);
  grit_interceptor_unref(icc);
}

static const test_case tests[] = {
    {"token_every_attempt", test_token_every_attempt},
    {"service_url", test_service_url},
    {"hedge_carries_credentials", test_hedge_carries_credentials},
    {"slow_plugin_does_not_block", test_slow_plugin_does_not_block},
    {"plugin_failures", test_plugin_failures},
    {"cleartext_refused", test_cleartext_refused},
    {"channel_and_call_compose", test_channel_and_call_compose},
    {"secret_not_traced", test_secret_not_traced},
    {"interceptors_four_kinds", test_interceptors_four_kinds},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "secret_child") == 0)
    return secret_child();
  /* Under valgrind /proc/self/exe is valgrind itself: keep argv[0]. */
  if (!realpath(argv[0], self_path))
    snprintf(self_path, sizeof(self_path), "%s", argv[0]);
  if (!pypeer_has_grpc() || !make_certs()) {
    fprintf(stderr, "skipped: grpcio or openssl unavailable\n");
    return 77;
  }
  char c[PATH_MAX], k[PATH_MAX];
  cert_path(c, sizeof(c), "server.pem");
  cert_path(k, sizeof(k), "server.key");
  const char *tls_args[] = {"--cert", c, "--key", k, NULL};
  if (!pypeer_start_args(&tls_peer, "creds_server.py", tls_args) ||
      !pypeer_start(&plain_peer, "creds_server.py"))
    return 1;
  snprintf(tls_target, sizeof(tls_target), "ipv4:127.0.0.1:%u", tls_peer.port);
  snprintf(plain_target, sizeof(plain_target), "ipv4:127.0.0.1:%u",
           plain_peer.port);
  int rc = test_main(tests, argc, argv);
  pypeer_stop(&tls_peer);
  pypeer_stop(&plain_peer);
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", certs);
  if (system(cmd) != 0)
    rc = 1;
  grit_default_runtime_shutdown();
  return rc;
}
