/* xDS (gRFC A27, A28, A31, A32, A42, A44, A50, A52; SPEC XD-01..XD-03):
 * the resources a control plane sends, decoded from their wire form into
 * immutable, refcounted structs, validated the way grpc validates them (a
 * resource that fails is NACKed with a reason naming the field), and the
 * routing decisions made from them. This header is what the rest of grit
 * sees of xds/; the ADS stream and the resolver front sit above it.
 * Layout: floor 1 of docs/layout.md. */
#ifndef GRIT_XDS_H
#define GRIT_XDS_H

#include "util/util.h"

typedef enum xds_kind {
  XDS_LISTENER = 0,
  XDS_ROUTE_CONFIG = 1,
  XDS_CLUSTER = 2,
  XDS_ENDPOINTS = 3,
} xds_kind;
#define XDS_KINDS 4

/* The type URL of |k| ("type.googleapis.com/envoy.config.listener.v3.
 * Listener", ...). */
const char *grit_xds_type_url(xds_kind k);
/* The kind of a type URL, or -1. */
int grit_xds_kind_of(const char *type_url, size_t len);

/* A compiled regular expression with RE2's semantics for what grpc
 * accepts: full match, no backreferences or lookaround (matched by a DFA,
 * so in time linear in the subject). */
typedef struct xds_regex xds_regex;
bool grit_xds_regex_match(const xds_regex *re, const char *s, size_t len);

/* ---- RouteConfiguration (RDS, or inline in a Listener) ---- */

typedef enum xds_hm_kind {
  XDS_HM_EXACT,
  XDS_HM_PREFIX,
  XDS_HM_SUFFIX,
  XDS_HM_CONTAINS,
  XDS_HM_REGEX,
  XDS_HM_RANGE,
  XDS_HM_PRESENT,
} xds_hm_kind;

typedef struct xds_header_matcher {
  const char *name;
  xds_hm_kind kind;
  const char *value;  /* EXACT, PREFIX, SUFFIX, CONTAINS */
  bool ignore_case;   /* a StringMatcher's ignore_case */
  xds_regex *re;      /* REGEX */
  int64_t start, end; /* RANGE: [start, end) */
  bool present;       /* PRESENT: must the header be there */
  bool invert;
} xds_header_matcher;

typedef enum xds_path_kind {
  XDS_PATH_PREFIX,
  XDS_PATH_EXACT,
  XDS_PATH_REGEX,
} xds_path_kind;

typedef struct xds_route_match {
  xds_path_kind path_kind;
  const char *path; /* PREFIX, EXACT */
  xds_regex *re;    /* REGEX */
  bool case_sensitive;
  xds_header_matcher *headers;
  size_t nheaders;
  bool has_fraction;
  uint32_t fraction_per_million; /* runtime_fraction's default_value */
} xds_route_match;

typedef struct xds_cluster_weight {
  const char *name;
  uint32_t weight;
} xds_cluster_weight;

/* gRFC A44: the retry policy a route (or its virtual host) carries. */
typedef struct xds_retry_policy {
  uint32_t codes;        /* bit n: gRPC status n is retryable */
  uint32_t max_attempts; /* num_retries + 1 (default 2) */
  int64_t base_ns, max_ns;
} xds_retry_policy;

typedef enum xds_hash_kind {
  XDS_HASH_HEADER,
  XDS_HASH_CHANNEL_ID,
} xds_hash_kind;

typedef struct xds_hash_policy {
  xds_hash_kind kind;
  const char *header; /* HEADER */
  xds_regex *rewrite; /* HEADER: regex_rewrite's pattern, or NULL */
  const char *substitution;
  bool terminal;
} xds_hash_policy;

typedef enum xds_action {
  XDS_ACTION_CLUSTER,
  XDS_ACTION_WEIGHTED,
  XDS_ACTION_NON_FORWARDING, /* matched, then fails the call UNAVAILABLE */
} xds_action;

typedef struct xds_route {
  xds_route_match match;
  xds_action action;
  const char *cluster; /* CLUSTER */
  xds_cluster_weight *weighted;
  size_t nweighted;
  uint64_t total_weight; /* sum of the weights (WEIGHTED) */
  bool has_max_stream_duration;
  int64_t max_stream_duration_ns; /* A31 */
  bool has_grpc_timeout_header_max;
  int64_t grpc_timeout_header_max_ns;
  bool has_retry;
  xds_retry_policy retry;
  xds_hash_policy *hash;
  size_t nhash;
} xds_route;

typedef struct xds_vhost {
  const char *name;
  const char **domains;
  size_t ndomains;
  xds_route *routes;
  size_t nroutes;
  bool has_retry;
  xds_retry_policy retry;
} xds_vhost;

typedef struct xds_route_config {
  xds_vhost *vhosts;
  size_t nvhosts;
} xds_route_config;

/* ---- Listener (LDS) ---- */

typedef struct xds_listener {
  const char *rds_name; /* NULL: |route_config| is inline */
  xds_route_config *route_config;
  bool has_max_stream_duration; /* HCM common_http_protocol_options */
  int64_t max_stream_duration_ns;
} xds_listener;

/* ---- Cluster (CDS) ---- */

typedef enum xds_cluster_type {
  XDS_CLUSTER_EDS,
  XDS_CLUSTER_LOGICAL_DNS,
} xds_cluster_type;

typedef enum xds_lb_kind {
  XDS_LB_ROUND_ROBIN,
  XDS_LB_RING_HASH,
  XDS_LB_LEAST_REQUEST,
  XDS_LB_WRR,        /* client_side_weighted_round_robin */
  XDS_LB_PICK_FIRST, /* pick_first.v3.PickFirst (A52, A62) */
} xds_lb_kind;

typedef struct xds_lb_policy {
  xds_lb_kind kind;
  uint64_t min_ring, max_ring; /* RING_HASH (A42: defaults 1024, 8M) */
  uint32_t choice_count;       /* LEAST_REQUEST (default 2) */
  /* WRR (A58), each 0 when unset: grit's defaults apply. */
  bool enable_oob;
  int64_t oob_period_ns, blackout_ns, expiration_ns, update_ns;
  double error_penalty; /* < 0: unset */
  bool shuffle;         /* PICK_FIRST: shuffle_address_list */
  /* A52: a typed policy outside WrrLocality picks among every endpoint of
   * a priority (locality weights unused); lb_policy's ROUND_ROBIN and
   * LEAST_REQUEST, and WrrLocality's child, go per locality. */
  bool per_priority;
} xds_lb_policy;

/* gRFC A50, from envoy's OutlierDetection: every field optional. */
typedef struct xds_outlier {
  int64_t interval_ns, base_ejection_ns, max_ejection_ns; /* 0: unset */
  uint32_t max_ejection_percent;                          /* default 10 */
  bool success_rate; /* enforcing_success_rate > 0 */
  uint32_t sr_stdev_factor, sr_enforcement, sr_min_hosts, sr_request_volume;
  bool failure_percentage; /* enforcing_failure_percentage > 0 */
  uint32_t fp_threshold, fp_enforcement, fp_min_hosts, fp_request_volume;
} xds_outlier;

typedef struct xds_cluster {
  xds_cluster_type type;
  const char *eds_service_name; /* EDS; NULL: the cluster's name */
  const char *dns_host;         /* LOGICAL_DNS */
  uint16_t dns_port;
  xds_lb_policy lb;
  bool has_outlier;
  xds_outlier outlier;
  uint32_t max_requests; /* A32, default 1024 */
} xds_cluster;

/* ---- ClusterLoadAssignment (EDS) ---- */

typedef enum xds_health {
  XDS_HEALTH_UNKNOWN = 0,
  XDS_HEALTH_HEALTHY = 1,
  XDS_HEALTH_UNHEALTHY = 2,
  XDS_HEALTH_DRAINING = 3,
  XDS_HEALTH_TIMEOUT = 4,
  XDS_HEALTH_DEGRADED = 5,
} xds_health;

typedef struct xds_endpoint {
  const char *host; /* an IP literal, as the resource gives it */
  uint16_t port;
  uint8_t health;  /* xds_health */
  uint32_t weight; /* default 1 */
} xds_endpoint;

typedef struct xds_locality {
  const char *region, *zone, *sub_zone;
  uint32_t weight; /* 0: a locality without a weight (ignored, A27) */
  uint32_t priority;
  xds_endpoint *endpoints;
  size_t nendpoints;
} xds_locality;

typedef struct xds_drop {
  const char *category;
  uint32_t per_million;
} xds_drop;

typedef struct xds_endpoints {
  xds_locality *localities;
  size_t nlocalities;
  uint32_t npriorities; /* priorities 0..n-1, each with a locality */
  xds_drop *drops;
  size_t ndrops;
} xds_endpoints;

/* ---- a decoded resource ---- */

typedef struct xds_resource {
  uint32_t refs; /* atomic */
  xds_kind kind;
  const char *name;
  union {
    xds_listener listener;
    xds_route_config route_config;
    xds_cluster cluster;
    xds_endpoints endpoints;
  } u;
  void *arena_; /* every allocation of the resource */
} xds_resource;

/* Decode one resource of |kind| from its serialized message (the value of
 * the DiscoveryResponse's Any, unwrapped). On success |*out| is a new
 * reference. On failure |*out| is NULL and |err| (|err_size| bytes) says
 * why, naming the field ("virtual_hosts[0].routes[2].route: ...") and,
 * when it could be read, |name| gets the resource's name (for the NACK's
 * per-resource error). Returns GRIT_OK, GRIT_ERR_INVALID_ARG (invalid
 * resource) or GRIT_ERR_NOMEM. */
grit_err grit_xds_resource_decode(xds_kind kind, const uint8_t *p, size_t n,
                                  xds_resource **out, char *name,
                                  size_t name_size, char *err, size_t err_size);
void grit_xds_resource_ref(xds_resource *r);
void grit_xds_resource_unref(xds_resource *r);

/* An Any from a DiscoveryResponse: the type URL and value, unwrapping an
 * envoy.service.discovery.v3.Resource wrapper. Returns false on malformed
 * input. */
bool grit_xds_any_unwrap(const uint8_t *p, size_t n, const char **type_url,
                         size_t *type_len, const uint8_t **value, size_t *vlen);

/* ---- bootstrap (gRFC A27; SPEC XD-01) ---- */

typedef struct xds_server {
  char *uri;
  bool tls; /* channel_creds "tls" (else "insecure") */
  char *ca_file, *cert_file, *key_file; /* the tls config; NULL: defaults */
  bool ignore_resource_deletion;        /* server_features */
} xds_server;

typedef struct xds_bootstrap {
  xds_server *servers; /* grit uses the first */
  size_t nservers;
  char *node_id, *node_cluster;
  char *region, *zone, *sub_zone;
  char *node_metadata; /* a JSON object, compact; NULL: none */
  char *listener_template;
} xds_bootstrap;

/* Parse bootstrap JSON. Errors name the JSON path in |d|. Returns GRIT_OK,
 * GRIT_ERR_INVALID_ARG or GRIT_ERR_NOMEM. */
grit_err grit_xds_bootstrap_parse(const char *json, size_t len,
                                  xds_bootstrap **out, grit_error_detail *d);
/* From GRPC_XDS_BOOTSTRAP (a file), else GRPC_XDS_BOOTSTRAP_CONFIG (the
 * JSON). GRIT_ERR_NOT_FOUND when neither is set or the file cannot be
 * opened. */
grit_err grit_xds_bootstrap_from_env(xds_bootstrap **out, grit_error_detail *d);
void grit_xds_bootstrap_free(xds_bootstrap *b);

/* ---- routing (pure; SPEC XD-02) ---- */

/* The virtual host for |authority| (A28: exact, then the longest suffix
 * wildcard "*.x", then the longest prefix wildcard "x.*", then "*"), or
 * NULL. Case-insensitive. */
const xds_vhost *grit_xds_vhost_find(const xds_route_config *rc,
                                     const char *authority);

/* The first route of |vh| matching |path| and |md| (request metadata; a
 * "-bin" header never matches; "content-type" is "application/grpc"),
 * drawing the runtime fraction from |rand_per_million| (0..999999), or
 * NULL. */
const xds_route *grit_xds_route_find(const xds_vhost *vh, const char *path,
                                     const grit_metadata *md,
                                     uint32_t rand_per_million);

/* The cluster of |r| for one call: its cluster, or a weighted pick with
 * |rand| (0..total_weight-1). NULL for a non-forwarding action. */
const char *grit_xds_route_cluster(const xds_route *r, uint64_t rand);

#endif
