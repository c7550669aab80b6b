/* Shared by the lb module files only: address-list reconciliation. */
#ifndef GRIT_LB_INT_H
#define GRIT_LB_INT_H

#include "lb/lb.h"

/* A list of subchannels indexed like the address list they came from. */
typedef struct grit_lb_sclist {
  grit_subchannel **scs;
  size_t n;
} grit_lb_sclist;

/* Build |out| for |addrs|, moving subchannels of |old| whose address is
 * still present (so their connections survive) and creating the rest.
 * Subchannels left in |old| are destroyed. */
grit_err grit_lb_sclist_reconcile(grit_lb_sclist *old, const grit_addr *addrs,
                                  size_t n, const grit_subchannel_args *a,
                                  grit_subchannel_state_cb cb, void *ud,
                                  grit_lb_sclist *out);
void grit_lb_sclist_free(grit_lb_sclist *l);
/* The connected subchannels of |l| that are not picked (health, ejection)
 * as "addr (why), ..." in |buf|; NULL when there is none. */
const char *grit_lb_sclist_skipped(const grit_lb_sclist *l, char *buf,
                                   size_t len);
/* Why no subchannel of |l| can take a call, for the status message of a
 * failed pick (issue 28): every address with its reason, "ejected by
 * outlier detection", "health: not SERVING", "transient failure: <last
 * error>", "connecting" or "idle", in |buf| (truncated with "..."). */
const char *grit_lb_sclist_why_unusable(const grit_lb_sclist *l, char *buf,
                                        size_t len);
/* grit_lb_sclist_skipped computed once per LB event, not per pick (it
 * walks the list): policies clear |valid| when a subchannel changes state
 * or the list changes. */
typedef struct grit_lb_skipcache {
  bool valid;
  const char *text;
  char buf[256];
} grit_lb_skipcache;
const char *grit_lb_skipped_cached(const grit_lb_sclist *l,
                                   grit_lb_skipcache *c);
/* SPEC LB-02: a list's state: READY if any is, else CONNECTING if any,
 * else IDLE if any, else TRANSIENT_FAILURE (an empty list is IDLE). */
grit_connectivity_state grit_lb_sclist_aggregate(const grit_lb_sclist *l);
/* What every list policy does when one of its subchannels changes state:
 * keep the last failure text in |error|, ask for re-resolution on a
 * failed connect or a lost connection (SPEC DNS-05), and reconnect an
 * IDLE one once the policy has |started|. */
void grit_lb_sc_changed(grit_subchannel *sc, grit_connectivity_state s,
                        const grit_lb_helper *h, bool started, char *error,
                        size_t error_size);
/* Index of |sc| in |l|, or l->n. */
size_t grit_lb_sclist_index(const grit_lb_sclist *l, const grit_subchannel *sc);

/* subchannel.c: the subchannel of a link in a grit_sc_group's list, and
 * whether it is ejected. */
grit_subchannel *grit_lb_group_sc(grit_list *link);
bool grit_subchannel_ejected(const grit_subchannel *sc);

/* health.c: one grpc.health.v1.Health/Watch per READY subchannel (SPEC
 * HC-01, HC-02; gRFC A17). The watch reports each status change; a stream
 * that ends is restarted with backoff, UNIMPLEMENTED counts as SERVING. */
typedef enum grit_health_status {
  GRIT_HEALTH_WAITING = 0, /* no answer yet */
  GRIT_HEALTH_SERVING = 1,
  GRIT_HEALTH_NOT_SERVING = 2, /* NOT_SERVING, UNKNOWN, or stream failed */
} grit_health_status;

typedef struct grit_health_watch grit_health_watch;
typedef void (*grit_health_cb)(grit_health_status s, void *user_data);
/* Start watching |service| on the READY transport |t|. */
grit_err grit_health_watch_start(const grit_subchannel_args *a,
                                 grit_transport *t, const char *service,
                                 const char *addr_text, grit_health_cb cb,
                                 void *user_data, grit_health_watch **out);
/* No callback after this; the memory goes once the stream and the timer
 * are closed. NULL is a no-op. */
void grit_health_watch_stop(grit_health_watch *w);

/* orca.c: one xds.service.orca.v3.OpenRcaService/StreamCoreMetrics
 * stream on a READY transport (SPEC LP-01; gRFC A51). Each report goes to
 * |cb| (and to the application's callback in a->shared). A stream that
 * ends is restarted (at once after a report, else with backoff);
 * UNIMPLEMENTED stops it for the connection. */
typedef struct grit_orca_watch grit_orca_watch;
typedef void (*grit_orca_cb)(const grit_orca_report *r, void *user_data);
grit_err grit_orca_watch_start(const grit_subchannel_args *a, grit_transport *t,
                               uint64_t interval_ms, const char *addr_text,
                               grit_orca_cb cb, void *user_data,
                               grit_orca_watch **out);
/* No callback after this. NULL is a no-op. */
void grit_orca_watch_stop(grit_orca_watch *w);

/* lb_child.c: a child of a tree policy (priority, weighted_target,
 * xds_cluster_impl; issue 27). Its helper records the child's state and
 * calls |on_state|; re-resolution goes to |up|. Allocated one by one, so
 * the helper's ctx stays put. */
typedef struct grit_lb_kid {
  char *name;
  uint32_t weight;
  grit_lb_policy *p;
  grit_connectivity_state state;
  grit_lb_helper h; /* the child's; ctx is this kid */
  const grit_lb_helper *up;
  void (*on_state)(struct grit_lb_kid *k);
  void *parent;
  /* The owner's bookkeeping (priority's timers). */
  uint64_t failover_at;  /* 0: no failover timer */
  uint64_t retention_at; /* 0: active */
  bool seen_ready_or_idle;
  bool started;
} grit_lb_kid;

/* A kid named |name| (copied) with no policy yet; NULL on out-of-memory. */
grit_lb_kid *grit_lb_kid_new(const char *name, const grit_lb_helper *up,
                             void (*on_state)(grit_lb_kid *k), void *parent);
/* Give |k| the configuration |n|: a policy of another kind replaces the
 * old one; a leaf gets its params (outlier detection too) and addresses,
 * a tree node its update_node. */
grit_err grit_lb_kid_update(grit_lb_kid *k, const grit_subchannel_args *a,
                            const grit_lb_node *n);
void grit_lb_kid_free(grit_lb_kid *k);
/* The tree policies' shared vtable entries: a call's result (and its ORCA
 * report, for the children that want reports) to each of the |n| kids
 * that have a policy; whether any of them wants reports; and
 * update_addresses, a no-op (GRIT_OK): a tree node carries its addresses
 * in update_node. */
void grit_lb_kids_call_result(grit_lb_kid *const *kids, size_t n,
                              const grit_addr *peer, bool ok,
                              const grit_orca_report *report);
bool grit_lb_kids_want_load_reports(grit_lb_kid *const *kids, size_t n);
grit_err grit_lb_node_update_addresses(grit_lb_policy *p,
                                       const grit_addr *addrs, size_t n,
                                       bool shuffle);
/* Every address under |n|, in a new array (free with grit_free; its
 * length in |*count|). Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_lb_node_addrs(const grit_lb_node *n, grit_addr **out,
                            size_t *count);
/* A deep copy of |n| (one allocation per piece); NULL on out-of-memory. */
grit_lb_node *grit_lb_node_dup(const grit_lb_node *n);
void grit_lb_node_free(grit_lb_node *n);

#endif
