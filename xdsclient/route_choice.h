/* The per-call route choice of the xds resolver (issue 27; gRFC A28, A31,
 * A42, A44; SPEC XD-02), pure: no loop, no lock, randomness passed in.
 * The resolver front (xds_resolver.c) builds one xds_rtable per route
 * configuration and asks it for each call's route.
 * Layout: floor 5 of docs/layout.md (with xdsclient/). */
#ifndef GRIT_XDS_ROUTE_CHOICE_H
#define GRIT_XDS_ROUTE_CHOICE_H

#include "service_config/service_config.h"
#include "xds/xds.h"

/* grpc-core caps an xDS route's attempts as a service config's
 * maxAttempts: at 5. */
#define GRIT_XDS_MAX_ATTEMPTS 5

/* A44: |in| as grit's retry policy: retry_on's codes, num_retries + 1
 * attempts (at most GRIT_XDS_MAX_ATTEMPTS), the backoff's base and max
 * interval, multiplier 2 (as grpc-core). False when retry_on names no code
 * grpc retries on (then the route has no retry policy). */
bool grit_xds_retry_convert(const xds_retry_policy *in, grit_retry_policy *out);

/* A31: the deadline cap of |r| in ms (0: none): its grpc_timeout_header_max
 * if set, else its max_stream_duration, else the listener's
 * (|has_default|, |default_ns|); a zero duration is no cap. */
uint64_t grit_xds_route_timeout_ms(const xds_route *r, bool has_default,
                                   int64_t default_ns);

/* A42: the request hash of |r|'s hash policies for a call with metadata
 * |md|: each header policy hashes the header's value (repeated values
 * joined with ",", XXH64 seed 0; a policy with regex_rewrite is skipped),
 * channel_id policies give |channel_id|; each new hash is XORed into the
 * previous one rotated left by 1; a terminal policy that produced a hash
 * ends the walk. False when none produced one. */
bool grit_xds_route_hash(const xds_route *r, const grit_metadata *md,
                         uint64_t channel_id, uint64_t *hash);

/* The outcome of a choice. */
typedef struct xds_choice {
  const xds_route *route;
  size_t index;        /* of |route| in its virtual host */
  const char *cluster; /* its cluster, or the weighted pick */
  bool has_hash;
  uint64_t hash;
} xds_choice;

/* A28: the route of |vh| for |path| and |md| (the runtime fraction drawn
 * from |rng|), the cluster (a weighted_clusters pick drawn from |rng|) and
 * the hash. Returns GRIT_STATUS_OK, or UNAVAILABLE with grpc-core's
 * message in |msg| ("No matching route found in xDS route config",
 * "Matching route has inappropriate action"). */
grit_status_code grit_xds_choose(const xds_vhost *vh, const char *path,
                                 const grit_metadata *md, grit_rng *rng,
                                 uint64_t channel_id, xds_choice *out,
                                 char *msg, size_t msg_size);

#endif
