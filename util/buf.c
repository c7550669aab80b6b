/* Growable byte buffer. */
#include "util/util.h"

#include <stdio.h>
#include <string.h>

void grit_buf_init(grit_buf *b) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}

void grit_buf_free(grit_buf *b) {
  grit_free(b->data);
  grit_buf_init(b);
}

grit_err grit_buf_reserve(grit_buf *b, size_t extra) {
  if (extra > SIZE_MAX - b->len - 1)
    return GRIT_ERR_NOMEM;
  size_t need = b->len + extra + 1; /* room for a NUL terminator */
  if (need <= b->cap)
    return GRIT_OK;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  uint8_t *p = grit_realloc(b->data, cap);
  if (!p)
    return GRIT_ERR_NOMEM;
  b->data = p;
  b->cap = cap;
  return GRIT_OK;
}

grit_err grit_buf_append(grit_buf *b, const void *p, size_t n) {
  grit_err rv = grit_buf_reserve(b, n);
  if (rv != GRIT_OK)
    return rv;
  if (n)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return GRIT_OK;
}

grit_err grit_buf_appendf(grit_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  grit_err rv = GRIT_ERR_INVALID_ARG;
  if (n >= 0)
    rv = grit_buf_reserve(b, (size_t)n);
  if (rv == GRIT_OK) {
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap2);
    b->len += (size_t)n;
  }
  va_end(ap2);
  return rv;
}
