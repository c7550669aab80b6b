/*
 * service_config: gRPC service config JSON -> immutable, refcounted policy
 * structs (SPEC SC-01..SC-12), and the DNS TXT record choice (DNS-02..04).
 * Called by channel/ (parse, choose, swap), retry/ and hedging/ (read the
 * policy structs). Pure: no loop, no clock, no jansson type in this header.
 * Layout: floor 1 of docs/layout.md.
 */
#ifndef GRIT_SERVICE_CONFIG_H
#define GRIT_SERVICE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* A parsed config: immutable once returned, shared by reference. */
typedef struct grit_svccfg grit_svccfg;

/* Bit (1u << code) for each gRPC status code in a code set. */
#define GRIT_CODE_BIT(code) (1u << (unsigned)(code))

/* retryPolicy (SPEC SC-10; gRFC A6). Durations in ns, saturated at
 * INT64_MAX (about 292 years) when the JSON value is larger. */
typedef struct grit_retry_policy {
  uint32_t max_attempts;      /* >= 2 before the cap; after the cap */
  int64_t initial_backoff_ns; /* > 0 */
  int64_t max_backoff_ns;     /* > 0 */
  double backoff_multiplier;  /* > 0 */
  uint32_t retryable_codes;   /* GRIT_CODE_BIT set; never has OK */
  bool has_per_attempt_recv_timeout;
  int64_t per_attempt_recv_timeout_ns; /* > 0 when present */
} grit_retry_policy;

/* hedgingPolicy (SPEC SC-11). */
typedef struct grit_hedging_policy {
  uint32_t max_attempts;    /* after the cap */
  int64_t hedging_delay_ns; /* 0 when absent: all attempts at once */
  uint32_t non_fatal_codes; /* GRIT_CODE_BIT set, may be 0 */
} grit_hedging_policy;

typedef enum grit_svccfg_wfr {
  GRIT_WFR_UNSET = 0,
  GRIT_WFR_FALSE = 1,
  GRIT_WFR_TRUE = 2,
} grit_svccfg_wfr;

typedef enum grit_svccfg_policy {
  GRIT_POLICY_NONE = 0,
  GRIT_POLICY_RETRY = 1,
  GRIT_POLICY_HEDGING = 2,
} grit_svccfg_policy;

/* One methodConfig entry (SPEC SC-07, SC-09). */
typedef struct grit_method_cfg {
  bool has_timeout;
  int64_t timeout_ns; /* >= 0 */
  grit_svccfg_wfr wait_for_ready;
  bool has_max_request_bytes;
  uint64_t max_request_bytes;
  bool has_max_response_bytes;
  uint64_t max_response_bytes;
  grit_svccfg_policy policy; /* which of retry / hedging is meaningful */
  grit_retry_policy retry;
  grit_hedging_policy hedging;
} grit_method_cfg;

typedef enum grit_svccfg_lb {
  GRIT_LB_PICK_FIRST = 0,
  GRIT_LB_ROUND_ROBIN = 1,
  GRIT_LB_WEIGHTED_ROUND_ROBIN = 2, /* LP-02 */
  GRIT_LB_RING_HASH = 3,            /* LP-03 */
  GRIT_LB_LEAST_REQUEST = 4,        /* LP-04 */
} grit_svccfg_lb;

/* weighted_round_robin (SPEC LP-02; gRFC A58); defaults A58's. */
typedef struct grit_svccfg_wrr {
  bool enable_oob_load_report;      /* false */
  int64_t oob_reporting_period_ns;  /* 10 s */
  int64_t blackout_period_ns;       /* 10 s */
  int64_t weight_expiration_ns;     /* 3 min */
  int64_t weight_update_period_ns;  /* 1 s; raised to 100 ms if below */
  double error_utilization_penalty; /* 1.0; >= 0 */
} grit_svccfg_wrr;

/* ring_hash_experimental (LP-03; A42, A76) and least_request (LP-04). */
typedef struct grit_svccfg_ring_hash {
  uint64_t min_ring_size;          /* 1024; 1..8388608 */
  uint64_t max_ring_size;          /* 4096; 1..8388608, >= min */
  const char *request_hash_header; /* NULL: none (random hash per call) */
} grit_svccfg_ring_hash;

/* outlier_detection_experimental (SPEC OD-01; gRFC A50). Percentages are
 * 0..100; the defaults are A50's. */
typedef struct grit_svccfg_od {
  int64_t interval_ns;           /* default 10 s; > 0 */
  int64_t base_ejection_time_ns; /* default 30 s */
  int64_t max_ejection_time_ns;  /* default 300 s */
  uint32_t max_ejection_percent; /* default 10 */
  bool has_success_rate;
  uint32_t sr_stdev_factor;           /* thousandths; default 1900 */
  uint32_t sr_enforcement_percentage; /* default 100 */
  uint32_t sr_minimum_hosts;          /* default 5 */
  uint32_t sr_request_volume;         /* default 100 */
  bool has_failure_percentage;
  uint32_t fp_threshold;              /* default 85 */
  uint32_t fp_enforcement_percentage; /* default 100 */
  uint32_t fp_minimum_hosts;          /* default 5 */
  uint32_t fp_request_volume;         /* default 50 */
} grit_svccfg_od;

/* Top-level settings (SPEC SC-08, SC-12). */
typedef struct grit_svccfg_global {
  bool has_throttling;
  uint32_t max_tokens_milli;  /* maxTokens * 1000, in (0, 1000000] */
  uint32_t token_ratio_milli; /* truncated thousandths, in [1, 1000000] */
  grit_svccfg_lb lb;          /* default pick_first */
  bool shuffle_address_list;  /* pick_first's shuffleAddressList */
  /* healthCheckConfig.serviceName (SPEC HC-01): NULL when absent; may be
   * "" (the server's overall health). Lives as long as the config. */
  const char *health_check_service;
  /* loadBalancingConfig chose outlier_detection_experimental (OD-01): |od|
   * holds its settings and |lb| (above) its child policy. */
  bool has_outlier_detection;
  grit_svccfg_od od;
  /* The settings of |lb| when it is one of the load-aware policies. */
  grit_svccfg_wrr wrr;
  grit_svccfg_ring_hash ring_hash;
  uint32_t choice_count; /* least_request: 2, clamped to 2..10 */
} grit_svccfg_global;

/* Parse options; NULL means all defaults. */
typedef struct grit_svccfg_opts {
  uint32_t max_attempts_cap; /* 0: 5 (GRIT_ARG_MAX_ATTEMPTS_CAP) */
  /* When set, parsing goes on after a validation problem and this is called
   * once per problem (borrowed detail, valid during the call), in document
   * order; the result is still NULL when there was any. */
  void (*on_problem)(const grit_error_detail *problem, void *user_data);
  void *user_data;
} grit_svccfg_opts;

/* grit_svccfg_parse: parse and validate |len| bytes of JSON. Returns a new
 * reference, or NULL with |d| (may be NULL) set: GRIT_ERR_INVALID_CONFIG
 * with the JSON path of the first problem and the rule broken, or
 * GRIT_ERR_NOMEM. JSON syntax errors (and duplicate object keys) are
 * INVALID_CONFIG at path "$". */
grit_svccfg *grit_svccfg_parse(const char *json, size_t len,
                               const grit_svccfg_opts *o, grit_error_detail *d);
/* grit_svccfg_ref / _unref: atomic; _unref(NULL) is a no-op. */
grit_svccfg *grit_svccfg_ref(grit_svccfg *cfg);
void grit_svccfg_unref(grit_svccfg *cfg);

/* grit_svccfg_find: method config for |path| ("/S/M"): exact name, then
 * the service's, then the default, else NULL (SPEC SC-05). Borrowed, valid
 * while |cfg| lives. */
const grit_method_cfg *grit_svccfg_find(const grit_svccfg *cfg,
                                        const char *path);
/* grit_svccfg_names_method: whether a methodConfig names |path| ("/S/M")
 * exactly or by its service (not the default entry): a method the
 * operator knows, so its metrics carry its name (SPEC OP-01, gRFC A66). */
bool grit_svccfg_names_method(const grit_svccfg *cfg, const char *path);
/* grit_svccfg_global: throttling and LB settings; borrowed like _find. */
const grit_svccfg_global *grit_svccfg_get_global(const grit_svccfg *cfg);

/* grit_svccfg_describe: plain-English rendering for `grit config check`.
 * |*out| is new (grit_free), NUL-terminated. GRIT_OK; GRIT_ERR_NOMEM;
 * GRIT_ERR_INVALID_ARG (|cfg| NULL). */
grit_err grit_svccfg_describe(const grit_svccfg *cfg, char **out);

/* grit_svccfg_lost_policies: the retry and hedging policies of |old| that
 * |now| (may be NULL: no config) no longer gives the same names, as
 * "retryPolicy (3 attempts) for /pkg.Svc/Get, hedgingPolicy (2 attempts)
 * for every method of pkg.Other"; |*out| is new (grit_free),
 * NULL when none was lost. GRIT_OK; GRIT_ERR_NOMEM; GRIT_ERR_INVALID_ARG
 * (|old| NULL). */
grit_err grit_svccfg_lost_policies(const grit_svccfg *old,
                                   const grit_svccfg *now, char **out);

/* grit_svccfg_parse_duration: proto3 JSON duration text (without quotes),
 * "<sec>[.<1-9 digits>]s", 0 <= sec <= 315576000000 (SPEC SC-06), into ns
 * (saturated at INT64_MAX). GRIT_OK or GRIT_ERR_PARSE with |d| set. */
grit_err grit_svccfg_parse_duration(const char *s, size_t len, int64_t *out_ns,
                                    grit_error_detail *d);
/* grit_svccfg_parse_status_code: one element of retryableStatusCodes or
 * nonFatalStatusCodes, as JSON text: an integer 1..16 or a name matched
 * case-insensitively. OK (0, "OK") is rejected. GRIT_OK or GRIT_ERR_PARSE
 * with |d| set. */
grit_err grit_svccfg_parse_status_code(const char *json, size_t len,
                                       grit_status_code *out,
                                       grit_error_detail *d);

/* One character-string of a DNS TXT answer, in answer order, as c-ares'
 * ares_txt_ext gives them; record_start marks the first string of a
 * record (the first chunk always starts one). */
typedef struct grit_txt_chunk {
  const uint8_t *data;
  size_t len;
  bool record_start;
} grit_txt_chunk;

/* grit_svccfg_txt_extract: the first record whose first string starts with
 * "grpc_config=": its strings concatenated, prefix removed (DNS-02).
 * |*value| is new (grit_free), NUL-terminated, |*len| bytes. GRIT_OK;
 * GRIT_ERR_NOT_FOUND (no such record); GRIT_ERR_NOMEM. */
grit_err grit_svccfg_txt_extract(const grit_txt_chunk *chunks, size_t n,
                                 char **value, size_t *len);
/* grit_svccfg_choose_txt: pick from the JSON array of choices (DNS-03/04)
 * for language "c" and |hostname| (NULL matches no clientHostname list);
 * percentages are drawn from |rng| (NULL: a choice with 0 < p < 100 never
 * matches). Every choice's shape is checked, only the chosen serviceConfig
 * is returned, unvalidated, as compact JSON for grit_svccfg_parse: |*chosen|
 * is new (grit_free). GRIT_OK; GRIT_ERR_NOT_FOUND (no choice matched);
 * GRIT_ERR_INVALID_CONFIG (|d| has the path, e.g. "$[1].percentage");
 * GRIT_ERR_NOMEM. */
grit_err grit_svccfg_choose_txt(const char *txt, size_t len,
                                const char *hostname, grit_rng *rng,
                                char **chosen, size_t *chosen_len,
                                grit_error_detail *d);

#endif
