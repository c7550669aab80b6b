/* The ADS protocol as a pure machine (gRFC A27; SPEC XD-01): one
 * state-of-the-world v3 stream of
 * envoy.service.discovery.v3.AggregatedDiscoveryService/
 * StreamAggregatedResources. It keeps, per resource type, the names
 * watched, the last version ACKed and nonce seen, and a cache of decoded
 * resources; it turns responses into ACKs or NACKs (with the reasons) and
 * watcher notifications, and runs the does-not-exist timers from the time
 * the caller passes in. No I/O, no clock, no threads: the caller owns the
 * stream, sends the requests it is handed, and feeds back what arrives.
 * Callbacks run inside the call that caused them and must not call back
 * into the machine (queue work instead).
 * Layout: floor 1 of docs/layout.md. */
#ifndef GRIT_XDS_ADS_H
#define GRIT_XDS_ADS_H

#include "xds/xds.h"

#define XDS_DNE_TIMEOUT_MS 15000 /* A27's does-not-exist timer */

typedef struct xds_ads_cbs {
  /* A new or changed resource (borrowed: take a reference to keep it). */
  void (*on_resource)(void *ud, xds_kind k, const char *name, xds_resource *r);
  /* An update of |name| was refused (NACKed): the previous one, if any,
   * stays in force. */
  void (*on_error)(void *ud, xds_kind k, const char *name, const char *why);
  /* |name| does not exist (deleted from a state-of-the-world response, or
   * no answer within the does-not-exist timer). */
  void (*on_does_not_exist)(void *ud, xds_kind k, const char *name);
} xds_ads_cbs;

typedef struct xds_ads xds_ads;

/* A machine for the first server of |b| (borrowed; must outlive it).
 * |user_agent_version| is sent in the Node. Returns GRIT_OK or
 * GRIT_ERR_NOMEM. */
grit_err grit_xds_ads_create(const xds_bootstrap *b,
                             const char *user_agent_version,
                             const xds_ads_cbs *cbs, void *ud, xds_ads **out);
void grit_xds_ads_destroy(xds_ads *a);

/* Watch |name| of |k|: a request goes out (if the stream is up) and, when
 * the resource is cached, on_resource runs at once. Several watches of one
 * name share the subscription. Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_xds_ads_watch(xds_ads *a, xds_kind k, const char *name,
                            uint64_t now_ms);
/* Drop one watch; the last unsubscribes the name. */
void grit_xds_ads_unwatch(xds_ads *a, xds_kind k, const char *name);

/* A (new) stream is up: every type with watched names is requested again
 * (the Node goes with the first request), the versions kept, the nonces
 * cleared, the timers restarted for names with nothing cached. */
void grit_xds_ads_stream_started(xds_ads *a, uint64_t now_ms);
/* The stream ended; requests are held until the next one. */
void grit_xds_ads_stream_ended(xds_ads *a);

/* A DiscoveryResponse arrived. Returns GRIT_OK; GRIT_ERR_INVALID_ARG when
 * the message itself is malformed or of an unknown type (nothing changes;
 * a NACK is queued when its type and nonce could be read); GRIT_ERR_NOMEM. */
grit_err grit_xds_ads_on_response(xds_ads *a, const uint8_t *p, size_t n,
                                  uint64_t now_ms);

/* Fire the does-not-exist timers due at |now_ms|. */
void grit_xds_ads_on_timer(xds_ads *a, uint64_t now_ms);
/* When grit_xds_ads_on_timer is next due (0: no timer). */
uint64_t grit_xds_ads_next_timer_ms(const xds_ads *a);

/* The next DiscoveryRequest to send, serialized, into |out| (grit_free its
 * data). Returns true when there was one. */
bool grit_xds_ads_next_request(xds_ads *a, grit_bytes *out);

/* What the operator sees of one type: the version ACKed last, and the
 * last NACK's reason (NULL: none). Borrowed until the next call. */
const char *grit_xds_ads_version(const xds_ads *a, xds_kind k);
const char *grit_xds_ads_last_nack(const xds_ads *a, xds_kind k);

/* Counters (A78-like): resources accepted, resources refused. */
typedef struct xds_ads_stats {
  uint64_t valid[XDS_KINDS];
  uint64_t invalid[XDS_KINDS];
  uint64_t requests, responses;
} xds_ads_stats;
void grit_xds_ads_get_stats(const xds_ads *a, xds_ads_stats *st);

/* A watched resource's cache state, as gRFC A78's grpc.xds.cache_state. */
typedef enum xds_cache_state {
  XDS_CACHE_REQUESTED = 0,         /* asked for, nothing heard yet */
  XDS_CACHE_DOES_NOT_EXIST = 1,    /* deleted (A27) or its timer fired */
  XDS_CACHE_ACKED = 2,             /* the resource in force */
  XDS_CACHE_NACKED = 3,            /* its only update was refused */
  XDS_CACHE_NACKED_BUT_CACHED = 4, /* refused; the previous one in force */
} xds_cache_state;
const char *grit_xds_cache_state_name(xds_cache_state st);
/* Each watched name of |k| with its resource in force (borrowed for the
 * call; NULL: none) and its state. |fn| must not call into the machine. */
typedef void (*xds_ads_entry_fn)(void *ud, const char *name,
                                 const xds_resource *r, xds_cache_state st);
void grit_xds_ads_foreach(const xds_ads *a, xds_kind k, xds_ads_entry_fn fn,
                          void *ud);

#endif
