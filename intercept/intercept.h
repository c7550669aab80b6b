/* Client interceptors (SPEC IC-01): the public grit_interceptor objects and
 * one call's chain of them. channel/ builds a chain per call from the
 * channel's and the call's interceptors and reports the call's events to
 * it; this module knows nothing of calls, threads or the loop.
 * Layout: floor 1 of docs/layout.md. */
#ifndef GRIT_INTERCEPT_H
#define GRIT_INTERCEPT_H

#include "util/util.h"

/* One call's chain: every interceptor with its call_data slot. */
typedef struct grit_ic_call grit_ic_call;

/* A chain of |a| then |b| (either may be empty; each item referenced).
 * *out is NULL (and GRIT_OK) when both are empty: no cost for calls on a
 * channel without interceptors. Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_ic_call_create(grit_interceptor *const *a, size_t na,
                             grit_interceptor *const *b, size_t nb,
                             grit_ic_call **out);

/* on_start, first to last. Returns GRIT_STATUS_OK, or the code the failing
 * interceptor returned (its message copied into |msg|, prefixed with
 * nothing); then only the interceptors before it see on_done. */
grit_status_code grit_ic_call_start(grit_ic_call *c,
                                    const grit_interceptor_call_info *info,
                                    grit_metadata *md, char *msg,
                                    size_t msg_size);

/* Outbound, first to last, to the interceptors that started. */
void grit_ic_call_send(grit_ic_call *c, const uint8_t *data, size_t len);
/* Inbound, last to first. */
void grit_ic_call_headers(grit_ic_call *c, const grit_metadata *md);
void grit_ic_call_message(grit_ic_call *c, const uint8_t *data, size_t len);
/* The final status, last to first; only the first call has effect. */
void grit_ic_call_done(grit_ic_call *c, const grit_status *st);
/* Release the chain (NULL is a no-op). Runs no hook: call done first. */
void grit_ic_call_destroy(grit_ic_call *c);

/* A growable list of interceptor references, for channel args and
 * channels. */
typedef struct grit_ic_list {
  grit_interceptor **items;
  size_t n;
} grit_ic_list;

grit_err grit_ic_list_add(grit_ic_list *l, grit_interceptor *ic);
grit_err grit_ic_list_copy(const grit_ic_list *src, grit_ic_list *dst);
void grit_ic_list_free(grit_ic_list *l);

#endif
