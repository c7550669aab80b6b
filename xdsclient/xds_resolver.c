/* The xds resolver front (gRFC A27, A28; SPEC XD-01, XD-02): a channel
 * made with "xds:///name" watches the Listener |name|, its
 * RouteConfiguration, the cluster its routes name and that cluster's
 * ClusterLoadAssignment, and hands the channel the cluster's LB policy
 * tree (priorities, localities, drops, circuit breaker, the cluster's
 * policy; xdsclient/cluster_lb.c, issue 27) through channel/'s ext
 * resolver hook. This slice serves one cluster per
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
  grit_xds_dns *dns; /* a LOGICAL_DNS cluster's resolver (loop thread) */
} xres;

static void dns_changed(void *ud) {
  xres *x = ud;
  grit_channel_ext_kick(x->ch);
}

static void slot_set(xres *x, xds_kind k, const char *name, xds_resource *r,
                     const char *err) {
  pthread_mutex_lock(&x->mu);
  if (x->watched[k] && strcmp(x->watched[k], name) == 0) {
    if (r)
      grit_xds_resource_ref(r);
    if (x->res[k])
      grit_xds_resource_unref(x->res[k]);
    x->res[k] = r;
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
  /* A27: a NACKed update leaves the previous resource in force. */
  (void)ud;
  (void)k;
  (void)name;
  (void)why;
}

static void w_dne(void *ud, xds_kind k, const char *name) {
  static const char *const kinds[] = {"listener", "route configuration",
                                      "cluster", "endpoints"};
  char buf[256];
  snprintf(buf, sizeof(buf), "xds: %s %s does not exist", kinds[k], name);
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
    if (cl->type == XDS_CLUSTER_EDS)
      eds = cl->eds_service_name ? cl->eds_service_name : cluster;
  }
  /* Issue 27: a LOGICAL_DNS cluster's name through grit's DNS resolver. */
  bool dns = cl && cl->type == XDS_CLUSTER_LOGICAL_DNS;
  if (!dns || !grit_xds_dns_is(x->dns, cl->dns_host, cl->dns_port)) {
    grit_xds_dns_stop(x->dns);
    x->dns = NULL;
  }
  if (dns && !x->dns &&
      grit_xds_dns_start(grit_channel_ext_loop(x->ch), cl->dns_host,
                         cl->dns_port, dns_changed, x, &x->dns) != GRIT_OK)
    snprintf(err, sizeof(err), "xds: cluster %s: cannot resolve %s", cluster,
             cl->dns_host);
  if (cl && rewatch(x, XDS_ENDPOINTS, eds) != GRIT_OK)
    snprintf(err, sizeof(err), "xds: out of memory");
  const xds_endpoints *e =
      eds && res[XDS_ENDPOINTS] ? &res[XDS_ENDPOINTS]->u.endpoints : NULL;
  pthread_mutex_lock(&x->mu);
  if (x->err[0] && !err[0])
    snprintf(err, sizeof(err), "%s", x->err);
  pthread_mutex_unlock(&x->mu);
  if (err[0]) {
    grit_channel_ext_result(x->ch, NULL, 0, NULL, err);
    return;
  }
  const grit_addr *da = NULL;
  size_t dn = 0;
  if (dns) {
    const char *derr;
    da = grit_xds_dns_addrs(x->dns, &dn, &derr);
    if (!da && derr) {
      grit_channel_ext_result(x->ch, NULL, 0, NULL, derr);
      return;
    }
  }
  if (dns ? !da : !e)
    return; /* not all there yet: the channel stays CONNECTING */
  /* Issue 27: the cluster's policy tree (xdsclient/cluster_lb.c). */
  grit_xds_lb_tree *t = NULL;
  if ((dns ? grit_xds_lb_tree_build_dns(cluster, cl, da, dn, &t)
           : grit_xds_lb_tree_build(cluster, cl, e, &t)) != GRIT_OK) {
    grit_channel_ext_result(x->ch, NULL, 0, NULL, "xds: out of memory");
    return;
  }
  if (grit_xds_lb_tree_addresses(t) == 0)
    grit_channel_ext_result(x->ch, NULL, 0, NULL,
                            dns ? "xds: LOGICAL_DNS name has no address"
                                : "xds: no healthy endpoint in any priority");
  else
    grit_channel_ext_result_tree(x->ch, grit_xds_lb_tree_root(t),
                                 grit_xds_lb_tree_config_json(t));
  grit_xds_lb_tree_free(t);
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
  grit_xds_dns_stop(x->dns);
  x->dns = NULL;
  for (int k = XDS_KINDS - 1; k >= 0; k--)
    (void)rewatch(x, (xds_kind)k, NULL);
  grit_xdsc_release(x->c);
  pthread_mutex_destroy(&x->mu);
  grit_free(x->name);
  grit_free(x);
}

static grit_err xr_start(grit_channel *ch, const char *target, void **state) {
  xds_bootstrap *b = NULL;
  grit_error_detail d = {0};
  grit_err e = grit_xds_bootstrap_from_env(&b, &d);
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
  if (e == GRIT_OK)
    e = rewatch(x, XDS_LISTENER, x->name);
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
};

grit_err grit_xds_resolver_register(void) {
  return grit_channel_register_ext_resolver(&xds_ops);
}
