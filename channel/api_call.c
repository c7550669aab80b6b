/* Public call functions: each validates, then hands work to the loop
 * (call.c) or waits on the call's condition variable (blocking mode). */
#include "channel/channel_int.h"

#include <string.h>

grit_err grit_call_start(grit_channel *ch, const char *method,
                         const grit_call_opts *opts, const grit_call_cbs *cbs,
                         void *user_data, grit_call **out) {
  if (!out)
    return GRIT_ERR_INVALID_ARG;
  *out = NULL;
  if (cbs && cbs->version != GRIT_CALL_CBS_VERSION)
    return GRIT_ERR_INVALID_ARG;
  if (ch && grit_channel_get_state(ch, false) == GRIT_STATE_SHUTDOWN)
    return GRIT_ERR_SHUTDOWN;
  grit_call *c;
  grit_err rv = grit_call_create_internal(ch, method, opts, &c);
  if (rv != GRIT_OK)
    return rv;
  c->blocking = cbs == NULL;
  if (cbs)
    c->cbs = *cbs;
  c->user_data = user_data;
  rv = grit_call_launch(c);
  if (rv != GRIT_OK) {
    grit_call_unref(c);
    return rv;
  }
  *out = c;
  return GRIT_OK;
}

/* AP-03: accept a message of |len| bytes once there is room; |wait|
 * says whether to wait for it (off the I/O thread) or refuse. */
static grit_err call_send(grit_call *call, const void *data, size_t len,
                          bool wait) {
  if (!call || (!data && len) || len > UINT32_MAX)
    return GRIT_ERR_INVALID_ARG;
  size_t framed = len + 5;
  bool on_loop = grit_rt_on_loop(call->ch->rt);
  grit_err rv = GRIT_OK;
  pthread_mutex_lock(&call->mu);
  while (!call->send_closed_user && !call->done &&
         !grit_call_send_room_locked(call, framed)) {
    if (!wait || on_loop) {
      rv = wait ? GRIT_ERR_WOULD_DEADLOCK : GRIT_ERR_AGAIN;
      call->send_ready_wanted = !wait;
      break;
    }
    pthread_cond_wait(&call->cv, &call->mu);
  }
  if (rv == GRIT_OK && (call->send_closed_user || call->done))
    rv = GRIT_ERR_CALL_STATE;
  if (rv == GRIT_OK)
    call->send_queued += framed;
  pthread_mutex_unlock(&call->mu);
  if (rv != GRIT_OK)
    return rv;
  grit_slice *s = grit_frame_message(data, len); /* the one copy */
  if (!s) {
    pthread_mutex_lock(&call->mu);
    call->send_queued -= framed;
    pthread_mutex_unlock(&call->mu);
    return GRIT_ERR_NOMEM;
  }
  return grit_call_queue_send(call, s);
}

grit_err grit_call_send(grit_call *call, const void *data, size_t len) {
  return call_send(call, data, len, true);
}

grit_err grit_call_try_send(grit_call *call, const void *data, size_t len) {
  return call_send(call, data, len, false);
}

grit_err grit_call_close_send(grit_call *call) {
  if (!call)
    return GRIT_ERR_INVALID_ARG;
  pthread_mutex_lock(&call->mu);
  bool closed = call->send_closed_user;
  call->send_closed_user = true;
  pthread_mutex_unlock(&call->mu);
  if (closed)
    return GRIT_ERR_CALL_STATE;
  return grit_call_queue_close(call);
}

void grit_call_cancel(grit_call *call) {
  if (!call)
    return;
  pthread_mutex_lock(&call->mu);
  bool done = call->done;
  pthread_mutex_unlock(&call->mu);
  if (!done)
    grit_call_queue_cancel(call);
}

static grit_err blocking_check(grit_call *call) {
  if (!call)
    return GRIT_ERR_INVALID_ARG;
  if (!call->blocking)
    return GRIT_ERR_CALL_STATE;
  if (grit_rt_on_loop(call->ch->rt))
    return GRIT_ERR_WOULD_DEADLOCK;
  return GRIT_OK;
}

grit_err grit_call_recv(grit_call *call, grit_bytes *out) {
  grit_err rv = blocking_check(call);
  if (rv != GRIT_OK || !out)
    return rv != GRIT_OK ? rv : GRIT_ERR_INVALID_ARG;
  out->data = NULL;
  out->len = 0;
  pthread_mutex_lock(&call->mu);
  while (grit_list_empty(&call->recvq) && !call->done)
    pthread_cond_wait(&call->cv, &call->mu);
  grit_list *e = grit_list_pop_head(&call->recvq);
  pthread_mutex_unlock(&call->mu);
  if (!e)
    return GRIT_ERR_NOT_FOUND;
  recv_msg *m = GRIT_CONTAINER_OF(e, recv_msg, link);
  out->data = grit_memdup(m->slice->data, m->slice->len);
  if (!out->data) { /* the message stays first in line for the next try */
    pthread_mutex_lock(&call->mu);
    grit_list_insert_head(&call->recvq, &m->link);
    pthread_mutex_unlock(&call->mu);
    return GRIT_ERR_NOMEM;
  }
  out->len = m->slice->len;
  pthread_mutex_lock(&call->mu);
  grit_call_recv_taken_locked(call, m->slice->len);
  pthread_mutex_unlock(&call->mu);
  grit_slice_unref(m->slice);
  grit_free(m);
  return GRIT_OK;
}

grit_err grit_call_finish(grit_call *call, grit_status *st) {
  grit_err rv = blocking_check(call);
  if (rv != GRIT_OK || !st)
    return rv != GRIT_OK ? rv : GRIT_ERR_INVALID_ARG;
  pthread_mutex_lock(&call->mu);
  if (call->finish_taken) {
    pthread_mutex_unlock(&call->mu);
    return GRIT_ERR_CALL_STATE;
  }
  call->finish_taken = true;
  /* Unread messages are discarded (grit.h); a paused stream resumes, or
   * the server could never send its status. */
  call->recv_discard = true;
  grit_list unread;
  grit_list_init(&unread);
  while (!grit_list_empty(&call->recvq))
    grit_list_insert_tail(&unread, grit_list_pop_head(&call->recvq));
  grit_call_recv_taken_locked(call, call->recv_bytes);
  while (!call->done)
    pthread_cond_wait(&call->cv, &call->mu);
  *st = call->status; /* hand over ownership */
  memset(&call->status, 0, sizeof(call->status));
  pthread_mutex_unlock(&call->mu);
  grit_list *e;
  while ((e = grit_list_pop_head(&unread)) != NULL) {
    recv_msg *m = GRIT_CONTAINER_OF(e, recv_msg, link);
    grit_slice_unref(m->slice);
    grit_free(m);
  }
  return GRIT_OK;
}

const grit_metadata *grit_call_headers(grit_call *call) {
  if (blocking_check(call) != GRIT_OK)
    return NULL;
  pthread_mutex_lock(&call->mu);
  while (!call->headers_set && !call->done)
    pthread_cond_wait(&call->cv, &call->mu);
  if (!call->headers && call->done)
    grit_metadata_create(&call->headers); /* Trailers-Only: empty */
  const grit_metadata *md = call->headers;
  pthread_mutex_unlock(&call->mu);
  return md;
}

void grit_call_destroy(grit_call *call) {
  if (!call)
    return;
  grit_call_cancel(call);
  grit_call_unref(call);
}

grit_err grit_call_get_info(grit_call *call, grit_call_info *info) {
  if (!call || !info)
    return GRIT_ERR_INVALID_ARG;
  pthread_mutex_lock(&call->mu);
  *info = call->info;
  pthread_mutex_unlock(&call->mu);
  return GRIT_OK;
}

/* ---- unary ---- */

grit_err grit_unary_call_async(grit_channel *ch, const char *method,
                               const void *req, size_t req_len,
                               const grit_call_opts *opts, grit_unary_cb cb,
                               void *user_data) {
  if (!cb || (!req && req_len) || req_len > UINT32_MAX)
    return GRIT_ERR_INVALID_ARG;
  if (ch && grit_channel_get_state(ch, false) == GRIT_STATE_SHUTDOWN)
    return GRIT_ERR_SHUTDOWN;
  grit_call *c;
  grit_err rv = grit_call_create_internal(ch, method, opts, &c);
  if (rv != GRIT_OK)
    return rv;
  c->unary_cb = cb;
  c->user_data = user_data;
  grit_slice *s = grit_frame_message(req, req_len);
  if (!s) {
    grit_call_unref(c);
    return GRIT_ERR_NOMEM;
  }
  /* Start, send and half-close go to the loop as one batch, allocated
   * before launch: out of memory is GRIT_ERR_NOMEM, not a cancelled call. */
  rv = grit_call_launch_unary(c, s);
  if (rv != GRIT_OK) {
    grit_call_unref(c);
    return rv;
  }
  return GRIT_OK;
}

typedef struct unary_waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  grit_bytes *resp;
  grit_status *st;
} unary_waiter;

static void unary_wait_cb(const grit_status *st, const uint8_t *resp,
                          size_t len, const grit_call_info *info, void *ud) {
  unary_waiter *w = ud;
  if (w->resp && resp) {
    w->resp->data = grit_memdup(resp, len);
    w->resp->len = w->resp->data ? len : 0;
  }
  if (w->st)
    grit_status_set(w->st, st->code, st->message, st->trailers);
  pthread_mutex_lock(&w->mu);
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

grit_err grit_unary_call(grit_channel *ch, const char *method, const void *req,
                         size_t req_len, const grit_call_opts *opts,
                         grit_bytes *resp, grit_status *st) {
  if (!ch)
    return GRIT_ERR_INVALID_ARG;
  if (grit_rt_on_loop(ch->rt))
    return GRIT_ERR_WOULD_DEADLOCK;
  if (resp) {
    resp->data = NULL;
    resp->len = 0;
  }
  if (st)
    memset(st, 0, sizeof(*st));
  unary_waiter w = {.done = false, .resp = resp, .st = st};
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  grit_err rv =
      grit_unary_call_async(ch, method, req, req_len, opts, unary_wait_cb, &w);
  if (rv == GRIT_OK) {
    pthread_mutex_lock(&w.mu);
    while (!w.done)
      pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
  }
  pthread_mutex_destroy(&w.mu);
  pthread_cond_destroy(&w.cv);
  return rv;
}
