/* Byte buffers, the protobuf wire format, base64 (RFC 4648) and JSON
 * string output (RFC 8259 §7), for the codec in to_json.c/from_json.c. */
#include "pbjson/pbjson_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pbj_put(pbj_buf *b, const void *p, size_t n) {
  if (b->oom)
    return;
  if (b->cap - b->len < n + 1) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n + 1)
      cap *= 2;
    uint8_t *q = realloc(b->p, cap);
    if (!q) {
      b->oom = true;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  if (n)
    memcpy(b->p + b->len, p, n);
  b->len += n;
  b->p[b->len] = 0; /* always NUL-terminated, for JSON text */
}

void pbj_puts(pbj_buf *b, const char *s) {
  pbj_put(b, s, strlen(s));
}

void pbj_putf(pbj_buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = true;
  } else if ((size_t)n < sizeof(tmp)) {
    pbj_put(b, tmp, (size_t)n);
  } else {
    char *big = malloc((size_t)n + 1);
    if (!big) {
      b->oom = true;
      return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    pbj_put(b, big, (size_t)n);
    free(big);
  }
}

void pbj_put_varint(pbj_buf *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      tmp[n] |= 0x80;
    n++;
  } while (v);
  pbj_put(b, tmp, n);
}

void pbj_put_tag(pbj_buf *b, uint32_t field, int wire_type) {
  pbj_put_varint(b, (uint64_t)field << 3 | (uint64_t)wire_type);
}

void pbj_buf_free(pbj_buf *b) {
  free(b->p);
  *b = (pbj_buf){0};
}

bool pbj_read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*p >= end)
      return false;
    uint8_t c = *(*p)++;
    if (shift == 63 && c > 1)
      return false;
    r |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

int pbj_wire_next(const uint8_t **p, const uint8_t *end, pbj_wire_field *f) {
  if (*p >= end)
    return 0;
  uint64_t tag;
  if (!pbj_read_varint(p, end, &tag) || tag >> 3 == 0 || tag >> 3 > 536870911)
    return -1;
  *f = (pbj_wire_field){.num = (uint32_t)(tag >> 3), .wt = (int)(tag & 7)};
  switch (f->wt) {
  case 0:
    return pbj_read_varint(p, end, &f->v) ? 1 : -1;
  case 1:
  case 5: {
    size_t n = f->wt == 1 ? 8 : 4;
    if ((size_t)(end - *p) < n)
      return -1;
    for (size_t i = 0; i < n; i++)
      f->v |= (uint64_t)(*p)[i] << (8 * i);
    *p += n;
    return 1;
  }
  case 2: {
    uint64_t len;
    if (!pbj_read_varint(p, end, &len) || len > (uint64_t)(end - *p))
      return -1;
    f->data = *p;
    f->len = (size_t)len;
    *p += len;
    return 1;
  }
  default:
    return -1; /* groups (3, 4) and reserved wire types */
  }
}

static const char B64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void pbj_put_base64(pbj_buf *b, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16;
    if (i + 1 < n)
      v |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n)
      v |= p[i + 2];
    char out[4] = {B64[v >> 18 & 63], B64[v >> 12 & 63],
                   i + 1 < n ? B64[v >> 6 & 63] : '=',
                   i + 2 < n ? B64[v & 63] : '='};
    pbj_put(b, out, 4);
  }
}

static int b64_value(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+' || c == '-')
    return 62;
  if (c == '/' || c == '_')
    return 63;
  return -1;
}

/* Standard or URL-safe alphabet, padding optional (proto3 JSON accepts
 * both). */
bool pbj_base64_decode(const char *s, size_t n, pbj_buf *out) {
  while (n && s[n - 1] == '=')
    n--;
  if (n % 4 == 1)
    return false;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64_value(s[i]);
    if (v < 0)
      return false;
    acc = acc << 6 | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      uint8_t c = (uint8_t)(acc >> bits);
      pbj_put(out, &c, 1);
    }
  }
  return !out->oom;
}

/* Length of the well-formed UTF-8 sequence at |s|, or 0 (RFC 3629 §4). */
static size_t utf8_len(const unsigned char *s, size_t n) {
  size_t len;
  uint32_t cp;
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    len = 2;
    cp = s[0] & 0x1f;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    len = 3;
    cp = s[0] & 0x0f;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    len = 4;
    cp = s[0] & 0x07;
  } else {
    return 0;
  }
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((len == 3 && cp < 0x800) || (cp >= 0xd800 && cp <= 0xdfff) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return len;
}

/* Bytes that are not UTF-8 become U+FFFD. */
void pbj_put_json_string(pbj_buf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  pbj_put(b, "\"", 1);
  for (size_t i = 0; i < n;) {
    size_t len = utf8_len(u + i, n - i);
    if (u[i] == '"' || u[i] == '\\')
      pbj_putf(b, "\\%c", u[i]);
    else if (u[i] < 0x20 || u[i] == 0x7f)
      pbj_putf(b, "\\u%04x", u[i]);
    else if (len == 0)
      pbj_puts(b, "\xef\xbf\xbd"); /* U+FFFD, raw like the rest */
    else
      pbj_put(b, u + i, len);
    i += len ? len : 1;
  }
  pbj_put(b, "\"", 1);
}
