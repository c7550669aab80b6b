/* The test control plane (test/xds/control_plane.js) as a child process:
 * started with a scenario, its stdout log collected by a thread, commands
 * written to its stdin, stopped by closing stdin (issue 27; SPEC XD-01). */
#ifndef GRIT_TEST_XDS_CP_H
#define GRIT_TEST_XDS_CP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "grit/grit.h"

typedef struct xcp xcp;

/* Start node on control_plane.js with |scenario| (paths from the
 * environment: XDS_CP_DIR) on |port| (0: any). NULL on failure. */
xcp *xcp_start(const char *scenario, int port);
/* xcp_start on the scenario file |name| of XDS_SCENARIOS; NULL after a
 * message on stderr. */
xcp *xcp_start_scenario(const char *name, int port);
/* Start |argv| (a program printing "PORT n" first, stopping when its
 * stdin closes) the same way. */
xcp *xcp_spawn(char *const argv[]);
/* The same, waiting for a line containing |ready| instead of "PORT ". */
xcp *xcp_spawn_until(char *const argv[], const char *ready);
int xcp_port(const xcp *c);
/* Send one stdin command ("update NAME"). */
void xcp_cmd(xcp *c, const char *line);
/* Wait up to |ms| for a log line (after line |from|) containing every one
 * of the NULL-terminated substrings; its index, or -1. */
int xcp_wait(xcp *c, int from, int ms, ...);
/* The log line |i| (borrowed while |c| lives), or NULL. */
const char *xcp_line(xcp *c, int i);
int xcp_nlines(xcp *c);
/* Close stdin, wait for the exit (killed after 5 s), free. */
void xcp_stop(xcp *c);

/* ---- What the xds test programs share ---- */

/* The failed CHECKs of the program; its exit status is 1 when nonzero. */
extern int xcp_failures;
#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);    \
      xcp_failures++;                                                          \
    }                                                                          \
  } while (0)

/* When a CHECK failed, the log of |c| (NULL: none) on stderr, for the
 * failure's reader. */
void xcp_dump_if_failed(xcp *c);
/* The program's end: "N failures" on stderr, or "ok" on stdout; the exit
 * status (1 when a CHECK failed, else 0). */
int xcp_exit_status(void);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t xcp_now_ms(void);

/* Start the three grpcio backends (test/peers/health_server.py, found from
 * XDS_SCENARIOS) with xcp_spawn; NULL (after a message on stderr) when they
 * do not start. */
xcp *xcp_backends_start(void);
/* Ask |backends| their three ports over a new cleartext channel to their
 * control service (/ctl.Ctl/Ports, 10 s, wait for ready) and put them into
 * the environment as B0, B1, B2 (what the scenarios name). Returns how many
 * ports were read (3 when all is well; on less, the answer is printed on
 * stderr and nothing is set). The channel into *ctl (NULL when it could not
 * be made; the caller destroys it). */
int xcp_backends_ports(xcp *backends, grit_channel **ctl);

/* The bootstrap JSON naming the control plane on 127.0.0.1:|port|
 * (insecure) with node id |node_id|, into |out|. */
void xcp_bootstrap_json(char *out, size_t size, const char *node_id, int port);
/* The same put into GRPC_XDS_BOOTSTRAP_CONFIG (GRPC_XDS_BOOTSTRAP unset),
 * the xds resolver registered and a channel to xds:///svc made (both
 * CHECKed); the channel, or NULL. */
grit_channel *xcp_xds_channel(const char *node_id, int port);

#endif
