/* The xDS client runtime (gRFC A27; SPEC XD-01): one ADS stream per xDS
 * server per process, shared by every user, made with grit's own public
 * API (a bidi streaming call on a grit channel to the bootstrap's
 * server_uri, cleartext or TLS as its channel_creds say). It drives the
 * pure machine of xds/ads.h: responses go in, the requests it hands out go
 * on the stream, its does-not-exist timers run, and after the stream ends
 * it reconnects with backoff (1 s, x1.6, at most 120 s, +-20 % jitter;
 * back to 1 s once a stream received a response) and resubscribes.
 * A worker thread per client owns the timers and the sends; responses are
 * fed from grit's I/O thread. Watcher callbacks run with the client's lock
 * held (on either thread) and must not call back into the client.
 * Layout: floor 5 of docs/layout.md; linked into libgrit. */
#ifndef GRIT_XDSCLIENT_H
#define GRIT_XDSCLIENT_H

#include <uv.h>

#include "transport/transport.h"
#include "xds/ads.h"

typedef struct grit_xdsc grit_xdsc;

typedef struct grit_xdsc_watcher {
  /* A new or changed resource (borrowed: take a reference to keep it). */
  void (*on_resource)(void *ud, xds_kind k, const char *name, xds_resource *r);
  /* An update of |name| was NACKed (the previous one stays in force). */
  void (*on_error)(void *ud, xds_kind k, const char *name, const char *why);
  /* |name| does not exist. */
  void (*on_does_not_exist)(void *ud, xds_kind k, const char *name);
} grit_xdsc_watcher;

/* The client for the first server of |b| (taken: freed here when a client
 * for that server already exists, else owned by the new client). |*out| is
 * a new reference. Returns GRIT_OK, GRIT_ERR_INVALID_ARG (no server),
 * GRIT_ERR_NOMEM, or what grit_channel_create returns for the server. */
grit_err grit_xdsc_get(xds_bootstrap *b, grit_xdsc **out);
/* The client of server |uri| if one exists (a new reference), or NULL. */
grit_xdsc *grit_xdsc_find(const char *uri);
/* Drop a reference; the last tells the worker to end the stream and free
 * the client, and returns without waiting (so it may run on grit's I/O
 * thread, as a channel's destruction does). Not from a watcher callback. */
void grit_xdsc_release(grit_xdsc *c);
/* Wait up to |timeout_ms| until every released client is freed (before a
 * process stops grit's default runtime). Returns true when none is left. */
bool grit_xdsc_wait_all_freed(uint64_t timeout_ms);
/* The same for the clients already released only (their worker ends the
 * stream and frees them): what grit_default_runtime_shutdown waits for
 * before it stops the runtime their channels live on. */
bool grit_xdsc_wait_released_freed(uint64_t timeout_ms);
/* The channel target the client's metrics are labelled with (gRFC A78
 * grpc.target): the first one set is kept. */
void grit_xdsc_set_target(grit_xdsc *c, const char *target);

/* Watch |name| of |k| for |w| (copied) and |ud|: a cached resource is
 * announced at once. Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_xdsc_watch(grit_xdsc *c, xds_kind k, const char *name,
                         const grit_xdsc_watcher *w, void *ud);
/* Remove the watch made with the same |k|, |name| and |ud|. */
void grit_xdsc_unwatch(grit_xdsc *c, xds_kind k, const char *name, void *ud);

/* What the operator sees: the stream's counters, the version ACKed last
 * and the last NACK's reason of |k| (copied into |buf|, "" when none). */
void grit_xdsc_stats(grit_xdsc *c, xds_ads_stats *st, uint64_t *streams);
void grit_xdsc_last_nack(grit_xdsc *c, xds_kind k, char *buf, size_t size);
void grit_xdsc_version(grit_xdsc *c, xds_kind k, char *buf, size_t size);
/* The client as JSON (grit call --show-xds): its server, whether its
 * stream is connected, stream and failure counts, and per type the version
 * ACKed, the last NACK's reason, the update counters and every watched
 * resource with its cache state and what it holds (a listener's route
 * config, virtual hosts and routes, a cluster's type and policy, endpoints
 * by locality with priority, weight and health). New (grit_free), or NULL
 * on out of memory. Thread: any. */
char *grit_xdsc_describe(grit_xdsc *c);
/* Add the gRFC A78 families (grpc_xds_client_connected,
 * _server_failure_total, _resource_updates_valid_total,
 * _resource_updates_invalid_total, _resources) to the Prometheus text,
 * labelled grpc_target, grpc_xds_server, grpc_xds_resource_type,
 * grpc_xds_cache_state; at most 16 clients. Once per process (again: a
 * no-op). */
void grit_xdsc_metrics_register(void);

/* ---- xds_resolver.c: the xds resolver front (A27, A28) ----
 * The "xds" scheme is built into libgrit (channel.h's
 * grit_ext_builtin_resolvers): grit_channel_create with "xds:///name"
 * checks the bootstrap (GRIT_ARG_XDS_BOOTSTRAP_CONFIG, else
 * GRPC_XDS_BOOTSTRAP, else GRPC_XDS_BOOTSTRAP_CONFIG) and, when first
 * used, serves the listener |name| (a route per call, one child policy
 * per cluster; see docs/xds.md). Registering it
 * again does nothing. Thread: any. Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_xds_resolver_register(void);
/* The bootstrap a channel with GRIT_ARG_XDS_BOOTSTRAP_CONFIG |config|
 * (NULL: none) uses: |config|, else the environment. Errors are
 * GRIT_ERR_INVALID_CONFIG (|d|: the JSON path and reason; none found names
 * the argument and both variables) or GRIT_ERR_NOMEM. */
grit_err grit_xds_bootstrap_load(const char *config, xds_bootstrap **out,
                                 grit_error_detail *d);

/* ---- cluster_lb.c: a cluster's LB policy tree (issue 27; SPEC XD-03) ----
 * xds_cluster_impl over priority over weighted_target (localities) over
 * the cluster's policy, from the Cluster |cl| named |cluster_name| and its
 * ClusterLoadAssignment |e|. The tree borrows |cluster_name| and |e|'s
 * drop categories: use it while they live. Returns GRIT_OK or
 * GRIT_ERR_NOMEM. */
typedef struct grit_xds_lb_tree grit_xds_lb_tree;
struct grit_lb_node;
grit_err grit_xds_lb_tree_build(const char *cluster_name, const xds_cluster *cl,
                                const xds_endpoints *e, grit_xds_lb_tree **out);
const struct grit_lb_node *grit_xds_lb_tree_root(const grit_xds_lb_tree *t);
/* The cluster's endpoint-picking policy as a service config (what the
 * channel's config observers see); lives as long as |t|. */
const char *grit_xds_lb_tree_config_json(const grit_xds_lb_tree *t);
/* How many usable endpoints (HEALTHY or UNKNOWN) the tree holds. */
size_t grit_xds_lb_tree_addresses(const grit_xds_lb_tree *t);
void grit_xds_lb_tree_free(grit_xds_lb_tree *t);
/* A LOGICAL_DNS cluster's tree: pick_first over |addrs| (copied) under the
 * cluster's circuit breaker. Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_xds_lb_tree_build_dns(const char *cluster_name,
                                    const xds_cluster *cl,
                                    const grit_addr *addrs, size_t n,
                                    grit_xds_lb_tree **out);

/* ---- logical_dns.c: a LOGICAL_DNS cluster's name resolved by grit's
 * DNS resolver (resolver/) on |loop|; loop thread only. |changed| runs on
 * the loop after each result. ---- */
typedef struct grit_xds_dns grit_xds_dns;
grit_err grit_xds_dns_start(uv_loop_t *loop, const char *host, uint16_t port,
                            void (*changed)(void *ud), void *ud,
                            grit_xds_dns **out);
/* Whether |d| resolves |host|:|port| (false for NULL). */
bool grit_xds_dns_is(const grit_xds_dns *d, const char *host, uint16_t port);
/* The addresses of the last good result (|*n| of them), or NULL before
 * one; |*err| the lookup's error while there is none, else NULL. */
const grit_addr *grit_xds_dns_addrs(const grit_xds_dns *d, size_t *n,
                                    const char **err);
void grit_xds_dns_stop(grit_xds_dns *d);

#endif
