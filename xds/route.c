/* Routing from a RouteConfiguration (gRFC A28; SPEC XD-02): the virtual
 * host by domain, the first matching route by path, headers and runtime
 * fraction, and a weighted cluster pick. Pure: the randomness comes in. */
#include "xds/xds_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A28 domain match kinds, best first. */
enum { DOM_NONE = 0, DOM_ANY, DOM_PREFIX, DOM_SUFFIX, DOM_EXACT };

/* How |pattern| matches |host| (case-insensitive); |*len| is the
 * pattern's length, to prefer the longest wildcard. */
static int domain_match(const char *pattern, const char *host, size_t *len) {
  size_t pl = strlen(pattern), hl = strlen(host);
  *len = pl;
  if (pl == 0)
    return DOM_NONE;
  if (strcmp(pattern, "*") == 0)
    return DOM_ANY;
  if (pattern[0] == '*') { /* "*.x": suffix */
    return hl >= pl - 1 && strcasecmp(host + hl - (pl - 1), pattern + 1) == 0
               ? DOM_SUFFIX
               : DOM_NONE;
  }
  if (pattern[pl - 1] == '*') { /* "x.*": prefix */
    return hl >= pl - 1 && strncasecmp(host, pattern, pl - 1) == 0 ? DOM_PREFIX
                                                                   : DOM_NONE;
  }
  return strcasecmp(pattern, host) == 0 ? DOM_EXACT : DOM_NONE;
}

const xds_vhost *grit_xds_vhost_find(const xds_route_config *rc,
                                     const char *authority) {
  const xds_vhost *best = NULL;
  int best_kind = DOM_NONE;
  size_t best_len = 0;
  for (size_t i = 0; rc && i < rc->nvhosts; i++) {
    const xds_vhost *vh = &rc->vhosts[i];
    for (size_t d = 0; d < vh->ndomains; d++) {
      size_t len;
      int kind = domain_match(vh->domains[d], authority, &len);
      if (kind > best_kind ||
          (kind == best_kind && kind != DOM_NONE && len > best_len)) {
        best = vh;
        best_kind = kind;
        best_len = len;
      }
    }
  }
  return best;
}

static bool path_matches(const xds_route_match *m, const char *path) {
  size_t pl = strlen(path);
  switch (m->path_kind) {
  case XDS_PATH_PREFIX: {
    size_t n = strlen(m->path);
    return pl >= n && (m->case_sensitive ? strncmp(path, m->path, n) == 0
                                         : strncasecmp(path, m->path, n) == 0);
  }
  case XDS_PATH_EXACT:
    return m->case_sensitive ? strcmp(path, m->path) == 0
                             : strcasecmp(path, m->path) == 0;
  case XDS_PATH_REGEX:
    return grit_xds_regex_match(m->re, path, pl);
  }
  return false;
}

static bool str_eq(const char *a, const char *b, size_t n, bool ic) {
  return ic ? strncasecmp(a, b, n) == 0 : strncmp(a, b, n) == 0;
}

static bool contains(const char *hay, const char *needle, bool ic) {
  size_t hl = strlen(hay), nl = strlen(needle);
  for (size_t i = 0; i + nl <= hl; i++)
    if (str_eq(hay + i, needle, nl, ic))
      return true;
  return false;
}

/* One header's value against |h| (before inversion). */
static bool value_matches(const xds_header_matcher *h, const char *v) {
  size_t vl = strlen(v), n;
  switch (h->kind) {
  case XDS_HM_EXACT:
    return h->ignore_case ? strcasecmp(v, h->value) == 0
                          : strcmp(v, h->value) == 0;
  case XDS_HM_PREFIX:
    n = strlen(h->value);
    return vl >= n && str_eq(v, h->value, n, h->ignore_case);
  case XDS_HM_SUFFIX:
    n = strlen(h->value);
    return vl >= n && str_eq(v + vl - n, h->value, n, h->ignore_case);
  case XDS_HM_CONTAINS:
    return contains(v, h->value, h->ignore_case);
  case XDS_HM_REGEX:
    return grit_xds_regex_match(h->re, v, vl);
  case XDS_HM_RANGE: {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!vl || *end || errno)
      return false;
    return x >= h->start && x < h->end;
  }
  case XDS_HM_PRESENT:
    return true;
  }
  return false;
}

/* A28: the values of a header are joined with ","; "-bin" headers are
 * never matched; "content-type" is what grit sends. */
static bool header_matches(const xds_header_matcher *h,
                           const grit_metadata *md) {
  size_t nl = strlen(h->name);
  bool bin = nl > 4 && strcmp(h->name + nl - 4, "-bin") == 0;
  char joined[4096];
  size_t jl = 0;
  bool present = false;
  if (strcmp(h->name, "content-type") == 0) {
    grit_str_copy(joined, sizeof(joined), "application/grpc");
    present = true;
  } else if (!bin) {
    size_t n = grit_metadata_count(md);
    for (size_t i = 0; i < n; i++) {
      const char *k;
      const uint8_t *v;
      size_t len;
      grit_metadata_get(md, i, &k, &v, &len);
      if (strcmp(k, h->name) != 0)
        continue;
      if (present && jl + 1 < sizeof(joined))
        joined[jl++] = ',';
      size_t take =
          len < sizeof(joined) - 1 - jl ? len : sizeof(joined) - 1 - jl;
      memcpy(joined + jl, v, take);
      jl += take;
      present = true;
    }
    joined[jl] = '\0';
  }
  bool match;
  if (h->kind == XDS_HM_PRESENT)
    match = present == h->present;
  else
    match = present && value_matches(h, joined);
  return h->invert ? !match : match;
}

const xds_route *grit_xds_route_find(const xds_vhost *vh, const char *path,
                                     const grit_metadata *md,
                                     uint32_t rand_per_million) {
  for (size_t i = 0; vh && i < vh->nroutes; i++) {
    const xds_route *r = &vh->routes[i];
    if (!path_matches(&r->match, path))
      continue;
    bool ok = true;
    for (size_t h = 0; ok && h < r->match.nheaders; h++)
      ok = header_matches(&r->match.headers[h], md);
    if (!ok)
      continue;
    if (r->match.has_fraction &&
        rand_per_million >= r->match.fraction_per_million)
      continue;
    return r;
  }
  return NULL;
}

const char *grit_xds_route_cluster(const xds_route *r, uint64_t rand) {
  if (r->action == XDS_ACTION_CLUSTER)
    return r->cluster;
  if (r->action != XDS_ACTION_WEIGHTED || !r->total_weight)
    return NULL;
  uint64_t x = rand % r->total_weight;
  for (size_t i = 0; i < r->nweighted; i++) {
    if (x < r->weighted[i].weight)
      return r->weighted[i].name;
    x -= r->weighted[i].weight;
  }
  return r->weighted[r->nweighted - 1].name;
}
