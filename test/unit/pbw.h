/* A protobuf wire writer for tests: builds messages bottom-up so a test
 * can state a resource field by field with the real field numbers. */
#ifndef GRIT_TEST_PBW_H
#define GRIT_TEST_PBW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pbw {
  uint8_t *b;
  size_t n, cap;
} pbw;

static inline void pbw_raw(pbw *w, const void *p, size_t n) {
  if (w->n + n > w->cap) {
    w->cap = (w->n + n) * 2 + 64;
    w->b = realloc(w->b, w->cap);
  }
  if (n)
    memcpy(w->b + w->n, p, n);
  w->n += n;
}

static inline void pbw_uvarint(pbw *w, uint64_t v) {
  uint8_t buf[10];
  size_t n = 0;
  do {
    buf[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      buf[n] |= 0x80;
    n++;
  } while (v);
  pbw_raw(w, buf, n);
}

static inline void pbw_varint(pbw *w, uint32_t field, uint64_t v) {
  pbw_uvarint(w, (uint64_t)field << 3);
  pbw_uvarint(w, v);
}

static inline void pbw_bytes(pbw *w, uint32_t field, const void *p, size_t n) {
  pbw_uvarint(w, (uint64_t)field << 3 | 2);
  pbw_uvarint(w, n);
  pbw_raw(w, p, n);
}

static inline void pbw_str(pbw *w, uint32_t field, const char *s) {
  pbw_bytes(w, field, s, strlen(s));
}

/* Append |sub| as a LEN field and free it. */
static inline void pbw_msg(pbw *w, uint32_t field, pbw *sub) {
  pbw_bytes(w, field, sub->b, sub->n);
  free(sub->b);
  memset(sub, 0, sizeof(*sub));
}

static inline void pbw_fixed32(pbw *w, uint32_t field, uint32_t v) {
  pbw_uvarint(w, (uint64_t)field << 3 | 5);
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                  (uint8_t)(v >> 24)};
  pbw_raw(w, b, 4);
}

static inline void pbw_double(pbw *w, uint32_t field, double d) {
  uint64_t v;
  memcpy(&v, &d, 8);
  pbw_uvarint(w, (uint64_t)field << 3 | 1);
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(v >> (8 * i));
  pbw_raw(w, b, 8);
}

/* A wrapper message (UInt32Value, BoolValue, ...) with |v| in field 1. */
static inline void pbw_wrapped(pbw *w, uint32_t field, uint64_t v) {
  pbw sub = {0};
  pbw_varint(&sub, 1, v);
  pbw_msg(w, field, &sub);
}

/* google.protobuf.Duration. */
static inline void pbw_duration(pbw *w, uint32_t field, int64_t sec,
                                int32_t nanos) {
  pbw sub = {0};
  if (sec)
    pbw_varint(&sub, 1, (uint64_t)sec);
  if (nanos)
    pbw_varint(&sub, 2, (uint64_t)(int64_t)nanos);
  pbw_msg(w, field, &sub);
}

/* google.protobuf.Any of |type| holding |value|. */
static inline void pbw_any(pbw *w, uint32_t field, const char *type,
                           pbw *value) {
  pbw any = {0};
  pbw_str(&any, 1, type);
  pbw_msg(&any, 2, value);
  pbw_msg(w, field, &any);
}

#endif
