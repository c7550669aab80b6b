/* libFuzzer target: the inflater (SPEC CP-02, CP-03) on arbitrary bytes
 * with a fuzzer-chosen codec and receive limit. It must agree with zlib's
 * own streaming inflate (same verdict, same bytes), never return more
 * than the limit, and round-trip whatever it is given through
 * grit_compress_frame. */
#include "compress/compress.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* zlib's verdict: 1 ok (|*out| malloc'd, |*n| bytes), 0 over the limit,
 * -1 bad data. */
static int ref_inflate(grit_codec c, const uint8_t *p, size_t len, int64_t max,
                       uint8_t **out, size_t *n) {
  size_t cap = max < 0 ? (size_t)64 << 20 : (size_t)max + 1;
  uint8_t *buf = malloc(cap ? cap : 1);
  z_stream z;
  memset(&z, 0, sizeof(z));
  *out = NULL;
  *n = 0;
  if (!buf || inflateInit2(&z, c == GRIT_CODEC_GZIP ? 31 : 15) != Z_OK) {
    free(buf);
    return -2;
  }
  z.next_in = (Bytef *)(uintptr_t)p;
  z.avail_in = (uInt)len;
  z.next_out = buf;
  z.avail_out = (uInt)cap;
  int ret = inflate(&z, Z_FINISH);
  size_t have = cap - z.avail_out;
  inflateEnd(&z);
  int verdict;
  if (ret == Z_STREAM_END && z.avail_in == 0 &&
      (max < 0 || have <= (uint64_t)max))
    verdict = 1;
  else if (ret == Z_STREAM_END && z.avail_in == 0)
    verdict = 0;
  else if (z.avail_out == 0 && ret == Z_BUF_ERROR)
    verdict = max < 0 ? -2 : 0; /* ran out of room: over the limit */
  else
    verdict = -1;
  if (verdict == 1) {
    *out = buf;
    *n = have;
  } else {
    free(buf);
  }
  return verdict;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const int64_t limits[] = {-1, 0, 1, 100, 4096, 65536, 1 << 20, -1};
  if (size < 1)
    return 0;
  grit_codec c = (data[0] & 1) ? GRIT_CODEC_GZIP : GRIT_CODEC_DEFLATE;
  int64_t max = limits[(data[0] >> 1) % 8];
  const uint8_t *p = data + 1;
  size_t n = size - 1;

  grit_slice *out = NULL;
  const char *why = NULL;
  grit_status_code code = grit_decompress(c, p, n, max, &out, &why);
  GRIT_ASSERT(code == GRIT_STATUS_OK || (why != NULL && out == NULL));
  if (code == GRIT_STATUS_OK)
    GRIT_ASSERT(max < 0 || out->len <= (uint64_t)max);

  uint8_t *ref;
  size_t ref_n;
  int verdict = ref_inflate(c, p, n, max, &ref, &ref_n);
  if (verdict == 1) {
    GRIT_ASSERT(code == GRIT_STATUS_OK);
    GRIT_ASSERT(out->len == ref_n);
    GRIT_ASSERT(ref_n == 0 || memcmp(out->data, ref, ref_n) == 0);
  } else if (verdict == 0) {
    GRIT_ASSERT(code == GRIT_STATUS_RESOURCE_EXHAUSTED);
  } else if (verdict == -1) {
    GRIT_ASSERT(code == GRIT_STATUS_INTERNAL ||
                code == GRIT_STATUS_RESOURCE_EXHAUSTED);
  }
  free(ref);
  grit_slice_unref(out);

  /* Round trip: the input itself as a message. */
  grit_slice *f = NULL;
  bool compressed = false;
  GRIT_ASSERT(grit_compress_frame(c, p, n, &f, &compressed) == GRIT_OK);
  if (compressed) {
    GRIT_ASSERT(f->data[0] == 1 && f->len - 5 < n);
    GRIT_ASSERT(grit_decompress(c, f->data + 5, f->len - 5, (int64_t)n, &out,
                                &why) == GRIT_STATUS_OK);
    GRIT_ASSERT(out->len == n && memcmp(out->data, p, n) == 0);
    grit_slice_unref(out);
  } else {
    GRIT_ASSERT(f->data[0] == 0 && f->len == n + 5);
    GRIT_ASSERT(n == 0 || memcmp(f->data + 5, p, n) == 0);
  }
  grit_slice_unref(f);
  return 0;
}
