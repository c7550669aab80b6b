/*
 * A client interceptor that logs every call of a channel with its method,
 * how many messages went each way, its duration and its status (SPEC
 * IC-01; docs/credentials.md), and adds an "x-request-id" header to each.
 *
 *   interceptor_log TARGET
 *
 * Makes a unary EmptyCall, a UnaryCall and a call to a method the interop
 * server does not have, and prints one log line per call on stdout, e.g.
 *   /grpc.testing.TestService/EmptyCall id=1 sent=1 recv=1 0.8 ms OK
 * Only the public API.
 */
#include <grit/grit.h>

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct call_log {
  char method[128];
  unsigned long id;
  struct timespec start;
  unsigned sent, received;
} call_log;

static atomic_ulong next_id = 1;

static grit_status_code log_start(void *user_data,
                                  const grit_interceptor_call_info *info,
                                  grit_metadata *md, void **call_data,
                                  const char **message) {
  (void)user_data;
  call_log *l = calloc(1, sizeof(*l));
  if (!l) {
    *message = "interceptor_log: out of memory";
    return GRIT_STATUS_RESOURCE_EXHAUSTED;
  }
  snprintf(l->method, sizeof(l->method), "%s", info->method);
  l->id = atomic_fetch_add(&next_id, 1);
  clock_gettime(CLOCK_MONOTONIC, &l->start);
  char id[32];
  snprintf(id, sizeof(id), "%lu", l->id);
  grit_metadata_remove(md, "x-request-id");
  grit_metadata_add(md, "x-request-id", id, strlen(id));
  *call_data = l;
  return GRIT_STATUS_OK;
}

static void log_send(void *user_data, void *call_data, const uint8_t *data,
                     size_t len) {
  (void)user_data, (void)data, (void)len;
  ((call_log *)call_data)->sent++; /* the sending thread; one at a time */
}

static void log_message(void *user_data, void *call_data, const uint8_t *data,
                        size_t len) {
  (void)user_data, (void)data, (void)len;
  ((call_log *)call_data)->received++; /* the I/O thread */
}

static void log_done(void *user_data, void *call_data, const grit_status *st) {
  (void)user_data;
  call_log *l = call_data;
  struct timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  double ms = (double)(end.tv_sec - l->start.tv_sec) * 1e3 +
              (double)(end.tv_nsec - l->start.tv_nsec) / 1e6;
  printf("%s id=%lu sent=%u recv=%u %.1f ms %s\n", l->method, l->id, l->sent,
         l->received, ms, grit_status_code_name(st->code));
  fflush(stdout);
  free(l);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: interceptor_log TARGET\n");
    return 2;
  }
  static const grit_interceptor_ops ops = {
      .version = GRIT_INTERCEPTOR_OPS_VERSION,
      .on_start = log_start,
      .on_send = log_send,
      .on_message = log_message,
      .on_done = log_done,
  };
  grit_interceptor *ic = NULL;
  grit_channel_args *args = NULL;
  grit_channel *ch = NULL;
  grit_error_detail detail = {0};
  int failed = 1;
  if (grit_interceptor_create(&ops, NULL, &ic) != GRIT_OK ||
      grit_channel_args_create(&args) != GRIT_OK ||
      grit_channel_args_add_interceptor(args, ic) != GRIT_OK)
    goto done;
  grit_err rv = grit_channel_create(NULL, argv[1], args, &detail, &ch);
  if (rv != GRIT_OK) {
    fprintf(stderr, "%s: %s %s\n", argv[1], grit_strerror(rv), detail.reason);
    goto done;
  }
  static const struct {
    const char *method;
    grit_status_code want;
  } calls[] = {
      {"/grpc.testing.TestService/EmptyCall", GRIT_STATUS_OK},
      {"/grpc.testing.TestService/UnaryCall", GRIT_STATUS_OK},
      {"/grpc.testing.TestService/NoSuchMethod", GRIT_STATUS_UNIMPLEMENTED},
  };
  static const unsigned char req[] = {0x10, 0x03}; /* response_size = 3 */
  failed = 0;
  for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
    grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                           .timeout_ms = 5000};
    grit_status st = {0};
    grit_bytes resp = {0};
    size_t len = strstr(calls[i].method, "UnaryCall") ? sizeof(req) : 0;
    grit_unary_call(ch, calls[i].method, req, len, &opts, &resp, &st, NULL);
    if (st.code != calls[i].want) {
      fprintf(stderr, "%s: %s (%s)\n", calls[i].method,
              grit_status_code_name(st.code), st.message);
      failed = 1;
    }
    grit_bytes_free(&resp);
    grit_status_free(&st);
  }
done:
  grit_channel_destroy(ch);
  grit_channel_args_destroy(args);
  grit_interceptor_unref(ic);
  grit_default_runtime_shutdown();
  return failed;
}
