/* The xDS client runtime: the ADS stream on grit's public API around the
 * pure machine of xds/ads.h (gRFC A27; SPEC XD-01). See xdsclient.h. */
#include "xdsclient/xdsclient.h"

#include <jansson.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "grit/grit.h"
#include "observe/observe.h"

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
  /* gRFC A78: a stream got a response (cleared when one ends without);
   * streams that ended without a response; the first channel target. */
  bool connected;
  uint64_t server_failures;
  char *target;
};

static pthread_mutex_t clients_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t clients_cv = PTHREAD_COND_INITIALIZER;
static grit_list clients = {&clients, &clients};
static size_t live_clients;  /* made and not yet freed by their worker */
static size_t dying_clients; /* released and not yet freed */

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
  c->connected = true;
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
  if (c->got_response) {
    c->backoff_ms = BACKOFF_BASE_MS; /* A27: a stream that worked resets it */
  } else {
    c->connected = false; /* A78: the server failed us */
    c->server_failures++;
  }
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
  dying_clients--;
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
  grit_free(c->target);
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

grit_xdsc *grit_xdsc_find(const char *uri) {
  grit_xdsc *found = NULL;
  pthread_mutex_lock(&clients_mu);
  grit_list *n;
  GRIT_LIST_FOREACH(n, &clients) {
    grit_xdsc *c = GRIT_CONTAINER_OF(n, grit_xdsc, node);
    if (strcmp(c->b->servers[0].uri, uri) == 0) {
      c->refs++;
      found = c;
      break;
    }
  }
  pthread_mutex_unlock(&clients_mu);
  return found;
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
  dying_clients++;
  pthread_mutex_unlock(&clients_mu);
  pthread_mutex_lock(&c->mu);
  c->stop = true;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static bool wait_freed(const size_t *count, uint64_t timeout_ms) {
  uint64_t end = grit_clock_now_ms() + timeout_ms;
  pthread_mutex_lock(&clients_mu);
  while (*count > 0) {
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
  bool done = *count == 0;
  pthread_mutex_unlock(&clients_mu);
  return done;
}

bool grit_xdsc_wait_all_freed(uint64_t timeout_ms) {
  return wait_freed(&live_clients, timeout_ms);
}

bool grit_xdsc_wait_released_freed(uint64_t timeout_ms) {
  return wait_freed(&dying_clients, timeout_ms);
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

void grit_xdsc_set_target(grit_xdsc *c, const char *target) {
  pthread_mutex_lock(&c->mu);
  if (!c->target)
    c->target = grit_strdup(target); /* NULL: the metrics say "" */
  pthread_mutex_unlock(&c->mu);
}

void grit_xdsc_version(grit_xdsc *c, xds_kind k, char *buf, size_t size) {
  pthread_mutex_lock(&c->mu);
  const char *s = grit_xds_ads_version(c->ads, k);
  snprintf(buf, size, "%s", s ? s : "");
  pthread_mutex_unlock(&c->mu);
}

/* ---- what the operator sees: the resources in force as JSON ---- */

static const char *const kind_names[XDS_KINDS] = {"listener", "route_config",
                                                  "cluster", "endpoints"};
static const char *const health_names[] = {"UNKNOWN",  "HEALTHY", "UNHEALTHY",
                                           "DRAINING", "TIMEOUT", "DEGRADED"};
static const char *const lb_names[] = {"ROUND_ROBIN", "RING_HASH",
                                       "LEAST_REQUEST", "WRR"};

/* jansson's set_new with a NULL value is an error that frees nothing: an
 * out-of-memory anywhere leaves a partial document, never a crash. */
static json_t *js(const char *s) {
  return json_string(s ? s : "");
}

static json_t *describe_routes(const xds_route_config *rc) {
  json_t *vhs = json_array();
  for (size_t i = 0; rc && vhs && i < rc->nvhosts; i++) {
    const xds_vhost *vh = &rc->vhosts[i];
    json_t *v = json_object(), *doms = json_array(), *routes = json_array();
    for (size_t d = 0; doms && d < vh->ndomains; d++)
      json_array_append_new(doms, js(vh->domains[d]));
    for (size_t r = 0; routes && r < vh->nroutes; r++) {
      const xds_route *rt = &vh->routes[r];
      json_t *o = json_object();
      json_object_set_new(o, "match", js(rt->match.path));
      if (rt->action == XDS_ACTION_CLUSTER) {
        json_object_set_new(o, "cluster", js(rt->cluster));
      } else if (rt->action == XDS_ACTION_WEIGHTED) {
        json_t *w = json_array();
        for (size_t j = 0; w && j < rt->nweighted; j++)
          json_array_append_new(
              w, json_pack("{s:s?,s:I}", "name", rt->weighted[j].name, "weight",
                           (json_int_t)rt->weighted[j].weight));
        json_object_set_new(o, "weighted_clusters", w);
      } else {
        json_object_set_new(o, "action", js("non_forwarding"));
      }
      json_array_append_new(routes, o);
    }
    json_object_set_new(v, "name", js(vh->name));
    json_object_set_new(v, "domains", doms);
    json_object_set_new(v, "routes", routes);
    json_array_append_new(vhs, v);
  }
  return vhs;
}

static json_t *describe_endpoints(const xds_endpoints *e) {
  json_t *locs = json_array();
  for (size_t i = 0; locs && i < e->nlocalities; i++) {
    const xds_locality *l = &e->localities[i];
    json_t *eps = json_array();
    for (size_t j = 0; eps && j < l->nendpoints; j++) {
      const xds_endpoint *ep = &l->endpoints[j];
      char addr[80];
      snprintf(addr, sizeof(addr), strchr(ep->host, ':') ? "[%s]:%u" : "%s:%u",
               ep->host, (unsigned)ep->port);
      json_array_append_new(
          eps, json_pack("{s:s,s:s,s:I}", "address", addr, "health",
                         ep->health < 6 ? health_names[ep->health] : "?",
                         "weight", (json_int_t)ep->weight));
    }
    json_array_append_new(
        locs, json_pack("{s:s?,s:s?,s:s?,s:I,s:I,s:o*}", "region", l->region,
                        "zone", l->zone, "sub_zone", l->sub_zone, "priority",
                        (json_int_t)l->priority, "weight",
                        (json_int_t)l->weight, "endpoints", eps));
  }
  json_t *drops = json_array();
  for (size_t i = 0; drops && i < e->ndrops; i++)
    json_array_append_new(
        drops, json_pack("{s:s?,s:I}", "category", e->drops[i].category,
                         "per_million", (json_int_t)e->drops[i].per_million));
  return json_pack("{s:o*,s:o*}", "localities", locs, "drop_overloads", drops);
}

typedef struct describe_ctx {
  xds_kind k;
  json_t *arr;
} describe_ctx;

static void describe_entry(void *ud, const char *name, const xds_resource *r,
                           xds_cache_state st) {
  describe_ctx *dc = ud;
  json_t *o = json_pack("{s:s,s:s}", "name", name, "state",
                        grit_xds_cache_state_name(st));
  if (!o)
    return;
  if (r && dc->k == XDS_LISTENER) {
    const xds_listener *l = &r->u.listener;
    if (l->rds_name)
      json_object_set_new(o, "route_config", js(l->rds_name));
    else
      json_object_set_new(o, "inline_virtual_hosts",
                          describe_routes(l->route_config));
  } else if (r && dc->k == XDS_ROUTE_CONFIG) {
    json_object_set_new(o, "virtual_hosts",
                        describe_routes(&r->u.route_config));
  } else if (r && dc->k == XDS_CLUSTER) {
    const xds_cluster *cl = &r->u.cluster;
    json_object_set_new(
        o, "type", js(cl->type == XDS_CLUSTER_EDS ? "EDS" : "LOGICAL_DNS"));
    json_object_set_new(o, "lb_policy",
                        js(cl->lb.kind < 4 ? lb_names[cl->lb.kind] : "?"));
    if (cl->type == XDS_CLUSTER_EDS)
      json_object_set_new(
          o, "eds_service_name",
          js(cl->eds_service_name ? cl->eds_service_name : name));
    json_object_set_new(o, "max_requests",
                        json_integer((json_int_t)cl->max_requests));
  } else if (r && dc->k == XDS_ENDPOINTS) {
    json_object_update_new(o, describe_endpoints(&r->u.endpoints));
  }
  json_array_append_new(dc->arr, o);
}

char *grit_xdsc_describe(grit_xdsc *c) {
  json_t *root = json_object();
  if (!root)
    return NULL;
  pthread_mutex_lock(&c->mu);
  xds_ads_stats st;
  grit_xds_ads_get_stats(c->ads, &st);
  json_object_set_new(root, "server", js(c->b->servers[0].uri));
  json_object_set_new(root, "connected", json_boolean(c->connected));
  json_object_set_new(root, "streams", json_integer((json_int_t)c->streams));
  json_object_set_new(root, "server_failures",
                      json_integer((json_int_t)c->server_failures));
  json_object_set_new(root, "requests", json_integer((json_int_t)st.requests));
  json_object_set_new(root, "responses",
                      json_integer((json_int_t)st.responses));
  for (int k = 0; k < XDS_KINDS; k++) {
    const char *v = grit_xds_ads_version(c->ads, (xds_kind)k);
    const char *nack = grit_xds_ads_last_nack(c->ads, (xds_kind)k);
    describe_ctx dc = {(xds_kind)k, json_array()};
    if (dc.arr)
      grit_xds_ads_foreach(c->ads, (xds_kind)k, describe_entry, &dc);
    json_object_set_new(root, kind_names[k],
                        json_pack("{s:s,s:s,s:I,s:I,s:o*}", "version",
                                  v ? v : "", "last_nack", nack ? nack : "",
                                  "updates_valid", (json_int_t)st.valid[k],
                                  "updates_invalid", (json_int_t)st.invalid[k],
                                  "resources", dc.arr));
  }
  pthread_mutex_unlock(&c->mu);
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!text)
    return NULL;
  /* jansson allocated it with its own allocator: copy into ours. */
  char *copy = grit_strdup(text);
  json_free_t jfree;
  json_get_alloc_funcs(NULL, &jfree);
  jfree(text);
  return copy;
}

/* ---- gRFC A78 metrics, rendered with grit's Prometheus text ---- */

#define METRICS_MAX_CLIENTS 16 /* bounded labels: server URIs are few */

static grit_err esc_label(grit_buf *out, const char *s) {
  grit_err rv = GRIT_OK;
  for (; s && *s && rv == GRIT_OK; s++) {
    if (*s == '\\' || *s == '"')
      rv = grit_buf_appendf(out, "\\%c", *s);
    else if (*s == '\n')
      rv = grit_buf_appendf(out, "\\n");
    else
      rv = grit_buf_appendf(out, "%c", *s);
  }
  return rv;
}

typedef struct count_ctx {
  uint64_t n[XDS_KINDS][5];
  xds_kind k;
} count_ctx;

static void count_entry(void *ud, const char *name, const xds_resource *r,
                        xds_cache_state st) {
  (void)name;
  (void)r;
  count_ctx *cc = ud;
  if ((unsigned)st < 5)
    cc->n[cc->k][st]++;
}

typedef struct client_fig {
  char target[256], server[256];
  bool connected;
  uint64_t failures;
  xds_ads_stats st;
  count_ctx counts;
} client_fig;

static grit_err labels(grit_buf *out, const client_fig *f) {
  grit_err rv = grit_buf_appendf(out, "{grpc_target=\"");
  if (rv == GRIT_OK)
    rv = esc_label(out, f->target);
  if (rv == GRIT_OK)
    rv = grit_buf_appendf(out, "\",grpc_xds_server=\"");
  if (rv == GRIT_OK)
    rv = esc_label(out, f->server);
  if (rv == GRIT_OK)
    rv = grit_buf_appendf(out, "\"");
  return rv;
}

static grit_err xds_collect(grit_buf *out, const char *target) {
  static client_fig figs[METRICS_MAX_CLIENTS];
  static pthread_mutex_t figs_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&figs_mu);
  size_t n = 0;
  pthread_mutex_lock(&clients_mu);
  grit_list *it;
  GRIT_LIST_FOREACH(it, &clients) {
    grit_xdsc *c = GRIT_CONTAINER_OF(it, grit_xdsc, node);
    if (n == METRICS_MAX_CLIENTS)
      break;
    pthread_mutex_lock(&c->mu);
    if (!target || (c->target && strcmp(c->target, target) == 0)) {
      client_fig *f = &figs[n++];
      memset(f, 0, sizeof(*f));
      snprintf(f->target, sizeof(f->target), "%s", c->target ? c->target : "");
      snprintf(f->server, sizeof(f->server), "%s", c->b->servers[0].uri);
      f->connected = c->connected;
      f->failures = c->server_failures;
      grit_xds_ads_get_stats(c->ads, &f->st);
      for (int k = 0; k < XDS_KINDS; k++) {
        f->counts.k = (xds_kind)k;
        grit_xds_ads_foreach(c->ads, (xds_kind)k, count_entry, &f->counts);
      }
    }
    pthread_mutex_unlock(&c->mu);
  }
  pthread_mutex_unlock(&clients_mu);
  grit_err rv = GRIT_OK;
  if (n > 0)
    rv = grit_buf_appendf(
        out, "# HELP grpc_xds_client_connected Whether the xDS client has a "
             "working ADS stream to the xDS server (gRFC A78).\n"
             "# TYPE grpc_xds_client_connected gauge\n");
  for (size_t i = 0; i < n && rv == GRIT_OK; i++) {
    rv = grit_buf_appendf(out, "grpc_xds_client_connected");
    if (rv == GRIT_OK)
      rv = labels(out, &figs[i]);
    if (rv == GRIT_OK)
      rv = grit_buf_appendf(out, "} %d\n", figs[i].connected ? 1 : 0);
  }
  if (n > 0 && rv == GRIT_OK)
    rv = grit_buf_appendf(
        out, "# HELP grpc_xds_client_server_failure_total ADS streams to the "
             "xDS server that failed without a response (gRFC A78).\n"
             "# TYPE grpc_xds_client_server_failure_total counter\n");
  for (size_t i = 0; i < n && rv == GRIT_OK; i++) {
    rv = grit_buf_appendf(out, "grpc_xds_client_server_failure_total");
    if (rv == GRIT_OK)
      rv = labels(out, &figs[i]);
    if (rv == GRIT_OK)
      rv = grit_buf_appendf(out, "} %llu\n",
                            (unsigned long long)figs[i].failures);
  }
  static const char *const type_urls[XDS_KINDS] = {
      "envoy.config.listener.v3.Listener",
      "envoy.config.route.v3.RouteConfiguration",
      "envoy.config.cluster.v3.Cluster",
      "envoy.config.endpoint.v3.ClusterLoadAssignment"};
  for (int valid = 1; valid >= 0 && n > 0 && rv == GRIT_OK; valid--) {
    const char *fam = valid ? "grpc_xds_client_resource_updates_valid_total"
                            : "grpc_xds_client_resource_updates_invalid_total";
    rv = grit_buf_appendf(
        out,
        "# HELP %s Resources received from the xDS server that were %s "
        "(gRFC A78).\n# TYPE %s counter\n",
        fam, valid ? "valid" : "invalid (NACKed)", fam);
    for (size_t i = 0; i < n && rv == GRIT_OK; i++) {
      for (int k = 0; k < XDS_KINDS && rv == GRIT_OK; k++) {
        rv = grit_buf_appendf(out, "%s", fam);
        if (rv == GRIT_OK)
          rv = labels(out, &figs[i]);
        if (rv == GRIT_OK)
          rv = grit_buf_appendf(
              out, ",grpc_xds_resource_type=\"%s\"} %llu\n", type_urls[k],
              (unsigned long long)(valid ? figs[i].st.valid[k]
                                         : figs[i].st.invalid[k]));
      }
    }
  }
  if (n > 0 && rv == GRIT_OK)
    rv = grit_buf_appendf(
        out, "# HELP grpc_xds_client_resources Resources the xDS client "
             "watches, by type and cache state (gRFC A78).\n"
             "# TYPE grpc_xds_client_resources gauge\n");
  for (size_t i = 0; i < n && rv == GRIT_OK; i++) {
    for (int k = 0; k < XDS_KINDS && rv == GRIT_OK; k++) {
      for (int s = 0; s < 5 && rv == GRIT_OK; s++) {
        if (!figs[i].counts.n[k][s])
          continue;
        rv = grit_buf_appendf(out, "grpc_xds_client_resources");
        if (rv == GRIT_OK)
          rv = labels(out, &figs[i]);
        if (rv == GRIT_OK)
          rv = grit_buf_appendf(
              out,
              ",grpc_xds_authority=\"#old\",grpc_xds_resource_type=\"%s\","
              "grpc_xds_cache_state=\"%s\"} %llu\n",
              type_urls[k], grit_xds_cache_state_name((xds_cache_state)s),
              (unsigned long long)figs[i].counts.n[k][s]);
      }
    }
  }
  pthread_mutex_unlock(&figs_mu);
  return rv;
}

void grit_xdsc_metrics_register(void) {
  grit_obs_add_collector(xds_collect); /* once per process: a no-op after */
}
