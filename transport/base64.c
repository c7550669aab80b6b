/* base64 for -bin metadata values (SPEC HS-06): standard alphabet, emitted
 * without padding, accepted with or without it. */
#include "transport/transport.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *grit_base64_encode(const uint8_t *p, size_t n, size_t *out_len) {
  size_t len = n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
  char *out = grit_malloc(len + 1);
  if (!out)
    return NULL;
  size_t j = 0, i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    out[j++] = b64_alphabet[v >> 18];
    out[j++] = b64_alphabet[(v >> 12) & 63];
    out[j++] = b64_alphabet[(v >> 6) & 63];
    out[j++] = b64_alphabet[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)p[i] << 16;
    out[j++] = b64_alphabet[v >> 18];
    out[j++] = b64_alphabet[(v >> 12) & 63];
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
    out[j++] = b64_alphabet[v >> 18];
    out[j++] = b64_alphabet[(v >> 12) & 63];
    out[j++] = b64_alphabet[(v >> 6) & 63];
  }
  out[j] = '\0';
  if (out_len)
    *out_len = j;
  return out;
}

static int b64_value(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

uint8_t *grit_base64_decode(const char *p, size_t n, size_t *out_len) {
  /* Padding is only legal as the tail of a multiple of four. */
  if (n % 4 == 0 && n > 0 && p[n - 1] == '=') {
    n--;
    if (p[n - 1] == '=')
      n--;
  }
  if (n % 4 == 1)
    return NULL;
  size_t len = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
  uint8_t *out = grit_malloc(len + 1);
  if (!out)
    return NULL;
  uint32_t acc = 0;
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64_value(p[i]);
    if (v < 0) {
      grit_free(out);
      return NULL;
    }
    acc = acc << 6 | (uint32_t)v;
    if (i % 4 == 3) {
      out[j++] = (uint8_t)(acc >> 16);
      out[j++] = (uint8_t)(acc >> 8);
      out[j++] = (uint8_t)acc;
      acc = 0;
    }
  }
  if (n % 4 == 2) {
    out[j++] = (uint8_t)(acc >> 4);
  } else if (n % 4 == 3) {
    out[j++] = (uint8_t)(acc >> 10);
    out[j++] = (uint8_t)(acc >> 2);
  }
  out[j] = 0;
  if (out_len)
    *out_len = j;
  return out;
}
