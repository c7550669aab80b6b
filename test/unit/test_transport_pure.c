/* Pure helpers of transport/: framing, grpc-timeout, percent-encoding,
 * base64 and the status maps (SPEC HS-01..HS-06). */
#include "transport/transport.h"
#include "transport/transport_int.h"

#include "test/harness.h"

#include <stdint.h>

/* ---- framing ---- */

typedef struct collected {
  grit_slice *msgs[16];
  size_t n;
} collected;

static void collect(grit_slice *msg, void *ud) {
  collected *c = ud;
  if (c->n < 16)
    c->msgs[c->n++] = msg;
  else
    grit_slice_unref(msg);
}

static void collected_free(collected *c) {
  for (size_t i = 0; i < c->n; i++)
    grit_slice_unref(c->msgs[i]);
  c->n = 0;
}

static void test_frame_message(void) {
  grit_slice *s = grit_frame_message("hello", 5);
  ASSERT_NOT_NULL(s);
  ASSERT_EQ(s->len, 10);
  ASSERT_MEM_EQ(s->data, "\0\0\0\0\5hello", 10);
  grit_slice_unref(s);
  s = grit_frame_message(NULL, 0);
  ASSERT_NOT_NULL(s);
  ASSERT_EQ(s->len, 5);
  ASSERT_MEM_EQ(s->data, "\0\0\0\0\0", 5);
  grit_slice_unref(s);
}

/* Three messages (one empty) split at every pair of byte boundaries. */
static void test_deframe_splits(void) {
  uint8_t wire[64];
  size_t len = 0;
  const char *bodies[] = {"abc", "", "0123456789"};
  for (size_t i = 0; i < 3; i++) {
    grit_slice *f = grit_frame_message(bodies[i], strlen(bodies[i]));
    memcpy(wire + len, f->data, f->len);
    len += f->len;
    grit_slice_unref(f);
  }
  for (size_t a = 0; a <= len; a++) {
    for (size_t b = a; b <= len; b++) {
      grit_deframer d;
      grit_deframer_init(&d, -1);
      collected c = {.n = 0};
      const char *why;
      ASSERT_EQ(grit_deframer_feed(&d, wire, a, collect, &c, &why), 0);
      ASSERT_EQ(grit_deframer_feed(&d, wire + a, b - a, collect, &c, &why), 0);
      ASSERT_EQ(grit_deframer_feed(&d, wire + b, len - b, collect, &c, &why),
                0);
      ASSERT_EQ(c.n, 3);
      for (size_t i = 0; i < 3; i++) {
        ASSERT_EQ(c.msgs[i]->len, strlen(bodies[i]));
        ASSERT_MEM_EQ(c.msgs[i]->data, bodies[i], strlen(bodies[i]));
      }
      grit_slice *e = grit_slice_empty(); /* the empty body's, shared */
      ASSERT(c.msgs[1] == e);
      grit_slice_unref(e);
      ASSERT(!grit_deframer_mid_message(&d));
      collected_free(&c);
      grit_deframer_free(&d);
    }
  }
}

static void test_deframe_mid_message(void) {
  grit_deframer d;
  grit_deframer_init(&d, 100);
  collected c = {.n = 0};
  const char *why;
  ASSERT(!grit_deframer_mid_message(&d));
  ASSERT_EQ(
      grit_deframer_feed(&d, (const uint8_t *)"\0\0\0", 3, collect, &c, &why),
      0);
  ASSERT(grit_deframer_mid_message(&d));
  ASSERT_EQ(
      grit_deframer_feed(&d, (const uint8_t *)"\0\2a", 3, collect, &c, &why),
      0);
  ASSERT(grit_deframer_mid_message(&d));
  ASSERT_EQ(c.n, 0);
  grit_deframer_free(&d);
}

static void test_deframe_compressed(void) {
  grit_deframer d;
  grit_deframer_init(&d, -1);
  collected c = {.n = 0};
  const char *why = NULL;
  ASSERT_EQ(grit_deframer_feed(&d, (const uint8_t *)"\1\0\0\0\1x", 6, collect,
                               &c, &why),
            GRIT_STATUS_INTERNAL);
  ASSERT_STR_EQ(why, "compressed message without grpc-encoding");
  ASSERT_EQ(c.n, 0);
  grit_deframer_free(&d);
  grit_deframer_init(&d, -1);
  ASSERT_EQ(grit_deframer_feed(&d, (const uint8_t *)"\x80\0\0\0\0", 5, collect,
                               &c, &why),
            GRIT_STATUS_INTERNAL);
  grit_deframer_free(&d);
}

static void test_deframe_too_large(void) {
  grit_deframer d;
  grit_deframer_init(&d, 4);
  collected c = {.n = 0};
  const char *why = NULL;
  /* Exactly the limit passes, one more byte fails before any body. */
  ASSERT_EQ(grit_deframer_feed(&d, (const uint8_t *)"\0\0\0\0\4abcd", 9,
                               collect, &c, &why),
            0);
  ASSERT_EQ(c.n, 1);
  ASSERT_EQ(grit_deframer_feed(&d, (const uint8_t *)"\0\0\0\0\5", 5, collect,
                               &c, &why),
            GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_NOT_NULL(why);
  collected_free(&c);
  grit_deframer_free(&d);
}

/* A 4 GiB prefix with no limit: only what arrives may be allocated. */
static size_t big_allocated;
static void *count_malloc(size_t n, void *ud) {
  (void)ud;
  if (n > big_allocated)
    big_allocated = n;
  return malloc(n);
}
static void count_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *count_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  if (n * m > big_allocated)
    big_allocated = n * m;
  return calloc(n, m);
}
static void *count_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  if (n > big_allocated)
    big_allocated = n;
  return realloc(p, n);
}

static void test_deframe_4gib_prefix(void) {
  grit_allocator a = {NULL, count_malloc, count_free, count_calloc,
                      count_realloc};
  grit_set_allocator(&a);
  big_allocated = 0;
  grit_deframer d;
  grit_deframer_init(&d, -1);
  collected c = {.n = 0};
  const char *why = NULL;
  uint8_t chunk[4096];
  memset(chunk, 'x', sizeof(chunk));
  grit_status_code rc = grit_deframer_feed(
      &d, (const uint8_t *)"\0\xff\xff\xff\xff", 5, collect, &c, &why);
  for (int i = 0; i < 64 && rc == 0; i++)
    rc = grit_deframer_feed(&d, chunk, sizeof(chunk), collect, &c, &why);
  grit_deframer_free(&d);
  grit_set_allocator(NULL);
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(c.n, 0);
  ASSERT_CMP(big_allocated, <=, 1024 * 1024);

  /* And with a limit, the prefix alone fails. */
  grit_deframer_init(&d, 4 * 1024 * 1024);
  ASSERT_EQ(grit_deframer_feed(&d, (const uint8_t *)"\0\xff\xff\xff\xff", 5,
                               collect, &c, &why),
            GRIT_STATUS_RESOURCE_EXHAUSTED);
  grit_deframer_free(&d);
}

/* A large message fed in pieces arrives whole and intact. */
static void test_deframe_large_growing(void) {
  size_t len = 300000;
  uint8_t *body = malloc(len);
  for (size_t i = 0; i < len; i++)
    body[i] = (uint8_t)(i * 7);
  grit_slice *f = grit_frame_message(body, len);
  grit_deframer d;
  grit_deframer_init(&d, -1);
  collected c = {.n = 0};
  const char *why;
  for (size_t off = 0; off < f->len; off += 1000) {
    size_t n = f->len - off < 1000 ? f->len - off : 1000;
    ASSERT_EQ(grit_deframer_feed(&d, f->data + off, n, collect, &c, &why), 0);
  }
  ASSERT_EQ(c.n, 1);
  ASSERT_EQ(c.msgs[0]->len, len);
  ASSERT_MEM_EQ(c.msgs[0]->data, body, len);
  collected_free(&c);
  grit_deframer_free(&d);
  grit_slice_unref(f);
  free(body);
}

/* ---- grpc-timeout ---- */

static void test_timeout_encode(void) {
  static const struct {
    int64_t ns;
    const char *want;
  } cases[] = {
      {-5, "1n"},
      {0, "1n"},
      {1, "1n"},
      {99999999, "99999999n"},
      {100000000, "100000u"},
      {100000001, "100001u"}, /* rounds up */
      {1000000000, "1000000u"},
      {99999999000, "99999999u"},
      {99999999001, "100000m"},
      {(int64_t)99999999 * 1000000000, "99999999S"},
      {(int64_t)100000000 * 1000000000, "1666667M"},
      {INT64_MAX, "2562048H"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char out[10];
    grit_timeout_encode(cases[i].ns, out);
    ASSERT_STR_EQ(out, cases[i].want);
  }
}

static void test_timeout_parse(void) {
  static const struct {
    const char *in;
    bool ok;
    int64_t ns;
  } cases[] = {
      {"1n", true, 1},
      {"1u", true, 1000},
      {"5m", true, 5000000},
      {"1S", true, 1000000000},
      {"2M", true, 120000000000},
      {"1H", true, 3600000000000},
      {"99999999S", true, 99999999000000000},
      {"99999999H", true, INT64_MAX}, /* saturates */
      {"123456789S", false, 0},       /* 9 digits */
      {"", false, 0},
      {"S", false, 0},
      {"10", false, 0},
      {"10s", false, 0},
      {"-1S", false, 0},
      {"1 S", false, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int64_t ns = -1;
    bool ok = grit_timeout_parse(cases[i].in, strlen(cases[i].in), &ns);
    if (ok != cases[i].ok)
      TEST_FAIL_AT(__FILE__, __LINE__, "parse(\"%s\") = %d", cases[i].in, ok);
    if (ok)
      ASSERT_EQ(ns, cases[i].ns);
  }
  /* Encode then parse never shortens the deadline. */
  for (int64_t ns = 1; ns < INT64_MAX / 13; ns = ns * 13 + 7) {
    char out[10];
    int64_t back;
    grit_timeout_encode(ns, out);
    ASSERT(grit_timeout_parse(out, strlen(out), &back));
    ASSERT_CMP(back, >=, ns);
  }
}

/* ---- grpc-message ---- */

static void test_percent(void) {
  static const struct {
    const char *raw;
    size_t raw_len;
    const char *enc;
  } cases[] = {
      {"", 0, ""},
      {"plain text", 10, "plain text"},
      {"100%", 4, "100%25"},
      {"%", 1, "%25"},
      {"a\nb", 3, "a%0Ab"},
      {"\x7f\x1f", 2, "%7F%1F"},
      {"caf\xc3\xa9", 5, "caf%C3%A9"},
      {"\0x", 2, "%00x"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t n;
    char *e = grit_percent_encode((const uint8_t *)cases[i].raw,
                                  cases[i].raw_len, &n);
    ASSERT_STR_EQ(e, cases[i].enc);
    ASSERT_EQ(n, strlen(cases[i].enc));
    char *d = grit_percent_decode((const uint8_t *)e, n, &n);
    ASSERT_EQ(n, cases[i].raw_len);
    ASSERT_MEM_EQ(d, cases[i].raw, n);
    grit_free(e);
    grit_free(d);
  }
  /* Permissive decoding: bad sequences pass through unchanged. */
  static const struct {
    const char *in, *out;
  } lax[] = {
      {"%", "%"},
      {"%4", "%4"},
      {"%zz", "%zz"},
      {"%%41", "%A"},
      {"50% off", "50% off"},
      {"%4g1", "%4g1"},
      {"%e9t%C3%A9", "\xe9t\xc3\xa9"},
      {"a%2", "a%2"},
      {"\xc3\xa9", "\xc3\xa9"}, /* raw non-ASCII is kept */
  };
  for (size_t i = 0; i < sizeof(lax) / sizeof(lax[0]); i++) {
    char *d = grit_percent_decode((const uint8_t *)lax[i].in, strlen(lax[i].in),
                                  NULL);
    ASSERT_STR_EQ(d, lax[i].out);
    grit_free(d);
  }
}

/* ---- base64 ---- */

static void test_base64(void) {
  static const struct {
    const char *raw, *enc;
  } cases[] = {
      {"", ""},
      {"f", "Zg"},
      {"fo", "Zm8"},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg"},
      {"fooba", "Zm9vYmE"},
      {"foobar", "Zm9vYmFy"},
      {"\xff\xfe\xfd", "//79"},
      {"\xfb\xef", "++8"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t n;
    char *e = grit_base64_encode((const uint8_t *)cases[i].raw,
                                 strlen(cases[i].raw), &n);
    ASSERT_STR_EQ(e, cases[i].enc);
    uint8_t *d = grit_base64_decode(e, n, &n);
    ASSERT_NOT_NULL(d);
    ASSERT_EQ(n, strlen(cases[i].raw));
    ASSERT_MEM_EQ(d, cases[i].raw, n);
    grit_free(e);
    grit_free(d);
  }
  static const struct {
    const char *in;
    const char *out; /* NULL: rejected */
  } dec[] = {
      {"Zg==", "f"},    {"Zm8=", "fo"},  {"Zm9vYg==", "foob"},
      {"Zg", "f"},      {"Z", NULL},     {"Zg=", NULL},
      {"Z===", NULL},   {"Zm9v!", NULL}, {"Zm 9v", NULL},
      {"Zm9v-_", NULL}, {"=Zg=", NULL},  {"Zg==Zg==", NULL},
      {"====", NULL},
  };
  for (size_t i = 0; i < sizeof(dec) / sizeof(dec[0]); i++) {
    size_t n = 0;
    uint8_t *d = grit_base64_decode(dec[i].in, strlen(dec[i].in), &n);
    if (!dec[i].out) {
      if (d)
        TEST_FAIL_AT(__FILE__, __LINE__, "decode(\"%s\") accepted", dec[i].in);
      continue;
    }
    ASSERT_NOT_NULL(d);
    ASSERT_EQ(n, strlen(dec[i].out));
    ASSERT_MEM_EQ(d, dec[i].out, n);
    grit_free(d);
  }
}

/* ---- status maps ---- */

static void test_status_http(void) {
  static const struct {
    int http;
    grit_status_code code;
  } cases[] = {
      {400, GRIT_STATUS_INTERNAL},          {401, GRIT_STATUS_UNAUTHENTICATED},
      {403, GRIT_STATUS_PERMISSION_DENIED}, {404, GRIT_STATUS_UNIMPLEMENTED},
      {429, GRIT_STATUS_UNAVAILABLE},       {502, GRIT_STATUS_UNAVAILABLE},
      {503, GRIT_STATUS_UNAVAILABLE},       {504, GRIT_STATUS_UNAVAILABLE},
      {200, GRIT_STATUS_UNKNOWN},           {500, GRIT_STATUS_UNKNOWN},
      {302, GRIT_STATUS_UNKNOWN},           {0, GRIT_STATUS_UNKNOWN},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    ASSERT_EQ(grit_status_from_http(cases[i].http), cases[i].code);
}

static void test_status_rst(void) {
  static const struct {
    uint32_t rst;
    grit_status_code code;
  } cases[] = {
      {0x0, GRIT_STATUS_INTERNAL}, /* NO_ERROR */
      {0x1, GRIT_STATUS_INTERNAL}, /* PROTOCOL_ERROR */
      {0x2, GRIT_STATUS_INTERNAL}, /* INTERNAL_ERROR */
      {0x3, GRIT_STATUS_INTERNAL}, /* FLOW_CONTROL_ERROR */
      {0x5, GRIT_STATUS_INTERNAL}, /* STREAM_CLOSED */
      {0x6, GRIT_STATUS_INTERNAL}, /* FRAME_SIZE_ERROR */
      {0x7, GRIT_STATUS_UNAVAILABLE},
      {0x8, GRIT_STATUS_CANCELLED},
      {0x9, GRIT_STATUS_INTERNAL}, /* COMPRESSION_ERROR */
      {0xa, GRIT_STATUS_INTERNAL}, /* CONNECT_ERROR */
      {0xb, GRIT_STATUS_RESOURCE_EXHAUSTED},
      {0xc, GRIT_STATUS_PERMISSION_DENIED},
      {0xd, GRIT_STATUS_INTERNAL}, /* HTTP_1_1_REQUIRED */
      {0x1234, GRIT_STATUS_INTERNAL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    ASSERT_EQ(grit_status_from_rst(cases[i].rst), cases[i].code);
}

static void test_status_text(void) {
  static const struct {
    const char *s;
    grit_status_code code;
  } cases[] = {
      {"0", GRIT_STATUS_OK},
      {"14", GRIT_STATUS_UNAVAILABLE},
      {"16", GRIT_STATUS_UNAUTHENTICATED},
      {"17", GRIT_STATUS_UNKNOWN},
      {"-1", GRIT_STATUS_UNKNOWN},
      {"abc", GRIT_STATUS_UNKNOWN},
      {"", GRIT_STATUS_UNKNOWN},
      {"1a", GRIT_STATUS_UNKNOWN},
      {" 1", GRIT_STATUS_UNKNOWN},
      {"99999999999999999999", GRIT_STATUS_UNKNOWN},
      {"4294967310", GRIT_STATUS_UNKNOWN},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    ASSERT_EQ(grit_status_from_text(cases[i].s, strlen(cases[i].s)),
              cases[i].code);
  ASSERT_EQ(grit_status_from_text(NULL, 0), GRIT_STATUS_UNKNOWN);
  /* Only |len| bytes count. */
  ASSERT_EQ(grit_status_from_text("145", 2), GRIT_STATUS_UNAVAILABLE);
}

/* ---- addresses ---- */

static void test_addr(void) {
  grit_addr a;
  ASSERT_OK(grit_addr_from_ip(&a, "127.0.0.1", 50051));
  ASSERT_STR_EQ(a.text, "127.0.0.1:50051");
  ASSERT_EQ(a.u.sa.sa_family, AF_INET);
  ASSERT_OK(grit_addr_from_ip(&a, "::1", 443));
  ASSERT_STR_EQ(a.text, "[::1]:443");
  ASSERT_EQ(a.u.sa.sa_family, AF_INET6);
  ASSERT_OK(grit_addr_from_ip(&a, "[2001:db8::1]", 80));
  ASSERT_STR_EQ(a.text, "[2001:db8::1]:80");
  ASSERT_EQ(grit_addr_from_ip(&a, "localhost", 80), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(grit_addr_from_ip(&a, "1.2.3", 80), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(grit_addr_from_ip(&a, "", 80), GRIT_ERR_INVALID_ARG);
  ASSERT_OK(grit_addr_from_unix(&a, "/tmp/s"));
  ASSERT_STR_EQ(a.text, "unix:/tmp/s");
  ASSERT_EQ(a.u.sa.sa_family, AF_UNIX);
  char longp[200];
  memset(longp, 'a', sizeof(longp) - 1);
  longp[sizeof(longp) - 1] = '\0';
  ASSERT_EQ(grit_addr_from_unix(&a, longp), GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(grit_addr_from_unix(&a, ""), GRIT_ERR_INVALID_ARG);
}

/* ---- TLS context ---- */

static void test_tls_ctx(void) {
  grit_tls_ctx *c = NULL;
  grit_error_detail d;
  memset(&d, 0, sizeof(d));
  ASSERT_OK(grit_tls_ctx_create(NULL, &d, &c));
  ASSERT_NOT_NULL(c);
  ASSERT(grit_tls_ctx_ref(c) == c);
  grit_tls_ctx_unref(c);
  grit_tls_ctx_unref(c);
  grit_tls_opts o = {.root_certs_file = "/nonexistent/roots.pem"};
  ASSERT_EQ(grit_tls_ctx_create(&o, &d, &c), GRIT_ERR_TLS);
  ASSERT_NULL(c);
  ASSERT_EQ(d.code, GRIT_ERR_TLS);
  ASSERT(strstr(d.reason, "/nonexistent/roots.pem") != NULL);
  grit_tls_ctx_unref(NULL);
}

/* ---- out of memory: every allocation of every helper may fail ---- */

static long fail_at, fail_count;
static void *fail_malloc(size_t n, void *ud) {
  (void)ud;
  return ++fail_count == fail_at ? NULL : malloc(n);
}
static void *fail_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  return ++fail_count == fail_at ? NULL : calloc(n, m);
}
static void *fail_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  return ++fail_count == fail_at ? NULL : realloc(p, n);
}

/* Run every helper once; returns false if one reported failure. */
static bool oom_helpers(void) {
  bool ok = true;
  char *p = grit_percent_encode((const uint8_t *)"a\n%", 3, NULL);
  ok &= p != NULL;
  grit_free(p);
  p = grit_percent_decode((const uint8_t *)"a%0A", 4, NULL);
  ok &= p != NULL;
  grit_free(p);
  p = grit_base64_encode((const uint8_t *)"abcd", 4, NULL);
  ok &= p != NULL;
  grit_free(p);
  uint8_t *b = grit_base64_decode("YWJjZA", 6, NULL);
  ok &= b != NULL;
  grit_free(b);
  grit_slice *f = grit_frame_message("xyz", 3);
  ok &= f != NULL;
  grit_deframer d;
  grit_deframer_init(&d, -1);
  collected c = {.n = 0};
  const char *why;
  if (f) {
    ok &= grit_deframer_feed(&d, f->data, f->len, collect, &c, &why) == 0;
    ok &= grit_deframer_feed(&d, f->data, 2, collect, &c, &why) == 0;
  }
  ok &= c.n == (f ? 1 : 0);
  collected_free(&c);
  grit_deframer_free(&d);
  grit_slice_unref(f);
  grit_tls_ctx *t = NULL;
  ok &= grit_tls_ctx_create(NULL, NULL, &t) == GRIT_OK;
  grit_tls_ctx_unref(t);
  return ok;
}

static void test_oom_sweep(void) {
  grit_allocator a = {NULL, fail_malloc, count_free, fail_calloc, fail_realloc};
  grit_set_allocator(&a);
  fail_at = -1;
  fail_count = 0;
  bool ok = oom_helpers();
  long total = fail_count;
  int failures = 0;
  for (long i = 1; i <= total; i++) {
    fail_at = i;
    fail_count = 0;
    failures += !oom_helpers();
  }
  grit_set_allocator(NULL);
  ASSERT(ok);
  ASSERT_CMP(total, >=, 7);
  ASSERT_EQ(failures, total); /* each failure is reported, none crash */
}

/* ---- nghttp2's memory (h2mem.c, issue 24) ---- */

#if defined(__SANITIZE_ADDRESS__)
#  define H2MEM_TEST_KEEPS 0
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define H2MEM_TEST_KEEPS 0
#  endif
#endif
#ifndef H2MEM_TEST_KEEPS
#  define H2MEM_TEST_KEEPS 1
#endif

static long h2mem_live;
static bool h2mem_fail;

static void *h2mem_test_malloc(size_t n, void *ud) {
  (void)ud;
  if (h2mem_fail)
    return NULL;
  void *p = malloc(n);
  h2mem_live += p != NULL;
  return p;
}
static void h2mem_test_free(void *p, void *ud) {
  (void)ud;
  h2mem_live -= p != NULL;
  free(p);
}
static void *h2mem_test_calloc(size_t n, size_t m, void *ud) {
  (void)ud;
  void *p = h2mem_fail ? NULL : calloc(n, m);
  h2mem_live += p != NULL;
  return p;
}
static void *h2mem_test_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  if (h2mem_fail)
    return NULL;
  void *q = realloc(p, n);
  h2mem_live += p == NULL && q != NULL;
  return q;
}

static void test_h2mem(void) {
  grit_allocator a = {NULL, h2mem_test_malloc, h2mem_test_free,
                      h2mem_test_calloc, h2mem_test_realloc};
  grit_set_allocator(&a);
  h2mem_live = 0;
  h2mem_fail = false;
  grit_h2mem m;
  grit_h2mem_init(&m);
  nghttp2_mem mem = grit_h2mem_nghttp2(&m);
  void *ud = mem.mem_user_data;

  /* A small block: aligned for nghttp2's objects, usable to its size. */
  uint8_t *p = mem.malloc(100, ud);
  ASSERT_NOT_NULL(p);
  ASSERT_EQ((uintptr_t)p % 8, 0);
  memset(p, 0xab, 100);
  ASSERT_EQ(h2mem_live, 1);
  /* Freed, it is kept and comes back for a request of its size class
   * (97..112 bytes); another class gets a new block. */
  mem.free(p, ud);
  ASSERT_EQ(h2mem_live, H2MEM_TEST_KEEPS ? 1 : 0);
  uint8_t *q = mem.malloc(97, ud);
  ASSERT_NOT_NULL(q);
  if (H2MEM_TEST_KEEPS)
    ASSERT(q == p);
  uint8_t *r = mem.malloc(200, ud);
  ASSERT_NOT_NULL(r);
  ASSERT(r != q);
  ASSERT_EQ(h2mem_live, 2);

  /* realloc: within the class in place, beyond it moved with the bytes. */
  memset(q, 0x5a, 97);
  ASSERT(mem.realloc(q, 112, ud) == q);
  q[111] = 0x5a;
  uint8_t *q2 = mem.realloc(q, 300, ud);
  ASSERT_NOT_NULL(q2);
  for (int i = 0; i < 97; i++)
    ASSERT_EQ(q2[i], 0x5a);
  ASSERT_EQ(q2[111], 0x5a);

  /* calloc zeroes, also a reused block; an overflowing size is refused. */
  mem.free(r, ud);
  uint8_t *z = mem.calloc(10, 20, ud);
  ASSERT_NOT_NULL(z);
  for (int i = 0; i < 200; i++)
    ASSERT_EQ(z[i], 0);
  ASSERT_NULL(mem.calloc(SIZE_MAX / 2, 4, ud));

  /* A big block is not kept: it goes back at once; realloc keeps its
   * bytes. */
  long before = h2mem_live;
  uint8_t *big = mem.malloc(4096, ud);
  ASSERT_NOT_NULL(big);
  memset(big, 0x11, 4096);
  big = mem.realloc(big, 8192, ud);
  ASSERT_NOT_NULL(big);
  ASSERT_EQ(big[4095], 0x11);
  ASSERT_EQ(h2mem_live, before + 1);
  mem.free(big, ud);
  ASSERT_EQ(h2mem_live, before);

  /* At most 32 blocks of a class are kept. */
  void *many[40];
  for (int i = 0; i < 40; i++)
    ASSERT_NOT_NULL(many[i] = mem.malloc(64, ud));
  before = h2mem_live;
  for (int i = 0; i < 40; i++)
    mem.free(many[i], ud);
  ASSERT_EQ(h2mem_live, before - (H2MEM_TEST_KEEPS ? 8 : 40));

  /* Out of memory: NULL, from malloc, calloc and a growing realloc (the
   * old block stays valid). */
  mem.free(q2, ud);
  mem.free(z, ud);
  grit_h2mem_release(&m);
  ASSERT_EQ(h2mem_live, 0);
  h2mem_fail = true;
  ASSERT_NULL(mem.malloc(64, ud));
  ASSERT_NULL(mem.calloc(1, 64, ud));
  h2mem_fail = false;
  p = mem.malloc(16, ud);
  ASSERT_NOT_NULL(p);
  h2mem_fail = true;
  ASSERT_NULL(mem.realloc(p, 4000, ud));
  h2mem_fail = false;
  mem.free(p, ud);
  mem.free(NULL, ud);
  grit_h2mem_release(&m);
  ASSERT_EQ(h2mem_live, 0);
  grit_set_allocator(NULL);
}

/* SPEC HS-08: the field check against RFC 9113 8.2.1 written out plainly,
 * for every byte in a name and at every place in a value (the check reads
 * values eight bytes at a time). */
static bool ref_name_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool ref_value_char(int c) {
  return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool field_ok(const char *name, const void *value, size_t len) {
  return grit_h2_field_ok((const uint8_t *)name, strlen(name), value, len);
}

static void test_h2_field_check(void) {
  for (int c = 0; c < 256; c++) {
    uint8_t name[] = {'x', '-', (uint8_t)c, 'y'};
    uint8_t pseudo[] = {':', (uint8_t)c};
    ASSERT_EQ(grit_h2_field_ok(name, sizeof(name), (const uint8_t *)"v", 1),
              ref_name_char(c));
    ASSERT_EQ(grit_h2_field_ok(pseudo, sizeof(pseudo), (const uint8_t *)"v", 1),
              ref_name_char(c));
    for (size_t at = 1; at < 23; at++) {
      uint8_t v[24];
      memset(v, 'a', sizeof(v));
      v[at] = (uint8_t)c;
      ASSERT_EQ(field_ok("x", v, sizeof(v)), ref_value_char(c));
    }
  }
  ASSERT(!field_ok("X-Upper", "v", 1));
  ASSERT(!field_ok("", "v", 1));
  ASSERT(!field_ok(":", "v", 1));
  ASSERT(field_ok(":status", "200", 3));
  ASSERT(field_ok("x", "", 0));
  ASSERT(field_ok("grpc-message", "a b\tc", 5));
  /* No white space at either end (8.2.1), whatever the length. */
  ASSERT(!field_ok("x", " a", 2));
  ASSERT(!field_ok("x", "a\t", 2));
  ASSERT(!field_ok("x", " ", 1));
  ASSERT(!field_ok("x", "0123456789abcdef ", 17));
  ASSERT(field_ok("x", "0123456789 abcdef", 17));
  ASSERT(!field_ok("x", "01234567\r\n89abcdef", 18));
  ASSERT(!field_ok("x", "0123456789abcde\x7f", 16));
  ASSERT(field_ok("x", "\x80\xff\xfe\x90\xa0\xb0\xc0\xd0\xe0", 9));
}

static const test_case tests[] = {
    {"frame_message", test_frame_message},
    {"deframe_splits", test_deframe_splits},
    {"deframe_mid_message", test_deframe_mid_message},
    {"deframe_compressed", test_deframe_compressed},
    {"deframe_too_large", test_deframe_too_large},
    {"deframe_4gib_prefix", test_deframe_4gib_prefix},
    {"deframe_large_growing", test_deframe_large_growing},
    {"timeout_encode", test_timeout_encode},
    {"timeout_parse", test_timeout_parse},
    {"percent", test_percent},
    {"base64", test_base64},
    {"status_http", test_status_http},
    {"status_rst", test_status_rst},
    {"status_text", test_status_text},
    {"addr", test_addr},
    {"tls_ctx", test_tls_ctx},
    {"oom_sweep", test_oom_sweep},
    {"h2mem", test_h2mem},
    {"h2_field_check", test_h2_field_check},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
