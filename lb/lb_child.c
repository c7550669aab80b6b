/* The children of the tree policies (issue 27; SPEC XD-03): a named child
 * holding one policy, the state it last published, and the copy of a
 * node configuration the priority policy keeps for children it starts
 * later. */
#include "lb/lb_int.h"

#include <string.h>

const grit_lb_policy_vtable *grit_lb_node_vt(const grit_lb_node *n) {
  if (n->od)
    return &grit_lb_outlier_detection; /* over the rest of the node */
  switch (n->kind) {
  case GRIT_LB_NODE_LEAF:
    return n->policy;
  case GRIT_LB_NODE_WEIGHTED_TARGET:
    return &grit_lb_weighted_target;
  case GRIT_LB_NODE_PRIORITY:
    return &grit_lb_priority;
  case GRIT_LB_NODE_CLUSTER_IMPL:
    return &grit_lb_xds_cluster_impl;
  }
  return NULL;
}

static void kid_update_state(void *ctx, grit_connectivity_state s) {
  grit_lb_kid *k = ctx;
  k->state = s;
  k->on_state(k);
}

static void kid_reresolve(void *ctx) {
  grit_lb_kid *k = ctx;
  k->up->request_reresolution(k->up->ctx);
}

grit_lb_kid *grit_lb_kid_new(const char *name, const grit_lb_helper *up,
                             void (*on_state)(grit_lb_kid *k), void *parent) {
  grit_lb_kid *k = grit_calloc(1, sizeof(*k));
  if (!k)
    return NULL;
  k->name = grit_strdup(name ? name : "");
  if (!k->name) {
    grit_free(k);
    return NULL;
  }
  /* A27/A56: a child is CONNECTING until it says otherwise. */
  k->state = GRIT_STATE_CONNECTING;
  k->h = (grit_lb_helper){kid_update_state, kid_reresolve, k};
  k->up = up;
  k->on_state = on_state;
  k->parent = parent;
  return k;
}

grit_err grit_lb_kid_update(grit_lb_kid *k, const grit_subchannel_args *a,
                            const grit_lb_node *n) {
  const grit_lb_policy_vtable *vt = grit_lb_node_vt(n);
  if (!vt)
    return GRIT_ERR_INVALID_ARG;
  if (k->p && k->p->vt != vt) {
    k->p->vt->destroy(k->p);
    k->p = NULL;
    k->state = GRIT_STATE_CONNECTING;
  }
  bool fresh = !k->p;
  if (fresh) {
    grit_err rv = vt->create(a, &k->h, &k->p);
    if (rv != GRIT_OK) {
      k->p = NULL;
      return rv;
    }
  }
  grit_err rv = GRIT_OK;
  if (n->kind == GRIT_LB_NODE_LEAF && !n->od) {
    grit_lb_params dflt;
    const grit_lb_params *lp = n->params;
    if (!lp) {
      grit_lb_params_default(&dflt);
      lp = &dflt;
    }
    if (k->p->vt->configure)
      rv = k->p->vt->configure(k->p, lp);
    if (rv == GRIT_OK)
      rv = k->p->vt->update_addresses(k->p, n->addrs, n->naddrs, n->shuffle);
  } else {
    rv = k->p->vt->update_node(k->p, n);
  }
  /* A child that was started before a replacement is started again. */
  if (rv == GRIT_OK && fresh && k->started)
    k->p->vt->exit_idle(k->p);
  return rv;
}

void grit_lb_kid_free(grit_lb_kid *k) {
  if (!k)
    return;
  if (k->p)
    k->p->vt->destroy(k->p);
  grit_free(k->name);
  grit_free(k);
}

static size_t count_addrs(const grit_lb_node *n) {
  size_t c = n->naddrs;
  for (size_t i = 0; i < n->nchildren; i++)
    c += count_addrs(n->children[i].node);
  return c;
}

static void fill_addrs(const grit_lb_node *n, grit_addr *out, size_t *k) {
  for (size_t i = 0; i < n->naddrs; i++)
    out[(*k)++] = n->addrs[i];
  for (size_t i = 0; i < n->nchildren; i++)
    fill_addrs(n->children[i].node, out, k);
}

grit_err grit_lb_node_addrs(const grit_lb_node *n, grit_addr **out,
                            size_t *count) {
  size_t c = count_addrs(n);
  *out = grit_calloc(c ? c : 1, sizeof(**out));
  *count = 0;
  if (!*out)
    return GRIT_ERR_NOMEM;
  fill_addrs(n, *out, count);
  return GRIT_OK;
}

/* ---- deep copies of node configurations ---- */

static char *dup_or_null(const char *s, bool *ok) {
  if (!s)
    return NULL;
  char *d = grit_strdup(s);
  if (!d)
    *ok = false;
  return d;
}

void grit_lb_node_free(grit_lb_node *n) {
  if (!n)
    return;
  if (n->params) {
    grit_free((char *)n->params->request_hash_header);
    grit_free((grit_lb_params *)n->params);
  }
  grit_free((grit_od_params *)n->od);
  grit_free((grit_addr *)n->addrs);
  for (size_t i = 0; n->children && i < n->nchildren; i++) {
    grit_free((char *)n->children[i].name);
    grit_lb_node_free((grit_lb_node *)n->children[i].node);
  }
  grit_free((grit_lb_child_cfg *)n->children);
  grit_free((char *)n->cluster);
  for (size_t i = 0; n->drops && i < n->ndrops; i++)
    grit_free((char *)n->drops[i].category);
  grit_free((grit_lb_drop *)n->drops);
  grit_free((grit_lb_clock *)n->clock);
  grit_free(n);
}

grit_lb_node *grit_lb_node_dup(const grit_lb_node *n) {
  grit_lb_node *d = grit_calloc(1, sizeof(*d));
  if (!d)
    return NULL;
  *d = *n;
  d->params = NULL;
  d->od = NULL;
  d->addrs = NULL;
  d->children = NULL;
  d->cluster = NULL;
  d->drops = NULL;
  d->clock = NULL;
  d->nchildren = 0;
  d->ndrops = 0;
  bool ok = true;
  if (n->params) {
    grit_lb_params *p = grit_malloc(sizeof(*p));
    if (p) {
      *p = *n->params;
      p->request_hash_header = dup_or_null(n->params->request_hash_header, &ok);
    }
    d->params = p;
    ok = ok && p;
  }
  if (n->od) {
    grit_od_params *o = grit_malloc(sizeof(*o));
    if (o)
      *o = *n->od;
    d->od = o;
    ok = ok && o;
  }
  if (n->clock) {
    grit_lb_clock *c = grit_malloc(sizeof(*c));
    if (c)
      *c = *n->clock;
    d->clock = c;
    ok = ok && c;
  }
  if (n->naddrs) {
    grit_addr *a = grit_calloc(n->naddrs, sizeof(*a));
    if (a)
      memcpy(a, n->addrs, n->naddrs * sizeof(*a));
    d->addrs = a;
    ok = ok && a;
  }
  d->cluster = dup_or_null(n->cluster, &ok);
  if (n->ndrops) {
    grit_lb_drop *dr = grit_calloc(n->ndrops, sizeof(*dr));
    d->drops = dr;
    if (dr) {
      d->ndrops = n->ndrops;
      for (size_t i = 0; i < n->ndrops; i++) {
        dr[i].per_million = n->drops[i].per_million;
        dr[i].category = dup_or_null(n->drops[i].category, &ok);
      }
    }
    ok = ok && dr;
  }
  if (n->nchildren) {
    grit_lb_child_cfg *c = grit_calloc(n->nchildren, sizeof(*c));
    d->children = c;
    if (c) {
      d->nchildren = n->nchildren;
      for (size_t i = 0; i < n->nchildren; i++) {
        c[i].weight = n->children[i].weight;
        c[i].name = dup_or_null(n->children[i].name, &ok);
        c[i].node = grit_lb_node_dup(n->children[i].node);
        ok = ok && c[i].node;
      }
    }
    ok = ok && c;
  }
  if (!ok) {
    grit_lb_node_free(d);
    return NULL;
  }
  return d;
}

static bool kid_wants_reports(const grit_lb_policy *c) {
  return c->vt->wants_load_reports && c->vt->wants_load_reports(c);
}

void grit_lb_kids_call_result(grit_lb_kid *const *kids, size_t n,
                              const grit_addr *peer, bool ok,
                              const grit_orca_report *report) {
  for (size_t i = 0; i < n; i++) {
    grit_lb_policy *c = kids[i]->p;
    if (c && c->vt->on_call_result)
      c->vt->on_call_result(c, peer, ok, kid_wants_reports(c) ? report : NULL);
  }
}

bool grit_lb_kids_want_load_reports(grit_lb_kid *const *kids, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (kids[i]->p && kid_wants_reports(kids[i]->p))
      return true;
  return false;
}

grit_err grit_lb_node_update_addresses(grit_lb_policy *p,
                                       const grit_addr *addrs, size_t n,
                                       bool shuffle) {
  (void)p;
  (void)addrs;
  (void)n;
  (void)shuffle;
  return GRIT_OK; /* the node carries the addresses */
}
