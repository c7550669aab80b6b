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

#include "xdsclient/xdsclient.h"

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

/* ---- What the xds test programs share ---- */

int xcp_failures;

void xcp_dump_if_failed(xcp *c) {
  if (!xcp_failures || !c)
    return;
  for (int i = 0; i < xcp_nlines(c); i++)
    fprintf(stderr, "cp: %s\n", xcp_line(c, i));
}

int xcp_exit_status(void) {
  if (xcp_failures) {
    fprintf(stderr, "%d failures\n", xcp_failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}

uint64_t xcp_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

xcp *xcp_start_scenario(const char *name, int port) {
  const char *src = getenv("XDS_SCENARIOS");
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", src ? src : ".", name);
  xcp *c = xcp_start(path, port);
  if (!c)
    fprintf(stderr, "cannot start the control plane\n");
  return c;
}

xcp *xcp_backends_start(void) {
  const char *src = getenv("XDS_SCENARIOS");
  char script[1024];
  snprintf(script, sizeof(script), "%s/../peers/health_server.py",
           src ? src : ".");
  char *const argv[] = {(char *)"/usr/bin/python3", script, NULL};
  xcp *backends = xcp_spawn(argv);
  if (!backends)
    fprintf(stderr, "cannot start the grpcio backends\n");
  return backends;
}

int xcp_backends_ports(xcp *backends, grit_channel **ctl) {
  char target[64];
  snprintf(target, sizeof(target), "ipv4:127.0.0.1:%d", xcp_port(backends));
  *ctl = NULL;
  if (grit_channel_create(NULL, target, NULL, NULL, ctl) != GRIT_OK) {
    fprintf(stderr, "cannot make a channel to the backends (%s)\n", target);
    return 0;
  }
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = 10000,
                      .wait_for_ready = GRIT_WFR_ON};
  grit_status st = {0};
  grit_bytes resp = {0};
  char ports[64] = "";
  if (grit_unary_call(*ctl, "/ctl.Ctl/Ports", "", 0, &o, &resp, &st, NULL) ==
      GRIT_OK)
    snprintf(ports, sizeof(ports), "%.*s", (int)resp.len,
             resp.data ? (const char *)resp.data : "");
  grit_bytes_free(&resp);
  grit_status_free(&st);
  int p[3];
  int n = sscanf(ports, "%d %d %d", &p[0], &p[1], &p[2]);
  if (n != 3) {
    fprintf(stderr, "no backend ports (%s)\n", ports);
    return n < 0 ? 0 : n;
  }
  for (int i = 0; i < 3; i++) {
    char name[4] = {'B', (char)('0' + i), 0}, buf[16];
    snprintf(buf, sizeof(buf), "%d", p[i]);
    setenv(name, buf, 1);
  }
  return n;
}

void xcp_bootstrap_json(char *out, size_t size, const char *node_id, int port) {
  snprintf(out, size,
           "{\"xds_servers\": [{\"server_uri\": \"127.0.0.1:%d\", "
           "\"channel_creds\": [{\"type\": \"insecure\"}]}], "
           "\"node\": {\"id\": \"%s\"}}",
           port, node_id);
}

grit_channel *xcp_xds_channel(const char *node_id, int port) {
  char boot[512];
  xcp_bootstrap_json(boot, sizeof(boot), node_id, port);
  setenv("GRPC_XDS_BOOTSTRAP_CONFIG", boot, 1);
  unsetenv("GRPC_XDS_BOOTSTRAP");
  CHECK(grit_xds_resolver_register() == GRIT_OK);
  grit_channel *ch = NULL;
  CHECK(grit_channel_create(NULL, "xds:///svc", NULL, NULL, &ch) == GRIT_OK);
  return ch;
}
