/* Generated stubs are safe by the same rules as grit's own functions (issue
 * 23 point 5): every NULL pointer a stub needs gives GRIT_ERR_INVALID_ARG
 * (and a finish fills its status), never a crash; and the stubs allocate
 * through grit's allocator, responses included, so a counting allocator
 * installed with grit_set_allocator sees them and a response frees through
 * GRIT_PROTOBUF_C_ALLOCATOR. Stubs from interop/proto/grpc/testing
 * (examples/), against an in-process echo server. Run under ASan and
 * valgrind by the suites. */
#include "bh.h"
#include "test.grit.h"

#define CALL_MS 10000
#define P(name) grpc__testing__test_service__##name

/* A counting allocator that marks its blocks, so a pointer can be told to
 * be its own: 16 bytes of header before each block. */
#define MAGIC 0x6772697461626364ull
static uint64_t n_alloc, n_free;

static void *mark(void *raw, size_t size) {
  if (!raw)
    return NULL;
  uint64_t *h = raw;
  h[0] = MAGIC;
  h[1] = size;
  __atomic_add_fetch(&n_alloc, 1, __ATOMIC_RELAXED);
  return h + 2;
}

static bool ours(const void *p) {
  return p && ((const uint64_t *)p)[-2] == MAGIC;
}

static void *c_malloc(size_t size, void *ud) {
  return mark(malloc(size + 16), size);
}

static void *c_calloc(size_t n, size_t size, void *ud) {
  if (size && n > (SIZE_MAX - 16) / size)
    return NULL;
  return mark(calloc(1, n * size + 16), n * size);
}

static void c_free(void *p, void *ud) {
  if (!p)
    return;
  uint64_t *h = (uint64_t *)p - 2;
  if (h[0] != MAGIC)
    abort(); /* not ours: a mismatched free */
  h[0] = 0;
  __atomic_add_fetch(&n_free, 1, __ATOMIC_RELAXED);
  free(h);
}

static void *c_realloc(void *p, size_t size, void *ud) {
  if (!p)
    return c_malloc(size, ud);
  uint64_t *h = (uint64_t *)p - 2;
  if (h[0] != MAGIC)
    abort();
  uint64_t *n = realloc(h, size + 16);
  if (!n)
    return NULL;
  n[1] = size;
  return n + 2;
}

static const grit_allocator counting = {.malloc = c_malloc,
                                        .free = c_free,
                                        .calloc = c_calloc,
                                        .realloc = c_realloc};

static void never(const grit_status *st, Grpc__Testing__Empty *resp, void *ud) {
  (void)st;
  (void)resp;
  (void)ud;
}

static void test_null_arguments(void) {
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  ASSERT_NOT_NULL(ch);
  grit_status st;
  Grpc__Testing__Empty *e = NULL;

  /* Unary: a NULL channel or callback. */
  ASSERT_EQ(P(empty_call__call)(NULL, NULL, NULL, &e, &st),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(st.code, GRIT_STATUS_INVALID_ARGUMENT);
  grit_status_free(&st);
  ASSERT_NULL(e);
  ASSERT_EQ(P(empty_call__call_async)(ch, NULL, NULL, NULL, NULL),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(P(empty_call__call_async)(NULL, NULL, NULL, never, NULL),
            GRIT_ERR_INVALID_ARG);

  /* Server streaming. */
  ASSERT_EQ(P(streaming_output_call__start)(ch, NULL, NULL, NULL),
            GRIT_ERR_INVALID_ARG);
  P(streaming_output_call__stream) so;
  ASSERT_EQ(P(streaming_output_call__start)(NULL, NULL, NULL, &so),
            GRIT_ERR_INVALID_ARG);
  ASSERT_NULL(so.call);
  ASSERT_OK(P(streaming_output_call__start)(ch, NULL, NULL, &so));
  ASSERT_EQ(P(streaming_output_call__recv)(&so, NULL), GRIT_ERR_INVALID_ARG);
  Grpc__Testing__StreamingOutputCallResponse *out = NULL;
  ASSERT_EQ(P(streaming_output_call__recv)(NULL, &out), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(P(streaming_output_call__finish)(NULL, &st), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(st.code, GRIT_STATUS_INVALID_ARGUMENT);
  grit_status_free(&st);
  ASSERT_EQ(P(streaming_output_call__finish)(&so, NULL), GRIT_ERR_INVALID_ARG);
  P(streaming_output_call__destroy)(&so);
  P(streaming_output_call__destroy)(NULL);

  /* Client streaming. */
  ASSERT_EQ(P(streaming_input_call__start)(ch, NULL, NULL),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(P(streaming_input_call__send)(NULL, NULL), GRIT_ERR_INVALID_ARG);
  P(streaming_input_call__stream) si;
  ASSERT_OK(P(streaming_input_call__start)(ch, NULL, &si));
  Grpc__Testing__StreamingInputCallResponse *in = (void *)&si;
  ASSERT_EQ(P(streaming_input_call__finish)(NULL, &in, &st),
            GRIT_ERR_INVALID_ARG);
  ASSERT_NULL(in);
  ASSERT_EQ(st.code, GRIT_STATUS_INVALID_ARGUMENT);
  grit_status_free(&st);
  ASSERT_EQ(P(streaming_input_call__finish)(&si, NULL, &st),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(st.code, GRIT_STATUS_INVALID_ARGUMENT);
  grit_status_free(&st);
  ASSERT_EQ(P(streaming_input_call__finish)(&si, &in, NULL),
            GRIT_ERR_INVALID_ARG);
  P(streaming_input_call__destroy)(&si);
  P(streaming_input_call__destroy)(NULL);

  /* Bidi. */
  ASSERT_EQ(P(full_duplex_call__start)(ch, NULL, NULL), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(P(full_duplex_call__send)(NULL, NULL), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(P(full_duplex_call__close_send)(NULL), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(P(full_duplex_call__recv)(NULL, &out), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(P(full_duplex_call__finish)(NULL, &st), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(st.code, GRIT_STATUS_INVALID_ARGUMENT);
  grit_status_free(&st);
  P(full_duplex_call__stream) fd;
  ASSERT_OK(P(full_duplex_call__start)(ch, NULL, &fd));
  ASSERT_EQ(P(full_duplex_call__recv)(&fd, NULL), GRIT_ERR_INVALID_ARG);
  ASSERT_OK(P(full_duplex_call__close_send)(&fd));
  ASSERT_EQ(P(full_duplex_call__recv)(&fd, &out), GRIT_END_OF_STREAM);
  ASSERT_OK(P(full_duplex_call__finish)(&fd, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  P(full_duplex_call__destroy)(&fd);
  P(full_duplex_call__destroy)(NULL);

  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* The response of a unary stub comes from grit's allocator. */
static void test_allocator(void) {
  h2s_server *srv = bh_server(NULL);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = bh_channel(&srv, 1, NULL);
  ASSERT_NOT_NULL(ch);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = CALL_MS};
  Grpc__Testing__Empty req = GRPC__TESTING__EMPTY__INIT, *resp = NULL;
  grit_status st;
  uint64_t before = __atomic_load_n(&n_alloc, __ATOMIC_RELAXED);
  ASSERT_OK(P(empty_call__call)(ch, &req, &o, &resp, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  ASSERT_NOT_NULL(resp);
  ASSERT(ours(resp));
  ASSERT_CMP(__atomic_load_n(&n_alloc, __ATOMIC_RELAXED), >, before);
  uint64_t freed = __atomic_load_n(&n_free, __ATOMIC_RELAXED);
  grpc__testing__empty__free_unpacked(resp, GRIT_PROTOBUF_C_ALLOCATOR);
  ASSERT_CMP(__atomic_load_n(&n_free, __ATOMIC_RELAXED), >, freed);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static const test_case tests[] = {
    {"null_arguments", test_null_arguments},
    {"allocator", test_allocator},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  grit_set_allocator(&counting); /* before any grit object */
  int rc = test_main(tests, argc, argv);
  if (grit_default_runtime_shutdown() != GRIT_OK)
    rc = 1;
  if (n_alloc != n_free) {
    fprintf(stderr, "allocator: %llu allocations, %llu frees\n",
            (unsigned long long)n_alloc, (unsigned long long)n_free);
    rc = 1;
  }
  return rc;
}
