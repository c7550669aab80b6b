/* The channel's side of health checking (SPEC HC-01, HC-02; gRFC A17) and
 * outlier detection (OD-01; gRFC A50): the service config in force picks
 * the policy and its settings, and every attempt's final status is fed
 * to the policy for A50's per-address counting. lb/ does the rest. */
#include "channel/channel_int.h"

#include <string.h>

const grit_lb_policy_vtable *grit_channel_lb_choice(const grit_svccfg *cfg) {
  const grit_svccfg_global *g = cfg ? grit_svccfg_get_global(cfg) : NULL;
  if (g && g->has_outlier_detection)
    return &grit_lb_outlier_detection;
  if (g && g->lb == GRIT_LB_ROUND_ROBIN)
    return &grit_lb_round_robin;
  return &grit_lb_pick_first; /* SC-08 default */
}

static uint64_t ns_to_ms(int64_t ns) {
  return ns <= 0 ? 0 : grit_ns_to_ms_ceil(ns);
}

static void od_params_from(const grit_svccfg_od *o, grit_od_params *p) {
  *p = (grit_od_params){
      .interval_ms = ns_to_ms(o->interval_ns),
      .base_ejection_time_ms = ns_to_ms(o->base_ejection_time_ns),
      .max_ejection_time_ms = ns_to_ms(o->max_ejection_time_ns),
      .max_ejection_percent = o->max_ejection_percent,
      .success_rate = o->has_success_rate,
      .sr_stdev_factor = o->sr_stdev_factor,
      .sr_enforcement_percentage = o->sr_enforcement_percentage,
      .sr_minimum_hosts = o->sr_minimum_hosts,
      .sr_request_volume = o->sr_request_volume,
      .failure_percentage = o->has_failure_percentage,
      .fp_threshold = o->fp_threshold,
      .fp_enforcement_percentage = o->fp_enforcement_percentage,
      .fp_minimum_hosts = o->fp_minimum_hosts,
      .fp_request_volume = o->fp_request_volume,
  };
}

/* HC-01: a changed serviceName (or none) restarts every Watch. */
static grit_err health_configure(grit_channel *ch, const char *want) {
  grit_lb_shared *sh = &ch->lb_shared;
  sh->authority = ch->target.authority;
  const char *have = ch->health_service;
  if ((!want && !have) || (want && have && strcmp(want, have) == 0))
    return GRIT_OK;
  char *copy = NULL;
  if (want && !(copy = grit_strdup(want)))
    return GRIT_ERR_NOMEM;
  grit_free(ch->health_service);
  ch->health_service = copy;
  sh->health_service = copy;
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
             "channel %s: health checking %s%s%s%s", ch->target.authority,
             copy ? "service \"" : "off", copy ? copy : "", copy ? "\"" : "",
             copy && sh->health_disabled ? " (disabled by channel argument)"
                                         : "");
  grit_lb_shared_refresh_health(sh);
  return GRIT_OK;
}

grit_err grit_channel_lb_configure(grit_channel *ch, grit_lb_policy *p) {
  const grit_svccfg_global *g = grit_svccfg_get_global(ch->config);
  grit_err rv = health_configure(ch, g->health_check_service);
  if (rv != GRIT_OK || p->vt != &grit_lb_outlier_detection)
    return rv;
  grit_od_params params;
  od_params_from(&g->od, &params);
  const grit_lb_policy_vtable *child =
      g->lb == GRIT_LB_ROUND_ROBIN ? &grit_lb_round_robin : &grit_lb_pick_first;
  return grit_lb_od_configure(p, child, &params);
}

void grit_channel_lb_on_call_result(grit_channel *ch, const grit_addr *peer,
                                    bool ok) {
  grit_lb_slot *slots[2] = {ch->lb, ch->lb_pending};
  for (int i = 0; i < 2; i++) {
    grit_lb_policy *p = slots[i] ? slots[i]->p : NULL;
    if (p && p->vt->on_call_result)
      p->vt->on_call_result(p, peer, ok);
  }
}
