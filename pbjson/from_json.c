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
  char *missing; /* the Any type the pool lacked, when asked */
  size_t missing_len;
  /* The text was rewritten: a string of this many U+0000 and '#' is a
   * number (big_digits); 0: not rewritten. */
  size_t big_nuls;
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

/* JSON integers past int64 (jansson's json_int_t) do not parse, yet the
 * mapping takes uint64 values and doubles such as 18446744073709551615 as
 * numbers. Before parsing, such a literal is rewritten into a string: N
 * U+0000 characters, '#', then the digits. A JSON text can spell U+0000
 * only as the escape \u0000, so with N one more than the number of those
 * escapes in the text no string of the user's can start that way: the
 * mark is exact, whatever the text holds. */
#define NUL_ESCAPE "\\u0000"

/* The digits of a rewritten number, or NULL if |v| is not one. */
static const char *big_digits(const fj *f, json_t *v) {
  if (!f->big_nuls || !json_is_string(v) ||
      json_string_length(v) <= f->big_nuls + 1)
    return NULL;
  const char *s = json_string_value(v);
  for (size_t i = 0; i < f->big_nuls; i++) {
    if (s[i] != '\0')
      return NULL;
  }
  return s[f->big_nuls] == '#' ? s + f->big_nuls + 1 : NULL;
}

/* How many U+0000 a rewritten number starts with for text |json|. */
static size_t big_mark_nuls(const char *json, size_t len) {
  size_t n = 1;
  const char *p = json, *end = json + len;
  while ((p = memmem(p, (size_t)(end - p), NUL_ESCAPE, 6)) != NULL) {
    n++;
    p += 6;
  }
  return n;
}

/* Whether the integer literal |p| (|n| bytes, optional '-') is outside
 * int64. */
static bool int_too_big(const char *p, size_t n) {
  bool neg = p[0] == '-';
  p += neg;
  n -= neg;
  const char *lim = neg ? "9223372036854775808" : "9223372036854775807";
  return n > 19 || (n == 19 && memcmp(p, lim, 19) > 0);
}

/* |json| with its too-big integer literals rewritten (malloc'd, |*outlen|
 * bytes), or NULL when nothing needs it (or out of memory: then jansson
 * reports the literal). */
static char *rewrite_big_ints(const char *json, size_t len, size_t nuls,
                              size_t *outlen) {
  pbj_buf b = {0};
  size_t copied = 0;
  bool in_str = false;
  for (size_t i = 0; i < len; i++) {
    char c = json[i];
    if (in_str) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_str = false;
      continue;
    }
    if (c == '"') {
      in_str = true;
      continue;
    }
    if (c != '-' && !(c >= '0' && c <= '9'))
      continue;
    size_t j = i + (c == '-');
    while (j < len && json[j] >= '0' && json[j] <= '9')
      j++;
    bool integer =
        j == len || (json[j] != '.' && json[j] != 'e' && json[j] != 'E');
    size_t end = j;
    while (end < len &&
           ((json[end] >= '0' && json[end] <= '9') || json[end] == '.' ||
            json[end] == 'e' || json[end] == 'E' || json[end] == '+' ||
            json[end] == '-'))
      end++;
    if (integer && j > i + (c == '-') && int_too_big(json + i, j - i)) {
      pbj_put(&b, json + copied, i - copied);
      pbj_put(&b, "\"", 1);
      for (size_t k = 0; k < nuls; k++)
        pbj_puts(&b, NUL_ESCAPE);
      pbj_put(&b, "#", 1);
      pbj_put(&b, json + i, j - i);
      pbj_puts(&b, "\"");
      copied = j;
    }
    i = end - 1;
  }
  if (!b.p || b.oom) {
    pbj_buf_free(&b);
    return NULL;
  }
  pbj_put(&b, json + copied, len - copied);
  if (b.oom) {
    pbj_buf_free(&b);
    return NULL;
  }
  *outlen = b.len;
  return (char *)b.p;
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
  const char *big = big_digits(f, v);
  if (big) {
    char *end;
    errno = 0;
    if (is_signed || big[0] == '-') {
      return fail(f, "%s is out of range", big);
    }
    *u = strtoull(big, &end, 10);
    *s = (int64_t)*u;
    return errno || *end ? fail(f, "%s is out of range", big) : true;
  }
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
  const char *big = big_digits(f, v);
  if (big) {
    *d = strtod(big, NULL);
    return true;
  }
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
  if (json_is_null(v) &&
      strcmp(e->name ? e->name : "", "NullValue") == 0) { /* NULL_VALUE */
    *out = 0;
    return true;
  }
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
  if (big_digits(f, v) && (fd->type == T(STRING) || fd->type == T(BYTES) ||
                           fd->type == T(BOOL) || fd->type == T(ENUM)))
    return fail(f, "%s", "wants a value of its type, not a number");
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

/* Whether a JSON null for field |fd| is a value, not absence: a Value
 * (null_value), or a NullValue enum field whose presence is tracked (a
 * oneof member or proto3 optional), as json_format reads them. */
static bool null_is_value(const field_desc *fd) {
  const char *tn = fd->type_name ? pbj_strip_dot(fd->type_name) : "";
  if (fd->type == T(MESSAGE))
    return strcmp(tn, "google.protobuf.Value") == 0;
  return fd->type == T(ENUM) && strcmp(tn, "google.protobuf.NullValue") == 0 &&
         fd->has_oneof_index;
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
    bool ok = k && encode_field_value(f, kf, k, &entry, depth) &&
              ((json_is_null(val) && !null_is_value(vf)) ||
               encode_field_value(f, vf, val, &entry, depth));
    json_decref(k);
    if (ok) {
      pbj_put_tag(out, (uint32_t)fd->number, 2);
      pbj_put_varint(out, entry.len);
      pbj_put(out, entry.p, entry.len);
      out->oom = out->oom || entry.oom;
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
  bool repeated =
      fd->label ==
      GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__LABEL__LABEL_REPEATED;
  if (json_is_null(v))
    return !repeated && null_is_value(fd)
               ? encode_field_value(f, fd, v, out, depth)
               : true;
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
  if (ok && packed.oom) /* values lost: never send the rest */
    ok = fail(f, "%s", "out of memory");
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

/* |body| as a length-delimited field |num| of |out|. */
static void put_len_field(pbj_buf *out, uint32_t num, const pbj_buf *body) {
  pbj_put_tag(out, num, 2);
  pbj_put_varint(out, body->len);
  pbj_put(out, body->p, body->len);
  out->oom = out->oom || body->oom;
}

static bool encode_value_wkt(fj *f, json_t *v, pbj_buf *out, int depth);

/* Struct: a JSON object, each member a fields map entry (key 1, Value 2). */
static bool encode_struct(fj *f, json_t *v, pbj_buf *out, int depth) {
  if (!json_is_object(v))
    return fail(f, "%s", "wants an object (google.protobuf.Struct)");
  if (depth > PBJ_MAX_DEPTH)
    return fail(f, "%s", "messages nested deeper than 64");
  const char *key;
  json_t *val;
  json_object_foreach(v, key, val) {
    size_t saved = push_name(f, key);
    pbj_buf entry = {0}, value = {0};
    pbj_put_tag(&entry, 1, 2);
    pbj_put_varint(&entry, strlen(key));
    pbj_puts(&entry, key);
    bool ok = encode_value_wkt(f, val, &value, depth + 1);
    if (ok) {
      put_len_field(&entry, 2, &value);
      put_len_field(out, 1, &entry);
    }
    pbj_buf_free(&entry);
    pbj_buf_free(&value);
    if (!ok)
      return false;
    pop(f, saved);
  }
  return true;
}

/* ListValue: a JSON array of Values (field 1). */
static bool encode_list(fj *f, json_t *v, pbj_buf *out, int depth) {
  if (!json_is_array(v))
    return fail(f, "%s", "wants an array (google.protobuf.ListValue)");
  if (depth > PBJ_MAX_DEPTH)
    return fail(f, "%s", "messages nested deeper than 64");
  size_t i;
  json_t *el;
  json_array_foreach(v, i, el) {
    size_t saved = push_index(f, i);
    pbj_buf value = {0};
    bool ok = encode_value_wkt(f, el, &value, depth + 1);
    if (ok)
      put_len_field(out, 1, &value);
    pbj_buf_free(&value);
    if (!ok)
      return false;
    pop(f, saved);
  }
  return true;
}

/* Value: any JSON value, as its kind (null_value 1, number_value 2,
 * string_value 3, bool_value 4, struct_value 5, list_value 6). */
static bool encode_value_wkt(fj *f, json_t *v, pbj_buf *out, int depth) {
  const char *big = big_digits(f, v);
  if (json_is_null(v)) {
    pbj_put_tag(out, 1, 0);
    pbj_put_varint(out, 0);
  } else if (big || json_is_number(v)) {
    double d = big ? strtod(big, NULL) : json_number_value(v);
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    pbj_put_tag(out, 2, 1);
    put_fixed(out, bits, 8);
  } else if (json_is_string(v)) {
    pbj_put_tag(out, 3, 2);
    pbj_put_varint(out, json_string_length(v));
    pbj_put(out, json_string_value(v), json_string_length(v));
  } else if (json_is_boolean(v)) {
    pbj_put_tag(out, 4, 0);
    pbj_put_varint(out, json_is_true(v) ? 1 : 0);
  } else {
    bool obj = json_is_object(v);
    pbj_buf body = {0};
    bool ok = obj ? encode_struct(f, v, &body, depth + 1)
                  : encode_list(f, v, &body, depth + 1);
    if (ok)
      put_len_field(out, obj ? 5 : 6, &body);
    pbj_buf_free(&body);
    return ok;
  }
  return true;
}

/* FieldMask: "a.fooBar,b" -> paths "a.foo_bar", "b"; a path holding '_'
 * has no JSON form (json_format refuses it too). */
static bool encode_field_mask(fj *f, json_t *v, pbj_buf *out) {
  if (!json_is_string(v))
    return fail(f, "%s", "wants a string of comma-separated paths");
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  size_t start = 0;
  while (n && start <= n) {
    const char *comma = memchr(s + start, ',', n - start);
    size_t end = comma ? (size_t)(comma - s) : n;
    pbj_buf path = {0};
    for (size_t i = start; i < end; i++) {
      char c = s[i];
      if (c == '_' || c == '\0') {
        pbj_buf_free(&path);
        return fail(f, "FieldMask path '%.*s' holds '_' (use lowerCamelCase)",
                    (int)(end - start), s + start);
      }
      if (c >= 'A' && c <= 'Z') {
        pbj_put(&path, "_", 1);
        c = (char)(c - 'A' + 'a');
      }
      pbj_put(&path, &c, 1);
    }
    pbj_put_tag(out, 1, 2);
    pbj_put_varint(out, path.len);
    pbj_put(out, path.p, path.len);
    out->oom = out->oom || path.oom;
    pbj_buf_free(&path);
    start = end + 1;
  }
  return true;
}

static bool is_special_json(const char *type) {
  static const char *const names[] = {"Any",       "Duration", "FieldMask",
                                      "ListValue", "Struct",   "Timestamp",
                                      "Value"};
  if (strncmp(type, "google.protobuf.", 16) != 0)
    return false;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (strcmp(type + 16, names[i]) == 0)
      return true;
  }
  return is_wrapper(type);
}

/* Any: {"@type": URL, fields...} or {"@type": URL, "value": <the JSON of
 * a type with its own form>}; grit's {"@type": URL, "@value": base64}
 * packs bytes of a type the pool lacks. The packed type is the part of
 * the URL after its last '/'. */
static bool encode_any(fj *f, json_t *v, pbj_buf *out, int depth) {
  if (!json_is_object(v))
    return fail(f, "%s", "wants an object (google.protobuf.Any)");
  if (json_object_size(v) == 0)
    return true;
  json_t *jt = json_object_get(v, "@type");
  if (!json_is_string(jt) || json_string_length(jt) == 0)
    return fail(f, "%s", "an Any wants \"@type\" (a type URL)");
  const char *url = json_string_value(jt);
  size_t url_len = json_string_length(jt);
  const char *slash = strrchr(url, '/');
  /* A URL holding U+0000 names no type (only "@value" can pack it). */
  const char *name = memchr(url, '\0', url_len) ? "" : slash ? slash + 1 : url;
  pbj_buf body = {0};
  bool ok;
  json_t *raw = json_object_get(v, "@value");
  if (!pbj_find_message(f->pool, name)) {
    if (!raw) {
      if (f->missing)
        snprintf(f->missing, f->missing_len, "%s", name);
      return fail(f, "the type of an Any, %s, is not in the descriptors", name);
    }
    ok = json_is_string(raw) && json_object_size(v) == 2 &&
         pbj_base64_decode(json_string_value(raw), json_string_length(raw),
                           &body);
    if (!ok)
      fail(f, "%s", "\"@value\" wants base64 and no other members");
  } else if (is_special_json(name)) {
    json_t *val = json_object_get(v, "value");
    ok = val && json_object_size(v) == 2;
    if (!ok)
      fail(f, "an Any of %s wants \"@type\" and \"value\" only", name);
    size_t saved = push_name(f, "value");
    ok = ok && encode_message(f, name, val, &body, depth + 1);
    if (ok)
      pop(f, saved);
  } else {
    json_t *fields = json_object();
    const char *key;
    json_t *m;
    ok = fields != NULL;
    json_object_foreach(v, key, m) {
      if (ok && strcmp(key, "@type") != 0)
        ok = json_object_set(fields, key, m) == 0;
    }
    if (!ok)
      fail(f, "%s", "out of memory");
    ok = ok && encode_message(f, name, fields, &body, depth + 1);
    json_decref(fields);
  }
  if (ok) {
    pbj_put_tag(out, 1, 2);
    pbj_put_varint(out, url_len);
    pbj_put(out, url, url_len);
    put_len_field(out, 2, &body);
  }
  pbj_buf_free(&body);
  return ok;
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
  if (strcmp(type, "google.protobuf.Struct") == 0)
    return encode_struct(f, obj, out, depth);
  if (strcmp(type, "google.protobuf.Value") == 0)
    return encode_value_wkt(f, obj, out, depth);
  if (strcmp(type, "google.protobuf.ListValue") == 0)
    return encode_list(f, obj, out, depth);
  if (strcmp(type, "google.protobuf.FieldMask") == 0)
    return encode_field_mask(f, obj, out);
  if (strcmp(type, "google.protobuf.Any") == 0)
    return encode_any(f, obj, out, depth);
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
  return pbj_from_json_ex(pool, type, json, len, NULL, 0, out, outlen, err,
                          errlen);
}

bool pbj_from_json_ex(const pbj_pool *pool, const char *type, const char *json,
                      size_t len, char *missing, size_t missing_len,
                      uint8_t **out, size_t *outlen, char *err, size_t errlen) {
  *out = NULL;
  *outlen = 0;
  if (missing && missing_len)
    missing[0] = '\0';
  /* Strings may hold U+0000 (grit prints it as \u0000, so it reads it
   * back); integers past int64 become marked strings (big_digits). */
  size_t big_len = 0;
  size_t nuls = big_mark_nuls(json, len);
  char *big = rewrite_big_ints(json, len, nuls, &big_len);
  json_error_t je;
  json_t *root = json_loadb(big ? big : json, big ? big_len : len,
                            JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
  size_t big_nuls = big ? nuls : 0;
  free(big);
  if (!root) {
    snprintf(err, errlen, "not JSON: %s at line %d column %d", je.text, je.line,
             je.column);
    return false;
  }
  fj f = {.pool = pool,
          .missing = missing,
          .missing_len = missing_len,
          .big_nuls = big_nuls,
          .path = "$",
          .path_len = 1,
          .err = err,
          .errlen = errlen};
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
