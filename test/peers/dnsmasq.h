/*
 * dnsmasq as a DNS peer for tests (DESIGN "Environment notes"): one dnsmasq
 * per test on a free 127.0.0.1 port, records from a generated --conf-file
 * in a mkdtemp directory. Records go in the file, never on the command line
 * (there --txt-record splits its text at commas).
 *
 * Records are conf-file lines, e.g.
 *   host-record=svc.test,127.0.0.1
 *   txt-record=_grpc_config.svc.test,"grpc_config=[{\"serviceConfig\":{}}]"
 * Every instance also gets `local=/test/`, so unknown names under .test are
 * NXDOMAIN (not REFUSED). dnsmasq splits a quoted string longer than 255
 * bytes into 255-byte strings of one record itself.
 *
 * Cleanup: dnsm_stop() sends SIGTERM and waits (bounded, then SIGKILL) and
 * removes the files. An atexit handler and a SIGTERM/SIGINT handler stop
 * whatever is still running (a failed ASSERT returns early), and the child
 * gets PR_SET_PDEATHSIG so it dies with the test even on a crash. To change
 * records, dnsm_restart() rewrites the file and restarts on the same port:
 * SIGHUP does not re-read txt-record lines from --conf-file.
 *
 * Single-threaded use (the test's main thread) only.
 */
#ifndef GRIT_TEST_PEERS_DNSMASQ_H
#define GRIT_TEST_PEERS_DNSMASQ_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef DNSM_BIN
#  define DNSM_BIN "dnsmasq"
#endif

typedef struct dnsm {
  pid_t pid;       /* 0 when not running */
  uint16_t port;   /* UDP and TCP on 127.0.0.1 */
  char dir[64];    /* mkdtemp directory, "" when removed */
  char conf[128];  /* dir/dnsmasq.conf */
  char log[128];   /* dir/dnsmasq.log: dnsmasq's stdout and stderr */
  char server[32]; /* "127.0.0.1:PORT", for GRIT_ARG_DNS_SERVER */
} dnsm;

#define DNSM_MAX 8
static dnsm *dnsm_live_[DNSM_MAX];

static inline uint64_t dnsm_now_ms_(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Async-signal-safe part of stopping: kill, reap, unlink. */
static inline void dnsm_kill_(dnsm *d, bool wait_bounded) {
  if (d->pid > 0) {
    kill(d->pid, SIGTERM);
    int st;
    bool reaped = false;
    for (int i = 0; wait_bounded && i < 200 && !reaped; i++) { /* 2 s */
      pid_t r = waitpid(d->pid, &st, WNOHANG);
      if (r == d->pid || (r < 0 && errno != EINTR))
        reaped = true;
      else
        usleep(10000);
    }
    if (!reaped) {
      kill(d->pid, SIGKILL);
      waitpid(d->pid, &st, 0);
    }
    d->pid = 0;
  }
}

static inline void dnsm_remove_files_(dnsm *d) {
  if (!d->dir[0])
    return;
  unlink(d->conf);
  unlink(d->log);
  rmdir(d->dir);
  d->dir[0] = '\0';
}

static void dnsm_cleanup_all_(void) {
  for (int i = 0; i < DNSM_MAX; i++)
    if (dnsm_live_[i]) {
      dnsm_kill_(dnsm_live_[i], true);
      dnsm_remove_files_(dnsm_live_[i]);
      dnsm_live_[i] = NULL;
    }
}

static void dnsm_on_signal_(int sig) {
  for (int i = 0; i < DNSM_MAX; i++)
    if (dnsm_live_[i]) {
      if (dnsm_live_[i]->pid > 0)
        kill(dnsm_live_[i]->pid, SIGKILL);
      dnsm_remove_files_(dnsm_live_[i]);
    }
  signal(sig, SIG_DFL);
  raise(sig);
}

static inline void dnsm_register_(dnsm *d) {
  static bool installed;
  if (!installed) {
    installed = true;
    atexit(dnsm_cleanup_all_);
    signal(SIGTERM, dnsm_on_signal_);
    signal(SIGINT, dnsm_on_signal_);
  }
  for (int i = 0; i < DNSM_MAX; i++)
    if (dnsm_live_[i] == d)
      return;
  for (int i = 0; i < DNSM_MAX; i++)
    if (!dnsm_live_[i]) {
      dnsm_live_[i] = d;
      return;
    }
}

static inline void dnsm_unregister_(dnsm *d) {
  for (int i = 0; i < DNSM_MAX; i++)
    if (dnsm_live_[i] == d)
      dnsm_live_[i] = NULL;
}

/* A port free for both UDP and TCP on 127.0.0.1 (racy, but retried). */
static inline uint16_t dnsm_free_port_(void) {
  for (int tries = 0; tries < 20; tries++) {
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    if (u < 0)
      return 0;
    if (bind(u, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(u, (struct sockaddr *)&a, &al) != 0) {
      close(u);
      continue;
    }
    int t = socket(AF_INET, SOCK_STREAM, 0);
    int ok = t >= 0 && bind(t, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (t >= 0)
      close(t);
    close(u);
    if (ok)
      return ntohs(a.sin_port);
  }
  return 0;
}

static inline int dnsm_write_conf_(dnsm *d, const char *records) {
  FILE *f = fopen(d->conf, "w");
  if (!f)
    return -1;
  fprintf(f, "local=/test/\n%s\n", records ? records : "");
  return fclose(f) == 0 ? 0 : -1;
}

/* One UDP query for "ready.test" A; any answer means dnsmasq serves. */
static inline bool dnsm_answers_(uint16_t port, int timeout_ms) {
  static const uint8_t q[] = {
      0x12, 0x34, 0x01, 0x00, 0, 1,   0,   0,   0,   0, 0, 0, 5, 'r',
      'e',  'a',  'd',  'y',  4, 't', 'e', 's', 't', 0, 0, 1, 0, 1};
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0)
    return false;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  if (sendto(s, q, sizeof(q), 0, (struct sockaddr *)&a, sizeof(a)) ==
      (ssize_t)sizeof(q)) {
    struct pollfd p = {.fd = s, .events = POLLIN};
    uint8_t buf[512];
    if (poll(&p, 1, timeout_ms) == 1 && recv(s, buf, sizeof(buf), 0) >= 12 &&
        buf[0] == 0x12 && buf[1] == 0x34)
      ok = true;
  }
  close(s);
  return ok;
}

/* Fork and exec dnsmasq on d->port; wait up to 3 s for it to answer.
 * Returns 0, or -1 if it exited or never answered (then it is stopped). */
static inline int dnsm_spawn_(dnsm *d) {
  char port_arg[32], conf_arg[160];
  snprintf(port_arg, sizeof(port_arg), "--port=%u", (unsigned)d->port);
  snprintf(conf_arg, sizeof(conf_arg), "--conf-file=%s", d->conf);
  fflush(NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(127);
    int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    /* --keep-in-foreground, not --no-daemon: in debug mode dnsmasq answers
     * TCP queries in its own process, so a resolver that keeps its TCP
     * connection open (c-ares, after a truncated TXT answer) stalls every
     * UDP query behind it until c-ares lets go. Forked TCP handlers keep
     * UDP answered. Logs go to stderr (the log file above). */
    execlp(DNSM_BIN, DNSM_BIN, "--keep-in-foreground", "--log-facility=-",
           "--user=root", "--no-resolv", "--no-hosts", port_arg,
           "--listen-address=127.0.0.1", "--bind-interfaces", conf_arg,
           "--pid-file=", "--cache-size=0", (char *)NULL);
    _exit(127);
  }
  d->pid = pid;
  uint64_t end = dnsm_now_ms_() + 3000;
  while (dnsm_now_ms_() < end) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      d->pid = 0;
      return -1;
    }
    if (dnsm_answers_(d->port, 50))
      return 0;
  }
  dnsm_kill_(d, true);
  return -1;
}

/* Start dnsmasq serving |records| (conf-file lines). Returns 0 or -1. */
static inline int dnsm_start(dnsm *d, const char *records) {
  memset(d, 0, sizeof(*d));
  snprintf(d->dir, sizeof(d->dir), "/tmp/grit-dnsm-XXXXXX");
  if (!mkdtemp(d->dir)) {
    d->dir[0] = '\0';
    return -1;
  }
  dnsm_register_(d);
  snprintf(d->conf, sizeof(d->conf), "%s/dnsmasq.conf", d->dir);
  snprintf(d->log, sizeof(d->log), "%s/dnsmasq.log", d->dir);
  if (dnsm_write_conf_(d, records) != 0)
    goto fail;
  for (int tries = 0; tries < 5; tries++) { /* the port may be taken */
    d->port = dnsm_free_port_();
    if (d->port && dnsm_spawn_(d) == 0) {
      snprintf(d->server, sizeof(d->server), "127.0.0.1:%u", (unsigned)d->port);
      return 0;
    }
  }
  fprintf(stderr, "dnsm: dnsmasq did not start; its log (%s):\n", d->log);
  {
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "cat %s >&2", d->log);
    if (system(cmd) != 0)
      fprintf(stderr, "dnsm: (no log)\n");
  }
fail:
  dnsm_remove_files_(d);
  dnsm_unregister_(d);
  return -1;
}

/* Replace the records: rewrite the file and restart on the same port. */
static inline int dnsm_restart(dnsm *d, const char *records) {
  dnsm_kill_(d, true);
  if (!d->dir[0] || dnsm_write_conf_(d, records) != 0)
    return -1;
  for (int tries = 0; tries < 20; tries++) {
    if (dnsm_spawn_(d) == 0)
      return 0;
    usleep(50000); /* the old socket may linger for a moment */
  }
  return -1;
}

/* Stop dnsmasq and remove its files. Idempotent. */
static inline void dnsm_stop(dnsm *d) {
  dnsm_kill_(d, true);
  dnsm_remove_files_(d);
  dnsm_unregister_(d);
}

/* Lines of |d|'s log (start it with log-queries) containing |needle|. */
static inline int dnsm_log_count(const dnsm *d, const char *needle) {
  FILE *f = fopen(d->log, "r");
  if (!f)
    return 0;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof(line), f))
    if (strstr(line, needle))
      n++;
  fclose(f);
  return n;
}

/* Wait until |needle| is on |n| lines of |d|'s log; returns the monotonic
 * ms when it was seen, or 0 after |timeout_ms|. */
static inline uint64_t dnsm_wait_log(const dnsm *d, const char *needle, int n,
                                     int timeout_ms) {
  uint64_t end = dnsm_now_ms_() + (uint64_t)timeout_ms;
  do {
    if (dnsm_log_count(d, needle) >= n)
      return dnsm_now_ms_();
    usleep(5000);
  } while (dnsm_now_ms_() < end);
  return 0;
}

#endif
