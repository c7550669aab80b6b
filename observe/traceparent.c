/* W3C Trace Context "traceparent" (https://www.w3.org/TR/trace-context/,
 * §3.2), as gRPC's OpenTelemetry tracing sends it on every attempt
 * (gRFC A72; SPEC OB-02). */
#include "observe/observe.h"

#include <string.h>

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1; /* upper case is invalid (§3.2.2.1) */
}

/* |n| bytes from 2n lower-case hex digits; false if any is not one. */
static bool unhex(const char *s, uint8_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

static bool all_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i])
      return false;
  return true;
}

grit_err grit_traceparent_parse(const char *s, size_t len,
                                grit_traceparent *out) {
  memset(out, 0, sizeof(*out));
  uint8_t version;
  if (!s || len < GRIT_TRACEPARENT_LEN || !unhex(s, &version, 1) ||
      version == 0xff || s[2] != '-' || s[35] != '-' || s[52] != '-')
    return GRIT_ERR_INVALID_ARG;
  /* Version 00 is exactly 55 characters; a later version may append
   * fields after a '-' (§3.2.4), which we do not read. */
  if (version == 0
          ? len != GRIT_TRACEPARENT_LEN
          : len > GRIT_TRACEPARENT_LEN && s[GRIT_TRACEPARENT_LEN] != '-')
    return GRIT_ERR_INVALID_ARG;
  grit_traceparent tp;
  if (!unhex(s + 3, tp.trace_id, 16) || !unhex(s + 36, tp.span_id, 8) ||
      !unhex(s + 53, &tp.flags, 1) || all_zero(tp.trace_id, 16) ||
      all_zero(tp.span_id, 8))
    return GRIT_ERR_INVALID_ARG;
  *out = tp;
  return GRIT_OK;
}

/* Each byte's two digits, looked up at once: a traceparent and a span's
 * ids are formatted on every call. */
#define HEX_ROW(h)                                                             \
  h "0" h "1" h "2" h "3" h "4" h "5" h "6" h "7" h "8" h "9" h "a" h "b" h    \
    "c" h "d" h "e" h "f"
static const char hex_pairs[] = HEX_ROW("0") HEX_ROW("1") HEX_ROW("2")
    HEX_ROW("3") HEX_ROW("4") HEX_ROW("5") HEX_ROW("6") HEX_ROW("7")
        HEX_ROW("8") HEX_ROW("9") HEX_ROW("a") HEX_ROW("b") HEX_ROW("c")
            HEX_ROW("d") HEX_ROW("e") HEX_ROW("f");

void grit_obs_hex(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++)
    memcpy(out + 2 * i, hex_pairs + 2 * p[i], 2);
  out[2 * n] = '\0';
}

void grit_traceparent_compose(const char *trace_hex, const char *span_hex,
                              uint8_t flags, char *out) {
  memcpy(out, "00-", 3);
  memcpy(out + 3, trace_hex, 32);
  out[35] = '-';
  memcpy(out + 36, span_hex, 16);
  out[52] = '-';
  grit_obs_hex(&flags, 1, out + 53);
}

void grit_traceparent_format(const grit_traceparent *tp, char *out) {
  char trace_hex[33], span_hex[17];
  grit_obs_hex(tp->trace_id, 16, trace_hex);
  grit_obs_hex(tp->span_id, 8, span_hex);
  grit_traceparent_compose(trace_hex, span_hex, tp->flags, out);
}
