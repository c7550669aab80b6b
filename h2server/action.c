/*
 * Owned copies of actions: every pointer an action holds is duplicated when
 * it enters the server (script, default, handler output), so callers may
 * build actions on the stack.
 */
#include "h2s_int.h"

#include <stdlib.h>
#include <string.h>

static void action_copy_md(h2s_header *dst, const h2s_header *src) {
  for (size_t i = 0; i < H2S_MAX_MD; i++) {
    if (src[i].name == NULL) {
      dst[i] = (h2s_header){0};
      break;
    }
    dst[i].name = h2s_xstrdup(src[i].name);
    dst[i].value = h2s_xstrdup(src[i].value ? src[i].value : "");
  }
}

static void action_free_md(h2s_header *md) {
  for (size_t i = 0; i < H2S_MAX_MD && md[i].name; i++) {
    free((char *)md[i].name);
    free((char *)md[i].value);
  }
}

void h2s_action_copy(h2s_action *dst, const h2s_action *src) {
  *dst = *src;
  dst->content_type = h2s_xstrdup(src->content_type);
  dst->grpc_status_raw = h2s_xstrdup(src->grpc_status_raw);
  dst->grpc_message = h2s_xstrdup(src->grpc_message);
  dst->pushback = h2s_xstrdup(src->pushback);
  action_copy_md(dst->headers, src->headers);
  action_copy_md(dst->trailers, src->trailers);
  if (src->data != NULL) {
    void *d = h2s_xmalloc(src->len);
    memcpy(d, src->data, src->len);
    dst->data = d;
  }
}

void h2s_action_free(h2s_action *a) {
  free((char *)a->content_type);
  free((char *)a->grpc_status_raw);
  free((char *)a->grpc_message);
  free((char *)a->pushback);
  action_free_md(a->headers);
  action_free_md(a->trailers);
  free((void *)a->data);
  *a = (h2s_action){0};
}
