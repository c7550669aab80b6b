/* The ADS stream of xdsclient/ against the test control plane on
 * @grpc/grpc-js (issue 27; SPEC XD-01, gRFC A27): the four resource types
 * subscribed and ACKed, a pushed EDS update, an invalid Cluster NACKed
 * with its reason while the previous one stays in force, and a control
 * plane restart: the client reconnects and resubscribes everything with
 * the versions it had. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test/xds/cp.h"
#include "xdsclient/xdsclient.h"

/* What one watcher saw, under its lock. */
typedef struct seen {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int updates, errors, dne;
  char rds[64];
  size_t nendpoints;
  uint16_t first_port;
  int cluster_type;
  char why[512];
} seen;

static void w_resource(void *ud, xds_kind k, const char *name,
                       xds_resource *r) {
  (void)name;
  seen *s = ud;
  pthread_mutex_lock(&s->mu);
  s->updates++;
  if (k == XDS_LISTENER && r->u.listener.rds_name)
    snprintf(s->rds, sizeof(s->rds), "%s", r->u.listener.rds_name);
  if (k == XDS_ENDPOINTS) {
    s->nendpoints = 0;
    for (size_t i = 0; i < r->u.endpoints.nlocalities; i++)
      s->nendpoints += r->u.endpoints.localities[i].nendpoints;
    if (r->u.endpoints.nlocalities && r->u.endpoints.localities[0].nendpoints)
      s->first_port = r->u.endpoints.localities[0].endpoints[0].port;
  }
  if (k == XDS_CLUSTER)
    s->cluster_type = (int)r->u.cluster.type;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void w_error(void *ud, xds_kind k, const char *name, const char *why) {
  (void)k;
  (void)name;
  seen *s = ud;
  pthread_mutex_lock(&s->mu);
  s->errors++;
  snprintf(s->why, sizeof(s->why), "%s", why);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void w_dne(void *ud, xds_kind k, const char *name) {
  (void)k;
  (void)name;
  seen *s = ud;
  pthread_mutex_lock(&s->mu);
  s->dne++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static const grit_xdsc_watcher watcher = {w_resource, w_error, w_dne};

/* Wait up to 20 s for |*field| to reach |want|. */
static bool wait_count(seen *s, int *field, int want) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += 20;
  pthread_mutex_lock(&s->mu);
  while (*field < want)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) != 0)
      break;
  bool ok = *field >= want;
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static void seen_init(seen *s) {
  memset(s, 0, sizeof(*s));
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
}

static grit_xdsc *client_for(int port) {
  char json[512];
  snprintf(json, sizeof(json),
           "{\"xds_servers\": [{\"server_uri\": \"127.0.0.1:%d\", "
           "\"channel_creds\": [{\"type\": \"insecure\"}]}], "
           "\"node\": {\"id\": \"grit-xds-test\"}}",
           port);
  xds_bootstrap *b = NULL;
  grit_error_detail d = {0};
  if (grit_xds_bootstrap_parse(json, strlen(json), &b, &d) != GRIT_OK)
    return NULL;
  grit_xdsc *c = NULL;
  if (grit_xdsc_get(b, &c) != GRIT_OK)
    return NULL;
  return c;
}

#define T_LDS "envoy.config.listener.v3.Listener"
#define T_RDS "envoy.config.route.v3.RouteConfiguration"
#define T_CDS "envoy.config.cluster.v3.Cluster"
#define T_EDS "envoy.config.endpoint.v3.ClusterLoadAssignment"

int main(void) {
  setenv("B0", "50001", 1);
  setenv("B1", "50002", 1);
  setenv("B2", "50003", 1);
  xcp *cp = xcp_start_scenario("basic.json", 0);
  if (!cp)
    return 1;
  int port = xcp_port(cp);
  grit_xdsc *c = client_for(port);
  CHECK(c != NULL);
  if (!c)
    return 1;
  /* One client per server per process: a second get shares it. */
  grit_xdsc *c2 = client_for(port);
  CHECK(c2 == c);
  grit_xdsc_release(c2);

  seen lds, rds, cds, eds;
  seen_init(&lds);
  seen_init(&rds);
  seen_init(&cds);
  seen_init(&eds);
  CHECK(grit_xdsc_watch(c, XDS_LISTENER, "svc", &watcher, &lds) == GRIT_OK);
  CHECK(wait_count(&lds, &lds.updates, 1));
  CHECK(strcmp(lds.rds, "route-svc") == 0);
  CHECK(grit_xdsc_watch(c, XDS_ROUTE_CONFIG, "route-svc", &watcher, &rds) ==
        GRIT_OK);
  CHECK(grit_xdsc_watch(c, XDS_CLUSTER, "c1", &watcher, &cds) == GRIT_OK);
  CHECK(grit_xdsc_watch(c, XDS_ENDPOINTS, "c1", &watcher, &eds) == GRIT_OK);
  CHECK(wait_count(&rds, &rds.updates, 1));
  CHECK(wait_count(&cds, &cds.updates, 1));
  CHECK(wait_count(&eds, &eds.updates, 1));
  CHECK(cds.cluster_type == XDS_CLUSTER_EDS);
  CHECK(eds.nendpoints == 3);

  /* Every type ACKed: a request with the version the server sent, its
   * nonce, and no error_detail; the Node went with the first. */
  CHECK(xcp_wait(cp, -1, 5000, "\"request\"", T_LDS,
                 "\"node\":\"grit-xds-test\"", (char *)NULL) >= 0);
  CHECK(xcp_wait(cp, -1, 5000, "\"request\"", T_LDS, "\"version\":\"1\"",
                 "\"error\":null", (char *)NULL) >= 0);
  CHECK(xcp_wait(cp, -1, 5000, "\"request\"", T_RDS, "\"version\":\"1\"",
                 "\"error\":null", "route-svc", (char *)NULL) >= 0);
  CHECK(xcp_wait(cp, -1, 5000, "\"request\"", T_CDS, "\"version\":\"1\"",
                 "\"error\":null", (char *)NULL) >= 0);
  CHECK(xcp_wait(cp, -1, 5000, "\"request\"", T_EDS, "\"version\":\"1\"",
                 "\"error\":null", (char *)NULL) >= 0);

  /* A pushed EDS update arrives and is ACKed with its new version. */
  int mark = xcp_nlines(cp) - 1;
  xcp_cmd(cp, "update only_b2");
  CHECK(wait_count(&eds, &eds.updates, 2));
  CHECK(eds.nendpoints == 1 && eds.first_port == 50003);
  CHECK(xcp_wait(cp, mark, 5000, "\"request\"", T_EDS, "\"version\":\"2\"",
                 "\"error\":null", (char *)NULL) >= 0);

  /* An invalid Cluster (STATIC) is NACKed: the request keeps version 1
   * and its error_detail names the resource and the reason; the watcher
   * hears the error, and the EDS cluster stays in force. */
  mark = xcp_nlines(cp) - 1;
  xcp_cmd(cp, "update bad_cluster");
  CHECK(wait_count(&cds, &cds.errors, 1));
  CHECK(strstr(cds.why, "cluster type") != NULL);
  int nack = xcp_wait(cp, mark, 5000, "\"request\"", T_CDS, "\"version\":\"1\"",
                      "c1: cluster type", (char *)NULL);
  CHECK(nack >= 0);
  if (nack >= 0)
    printf("NACK as the control plane saw it: %s\n", xcp_line(cp, nack));
  char buf[512];
  grit_xdsc_last_nack(c, XDS_CLUSTER, buf, sizeof(buf));
  CHECK(strstr(buf, "cluster type") != NULL);
  seen cds2;
  seen_init(&cds2);
  CHECK(grit_xdsc_watch(c, XDS_CLUSTER, "c1", &watcher, &cds2) == GRIT_OK);
  CHECK(wait_count(&cds2, &cds2.updates, 1)); /* the cached one, at once */
  CHECK(cds2.cluster_type == XDS_CLUSTER_EDS);
  CHECK(cds.dne == 0 && cds2.dne == 0);
  grit_xdsc_unwatch(c, XDS_CLUSTER, "c1", &cds2);

  /* The control plane restarts on the same port: the client reconnects
   * (backoff 1 s +-20 %) and asks for all four types again, with the
   * versions it had ACKed. */
  xds_ads_stats st;
  uint64_t streams = 0;
  grit_xdsc_stats(c, &st, &streams);
  CHECK(streams == 1);
  xcp_stop(cp);
  cp = xcp_start_scenario("basic.json", port);
  CHECK(cp != NULL);
  if (!cp)
    return 1;
  CHECK(xcp_wait(cp, -1, 20000, "\"request\"", T_LDS, "svc",
                 "\"node\":\"grit-xds-test\"", (char *)NULL) >= 0);
  CHECK(xcp_wait(cp, -1, 20000, "\"request\"", T_RDS, "route-svc",
                 (char *)NULL) >= 0);
  CHECK(xcp_wait(cp, -1, 20000, "\"request\"", T_CDS, "c1", "\"version\":\"1\"",
                 (char *)NULL) >= 0);
  CHECK(xcp_wait(cp, -1, 20000, "\"request\"", T_EDS, "c1", "\"version\":\"2\"",
                 (char *)NULL) >= 0);
  /* The new server's EDS (3 endpoints, its version 1) replaces ours. */
  CHECK(wait_count(&eds, &eds.updates, 3));
  CHECK(eds.nendpoints == 3);
  grit_xdsc_stats(c, &st, &streams);
  CHECK(streams >= 2);
  CHECK(st.invalid[XDS_CLUSTER] >= 1);
  CHECK(lds.dne == 0 && rds.dne == 0 && eds.dne == 0);

  grit_xdsc_unwatch(c, XDS_LISTENER, "svc", &lds);
  grit_xdsc_unwatch(c, XDS_ROUTE_CONFIG, "route-svc", &rds);
  grit_xdsc_unwatch(c, XDS_CLUSTER, "c1", &cds);
  grit_xdsc_unwatch(c, XDS_ENDPOINTS, "c1", &eds);
  grit_xdsc_release(c);
  xcp_dump_if_failed(cp);
  xcp_stop(cp);
  CHECK(grit_xdsc_wait_all_freed(10000)); /* the ADS stream's worker */
  grit_default_runtime_shutdown();
  return xcp_exit_status();
}
