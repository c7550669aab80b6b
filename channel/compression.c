/* Request compression for calls (SPEC CP-01..CP-04): which codec a call
 * uses, and framing its messages once, on the sending thread, so the
 * replay buffer holds the bytes as sent. */
#include "channel/channel_int.h"

#include <string.h>

const char *grit_compression_name(grit_compression c) {
  switch (c) {
  case GRIT_COMPRESSION_DEFAULT:
    return "default";
  case GRIT_COMPRESSION_IDENTITY:
    return "identity";
  case GRIT_COMPRESSION_DEFLATE:
    return "deflate";
  case GRIT_COMPRESSION_GZIP:
    return "gzip";
  }
  return NULL;
}

bool grit_compression_arg_valid(const char *v) {
  grit_codec c;
  return grit_codec_parse(v, strlen(v), &c);
}

grit_codec grit_call_codec(const grit_chan_opts *o, grit_compression opt) {
  switch (opt) {
  case GRIT_COMPRESSION_IDENTITY:
    return GRIT_CODEC_IDENTITY;
  case GRIT_COMPRESSION_DEFLATE:
    return GRIT_CODEC_DEFLATE;
  case GRIT_COMPRESSION_GZIP:
    return GRIT_CODEC_GZIP;
  case GRIT_COMPRESSION_DEFAULT:
    break;
  }
  grit_codec c = GRIT_CODEC_IDENTITY;
  if (o->default_compression)
    grit_codec_parse(o->default_compression, strlen(o->default_compression),
                     &c); /* validated by the setter */
  return c;
}

grit_err grit_call_frame(const grit_call *c, const void *data, size_t len,
                         unsigned flags, grit_slice **out) {
  bool compressed;
  grit_codec codec =
      flags & GRIT_SEND_NO_COMPRESS ? GRIT_CODEC_IDENTITY : c->codec;
  return grit_compress_frame(codec, data, len, out, &compressed);
}
