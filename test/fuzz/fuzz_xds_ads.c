/* libFuzzer target: the xDS bootstrap parser and the ADS machine's
 * handling of DiscoveryResponses (SPEC XD-01). First byte even: the rest is
 * bootstrap JSON; odd: the rest is a sequence of responses, each prefixed
 * by a 2-byte big-endian length, fed to a machine watching a few names of
 * every type, with the requests it produces drained after each. */
#include "xds/ads.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_res(void *ud, xds_kind k, const char *name, xds_resource *r) {
  (void)ud, (void)k, (void)name;
  GRIT_ASSERT(r && r->name && strcmp(r->name, name) == 0);
}

static const xds_ads_cbs cbs = {on_res, NULL, NULL};

/* gRFC A78's cache state agrees with the resource in force (issue 27). */
static void check_entry(void *ud, const char *name, const xds_resource *r,
                        xds_cache_state st) {
  (void)ud;
  GRIT_ASSERT(name && grit_xds_cache_state_name(st)[0] != '?');
  GRIT_ASSERT((r != NULL) ==
              (st == XDS_CACHE_ACKED || st == XDS_CACHE_NACKED_BUT_CACHED));
}

static const char boot[] =
    "{\"xds_servers\":[{\"server_uri\":\"x\",\"channel_creds\":[{\"type\":"
    "\"insecure\"}]}],\"node\":{\"id\":\"f\",\"metadata\":{\"a\":[1,\"b\","
    "{\"c\":null}]}}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  xds_bootstrap *b;
  grit_error_detail d;
  if (!(data[0] & 1)) {
    if (grit_xds_bootstrap_parse((const char *)data + 1, size - 1, &b, &d) ==
        GRIT_OK) {
      GRIT_ASSERT(b->nservers > 0 && b->servers[0].uri);
      grit_xds_bootstrap_free(b);
    }
    return 0;
  }
  if (grit_xds_bootstrap_parse(boot, strlen(boot), &b, &d) != GRIT_OK)
    return 0;
  xds_ads *a;
  if (grit_xds_ads_create(b, "fuzz", &cbs, NULL, &a) != GRIT_OK) {
    grit_xds_bootstrap_free(b);
    return 0;
  }
  static const char *names[] = {"a", "rc", "c1", "e1", "x"};
  for (int k = 0; k < XDS_KINDS; k++)
    for (size_t i = 0; i < 5; i++)
      grit_xds_ads_watch(a, (xds_kind)k, names[i], 0);
  grit_xds_ads_stream_started(a, 0);
  size_t off = 1;
  uint64_t now = 0;
  grit_bytes req;
  while (grit_xds_ads_next_request(a, &req))
    grit_free(req.data);
  while (off + 2 <= size) {
    size_t n = (size_t)data[off] << 8 | data[off + 1];
    off += 2;
    if (n > size - off)
      n = size - off;
    grit_xds_ads_on_response(a, data + off, n, now += 1000);
    off += n;
    while (grit_xds_ads_next_request(a, &req))
      grit_free(req.data);
    grit_xds_ads_on_timer(a, now);
    for (int k = 0; k < XDS_KINDS; k++)
      grit_xds_ads_foreach(a, (xds_kind)k, check_entry, NULL);
  }
  grit_xds_ads_destroy(a);
  grit_xds_bootstrap_free(b);
  return 0;
}
