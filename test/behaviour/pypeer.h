/*
 * A Python gRPC peer for behaviour tests: start a script from test/peers/
 * under /usr/bin/python3 (Debian's grpcio), read its "PORT n" line within
 * 20 s, and stop it with SIGTERM. The script exits when its stdin closes,
 * so a crashed test leaves no server behind.
 */
#ifndef GRIT_TEST_PYPEER_H
#define GRIT_TEST_PYPEER_H

#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PYPEER_PYTHON "/usr/bin/python3"

typedef struct pypeer {
  pid_t pid;
  int stdin_fd;
  uint16_t port;
} pypeer;

static inline uint64_t pypeer_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Whether Debian's python has grpc (else the test exits 77, skipped). */
static inline bool pypeer_has_grpc(void) {
  if (access(PYPEER_PYTHON, X_OK) != 0)
    return false;
  pid_t pid = fork();
  if (pid == 0) {
    execl(PYPEER_PYTHON, PYPEER_PYTHON, "-c", "import grpc", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid)
    return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* test/peers/|name|, found from this header's path as compiled (absolute,
 * or relative to the build root two levels above the test executable). */
static inline void pypeer_script_path(const char *name, char *out, size_t len) {
  char src[PATH_MAX];
  snprintf(src, sizeof(src), "%s", __FILE__);
  char *dir = dirname(src);
  if (dir[0] == '/') {
    snprintf(out, len, "%s/../peers/%s", dir, name);
    return;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  exe[n > 0 ? n : 0] = '\0';
  snprintf(out, len, "%s/../../%s/../peers/%s", dirname(exe), dir, name);
}

/* Read "PORT n" from |fd| within 20 s; 0 if none came. */
static inline uint16_t pypeer_read_port(int fd, char *buf, size_t len,
                                        size_t *got) {
  uint64_t end = pypeer_now_ms() + 20000;
  *got = 0;
  while (*got < len - 1 && pypeer_now_ms() < end) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 200) <= 0)
      continue;
    ssize_t n = read(fd, buf + *got, len - 1 - *got);
    if (n <= 0)
      break;
    *got += (size_t)n;
    buf[*got] = '\0';
    unsigned port;
    if (strchr(buf, '\n') && sscanf(buf, "PORT %u", &port) == 1)
      return (uint16_t)port;
  }
  return 0;
}

/* Start test/peers/|script| with the NULL-terminated extra arguments
 * |args| (NULL: none). */
static inline bool pypeer_start_args(pypeer *p, const char *script,
                                     const char *const *args) {
  char path[PATH_MAX * 2];
  pypeer_script_path(script, path, sizeof(path));
  int in[2], out[2];
  p->pid = -1;
  p->stdin_fd = -1;
  p->port = 0;
  if (pipe(in) != 0)
    return false;
  if (pipe(out) != 0) {
    close(in[0]);
    close(in[1]);
    return false;
  }
  p->pid = fork();
  if (p->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    const char *argv[16] = {PYPEER_PYTHON, path};
    for (int i = 0; args && args[i] && i < 13; i++)
      argv[i + 2] = args[i];
    execv(PYPEER_PYTHON, (char *const *)argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  p->stdin_fd = in[1];
  char buf[256];
  size_t got = 0;
  if (p->pid > 0)
    p->port = pypeer_read_port(out[0], buf, sizeof(buf), &got);
  close(out[0]);
  if (!p->port)
    fprintf(stderr, "%s gave no port: %.*s\n", path, (int)got, buf);
  return p->port != 0;
}

static inline bool pypeer_start(pypeer *p, const char *script) {
  return pypeer_start_args(p, script, NULL);
}

static inline void pypeer_stop(pypeer *p) {
  if (p->stdin_fd >= 0)
    close(p->stdin_fd);
  p->stdin_fd = -1;
  if (p->pid > 0) {
    kill(p->pid, SIGTERM);
    waitpid(p->pid, NULL, 0);
  }
  p->pid = -1;
}

#endif
