/* The test control plane (test/xds/control_plane.js) as a child process:
 * started with a scenario, its stdout log collected by a thread, commands
 * written to its stdin, stopped by closing stdin (issue 27; SPEC XD-01). */
#ifndef GRIT_TEST_XDS_CP_H
#define GRIT_TEST_XDS_CP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct xcp xcp;

/* Start node on control_plane.js with |scenario| (paths from the
 * environment: XDS_CP_DIR) on |port| (0: any). NULL on failure. */
xcp *xcp_start(const char *scenario, int port);
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

#endif
