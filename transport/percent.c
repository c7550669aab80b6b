/* grpc-message percent-encoding (SPEC HS-05). */
#include "transport/transport.h"

static bool percent_plain(uint8_t c) {
  return c >= 0x20 && c <= 0x7e && c != '%';
}

static int percent_hexval(uint8_t c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

char *grit_percent_encode(const uint8_t *p, size_t n, size_t *out_len) {
  static const char hex[] = "0123456789ABCDEF";
  size_t len = 0;
  for (size_t i = 0; i < n; i++)
    len += percent_plain(p[i]) ? 1 : 3;
  char *out = grit_malloc(len + 1);
  if (!out)
    return NULL;
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (percent_plain(p[i])) {
      out[j++] = (char)p[i];
    } else {
      out[j++] = '%';
      out[j++] = hex[p[i] >> 4];
      out[j++] = hex[p[i] & 0xf];
    }
  }
  out[j] = '\0';
  if (out_len)
    *out_len = j;
  return out;
}

char *grit_percent_decode(const uint8_t *p, size_t n, size_t *out_len) {
  /* Decoding never grows the text. */
  char *out = grit_malloc(n + 1);
  if (!out)
    return NULL;
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '%' && i + 2 < n) {
      int hi = percent_hexval(p[i + 1]);
      int lo = percent_hexval(p[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out[j++] = (char)(hi << 4 | lo);
        i += 2;
        continue;
      }
    }
    /* A bad or truncated escape passes through as it is. */
    out[j++] = (char)p[i];
  }
  out[j] = '\0';
  if (out_len)
    *out_len = j;
  return out;
}
