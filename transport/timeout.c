/* grpc-timeout encoding and parsing (SPEC HS-04). */
#include "transport/transport.h"

/* Finest unit first, so the first one that fits in 8 digits keeps the most
 * precision. */
static const struct {
  char unit;
  int64_t ns;
} timeout_units[] = {
    {'n', 1},
    {'u', 1000},
    {'m', 1000000},
    {'S', 1000000000},
    {'M', 60 * (int64_t)1000000000},
    {'H', 3600 * (int64_t)1000000000},
};

#define TIMEOUT_MAX_VALUE 99999999

/* |v| is 1..TIMEOUT_MAX_VALUE, so at most 8 digits, a unit and a NUL. */
static void timeout_format(int64_t v, char unit, char out[10]) {
  char digits[8];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0 && n < 8);
  int j = 0;
  while (n > 0)
    out[j++] = digits[--n];
  out[j++] = unit;
  out[j] = '\0';
}

void grit_timeout_encode(int64_t ns, char out[10]) {
  /* An expired deadline still goes out as the smallest positive value: a
   * zero would read as "no time at all" and some servers reject it. */
  if (ns <= 0) {
    timeout_format(1, 'n', out);
    return;
  }
  size_t n = sizeof(timeout_units) / sizeof(timeout_units[0]);
  for (size_t i = 0; i < n; i++) {
    int64_t u = timeout_units[i].ns;
    int64_t v = ns / u + (ns % u != 0); /* round up, no overflow */
    if (v <= TIMEOUT_MAX_VALUE) {
      timeout_format(v, timeout_units[i].unit, out);
      return;
    }
  }
  timeout_format(TIMEOUT_MAX_VALUE, 'H', out);
}

bool grit_timeout_parse(const char *s, size_t len, int64_t *ns) {
  if (len < 2 || len > 9)
    return false;
  int64_t v = 0;
  for (size_t i = 0; i + 1 < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    v = v * 10 + (s[i] - '0');
  }
  size_t n = sizeof(timeout_units) / sizeof(timeout_units[0]);
  for (size_t i = 0; i < n; i++) {
    if (timeout_units[i].unit != s[len - 1])
      continue;
    int64_t u = timeout_units[i].ns;
    /* 99999999H does not fit in int64 nanoseconds: saturate. */
    *ns = v > INT64_MAX / u ? INT64_MAX : v * u;
    return true;
  }
  return false;
}
