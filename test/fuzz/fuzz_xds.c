/* libFuzzer target: xDS resource decoding (SPEC XD-01..XD-03). The first
 * byte picks the kind (Listener, RouteConfiguration, Cluster,
 * ClusterLoadAssignment), the rest is the serialized resource. A resource
 * is either refused with a reason or decoded; a decoded one is routed
 * through (virtual host, route, weighted pick) and released. Seeds: the
 * inputs of test/unit/test_xds.c, written by running it with
 * GRIT_XDS_SEED_DIR=test/fuzz/corpus/xds. */
#include "xds/xds.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  xds_kind kind = (xds_kind)(data[0] % XDS_KINDS);
  xds_resource *r;
  char name[64], err[256];
  grit_err rv = grit_xds_resource_decode(kind, data + 1, size - 1, &r, name,
                                         sizeof(name), err, sizeof(err));
  if (rv != GRIT_OK) {
    GRIT_ASSERT(r == NULL);
    GRIT_ASSERT(rv == GRIT_ERR_NOMEM || err[0] != '\0');
    return 0;
  }
  GRIT_ASSERT(r->name && r->name[0]);
  const xds_route_config *rc = kind == XDS_ROUTE_CONFIG ? &r->u.route_config
                               : kind == XDS_LISTENER
                                   ? r->u.listener.route_config
                                   : NULL;
  if (rc) {
    grit_metadata *md;
    if (grit_metadata_create(&md) == GRIT_OK) {
      grit_metadata_add(md, "x-h", "value-42", 8);
      for (size_t i = 0; i < rc->nvhosts; i++) {
        const xds_vhost *vh =
            grit_xds_vhost_find(rc, i % 2 ? "a.example.com" : "x");
        const xds_route *rt = grit_xds_route_find(
            vh, "/pkg.Svc/Method", md, (uint32_t)(i * 7919) % 1000000);
        if (rt)
          (void)grit_xds_route_cluster(rt, i * 31);
      }
      grit_metadata_destroy(md);
    }
  }
  grit_xds_resource_unref(r);
  return 0;
}
