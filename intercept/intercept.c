/* Interceptor objects and one call's chain (SPEC IC-01). Outbound events
 * run first to last, inbound last to first (the first interceptor is the
 * outermost); on_done reaches exactly the interceptors whose on_start
 * ran. */
#include "intercept/intercept.h"

#include <string.h>

struct grit_interceptor {
  uint32_t refs; /* atomic */
  grit_interceptor_ops ops;
  void *user_data;
};

grit_err grit_interceptor_create(const grit_interceptor_ops *ops,
                                 void *user_data, grit_interceptor **out) {
  if (out)
    *out = NULL;
  if (!ops || !out || ops->version != GRIT_INTERCEPTOR_OPS_VERSION)
    return GRIT_ERR_INVALID_ARG;
  grit_interceptor *ic = grit_calloc(1, sizeof(*ic));
  if (!ic)
    return GRIT_ERR_NOMEM;
  ic->refs = 1;
  ic->ops = *ops;
  ic->user_data = user_data;
  *out = ic;
  return GRIT_OK;
}

void grit_interceptor_ref(grit_interceptor *ic) {
  if (ic)
    __atomic_add_fetch(&ic->refs, 1, __ATOMIC_RELAXED);
}

void grit_interceptor_unref(grit_interceptor *ic) {
  if (!ic || __atomic_sub_fetch(&ic->refs, 1, __ATOMIC_ACQ_REL) != 0)
    return;
  if (ic->ops.destroy)
    ic->ops.destroy(ic->user_data);
  grit_free(ic);
}

typedef struct ic_slot {
  grit_interceptor *ic;
  void *data;
} ic_slot;

struct grit_ic_call {
  size_t n;       /* interceptors in the chain */
  size_t started; /* the first |started| saw on_start */
  bool done;
  ic_slot slot[];
};

grit_err grit_ic_call_create(grit_interceptor *const *a, size_t na,
                             grit_interceptor *const *b, size_t nb,
                             grit_ic_call **out) {
  *out = NULL;
  if (na + nb == 0)
    return GRIT_OK;
  grit_ic_call *c = grit_calloc(1, sizeof(*c) + (na + nb) * sizeof(c->slot[0]));
  if (!c)
    return GRIT_ERR_NOMEM;
  for (size_t i = 0; i < na + nb; i++) {
    grit_interceptor *ic = i < na ? a[i] : b[i - na];
    grit_interceptor_ref(ic);
    c->slot[c->n++].ic = ic;
  }
  *out = c;
  return GRIT_OK;
}

grit_status_code grit_ic_call_start(grit_ic_call *c,
                                    const grit_interceptor_call_info *info,
                                    grit_metadata *md, char *msg,
                                    size_t msg_size) {
  if (!c)
    return GRIT_STATUS_OK;
  for (size_t i = 0; i < c->n; i++) {
    ic_slot *s = &c->slot[i];
    c->started = i + 1;
    if (!s->ic->ops.on_start)
      continue;
    const char *why = NULL;
    grit_status_code code =
        s->ic->ops.on_start(s->ic->user_data, info, md, &s->data, &why);
    if (code != GRIT_STATUS_OK) {
      grit_str_copy(msg, msg_size, why ? why : "failed by an interceptor");
      return code;
    }
  }
  return GRIT_STATUS_OK;
}

void grit_ic_call_send(grit_ic_call *c, const uint8_t *data, size_t len) {
  for (size_t i = 0; c && i < c->started; i++) {
    ic_slot *s = &c->slot[i];
    if (s->ic->ops.on_send)
      s->ic->ops.on_send(s->ic->user_data, s->data, data, len);
  }
}

void grit_ic_call_headers(grit_ic_call *c, const grit_metadata *md) {
  for (size_t i = c ? c->started : 0; i-- > 0;) {
    ic_slot *s = &c->slot[i];
    if (s->ic->ops.on_headers)
      s->ic->ops.on_headers(s->ic->user_data, s->data, md);
  }
}

void grit_ic_call_message(grit_ic_call *c, const uint8_t *data, size_t len) {
  for (size_t i = c ? c->started : 0; i-- > 0;) {
    ic_slot *s = &c->slot[i];
    if (s->ic->ops.on_message)
      s->ic->ops.on_message(s->ic->user_data, s->data, data, len);
  }
}

void grit_ic_call_done(grit_ic_call *c, const grit_status *st) {
  if (!c || c->done)
    return;
  c->done = true;
  for (size_t i = c->started; i-- > 0;) {
    ic_slot *s = &c->slot[i];
    if (s->ic->ops.on_done)
      s->ic->ops.on_done(s->ic->user_data, s->data, st);
  }
}

void grit_ic_call_destroy(grit_ic_call *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->n; i++)
    grit_interceptor_unref(c->slot[i].ic);
  grit_free(c);
}

grit_err grit_ic_list_add(grit_ic_list *l, grit_interceptor *ic) {
  grit_interceptor **items =
      grit_realloc(l->items, (l->n + 1) * sizeof(*items));
  if (!items)
    return GRIT_ERR_NOMEM;
  grit_interceptor_ref(ic);
  items[l->n++] = ic;
  l->items = items;
  return GRIT_OK;
}

grit_err grit_ic_list_copy(const grit_ic_list *src, grit_ic_list *dst) {
  dst->items = NULL;
  dst->n = 0;
  if (!src->n)
    return GRIT_OK;
  dst->items = grit_malloc(src->n * sizeof(*dst->items));
  if (!dst->items)
    return GRIT_ERR_NOMEM;
  for (size_t i = 0; i < src->n; i++) {
    grit_interceptor_ref(src->items[i]);
    dst->items[i] = src->items[i];
  }
  dst->n = src->n;
  return GRIT_OK;
}

void grit_ic_list_free(grit_ic_list *l) {
  for (size_t i = 0; i < l->n; i++)
    grit_interceptor_unref(l->items[i]);
  grit_free(l->items);
  l->items = NULL;
  l->n = 0;
}
