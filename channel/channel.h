/*
 * channel: the public API's implementation. Channel arguments, config
 * selection, the LB policy in use, calls, their attempts and deadlines,
 * and what they report. It sits above every library module: it runs on a
 * runtime/ loop, resolves names with resolver/ and includes the other
 * modules' headers; nothing in the library includes it. Everything it
 * offers is behind include/grit/grit.h.
 * Layout: floor 4 of docs/layout.md.
 */
#ifndef GRIT_CHANNEL_H
#define GRIT_CHANNEL_H

#include "lb/lb.h"
#include "resolver/resolver.h"
#include "runtime/runtime.h"
#include "service_config/service_config.h"

/* ---- ext_resolver.c: a target scheme served by a layer above ----
 * A module above channel/ (xdsclient/'s xds front, issue 27) serves a
 * scheme ("xds") without channel/ including it: it registers these ops,
 * and grit_channel_create with "scheme:..." parses the rest of the target
 * as a DNS name for the authority, then starts the front instead of DNS.
 * The front hands the channel results (addresses + a service config, as a
 * resolver does) on the channel's loop, or one address list and policy
 * per cluster (grit_channel_ext_result_clusters); with |select| it also
 * chooses each call's route: its cluster, retry policy, timeout and hash
 * (docs/xds.md). */
typedef struct grit_channel grit_channel;

/* One call's route (issue 27; gRFC A28, A31, A42, A44), as |select|
 * answers it. Everything it points to lives until |release|. */
typedef struct grit_ext_route {
  /* What the pick sees: the cluster (the cluster manager's child to pick
   * in) and the hash a hash policy gave (ring_hash). First, so that the
   * pick arguments take the route as it is. */
  grit_pick_route pick;
  const grit_retry_policy *retry; /* the route's retry policy; NULL: none */
  uint64_t timeout_ms;            /* caps the call's deadline; 0: none */
  void *hold[2];                  /* the front's, for |release| */
} grit_ext_route;

typedef struct grit_ext_resolver_ops {
  const char *scheme; /* without the ':' */
  /* Loop thread, first use of the channel: start serving |target| (the
   * whole target string). Returns GRIT_OK with |*state| set, or an error
   * (the channel goes TRANSIENT_FAILURE). */
  grit_err (*start)(grit_channel *ch, const char *target, void **state);
  /* Loop thread: the work the front asked for with grit_channel_ext_kick
   * (never after stop). */
  void (*kick)(void *state);
  /* Loop thread, the channel is going: nothing of the front may touch the
   * channel after it returns. */
  void (*stop)(void *state);
  /* Optional (NULL: calls are not routed). Loop thread, a call starts,
   * before its first attempt: the route for |path| ("/svc/Method") and the
   * call's request metadata |md| (may be NULL). Returns GRIT_STATUS_OK
   * with |*out| filled (released with |release| when the call ends, also
   * after |stop|), or the status the call fails with (UNAVAILABLE: no
   * route matches, or its action does not forward) and its message in
   * |msg| (|msg_size| bytes). */
  grit_status_code (*select)(void *state, const char *path,
                             const grit_metadata *md, grit_ext_route *out,
                             char *msg, size_t msg_size);
  void (*release)(grit_ext_route *r);
  /* Any thread, at grit_channel_create (may be NULL): refuse |target|
   * before the channel exists, e.g. with no or an invalid xDS bootstrap.
   * |config| is GRIT_ARG_XDS_BOOTSTRAP_CONFIG's value or NULL. Returns
   * GRIT_OK or an error with |d| filled (path and reason). */
  grit_err (*check)(const char *target, const char *config,
                    grit_error_detail *d);
  /* Any thread (may be NULL): wait up to |ms| until the front's background
   * work (the xDS client's stream and its channel) is gone, before
   * grit_default_runtime_shutdown stops the runtime it lives on. */
  void (*wait_idle)(uint64_t ms);
} grit_ext_resolver_ops;

/* The library's built-in schemes, NULL-terminated: defined by the plugin
 * table of the layer above (xdsclient/xds_resolver.c, the way grpc-core's
 * plugin registry lists its resolvers), read by ext_resolver.c on first
 * use. channel/ includes nothing of that layer: only this symbol links. */
extern const grit_ext_resolver_ops *const grit_ext_builtin_resolvers[];

/* Register |ops| (static storage) for its scheme; at most 4 schemes.
 * Thread: any, before the channels that use it are made. Returns GRIT_OK,
 * GRIT_ERR_NOMEM when the table is full. */
grit_err grit_channel_register_ext_resolver(const grit_ext_resolver_ops *ops);
/* Any thread: run the front's kick on the channel's loop soon (coalesced). */
void grit_channel_ext_kick(grit_channel *ch);
/* Loop thread: the front's result. |addrs| (copied by the policy) and
 * |config_json| (a service config, or NULL) as a resolver's; |error|
 * non-NULL: no usable result (calls fail UNAVAILABLE with it while the
 * channel has no addresses). */
void grit_channel_ext_result(grit_channel *ch, const grit_addr *addrs, size_t n,
                             const char *config_json, const char *error);
/* Loop thread: the front's result as one child policy per cluster (the
 * channel's policy becomes grit_lb_cluster_manager, fed with |kids|,
 * copied); |config_json| as above. Calls pick in the cluster their route
 * chose. */
void grit_channel_ext_result_clusters(grit_channel *ch,
                                      const grit_lb_cm_child *kids, size_t n,
                                      const char *config_json);
/* The channel's loop (for a front's own watchers: a LOGICAL_DNS cluster's
 * resolver, issue 27). */
uv_loop_t *grit_channel_ext_loop(grit_channel *ch);
/* Loop thread: what the channel serves is gone (gRFC A27: the Listener or
 * the Cluster was deleted). Unlike an error result, the channel drops its
 * addresses and policy: calls fail UNAVAILABLE with |error| until the next
 * result. */
void grit_channel_ext_fail(grit_channel *ch, const char *error);
/* Loop thread, before grit_channel_ext_result: what the result applies
 * (e.g. the xDS resources and versions). The config watcher hears one
 * event (source GRIT_CONFIG_SOURCE_XDS) per result whose config or note
 * changed. */
void grit_channel_ext_note(grit_channel *ch, const char *note);
/* GRIT_ARG_XDS_BOOTSTRAP_CONFIG of the channel, or NULL (borrowed while
 * the channel lives). */
const char *grit_channel_ext_config(const grit_channel *ch);

#endif
