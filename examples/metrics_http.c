/*
 * Serve grit's metrics to Prometheus (SPEC OB-01, OP-03): a channel to
 * TARGET makes one unary call of METHOD (an empty request) every second,
 * with W3C trace context on, and grit's admin endpoint answers
 * http://127.0.0.1:PORT/metrics (the whole process's Prometheus text) and
 * /channelz (JSON). The endpoint serves every scraper by events, so an
 * idle connection never blocks another.
 *
 *   metrics_http TARGET METHOD [PORT]      (PORT default 9464)
 *   curl -s http://127.0.0.1:9464/metrics
 *
 * Only the public API; stops on SIGINT or SIGTERM.
 */
#include <grit/grit.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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
  /* The method this program calls is its own: named in its metrics. */
  grit_metrics_register_method(argv[2]);
  grit_admin *admin = NULL;
  grit_error_detail d = {0};
  if (grit_admin_start("127.0.0.1", (uint16_t)port, 0, &d, &admin) != GRIT_OK) {
    fprintf(stderr, "cannot serve 127.0.0.1:%d: %s\n", port, d.reason);
    grit_channel_destroy(ch);
    return 1;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  printf("serving http://127.0.0.1:%u/metrics\n",
         (unsigned)grit_admin_port(admin));
  fflush(stdout);
  caller c = {.ch = ch, .method = argv[2]};
  pthread_t th;
  pthread_create(&th, NULL, call_loop, &c);
  while (!stop)
    usleep(100000);
  pthread_join(th, NULL);
  grit_admin_stop(admin);
  grit_channel_destroy(ch);
  grit_default_runtime_shutdown();
  return 0;
}
