/* gRPC message codecs on zlib (SPEC CP-01..CP-03). Inflating checks the
 * receive limit as the output grows, so a small bomb never costs more
 * than the limit (plus one byte) of memory. */
#include "compress/compress.h"

#include <limits.h>
#include <string.h>
#include <zlib.h>

/* Output buffers start at this size (or the limit, if smaller) and
 * double; a 5-byte bomb thus allocates little until it really inflates. */
#define INFLATE_FIRST_BYTES 4096

const char *grit_codec_name(grit_codec c) {
  switch (c) {
  case GRIT_CODEC_IDENTITY:
    return "identity";
  case GRIT_CODEC_DEFLATE:
    return "deflate";
  case GRIT_CODEC_GZIP:
    return "gzip";
  }
  return "identity";
}

bool grit_codec_parse(const char *s, size_t len, grit_codec *out) {
  static const grit_codec all[] = {GRIT_CODEC_IDENTITY, GRIT_CODEC_DEFLATE,
                                   GRIT_CODEC_GZIP};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    const char *n = grit_codec_name(all[i]);
    if (strlen(n) == len && memcmp(n, s, len) == 0) {
      *out = all[i];
      return true;
    }
  }
  return false;
}

uint64_t grit_compress_bound(uint64_t len) {
  /* deflateBound's formula, plus the larger (gzip) wrapper. */
  return len + (len >> 12) + (len >> 14) + (len >> 25) + 13 + 18;
}

/* zlib's allocations go through grit's allocator, so tests count them and
 * make them fail (STYLE 3.5); zlib wants Z_NULL on failure. */
static voidpf codec_zalloc(voidpf opaque, uInt items, uInt size) {
  (void)opaque;
  if (size && items > SIZE_MAX / size)
    return Z_NULL;
  return grit_malloc((size_t)items * size);
}

static void codec_zfree(voidpf opaque, voidpf p) {
  (void)opaque;
  grit_free(p);
}

static int codec_window_bits(grit_codec c) {
  return c == GRIT_CODEC_GZIP ? 15 + 16 : 15;
}

static void codec_prefix(uint8_t *h, bool compressed, size_t len) {
  h[0] = compressed ? 1 : 0;
  h[1] = (uint8_t)(len >> 24);
  h[2] = (uint8_t)(len >> 16);
  h[3] = (uint8_t)(len >> 8);
  h[4] = (uint8_t)len;
}

static grit_err codec_identity_frame(const void *data, size_t len,
                                     grit_slice **out) {
  grit_slice *s = grit_slice_new(5 + len);
  if (!s)
    return GRIT_ERR_NOMEM;
  codec_prefix(s->data, false, len);
  if (len)
    memcpy(s->data + 5, data, len);
  *out = s;
  return GRIT_OK;
}

grit_err grit_compress_frame(grit_codec c, const void *data, size_t len,
                             grit_slice **out, bool *compressed) {
  *out = NULL;
  *compressed = false;
  if (len > UINT32_MAX)
    return GRIT_ERR_INVALID_ARG;
  /* Only a smaller body is worth the flag; an empty one never is. */
  if (c == GRIT_CODEC_IDENTITY || len < 2)
    return codec_identity_frame(data, len, out);
  z_stream z;
  memset(&z, 0, sizeof(z));
  z.zalloc = codec_zalloc;
  z.zfree = codec_zfree;
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, codec_window_bits(c),
                   8, Z_DEFAULT_STRATEGY) != Z_OK)
    return GRIT_ERR_NOMEM; /* zlib fails here only for memory */
  /* Room for a body one byte shorter than the message: if deflate cannot
   * finish in it, the message goes as it is. */
  size_t room = (size_t)deflateBound(&z, (uLong)len);
  if (room > len - 1)
    room = len - 1;
  grit_slice *s = grit_slice_new(5 + room);
  if (!s) {
    deflateEnd(&z);
    return GRIT_ERR_NOMEM;
  }
  z.next_in = (Bytef *)(uintptr_t)data;
  z.avail_in = (uInt)len;
  z.next_out = s->data + 5;
  z.avail_out = (uInt)room;
  int ret = deflate(&z, Z_FINISH);
  size_t body = (size_t)z.total_out;
  deflateEnd(&z);
  if (ret != Z_STREAM_END) {
    grit_slice_unref(s);
    if (ret == Z_MEM_ERROR)
      return GRIT_ERR_NOMEM;
    return codec_identity_frame(data, len, out); /* not smaller */
  }
  codec_prefix(s->data, true, body);
  s->len = 5 + body;
  *out = s;
  *compressed = true;
  return GRIT_OK;
}

/* Replace |*s| (holding |have| bytes) by a slice of |cap| bytes. */
static bool codec_grow(grit_slice **s, size_t have, size_t cap) {
  grit_slice *n = grit_slice_new(cap);
  if (!n)
    return false;
  if (have)
    memcpy(n->data, (*s)->data, have);
  grit_slice_unref(*s);
  *s = n;
  return true;
}

grit_status_code grit_decompress(grit_codec c, const uint8_t *p, size_t n,
                                 int64_t max_len, grit_slice **out,
                                 const char **why) {
  *out = NULL;
  *why = NULL;
  if (c == GRIT_CODEC_IDENTITY || n > UINT_MAX) {
    *why = "invalid compressed message";
    return GRIT_STATUS_INTERNAL;
  }
  /* At most max_len + 1 bytes of output are ever held: reaching that one
   * extra byte proves the message is over the limit (CP-03). */
  size_t hard = max_len < 0 || (uint64_t)max_len >= SIZE_MAX - 1
                    ? SIZE_MAX
                    : (size_t)max_len + 1;
  z_stream z;
  memset(&z, 0, sizeof(z));
  z.zalloc = codec_zalloc;
  z.zfree = codec_zfree;
  z.next_in = (Bytef *)(uintptr_t)p;
  z.avail_in = (uInt)n;
  if (inflateInit2(&z, codec_window_bits(c)) != Z_OK) {
    *why = "out of memory decompressing a message";
    return GRIT_STATUS_RESOURCE_EXHAUSTED;
  }
  size_t cap = n * 2 > INFLATE_FIRST_BYTES ? n * 2 : INFLATE_FIRST_BYTES;
  if (cap > hard)
    cap = hard;
  grit_slice *s = grit_slice_new(cap);
  size_t have = 0;
  grit_status_code code = GRIT_STATUS_OK;
  if (!s)
    goto nomem;
  for (;;) {
    if (have == cap) {
      if (cap == hard) {
        code = GRIT_STATUS_RESOURCE_EXHAUSTED;
        *why = "decompressed message larger than max";
        goto done;
      }
      size_t ncap = cap > hard / 2 ? hard : cap * 2;
      if (!codec_grow(&s, have, ncap))
        goto nomem;
      cap = ncap;
    }
    size_t room = cap - have;
    z.next_out = s->data + have;
    z.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
    uInt before = z.avail_out;
    int ret = inflate(&z, Z_NO_FLUSH);
    have += before - z.avail_out;
    if (ret == Z_STREAM_END) {
      if (have == hard) {
        code = GRIT_STATUS_RESOURCE_EXHAUSTED;
        *why = "decompressed message larger than max";
      } else if (z.avail_in > 0) {
        code = GRIT_STATUS_INTERNAL;
        *why = "trailing bytes after a compressed message";
      }
      goto done;
    }
    if (ret == Z_MEM_ERROR)
      goto nomem;
    if (ret == Z_OK)
      continue;
    if (ret == Z_BUF_ERROR && z.avail_out == 0)
      continue; /* needs more room */
    code = GRIT_STATUS_INTERNAL;
    *why = ret == Z_BUF_ERROR ? "truncated compressed message"
                              : "corrupt compressed message";
    goto done;
  }
nomem:
  code = GRIT_STATUS_RESOURCE_EXHAUSTED;
  *why = "out of memory decompressing a message";
done:
  inflateEnd(&z);
  if (code != GRIT_STATUS_OK) {
    grit_slice_unref(s);
    return code;
  }
  s->len = have;
  *out = s;
  return GRIT_STATUS_OK;
}
