/* RouteConfiguration and Listener decoders (gRFC A27, A28, A31, A39,
 * A42, A44; SPEC XD-02), validated as grpc-go validates them: what grpc
 * NACKs is NACKed here with the field's path, what grpc ignores (routes
 * with query-parameter matchers, unknown cluster specifiers, hash
 * policies it does not know) is skipped. Field numbers are those of
 * envoy/config/route/v3/route_components.proto and friends. */
#include "xds/xds_int.h"

#include <stdio.h>
#include <string.h>

#define TYPE_PREFIX "type.googleapis.com/"
#define HCM_TYPE                                                               \
  TYPE_PREFIX "envoy.extensions.filters.network.http_connection_manager.v3."   \
              "HttpConnectionManager"
#define ROUTER_TYPE TYPE_PREFIX "envoy.extensions.filters.http.router.v3.Router"
#define TYPED_STRUCT_V3 TYPE_PREFIX "xds.type.v3.TypedStruct"
#define TYPED_STRUCT_V1 TYPE_PREFIX "udpa.type.v1.TypedStruct"

/* Walk every field of the LEN field |f| into |g|; a malformed message
 * stops the walk with an error at the current path (grit_xds_resource_decode
 * fails any resource whose context holds an error). */
#define FOR_FIELDS(c, f, g)                                                    \
  for (grit_pbr rd_##g = xds_reader(f); grit_xds_next((c), &rd_##g, &(g));)

static bool want_len(xds_dctx *c, const grit_pbf *f) {
  return f->wt == GRIT_PB_LEN
             ? true
             : grit_xds_fail(c, "field %u: wrong wire type", f->num);
}

/* ---- matchers ---- */

static bool decode_regex(xds_dctx *c, const grit_pbf *f, xds_regex **out) {
  const char *pattern = NULL;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    if (g.num == 2 && !grit_xds_str(c, &g, &pattern))
      return false;
  }
  if (!pattern)
    return grit_xds_fail(c, "regex is empty");
  const char *why;
  *out = grit_xds_regex_compile(c->a, pattern, &why);
  if (!*out)
    return why ? grit_xds_fail(c, "regex \"%.64s\": %s", pattern, why)
               : grit_xds_oom(c);
  return true;
}

/* A StringMatcher (envoy.type.matcher.v3): exact=1, prefix=2, suffix=3,
 * safe_regex=5, ignore_case=6, contains=7. */
static bool decode_string_matcher(xds_dctx *c, const grit_pbf *f,
                                  xds_header_matcher *h) {
  bool have = false;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    switch (g.num) {
    case 1:
    case 2:
    case 3:
    case 7:
      h->kind = g.num == 1   ? XDS_HM_EXACT
                : g.num == 2 ? XDS_HM_PREFIX
                : g.num == 3 ? XDS_HM_SUFFIX
                             : XDS_HM_CONTAINS;
      if (!grit_xds_str(c, &g, &h->value))
        return false;
      have = true;
      break;
    case 5:
      h->kind = XDS_HM_REGEX;
      if (!want_len(c, &g) || !decode_regex(c, &g, &h->re))
        return false;
      have = true;
      break;
    case 6:
      h->ignore_case = g.v != 0;
      break;
    case 8:
      return grit_xds_fail(c, "custom string matchers are not supported");
    default:
      break;
    }
  }
  if (!have)
    return grit_xds_fail(c, "string matcher has no pattern");
  if (h->kind == XDS_HM_REGEX && h->ignore_case)
    return grit_xds_fail(c, "ignore_case is not allowed with safe_regex");
  if (h->kind != XDS_HM_EXACT && h->kind != XDS_HM_REGEX && !h->value[0])
    return grit_xds_fail(c, "empty prefix, suffix or contains pattern");
  return true;
}

/* HeaderMatcher: name=1, exact_match=4, range_match=6, present_match=7,
 * invert_match=8, prefix_match=9, suffix_match=10, safe_regex_match=11,
 * contains_match=12, string_match=13. */
static bool decode_header_matcher(xds_dctx *c, const grit_pbf *f,
                                  xds_header_matcher *h) {
  bool have = false;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    switch (g.num) {
    case 1:
      if (!grit_xds_str(c, &g, &h->name))
        return false;
      break;
    case 4:
    case 9:
    case 10:
    case 12:
      h->kind = g.num == 4    ? XDS_HM_EXACT
                : g.num == 9  ? XDS_HM_PREFIX
                : g.num == 10 ? XDS_HM_SUFFIX
                              : XDS_HM_CONTAINS;
      if (!grit_xds_str(c, &g, &h->value))
        return false;
      if (g.num != 4 && !h->value[0])
        return grit_xds_fail(c, "empty prefix, suffix or contains pattern");
      have = true;
      break;
    case 6: {
      h->kind = XDS_HM_RANGE;
      grit_pbf k;
      if (!want_len(c, &g))
        return false;
      FOR_FIELDS(c, &g, k) {
        if (k.num == 1)
          h->start = (int64_t)k.v;
        else if (k.num == 2)
          h->end = (int64_t)k.v;
      }
      have = true;
      break;
    }
    case 7:
      h->kind = XDS_HM_PRESENT;
      h->present = g.v != 0;
      have = true;
      break;
    case 8:
      h->invert = g.v != 0;
      break;
    case 11:
      h->kind = XDS_HM_REGEX;
      if (!want_len(c, &g) || !decode_regex(c, &g, &h->re))
        return false;
      have = true;
      break;
    case 13:
      if (!want_len(c, &g) || !decode_string_matcher(c, &g, h))
        return false;
      have = true;
      break;
    default:
      break;
    }
  }
  if (!h->name || !h->name[0])
    return grit_xds_fail(c, "header matcher without a name");
  if (!have)
    return grit_xds_fail(c, "header matcher has no match specifier");
  return true;
}

/* FractionalPercent (numerator=1, denominator=2) as parts per million. */
bool grit_xds_decode_fraction(xds_dctx *c, const grit_pbf *f, uint32_t *ppm) {
  uint64_t num = 0, den = 0;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    if (g.num == 1)
      num = g.v;
    else if (g.num == 2)
      den = g.v;
  }
  if (den > 2)
    return grit_xds_fail(c, "unknown denominator %llu",
                         (unsigned long long)den);
  uint64_t mult = den == 0 ? 10000 : den == 1 ? 100 : 1;
  uint64_t v = num > UINT32_MAX ? UINT32_MAX : num * mult;
  *ppm = v > 1000000 ? 1000000 : (uint32_t)v;
  return true;
}

/* RouteMatch: prefix=1, path=2, case_sensitive=4, headers=6,
 * query_parameters=7, runtime_fraction=9, safe_regex=10,
 * connect_matcher=12, path_separated_prefix=14, path_match_policy=15.
 * Returns false on error; |*skip| when grpc ignores the route. */
static bool decode_match(xds_dctx *c, const grit_pbf *f, xds_route_match *m,
                         bool *skip) {
  bool have_path = false, unknown_path = false;
  size_t cap = 0;
  m->case_sensitive = true;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    switch (g.num) {
    case 1:
    case 2:
      m->path_kind = g.num == 1 ? XDS_PATH_PREFIX : XDS_PATH_EXACT;
      if (!grit_xds_str(c, &g, &m->path))
        return false;
      have_path = true;
      break;
    case 10:
      m->path_kind = XDS_PATH_REGEX;
      if (!want_len(c, &g) || !decode_regex(c, &g, &m->re))
        return false;
      have_path = true;
      break;
    case 12:
    case 14:
    case 15:
      unknown_path = true;
      break;
    case 4:
      if (!grit_pb_wrapped_bool(&g, &m->case_sensitive))
        return grit_xds_fail(c, "case_sensitive: malformed");
      break;
    case 6: {
      size_t mark = grit_xds_dctx_push(c, ".headers[%zu]", m->nheaders);
      xds_header_matcher *h = grit_xds_arena_push(
          c->a, (void **)&m->headers, &m->nheaders, &cap, sizeof(*h));
      if (!h)
        return grit_xds_oom(c);
      if (!want_len(c, &g) || !decode_header_matcher(c, &g, h))
        return false;
      grit_xds_dctx_pop(c, mark);
      break;
    }
    case 7:
      *skip = true; /* grpc ignores routes with query-parameter matchers */
      break;
    case 9: {
      grit_pbf k;
      if (!want_len(c, &g))
        return false;
      FOR_FIELDS(c, &g, k) {
        if (k.num == 1) {
          size_t mark = grit_xds_dctx_push(c, ".runtime_fraction");
          if (!want_len(c, &k) ||
              !grit_xds_decode_fraction(c, &k, &m->fraction_per_million))
            return false;
          grit_xds_dctx_pop(c, mark);
          m->has_fraction = true;
        }
      }
      if (!m->has_fraction) { /* no default_value: 0 % */
        m->has_fraction = true;
        m->fraction_per_million = 0;
      }
      break;
    }
    default:
      break;
    }
  }
  if (!have_path)
    return unknown_path ? grit_xds_fail(c, "unsupported path specifier")
                        : grit_xds_fail(c, "no path specifier");
  return true;
}

/* ---- actions ---- */

/* gRFC A44. RetryPolicy: retry_on=1, num_retries=2, retry_back_off=8
 * (base_interval=1, max_interval=2). */
bool grit_xds_decode_retry(xds_dctx *c, const grit_pbf *f, xds_retry_policy *rp,
                           bool *has);
bool grit_xds_decode_retry(xds_dctx *c, const grit_pbf *f, xds_retry_policy *rp,
                           bool *has) {
  static const struct {
    const char *name;
    grit_status_code code;
  } names[] = {
      {"cancelled", GRIT_STATUS_CANCELLED},
      {"deadline-exceeded", GRIT_STATUS_DEADLINE_EXCEEDED},
      {"internal", GRIT_STATUS_INTERNAL},
      {"resource-exhausted", GRIT_STATUS_RESOURCE_EXHAUSTED},
      {"unavailable", GRIT_STATUS_UNAVAILABLE},
  };
  memset(rp, 0, sizeof(*rp));
  uint64_t retries = 1;
  int64_t base = 25 * 1000000LL, max = -1;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    if (g.num == 1 && g.wt == GRIT_PB_LEN) {
      const char *p = (const char *)g.data, *end = p + g.len;
      while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t n = (size_t)((comma ? comma : end) - p);
        while (n && *p == ' ')
          p++, n--;
        while (n && p[n - 1] == ' ')
          n--;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
          if (strlen(names[i].name) == n && memcmp(names[i].name, p, n) == 0)
            rp->codes |= 1u << names[i].code;
        p = comma ? comma + 1 : end;
      }
    } else if (g.num == 2) {
      if (!grit_pb_wrapped_u64(&g, &retries))
        return grit_xds_fail(c, "retry_policy.num_retries: malformed");
      if (retries < 1)
        return grit_xds_fail(c, "retry_policy.num_retries = 0; must be >= 1");
    } else if (g.num == 8) {
      grit_pbf k;
      if (!want_len(c, &g))
        return false;
      FOR_FIELDS(c, &g, k) {
        int64_t ns;
        if ((k.num == 1 || k.num == 2) && !grit_pb_duration_ns(&k, &ns))
          return grit_xds_fail(c, "retry_policy.retry_back_off: bad duration");
        if ((k.num == 1 || k.num == 2) && ns <= 0)
          return grit_xds_fail(c, "retry_policy.retry_back_off: %s must be > 0",
                               k.num == 1 ? "base_interval" : "max_interval");
        if (k.num == 1)
          base = ns;
        else if (k.num == 2)
          max = ns;
      }
    }
  }
  rp->max_attempts = retries > 1000 ? 1001 : (uint32_t)retries + 1;
  rp->base_ns = base;
  rp->max_ns = max > 0 ? max : (base > INT64_MAX / 10 ? INT64_MAX : base * 10);
  *has = rp->codes != 0; /* no retryable code: no retry policy */
  return true;
}

/* HashPolicy: header=1 (header_name=1, regex_rewrite=2 (pattern=1,
 * substitution=2)), terminal=4, filter_state=6 (key=1). */
static bool decode_hash(xds_dctx *c, const grit_pbf *f, xds_route *rt,
                        size_t *cap) {
  xds_hash_policy hp = {0};
  bool known = false;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    if (g.num == 4) {
      hp.terminal = g.v != 0;
    } else if (g.num == 1 && want_len(c, &g)) {
      grit_pbf k;
      hp.kind = XDS_HASH_HEADER;
      known = true;
      FOR_FIELDS(c, &g, k) {
        if (k.num == 1 && !grit_xds_str(c, &k, &hp.header))
          return false;
        if (k.num == 2 && want_len(c, &k)) {
          grit_pbf m;
          FOR_FIELDS(c, &k, m) {
            if (m.num == 1 &&
                (!want_len(c, &m) || !decode_regex(c, &m, &hp.rewrite)))
              return false;
            if (m.num == 2 && !grit_xds_str(c, &m, &hp.substitution))
              return false;
          }
        }
      }
      if (!hp.header || !hp.header[0])
        return grit_xds_fail(c, "hash policy header has no name");
    } else if (g.num == 6 && want_len(c, &g)) {
      grit_pbf k;
      FOR_FIELDS(c, &g, k) {
        if (k.num == 1 && k.wt == GRIT_PB_LEN &&
            k.len == strlen("io.grpc.channel_id") &&
            memcmp(k.data, "io.grpc.channel_id", k.len) == 0) {
          hp.kind = XDS_HASH_CHANNEL_ID;
          known = true;
        }
      }
    }
  }
  if (c->err[0] || c->oom)
    return false;
  if (!known)
    return true; /* grpc ignores hash policies it does not know */
  if (hp.rewrite && !hp.substitution)
    hp.substitution = "";
  xds_hash_policy *e = grit_xds_arena_push(c->a, (void **)&rt->hash, &rt->nhash,
                                           cap, sizeof(*e));
  if (!e)
    return grit_xds_oom(c);
  *e = hp;
  return true;
}

/* WeightedCluster: clusters=1 (name=1, weight=2). Zero weights are
 * skipped; the sum must be in (0, 2^32). */
static bool decode_weighted(xds_dctx *c, const grit_pbf *f, xds_route *rt) {
  size_t cap = 0;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    if (g.num != 1 || !want_len(c, &g))
      continue;
    const char *name = NULL;
    uint64_t w = 0;
    grit_pbf k;
    FOR_FIELDS(c, &g, k) {
      if (k.num == 1 && !grit_xds_str(c, &k, &name))
        return false;
      if (k.num == 2 && !grit_pb_wrapped_u64(&k, &w))
        return grit_xds_fail(c, "weighted_clusters: malformed weight");
    }
    if (w == 0)
      continue;
    if (!name || !name[0])
      return grit_xds_fail(c, "weighted_clusters: a cluster has no name");
    rt->total_weight += w;
    if (rt->total_weight > UINT32_MAX)
      return grit_xds_fail(c, "weighted_clusters: total weight exceeds 2^32-1");
    xds_cluster_weight *e = grit_xds_arena_push(
        c->a, (void **)&rt->weighted, &rt->nweighted, &cap, sizeof(*e));
    if (!e)
      return grit_xds_oom(c);
    e->name = name;
    e->weight = (uint32_t)w;
  }
  if (rt->total_weight == 0)
    return grit_xds_fail(c, "weighted_clusters: no cluster with a weight");
  return true;
}

/* RouteAction: cluster=1, cluster_header=2, weighted_clusters=3,
 * retry_policy=9, hash_policy=15, max_stream_duration=36
 * (max_stream_duration=1, grpc_timeout_header_max=2),
 * cluster_specifier_plugin=37, inline plugin=39. */
static bool decode_action(xds_dctx *c, const grit_pbf *f, xds_route *rt,
                          bool *skip) {
  bool have = false;
  size_t hcap = 0;
  int64_t msd = -1, header_max = -1;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    switch (g.num) {
    case 1:
      rt->action = XDS_ACTION_CLUSTER;
      if (!grit_xds_str(c, &g, &rt->cluster))
        return false;
      have = true;
      break;
    case 3:
      rt->action = XDS_ACTION_WEIGHTED;
      if (!want_len(c, &g) || !decode_weighted(c, &g, rt))
        return false;
      have = true;
      break;
    case 2:
    case 37:
    case 39:
      *skip = true; /* A28: an unsupported cluster specifier */
      break;
    case 9: {
      size_t mark = grit_xds_dctx_push(c, ".retry_policy");
      if (!want_len(c, &g) ||
          !grit_xds_decode_retry(c, &g, &rt->retry, &rt->has_retry))
        return false;
      grit_xds_dctx_pop(c, mark);
      break;
    }
    case 15: {
      size_t mark = grit_xds_dctx_push(c, ".hash_policy[%zu]", rt->nhash);
      if (!want_len(c, &g) || !decode_hash(c, &g, rt, &hcap))
        return false;
      grit_xds_dctx_pop(c, mark);
      break;
    }
    case 36: {
      grit_pbf k;
      if (!want_len(c, &g))
        return false;
      FOR_FIELDS(c, &g, k) {
        int64_t ns;
        if ((k.num == 1 || k.num == 2) && !grit_pb_duration_ns(&k, &ns))
          return grit_xds_fail(c, "max_stream_duration: bad duration");
        if (k.num == 1)
          msd = ns;
        else if (k.num == 2)
          header_max = ns;
      }
      break;
    }
    default:
      break;
    }
  }
  if (!have && !*skip)
    *skip = true; /* no cluster specifier at all: ignored (A28) */
  /* A31, as grpc-go: grpc_timeout_header_max wins over max_stream_duration. */
  int64_t d = header_max >= 0 ? header_max : msd;
  if (d >= 0) {
    rt->has_max_stream_duration = true;
    rt->max_stream_duration_ns = d;
  }
  rt->has_grpc_timeout_header_max = header_max >= 0;
  rt->grpc_timeout_header_max_ns = header_max >= 0 ? header_max : 0;
  return true;
}

/* Route: match=1, route=2, redirect=3, direct_response=7,
 * filter_action=17, non_forwarding_action=18. */
static bool decode_route(xds_dctx *c, const grit_pbf *f, xds_vhost *vh,
                         size_t *cap) {
  xds_route rt = {0};
  bool have_match = false, skip = false, have_action = false;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    if (g.num == 1) {
      size_t mark = grit_xds_dctx_push(c, ".match");
      if (!want_len(c, &g) || !decode_match(c, &g, &rt.match, &skip))
        return false;
      grit_xds_dctx_pop(c, mark);
      have_match = true;
    } else if (g.num == 2) {
      size_t mark = grit_xds_dctx_push(c, ".route");
      if (!want_len(c, &g) || !decode_action(c, &g, &rt, &skip))
        return false;
      grit_xds_dctx_pop(c, mark);
      have_action = true;
    } else if (g.num == 3 || g.num == 7 || g.num == 17 || g.num == 18) {
      rt.action = XDS_ACTION_NON_FORWARDING; /* calls matching it fail */
      have_action = true;
    }
  }
  if (!have_match)
    return grit_xds_fail(c, "route has no match");
  if (!have_action)
    rt.action = XDS_ACTION_NON_FORWARDING;
  if (skip)
    return true;
  xds_route *e = grit_xds_arena_push(c->a, (void **)&vh->routes, &vh->nroutes,
                                     cap, sizeof(*e));
  if (!e)
    return grit_xds_oom(c);
  *e = rt;
  return true;
}

/* VirtualHost: name=1, domains=2, routes=3, retry_policy=16. A route's own
 * retry policy wins over its virtual host's (A44). */
static bool decode_vhost(xds_dctx *c, const grit_pbf *f, xds_vhost *vh) {
  size_t dcap = 0, rcap = 0, nroute = 0;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    if (g.num == 1) {
      if (!grit_xds_str(c, &g, &vh->name))
        return false;
    } else if (g.num == 2) {
      const char **d = grit_xds_arena_push(c->a, (void **)&vh->domains,
                                           &vh->ndomains, &dcap, sizeof(*d));
      if (!d)
        return grit_xds_oom(c);
      if (!grit_xds_str(c, &g, d))
        return false;
    } else if (g.num == 3) {
      size_t mark = grit_xds_dctx_push(c, ".routes[%zu]", nroute++);
      if (!want_len(c, &g) || !decode_route(c, &g, vh, &rcap))
        return false;
      grit_xds_dctx_pop(c, mark);
    } else if (g.num == 16) {
      size_t mark = grit_xds_dctx_push(c, ".retry_policy");
      if (!want_len(c, &g) ||
          !grit_xds_decode_retry(c, &g, &vh->retry, &vh->has_retry))
        return false;
      grit_xds_dctx_pop(c, mark);
    }
  }
  for (size_t i = 0; i < vh->nroutes; i++) {
    if (!vh->routes[i].has_retry && vh->has_retry) {
      vh->routes[i].has_retry = true;
      vh->routes[i].retry = vh->retry;
    }
  }
  return true;
}

/* RouteConfiguration: name=1, virtual_hosts=2. */
bool grit_xds_decode_route_config_body(xds_dctx *c, const grit_pbf *f,
                                       xds_route_config *rc,
                                       const char **name) {
  size_t cap = 0;
  grit_pbf g;
  FOR_FIELDS(c, f, g) {
    if (g.num == 1 && name) {
      if (!grit_xds_str(c, &g, name))
        return false;
    } else if (g.num == 2) {
      size_t mark = grit_xds_dctx_push(c, ".virtual_hosts[%zu]", rc->nvhosts);
      xds_vhost *vh = grit_xds_arena_push(c->a, (void **)&rc->vhosts,
                                          &rc->nvhosts, &cap, sizeof(*vh));
      if (!vh)
        return grit_xds_oom(c);
      if (!want_len(c, &g) || !decode_vhost(c, &g, vh))
        return false;
      grit_xds_dctx_pop(c, mark);
    }
  }
  return true;
}

bool grit_xds_decode_route_config(xds_dctx *c, grit_pbr *r, xds_resource *res) {
  grit_pbf whole = {
      .wt = GRIT_PB_LEN, .data = r->p, .len = (size_t)(r->end - r->p)};
  return grit_xds_decode_route_config_body(c, &whole, &res->u.route_config,
                                           &res->name);
}

/* ---- Listener ---- */

/* The type URL of an HttpFilter's typed_config, looking inside a
 * TypedStruct (type_url=1). */
static bool filter_type(xds_dctx *c, const grit_pbf *any, const uint8_t **t,
                        size_t *tlen) {
  const uint8_t *value = NULL;
  size_t vlen = 0;
  *t = NULL;
  *tlen = 0;
  grit_pbf g;
  FOR_FIELDS(c, any, g) {
    if (g.num == 1 && g.wt == GRIT_PB_LEN) {
      *t = g.data;
      *tlen = g.len;
    } else if (g.num == 2 && g.wt == GRIT_PB_LEN) {
      value = g.data;
      vlen = g.len;
    }
  }
  if ((*tlen == strlen(TYPED_STRUCT_V3) &&
       memcmp(*t, TYPED_STRUCT_V3, *tlen) == 0) ||
      (*tlen == strlen(TYPED_STRUCT_V1) &&
       memcmp(*t, TYPED_STRUCT_V1, *tlen) == 0)) {
    grit_pbf ts = {.wt = GRIT_PB_LEN, .data = value, .len = vlen};
    *t = NULL;
    *tlen = 0;
    FOR_FIELDS(c, &ts, g) {
      if (g.num == 1 && g.wt == GRIT_PB_LEN) {
        *t = g.data;
        *tlen = g.len;
      }
    }
  }
  return true;
}

/* HttpFilter: name=1, typed_config=4, is_optional=6. A39: names unique;
 * the router last and terminal; an unknown filter NACKs unless optional
 * (then it is skipped). grit knows the router only. */
static bool decode_filters(xds_dctx *c, const grit_pbf *hcm) {
  const char *names[64];
  size_t nnames = 0, seen = 0;
  bool last_router = false;
  grit_pbf g;
  FOR_FIELDS(c, hcm, g) {
    if (g.num != 5 || !want_len(c, &g))
      continue;
    size_t mark = grit_xds_dctx_push(c, ".http_filters[%zu]", seen++);
    const char *name = NULL;
    const uint8_t *type = NULL;
    size_t tlen = 0;
    bool optional = false, have_config = false;
    grit_pbf k;
    FOR_FIELDS(c, &g, k) {
      if (k.num == 1 && !grit_xds_str(c, &k, &name))
        return false;
      if (k.num == 4 && want_len(c, &k)) {
        have_config = true;
        if (!filter_type(c, &k, &type, &tlen))
          return false;
      }
      if (k.num == 6)
        optional = k.v != 0;
    }
    if (!name || !name[0])
      return grit_xds_fail(c, "filter has no name");
    for (size_t i = 0; i < nnames; i++)
      if (strcmp(names[i], name) == 0)
        return grit_xds_fail(c, "duplicate filter name \"%s\"", name);
    if (nnames < sizeof(names) / sizeof(names[0]))
      names[nnames++] = name;
    if (!have_config)
      return grit_xds_fail(c, "filter \"%s\" has no typed_config", name);
    bool router =
        tlen == strlen(ROUTER_TYPE) && memcmp(type, ROUTER_TYPE, tlen) == 0;
    if (!router && !optional)
      return grit_xds_fail(c, "filter \"%s\": type %.*s is not supported", name,
                           (int)(tlen > 120 ? 120 : tlen),
                           type ? (const char *)type : "");
    if (router || !optional) {
      if (last_router)
        return grit_xds_fail(c, "the router filter is not last");
      last_router = router;
    }
    grit_xds_dctx_pop(c, mark);
  }
  if (seen == 0)
    return grit_xds_fail(c, "http_filters is empty");
  if (!last_router)
    return grit_xds_fail(c, "the last http filter is not the router");
  return true;
}

/* HttpConnectionManager: rds=3 (config_source=1 with ads=3 or self=5,
 * route_config_name=2), route_config=4, http_filters=5,
 * common_http_protocol_options=35 (max_stream_duration=4),
 * scoped_routes=31. */
static bool decode_hcm(xds_dctx *c, const grit_pbf *hcm, xds_listener *l) {
  bool have_routes = false;
  grit_pbf g;
  FOR_FIELDS(c, hcm, g) {
    if (g.num == 3 && want_len(c, &g)) {
      size_t mark = grit_xds_dctx_push(c, ".rds");
      bool ads_or_self = false;
      grit_pbf k;
      FOR_FIELDS(c, &g, k) {
        if (k.num == 2 && !grit_xds_str(c, &k, &l->rds_name))
          return false;
        if (k.num == 1 && want_len(c, &k)) {
          grit_pbf m;
          FOR_FIELDS(c, &k, m) {
            if (m.num == 3 || m.num == 5)
              ads_or_self = true;
          }
        }
      }
      if (!ads_or_self)
        return grit_xds_fail(c, "config_source is not ads or self");
      if (!l->rds_name || !l->rds_name[0])
        return grit_xds_fail(c, "empty route_config_name");
      grit_xds_dctx_pop(c, mark);
      have_routes = true;
    } else if (g.num == 4 && want_len(c, &g)) {
      size_t mark = grit_xds_dctx_push(c, ".route_config");
      l->route_config = grit_xds_arena_alloc(c->a, sizeof(*l->route_config));
      if (!l->route_config)
        return grit_xds_oom(c);
      if (!grit_xds_decode_route_config_body(c, &g, l->route_config, NULL))
        return false;
      grit_xds_dctx_pop(c, mark);
      have_routes = true;
    } else if (g.num == 31) {
      return grit_xds_fail(c, "scoped_routes are not supported");
    } else if (g.num == 35 && want_len(c, &g)) {
      grit_pbf k;
      FOR_FIELDS(c, &g, k) {
        if (k.num == 4) {
          if (!grit_pb_duration_ns(&k, &l->max_stream_duration_ns))
            return grit_xds_fail(c, "max_stream_duration: bad duration");
          l->has_max_stream_duration = true;
        }
      }
    }
  }
  if (!have_routes)
    return grit_xds_fail(c, "no route_config and no rds");
  return decode_filters(c, hcm);
}

/* Listener: name=1, api_listener=19 (api_listener=1: an Any holding an
 * HttpConnectionManager). */
bool grit_xds_decode_listener(xds_dctx *c, grit_pbr *r, xds_resource *res) {
  grit_pbf f, api = {0};
  int rc;
  bool have_api = false;
  while ((rc = grit_pbr_next(r, &f)) == 1) {
    if (f.num == 1 && !grit_xds_str(c, &f, &res->name))
      return false;
    if (f.num == 19 && f.wt == GRIT_PB_LEN) {
      grit_pbf g;
      FOR_FIELDS(c, &f, g) {
        if (g.num == 1 && g.wt == GRIT_PB_LEN) {
          api = g;
          have_api = true;
        }
      }
    }
  }
  if (rc < 0)
    return grit_xds_fail(c, "malformed message");
  if (!have_api)
    return grit_xds_fail(c, "no api_listener (grit is a client)");
  size_t mark = grit_xds_dctx_push(c, "api_listener");
  const uint8_t *type = NULL, *value = NULL;
  size_t tlen = 0, vlen = 0;
  grit_pbf g;
  FOR_FIELDS(c, &api, g) {
    if (g.num == 1 && g.wt == GRIT_PB_LEN) {
      type = g.data;
      tlen = g.len;
    } else if (g.num == 2 && g.wt == GRIT_PB_LEN) {
      value = g.data;
      vlen = g.len;
    }
  }
  if (tlen != strlen(HCM_TYPE) || memcmp(type, HCM_TYPE, tlen) != 0)
    return grit_xds_fail(c, "not an HttpConnectionManager");
  grit_pbf hcm = {.wt = GRIT_PB_LEN, .data = value, .len = vlen};
  if (!decode_hcm(c, &hcm, &res->u.listener))
    return false;
  grit_xds_dctx_pop(c, mark);
  return true;
}
