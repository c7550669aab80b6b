/* Protobuf wire-format reading (see pbwire.h). */
#include "util/pbwire.h"

#include <string.h>

bool grit_pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*p >= end)
      return false;
    uint8_t b = *(*p)++;
    if (shift == 63 && b > 1)
      return false; /* more than 64 bits */
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

int grit_pbr_next(grit_pbr *r, grit_pbf *f) {
  if (r->p >= r->end)
    return 0;
  const uint8_t *p = r->p;
  uint64_t key;
  if (!grit_pb_varint(&p, r->end, &key) || key >> 3 == 0 ||
      key >> 3 > 0x1fffffff)
    return -1;
  f->num = (uint32_t)(key >> 3);
  f->wt = (uint8_t)(key & 7);
  f->v = 0;
  f->data = NULL;
  f->len = 0;
  switch (f->wt) {
  case GRIT_PB_VARINT:
    if (!grit_pb_varint(&p, r->end, &f->v))
      return -1;
    break;
  case GRIT_PB_I64:
    if (r->end - p < 8)
      return -1;
    for (int i = 7; i >= 0; i--)
      f->v = (f->v << 8) | p[i];
    p += 8;
    break;
  case GRIT_PB_I32:
    if (r->end - p < 4)
      return -1;
    for (int i = 3; i >= 0; i--)
      f->v = (f->v << 8) | p[i];
    p += 4;
    break;
  case GRIT_PB_LEN: {
    uint64_t n;
    if (!grit_pb_varint(&p, r->end, &n) || n > (uint64_t)(r->end - p))
      return -1;
    f->data = p;
    f->len = (size_t)n;
    p += n;
    break;
  }
  default:
    return -1; /* groups (3, 4) and reserved types */
  }
  r->p = p;
  return 1;
}

double grit_pbf_double(const grit_pbf *f) {
  if (f->wt != GRIT_PB_I64)
    return 0;
  double d;
  memcpy(&d, &f->v, sizeof(d));
  return d;
}

float grit_pbf_float(const grit_pbf *f) {
  if (f->wt != GRIT_PB_I32)
    return 0;
  uint32_t bits = (uint32_t)f->v;
  float x;
  memcpy(&x, &bits, sizeof(x));
  return x;
}

/* Field 1 of a wrapper message, of wire type |wt|. */
static bool wrapped(const grit_pbf *f, uint8_t wt, grit_pbf *out) {
  if (f->wt != GRIT_PB_LEN)
    return false;
  grit_pbr r;
  grit_pbf_sub(f, &r);
  memset(out, 0, sizeof(*out));
  out->wt = wt;
  grit_pbf g;
  int rc;
  while ((rc = grit_pbr_next(&r, &g)) == 1) {
    if (g.num == 1) {
      if (g.wt != wt)
        return false;
      *out = g; /* the last one wins, as in protobuf */
    }
  }
  return rc == 0;
}

bool grit_pb_wrapped_u64(const grit_pbf *f, uint64_t *out) {
  grit_pbf g;
  if (!wrapped(f, GRIT_PB_VARINT, &g))
    return false;
  *out = g.v;
  return true;
}

bool grit_pb_wrapped_bool(const grit_pbf *f, bool *out) {
  grit_pbf g;
  if (!wrapped(f, GRIT_PB_VARINT, &g))
    return false;
  *out = g.v != 0;
  return true;
}

bool grit_pb_wrapped_double(const grit_pbf *f, double *out) {
  grit_pbf g;
  if (wrapped(f, GRIT_PB_I64, &g)) {
    *out = grit_pbf_double(&g);
    return true;
  }
  if (wrapped(f, GRIT_PB_I32, &g)) { /* FloatValue */
    *out = grit_pbf_float(&g);
    return true;
  }
  return false;
}

bool grit_pb_duration_ns(const grit_pbf *f, int64_t *ns) {
  if (f->wt != GRIT_PB_LEN)
    return false;
  grit_pbr r;
  grit_pbf_sub(f, &r);
  int64_t sec = 0, nanos = 0;
  grit_pbf g;
  int rc;
  while ((rc = grit_pbr_next(&r, &g)) == 1) {
    if (g.wt != GRIT_PB_VARINT && (g.num == 1 || g.num == 2))
      return false;
    if (g.num == 1)
      sec = (int64_t)g.v;
    else if (g.num == 2)
      nanos = (int32_t)(uint32_t)g.v;
  }
  if (rc != 0 || sec < 0 || nanos < 0 || nanos >= 1000000000)
    return false;
  if (sec > (INT64_MAX - nanos) / 1000000000)
    return false;
  *ns = sec * 1000000000 + nanos;
  return true;
}

bool grit_pb_utf8_ok(const uint8_t *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    uint8_t c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      n = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (len - i < n)
      return false;
    for (size_t k = 1; k < n; k++) {
      if ((s[i + k] & 0xc0) != 0x80)
        return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n;
  }
  return true;
}
