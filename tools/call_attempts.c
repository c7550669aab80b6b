/* grit call: the attempt records of the channel's observer (SPEC MX-03),
 * kept per call until the call ends, for --attempts timelines, the JSON
 * "reason" and the peer of a call that never committed. */
#include "call.h"

#include <stdlib.h>
#include <string.h>

void att_store_init(att_store *s) {
  memset(s, 0, sizeof(*s));
  pthread_mutex_init(&s->mu, NULL);
}

void att_store_free(att_store *s) {
  free(s->v);
  pthread_mutex_destroy(&s->mu);
}

/* A bounded copy without snprintf's format parsing (one per field). */
static void copy_str(char *dst, size_t size, const char *src) {
  size_t n = src ? strnlen(src, size - 1) : 0;
  memcpy(dst, src ? src : "", n);
  dst[n] = '\0';
}

void att_observe(const grit_attempt_record *rec, void *ud) {
  att_store *s = ud;
  pthread_mutex_lock(&s->mu);
  if (s->n >= ATT_STORE_MAX) { /* bounded: the oldest calls' stay */
    pthread_mutex_unlock(&s->mu);
    return;
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    att_rec *v = realloc(s->v, cap * sizeof(*v));
    if (!v) {
      pthread_mutex_unlock(&s->mu);
      return;
    }
    s->v = v;
    s->cap = cap;
  }
  att_rec *a = &s->v[s->n++];
  *a = (att_rec){.call_id = rec->call_id,
                 .attempt = rec->attempt,
                 .kind = rec->kind,
                 .start_us = rec->start_us,
                 .end_us = rec->end_us,
                 .code = rec->code,
                 .backoff_ms = rec->backoff_ms,
                 .pushback = rec->pushback,
                 .reason = rec->reason};
  copy_str(a->peer, sizeof(a->peer), rec->peer);
  copy_str(a->message, sizeof(a->message), rec->message);
  copy_str(a->skipped, sizeof(a->skipped), rec->skipped);
  copy_str(a->picked_by, sizeof(a->picked_by), rec->picked_by);
  copy_str(a->req_enc, sizeof(a->req_enc), rec->request_encoding);
  copy_str(a->resp_enc, sizeof(a->resp_enc), rec->response_encoding);
  copy_str(a->trace_id, sizeof(a->trace_id), rec->trace_id);
  copy_str(a->span_id, sizeof(a->span_id), rec->span_id);
  a->previous_rpc_attempts = rec->previous_rpc_attempts;
  a->transparent_retry = rec->transparent_retry;
  pthread_mutex_unlock(&s->mu);
}

/* Timeline order: by attempt number, then start (a transparent retry
 * keeps its attempt's number). */
static int att_cmp(const void *x, const void *y) {
  const att_rec *a = x, *b = y;
  if (a->attempt != b->attempt)
    return a->attempt < b->attempt ? -1 : 1;
  return a->start_us < b->start_us ? -1 : a->start_us > b->start_us;
}

size_t att_take(att_store *s, uint64_t id, att_rec *out, size_t max) {
  size_t n = 0, k = 0;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n; i++) {
    if (s->v[i].call_id == id) {
      if (n < max)
        out[n++] = s->v[i];
    } else {
      s->v[k++] = s->v[i];
    }
  }
  s->n = k;
  pthread_mutex_unlock(&s->mu);
  qsort(out, n, sizeof(*out), att_cmp);
  return n;
}

/* The reason of the attempt that decided it (losing hedges say
 * HEDGE_LOST, earlier ones NONE); from the status when no record says
 * (e.g. a deadline during a backoff). */
grit_attempt_reason att_call_reason(const att_rec *a, size_t n,
                                    grit_status_code code) {
  for (size_t i = 0; i < n; i++) {
    if (a[i].reason != GRIT_REASON_NONE &&
        a[i].reason != GRIT_REASON_HEDGE_LOST)
      return a[i].reason;
  }
  if (code == GRIT_STATUS_DEADLINE_EXCEEDED)
    return GRIT_REASON_DEADLINE;
  if (code == GRIT_STATUS_CANCELLED)
    return GRIT_REASON_CANCELLED;
  return n ? a[n - 1].reason : GRIT_REASON_NONE;
}

/* grit_call_info.peer is the committed attempt's; a call that ended before
 * any response headers (a deadline, a reset) has none, although its
 * request reached a server: the attempts' records say which. */
const char *att_call_peer(const grit_call_info *info, const att_rec *a,
                          size_t n) {
  if (info->peer[0])
    return info->peer;
  for (size_t i = n; i-- > 0;) {
    if (a[i].peer[0])
      return a[i].peer;
  }
  return "";
}

void call_print_metrics(grit_channel *ch) {
  grit_bytes b = {0};
  if (grit_metrics_write_prometheus(ch, &b) != GRIT_OK) {
    fprintf(stderr, "grit: out of memory writing metrics\n");
    return;
  }
  fflush(stdout);
  fwrite(b.data, 1, b.len, stdout);
  grit_bytes_free(&b);
}
