/*
 * service_config internals shared by the .c files of service_config/ only: the
 * config layout, the validation context that builds JSON paths and reports
 * problems, and the jansson-facing helpers.
 */
#ifndef GRIT_SERVICE_CONFIG_INT_H
#define GRIT_SERVICE_CONFIG_INT_H

#include "service_config/service_config.h"

#include <jansson.h>

/* A duration as written (SPEC SC-06): sec <= 315576000000, nanos below
 * 10^9. The policies' _ns fields saturate at INT64_MAX ns (about 292
 * years), so describe.c prints these instead. */
typedef struct sc_dur {
  int64_t sec;
  int32_t nanos;
} sc_dur;

/* One methodConfig entry that has names. */
typedef struct sc_entry {
  grit_method_cfg cfg;
  size_t json_index;          /* index in $.methodConfig */
  size_t first_name, n_names; /* its names in grit_svccfg.names */
  int64_t attempts_requested; /* maxAttempts as written, before the cap */
  /* The durations of cfg as written, for describe.c. */
  sc_dur timeout, initial_backoff, max_backoff, recv_timeout, hedging_delay;
} sc_entry;

/* One name: its lookup key ("/S/M", "/S/" or "" for the default). */
typedef struct sc_name {
  char *key;
  size_t entry;     /* index in grit_svccfg.entries */
  size_t json_name; /* index in the entry's "name" array */
} sc_name;

struct grit_svccfg {
  uint32_t refs;
  grit_svccfg_global global;
  bool lb_from_config; /* chosen by loadBalancingConfig, not the policy */
  char *health_name;   /* healthCheckConfig.serviceName (HC-01), or NULL */
  sc_dur od_interval, od_base_ejection, od_max_ejection; /* as written */
  char *hash_header; /* ring_hash requestHashHeader (LP-03), or NULL */
  uint32_t max_attempts_cap;
  size_t n_entries, n_names;
  sc_entry *entries;
  sc_name *names;   /* document order */
  sc_name **sorted; /* by key, for bsearch */
};

/* Validation context: the JSON path being checked and how to report. */
typedef struct sc_ctx {
  grit_error_detail *d; /* first problem; may be NULL */
  void (*on_problem)(const grit_error_detail *problem, void *user_data);
  void *user_data;
  bool invalid; /* at least one problem reported */
  bool nomem;
  char path[256];
  size_t plen;
} sc_ctx;

void grit_sc_ctx_init(sc_ctx *c, grit_error_detail *d,
                      const grit_svccfg_opts *o);
/* Append ".key" or "[i]" to the path; return the mark to restore. */
size_t grit_sc_push_key(sc_ctx *c, const char *key);
size_t grit_sc_push_index(sc_ctx *c, size_t i);
void grit_sc_pop(sc_ctx *c, size_t mark);
/* Report a validation problem at the current path. */
void grit_sc_problem(sc_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void grit_sc_nomem(sc_ctx *c);

/* Member |key| of |obj|, with JSON null treated as absent (SPEC SC-01). */
json_t *grit_sc_get(const json_t *obj, const char *key);
/* Load JSON text with grit's flags: duplicate keys rejected (grpc-core's
 * reader does the same), any top-level value. Syntax errors go to |c|. */
json_t *grit_sc_load(sc_ctx *c, const char *text, size_t len);

/* Element rules shared with the standalone parsers; on failure they return
 * false and set *why to a static reason. */
bool grit_sc_status_code_from_json(const json_t *v, grit_status_code *out,
                                   const char **why);
bool grit_sc_duration_from_text(const char *s, size_t len, int64_t *out_ns,
                                sc_dur *exact, const char **why);

/* Parse an already-loaded top-level value (SC-01..SC-12). */
grit_svccfg *grit_sc_parse_value(sc_ctx *c, const json_t *root,
                                 const grit_svccfg_opts *o);

/* Rendering helpers shared by describe.c and public.c. */
grit_err grit_sc_append_duration(grit_buf *b, sc_dur d);
grit_err grit_sc_append_codes(grit_buf *b, uint32_t mask);
/* Append |cfg|'s description, each line prefixed by |indent|. */
grit_err grit_sc_describe_into(grit_buf *b, const grit_svccfg *cfg,
                               const char *indent);
/* Problems list and per-choice verdicts of a TXT value for `grit config
 * check --dns`. *verdict: GRIT_OK, GRIT_ERR_INVALID_CONFIG (the TXT value
 * or a config this client may choose is invalid) or GRIT_ERR_NOT_FOUND (no
 * choice can match this client). Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_sc_txt_report(grit_buf *b, const char *txt, size_t len,
                            const char *hostname, const char *language,
                            grit_err *verdict);
/* lint.c: append "  warning: <path>: <reason>" lines for what |root|
 * holds that is accepted but likely wrong (unknown fields, integer status
 * codes, a zero timeout, a truncated tokenRatio, skipped LB policies);
 * |prefix| replaces the "$" of paths. *count: how many. GRIT_OK or
 * GRIT_ERR_NOMEM. */
/* Whether the parser takes |name| in a loadBalancingConfig list (|child|:
 * outlier_detection_experimental's childPolicy list), the same rule
 * parse_lb_list applies, so `grit config check` warns exactly about the
 * entries the parser skips. */
bool grit_sc_lb_name_known(const char *name, bool child);
grit_err grit_sc_lint(grit_buf *b, const json_t *root, const char *prefix,
                      size_t *count);

#endif
