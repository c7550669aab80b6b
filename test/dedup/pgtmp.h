/*
 * A throwaway PostgreSQL server for tests: initdb into a temporary
 * directory, started on a free loopback port with pg_ctl, stopped and
 * removed by pgtmp_stop. pg_ctl refuses to run as root, so as root the
 * server runs as the 'postgres' system user (runuser). Every step is
 * bounded (pg_ctl -t). pgtmp_start returns -1 when PostgreSQL's server
 * binaries are not installed (the caller skips).
 *
 * A test that dies (an assertion, a sanitizer abort, a timeout's kill)
 * never reaches pgtmp_stop, and the postmaster would run on. So
 * pgtmp_start also starts a watcher, a shell in its own session reading
 * a pipe only the test holds: "done" from pgtmp_stop ends it; end of file
 * (the test is gone) makes it stop the server and remove the directory.
 */
#ifndef GRIT_TEST_PGTMP_H
#define GRIT_TEST_PGTMP_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <glob.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct pgtmp {
  char bin[128]; /* PostgreSQL's bin directory */
  char dir[64];  /* the temporary directory */
  char as[48];   /* "runuser -u postgres --" as root, else "" */
  int port;
  char conninfo[160];
  int watch_fd; /* the watcher's pipe, write end; -1 if none */
  pid_t watch_pid;
} pgtmp;

static inline int pgtmp_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* Start the server with pg_ctl (waits until it accepts connections). */
static inline int pgtmp_up(pgtmp *p) {
  char opts[256];
  snprintf(opts, sizeof(opts),
           "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off "
           "-c max_connections=100",
           p->port, p->dir);
  char cmd[1024];
  snprintf(cmd, sizeof(cmd),
           "%s %s/pg_ctl -D %s/data -l %s/log -w -t 60 -o '%s' start "
           ">/dev/null 2>&1",
           p->as, p->bin, p->dir, p->dir, opts);
  return system(cmd) == 0 ? 0 : -1;
}

/* Stop at once (SIGQUIT to the postmaster: clients see their connections
 * drop, as when a database host dies). */
static inline void pgtmp_down(pgtmp *p) {
  char cmd[512];
  snprintf(cmd, sizeof(cmd),
           "%s %s/pg_ctl -D %s/data -m immediate -w -t 60 stop "
           ">/dev/null 2>&1",
           p->as, p->bin, p->dir);
  if (system(cmd) != 0)
    fprintf(stderr, "pgtmp: pg_ctl stop failed\n");
}

/* The watcher (see the top). exec right after fork: safe in a process
 * with threads; setsid: outside the test's process group, which a
 * timeout kills. */
static inline void pgtmp_watch(pgtmp *p) {
  char script[512];
  snprintf(script, sizeof(script),
           "read -r x; [ \"$x\" = done ] && exit 0; "
           "%s %s/pg_ctl -D %s/data -m immediate -w -t 60 stop "
           ">/dev/null 2>&1; rm -rf %s",
           p->as, p->bin, p->dir, p->dir);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return;
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    if (dup2(fds[0], 0) == 0)
      execl("/bin/sh", "sh", "-c", script, (char *)NULL);
    _exit(127);
  }
  close(fds[0]);
  if (pid < 0) {
    close(fds[1]);
    return;
  }
  p->watch_fd = fds[1];
  p->watch_pid = pid;
}

static inline int pgtmp_start(pgtmp *p) {
  memset(p, 0, sizeof(*p));
  p->watch_fd = -1;
  glob_t g;
  if (glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) != 0)
    return -1;
  snprintf(p->bin, sizeof(p->bin), "%s", g.gl_pathv[g.gl_pathc - 1]);
  globfree(&g);
  *strrchr(p->bin, '/') = '\0';
  snprintf(p->dir, sizeof(p->dir), "/tmp/grit-pg-XXXXXX");
  if (!mkdtemp(p->dir))
    return -2;
  if (geteuid() == 0) {
    struct passwd *pw = getpwnam("postgres");
    if (!pw || chown(p->dir, pw->pw_uid, pw->pw_gid) != 0)
      return -2;
    snprintf(p->as, sizeof(p->as), "runuser -u postgres --");
  }
  pgtmp_watch(p);
  char cmd[512];
  snprintf(cmd, sizeof(cmd),
           "%s %s/initdb -D %s/data -A trust -U postgres --no-sync "
           ">%s/initdb.log 2>&1",
           p->as, p->bin, p->dir, p->dir);
  if (system(cmd) != 0)
    return -2;
  p->port = pgtmp_free_port();
  if (p->port <= 0 || pgtmp_up(p) != 0)
    return -2;
  snprintf(p->conninfo, sizeof(p->conninfo),
           "host=127.0.0.1 port=%d user=postgres dbname=postgres "
           "connect_timeout=10",
           p->port);
  return 0;
}

static inline void pgtmp_stop(pgtmp *p) {
  if (!p->dir[0])
    return;
  pgtmp_down(p);
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", p->dir);
  if (system(cmd) != 0)
    fprintf(stderr, "pgtmp: cannot remove %s\n", p->dir);
  p->dir[0] = '\0';
  if (p->watch_fd >= 0) {
    if (write(p->watch_fd, "done\n", 5) != 5)
      fprintf(stderr, "pgtmp: cannot tell the watcher\n");
    close(p->watch_fd);
    p->watch_fd = -1;
    waitpid(p->watch_pid, NULL, 0);
  }
}

#endif
