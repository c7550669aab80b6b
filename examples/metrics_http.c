/*
 * Serve grit's metrics to Prometheus (SPEC OB-01): a channel to TARGET
 * makes one unary call of METHOD (an empty request) every second, with
 * W3C trace context on, and http://127.0.0.1:PORT/metrics answers with
 * grit_metrics_write_prometheus for the whole process.
 *
 *   metrics_http TARGET METHOD [PORT]      (PORT default 9464)
 *   curl -s http://127.0.0.1:9464/metrics
 *
 * Only the public API; stops on SIGINT or SIGTERM.
 */
#include <grit/grit.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

typedef struct caller {
  grit_channel *ch;
  const char *method;
} caller;

static void *call_loop(void *arg) {
  caller *c = arg;
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 2000};
  while (!stop) {
    grit_status st = {0};
    grit_unary_call(c->ch, c->method, "", 0, &o, NULL, &st, NULL);
    grit_status_free(&st);
    for (int i = 0; i < 10 && !stop; i++)
      usleep(100000);
  }
  return NULL;
}

/* Answer one HTTP/1.1 request: GET /metrics, else 404. */
static void serve(int fd) {
  char req[2048];
  ssize_t n = recv(fd, req, sizeof(req) - 1, 0);
  if (n <= 0)
    return;
  req[n] = '\0';
  grit_bytes body = {0};
  const char *status = "404 Not Found";
  if (strncmp(req, "GET /metrics ", 13) == 0 &&
      grit_metrics_write_prometheus(NULL, &body) == GRIT_OK)
    status = "200 OK";
  char head[256];
  int h = snprintf(head, sizeof(head),
                   "HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4; "
                   "charset=utf-8\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n",
                   status, body.len);
  if (send(fd, head, (size_t)h, MSG_NOSIGNAL) == h && body.len)
    send(fd, body.data, body.len, MSG_NOSIGNAL);
  grit_bytes_free(&body);
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s TARGET METHOD [PORT]\n", argv[0]);
    return 2;
  }
  int port = argc == 4 ? atoi(argv[3]) : 9464;
  grit_channel_args *a = NULL;
  grit_channel *ch = NULL;
  if (grit_channel_args_create(&a) != GRIT_OK ||
      grit_channel_args_set_int(a, GRIT_ARG_TRACE_CONTEXT, 1) != GRIT_OK ||
      grit_channel_create(NULL, argv[1], a, NULL, &ch) != GRIT_OK) {
    fprintf(stderr, "cannot create a channel to %s\n", argv[1]);
    grit_channel_args_destroy(a);
    return 1;
  }
  grit_channel_args_destroy(a);
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
      listen(ls, 8) != 0) {
    perror("listen");
    grit_channel_destroy(ch);
    return 1;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  printf("serving http://127.0.0.1:%d/metrics\n", port);
  fflush(stdout);
  caller c = {.ch = ch, .method = argv[2]};
  pthread_t th;
  pthread_create(&th, NULL, call_loop, &c);
  while (!stop) {
    struct pollfd p = {.fd = ls, .events = POLLIN};
    if (poll(&p, 1, 200) == 1) {
      int fd = accept(ls, NULL, NULL);
      if (fd >= 0) {
        serve(fd);
        close(fd);
      }
    }
  }
  pthread_join(th, NULL);
  close(ls);
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown();
  return 0;
}
