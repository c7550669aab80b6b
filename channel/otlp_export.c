/* OTLP/gRPC span export (SPEC OP-02): one exporter per collector
 * endpoint, shared by the channels that name it. The loop fills a
 * finished span in place into a slot of a preallocated bounded ring (one
 * lock, plain stores and short copies; no allocation, no formatting;
 * full: dropped and counted); a thread of the exporter encodes batches
 * straight from the ring (observe/otlp.c: names, UTF-8, protobuf) and
 * sends them with a blocking unary call on a grit channel of its own, so
 * no call ever waits for the collector. */
#include "channel/channel_int.h"

#include <string.h>
#include <time.h>

#define OTLP_QUEUE 2048      /* spans waiting per collector */
#define OTLP_BATCH 512       /* spans per Export call at most */
#define OTLP_INTERVAL_MS 200 /* a partial batch waits at most this */
#define OTLP_TIMEOUT_MS 2000 /* per Export call */
#define OTLP_METHOD                                                            \
  "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

struct grit_otlp_exporter {
  grit_otlp_exporter *next; /* in the registry, under reg_mu */
  unsigned refs;            /* under reg_mu */
  char *endpoint;
  grit_channel *ch; /* the exporter's own channel (no spans of its own) */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work; /* a batch is ready, or stop */
  pthread_cond_t done; /* done_seq moved */
  grit_otlp_span *ring;
  size_t head, count;
  uint64_t enq_seq;  /* spans offered so far (queued or dropped) */
  uint64_t done_seq; /* of those, sent or dropped */
  bool stop;
  bool detached; /* the thread frees the exporter on its way out */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static grit_otlp_exporter *exporters;
static uint64_t n_exported, n_dropped, n_failed; /* atomics */

grit_err grit_span_export_get_stats(grit_span_export_stats *out) {
  if (!out)
    return GRIT_ERR_INVALID_ARG;
  out->exported = __atomic_load_n(&n_exported, __ATOMIC_RELAXED);
  out->dropped = __atomic_load_n(&n_dropped, __ATOMIC_RELAXED);
  out->exports_failed = __atomic_load_n(&n_failed, __ATOMIC_RELAXED);
  return GRIT_OK;
}

/* The counters in the Prometheus exposition (process-wide). */
static grit_err otlp_collect(grit_buf *out, const char *target) {
  if (target)
    return GRIT_OK;
  grit_span_export_stats st;
  grit_span_export_get_stats(&st);
  return grit_buf_appendf(
      out,
      "# HELP grit_otlp_spans_exported_total Spans an OTLP collector "
      "accepted.\n# TYPE grit_otlp_spans_exported_total counter\n"
      "grit_otlp_spans_exported_total %llu\n"
      "# HELP grit_otlp_spans_dropped_total Spans dropped: export queue "
      "full or export failed.\n# TYPE grit_otlp_spans_dropped_total "
      "counter\ngrit_otlp_spans_dropped_total %llu\n"
      "# HELP grit_otlp_exports_failed_total OTLP Export calls that did not "
      "end OK.\n# TYPE grit_otlp_exports_failed_total counter\n"
      "grit_otlp_exports_failed_total %llu\n",
      (unsigned long long)st.exported, (unsigned long long)st.dropped,
      (unsigned long long)st.exports_failed);
}

static void otlp_free(grit_otlp_exporter *e) {
  grit_channel_destroy(e->ch);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->work);
  pthread_cond_destroy(&e->done);
  grit_free(e->ring);
  grit_free(e->endpoint);
  grit_free(e);
}

/* The outcome of one Export call, handed from the I/O thread's callback
 * to the exporter's thread. */
typedef struct otlp_wait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  grit_status_code code;
  char msg[128];
} otlp_wait;

static void otlp_done(const grit_status *st, const uint8_t *resp,
                      size_t resp_len, const grit_call_info *info, void *ud) {
  (void)resp;
  (void)resp_len;
  (void)info;
  otlp_wait *w = ud;
  pthread_mutex_lock(&w->mu);
  w->code = st->code;
  grit_str_copy(w->msg, sizeof(w->msg), st->message ? st->message : "");
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* One Export call of |framed| (the gRPC message prefix and the |raw_len|
 * bytes of the request the encoder wrote after it: sent as it is, no
 * framing copy) holding |n| spans; takes the slice; counts the outcome.
 * grit_unary_call's steps, but for a message already framed. */
static void otlp_send(grit_otlp_exporter *e, grit_slice *framed, size_t raw_len,
                      size_t n) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = OTLP_TIMEOUT_MS};
  otlp_wait w = {.done = false, .code = GRIT_STATUS_UNKNOWN};
  const char *why = "the channel is shutting down";
  framed->data[0] = 0; /* not compressed */
  framed->data[1] = (uint8_t)(raw_len >> 24);
  framed->data[2] = (uint8_t)(raw_len >> 16);
  framed->data[3] = (uint8_t)(raw_len >> 8);
  framed->data[4] = (uint8_t)raw_len;
  grit_call *c = NULL;
  grit_err rv =
      grit_rt_forked(e->ch->rt)
          ? GRIT_ERR_SHUTDOWN
          : grit_call_create_internal(e->ch, OTLP_METHOD, &o, &c, &why);
  if (rv == GRIT_OK) {
    c->unary_cb = otlp_done;
    c->user_data = &w;
    c->kind = GRIT_METHOD_UNARY;
    rv = grit_call_auth_start(c);
    if (rv == GRIT_OK) {
      grit_call_auth_send(c, framed->data + 5, raw_len);
      pthread_mutex_init(&w.mu, NULL);
      pthread_cond_init(&w.cv, NULL);
      rv = grit_call_launch_unary(c, framed, raw_len); /* takes the slice */
      framed = NULL;
      if (rv == GRIT_OK) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
          pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
      }
      pthread_mutex_destroy(&w.mu);
      pthread_cond_destroy(&w.cv);
    }
    if (rv != GRIT_OK)
      grit_call_unref(c);
  }
  if (framed)
    grit_slice_unref(framed);
  if (rv != GRIT_OK)
    grit_str_copy(w.msg, sizeof(w.msg), why);
  bool ok = rv == GRIT_OK && w.code == GRIT_STATUS_OK;
  if (!ok)
    GRIT_TRACE(GRIT_TRACE_CHANNEL, GRIT_LEVEL_INFO,
               "otlp %s: export of %zu spans failed: %s %s", e->endpoint, n,
               grit_status_code_name(w.code), w.msg);
  if (ok) {
    __atomic_add_fetch(&n_exported, n, __ATOMIC_RELAXED);
  } else {
    __atomic_add_fetch(&n_failed, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&n_dropped, n, __ATOMIC_RELAXED);
  }
}

/* The ring's first |n| spans from head are the thread's while it encodes
 * them (the I/O threads only fill slots past head + count): they are
 * encoded in place, without the lock and without a copy, and only then
 * given back. A batch stops at the ring's end, so it is contiguous. */
static void *otlp_thread(void *arg) {
  grit_otlp_exporter *e = arg;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    /* Wait for a full batch, the interval with spans waiting, or stop. */
    if (!e->stop && e->count < OTLP_BATCH) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += OTLP_INTERVAL_MS * 1000000L;
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&e->work, &e->mu, &ts);
    }
    if (e->count == 0) {
      if (e->stop)
        break;
      continue;
    }
    size_t n = e->count < OTLP_BATCH ? e->count : OTLP_BATCH;
    if (n > OTLP_QUEUE - e->head)
      n = OTLP_QUEUE - e->head;
    const grit_otlp_span *batch = &e->ring[e->head];
    pthread_mutex_unlock(&e->mu);
    grit_slice *req; /* 5 bytes for the gRPC message prefix, the request */
    bool encoded = grit_otlp_encode_slice(batch, n, "grit", 5, &req) == GRIT_OK;
    pthread_mutex_lock(&e->mu);
    e->head = (e->head + n) % OTLP_QUEUE;
    e->count -= n;
    pthread_mutex_unlock(&e->mu);
    if (encoded) {
      otlp_send(e, req, req->len - 5, n);
    } else { /* no memory for the request: these spans are lost */
      __atomic_add_fetch(&n_dropped, n, __ATOMIC_RELAXED);
    }
    pthread_mutex_lock(&e->mu);
    e->done_seq += n;
    pthread_cond_broadcast(&e->done);
  }
  bool detached = e->detached;
  pthread_mutex_unlock(&e->mu);
  if (detached)
    otlp_free(e);
  return NULL;
}

grit_err grit_otlp_get(const char *endpoint, grit_otlp_exporter **out) {
  *out = NULL;
  pthread_mutex_lock(&reg_mu);
  grit_otlp_exporter *e = exporters;
  while (e && strcmp(e->endpoint, endpoint) != 0)
    e = e->next;
  if (e) {
    e->refs++;
    pthread_mutex_unlock(&reg_mu);
    *out = e;
    return GRIT_OK;
  }
  grit_err rv = GRIT_ERR_NOMEM;
  e = grit_calloc(1, sizeof(*e));
  if (!e)
    goto done;
  e->refs = 1;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->work, NULL);
  pthread_cond_init(&e->done, NULL);
  e->endpoint = grit_strdup(endpoint);
  e->ring = grit_calloc(OTLP_QUEUE, sizeof(*e->ring));
  if (!e->endpoint || !e->ring) {
    otlp_free(e);
    goto done;
  }
  rv = grit_channel_create(NULL, endpoint, NULL, NULL, &e->ch);
  if (rv == GRIT_OK && pthread_create(&e->thread, NULL, otlp_thread, e) != 0)
    rv = GRIT_ERR_SYSTEM;
  if (rv != GRIT_OK) {
    otlp_free(e);
    goto done;
  }
  grit_obs_add_collector(otlp_collect);
  /* The export calls are the application's own: named in the metrics. */
  (void)grit_obs_method_register(OTLP_METHOD);
  e->next = exporters;
  exporters = e;
  *out = e;
done:
  pthread_mutex_unlock(&reg_mu);
  return rv;
}

void grit_otlp_put(grit_otlp_exporter *e) {
  if (!e)
    return;
  pthread_mutex_lock(&reg_mu);
  bool last = --e->refs == 0;
  if (last) {
    grit_otlp_exporter **pp = &exporters;
    while (*pp != e)
      pp = &(*pp)->next;
    *pp = e->next;
  }
  pthread_mutex_unlock(&reg_mu);
  if (!last)
    return;
  /* On the exporter channel's I/O thread the exporter may be waiting for
   * this very loop: let it finish and free itself. Elsewhere, wait. */
  bool detach = grit_rt_on_loop(e->ch->rt);
  pthread_mutex_lock(&e->mu);
  e->stop = true;
  e->detached = detach;
  pthread_cond_signal(&e->work);
  pthread_mutex_unlock(&e->mu);
  if (detach) {
    pthread_detach(e->thread);
    return;
  }
  pthread_join(e->thread, NULL);
  otlp_free(e);
}

grit_otlp_span *grit_otlp_reserve(grit_otlp_exporter *e) {
  pthread_mutex_lock(&e->mu);
  e->enq_seq++;
  if (e->count == OTLP_QUEUE) {
    e->done_seq++; /* dropped at once: nothing to wait for */
    pthread_mutex_unlock(&e->mu);
    __atomic_add_fetch(&n_dropped, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  return &e->ring[(e->head + e->count) % OTLP_QUEUE];
}

void grit_otlp_commit(grit_otlp_exporter *e) {
  if (++e->count == OTLP_BATCH)
    pthread_cond_signal(&e->work);
  pthread_mutex_unlock(&e->mu);
}

void grit_otlp_flush(grit_otlp_exporter *e) {
  if (!e)
    return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (OTLP_TIMEOUT_MS + OTLP_INTERVAL_MS) / 1000 + 1;
  pthread_mutex_lock(&e->mu);
  uint64_t want = e->enq_seq;
  pthread_cond_signal(&e->work);
  while (e->done_seq < want &&
         pthread_cond_timedwait(&e->done, &e->mu, &ts) == 0) {
  }
  pthread_mutex_unlock(&e->mu);
}
