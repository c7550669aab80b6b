/* Plain-English rendering of a parsed config, for `grit config check`. */
#include "service_config/service_config_int.h"

#include <inttypes.h>
#include <string.h>

/* Exactly as parsed, up to 315576000000.999999999s (SPEC SC-06), never
 * the saturated nanosecond count the policies hold. */
grit_err grit_sc_append_duration(grit_buf *b, sc_dur d) {
  int32_t frac = d.nanos;
  if (frac == 0)
    return grit_buf_appendf(b, "%" PRId64 "s", d.sec);
  int w = 9;
  /* Trailing zeros of the fraction are dropped: 1.5s, not 1.500000000s. */
  while (frac % 10 == 0) {
    frac /= 10;
    w--;
  }
  return grit_buf_appendf(b, "%" PRId64 ".%0*" PRId32 "s", d.sec, w, frac);
}

grit_err grit_sc_append_codes(grit_buf *b, uint32_t mask) {
  if (mask == 0)
    return grit_buf_appendf(b, "none");
  grit_err rv = GRIT_OK;
  bool first = true;
  for (int code = 0; code < GRIT_STATUS_COUNT && rv == GRIT_OK; code++) {
    if (!(mask & GRIT_CODE_BIT(code)))
      continue;
    rv = grit_buf_appendf(b, "%s%s", first ? "" : ", ",
                          grit_status_code_name((grit_status_code)code));
    first = false;
  }
  return rv;
}

static grit_err append_name(grit_buf *b, const char *key) {
  size_t n = strlen(key);
  if (n == 0)
    return grit_buf_appendf(b, "default (every method not named elsewhere)");
  if (key[n - 1] == '/')
    return grit_buf_appendf(b, "%s* (every method of %.*s)", key, (int)(n - 2),
                            key + 1);
  return grit_buf_appendf(b, "%s", key);
}

/* Each append below returns early on failure; |rv| carries it out. */
#define TRY(expr)                                                              \
  do {                                                                         \
    grit_err rv_ = (expr);                                                     \
    if (rv_ != GRIT_OK)                                                        \
      return rv_;                                                              \
  } while (0)

static grit_err describe_attempts(grit_buf *b, uint32_t attempts,
                                  int64_t requested) {
  TRY(grit_buf_appendf(b, "up to %" PRIu32 " attempts, the first included",
                       attempts));
  if (requested > (int64_t)attempts)
    TRY(grit_buf_appendf(b, " (maxAttempts %" PRId64 " lowered to the cap)",
                         requested));
  return GRIT_OK;
}

static grit_err describe_entry(grit_buf *b, const grit_svccfg *cfg,
                               const sc_entry *e, const char *in) {
  const grit_method_cfg *mc = &e->cfg;
  TRY(grit_buf_appendf(b, "%smethodConfig[%zu] applies to: ", in,
                       e->json_index));
  for (size_t i = 0; i < e->n_names; i++) {
    if (i)
      TRY(grit_buf_appendf(b, ", "));
    TRY(append_name(b, cfg->names[e->first_name + i].key));
  }
  TRY(grit_buf_appendf(b, "\n%s  timeout: ", in));
  if (mc->has_timeout) {
    TRY(grit_sc_append_duration(b, e->timeout));
    TRY(grit_buf_appendf(b, " (or the call's deadline if sooner)"));
  } else {
    TRY(grit_buf_appendf(b, "not set (only the call's deadline)"));
  }
  TRY(grit_buf_appendf(b, "\n%s  wait for ready: %s\n", in,
                       mc->wait_for_ready == GRIT_WFR_TRUE ? "yes"
                       : mc->wait_for_ready == GRIT_WFR_FALSE
                           ? "no"
                           : "not set (no, unless the call asks)"));
  if (mc->has_max_request_bytes)
    TRY(grit_buf_appendf(b,
                         "%s  largest request message: %" PRIu64
                         " bytes (or the channel's limit if smaller)\n",
                         in, mc->max_request_bytes));
  if (mc->has_max_response_bytes)
    TRY(grit_buf_appendf(b,
                         "%s  largest response message: %" PRIu64
                         " bytes (or the channel's limit if smaller)\n",
                         in, mc->max_response_bytes));
  switch (mc->policy) {
  case GRIT_POLICY_NONE:
    TRY(grit_buf_appendf(b,
                         "%s  retries: none configured (transparent "
                         "retries only)\n",
                         in));
    break;
  case GRIT_POLICY_RETRY: {
    const grit_retry_policy *r = &mc->retry;
    TRY(grit_buf_appendf(b, "%s  retry: ", in));
    TRY(describe_attempts(b, r->max_attempts, e->attempts_requested));
    TRY(grit_buf_appendf(b, "\n%s    backoff: first ", in));
    TRY(grit_sc_append_duration(b, e->initial_backoff));
    TRY(grit_buf_appendf(b, ", x%g per retry, at most ",
                         r->backoff_multiplier));
    TRY(grit_sc_append_duration(b, e->max_backoff));
    TRY(grit_buf_appendf(
        b, ", each randomised by +-20%%\n%s    retried on: ", in));
    TRY(grit_sc_append_codes(b, r->retryable_codes));
    TRY(grit_buf_appendf(b, "\n"));
    if (r->has_per_attempt_recv_timeout) {
      TRY(grit_buf_appendf(b, "%s    per-attempt receive timeout: ", in));
      TRY(grit_sc_append_duration(b, e->recv_timeout));
      TRY(grit_buf_appendf(b, " (an attempt silent that long is cancelled "
                              "and may be retried)\n"));
    }
    break;
  }
  case GRIT_POLICY_HEDGING: {
    const grit_hedging_policy *h = &mc->hedging;
    TRY(grit_buf_appendf(b, "%s  hedging: ", in));
    TRY(describe_attempts(b, h->max_attempts, e->attempts_requested));
    if (h->hedging_delay_ns == 0) {
      TRY(grit_buf_appendf(b, ", all sent at once\n"));
    } else {
      TRY(grit_buf_appendf(b, ", a new one every "));
      TRY(grit_sc_append_duration(b, e->hedging_delay));
      TRY(grit_buf_appendf(b, " until one gets a response\n"));
    }
    TRY(grit_buf_appendf(b,
                         "%s    non-fatal codes (send the next hedge at "
                         "once): ",
                         in));
    TRY(grit_sc_append_codes(b, h->non_fatal_codes));
    TRY(grit_buf_appendf(b, "; any other failure ends the call\n"));
    break;
  }
  }
  return GRIT_OK;
}

/* SPEC OD-01; gRFC A50, in words. */
static grit_err describe_od(grit_buf *b, const grit_svccfg *cfg,
                            const char *in) {
  const grit_svccfg_od *od = &cfg->global.od;
  TRY(grit_buf_appendf(b, "%soutlier detection: every ", in));
  TRY(grit_sc_append_duration(b, cfg->od_interval));
  TRY(grit_buf_appendf(b, ", count each backend's call results; an ejected "
                          "backend gets no calls for "));
  TRY(grit_sc_append_duration(b, cfg->od_base_ejection));
  TRY(grit_buf_appendf(b, " times the number of times it was ejected in a "
                          "row, at most max("));
  TRY(grit_sc_append_duration(b, cfg->od_base_ejection));
  TRY(grit_buf_appendf(b, ", "));
  TRY(grit_sc_append_duration(b, cfg->od_max_ejection));
  TRY(grit_buf_appendf(b,
                       "); a new ejection only while fewer than %" PRIu32
                       "%% of backends are ejected\n",
                       od->max_ejection_percent));
  if (od->has_success_rate)
    TRY(grit_buf_appendf(
        b,
        "%s  success rate: among backends with at least %" PRIu32
        " calls (if at least %" PRIu32 " such), eject one whose success "
        "rate is below mean - %" PRIu32 ".%03" PRIu32 " x stdev, with "
        "probability %" PRIu32 "%%\n",
        in, od->sr_request_volume, od->sr_minimum_hosts,
        od->sr_stdev_factor / 1000, od->sr_stdev_factor % 1000,
        od->sr_enforcement_percentage));
  if (od->has_failure_percentage)
    TRY(grit_buf_appendf(
        b,
        "%s  failure percentage: among backends with at least %" PRIu32
        " calls (if at least %" PRIu32 " such), eject one whose failures "
        "exceed %" PRIu32 "%%, with probability %" PRIu32 "%%\n",
        in, od->fp_request_volume, od->fp_minimum_hosts, od->fp_threshold,
        od->fp_enforcement_percentage));
  if (!od->has_success_rate && !od->has_failure_percentage)
    TRY(grit_buf_appendf(b,
                         "%s  no ejection rule set: nothing is ever "
                         "ejected\n",
                         in));
  return GRIT_OK;
}

static const char *describe_lb_name(grit_svccfg_lb lb) {
  switch (lb) {
  case GRIT_LB_PICK_FIRST:
    return "pick_first";
  case GRIT_LB_ROUND_ROBIN:
    return "round_robin";
  case GRIT_LB_WEIGHTED_ROUND_ROBIN:
    return "weighted_round_robin";
  case GRIT_LB_RING_HASH:
    return "ring_hash_experimental";
  case GRIT_LB_LEAST_REQUEST:
    return "least_request_experimental";
  }
  return "?";
}

static double describe_s(int64_t ns) {
  return (double)ns / 1e9;
}

/* SPEC LP-02..LP-04 in words. */
static grit_err describe_lb_settings(grit_buf *b, const grit_svccfg_global *g,
                                     const char *in) {
  switch (g->lb) {
  case GRIT_LB_PICK_FIRST:
  case GRIT_LB_ROUND_ROBIN:
    return GRIT_OK;
  case GRIT_LB_WEIGHTED_ROUND_ROBIN: {
    const grit_svccfg_wrr *w = &g->wrr;
    if (w->enable_oob_load_report)
      TRY(grit_buf_appendf(b,
                           "%s  load reports: out of band, each READY "
                           "backend streams ORCA reports every %gs "
                           "(per-call trailers are not used)\n",
                           in, describe_s(w->oob_reporting_period_ns)));
    else
      TRY(grit_buf_appendf(b,
                           "%s  load reports: per call, from each "
                           "response's endpoint-load-metrics-bin trailer\n",
                           in));
    TRY(grit_buf_appendf(
        b,
        "%s  weight = qps / (utilization + eps/qps x %g), utilization "
        "being application_utilization, else cpu_utilization; a weight "
        "counts after %gs of reports (blackout) and is dropped after %gs "
        "without one; weights go to the scheduler every %gs; round robin "
        "while fewer than two backends have a weight\n",
        in, w->error_utilization_penalty, describe_s(w->blackout_period_ns),
        describe_s(w->weight_expiration_ns),
        describe_s(w->weight_update_period_ns)));
    return GRIT_OK;
  }
  case GRIT_LB_RING_HASH: {
    const grit_svccfg_ring_hash *r = &g->ring_hash;
    uint64_t lo = r->min_ring_size < 4096 ? r->min_ring_size : 4096;
    uint64_t hi = r->max_ring_size < 4096 ? r->max_ring_size : 4096;
    TRY(grit_buf_appendf(
        b,
        "%s  ring of %llu..%llu entries (minRingSize %llu, maxRingSize "
        "%llu%s), XXH64 of \"<address>_<n>\" as grpc builds it; backends "
        "connect when a call lands on them\n",
        in, (unsigned long long)lo, (unsigned long long)hi,
        (unsigned long long)r->min_ring_size,
        (unsigned long long)r->max_ring_size,
        r->min_ring_size > 4096 || r->max_ring_size > 4096
            ? ", capped at 4096 as grpc caps them"
            : ""));
    if (r->request_hash_header)
      TRY(grit_buf_appendf(b,
                           "%s  a call's hash: XXH64 of its \"%s\" header; "
                           "a call without it goes to a random backend\n",
                           in, r->request_hash_header));
    else
      TRY(grit_buf_appendf(b,
                           "%s  no requestHashHeader: every call gets a "
                           "random hash (no affinity)\n",
                           in));
    return GRIT_OK;
  }
  case GRIT_LB_LEAST_REQUEST:
    TRY(grit_buf_appendf(b,
                         "%s  each pick draws %u READY backends at random "
                         "and takes the one with the fewest calls in "
                         "flight\n",
                         in, (unsigned)g->choice_count));
    return GRIT_OK;
  }
  return GRIT_OK;
}

grit_err grit_sc_describe_into(grit_buf *b, const grit_svccfg *cfg,
                               const char *in) {
  const grit_svccfg_global *g = &cfg->global;
  if (cfg->n_entries == 0)
    TRY(grit_buf_appendf(b,
                         "%sno method configs: calls use the channel's "
                         "defaults\n",
                         in));
  for (size_t i = 0; i < cfg->n_entries; i++)
    TRY(describe_entry(b, cfg, &cfg->entries[i], in));
  if (g->has_throttling) {
    uint32_t max = g->max_tokens_milli, ratio = g->token_ratio_milli;
    TRY(grit_buf_appendf(
        b,
        "%sretry throttling: %" PRIu32 " tokens per server name, -1 per "
        "failed attempt, +%" PRIu32 ".%03" PRIu32 " per successful call; "
        "retries and hedges stop while tokens <= %" PRIu32 ".%03" PRIu32 "\n",
        in, max / 1000, ratio / 1000, ratio % 1000, max / 2000,
        (max / 2) % 1000));
  } else {
    TRY(grit_buf_appendf(b, "%sretry throttling: off\n", in));
  }
  TRY(grit_buf_appendf(
      b, "%sload balancing: %s%s%s\n", in, describe_lb_name(g->lb),
      g->lb == GRIT_LB_PICK_FIRST && g->shuffle_address_list
          ? ", addresses shuffled on every update"
          : "",
      cfg->lb_from_config ? " (from loadBalancingConfig)" : ""));
  TRY(describe_lb_settings(b, g, in));
  if (g->has_outlier_detection)
    TRY(describe_od(b, cfg, in));
  if (g->health_check_service)
    TRY(grit_buf_appendf(
        b,
        "%shealth checking: each READY connection watches "
        "grpc.health.v1.Health for service \"%s\"; round_robin picks only "
        "SERVING backends (pick_first ignores it)\n",
        in, g->health_check_service));
  return GRIT_OK;
}

grit_err grit_svccfg_describe(const grit_svccfg *cfg, char **out) {
  *out = NULL;
  if (!cfg)
    return GRIT_ERR_INVALID_ARG;
  grit_buf b;
  grit_buf_init(&b);
  grit_err rv = grit_buf_reserve(&b, 0);
  if (rv == GRIT_OK)
    rv = grit_sc_describe_into(&b, cfg, "");
  if (rv != GRIT_OK) {
    grit_buf_free(&b);
    return rv;
  }
  *out = (char *)b.data;
  return GRIT_OK;
}

/* issue 28, SPEC DNS-10: what an operator loses when a config is dropped.
 * A policy is lost for a name when the config now in force resolves that
 * name (SC-05 lookup) to no policy of the same kind. */
grit_err grit_svccfg_lost_policies(const grit_svccfg *old,
                                   const grit_svccfg *now, char **out) {
  *out = NULL;
  if (!old)
    return GRIT_ERR_INVALID_ARG;
  grit_buf b;
  grit_buf_init(&b);
  size_t n = 0;
  grit_err rv = GRIT_OK;
  for (size_t i = 0; i < old->n_names && rv == GRIT_OK; i++) {
    const sc_name *nm = &old->names[i];
    const grit_method_cfg *was = &old->entries[nm->entry].cfg;
    if (was->policy == GRIT_POLICY_NONE)
      continue;
    const grit_method_cfg *is = grit_svccfg_find(now, nm->key);
    if (is && is->policy == was->policy)
      continue;
    bool retry = was->policy == GRIT_POLICY_RETRY;
    rv = grit_buf_appendf(&b, "%s%s (%" PRIu32 " attempts) for ", n ? ", " : "",
                          retry ? "retryPolicy" : "hedgingPolicy",
                          retry ? was->retry.max_attempts
                                : was->hedging.max_attempts);
    if (rv == GRIT_OK)
      rv = append_name(&b, nm->key);
    n++;
  }
  if (rv != GRIT_OK) {
    grit_buf_free(&b);
    return rv;
  }
  *out = (char *)b.data; /* NULL when nothing was lost */
  return GRIT_OK;
}
