/* A cluster's LB policy tree from its Cluster and ClusterLoadAssignment
 * (issue 27; SPEC XD-03; gRFCs A27, A32, A42, A50, A52, A56, A58):
 *
 *   xds_cluster_impl (drop_overloads, circuit_breakers max_requests)
 *     priority (one child per EDS priority, failover after 10 s)
 *       [outlier_detection, when the cluster has it, over]
 *       weighted_target (one child per locality, the locality's weight)
 *         the cluster's policy over the locality's HEALTHY and UNKNOWN
 *         endpoints (round_robin, least_request, weighted_round_robin,
 *         pick_first)
 *       or, for RING_HASH (A42) and a load_balancing_policy not inside
 *       WrrLocality (A52), that policy over the priority's endpoints.
 *
 * Localities of weight 0 and localities without a usable endpoint are left
 * out; a priority left without localities fails over at once. */
#include <stdio.h>
#include <string.h>

#include "lb/lb.h"
#include "xdsclient/xdsclient.h"

#define NAME_LEN 200

struct grit_xds_lb_tree {
  grit_lb_node root;
  grit_lb_node prio;
  grit_lb_child_cfg root_child;
  grit_lb_node *nodes;     /* one per priority and one per locality */
  grit_lb_child_cfg *cfgs; /* as |nodes| */
  char (*names)[NAME_LEN]; /* as |nodes| */
  grit_addr *addrs;        /* every usable endpoint */
  grit_addr **rings;       /* ring_hash leaves' weighted lists */
  size_t nrings;
  grit_lb_drop *drops;
  grit_lb_params params;
  grit_od_params od;
  bool shuffle;
  size_t naddrs;
  char json[400]; /* the endpoint-picking policy as a service config */
};

static uint64_t ns_ms(int64_t ns, uint64_t dflt) {
  return ns > 0 ? (uint64_t)((ns + 999999) / 1000000) : dflt;
}

/* The cluster's lb_policy / load_balancing_policy onto lb/ (A42, A52,
 * A58). */
static const grit_lb_policy_vtable *leaf_policy(const xds_lb_policy *lb,
                                                grit_lb_params *p) {
  grit_lb_params_default(p);
  switch (lb->kind) {
  case XDS_LB_ROUND_ROBIN:
    return &grit_lb_round_robin;
  case XDS_LB_LEAST_REQUEST:
    p->choice_count = lb->choice_count;
    return &grit_lb_least_request;
  case XDS_LB_RING_HASH:
    /* grit caps both sizes at 4096 as grpc does (docs/lb.md). */
    p->min_ring_size = lb->min_ring;
    p->max_ring_size = lb->max_ring;
    return &grit_lb_ring_hash;
  case XDS_LB_WRR:
    p->wrr.enable_oob = lb->enable_oob;
    p->wrr.oob_period_ms = ns_ms(lb->oob_period_ns, p->wrr.oob_period_ms);
    p->wrr.blackout_ms = ns_ms(lb->blackout_ns, p->wrr.blackout_ms);
    p->wrr.expiration_ms = ns_ms(lb->expiration_ns, p->wrr.expiration_ms);
    p->wrr.update_ms = ns_ms(lb->update_ns, p->wrr.update_ms);
    if (lb->error_penalty >= 0)
      p->wrr.error_penalty = lb->error_penalty;
    return &grit_lb_weighted_round_robin;
  case XDS_LB_PICK_FIRST:
    return &grit_lb_pick_first;
  }
  return &grit_lb_round_robin;
}

static void od_from(const xds_outlier *o, grit_od_params *p) {
  *p = (grit_od_params){
      .interval_ms = ns_ms(o->interval_ns, 10000),
      .base_ejection_time_ms = ns_ms(o->base_ejection_ns, 30000),
      .max_ejection_time_ms = ns_ms(o->max_ejection_ns, 300000),
      .max_ejection_percent = o->max_ejection_percent,
      .success_rate = o->success_rate,
      .sr_stdev_factor = o->sr_stdev_factor,
      .sr_enforcement_percentage = o->sr_enforcement,
      .sr_minimum_hosts = o->sr_min_hosts,
      .sr_request_volume = o->sr_request_volume,
      .failure_percentage = o->failure_percentage,
      .fp_threshold = o->fp_threshold,
      .fp_enforcement_percentage = o->fp_enforcement,
      .fp_minimum_hosts = o->fp_min_hosts,
      .fp_request_volume = o->fp_request_volume,
  };
}

static bool usable(const xds_endpoint *ep) {
  return ep->health == XDS_HEALTH_HEALTHY || ep->health == XDS_HEALTH_UNKNOWN;
}

void grit_xds_lb_tree_free(grit_xds_lb_tree *t) {
  if (!t)
    return;
  grit_free(t->nodes);
  grit_free(t->cfgs);
  grit_free(t->names);
  grit_free(t->addrs);
  for (size_t i = 0; i < t->nrings; i++)
    grit_free(t->rings[i]);
  grit_free(t->rings);
  grit_free(t->drops);
  grit_free(t);
}

const char *grit_xds_lb_tree_config_json(const grit_xds_lb_tree *t) {
  return t->json;
}

/* The leaf policy as loadBalancingConfig, for what observers of the
 * channel's service config see (the tree itself is not JSON). */
static void leaf_json(const xds_lb_policy *lb, const grit_lb_params *p,
                      char *buf, size_t n) {
  switch (lb->kind) {
  case XDS_LB_LEAST_REQUEST:
    snprintf(buf, n,
             "{\"loadBalancingConfig\":[{\"least_request_experimental\":"
             "{\"choiceCount\":%u}}]}",
             p->choice_count);
    return;
  case XDS_LB_RING_HASH:
    snprintf(buf, n,
             "{\"loadBalancingConfig\":[{\"ring_hash_experimental\":"
             "{\"minRingSize\":%llu,\"maxRingSize\":%llu}}]}",
             (unsigned long long)p->min_ring_size,
             (unsigned long long)p->max_ring_size);
    return;
  case XDS_LB_WRR:
    snprintf(buf, n,
             "{\"loadBalancingConfig\":[{\"weighted_round_robin\":{"
             "\"enableOobLoadReport\":%s,\"oobReportingPeriod\":\"%.3fs\","
             "\"blackoutPeriod\":\"%.3fs\",\"weightExpirationPeriod\":"
             "\"%.3fs\",\"weightUpdatePeriod\":\"%.3fs\","
             "\"errorUtilizationPenalty\":%g}}]}",
             p->wrr.enable_oob ? "true" : "false",
             (double)p->wrr.oob_period_ms / 1000.0,
             (double)p->wrr.blackout_ms / 1000.0,
             (double)p->wrr.expiration_ms / 1000.0,
             (double)p->wrr.update_ms / 1000.0, p->wrr.error_penalty);
    return;
  case XDS_LB_PICK_FIRST:
    snprintf(buf, n,
             "{\"loadBalancingConfig\":[{\"pick_first\":"
             "{\"shuffleAddressList\":%s}}]}",
             lb->shuffle ? "true" : "false");
    return;
  case XDS_LB_ROUND_ROBIN:
    break;
  }
  snprintf(buf, n, "{\"loadBalancingConfig\":[{\"round_robin\":{}}]}");
}

const grit_lb_node *grit_xds_lb_tree_root(const grit_xds_lb_tree *t) {
  return &t->root;
}

size_t grit_xds_lb_tree_addresses(const grit_xds_lb_tree *t) {
  return t->naddrs;
}

/* A leaf over the usable endpoints of |e|'s localities of priority |prio|
 * (all of them when |loc| is SIZE_MAX, else locality |loc| only). */
static void leaf_over(grit_xds_lb_tree *t, grit_lb_node *leaf,
                      const grit_lb_policy_vtable *vt, bool od,
                      const xds_endpoints *e, uint32_t prio, size_t loc) {
  size_t first = t->naddrs;
  for (size_t i = 0; i < e->nlocalities; i++) {
    const xds_locality *l = &e->localities[i];
    if (l->priority != prio || l->weight == 0 || (loc != SIZE_MAX && i != loc))
      continue;
    for (size_t j = 0; j < l->nendpoints; j++) {
      const xds_endpoint *ep = &l->endpoints[j];
      if (usable(ep) && grit_addr_from_ip(&t->addrs[t->naddrs], ep->host,
                                          ep->port) == GRIT_OK)
        t->naddrs++;
    }
  }
  *leaf = (grit_lb_node){
      .kind = GRIT_LB_NODE_LEAF,
      .policy = vt,
      .shuffle = t->shuffle,
      .params = &t->params,
      .od = od ? &t->od : NULL,
      .addrs = &t->addrs[first],
      .naddrs = t->naddrs - first,
  };
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* A42: ring_hash weighs each endpoint by its locality's weight times its
 * own; lb/ring_hash.c weighs an address listed k times as k. The weights
 * divided by their greatest common divisor give each address's count;
 * when those add up to more than 4 per endpoint (+256), they are scaled
 * down (at least 1 each). Fills |leaf|'s list; GRIT_ERR_NOMEM. */
static grit_err ring_leaf(grit_xds_lb_tree *t, grit_lb_node *leaf,
                          const xds_endpoints *e, uint32_t prio) {
  uint64_t g = 0, sum = 0;
  size_t n = 0;
  for (size_t i = 0; i < e->nlocalities; i++) {
    const xds_locality *l = &e->localities[i];
    if (l->priority != prio || l->weight == 0)
      continue;
    for (size_t j = 0; j < l->nendpoints; j++) {
      if (!usable(&l->endpoints[j]))
        continue;
      uint64_t w = (uint64_t)l->weight * l->endpoints[j].weight;
      g = gcd64(g, w);
      sum += w;
      n++;
    }
  }
  uint64_t cap = 4 * (uint64_t)n + 256;
  bool scale = g && sum / g > cap;
  uint64_t total = 0;
  for (int pass = 0; pass < 2; pass++) {
    grit_addr *out = NULL;
    if (pass == 1) {
      grit_addr **rings =
          grit_realloc(t->rings, (t->nrings + 1) * sizeof(*rings));
      if (!rings)
        return GRIT_ERR_NOMEM;
      t->rings = rings;
      out = total ? grit_calloc((size_t)total, sizeof(*out)) : NULL;
      if (total && !out)
        return GRIT_ERR_NOMEM;
      t->rings[t->nrings++] = out;
    }
    size_t k = 0;
    for (size_t i = 0; i < e->nlocalities; i++) {
      const xds_locality *l = &e->localities[i];
      if (l->priority != prio || l->weight == 0)
        continue;
      for (size_t j = 0; j < l->nendpoints; j++) {
        const xds_endpoint *ep = &l->endpoints[j];
        grit_addr a;
        if (!usable(ep) || grit_addr_from_ip(&a, ep->host, ep->port) != GRIT_OK)
          continue;
        uint64_t w = (uint64_t)l->weight * ep->weight;
        uint64_t reps =
            scale ? (uint64_t)((double)w * (double)cap / (double)sum) : w / g;
        if (reps == 0)
          reps = 1;
        if (pass == 0) {
          total += reps;
          continue;
        }
        for (uint64_t r = 0; r < reps && k < total; r++)
          out[k++] = a;
        t->naddrs++; /* distinct usable endpoints */
      }
    }
    if (pass == 1)
      *leaf = (grit_lb_node){.kind = GRIT_LB_NODE_LEAF,
                             .policy = &grit_lb_ring_hash,
                             .params = &t->params,
                             .addrs = out,
                             .naddrs = k};
  }
  return GRIT_OK;
}

grit_err grit_xds_lb_tree_build(const char *cluster_name, const xds_cluster *cl,
                                const xds_endpoints *e,
                                grit_xds_lb_tree **out) {
  *out = NULL;
  grit_xds_lb_tree *t = grit_calloc(1, sizeof(*t));
  if (!t)
    return GRIT_ERR_NOMEM;
  size_t total = 0;
  for (size_t i = 0; i < e->nlocalities; i++)
    total += e->localities[i].nendpoints;
  /* Per priority: its node, and per locality a leaf (and one leaf per
   * priority for ring_hash). */
  size_t slots = (size_t)e->npriorities + e->nlocalities + 1;
  t->nodes = grit_calloc(slots, sizeof(*t->nodes));
  t->cfgs = grit_calloc(slots, sizeof(*t->cfgs));
  t->names = grit_calloc(slots, sizeof(*t->names));
  t->addrs = total ? grit_calloc(total, sizeof(*t->addrs)) : NULL;
  t->drops = e->ndrops ? grit_calloc(e->ndrops, sizeof(*t->drops)) : NULL;
  if (!t->nodes || !t->cfgs || !t->names || (total && !t->addrs) ||
      (e->ndrops && !t->drops)) {
    grit_xds_lb_tree_free(t);
    return GRIT_ERR_NOMEM;
  }
  const grit_lb_policy_vtable *vt = leaf_policy(&cl->lb, &t->params);
  leaf_json(&cl->lb, &t->params, t->json, sizeof(t->json));
  if (cl->has_outlier)
    od_from(&cl->outlier, &t->od);
  t->shuffle = cl->lb.kind == XDS_LB_PICK_FIRST && cl->lb.shuffle;
  /* A42, A52: ring_hash, and a typed policy outside WrrLocality, span each
   * priority's endpoints; the others go per locality. */
  bool ring = cl->lb.kind == XDS_LB_RING_HASH || cl->lb.per_priority;
  /* Priority p's entry is cfgs[p] / nodes[p]; the localities' leaves
   * follow, each priority's contiguous. */
  size_t np = e->npriorities;
  size_t used = np;
  for (uint32_t p = 0; p < np; p++) {
    grit_lb_node *pn = &t->nodes[p];
    snprintf(t->names[p], NAME_LEN, "priority-%u", p);
    t->cfgs[p] =
        (grit_lb_child_cfg){.name = t->names[p], .weight = 1, .node = pn};
    size_t usable_here = 0;
    for (size_t i = 0; i < e->nlocalities; i++)
      for (size_t j = 0;
           e->localities[i].priority == p && e->localities[i].weight &&
           j < e->localities[i].nendpoints;
           j++)
        usable_here += usable(&e->localities[i].endpoints[j]);
    if (ring && usable_here == 0) {
      /* Nothing to pick from: a weighted_target without targets fails at
       * once, so the next priority starts without the timer. */
      *pn = (grit_lb_node){.kind = GRIT_LB_NODE_WEIGHTED_TARGET};
      continue;
    }
    if (ring) { /* one leaf over the priority's localities */
      if (cl->lb.kind == XDS_LB_RING_HASH) {
        if (ring_leaf(t, pn, e, p) != GRIT_OK) {
          grit_xds_lb_tree_free(t);
          return GRIT_ERR_NOMEM;
        }
        pn->od = cl->has_outlier ? &t->od : NULL;
      } else {
        leaf_over(t, pn, vt, cl->has_outlier, e, p, SIZE_MAX);
      }
      continue;
    }
    size_t first = used;
    for (size_t i = 0; i < e->nlocalities; i++) {
      const xds_locality *l = &e->localities[i];
      if (l->priority != p || l->weight == 0)
        continue;
      size_t before = t->naddrs;
      grit_lb_node *leaf = &t->nodes[used];
      leaf_over(t, leaf, vt, false, e, p, i);
      if (t->naddrs == before)
        continue; /* nothing usable: left out */
      snprintf(t->names[used], NAME_LEN, "{region=%s, zone=%s, sub_zone=%s}",
               l->region ? l->region : "", l->zone ? l->zone : "",
               l->sub_zone ? l->sub_zone : "");
      t->cfgs[used] = (grit_lb_child_cfg){
          .name = t->names[used], .weight = l->weight, .node = leaf};
      used++;
    }
    /* A50 over the priority's localities, as grpc-core puts
     * outlier_detection above wrr_locality. */
    *pn = (grit_lb_node){.kind = GRIT_LB_NODE_WEIGHTED_TARGET,
                         .od = cl->has_outlier ? &t->od : NULL,
                         .children = &t->cfgs[first],
                         .nchildren = used - first};
  }
  for (size_t i = 0; i < e->ndrops; i++)
    t->drops[i] = (grit_lb_drop){.category = e->drops[i].category,
                                 .per_million = e->drops[i].per_million};
  t->prio = (grit_lb_node){
      .kind = GRIT_LB_NODE_PRIORITY, .children = t->cfgs, .nchildren = np};
  t->root_child =
      (grit_lb_child_cfg){.name = "priority", .weight = 1, .node = &t->prio};
  t->root = (grit_lb_node){.kind = GRIT_LB_NODE_CLUSTER_IMPL,
                           .children = &t->root_child,
                           .nchildren = 1,
                           .cluster = cluster_name,
                           .drops = t->drops,
                           .ndrops = e->ndrops,
                           .max_requests = cl->max_requests};
  *out = t;
  return GRIT_OK;
}

/* LOGICAL_DNS (A27): one priority, pick_first over the resolved
 * addresses, under the cluster's circuit breaker. */
grit_err grit_xds_lb_tree_build_dns(const char *cluster_name,
                                    const xds_cluster *cl,
                                    const grit_addr *addrs, size_t n,
                                    grit_xds_lb_tree **out) {
  *out = NULL;
  grit_xds_lb_tree *t = grit_calloc(1, sizeof(*t));
  if (!t)
    return GRIT_ERR_NOMEM;
  t->nodes = grit_calloc(1, sizeof(*t->nodes));
  t->cfgs = grit_calloc(1, sizeof(*t->cfgs));
  t->names = grit_calloc(1, sizeof(*t->names));
  t->addrs = n ? grit_calloc(n, sizeof(*t->addrs)) : NULL;
  if (!t->nodes || !t->cfgs || !t->names || (n && !t->addrs)) {
    grit_xds_lb_tree_free(t);
    return GRIT_ERR_NOMEM;
  }
  if (n)
    memcpy(t->addrs, addrs, n * sizeof(*addrs));
  t->naddrs = n;
  grit_lb_params_default(&t->params);
  snprintf(t->json, sizeof(t->json),
           "{\"loadBalancingConfig\":[{\"pick_first\":{}}]}");
  t->nodes[0] = (grit_lb_node){.kind = GRIT_LB_NODE_LEAF,
                               .policy = &grit_lb_pick_first,
                               .params = &t->params,
                               .addrs = t->addrs,
                               .naddrs = n};
  snprintf(t->names[0], NAME_LEN, "priority-0");
  t->cfgs[0] =
      (grit_lb_child_cfg){.name = t->names[0], .weight = 1, .node = t->nodes};
  t->prio = (grit_lb_node){
      .kind = GRIT_LB_NODE_PRIORITY, .children = t->cfgs, .nchildren = 1};
  t->root_child =
      (grit_lb_child_cfg){.name = "priority", .weight = 1, .node = &t->prio};
  t->root = (grit_lb_node){.kind = GRIT_LB_NODE_CLUSTER_IMPL,
                           .children = &t->root_child,
                           .nchildren = 1,
                           .cluster = cluster_name,
                           .max_requests = cl->max_requests};
  *out = t;
  return GRIT_OK;
}
