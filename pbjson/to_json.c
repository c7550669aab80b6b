/* Wire bytes -> proto3 JSON (the protobuf JSON mapping): lowerCamel
 * names, 64-bit integers as strings, bytes in base64, enums by name,
 * NaN/Infinity as strings, maps as objects, and Timestamp, Duration and
 * the wrapper types in their JSON forms. Fields the descriptor lacks are
 * printed under their number (varints and fixed values as decimal
 * strings, length-delimited ones in base64), never dropped. */
#include "pbjson/pbjson_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef Google__Protobuf__FieldDescriptorProto field_desc;
#define T(x) GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__TYPE__TYPE_##x

typedef struct tj {
  const pbj_pool *pool;
  unsigned flags; /* PBJ_* */
  char *missing;  /* the Any type the pool lacked, when asked */
  size_t missing_len;
  pbj_buf out;
  char *err;
  size_t errlen;
} tj;

static bool fail(tj *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static bool fail(tj *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->err, t->errlen, fmt, ap);
  va_end(ap);
  return false;
}

static int wire_type_of(int type) {
  switch (type) {
  case T(DOUBLE):
  case T(FIXED64):
  case T(SFIXED64):
    return 1;
  case T(FLOAT):
  case T(FIXED32):
  case T(SFIXED32):
    return 5;
  case T(STRING):
  case T(BYTES):
  case T(MESSAGE):
  case T(GROUP):
    return 2;
  default:
    return 0;
  }
}

static void put_double(pbj_buf *b, double d, bool is_float) {
  if (isnan(d)) {
    pbj_puts(b, "\"NaN\"");
    return;
  }
  if (isinf(d)) {
    pbj_puts(b, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  if (d == 0 && signbit(d)) {
    pbj_puts(b, "-0.0"); /* "-0" would read back as the integer 0 */
    return;
  }
  /* The shortest text that reads back as the same value. */
  char tmp[40];
  for (int prec = is_float ? 6 : 15; prec <= 17; prec++) {
    snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
    if (is_float ? (float)strtod(tmp, NULL) == (float)d
                 : strtod(tmp, NULL) == d)
      break;
  }
  pbj_puts(b, tmp);
}

static bool put_enum(tj *t, const field_desc *f, int32_t v) {
  if (strcmp(pbj_strip_dot(f->type_name), "google.protobuf.NullValue") == 0) {
    pbj_puts(&t->out, "null"); /* its only value, as the mapping says */
    return true;
  }
  const Google__Protobuf__EnumDescriptorProto *e =
      pbj_find_enum(t->pool, pbj_strip_dot(f->type_name));
  for (size_t i = 0; e && i < e->n_value; i++) {
    if (e->value[i]->has_number && e->value[i]->number == v) {
      pbj_put_json_string(&t->out, e->value[i]->name,
                          strlen(e->value[i]->name));
      return true;
    }
  }
  pbj_putf(&t->out, "%" PRId32, v);
  return true;
}

/* A numeric value |v| as read for its wire type. */
static bool put_number(tj *t, const field_desc *f, uint64_t v) {
  pbj_buf *b = &t->out;
  switch (f->type) {
  case T(DOUBLE): {
    double d;
    memcpy(&d, &v, sizeof(d));
    put_double(b, d, false);
    return true;
  }
  case T(FLOAT): {
    uint32_t bits = (uint32_t)v;
    float fl;
    memcpy(&fl, &bits, sizeof(fl));
    put_double(b, fl, true);
    return true;
  }
  case T(INT64):
  case T(SFIXED64):
    pbj_putf(b, "\"%" PRId64 "\"", (int64_t)v);
    return true;
  case T(UINT64):
  case T(FIXED64):
    pbj_putf(b, "\"%" PRIu64 "\"", v);
    return true;
  case T(INT32):
  case T(SFIXED32):
    pbj_putf(b, "%" PRId32, (int32_t)(uint32_t)v);
    return true;
  case T(UINT32):
  case T(FIXED32):
    pbj_putf(b, "%" PRIu32, (uint32_t)v);
    return true;
  case T(SINT32): {
    uint32_t u = (uint32_t)v;
    pbj_putf(b, "%" PRId32, (int32_t)(u >> 1) ^ -(int32_t)(u & 1));
    return true;
  }
  case T(SINT64):
    pbj_putf(b, "\"%" PRId64 "\"", (int64_t)(v >> 1) ^ -(int64_t)(v & 1));
    return true;
  case T(BOOL):
    pbj_puts(b, v ? "true" : "false");
    return true;
  case T(ENUM):
    return put_enum(t, f, (int32_t)(uint32_t)v);
  default:
    return fail(t, "field %s: not a numeric type", f->name);
  }
}

static bool put_message(tj *t, const char *type, const uint8_t *p, size_t n,
                        int depth);
static bool put_map(tj *t, const field_desc *f,
                    const Google__Protobuf__DescriptorProto *ed,
                    const uint8_t *p, size_t n, size_t count, int depth);

/* One value of field |f| from wire field |w| (not packed). */
static bool put_value(tj *t, const field_desc *f, const pbj_wire_field *w,
                      int depth) {
  if (f->type == T(STRING)) {
    pbj_put_json_string(&t->out, (const char *)w->data, w->len);
    return true;
  }
  if (f->type == T(BYTES)) {
    pbj_put(&t->out, "\"", 1);
    pbj_put_base64(&t->out, w->data, w->len);
    pbj_put(&t->out, "\"", 1);
    return true;
  }
  if (f->type == T(MESSAGE))
    return put_message(t, pbj_strip_dot(f->type_name), w->data, w->len,
                       depth + 1);
  return put_number(t, f, w->v);
}

/* Each value in a packed run of field |f|, comma-separated. */
static bool put_packed(tj *t, const field_desc *f, const pbj_wire_field *w,
                       bool *first) {
  const uint8_t *p = w->data, *end = w->data + w->len;
  int wt = wire_type_of(f->type);
  while (p < end) {
    uint64_t v = 0;
    if (wt == 0) {
      if (!pbj_read_varint(&p, end, &v))
        return fail(t, "field %s: a malformed packed varint", f->name);
    } else {
      size_t k = wt == 1 ? 8 : 4;
      if ((size_t)(end - p) < k)
        return fail(t, "field %s: a truncated packed value", f->name);
      for (size_t i = 0; i < k; i++)
        v |= (uint64_t)p[i] << (8 * i);
      p += k;
    }
    if (!*first)
      pbj_put(&t->out, ",", 1);
    *first = false;
    if (!put_number(t, f, v))
      return false;
  }
  return true;
}

/* A map entry's key as a JSON object key. */
static bool put_map_key(tj *t, const field_desc *kf, const pbj_wire_field *w) {
  if (!kf || kf->type == T(STRING)) {
    pbj_put_json_string(&t->out, w ? (const char *)w->data : "",
                        w ? w->len : 0);
    return true;
  }
  pbj_buf saved = t->out;
  t->out = (pbj_buf){0};
  bool ok = put_number(t, kf, w ? w->v : 0);
  pbj_buf num = t->out;
  t->out = saved;
  if (ok) {
    const char *s = num.p ? (const char *)num.p : "";
    size_t n = num.len;
    if (n >= 2 && s[0] == '"') /* 64-bit keys come quoted already */
      pbj_put(&t->out, s, n);
    else
      pbj_put_json_string(&t->out, s, n);
  }
  ok = ok && (!num.oom || fail(t, "%s", "out of memory"));
  pbj_buf_free(&num);
  return ok;
}

/* A map entry's key and value fields (the last of each). */
static bool split_entry(tj *t, const Google__Protobuf__DescriptorProto *ed,
                        const pbj_wire_field *w, pbj_wire_field *k, bool *has_k,
                        pbj_wire_field *v, bool *has_v) {
  const field_desc *kf = pbj_field_by_number(ed, 1);
  const field_desc *vf = pbj_field_by_number(ed, 2);
  pbj_wire_field x;
  *has_k = *has_v = false;
  const uint8_t *p = w->data, *end = w->data + w->len;
  int r;
  while ((r = pbj_wire_next(&p, end, &x)) == 1) {
    if (x.num == 1) {
      *k = x;
      *has_k = true;
    } else if (x.num == 2) {
      *v = x;
      *has_v = true;
    }
  }
  if (r < 0 || !vf || !kf || (*has_k && k->wt != wire_type_of(kf->type)) ||
      (*has_v && v->wt != wire_type_of(vf->type)))
    return fail(t, "a malformed map entry of %s", ed->name);
  return true;
}

/* The JSON key text of a map entry, malloc'd; NULL on error. */
static char *map_key_text(tj *t, const Google__Protobuf__DescriptorProto *ed,
                          const pbj_wire_field *w) {
  pbj_wire_field k = {0}, v;
  bool has_k, has_v;
  if (!split_entry(t, ed, w, &k, &has_k, &v, &has_v))
    return NULL;
  pbj_buf saved = t->out;
  t->out = (pbj_buf){0};
  bool ok = put_map_key(t, pbj_field_by_number(ed, 1), has_k ? &k : NULL);
  pbj_put(&t->out, "", 0);
  bool oom = t->out.oom;
  char *text = ok && !oom ? (char *)t->out.p : NULL;
  if (!text)
    pbj_buf_free(&t->out);
  t->out = saved;
  if (ok && oom)
    fail(t, "%s", "out of memory");
  return text;
}

static bool put_map_entry(tj *t, const Google__Protobuf__DescriptorProto *ed,
                          const pbj_wire_field *w, const char *key, int depth) {
  const field_desc *vf = pbj_field_by_number(ed, 2);
  pbj_wire_field k = {0}, v = {0};
  bool has_k, has_v;
  if (!split_entry(t, ed, w, &k, &has_k, &v, &has_v))
    return false;
  pbj_puts(&t->out, key);
  pbj_put(&t->out, ":", 1);
  if (has_v)
    return put_value(t, vf, &v, depth);
  /* An absent value is the default. */
  if (vf->type == T(MESSAGE)) {
    pbj_puts(&t->out, "{}");
    return true;
  }
  if (vf->type == T(STRING) || vf->type == T(BYTES)) {
    pbj_puts(&t->out, "\"\"");
    return true;
  }
  return put_number(t, vf, 0);
}

/* ---- well-known types ---- */

/* Seconds and nanos of a Timestamp or Duration. */
static bool read_secs_nanos(tj *t, const uint8_t *p, size_t n, int64_t *secs,
                            int32_t *nanos) {
  const uint8_t *end = p + n;
  pbj_wire_field w;
  int r;
  *secs = 0;
  *nanos = 0;
  while ((r = pbj_wire_next(&p, end, &w)) == 1) {
    if (w.num == 1 && w.wt == 0)
      *secs = (int64_t)w.v;
    else if (w.num == 2 && w.wt == 0)
      *nanos = (int32_t)(uint32_t)w.v;
  }
  return r == 0 ? true : fail(t, "%s", "a malformed Timestamp or Duration");
}

/* Nanoseconds as 0, 3, 6 or 9 digits, as protobuf prints them. */
static void put_nanos(pbj_buf *b, int32_t nanos) {
  if (nanos == 0)
    return;
  if (nanos % 1000000 == 0)
    pbj_putf(b, ".%03" PRId32, nanos / 1000000);
  else if (nanos % 1000 == 0)
    pbj_putf(b, ".%06" PRId32, nanos / 1000);
  else
    pbj_putf(b, ".%09" PRId32, nanos);
}

static bool put_timestamp(tj *t, const uint8_t *p, size_t n) {
  int64_t secs;
  int32_t nanos;
  if (!read_secs_nanos(t, p, n, &secs, &nanos))
    return false;
  /* 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z, as the mapping says. */
  if (secs < -62135596800LL || secs > 253402300799LL || nanos < 0 ||
      nanos > 999999999)
    return fail(t, "%s", "a Timestamp out of range");
  time_t tt = (time_t)secs;
  struct tm tm;
  if (!gmtime_r(&tt, &tm))
    return fail(t, "%s", "a Timestamp out of range");
  pbj_putf(&t->out, "\"%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  put_nanos(&t->out, nanos);
  pbj_puts(&t->out, "Z\"");
  return true;
}

static bool put_duration(tj *t, const uint8_t *p, size_t n) {
  int64_t secs;
  int32_t nanos;
  if (!read_secs_nanos(t, p, n, &secs, &nanos))
    return false;
  if (secs < -315576000000LL || secs > 315576000000LL || nanos < -999999999 ||
      nanos > 999999999 || (secs > 0 && nanos < 0) || (secs < 0 && nanos > 0))
    return fail(t, "%s", "a Duration out of range");
  bool neg = secs < 0 || nanos < 0;
  pbj_putf(&t->out, "\"%s%" PRId64, neg ? "-" : "", neg ? -secs : secs);
  put_nanos(&t->out, neg ? -nanos : nanos);
  pbj_puts(&t->out, "s\"");
  return true;
}

static bool is_wrapper(const char *type) {
  static const char *const names[] = {
      "DoubleValue", "FloatValue", "Int64Value",  "UInt64Value", "Int32Value",
      "UInt32Value", "BoolValue",  "StringValue", "BytesValue"};
  if (strncmp(type, "google.protobuf.", 16) != 0)
    return false;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (strcmp(type + 16, names[i]) == 0)
      return true;
  }
  return false;
}

/* The JSON form of google.protobuf.|name| is not an object of its fields:
 * Any packs such a type as {"@type": ..., "value": <its JSON>}. */
static bool has_special_json(const char *type) {
  static const char *const names[] = {
      "google.protobuf.Any",       "google.protobuf.Duration",
      "google.protobuf.FieldMask", "google.protobuf.ListValue",
      "google.protobuf.Struct",    "google.protobuf.Timestamp",
      "google.protobuf.Value"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (strcmp(type, names[i]) == 0)
      return true;
  }
  return is_wrapper(type);
}

/* The last occurrence of field |num| (any wire type) in |p|; false if
 * none. */
static bool last_field(const uint8_t *p, size_t n, uint32_t num,
                       pbj_wire_field *out) {
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w;
  bool found = false;
  while (pbj_wire_next(&q, end, &w) == 1) {
    if (w.num == num) {
      *out = w;
      found = true;
    }
  }
  return found;
}

/* Struct: its fields map as a JSON object (the map code does the work:
 * each value is a Value, printed by put_value_wkt). */
static bool put_struct(tj *t, const Google__Protobuf__DescriptorProto *d,
                       const uint8_t *p, size_t n, int depth) {
  const field_desc *f = pbj_field_by_number(d, 1);
  const Google__Protobuf__DescriptorProto *ed =
      f && f->type == T(MESSAGE)
          ? pbj_find_message(t->pool, pbj_strip_dot(f->type_name))
          : NULL;
  if (!ed || !pbj_is_map_entry(ed))
    return fail(t, "%s", "google.protobuf.Struct lacks its fields map");
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w;
  size_t count = 0;
  while (pbj_wire_next(&q, end, &w) == 1) {
    if (w.num == 1 && w.wt != 2)
      return fail(t, "%s", "a malformed google.protobuf.Struct");
    count += w.num == 1;
  }
  return put_map(t, f, ed, p, n, count, depth);
}

/* ListValue: its values as a JSON array. */
static bool put_list_value(tj *t, const uint8_t *p, size_t n, int depth) {
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w;
  pbj_put(&t->out, "[", 1);
  bool first = true;
  while (pbj_wire_next(&q, end, &w) == 1) {
    if (w.num != 1)
      continue;
    if (w.wt != 2)
      return fail(t, "%s", "a malformed google.protobuf.ListValue");
    if (!first)
      pbj_put(&t->out, ",", 1);
    first = false;
    if (!put_message(t, "google.protobuf.Value", w.data, w.len, depth + 1))
      return false;
  }
  pbj_put(&t->out, "]", 1);
  return true;
}

/* Value: the kind set last (a oneof); none set prints null, as
 * python-protobuf's json_format does. */
static bool put_value_wkt(tj *t, const uint8_t *p, size_t n, int depth) {
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w, kind = {0};
  while (pbj_wire_next(&q, end, &w) == 1) {
    if (w.num >= 1 && w.num <= 6)
      kind = w;
  }
  static const int want[7] = {-1, 0, 1, 2, 0, 2, 2};
  if (kind.num && kind.wt != want[kind.num])
    return fail(t, "%s", "a malformed google.protobuf.Value");
  switch (kind.num) {
  case 2: {
    double d;
    memcpy(&d, &kind.v, sizeof(d));
    put_double(&t->out, d, false);
    return true;
  }
  case 3:
    pbj_put_json_string(&t->out, (const char *)kind.data, kind.len);
    return true;
  case 4:
    pbj_puts(&t->out, kind.v ? "true" : "false");
    return true;
  case 5:
    return put_message(t, "google.protobuf.Struct", kind.data, kind.len,
                       depth + 1);
  case 6:
    return put_message(t, "google.protobuf.ListValue", kind.data, kind.len,
                       depth + 1);
  default: /* 1 (null_value) or no kind */
    pbj_puts(&t->out, "null");
    return true;
  }
}

/* FieldMask: the paths in lowerCamelCase, joined by ','. A path that does
 * not map back (an upper-case letter, '_' not before a lower-case one)
 * is an error, as in python-protobuf. */
static bool put_field_mask(tj *t, const uint8_t *p, size_t n) {
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w;
  pbj_buf s = {0};
  bool first = true;
  while (pbj_wire_next(&q, end, &w) == 1) {
    if (w.num != 1)
      continue;
    if (w.wt != 2) {
      pbj_buf_free(&s);
      return fail(t, "%s", "a malformed google.protobuf.FieldMask");
    }
    if (!first)
      pbj_put(&s, ",", 1);
    first = false;
    for (size_t i = 0; i < w.len; i++) {
      char c = (char)w.data[i];
      bool bad = (c >= 'A' && c <= 'Z') || c == ',';
      if (c == '_') {
        char nx = i + 1 < w.len ? (char)w.data[i + 1] : 0;
        bad = !(nx >= 'a' && nx <= 'z');
        if (!bad) {
          c = (char)(nx - 'a' + 'A');
          i++;
        }
      }
      if (bad) {
        pbj_buf_free(&s);
        return fail(t,
                    "FieldMask path '%.*s' has no JSON form (upper case, "
                    "',' or '_' not before a lower-case letter)",
                    (int)w.len, (const char *)w.data);
      }
      pbj_put(&s, &c, 1);
    }
  }
  pbj_put_json_string(&t->out, s.p ? (const char *)s.p : "", s.len);
  bool ok = !s.oom || fail(t, "%s", "out of memory");
  pbj_buf_free(&s);
  return ok;
}

/* Any: {"@type": URL, fields of the packed message...}, or for a packed
 * type with its own JSON form {"@type": URL, "value": ...}. The packed
 * type comes from the pool (the part of the URL after its last '/'); one
 * the pool lacks is an error naming it (t->missing), or with
 * PBJ_ANY_RAW {"@type": URL, "@value": "<base64 of the bytes>"}. */
static bool put_any_as(tj *t, const pbj_wire_field *url,
                       const pbj_wire_field *val, const char *name, int depth);

static bool put_any(tj *t, const uint8_t *p, size_t n, int depth) {
  pbj_wire_field url = {0}, val = {0};
  bool has_url = last_field(p, n, 1, &url);
  bool has_val = last_field(p, n, 2, &val);
  if ((has_url && url.wt != 2) || (has_val && val.wt != 2))
    return fail(t, "%s", "a malformed google.protobuf.Any");
  if (!has_url && !has_val) {
    pbj_puts(&t->out, "{}");
    return true;
  }
  if (!has_url || url.len == 0 || !url.data)
    return fail(t, "%s", "a google.protobuf.Any without a type URL");
  const char *slash = memrchr(url.data, '/', url.len);
  size_t off = slash ? (size_t)((const uint8_t *)slash - url.data) + 1 : 0;
  /* A URL holding U+0000 names no type. */
  char *name = memchr(url.data, '\0', url.len)
                   ? strdup("")
                   : strndup((const char *)url.data + off, url.len - off);
  if (!name)
    return fail(t, "%s", "out of memory");
  bool ok = put_any_as(t, &url, has_val ? &val : NULL, name, depth);
  free(name);
  return ok;
}

/* put_any with the packed type's name |name| worked out. */
static bool put_any_as(tj *t, const pbj_wire_field *url,
                       const pbj_wire_field *val, const char *name, int depth) {
  bool has_val = val != NULL;
  if (!pbj_find_message(t->pool, name)) {
    if (!(t->flags & PBJ_ANY_RAW)) {
      if (t->missing)
        snprintf(t->missing, t->missing_len, "%s", name);
      return fail(t, "the type of an Any, %.*s, is not in the descriptors",
                  (int)(url->len > 200 ? 200 : url->len),
                  (const char *)url->data);
    }
    pbj_puts(&t->out, "{\"@type\":");
    pbj_put_json_string(&t->out, (const char *)url->data, url->len);
    pbj_puts(&t->out, ",\"@value\":\"");
    pbj_put_base64(&t->out, has_val ? val->data : NULL, has_val ? val->len : 0);
    pbj_puts(&t->out, "\"}");
    return true;
  }
  pbj_buf saved = t->out;
  t->out = (pbj_buf){0};
  bool ok = put_message(t, name, has_val ? val->data : (const uint8_t *)"",
                        has_val ? val->len : 0, depth + 1);
  pbj_buf inner = t->out;
  t->out = saved;
  if (ok && !inner.oom) {
    pbj_puts(&t->out, "{\"@type\":");
    pbj_put_json_string(&t->out, (const char *)url->data, url->len);
    if (has_special_json(name)) {
      pbj_puts(&t->out, ",\"value\":");
      pbj_put(&t->out, inner.p, inner.len);
      pbj_puts(&t->out, "}");
    } else if (inner.len > 2) { /* "{...}": its fields after @type */
      pbj_put(&t->out, ",", 1);
      pbj_put(&t->out, inner.p + 1, inner.len - 1);
    } else {
      pbj_puts(&t->out, "}");
    }
  }
  ok = ok && (!inner.oom || fail(t, "%s", "out of memory"));
  pbj_buf_free(&inner);
  return ok;
}

/* ---- messages ---- */

typedef struct unknown_field {
  pbj_wire_field w;
  size_t order;
} unknown_field;

static int cmp_unknown(const void *a, const void *b) {
  const unknown_field *x = a, *y = b;
  if (x->w.num != y->w.num)
    return x->w.num < y->w.num ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

static void put_unknown_value(pbj_buf *b, const pbj_wire_field *w) {
  if (w->wt == 2) {
    pbj_put(b, "\"", 1);
    pbj_put_base64(b, w->data, w->len);
    pbj_put(b, "\"", 1);
  } else {
    pbj_putf(b, "\"%" PRIu64 "\"", w->v);
  }
}

/* Fields the descriptor lacks, grouped by number in ascending order. */
static bool put_unknown(tj *t, const Google__Protobuf__DescriptorProto *d,
                        const uint8_t *p, size_t n, bool *first) {
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w;
  size_t count = 0;
  while (pbj_wire_next(&q, end, &w) == 1)
    count += pbj_field_by_number(d, w.num) == NULL;
  if (count == 0)
    return true;
  unknown_field *u = malloc(count * sizeof(*u));
  if (!u)
    return fail(t, "%s", "out of memory");
  size_t k = 0;
  for (q = p; pbj_wire_next(&q, end, &w) == 1;) {
    if (!pbj_field_by_number(d, w.num)) {
      u[k] = (unknown_field){w, k};
      k++;
    }
  }
  qsort(u, count, sizeof(*u), cmp_unknown);
  for (size_t i = 0; i < count;) {
    size_t j = i;
    while (j < count && u[j].w.num == u[i].w.num)
      j++;
    pbj_putf(&t->out, "%s\"%" PRIu32 "\":", *first ? "" : ",", u[i].w.num);
    *first = false;
    if (j - i > 1)
      pbj_put(&t->out, "[", 1);
    for (size_t m = i; m < j; m++) {
      if (m > i)
        pbj_put(&t->out, ",", 1);
      put_unknown_value(&t->out, &u[m].w);
    }
    if (j - i > 1)
      pbj_put(&t->out, "]", 1);
    i = j;
  }
  free(u);
  return true;
}

/* A map field's |count| entries as an object. A key that comes again
 * later is skipped: the last entry wins, as protobuf parsers do. */
static bool put_map(tj *t, const field_desc *f,
                    const Google__Protobuf__DescriptorProto *ed,
                    const uint8_t *p, size_t n, size_t count, int depth) {
  char **keys = calloc(count, sizeof(char *));
  pbj_wire_field *entries = calloc(count, sizeof(*entries));
  bool ok = keys && entries;
  if (!ok)
    fail(t, "%s", "out of memory");
  size_t k = 0;
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w;
  while (ok && k < count && pbj_wire_next(&q, end, &w) == 1) {
    if (w.num != (uint32_t)f->number)
      continue;
    entries[k] = w;
    keys[k] = map_key_text(t, ed, &w);
    ok = keys[k++] != NULL;
  }
  pbj_put(&t->out, "{", 1);
  bool first = true;
  for (size_t i = 0; ok && i < k; i++) {
    bool later = false;
    for (size_t j = i + 1; !later && j < k; j++)
      later = strcmp(keys[i], keys[j]) == 0;
    if (later)
      continue;
    if (!first)
      pbj_put(&t->out, ",", 1);
    first = false;
    ok = put_map_entry(t, ed, &entries[i], keys[i], depth);
  }
  pbj_put(&t->out, "}", 1);
  for (size_t i = 0; keys && i < k; i++)
    free(keys[i]);
  free(keys);
  free(entries);
  return ok;
}

/* The occurrences of field |f| in |p|: all for a repeated field (as a JSON
 * array or map), the last for a singular one. */
static bool put_field(tj *t, const field_desc *f, const uint8_t *p, size_t n,
                      bool *first, int depth) {
  const uint8_t *q = p, *end = p + n, *last_at = NULL;
  pbj_wire_field w;
  bool repeated =
      f->label ==
      GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__LABEL__LABEL_REPEATED;
  int want = wire_type_of(f->type);
  size_t seen = 0;
  while (pbj_wire_next(&q, end, &w) == 1) {
    if (w.num != (uint32_t)f->number)
      continue;
    bool packed = repeated && want != 2 && w.wt == 2;
    if (w.wt != want && !packed)
      return fail(t, "field %s: the wire type does not match its type",
                  f->name);
    seen++;
    last_at = q;
  }
  if (seen == 0)
    return true;
  const Google__Protobuf__DescriptorProto *entry =
      f->type == T(MESSAGE)
          ? pbj_find_message(t->pool, pbj_strip_dot(f->type_name))
          : NULL;
  if (f->type == T(MESSAGE) && !entry)
    return fail(t, "type %s is not in the descriptors", f->type_name);
  bool is_map = repeated && pbj_is_map_entry(entry);
  char tmp[256];
  size_t key_at = t->out.len;
  bool was_first = *first;
  pbj_putf(&t->out, "%s", *first ? "" : ",");
  const char *jn = pbj_json_name(f, tmp, sizeof(tmp));
  pbj_put_json_string(&t->out, jn, strlen(jn));
  pbj_put(&t->out, ":", 1);
  *first = false;
  if (!repeated) {
    /* The last occurrence wins (for messages protobuf merges them; the
     * last is what a server sending one copy means). */
    for (q = p; pbj_wire_next(&q, end, &w) == 1;) {
      if (w.num == (uint32_t)f->number && q == last_at)
        return put_value(t, f, &w, depth);
    }
    return true;
  }
  if (is_map)
    return put_map(t, f, entry, p, n, seen, depth);
  pbj_put(&t->out, "[", 1);
  bool first_v = true;
  for (q = p; pbj_wire_next(&q, end, &w) == 1;) {
    if (w.num != (uint32_t)f->number)
      continue;
    if (w.wt == 2 && want != 2) {
      if (!put_packed(t, f, &w, &first_v))
        return false;
      continue;
    }
    if (!first_v)
      pbj_put(&t->out, ",", 1);
    first_v = false;
    if (!put_value(t, f, &w, depth))
      return false;
  }
  if (first_v && !t->out.oom) {
    /* Only empty packed runs: no values, so no field (as protobuf). */
    t->out.len = key_at;
    t->out.p[key_at] = '\0';
    *first = was_first;
    return true;
  }
  pbj_put(&t->out, "]", 1);
  return true;
}

/* --emit-defaults: an absent field at its default, as json_format's
 * including_default_value_fields: scalars, repeated fields ([]) and maps
 * ({}), not singular messages, oneof members or proto3 optional fields
 * (their absence means something). */
static void put_default(tj *t, const field_desc *f, bool *first) {
  bool repeated =
      f->label ==
      GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__LABEL__LABEL_REPEATED;
  if (!repeated && (f->type == T(MESSAGE) || f->has_oneof_index))
    return;
  char tmp[256];
  const char *jn = pbj_json_name(f, tmp, sizeof(tmp));
  if (!*first)
    pbj_put(&t->out, ",", 1);
  *first = false;
  pbj_put_json_string(&t->out, jn, strlen(jn));
  pbj_put(&t->out, ":", 1);
  if (repeated) {
    const Google__Protobuf__DescriptorProto *e =
        f->type == T(MESSAGE)
            ? pbj_find_message(t->pool, pbj_strip_dot(f->type_name))
            : NULL;
    pbj_puts(&t->out, pbj_is_map_entry(e) ? "{}" : "[]");
  } else if (f->type == T(STRING) || f->type == T(BYTES)) {
    pbj_puts(&t->out, "\"\"");
  } else {
    put_number(t, f, 0);
  }
}

static bool put_message(tj *t, const char *type, const uint8_t *p, size_t n,
                        int depth) {
  if (depth > PBJ_MAX_DEPTH)
    return fail(t, "%s", "messages nested deeper than 64");
  const Google__Protobuf__DescriptorProto *d = pbj_find_message(t->pool, type);
  if (!d)
    return fail(t, "type %s is not in the descriptors", type);
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w;
  int r;
  while ((r = pbj_wire_next(&q, end, &w)) == 1) {
  }
  if (r < 0)
    return fail(t, "the bytes are not a valid %s", type);
  if (strcmp(type, "google.protobuf.Timestamp") == 0)
    return put_timestamp(t, p, n);
  if (strcmp(type, "google.protobuf.Duration") == 0)
    return put_duration(t, p, n);
  if (strcmp(type, "google.protobuf.Struct") == 0)
    return put_struct(t, d, p, n, depth);
  if (strcmp(type, "google.protobuf.Value") == 0)
    return put_value_wkt(t, p, n, depth);
  if (strcmp(type, "google.protobuf.ListValue") == 0)
    return put_list_value(t, p, n, depth);
  if (strcmp(type, "google.protobuf.FieldMask") == 0)
    return put_field_mask(t, p, n);
  if (strcmp(type, "google.protobuf.Any") == 0)
    return put_any(t, p, n, depth);
  if (is_wrapper(type)) {
    const field_desc *vf = pbj_field_by_number(d, 1);
    if (!vf)
      return fail(t, "%s lacks its value field", type);
    const uint8_t *last = NULL;
    pbj_wire_field lw = {0};
    for (q = p; pbj_wire_next(&q, end, &w) == 1;) {
      if (w.num == 1 && w.wt == wire_type_of(vf->type)) {
        lw = w;
        last = q;
      }
    }
    if (last)
      return put_value(t, vf, &lw, depth);
    if (vf->type == T(STRING) || vf->type == T(BYTES)) {
      pbj_puts(&t->out, "\"\"");
      return true;
    }
    return put_number(t, vf, 0);
  }
  pbj_put(&t->out, "{", 1);
  bool first = true;
  for (size_t i = 0; i < d->n_field; i++) {
    if (!d->field[i]->has_number || !d->field[i]->name)
      continue;
    if (d->field[i]->type == T(GROUP))
      continue; /* groups fail pbj_wire_next before this */
    size_t before = t->out.len;
    if (!put_field(t, d->field[i], p, n, &first, depth))
      return false;
    if (t->out.len == before && (t->flags & PBJ_EMIT_DEFAULTS))
      put_default(t, d->field[i], &first);
  }
  if (!put_unknown(t, d, p, n, &first))
    return false;
  pbj_put(&t->out, "}", 1);
  return true;
}

char *pbj_to_json(const pbj_pool *pool, const char *type, const uint8_t *p,
                  size_t n, char *err, size_t errlen) {
  return pbj_to_json_ex(pool, type, p, n, 0, NULL, 0, err, errlen);
}

char *pbj_to_json_ex(const pbj_pool *pool, const char *type, const uint8_t *p,
                     size_t n, unsigned flags, char *missing,
                     size_t missing_len, char *err, size_t errlen) {
  if (missing && missing_len)
    missing[0] = '\0';
  tj t = {.pool = pool,
          .flags = flags,
          .missing = missing,
          .missing_len = missing_len,
          .err = err,
          .errlen = errlen};
  if (!put_message(&t, type, p, n, 0) || t.out.oom) {
    if (t.out.oom)
      snprintf(err, errlen, "out of memory");
    pbj_buf_free(&t.out);
    return NULL;
  }
  return (char *)t.out.p;
}
