/* outlier_detection_experimental (SPEC OD-01; gRFC A50): a policy that
 * wraps a child (round_robin or pick_first), counts each call's final
 * status per address, and every interval runs the ejection algorithm
 * (lb/od_algo.c). The child's subchannels register in this policy's group,
 * so an ejected address's subchannels show TRANSIENT_FAILURE to the child
 * and are not picked; their connections stay up. Picks, state and
 * re-resolution go straight through to and from the child. */
#include "lb/lb_int.h"
#include "observe/observe.h"

#include <string.h>

typedef struct od_policy {
  grit_lb_policy base;
  grit_subchannel_args a; /* with |group| set, for the child */
  grit_lb_helper h;
  grit_sc_group group;
  const grit_lb_policy_vtable *child_vt;
  grit_lb_policy *child;
  grit_od_params params;
  grit_addr *addrs; /* the last update's list */
  grit_od_addr *st; /* counters and ejection, parallel to |addrs| */
  size_t n;
  bool shuffle;
  bool exited_idle;
  uv_timer_t *timer; /* freed in its close callback */
} od_policy;

static size_t od_find(const od_policy *od, const char *text) {
  for (size_t i = 0; i < od->n; i++) {
    if (strcmp(od->addrs[i].text, text) == 0)
      return i;
  }
  return od->n;
}

static bool od_is_ejected(grit_sc_group *g, const grit_addr *addr) {
  od_policy *od = GRIT_CONTAINER_OF(g, od_policy, group);
  size_t i = od_find(od, addr->text);
  return i < od->n && od->st[i].ejected;
}

/* Tell every subchannel of address |i| whether it is ejected. The child
 * may react by destroying or replacing subchannels (pick_first), which
 * changes the list: start over after each change until none is left. */
static void od_apply(od_policy *od, size_t i) {
  bool want = od->st[i].ejected;
  bool again = true;
  while (again) {
    again = false;
    grit_list *it;
    GRIT_LIST_FOREACH(it, &od->group.scs) {
      grit_subchannel *sc = grit_lb_group_sc(it);
      if (grit_subchannel_ejected(sc) != want &&
          strcmp(grit_subchannel_addr(sc)->text, od->addrs[i].text) == 0) {
        grit_subchannel_set_ejected(sc, want);
        again = true;
        break;
      }
    }
  }
}

static bool od_enabled(const od_policy *od) {
  return od->params.success_rate || od->params.failure_percentage;
}

static void od_timer_fire(uv_timer_t *t) {
  od_policy *od = t->data;
  uint64_t now = uv_now(od->a.loop);
  grit_od_run(&od->params, od->st, od->n, now, od->a.rng);
  for (size_t i = 0; i < od->n; i++) {
    grit_od_addr *e = &od->st[i];
    if (!e->changed)
      continue;
    if (e->ejected) {
      GRIT_TRACE(
          GRIT_TRACE_LB, GRIT_LEVEL_INFO,
          "outlier detection: eject %s (%llu ok, %llu failed in the "
          "last interval; ejection %u in a row, for %llu ms)",
          od->addrs[i].text, (unsigned long long)e->last_successes,
          (unsigned long long)e->last_failures, e->multiplier,
          (unsigned long long)grit_od_ejection_ms(&od->params, e->multiplier));
      if (od->a.shared) {
        __atomic_fetch_add(&od->a.shared->ejections, 1, __ATOMIC_RELAXED);
        grit_obs_target_add(od->a.shared->obs, GRIT_OBS_LB_EJECTIONS, 1);
      }
    } else {
      GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
                 "outlier detection: un-eject %s", od->addrs[i].text);
      if (od->a.shared) {
        __atomic_fetch_add(&od->a.shared->unejections, 1, __ATOMIC_RELAXED);
        grit_obs_target_add(od->a.shared->obs, GRIT_OBS_LB_UNEJECTIONS, 1);
      }
    }
    od_apply(od, i);
  }
}

static void od_timer_arm(od_policy *od) {
  uv_timer_stop(od->timer);
  if (od_enabled(od) && od->params.interval_ms > 0)
    uv_timer_start(od->timer, od_timer_fire, od->params.interval_ms,
                   od->params.interval_ms);
}

static grit_err od_create(const grit_subchannel_args *a,
                          const grit_lb_helper *h, grit_lb_policy **out) {
  od_policy *od = grit_calloc(1, sizeof(*od));
  uv_timer_t *t = grit_calloc(1, sizeof(*t));
  *out = NULL;
  if (!od || !t) {
    grit_free(od);
    grit_free(t);
    return GRIT_ERR_NOMEM;
  }
  od->base.vt = &grit_lb_outlier_detection;
  od->a = *a;
  od->a.group = &od->group;
  od->h = *h;
  grit_list_init(&od->group.scs);
  od->group.is_ejected = od_is_ejected;
  od->timer = t;
  uv_timer_init(a->loop, t);
  t->data = od;
  grit_err rv = grit_lb_round_robin.create(&od->a, &od->h, &od->child);
  if (rv != GRIT_OK) {
    od->child = NULL;
    grit_lb_outlier_detection.destroy(&od->base);
    return rv;
  }
  od->child_vt = &grit_lb_round_robin;
  *out = &od->base;
  return GRIT_OK;
}

/* The ejection rule changed (or none is left). */
static void od_set_params(od_policy *od, const grit_od_params *params) {
  bool rearm = params->interval_ms != od->params.interval_ms || !od_enabled(od);
  od->params = *params;
  if (!od_enabled(od)) {
    /* A50: no ejection rule: un-eject everything, count nothing. */
    uv_timer_stop(od->timer);
    for (size_t i = 0; i < od->n; i++) {
      od->st[i].successes = od->st[i].failures = 0;
      if (od->st[i].ejected) {
        od->st[i].ejected = false;
        od_apply(od, i);
      }
    }
  } else if (rearm) {
    od_timer_arm(od);
  }
}

grit_err grit_lb_od_configure(grit_lb_policy *p,
                              const grit_lb_policy_vtable *child,
                              const grit_od_params *params) {
  return grit_lb_od_configure_child(p, child, params, NULL);
}

grit_err grit_lb_od_configure_child(grit_lb_policy *p,
                                    const grit_lb_policy_vtable *child,
                                    const grit_od_params *params,
                                    const grit_lb_params *child_params) {
  od_policy *od = (od_policy *)p;
  grit_lb_params defaults;
  if (!child_params) {
    grit_lb_params_default(&defaults);
    child_params = &defaults;
  }
  if (child == od->child_vt && child->configure) {
    grit_err rv = child->configure(od->child, child_params);
    if (rv != GRIT_OK)
      return rv;
  }
  if (child != od->child_vt) {
    grit_lb_policy *fresh;
    grit_err rv = child->create(&od->a, &od->h, &fresh);
    if (rv != GRIT_OK)
      return rv;
    if (child->configure)
      rv = child->configure(fresh, child_params);
    if (rv == GRIT_OK && od->n)
      rv = fresh->vt->update_addresses(fresh, od->addrs, od->n, od->shuffle);
    if (rv != GRIT_OK) {
      fresh->vt->destroy(fresh);
      return rv;
    }
    od->child->vt->destroy(od->child);
    od->child = fresh;
    od->child_vt = child;
    if (od->exited_idle)
      fresh->vt->exit_idle(fresh);
  }
  od_set_params(od, params);
  return GRIT_OK;
}

/* A50: entries of addresses still listed keep their counters and
 * ejection; new ones start clean. */
static grit_err od_track(od_policy *od, const grit_addr *addrs, size_t n) {
  grit_od_addr *st = grit_calloc(n ? n : 1, sizeof(*st));
  grit_addr *copy = grit_memdup(addrs, (n ? n : 1) * sizeof(*addrs));
  if (!st || !copy) {
    grit_free(st);
    grit_free(copy);
    return GRIT_ERR_NOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    size_t old = od_find(od, addrs[i].text);
    if (old < od->n)
      st[i] = od->st[old];
  }
  grit_free(od->st);
  grit_free(od->addrs);
  od->st = st;
  od->addrs = copy;
  od->n = n;
  return GRIT_OK;
}

static grit_err od_update(grit_lb_policy *p, const grit_addr *addrs, size_t n,
                          bool shuffle) {
  od_policy *od = (od_policy *)p;
  grit_err rv = od_track(od, addrs, n);
  if (rv != GRIT_OK)
    return rv;
  od->shuffle = shuffle;
  return od->child->vt->update_addresses(od->child, addrs, n, shuffle);
}

/* Issue 27: an xDS cluster's node with outlier detection over a leaf or
 * over a whole priority's localities (A50 over wrr_locality, as
 * grpc-core): the child is the node without |od|; the addresses counted
 * are every address under it. */
static grit_err od_update_node(grit_lb_policy *p, const grit_lb_node *n) {
  od_policy *od = (od_policy *)p;
  grit_lb_node inner = *n;
  inner.od = NULL;
  if (inner.kind == GRIT_LB_NODE_LEAF) {
    grit_err rv =
        grit_lb_od_configure_child(p, inner.policy, n->od, inner.params);
    return rv == GRIT_OK
               ? od_update(p, inner.addrs, inner.naddrs, inner.shuffle)
               : rv;
  }
  grit_addr *addrs = NULL;
  size_t na = 0;
  grit_err rv = grit_lb_node_addrs(&inner, &addrs, &na);
  if (rv == GRIT_OK)
    rv = od_track(od, addrs, na);
  grit_free(addrs);
  if (rv != GRIT_OK)
    return rv;
  const grit_lb_policy_vtable *vt = grit_lb_node_vt(&inner);
  bool fresh = vt != od->child_vt;
  if (fresh) {
    grit_lb_policy *c;
    rv = vt->create(&od->a, &od->h, &c);
    if (rv != GRIT_OK)
      return rv;
    od->child->vt->destroy(od->child);
    od->child = c;
    od->child_vt = vt;
  }
  od_set_params(od, n->od);
  rv = od->child->vt->update_node(od->child, &inner);
  if (fresh && od->exited_idle)
    od->child->vt->exit_idle(od->child);
  return rv;
}

static void od_exit_idle(grit_lb_policy *p) {
  od_policy *od = (od_policy *)p;
  od->exited_idle = true;
  od->child->vt->exit_idle(od->child);
}

static grit_pick_result od_pick(grit_lb_policy *p, const grit_pick_args *args) {
  od_policy *od = (od_policy *)p;
  return od->child->vt->pick(od->child, args);
}

/* Counted here (A50), then handed to the child: weighted_round_robin
 * and least_request under outlier detection see every call too. */
static void od_on_call_result(grit_lb_policy *p, const grit_addr *peer, bool ok,
                              const grit_orca_report *report) {
  od_policy *od = (od_policy *)p;
  if (od->child->vt->on_call_result)
    od->child->vt->on_call_result(od->child, peer, ok, report);
  if (!od_enabled(od))
    return;
  size_t i = od_find(od, peer->text);
  if (i < od->n)
    grit_od_record(&od->st[i], ok);
}

static bool od_wants_load_reports(const grit_lb_policy *p) {
  const od_policy *od = (const od_policy *)p;
  return od->child->vt->wants_load_reports &&
         od->child->vt->wants_load_reports(od->child);
}

static void od_timer_closed(uv_handle_t *h) {
  grit_free(h);
}

static void od_destroy(grit_lb_policy *p) {
  od_policy *od = (od_policy *)p;
  if (!od)
    return;
  if (od->child)
    od->child->vt->destroy(od->child);
  uv_close((uv_handle_t *)od->timer, od_timer_closed);
  grit_free(od->st);
  grit_free(od->addrs);
  grit_free(od);
}

const grit_lb_policy_vtable grit_lb_outlier_detection = {
    .name = "outlier_detection_experimental",
    .create = od_create,
    .update_addresses = od_update,
    .exit_idle = od_exit_idle,
    .pick = od_pick,
    .destroy = od_destroy,
    .on_call_result = od_on_call_result,
    .wants_load_reports = od_wants_load_reports,
    .update_node = od_update_node,
};
