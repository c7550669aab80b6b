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

/* Its own reference is never given up, so it is never freed: every
 * reference handed out is one more, given back by grit_slice_unref. Its
 * data points at itself: not NULL, and never read (len 0). */
static grit_slice slice_empty = {
    .refs = 1, .len = 0, .data = (uint8_t *)&slice_empty};

grit_slice *grit_slice_empty(void) {
  return grit_slice_ref(&slice_empty);
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
