/* The per-call route choice (issue 27; gRFC A28, A31, A42, A44): see
 * route_choice.h. What grpc-core's xds_resolver.cc does in its config
 * selector, on grit's decoded resources. */
#include <stdio.h>
#include <string.h>

#include "lb/lb_algo.h"
#include "xdsclient/route_choice.h"

bool grit_xds_retry_convert(const xds_retry_policy *in,
                            grit_retry_policy *out) {
  memset(out, 0, sizeof(*out));
  if (in->codes == 0)
    return false;
  uint32_t attempts = in->max_attempts < 2 ? 2 : in->max_attempts;
  *out = (grit_retry_policy){
      .max_attempts =
          attempts > GRIT_XDS_MAX_ATTEMPTS ? GRIT_XDS_MAX_ATTEMPTS : attempts,
      .initial_backoff_ns = in->base_ns > 0 ? in->base_ns : 1,
      .max_backoff_ns = in->max_ns > 0 ? in->max_ns : 1,
      .backoff_multiplier = 2.0,
      .retryable_codes = in->codes & ~GRIT_CODE_BIT(GRIT_STATUS_OK),
  };
  return out->retryable_codes != 0;
}

static uint64_t ns_to_ms(int64_t ns) {
  return ns <= 0 ? 0 : grit_ns_to_ms_ceil(ns);
}

uint64_t grit_xds_route_timeout_ms(const xds_route *r, bool has_default,
                                   int64_t default_ns) {
  if (r->has_grpc_timeout_header_max)
    return ns_to_ms(r->grpc_timeout_header_max_ns);
  if (r->has_max_stream_duration)
    return ns_to_ms(r->max_stream_duration_ns);
  return has_default ? ns_to_ms(default_ns) : 0;
}

/* The header's values joined with "," into |buf| (as grpc-core's
 * GetHeaderValue); "-bin" headers are never hashed; "content-type" is what
 * grit sends. False when absent. */
static bool header_value(const grit_metadata *md, const char *name, char *buf,
                         size_t size, size_t *len) {
  size_t nl = strlen(name);
  if (nl > 4 && strcmp(name + nl - 4, "-bin") == 0)
    return false;
  if (strcmp(name, "content-type") == 0) {
    grit_str_copy(buf, size, "application/grpc");
    *len = strlen(buf);
    return true;
  }
  bool present = false;
  size_t jl = 0, n = grit_metadata_count(md);
  for (size_t i = 0; i < n; i++) {
    const char *k;
    const uint8_t *v;
    size_t vl;
    grit_metadata_get(md, i, &k, &v, &vl);
    if (strcmp(k, name) != 0)
      continue;
    if (present && jl + 1 < size)
      buf[jl++] = ',';
    size_t take = vl < size - 1 - jl ? vl : size - 1 - jl;
    memcpy(buf + jl, v, take);
    jl += take;
    present = true;
  }
  buf[jl] = '\0';
  *len = jl;
  return present;
}

bool grit_xds_route_hash(const xds_route *r, const grit_metadata *md,
                         uint64_t channel_id, uint64_t *hash) {
  bool have = false;
  uint64_t h = 0;
  for (size_t i = 0; i < r->nhash; i++) {
    const xds_hash_policy *p = &r->hash[i];
    bool got = false;
    uint64_t v = 0;
    if (p->kind == XDS_HASH_CHANNEL_ID) {
      v = channel_id;
      got = true;
    } else if (!p->rewrite) {
      char buf[4096];
      size_t len;
      if (header_value(md, p->header, buf, sizeof(buf), &len)) {
        v = grit_xxh64(buf, len, 0);
        got = true;
      }
    }
    if (got) {
      /* Rotating keeps two equal policies from cancelling out. */
      uint64_t old = have ? ((h << 1) | (h >> 63)) : 0;
      h = old ^ v;
      have = true;
    }
    if (p->terminal && have)
      break;
  }
  *hash = h;
  return have;
}

grit_status_code grit_xds_choose(const xds_vhost *vh, const char *path,
                                 const grit_metadata *md, grit_rng *rng,
                                 uint64_t channel_id, xds_choice *out,
                                 char *msg, size_t msg_size) {
  memset(out, 0, sizeof(*out));
  uint32_t fraction = grit_rng_below(rng, 1000000);
  const xds_route *r = grit_xds_route_find(vh, path, md, fraction);
  if (!r) {
    snprintf(msg, msg_size, "No matching route found in xDS route config");
    return GRIT_STATUS_UNAVAILABLE;
  }
  out->route = r;
  out->index = (size_t)(r - vh->routes);
  uint64_t draw = r->action == XDS_ACTION_WEIGHTED && r->total_weight
                      ? grit_rng_next(rng) % r->total_weight
                      : 0;
  out->cluster = grit_xds_route_cluster(r, draw);
  if (!out->cluster) {
    snprintf(msg, msg_size, "Matching route has inappropriate action");
    return GRIT_STATUS_UNAVAILABLE;
  }
  out->has_hash = grit_xds_route_hash(r, md, channel_id, &out->hash);
  return GRIT_STATUS_OK;
}
