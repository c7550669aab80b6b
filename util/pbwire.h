/* A protobuf wire-format reader (proto3, no groups): a cursor over a byte
 * range that yields one field at a time. Pure; used by decoders written
 * from message definitions (xDS resources, ORCA load reports). Every read
 * is bounds-checked; malformed input is reported, never trusted. */
#ifndef GRIT_PBWIRE_H
#define GRIT_PBWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
  GRIT_PB_VARINT = 0,
  GRIT_PB_I64 = 1,
  GRIT_PB_LEN = 2,
  GRIT_PB_I32 = 5,
};

typedef struct grit_pbr {
  const uint8_t *p, *end;
} grit_pbr;

/* One field: its number and wire type; |v| holds a VARINT, I64 or I32
 * value, |data|/|len| a LEN field's bytes (borrowed from the input). */
typedef struct grit_pbf {
  uint32_t num;
  uint8_t wt;
  uint64_t v;
  const uint8_t *data;
  size_t len;
} grit_pbf;

static inline void grit_pbr_init(grit_pbr *r, const uint8_t *p, size_t n) {
  r->p = p;
  r->end = p + n;
}

/* The next field: 1 (|f| filled), 0 at the end, -1 on malformed input
 * (truncated, a bad varint, field number 0, a group or reserved wire
 * type). After -1 the reader stays at the bad spot. */
int grit_pbr_next(grit_pbr *r, grit_pbf *f);

/* Read a varint at |*p| (before |end|). Returns false on a malformed or
 * truncated one. */
bool grit_pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out);

/* The value of a LEN field as a sub-reader. */
static inline void grit_pbf_sub(const grit_pbf *f, grit_pbr *sub) {
  grit_pbr_init(sub, f->data, f->len);
}

/* A double or float field's value (I64 / I32 wire types). */
double grit_pbf_double(const grit_pbf *f);
float grit_pbf_float(const grit_pbf *f);

/* Wrapper messages (google.protobuf.UInt32Value, UInt64Value, BoolValue,
 * DoubleValue, FloatValue): their field 1 from a LEN field. Return false on
 * malformed input; an empty wrapper is 0. */
bool grit_pb_wrapped_u64(const grit_pbf *f, uint64_t *out);
bool grit_pb_wrapped_bool(const grit_pbf *f, bool *out);
bool grit_pb_wrapped_double(const grit_pbf *f, double *out);

/* google.protobuf.Duration in a LEN field, as nanoseconds. Returns false on
 * malformed input, a negative duration, nanos outside [0, 1e9), or one
 * over INT64_MAX ns. */
bool grit_pb_duration_ns(const grit_pbf *f, int64_t *ns);

/* Whether the |len| bytes at |s| are valid UTF-8 (proto3 strings). */
bool grit_pb_utf8_ok(const uint8_t *s, size_t len);

#endif
