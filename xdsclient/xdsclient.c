/* The xDS client runtime: the ADS stream on grit's public API around the
 * pure machine of xds/ads.h (gRFC A27; SPEC XD-01). See xdsclient.h. */
#include "xdsclient/xdsclient.h"

#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "grit/grit.h"

#define ADS_METHOD                                                             \
  "/envoy.service.discovery.v3.AggregatedDiscoveryService/"                    \
  "StreamAggregatedResources"
#define BACKOFF_BASE_MS 1000
#define BACKOFF_MAX_MS 120000

typedef struct xdsc_watch {
  grit_list node;
  xds_kind kind;
  char *name;
  grit_xdsc_watcher w;
  void *ud;
} xdsc_watch;

struct grit_xdsc {
  grit_list node; /* in the process's list of clients */
  uint32_t refs;  /* under clients_mu */
  xds_bootstrap *b;
  grit_channel *ch;
  xds_ads *ads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t worker;
  bool stop;
  grit_list watches;
  /* The stream: the worker starts and destroys it; the I/O thread feeds
   * responses and says when it ended. */
  grit_call *call;
  bool call_done, got_response;
  uint64_t retry_at_ms, backoff_ms, streams;
  grit_rng rng;
};

static pthread_mutex_t clients_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t clients_cv = PTHREAD_COND_INITIALIZER;
static grit_list clients = {&clients, &clients};
static size_t live_clients; /* made and not yet freed by their worker */

static void client_free(grit_xdsc *c);

/* ---- the machine's callbacks, dispatched to the watchers (mu held) ---- */

static void on_resource(void *ud, xds_kind k, const char *name,
                        xds_resource *r) {
  grit_xdsc *c = ud;
  grit_list *n, *next;
  for (n = c->watches.next; n != &c->watches; n = next) {
    next = n->next;
    xdsc_watch *w = GRIT_CONTAINER_OF(n, xdsc_watch, node);
    if (w->kind == k && strcmp(w->name, name) == 0 && w->w.on_resource)
      w->w.on_resource(w->ud, k, name, r);
  }
}

static void on_error(void *ud, xds_kind k, const char *name, const char *why) {
  grit_xdsc *c = ud;
  grit_list *n, *next;
  for (n = c->watches.next; n != &c->watches; n = next) {
    next = n->next;
    xdsc_watch *w = GRIT_CONTAINER_OF(n, xdsc_watch, node);
    if (w->kind == k && strcmp(w->name, name) == 0 && w->w.on_error)
      w->w.on_error(w->ud, k, name, why);
  }
}

static void on_dne(void *ud, xds_kind k, const char *name) {
  grit_xdsc *c = ud;
  grit_list *n, *next;
  for (n = c->watches.next; n != &c->watches; n = next) {
    next = n->next;
    xdsc_watch *w = GRIT_CONTAINER_OF(n, xdsc_watch, node);
    if (w->kind == k && strcmp(w->name, name) == 0 && w->w.on_does_not_exist)
      w->w.on_does_not_exist(w->ud, k, name);
  }
}

/* ---- the stream's callbacks (grit's I/O thread) ---- */

static void st_on_message(grit_call *call, const uint8_t *data, size_t len,
                          void *ud) {
  (void)call;
  grit_xdsc *c = ud;
  pthread_mutex_lock(&c->mu);
  c->got_response = true;
  /* A malformed response is refused by the machine (NACKed when its type
   * and nonce could be read); the stream goes on. */
  (void)grit_xds_ads_on_response(c->ads, data, len, grit_clock_now_ms());
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static void st_on_done(grit_call *call, const grit_status *st, void *ud) {
  (void)call;
  grit_xdsc *c = ud;
  GRIT_TRACE(GRIT_TRACE_CHANNEL, GRIT_LEVEL_INFO,
             "xds: ADS stream to %s ended: %d %s", c->b->servers[0].uri,
             (int)st->code, st->message ? st->message : "");
  pthread_mutex_lock(&c->mu);
  c->call_done = true;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static const grit_call_cbs stream_cbs = {
    .version = GRIT_CALL_CBS_VERSION,
    .on_message = st_on_message,
    .on_done = st_on_done,
};

/* ---- the worker ---- */

/* The stream ended: tell the machine, wait a backoff (mu held). */
static void end_stream(grit_xdsc *c, uint64_t now) {
  grit_call *call = c->call;
  c->call = NULL;
  c->call_done = false;
  grit_xds_ads_stream_ended(c->ads);
  if (c->got_response)
    c->backoff_ms = BACKOFF_BASE_MS; /* A27: a stream that worked resets it */
  uint64_t d = c->backoff_ms;
  /* +-20 % jitter */
  uint64_t j = d / 5;
  d = d - j + (j ? grit_rng_next(&c->rng) % (2 * j + 1) : 0);
  c->retry_at_ms = now + d;
  c->backoff_ms = c->backoff_ms * 8 / 5;
  if (c->backoff_ms > BACKOFF_MAX_MS)
    c->backoff_ms = BACKOFF_MAX_MS;
  c->got_response = false;
  pthread_mutex_unlock(&c->mu);
  grit_call_destroy(call);
  pthread_mutex_lock(&c->mu);
}

static void start_stream(grit_xdsc *c, uint64_t now) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION};
  o.kind = GRIT_METHOD_BIDI_STREAMING;
  o.wait_for_ready = GRIT_WFR_ON;
  grit_call *call = NULL;
  pthread_mutex_unlock(&c->mu);
  grit_err e = grit_call_start(c->ch, ADS_METHOD, &o, &stream_cbs, c, &call);
  pthread_mutex_lock(&c->mu);
  if (e != GRIT_OK) {
    c->retry_at_ms = now + c->backoff_ms;
    return;
  }
  c->call = call;
  c->streams++;
  grit_xds_ads_stream_started(c->ads, now);
}

static void *worker(void *arg) {
  grit_xdsc *c = arg;
  pthread_mutex_lock(&c->mu);
  while (!c->stop) {
    uint64_t now = grit_clock_now_ms();
    if (c->call && c->call_done)
      end_stream(c, now);
    if (!c->call && now >= c->retry_at_ms)
      start_stream(c, now);
    grit_xds_ads_on_timer(c->ads, grit_clock_now_ms());
    grit_bytes req;
    while (c->call && !c->call_done &&
           grit_xds_ads_next_request(c->ads, &req)) {
      grit_call *call = c->call; /* only this thread destroys it */
      pthread_mutex_unlock(&c->mu);
      /* Off the I/O thread a send may wait for room. A failure means the
       * stream ended: on_done follows and the next stream asks again. */
      (void)grit_call_send(call, req.data, req.len);
      grit_free(req.data);
      pthread_mutex_lock(&c->mu);
    }
    if (c->stop || (c->call && c->call_done))
      continue;
    uint64_t due = grit_xds_ads_next_timer_ms(c->ads);
    if (!c->call && (!due || c->retry_at_ms < due))
      due = c->retry_at_ms;
    if (!due) {
      pthread_cond_wait(&c->cv, &c->mu);
      continue;
    }
    now = grit_clock_now_ms();
    if (due <= now)
      continue;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t wait = due - now;
    ts.tv_sec += (time_t)(wait / 1000);
    ts.tv_nsec += (long)(wait % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  }
  if (c->call) {
    /* on_done may come after grit_call_destroy (grit keeps the call until
     * then), and it touches |c|: cancel, wait for it, then let go. */
    grit_call *call = c->call;
    pthread_mutex_unlock(&c->mu);
    grit_call_cancel(call);
    pthread_mutex_lock(&c->mu);
    while (!c->call_done)
      pthread_cond_wait(&c->cv, &c->mu);
    c->call = NULL;
    pthread_mutex_unlock(&c->mu);
    grit_call_destroy(call);
    pthread_mutex_lock(&c->mu);
  }
  pthread_mutex_unlock(&c->mu);
  /* The last reference went (possibly on grit's I/O thread, which must not
   * wait for us): the worker frees the client. */
  client_free(c);
  pthread_mutex_lock(&clients_mu);
  live_clients--;
  pthread_cond_broadcast(&clients_cv);
  pthread_mutex_unlock(&clients_mu);
  return NULL;
}

/* ---- the client ---- */

static grit_err make_channel(grit_xdsc *c) {
  const xds_server *s = &c->b->servers[0];
  grit_channel_args *a = NULL;
  grit_err e = grit_channel_args_create(&a);
  if (e != GRIT_OK)
    return e;
  e = grit_channel_args_set_int(a, GRIT_ARG_TLS, s->tls ? 1 : 0);
  if (e == GRIT_OK && s->tls && s->ca_file)
    e = grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS_FILE,
                                     s->ca_file);
  if (e == GRIT_OK && s->tls && s->cert_file)
    e = grit_channel_args_set_string(a, GRIT_ARG_TLS_CERT_CHAIN_FILE,
                                     s->cert_file);
  if (e == GRIT_OK && s->tls && s->key_file)
    e = grit_channel_args_set_string(a, GRIT_ARG_TLS_PRIVATE_KEY_FILE,
                                     s->key_file);
  if (e == GRIT_OK)
    e = grit_channel_create(NULL, s->uri, a, NULL, &c->ch);
  grit_channel_args_destroy(a);
  return e;
}

static void client_free(grit_xdsc *c) {
  grit_list *n, *next;
  for (n = c->watches.next; n != &c->watches; n = next) {
    next = n->next;
    xdsc_watch *w = GRIT_CONTAINER_OF(n, xdsc_watch, node);
    grit_free(w->name);
    grit_free(w);
  }
  if (c->ads)
    grit_xds_ads_destroy(c->ads);
  if (c->ch)
    grit_channel_destroy(c->ch);
  grit_xds_bootstrap_free(c->b);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  grit_free(c);
}

grit_err grit_xdsc_get(xds_bootstrap *b, grit_xdsc **out) {
  *out = NULL;
  if (!b || b->nservers == 0) {
    grit_xds_bootstrap_free(b);
    return GRIT_ERR_INVALID_ARG;
  }
  pthread_mutex_lock(&clients_mu);
  grit_list *n;
  GRIT_LIST_FOREACH(n, &clients) {
    grit_xdsc *c = GRIT_CONTAINER_OF(n, grit_xdsc, node);
    if (strcmp(c->b->servers[0].uri, b->servers[0].uri) == 0) {
      c->refs++;
      pthread_mutex_unlock(&clients_mu);
      grit_xds_bootstrap_free(b);
      *out = c;
      return GRIT_OK;
    }
  }
  grit_xdsc *c = grit_calloc(1, sizeof(*c));
  if (!c) {
    pthread_mutex_unlock(&clients_mu);
    grit_xds_bootstrap_free(b);
    return GRIT_ERR_NOMEM;
  }
  c->b = b;
  c->refs = 1;
  c->backoff_ms = BACKOFF_BASE_MS;
  grit_list_init(&c->watches);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  grit_rng_seed(&c->rng, grit_clock_now_ms());
  static const xds_ads_cbs cbs = {on_resource, on_error, on_dne};
  grit_err e = grit_xds_ads_create(b, GRIT_VERSION, &cbs, c, &c->ads);
  if (e == GRIT_OK)
    e = make_channel(c);
  if (e == GRIT_OK && pthread_create(&c->worker, NULL, worker, c) != 0)
    e = GRIT_ERR_NOMEM;
  if (e == GRIT_OK) {
    pthread_detach(c->worker);
    live_clients++;
  }
  if (e != GRIT_OK) {
    pthread_mutex_unlock(&clients_mu);
    client_free(c);
    return e;
  }
  grit_list_insert_tail(&clients, &c->node);
  pthread_mutex_unlock(&clients_mu);
  *out = c;
  return GRIT_OK;
}

void grit_xdsc_release(grit_xdsc *c) {
  if (!c)
    return;
  pthread_mutex_lock(&clients_mu);
  if (--c->refs > 0) {
    pthread_mutex_unlock(&clients_mu);
    return;
  }
  grit_list_remove(&c->node);
  pthread_mutex_unlock(&clients_mu);
  pthread_mutex_lock(&c->mu);
  c->stop = true;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

bool grit_xdsc_wait_all_freed(uint64_t timeout_ms) {
  uint64_t end = grit_clock_now_ms() + timeout_ms;
  pthread_mutex_lock(&clients_mu);
  while (live_clients > 0) {
    uint64_t now = grit_clock_now_ms();
    if (now >= end)
      break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t wait = end - now > 100 ? 100 : end - now;
    ts.tv_nsec += (long)wait * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&clients_cv, &clients_mu, &ts);
  }
  bool done = live_clients == 0;
  pthread_mutex_unlock(&clients_mu);
  return done;
}

grit_err grit_xdsc_watch(grit_xdsc *c, xds_kind k, const char *name,
                         const grit_xdsc_watcher *w, void *ud) {
  xdsc_watch *x = grit_calloc(1, sizeof(*x));
  if (!x)
    return GRIT_ERR_NOMEM;
  x->name = grit_strdup(name);
  if (!x->name) {
    grit_free(x);
    return GRIT_ERR_NOMEM;
  }
  x->kind = k;
  x->w = *w;
  x->ud = ud;
  pthread_mutex_lock(&c->mu);
  grit_list_insert_tail(&c->watches, &x->node);
  grit_err e = grit_xds_ads_watch(c->ads, k, name, grit_clock_now_ms());
  if (e != GRIT_OK) {
    grit_list_remove(&x->node);
    grit_free(x->name);
    grit_free(x);
  }
  pthread_cond_signal(&c->cv); /* a request to send */
  pthread_mutex_unlock(&c->mu);
  return e;
}

void grit_xdsc_unwatch(grit_xdsc *c, xds_kind k, const char *name, void *ud) {
  pthread_mutex_lock(&c->mu);
  grit_list *n, *next;
  for (n = c->watches.next; n != &c->watches; n = next) {
    next = n->next;
    xdsc_watch *w = GRIT_CONTAINER_OF(n, xdsc_watch, node);
    if (w->kind == k && w->ud == ud && strcmp(w->name, name) == 0) {
      grit_list_remove(&w->node);
      grit_free(w->name);
      grit_free(w);
      grit_xds_ads_unwatch(c->ads, k, name);
      break;
    }
  }
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

void grit_xdsc_stats(grit_xdsc *c, xds_ads_stats *st, uint64_t *streams) {
  pthread_mutex_lock(&c->mu);
  grit_xds_ads_get_stats(c->ads, st);
  if (streams)
    *streams = c->streams;
  pthread_mutex_unlock(&c->mu);
}

void grit_xdsc_last_nack(grit_xdsc *c, xds_kind k, char *buf, size_t size) {
  pthread_mutex_lock(&c->mu);
  const char *s = grit_xds_ads_last_nack(c->ads, k);
  snprintf(buf, size, "%s", s ? s : "");
  pthread_mutex_unlock(&c->mu);
}
