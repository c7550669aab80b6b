/* Internals of xds/: the arena every decoded resource lives in, the
 * decoder's context (error text with the field path), and the regex
 * engine's compile step. Only xds/ includes it. */
#ifndef GRIT_XDS_INT_H
#define GRIT_XDS_INT_H

#include "util/pbwire.h"
#include "xds/xds.h"

/* A bump allocator: one free for a whole resource. */
typedef struct xds_arena xds_arena;
xds_arena *grit_xds_arena_create(void);
void grit_xds_arena_destroy(xds_arena *a);
void *grit_xds_arena_alloc(xds_arena *a, size_t size); /* zeroed; NULL on OOM */
char *grit_xds_arena_strndup(xds_arena *a, const uint8_t *s, size_t n);
/* Grow the array at |*items| (|n| used, |*cap| room) by one element of
 * |size| bytes; returns the new element (zeroed) or NULL on OOM. */
void *grit_xds_arena_push(xds_arena *a, void **items, size_t *n, size_t *cap,
                          size_t size);

/* Compile |pattern| (|len| bytes) into |a| (the regex is freed with the
 * arena: grit_xds_arena_destroy calls grit_xds_regex_free on each). Returns
 * NULL with |why| set when the pattern is invalid or uses what RE2 lacks
 * (backreferences, lookaround, atomic groups, possessive quantifiers,
 * recursion, backtracking verbs); |why| NULL means out of memory. */
xds_regex *grit_xds_regex_compile(xds_arena *a, const char *pattern,
                                  const char **why);
/* Free a regex (the arena calls it); keep one for the arena to free. */
void grit_xds_regex_free(xds_regex *re);
bool grit_xds_arena_keep_regex(xds_arena *a, xds_regex *re);
/* Replace every match of |re| in |s| by |sub| (RE2::GlobalReplace, "\1"
 * style references). Returns a new grit_malloc'd string, or NULL. */
char *grit_xds_regex_replace(const xds_regex *re, const char *s,
                             const char *sub);

/* The decoder's context. */
typedef struct xds_dctx {
  xds_arena *a;
  char *err;
  size_t err_size;
  bool oom;
  char path[256];
  size_t path_len;
} xds_dctx;

/* Append a path segment; returns the length to restore with dctx_pop. */
size_t grit_xds_dctx_push(xds_dctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void grit_xds_dctx_pop(xds_dctx *c, size_t mark);
/* Record an error at the current path (the first one wins). Returns
 * false, for "return grit_xds_fail(c, ...)". */
bool grit_xds_fail(xds_dctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool grit_xds_oom(xds_dctx *c);
/* A reader over a LEN field's bytes. */
static inline grit_pbr xds_reader(const grit_pbf *f) {
  grit_pbr r;
  grit_pbr_init(&r, f->data, f->wt == GRIT_PB_LEN ? f->len : 0);
  return r;
}
/* The next field of |r|: true with |f| filled, false at the end or on
 * malformed input (then an error is recorded). */
bool grit_xds_next(xds_dctx *c, grit_pbr *r, grit_pbf *f);
/* Whether decoding has failed (an error or out of memory). */
static inline bool xds_failed(const xds_dctx *c) {
  return c->err[0] || c->oom;
}
/* A string field into the arena (UTF-8 checked). */
bool grit_xds_str(xds_dctx *c, const grit_pbf *f, const char **out);

/* A FractionalPercent (numerator=1, denominator=2) in parts per million,
 * capped at 100 %. */
bool grit_xds_decode_fraction(xds_dctx *c, const grit_pbf *f, uint32_t *ppm);
/* Decoders of each resource kind (decode_*.c). */
bool grit_xds_decode_listener(xds_dctx *c, grit_pbr *r, xds_resource *res);
bool grit_xds_decode_route_config(xds_dctx *c, grit_pbr *r, xds_resource *res);
bool grit_xds_decode_route_config_body(xds_dctx *c, const grit_pbf *f,
                                       xds_route_config *rc, const char **name);
bool grit_xds_decode_cluster(xds_dctx *c, grit_pbr *r, xds_resource *res);
bool grit_xds_decode_endpoints(xds_dctx *c, grit_pbr *r, xds_resource *res);

#endif
