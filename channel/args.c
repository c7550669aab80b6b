/* Channel arguments: one table names every key, its type, range and place
 * in grit_chan_opts; setters and copies are driven by it. */
#include "channel/channel_int.h"

#include <string.h>

typedef struct arg_spec {
  const char *key;
  bool is_string;
  int64_t min, max;
  size_t offset;
  bool tls_only; /* TLS material: setting it asks for TLS (AP-05) */
} arg_spec;

#define INT_ARG(k, field, lo, hi)                                              \
  { (k), false, (lo), (hi), offsetof(grit_chan_opts, field), false }
#define STR_ARG(k, field)                                                      \
  { (k), true, 0, 0, offsetof(grit_chan_opts, field), false }
#define TLS_INT_ARG(k, field, lo, hi)                                          \
  { (k), false, (lo), (hi), offsetof(grit_chan_opts, field), true }
#define TLS_STR_ARG(k, field)                                                  \
  { (k), true, 0, 0, offsetof(grit_chan_opts, field), true }
#define MS_MAX ((int64_t)1 << 40)

static const arg_spec specs[] = {
    STR_ARG(GRIT_ARG_SERVICE_CONFIG, service_config),
    INT_ARG(GRIT_ARG_IGNORE_RESOLVER_CONFIG, ignore_resolver_config, 0, 1),
    INT_ARG(GRIT_ARG_DNS_ENABLE_TXT, dns_enable_txt, 0, 1),
    STR_ARG(GRIT_ARG_DNS_SERVER, dns_server),
    INT_ARG(GRIT_ARG_DNS_MIN_RERESOLVE_MS, dns_min_reresolve_ms, 0, MS_MAX),
    INT_ARG(GRIT_ARG_MAX_ATTEMPTS_CAP, max_attempts_cap, 2, 1000),
    INT_ARG(GRIT_ARG_ENABLE_RETRIES, enable_retries, 0, 1),
    INT_ARG(GRIT_ARG_PER_CALL_RETRY_BUFFER, per_call_retry_buffer, 0,
            INT64_MAX),
    INT_ARG(GRIT_ARG_PER_CALL_SEND_BUFFER, per_call_send_buffer, 1,
            (int64_t)1 << 31),
    INT_ARG(GRIT_ARG_PER_CHANNEL_RETRY_BUFFER, per_channel_retry_buffer, 0,
            INT64_MAX),
    INT_ARG(GRIT_ARG_RNG_SEED, rng_seed, INT64_MIN, INT64_MAX),
    INT_ARG(GRIT_ARG_MAX_RECV_MESSAGE, max_recv_message, -1, INT64_MAX),
    INT_ARG(GRIT_ARG_MAX_SEND_MESSAGE, max_send_message, -1, INT64_MAX),
    INT_ARG(GRIT_ARG_MAX_HEADER_LIST, max_header_list, 1024, UINT32_MAX),
    STR_ARG(GRIT_ARG_DEFAULT_AUTHORITY, default_authority),
    INT_ARG(GRIT_ARG_TLS, tls, 0, 1),
    TLS_STR_ARG(GRIT_ARG_TLS_ROOT_CERTS_FILE, tls_root_certs_file),
    TLS_STR_ARG(GRIT_ARG_TLS_ROOT_CERTS, tls_root_certs),
    TLS_STR_ARG(GRIT_ARG_TLS_CERT_CHAIN_FILE, tls_cert_chain_file),
    TLS_STR_ARG(GRIT_ARG_TLS_PRIVATE_KEY_FILE, tls_private_key_file),
    TLS_STR_ARG(GRIT_ARG_TLS_TARGET_NAME_OVERRIDE, tls_target_name_override),
    TLS_INT_ARG(GRIT_ARG_TLS_VERIFY_HOSTNAME, tls_verify_hostname, 0, 1),
    TLS_INT_ARG(GRIT_ARG_TLS_SKIP_VERIFY, tls_skip_verify, 0, 1),
    INT_ARG(GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial_reconnect_backoff_ms,
            1, MS_MAX),
    INT_ARG(GRIT_ARG_MAX_RECONNECT_BACKOFF_MS, max_reconnect_backoff_ms, 1,
            MS_MAX),
    INT_ARG(GRIT_ARG_MIN_CONNECT_TIMEOUT_MS, min_connect_timeout_ms, 1, MS_MAX),
    INT_ARG(GRIT_ARG_KEEPALIVE_TIME_MS, keepalive_time_ms, 0, MS_MAX),
    INT_ARG(GRIT_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_timeout_ms, 1, MS_MAX),
    INT_ARG(GRIT_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
            keepalive_permit_without_calls, 0, 1),
    INT_ARG(GRIT_ARG_IDLE_TIMEOUT_MS, idle_timeout_ms, 0, MS_MAX),
    INT_ARG(GRIT_ARG_READ_SPIN_US, read_spin_us, 0, 10000),
    STR_ARG(GRIT_ARG_USER_AGENT, user_agent),
    INT_ARG(GRIT_ARG_IDEMPOTENCY_KEYS, idempotency_keys, 0, 1),
    INT_ARG(GRIT_ARG_HEALTH_CHECKS, health_checks, 0, 1),
    STR_ARG(GRIT_ARG_DEFAULT_COMPRESSION, default_compression), /* CP-01 */
    INT_ARG(GRIT_ARG_DNS_TXT_TIMEOUT_MS, dns_txt_timeout_ms, 0, MS_MAX),
    INT_ARG(GRIT_ARG_MAX_CONFIG_AGE_MS, max_config_age_ms, 0, MS_MAX),
    INT_ARG(GRIT_ARG_DNS_LOOKUP_TIMEOUT_MS, dns_lookup_timeout_ms, 0, MS_MAX),
    INT_ARG(GRIT_ARG_DNS_USE_TTL, dns_use_ttl, 0, 1),
    INT_ARG(GRIT_ARG_TRACE_CONTEXT, trace_context, 0, 1),
    STR_ARG(GRIT_ARG_OTLP_ENDPOINT, otlp_endpoint), /* OP-02 */
    INT_ARG(GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS, allow_insecure_call_creds,
            0, 1),                                                /* AP-05 */
    STR_ARG(GRIT_ARG_XDS_BOOTSTRAP_CONFIG, xds_bootstrap_config), /* XD-01 */
};

#define NSPECS (sizeof(specs) / sizeof(specs[0]))

static const arg_spec *find_spec(const char *key) {
  for (size_t i = 0; key && i < NSPECS; i++) {
    if (strcmp(specs[i].key, key) == 0)
      return &specs[i];
  }
  return NULL;
}

void grit_chan_opts_defaults(grit_chan_opts *o) {
  memset(o, 0, sizeof(*o));
  o->dns_min_reresolve_ms = 30000;        /* DNS-05 */
  o->max_attempts_cap = 5;                /* SC-10 */
  o->enable_retries = 1;                  /* RT-01 */
  o->per_call_retry_buffer = 256 * 1024;  /* RT-07 */
  o->per_call_send_buffer = 64 * 1024;    /* AP-03 */
  o->per_channel_retry_buffer = 16 << 20; /* RT-07 */
  o->health_checks = 1;                   /* HC-02 */
  o->max_recv_message = 4 << 20;          /* SC-07 */
  o->max_send_message = -1;               /* SC-07 */
  o->max_header_list = 16384;             /* HS-06 */
  o->tls = -1;                            /* AP-05: not chosen yet */
  o->tls_verify_hostname = 1;             /* HS-07 */
  o->initial_reconnect_backoff_ms = 1000; /* CB-01 */
  o->max_reconnect_backoff_ms = 120000;
  o->min_connect_timeout_ms = 20000;
  o->keepalive_timeout_ms = 20000; /* LB-04 */
  o->idle_timeout_ms = 30 * 60 * 1000;
  o->read_spin_us = 0;          /* no busy polling unless asked (issue 12) */
  o->dns_txt_timeout_ms = 1000; /* DNS-07 */

  o->dns_lookup_timeout_ms = 10000; /* OP-04 */
  o->dns_use_ttl = 1;
}

static char **str_field(grit_chan_opts *o, const arg_spec *s) {
  return (char **)((char *)o + s->offset);
}

grit_err grit_chan_opts_copy(const grit_chan_opts *src, grit_chan_opts *dst) {
  /* String values are checked here, at channel creation (before anything
   * is copied, so |dst| is untouched on failure). */
  if (src->dns_server && !grit_dns_server_valid(src->dns_server))
    return GRIT_ERR_INVALID_ARG;
  *dst = *src;
  grit_err rv = GRIT_OK;
  for (size_t i = 0; i < NSPECS; i++) {
    if (!specs[i].is_string)
      continue;
    char **f = str_field(dst, &specs[i]);
    if (*f && rv == GRIT_OK) {
      *f = grit_strdup(*f);
      rv = *f ? GRIT_OK : GRIT_ERR_NOMEM;
    } else {
      *f = rv == GRIT_OK ? *f : NULL;
    }
  }
  /* CR-01, IC-01: each holder takes its own references. */
  dst->interceptors = (grit_ic_list){0};
  if (rv == GRIT_OK)
    rv = grit_ic_list_copy(&src->interceptors, &dst->interceptors);
  if (rv == GRIT_OK)
    grit_call_credentials_ref(dst->call_creds);
  else
    dst->call_creds = NULL;
  if (rv != GRIT_OK)
    grit_chan_opts_free(dst);
  return rv;
}

void grit_chan_opts_free(grit_chan_opts *o) {
  for (size_t i = 0; i < NSPECS; i++) {
    if (specs[i].is_string) {
      char **f = str_field(o, &specs[i]);
      grit_free(*f);
      *f = NULL;
    }
  }
  grit_call_credentials_unref(o->call_creds);
  o->call_creds = NULL;
  grit_ic_list_free(&o->interceptors);
}

/* SPEC AP-05: nothing configured as secure goes out in cleartext. The
 * anchors choose security by a credentials object; here the choice is
 * GRIT_ARG_TLS, and TLS material stands for it when it is not set. */
grit_err grit_chan_opts_security(grit_chan_opts *o, grit_error_detail *d) {
  if (o->tls_material && o->tls == 0) {
    grit_error_set(d, GRIT_ERR_INVALID_ARG, o->tls_material,
                   "TLS material given on a channel made explicitly insecure "
                   "(grit.tls = 0): drop one or the other");
    return GRIT_ERR_INVALID_ARG;
  }
  if (o->tls < 0)
    o->tls = o->tls_material ? 1 : 0;
  return GRIT_OK;
}

grit_err grit_channel_args_create(grit_channel_args **out) {
  grit_channel_args *a = grit_calloc(1, sizeof(*a));
  *out = a;
  if (!a)
    return GRIT_ERR_NOMEM;
  grit_chan_opts_defaults(&a->o);
  return GRIT_OK;
}

void grit_channel_args_destroy(grit_channel_args *a) {
  if (!a)
    return;
  grit_chan_opts_free(&a->o);
  grit_free(a);
}

grit_err grit_channel_args_set_int(grit_channel_args *a, const char *key,
                                   int64_t value) {
  const arg_spec *s = find_spec(key);
  if (!a || !s || s->is_string || value < s->min || value > s->max)
    return GRIT_ERR_INVALID_ARG;
  *(int64_t *)((char *)&a->o + s->offset) = value;
  if (s->offset == offsetof(grit_chan_opts, rng_seed))
    a->o.rng_seed_set = true;
  if (s->tls_only && !a->o.tls_material)
    a->o.tls_material = s->key;
  return GRIT_OK;
}

grit_err grit_channel_args_set_string(grit_channel_args *a, const char *key,
                                      const char *value) {
  const arg_spec *s = find_spec(key);
  if (!a || !s || !s->is_string || !value)
    return GRIT_ERR_INVALID_ARG;
  if (strcmp(key, GRIT_ARG_DEFAULT_COMPRESSION) == 0 &&
      !grit_compression_arg_valid(value))
    return GRIT_ERR_INVALID_ARG;
  char *copy = grit_strdup(value);
  if (!copy)
    return GRIT_ERR_NOMEM;
  char **f = str_field(&a->o, s);
  grit_free(*f);
  *f = copy;
  if (s->tls_only && !a->o.tls_material)
    a->o.tls_material = s->key;
  return GRIT_OK;
}

/* SPEC LP-01. */
grit_err grit_channel_args_set_load_report_cb(grit_channel_args *a,
                                              grit_load_report_cb cb,
                                              void *user_data) {
  if (!a)
    return GRIT_ERR_INVALID_ARG;
  a->o.load_report_cb = cb;
  a->o.load_report_data = user_data;
  return GRIT_OK;
}

grit_err grit_channel_args_set_observer(grit_channel_args *a,
                                        grit_attempt_observer_cb cb,
                                        void *user_data) {
  if (!a)
    return GRIT_ERR_INVALID_ARG;
  a->o.observer = cb;
  a->o.observer_data = user_data;
  return GRIT_OK;
}

grit_err grit_channel_args_set_span_callback(grit_channel_args *a,
                                             grit_span_cb cb, void *user_data) {
  if (!a)
    return GRIT_ERR_INVALID_ARG;
  a->o.span_cb = cb;
  a->o.span_cb_data = user_data;
  return GRIT_OK;
}

grit_err grit_channel_args_set_config_watcher(grit_channel_args *a,
                                              grit_config_change_cb cb,
                                              void *user_data) {
  if (!a)
    return GRIT_ERR_INVALID_ARG;
  a->o.config_cb = cb;
  a->o.config_cb_data = user_data;
  return GRIT_OK;
}

grit_err grit_channel_args_set_call_credentials(grit_channel_args *a,
                                                grit_call_credentials *creds) {
  if (!a)
    return GRIT_ERR_INVALID_ARG;
  grit_call_credentials_ref(creds);
  grit_call_credentials_unref(a->o.call_creds);
  a->o.call_creds = creds;
  return GRIT_OK;
}

grit_err grit_channel_args_add_interceptor(grit_channel_args *a,
                                           grit_interceptor *ic) {
  if (!a || !ic)
    return GRIT_ERR_INVALID_ARG;
  return grit_ic_list_add(&a->o.interceptors, ic);
}
