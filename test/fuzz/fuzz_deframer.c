/* libFuzzer target: the gRPC message deframer (SPEC HS-01, SC-07) fed
 * arbitrary DATA payloads, split at fuzzer-chosen points, with a
 * fuzzer-chosen receive limit. Whatever the split, the messages, the final
 * status and the mid-message flag must equal a one-shot reference parse. */
#include "transport/transport.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DF_MAX_MSGS 4096

typedef struct df_out {
  size_t n;
  size_t off[DF_MAX_MSGS]; /* where each message starts in the input */
  size_t len[DF_MAX_MSGS];
  const uint8_t *base;
  size_t checked; /* messages compared so far */
  bool mismatch;
} df_out;

/* The reference: whole messages in |p|, then the status at the first bad
 * prefix. */
static grit_status_code df_reference(const uint8_t *p, size_t n,
                                     int64_t max_len, df_out *ref, bool *mid) {
  size_t i = 0;
  *mid = false;
  while (n - i >= 5) {
    uint8_t flag = p[i];
    size_t len = (size_t)p[i + 1] << 24 | (size_t)p[i + 2] << 16 |
                 (size_t)p[i + 3] << 8 | p[i + 4];
    if (flag != 0)
      return GRIT_STATUS_INTERNAL;
    if (max_len >= 0 && (uint64_t)len > (uint64_t)max_len)
      return GRIT_STATUS_RESOURCE_EXHAUSTED;
    if (n - i - 5 < len) {
      *mid = true;
      return GRIT_STATUS_OK;
    }
    if (ref->n < DF_MAX_MSGS) {
      ref->off[ref->n] = i + 5;
      ref->len[ref->n] = len;
    }
    ref->n++;
    i += 5 + len;
  }
  *mid = i < n;
  return GRIT_STATUS_OK;
}

static void df_on_msg(grit_slice *msg, void *ud) {
  df_out *o = ud;
  if (o->n < DF_MAX_MSGS) {
    if (msg->len != o->len[o->n] ||
        (msg->len && memcmp(msg->data, o->base + o->off[o->n], msg->len)))
      o->mismatch = true;
    o->checked++;
  }
  o->n++;
  grit_slice_unref(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Byte 0 picks the limit, byte 1 the number of splits (0..15), then one
   * byte per split point; the rest is the DATA payload. */
  static const int64_t limits[] = {-1, 0, 1, 5, 100, 65536, 4 << 20, -1};
  if (size < 2)
    return 0;
  int64_t max_len = limits[data[0] % 8];
  size_t nsplit = data[1] % 16;
  if (size < 2 + nsplit)
    return 0;
  const uint8_t *cuts = data + 2;
  const uint8_t *p = data + 2 + nsplit;
  size_t n = size - 2 - nsplit;

  df_out ref = {0};
  bool ref_mid;
  grit_status_code want = df_reference(p, n, max_len, &ref, &ref_mid);

  grit_deframer d;
  grit_deframer_init(&d, max_len);
  df_out got = {0};
  memcpy(got.off, ref.off, sizeof(ref.off));
  memcpy(got.len, ref.len, sizeof(ref.len));
  got.base = p;
  got.n = 0;
  grit_status_code code = GRIT_STATUS_OK;
  size_t pos = 0;
  for (size_t k = 0; k <= nsplit && code == GRIT_STATUS_OK; k++) {
    /* Split points scale a byte over the payload; they may repeat (an
     * empty chunk) and go backwards (also empty). */
    size_t end = k == nsplit ? n : (size_t)cuts[k] * n / 255;
    if (end < pos)
      end = pos;
    const char *why = NULL;
    code = grit_deframer_feed(&d, p + pos, end - pos, df_on_msg, &got, &why);
    GRIT_ASSERT(code == GRIT_STATUS_OK || why != NULL);
    pos = end;
  }
  GRIT_ASSERT(code == want);
  GRIT_ASSERT(got.n == ref.n);
  GRIT_ASSERT(!got.mismatch);
  if (code == GRIT_STATUS_OK)
    GRIT_ASSERT(grit_deframer_mid_message(&d) == ref_mid);
  /* A partial body never holds more than twice what arrived (frame.c). */
  if (d.msg)
    GRIT_ASSERT(d.msg->len <= 64 * 1024 || d.msg->len <= 2 * d.msg_have);
  grit_deframer_free(&d);
  return 0;
}
