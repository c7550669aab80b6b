/* priority (SPEC XD-03; gRFC A56, as grpc-core's priority.cc): children in
 * priority order, highest first. A child is made (and started) only when
 * every higher one is failing: it is chosen when READY or IDLE; while
 * CONNECTING it keeps the choice until its failover timer (10 s from its
 * start, or from going CONNECTING after it had been READY or IDLE) fires;
 * after that, or once it is TRANSIENT_FAILURE, the next priority is
 * started. A higher priority that recovers takes over again and the lower
 * ones are deactivated: kept, connections and all, for 15 minutes in case
 * they are needed again, then dropped. Picks go to the chosen child. The
 * timers read a clock a test can fake (grit_lb_priority_tick). */
#include "lb/lb_int.h"

#include <stdio.h>
#include <string.h>

#define PRIO_FAILOVER_MS 10000ULL          /* A56 */
#define PRIO_RETENTION_MS (15ULL * 60000U) /* grpc-core's kChildRetention */
#define PRIO_NONE UINT32_MAX

typedef struct priority {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  grit_lb_node *cfg; /* a copy of the last update's node */
  grit_lb_kid **kids;
  size_t nkids, cap;
  uint32_t current; /* index in cfg->children, or PRIO_NONE */
  grit_lb_kid *current_kid;
  bool busy; /* inside an update: children's states are only recorded */
  bool destroying;
  uv_timer_t *timer; /* freed in its close callback */
  char why[160];
} priority;

static uint64_t prio_now(const priority *pr) {
  const grit_lb_clock *c = pr->cfg ? pr->cfg->clock : NULL;
  return c ? c->now_ms(c->ud) : uv_now(pr->a.loop);
}

static uint64_t failover_ms(const priority *pr) {
  return pr->cfg && pr->cfg->failover_ms ? pr->cfg->failover_ms
                                         : PRIO_FAILOVER_MS;
}

static uint64_t retention_ms(const priority *pr) {
  return pr->cfg && pr->cfg->retention_ms ? pr->cfg->retention_ms
                                          : PRIO_RETENTION_MS;
}

static grit_lb_kid *prio_find(const priority *pr, const char *name) {
  for (size_t i = 0; i < pr->nkids; i++)
    if (strcmp(pr->kids[i]->name, name) == 0)
      return pr->kids[i];
  return NULL;
}

static void prio_timer_fire(uv_timer_t *t) {
  grit_lb_priority_tick(t->data);
}

/* The loop timer wakes the policy at the earliest deadline. */
static void prio_arm(priority *pr) {
  if (!pr->timer)
    return;
  uint64_t next = 0;
  for (size_t i = 0; i < pr->nkids; i++) {
    grit_lb_kid *k = pr->kids[i];
    if (k->failover_at && (!next || k->failover_at < next))
      next = k->failover_at;
    if (k->retention_at && (!next || k->retention_at < next))
      next = k->retention_at;
  }
  uv_timer_stop(pr->timer);
  if (next) {
    uint64_t now = prio_now(pr);
    uv_timer_start(pr->timer, prio_timer_fire, next > now ? next - now : 0, 0);
  }
}

static void prio_publish(priority *pr, grit_connectivity_state s) {
  pr->h.update_state(pr->h.ctx, s);
}

static void prio_set_current(priority *pr, uint32_t i, bool deactivate_lower) {
  grit_lb_kid *k = prio_find(pr, pr->cfg->children[i].name);
  pr->current = i;
  pr->current_kid = k;
  if (deactivate_lower) {
    uint64_t now = prio_now(pr);
    for (size_t j = i + 1; j < pr->cfg->nchildren; j++) {
      grit_lb_kid *low = prio_find(pr, pr->cfg->children[j].name);
      if (low && !low->retention_at) {
        low->retention_at = now + retention_ms(pr);
        low->failover_at = 0;
      }
    }
  }
  prio_publish(pr, k ? k->state : GRIT_STATE_CONNECTING);
}

static void kid_start_failover(priority *pr, grit_lb_kid *k) {
  k->failover_at = prio_now(pr) + failover_ms(pr);
}

/* Make and start the child of priority |i|; NULL on out-of-memory. */
static grit_lb_kid *prio_make(priority *pr, uint32_t i);

/* grpc-core's ChoosePriorityLocked. */
static void prio_choose(priority *pr) {
  if (pr->busy || pr->destroying || !pr->cfg)
    return;
  size_t n = pr->cfg->nchildren;
  if (n == 0) {
    pr->current = PRIO_NONE;
    pr->current_kid = NULL;
    snprintf(pr->why, sizeof(pr->why), "no priorities");
    prio_publish(pr, GRIT_STATE_TRANSIENT_FAILURE);
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    grit_lb_kid *k = prio_find(pr, pr->cfg->children[i].name);
    if (!k) {
      k = prio_make(pr, i);
      if (!k) {
        snprintf(pr->why, sizeof(pr->why), "out of memory");
        prio_publish(pr, GRIT_STATE_TRANSIENT_FAILURE);
        return;
      }
    }
    k->retention_at = 0; /* reactivated */
    if (k->state == GRIT_STATE_READY || k->state == GRIT_STATE_IDLE) {
      prio_set_current(pr, i, true);
      return;
    }
    if (k->failover_at) { /* still within its time: wait for it */
      prio_set_current(pr, i, false);
      return;
    }
  }
  for (uint32_t i = 0; i < n; i++) {
    grit_lb_kid *k = prio_find(pr, pr->cfg->children[i].name);
    if (k && k->state == GRIT_STATE_CONNECTING) {
      prio_set_current(pr, i, false);
      return;
    }
  }
  prio_set_current(pr, (uint32_t)(n - 1), false);
}

/* A56: how a child's state moves its failover timer. */
static void prio_on_kid_state(grit_lb_kid *k) {
  priority *pr = k->parent;
  if (k->state == GRIT_STATE_CONNECTING) {
    if (k->seen_ready_or_idle && !k->failover_at && !k->retention_at)
      kid_start_failover(pr, k);
  } else if (k->state == GRIT_STATE_READY || k->state == GRIT_STATE_IDLE) {
    k->seen_ready_or_idle = true;
    k->failover_at = 0;
  } else if (k->state == GRIT_STATE_TRANSIENT_FAILURE) {
    k->seen_ready_or_idle = false;
    k->failover_at = 0;
  }
  if (pr->busy || pr->destroying)
    return;
  prio_choose(pr);
  prio_arm(pr);
}

static grit_lb_kid *prio_make(priority *pr, uint32_t i) {
  if (pr->nkids == pr->cap) {
    size_t cap = pr->cap ? pr->cap * 2 : 4;
    grit_lb_kid **k = grit_realloc(pr->kids, cap * sizeof(*k));
    if (!k)
      return NULL;
    pr->kids = k;
    pr->cap = cap;
  }
  const grit_lb_child_cfg *c = &pr->cfg->children[i];
  grit_lb_kid *k = grit_lb_kid_new(c->name, &pr->h, prio_on_kid_state, pr);
  if (!k)
    return NULL;
  /* The failover timer runs from the child's start (A56). */
  kid_start_failover(pr, k);
  bool was = pr->busy;
  pr->busy = true;
  grit_err rv = grit_lb_kid_update(k, &pr->a, c->node);
  if (rv == GRIT_OK) {
    k->started = true;
    k->p->vt->exit_idle(k->p);
  }
  pr->busy = was;
  if (rv != GRIT_OK) {
    grit_lb_kid_free(k);
    return NULL;
  }
  if (k->state == GRIT_STATE_TRANSIENT_FAILURE)
    k->failover_at = 0;
  pr->kids[pr->nkids++] = k;
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO, "priority: starting %s", c->name);
  return k;
}

static void prio_drop(priority *pr, size_t idx) {
  grit_lb_kid *k = pr->kids[idx];
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
             "priority: %s deactivated long enough, dropped", k->name);
  if (pr->current_kid == k) {
    pr->current_kid = NULL;
    pr->current = PRIO_NONE;
  }
  pr->kids[idx] = pr->kids[--pr->nkids];
  grit_lb_kid_free(k);
}

void grit_lb_priority_tick(grit_lb_policy *p) {
  priority *pr = (priority *)p;
  uint64_t now = prio_now(pr);
  bool changed = false;
  for (size_t i = 0; i < pr->nkids;) {
    grit_lb_kid *k = pr->kids[i];
    if (k->retention_at && now >= k->retention_at) {
      prio_drop(pr, i);
      changed = true;
      continue;
    }
    if (k->failover_at && now >= k->failover_at) {
      /* grpc-core: the child counts as TRANSIENT_FAILURE from now on. */
      GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
                 "priority: %s not READY after %llu ms, failing over", k->name,
                 (unsigned long long)failover_ms(pr));
      k->failover_at = 0;
      k->seen_ready_or_idle = false;
      k->state = GRIT_STATE_TRANSIENT_FAILURE;
      changed = true;
    }
    i++;
  }
  if (changed)
    prio_choose(pr);
  prio_arm(pr);
}

uint32_t grit_lb_priority_current(const grit_lb_policy *p) {
  return ((const priority *)p)->current;
}

size_t grit_lb_priority_children(const grit_lb_policy *p) {
  return ((const priority *)p)->nkids;
}

static grit_err prio_create(const grit_subchannel_args *a,
                            const grit_lb_helper *h, grit_lb_policy **out) {
  priority *pr = grit_calloc(1, sizeof(*pr));
  uv_timer_t *t = grit_calloc(1, sizeof(*t));
  if (!pr || !t) {
    grit_free(pr);
    grit_free(t);
    *out = NULL;
    return GRIT_ERR_NOMEM;
  }
  pr->base.vt = &grit_lb_priority;
  pr->a = *a;
  pr->h = *h;
  pr->current = PRIO_NONE;
  uv_timer_init(a->loop, t);
  t->data = pr;
  pr->timer = t;
  *out = &pr->base;
  return GRIT_OK;
}

static grit_err prio_update_node(grit_lb_policy *p, const grit_lb_node *n) {
  priority *pr = (priority *)p;
  grit_lb_node *cfg = grit_lb_node_dup(n);
  if (!cfg)
    return GRIT_ERR_NOMEM;
  grit_lb_node_free(pr->cfg);
  pr->cfg = cfg;
  grit_err rv = GRIT_OK;
  uint64_t now = prio_now(pr);
  pr->busy = true;
  for (size_t i = 0; i < pr->nkids; i++) {
    grit_lb_kid *k = pr->kids[i];
    const grit_lb_child_cfg *c = NULL;
    for (size_t j = 0; j < cfg->nchildren && !c; j++)
      if (strcmp(cfg->children[j].name, k->name) == 0)
        c = &cfg->children[j];
    if (!c) { /* gone from the config: kept for a while all the same */
      if (!k->retention_at)
        k->retention_at = now + retention_ms(pr);
      k->failover_at = 0;
      continue;
    }
    grit_err e = grit_lb_kid_update(k, &pr->a, c->node);
    if (e != GRIT_OK)
      rv = e;
  }
  pr->busy = false;
  /* The chosen child is found again by name. */
  pr->current = PRIO_NONE;
  pr->current_kid = NULL;
  prio_choose(pr);
  prio_arm(pr);
  return rv;
}

static void prio_exit_idle(grit_lb_policy *p) {
  priority *pr = (priority *)p;
  if (pr->current_kid)
    pr->current_kid->p->vt->exit_idle(pr->current_kid->p);
  else
    prio_choose(pr);
}

static grit_pick_result prio_pick(grit_lb_policy *p,
                                  const grit_pick_args *args) {
  priority *pr = (priority *)p;
  grit_lb_kid *k = pr->current_kid;
  if (k)
    return k->p->vt->pick(k->p, args);
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  if (pr->cfg && pr->cfg->nchildren == 0) {
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    r.message = pr->why;
  }
  return r;
}

static void prio_on_call_result(grit_lb_policy *p, const grit_addr *peer,
                                bool ok, const grit_orca_report *report) {
  const priority *pr = (const priority *)p;
  grit_lb_kids_call_result(pr->kids, pr->nkids, peer, ok, report);
}

static bool prio_wants_load_reports(const grit_lb_policy *p) {
  const priority *pr = (const priority *)p;
  return grit_lb_kids_want_load_reports(pr->kids, pr->nkids);
}

static void prio_timer_closed(uv_handle_t *h) {
  grit_free(h);
}

static void prio_destroy(grit_lb_policy *p) {
  priority *pr = (priority *)p;
  if (!pr)
    return;
  pr->destroying = true;
  for (size_t i = 0; i < pr->nkids; i++)
    grit_lb_kid_free(pr->kids[i]);
  grit_free(pr->kids);
  grit_lb_node_free(pr->cfg);
  uv_timer_stop(pr->timer);
  uv_close((uv_handle_t *)pr->timer, prio_timer_closed);
  grit_free(pr);
}

const grit_lb_policy_vtable grit_lb_priority = {
    .name = "priority_experimental",
    .create = prio_create,
    .update_addresses = grit_lb_node_update_addresses,
    .exit_idle = prio_exit_idle,
    .pick = prio_pick,
    .destroy = prio_destroy,
    .on_call_result = prio_on_call_result,
    .wants_load_reports = prio_wants_load_reports,
    .update_node = prio_update_node,
};
