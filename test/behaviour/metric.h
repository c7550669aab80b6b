/*
 * Read one sample of a channel's Prometheus text (SPEC OB-01) in a
 * behaviour test.
 */
#ifndef GRIT_TEST_METRIC_H
#define GRIT_TEST_METRIC_H

#include <grit/grit.h>
#include <stdlib.h>
#include <string.h>

/* The value of the first sample of |name| ("grit_client_x_total") in
 * |ch|'s metrics, or -1 if there is none. */
static inline double test_metric(grit_channel *ch, const char *name) {
  grit_bytes b = {0};
  if (grit_metrics_write_prometheus(ch, &b) != GRIT_OK)
    return -1;
  char *text = malloc(b.len + 2);
  text[0] = '\n';
  memcpy(text + 1, b.data, b.len);
  text[b.len + 1] = '\0';
  grit_bytes_free(&b);
  double v = -1;
  size_t n = strlen(name);
  for (char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
    if (p[-1] != '\n' || (p[n] != '{' && p[n] != ' '))
      continue;
    char *sp = strchr(p, p[n] == '{' ? '}' : ' ');
    v = sp ? strtod(sp + (p[n] == '{' ? 2 : 1), NULL) : -1;
    break;
  }
  free(text);
  return v;
}

#endif
