/* nghttp2's memory for one session: its small blocks (a stream, an
 * outbound item, a request's header copy: four allocations per unary call)
 * are kept on per-size free lists when nghttp2 frees them and handed back
 * on its next request of that size class, instead of going to the process
 * allocator each time. With 32 calls in flight a loop turn frees and then
 * allocates dozens of blocks of one size; glibc's per-thread cache holds 7
 * per size, so most of those took malloc's and free's slow paths (issue
 * 24: about 1 000 instructions per call).
 *
 * Every block carries an 8-byte header word (its size class, or the size
 * of a block too big to keep) so that free and realloc know what they hold;
 * sizes are rounded up to 16 bytes, as glibc's chunks are anyway, so a
 * held call's stream costs at most 8 bytes more than before. The caller's
 * part is 8-byte aligned, which is what nghttp2's objects (pointers,
 * 64-bit counters, byte buffers) need. Only the session's loop thread
 * calls these (nghttp2 is single-threaded per session). At most H2MEM_KEEP
 * blocks per class are kept; the rest go back at once, and
 * grit_h2mem_release returns all of them when the session is gone. Built
 * with AddressSanitizer, nothing is kept, so that a use after free inside
 * nghttp2 is still caught. */
#include "transport/transport.h"
#include "transport/transport_int.h"

#include <stdint.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#  define H2MEM_NO_KEEP 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define H2MEM_NO_KEEP 1
#  endif
#endif

#define H2MEM_HDR sizeof(uint64_t)
#define H2MEM_STEP 16 /* class k holds blocks of (k + 1) * 16 bytes */
#define H2MEM_KEEP 32
#define H2MEM_BIG 0xffu /* class of a block not kept: its size follows */

/* The header word: the usable size above the low 8 bits, the class in
 * them. */
static uint64_t *h2mem_hdr_of(void *p) {
  return (uint64_t *)(void *)((char *)p - H2MEM_HDR);
}

static unsigned h2mem_class(size_t size) {
  if (size == 0)
    return 0;
  size_t k = (size - 1) / H2MEM_STEP;
  return k < GRIT_H2MEM_CLASSES ? (unsigned)k : H2MEM_BIG;
}

static size_t h2mem_usable(uint64_t w) {
  return (size_t)(w >> 8);
}

static void *h2mem_malloc(size_t size, void *ud) {
  grit_h2mem *m = ud;
  unsigned k = h2mem_class(size);
  if (k != H2MEM_BIG && m->free[k]) {
    void *p = m->free[k];
    memcpy(&m->free[k], p, sizeof(void *));
    m->nfree[k]--;
    return p;
  }
  size_t usable = k == H2MEM_BIG ? size : (size_t)(k + 1) * H2MEM_STEP;
  if (usable > (SIZE_MAX >> 8) - H2MEM_HDR)
    return NULL;
  char *raw = m->a.malloc(usable + H2MEM_HDR, m->a.user_data);
  if (!raw)
    return NULL;
  uint64_t w = (uint64_t)usable << 8 | k;
  memcpy(raw, &w, sizeof(w));
  return raw + H2MEM_HDR;
}

static void h2mem_free(void *p, void *ud) {
  grit_h2mem *m = ud;
  if (!p)
    return;
  uint64_t *h = h2mem_hdr_of(p);
  unsigned k = (unsigned)(*h & 0xff);
#ifndef H2MEM_NO_KEEP
  if (k != H2MEM_BIG && m->nfree[k] < H2MEM_KEEP) {
    memcpy(p, &m->free[k], sizeof(void *));
    m->free[k] = p;
    m->nfree[k]++;
    return;
  }
#endif
  (void)k;
  m->a.free(h, m->a.user_data);
}

static void *h2mem_calloc(size_t n, size_t size, void *ud) {
  if (size != 0 && n > SIZE_MAX / size)
    return NULL;
  void *p = h2mem_malloc(n * size, ud);
  if (p)
    memset(p, 0, n * size);
  return p;
}

static void *h2mem_realloc(void *p, size_t size, void *ud) {
  grit_h2mem *m = ud;
  if (!p)
    return h2mem_malloc(size, ud);
  uint64_t *h = h2mem_hdr_of(p);
  size_t have = h2mem_usable(*h);
  if (size <= have)
    return p;
  if ((*h & 0xff) == H2MEM_BIG && h2mem_class(size) == H2MEM_BIG) {
    if (size > (SIZE_MAX >> 8) - H2MEM_HDR)
      return NULL;
    char *raw = m->a.realloc(h, size + H2MEM_HDR, m->a.user_data);
    if (!raw)
      return NULL;
    uint64_t w = (uint64_t)size << 8 | H2MEM_BIG;
    memcpy(raw, &w, sizeof(w));
    return raw + H2MEM_HDR;
  }
  void *q = h2mem_malloc(size, ud);
  if (!q)
    return NULL;
  memcpy(q, p, have);
  h2mem_free(p, ud);
  return q;
}

void grit_h2mem_init(grit_h2mem *m) {
  memset(m, 0, sizeof(*m));
  m->a = *grit_allocator_get();
}

nghttp2_mem grit_h2mem_nghttp2(grit_h2mem *m) {
  nghttp2_mem mem = {
      .mem_user_data = m,
      .malloc = h2mem_malloc,
      .free = h2mem_free,
      .calloc = h2mem_calloc,
      .realloc = h2mem_realloc,
  };
  return mem;
}

void grit_h2mem_release(grit_h2mem *m) {
  for (unsigned k = 0; k < GRIT_H2MEM_CLASSES; k++) {
    while (m->free[k]) {
      void *p = m->free[k];
      memcpy(&m->free[k], p, sizeof(void *));
      m->a.free(h2mem_hdr_of(p), m->a.user_data);
    }
    m->nfree[k] = 0;
  }
}
