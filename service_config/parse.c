/* Service config JSON -> grit_svccfg (SPEC SC-01..SC-12; gRFC A6, A21).
 * Every rule is checked even after a problem, so `grit config check` can
 * list them all; the config is built only when there was none.
 *
 * Where SPEC is silent, grit follows grpc-core:
 * - duplicate JSON object keys reject the config (grpc-core's reader);
 * - integer fields take JSON integers only: 2.0, 2e0 and "2" are refused;
 * - null is "absent" for object members; a null array element is invalid;
 * - "service": "" and "method": "" count as unset ({"service": ""} is the
 *   default); names are keyed "/S/M", "/S/", "" as grpc-core keys them;
 * - an entry without names is validated, then applies to nothing;
 * - retryableStatusCodes absent is the same as empty;
 * - loadBalancingPolicy is validated even when loadBalancingConfig wins,
 *   and loadBalancingConfig entries after the first known one are not. */
#include "service_config/service_config_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SC_DEFAULT_MAX_ATTEMPTS_CAP 5

/* ---- scalar fields; each reports at the current path ---- */

static bool get_int(sc_ctx *c, const json_t *v, int64_t *out,
                    const char *rule) {
  /* JSON integers only: 2.0 and "2" are refused, as grpc-core's integer
   * loader (absl::SimpleAtoi on the number text) refuses "2.0". */
  if (!json_is_integer(v)) {
    grit_sc_problem(c, "%s", rule);
    return false;
  }
  *out = json_integer_value(v);
  return true;
}

static bool get_duration(sc_ctx *c, const json_t *v, bool positive,
                         int64_t *out_ns, sc_dur *exact) {
  const char *why;
  if (!json_is_string(v)) {
    grit_sc_problem(c, "must be a duration string like \"1.5s\"");
    return false;
  }
  if (!grit_sc_duration_from_text(json_string_value(v), json_string_length(v),
                                  out_ns, exact, &why)) {
    grit_sc_problem(c, "%s", why);
    return false;
  }
  if (positive && *out_ns == 0) {
    grit_sc_problem(c, "must be a duration > 0");
    return false;
  }
  return true;
}

/* Optional member: absent (or null) leaves *present false. */
static json_t *field(sc_ctx *c, const json_t *obj, const char *key,
                     size_t *mark) {
  *mark = grit_sc_push_key(c, key);
  return grit_sc_get(obj, key);
}

static json_t *required(sc_ctx *c, const json_t *obj, const char *key,
                        size_t *mark) {
  json_t *v = field(c, obj, key, mark);
  if (!v)
    grit_sc_problem(c, "is required");
  return v;
}

static uint32_t cap_attempts(int64_t n, uint32_t cap) {
  /* SPEC SC-10: values above the cap are lowered silently. */
  return n > (int64_t)cap ? cap : (uint32_t)n;
}

static bool get_max_attempts(sc_ctx *c, const json_t *obj, uint32_t cap,
                             uint32_t *out, int64_t *requested) {
  size_t m;
  json_t *v = required(c, obj, "maxAttempts", &m);
  int64_t n = 0;
  bool ok = false;
  if (v && get_int(c, v, &n, "must be an integer > 1")) {
    if (n < 2) {
      grit_sc_problem(c, "must be an integer > 1");
    } else {
      *out = cap_attempts(n, cap);
      *requested = n;
      ok = true;
    }
  }
  grit_sc_pop(c, m);
  return ok;
}

static uint32_t get_codes(sc_ctx *c, const json_t *arr) {
  uint32_t mask = 0;
  size_t i;
  json_t *e;
  json_array_foreach(arr, i, e) {
    size_t m = grit_sc_push_index(c, i);
    grit_status_code code;
    const char *why;
    if (grit_sc_status_code_from_json(e, &code, &why))
      mask |= GRIT_CODE_BIT(code);
    else if (json_is_string(e) && strncmp(why, "unknown", 7) == 0)
      grit_sc_problem(c, "%s \"%.64s\"", why, json_string_value(e));
    else
      grit_sc_problem(c, "%s", why);
    grit_sc_pop(c, m);
  }
  return mask;
}

/* ---- retryPolicy, hedgingPolicy (SPEC SC-09..SC-11; gRFC A6) ---- */

static void parse_retry(sc_ctx *c, const json_t *p, uint32_t cap,
                        sc_entry *ent) {
  grit_retry_policy *r = &ent->cfg.retry;
  size_t m;
  json_t *v;
  if (!json_is_object(p)) {
    grit_sc_problem(c, "must be an object");
    return;
  }
  get_max_attempts(c, p, cap, &r->max_attempts, &ent->attempts_requested);

  if ((v = required(c, p, "initialBackoff", &m)))
    get_duration(c, v, true, &r->initial_backoff_ns, &ent->initial_backoff);
  grit_sc_pop(c, m);
  if ((v = required(c, p, "maxBackoff", &m)))
    get_duration(c, v, true, &r->max_backoff_ns, &ent->max_backoff);
  grit_sc_pop(c, m);

  if ((v = required(c, p, "backoffMultiplier", &m))) {
    if (!json_is_number(v) || !(json_number_value(v) > 0))
      grit_sc_problem(c, "must be a number > 0");
    else
      r->backoff_multiplier = json_number_value(v);
  }
  grit_sc_pop(c, m);

  if ((v = field(c, p, "perAttemptRecvTimeout", &m)))
    r->has_per_attempt_recv_timeout = get_duration(
        c, v, true, &r->per_attempt_recv_timeout_ns, &ent->recv_timeout);
  bool has_recv_timeout = v != NULL;
  grit_sc_pop(c, m);

  /* Absent and empty are the same, as in grpc-core: both need
   * perAttemptRecvTimeout (gRFC A6 as updated). */
  v = field(c, p, "retryableStatusCodes", &m);
  if (v && !json_is_array(v)) {
    grit_sc_problem(c, "must be an array of status codes");
  } else {
    if (v)
      r->retryable_codes = get_codes(c, v);
    if ((!v || json_array_size(v) == 0) && !has_recv_timeout)
      grit_sc_problem(c, "must be a non-empty array unless "
                         "perAttemptRecvTimeout is set");
  }
  grit_sc_pop(c, m);
}

static void parse_hedging(sc_ctx *c, const json_t *p, uint32_t cap,
                          sc_entry *ent) {
  grit_hedging_policy *h = &ent->cfg.hedging;
  size_t m;
  json_t *v;
  if (!json_is_object(p)) {
    grit_sc_problem(c, "must be an object");
    return;
  }
  get_max_attempts(c, p, cap, &h->max_attempts, &ent->attempts_requested);
  if ((v = field(c, p, "hedgingDelay", &m)))
    get_duration(c, v, false, &h->hedging_delay_ns, &ent->hedging_delay);
  grit_sc_pop(c, m);
  if ((v = field(c, p, "nonFatalStatusCodes", &m))) {
    if (!json_is_array(v))
      grit_sc_problem(c, "must be an array of status codes");
    else
      h->non_fatal_codes = get_codes(c, v);
  }
  grit_sc_pop(c, m);
}

/* ---- methodConfig entries (SPEC SC-04, SC-07) ---- */

static bool get_limit(sc_ctx *c, const json_t *e, const char *key,
                      uint64_t *out) {
  size_t m;
  json_t *v = field(c, e, key, &m);
  int64_t n;
  bool ok = false;
  if (v && get_int(c, v, &n, "must be a non-negative integer")) {
    if (n < 0) {
      grit_sc_problem(c, "must be a non-negative integer");
    } else {
      *out = (uint64_t)n;
      ok = true;
    }
  }
  grit_sc_pop(c, m);
  return ok;
}

static const char *name_part(sc_ctx *c, const json_t *n, const char *key) {
  size_t m;
  json_t *v = field(c, n, key, &m);
  const char *s = "";
  if (v && !json_is_string(v))
    grit_sc_problem(c, "must be a string");
  else if (v)
    s = json_string_value(v);
  grit_sc_pop(c, m);
  return s;
}

/* Lookup key of one name, as grpc-core builds it: "/S/M", "/S/" for a
 * whole service, "" for the default. Empty strings count as unset. */
static char *name_key(sc_ctx *c, const json_t *n) {
  if (!json_is_object(n)) {
    grit_sc_problem(c, "must be an object with \"service\" and \"method\"");
    return NULL;
  }
  const char *svc = name_part(c, n, "service");
  const char *meth = name_part(c, n, "method");
  if (!*svc && *meth) {
    grit_sc_problem(c, "a method name needs a service name");
    return NULL;
  }
  size_t ls = strlen(svc), lm = strlen(meth);
  char *key = grit_malloc(ls + lm + 3);
  if (!key) {
    grit_sc_nomem(c);
    return NULL;
  }
  if (ls == 0) {
    key[0] = '\0';
  } else {
    key[0] = '/';
    memcpy(key + 1, svc, ls);
    key[ls + 1] = '/';
    memcpy(key + ls + 2, meth, lm);
    key[ls + lm + 2] = '\0';
  }
  return key;
}

static void parse_entry(sc_ctx *c, grit_svccfg *cfg, const json_t *e,
                        size_t json_index) {
  size_t m;
  json_t *v;
  sc_entry ent;
  memset(&ent, 0, sizeof(ent));
  ent.json_index = json_index;
  ent.first_name = cfg->n_names;
  if (!json_is_object(e)) {
    grit_sc_problem(c, "must be an object");
    return;
  }

  if ((v = field(c, e, "name", &m))) {
    if (!json_is_array(v)) {
      grit_sc_problem(c, "must be an array of {service, method}");
    } else {
      size_t i;
      json_t *n;
      json_array_foreach(v, i, n) {
        size_t mi = grit_sc_push_index(c, i);
        char *key = name_key(c, n);
        grit_sc_pop(c, mi);
        if (!key)
          continue;
        cfg->names[cfg->n_names++] =
            (sc_name){.key = key, .entry = cfg->n_entries, .json_name = i};
        ent.n_names++;
      }
    }
  }
  grit_sc_pop(c, m);

  if ((v = field(c, e, "timeout", &m)))
    ent.cfg.has_timeout =
        get_duration(c, v, false, &ent.cfg.timeout_ns, &ent.timeout);
  grit_sc_pop(c, m);

  if ((v = field(c, e, "waitForReady", &m))) {
    if (!json_is_boolean(v))
      grit_sc_problem(c, "must be true or false");
    else
      ent.cfg.wait_for_ready = json_is_true(v) ? GRIT_WFR_TRUE : GRIT_WFR_FALSE;
  }
  grit_sc_pop(c, m);

  ent.cfg.has_max_request_bytes =
      get_limit(c, e, "maxRequestMessageBytes", &ent.cfg.max_request_bytes);
  ent.cfg.has_max_response_bytes =
      get_limit(c, e, "maxResponseMessageBytes", &ent.cfg.max_response_bytes);

  json_t *retry = grit_sc_get(e, "retryPolicy");
  json_t *hedge = grit_sc_get(e, "hedgingPolicy");
  if (retry) {
    m = grit_sc_push_key(c, "retryPolicy");
    parse_retry(c, retry, cfg->max_attempts_cap, &ent);
    grit_sc_pop(c, m);
    ent.cfg.policy = GRIT_POLICY_RETRY;
  }
  if (hedge) {
    m = grit_sc_push_key(c, "hedgingPolicy");
    /* SPEC SC-09: one or the other. */
    if (retry)
      grit_sc_problem(c, "must not be set together with retryPolicy");
    parse_hedging(c, hedge, cfg->max_attempts_cap, &ent);
    grit_sc_pop(c, m);
    ent.cfg.policy = GRIT_POLICY_HEDGING;
  }

  /* SPEC SC-04: an entry without names applies to nothing; it was still
   * validated, like grpc-core does. */
  if (ent.n_names > 0)
    cfg->entries[cfg->n_entries++] = ent;
}

static int name_cmp(const void *a, const void *b) {
  const sc_name *x = *(const sc_name *const *)a;
  const sc_name *y = *(const sc_name *const *)b;
  int r = strcmp(x->key, y->key);
  if (r)
    return r;
  /* Ties in document order, so the later duplicate is the one blamed. */
  if (x->entry != y->entry)
    return x->entry < y->entry ? -1 : 1;
  return x->json_name < y->json_name ? -1 : x->json_name > y->json_name;
}

static void index_names(sc_ctx *c, grit_svccfg *cfg) {
  if (cfg->n_names == 0)
    return;
  cfg->sorted = grit_calloc(cfg->n_names, sizeof(*cfg->sorted));
  if (!cfg->sorted) {
    grit_sc_nomem(c);
    return;
  }
  for (size_t i = 0; i < cfg->n_names; i++)
    cfg->sorted[i] = &cfg->names[i];
  qsort(cfg->sorted, cfg->n_names, sizeof(*cfg->sorted), name_cmp);
  /* SPEC SC-04: the same name twice anywhere, or two defaults. */
  for (size_t i = 1; i < cfg->n_names; i++) {
    const sc_name *a = cfg->sorted[i - 1], *b = cfg->sorted[i];
    if (strcmp(a->key, b->key) != 0)
      continue;
    size_t m = grit_sc_push_key(c, "methodConfig");
    grit_sc_push_index(c, cfg->entries[b->entry].json_index);
    grit_sc_push_key(c, "name");
    grit_sc_push_index(c, b->json_name);
    size_t kl = strlen(b->key);
    if (kl)
      grit_sc_problem(c,
                      "duplicate name \"%.80s%s\" (first at "
                      "$.methodConfig[%zu].name[%zu])",
                      b->key, b->key[kl - 1] == '/' ? "*" : "",
                      cfg->entries[a->entry].json_index, a->json_name);
    else
      grit_sc_problem(c,
                      "a second default name (first at "
                      "$.methodConfig[%zu].name[%zu])",
                      cfg->entries[a->entry].json_index, a->json_name);
    grit_sc_pop(c, m);
  }
}

static void parse_method_configs(sc_ctx *c, grit_svccfg *cfg,
                                 const json_t *arr) {
  if (!json_is_array(arr)) {
    grit_sc_problem(c, "must be an array");
    return;
  }
  size_t n = json_array_size(arr), total = 0, i;
  json_t *e;
  json_array_foreach(arr, i, e) {
    json_t *names = json_is_object(e) ? grit_sc_get(e, "name") : NULL;
    if (json_is_array(names))
      total += json_array_size(names);
  }
  if (n == 0)
    return;
  cfg->entries = grit_calloc(n, sizeof(*cfg->entries));
  cfg->names = total ? grit_calloc(total, sizeof(*cfg->names)) : NULL;
  if (!cfg->entries || (total && !cfg->names)) {
    grit_sc_nomem(c);
    return;
  }
  json_array_foreach(arr, i, e) {
    size_t m = grit_sc_push_index(c, i);
    parse_entry(c, cfg, e, i);
    grit_sc_pop(c, m);
    if (c->nomem)
      return;
  }
}

/* ---- retryThrottling (SPEC SC-12; gRFC A6) ---- */

/* tokenRatio in thousandths, truncated. jansson gives a double, not the
 * number's text: rounding x * 1e9 first recovers the written decimal for
 * up to 9 decimal places, so 0.29 gives 290, not 289. Ratios of 1000 or
 * more fill any bucket (maxTokens <= 1000) in one success: clamp there. */
static uint32_t ratio_milli(double x) {
  if (x >= 1000.0)
    return 1000000;
  return (uint32_t)((uint64_t)llround(x * 1e9) / 1000000u);
}

static void parse_throttling(sc_ctx *c, grit_svccfg *cfg, const json_t *t) {
  size_t m;
  json_t *v;
  if (!json_is_object(t)) {
    grit_sc_problem(c, "must be an object");
    return;
  }
  bool ok = true;
  int64_t max = 0;
  if ((v = required(c, t, "maxTokens", &m))) {
    if (!get_int(c, v, &max, "must be an integer in (0, 1000]"))
      ok = false;
    else if (max <= 0 || max > 1000) {
      grit_sc_problem(c, "must be an integer in (0, 1000]");
      ok = false;
    }
  } else {
    ok = false;
  }
  grit_sc_pop(c, m);

  uint32_t ratio = 0;
  if ((v = required(c, t, "tokenRatio", &m))) {
    if (!json_is_number(v) || !(json_number_value(v) > 0)) {
      grit_sc_problem(c, "must be a number > 0");
      ok = false;
    } else if ((ratio = ratio_milli(json_number_value(v))) == 0) {
      grit_sc_problem(c, "must be at least 0.001 (kept in truncated "
                         "thousandths)");
      ok = false;
    }
  } else {
    ok = false;
  }
  grit_sc_pop(c, m);

  if (ok) {
    cfg->global.has_throttling = true;
    cfg->global.max_tokens_milli = (uint32_t)max * 1000u;
    cfg->global.token_ratio_milli = ratio;
  }
}

/* ---- load balancing (SPEC SC-08) ---- */

static bool lb_known(const char *name, grit_svccfg_lb *out) {
  if (strcmp(name, "pick_first") == 0) {
    *out = GRIT_LB_PICK_FIRST;
    return true;
  }
  if (strcmp(name, "round_robin") == 0) {
    *out = GRIT_LB_ROUND_ROBIN;
    return true;
  }
  if (strcmp(name, "weighted_round_robin") == 0) {
    *out = GRIT_LB_WEIGHTED_ROUND_ROBIN;
    return true;
  }
  if (strcmp(name, "ring_hash_experimental") == 0) {
    *out = GRIT_LB_RING_HASH;
    return true;
  }
  if (strcmp(name, "least_request_experimental") == 0) {
    *out = GRIT_LB_LEAST_REQUEST;
    return true;
  }
  return false;
}

bool grit_sc_lb_name_known(const char *name, bool child) {
  grit_svccfg_lb lb;
  return lb_known(name, &lb) ||
         (!child && strcmp(name, "outlier_detection_experimental") == 0);
}

/* ---- weighted_round_robin (SPEC LP-02; gRFC A58) ---- */

static void wrr_duration(sc_ctx *c, const json_t *o, const char *key,
                         int64_t *out_ns) {
  size_t m;
  json_t *v = field(c, o, key, &m);
  sc_dur exact;
  if (v)
    get_duration(c, v, false, out_ns, &exact);
  grit_sc_pop(c, m);
}

static void parse_wrr(sc_ctx *c, grit_svccfg *cfg, const json_t *o) {
  grit_svccfg_wrr *w = &cfg->global.wrr;
  size_t m;
  json_t *v = field(c, o, "enableOobLoadReport", &m);
  if (v && !json_is_boolean(v))
    grit_sc_problem(c, "must be true or false");
  else if (v)
    w->enable_oob_load_report = json_is_true(v);
  grit_sc_pop(c, m);
  wrr_duration(c, o, "oobReportingPeriod", &w->oob_reporting_period_ns);
  wrr_duration(c, o, "blackoutPeriod", &w->blackout_period_ns);
  wrr_duration(c, o, "weightExpirationPeriod", &w->weight_expiration_ns);
  wrr_duration(c, o, "weightUpdatePeriod", &w->weight_update_period_ns);
  /* A58: a weightUpdatePeriod below 100 ms is raised to 100 ms. */
  if (w->weight_update_period_ns < 100000000)
    w->weight_update_period_ns = 100000000;
  if ((v = field(c, o, "errorUtilizationPenalty", &m))) {
    if (!json_is_number(v) || json_number_value(v) < 0 ||
        !isfinite(json_number_value(v)))
      grit_sc_problem(c, "must be a number >= 0");
    else
      w->error_utilization_penalty = json_number_value(v);
  }
  grit_sc_pop(c, m);
}

/* ---- ring_hash_experimental (LP-03; gRFC A42, A76) ---- */

static bool rh_size(sc_ctx *c, const json_t *o, const char *key,
                    uint64_t *out) {
  size_t m;
  json_t *v = field(c, o, key, &m);
  int64_t n;
  bool ok = true;
  if (v && get_int(c, v, &n, "must be an integer 1..8388608")) {
    if (n < 1 || n > 8388608) {
      grit_sc_problem(c, "must be an integer 1..8388608");
      ok = false;
    } else {
      *out = (uint64_t)n;
    }
  } else if (v) {
    ok = false;
  }
  grit_sc_pop(c, m);
  return ok;
}

static void parse_ring_hash(sc_ctx *c, grit_svccfg *cfg, const json_t *o) {
  grit_svccfg_ring_hash *r = &cfg->global.ring_hash;
  bool ok = rh_size(c, o, "minRingSize", &r->min_ring_size);
  ok = rh_size(c, o, "maxRingSize", &r->max_ring_size) && ok;
  if (ok && r->min_ring_size > r->max_ring_size)
    grit_sc_problem(c,
                    "maxRingSize (%llu) cannot be smaller than "
                    "minRingSize (%llu)",
                    (unsigned long long)r->max_ring_size,
                    (unsigned long long)r->min_ring_size);
  size_t m;
  json_t *v = field(c, o, "requestHashHeader", &m);
  if (v) {
    const char *h = json_is_string(v) ? json_string_value(v) : NULL;
    size_t len = h ? json_string_length(v) : 0;
    /* A76: a valid header name; binary headers and pseudo-headers are
     * refused (grit hashes text values only). */
    if (!h || len == 0 || strlen(h) != len ||
        !grit_metadata_key_ok(h, len, true) || h[0] == ':') {
      grit_sc_problem(c, "must be a lower-case header name [0-9a-z_.-]");
    } else if (len > 4 && strcmp(h + len - 4, "-bin") == 0) {
      grit_sc_problem(c, "must not be a binary (-bin) header");
    } else if (!c->invalid) {
      grit_free(cfg->hash_header);
      cfg->hash_header = grit_strdup(h);
      if (!cfg->hash_header)
        grit_sc_nomem(c);
      r->request_hash_header = cfg->hash_header;
    }
  }
  grit_sc_pop(c, m);
}

/* ---- least_request_experimental (LP-04) ---- */

static void parse_least_request(sc_ctx *c, grit_svccfg *cfg, const json_t *o) {
  size_t m;
  json_t *v = field(c, o, "choiceCount", &m);
  int64_t n;
  if (v && get_int(c, v, &n, "must be an integer >= 2")) {
    if (n < 2)
      grit_sc_problem(c, "must be an integer >= 2");
    else /* as grpc-java: above 10 is lowered to 10 */
      cfg->global.choice_count = n > 10 ? 10 : (uint32_t)n;
  }
  grit_sc_pop(c, m);
}

static void lb_set_defaults(grit_svccfg_global *g) {
  g->wrr = (grit_svccfg_wrr){
      .oob_reporting_period_ns = 10000000000,
      .blackout_period_ns = 10000000000,
      .weight_expiration_ns = 180000000000,
      .weight_update_period_ns = 1000000000,
      .error_utilization_penalty = 1.0,
  };
  g->ring_hash =
      (grit_svccfg_ring_hash){.min_ring_size = 1024, .max_ring_size = 4096};
  g->choice_count = 2;
}

static void parse_pick_first(sc_ctx *c, grit_svccfg *cfg, const json_t *o) {
  size_t m;
  json_t *v = field(c, o, "shuffleAddressList", &m);
  if (v && !json_is_boolean(v))
    grit_sc_problem(c, "must be true or false");
  else if (v)
    cfg->global.shuffle_address_list = json_is_true(v);
  grit_sc_pop(c, m);
}

/* ---- outlier_detection_experimental (SPEC OD-01; gRFC A50) ---- */

static void od_uint(sc_ctx *c, const json_t *o, const char *key, bool percent,
                    uint32_t *out) {
  size_t m;
  json_t *v = field(c, o, key, &m);
  int64_t n;
  const char *rule = percent ? "must be an integer percentage 0..100"
                             : "must be an integer 0..4294967295";
  if (v && get_int(c, v, &n, rule)) {
    if (n < 0 || n > (percent ? 100 : (int64_t)UINT32_MAX))
      grit_sc_problem(c, "%s", rule);
    else
      *out = (uint32_t)n;
  }
  grit_sc_pop(c, m);
}

static void od_duration(sc_ctx *c, const json_t *o, const char *key,
                        int64_t *out_ns, sc_dur *exact) {
  size_t m;
  json_t *v = field(c, o, key, &m);
  if (v)
    get_duration(c, v, false, out_ns, exact);
  grit_sc_pop(c, m);
}

static void parse_lb_list(sc_ctx *c, grit_svccfg *cfg, const json_t *arr,
                          bool child);

static void parse_od(sc_ctx *c, grit_svccfg *cfg, const json_t *o) {
  grit_svccfg_od *od = &cfg->global.od;
  /* gRFC A50 defaults. */
  *od = (grit_svccfg_od){
      .interval_ns = 10000000000,
      .base_ejection_time_ns = 30000000000,
      .max_ejection_time_ns = 300000000000,
      .max_ejection_percent = 10,
      .sr_stdev_factor = 1900,
      .sr_enforcement_percentage = 100,
      .sr_minimum_hosts = 5,
      .sr_request_volume = 100,
      .fp_threshold = 85,
      .fp_enforcement_percentage = 100,
      .fp_minimum_hosts = 5,
      .fp_request_volume = 50,
  };
  cfg->od_interval = (sc_dur){10, 0};
  cfg->od_base_ejection = (sc_dur){30, 0};
  cfg->od_max_ejection = (sc_dur){300, 0};
  cfg->global.has_outlier_detection = true;
  size_t m;
  json_t *v;
  if ((v = field(c, o, "interval", &m)) &&
      get_duration(c, v, false, &od->interval_ns, &cfg->od_interval) &&
      od->interval_ns < 1000000)
    grit_sc_problem(c, "must be at least 0.001s (grit's timers count ms)");
  grit_sc_pop(c, m);
  od_duration(c, o, "baseEjectionTime", &od->base_ejection_time_ns,
              &cfg->od_base_ejection);
  od_duration(c, o, "maxEjectionTime", &od->max_ejection_time_ns,
              &cfg->od_max_ejection);
  od_uint(c, o, "maxEjectionPercent", true, &od->max_ejection_percent);
  if ((v = field(c, o, "successRateEjection", &m))) {
    if (!json_is_object(v)) {
      grit_sc_problem(c, "must be an object");
    } else {
      od->has_success_rate = true;
      od_uint(c, v, "stdevFactor", false, &od->sr_stdev_factor);
      od_uint(c, v, "enforcementPercentage", true,
              &od->sr_enforcement_percentage);
      od_uint(c, v, "minimumHosts", false, &od->sr_minimum_hosts);
      od_uint(c, v, "requestVolume", false, &od->sr_request_volume);
    }
  }
  grit_sc_pop(c, m);
  if ((v = field(c, o, "failurePercentageEjection", &m))) {
    if (!json_is_object(v)) {
      grit_sc_problem(c, "must be an object");
    } else {
      od->has_failure_percentage = true;
      od_uint(c, v, "threshold", true, &od->fp_threshold);
      od_uint(c, v, "enforcementPercentage", true,
              &od->fp_enforcement_percentage);
      od_uint(c, v, "minimumHosts", false, &od->fp_minimum_hosts);
      od_uint(c, v, "requestVolume", false, &od->fp_request_volume);
    }
  }
  grit_sc_pop(c, m);
  /* gRFC A50: childPolicy is required, a loadBalancingConfig list. */
  if ((v = required(c, o, "childPolicy", &m)))
    parse_lb_list(c, cfg, v, true);
  grit_sc_pop(c, m);
}

/* ---- healthCheckConfig (SPEC HC-01; gRFC A17) ---- */

static void parse_health(sc_ctx *c, grit_svccfg *cfg, const json_t *o) {
  if (!json_is_object(o)) {
    grit_sc_problem(c, "must be an object like {\"serviceName\": \"\"}");
    return;
  }
  size_t m;
  json_t *v = field(c, o, "serviceName", &m);
  const char *name = "";
  if (v && !json_is_string(v))
    grit_sc_problem(c, "must be a string");
  else if (v)
    name = json_string_value(v);
  grit_sc_pop(c, m);
  if (c->invalid)
    return;
  cfg->health_name = grit_strdup(name);
  if (!cfg->health_name)
    grit_sc_nomem(c);
  cfg->global.health_check_service = cfg->health_name;
}

/* gRFC A21-era rules as grpc-core applies them: entries are checked in
 * order until the first known policy; entries after it are not looked at.
 * |child|: the list is outlier_detection_experimental's childPolicy, where
 * grit takes pick_first or round_robin only. */
static void parse_lb_list(sc_ctx *c, grit_svccfg *cfg, const json_t *arr,
                          bool child) {
  if (!json_is_array(arr)) {
    grit_sc_problem(c, "must be an array of {\"<policy>\": {...}}");
    return;
  }
  size_t i;
  json_t *e;
  json_array_foreach(arr, i, e) {
    size_t m = grit_sc_push_index(c, i);
    if (!json_is_object(e) || json_object_size(e) != 1) {
      grit_sc_problem(c, "must be an object with exactly one key, the "
                         "policy name");
      grit_sc_pop(c, m);
      continue;
    }
    const char *name = json_object_iter_key(json_object_iter((json_t *)e));
    json_t *conf = json_object_iter_value(json_object_iter((json_t *)e));
    grit_svccfg_lb lb = GRIT_LB_PICK_FIRST;
    bool known = lb_known(name, &lb);
    bool od = !child && strcmp(name, "outlier_detection_experimental") == 0;
    if (known || od)
      grit_sc_push_key(c, name);
    if (!json_is_object(conf)) {
      grit_sc_problem(c, "the policy's config must be an object");
    } else if (od) {
      parse_od(c, cfg, conf);
    } else if (known) {
      cfg->global.lb = lb;
      cfg->lb_from_config = true;
      switch (lb) {
      case GRIT_LB_PICK_FIRST:
        parse_pick_first(c, cfg, conf);
        break;
      case GRIT_LB_ROUND_ROBIN:
        break;
      case GRIT_LB_WEIGHTED_ROUND_ROBIN:
        parse_wrr(c, cfg, conf);
        break;
      case GRIT_LB_RING_HASH:
        parse_ring_hash(c, cfg, conf);
        break;
      case GRIT_LB_LEAST_REQUEST:
        parse_least_request(c, cfg, conf);
        break;
      }
    }
    grit_sc_pop(c, m);
    if (known || od)
      return;
  }
  if (child)
    grit_sc_problem(c, "no known child policy in the list (grit takes "
                       "pick_first, round_robin, weighted_round_robin, "
                       "ring_hash_experimental or "
                       "least_request_experimental here)");
  else
    grit_sc_problem(c, "no known LB policy in the list (grit knows "
                       "pick_first, round_robin, weighted_round_robin, "
                       "ring_hash_experimental, least_request_experimental "
                       "and outlier_detection_experimental)");
}

static void parse_lb_config(sc_ctx *c, grit_svccfg *cfg, const json_t *arr) {
  parse_lb_list(c, cfg, arr, false);
}

static void parse_lb_policy(sc_ctx *c, grit_svccfg *cfg, const json_t *v) {
  if (!json_is_string(v)) {
    grit_sc_problem(c, "must be a string");
    return;
  }
  const char *s = json_string_value(v);
  grit_svccfg_lb lb;
  if (strcasecmp(s, "pick_first") == 0)
    lb = GRIT_LB_PICK_FIRST;
  else if (strcasecmp(s, "round_robin") == 0)
    lb = GRIT_LB_ROUND_ROBIN;
  else {
    grit_sc_problem(c,
                    "unknown LB policy \"%.64s\" (grit knows pick_first "
                    "and round_robin)",
                    s);
    return;
  }
  /* SPEC SC-08: loadBalancingConfig wins when both are present; the older
   * field is still validated, as grpc-core does. */
  if (!cfg->lb_from_config)
    cfg->global.lb = lb;
}

/* ---- top level ---- */

static void svccfg_free(grit_svccfg *cfg) {
  if (!cfg)
    return;
  for (size_t i = 0; i < cfg->n_names; i++)
    grit_free(cfg->names[i].key);
  grit_free(cfg->names);
  grit_free(cfg->sorted);
  grit_free(cfg->entries);
  grit_free(cfg->health_name);
  grit_free(cfg->hash_header);
  grit_free(cfg);
}

grit_svccfg *grit_sc_parse_value(sc_ctx *c, const json_t *root,
                                 const grit_svccfg_opts *o) {
  if (!json_is_object(root)) {
    grit_sc_problem(c, "the service config must be a JSON object");
    return NULL;
  }
  grit_svccfg *cfg = grit_calloc(1, sizeof(*cfg));
  if (!cfg) {
    grit_sc_nomem(c);
    return NULL;
  }
  cfg->refs = 1;
  lb_set_defaults(&cfg->global);
  cfg->max_attempts_cap = o && o->max_attempts_cap
                              ? o->max_attempts_cap
                              : SC_DEFAULT_MAX_ATTEMPTS_CAP;
  size_t m;
  json_t *v;
  if ((v = field(c, root, "methodConfig", &m)))
    parse_method_configs(c, cfg, v);
  grit_sc_pop(c, m);
  if (!c->nomem)
    index_names(c, cfg);
  if ((v = field(c, root, "retryThrottling", &m)))
    parse_throttling(c, cfg, v);
  grit_sc_pop(c, m);
  if ((v = field(c, root, "loadBalancingConfig", &m)))
    parse_lb_config(c, cfg, v);
  grit_sc_pop(c, m);
  if ((v = field(c, root, "loadBalancingPolicy", &m)))
    parse_lb_policy(c, cfg, v);
  grit_sc_pop(c, m);
  if ((v = field(c, root, "healthCheckConfig", &m)))
    parse_health(c, cfg, v);
  grit_sc_pop(c, m);

  if (c->nomem || c->invalid) {
    svccfg_free(cfg);
    if (c->nomem)
      grit_error_set(c->d, GRIT_ERR_NOMEM, "", "out of memory");
    return NULL;
  }
  return cfg;
}

grit_svccfg *grit_svccfg_parse(const char *json, size_t len,
                               const grit_svccfg_opts *o,
                               grit_error_detail *d) {
  sc_ctx c;
  grit_sc_ctx_init(&c, d, o);
  json_t *root = grit_sc_load(&c, json, len);
  if (!root)
    return NULL;
  grit_svccfg *cfg = grit_sc_parse_value(&c, root, o);
  json_decref(root);
  if (cfg)
    GRIT_TRACE(GRIT_TRACE_CONFIG, GRIT_LEVEL_DEBUG,
               "config: parsed, %zu method configs, %zu names", cfg->n_entries,
               cfg->n_names);
  return cfg;
}

grit_svccfg *grit_svccfg_ref(grit_svccfg *cfg) {
  if (cfg)
    __atomic_fetch_add(&cfg->refs, 1, __ATOMIC_RELAXED);
  return cfg;
}

void grit_svccfg_unref(grit_svccfg *cfg) {
  if (cfg && __atomic_sub_fetch(&cfg->refs, 1, __ATOMIC_ACQ_REL) == 0)
    svccfg_free(cfg);
}

/* ---- lookup (SPEC SC-05) ---- */

static const grit_method_cfg *find_key(const grit_svccfg *cfg, const char *key,
                                       size_t len) {
  size_t lo = 0, hi = cfg->n_names;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const char *k = cfg->sorted[mid]->key;
    int r = strncmp(k, key, len);
    if (r == 0 && k[len] != '\0')
      r = 1;
    if (r == 0)
      return &cfg->entries[cfg->sorted[mid]->entry].cfg;
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const grit_method_cfg *grit_svccfg_find(const grit_svccfg *cfg,
                                        const char *path) {
  if (!cfg || !path || cfg->n_names == 0)
    return NULL;
  size_t len = strlen(path);
  const grit_method_cfg *mc = NULL;
  /* Exact "/S/M", then "/S/" (up to the last '/'), then the default "". */
  if (len > 0)
    mc = find_key(cfg, path, len);
  const char *slash = strrchr(path, '/');
  if (!mc && slash && slash != path)
    mc = find_key(cfg, path, (size_t)(slash - path) + 1);
  if (!mc)
    mc = find_key(cfg, "", 0);
  return mc;
}

bool grit_svccfg_names_method(const grit_svccfg *cfg, const char *path) {
  if (!cfg || !path || cfg->n_names == 0 || path[0] != '/')
    return false;
  const char *slash = strrchr(path, '/');
  if (slash == path)
    return false;
  return find_key(cfg, path, strlen(path)) ||
         find_key(cfg, path, (size_t)(slash - path) + 1);
}

const grit_svccfg_global *grit_svccfg_get_global(const grit_svccfg *cfg) {
  static const grit_svccfg_global empty = {.lb = GRIT_LB_PICK_FIRST};
  return cfg ? &cfg->global : &empty;
}
