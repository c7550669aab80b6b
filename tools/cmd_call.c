/* grit call: N unary calls, C in flight, with per-call output (plain or
 * JSON) and a summary of codes, peers, qps and latency percentiles. */
#include "tools.h"

#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PEERS 32

typedef struct call_run call_run;

/* One call's context: its start time, matched exactly to its completion. */
typedef struct call_slot {
  call_run *r;
  uint64_t start_us;
} call_slot;

struct call_run {
  grit_channel *ch;
  const char *method;
  uint8_t *req;
  size_t req_len;
  grit_call_opts opts;
  uint64_t count, started, finished;
  call_slot *slots;
  uint64_t *lat_us;
  uint64_t codes[GRIT_STATUS_COUNT];
  char peers[MAX_PEERS][128];
  uint64_t peer_calls[MAX_PEERS];
  bool json;
  bool verbose;
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

static void print_json_string(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static void print_hex(FILE *f, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%02x", p[i]);
}

static void print_json_result(call_run *r, const grit_status *st,
                              const uint8_t *resp, size_t len,
                              const grit_call_info *info, uint64_t lat) {
  FILE *f = stdout;
  fprintf(f, "{\"code\":%d,\"code_name\":\"%s\",\"message\":", st->code,
          grit_status_code_name(st->code));
  print_json_string(f, st->message, strlen(st->message));
  fprintf(f, ",\"latency_us\":%" PRIu64 ",\"peer\":", lat);
  print_json_string(f, info->peer, strlen(info->peer));
  fprintf(f, ",\"attempts\":%u,\"transparent_retries\":%u,\"response\":\"",
          info->attempts, info->transparent_retries);
  print_hex(f, resp, len);
  fprintf(f, "\",\"trailers\":{");
  for (size_t i = 0; i < grit_metadata_count(st->trailers); i++) {
    const char *k;
    const uint8_t *v;
    size_t vl;
    grit_metadata_get(st->trailers, i, &k, &v, &vl);
    fprintf(f, "%s", i ? "," : "");
    print_json_string(f, k, strlen(k));
    fputc(':', f);
    print_json_string(f, (const char *)v, vl);
  }
  fprintf(f, "}}\n");
}

static void print_plain_result(const grit_status *st, const uint8_t *resp,
                               size_t len, const grit_call_info *info,
                               uint64_t lat) {
  printf("status: %s (%d)%s%s\n", grit_status_code_name(st->code), st->code,
         st->message[0] ? " " : "", st->message);
  printf("peer: %s\nlatency: %" PRIu64 " us\nresponse (%zu bytes): ",
         info->peer[0] ? info->peer : "-", lat, len);
  print_hex(stdout, resp, len);
  printf("\n");
  for (size_t i = 0; i < grit_metadata_count(st->trailers); i++) {
    const char *k;
    const uint8_t *v;
    size_t vl;
    grit_metadata_get(st->trailers, i, &k, &v, &vl);
    printf("trailer %s: %.*s\n", k, (int)vl, (const char *)v);
  }
}

static void count_peer(call_run *r, const char *peer) {
  for (int i = 0; i < MAX_PEERS; i++) {
    if (r->peers[i][0] == '\0')
      snprintf(r->peers[i], sizeof(r->peers[i]), "%s", peer);
    if (strcmp(r->peers[i], peer) == 0) {
      r->peer_calls[i]++;
      return;
    }
  }
}

static void start_next(call_run *r);

static void on_done(const grit_status *st, const uint8_t *resp, size_t len,
                    const grit_call_info *info, void *ud) {
  call_slot *slot = ud;
  call_run *r = slot->r;
  uint64_t now = tool_now_us();
  pthread_mutex_lock(&r->mu);
  uint64_t idx = r->finished++;
  r->lat_us[idx] = now - slot->start_us;
  if (st->code >= 0 && st->code < GRIT_STATUS_COUNT)
    r->codes[st->code]++;
  if (info->peer[0])
    count_peer(r, info->peer);
  if (r->json)
    print_json_result(r, st, resp, len, info, r->lat_us[idx]);
  else if (r->verbose)
    print_plain_result(st, resp, len, info, r->lat_us[idx]);
  bool all = r->finished == r->count;
  if (all)
    pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
  if (!all)
    start_next(r);
}

/* Start one more call if any are left. */
static void start_next(call_run *r) {
  pthread_mutex_lock(&r->mu);
  if (r->started == r->count) {
    pthread_mutex_unlock(&r->mu);
    return;
  }
  call_slot *slot = &r->slots[r->started++];
  slot->r = r;
  slot->start_us = tool_now_us();
  pthread_mutex_unlock(&r->mu);
  grit_err rv = grit_unary_call_async(r->ch, r->method, r->req, r->req_len,
                                      &r->opts, on_done, slot);
  if (rv != GRIT_OK) {
    fprintf(stderr, "grit: cannot start call: %s\n", grit_strerror(rv));
    exit(1);
  }
}

static void print_summary(call_run *r, uint64_t elapsed_us) {
  tool_pcts p = tool_percentiles(r->lat_us, (size_t)r->count);
  double qps = elapsed_us ? (double)r->count * 1e6 / (double)elapsed_us : 0;
  printf("calls=%" PRIu64 " ok=%" PRIu64, r->count, r->codes[0]);
  printf(" failed={");
  bool first = true;
  for (int c = 1; c < GRIT_STATUS_COUNT; c++) {
    if (r->codes[c]) {
      printf("%s%s:%" PRIu64, first ? "" : ",",
             grit_status_code_name((grit_status_code)c), r->codes[c]);
      first = false;
    }
  }
  printf("} qps=%.0f p50_us=%" PRIu64 " p90_us=%" PRIu64 " p99_us=%" PRIu64
         " p999_us=%" PRIu64 " max_us=%" PRIu64 "\n",
         qps, p.p50, p.p90, p.p99, p.p999, p.max);
  printf("peers:");
  for (int i = 0; i < MAX_PEERS && r->peers[i][0]; i++)
    printf(" %s=%" PRIu64, r->peers[i], r->peer_calls[i]);
  printf("\n");
}

static void call_usage(FILE *f) {
  fprintf(f, "usage: grit call [options] TARGET /pkg.Service/Method\n"
             "  --data HEX | --data @FILE   request message (default empty)\n"
             "  --metadata k:v              call metadata (repeatable)\n"
             "  --deadline MS               per-call deadline\n"
             "  --service-config JSON|@FILE default service config\n"
             "  --tls                       use TLS\n"
             "  --ca FILE                   root certificates (PEM)\n"
             "  --authority NAME            :authority and TLS name\n"
             "  --count N --concurrency C   N calls, C in flight\n"
             "  --wait-for-ready            queue until the channel is READY\n"
             "  --json                      one JSON object per call\n");
}

typedef struct call_flags {
  const char *data, *service_config, *ca, *authority;
  grit_metadata *md;
  uint64_t deadline_ms, count, concurrency;
  bool tls, json, wfr;
} call_flags;

static int parse_flags(int argc, char **argv, call_flags *fl) {
  static const struct option opts[] = {
      {"data", required_argument, 0, 'd'},
      {"metadata", required_argument, 0, 'm'},
      {"deadline", required_argument, 0, 't'},
      {"service-config", required_argument, 0, 's'},
      {"tls", no_argument, 0, 'T'},
      {"ca", required_argument, 0, 'c'},
      {"authority", required_argument, 0, 'a'},
      {"count", required_argument, 0, 'n'},
      {"concurrency", required_argument, 0, 'C'},
      {"wait-for-ready", no_argument, 0, 'w'},
      {"json", no_argument, 0, 'j'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0},
  };
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
    case 'd':
      fl->data = optarg;
      break;
    case 't':
      fl->deadline_ms = strtoull(optarg, NULL, 10);
      break;
    case 's':
      fl->service_config = optarg;
      break;
    case 'T':
      fl->tls = true;
      break;
    case 'c':
      fl->ca = optarg;
      break;
    case 'a':
      fl->authority = optarg;
      break;
    case 'n':
      fl->count = strtoull(optarg, NULL, 10);
      break;
    case 'C':
      fl->concurrency = strtoull(optarg, NULL, 10);
      break;
    case 'w':
      fl->wfr = true;
      break;
    case 'j':
      fl->json = true;
      break;
    case 'm': {
      const char *colon = strchr(optarg, ':');
      if (!colon) {
        fprintf(stderr, "grit: --metadata wants k:v, got '%s'\n", optarg);
        return 2;
      }
      char *k = strndup(optarg, (size_t)(colon - optarg));
      grit_err rv = grit_metadata_add(fl->md, k, colon + 1, strlen(colon + 1));
      free(k);
      if (rv != GRIT_OK) {
        fprintf(stderr, "grit: bad metadata '%s': %s\n", optarg,
                grit_strerror(rv));
        return 2;
      }
      break;
    }
    case 'h':
      call_usage(stdout);
      return 1;
    default:
      call_usage(stderr);
      return 2;
    }
  }
  if (argc - optind != 2) {
    call_usage(stderr);
    return 2;
  }
  return 0;
}

static grit_channel_args *make_args(const call_flags *fl) {
  grit_channel_args *a;
  if (grit_channel_args_create(&a) != GRIT_OK)
    return NULL;
  if (fl->service_config) {
    char *sc = tool_read_text_or_file(fl->service_config, NULL);
    if (!sc) {
      grit_channel_args_destroy(a);
      return NULL;
    }
    grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, sc);
    free(sc);
  }
  if (fl->tls)
    grit_channel_args_set_int(a, GRIT_ARG_TLS, 1);
  if (fl->ca)
    grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS_FILE, fl->ca);
  if (fl->authority) {
    grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_AUTHORITY, fl->authority);
    grit_channel_args_set_string(a, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE,
                                 fl->authority);
  }
  return a;
}

static int run_calls(call_run *r, uint64_t concurrency, bool summary) {
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->slots = calloc(r->count, sizeof(call_slot));
  r->lat_us = calloc(r->count, sizeof(uint64_t));
  uint64_t t0 = tool_now_us();
  for (uint64_t i = 0; i < concurrency && i < r->count; i++)
    start_next(r);
  pthread_mutex_lock(&r->mu);
  while (r->finished < r->count)
    pthread_cond_wait(&r->cv, &r->mu);
  pthread_mutex_unlock(&r->mu);
  uint64_t elapsed = tool_now_us() - t0;
  if (summary)
    print_summary(r, elapsed);
  int rc = r->codes[0] == r->count ? 0 : 1;
  free(r->slots);
  free(r->lat_us);
  return rc;
}

int cmd_call(int argc, char **argv) {
  call_flags fl = {.count = 1, .concurrency = 1};
  grit_metadata_create(&fl.md);
  int rc = parse_flags(argc, argv, &fl);
  if (rc != 0) {
    grit_metadata_destroy(fl.md);
    return rc == 1 ? 0 : rc;
  }
  call_run r = {.method = argv[optind + 1],
                .count = fl.count,
                .json = fl.json,
                .verbose = fl.count == 1};
  if (fl.data) {
    if (fl.data[0] == '@') {
      char *raw = tool_read_text_or_file(fl.data, &r.req_len);
      r.req = (uint8_t *)raw;
    } else if (!tool_parse_hex(fl.data, &r.req, &r.req_len)) {
      fprintf(stderr, "grit: --data is not hex: %s\n", fl.data);
      return 2;
    }
    if (!r.req)
      return 2;
  }
  grit_channel_args *a = make_args(&fl);
  grit_error_detail d = {0};
  grit_err rv = a ? grit_channel_create(NULL, argv[optind], a, &d, &r.ch)
                  : GRIT_ERR_INVALID_ARG;
  grit_channel_args_destroy(a);
  if (rv != GRIT_OK) {
    fprintf(stderr, "grit: cannot create channel to %s: %s%s%s%s%s\n",
            argv[optind], grit_strerror(rv), d.reason[0] ? ": " : "", d.path,
            d.path[0] ? ": " : "", d.reason);
    return 2;
  }
  r.opts = (grit_call_opts){.version = GRIT_CALL_OPTS_VERSION,
                            .timeout_ms = fl.deadline_ms,
                            .metadata = fl.md};
  if (fl.wfr) {
    r.opts.wait_for_ready = 1;
    r.opts.wait_for_ready_set = true;
  }
  if (r.count == 0)
    r.count = 1;
  rc = run_calls(&r, fl.concurrency ? fl.concurrency : 1, r.count > 1);
  grit_channel_destroy(r.ch);
  grit_metadata_destroy(fl.md);
  free(r.req);
  return rc;
}
