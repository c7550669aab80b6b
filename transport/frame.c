/* gRPC message framing (SPEC HS-01): a 1-byte flag, a 4-byte big-endian
 * length, then the body. The deframer is incremental and never trusts the
 * length prefix for an allocation larger than what has arrived. */
#include "transport/transport.h"

#include <stdio.h>
#include <string.h>

/* Bodies up to this size are allocated in one go when their prefix is
 * seen; larger ones grow with the data so that a lying prefix (4 GiB)
 * costs at most twice what was really received. */
#define FRAME_EAGER_BYTES (64 * 1024)

grit_slice *grit_frame_message(const void *data, size_t len) {
  if (len > UINT32_MAX || len > SIZE_MAX - 5)
    return NULL;
  grit_slice *s = grit_slice_new(5 + len);
  if (!s)
    return NULL;
  s->data[0] = 0;
  s->data[1] = (uint8_t)(len >> 24);
  s->data[2] = (uint8_t)(len >> 16);
  s->data[3] = (uint8_t)(len >> 8);
  s->data[4] = (uint8_t)len;
  if (len)
    memcpy(s->data + 5, data, len);
  return s;
}

void grit_deframer_init(grit_deframer *d, int64_t max_len) {
  memset(d, 0, sizeof(*d));
  d->max_len = max_len;
}

void grit_deframer_free(grit_deframer *d) {
  grit_slice_unref(d->msg);
  d->msg = NULL;
  d->hdr_have = 0;
  d->msg_have = 0;
}

bool grit_deframer_mid_message(const grit_deframer *d) {
  return d->hdr_have > 0;
}

void grit_deframer_set_encoding(grit_deframer *d, const char *name,
                                size_t len) {
  d->enc = grit_codec_parse(name, len, &d->codec) ? GRIT_DEFRAMER_ENC_CODEC
                                                  : GRIT_DEFRAMER_ENC_UNKNOWN;
  size_t n = len < sizeof(d->enc_name) - 1 ? len : sizeof(d->enc_name) - 1;
  memcpy(d->enc_name, name, n);
  d->enc_name[n] = '\0';
}

/* SPEC CP-02: a compressed flag needs an encoding grit offered. */
static int deframer_check_encoding(grit_deframer *d, const char **why) {
  switch (d->enc) {
  case GRIT_DEFRAMER_ENC_NONE:
    *why = "compressed message without grpc-encoding";
    return -1;
  case GRIT_DEFRAMER_ENC_UNKNOWN:
    snprintf(d->why, sizeof(d->why),
             "compressed message in grpc-encoding \"%s\", which grit did "
             "not offer (" GRIT_ACCEPT_ENCODING ")",
             d->enc_name);
    *why = d->why;
    return -1;
  case GRIT_DEFRAMER_ENC_CODEC:
    if (d->codec != GRIT_CODEC_IDENTITY)
      return 0;
    *why = "compressed message with grpc-encoding \"identity\"";
    return -1;
  }
  return -1;
}

static size_t deframer_body_len(const grit_deframer *d) {
  return (size_t)d->hdr[1] << 24 | (size_t)d->hdr[2] << 16 |
         (size_t)d->hdr[3] << 8 | d->hdr[4];
}

/* Make room for at least |want| body bytes in d->msg, whose len field is
 * the capacity while the message is being built. */
static bool deframer_grow(grit_deframer *d, size_t total, size_t want) {
  size_t cap = d->msg ? d->msg->len : 0;
  if (want <= cap)
    return true;
  size_t ncap = cap ? cap : FRAME_EAGER_BYTES;
  while (ncap < want)
    ncap = ncap > total / 2 ? total : ncap * 2;
  if (ncap > total)
    ncap = total;
  grit_slice *n = grit_slice_new(ncap);
  if (!n)
    return false;
  if (d->msg_have)
    memcpy(n->data, d->msg->data, d->msg_have);
  grit_slice_unref(d->msg);
  d->msg = n;
  return true;
}

grit_status_code grit_deframer_feed(grit_deframer *d, const uint8_t *p,
                                    size_t n, grit_deframe_cb cb, void *ud,
                                    const char **why) {
  *why = NULL;
  while (n > 0 || d->hdr_have == 5) {
    if (d->hdr_have < 5) {
      size_t take = 5 - d->hdr_have < n ? 5 - d->hdr_have : n;
      memcpy(d->hdr + d->hdr_have, p, take);
      d->hdr_have += take;
      p += take;
      n -= take;
      if (d->hdr_have < 5)
        break;
      if (d->hdr[0] & ~1u) {
        *why = "invalid message flags";
        return GRIT_STATUS_INTERNAL;
      }
      if ((d->hdr[0] & 1) && deframer_check_encoding(d, why) != 0)
        return GRIT_STATUS_INTERNAL;
      size_t len = deframer_body_len(d);
      /* A compressed body may be a little larger than what it decodes to
       * (CP-03 applies to the decompressed size, checked while inflating). */
      uint64_t max = d->max_len < 0 ? UINT64_MAX
                     : (d->hdr[0] & 1) != 0
                         ? grit_compress_bound((uint64_t)d->max_len)
                         : (uint64_t)d->max_len;
      if ((uint64_t)len > max) {
        *why = "received message larger than max";
        return GRIT_STATUS_RESOURCE_EXHAUSTED;
      }
      d->msg_have = 0;
      size_t first = len < FRAME_EAGER_BYTES ? len : n;
      if (first > len)
        first = len;
      if (!deframer_grow(d, len, first)) {
        *why = "out of memory receiving a message";
        return GRIT_STATUS_RESOURCE_EXHAUSTED;
      }
    }
    size_t len = deframer_body_len(d);
    size_t take = len - d->msg_have < n ? len - d->msg_have : n;
    if (take) {
      if (!deframer_grow(d, len, d->msg_have + take)) {
        *why = "out of memory receiving a message";
        return GRIT_STATUS_RESOURCE_EXHAUSTED;
      }
      memcpy(d->msg->data + d->msg_have, p, take);
      d->msg_have += take;
      p += take;
      n -= take;
    }
    if (d->msg_have < len)
      break;
    grit_slice *msg = d->msg;
    if (msg)
      msg->len = len;
    else /* an empty message (deframer_grow made no slice for it) */
      msg = grit_slice_empty();
    d->msg = NULL;
    d->msg_have = 0;
    d->hdr_have = 0;
    if (d->hdr[0] & 1) {
      grit_slice *raw = msg;
      grit_status_code code =
          grit_decompress(d->codec, raw->data, raw->len, d->max_len, &msg, why);
      grit_slice_unref(raw);
      if (code != GRIT_STATUS_OK)
        return code;
    }
    cb(msg, ud);
  }
  return GRIT_STATUS_OK;
}
