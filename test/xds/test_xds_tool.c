/* What operators see of xDS through the grit command (issue 27), against
 * the test control plane on @grpc/grpc-js and three grpcio backends:
 *  - `grit call --xds-bootstrap FILE --show-xds xds:///svc METHOD` makes
 *    the call and prints the client's resources in force: the listener
 *    and its route config, the route's cluster, the cluster's type and
 *    policy, the endpoints with health and priority, the versions;
 *  - with an invalid Cluster on the control plane (and none before it),
 *    the call fails UNAVAILABLE with the NACK's reason and --show-xds
 *    shows it NACKed with the reason;
 *  - --show-xds --json prints one line;
 *  - `grit config check --bootstrap` accepts a valid bootstrap (exit 0)
 *    and names the JSON path and reason of an invalid one (exit 1).
 * usage: test_xds_tool GRIT (run by run.sh) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grit/grit.h"
#include "test/xds/cp.h"

/* Run |cmd| through sh; its stdout and stderr (2>&1) into |out| (at most
 * |size| - 1 bytes). Returns the exit status, or -1. */
static int run(const char *cmd, char *out, size_t size) {
  FILE *p = popen(cmd, "r");
  if (!p)
    return -1;
  size_t n = 0, got;
  while (n + 1 < size && (got = fread(out + n, 1, size - 1 - n, p)) > 0)
    n += got;
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char out[1 << 16];

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_xds_tool GRIT\n");
    return 2;
  }
  const char *grit = argv[1];
  xcp *backends = xcp_backends_start();
  if (!backends)
    return 1;
  /* The three ports, from the backends themselves. */
  grit_channel *ctl = NULL;
  CHECK(xcp_backends_ports(backends, &ctl) == 3);
  grit_channel_destroy(ctl);
  CHECK(grit_default_runtime_shutdown() == GRIT_OK);
  char cmd[2048];
  int rc;
  xcp *cp = xcp_start_scenario("pkg.json", 0);
  if (!cp)
    return 1;
  char dir[] = "/tmp/grit-xds-tool.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char boot[1100], bad[1100];
  snprintf(boot, sizeof(boot), "%s/bootstrap.json", dir);
  snprintf(bad, sizeof(bad), "%s/bad.json", dir);
  FILE *f = fopen(boot, "w");
  CHECK(f != NULL);
  if (f) {
    fprintf(f,
            "{\"xds_servers\": [{\"server_uri\": \"127.0.0.1:%d\", "
            "\"channel_creds\": [{\"type\": \"insecure\"}]}], "
            "\"node\": {\"id\": \"grit-xds-tool-test\"}}\n",
            xcp_port(cp));
    fclose(f);
  }
  f = fopen(bad, "w");
  CHECK(f != NULL);
  if (f) {
    fprintf(f, "{\"xds_servers\": [{\"server_uri\": \"127.0.0.1:1\", "
               "\"channel_creds\": [{\"type\": \"alts\"}]}]}\n");
    fclose(f);
  }

  /* ---- grit config check --bootstrap ---- */
  snprintf(cmd, sizeof(cmd), "%s config check --bootstrap %s 2>&1", grit, boot);
  rc = run(cmd, out, sizeof(out));
  printf("config check (valid): exit %d: %s", rc, out);
  CHECK(rc == 0 && strstr(out, "xDS bootstrap: valid"));
  snprintf(cmd, sizeof(cmd), "%s config check --bootstrap %s 2>&1", grit, bad);
  rc = run(cmd, out, sizeof(out));
  printf("config check (invalid): exit %d: %s", rc, out);
  CHECK(rc == 1 && strstr(out, "$.xds_servers[0].channel_creds: no supported "
                               "channel credentials"));

  /* ---- grit call --show-xds ---- */
  snprintf(cmd, sizeof(cmd),
           "env -u GRPC_XDS_BOOTSTRAP -u GRPC_XDS_BOOTSTRAP_CONFIG %s call "
           "--xds-bootstrap %s --deadline 10000 --show-xds --metrics "
           "xds:///svc /lb.Svc/Call 2>&1",
           grit, boot);
  rc = run(cmd, out, sizeof(out));
  printf("grit call --show-xds: exit %d\n%s", rc, out);
  CHECK(rc == 0);
  CHECK(strstr(out, "xds client:"));
  CHECK(strstr(out, "\"connected\": true"));
  CHECK(strstr(out, "\"name\": \"svc\""));
  CHECK(strstr(out, "\"route_config\": \"route-svc\""));
  CHECK(strstr(out, "\"cluster\": \"c1\""));
  CHECK(strstr(out, "\"type\": \"EDS\""));
  CHECK(strstr(out, "\"lb_policy\": \"ROUND_ROBIN\""));
  CHECK(strstr(out, "\"state\": \"acked\""));
  char ep[64];
  snprintf(ep, sizeof(ep), "\"address\": \"127.0.0.1:%s\"",
           getenv("B2") ? getenv("B2") : "0");
  CHECK(strstr(out, ep));
  CHECK(strstr(out, "\"health\": \"UNKNOWN\""));
  CHECK(strstr(out, "\"health\": \"HEALTHY\""));
  CHECK(strstr(out, "\"priority\": 0"));
  CHECK(strstr(out, "\"version\": \"1\""));
  CHECK(strstr(out, "\"last_nack\": \"\""));
  /* --metrics: the A78 families of the channel's target. */
  CHECK(strstr(out, "grpc_xds_client_connected{grpc_target=\"xds:///svc\""));
  CHECK(strstr(out, "grpc_xds_client_resources{grpc_target=\"xds:///svc\""));

  /* --json: one line. */
  snprintf(cmd, sizeof(cmd),
           "%s call --json --xds-bootstrap %s --deadline 10000 --show-xds "
           "xds:///svc /lb.Svc/Call 2>/dev/null | grep '^{\"xds_client\":'",
           grit, boot);
  rc = run(cmd, out, sizeof(out));
  CHECK(rc == 0 && strstr(out, "\"route_config\":\"route-svc\""));

  /* ---- an invalid Cluster: NACKed, its reason shown ---- */
  xcp_cmd(cp, "update bad_cluster");
  CHECK(xcp_wait(cp, 0, 10000, "\"event\":\"updated\"", "bad_cluster", NULL) >=
        0);
  snprintf(cmd, sizeof(cmd),
           "%s call --xds-bootstrap %s --deadline 2000 --show-xds xds:///svc "
           "/lb.Svc/Call 2>&1",
           grit, boot);
  rc = run(cmd, out, sizeof(out));
  printf("grit call --show-xds (bad cluster): exit %d\n%s", rc, out);
  /* No cluster in force: the call fails saying why. */
  CHECK(rc == 64 + GRIT_STATUS_UNAVAILABLE);
  CHECK(strstr(out, "status: UNAVAILABLE (14) xds: cluster c1 was refused: "
                    "cluster type 0 is not supported"));
  CHECK(strstr(out, "\"last_nack\": \"c1: cluster type 0 is not supported"));
  CHECK(strstr(out, "\"state\": \"nacked\""));
  CHECK(strstr(out, "\"updates_invalid\": 1"));

  unlink(boot);
  unlink(bad);
  rmdir(dir);
  xcp_dump_if_failed(cp);
  xcp_stop(cp);
  xcp_stop(backends);
  return xcp_exit_status();
}
