/* The channel's side of health checking (SPEC HC-01, HC-02; gRFC A17) and
 * outlier detection (OD-01; gRFC A50): the service config in force picks
 * the policy and its settings, and every attempt's final status is fed
 * to the policy for A50's per-address counting. lb/ does the rest. */
#include "channel/channel_int.h"

#include <string.h>

static uint64_t ns_to_ms(int64_t ns) {
  return ns <= 0 ? 0 : grit_ns_to_ms_ceil(ns);
}

static const grit_lb_policy_vtable *lb_vt_of(grit_svccfg_lb lb) {
  switch (lb) {
  case GRIT_LB_PICK_FIRST:
    return &grit_lb_pick_first; /* SC-08 default */
  case GRIT_LB_ROUND_ROBIN:
    return &grit_lb_round_robin;
  case GRIT_LB_WEIGHTED_ROUND_ROBIN:
    return &grit_lb_weighted_round_robin;
  case GRIT_LB_RING_HASH:
    return &grit_lb_ring_hash;
  case GRIT_LB_LEAST_REQUEST:
    return &grit_lb_least_request;
  }
  return &grit_lb_pick_first;
}

const grit_lb_policy_vtable *grit_channel_lb_choice(const grit_svccfg *cfg) {
  const grit_svccfg_global *g = cfg ? grit_svccfg_get_global(cfg) : NULL;
  if (g && g->has_outlier_detection)
    return &grit_lb_outlier_detection;
  return lb_vt_of(g ? g->lb : GRIT_LB_PICK_FIRST);
}

/* SPEC LP-02..LP-04: the service config's settings as lb/ takes them. */
static void lb_params_from(const grit_svccfg_global *g, grit_lb_params *p) {
  grit_lb_params_default(p);
  if (g->lb == GRIT_LB_WEIGHTED_ROUND_ROBIN) {
    const grit_svccfg_wrr *w = &g->wrr;
    p->wrr = (grit_lb_wrr_params){
        .enable_oob = w->enable_oob_load_report,
        .oob_period_ms = ns_to_ms(w->oob_reporting_period_ns),
        .blackout_ms = ns_to_ms(w->blackout_period_ns),
        .expiration_ms = ns_to_ms(w->weight_expiration_ns),
        .update_ms = ns_to_ms(w->weight_update_period_ns),
        .error_penalty = w->error_utilization_penalty,
    };
  } else if (g->lb == GRIT_LB_RING_HASH) {
    p->min_ring_size = g->ring_hash.min_ring_size;
    p->max_ring_size = g->ring_hash.max_ring_size;
    p->request_hash_header = g->ring_hash.request_hash_header;
  } else if (g->lb == GRIT_LB_LEAST_REQUEST) {
    p->choice_count = g->choice_count;
  }
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
  if (rv != GRIT_OK)
    return rv;
  grit_lb_params lp;
  lb_params_from(g, &lp);
  if (p->vt != &grit_lb_outlier_detection)
    return p->vt->configure ? p->vt->configure(p, &lp) : GRIT_OK;
  grit_od_params params;
  od_params_from(&g->od, &params);
  return grit_lb_od_configure_child(p, lb_vt_of(g->lb), &params, &lp);
}

/* SPEC LP-01: the endpoint-load-metrics-bin trailer is decoded only when
 * the application or a policy wants it; a report that does not decode is
 * dropped (traced), the call is not affected. */
static bool orca_wanted(grit_lb_policy *p) {
  return p && p->vt->wants_load_reports && p->vt->wants_load_reports(p);
}

void grit_channel_lb_on_call_result(grit_channel *ch, const grit_addr *peer,
                                    bool ok, const grit_metadata *trailers) {
  grit_lb_slot *slots[2] = {ch->lb, ch->lb_pending};
  grit_lb_policy *pols[2] = {slots[0] ? slots[0]->p : NULL,
                             slots[1] ? slots[1]->p : NULL};
  const grit_lb_shared *sh = &ch->lb_shared;
  grit_orca_report rep, *report = NULL;
  size_t len = 0;
  const uint8_t *bin =
      trailers && (sh->load_report_cb || orca_wanted(pols[0]) ||
                   orca_wanted(pols[1]))
          ? grit_metadata_find(trailers, GRIT_ORCA_TRAILER, &len)
          : NULL;
  if (bin) {
    grit_err rv = grit_orca_decode(bin, len, sh->load_report_cb != NULL, &rep);
    if (rv == GRIT_OK)
      report = &rep;
    else
      GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
                 "%s: load report trailer dropped (%s)", peer->text,
                 grit_strerror(rv));
  }
  if (report && sh->load_report_cb) {
    grit_load_report pub;
    grit_orca_to_public(report, peer->text, false, &pub);
    sh->load_report_cb(&pub, sh->load_report_data);
  }
  for (int i = 0; i < 2; i++) {
    grit_lb_policy *p = pols[i];
    if (p && p->vt->on_call_result)
      p->vt->on_call_result(p, peer, ok, orca_wanted(p) ? report : NULL);
  }
  if (report)
    grit_orca_report_free(report);
}
