/* The xds resolver front (gRFC A27, A28; SPEC XD-01, XD-02): a channel
 * made with "xds:///name" watches the Listener |name|, its
 * RouteConfiguration, the cluster its routes name and that cluster's
 * ClusterLoadAssignment, and hands the channel the endpoints (HEALTHY or
 * UNKNOWN, of the first priority that has any) with round_robin (or
 * least_request for a LEAST_REQUEST cluster), through
 * channel/'s ext resolver hook. This slice serves one cluster per
 * listener: routes naming more than one cluster (or weighted clusters)
 * fail the channel's calls with a message saying so (docs/xds.md). */
#include <stdio.h>
#include <string.h>

#include "channel/channel.h"
#include "xdsclient/xdsclient.h"

typedef struct xres {
  grit_channel *ch;
  grit_xdsc *c;
  char *name;
  pthread_mutex_t mu; /* the slots below: written by the watchers */
  xds_resource *res[XDS_KINDS];
  char *watched[XDS_KINDS]; /* the name watched of each kind */
  char err[256];            /* a does-not-exist, or "" */
  bool pending;
  /* Per kind: the NACK of the watched name while nothing of it is in
   * force (the calls say why they cannot be served), or "". */
  char nack[XDS_KINDS][200];
} xres;

static const char *const kinds[] = {"listener", "route configuration",
                                    "cluster", "endpoints"};

static void slot_set(xres *x, xds_kind k, const char *name, xds_resource *r,
                     const char *err) {
  pthread_mutex_lock(&x->mu);
  if (x->watched[k] && strcmp(x->watched[k], name) == 0) {
    if (r)
      grit_xds_resource_ref(r);
    if (x->res[k])
      grit_xds_resource_unref(x->res[k]);
    x->res[k] = r;
    if (r)
      x->nack[k][0] = '\0';
    if (err)
      snprintf(x->err, sizeof(x->err), "%s", err);
    else if (r)
      x->err[0] = '\0';
  }
  pthread_mutex_unlock(&x->mu);
  grit_channel_ext_kick(x->ch);
}

static void w_resource(void *ud, xds_kind k, const char *name,
                       xds_resource *r) {
  slot_set(ud, k, name, r, NULL);
}

static void w_error(void *ud, xds_kind k, const char *name, const char *why) {
  /* A27: a NACKed update leaves the previous resource in force; with none,
   * the calls that cannot be served say why. */
  xres *x = ud;
  pthread_mutex_lock(&x->mu);
  bool none = x->watched[k] && strcmp(x->watched[k], name) == 0 && !x->res[k];
  if (none)
    snprintf(x->nack[k], sizeof(x->nack[k]), "xds: %s %s was refused: %s",
             kinds[k], name, why);
  pthread_mutex_unlock(&x->mu);
  if (none)
    grit_channel_ext_kick(x->ch);
}

static void w_dne(void *ud, xds_kind k, const char *name) {
  /* A27: a Listener or Cluster missing from a state-of-the-world response
   * is deleted, and any resource the does-not-exist timer fires for is
   * not there: what the channel served is gone (deliver() fails it). */
  char buf[256];
  snprintf(buf, sizeof(buf),
           "xds: %s %s does not exist (deleted by the control plane, or "
           "never sent)",
           kinds[k], name);
  slot_set(ud, k, name, NULL, buf);
}

static const grit_xdsc_watcher watcher = {w_resource, w_error, w_dne};

/* Watch |name| of |k| instead of what was (loop thread; NULL: nothing). */
static grit_err rewatch(xres *x, xds_kind k, const char *name) {
  pthread_mutex_lock(&x->mu);
  char *old = x->watched[k];
  if ((!old && !name) || (old && name && strcmp(old, name) == 0)) {
    pthread_mutex_unlock(&x->mu);
    return GRIT_OK;
  }
  x->watched[k] = name ? grit_strdup(name) : NULL;
  x->nack[k][0] = '\0';
  if (x->res[k])
    grit_xds_resource_unref(x->res[k]);
  x->res[k] = NULL;
  bool nomem = name && !x->watched[k];
  pthread_mutex_unlock(&x->mu);
  if (old) {
    grit_xdsc_unwatch(x->c, k, old, x);
    grit_free(old);
  }
  if (nomem)
    return GRIT_ERR_NOMEM;
  return name ? grit_xdsc_watch(x->c, k, name, &watcher, x) : GRIT_OK;
}

/* The one cluster the default virtual host's routes name, or an error. */
static const char *one_cluster(const xds_vhost *vh, char *err, size_t n) {
  const char *one = NULL;
  for (size_t i = 0; i < vh->nroutes; i++) {
    const xds_route *r = &vh->routes[i];
    if (r->action == XDS_ACTION_NON_FORWARDING)
      continue;
    size_t m = r->action == XDS_ACTION_WEIGHTED ? r->nweighted : 1;
    for (size_t j = 0; j < m; j++) {
      const char *c =
          r->action == XDS_ACTION_WEIGHTED ? r->weighted[j].name : r->cluster;
      if (!one)
        one = c;
      else if (strcmp(one, c) != 0) {
        snprintf(err, n,
                 "xds: the routes name clusters %s and %s; this grit serves "
                 "one cluster per listener (docs/xds.md)",
                 one, c);
        return NULL;
      }
    }
  }
  if (!one)
    snprintf(err, n, "xds: no route names a cluster");
  return one;
}

static void deliver(xres *x, xds_resource **res) {
  char err[512];
  err[0] = '\0';
  /* Listener -> its RouteConfiguration (inline or RDS). */
  const xds_listener *l =
      res[XDS_LISTENER] ? &res[XDS_LISTENER]->u.listener : NULL;
  if (l && rewatch(x, XDS_ROUTE_CONFIG, l->rds_name) != GRIT_OK)
    snprintf(err, sizeof(err), "xds: out of memory");
  const xds_route_config *rc = NULL;
  if (l)
    rc = l->rds_name
             ? (res[XDS_ROUTE_CONFIG] ? &res[XDS_ROUTE_CONFIG]->u.route_config
                                      : NULL)
             : l->route_config;
  const char *cluster = NULL;
  if (rc) {
    const xds_vhost *vh = grit_xds_vhost_find(rc, x->name);
    if (!vh)
      snprintf(err, sizeof(err), "xds: no virtual host matches %s", x->name);
    else
      cluster = one_cluster(vh, err, sizeof(err));
  }
  if (rc && rewatch(x, XDS_CLUSTER, cluster) != GRIT_OK)
    snprintf(err, sizeof(err), "xds: out of memory");
  const xds_cluster *cl =
      cluster && res[XDS_CLUSTER] ? &res[XDS_CLUSTER]->u.cluster : NULL;
  const char *eds = NULL;
  if (cl) {
    if (cl->type != XDS_CLUSTER_EDS)
      snprintf(err, sizeof(err),
               "xds: cluster %s: only EDS clusters are served yet", cluster);
    else if (cl->lb.kind != XDS_LB_ROUND_ROBIN &&
             cl->lb.kind != XDS_LB_LEAST_REQUEST)
      snprintf(err, sizeof(err),
               "xds: cluster %s: only ROUND_ROBIN and LEAST_REQUEST are "
               "served yet",
               cluster);
    else
      eds = cl->eds_service_name ? cl->eds_service_name : cluster;
  }
  if (cl && rewatch(x, XDS_ENDPOINTS, eds) != GRIT_OK)
    snprintf(err, sizeof(err), "xds: out of memory");
  const xds_endpoints *e =
      eds && res[XDS_ENDPOINTS] ? &res[XDS_ENDPOINTS]->u.endpoints : NULL;
  /* The cluster's policy onto lb/ where the mapping is direct. */
  char config[128];
  if (cl && cl->lb.kind == XDS_LB_LEAST_REQUEST)
    snprintf(config, sizeof(config),
             "{\"loadBalancingConfig\":[{\"least_request_experimental\":"
             "{\"choiceCount\":%u}}]}",
             cl->lb.choice_count);
  else
    snprintf(config, sizeof(config),
             "{\"loadBalancingConfig\":[{\"round_robin\":{}}]}");
  pthread_mutex_lock(&x->mu);
  bool gone = x->err[0] != '\0';
  if (gone)
    snprintf(err, sizeof(err), "%s", x->err);
  pthread_mutex_unlock(&x->mu);
  if (gone) {
    /* A27 (as grpc-core): a deleted Listener or Cluster fails the calls
     * UNAVAILABLE naming it, until it comes back; the last endpoints are
     * not kept as for a failed lookup. */
    grit_channel_ext_fail(x->ch, err);
    return;
  }
  if (err[0]) {
    grit_channel_ext_result(x->ch, NULL, 0, NULL, err);
    return;
  }
  if (!e) {
    /* Not all there yet: the channel stays CONNECTING, unless a missing
     * resource was refused (then calls fail with its reason). */
    char nack[200] = "";
    pthread_mutex_lock(&x->mu);
    for (int k = 0; k < XDS_KINDS && !nack[0]; k++)
      if (!res[k] && x->nack[k][0])
        snprintf(nack, sizeof(nack), "%s", x->nack[k]);
    pthread_mutex_unlock(&x->mu);
    if (nack[0])
      grit_channel_ext_result(x->ch, NULL, 0, NULL, nack);
    return;
  }
  /* The first priority with a usable endpoint; within it every locality's
   * HEALTHY and UNKNOWN endpoints (UNHEALTHY, DRAINING and the rest out). */
  size_t total = 0;
  for (size_t i = 0; i < e->nlocalities; i++)
    total += e->localities[i].nendpoints;
  grit_addr *addrs = total ? grit_calloc(total, sizeof(*addrs)) : NULL;
  if (total && !addrs) {
    grit_channel_ext_result(x->ch, NULL, 0, NULL, "xds: out of memory");
    return;
  }
  size_t n = 0;
  for (uint32_t prio = 0; prio < e->npriorities && n == 0; prio++) {
    for (size_t i = 0; i < e->nlocalities; i++) {
      const xds_locality *loc = &e->localities[i];
      if (loc->priority != prio || loc->weight == 0)
        continue;
      for (size_t j = 0; j < loc->nendpoints; j++) {
        const xds_endpoint *ep = &loc->endpoints[j];
        if (ep->health != XDS_HEALTH_HEALTHY &&
            ep->health != XDS_HEALTH_UNKNOWN)
          continue;
        if (grit_addr_from_ip(&addrs[n], ep->host, ep->port) == GRIT_OK)
          n++;
      }
    }
  }
  /* The config watcher hears one event per applied update (source xds):
   * the note names the resources and versions in force. */
  char note[256], v[XDS_KINDS][40];
  for (int k = 0; k < XDS_KINDS; k++)
    grit_xdsc_version(x->c, (xds_kind)k, v[k], sizeof(v[k]));
  snprintf(note, sizeof(note),
           "listener %s (lds %s), route %s (rds %s), cluster %s (cds %s), "
           "eds %s (eds %s)",
           x->name, v[0], l->rds_name ? l->rds_name : "inline", v[1], cluster,
           v[2], eds, v[3]);
  if (n == 0) {
    grit_channel_ext_result(x->ch, NULL, 0, NULL,
                            "xds: no healthy endpoint in any priority");
  } else {
    grit_channel_ext_note(x->ch, note);
    grit_channel_ext_result(x->ch, addrs, n, config, NULL);
  }
  grit_free(addrs);
}

static void xr_kick(void *state) {
  xres *x = state;
  /* Resolve the chain until it stops changing (each step may watch the
   * next resource, whose cached value arrives at once). */
  for (int round = 0; round < 4; round++) {
    xds_resource *res[XDS_KINDS];
    pthread_mutex_lock(&x->mu);
    for (int k = 0; k < XDS_KINDS; k++) {
      res[k] = x->res[k];
      if (res[k])
        grit_xds_resource_ref(res[k]);
    }
    pthread_mutex_unlock(&x->mu);
    deliver(x, res);
    bool same = true;
    pthread_mutex_lock(&x->mu);
    for (int k = 0; k < XDS_KINDS; k++) {
      same = same && res[k] == x->res[k];
      if (res[k])
        grit_xds_resource_unref(res[k]);
    }
    pthread_mutex_unlock(&x->mu);
    if (same)
      break;
  }
}

static void xr_stop(void *state) {
  xres *x = state;
  for (int k = XDS_KINDS - 1; k >= 0; k--)
    (void)rewatch(x, (xds_kind)k, NULL);
  grit_xdsc_release(x->c);
  pthread_mutex_destroy(&x->mu);
  grit_free(x->name);
  grit_free(x);
}

grit_err grit_xds_bootstrap_load(const char *config, xds_bootstrap **out,
                                 grit_error_detail *d) {
  grit_err e = config ? grit_xds_bootstrap_parse(config, strlen(config), out, d)
                      : grit_xds_bootstrap_from_env(out, d);
  if (e == GRIT_ERR_NOT_FOUND && d && strcmp(d->path, "$") == 0)
    grit_error_set(d, GRIT_ERR_INVALID_CONFIG, "$",
                   "no xDS bootstrap: set the channel argument "
                   "GRIT_ARG_XDS_BOOTSTRAP_CONFIG (JSON), or the environment "
                   "variable GRPC_XDS_BOOTSTRAP (a file) or "
                   "GRPC_XDS_BOOTSTRAP_CONFIG (JSON)");
  if (e == GRIT_ERR_INVALID_ARG || e == GRIT_ERR_NOT_FOUND) {
    e = GRIT_ERR_INVALID_CONFIG;
    if (d)
      d->code = e;
  }
  return e;
}

/* At grit_channel_create: a channel without a usable bootstrap is refused
 * with the reason, instead of failing its calls later. */
static grit_err xr_check(const char *target, const char *config,
                         grit_error_detail *d) {
  (void)target;
  xds_bootstrap *b = NULL;
  grit_err e = grit_xds_bootstrap_load(config, &b, d);
  grit_xds_bootstrap_free(b);
  if (e == GRIT_OK)
    grit_xdsc_metrics_register();
  return e;
}

static void xr_wait_idle(uint64_t ms) {
  (void)grit_xdsc_wait_released_freed(ms);
}

static grit_err xr_start(grit_channel *ch, const char *target, void **state) {
  xds_bootstrap *b = NULL;
  grit_error_detail d = {0};
  grit_err e = grit_xds_bootstrap_load(grit_channel_ext_config(ch), &b, &d);
  if (e != GRIT_OK)
    return e;
  xres *x = grit_calloc(1, sizeof(*x));
  if (!x) {
    grit_xds_bootstrap_free(b);
    return GRIT_ERR_NOMEM;
  }
  const char *p = strchr(target, ':');
  p = p ? p + 1 : target;
  if (p[0] == '/' && p[1] == '/') {
    const char *slash = strchr(p + 2, '/');
    p = slash ? slash + 1 : p + 2;
  }
  x->name = grit_strdup(p);
  x->ch = ch;
  pthread_mutex_init(&x->mu, NULL);
  e = x->name ? grit_xdsc_get(b, &x->c) : GRIT_ERR_NOMEM;
  if (!x->name)
    grit_xds_bootstrap_free(b);
  if (e == GRIT_OK) {
    grit_xdsc_set_target(x->c, target);
    e = rewatch(x, XDS_LISTENER, x->name);
  }
  if (e != GRIT_OK) {
    if (x->c)
      xr_stop(x);
    else {
      pthread_mutex_destroy(&x->mu);
      grit_free(x->name);
      grit_free(x);
    }
    return e;
  }
  *state = x;
  return GRIT_OK;
}

static const grit_ext_resolver_ops xds_ops = {
    .scheme = "xds",
    .start = xr_start,
    .kick = xr_kick,
    .stop = xr_stop,
    .check = xr_check,
    .wait_idle = xr_wait_idle,
};

/* The library's plugin table (channel.h): libgrit serves "xds:" out of the
 * box, as grpc-core's plugin registry registers its xds resolver. */
const grit_ext_resolver_ops *const grit_ext_builtin_resolvers[] = {&xds_ops,
                                                                   NULL};

grit_err grit_xds_resolver_register(void) {
  return grit_channel_register_ext_resolver(&xds_ops);
}

/* ---- the public operator functions (grit.h) ---- */

grit_err grit_xds_bootstrap_check(const char *json, size_t len,
                                  grit_error_detail *detail) {
  if (!json)
    return GRIT_ERR_INVALID_ARG;
  xds_bootstrap *b = NULL;
  grit_err e = grit_xds_bootstrap_parse(json, len, &b, detail);
  grit_xds_bootstrap_free(b);
  if (e == GRIT_ERR_INVALID_ARG) {
    e = GRIT_ERR_INVALID_CONFIG;
    if (detail)
      detail->code = e;
  }
  return e;
}

grit_err grit_xds_client_status(const char *bootstrap,
                                grit_error_detail *detail, char **json_out) {
  if (!json_out)
    return GRIT_ERR_INVALID_ARG;
  *json_out = NULL;
  xds_bootstrap *b = NULL;
  grit_err e = grit_xds_bootstrap_load(bootstrap, &b, detail);
  if (e != GRIT_OK)
    return e;
  grit_xdsc *c = grit_xdsc_find(b->nservers ? b->servers[0].uri : "");
  grit_xds_bootstrap_free(b);
  if (!c)
    return GRIT_ERR_NOT_FOUND;
  *json_out = grit_xdsc_describe(c);
  grit_xdsc_release(c);
  return *json_out ? GRIT_OK : GRIT_ERR_NOMEM;
}
