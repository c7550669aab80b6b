/*
 * lb: subchannels (one transport each, with connectivity state and reconnect
 * backoff, SPEC CB-01, and a health Watch, HC-01) and the load-balancing
 * policies pick_first (LB-01), round_robin (LB-02) and
 * outlier_detection_experimental (OD-01) behind one small vtable looked up
 * by name. channel/ drives it on the loop thread; it knows nothing of calls
 * or configs.
 * Layout: floor 2 of docs/layout.md.
 */
#ifndef GRIT_LB_H
#define GRIT_LB_H

#include "lb/lb_algo.h"
#include "lb/od_algo.h"
#include "transport/transport.h"

typedef struct grit_subchannel grit_subchannel;

/* ---- ORCA load reports (SPEC LP-01; gRFC A51) — orca.c ----
 * xds.data.orca.v3.OrcaLoadReport, decoded by hand: cpu_utilization = 1,
 * mem_utilization = 2, rps = 3 (deprecated), request_cost = 4,
 * utilization = 5, rps_fractional = 6, eps = 7, named_metrics = 8,
 * application_utilization = 9. The public grit_load_report is the same
 * thing with the peer; absent fields are 0. */
#define GRIT_ORCA_TRAILER "endpoint-load-metrics-bin"
typedef struct grit_orca_report {
  double cpu_utilization;
  double mem_utilization;
  double application_utilization;
  double rps_fractional;
  double eps;
  uint64_t rps;
  /* The three maps, entries in wire order; names point into |names|.
   * Only filled when decoded with |maps|; else counts are 0. */
  grit_load_metric *metrics; /* request_cost, then utilization, then named */
  size_t n_request_cost, n_utilization, n_named_metrics;
  char *names;
} grit_orca_report;

/* Decode |n| bytes. With |maps| the three maps are kept (one allocation
 * for entries and names; free with grit_orca_report_free), else skipped
 * (no allocation). Unknown fields are skipped. Returns GRIT_OK,
 * GRIT_ERR_PARSE (not a valid message: truncated, bad varint, a known
 * field with the wrong wire type, a map entry that is not {string,
 * double}), or GRIT_ERR_NOMEM. On error |out| holds nothing to free. */
grit_err grit_orca_decode(const uint8_t *p, size_t n, bool maps,
                          grit_orca_report *out);
void grit_orca_report_free(grit_orca_report *r);
/* xds.service.orca.v3.OrcaLoadReportRequest{report_interval} framed for a
 * stream (5-byte prefix); a new slice or NULL on out-of-memory. */
grit_slice *grit_orca_encode_request(uint64_t interval_ms);
/* The public view of |r| from |peer| (pointers borrowed from |r|). */
void grit_orca_to_public(const grit_orca_report *r, const char *peer, bool oob,
                         grit_load_report *out);

/* Settings of the load-report-driven policies, from loadBalancingConfig
 * (channel/ converts the service config's). Defaults are A58's / A42's. */
typedef struct grit_lb_wrr_params {
  bool enable_oob;        /* enableOobLoadReport, false */
  uint64_t oob_period_ms; /* oobReportingPeriod, 10 s */
  uint64_t blackout_ms;   /* blackoutPeriod, 10 s */
  uint64_t expiration_ms; /* weightExpirationPeriod, 3 min */
  uint64_t update_ms;     /* weightUpdatePeriod, 1 s, at least 100 ms */
  double error_penalty;   /* errorUtilizationPenalty, 1.0, >= 0 */
} grit_lb_wrr_params;

typedef struct grit_lb_params {
  grit_lb_wrr_params wrr;
  uint64_t min_ring_size;          /* ring_hash: 1024 */
  uint64_t max_ring_size;          /* ring_hash: 4096 */
  const char *request_hash_header; /* ring_hash, A76; NULL: random hash */
  uint32_t choice_count;           /* least_request: 2, 2..10 */
} grit_lb_params;
/* The defaults above. */
void grit_lb_params_default(grit_lb_params *p);

/* Channel-wide state every subchannel of a channel may read (issue 15):
 * the health check settings of the config in force and counters the
 * channel reports in grit_channel_stats. Owned by the channel; loop only,
 * counters atomic. */
typedef struct grit_lb_shared {
  const char *health_service;  /* healthCheckConfig.serviceName; NULL: off */
  bool health_disabled;        /* GRIT_ARG_HEALTH_CHECKS 0 */
  const char *authority;       /* :authority of health Watch streams */
  uint64_t ejections;          /* outlier detection (A50), atomic */
  uint64_t unejections;        /* atomic */
  uint64_t health_not_serving; /* a subchannel left READY by health */
  grit_list scs;               /* every live subchannel of the channel */
  struct grit_obs_target *obs; /* the channel's metric series, or NULL */
  /* LP-01: the application's load report callback, or NULL. */
  grit_load_report_cb load_report_cb;
  void *load_report_data;
} grit_lb_shared;

/* The channel changed |sh|'s health settings: every subchannel restarts
 * (or stops) its health watch. */
void grit_lb_shared_refresh_health(grit_lb_shared *sh);

/* Subchannels made by an outlier_detection policy's child register here,
 * so ejection (A50) reaches every subchannel of an address. */
typedef struct grit_sc_group {
  grit_list scs; /* of grit_subchannel */
  bool (*is_ejected)(struct grit_sc_group *g, const grit_addr *addr);
} grit_sc_group;

/* What every subchannel of a channel shares. */
typedef struct grit_subchannel_args {
  uv_loop_t *loop;
  grit_transport_opts topts;       /* borrowed; lives as long as the channel */
  grit_rng *rng;                   /* the channel's PRNG, for jitter */
  uint64_t initial_backoff_ms;     /* CB-01: 1 s */
  uint64_t max_backoff_ms;         /* 120 s */
  uint64_t min_connect_timeout_ms; /* 20 s */
  /* Issue 15: NULL / false unless set. */
  grit_lb_shared *shared; /* the channel's; NULL in lb unit tests */
  grit_sc_group *group;   /* set by outlier_detection for its child */
  bool health_applies;    /* set by round_robin: honour A17 health */
} grit_subchannel_args;

/* What a pick learns of the call's xDS route (issue 27; gRFC A28, A42):
 * the cluster it chose (the cluster manager's child) and the route's
 * request hash for ring_hash (has_hash false: none). */
typedef struct grit_pick_route {
  const char *cluster;
  bool has_hash;
  uint64_t hash;
} grit_pick_route;

/* What a pick may look at (SPEC LP-03): the call's request metadata, for
 * ring_hash's requestHashHeader (A76). Borrowed for the pick. */
typedef struct grit_pick_args {
  const grit_metadata *metadata; /* may be NULL */
  /* Someone reads grit_pick_result.detail (an attempt observer): policies
   * whose detail costs formatting write it only then. */
  bool want_detail;
  /* Issue 27: the call's xDS route, or NULL on other channels. */
  const struct grit_pick_route *route;
} grit_pick_args;

/* Results of a pick (SPEC LB-03, RT-12). */
typedef enum grit_pick_kind {
  GRIT_PICK_COMPLETE = 0, /* use |transport| */
  GRIT_PICK_QUEUE = 1,    /* wait for a state change */
  GRIT_PICK_FAIL = 2,     /* fail a non-wait-for-ready call with |code| */
  GRIT_PICK_DROP = 3,     /* fail the attempt with |code|, even a
                             wait-for-ready one (xDS drops, A27, A32) */
} grit_pick_kind;

typedef struct grit_pick_result {
  grit_pick_kind kind;
  grit_transport *transport;
  grit_status_code code;
  const char *message; /* borrowed until the next LB event */
  /* Backends passed over for health or ejection, with why (issue 15), or
   * NULL; borrowed until the next LB event. */
  const char *skipped;
  /* How the policy chose (LP-02..LP-04), for `grit call --attempts`:
   * "weighted_round_robin: weight 3.1 (40.0% of picks)" or NULL (always
   * NULL when the pick args did not ask for it, for the policies where it
   * costs formatting); borrowed until the next LB event. */
  const char *detail;
  /* Set by a policy that counts calls in flight (xds_cluster_impl, A32):
   * done->fn(done) is called once when the stream of a COMPLETE pick
   * ends, or at once when no stream could be started on |transport|.
   * NULL: nothing to call. */
  struct grit_pick_done *done;
} grit_pick_result;

/* A pick's end hook (above); the policy embeds it in what it counts. */
typedef struct grit_pick_done {
  void (*fn)(struct grit_pick_done *d);
} grit_pick_done;

/* The channel side of a policy: state publication and re-resolution. */
typedef struct grit_lb_helper {
  void (*update_state)(void *ctx, grit_connectivity_state state);
  void (*request_reresolution)(void *ctx);
  void *ctx;
} grit_lb_helper;

typedef struct grit_lb_policy grit_lb_policy;
typedef struct grit_lb_node grit_lb_node; /* below */

typedef struct grit_lb_policy_vtable {
  const char *name;
  grit_err (*create)(const grit_subchannel_args *a, const grit_lb_helper *h,
                     grit_lb_policy **out);
  /* New address list (copied); |shuffle| for pick_first's
   * shuffleAddressList. Connections to addresses still present survive. */
  grit_err (*update_addresses)(grit_lb_policy *p, const grit_addr *addrs,
                               size_t n, bool shuffle);
  void (*exit_idle)(grit_lb_policy *p);
  grit_pick_result (*pick)(grit_lb_policy *p, const grit_pick_args *args);
  void (*destroy)(grit_lb_policy *p);
  /* Optional (NULL: ignored): a call's final status on |peer| (A50) and
   * the backend's per-call load report (A51; NULL when none came or the
   * policy does not want them, see |wants_load_reports|). */
  void (*on_call_result)(grit_lb_policy *p, const grit_addr *peer, bool ok,
                         const grit_orca_report *report);
  /* Optional: the policy's settings from loadBalancingConfig (LP-02..LP-04).
   * Returns GRIT_OK or GRIT_ERR_NOMEM (the old settings stay). */
  grit_err (*configure)(grit_lb_policy *p, const grit_lb_params *params);
  /* Optional: whether per-call load reports should be decoded for it. */
  bool (*wants_load_reports)(const grit_lb_policy *p);
  /* The tree policies only (priority, weighted_target, xds_cluster_impl,
   * issue 27): their whole configuration, children and addresses included
   * (update_addresses is then ignored). Returns GRIT_OK or GRIT_ERR_NOMEM
   * (the children that could be updated are). */
  grit_err (*update_node)(grit_lb_policy *p, const grit_lb_node *n);
} grit_lb_policy_vtable;

/* Every policy object starts with its vtable. */
struct grit_lb_policy {
  const grit_lb_policy_vtable *vt;
};

extern const grit_lb_policy_vtable grit_lb_pick_first;
extern const grit_lb_policy_vtable grit_lb_round_robin;
/* outlier_detection_experimental (SPEC OD-01; gRFC A50): wraps a child
 * policy; created with round_robin as the child and no ejection rule until
 * grit_lb_od_configure. */
extern const grit_lb_policy_vtable grit_lb_outlier_detection;
/* weighted_round_robin (LP-02; gRFC A58), ring_hash_experimental (LP-03;
 * A42, A76), least_request_experimental (LP-04). */
extern const grit_lb_policy_vtable grit_lb_weighted_round_robin;
extern const grit_lb_policy_vtable grit_lb_ring_hash;
extern const grit_lb_policy_vtable grit_lb_least_request;
/* xds_cluster_manager_experimental (issue 27; gRFC A28, cluster_manager.c):
 * one child policy per cluster in use; a pick goes to the child named by
 * grit_pick_args.cluster. It is fed with grit_lb_cm_update, never with
 * update_addresses (that returns GRIT_ERR_INVALID_ARG). */
extern const grit_lb_policy_vtable grit_lb_cluster_manager;
typedef struct grit_lb_cm_child {
  const char *name; /* the cluster's name, as routes name it */
  /* The cluster is not usable yet (its resources are on their way): picks
   * for it queue. Otherwise |error| non-NULL fails them UNAVAILABLE with
   * it, else |tree| (an xDS cluster's policy tree, borrowed for the
   * update: served by grit_lb_node_vt(tree) through update_node) or, when
   * |tree| is NULL, |vt| with |params| serves |addrs|. */
  bool waiting;
  const char *error;
  const grit_lb_node *tree;
  const grit_lb_policy_vtable *vt;
  grit_lb_params params;
  const grit_addr *addrs; /* copied */
  size_t naddrs;
} grit_lb_cm_child;
/* Make |p|'s children |kids|: a child whose name is in |kids| keeps its
 * policy (and its connections) when the vtable is the same, else gets a
 * new one; a child not in |kids| is destroyed (its connections drain).
 * Loop thread. Returns GRIT_OK or GRIT_ERR_NOMEM (children already
 * updated stay updated; the rest keep their previous state). */
grit_err grit_lb_cm_update(grit_lb_policy *p, const grit_lb_cm_child *kids,
                           size_t n);
/* ---- The xDS cluster tree (issue 27; SPEC XD-03; gRFCs A27, A56, A32)
 * A cluster is xds_cluster_impl (drops, max_requests) over priority
 * (failover) over weighted_target (localities) over a leaf policy per
 * locality (round_robin, ring_hash, ..., each maybe inside
 * outlier_detection). A node describes one level; everything it points to
 * is borrowed for the update_node call. ---- */
typedef enum grit_lb_node_kind {
  GRIT_LB_NODE_LEAF = 0,
  GRIT_LB_NODE_WEIGHTED_TARGET = 1,
  GRIT_LB_NODE_PRIORITY = 2,
  GRIT_LB_NODE_CLUSTER_IMPL = 3,
} grit_lb_node_kind;

typedef struct grit_lb_child_cfg {
  const char *name; /* unique among its siblings: children keep their
                       connections across updates by name */
  uint32_t weight;  /* weighted_target: > 0 */
  const grit_lb_node *node;
} grit_lb_child_cfg;

typedef struct grit_lb_drop {
  const char *category;
  uint32_t per_million; /* 0..1000000 */
} grit_lb_drop;

/* A monotonic millisecond clock; tests pass a fake one. */
typedef struct grit_lb_clock {
  uint64_t (*now_ms)(void *ud);
  void *ud;
} grit_lb_clock;

struct grit_lb_node {
  grit_lb_node_kind kind;
  /* Any kind: with |od| non-NULL the node is served inside
   * outlier_detection with those settings (A50), counting every address
   * under it. LEAF: |policy| with |params| (NULL: defaults) over
   * |addrs|. */
  const grit_lb_policy_vtable *policy;
  const grit_lb_params *params;
  const grit_od_params *od;
  const grit_addr *addrs;
  size_t naddrs;
  bool shuffle; /* pick_first's shuffleAddressList */
  /* WEIGHTED_TARGET, PRIORITY (highest priority first), CLUSTER_IMPL (one
   * child). */
  const grit_lb_child_cfg *children;
  size_t nchildren;
  /* PRIORITY: failover timeout (0: A56's 10 s), how long a deactivated
   * child is kept (0: 15 min, as grpc-core), and the clock (NULL: the
   * loop's). */
  uint64_t failover_ms;
  uint64_t retention_ms;
  const grit_lb_clock *clock;
  /* CLUSTER_IMPL: the cluster's name (in messages), its drop categories
   * (EDS drop_overloads) and circuit breaker (A32: 0 means 1024). */
  const char *cluster;
  const grit_lb_drop *drops;
  size_t ndrops;
  uint32_t max_requests;
};

/* priority (A56), weighted_target (A27) and xds_cluster_impl (A27, A32):
 * created empty, given their configuration with update_node. */
extern const grit_lb_policy_vtable grit_lb_priority;
extern const grit_lb_policy_vtable grit_lb_weighted_target;
extern const grit_lb_policy_vtable grit_lb_xds_cluster_impl;
/* The vtable a node's root is served by. */
const grit_lb_policy_vtable *grit_lb_node_vt(const grit_lb_node *n);
/* priority: run the timers (failover, retention) that are due by its
 * clock; its own loop timer calls it too. Tests drive a fake clock. */
void grit_lb_priority_tick(grit_lb_policy *p);
/* priority: the index of the child in use (UINT32_MAX: none) and how
 * many children it holds (deactivated ones included). */
uint32_t grit_lb_priority_current(const grit_lb_policy *p);
size_t grit_lb_priority_children(const grit_lb_policy *p);
/* xds_cluster_impl's counters (atomic reads): calls dropped by category
 * (all categories together) and by the circuit breaker, calls in flight. */
typedef struct grit_lb_cluster_stats {
  uint64_t dropped;
  uint64_t dropped_max_requests;
  uint64_t in_flight;
} grit_lb_cluster_stats;
void grit_lb_xds_cluster_impl_stats(const grit_lb_policy *p,
                                    grit_lb_cluster_stats *out);

/* Set |p|'s (an outlier_detection policy) child policy and parameters.
 * A different child replaces the current one (its connections drain).
 * Returns GRIT_OK or GRIT_ERR_NOMEM (the old settings stay). */
grit_err grit_lb_od_configure(grit_lb_policy *p,
                              const grit_lb_policy_vtable *child,
                              const grit_od_params *params);
/* The same, also passing |child_params| to the child (NULL: defaults). */
grit_err grit_lb_od_configure_child(grit_lb_policy *p,
                                    const grit_lb_policy_vtable *child,
                                    const grit_od_params *params,
                                    const grit_lb_params *child_params);
/* The vtable for |name| ("pick_first", "round_robin",
 * "weighted_round_robin", "ring_hash_experimental",
 * "least_request_experimental", "outlier_detection_experimental"), or
 * NULL. */
const grit_lb_policy_vtable *grit_lb_find(const char *name);

/* Subchannels, used by the policies. on_state runs on every change. */
typedef void (*grit_subchannel_state_cb)(grit_subchannel *sc,
                                         grit_connectivity_state s,
                                         void *user_data);
grit_err grit_subchannel_create(const grit_subchannel_args *a,
                                const grit_addr *addr,
                                grit_subchannel_state_cb cb, void *user_data,
                                grit_subchannel **out);
void grit_subchannel_connect(grit_subchannel *sc); /* IDLE -> CONNECTING */
grit_connectivity_state grit_subchannel_state(const grit_subchannel *sc);
/* The state before the last change: READY in an on_state callback for
 * IDLE means the connection was lost (closed or GOAWAY). */
grit_connectivity_state grit_subchannel_prev_state(const grit_subchannel *sc);
/* The READY transport, or NULL. */
grit_transport *grit_subchannel_transport(const grit_subchannel *sc);
const grit_addr *grit_subchannel_addr(const grit_subchannel *sc);
/* Last failure reason ("connect: connection refused"), "" if none. */
const char *grit_subchannel_error(const grit_subchannel *sc);
/* Streams on its connections so far (SPEC OP-03, channelz), into |out|. */
void grit_subchannel_calls(const grit_subchannel *sc,
                           grit_transport_calls *out);
/* Call |fn| for every live subchannel of the channel (loop only). */
void grit_lb_shared_foreach(grit_lb_shared *sh,
                            void (*fn)(const grit_subchannel *sc, void *ud),
                            void *ud);
/* Keepalive time its next connection will use (0 = none). */
uint64_t grit_subchannel_keepalive_time_ms(const grit_subchannel *sc);
void grit_subchannel_reset_backoff(grit_subchannel *sc);
/* Outlier detection (A50): an ejected subchannel shows TRANSIENT_FAILURE
 * to its policy and is never picked; its connection stays up. */
void grit_subchannel_set_ejected(grit_subchannel *sc, bool ejected);
/* Why a subchannel whose connection is up is not picked: "ejected",
 * "health: NOT_SERVING", "health: waiting" or "" when it is. */
const char *grit_subchannel_skip_reason(const grit_subchannel *sc);
/* No callback runs after this. A connection with calls in flight drains:
 * it takes no new stream and closes after the last one; any other closes
 * at once. NULL is a no-op. */
void grit_subchannel_destroy(grit_subchannel *sc);

/* grpc.health.v1 messages, encoded by hand (no protobuf in the core).
 * grit_health_encode_request: HealthCheckRequest{service} framed for a
 * stream (5-byte prefix); a new slice or NULL on out-of-memory. */
grit_slice *grit_health_encode_request(const char *service);
/* grit_health_decode_response: HealthCheckResponse's status (0 UNKNOWN,
 * 1 SERVING, 2 NOT_SERVING, 3 SERVICE_UNKNOWN; absent is 0). Unknown
 * fields are skipped. Returns false if |p| is not a valid message. */
bool grit_health_decode_response(const uint8_t *p, size_t n, uint32_t *status);

/* Reconnect backoff (CB-01): next delay in ms from |current| (0 = first):
 * initial, then x1.6 (rounded), capped at |max_ms|. Pure; |rng| is unused
 * (kept for callers), jitter is grit_lb_backoff_jitter_ms. */
uint64_t grit_lb_backoff_next_ms(uint64_t current_ms, uint64_t initial_ms,
                                 uint64_t max_ms, grit_rng *rng);
/* |ms| times a uniform factor in [0.8, 1.2] drawn from |rng| (CB-01). */
uint64_t grit_lb_backoff_jitter_ms(uint64_t ms, grit_rng *rng);
/* LB-04 / grpc-core: the keepalive time after a GOAWAY "too_many_pings":
 * doubled, saturating at INT32_MAX ms. */
uint64_t grit_lb_keepalive_after_too_many_pings_ms(uint64_t keepalive_ms);

#endif
