/* Refcounted immutable byte buffers: header and bytes in one allocation. */
#include "util/util.h"

#include <string.h>

grit_slice *grit_slice_new(size_t len) {
  if (len > SIZE_MAX - sizeof(grit_slice))
    return NULL;
  grit_slice *s = grit_malloc(sizeof(*s) + len);
  if (!s)
    return NULL;
  s->refs = 1;
  s->len = len;
  s->data = (uint8_t *)(s + 1);
  return s;
}

grit_slice *grit_slice_from_copy(const void *p, size_t len) {
  grit_slice *s = grit_slice_new(len);
  if (s && len)
    memcpy(s->data, p, len);
  return s;
}

grit_slice *grit_slice_ref(grit_slice *s) {
  if (s)
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
  return s;
}

void grit_slice_unref(grit_slice *s) {
  if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
    grit_free(s);
}
