/* Error details for parsers, and the assertion hook. */
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void grit_error_set(grit_error_detail *d, grit_err code, const char *path,
                    const char *fmt, ...) {
  if (!d)
    return;
  d->code = code;
  snprintf(d->path, sizeof(d->path), "%s", path ? path : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
  va_end(ap);
}

void grit_assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "grit: assertion failed: %s at %s:%d\n", expr, file, line);
  abort();
}
