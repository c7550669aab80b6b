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

#include "resolver/resolver.h"
#include "runtime/runtime.h"

/* ---- ext_resolver.c: a target scheme served by a layer above ----
 * A module above channel/ (xdsclient/'s xds front, issue 27) serves a
 * scheme ("xds") without channel/ including it: it registers these ops,
 * and grit_channel_create with "scheme:..." parses the rest of the target
 * as a DNS name for the authority, then starts the front instead of DNS.
 * The front hands the channel results (addresses + a service config, as a
 * resolver does) on the channel's loop. Later, per-call choices (the
 * route's cluster, retry policy, timeout) enter here too (docs/xds.md). */
typedef struct grit_channel grit_channel;
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
} grit_ext_resolver_ops;

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
/* Loop thread: a result whose LB policy is a tree (an xDS cluster, issue
 * 27): the channel's policy becomes grit_lb_node_vt(|root|), given |root|
 * (borrowed for the call) with update_node; |config_json| as above. */
struct grit_lb_node;
void grit_channel_ext_result_tree(grit_channel *ch,
                                  const struct grit_lb_node *root,
                                  const char *config_json);
/* The channel's loop (for a front's own watchers: a LOGICAL_DNS cluster's
 * resolver, issue 27). */
uv_loop_t *grit_channel_ext_loop(grit_channel *ch);

#endif
