/* Allocation wrappers over the process allocator (grit_set_allocator). */
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

static void *libc_malloc(size_t size, void *ud) {
  (void)ud;
  return malloc(size);
}

static void libc_free(void *p, void *ud) {
  (void)ud;
  free(p);
}

static void *libc_calloc(size_t n, size_t size, void *ud) {
  (void)ud;
  return calloc(n, size);
}

static void *libc_realloc(void *p, size_t size, void *ud) {
  (void)ud;
  return realloc(p, size);
}

static const grit_allocator libc_allocator = {
    .user_data = NULL,
    .malloc = libc_malloc,
    .free = libc_free,
    .calloc = libc_calloc,
    .realloc = libc_realloc,
};

static grit_allocator current = {
    .user_data = NULL,
    .malloc = libc_malloc,
    .free = libc_free,
    .calloc = libc_calloc,
    .realloc = libc_realloc,
};

void grit_set_allocator(const grit_allocator *a) {
  current = a ? *a : libc_allocator;
}

const grit_allocator *grit_allocator_get(void) {
  return &current;
}

void *grit_malloc(size_t size) {
  return current.malloc(size, current.user_data);
}

void *grit_calloc(size_t n, size_t size) {
  return current.calloc(n, size, current.user_data);
}

void *grit_realloc(void *p, size_t size) {
  return current.realloc(p, size, current.user_data);
}

void grit_free(void *p) {
  if (p)
    current.free(p, current.user_data);
}

/* Issue 23 point 5: protobuf-c's allocator shape, for generated stubs. */
void *grit_allocator_alloc(void *allocator_data, size_t size) {
  (void)allocator_data;
  return grit_malloc(size);
}

void grit_allocator_free(void *allocator_data, void *ptr) {
  (void)allocator_data;
  grit_free(ptr);
}

void *grit_memdup(const void *p, size_t n) {
  void *q = grit_malloc(n ? n : 1);
  if (q && n)
    memcpy(q, p, n);
  return q;
}

char *grit_strndup(const char *s, size_t n) {
  char *q = grit_malloc(n + 1);
  if (!q)
    return NULL;
  memcpy(q, s, n);
  q[n] = '\0';
  return q;
}

char *grit_strdup(const char *s) {
  return s ? grit_strndup(s, strlen(s)) : NULL;
}

size_t grit_str_copy(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap)
    n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
  return n;
}

size_t grit_sized_size(const void *dst) {
  size_t size;
  memcpy(&size, dst, sizeof(size));
  return size;
}

grit_err grit_sized_fill(void *dst, const void *src, size_t src_size) {
  size_t size = grit_sized_size(dst);
  if (size < sizeof(size_t))
    return GRIT_ERR_INVALID_ARG;
  size_t n = size < src_size ? size : src_size;
  memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
         n - sizeof(size_t));
  if (size > n)
    memset((char *)dst + n, 0, size - n);
  return GRIT_OK;
}
