/* Decoded resources: type URLs, unwrapping the Any of a DiscoveryResponse,
 * decoding into an arena, references. */
#include "xds/xds_int.h"

#include <string.h>

static const char *const type_urls[XDS_KINDS] = {
    "type.googleapis.com/envoy.config.listener.v3.Listener",
    "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
    "type.googleapis.com/envoy.config.cluster.v3.Cluster",
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
};

#define RESOURCE_WRAPPER                                                       \
  "type.googleapis.com/envoy.service.discovery.v3.Resource"

const char *grit_xds_type_url(xds_kind k) {
  return type_urls[k];
}

int grit_xds_kind_of(const char *type_url, size_t len) {
  for (int k = 0; k < XDS_KINDS; k++)
    if (strlen(type_urls[k]) == len && memcmp(type_urls[k], type_url, len) == 0)
      return k;
  return -1;
}

/* Any: type_url=1, value=2. Resource: name=3, resource=2 (an Any). */
static bool any_fields(const uint8_t *p, size_t n, const char **t, size_t *tl,
                       const uint8_t **v, size_t *vl) {
  grit_pbr r;
  grit_pbf f;
  int rc;
  grit_pbr_init(&r, p, n);
  *t = NULL;
  *tl = 0;
  *v = (const uint8_t *)"";
  *vl = 0;
  while ((rc = grit_pbr_next(&r, &f)) == 1) {
    if (f.num == 1 && f.wt == GRIT_PB_LEN) {
      *t = (const char *)f.data;
      *tl = f.len;
    } else if (f.num == 2 && f.wt == GRIT_PB_LEN) {
      *v = f.data;
      *vl = f.len;
    }
  }
  return rc == 0 && *t;
}

bool grit_xds_any_unwrap(const uint8_t *p, size_t n, const char **type_url,
                         size_t *type_len, const uint8_t **value,
                         size_t *vlen) {
  if (!any_fields(p, n, type_url, type_len, value, vlen))
    return false;
  if (*type_len != strlen(RESOURCE_WRAPPER) ||
      memcmp(*type_url, RESOURCE_WRAPPER, *type_len) != 0)
    return true;
  grit_pbr r;
  grit_pbf f;
  int rc;
  const uint8_t *inner = NULL;
  size_t inner_len = 0;
  grit_pbr_init(&r, *value, *vlen);
  while ((rc = grit_pbr_next(&r, &f)) == 1) {
    if (f.num == 2 && f.wt == GRIT_PB_LEN) {
      inner = f.data;
      inner_len = f.len;
    }
  }
  if (rc != 0 || !inner)
    return false;
  return any_fields(inner, inner_len, type_url, type_len, value, vlen);
}

grit_err grit_xds_resource_decode(xds_kind kind, const uint8_t *p, size_t n,
                                  xds_resource **out, char *name,
                                  size_t name_size, char *err,
                                  size_t err_size) {
  *out = NULL;
  if (name_size)
    name[0] = '\0';
  if (err_size)
    err[0] = '\0';
  char dummy[1];
  xds_dctx c = {.err = err_size ? err : dummy,
                .err_size = err_size ? err_size : 1};
  c.err[0] = '\0';
  c.a = grit_xds_arena_create();
  if (!c.a)
    return GRIT_ERR_NOMEM;
  xds_resource *res = grit_xds_arena_alloc(c.a, sizeof(*res));
  if (!res) {
    grit_xds_arena_destroy(c.a);
    return GRIT_ERR_NOMEM;
  }
  res->refs = 1;
  res->kind = kind;
  res->arena_ = c.a;
  grit_pbr r;
  grit_pbr_init(&r, p, n);
  bool ok = false;
  switch (kind) {
  case XDS_LISTENER:
    ok = grit_xds_decode_listener(&c, &r, res);
    break;
  case XDS_ROUTE_CONFIG:
    ok = grit_xds_decode_route_config(&c, &r, res);
    break;
  case XDS_CLUSTER:
    ok = grit_xds_decode_cluster(&c, &r, res);
    break;
  case XDS_ENDPOINTS:
    ok = grit_xds_decode_endpoints(&c, &r, res);
    break;
  }
  if (res->name && name_size)
    grit_str_copy(name, name_size, res->name);
  if (ok && !xds_failed(&c) && (!res->name || !res->name[0]))
    ok = grit_xds_fail(&c, "the resource has no name");
  if (!ok || xds_failed(&c)) {
    bool oom = c.oom;
    grit_xds_arena_destroy(c.a);
    return oom ? GRIT_ERR_NOMEM : GRIT_ERR_INVALID_ARG;
  }
  *out = res;
  return GRIT_OK;
}

void grit_xds_resource_ref(xds_resource *r) {
  if (r)
    __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
}

void grit_xds_resource_unref(xds_resource *r) {
  if (r && __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0)
    grit_xds_arena_destroy(r->arena_);
}
