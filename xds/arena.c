/* The arena a decoded resource lives in: chunks freed together, and the
 * regexes compiled into it released with it. */
#include "xds/xds_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CHUNK 4096

typedef struct chunk {
  struct chunk *next;
  size_t used, size;
  max_align_t data[];
} chunk;

typedef struct regex_link {
  struct regex_link *next;
  xds_regex *re;
} regex_link;

struct xds_arena {
  chunk *head;
  regex_link *regexes;
};

xds_arena *grit_xds_arena_create(void) {
  return grit_calloc(1, sizeof(xds_arena));
}

void grit_xds_arena_destroy(xds_arena *a) {
  if (!a)
    return;
  for (regex_link *l = a->regexes; l; l = l->next)
    grit_xds_regex_free(l->re);
  chunk *c = a->head;
  while (c) {
    chunk *next = c->next;
    grit_free(c);
    c = next;
  }
  grit_free(a);
}

void *grit_xds_arena_alloc(xds_arena *a, size_t size) {
  size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
  chunk *c = a->head;
  if (!c || c->size - c->used < size) {
    size_t cap = size > CHUNK ? size : CHUNK;
    c = grit_malloc(sizeof(chunk) + cap);
    if (!c)
      return NULL;
    c->size = cap;
    c->used = 0;
    c->next = a->head;
    a->head = c;
  }
  void *p = (char *)c->data + c->used;
  c->used += size;
  memset(p, 0, size);
  return p;
}

char *grit_xds_arena_strndup(xds_arena *a, const uint8_t *s, size_t n) {
  char *p = grit_xds_arena_alloc(a, n + 1);
  if (p && n)
    memcpy(p, s, n);
  return p;
}

void *grit_xds_arena_push(xds_arena *a, void **items, size_t *n, size_t *cap,
                          size_t size) {
  if (*n == *cap) {
    size_t ncap = *cap ? *cap * 2 : 4;
    void *grown = grit_xds_arena_alloc(a, ncap * size);
    if (!grown)
      return NULL;
    if (*n)
      memcpy(grown, *items, *n * size);
    *items = grown;
    *cap = ncap;
  }
  void *e = (char *)*items + (*n)++ * size;
  memset(e, 0, size);
  return e;
}

bool grit_xds_arena_keep_regex(xds_arena *a, xds_regex *re) {
  regex_link *l = grit_xds_arena_alloc(a, sizeof(*l));
  if (!l)
    return false;
  l->re = re;
  l->next = a->regexes;
  a->regexes = l;
  return true;
}

size_t grit_xds_dctx_push(xds_dctx *c, const char *fmt, ...) {
  size_t mark = c->path_len;
  if (c->path_len < sizeof(c->path) - 1) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->path + c->path_len, sizeof(c->path) - c->path_len, fmt,
                      ap);
    va_end(ap);
    if (n > 0)
      c->path_len += (size_t)n;
    if (c->path_len > sizeof(c->path) - 1)
      c->path_len = sizeof(c->path) - 1;
  }
  return mark;
}

void grit_xds_dctx_pop(xds_dctx *c, size_t mark) {
  c->path_len = mark;
  c->path[mark] = '\0';
}

bool grit_xds_fail(xds_dctx *c, const char *fmt, ...) {
  if (c->err[0] || c->oom)
    return false;
  char reason[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof(reason), fmt, ap);
  va_end(ap);
  const char *p = c->path[0] == '.' ? c->path + 1 : c->path;
  snprintf(c->err, c->err_size, "%s%s%s", p, *p ? ": " : "", reason);
  return false;
}

bool grit_xds_oom(xds_dctx *c) {
  c->oom = true;
  return false;
}

bool grit_xds_str(xds_dctx *c, const grit_pbf *f, const char **out) {
  if (f->wt != GRIT_PB_LEN)
    return grit_xds_fail(c, "field %u: not a string", f->num);
  if (!grit_pb_utf8_ok(f->data, f->len) || memchr(f->data, 0, f->len))
    return grit_xds_fail(c, "field %u: invalid UTF-8 or a NUL byte", f->num);
  char *s = grit_xds_arena_strndup(c->a, f->data, f->len);
  if (!s)
    return grit_xds_oom(c);
  *out = s;
  return true;
}

bool grit_xds_next(xds_dctx *c, grit_pbr *r, grit_pbf *f) {
  int rc = grit_pbr_next(r, f);
  if (rc < 0)
    grit_xds_fail(c, "malformed message");
  return rc == 1;
}
