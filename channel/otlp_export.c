/* OTLP/gRPC span export (SPEC OP-02): one exporter per collector
 * endpoint, shared by the channels that name it. The loop fills a
 * finished span in place into a slot of a preallocated bounded ring (no
 * lock: a compare-and-swap claims the slot, a release store hands it over;
 * plain stores and short copies; no allocation, no formatting; full:
 * dropped and counted); a thread of the exporter encodes batches straight
 * from the ring (observe/otlp.c: names, UTF-8, protobuf) into the message
 * it sends, with a unary call on a grit channel of its own, so no call
 * ever waits for the collector.
 *
 * The ring is a bounded multi-producer queue with a sequence number per
 * slot (D. Vyukov's): slot i % OTLP_QUEUE is free for the producer of
 * position i when its sequence is i, filled when it is i + 1, and given
 * back by the exporter's thread, once sent, as i + OTLP_QUEUE. */
#include "channel/channel_int.h"

#include <sched.h>
#include <string.h>
#include <time.h>

#define OTLP_QUEUE 4096      /* spans waiting per collector */
#define OTLP_BATCH 2048      /* spans per Export call at most */
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
  pthread_cond_t work;    /* a batch is ready, a flush, or stop */
  pthread_cond_t done_cv; /* done moved */
  /* The producers' cache line (what a span's reserve and commit read or
   * write) apart from the lock and the exporter's fields. */
  char pad0[64];
  grit_otlp_span *ring;
  uint64_t *seq; /* per slot, atomic (see above) */
  uint64_t tail; /* atomic: the next position a producer claims */
  char pad1[64];
  uint64_t head; /* atomic: the exporter's next position to encode */
  uint64_t done; /* under mu: positions below it were sent or dropped */
  bool sleeping; /* atomic: the thread waits on |work| */
  bool flushing; /* under mu: send what is ready, however little */
  bool stop;     /* under mu */
  bool detached; /* under mu: the thread frees the exporter on its way out */
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
  pthread_cond_destroy(&e->done_cv);
  grit_free(e->ring);
  grit_free(e->seq);
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
 * grit_unary_call, but for a message already framed (through
 * grit_framed_unary: api_call.c is above this file). */
static void otlp_send(grit_otlp_exporter *e, grit_slice *framed, size_t raw_len,
                      size_t n) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = OTLP_TIMEOUT_MS};
  otlp_wait w = {.done = false, .code = GRIT_STATUS_UNKNOWN};
  const char *why = NULL;
  framed->data[0] = 0; /* not compressed */
  framed->data[1] = (uint8_t)(raw_len >> 24);
  framed->data[2] = (uint8_t)(raw_len >> 16);
  framed->data[3] = (uint8_t)(raw_len >> 8);
  framed->data[4] = (uint8_t)raw_len;
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  grit_err rv = grit_framed_unary.start(e->ch, OTLP_METHOD, framed, raw_len, &o,
                                        otlp_done, &w, &why);
  if (rv == GRIT_OK) {
    pthread_mutex_lock(&w.mu);
    while (!w.done)
      pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
  }
  pthread_mutex_destroy(&w.mu);
  pthread_cond_destroy(&w.cv);
  if (rv != GRIT_OK)
    grit_str_copy(w.msg, sizeof(w.msg), why ? why : "the call did not start");
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

/* How many slots from |head| on are filled, at most |max| (which stops
 * at the ring's end): the batch. */
static size_t otlp_ready(const grit_otlp_exporter *e, uint64_t head,
                         size_t max) {
  const uint64_t *seq = &e->seq[head % OTLP_QUEUE];
  size_t n = 0;
  while (n < max && __atomic_load_n(&seq[n], __ATOMIC_ACQUIRE) == head + 1 + n)
    n++;
  return n;
}

/* The filled slots from head are the thread's while it encodes them (the
 * producers only fill slots their sequence gives them): they are encoded
 * in place, without a lock and without a copy, and only then given back.
 * A batch stops at the ring's end, so it is contiguous. */
static void *otlp_thread(void *arg) {
  grit_otlp_exporter *e = arg;
#ifdef __GLIBC__
  (void)pthread_setname_np(pthread_self(), "grit-otlp"); /* top -H, perf */
#endif
#ifdef SCHED_BATCH
  /* Background work: on waking it does not preempt the thread it shares
   * a core with (the I/O thread, most often), and it keeps its fair share
   * of the CPU (not SCHED_IDLE: a busy machine would starve the export). */
  struct sched_param sp = {.sched_priority = 0};
  (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
  uint64_t head = 0;      /* only this thread moves e->head */
  grit_slice *req = NULL; /* 5 bytes for the gRPC message prefix, the request */
  size_t req_cap = 0;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    size_t max = OTLP_QUEUE - head % OTLP_QUEUE;
    if (max > OTLP_BATCH)
      max = OTLP_BATCH;
    /* Wait for a full batch, the interval with spans waiting, a flush, or
     * stop. |sleeping| is set before the last look at the ring: a
     * producer that filled the batch's last slot after that look sees it
     * and signals (both sides order their store before their load). */
    if (!e->stop && !e->flushing) {
      __atomic_store_n(&e->sleeping, true, __ATOMIC_RELAXED);
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
      /* The batch's last slot filled: the batch is most likely ready. */
      if (__atomic_load_n(&e->seq[(head + max - 1) % OTLP_QUEUE],
                          __ATOMIC_ACQUIRE) != head + max) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += OTLP_INTERVAL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
          ts.tv_sec++;
          ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&e->work, &e->mu, &ts);
      }
      __atomic_store_n(&e->sleeping, false, __ATOMIC_RELAXED);
    }
    size_t n = otlp_ready(e, head, max);
    if (n == 0) {
      /* Nothing filled: a flush is done once every claimed slot is. */
      if (__atomic_load_n(&e->tail, __ATOMIC_ACQUIRE) == head) {
        e->flushing = false;
        if (e->stop)
          break;
      } else if (e->flushing || e->stop) {
        /* A producer claimed a slot and fills it now: let it finish. */
        pthread_mutex_unlock(&e->mu);
        sched_yield();
        pthread_mutex_lock(&e->mu);
      }
      continue;
    }
    pthread_mutex_unlock(&e->mu);
    const grit_otlp_span *batch = &e->ring[head % OTLP_QUEUE];
    /* The last batch's slice is reused once its call let it go. */
    if (req && __atomic_load_n(&req->refs, __ATOMIC_ACQUIRE) != 1) {
      grit_slice_unref(req);
      req = NULL;
    }
    bool encoded =
        grit_otlp_encode_slice(batch, n, "grit", 5, &req, &req_cap) == GRIT_OK;
    uint64_t *seq = &e->seq[head % OTLP_QUEUE]; /* the batch's, in a row */
    for (size_t i = 0; i < n; i++)              /* give the slots back */
      __atomic_store_n(&seq[i], head + OTLP_QUEUE + i, __ATOMIC_RELEASE);
    head += n;
    __atomic_store_n(&e->head, head, __ATOMIC_RELAXED);
    if (encoded) {
      otlp_send(e, grit_slice_ref(req), req->len - 5, n);
    } else { /* no memory for the request: these spans are lost */
      __atomic_add_fetch(&n_dropped, n, __ATOMIC_RELAXED);
    }
    pthread_mutex_lock(&e->mu);
    e->done = head;
    pthread_cond_broadcast(&e->done_cv);
  }
  bool detached = e->detached;
  pthread_mutex_unlock(&e->mu);
  grit_slice_unref(req);
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
  pthread_cond_init(&e->done_cv, NULL);
  e->endpoint = grit_strdup(endpoint);
  e->ring = grit_calloc(OTLP_QUEUE, sizeof(*e->ring));
  e->seq = grit_calloc(OTLP_QUEUE, sizeof(*e->seq));
  if (!e->endpoint || !e->ring || !e->seq) {
    otlp_free(e);
    goto done;
  }
  for (size_t i = 0; i < OTLP_QUEUE; i++)
    e->seq[i] = i; /* every slot free for the first lap */
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
  uint64_t pos = __atomic_load_n(&e->tail, __ATOMIC_RELAXED);
  for (;;) {
    uint64_t seq = __atomic_load_n(&e->seq[pos % OTLP_QUEUE], __ATOMIC_ACQUIRE);
    if (seq == pos) { /* free: claim it */
      if (__atomic_compare_exchange_n(&e->tail, &pos, pos + 1, true,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        /* The next span's slot was last read by the exporter's thread (or
         * left the cache since): ask for its lines now, for writing, so
         * that span's stores find them instead of stalling the loop
         * (the first three lines: the fixed fields and an OK call's
         * texts). */
        const char *next = (const char *)&e->ring[(pos + 1) % OTLP_QUEUE];
        __builtin_prefetch(next, 1, 3);
        __builtin_prefetch(next + 64, 1, 3);
        __builtin_prefetch(next + 128, 1, 3);
        return &e->ring[pos % OTLP_QUEUE];
      }
    } else if (seq < pos) { /* not yet sent: the queue is full */
      __atomic_add_fetch(&n_dropped, 1, __ATOMIC_RELAXED);
      return NULL;
    } else { /* another producer claimed it: look again */
      pos = __atomic_load_n(&e->tail, __ATOMIC_RELAXED);
    }
  }
}

void grit_otlp_commit(grit_otlp_exporter *e, grit_otlp_span *o) {
  size_t i = (size_t)(o - e->ring);
  uint64_t pos = __atomic_load_n(&e->seq[i], __ATOMIC_RELAXED);
  __atomic_store_n(&e->seq[i], pos + 1, __ATOMIC_RELEASE);
  /* A batch is ready: wake the thread if it sleeps. The fence orders the
   * store above before the load of |sleeping| (the thread orders its
   * store of |sleeping| before its look at the ring). */
  if (pos + 1 - __atomic_load_n(&e->head, __ATOMIC_RELAXED) < OTLP_BATCH)
    return;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  /* The first producer to see it asleep wakes it; the others need not. */
  if (!__atomic_load_n(&e->sleeping, __ATOMIC_RELAXED) ||
      !__atomic_exchange_n(&e->sleeping, false, __ATOMIC_RELAXED))
    return;
  pthread_mutex_lock(&e->mu);
  pthread_cond_signal(&e->work);
  pthread_mutex_unlock(&e->mu);
}

void grit_otlp_flush(grit_otlp_exporter *e) {
  if (!e)
    return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (OTLP_TIMEOUT_MS + OTLP_INTERVAL_MS) / 1000 + 1;
  uint64_t want = __atomic_load_n(&e->tail, __ATOMIC_ACQUIRE);
  pthread_mutex_lock(&e->mu);
  e->flushing = true;
  pthread_cond_signal(&e->work);
  while (e->done < want &&
         pthread_cond_timedwait(&e->done_cv, &e->mu, &ts) == 0) {
  }
  pthread_mutex_unlock(&e->mu);
}
