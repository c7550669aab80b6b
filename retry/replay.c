/* The replay buffer (SPEC RT-07): references to framed sends, no copies,
 * bounded per call and per channel. */
#include "retry/retry.h"

void grit_replay_init(grit_replay_buf *rb, size_t call_limit,
                      size_t *channel_bytes, size_t channel_limit) {
  grit_list_init(&rb->items);
  rb->count = 0;
  rb->bytes = 0;
  rb->call_limit = call_limit;
  rb->channel_bytes = channel_bytes;
  rb->channel_limit = channel_limit;
  rb->closed = false;
  rb->first_used = false;
}

bool grit_replay_fits(const grit_replay_buf *rb, size_t len) {
  if (len > rb->call_limit || rb->bytes > rb->call_limit - len)
    return false;
  if (!rb->channel_bytes)
    return true;
  /* Atomic only so that a metrics scrape may read it (OB-01). */
  size_t used = __atomic_load_n(rb->channel_bytes, __ATOMIC_RELAXED);
  return len <= rb->channel_limit && used <= rb->channel_limit - len;
}

grit_err grit_replay_add(grit_replay_buf *rb, grit_slice *s) {
  grit_replay_item *it = &rb->first;
  if (rb->first_used && (it = grit_malloc(sizeof(*it))) == NULL)
    return GRIT_ERR_NOMEM;
  if (it == &rb->first)
    rb->first_used = true;
  it->slice = grit_slice_ref(s);
  grit_list_insert_tail(&rb->items, &it->link);
  rb->count++;
  rb->bytes += s->len;
  if (rb->channel_bytes)
    __atomic_add_fetch(rb->channel_bytes, s->len, __ATOMIC_RELAXED);
  return GRIT_OK;
}

void grit_replay_free(grit_replay_buf *rb) {
  grit_list *e;
  while ((e = grit_list_pop_head(&rb->items)) != NULL) {
    grit_replay_item *it = GRIT_CONTAINER_OF(e, grit_replay_item, link);
    grit_slice_unref(it->slice);
    if (it == &rb->first)
      rb->first_used = false;
    else
      grit_free(it);
  }
  if (rb->channel_bytes)
    __atomic_sub_fetch(rb->channel_bytes, rb->bytes, __ATOMIC_RELAXED);
  rb->count = 0;
  rb->bytes = 0;
}
