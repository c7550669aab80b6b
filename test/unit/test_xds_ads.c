/* Unit tests of the xDS bootstrap and the ADS protocol machine (SPEC
 * XD-01; gRFC A27): bootstrap fields and errors with JSON paths; the first
 * request carries the Node; ACK carries the version and nonce; a NACK keeps
 * the previous version, names the resource and the reason, and keeps the
 * resource in force; state-of-the-world deletion for LDS/CDS only; the
 * does-not-exist timer; resubscription on a new stream; unchanged
 * resources are not notified again. */
#include "util/pbwire.h"
#include "xds/ads.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test/harness.h"
#include "test/unit/pbw.h"

#define TP "type.googleapis.com/"
#define CLUSTER_T TP "envoy.config.cluster.v3.Cluster"
#define EDS_T TP "envoy.config.endpoint.v3.ClusterLoadAssignment"

static const char *boot_json =
    "{\"xds_servers\":[{\"server_uri\":\"127.0.0.1:18000\","
    "\"channel_creds\":[{\"type\":\"google_default\"},{\"type\":"
    "\"insecure\"}],\"server_features\":[\"xds_v3\"]}],"
    "\"node\":{\"id\":\"grit-test\",\"cluster\":\"c\",\"locality\":"
    "{\"zone\":\"z1\"},\"metadata\":{\"GENERATOR\":\"grpc\",\"n\":3,"
    "\"list\":[true,null]}}}";

static void test_bootstrap(void) {
  xds_bootstrap *b;
  grit_error_detail d = {0};
  ASSERT_OK(grit_xds_bootstrap_parse(boot_json, strlen(boot_json), &b, &d));
  ASSERT_EQ(b->nservers, 1);
  ASSERT_STR_EQ(b->servers[0].uri, "127.0.0.1:18000");
  ASSERT(!b->servers[0].tls); /* google_default skipped, insecure taken */
  ASSERT_STR_EQ(b->node_id, "grit-test");
  ASSERT_STR_EQ(b->zone, "z1");
  ASSERT_NULL(b->region);
  ASSERT_NOT_NULL(strstr(b->node_metadata, "\"GENERATOR\":\"grpc\""));
  grit_xds_bootstrap_free(b);

  static const struct {
    const char *json, *path, *why;
  } bad[] = {
      {"[]", "$", "must be an object"},
      {"{}", "$.xds_servers", "non-empty"},
      {"{\"xds_servers\":[{}]}", "$.xds_servers[0].server_uri", "required"},
      {"{\"xds_servers\":[{\"server_uri\":\"x\"}]}",
       "$.xds_servers[0].channel_creds", "required"},
      {"{\"xds_servers\":[{\"server_uri\":\"x\",\"channel_creds\":[{\"type\":"
       "\"google_default\"}]}]}",
       "$.xds_servers[0].channel_creds", "no supported"},
      {"{\"xds_servers\":[{\"server_uri\":\"x\",\"channel_creds\":[{\"type\":"
       "\"tls\",\"config\":{\"certificate_file\":\"c\"}}]}]}",
       "$.xds_servers[0].channel_creds[0].config", "go together"},
      {"{\"xds_servers\":[{\"server_uri\":\"x\",\"channel_creds\":[{\"type\":"
       "\"insecure\"}]}],\"node\":{\"id\":7}}",
       "$.node.id", "must be a string"},
      {"{\"xds_servers\":[{\"server_uri\":\"x\",\"channel_creds\":[{\"type\":"
       "\"insecure\"}]}],\"authorities\":{}}",
       "$.authorities", "federation"},
      {"{", "$", "not JSON"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    grit_error_detail e = {0};
    xds_bootstrap *x = (void *)1;
    grit_err rv =
        grit_xds_bootstrap_parse(bad[i].json, strlen(bad[i].json), &x, &e);
    ASSERT_EQ(rv, GRIT_ERR_INVALID_ARG);
    ASSERT_NULL(x);
    ASSERT_STR_EQ(e.path, bad[i].path);
    if (!strstr(e.reason, bad[i].why))
      TEST_FAIL_AT(__FILE__, __LINE__, "%s: reason \"%s\"", bad[i].json,
                   e.reason);
  }
  const char *tls = "{\"xds_servers\":[{\"server_uri\":\"x\",\"channel_creds\":"
                    "[{\"type\":\"tls\",\"config\":{\"ca_certificate_file\":"
                    "\"/ca.pem\"}}],\"server_features\":["
                    "\"ignore_resource_deletion\"]}]}";
  ASSERT_OK(grit_xds_bootstrap_parse(tls, strlen(tls), &b, &d));
  ASSERT(b->servers[0].tls);
  ASSERT_STR_EQ(b->servers[0].ca_file, "/ca.pem");
  ASSERT(b->servers[0].ignore_resource_deletion);
  grit_xds_bootstrap_free(b);
}

static void test_bootstrap_env(void) {
  char path[] = "/tmp/grit-boot-XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(boot_json, f);
  fclose(f);
  setenv("GRPC_XDS_BOOTSTRAP", path, 1);
  setenv("GRPC_XDS_BOOTSTRAP_CONFIG", "{not used}", 1);
  xds_bootstrap *b;
  grit_error_detail d = {0};
  ASSERT_OK(grit_xds_bootstrap_from_env(&b, &d));
  ASSERT_STR_EQ(b->node_id, "grit-test");
  grit_xds_bootstrap_free(b);
  unsetenv("GRPC_XDS_BOOTSTRAP");
  setenv("GRPC_XDS_BOOTSTRAP_CONFIG", boot_json, 1);
  ASSERT_OK(grit_xds_bootstrap_from_env(&b, &d));
  grit_xds_bootstrap_free(b);
  unsetenv("GRPC_XDS_BOOTSTRAP_CONFIG");
  ASSERT_EQ(grit_xds_bootstrap_from_env(&b, &d), GRIT_ERR_NOT_FOUND);
  setenv("GRPC_XDS_BOOTSTRAP", "/nonexistent/boot.json", 1);
  ASSERT_EQ(grit_xds_bootstrap_from_env(&b, &d), GRIT_ERR_NOT_FOUND);
  ASSERT(strstr(d.reason, "/nonexistent/boot.json") != NULL);
  unsetenv("GRPC_XDS_BOOTSTRAP");
  unlink(path);
}

/* ---- the machine ---- */

typedef struct events {
  char log[1024];
  xds_resource *last;
} events;

static void ev_note(events *ev, const char *fmt, const char *name) {
  size_t n = strlen(ev->log);
  snprintf(ev->log + n, sizeof(ev->log) - n, "%s%s:%s", n ? " " : "", fmt,
           name);
}

static void on_res(void *ud, xds_kind k, const char *name, xds_resource *r) {
  events *ev = ud;
  (void)k;
  ev_note(ev, "res", name);
  grit_xds_resource_unref(ev->last);
  grit_xds_resource_ref(r);
  ev->last = r;
}

static void on_err(void *ud, xds_kind k, const char *name, const char *why) {
  (void)k;
  (void)why;
  ev_note(ud, "err", name);
}

static void on_dne(void *ud, xds_kind k, const char *name) {
  (void)k;
  ev_note(ud, "dne", name);
}

static const xds_ads_cbs cbs = {on_res, on_err, on_dne};

/* A serialized EDS Cluster named |name|. */
static void cluster_any(pbw *resp, const char *name, const char *service) {
  pbw cl = {0}, ecc = {0}, src = {0}, ads = {0};
  pbw_str(&cl, 1, name);
  pbw_varint(&cl, 2, 3);
  pbw_msg(&src, 3, &ads);
  pbw_msg(&ecc, 1, &src);
  if (service)
    pbw_str(&ecc, 2, service);
  pbw_msg(&cl, 3, &ecc);
  pbw_any(resp, 2, CLUSTER_T, &cl);
}

static void bad_cluster_any(pbw *resp, const char *name) {
  pbw cl = {0};
  pbw_str(&cl, 1, name);
  pbw_varint(&cl, 2, 0); /* STATIC: refused */
  pbw_any(resp, 2, CLUSTER_T, &cl);
}

static void finish_resp(pbw *resp, const char *version, const char *type,
                        const char *nonce) {
  pbw_str(resp, 1, version);
  pbw_str(resp, 4, type);
  pbw_str(resp, 5, nonce);
  /* With GRIT_XDS_SEED_DIR set, each response is also a seed for
   * test/fuzz/fuzz_xds_ads.c (odd first byte, 2-byte length prefix). */
  const char *dir = getenv("GRIT_XDS_SEED_DIR");
  static int seeds;
  if (dir && resp->n < 65536) {
    char path[512];
    snprintf(path, sizeof(path), "%s/resp_%02d", dir, seeds++);
    FILE *f = fopen(path, "wb");
    if (f) {
      fputc(1, f);
      fputc((int)(resp->n >> 8), f);
      fputc((int)(resp->n & 0xff), f);
      fwrite(resp->b, 1, resp->n, f);
      fclose(f);
    }
  }
}

/* The fields of a DiscoveryRequest the tests look at. */
typedef struct req_view {
  char version[64], type[128], nonce[64], names[256], error[512];
  bool node;
  char node_id[64];
} req_view;

static bool next_req(xds_ads *a, req_view *v) {
  grit_bytes b;
  memset(v, 0, sizeof(*v));
  if (!grit_xds_ads_next_request(a, &b))
    return false;
  grit_pbr r;
  grit_pbf f;
  grit_pbr_init(&r, b.data, b.len);
  while (grit_pbr_next(&r, &f) == 1) {
    char *dst = f.num == 1   ? v->version
                : f.num == 4 ? v->type
                : f.num == 5 ? v->nonce
                             : NULL;
    if (dst)
      snprintf(dst, 64, "%.*s", (int)f.len, (const char *)f.data);
    if (f.num == 4)
      snprintf(v->type, sizeof(v->type), "%.*s", (int)f.len,
               (const char *)f.data);
    if (f.num == 3) {
      size_t n = strlen(v->names);
      snprintf(v->names + n, sizeof(v->names) - n, "%s%.*s", n ? "," : "",
               (int)f.len, (const char *)f.data);
    }
    if (f.num == 2) {
      v->node = true;
      grit_pbr nr;
      grit_pbf g;
      grit_pbf_sub(&f, &nr);
      while (grit_pbr_next(&nr, &g) == 1)
        if (g.num == 1)
          snprintf(v->node_id, sizeof(v->node_id), "%.*s", (int)g.len,
                   (const char *)g.data);
    }
    if (f.num == 6) {
      grit_pbr sr;
      grit_pbf g;
      grit_pbf_sub(&f, &sr);
      while (grit_pbr_next(&sr, &g) == 1)
        if (g.num == 2)
          snprintf(v->error, sizeof(v->error), "%.*s", (int)g.len,
                   (const char *)g.data);
    }
  }
  grit_free(b.data);
  return true;
}

/* The cache state of |name| (gRFC A78), or -1 when not watched. */
typedef struct state_q {
  const char *name;
  int st;
} state_q;

static void state_cb(void *ud, const char *name, const xds_resource *r,
                     xds_cache_state st) {
  (void)r;
  state_q *q = ud;
  if (strcmp(name, q->name) == 0)
    q->st = (int)st;
}

static int state_of(const xds_ads *a, xds_kind k, const char *name) {
  state_q q = {name, -1};
  grit_xds_ads_foreach(a, k, state_cb, &q);
  return q.st;
}

static void test_ads_flow(void) {
  xds_bootstrap *b;
  grit_error_detail d;
  ASSERT_OK(grit_xds_bootstrap_parse(boot_json, strlen(boot_json), &b, &d));
  events ev = {{0}, NULL};
  xds_ads *a;
  ASSERT_OK(grit_xds_ads_create(b, "0.1.0", &cbs, &ev, &a));
  ASSERT_OK(grit_xds_ads_watch(a, XDS_CLUSTER, "c1", 0));
  ASSERT_OK(grit_xds_ads_watch(a, XDS_CLUSTER, "c2", 0));
  req_view v;
  ASSERT_EQ(state_of(a, XDS_CLUSTER, "c1"), XDS_CACHE_REQUESTED);
  ASSERT_EQ(state_of(a, XDS_CLUSTER, "nope"), -1);
  ASSERT(!next_req(a, &v)); /* no stream yet */
  grit_xds_ads_stream_started(a, 1000);
  ASSERT(next_req(a, &v));
  ASSERT(v.node);
  ASSERT_STR_EQ(v.node_id, "grit-test");
  ASSERT_STR_EQ(v.type, CLUSTER_T);
  ASSERT_STR_EQ(v.names, "c1,c2");
  ASSERT_STR_EQ(v.version, "");
  ASSERT(!next_req(a, &v));
  ASSERT_EQ(grit_xds_ads_next_timer_ms(a), 1000 + XDS_DNE_TIMEOUT_MS);

  /* v1: c1 valid, c2 refused: c1 applied, c2's watcher told, NACK. */
  pbw resp = {0};
  cluster_any(&resp, "c1", "svc1");
  bad_cluster_any(&resp, "c2");
  finish_resp(&resp, "v1", CLUSTER_T, "n1");
  ASSERT_OK(grit_xds_ads_on_response(a, resp.b, resp.n, 1100));
  free(resp.b);
  ASSERT_STR_EQ(ev.log, "res:c1 err:c2");
  ASSERT_EQ(state_of(a, XDS_CLUSTER, "c1"), XDS_CACHE_ACKED);
  ASSERT_EQ(state_of(a, XDS_CLUSTER, "c2"), XDS_CACHE_NACKED);
  ASSERT(next_req(a, &v));
  ASSERT(!v.node);              /* the Node goes once per stream */
  ASSERT_STR_EQ(v.version, ""); /* NACK: the last ACKed version */
  ASSERT_STR_EQ(v.nonce, "n1");
  ASSERT(strstr(v.error, "c2: cluster type 0 is not supported") != NULL);
  ASSERT_STR_EQ(grit_xds_ads_last_nack(a, XDS_CLUSTER), v.error);
  ASSERT_EQ(grit_xds_ads_next_timer_ms(a), 0); /* both answered */

  /* v2: both valid, c1 unchanged (no notification): ACK v2. */
  ev.log[0] = '\0';
  memset(&resp, 0, sizeof(resp));
  cluster_any(&resp, "c1", "svc1");
  cluster_any(&resp, "c2", NULL);
  cluster_any(&resp, "unwatched", NULL);
  finish_resp(&resp, "v2", CLUSTER_T, "n2");
  ASSERT_OK(grit_xds_ads_on_response(a, resp.b, resp.n, 1200));
  free(resp.b);
  ASSERT_STR_EQ(ev.log, "res:c2");
  ASSERT_EQ(state_of(a, XDS_CLUSTER, "c2"), XDS_CACHE_ACKED);
  ASSERT(next_req(a, &v));
  ASSERT_STR_EQ(v.version, "v2");
  ASSERT_STR_EQ(v.nonce, "n2");
  ASSERT_STR_EQ(v.error, "");
  ASSERT_STR_EQ(grit_xds_ads_version(a, XDS_CLUSTER), "v2");

  /* v3 without c2: deleted (CDS is state of the world). */
  ev.log[0] = '\0';
  memset(&resp, 0, sizeof(resp));
  cluster_any(&resp, "c1", "svc1-changed");
  finish_resp(&resp, "v3", CLUSTER_T, "n3");
  ASSERT_OK(grit_xds_ads_on_response(a, resp.b, resp.n, 1300));
  free(resp.b);
  ASSERT_STR_EQ(ev.log, "res:c1 dne:c2");
  ASSERT_STR_EQ(ev.last->u.cluster.eds_service_name, "svc1-changed");
  ASSERT_EQ(state_of(a, XDS_CLUSTER, "c2"), XDS_CACHE_DOES_NOT_EXIST);
  ASSERT_EQ(state_of(a, XDS_CLUSTER, "c1"), XDS_CACHE_ACKED);

  /* v4 refuses c1: the previous c1 stays in force (A78's
   * nacked_but_cached); c2 was deleted already and stays so. */
  memset(&resp, 0, sizeof(resp));
  bad_cluster_any(&resp, "c1");
  finish_resp(&resp, "v4", CLUSTER_T, "n4");
  ASSERT_OK(grit_xds_ads_on_response(a, resp.b, resp.n, 1350));
  free(resp.b);
  ASSERT_EQ(state_of(a, XDS_CLUSTER, "c1"), XDS_CACHE_NACKED_BUT_CACHED);
  ASSERT_EQ(state_of(a, XDS_CLUSTER, "c2"), XDS_CACHE_DOES_NOT_EXIST);
  ASSERT_STR_EQ(grit_xds_cache_state_name(XDS_CACHE_NACKED_BUT_CACHED),
                "nacked_but_cached");
  ASSERT_STR_EQ(grit_xds_ads_version(a, XDS_CLUSTER), "v3");

  /* A new watch of a cached name is answered at once; a new stream
   * requests everything again with the version kept. */
  ev.log[0] = '\0';
  ASSERT(next_req(a, &v));
  ASSERT_OK(grit_xds_ads_watch(a, XDS_CLUSTER, "c1", 1400));
  ASSERT_STR_EQ(ev.log, "res:c1");
  grit_xds_ads_stream_ended(a);
  ASSERT(!next_req(a, &v));
  grit_xds_ads_stream_started(a, 5000);
  ASSERT(next_req(a, &v));
  ASSERT(v.node);
  ASSERT_STR_EQ(v.version, "v3");
  ASSERT_STR_EQ(v.nonce, "");
  ASSERT_STR_EQ(v.names, "c1,c2");
  /* c2 has nothing cached: its timer runs again from the new stream. */
  ASSERT_EQ(grit_xds_ads_next_timer_ms(a), 5000 + XDS_DNE_TIMEOUT_MS);
  ev.log[0] = '\0';
  grit_xds_ads_on_timer(a, 5000 + XDS_DNE_TIMEOUT_MS - 1);
  ASSERT_STR_EQ(ev.log, "");
  grit_xds_ads_on_timer(a, 5000 + XDS_DNE_TIMEOUT_MS);
  ASSERT_STR_EQ(ev.log, "dne:c2");
  ASSERT_EQ(grit_xds_ads_next_timer_ms(a), 0);

  /* Unwatching: c1 has two watchers, c2 one. */
  grit_xds_ads_unwatch(a, XDS_CLUSTER, "c2");
  grit_xds_ads_unwatch(a, XDS_CLUSTER, "c1");
  ASSERT(next_req(a, &v));
  ASSERT_STR_EQ(v.names, "c1");

  xds_ads_stats st;
  grit_xds_ads_get_stats(a, &st);
  ASSERT_EQ(st.valid[XDS_CLUSTER], 5);
  ASSERT_EQ(st.invalid[XDS_CLUSTER], 2);
  ASSERT_EQ(st.responses, 4);
  grit_xds_resource_unref(ev.last);
  grit_xds_ads_destroy(a);
  grit_xds_bootstrap_free(b);
}

/* EDS is not state of the world: an absent resource stays; a malformed
 * response is NACKed without changing anything. */
static void test_ads_eds_and_malformed(void) {
  xds_bootstrap *b;
  grit_error_detail d;
  ASSERT_OK(grit_xds_bootstrap_parse(boot_json, strlen(boot_json), &b, &d));
  events ev = {{0}, NULL};
  xds_ads *a;
  ASSERT_OK(grit_xds_ads_create(b, "0.1.0", &cbs, &ev, &a));
  grit_xds_ads_stream_started(a, 0);
  ASSERT_OK(grit_xds_ads_watch(a, XDS_ENDPOINTS, "e1", 0));
  ASSERT_OK(grit_xds_ads_watch(a, XDS_ENDPOINTS, "e2", 0));
  req_view v;
  ASSERT(next_req(a, &v));
  ASSERT_STR_EQ(v.type, EDS_T);
  pbw resp = {0}, cla = {0};
  pbw_str(&cla, 1, "e1");
  pbw_any(&resp, 2, EDS_T, &cla);
  finish_resp(&resp, "1", EDS_T, "a");
  ASSERT_OK(grit_xds_ads_on_response(a, resp.b, resp.n, 10));
  free(resp.b);
  memset(&resp, 0, sizeof(resp));
  finish_resp(&resp, "2", EDS_T, "b");
  ASSERT_OK(grit_xds_ads_on_response(a, resp.b, resp.n, 20));
  free(resp.b);
  ASSERT_STR_EQ(ev.log, "res:e1"); /* no dne for e1 */
  ASSERT(next_req(a, &v));
  ASSERT_STR_EQ(v.version, "2");

  memset(&resp, 0, sizeof(resp));
  finish_resp(&resp, "3", EDS_T, "c");
  pbw_raw(&resp, "\x12\x09", 2); /* a resource field cut short */
  ASSERT_EQ(grit_xds_ads_on_response(a, resp.b, resp.n, 30),
            GRIT_ERR_INVALID_ARG);
  free(resp.b);
  ASSERT(next_req(a, &v));
  ASSERT_STR_EQ(v.version, "2");
  ASSERT_STR_EQ(v.nonce, "c");
  ASSERT(strstr(v.error, "malformed") != NULL);

  memset(&resp, 0, sizeof(resp));
  finish_resp(&resp, "4", TP "unknown.Type", "d");
  ASSERT_EQ(grit_xds_ads_on_response(a, resp.b, resp.n, 40),
            GRIT_ERR_INVALID_ARG);
  free(resp.b);
  ASSERT(!next_req(a, &v));
  grit_xds_resource_unref(ev.last);
  grit_xds_ads_destroy(a);
  grit_xds_bootstrap_free(b);
}

static const test_case tests[] = {
    {"bootstrap", test_bootstrap},
    {"bootstrap_env", test_bootstrap_env},
    {"ads_flow", test_ads_flow},
    {"ads_eds_and_malformed", test_ads_eds_and_malformed},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
