/* Out-of-memory sweeps over the public constructors, real unary calls
 * (plain, retry and hedging policies) and bidi streams (STYLE 3.4, 3.10): count
 * the allocations of a clean run, then fail the i-th for every i. Constructors
 * must return GRIT_ERR_NOMEM cleanly (ASan checks for leaks); on the loop an
 * allocation failure may fail only the affected call (RESOURCE_EXHAUSTED or
 * another clean status, never a crash or hang), and the next call on the same
 * channel must succeed. nghttp2 allocates through grit's allocator; libuv,
 * OpenSSL, c-ares and jansson use their own. */
#include <grit/grit.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "h2server.h"
#include "test/harness.h"

/* ---- the failing allocator: installed once, armed per run ---- */

static atomic_bool oom_armed;
static atomic_long oom_count;
static atomic_long oom_fail_at; /* 0: never */
static atomic_long oom_failed;

static bool oom_fail_now(void) {
  if (!atomic_load(&oom_armed))
    return false;
  long n = atomic_fetch_add(&oom_count, 1) + 1;
  if (n == atomic_load(&oom_fail_at)) {
    atomic_fetch_add(&oom_failed, 1);
    return true;
  }
  return false;
}
static void *oom_malloc(size_t n, void *ud) {
  (void)ud;
  return oom_fail_now() ? NULL : malloc(n);
}
static void oom_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *oom_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  return oom_fail_now() ? NULL : calloc(n, m);
}
static void *oom_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  return oom_fail_now() ? NULL : realloc(p, n);
}
static const grit_allocator oom_alloc = {NULL, oom_malloc, oom_free, oom_calloc,
                                         oom_realloc};

static void oom_arm(long fail_at) {
  atomic_store(&oom_count, 0);
  atomic_store(&oom_failed, 0);
  atomic_store(&oom_fail_at, fail_at);
  atomic_store(&oom_armed, true);
}

static long oom_disarm(void) {
  atomic_store(&oom_armed, false);
  return atomic_load(&oom_count);
}

/* ---- sweep driver ---- */

typedef grit_err (*oom_fn)(void *arg);

/* Run |fn| clean, then once per allocation index with that one failing.
 * Every run must return GRIT_OK or GRIT_ERR_NOMEM; when an allocation did
 * fail and the run still returned OK, the failure was absorbed cleanly. */
static void sweep(const char *name, oom_fn fn, void *arg) {
  oom_arm(0);
  grit_err rv = fn(arg);
  long total = oom_disarm();
  if (rv != GRIT_OK)
    TEST_FAIL_AT(__FILE__, __LINE__, "%s: clean run returned %s", name,
                 grit_err_name(rv));
  ASSERT_CMP(total, >, 0);
  long nomem = 0;
  for (long i = 1; i <= total; i++) {
    oom_arm(i);
    rv = fn(arg);
    oom_disarm();
    if (rv == GRIT_ERR_NOMEM)
      nomem++;
    else if (rv != GRIT_OK)
      TEST_FAIL_AT(__FILE__, __LINE__, "%s: allocation %ld of %ld: %s", name, i,
                   total, grit_err_name(rv));
  }
  fprintf(stderr, "  %-22s %4ld allocations, %4ld runs returned NOMEM\n", name,
          total, nomem);
  ASSERT_CMP(nomem, >, 0);
}

/* ---- constructors ---- */

static grit_err fn_args(void *arg) {
  (void)arg;
  grit_channel_args *a = NULL;
  grit_err rv = grit_channel_args_create(&a);
  if (rv != GRIT_OK) {
    if (a != NULL)
      return GRIT_ERR_INVALID_ARG; /* out-param must be NULL on failure */
    return rv;
  }
  if (rv == GRIT_OK)
    rv = grit_channel_args_set_int(a, GRIT_ARG_MAX_RECV_MESSAGE, 1 << 20);
  if (rv == GRIT_OK)
    rv = grit_channel_args_set_int(a, GRIT_ARG_RNG_SEED, 42);
  if (rv == GRIT_OK)
    rv = grit_channel_args_set_string(a, GRIT_ARG_USER_AGENT, "oom/1.0");
  if (rv == GRIT_OK)
    rv = grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, "{}");
  if (rv == GRIT_OK)
    rv = grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_AUTHORITY, "x:1");
  if (rv == GRIT_OK)
    rv = grit_channel_args_set_observer(a, NULL, NULL);
  grit_channel_args_destroy(a);
  return rv;
}

static grit_err fn_metadata(void *arg) {
  (void)arg;
  grit_metadata *md = NULL;
  grit_err rv = grit_metadata_create(&md);
  if (rv != GRIT_OK)
    return md ? GRIT_ERR_INVALID_ARG : rv;
  static const char *const keys[] = {"x-a", "x-b", "x-c-bin", "x-d", "x-e",
                                     "x-f", "x-g", "x-h",     "x-i", "x-j"};
  for (size_t i = 0; rv == GRIT_OK && i < 10; i++)
    rv = grit_metadata_add(md, keys[i], "value\0\1",
                           strstr(keys[i], "-bin") ? 7 : 5);
  if (rv == GRIT_OK && grit_metadata_count(md) != 10)
    rv = GRIT_ERR_INVALID_ARG;
  if (rv == GRIT_ERR_NOMEM && grit_metadata_count(md) > 10)
    rv = GRIT_ERR_INVALID_ARG;
  grit_metadata_destroy(md);
  return rv;
}

static grit_err fn_runtime(void *arg) {
  (void)arg;
  grit_runtime *rt = NULL;
  grit_err rv = grit_runtime_create(&rt);
  if (rv != GRIT_OK)
    return rt ? GRIT_ERR_INVALID_ARG : rv;
  grit_runtime_destroy(rt);
  return GRIT_OK;
}

typedef struct chan_case {
  grit_runtime *rt;
  const char *target;
  grit_channel_args *args;
} chan_case;

static grit_err fn_channel(void *arg) {
  chan_case *c = arg;
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  grit_err rv = grit_channel_create(c->rt, c->target, c->args, &d, &ch);
  if (rv != GRIT_OK) {
    if (ch)
      return GRIT_ERR_INVALID_ARG;
    if (rv != GRIT_ERR_NOMEM)
      fprintf(stderr, "channel_create: %s %s %s\n", grit_err_name(rv), d.path,
              d.reason);
    return rv;
  }
  grit_channel_destroy(ch);
  return GRIT_OK;
}

static grit_err fn_svccfg_check(void *arg) {
  (void)arg;
  static const char cfg[] =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Svc\"}],"
      "\"retryPolicy\":{\"maxAttempts\":4,\"initialBackoff\":\"0.01s\","
      "\"maxBackoff\":\"1s\",\"backoffMultiplier\":2,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}],"
      "\"retryThrottling\":{\"maxTokens\":10,\"tokenRatio\":0.1}}";
  char *report = NULL;
  grit_err rv = grit_service_config_check(cfg, sizeof(cfg) - 1, &report);
  grit_free(report);
  return rv;
}

static void test_args(void) {
  sweep("channel_args", fn_args, NULL);
}

/* ---- SPEC OP-01..03: admin endpoint, channelz, OTLP exporter ---- */

static grit_err fn_admin(void *arg) {
  (void)arg;
  grit_admin *a = NULL;
  grit_err rv = grit_admin_start(NULL, 0, 0, NULL, &a);
  if (rv != GRIT_OK)
    return a ? GRIT_ERR_INVALID_ARG : rv;
  grit_admin_stop(a);
  return GRIT_OK;
}

static grit_err fn_channelz(void *arg) {
  grit_bytes out = {0};
  grit_err rv = grit_channelz_json(arg, &out);
  if (rv != GRIT_OK && out.data)
    rv = GRIT_ERR_INVALID_ARG; /* empty on failure */
  grit_bytes_free(&out);
  return rv;
}

static grit_err fn_register(void *arg) {
  (void)arg;
  grit_err rv = grit_metrics_register_method("/oom.Svc/Registered");
  grit_bytes out = {0};
  if (rv == GRIT_OK)
    rv = grit_metrics_write_prometheus(NULL, &out);
  grit_bytes_free(&out);
  return rv;
}

static void test_operations(void) {
  sweep("admin_start", fn_admin, NULL);
  grit_runtime *rt = NULL;
  ASSERT_OK(grit_runtime_create(&rt));
  grit_channel *ch = NULL;
  ASSERT_OK(grit_channel_create(rt, "ipv4:127.0.0.1:1", NULL, NULL, &ch));
  sweep("channelz_one", fn_channelz, ch);
  sweep("channelz_all", fn_channelz, NULL);
  sweep("metrics_register", fn_register, NULL);
  grit_channel_destroy(ch);
  /* The exporter of an endpoint where nothing listens: its own channel,
   * queue and thread, made and stopped with the channel. */
  chan_case c = {.rt = rt, .target = "ipv4:127.0.0.1:2"};
  ASSERT_OK(grit_channel_args_create(&c.args));
  ASSERT_OK(grit_channel_args_set_string(c.args, GRIT_ARG_OTLP_ENDPOINT,
                                         "ipv4:127.0.0.1:1"));
  sweep("channel_create_otlp", fn_channel, &c);
  grit_channel_args_destroy(c.args);
  grit_runtime_destroy(rt);
}

static void test_metadata(void) {
  sweep("metadata", fn_metadata, NULL);
}

static void test_runtime(void) {
  sweep("runtime", fn_runtime, NULL);
}

static void test_service_config_check(void) {
  sweep("service_config_check", fn_svccfg_check, NULL);
}

static const char retry_config[] =
    "{\"methodConfig\":[{\"name\":[{}],\"timeout\":\"5s\","
    "\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":\"0.01s\","
    "\"maxBackoff\":\"0.05s\",\"backoffMultiplier\":2,"
    "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}],"
    "\"retryThrottling\":{\"maxTokens\":100,\"tokenRatio\":0.5}}";

static void test_channel_create(void) {
  grit_runtime *rt = NULL;
  ASSERT_OK(grit_runtime_create(&rt));
  chan_case c = {.rt = rt, .target = "ipv4:127.0.0.1:1,127.0.0.1:2"};
  sweep("channel_create", fn_channel, &c);
  ASSERT_OK(grit_channel_args_create(&c.args));
  ASSERT_OK(grit_channel_args_set_string(c.args, GRIT_ARG_SERVICE_CONFIG,
                                         retry_config));
  sweep("channel_create_config", fn_channel, &c);
  c.target = "dns:///localhost:1";
  sweep("channel_create_dns", fn_channel, &c);
  grit_channel_args_destroy(c.args);
  grit_runtime_destroy(rt);
}

/* issue 27: an xds:/// channel checks its bootstrap at creation (the
 * argument's JSON parsed, nothing started), and the operators' check. */
static const char xds_boot[] =
    "{\"xds_servers\": [{\"server_uri\": \"127.0.0.1:1\", "
    "\"channel_creds\": [{\"type\": \"insecure\"}], "
    "\"server_features\": [\"ignore_resource_deletion\"]}], "
    "\"node\": {\"id\": \"oom\", \"metadata\": {\"k\": \"v\"}}}";

static grit_err fn_xds_check(void *arg) {
  (void)arg;
  grit_error_detail d = {0};
  return grit_xds_bootstrap_check(xds_boot, strlen(xds_boot), &d);
}

static void test_xds_create(void) {
  grit_runtime *rt = NULL;
  ASSERT_OK(grit_runtime_create(&rt));
  chan_case c = {.rt = rt, .target = "xds:///svc"};
  ASSERT_OK(grit_channel_args_create(&c.args));
  ASSERT_OK(grit_channel_args_set_string(c.args, GRIT_ARG_XDS_BOOTSTRAP_CONFIG,
                                         xds_boot));
  sweep("channel_create_xds", fn_channel, &c);
  grit_channel_args_destroy(c.args);
  grit_runtime_destroy(rt);
  sweep("xds_bootstrap_check", fn_xds_check, NULL);
}

/* TLS material from test/peers/gen_certs.sh, made at test time. */
static char cert_dir[PATH_MAX];

static bool make_certs(void) {
  if (cert_dir[0])
    return true;
  if (system("command -v openssl >/dev/null 2>&1") != 0)
    return false;
  char script[PATH_MAX];
  const char *src = getenv("GRIT_SOURCE_ROOT");
  if (src)
    snprintf(script, sizeof(script), "%s/test/peers/gen_certs.sh", src);
  else
    snprintf(script, sizeof(script), "%s", __FILE__);
  if (!src) {
    char *slash = strrchr(script, '/');
    if (!slash)
      return false;
    snprintf(slash, sizeof(script) - (size_t)(slash - script),
             "/../peers/gen_certs.sh");
  }
  char tmpl[] = "/tmp/grit-oom-certs-XXXXXX";
  if (!mkdtemp(tmpl))
    return false;
  char cmd[PATH_MAX * 2 + 64];
  snprintf(cmd, sizeof(cmd), "bash '%s' '%s' >/dev/null 2>&1", script, tmpl);
  if (system(cmd) != 0) {
    fprintf(stderr, "cannot run %s\n", script);
    return false;
  }
  snprintf(cert_dir, sizeof(cert_dir), "%s", tmpl);
  return true;
}

static void remove_certs(void) {
  if (!cert_dir[0])
    return;
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cert_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", cert_dir);
  cert_dir[0] = '\0';
}

static void test_channel_create_tls(void) {
  if (!make_certs()) {
    fprintf(stderr, "  skipped: openssl or gen_certs.sh unavailable\n");
    return;
  }
  char roots[PATH_MAX + 16], chain[PATH_MAX + 16], key[PATH_MAX + 16];
  snprintf(roots, sizeof(roots), "%s/ca.pem", cert_dir);
  snprintf(chain, sizeof(chain), "%s/client.pem", cert_dir);
  snprintf(key, sizeof(key), "%s/client.key", cert_dir);
  grit_runtime *rt = NULL;
  ASSERT_OK(grit_runtime_create(&rt));
  chan_case c = {.rt = rt, .target = "ipv4:127.0.0.1:1"};
  ASSERT_OK(grit_channel_args_create(&c.args));
  ASSERT_OK(grit_channel_args_set_int(c.args, GRIT_ARG_TLS, 1));
  ASSERT_OK(grit_channel_args_set_string(c.args, GRIT_ARG_TLS_ROOT_CERTS_FILE,
                                         roots));
  ASSERT_OK(grit_channel_args_set_string(
      c.args, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE, "foo.test.google.fr"));
  sweep("channel_create_tls", fn_channel, &c);
  ASSERT_OK(grit_channel_args_set_string(c.args, GRIT_ARG_TLS_CERT_CHAIN_FILE,
                                         chain));
  ASSERT_OK(
      grit_channel_args_set_string(c.args, GRIT_ARG_TLS_PRIVATE_KEY_FILE, key));
  sweep("channel_create_mtls", fn_channel, &c);
  grit_channel_args_destroy(c.args);
  grit_runtime_destroy(rt);
}

/* ---- a unary call on the loop ---- */

/* What the call sweeps send and what their server answers; the
 * compression sweep changes them (issue 13). */
static const void *oom_req = "hello";
static size_t oom_req_len = 5;
static const h2s_action *oom_default_action; /* NULL: echo */
static const char *oom_compression;          /* channel default */
/* CR-01, IC-01: call credentials and an interceptor on the channel. */
static grit_call_credentials *oom_creds;
static grit_interceptor *oom_ic;
static size_t oom_want_len; /* 0: the echo's */

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  grit_status_code code;
  char message[200];
  size_t resp_len;
} waiter;

static void on_unary(const grit_status *st, const uint8_t *resp,
                     size_t resp_len, const grit_call_info *info, void *ud) {
  (void)resp;
  (void)info;
  waiter *w = ud;
  pthread_mutex_lock(&w->mu);
  w->done++;
  w->code = st->code;
  snprintf(w->message, sizeof(w->message), "%s",
           st->message ? st->message : "(null)");
  w->resp_len = resp_len;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* An async unary call waited for at most |wait_ms|; false if no callback
 * came (a hang). */
static grit_err unary(grit_channel *ch, bool wfr, uint64_t timeout_ms,
                      uint64_t wait_ms, waiter *w) {
  memset(w, 0, sizeof(*w));
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms,
                      .wait_for_ready = wfr ? GRIT_WFR_ON : GRIT_WFR_OFF};
  grit_err rv = grit_unary_call_async(ch, "/pkg.Svc/Echo", oom_req, oom_req_len,
                                      &o, on_unary, w);
  if (rv != GRIT_OK) {
    w->done = -1;
    return rv;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(wait_ms / 1000);
  ts.tv_nsec += (long)(wait_ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&w->mu);
  while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &ts) != ETIMEDOUT)
    ;
  pthread_mutex_unlock(&w->mu);
  return GRIT_OK;
}

/* A bidi stream on |ch| in blocking mode: three messages sent, half-close,
 * the echoes read, the status taken. GRIT_ERR_NOMEM when starting or
 * sending failed for memory (the call is then dropped). */
static grit_err stream_once(grit_channel *ch, waiter *w) {
  memset(w, 0, sizeof(*w));
  w->done = -1; /* no waiter primitives to free */
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 5000};
  grit_call *call = NULL;
  grit_err rv = grit_call_start(ch, "/pkg.Svc/Echo", &o, NULL, NULL, &call);
  if (rv != GRIT_OK)
    return rv;
  for (int i = 0; i < 3 && rv == GRIT_OK; i++)
    rv = grit_call_send(call, "hello", 5);
  if (rv == GRIT_OK)
    rv = grit_call_close_send(call);
  if (rv == GRIT_ERR_CALL_STATE)
    rv = GRIT_OK; /* the call ended already: its status says why */
  if (rv != GRIT_OK) {
    grit_call_destroy(call);
    return rv;
  }
  grit_bytes b;
  int nomem = 0; /* a failed copy keeps the message queued: try again */
  while ((rv = grit_call_recv(call, &b)) != GRIT_END_OF_STREAM && nomem < 3) {
    if (rv == GRIT_ERR_NOMEM) {
      nomem++;
      continue;
    }
    w->resp_len += b.len;
    grit_bytes_free(&b);
  }
  grit_status st;
  if (grit_call_finish(call, &st) == GRIT_OK) {
    w->done = 1;
    w->code = st.code;
    snprintf(w->message, sizeof(w->message), "%s",
             st.message ? st.message : "(null)");
    grit_status_free(&st);
  }
  grit_call_destroy(call);
  return GRIT_OK;
}

typedef struct call_case {
  grit_runtime *rt;
  grit_channel_args *args;
  char target[64];
  grit_channel *warm; /* reused channel, or NULL: a fresh one per run */
  int codes[GRIT_STATUS_COUNT];
  int hangs, bad, after_failed;
  int connect_oom; /* calls failed by the connection's own allocations */
  bool verbose;
  bool stream;     /* stream_once instead of one unary call */
  size_t want_len; /* response bytes of a successful call */
} call_case;

static void waiter_free(waiter *w) {
  if (w->done == -1)
    return;
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
}

static grit_err fn_call(void *arg) {
  call_case *c = arg;
  /* The allocator is armed already; a fresh channel is made unarmed so the
   * sweep covers connection set-up and the call, not the constructor. */
  bool armed = atomic_load(&oom_armed);
  grit_channel *ch = c->warm;
  if (!ch) {
    atomic_store(&oom_armed, false);
    grit_error_detail d = {0};
    if (grit_channel_create(c->rt, c->target, c->args, &d, &ch) != GRIT_OK)
      return GRIT_ERR_INVALID_ARG;
    atomic_store(&oom_armed, armed);
  }
  waiter w;
  grit_err rv =
      c->stream ? stream_once(ch, &w) : unary(ch, false, 5000, 10000, &w);
  atomic_store(&oom_armed, false);
  if (rv == GRIT_OK) {
    if (!w.done) {
      c->hangs++;
      fprintf(stderr, "  hang: no completion (fail_at %ld)\n",
              atomic_load(&oom_fail_at));
    } else {
      c->codes[w.code]++;
      /* Clean outcomes only: success, resource exhaustion, or the
       * connection failing under it. Never a lost call (DEADLINE) and
       * never OK without the echoed message. */
      bool ok = (w.code == GRIT_STATUS_OK && w.resp_len == c->want_len) ||
                w.code == GRIT_STATUS_RESOURCE_EXHAUSTED ||
                w.code == GRIT_STATUS_UNAVAILABLE ||
                w.code == GRIT_STATUS_INTERNAL;
      if (!ok || c->verbose)
        fprintf(stderr, "  fail_at %ld: %s \"%s\" resp %zu\n",
                atomic_load(&oom_fail_at), grit_status_code_name(w.code),
                w.message, w.resp_len);
      if (!ok)
        c->bad++;
      /* Issue 27: the read buffer and the HTTP/2 session are made once
       * the connection is up (transport/conn.c conn_on_connect). */
      if (w.code == GRIT_STATUS_UNAVAILABLE &&
          strstr(w.message, "out of memory") && strstr(w.message, "connect to"))
        c->connect_oom++;
    }
  }
  waiter_free(&w);
  /* The channel survives: the next call with nothing failing works. */
  waiter w2;
  if (unary(ch, true, 5000, 10000, &w2) != GRIT_OK || w2.done != 1 ||
      w2.code != GRIT_STATUS_OK) {
    c->after_failed++;
    fprintf(stderr, "  fail_at %ld: the next call failed: %s \"%s\"\n",
            atomic_load(&oom_fail_at),
            w2.done == 1 ? grit_status_code_name(w2.code) : "no completion",
            w2.done == 1 ? w2.message : "");
  }
  waiter_free(&w2);
  if (!c->warm)
    grit_channel_destroy(ch);
  atomic_store(&oom_armed, armed);
  return rv;
}

/* Calls failed by the connection's own allocations, over every sweep. */
static int oom_connect_failures;

static void call_sweep(const char *name, bool warm, const char *config,
                       bool stream) {
  h2s_server *srv = NULL;
  ASSERT_EQ(
      h2s_server_start(
          &(h2s_config){.quiet = true, .default_action = oom_default_action},
          &srv),
      0);
  call_case *c = calloc(1, sizeof(*c));
  ASSERT_NOT_NULL(c);
  c->stream = stream;
  c->want_len = oom_want_len ? oom_want_len : stream ? 15 : 5;
  c->verbose = getenv("OOM_VERBOSE") != NULL;
  snprintf(c->target, sizeof(c->target), "ipv4:127.0.0.1:%u",
           h2s_server_port(srv));
  ASSERT_OK(grit_runtime_create(&c->rt));
  ASSERT_OK(grit_channel_args_create(&c->args));
  ASSERT_OK(grit_channel_args_set_int(
      c->args, GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS, 10));
  ASSERT_OK(grit_channel_args_set_int(c->args,
                                      GRIT_ARG_MAX_RECONNECT_BACKOFF_MS, 50));
  if (config)
    ASSERT_OK(
        grit_channel_args_set_string(c->args, GRIT_ARG_SERVICE_CONFIG, config));
  if (oom_compression)
    ASSERT_OK(grit_channel_args_set_string(
        c->args, GRIT_ARG_DEFAULT_COMPRESSION, oom_compression));
  if (oom_creds) {
    ASSERT_OK(grit_channel_args_set_call_credentials(c->args, oom_creds));
    ASSERT_OK(grit_channel_args_set_int(
        c->args, GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS, 1));
  }
  if (oom_ic)
    ASSERT_OK(grit_channel_args_add_interceptor(c->args, oom_ic));
  if (warm) {
    grit_error_detail d = {0};
    ASSERT_OK(grit_channel_create(c->rt, c->target, c->args, &d, &c->warm));
    waiter w;
    ASSERT_OK(unary(c->warm, true, 5000, 10000, &w));
    ASSERT_EQ(w.code, GRIT_STATUS_OK);
    waiter_free(&w);
  }
  sweep(name, fn_call, c);
  fprintf(stderr, "  %-22s outcomes:", "");
  for (int i = 0; i < GRIT_STATUS_COUNT; i++)
    if (c->codes[i])
      fprintf(stderr, " %s=%d", grit_status_code_name((grit_status_code)i),
              c->codes[i]);
  fprintf(stderr, "; hangs=%d next-call failures=%d\n", c->hangs,
          c->after_failed);
  ASSERT_EQ(c->hangs, 0);
  ASSERT_EQ(c->bad, 0);
  ASSERT_EQ(c->after_failed, 0);
  oom_connect_failures += c->connect_oom;
  grit_channel_destroy(c->warm);
  grit_channel_args_destroy(c->args);
  grit_runtime_destroy(c->rt);
  free(c);
  h2s_server_stop(srv);
}

static void test_unary_fresh(void) {
  /* The sweep reaches the allocations made when the connection is up. */
  int before = oom_connect_failures;
  call_sweep("unary_fresh_channel", false, NULL, false);
  ASSERT_CMP(oom_connect_failures, >, before);
}

static void test_unary_warm(void) {
  call_sweep("unary_warm_channel", true, NULL, false);
}

static void test_unary_retry_policy(void) {
  call_sweep("unary_retry_policy", true, retry_config, false);
}

static const char hedge_config[] =
    "{\"methodConfig\":[{\"name\":[{}],\"timeout\":\"5s\","
    "\"hedgingPolicy\":{\"maxAttempts\":3,\"hedgingDelay\":\"0s\","
    "\"nonFatalStatusCodes\":[\"UNAVAILABLE\"]}}],"
    "\"retryThrottling\":{\"maxTokens\":100,\"tokenRatio\":0.5}}";

/* Three hedges at once: the loser cancels and the winner's commit run
 * with every allocation failing in turn. */
static void test_unary_hedging_policy(void) {
  call_sweep("unary_hedging_policy", true, hedge_config, false);
}

static void test_stream_warm(void) {
  call_sweep("bidi_stream_warm", true, NULL, true);
}

static void test_stream_retry_policy(void) {
  call_sweep("bidi_stream_retry", true, retry_config, true);
}

/* Compression both ways (SPEC CP-01..CP-03): a gzip request (zlib's
 * deflate state allocated through grit's allocator) and a gzip response
 * inflated on the loop, every allocation failing in turn. */
static void test_unary_gzip(void) {
  static uint8_t req[2000], plain[3000];
  memset(req, 'q', sizeof(req));
  memset(plain, 'r', sizeof(plain));
  uLongf gzn = compressBound(sizeof(plain)) + 32;
  uint8_t *gz = malloc(gzn);
  z_stream z;
  memset(&z, 0, sizeof(z));
  ASSERT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = plain;
  z.avail_in = sizeof(plain);
  z.next_out = gz;
  z.avail_out = (uInt)gzn;
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  gzn = z.total_out;
  deflateEnd(&z);
  h2s_action act = {.body = H2S_BODY_BYTES,
                    .data = gz,
                    .len = gzn,
                    .compressed = true,
                    .headers = {{"grpc-encoding", "gzip"}}};
  oom_req = req;
  oom_req_len = sizeof(req);
  oom_default_action = &act;
  oom_compression = "gzip";
  oom_want_len = sizeof(plain);
  call_sweep("unary_gzip_both_ways", true, NULL, false);
  oom_req = "hello";
  oom_req_len = 5;
  oom_default_action = NULL;
  oom_compression = NULL;
  oom_want_len = 0;
  free(gz);
}

static grit_status_code oom_ic_start(void *ud,
                                     const grit_interceptor_call_info *info,
                                     grit_metadata *md, void **cd,
                                     const char **message) {
  (void)ud, (void)info, (void)cd;
  if (grit_metadata_add(md, "x-ic", "1", 1) != GRIT_OK) {
    *message = "interceptor: out of memory";
    return GRIT_STATUS_RESOURCE_EXHAUSTED;
  }
  return GRIT_STATUS_OK;
}

/* Call credentials (a bearer token and a plugin, composed) and an
 * interceptor that adds a header, every allocation failing in turn (SPEC
 * CR-01, IC-01). */
static void test_unary_creds_interceptor(void) {
  static const grit_interceptor_ops ops = {
      .version = GRIT_INTERCEPTOR_OPS_VERSION, .on_start = oom_ic_start};
  grit_call_credentials *bearer, *file;
  ASSERT_OK(grit_call_credentials_create_bearer("t0k", &bearer));
  char path[] = "/tmp/grit-oom-token-XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  ASSERT_EQ(write(fd, "file-token\n", 11), 11);
  close(fd);
  ASSERT_OK(grit_call_credentials_create_token_file(path, &file));
  ASSERT_OK(grit_call_credentials_create_composite(bearer, file, &oom_creds));
  ASSERT_OK(grit_interceptor_create(&ops, NULL, &oom_ic));
  call_sweep("unary_creds_interceptor", true, NULL, false);
  grit_interceptor_unref(oom_ic);
  grit_call_credentials_unref(oom_creds);
  grit_call_credentials_unref(bearer);
  grit_call_credentials_unref(file);
  oom_ic = NULL;
  oom_creds = NULL;
  unlink(path);
}

static const test_case tests[] = {
    {"args", test_args},
    {"operations", test_operations},
    {"metadata", test_metadata},
    {"runtime", test_runtime},
    {"service_config_check", test_service_config_check},
    {"channel_create", test_channel_create},
    {"xds_create", test_xds_create},
    {"unary_creds_interceptor", test_unary_creds_interceptor},
    {"channel_create_tls", test_channel_create_tls},
    {"unary_fresh", test_unary_fresh},
    {"unary_warm", test_unary_warm},
    {"unary_retry_policy", test_unary_retry_policy},
    {"unary_hedging_policy", test_unary_hedging_policy},
    {"stream_warm", test_stream_warm},
    {"stream_retry_policy", test_stream_retry_policy},
    {"unary_gzip", test_unary_gzip},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  grit_set_allocator(&oom_alloc);
  int rc = test_main(tests, argc, argv);
  remove_certs();
  grit_set_allocator(NULL);
  return rc;
}
