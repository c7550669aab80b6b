/* Proto3 JSON -> wire bytes, the inverse of to_json.c. Field names are the
 * JSON name or the proto name; null means absent; integers come as JSON
 * numbers or strings, floats also as "NaN"/"Infinity"/"-Infinity", bytes
 * as base64, enums by name or number. Anything else is an error that
 * names the JSON path ("$.responseParameters[1].size"). */
#include "pbjson/pbjson_int.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef Google__Protobuf__FieldDescriptorProto field_desc;
#define T(x) GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__TYPE__TYPE_##x

typedef struct fj {
  const pbj_pool *pool;
  char path[512];
  size_t path_len;
  char *err;
  size_t errlen;
} fj;

static bool fail(fj *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static bool fail(fj *f, const char *fmt, ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  snprintf(f->err, f->errlen, "%s: %s", f->path, why);
  return false;
}

/* Append ".name" or "[i]" to the path; returns the length to restore. */
static size_t push_name(fj *f, const char *name) {
  size_t saved = f->path_len;
  int n = snprintf(f->path + f->path_len, sizeof(f->path) - f->path_len, ".%s",
                   name);
  if (n > 0)
    f->path_len += (size_t)n < sizeof(f->path) - f->path_len
                       ? (size_t)n
                       : sizeof(f->path) - f->path_len - 1;
  return saved;
}

static size_t push_index(fj *f, size_t i) {
  char tmp[32];
  snprintf(tmp, sizeof(tmp), "[%zu]", i);
  size_t saved = f->path_len;
  int n =
      snprintf(f->path + f->path_len, sizeof(f->path) - f->path_len, "%s", tmp);
  if (n > 0)
    f->path_len += (size_t)n < sizeof(f->path) - f->path_len
                       ? (size_t)n
                       : sizeof(f->path) - f->path_len - 1;
  return saved;
}

static void pop(fj *f, size_t saved) {
  f->path_len = saved;
  f->path[saved] = '\0';
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

static void put_fixed(pbj_buf *b, uint64_t v, size_t n) {
  uint8_t tmp[8];
  for (size_t i = 0; i < n; i++)
    tmp[i] = (uint8_t)(v >> (8 * i));
  pbj_put(b, tmp, n);
}

/* An integer from a JSON integer, an integral real, or a decimal string. */
static bool get_int(fj *f, json_t *v, bool is_signed, int64_t *s, uint64_t *u) {
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    *s = (int64_t)i;
    *u = (uint64_t)i;
    return is_signed || i >= 0 ? true : fail(f, "%s", "negative value");
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d != floor(d) || !(fabs(d) < 9.2e18))
      return fail(f, "%s", "not an integer");
    if (!is_signed && d < 0)
      return fail(f, "%s", "negative value");
    *s = (int64_t)d;
    *u = (uint64_t)*s;
    return true;
  }
  if (!json_is_string(v))
    return fail(f, "%s", "wants an integer (a number or a string)");
  const char *str = json_string_value(v);
  char *end;
  errno = 0;
  if (str[0] == '\0' || str[0] == ' ' || (!is_signed && str[0] == '-'))
    return fail(f, "'%s' is not an integer", str);
  if (is_signed) {
    long long ll = strtoll(str, &end, 10);
    *s = ll;
    *u = (uint64_t)ll;
  } else {
    unsigned long long ull = strtoull(str, &end, 10);
    *u = ull;
    *s = (int64_t)ull;
  }
  if (errno || *end)
    return fail(f, "'%s' is not an integer in range", str);
  return true;
}

static bool get_double(fj *f, json_t *v, double *d) {
  if (json_is_number(v)) {
    *d = json_number_value(v);
    return true;
  }
  if (!json_is_string(v))
    return fail(f, "%s", "wants a number");
  const char *s = json_string_value(v);
  if (strcmp(s, "NaN") == 0)
    *d = NAN;
  else if (strcmp(s, "Infinity") == 0)
    *d = INFINITY;
  else if (strcmp(s, "-Infinity") == 0)
    *d = -INFINITY;
  else {
    char *end;
    errno = 0;
    *d = strtod(s, &end);
    if (s[0] == '\0' || *end || errno)
      return fail(f, "'%s' is not a number", s);
  }
  return true;
}

static bool enum_value(fj *f, const field_desc *fd, json_t *v, int32_t *out) {
  const Google__Protobuf__EnumDescriptorProto *e =
      pbj_find_enum(f->pool, pbj_strip_dot(fd->type_name));
  if (!e)
    return fail(f, "enum %s is not in the descriptors", fd->type_name);
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i < INT32_MIN || i > INT32_MAX)
      return fail(f, "%s", "enum number out of range");
    *out = (int32_t)i;
    return true;
  }
  if (!json_is_string(v))
    return fail(f, "%s", "wants an enum name (a string) or number");
  const char *name = json_string_value(v);
  for (size_t i = 0; i < e->n_value; i++) {
    if (e->value[i]->name && strcmp(e->value[i]->name, name) == 0) {
      *out = e->value[i]->number;
      return true;
    }
  }
  return fail(f, "'%s' is not a value of the enum", name);
}

static bool encode_message(fj *f, const char *type, json_t *obj, pbj_buf *out,
                           int depth);

/* A scalar or message value of |fd| into |out|, without its tag. For
 * numeric types the raw varint or fixed bytes (packable). */
static bool encode_value(fj *f, const field_desc *fd, json_t *v, pbj_buf *out,
                         int depth) {
  int64_t s = 0;
  uint64_t u = 0;
  switch (fd->type) {
  case T(DOUBLE):
  case T(FLOAT): {
    double d = 0;
    if (!get_double(f, v, &d))
      return false;
    if (fd->type == T(DOUBLE)) {
      uint64_t bits;
      memcpy(&bits, &d, sizeof(bits));
      put_fixed(out, bits, 8);
    } else {
      if (isfinite(d) && fabs(d) > 3.4028234663852886e38)
        return fail(f, "%s", "out of range for a float");
      float fl = (float)d;
      uint32_t bits;
      memcpy(&bits, &fl, sizeof(bits));
      put_fixed(out, bits, 4);
    }
    return true;
  }
  case T(INT64):
  case T(SFIXED64):
  case T(SINT64):
    if (!get_int(f, v, true, &s, &u))
      return false;
    if (fd->type == T(SFIXED64))
      put_fixed(out, (uint64_t)s, 8);
    else if (fd->type == T(SINT64))
      pbj_put_varint(out, ((uint64_t)s << 1) ^ (uint64_t)(s >> 63));
    else
      pbj_put_varint(out, (uint64_t)s);
    return true;
  case T(UINT64):
  case T(FIXED64):
    if (!get_int(f, v, false, &s, &u))
      return false;
    if (fd->type == T(FIXED64))
      put_fixed(out, u, 8);
    else
      pbj_put_varint(out, u);
    return true;
  case T(INT32):
  case T(SFIXED32):
  case T(SINT32):
    if (!get_int(f, v, true, &s, &u))
      return false;
    if (s < INT32_MIN || s > INT32_MAX)
      return fail(f, "%s", "out of range for a 32-bit integer");
    if (fd->type == T(SFIXED32))
      put_fixed(out, (uint32_t)(int32_t)s, 4);
    else if (fd->type == T(SINT32))
      pbj_put_varint(
          out, (uint32_t)(((uint32_t)s << 1) ^ (uint32_t)((int32_t)s >> 31)));
    else
      pbj_put_varint(out, (uint64_t)s); /* negative: 10 bytes, as protobuf */
    return true;
  case T(UINT32):
  case T(FIXED32):
    if (!get_int(f, v, false, &s, &u))
      return false;
    if (u > UINT32_MAX)
      return fail(f, "%s", "out of range for a 32-bit unsigned integer");
    if (fd->type == T(FIXED32))
      put_fixed(out, u, 4);
    else
      pbj_put_varint(out, u);
    return true;
  case T(BOOL):
    if (!json_is_boolean(v))
      return fail(f, "%s", "wants true or false");
    pbj_put_varint(out, json_is_true(v) ? 1 : 0);
    return true;
  case T(ENUM): {
    int32_t e = 0;
    if (!enum_value(f, fd, v, &e))
      return false;
    pbj_put_varint(out, (uint64_t)(int64_t)e);
    return true;
  }
  case T(STRING):
    if (!json_is_string(v))
      return fail(f, "%s", "wants a string");
    pbj_put(out, json_string_value(v), json_string_length(v));
    return true;
  case T(BYTES):
    if (!json_is_string(v))
      return fail(f, "%s", "wants base64 text");
    if (!pbj_base64_decode(json_string_value(v), json_string_length(v), out))
      return fail(f, "%s", "is not base64");
    return true;
  case T(MESSAGE):
    return encode_message(f, pbj_strip_dot(fd->type_name), v, out, depth + 1);
  default:
    return fail(f, "%s", "has a type grit cannot encode (a group)");
  }
}

/* Tag, then the value; length-prefixed for wire type 2. */
static bool encode_field_value(fj *f, const field_desc *fd, json_t *v,
                               pbj_buf *out, int depth) {
  int wt = wire_type_of(fd->type);
  pbj_put_tag(out, (uint32_t)fd->number, wt);
  if (wt != 2)
    return encode_value(f, fd, v, out, depth);
  pbj_buf tmp = {0};
  bool ok = encode_value(f, fd, v, &tmp, depth);
  if (ok) {
    pbj_put_varint(out, tmp.len);
    pbj_put(out, tmp.p, tmp.len);
    ok = !tmp.oom || fail(f, "%s", "out of memory");
  }
  pbj_buf_free(&tmp);
  return ok;
}

/* A map key (always a JSON string) as the key field's value. */
static bool encode_map(fj *f, const field_desc *fd,
                       const Google__Protobuf__DescriptorProto *ed, json_t *v,
                       pbj_buf *out, int depth) {
  const field_desc *kf = pbj_field_by_number(ed, 1);
  const field_desc *vf = pbj_field_by_number(ed, 2);
  if (!kf || !vf)
    return fail(f, "%s", "a map entry without key or value");
  if (!json_is_object(v))
    return fail(f, "%s", "wants an object (a map)");
  const char *key;
  json_t *val;
  json_object_foreach(v, key, val) {
    size_t saved = push_name(f, key);
    json_t *k = NULL;
    if (kf->type == T(BOOL)) {
      if (strcmp(key, "true") && strcmp(key, "false")) {
        pop(f, saved);
        return fail(f, "map key '%s' is not true or false", key);
      }
      k = json_boolean(strcmp(key, "true") == 0);
    } else {
      k = json_string(key);
    }
    pbj_buf entry = {0};
    bool ok =
        k && encode_field_value(f, kf, k, &entry, depth) &&
        (json_is_null(val) || encode_field_value(f, vf, val, &entry, depth));
    json_decref(k);
    if (ok) {
      pbj_put_tag(out, (uint32_t)fd->number, 2);
      pbj_put_varint(out, entry.len);
      pbj_put(out, entry.p, entry.len);
    }
    pbj_buf_free(&entry);
    if (!ok)
      return false;
    pop(f, saved);
  }
  return true;
}

static bool encode_field(fj *f, const field_desc *fd, json_t *v, pbj_buf *out,
                         int depth) {
  if (json_is_null(v))
    return true;
  bool repeated =
      fd->label ==
      GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__LABEL__LABEL_REPEATED;
  if (!repeated)
    return encode_field_value(f, fd, v, out, depth);
  if (fd->type == T(MESSAGE)) {
    const Google__Protobuf__DescriptorProto *ed =
        pbj_find_message(f->pool, pbj_strip_dot(fd->type_name));
    if (!ed)
      return fail(f, "type %s is not in the descriptors", fd->type_name);
    if (pbj_is_map_entry(ed))
      return encode_map(f, fd, ed, v, out, depth);
  }
  if (!json_is_array(v))
    return fail(f, "%s", "wants an array");
  int wt = wire_type_of(fd->type);
  pbj_buf packed = {0};
  bool ok = true;
  size_t i;
  json_t *el;
  json_array_foreach(v, i, el) {
    size_t saved = push_index(f, i);
    /* Numeric repeated fields go packed, as proto3 does by default. */
    ok = wt != 2 ? encode_value(f, fd, el, &packed, depth)
                 : encode_field_value(f, fd, el, out, depth);
    if (!ok)
      break;
    pop(f, saved);
  }
  if (ok && wt != 2 && packed.len) {
    pbj_put_tag(out, (uint32_t)fd->number, 2);
    pbj_put_varint(out, packed.len);
    pbj_put(out, packed.p, packed.len);
  }
  pbj_buf_free(&packed);
  return ok;
}

/* ---- well-known types ---- */

/* "[.fffffffff]" after seconds: 1 to 9 digits, as nanos. */
static bool parse_frac(const char **p, int32_t *nanos) {
  *nanos = 0;
  if (**p != '.')
    return true;
  (*p)++;
  int digits = 0;
  while (**p >= '0' && **p <= '9') {
    if (++digits > 9)
      return false;
    *nanos = *nanos * 10 + (**p - '0');
    (*p)++;
  }
  for (int i = digits; i < 9; i++)
    *nanos *= 10;
  return digits > 0;
}

static void put_secs_nanos(pbj_buf *out, int64_t secs, int32_t nanos) {
  if (secs) {
    pbj_put_tag(out, 1, 0);
    pbj_put_varint(out, (uint64_t)secs);
  }
  if (nanos) {
    pbj_put_tag(out, 2, 0);
    pbj_put_varint(out, (uint64_t)(int64_t)nanos);
  }
}

static bool encode_duration(fj *f, json_t *v, pbj_buf *out) {
  if (!json_is_string(v))
    return fail(f, "%s", "wants a duration string such as \"1.5s\"");
  const char *s = json_string_value(v), *p = s;
  bool neg = *p == '-';
  if (neg)
    p++;
  if (*p < '0' || *p > '9')
    return fail(f, "'%s' is not a duration", s);
  int64_t secs = 0;
  while (*p >= '0' && *p <= '9') {
    secs = secs * 10 + (*p++ - '0');
    if (secs > 315576000000LL)
      return fail(f, "'%s' is out of range", s);
  }
  int32_t nanos;
  if (!parse_frac(&p, &nanos) || strcmp(p, "s") != 0)
    return fail(f, "'%s' is not a duration (\"<seconds>[.<fraction>]s\")", s);
  put_secs_nanos(out, neg ? -secs : secs, neg ? -nanos : nanos);
  return true;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static bool encode_timestamp(fj *f, json_t *v, pbj_buf *out) {
  if (!json_is_string(v))
    return fail(f, "%s",
                "wants an RFC 3339 time such as "
                "\"2024-01-02T03:04:05Z\"");
  const char *s = json_string_value(v);
  int y, mo, d, h, mi, se, n = 0;
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) !=
          6 ||
      n != 19 || y < 1 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
      mi > 59 || se > 59)
    return fail(f, "'%s' is not an RFC 3339 time", s);
  const char *p = s + n;
  int32_t nanos;
  if (!parse_frac(&p, &nanos))
    return fail(f, "'%s' has a bad fraction of a second", s);
  int64_t off = 0;
  if (*p == 'Z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int oh, om, k = 0;
    if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5 || oh > 23 ||
        om > 59)
      return fail(f, "'%s' has a bad offset", s);
    off = (*p == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
    p += 6;
  } else {
    return fail(f, "'%s' lacks 'Z' or an offset", s);
  }
  if (*p)
    return fail(f, "'%s' is not an RFC 3339 time", s);
  int64_t secs = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 +
                 h * 3600 + mi * 60 + se - off;
  put_secs_nanos(out, secs, nanos);
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

static const field_desc *find_field(const Google__Protobuf__DescriptorProto *d,
                                    const char *key) {
  char tmp[256];
  for (size_t i = 0; i < d->n_field; i++) {
    const field_desc *fd = d->field[i];
    if (!fd->name || !fd->has_number)
      continue;
    if (strcmp(fd->name, key) == 0 ||
        strcmp(pbj_json_name(fd, tmp, sizeof(tmp)), key) == 0)
      return fd;
  }
  return NULL;
}

static bool encode_message(fj *f, const char *type, json_t *obj, pbj_buf *out,
                           int depth) {
  if (depth > PBJ_MAX_DEPTH)
    return fail(f, "%s", "messages nested deeper than 64");
  const Google__Protobuf__DescriptorProto *d = pbj_find_message(f->pool, type);
  if (!d)
    return fail(f, "type %s is not in the descriptors", type);
  if (strcmp(type, "google.protobuf.Duration") == 0)
    return encode_duration(f, obj, out);
  if (strcmp(type, "google.protobuf.Timestamp") == 0)
    return encode_timestamp(f, obj, out);
  if (is_wrapper(type)) {
    const field_desc *vf = pbj_field_by_number(d, 1);
    return vf ? encode_field_value(f, vf, obj, out, depth)
              : fail(f, "%s lacks its value field", type);
  }
  if (!json_is_object(obj))
    return fail(f, "wants an object (%s)", type);
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    size_t saved = push_name(f, key);
    const field_desc *fd = find_field(d, key);
    if (!fd)
      return fail(f, "unknown field of %s", type);
    if (!encode_field(f, fd, v, out, depth))
      return false;
    pop(f, saved);
  }
  return true;
}

bool pbj_from_json(const pbj_pool *pool, const char *type, const char *json,
                   size_t len, uint8_t **out, size_t *outlen, char *err,
                   size_t errlen) {
  *out = NULL;
  *outlen = 0;
  json_error_t je;
  json_t *root = json_loadb(json, len, JSON_DECODE_ANY, &je);
  if (!root) {
    snprintf(err, errlen, "not JSON: %s at line %d column %d", je.text, je.line,
             je.column);
    return false;
  }
  fj f = {
      .pool = pool, .path = "$", .path_len = 1, .err = err, .errlen = errlen};
  pbj_buf b = {0};
  bool ok = encode_message(&f, type, root, &b, 0);
  json_decref(root);
  if (ok && b.oom) {
    snprintf(err, errlen, "out of memory");
    ok = false;
  }
  if (!ok) {
    pbj_buf_free(&b);
    return false;
  }
  *out = b.p ? b.p : malloc(1);
  *outlen = b.len;
  if (!*out) {
    snprintf(err, errlen, "out of memory");
    return false;
  }
  return true;
}
