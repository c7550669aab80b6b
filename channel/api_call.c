/* Public call functions: each validates, then hands work to the loop
 * (call.c) or waits on the call's condition variable (blocking mode). */
#include "channel/channel_int.h"

#include <stdio.h>
#include <string.h>

/* The status a function that fills one reports for its own error |rv|
 * (issue 19: never a zeroed, OK-looking status). */
static grit_status_code api_err_code(grit_err rv) {
  switch (rv) {
  case GRIT_ERR_INVALID_ARG:
    return GRIT_STATUS_INVALID_ARGUMENT;
  case GRIT_ERR_SHUTDOWN:
    return GRIT_STATUS_UNAVAILABLE; /* as a call the loop refuses */
  case GRIT_ERR_NOMEM:
    return GRIT_STATUS_RESOURCE_EXHAUSTED;
  case GRIT_ERR_CALL_STATE:
  case GRIT_ERR_WOULD_DEADLOCK:
    return GRIT_STATUS_FAILED_PRECONDITION;
  default:
    return GRIT_STATUS_INTERNAL;
  }
}

/* SPEC AP-06: a channel or call made before fork() is the parent's; in the
 * child its thread does not exist and its locks may be held for ever. */
static const char forked_why[] =
    "the channel was created before fork(): use a new one in the child";

static bool call_forked(const grit_call *call) {
  return grit_rt_forked(call->ch->rt);
}

/* Fill |st| (if any) for error |rv|, as "<strerror>: |why|"; return |rv|. */
static grit_err api_fail(grit_status *st, grit_err rv, const char *why) {
  if (!st)
    return rv;
  char msg[256];
  snprintf(msg, sizeof(msg), "%s: %s", grit_strerror(rv),
           why ? why : grit_err_name(rv));
  grit_status_set(st, api_err_code(rv), msg, NULL);
  return rv;
}

grit_err grit_call_start(grit_channel *ch, const char *method,
                         const grit_call_opts *opts, const grit_call_cbs *cbs,
                         void *user_data, grit_call **out) {
  if (!out)
    return GRIT_ERR_INVALID_ARG;
  *out = NULL;
  if (cbs && cbs->version != GRIT_CALL_CBS_VERSION)
    return GRIT_ERR_INVALID_ARG;
  if (ch && grit_rt_forked(ch->rt))
    return GRIT_ERR_SHUTDOWN;
  grit_call *c;
  const char *why;
  grit_err rv = grit_call_create_internal(ch, method, opts, &c, &why);
  if (rv != GRIT_OK)
    return rv;
  c->blocking = cbs == NULL;
  if (cbs)
    c->cbs = *cbs;
  c->user_data = user_data;
  rv = grit_call_auth_start(c); /* IC-01: on the caller's thread */
  if (rv == GRIT_OK)
    rv = grit_call_launch(c);
  if (rv != GRIT_OK) {
    grit_call_unref(c);
    return rv;
  }
  *out = c;
  return GRIT_OK;
}

/* AP-03: accept a message of |len| bytes once there is room; without
 * GRIT_SEND_NO_WAIT in |flags|, wait for it (off the I/O thread). */
static grit_err call_send(grit_call *call, const void *data, size_t len,
                          unsigned flags) {
  if (!call || (!data && len) || len > UINT32_MAX ||
      (flags & ~(GRIT_SEND_NO_COMPRESS | GRIT_SEND_NO_WAIT)))
    return GRIT_ERR_INVALID_ARG;
  if (call_forked(call))
    return GRIT_ERR_SHUTDOWN;
  bool wait = !(flags & GRIT_SEND_NO_WAIT);
  /* The one copy, compressed if the call compresses (CP-04: the replay
   * buffer and every attempt share these bytes). */
  grit_slice *s;
  grit_err rv = grit_call_frame(call, data, len, flags, &s);
  if (rv != GRIT_OK)
    return rv;
  size_t framed = s->len;
  bool on_loop = grit_rt_on_loop(call->ch->rt);
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
  if (rv != GRIT_OK) {
    grit_slice_unref(s);
    return rv;
  }
  grit_call_auth_send(call, data, len); /* IC-01 */
  return grit_call_queue_send(call, s, len);
}

grit_err grit_call_send(grit_call *call, const void *data, size_t len) {
  return call_send(call, data, len, 0);
}

grit_err grit_call_try_send(grit_call *call, const void *data, size_t len) {
  return call_send(call, data, len, GRIT_SEND_NO_WAIT);
}

grit_err grit_call_send_flags(grit_call *call, const void *data, size_t len,
                              unsigned flags) {
  return call_send(call, data, len, flags);
}

grit_err grit_call_close_send(grit_call *call) {
  if (!call)
    return GRIT_ERR_INVALID_ARG;
  if (call_forked(call))
    return GRIT_ERR_SHUTDOWN;
  pthread_mutex_lock(&call->mu);
  bool closed = call->send_closed_user;
  call->send_closed_user = true;
  pthread_mutex_unlock(&call->mu);
  if (closed)
    return GRIT_ERR_CALL_STATE;
  return grit_call_queue_close(call);
}

void grit_call_cancel(grit_call *call) {
  if (!call || call_forked(call))
    return;
  pthread_mutex_lock(&call->mu);
  bool done = call->done;
  pthread_mutex_unlock(&call->mu);
  if (!done)
    grit_call_queue_cancel(call);
}

static grit_err blocking_check(grit_call *call, const char **why) {
  *why = NULL;
  if (!call) {
    *why = "the call is NULL";
    return GRIT_ERR_INVALID_ARG;
  }
  if (call_forked(call)) {
    *why = forked_why;
    return GRIT_ERR_SHUTDOWN;
  }
  if (!call->blocking) {
    *why = "the call has callbacks (async mode)";
    return GRIT_ERR_CALL_STATE;
  }
  if (grit_rt_on_loop(call->ch->rt)) {
    *why = "called on the I/O thread";
    return GRIT_ERR_WOULD_DEADLOCK;
  }
  return GRIT_OK;
}

grit_err grit_call_recv(grit_call *call, grit_bytes *out) {
  const char *why;
  grit_err rv = blocking_check(call, &why);
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
    return GRIT_END_OF_STREAM;
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
  if (!st)
    return GRIT_ERR_INVALID_ARG;
  memset(st, 0, sizeof(*st));
  const char *why;
  grit_err rv = blocking_check(call, &why);
  if (rv != GRIT_OK)
    return api_fail(st, rv, why);
  pthread_mutex_lock(&call->mu);
  if (call->finish_taken) {
    pthread_mutex_unlock(&call->mu);
    return api_fail(st, GRIT_ERR_CALL_STATE,
                    "grit_call_finish already returned the status");
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
  const char *why;
  if (blocking_check(call, &why) != GRIT_OK)
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
  if (!call || call_forked(call))
    return; /* a parent's call: its memory is left as it is */
  grit_call_cancel(call);
  grit_call_unref(call);
}

grit_err grit_call_get_info(grit_call *call, grit_call_info *info) {
  if (!call || !info || grit_sized_size(info) < sizeof(size_t))
    return GRIT_ERR_INVALID_ARG;
  if (call_forked(call))
    return GRIT_ERR_SHUTDOWN;
  pthread_mutex_lock(&call->mu);
  grit_call_info all = call->info;
  pthread_mutex_unlock(&call->mu);
  all.size = sizeof(all);
  return grit_sized_fill(info, &all, sizeof(all)); /* docs/abi.md */
}

/* ---- unary ---- */

static grit_err unary_start(grit_channel *ch, const char *method,
                            const void *req, size_t req_len,
                            const grit_call_opts *opts, grit_unary_cb cb,
                            void *user_data, const char **why) {
  *why = NULL;
  if (!cb) {
    *why = "the callback is NULL";
    return GRIT_ERR_INVALID_ARG;
  }
  if ((!req && req_len) || req_len > UINT32_MAX) {
    *why = req_len > UINT32_MAX ? "the request is over 4 GiB"
                                : "the request is NULL with a length";
    return GRIT_ERR_INVALID_ARG;
  }
  if (ch && grit_rt_forked(ch->rt)) {
    *why = forked_why;
    return GRIT_ERR_SHUTDOWN;
  }
  grit_call *c;
  grit_err rv = grit_call_create_internal(ch, method, opts, &c, why);
  if (rv != GRIT_OK)
    return rv;
  c->unary_cb = cb;
  c->user_data = user_data;
  c->kind = GRIT_METHOD_UNARY;              /* exactly one response */
  if (grit_call_auth_start(c) != GRIT_OK) { /* IC-01 */
    grit_call_unref(c);
    *why = "out of memory starting the call's interceptors";
    return GRIT_ERR_NOMEM;
  }
  grit_call_auth_send(c, req, req_len);
  grit_slice *s;
  if (grit_call_frame(c, req, req_len, 0, &s) != GRIT_OK) {
    grit_call_unref(c);
    *why = "out of memory framing the request";
    return GRIT_ERR_NOMEM;
  }
  /* Start, send and half-close go to the loop as one batch, allocated
   * before launch: out of memory is GRIT_ERR_NOMEM, not a cancelled call. */
  rv = grit_call_launch_unary(c, s, req_len);
  if (rv != GRIT_OK)
    grit_call_unref(c);
  return rv;
}

grit_err grit_unary_call_async(grit_channel *ch, const char *method,
                               const void *req, size_t req_len,
                               const grit_call_opts *opts, grit_unary_cb cb,
                               void *user_data) {
  const char *why;
  return unary_start(ch, method, req, req_len, opts, cb, user_data, &why);
}

typedef struct unary_waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  grit_bytes *resp;
  grit_status *st;
  grit_call_info *info;
} unary_waiter;

static void unary_wait_cb(const grit_status *st, const uint8_t *resp,
                          size_t len, const grit_call_info *info, void *ud) {
  unary_waiter *w = ud;
  bool copied = true;
  if (w->resp && resp) {
    w->resp->data = grit_memdup(resp, len);
    w->resp->len = w->resp->data ? len : 0;
    copied = w->resp->data != NULL;
  }
  if (w->st) {
    /* Never an OK status without the response it promised (issue 19). */
    if (!copied)
      grit_status_set(w->st, GRIT_STATUS_RESOURCE_EXHAUSTED,
                      "out of memory copying the response", NULL);
    else if (grit_status_set(w->st, st->code, st->message, st->trailers) !=
             GRIT_OK)
      w->st->code = GRIT_STATUS_RESOURCE_EXHAUSTED;
  }
  if (w->info) /* as far as the caller's struct reaches (docs/abi.md) */
    grit_sized_fill(w->info, info, sizeof(*info));
  pthread_mutex_lock(&w->mu);
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

grit_err grit_unary_call(grit_channel *ch, const char *method, const void *req,
                         size_t req_len, const grit_call_opts *opts,
                         grit_bytes *resp, grit_status *st,
                         grit_call_info *info) {
  grit_call_info zero = GRIT_CALL_INFO_INIT;
  bool info_ok = !info || grit_sized_fill(info, &zero, sizeof(zero)) == GRIT_OK;
  if (resp) {
    resp->data = NULL;
    resp->len = 0;
  }
  if (st)
    memset(st, 0, sizeof(*st));
  if (!ch)
    return api_fail(st, GRIT_ERR_INVALID_ARG, "the channel is NULL");
  if (!info_ok)
    return api_fail(st, GRIT_ERR_INVALID_ARG,
                    "grit_call_info.size is not set (GRIT_CALL_INFO_INIT)");
  if (grit_rt_on_loop(ch->rt))
    return api_fail(st, GRIT_ERR_WOULD_DEADLOCK, "called on the I/O thread");
  unary_waiter w = {.done = false, .resp = resp, .st = st, .info = info};
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  const char *why;
  grit_err rv =
      unary_start(ch, method, req, req_len, opts, unary_wait_cb, &w, &why);
  if (rv == GRIT_OK) {
    pthread_mutex_lock(&w.mu);
    while (!w.done)
      pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
  }
  pthread_mutex_destroy(&w.mu);
  pthread_cond_destroy(&w.cv);
  return rv == GRIT_OK ? GRIT_OK : api_fail(st, rv, why);
}

/* ---- a unary call of a message already framed (OP-02) ---- */

/* unary_start's steps for |framed| (the gRPC message prefix and |raw_len|
 * bytes; taken in every case), for the span exporter, which encodes its
 * request straight into the buffer the call sends. */
static grit_err framed_unary_start(grit_channel *ch, const char *method,
                                   grit_slice *framed, size_t raw_len,
                                   const grit_call_opts *opts, grit_unary_cb cb,
                                   void *user_data, const char **why) {
  *why = NULL;
  grit_err rv = GRIT_ERR_SHUTDOWN;
  grit_call *c = NULL;
  if (grit_rt_forked(ch->rt))
    *why = forked_why;
  else
    rv = grit_call_create_internal(ch, method, opts, &c, why);
  if (rv == GRIT_OK) {
    c->unary_cb = cb;
    c->user_data = user_data;
    c->kind = GRIT_METHOD_UNARY;
    if (grit_call_auth_start(c) != GRIT_OK) { /* IC-01 */
      grit_call_unref(c);
      *why = "out of memory starting the call's interceptors";
      rv = GRIT_ERR_NOMEM;
    } else {
      grit_call_auth_send(c, framed->data + 5, raw_len);
      return grit_call_launch_unary(c, framed, raw_len); /* takes it */
    }
  }
  grit_slice_unref(framed);
  return rv;
}

const grit_framed_unary_ops grit_framed_unary = {framed_unary_start};
