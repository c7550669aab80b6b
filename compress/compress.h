/*
 * compress: gRPC message codecs (SPEC CP-01..CP-04): identity, gzip and
 * deflate on zlib. transport/ decodes received messages with it and
 * channel/ encodes request messages once, before the replay buffer. Pure:
 * no loop, no clock, no channel; every allocation goes through util.
 * Layout: floor 1 of docs/layout.md.
 */
#ifndef GRIT_COMPRESS_H
#define GRIT_COMPRESS_H

#include "util/util.h"

/* A message encoding, as named in grpc-encoding. */
typedef enum grit_codec {
  GRIT_CODEC_IDENTITY = 0,
  GRIT_CODEC_DEFLATE = 1, /* zlib format (RFC 1950), as grpc-core */
  GRIT_CODEC_GZIP = 2,    /* RFC 1952 */
} grit_codec;

/* What grit decodes, the value of grpc-accept-encoding (CP-01). */
#define GRIT_ACCEPT_ENCODING "identity, deflate, gzip"

/* grit_codec_name: "identity", "deflate" or "gzip". */
const char *grit_codec_name(grit_codec c);
/* grit_codec_parse: the codec named by |s| (|len| bytes, exact,
 * lower-case); false for any other name. */
bool grit_codec_parse(const char *s, size_t len, grit_codec *out);

/* grit_compress_frame: one gRPC frame (5-byte prefix, then the body) for
 * the message |data|/|len| under codec |c|. The body is compressed and the
 * flag set only when |c| is not identity and the result is smaller than
 * |len|; otherwise the frame carries the bytes as they are, flag 0.
 * |*compressed| says which. Returns GRIT_OK, GRIT_ERR_INVALID_ARG (over
 * 4 GiB) or GRIT_ERR_NOMEM; |*out| is a new slice, NULL on error. */
grit_err grit_compress_frame(grit_codec c, const void *data, size_t len,
                             grit_slice **out, bool *compressed);

/* grit_decompress: inflate |p|/|n| under codec |c| (not identity) into a
 * new slice, failing as soon as the output would pass |max_len| bytes
 * (-1: no limit), so no more than max_len + 1 bytes are ever held
 * (CP-03). Returns GRIT_STATUS_OK; RESOURCE_EXHAUSTED (over the limit, or
 * out of memory); INTERNAL (corrupt or truncated data, trailing bytes).
 * |*why| is a static reason on error. */
grit_status_code grit_decompress(grit_codec c, const uint8_t *p, size_t n,
                                 int64_t max_len, grit_slice **out,
                                 const char **why);

/* grit_compress_bound: the largest compressed size a message of |len|
 * bytes can take under any codec (zlib's bound plus the wrapper). */
uint64_t grit_compress_bound(uint64_t len);

#endif
