/* Warnings for `grit config check` (issue 20 point 5): what a valid or
 * invalid config holds that is accepted, but probably not what its author
 * meant, or not what another gRPC client accepts. Unknown fields (SC-01
 * ignores them: a typo such as "timout" silently does nothing), integer
 * or non-canonical status codes (grit takes them, SC-10; grpc-core 1.51
 * rejects integers, and every language's client reads a TXT record), a
 * zero timeout (every call fails at once), a tokenRatio truncated to
 * thousandths (SC-12), LB policies skipped in loadBalancingConfig (SC-08).
 * A separate walk over the JSON, so the parser stays as it is. */
#include "service_config/service_config_int.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct lint {
  grit_buf *b;
  const char *prefix; /* replaces the leading "$" */
  size_t count;
  grit_err rv;
} lint;

static void warn(lint *l, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void warn(lint *l, const char *path, const char *fmt, ...) {
  l->count++;
  if (l->rv != GRIT_OK)
    return;
  char reason[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof(reason), fmt, ap);
  va_end(ap);
  l->rv = grit_buf_appendf(l->b, "  warning: %s%s: %s\n", l->prefix, path + 1,
                           reason);
}

/* Levenshtein distance, capped: enough to suggest "timeout" for "timout". */
static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 40 || lb > 40)
    return 99;
  size_t prev[41], cur[41];
  for (size_t j = 0; j <= lb; j++)
    prev[j] = j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) !=
                                  tolower((unsigned char)b[j - 1]));
      size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    memcpy(prev, cur, sizeof(prev));
  }
  return prev[lb];
}

/* Warn about every key of |obj| not in |known| (NULL-terminated). */
static void unknown_keys(lint *l, const json_t *obj, const char *path,
                         const char *const *known) {
  if (!json_is_object(obj))
    return;
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)obj, key, v) {
    const char *best = NULL;
    size_t best_d = 99;
    bool found = false;
    for (const char *const *k = known; *k; k++) {
      if (strcmp(key, *k) == 0) {
        found = true;
        break;
      }
      size_t d = edit_distance(key, *k);
      if (d < best_d) {
        best_d = d;
        best = *k;
      }
    }
    if (found)
      continue;
    size_t limit = strlen(key) > 6 ? 2 : 1;
    if (best && best_d <= limit)
      warn(l, path, "unknown field \"%.64s\" ignored (did you mean \"%s\"?)",
           key, best);
    else
      warn(l, path, "unknown field \"%.64s\" ignored", key);
  }
}

static void codes(lint *l, const json_t *arr, const char *path) {
  size_t i;
  json_t *e;
  json_array_foreach(arr, i, e) {
    char p[300];
    snprintf(p, sizeof(p), "%s[%zu]", path, i);
    grit_status_code code;
    const char *why;
    if (!grit_sc_status_code_from_json(e, &code, &why))
      continue; /* the parser reports it */
    const char *name = grit_status_code_name(code);
    if (json_is_integer(e))
      warn(l, p,
           "integer status code %d accepted here; grpc-core rejects it: "
           "write \"%s\"",
           (int)code, name);
    else if (json_is_string(e) && strcmp(json_string_value(e), name) != 0)
      warn(l, p,
           "status code \"%.32s\" accepted here; other gRPC clients may "
           "reject it: write \"%s\"",
           json_string_value(e), name);
  }
}

static const char *const k_top[] = {
    "methodConfig",    "loadBalancingConfig", "loadBalancingPolicy",
    "retryThrottling", "healthCheckConfig",   NULL};
static const char *const k_mc[] = {"name",
                                   "waitForReady",
                                   "timeout",
                                   "maxRequestMessageBytes",
                                   "maxResponseMessageBytes",
                                   "retryPolicy",
                                   "hedgingPolicy",
                                   NULL};
static const char *const k_name[] = {"service", "method", NULL};
static const char *const k_retry[] = {"maxAttempts",
                                      "initialBackoff",
                                      "maxBackoff",
                                      "backoffMultiplier",
                                      "retryableStatusCodes",
                                      "perAttemptRecvTimeout",
                                      NULL};
static const char *const k_hedge[] = {"maxAttempts", "hedgingDelay",
                                      "nonFatalStatusCodes", NULL};
static const char *const k_throttle[] = {"maxTokens", "tokenRatio", NULL};

static void method_config(lint *l, const json_t *mc, const char *path) {
  char p[300];
  unknown_keys(l, mc, path, k_mc);
  json_t *names = grit_sc_get(mc, "name");
  size_t i;
  json_t *n;
  json_array_foreach(names, i, n) {
    snprintf(p, sizeof(p), "%s.name[%zu]", path, i);
    unknown_keys(l, n, p, k_name);
  }
  json_t *t = grit_sc_get(mc, "timeout");
  int64_t ns;
  sc_dur exact;
  const char *why;
  if (json_is_string(t) &&
      grit_sc_duration_from_text(json_string_value(t), json_string_length(t),
                                 &ns, &exact, &why) &&
      ns == 0) {
    snprintf(p, sizeof(p), "%s.timeout", path);
    warn(l, p, "a zero timeout fails every call at once (DEADLINE_EXCEEDED)");
  }
  json_t *r = grit_sc_get(mc, "retryPolicy");
  if (json_is_object(r)) {
    snprintf(p, sizeof(p), "%s.retryPolicy", path);
    unknown_keys(l, r, p, k_retry);
    snprintf(p, sizeof(p), "%s.retryPolicy.retryableStatusCodes", path);
    codes(l, grit_sc_get(r, "retryableStatusCodes"), p);
  }
  json_t *h = grit_sc_get(mc, "hedgingPolicy");
  if (json_is_object(h)) {
    snprintf(p, sizeof(p), "%s.hedgingPolicy", path);
    unknown_keys(l, h, p, k_hedge);
    snprintf(p, sizeof(p), "%s.hedgingPolicy.nonFatalStatusCodes", path);
    codes(l, grit_sc_get(h, "nonFatalStatusCodes"), p);
  }
}

/* The fields each policy grit knows takes (SC-08, OD-01, LP-02..LP-04),
 * or NULL for a policy grit does not know. */
static const char *const *lb_policy_keys(const char *name) {
  static const char *const k_pf[] = {"shuffleAddressList", NULL};
  static const char *const k_none[] = {NULL};
  static const char *const k_wrr[] = {"enableOobLoadReport",
                                      "oobReportingPeriod",
                                      "blackoutPeriod",
                                      "weightExpirationPeriod",
                                      "weightUpdatePeriod",
                                      "errorUtilizationPenalty",
                                      NULL};
  static const char *const k_rh[] = {"minRingSize", "maxRingSize",
                                     "requestHashHeader", NULL};
  static const char *const k_lr[] = {"choiceCount", NULL};
  static const char *const k_od[] = {"interval",
                                     "baseEjectionTime",
                                     "maxEjectionTime",
                                     "maxEjectionPercent",
                                     "successRateEjection",
                                     "failurePercentageEjection",
                                     "childPolicy",
                                     NULL};
  static const struct {
    const char *name;
    const char *const *keys;
  } all[] = {{"pick_first", k_pf},
             {"round_robin", k_none},
             {"weighted_round_robin", k_wrr},
             {"ring_hash_experimental", k_rh},
             {"least_request_experimental", k_lr},
             {"outlier_detection_experimental", k_od}};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    if (strcmp(all[i].name, name) == 0)
      return all[i].keys;
  }
  return NULL;
}

static void lb_config(lint *l, const json_t *arr, const char *path,
                      bool child) {
  size_t i;
  json_t *e;
  bool chosen = false;
  json_array_foreach(arr, i, e) {
    if (!json_is_object(e) || json_object_size(e) != 1)
      continue; /* the parser reports it */
    const char *name = json_object_iter_key(json_object_iter((json_t *)e));
    /* The parser's own rule: outlier_detection_experimental is applied,
     * not skipped (issue 28). */
    bool known = grit_sc_lb_name_known(name, child);
    char p[300];
    snprintf(p, sizeof(p), "%s[%zu]", path, i);
    if (chosen)
      warn(l, p, "\"%.64s\" not used: an earlier policy was chosen", name);
    else if (!known)
      warn(l, p,
           "\"%.64s\" skipped: grit does not know this policy%s (it knows "
           "pick_first, round_robin, weighted_round_robin, "
           "ring_hash_experimental, least_request_experimental%s)",
           name, child ? " as a child policy" : "",
           child ? "" : " and outlier_detection_experimental");
    const char *const *keys = lb_policy_keys(name);
    if (known && !chosen && keys) { /* LP-02..LP-04: misspelt fields */
      char kp[400];
      snprintf(kp, sizeof(kp), "%s.%.64s", p, name);
      unknown_keys(l, json_object_iter_value(json_object_iter((json_t *)e)), kp,
                   keys);
    }
    if (known && !chosen && !child &&
        strcmp(name, "outlier_detection_experimental") == 0) {
      json_t *conf = json_object_iter_value(json_object_iter((json_t *)e));
      json_t *kids = grit_sc_get(conf, "childPolicy");
      if (json_is_array(kids)) {
        char cp[360];
        snprintf(cp, sizeof(cp),
                 "%s.outlier_detection_experimental.childPolicy", p);
        lb_config(l, kids, cp, true);
      }
    }
    chosen = chosen || known;
  }
}

static void throttling(lint *l, const json_t *t) {
  json_t *r = grit_sc_get(t, "tokenRatio");
  unknown_keys(l, t, "$.retryThrottling", k_throttle);
  if (!json_is_number(r) || !(json_number_value(r) > 0))
    return;
  double x = json_number_value(r);
  double milli = (double)llround(x * 1e9) / 1e6;
  if (x < 1000.0 && milli != floor(milli))
    warn(l, "$.retryThrottling.tokenRatio",
         "%g is kept as %.3f (truncated to thousandths, as gRFC A6 says)", x,
         floor(milli) / 1000.0);
}

grit_err grit_sc_lint(grit_buf *b, const json_t *root, const char *prefix,
                      size_t *count) {
  lint l = {.b = b, .prefix = prefix ? prefix : "$", .rv = GRIT_OK};
  if (json_is_object(root)) {
    unknown_keys(&l, root, "$", k_top);
    json_t *mcs = grit_sc_get(root, "methodConfig");
    size_t i;
    json_t *mc;
    json_array_foreach(mcs, i, mc) {
      char p[64];
      snprintf(p, sizeof(p), "$.methodConfig[%zu]", i);
      method_config(&l, mc, p);
    }
    json_t *lbc = grit_sc_get(root, "loadBalancingConfig");
    if (json_is_array(lbc))
      lb_config(&l, lbc, "$.loadBalancingConfig", false);
    json_t *t = grit_sc_get(root, "retryThrottling");
    if (json_is_object(t))
      throttling(&l, t);
  }
  if (count)
    *count = l.count;
  return l.rv;
}
