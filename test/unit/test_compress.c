/* compress/ and the deframer's decode step (SPEC CP-01..CP-03): codecs
 * round-trip, what is and is not compressed, the limit checked while
 * inflating (a 1 GiB gzip bomb costs no more than the limit), corrupt
 * input, the encodings a response may name, and an OOM sweep. */
#include "compress/compress.h"
#include "transport/transport.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "test/bomb.h"
#include "test/harness.h"

/* ---- a tracking allocator: live and peak bytes, and failure at i ---- */

static size_t live_bytes, peak_bytes;
static long alloc_count, fail_at;

static void *tr_malloc(size_t n, void *ud) {
  (void)ud;
  if (++alloc_count == fail_at)
    return NULL;
  size_t *p = malloc(n + 16);
  if (!p)
    return NULL;
  p[0] = n;
  live_bytes += n;
  if (live_bytes > peak_bytes)
    peak_bytes = live_bytes;
  return (char *)p + 16;
}
static void tr_free(void *q, void *ud) {
  (void)ud;
  if (!q)
    return;
  size_t *p = (size_t *)((char *)q - 16);
  live_bytes -= p[0];
  free(p);
}
static void *tr_calloc(size_t n, size_t m, void *ud) {
  void *p = tr_malloc(n * m, ud);
  if (p)
    memset(p, 0, n * m);
  return p;
}
static void *tr_realloc(void *q, size_t n, void *ud) {
  void *p = tr_malloc(n, ud);
  if (!p)
    return NULL;
  if (q) {
    size_t old = ((size_t *)((char *)q - 16))[0];
    memcpy(p, q, old < n ? old : n);
    tr_free(q, ud);
  }
  return p;
}
static const grit_allocator tracking = {NULL, tr_malloc, tr_free, tr_calloc,
                                        tr_realloc};

static uint8_t *zeros(size_t n) {
  return calloc(1, n ? n : 1);
}

/* Pseudo-random bytes (incompressible), from a fixed LCG. */
static uint8_t *noise(size_t n) {
  uint8_t *p = malloc(n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    p[i] = (uint8_t)(x >> 16);
  }
  return p;
}

static size_t frame_len(const grit_slice *s) {
  return (size_t)s->data[1] << 24 | (size_t)s->data[2] << 16 |
         (size_t)s->data[3] << 8 | s->data[4];
}

static void roundtrip(grit_codec c, const uint8_t *msg, size_t n) {
  grit_slice *f;
  bool compressed;
  ASSERT_OK(grit_compress_frame(c, msg, n, &f, &compressed));
  ASSERT(compressed);
  ASSERT_EQ(f->data[0], 1);
  ASSERT_EQ(frame_len(f), f->len - 5);
  ASSERT_CMP(f->len - 5, <, n);
  /* Real gzip (RFC 1952 magic) or zlib (RFC 1950 CMF 0x78) bytes. */
  if (c == GRIT_CODEC_GZIP) {
    ASSERT_EQ(f->data[5], 0x1f);
    ASSERT_EQ(f->data[6], 0x8b);
  } else {
    ASSERT_EQ(f->data[5], 0x78);
  }
  grit_slice *out;
  const char *why;
  ASSERT_EQ(grit_decompress(c, f->data + 5, f->len - 5, (int64_t)n, &out, &why),
            GRIT_STATUS_OK);
  ASSERT_EQ(out->len, n);
  ASSERT_MEM_EQ(out->data, msg, n);
  /* zlib's own one-shot decoder agrees (deflate only: zlib format). */
  if (c == GRIT_CODEC_DEFLATE) {
    uLongf dl = (uLongf)n;
    uint8_t *d = malloc(n);
    ASSERT_EQ(uncompress(d, &dl, f->data + 5, (uLong)(f->len - 5)), Z_OK);
    ASSERT_EQ(dl, n);
    ASSERT_MEM_EQ(d, msg, n);
    free(d);
  }
  grit_slice_unref(out);
  grit_slice_unref(f);
}

static void test_roundtrip_gzip_deflate(void) {
  uint8_t *z = zeros(271828); /* the interop size */
  roundtrip(GRIT_CODEC_GZIP, z, 271828);
  roundtrip(GRIT_CODEC_DEFLATE, z, 271828);
  free(z);
  const char *text = "hello hello hello hello hello hello hello hello";
  roundtrip(GRIT_CODEC_GZIP, (const uint8_t *)text, strlen(text));
  roundtrip(GRIT_CODEC_DEFLATE, (const uint8_t *)text, strlen(text));
}

static void test_identity_and_incompressible(void) {
  grit_slice *f;
  bool compressed = true;
  uint8_t *n = noise(4096);
  ASSERT_OK(grit_compress_frame(GRIT_CODEC_GZIP, n, 4096, &f, &compressed));
  ASSERT(!compressed); /* not smaller: sent as is, flag 0 (CP-01) */
  ASSERT_EQ(f->data[0], 0);
  ASSERT_EQ(f->len, 4096 + 5);
  ASSERT_MEM_EQ(f->data + 5, n, 4096);
  grit_slice_unref(f);
  ASSERT_OK(grit_compress_frame(GRIT_CODEC_DEFLATE, "", 0, &f, &compressed));
  ASSERT(!compressed);
  ASSERT_EQ(f->len, 5);
  grit_slice_unref(f);
  uint8_t *z = zeros(1000);
  ASSERT_OK(grit_compress_frame(GRIT_CODEC_IDENTITY, z, 1000, &f, &compressed));
  ASSERT(!compressed);
  ASSERT_EQ(f->data[0], 0);
  ASSERT_EQ(f->len, 1005);
  grit_slice_unref(f);
  free(z);
  free(n);
}

static void test_codec_names(void) {
  grit_codec c;
  ASSERT(grit_codec_parse("gzip", 4, &c) && c == GRIT_CODEC_GZIP);
  ASSERT(grit_codec_parse("deflate", 7, &c) && c == GRIT_CODEC_DEFLATE);
  ASSERT(grit_codec_parse("identity", 8, &c) && c == GRIT_CODEC_IDENTITY);
  ASSERT(!grit_codec_parse("GZIP", 4, &c));
  ASSERT(!grit_codec_parse("br", 2, &c));
  ASSERT(!grit_codec_parse("gzi", 3, &c));
  ASSERT(!grit_codec_parse("", 0, &c));
  ASSERT_STR_EQ(grit_codec_name(GRIT_CODEC_GZIP), "gzip");
  ASSERT_STR_EQ(GRIT_ACCEPT_ENCODING, "identity, deflate, gzip");
}

static void test_limit_exact(void) {
  uint8_t *z = zeros(10000);
  grit_slice *f, *out;
  bool compressed;
  const char *why;
  ASSERT_OK(grit_compress_frame(GRIT_CODEC_GZIP, z, 10000, &f, &compressed));
  ASSERT_EQ(grit_decompress(GRIT_CODEC_GZIP, f->data + 5, f->len - 5, 10000,
                            &out, &why),
            GRIT_STATUS_OK);
  ASSERT_EQ(out->len, 10000);
  grit_slice_unref(out);
  ASSERT_EQ(grit_decompress(GRIT_CODEC_GZIP, f->data + 5, f->len - 5, 9999,
                            &out, &why),
            GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_NULL(out);
  ASSERT_STR_EQ(why, "decompressed message larger than max");
  ASSERT_EQ(
      grit_decompress(GRIT_CODEC_GZIP, f->data + 5, f->len - 5, 0, &out, &why),
      GRIT_STATUS_RESOURCE_EXHAUSTED);
  grit_slice_unref(f);
  free(z);
}

/* CP-03: 1 GiB of zeros in about 1 MiB of gzip, against a 4 MiB limit:
 * RESOURCE_EXHAUSTED, and grit never holds much more than the limit. */
static void test_gzip_bomb(void) {
  size_t n;
  uint8_t *bomb = bomb_gzip(1024, &n);
  ASSERT_NOT_NULL(bomb);
  ASSERT_CMP(n, <, 1100 * 1024);
  grit_set_allocator(&tracking);
  peak_bytes = live_bytes = 0;
  grit_slice *out;
  const char *why;
  uint64_t t0 = test_now_ms();
  ASSERT_EQ(grit_decompress(GRIT_CODEC_GZIP, bomb, n, 4 << 20, &out, &why),
            GRIT_STATUS_RESOURCE_EXHAUSTED);
  uint64_t took = test_now_ms() - t0;
  grit_set_allocator(NULL);
  ASSERT_NULL(out);
  ASSERT_EQ(live_bytes, 0);
  /* Two buffers at the last doubling (old and new, the new one
   * limit + 1) plus zlib's inflate state (about 7 KiB + 32 KiB window). */
  ASSERT_CMP(peak_bytes, <, (size_t)(4 << 20) * 2 + 64 * 1024);
  fprintf(stderr, "bomb: %zu bytes of gzip, peak %zu bytes held, %llu ms\n", n,
          peak_bytes, (unsigned long long)took);
  free(bomb);
}

static void test_corrupt_truncated_trailing(void) {
  uint8_t *z = zeros(5000);
  grit_slice *f, *out;
  bool compressed;
  const char *why;
  ASSERT_OK(grit_compress_frame(GRIT_CODEC_GZIP, z, 5000, &f, &compressed));
  size_t body = f->len - 5;
  /* Truncated: the last 4 bytes (ISIZE) missing. */
  ASSERT_EQ(
      grit_decompress(GRIT_CODEC_GZIP, f->data + 5, body - 4, -1, &out, &why),
      GRIT_STATUS_INTERNAL);
  ASSERT_STR_EQ(why, "truncated compressed message");
  /* Wrong wrapper: gzip bytes read as deflate (zlib format). */
  ASSERT_EQ(
      grit_decompress(GRIT_CODEC_DEFLATE, f->data + 5, body, -1, &out, &why),
      GRIT_STATUS_INTERNAL);
  ASSERT_STR_EQ(why, "corrupt compressed message");
  /* A flipped CRC byte. */
  uint8_t *bad = malloc(body + 3);
  memcpy(bad, f->data + 5, body);
  bad[body - 6] ^= 0xff;
  ASSERT_EQ(grit_decompress(GRIT_CODEC_GZIP, bad, body, -1, &out, &why),
            GRIT_STATUS_INTERNAL);
  /* Trailing bytes after the stream. */
  memcpy(bad, f->data + 5, body);
  memcpy(bad + body, "xyz", 3);
  ASSERT_EQ(grit_decompress(GRIT_CODEC_GZIP, bad, body + 3, -1, &out, &why),
            GRIT_STATUS_INTERNAL);
  ASSERT_STR_EQ(why, "trailing bytes after a compressed message");
  /* Empty input. */
  ASSERT_EQ(grit_decompress(GRIT_CODEC_GZIP, bad, 0, -1, &out, &why),
            GRIT_STATUS_INTERNAL);
  ASSERT_NULL(out);
  free(bad);
  grit_slice_unref(f);
  free(z);
}

/* ---- the deframer's decode step (CP-02, CP-03) ---- */

typedef struct df_got {
  size_t n;
  size_t len[4];
  uint8_t first[4];
} df_got;

static void df_cb(grit_slice *msg, void *ud) {
  df_got *g = ud;
  if (g->n < 4) {
    g->len[g->n] = msg->len;
    g->first[g->n] = msg->len ? msg->data[0] : 0;
  }
  g->n++;
  grit_slice_unref(msg);
}

static grit_status_code df_feed(const char *enc, int64_t max,
                                const grit_slice *f, df_got *g, char *why_out,
                                size_t cap) {
  grit_deframer d;
  grit_deframer_init(&d, max);
  if (enc)
    grit_deframer_set_encoding(&d, enc, strlen(enc));
  const char *why = NULL;
  grit_status_code code = GRIT_STATUS_OK;
  /* Byte by byte for the first 7, then the rest: split prefixes too. */
  for (size_t i = 0; i < f->len && code == GRIT_STATUS_OK;) {
    size_t take = i < 7 ? 1 : f->len - i;
    code = grit_deframer_feed(&d, f->data + i, take, df_cb, g, &why);
    i += take;
  }
  grit_str_copy(why_out, cap, why ? why : "");
  grit_deframer_free(&d);
  return code;
}

static void test_deframer_decodes(void) {
  uint8_t *msg = zeros(271828);
  msg[0] = 42;
  grit_slice *f;
  bool compressed;
  char why[160];
  ASSERT_OK(grit_compress_frame(GRIT_CODEC_GZIP, msg, 271828, &f, &compressed));
  df_got g = {0};
  ASSERT_EQ(df_feed("gzip", 4 << 20, f, &g, why, sizeof(why)), GRIT_STATUS_OK);
  ASSERT_EQ(g.n, 1);
  ASSERT_EQ(g.len[0], 271828);
  ASSERT_EQ(g.first[0], 42);
  /* CP-02: a flag without grpc-encoding. */
  memset(&g, 0, sizeof(g));
  ASSERT_EQ(df_feed(NULL, -1, f, &g, why, sizeof(why)), GRIT_STATUS_INTERNAL);
  ASSERT_STR_EQ(why, "compressed message without grpc-encoding");
  /* CP-02: an encoding grit did not offer is named. */
  ASSERT_EQ(df_feed("br", -1, f, &g, why, sizeof(why)), GRIT_STATUS_INTERNAL);
  ASSERT(strstr(why, "\"br\"") != NULL);
  ASSERT(strstr(why, "did not offer") != NULL);
  ASSERT_EQ(df_feed("identity", -1, f, &g, why, sizeof(why)),
            GRIT_STATUS_INTERNAL);
  /* The wrong codec for the bytes. */
  ASSERT_EQ(df_feed("deflate", -1, f, &g, why, sizeof(why)),
            GRIT_STATUS_INTERNAL);
  ASSERT_STR_EQ(why, "corrupt compressed message");
  /* CP-03: the limit on the decompressed size. */
  ASSERT_EQ(df_feed("gzip", 271827, f, &g, why, sizeof(why)),
            GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_STR_EQ(why, "decompressed message larger than max");
  ASSERT_EQ(g.n, 0);
  grit_slice_unref(f);
  /* An uncompressed message under an encoding passes through. */
  ASSERT_OK(
      grit_compress_frame(GRIT_CODEC_IDENTITY, msg, 100, &f, &compressed));
  ASSERT_EQ(df_feed("gzip", 100, f, &g, why, sizeof(why)), GRIT_STATUS_OK);
  ASSERT_EQ(g.n, 1);
  ASSERT_EQ(g.len[0], 100);
  grit_slice_unref(f);
  free(msg);
}

/* ---- OOM sweep (STYLE 3.10) ---- */

static void test_oom_sweep(void) {
  uint8_t *msg = zeros(200000);
  grit_slice *f = NULL, *out;
  bool compressed;
  const char *why;
  long clean = 0;
  for (long i = 0;; i++) {
    grit_set_allocator(&tracking);
    alloc_count = 0;
    fail_at = i;
    live_bytes = 0;
    grit_err rv =
        grit_compress_frame(GRIT_CODEC_GZIP, msg, 200000, &f, &compressed);
    grit_status_code code = GRIT_STATUS_OK;
    if (rv == GRIT_OK) {
      code = grit_decompress(GRIT_CODEC_GZIP, f->data + 5, f->len - 5, -1, &out,
                             &why);
      if (code == GRIT_STATUS_OK) {
        ASSERT_EQ(out->len, 200000);
        grit_slice_unref(out);
      } else {
        ASSERT_EQ(code, GRIT_STATUS_RESOURCE_EXHAUSTED);
        ASSERT_STR_EQ(why, "out of memory decompressing a message");
      }
      grit_slice_unref(f);
    } else {
      ASSERT_EQ(rv, GRIT_ERR_NOMEM);
      ASSERT_NULL(f);
    }
    ASSERT_EQ(live_bytes, 0); /* nothing leaked on any path */
    long count = alloc_count;
    fail_at = 0;
    grit_set_allocator(NULL);
    if (i == 0) {
      clean = count;
      ASSERT_CMP(clean, >, 3);
      continue;
    }
    if (i > clean)
      break;
    ASSERT(rv != GRIT_OK || code != GRIT_STATUS_OK);
  }
  free(msg);
}

static const test_case tests[] = {
    {"roundtrip_gzip_deflate", test_roundtrip_gzip_deflate},
    {"identity_and_incompressible", test_identity_and_incompressible},
    {"codec_names", test_codec_names},
    {"limit_exact", test_limit_exact},
    {"gzip_bomb", test_gzip_bomb},
    {"corrupt_truncated_trailing", test_corrupt_truncated_trailing},
    {"deframer_decodes", test_deframer_decodes},
    {"oom_sweep", test_oom_sweep},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
