/* xds:/// on libgrit as a program gets it, against the test control plane
 * on @grpc/grpc-js and three grpcio backends (issue 27; SPEC XD-01; gRFC
 * A27, A78):
 *  - the xds resolver is built in (no registration call);
 *  - no bootstrap, an unreadable GRPC_XDS_BOOTSTRAP and an invalid
 *    GRIT_ARG_XDS_BOOTSTRAP_CONFIG fail grit_channel_create with
 *    GRIT_ERR_INVALID_CONFIG naming the variables, the file, or the JSON
 *    path and reason;
 *  - GRIT_ARG_XDS_BOOTSTRAP_CONFIG wins over a broken environment;
 *  - the config watcher hears source "xds", once more per applied update;
 *  - the A78 families in the Prometheus text: connected, valid and
 *    invalid (NACKed) updates, resources by cache state;
 *  - a Cluster deleted (absent from a CDS response) fails the calls
 *    UNAVAILABLE naming it, and they recover when it is back; the same for
 *    the Listener (A27);
 *  - grit_default_runtime_shutdown waits for the ADS stream's background
 *    end by itself. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grit/grit.h"
#include "test/xds/cp.h"

/* One unary call; its answer into |out|, its status message into |msg|. */
static grit_status_code call(grit_channel *ch, bool wfr, char *out, size_t size,
                             char *msg, size_t msize) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = 10000,
                      .wait_for_ready = wfr ? GRIT_WFR_ON : GRIT_WFR_OFF};
  grit_status st = {0};
  grit_bytes resp = {0};
  grit_err e = grit_unary_call(ch, "/lb.Svc/Call", "", 0, &o, &resp, &st, NULL);
  if (e != GRIT_OK)
    return GRIT_STATUS_INTERNAL;
  snprintf(out, size, "%.*s", (int)resp.len,
           resp.data ? (const char *)resp.data : "");
  snprintf(msg, msize, "%s", st.message ? st.message : "");
  grit_bytes_free(&resp);
  grit_status_code code = st.code;
  grit_status_free(&st);
  return code;
}

/* Within 10 s, a call ends with |want| (and, when not OK, a message
 * containing |has|). */
static bool until(grit_channel *ch, grit_status_code want, const char *has) {
  uint64_t t0 = xcp_now_ms();
  char ans[32], msg[512];
  while (xcp_now_ms() - t0 < 10000) {
    grit_status_code c =
        call(ch, want == GRIT_STATUS_OK, ans, sizeof(ans), msg, sizeof(msg));
    if (c == want && (!has || strstr(msg, has)))
      return true;
    usleep(20000);
  }
  fprintf(stderr, "no call ended %d with '%s' within 10 s (last: %s)\n",
          (int)want, has ? has : "", msg);
  return false;
}

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static int xds_events, other_events;

static void on_config(grit_channel *ch, const grit_service_config_info *info,
                      void *ud) {
  (void)ch;
  (void)ud;
  pthread_mutex_lock(&ev_mu);
  if (info->source == GRIT_CONFIG_SOURCE_XDS)
    xds_events++;
  else
    other_events++;
  pthread_mutex_unlock(&ev_mu);
}

static int events(void) {
  pthread_mutex_lock(&ev_mu);
  int n = xds_events;
  pthread_mutex_unlock(&ev_mu);
  return n;
}

/* The process's Prometheus text (new; free()). */
static char *metrics(void) {
  grit_bytes b = {0};
  if (grit_metrics_write_prometheus(NULL, &b) != GRIT_OK)
    return NULL;
  char *s = malloc(b.len + 1);
  if (s) {
    memcpy(s, b.data, b.len);
    s[b.len] = '\0';
  }
  grit_bytes_free(&b);
  return s;
}

/* Within 10 s, the metrics hold a line starting with |prefix| whose value
 * is at least |min|. */
static bool metric_at_least(const char *prefix, double min) {
  uint64_t t0 = xcp_now_ms();
  while (xcp_now_ms() - t0 < 10000) {
    char *m = metrics();
    const char *p = m ? strstr(m, prefix) : NULL;
    double v = -1;
    if (p) {
      const char *sp = strchr(p, '}');
      if (sp)
        v = strtod(sp + 1, NULL);
    }
    free(m);
    if (v >= min)
      return true;
    usleep(50000);
  }
  fprintf(stderr, "no metric %s >= %g within 10 s\n", prefix, min);
  return false;
}

static grit_err create(const char *boot, grit_channel **ch,
                       grit_error_detail *d) {
  grit_channel_args *a = NULL;
  grit_err e = grit_channel_args_create(&a);
  if (e == GRIT_OK && boot)
    e = grit_channel_args_set_string(a, GRIT_ARG_XDS_BOOTSTRAP_CONFIG, boot);
  if (e == GRIT_OK)
    e = grit_channel_args_set_config_watcher(a, on_config, NULL);
  if (e == GRIT_OK)
    e = grit_channel_create(NULL, "xds:///svc", a, d, ch);
  grit_channel_args_destroy(a);
  return e;
}

int main(void) {
  /* ---- refusals at grit_channel_create ---- */
  unsetenv("GRPC_XDS_BOOTSTRAP");
  unsetenv("GRPC_XDS_BOOTSTRAP_CONFIG");
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  CHECK(create(NULL, &ch, &d) == GRIT_ERR_INVALID_CONFIG && !ch);
  printf("no bootstrap: %s: %s\n", d.path, d.reason);
  CHECK(strstr(d.reason, "GRPC_XDS_BOOTSTRAP (a file)") &&
        strstr(d.reason, "GRPC_XDS_BOOTSTRAP_CONFIG") &&
        strstr(d.reason, "GRIT_ARG_XDS_BOOTSTRAP_CONFIG"));
  setenv("GRPC_XDS_BOOTSTRAP", "/nonexistent/grit-bootstrap.json", 1);
  memset(&d, 0, sizeof(d));
  CHECK(create(NULL, &ch, &d) == GRIT_ERR_INVALID_CONFIG && !ch);
  printf("unreadable file: %s: %s\n", d.path, d.reason);
  CHECK(strcmp(d.path, "GRPC_XDS_BOOTSTRAP") == 0 &&
        strstr(d.reason, "/nonexistent/grit-bootstrap.json"));
  memset(&d, 0, sizeof(d));
  CHECK(create("{\"xds_servers\": [{\"server_uri\": 7}]}", &ch, &d) ==
            GRIT_ERR_INVALID_CONFIG &&
        !ch);
  printf("invalid argument: %s: %s\n", d.path, d.reason);
  CHECK(strcmp(d.path, "$.xds_servers[0].server_uri") == 0 && d.reason[0]);
  memset(&d, 0, sizeof(d));
  CHECK(create("{\"xds_servers\": ", &ch, &d) == GRIT_ERR_INVALID_CONFIG);
  printf("not JSON: %s: %s\n", d.path, d.reason);
  CHECK(d.reason[0] != '\0');

  /* ---- the peers ---- */
  xcp *backends = xcp_backends_start();
  if (!backends)
    return 1;
  grit_channel *ctl = NULL;
  CHECK(xcp_backends_ports(backends, &ctl) == 3);
  char msg[512];
  xcp *cp = xcp_start_scenario("pkg.json", 0);
  if (!cp)
    return 1;
  char boot[512];
  xcp_bootstrap_json(boot, sizeof(boot), "grit-xds-pkg-test", xcp_port(cp));

  /* ---- the argument wins over the (broken) environment ---- */
  memset(&d, 0, sizeof(d));
  CHECK(create(boot, &ch, &d) == GRIT_OK);
  if (!ch)
    return 1;
  char ans[32];
  CHECK(call(ch, true, ans, sizeof(ans), msg, sizeof(msg)) == GRIT_STATUS_OK);
  CHECK(ans[0] == 'b');
  int ev0 = events();
  printf("config watcher: %d xds event(s), %d other\n", ev0, other_events);
  CHECK(ev0 >= 1);

  /* ---- A78 metrics ---- */
  char conn[256];
  snprintf(conn, sizeof(conn),
           "grpc_xds_client_connected{grpc_target=\"xds:///svc\","
           "grpc_xds_server=\"127.0.0.1:%d\"}",
           xcp_port(cp));
  CHECK(metric_at_least(conn, 1));
  CHECK(metric_at_least(
      "grpc_xds_client_resource_updates_valid_total{grpc_target=\"xds:///"
      "svc\",grpc_xds_server=\"127.0.0.1:",
      1));
  CHECK(metric_at_least("grpc_xds_client_resources{grpc_target=\"xds:///svc\"",
                        1));
  char *m = metrics();
  CHECK(m && strstr(m, "grpc_xds_resource_type=\"envoy.config.cluster.v3."
                       "Cluster\",grpc_xds_cache_state=\"acked\"} 1"));
  free(m);

  /* ---- one more watcher event per applied update ---- */
  xcp_cmd(cp, "update only_b2");
  uint64_t t0 = xcp_now_ms();
  while (events() == ev0 && xcp_now_ms() - t0 < 10000)
    usleep(20000);
  printf("after an EDS update: %d xds event(s)\n", events());
  CHECK(events() > ev0);

  /* ---- a NACK counts as invalid, the cluster stays cached ---- */
  xcp_cmd(cp, "update bad_cluster");
  CHECK(metric_at_least("grpc_xds_client_resources{grpc_target=\"xds:///"
                        "svc\",grpc_xds_server=\"127.0.0.1:",
                        1));
  t0 = xcp_now_ms();
  bool nacked = false;
  while (!nacked && xcp_now_ms() - t0 < 10000) {
    m = metrics();
    nacked = m && strstr(m, "grpc_xds_cache_state=\"nacked_but_cached\"} 1");
    free(m);
    if (!nacked)
      usleep(50000);
  }
  CHECK(nacked);
  CHECK(until(ch, GRIT_STATUS_OK, NULL)); /* the previous one in force */

  /* ---- A27: the Cluster deleted, then back ---- */
  xcp_cmd(cp, "update del_cluster");
  CHECK(until(ch, GRIT_STATUS_UNAVAILABLE, "cluster c1 does not exist"));
  m = metrics();
  CHECK(m && strstr(m, "Cluster\",grpc_xds_cache_state=\"does_not_exist\"} 1"));
  free(m);
  xcp_cmd(cp, "update cluster_back");
  CHECK(until(ch, GRIT_STATUS_OK, NULL));

  /* ---- A27: the Listener deleted, then back ---- */
  xcp_cmd(cp, "update del_listener");
  CHECK(until(ch, GRIT_STATUS_UNAVAILABLE, "listener svc does not exist"));
  xcp_cmd(cp, "update listener_back");
  CHECK(until(ch, GRIT_STATUS_OK, NULL));

  grit_channel_destroy(ch);
  grit_channel_destroy(ctl);
  xcp_dump_if_failed(cp);
  xcp_stop(cp);
  xcp_stop(backends);
  /* No grit_xdsc_wait_all_freed: the shutdown waits for the stream. */
  CHECK(grit_default_runtime_shutdown() == GRIT_OK);
  return xcp_exit_status();
}
