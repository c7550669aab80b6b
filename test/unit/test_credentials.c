/* Unit tests of credentials/ (SPEC CR-01, CR-02, AP-05): the built-in
 * credentials, composition order, asynchronous answers from another
 * thread, answers after the owner let go, A54 code mapping, the service
 * URL, token-file rotation, and an OOM sweep of every allocation. */
#include "credentials/credentials.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test/harness.h"

/* ---- an owner that resumes synchronously on "its" thread ---- */

typedef struct owner {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ready; /* times |ready| ran */
} owner;

static void owner_ready(grit_creds_fetch *f, void *ud) {
  (void)f;
  owner *o = ud;
  pthread_mutex_lock(&o->mu);
  o->ready++;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
}

static void owner_init(owner *o) {
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->cv, NULL);
  o->ready = 0;
}

static void owner_free(owner *o) {
  pthread_mutex_destroy(&o->mu);
  pthread_cond_destroy(&o->cv);
}

/* Wait (bounded) until |ready| has run |n| times. */
static bool owner_wait(owner *o, int n) {
  uint64_t end = test_now_ms() + 5000;
  pthread_mutex_lock(&o->mu);
  while (o->ready < n && test_now_ms() < end) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10 * 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&o->cv, &o->mu, &ts);
  }
  bool ok = o->ready >= n;
  pthread_mutex_unlock(&o->mu);
  return ok;
}

static const grit_creds_ctx ctx1 = {
    .service_url = "https://api.test/pkg.Svc",
    .method_name = "M",
    .authority = "api.test",
    .deadline_left_ms = 1000,
    .attempt = 1,
};

/* Run a fetch to the end, answering synchronously or from other threads. */
static grit_status_code run_fetch(grit_call_credentials *c, grit_metadata **md,
                                  char *msg, size_t msg_size) {
  owner o;
  owner_init(&o);
  grit_creds_fetch *f;
  grit_err rv = grit_creds_fetch_start(c, &ctx1, owner_ready, &o, &f);
  if (rv != GRIT_OK) {
    owner_free(&o);
    return (grit_status_code)-1;
  }
  int n = 1;
  for (;;) {
    if (!owner_wait(&o, n)) {
      grit_creds_fetch_release(f);
      owner_free(&o);
      return (grit_status_code)-2;
    }
    n++;
    if (grit_creds_fetch_resume(f))
      break;
  }
  const grit_metadata *got;
  const char *m;
  grit_status_code code = grit_creds_fetch_result(f, &got, &m);
  if (md)
    grit_metadata_copy(got, md);
  if (msg)
    grit_str_copy(msg, msg_size, m);
  grit_creds_fetch_release(f);
  owner_free(&o);
  return code;
}

static const char *md_value(const grit_metadata *md, size_t i,
                            const char **key) {
  const uint8_t *v;
  size_t len;
  if (grit_metadata_get(md, i, key, &v, &len) != GRIT_OK)
    return NULL;
  return (const char *)v;
}

static void test_bearer(void) {
  grit_call_credentials *c;
  ASSERT_OK(grit_call_credentials_create_bearer("tok-123", &c));
  grit_metadata *md = NULL;
  ASSERT_EQ(run_fetch(c, &md, NULL, 0), GRIT_STATUS_OK);
  ASSERT_EQ(grit_metadata_count(md), 1);
  const char *k;
  ASSERT_STR_EQ(md_value(md, 0, &k), "Bearer tok-123");
  ASSERT_STR_EQ(k, "authorization");
  grit_metadata_destroy(md);
  grit_call_credentials_unref(c);
}

static void test_bearer_rejects(void) {
  grit_call_credentials *c = (void *)1;
  ASSERT_EQ(grit_call_credentials_create_bearer("a\r\nx: y", &c),
            GRIT_ERR_INVALID_ARG);
  ASSERT_NULL(c);
  ASSERT_EQ(grit_call_credentials_create_bearer("", &c), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(grit_call_credentials_create_bearer(" padded", &c),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(grit_call_credentials_create_bearer(NULL, &c),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(grit_call_credentials_create_bearer("x", NULL),
            GRIT_ERR_INVALID_ARG);
}

/* ---- plugins ---- */

typedef struct plug {
  const char *key, *value;
  grit_status_code code;
  const char *message;
  int async_ms; /* >= 0: answer from a new thread after this long */
  atomic_int asked, destroyed;
  char seen_url[128], seen_method[32], seen_authority[64];
  unsigned seen_attempt;
} plug;

typedef struct answer_job {
  plug *p;
  grit_credentials_request *req;
} answer_job;

static void plug_answer(plug *p, grit_credentials_request *req) {
  if (p->key)
    grit_credentials_request_add(req, p->key, p->value, strlen(p->value));
  grit_credentials_request_done(req, p->code, p->message);
}

static void *answer_thread(void *arg) {
  answer_job *j = arg;
  usleep((useconds_t)j->p->async_ms * 1000);
  plug_answer(j->p, j->req);
  free(j);
  return NULL;
}

static void plug_get(void *ud, const grit_credentials_context *ctx,
                     grit_credentials_request *req) {
  plug *p = ud;
  atomic_fetch_add(&p->asked, 1);
  grit_str_copy(p->seen_url, sizeof(p->seen_url), ctx->service_url);
  grit_str_copy(p->seen_method, sizeof(p->seen_method), ctx->method_name);
  grit_str_copy(p->seen_authority, sizeof(p->seen_authority), ctx->authority);
  p->seen_attempt = ctx->attempt;
  if (p->async_ms < 0) {
    plug_answer(p, req);
    return;
  }
  answer_job *j = malloc(sizeof(*j));
  j->p = p;
  j->req = req;
  pthread_t t;
  pthread_create(&t, NULL, answer_thread, j);
  pthread_detach(t);
}

static void plug_destroy(void *ud) {
  atomic_fetch_add(&((plug *)ud)->destroyed, 1);
}

static grit_call_credentials *plug_creds(plug *p, const char *type) {
  grit_credentials_plugin def = {.version = GRIT_CREDENTIALS_PLUGIN_VERSION,
                                 .type = type,
                                 .get_metadata = plug_get,
                                 .destroy = plug_destroy};
  grit_call_credentials *c = NULL;
  grit_call_credentials_create_plugin(&def, p, &c);
  return c;
}

static void test_plugin_sync_context(void) {
  plug p = {.key = "x-token", .value = "v1", .async_ms = -1};
  grit_call_credentials *c = plug_creds(&p, "mine");
  ASSERT_NOT_NULL(c);
  grit_metadata *md = NULL;
  ASSERT_EQ(run_fetch(c, &md, NULL, 0), GRIT_STATUS_OK);
  ASSERT_STR_EQ(p.seen_url, "https://api.test/pkg.Svc");
  ASSERT_STR_EQ(p.seen_method, "M");
  ASSERT_STR_EQ(p.seen_authority, "api.test");
  ASSERT_EQ(p.seen_attempt, 1);
  const char *k;
  ASSERT_STR_EQ(md_value(md, 0, &k), "v1");
  grit_metadata_destroy(md);
  ASSERT_EQ(atomic_load(&p.destroyed), 0);
  grit_call_credentials_unref(c);
  ASSERT_EQ(atomic_load(&p.destroyed), 1);
}

static void test_plugin_async(void) {
  plug p = {.key = "authorization", .value = "Bearer late", .async_ms = 50};
  grit_call_credentials *c = plug_creds(&p, "slow");
  grit_metadata *md = NULL;
  uint64_t t0 = test_now_ms();
  ASSERT_EQ(run_fetch(c, &md, NULL, 0), GRIT_STATUS_OK);
  ASSERT_CMP(test_now_ms() - t0, >=, 45);
  const char *k;
  ASSERT_STR_EQ(md_value(md, 0, &k), "Bearer late");
  grit_metadata_destroy(md);
  grit_call_credentials_unref(c);
}

/* SPEC CR-02: the plugin's code, mapped per gRFC A54, with its type named. */
static void test_plugin_failure_mapping(void) {
  static const struct {
    grit_status_code in, out;
  } cases[] = {
      {GRIT_STATUS_INVALID_ARGUMENT, GRIT_STATUS_INTERNAL},
      {GRIT_STATUS_NOT_FOUND, GRIT_STATUS_INTERNAL},
      {GRIT_STATUS_ALREADY_EXISTS, GRIT_STATUS_INTERNAL},
      {GRIT_STATUS_FAILED_PRECONDITION, GRIT_STATUS_INTERNAL},
      {GRIT_STATUS_ABORTED, GRIT_STATUS_INTERNAL},
      {GRIT_STATUS_OUT_OF_RANGE, GRIT_STATUS_INTERNAL},
      {GRIT_STATUS_DATA_LOSS, GRIT_STATUS_INTERNAL},
      {GRIT_STATUS_UNAVAILABLE, GRIT_STATUS_UNAVAILABLE},
      {GRIT_STATUS_UNAUTHENTICATED, GRIT_STATUS_UNAUTHENTICATED},
      {GRIT_STATUS_PERMISSION_DENIED, GRIT_STATUS_PERMISSION_DENIED},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    plug p = {.code = cases[i].in, .message = "no token", .async_ms = -1};
    grit_call_credentials *c = plug_creds(&p, "idp");
    char msg[256];
    ASSERT_EQ(run_fetch(c, NULL, msg, sizeof(msg)), cases[i].out);
    ASSERT_STR_EQ(msg, "call credentials (idp): no token");
    grit_call_credentials_unref(c);
  }
  ASSERT_EQ(grit_creds_map_code(GRIT_STATUS_OK), GRIT_STATUS_OK);
  ASSERT_EQ(grit_creds_map_code((grit_status_code)99), GRIT_STATUS_UNKNOWN);
}

/* Metadata from a plugin is checked like the application's: a reserved or
 * malformed key fails the attempt INTERNAL, naming the key only. */
static void test_plugin_invalid_metadata(void) {
  static const char *bad[] = {"grpc-timeout", ":path", "Upper", "te", "a b"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    plug p = {.key = bad[i], .value = "secret-value", .async_ms = -1};
    grit_call_credentials *c = plug_creds(&p, "bad");
    char msg[256];
    ASSERT_EQ(run_fetch(c, NULL, msg, sizeof(msg)), GRIT_STATUS_INTERNAL);
    ASSERT(strstr(msg, "invalid metadata key") != NULL);
    ASSERT(strstr(msg, "secret-value") == NULL);
    grit_call_credentials_unref(c);
  }
  plug p = {.key = "x-v", .value = "line\nbreak", .async_ms = -1};
  grit_call_credentials *c = plug_creds(&p, "bad");
  ASSERT_EQ(run_fetch(c, NULL, NULL, 0), GRIT_STATUS_INTERNAL);
  grit_call_credentials_unref(c);
}

/* CR-02: channel and call credentials compose, in order; the first failure
 * ends the fetch and later credentials are not asked. */
static void test_composite(void) {
  plug a = {.key = "x-a", .value = "1", .async_ms = 10};
  plug b = {.key = "x-b", .value = "2", .async_ms = -1};
  grit_call_credentials *ca = plug_creds(&a, "a"), *cb = plug_creds(&b, "b");
  grit_call_credentials *bearer, *ab, *abc;
  ASSERT_OK(grit_call_credentials_create_bearer("t", &bearer));
  ASSERT_OK(grit_call_credentials_create_composite(ca, cb, &ab));
  ASSERT_OK(grit_call_credentials_create_composite(ab, bearer, &abc));
  grit_call_credentials_unref(ca);
  grit_call_credentials_unref(cb);
  grit_call_credentials_unref(bearer);
  grit_call_credentials_unref(ab);
  grit_metadata *md = NULL;
  ASSERT_EQ(run_fetch(abc, &md, NULL, 0), GRIT_STATUS_OK);
  ASSERT_EQ(grit_metadata_count(md), 3);
  const char *k;
  ASSERT_STR_EQ(md_value(md, 0, &k), "1");
  ASSERT_STR_EQ(k, "x-a");
  ASSERT_STR_EQ(md_value(md, 1, &k), "2");
  ASSERT_STR_EQ(md_value(md, 2, &k), "Bearer t");
  grit_metadata_destroy(md);

  a.code = GRIT_STATUS_UNAUTHENTICATED;
  a.message = "expired";
  int asked_b = atomic_load(&b.asked);
  char msg[256];
  ASSERT_EQ(run_fetch(abc, NULL, msg, sizeof(msg)),
            GRIT_STATUS_UNAUTHENTICATED);
  ASSERT_STR_EQ(msg, "call credentials (a): expired");
  ASSERT_EQ(atomic_load(&b.asked), asked_b);
  ASSERT_EQ(atomic_load(&a.destroyed), 0);
  grit_call_credentials_unref(abc);
  ASSERT_EQ(atomic_load(&a.destroyed), 1);
  ASSERT_EQ(atomic_load(&b.destroyed), 1);
}

static void test_composite_limit(void) {
  grit_call_credentials *t, *acc;
  ASSERT_OK(grit_call_credentials_create_bearer("t", &t));
  grit_call_credentials_ref(t);
  acc = t;
  int joined = 1;
  for (;;) {
    grit_call_credentials *next = NULL;
    grit_err rv = grit_call_credentials_create_composite(acc, t, &next);
    if (rv != GRIT_OK) {
      ASSERT_EQ(rv, GRIT_ERR_INVALID_ARG);
      ASSERT_NULL(next);
      break;
    }
    grit_call_credentials_unref(acc);
    acc = next;
    joined++;
    ASSERT_CMP(joined, <=, 16);
  }
  ASSERT_EQ(joined, 16);
  grit_call_credentials_unref(acc);
  grit_call_credentials_unref(t);
}

/* The owner lets go while the plugin is still thinking (a cancelled call,
 * an expired deadline): the late answer finds valid memory, |ready| is not
 * called, and the credentials are released after it. Run under ASan and
 * valgrind this is the use-after-free check. */
static void test_release_before_answer(void) {
  plug p = {.key = "x-late", .value = "v", .async_ms = 30};
  grit_call_credentials *c = plug_creds(&p, "late");
  owner o;
  owner_init(&o);
  grit_creds_fetch *f;
  ASSERT_OK(grit_creds_fetch_start(c, &ctx1, owner_ready, &o, &f));
  grit_call_credentials_unref(c); /* the fetch keeps its own reference */
  ASSERT_EQ(grit_creds_fetch_release(f), false);
  uint64_t end = test_now_ms() + 5000;
  while (atomic_load(&p.destroyed) == 0 && test_now_ms() < end)
    usleep(1000);
  ASSERT_EQ(atomic_load(&p.destroyed), 1);
  ASSERT_EQ(o.ready, 0);
  owner_free(&o);
}

/* Answered but not resumed when the owner lets go: release says so. */
static void test_release_after_signal(void) {
  plug p = {.key = "x-now", .value = "v", .async_ms = -1};
  grit_call_credentials *c = plug_creds(&p, "now");
  owner o;
  owner_init(&o);
  grit_creds_fetch *f;
  ASSERT_OK(grit_creds_fetch_start(c, &ctx1, owner_ready, &o, &f));
  ASSERT_EQ(o.ready, 1);
  ASSERT_EQ(grit_creds_fetch_release(f), true);
  grit_call_credentials_unref(c);
  ASSERT_EQ(atomic_load(&p.destroyed), 1);
  owner_free(&o);
}

static void test_service_url(void) {
  char url[128], name[32];
  ASSERT(grit_creds_service_url("api.test:443", "/pkg.Svc/Get", url,
                                sizeof(url), name, sizeof(name)));
  ASSERT_STR_EQ(url, "https://api.test/pkg.Svc");
  ASSERT_STR_EQ(name, "Get");
  ASSERT(grit_creds_service_url("localhost:50051", "/a.B/C", url, sizeof(url),
                                name, sizeof(name)));
  ASSERT_STR_EQ(url, "https://localhost:50051/a.B");
  ASSERT(!grit_creds_service_url("h", "nope", url, sizeof(url), name,
                                 sizeof(name)));
  ASSERT(!grit_creds_service_url("h", "/onlyservice", url, sizeof(url), name,
                                 sizeof(name)));
  ASSERT(!grit_creds_service_url("h", "/a/b/c", url, sizeof(url), name,
                                 sizeof(name)));
  ASSERT(!grit_creds_service_url("h", "/a.B/C", url, 10, name, sizeof(name)));
}

static void test_token_parse(void) {
  size_t s, l;
  const char *why;
  const char *in = "  \n tok.en-1 \r\n";
  ASSERT(grit_creds_token_parse((const uint8_t *)in, strlen(in), &s, &l, &why));
  ASSERT_EQ(l, 8);
  ASSERT_MEM_EQ(in + s, "tok.en-1", 8);
  ASSERT(!grit_creds_token_parse((const uint8_t *)" \n\t", 3, &s, &l, &why));
  ASSERT_STR_EQ(why, "empty token");
  ASSERT(!grit_creds_token_parse((const uint8_t *)"a\nb", 3, &s, &l, &why));
  ASSERT(!grit_creds_token_parse((const uint8_t *)"a\0b", 3, &s, &l, &why));
  ASSERT(
      !grit_creds_token_parse((const uint8_t *)"caf\xc3\xa9", 5, &s, &l, &why));
}

static void write_file(const char *path, const char *text) {
  char tmp[300];
  snprintf(tmp, sizeof(tmp), "%.250s.tmp", path);
  FILE *f = fopen(tmp, "w");
  fputs(text, f);
  fclose(f);
  rename(tmp, path); /* as a kubelet rotates a projected token */
}

/* A rotated token reaches the next fetch; a missing or bad file fails it
 * UNAVAILABLE with the path and never the content. */
static void test_token_file(void) {
  char dir[] = "/tmp/grit-creds-XXXXXX";
  ASSERT_NOT_NULL(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof(path), "%s/token", dir);
  grit_call_credentials *c;
  ASSERT_OK(grit_call_credentials_create_token_file(path, &c));
  char msg[256];
  ASSERT_EQ(run_fetch(c, NULL, msg, sizeof(msg)), GRIT_STATUS_UNAVAILABLE);
  ASSERT(strstr(msg, path) != NULL);
  ASSERT(strstr(msg, "No such file") != NULL);

  write_file(path, "first-token\n");
  grit_metadata *md = NULL;
  ASSERT_EQ(run_fetch(c, &md, NULL, 0), GRIT_STATUS_OK);
  const char *k;
  ASSERT_STR_EQ(md_value(md, 0, &k), "Bearer first-token");
  grit_metadata_destroy(md);

  write_file(path, "second-token");
  ASSERT_EQ(run_fetch(c, &md, NULL, 0), GRIT_STATUS_OK);
  ASSERT_STR_EQ(md_value(md, 0, &k), "Bearer second-token");
  grit_metadata_destroy(md);

  write_file(path, "bad\x01secret");
  ASSERT_EQ(run_fetch(c, NULL, msg, sizeof(msg)), GRIT_STATUS_UNAVAILABLE);
  ASSERT(strstr(msg, "printable") != NULL);
  ASSERT(strstr(msg, "secret") == NULL);

  write_file(path, "third");
  ASSERT_EQ(run_fetch(c, &md, NULL, 0), GRIT_STATUS_OK);
  ASSERT_STR_EQ(md_value(md, 0, &k), "Bearer third");
  grit_metadata_destroy(md);
  grit_call_credentials_unref(c);
  unlink(path);
  rmdir(dir);
  ASSERT_EQ(grit_call_credentials_create_token_file("", &c),
            GRIT_ERR_INVALID_ARG);
}

static void test_plugin_args(void) {
  grit_credentials_plugin def = {.version = GRIT_CREDENTIALS_PLUGIN_VERSION};
  grit_call_credentials *c = (void *)1;
  ASSERT_EQ(grit_call_credentials_create_plugin(&def, NULL, &c),
            GRIT_ERR_INVALID_ARG); /* no get_metadata */
  ASSERT_NULL(c);
  def.get_metadata = plug_get;
  def.version = 7;
  ASSERT_EQ(grit_call_credentials_create_plugin(&def, NULL, &c),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(grit_call_credentials_create_composite(NULL, NULL, &c),
            GRIT_ERR_INVALID_ARG);
  grit_call_credentials_unref(NULL);
  grit_call_credentials_ref(NULL);
  grit_credentials_request_done(NULL, GRIT_STATUS_OK, NULL);
  ASSERT_EQ(grit_credentials_request_add(NULL, "a", "b", 1),
            GRIT_ERR_INVALID_ARG);
}

/* ---- OOM sweep: every allocation of creating and running a composite of
 * all three kinds fails once; the result is NOMEM or a RESOURCE_EXHAUSTED
 * answer, never a crash or a leak (ASan, valgrind). ---- */

static atomic_long oom_count, oom_fail_at;
static atomic_bool oom_armed;

static bool oom_fail_now(void) {
  if (!atomic_load(&oom_armed))
    return false;
  return atomic_fetch_add(&oom_count, 1) + 1 == atomic_load(&oom_fail_at);
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

/* 0: OK; 1: a clean NOMEM or RESOURCE_EXHAUSTED; -1: wrong. */
static int oom_run(const char *path) {
  plug p = {.key = "x-p", .value = "v", .async_ms = -1};
  grit_call_credentials *cp = NULL, *cb = NULL, *cf = NULL, *c1 = NULL,
                        *c2 = NULL;
  int result = 1;
  grit_credentials_plugin def = {.version = GRIT_CREDENTIALS_PLUGIN_VERSION,
                                 .type = "p",
                                 .get_metadata = plug_get};
  if (grit_call_credentials_create_plugin(&def, &p, &cp) != GRIT_OK ||
      grit_call_credentials_create_bearer("b", &cb) != GRIT_OK ||
      grit_call_credentials_create_token_file(path, &cf) != GRIT_OK ||
      grit_call_credentials_create_composite(cp, cb, &c1) != GRIT_OK ||
      grit_call_credentials_create_composite(c1, cf, &c2) != GRIT_OK)
    goto done;
  grit_metadata *md = NULL;
  grit_status_code code = run_fetch(c2, &md, NULL, 0);
  if (code == GRIT_STATUS_OK && !md)
    result = 1; /* the test's own copy of the answer ran out */
  else if (code == GRIT_STATUS_OK)
    result = grit_metadata_count(md) == 3 ? 0 : -1;
  else if (code != GRIT_STATUS_RESOURCE_EXHAUSTED &&
           code != (grit_status_code)-1)
    result = -1;
  grit_metadata_destroy(md);
done:
  grit_call_credentials_unref(c2);
  grit_call_credentials_unref(c1);
  grit_call_credentials_unref(cf);
  grit_call_credentials_unref(cb);
  grit_call_credentials_unref(cp);
  return result;
}

static void test_oom_sweep(void) {
  char dir[] = "/tmp/grit-creds-XXXXXX";
  ASSERT_NOT_NULL(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof(path), "%s/token", dir);
  write_file(path, "tok");
  grit_set_allocator(&oom_alloc);
  atomic_store(&oom_fail_at, 0);
  atomic_store(&oom_count, 0);
  atomic_store(&oom_armed, true);
  int clean = oom_run(path);
  atomic_store(&oom_armed, false);
  long total = atomic_load(&oom_count);
  long failed_cleanly = 0;
  for (long i = 1; i <= total && clean == 0; i++) {
    atomic_store(&oom_count, 0);
    atomic_store(&oom_fail_at, i);
    atomic_store(&oom_armed, true);
    int r = oom_run(path);
    atomic_store(&oom_armed, false);
    if (r < 0)
      TEST_FAIL_AT(__FILE__, __LINE__, "allocation %ld of %ld: wrong result", i,
                   total);
    failed_cleanly += r;
  }
  grit_set_allocator(NULL);
  unlink(path);
  rmdir(dir);
  ASSERT_EQ(clean, 0);
  ASSERT_CMP(total, >, 5);
  ASSERT_EQ(failed_cleanly, total);
}

static const test_case tests[] = {
    {"bearer", test_bearer},
    {"bearer_rejects", test_bearer_rejects},
    {"plugin_sync_context", test_plugin_sync_context},
    {"plugin_async", test_plugin_async},
    {"plugin_failure_mapping", test_plugin_failure_mapping},
    {"plugin_invalid_metadata", test_plugin_invalid_metadata},
    {"composite", test_composite},
    {"composite_limit", test_composite_limit},
    {"release_before_answer", test_release_before_answer},
    {"release_after_signal", test_release_after_signal},
    {"service_url", test_service_url},
    {"token_parse", test_token_parse},
    {"token_file", test_token_file},
    {"plugin_args", test_plugin_args},
    {"oom_sweep", test_oom_sweep},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
