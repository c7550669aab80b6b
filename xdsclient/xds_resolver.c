/* The xds resolver front (gRFC A27, A28, A31, A42, A44; SPEC XD-01,
 * XD-02): a channel made with "xds:///name" watches the Listener |name|,
 * its RouteConfiguration, every cluster its routes name (and every cluster
 * a running call still uses) and each cluster's ClusterLoadAssignment. It
 * hands the channel one child policy per cluster (grit_lb_cluster_manager;
 * each child the cluster's policy tree, xdsclient/cluster_lb.c: drops and
 * circuit breaker, priorities with failover, localities by weight, the
 * cluster's policy; a LOGICAL_DNS cluster's name resolved by grit's DNS
 * resolver, xdsclient/logical_dns.c) and
 * chooses each call's route (select): its cluster (a weighted_clusters
 * pick per call), retry policy, max_stream_duration and hash. As in
 * grpc-core, the route table in force (xsnap) holds a reference on each
 * cluster it names and every call one on its cluster (and on its route
 * table's memory, for the retry policy); a cluster nobody references any
 * more is unwatched and dropped from the channel's policy (docs/xds.md).
 * Everything but the watcher callbacks runs on the channel's loop. */
#include <stdio.h>
#include <string.h>

#include "channel/channel.h"
#include "xdsclient/route_choice.h"
#include "xdsclient/xdsclient.h"

typedef struct xres xres;

/* A cluster the channel keeps a child policy for. */
typedef struct xcl {
  struct xcl *next;
  xres *x;
  char *name;
  char *eds_name; /* the EDS name watched, or NULL (loop) */
  uint32_t refs;  /* route tables naming it + calls using it (loop) */
  /* Written by the watchers, under x->mu. */
  xds_resource *cds, *eds;
  char err[200];     /* a does-not-exist, or "" */
  char nack[200];    /* a NACK of its CDS or EDS while none is in force */
  grit_xds_dns *dns; /* a LOGICAL_DNS cluster's resolver (loop) */
} xcl;

/* One route of a route table, with what it gives a call. */
typedef struct xroute {
  bool has_retry;
  grit_retry_policy retry;
  uint64_t timeout_ms;
} xroute;

/* A route table: the virtual host of one Listener/RouteConfiguration
 * pair, with a reference on each cluster its routes name while it is in
 * force (loop only). */
typedef struct xsnap {
  uint32_t refs;
  xres *x;
  xds_resource *lds, *rds; /* references (rds NULL: inline) */
  const xds_vhost *vh;
  xroute *routes; /* one per vh->routes */
  xcl **cls;      /* the clusters referenced, with repeats */
  size_t ncls;
} xsnap;

struct xres {
  uint32_t refs; /* the channel's (until stop) + route tables (loop) */
  bool stopped;
  grit_channel *ch;
  grit_xdsc *c;
  char *name;
  grit_rng rng;         /* runtime fractions and weighted picks (loop) */
  uint64_t channel_id;  /* A42's io.grpc.channel_id hash */
  xsnap *snap;          /* the route table in force, or NULL (loop) */
  char why[512];        /* why there is none (loop), or "" */
  pthread_mutex_t mu;   /* what the watchers write, and the cluster list */
  xds_resource *res[2]; /* the Listener and RouteConfiguration */
  char *watched[2];     /* the name watched of each */
  char err[256];        /* a does-not-exist of either, or "" */
  /* Per kind (listener, route configuration): the NACK of the watched name
   * while nothing of it is in force (calls say why they wait), or "". */
  char nack[2][200];
  uint64_t gen;  /* bumped by every watcher write */
  xcl *clusters; /* changed on the loop only, under mu */
};

static const grit_xdsc_watcher watcher;
static const grit_xdsc_watcher cl_watcher;

static void x_unref(xres *x) {
  if (--x->refs)
    return;
  pthread_mutex_destroy(&x->mu);
  grit_free(x->name);
  grit_free(x);
}

static void kick(xres *x) {
  if (!x->stopped)
    grit_channel_ext_kick(x->ch);
}

/* ---- the watchers (any thread, the client's lock held) ---- */

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
    x->gen++;
  }
  pthread_mutex_unlock(&x->mu);
  grit_channel_ext_kick(x->ch);
}

static const char *const kind_names[] = {"listener", "route configuration",
                                         "cluster", "endpoints"};

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
  if (none) {
    snprintf(x->nack[k], sizeof(x->nack[k]), "xds: %s %s was refused: %s",
             kind_names[k], name, why);
    x->gen++;
  }
  pthread_mutex_unlock(&x->mu);
  if (none)
    grit_channel_ext_kick(x->ch);
}

/* A27: a Listener or Cluster missing from a state-of-the-world response is
 * deleted, and any resource the does-not-exist timer fires for is not
 * there: what the channel served is gone (deliver() fails it). */
static void dne_text(char *buf, size_t size, xds_kind k, const char *name) {
  snprintf(buf, size,
           "xds: %s %s does not exist (deleted by the control plane, or "
           "never sent)",
           kind_names[k], name);
}

static void w_dne(void *ud, xds_kind k, const char *name) {
  char buf[256];
  dne_text(buf, sizeof(buf), k, name);
  slot_set(ud, k, name, NULL, buf);
}

static const grit_xdsc_watcher watcher = {w_resource, w_error, w_dne};

/* A cluster's CDS (|k| CLUSTER) or EDS resource. */
static void cl_set(xcl *cl, xds_kind k, xds_resource *r, const char *err) {
  xres *x = cl->x;
  pthread_mutex_lock(&x->mu);
  xds_resource **slot = k == XDS_CLUSTER ? &cl->cds : &cl->eds;
  if (r)
    grit_xds_resource_ref(r);
  if (*slot)
    grit_xds_resource_unref(*slot);
  *slot = r;
  if (r)
    cl->nack[0] = '\0';
  if (err)
    snprintf(cl->err, sizeof(cl->err), "%s", err);
  else if (r)
    cl->err[0] = '\0';
  x->gen++;
  pthread_mutex_unlock(&x->mu);
  grit_channel_ext_kick(x->ch);
}

static void cw_resource(void *ud, xds_kind k, const char *name,
                        xds_resource *r) {
  (void)name;
  cl_set(ud, k, r, NULL);
}

static void cw_dne(void *ud, xds_kind k, const char *name) {
  char buf[200];
  dne_text(buf, sizeof(buf), k, name);
  cl_set(ud, k, NULL, buf);
}

/* A NACKed CDS or EDS update: the previous resource stays in force; with
 * none, the calls routed to the cluster fail with the reason. */
static void cw_error(void *ud, xds_kind k, const char *name, const char *why) {
  xcl *cl = ud;
  xres *x = cl->x;
  pthread_mutex_lock(&x->mu);
  bool none = !(k == XDS_CLUSTER ? cl->cds : cl->eds);
  if (none) {
    snprintf(cl->nack, sizeof(cl->nack), "xds: %s %s was refused: %s",
             kind_names[k], name, why);
    x->gen++;
  }
  pthread_mutex_unlock(&x->mu);
  if (none)
    grit_channel_ext_kick(x->ch);
}

static const grit_xdsc_watcher cl_watcher = {cw_resource, cw_error, cw_dne};

/* ---- clusters (loop) ---- */

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

/* The cluster's EDS watch: |name| instead of what was. */
static grit_err cl_rewatch_eds(xcl *cl, const char *name) {
  xres *x = cl->x;
  char *old = cl->eds_name;
  if ((!old && !name) || (old && name && strcmp(old, name) == 0))
    return GRIT_OK;
  char *copy = name ? grit_strdup(name) : NULL;
  if (name && !copy)
    return GRIT_ERR_NOMEM;
  if (old)
    grit_xdsc_unwatch(x->c, XDS_ENDPOINTS, old, cl);
  grit_free(old);
  cl->eds_name = copy;
  pthread_mutex_lock(&x->mu);
  if (cl->eds)
    grit_xds_resource_unref(cl->eds);
  cl->eds = NULL;
  pthread_mutex_unlock(&x->mu);
  return copy ? grit_xdsc_watch(x->c, XDS_ENDPOINTS, copy, &cl_watcher, cl)
              : GRIT_OK;
}

/* The watches of |cl| end (before stop's release of the client). */
static void cl_unwatch(xcl *cl) {
  grit_xds_dns_stop(cl->dns);
  cl->dns = NULL;
  grit_xdsc_unwatch(cl->x->c, XDS_CLUSTER, cl->name, cl);
  if (cl->eds_name)
    grit_xdsc_unwatch(cl->x->c, XDS_ENDPOINTS, cl->eds_name, cl);
}

/* The cluster |name|, with a new reference; made and watched if new. */
static xcl *cl_get(xres *x, const char *name) {
  for (xcl *cl = x->clusters; cl; cl = cl->next)
    if (strcmp(cl->name, name) == 0) {
      cl->refs++;
      return cl;
    }
  xcl *cl = grit_calloc(1, sizeof(*cl));
  if (!cl || !(cl->name = grit_strdup(name))) {
    grit_free(cl);
    return NULL;
  }
  cl->x = x;
  cl->refs = 1;
  pthread_mutex_lock(&x->mu);
  cl->next = x->clusters;
  x->clusters = cl;
  pthread_mutex_unlock(&x->mu);
  if (grit_xdsc_watch(x->c, XDS_CLUSTER, name, &cl_watcher, cl) != GRIT_OK)
    snprintf(cl->err, sizeof(cl->err), "xds: out of memory");
  return cl;
}

/* Nobody uses |cl| any more: it goes, and the channel's policy with it. */
static void cl_unref(xcl *cl) {
  if (--cl->refs)
    return;
  xres *x = cl->x;
  if (!x->stopped)
    cl_unwatch(cl);
  pthread_mutex_lock(&x->mu);
  for (xcl **pp = &x->clusters; *pp; pp = &(*pp)->next)
    if (*pp == cl) {
      *pp = cl->next;
      break;
    }
  if (cl->cds)
    grit_xds_resource_unref(cl->cds);
  if (cl->eds)
    grit_xds_resource_unref(cl->eds);
  pthread_mutex_unlock(&x->mu);
  grit_free(cl->eds_name);
  grit_free(cl->name);
  grit_free(cl);
  kick(x);
}

/* ---- route tables (loop) ---- */

/* |s| is no longer in force: its clusters go unless other tables or calls
 * hold them (a call holds its own cluster, not its table's others, as in
 * grpc-core); the calls keep |s| itself for their retry policy. */
static void snap_retire(xsnap *s) {
  if (!s)
    return;
  size_t n = s->ncls;
  s->ncls = 0;
  for (size_t i = 0; i < n; i++)
    cl_unref(s->cls[i]);
}

static void snap_unref(xsnap *s) {
  if (!s || --s->refs)
    return;
  snap_retire(s);
  if (s->lds)
    grit_xds_resource_unref(s->lds);
  if (s->rds)
    grit_xds_resource_unref(s->rds);
  xres *x = s->x;
  grit_free(s->cls);
  grit_free(s->routes);
  grit_free(s);
  x_unref(x);
}

static xcl *snap_cluster(const xsnap *s, const char *name) {
  for (size_t i = 0; i < s->ncls; i++)
    if (strcmp(s->cls[i]->name, name) == 0)
      return s->cls[i];
  return NULL;
}

/* The route table of |vh| (a virtual host of |lds| or |rds|). */
static xsnap *snap_build(xres *x, xds_resource *lds, xds_resource *rds,
                         const xds_vhost *vh) {
  xsnap *s = grit_calloc(1, sizeof(*s));
  size_t want = 0;
  for (size_t i = 0; i < vh->nroutes; i++)
    want += vh->routes[i].action == XDS_ACTION_WEIGHTED
                ? vh->routes[i].nweighted
                : vh->routes[i].action == XDS_ACTION_CLUSTER;
  if (s) {
    s->routes = grit_calloc(vh->nroutes ? vh->nroutes : 1, sizeof(xroute));
    s->cls = grit_calloc(want ? want : 1, sizeof(xcl *));
  }
  if (!s || !s->routes || !s->cls) {
    if (s) {
      grit_free(s->routes);
      grit_free(s->cls);
    }
    grit_free(s);
    return NULL;
  }
  s->refs = 1;
  s->x = x;
  x->refs++;
  s->lds = lds;
  grit_xds_resource_ref(lds);
  s->rds = rds;
  if (rds)
    grit_xds_resource_ref(rds);
  s->vh = vh;
  const xds_listener *l = &lds->u.listener;
  bool ok = true;
  for (size_t i = 0; i < vh->nroutes; i++) {
    const xds_route *r = &vh->routes[i];
    xroute *xr = &s->routes[i];
    const xds_retry_policy *rp = r->has_retry    ? &r->retry
                                 : vh->has_retry ? &vh->retry
                                                 : NULL;
    xr->has_retry = rp && grit_xds_retry_convert(rp, &xr->retry);
    xr->timeout_ms = grit_xds_route_timeout_ms(r, l->has_max_stream_duration,
                                               l->max_stream_duration_ns);
    size_t m = r->action == XDS_ACTION_WEIGHTED  ? r->nweighted
               : r->action == XDS_ACTION_CLUSTER ? 1
                                                 : 0;
    for (size_t j = 0; j < m && ok; j++) {
      const char *name =
          r->action == XDS_ACTION_WEIGHTED ? r->weighted[j].name : r->cluster;
      xcl *cl = cl_get(x, name);
      if (cl)
        s->cls[s->ncls++] = cl;
      ok = cl != NULL;
    }
  }
  if (!ok) {
    snap_unref(s);
    return NULL;
  }
  return s;
}

/* ---- select / release (loop) ---- */

static grit_status_code xr_select(void *state, const char *path,
                                  const grit_metadata *md, grit_ext_route *out,
                                  char *msg, size_t msg_size) {
  xres *x = state;
  xsnap *s = x->snap;
  if (!s) {
    snprintf(msg, msg_size, "%s",
             x->why[0] ? x->why : "xds: no route configuration yet");
    return GRIT_STATUS_UNAVAILABLE;
  }
  xds_choice ch;
  grit_status_code code = grit_xds_choose(s->vh, path, md, &x->rng,
                                          x->channel_id, &ch, msg, msg_size);
  if (code != GRIT_STATUS_OK)
    return code;
  xcl *cl = snap_cluster(s, ch.cluster);
  const xroute *xr = &s->routes[ch.index];
  out->pick.cluster = cl->name;
  out->pick.has_hash = ch.has_hash;
  out->pick.hash = ch.hash;
  out->retry = xr->has_retry ? &xr->retry : NULL;
  out->timeout_ms = xr->timeout_ms;
  out->hold[0] = s;
  out->hold[1] = cl;
  s->refs++;
  cl->refs++;
  return GRIT_STATUS_OK;
}

static void xr_release(grit_ext_route *r) {
  xcl *cl = r->hold[1];
  xsnap *s = r->hold[0];
  cl_unref(cl);
  snap_unref(s);
}

/* ---- delivery (loop) ---- */

static void cl_dns_changed(void *ud) {
  xcl *cl = ud;
  kick(cl->x);
}

/* A LOGICAL_DNS cluster's resolver follows its CDS resource (loop thread):
 * started for a new host:port, stopped when the cluster is EDS again. */
static void cl_dns_follow(xcl *cl, const xds_cluster *c, char *err,
                          size_t err_size) {
  bool dns = c && c->type == XDS_CLUSTER_LOGICAL_DNS;
  if (!dns || !grit_xds_dns_is(cl->dns, c->dns_host, c->dns_port)) {
    grit_xds_dns_stop(cl->dns);
    cl->dns = NULL;
  }
  if (dns && !cl->dns &&
      grit_xds_dns_start(grit_channel_ext_loop(cl->x->ch), c->dns_host,
                         c->dns_port, cl_dns_changed, cl, &cl->dns) != GRIT_OK)
    snprintf(err, err_size, "xds: cluster %s: cannot resolve %s", cl->name,
             c->dns_host);
}

/* The cluster's policy tree (xdsclient/cluster_lb.c: cluster_impl over
 * priority over weighted_target over the cluster's policy), or NULL with
 * |err| set, or NULL with |err| empty: not all there yet. */
static grit_xds_lb_tree *cl_tree(xcl *cl, const xds_cluster *c,
                                 const xds_endpoints *e, char *err,
                                 size_t err_size) {
  grit_xds_lb_tree *t = NULL;
  grit_err rv;
  if (c->type == XDS_CLUSTER_LOGICAL_DNS) {
    size_t n = 0;
    const char *derr = NULL;
    const grit_addr *a = grit_xds_dns_addrs(cl->dns, &n, &derr);
    if (!a) {
      if (derr)
        snprintf(err, err_size, "%s", derr);
      return NULL;
    }
    rv = grit_xds_lb_tree_build_dns(cl->name, c, a, n, &t);
  } else {
    if (!e)
      return NULL;
    rv = grit_xds_lb_tree_build(cl->name, c, e, &t);
  }
  if (rv != GRIT_OK) {
    snprintf(err, err_size, "xds: out of memory");
    return NULL;
  }
  if (grit_xds_lb_tree_addresses(t) == 0) {
    snprintf(err, err_size,
             c->type == XDS_CLUSTER_LOGICAL_DNS
                 ? "xds: cluster %s: LOGICAL_DNS name has no address"
                 : "xds: cluster %s: no healthy endpoint in any priority",
             cl->name);
    grit_xds_lb_tree_free(t);
    return NULL;
  }
  return t;
}

/* The child policy part of |t|'s service config ("[{...}]"), into |cfg|. */
static void tree_child_json(const grit_xds_lb_tree *t, char *cfg,
                            size_t cfg_size) {
  static const char pre[] = "{\"loadBalancingConfig\":";
  const char *j = grit_xds_lb_tree_config_json(t);
  size_t n = j ? strlen(j) : 0;
  if (n > sizeof(pre) && strncmp(j, pre, sizeof(pre) - 1) == 0 &&
      j[n - 1] == '}' && j[sizeof(pre) - 1] == '[')
    snprintf(cfg, cfg_size, "%.*s", (int)(n - sizeof(pre)),
             j + sizeof(pre) - 1);
  else
    snprintf(cfg, cfg_size, "[{\"round_robin\":{}}]");
}

/* One cluster's child: its policy tree (|*tree|, freed by the caller
 * after the update) or why it cannot serve, and its childPolicy JSON. */
static void cl_child(xcl *cl, grit_lb_cm_child *k, grit_xds_lb_tree **tree,
                     char *err, size_t err_size, char *cfg, size_t cfg_size) {
  *k = (grit_lb_cm_child){.name = cl->name};
  grit_lb_params_default(&k->params);
  *tree = NULL;
  pthread_mutex_lock(&cl->x->mu);
  xds_resource *cds = cl->cds, *eds = cl->eds;
  if (cds)
    grit_xds_resource_ref(cds);
  if (eds)
    grit_xds_resource_ref(eds);
  snprintf(err, err_size, "%s", cl->err);
  char nack[200];
  snprintf(nack, sizeof(nack), "%s", cl->nack);
  pthread_mutex_unlock(&cl->x->mu);
  const xds_cluster *c = cds ? &cds->u.cluster : NULL;
  snprintf(cfg, cfg_size, "[{\"round_robin\":{}}]");
  bool is_eds = c && c->type == XDS_CLUSTER_EDS;
  if (!err[0] && c)
    cl_dns_follow(cl, c, err, err_size);
  if (!err[0] && c &&
      cl_rewatch_eds(cl, !is_eds               ? NULL
                         : c->eds_service_name ? c->eds_service_name
                                               : cl->name) != GRIT_OK)
    snprintf(err, err_size, "xds: out of memory");
  if (!err[0] && c)
    *tree =
        cl_tree(cl, c, is_eds && eds ? &eds->u.endpoints : NULL, err, err_size);
  if (!err[0] && !*tree && nack[0]) /* refused, and nothing in force */
    snprintf(err, err_size, "%s", nack);
  if (err[0]) {
    k->error = err;
  } else if (!*tree) {
    k->waiting = true;
  } else {
    k->tree = grit_xds_lb_tree_root(*tree);
    tree_child_json(*tree, cfg, cfg_size);
  }
  if (cds)
    grit_xds_resource_unref(cds);
  if (eds)
    grit_xds_resource_unref(eds);
}

/* The config watcher hears one event per applied update (source xds): the
 * note names the resources and the versions in force. */
static void deliver_note(xres *x) {
  char note[512], v[XDS_KINDS][40];
  for (int k = 0; k < XDS_KINDS; k++)
    grit_xdsc_version(x->c, (xds_kind)k, v[k], sizeof(v[k]));
  const xds_listener *l = &x->snap->lds->u.listener;
  size_t at = (size_t)snprintf(
      note, sizeof(note), "listener %s (lds %s), route %s (rds %s), clusters",
      x->name, v[0], l->rds_name ? l->rds_name : "inline", v[1]);
  for (xcl *cl = x->clusters; cl && at < sizeof(note); cl = cl->next)
    at += (size_t)snprintf(note + at, sizeof(note) - at, " %s", cl->name);
  if (at < sizeof(note))
    snprintf(note + at, sizeof(note) - at, " (cds %s, eds %s)", v[2], v[3]);
  grit_channel_ext_note(x->ch, note);
}

/* Give the channel one child per cluster in use, and the service config
 * that shows them. */
static void deliver_clusters(xres *x) {
  size_t n = 0;
  for (xcl *cl = x->clusters; cl; cl = cl->next)
    n++;
  grit_lb_cm_child *kids = grit_calloc(n ? n : 1, sizeof(*kids));
  grit_xds_lb_tree **trees = grit_calloc(n ? n : 1, sizeof(*trees));
  char(*errs)[256] = grit_calloc(n ? n : 1, sizeof(*errs));
  size_t cfg_len = 160;
  for (xcl *cl = x->clusters; cl; cl = cl->next)
    cfg_len += strlen(cl->name) + 560;
  char *json = grit_malloc(cfg_len);
  if (!kids || !trees || !errs || !json) {
    grit_channel_ext_result(x->ch, NULL, 0, NULL, "xds: out of memory");
    goto done;
  }
  /* The cluster manager as grpc-core's service config names it; round_robin
   * after it because grit's service config parser needs a policy it knows
   * (the channel runs grit_lb_cluster_manager for this result). */
  size_t at = (size_t)snprintf(
      json, cfg_len,
      "{\"loadBalancingConfig\":[{\"xds_cluster_manager_experimental\":"
      "{\"children\":{");
  size_t i = 0;
  for (xcl *cl = x->clusters; cl; cl = cl->next, i++) {
    char cfg[512];
    cl_child(cl, &kids[i], &trees[i], errs[i], sizeof(errs[i]), cfg,
             sizeof(cfg));
    at += (size_t)snprintf(json + at, cfg_len - at,
                           "%s\"%s\":{\"childPolicy\":%s}", i ? "," : "",
                           cl->name, cfg);
  }
  snprintf(json + at, cfg_len - at, "}}},{\"round_robin\":{}}]}");
  deliver_note(x);
  grit_channel_ext_result_clusters(x->ch, kids, n, json);
done:
  for (size_t j = 0; trees && j < n; j++)
    grit_xds_lb_tree_free(trees[j]);
  grit_free(trees);
  grit_free(kids);
  grit_free(errs);
  grit_free(json);
}

static void deliver(xres *x) {
  char err[512];
  err[0] = '\0';
  xds_resource *lds, *rds;
  pthread_mutex_lock(&x->mu);
  lds = x->res[XDS_LISTENER];
  if (lds)
    grit_xds_resource_ref(lds);
  pthread_mutex_unlock(&x->mu);
  /* Listener -> its RouteConfiguration (inline or RDS). */
  const xds_listener *l = lds ? &lds->u.listener : NULL;
  if (l && rewatch(x, XDS_ROUTE_CONFIG, l->rds_name) != GRIT_OK)
    snprintf(err, sizeof(err), "xds: out of memory");
  pthread_mutex_lock(&x->mu);
  rds = l && l->rds_name ? x->res[XDS_ROUTE_CONFIG] : NULL;
  if (rds)
    grit_xds_resource_ref(rds);
  bool gone = x->err[0] != '\0';
  if (gone && !err[0])
    snprintf(err, sizeof(err), "%s", x->err);
  char nack[200] = "";
  for (int k = 0; k < 2 && !nack[0]; k++)
    if (!x->res[k] && x->nack[k][0])
      snprintf(nack, sizeof(nack), "%s", x->nack[k]);
  pthread_mutex_unlock(&x->mu);
  const xds_route_config *rc = NULL;
  if (l)
    rc = l->rds_name ? (rds ? &rds->u.route_config : NULL) : l->route_config;
  const xds_vhost *vh = rc ? grit_xds_vhost_find(rc, x->name) : NULL;
  if (rc && !vh && !err[0])
    snprintf(err, sizeof(err), "xds: no virtual host matches %s", x->name);
  if (!err[0] && !vh && nack[0]) /* refused, and nothing in force */
    snprintf(err, sizeof(err), "%s", nack);
  if (err[0]) {
    /* Calls fail with the error. gRFC A27 (as grpc-core): a deleted
     * Listener fails them UNAVAILABLE naming it until it comes back; its
     * clusters' connections are not kept as for a failed lookup. */
    xsnap *old = x->snap;
    x->snap = NULL;
    snap_retire(old);
    snap_unref(old);
    snprintf(x->why, sizeof(x->why), "%s", err);
    if (gone)
      grit_channel_ext_fail(x->ch, err);
    else
      grit_channel_ext_result(x->ch, NULL, 0, NULL, err);
  } else if (vh && (!x->snap || x->snap->lds != lds || x->snap->rds != rds)) {
    xsnap *s = snap_build(x, lds, rds, vh);
    if (!s) {
      grit_channel_ext_result(x->ch, NULL, 0, NULL, "xds: out of memory");
    } else {
      x->why[0] = '\0';
      xsnap *old = x->snap;
      x->snap = s;
      snap_retire(old); /* clusters only it named go when no call uses them */
      snap_unref(old);
    }
  }
  if (!err[0] && x->snap)
    deliver_clusters(x);
  if (lds)
    grit_xds_resource_unref(lds);
  if (rds)
    grit_xds_resource_unref(rds);
}

static void xr_kick(void *state) {
  xres *x = state;
  /* Resolve the chain until it stops changing (each step may watch the
   * next resource, whose cached value arrives at once). */
  for (int round = 0; round < 4; round++) {
    pthread_mutex_lock(&x->mu);
    uint64_t gen = x->gen;
    pthread_mutex_unlock(&x->mu);
    deliver(x);
    pthread_mutex_lock(&x->mu);
    bool same = gen == x->gen;
    pthread_mutex_unlock(&x->mu);
    if (same)
      break;
  }
}

static void xr_stop(void *state) {
  xres *x = state;
  for (xcl *cl = x->clusters; cl; cl = cl->next)
    cl_unwatch(cl);
  (void)rewatch(x, XDS_ROUTE_CONFIG, NULL);
  (void)rewatch(x, XDS_LISTENER, NULL);
  x->stopped = true;
  grit_xdsc_release(x->c);
  x->c = NULL;
  xsnap *s = x->snap;
  x->snap = NULL;
  snap_retire(s);
  snap_unref(s); /* calls still running keep theirs */
  x_unref(x);
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
  x->refs = 1;
  x->name = grit_strdup(p);
  x->ch = ch;
  grit_rng_seed_os(&x->rng);
  x->channel_id = grit_rng_next(&x->rng);
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
    else
      x_unref(x);
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
    .select = xr_select,
    .release = xr_release,
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
