/* See cp.h. */
#include "cp.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct xcp {
  pid_t pid;
  int in_fd;
  FILE *out;
  int port;
  pthread_t reader;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char **lines;
  int n, cap;
  bool eof;
};

static void *reader(void *arg) {
  xcp *c = arg;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, c->out)) > 0) {
    if (line[len - 1] == '\n')
      line[len - 1] = '\0';
    pthread_mutex_lock(&c->mu);
    if (c->port == 0 && strncmp(line, "PORT ", 5) == 0)
      c->port = atoi(line + 5);
    if (c->n == c->cap) {
      c->cap = c->cap ? 2 * c->cap : 64;
      c->lines = realloc(c->lines, (size_t)c->cap * sizeof(char *));
      if (!c->lines)
        abort();
    }
    c->lines[c->n++] = strdup(line);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
  }
  free(line);
  pthread_mutex_lock(&c->mu);
  c->eof = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

xcp *xcp_start(const char *scenario, int port) {
  const char *dir = getenv("XDS_CP_DIR");
  if (!dir)
    return NULL;
  char script[1024], portbuf[16];
  snprintf(script, sizeof(script), "%s/control_plane.js", dir);
  snprintf(portbuf, sizeof(portbuf), "%d", port);
  char *const argv[] = {(char *)"node",   script,  (char *)scenario,
                        (char *)"--port", portbuf, NULL};
  return xcp_spawn(argv);
}

xcp *xcp_spawn(char *const argv[]) {
  return xcp_spawn_until(argv, "PORT ");
}

xcp *xcp_spawn_until(char *const argv[], const char *ready) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0)
    return NULL;
  pid_t pid = fork();
  if (pid < 0)
    return NULL;
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  xcp *c = calloc(1, sizeof(*c));
  if (!c)
    abort();
  c->pid = pid;
  c->in_fd = in[1];
  c->out = fdopen(out[0], "r");
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  pthread_create(&c->reader, NULL, reader, c);
  /* Wait for |ready| (node and the .proto files take a few seconds). */
  if (xcp_wait(c, -1, 60000, ready, (char *)NULL) < 0) {
    xcp_stop(c);
    return NULL;
  }
  return c;
}

int xcp_port(const xcp *c) {
  return c->port;
}

void xcp_cmd(xcp *c, const char *line) {
  char buf[256];
  int n = snprintf(buf, sizeof(buf), "%s\n", line);
  if (write(c->in_fd, buf, (size_t)n) != n)
    fprintf(stderr, "xcp: write failed\n");
}

static bool matches(const char *line, va_list ap) {
  const char *s;
  while ((s = va_arg(ap, const char *)))
    if (!strstr(line, s))
      return false;
  return true;
}

int xcp_wait(xcp *c, int from, int ms, ...) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += ms / 1000;
  dl.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&c->mu);
  int i = from + 1;
  for (;;) {
    for (; i < c->n; i++) {
      va_list ap;
      va_start(ap, ms);
      bool m = matches(c->lines[i], ap);
      va_end(ap);
      if (m) {
        pthread_mutex_unlock(&c->mu);
        return i;
      }
    }
    if (c->eof || pthread_cond_timedwait(&c->cv, &c->mu, &dl) != 0)
      break;
  }
  pthread_mutex_unlock(&c->mu);
  return -1;
}

const char *xcp_line(xcp *c, int i) {
  pthread_mutex_lock(&c->mu);
  const char *s = i >= 0 && i < c->n ? c->lines[i] : NULL;
  pthread_mutex_unlock(&c->mu);
  return s;
}

int xcp_nlines(xcp *c) {
  pthread_mutex_lock(&c->mu);
  int n = c->n;
  pthread_mutex_unlock(&c->mu);
  return n;
}

void xcp_stop(xcp *c) {
  close(c->in_fd);
  int st;
  for (int i = 0; i < 100; i++) {
    if (waitpid(c->pid, &st, WNOHANG) == c->pid)
      goto reaped;
    usleep(50000);
  }
  kill(c->pid, SIGKILL);
  waitpid(c->pid, &st, 0);
reaped:
  pthread_join(c->reader, NULL);
  fclose(c->out);
  for (int i = 0; i < c->n; i++)
    free(c->lines[i]);
  free(c->lines);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
