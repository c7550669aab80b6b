/*
 * Small helpers: allocation that gives up loudly (this is test code: an
 * out-of-memory test server is a broken test run), a growable byte buffer and
 * the server clock.
 */
#include "h2s_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *util_check(void *p) {
  if (p == NULL) {
    fprintf(stderr, "h2server: out of memory\n");
    abort();
  }
  return p;
}

void *h2s_xmalloc(size_t n) {
  return util_check(malloc(n ? n : 1));
}

void *h2s_xcalloc(size_t n, size_t size) {
  return util_check(calloc(n ? n : 1, size ? size : 1));
}

void *h2s_xrealloc(void *p, size_t n) {
  return util_check(realloc(p, n ? n : 1));
}

char *h2s_xstrdup(const char *s) {
  return s ? util_check(strdup(s)) : NULL;
}

void h2s_buf_add(h2s_buf *b, const void *p, size_t n) {
  if (n == 0)
    return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n)
      cap *= 2;
    b->p = h2s_xrealloc(b->p, cap);
    b->cap = cap;
  }
  memcpy(b->p + b->len, p, n);
  b->len += n;
}

void h2s_buf_free(h2s_buf *b) {
  free(b->p);
  *b = (h2s_buf){0};
}

/* Loop time, as uv timers use: a delay_ms timer started at a stamp fires at
 * a stamp at least delay_ms later. Server thread only. */
uint64_t h2s_now_ms(const h2s_server *srv) {
  return uv_now(&srv->loop) - srv->t0_ms;
}
