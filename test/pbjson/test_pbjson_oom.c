/* Out-of-memory sweep over pbjson's parsers and printers (issue 29; STYLE
 * 3.4): JSON -> wire and wire -> JSON of grit.test.Wkt (every well-known
 * type), the status-details decoders, describe and templates. Each runs
 * once clean, counting its allocations, then again failing the i-th for
 * every i: it must fail with a reason or give the clean result, and leave
 * no block allocated. pbjson allocates with libc's malloc, so this binary
 * wraps it (-Wl,--wrap). jansson's blocks are counted but never failed:
 * its lexer drops a byte when its buffer cannot grow (lex_save ignores
 * strbuffer_append_byte's error), a bug of jansson's, not pbjson's.
 * protobuf-c's own allocations (descriptor unpacking) are not counted. */
#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson/pbjson.h"
#include "test/harness.h"

extern const unsigned char kitchen_protoset[];
extern const size_t kitchen_protoset_len;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static bool armed;
static long n_allocs, fail_at, live;

/* Whether this allocation fails; counts it when armed. */
static bool fail_now(void) {
  if (!armed)
    return false;
  return ++n_allocs == fail_at;
}

static void *counted(void *p) {
  if (p && armed)
    live++;
  return p;
}

void *__wrap_malloc(size_t n) {
  return fail_now() ? NULL : counted(__real_malloc(n));
}

void *__wrap_calloc(size_t n, size_t m) {
  return fail_now() ? NULL : counted(__real_calloc(n, m));
}

void *__wrap_realloc(void *p, size_t n) {
  if (fail_now())
    return NULL;
  void *q = __real_realloc(p, n);
  if (q && !p && armed)
    live++;
  return q;
}

void __wrap_free(void *p) {
  if (p && armed)
    live--;
  __real_free(p);
}

char *__wrap_strdup(const char *s) {
  return fail_now() ? NULL : counted(__real_strdup(s));
}

char *__wrap_strndup(const char *s, size_t n) {
  return fail_now() ? NULL : counted(__real_strndup(s, n));
}

/* jansson's allocator: counted, never failed (see the top). */
static void *json_counted_malloc(size_t n) {
  return counted(__real_malloc(n));
}

static pbj_pool *pool;

/* One operation: its result as text (malloc'd by pbjson, or a copy), or
 * NULL with |err| set. */
typedef char *(*op_fn)(char *err, size_t errlen);

static const char WKT_JSON[] =
    "{\"any\":{\"@type\":\"type.googleapis.com/grit.test.Inner\",\"name\":"
    "\"a\\u0000b\",\"nums\":[1,2]},\"st\":{\"a\":[1.5,null,{\"b\":\"c\"}],"
    "\"t\":true},\"val\":\"v\",\"list\":[1,\"two\",null],\"mask\":"
    "\"fooBar.x,y\",\"empty\":{},\"when\":\"2024-01-02T03:04:05.5Z\","
    "\"took\":\"-1.5s\",\"wUint64\":18446744073709551615,\"anys\":[{"
    "\"@type\":\"type.googleapis.com/google.protobuf.Duration\",\"value\":"
    "\"3s\"},{\"@type\":\"x/unknown.T\",\"@value\":\"AQI=\"}],\"vmap\":{\"k\":"
    "[true]},\"customName\":\"r\",\"pickNull\":null,\"nuls\":[null],"
    "\"kitchen\":{\"counts\":{\"a\":\"1\"},\"byId\":{\"3\":{\"name\":\"x\"}}}}";

static char *hex_of(const uint8_t *p, size_t n) {
  char *s = malloc(2 * n + 1);
  for (size_t i = 0; s && i < n; i++)
    snprintf(s + 2 * i, 3, "%02x", p[i]);
  if (s)
    s[2 * n] = '\0';
  return s;
}

static char *op_from_json(char *err, size_t errlen) {
  uint8_t *wire;
  size_t n;
  if (!pbj_from_json(pool, "grit.test.Wkt", WKT_JSON, strlen(WKT_JSON), &wire,
                     &n, err, errlen))
    return NULL;
  char *s = hex_of(wire, n);
  free(wire);
  if (!s)
    snprintf(err, errlen, "out of memory");
  return s;
}

static uint8_t *wkt_wire, *status_wire;
static size_t wkt_wire_len, status_wire_len;

static char *op_to_json(char *err, size_t errlen) {
  return pbj_to_json_ex(pool, "grit.test.Wkt", wkt_wire, wkt_wire_len,
                        PBJ_EMIT_DEFAULTS | PBJ_ANY_RAW, NULL, 0, err, errlen);
}

static char *op_status_json(char *err, size_t errlen) {
  return pbj_status_json(status_wire, status_wire_len, err, errlen);
}

static char *op_status_text(char *err, size_t errlen) {
  return pbj_status_text(status_wire, status_wire_len, err, errlen);
}

static char *op_template(char *err, size_t errlen) {
  return pbj_template(pool, "grit.test.Echo.EchoWkt", err, errlen);
}

static char *op_describe(char *err, size_t errlen) {
  return pbj_describe(pool, ".grit.test.Wkt", err, errlen);
}

/* Run |op| clean, then with each of its allocations failing. */
static void sweep(const char *name, op_fn op) {
  char err[512] = "";
  armed = true;
  n_allocs = 0;
  fail_at = 0;
  live = 0;
  char *clean = op(err, sizeof(err));
  long total = n_allocs;
  if (!clean)
    fprintf(stderr, "  %s failed clean: %s\n", name, err);
  ASSERT_NOT_NULL(clean);
  free(clean);
  ASSERT_EQ(live, 0);
  armed = false;
  char *want = op(err, sizeof(err));
  ASSERT_NOT_NULL(want);
  long failed = 0;
  for (long i = 1; i <= total; i++) {
    err[0] = '\0';
    armed = true;
    n_allocs = 0;
    fail_at = i;
    live = 0;
    char *got = op(err, sizeof(err));
    if (got) {
      ASSERT_STR_EQ(got, want); /* an allocation that could fail softly */
      free(got);
    } else {
      failed++;
      if (!err[0])
        fprintf(stderr, "  %s: allocation %ld failed without a reason\n", name,
                i);
      ASSERT(err[0] != '\0');
    }
    armed = false;
    if (live != 0)
      fprintf(stderr, "  %s: allocation %ld failing left %ld blocks\n", name, i,
              live);
    ASSERT_EQ(live, 0);
  }
  fprintf(stderr, "  %-12s %ld allocations, %ld failing runs\n", name, total,
          failed);
  ASSERT(failed > 0);
  free(want);
}

static void test_from_json(void) {
  sweep("from_json", op_from_json);
}

static void test_to_json(void) {
  sweep("to_json", op_to_json);
}

static void test_status(void) {
  sweep("status_json", op_status_json);
  sweep("status_text", op_status_text);
}

static void test_describe(void) {
  sweep("template", op_template);
  sweep("describe", op_describe);
}

static const test_case tests[] = {
    {"from_json", test_from_json},
    {"to_json", test_to_json},
    {"status", test_status},
    {"describe", test_describe},
    {NULL, NULL},
};

/* A google.rpc.Status (code 3, "no") with a BadRequest, a RetryInfo and
 * a detail of an unknown type (python-protobuf serialized it). */
static const uint8_t STATUS[] = {
    0x08, 0x03, 0x12, 0x02, 0x6e, 0x6f, 0x1a, 0x3c, 0x0a, 0x29, 0x74, 0x79,
    0x70, 0x65, 0x2e, 0x67, 0x6f, 0x6f, 0x67, 0x6c, 0x65, 0x61, 0x70, 0x69,
    0x73, 0x2e, 0x63, 0x6f, 0x6d, 0x2f, 0x67, 0x6f, 0x6f, 0x67, 0x6c, 0x65,
    0x2e, 0x72, 0x70, 0x63, 0x2e, 0x42, 0x61, 0x64, 0x52, 0x65, 0x71, 0x75,
    0x65, 0x73, 0x74, 0x12, 0x0f, 0x0a, 0x0d, 0x0a, 0x01, 0x66, 0x12, 0x08,
    0x72, 0x65, 0x71, 0x75, 0x69, 0x72, 0x65, 0x64, 0x1a, 0x36, 0x0a, 0x28,
    0x74, 0x79, 0x70, 0x65, 0x2e, 0x67, 0x6f, 0x6f, 0x67, 0x6c, 0x65, 0x61,
    0x70, 0x69, 0x73, 0x2e, 0x63, 0x6f, 0x6d, 0x2f, 0x67, 0x6f, 0x6f, 0x67,
    0x6c, 0x65, 0x2e, 0x72, 0x70, 0x63, 0x2e, 0x52, 0x65, 0x74, 0x72, 0x79,
    0x49, 0x6e, 0x66, 0x6f, 0x12, 0x0a, 0x0a, 0x08, 0x08, 0x02, 0x10, 0x80,
    0xca, 0xb5, 0xee, 0x01, 0x1a, 0x11, 0x0a, 0x0b, 0x78, 0x2f, 0x75, 0x6e,
    0x6b, 0x6e, 0x6f, 0x77, 0x6e, 0x2e, 0x54, 0x12, 0x02, 0x08, 0x01,
};

int main(int argc, char **argv) {
  json_set_alloc_funcs(json_counted_malloc, __wrap_free);
  char err[512];
  pool = pbj_pool_create();
  if (!pool || !pbj_pool_add_set(pool, kitchen_protoset, kitchen_protoset_len,
                                 err, sizeof(err))) {
    fprintf(stderr, "kitchen pool: %s\n", pool ? err : "out of memory");
    return 1;
  }
  if (!pbj_from_json(pool, "grit.test.Wkt", WKT_JSON, strlen(WKT_JSON),
                     &wkt_wire, &wkt_wire_len, err, sizeof(err))) {
    fprintf(stderr, "Wkt JSON: %s\n", err);
    return 1;
  }
  status_wire = (uint8_t *)STATUS;
  status_wire_len = sizeof(STATUS);
  int rc = test_main(tests, argc, argv);
  free(wkt_wire);
  pbj_pool_destroy(pool);
  return rc;
}
