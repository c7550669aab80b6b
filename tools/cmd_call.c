/* grit call: N unary calls, C in flight, with per-call output (plain or
 * JSON) and a summary of codes, peers, qps and latency percentiles. With
 * --attempts, each call's attempt timeline from the channel's observer
 * (SPEC MX-03), grouped by call id. */
#include "tools.h"

#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PEERS 32
#define MAX_CALL_ATTEMPTS 64 /* records kept per call for its timeline */

/* An attempt record, copied out of the observer callback. */
typedef struct att_rec {
  uint64_t call_id;
  uint32_t attempt;
  grit_attempt_kind kind;
  char peer[64];
  uint64_t start_us, end_us;
  grit_status_code code;
  char message[128];
  uint64_t backoff_ms;
  bool pushback;
  grit_attempt_reason reason;
} att_rec;

/* Records of calls still running: the observer adds (I/O thread), the
 * call's completion takes its own out. */
typedef struct att_store {
  pthread_mutex_t mu;
  att_rec *v;
  size_t n, cap;
} att_store;

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
  bool attempts; /* --attempts: print each call's timeline */
  att_store store;
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

/* Length of the well-formed UTF-8 sequence at |s| (|n| bytes left), or 0:
 * no overlong forms, surrogates or code points past U+10FFFF (RFC 3629
 * §4). */
static size_t utf8_len(const unsigned char *s, size_t n) {
  size_t len;
  uint32_t cp;
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    len = 2;
    cp = s[0] & 0x1f;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    len = 3;
    cp = s[0] & 0x0f;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    len = 4;
    cp = s[0] & 0x07;
  } else {
    return 0;
  }
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((len == 3 && cp < 0x800) || (cp >= 0xd800 && cp <= 0xdfff) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return len;
}

/* A JSON string (RFC 8259 §7): UTF-8 text passes through, control
 * characters are escaped and a byte that is not UTF-8 becomes U+FFFD. */
static void print_json_string(FILE *f, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  fputc('"', f);
  for (size_t i = 0; i < n;) {
    size_t len = utf8_len(u + i, n - i);
    if (u[i] == '"' || u[i] == '\\')
      fprintf(f, "\\%c", u[i]);
    else if (u[i] < 0x20 || u[i] == 0x7f)
      fprintf(f, "\\u%04x", u[i]);
    else if (len == 0)
      fputs("\\ufffd", f);
    else
      fwrite(u + i, 1, len, f);
    i += len ? len : 1;
  }
  fputc('"', f);
}

/* "-bin" metadata carries bytes; gRPC shows them in base64 (SPEC HS-06). */
static bool is_bin_key(const char *k) {
  size_t n = strlen(k);
  return n >= 4 && strcmp(k + n - 4, "-bin") == 0;
}

static void print_hex(FILE *f, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%02x", p[i]);
}

/* ---- attempt timelines (--attempts) ---- */

static void on_attempt(const grit_attempt_record *rec, void *ud) {
  att_store *s = ud;
  pthread_mutex_lock(&s->mu);
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    att_rec *v = realloc(s->v, cap * sizeof(*v));
    if (!v) {
      pthread_mutex_unlock(&s->mu);
      return;
    }
    s->v = v;
    s->cap = cap;
  }
  att_rec *a = &s->v[s->n++];
  *a = (att_rec){.call_id = rec->call_id,
                 .attempt = rec->attempt,
                 .kind = rec->kind,
                 .start_us = rec->start_us,
                 .end_us = rec->end_us,
                 .code = rec->code,
                 .backoff_ms = rec->backoff_ms,
                 .pushback = rec->pushback,
                 .reason = rec->reason};
  snprintf(a->peer, sizeof(a->peer), "%s", rec->peer);
  snprintf(a->message, sizeof(a->message), "%s", rec->message);
  pthread_mutex_unlock(&s->mu);
}

/* Timeline order: by attempt number, then start (a transparent retry
 * keeps its attempt's number). */
static int att_cmp(const void *x, const void *y) {
  const att_rec *a = x, *b = y;
  if (a->attempt != b->attempt)
    return a->attempt < b->attempt ? -1 : 1;
  return a->start_us < b->start_us ? -1 : a->start_us > b->start_us;
}

/* Move call |id|'s records into |out|, in timeline order. */
static size_t take_attempts(att_store *s, uint64_t id, att_rec *out,
                            size_t max) {
  size_t n = 0, k = 0;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n; i++) {
    if (s->v[i].call_id == id) {
      if (n < max)
        out[n++] = s->v[i];
    } else {
      s->v[k++] = s->v[i];
    }
  }
  s->n = k;
  pthread_mutex_unlock(&s->mu);
  qsort(out, n, sizeof(*out), att_cmp);
  return n;
}

static const char *kind_name(grit_attempt_kind k) {
  switch (k) {
  case GRIT_ATTEMPT_FIRST:
    return "first";
  case GRIT_ATTEMPT_RETRY:
    return "retry";
  case GRIT_ATTEMPT_HEDGE:
    return "hedge";
  case GRIT_ATTEMPT_TRANSPARENT:
    return "transparent";
  }
  return "?";
}

/* Why the call made no further attempt: the reason of the attempt that
 * decided it (losing hedges say HEDGE_LOST, earlier ones NONE); from the
 * status when no record says (e.g. a deadline during a backoff). */
static grit_attempt_reason call_reason(const att_rec *a, size_t n,
                                       grit_status_code code) {
  for (size_t i = 0; i < n; i++) {
    if (a[i].reason != GRIT_REASON_NONE &&
        a[i].reason != GRIT_REASON_HEDGE_LOST)
      return a[i].reason;
  }
  if (code == GRIT_STATUS_DEADLINE_EXCEEDED)
    return GRIT_REASON_DEADLINE;
  if (code == GRIT_STATUS_CANCELLED)
    return GRIT_REASON_CANCELLED;
  return n ? a[n - 1].reason : GRIT_REASON_NONE;
}

/* The reason in plain words, from the public GRIT_REASON_MAP. */
static const char *reason_text(grit_attempt_reason r) {
  switch (r) {
#define REASON_TEXT(name, val, text)                                           \
  case GRIT_REASON_##name:                                                     \
    return text;
    GRIT_REASON_MAP(REASON_TEXT)
#undef REASON_TEXT
  }
  return "?";
}

static uint64_t first_start(const att_rec *a, size_t n) {
  uint64_t t = n ? a[0].start_us : 0;
  for (size_t i = 1; i < n; i++)
    t = a[i].start_us < t ? a[i].start_us : t;
  return t;
}

static void print_json_string(FILE *f, const char *s, size_t n);

static void print_json_timeline(FILE *f, const att_rec *a, size_t n) {
  uint64_t t0 = first_start(a, n);
  fprintf(f, ",\"timeline\":[");
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "%s{\"attempt\":%u,\"kind\":\"%s\",\"peer\":", i ? "," : "",
            a[i].attempt, kind_name(a[i].kind));
    print_json_string(f, a[i].peer, strlen(a[i].peer));
    fprintf(f,
            ",\"start_us\":%" PRIu64 ",\"duration_us\":%" PRIu64
            ",\"code\":%d,\"code_name\":\"%s\",\"message\":",
            a[i].start_us - t0, a[i].end_us - a[i].start_us, a[i].code,
            grit_status_code_name(a[i].code));
    print_json_string(f, a[i].message, strlen(a[i].message));
    fprintf(f, ",\"backoff_ms\":%" PRIu64 ",\"pushback\":%s,\"reason\":\"%s\"}",
            a[i].backoff_ms, a[i].pushback ? "true" : "false",
            grit_attempt_reason_name(a[i].reason));
  }
  fprintf(f, "]");
}

/* One line per attempt: number, kind, peer, start offset and duration,
 * status, the wait before it, and the reason when nothing followed. */
static void print_plain_timeline(uint64_t call_id, const grit_status *st,
                                 const att_rec *a, size_t n) {
  grit_attempt_reason why = call_reason(a, n, st->code);
  printf("call %" PRIu64 ": %s after %zu attempt%s (%s: %s)\n", call_id,
         grit_status_code_name(st->code), n, n == 1 ? "" : "s",
         grit_attempt_reason_name(why), reason_text(why));
  uint64_t t0 = first_start(a, n);
  for (size_t i = 0; i < n; i++) {
    char wait[48] = "";
    if (a[i].backoff_ms || a[i].pushback)
      snprintf(wait, sizeof(wait), "  after %s %" PRIu64 " ms",
               a[i].pushback                     ? "pushback"
               : a[i].kind == GRIT_ATTEMPT_HEDGE ? "hedgingDelay"
                                                 : "backoff",
               a[i].backoff_ms);
    printf("  #%-2u %-11s %-21s +%7.1f ms %7.1f ms  %s%s%s%s", a[i].attempt,
           kind_name(a[i].kind), a[i].peer[0] ? a[i].peer : "-",
           (double)(a[i].start_us - t0) / 1000.0,
           (double)(a[i].end_us - a[i].start_us) / 1000.0,
           grit_status_code_name(a[i].code), a[i].message[0] ? " \"" : "",
           a[i].message, a[i].message[0] ? "\"" : "");
    printf("%s", wait);
    if (a[i].reason != GRIT_REASON_NONE)
      printf("  -> %s", grit_attempt_reason_name(a[i].reason));
    printf("\n");
  }
}

static void print_json_result(call_run *r, const grit_status *st,
                              const uint8_t *resp, size_t len,
                              const grit_call_info *info, uint64_t lat,
                              const att_rec *att, size_t n_att) {
  FILE *f = stdout;
  fprintf(f, "{\"code\":%d,\"code_name\":\"%s\",\"message\":", st->code,
          grit_status_code_name(st->code));
  print_json_string(f, st->message, strlen(st->message));
  fprintf(f, ",\"latency_us\":%" PRIu64 ",\"peer\":", lat);
  print_json_string(f, info->peer, strlen(info->peer));
  fprintf(f,
          ",\"call_id\":%" PRIu64 ",\"attempts\":%u,\"transparent_retries\":%u"
          ",\"hedges\":%u,\"backoff_ms\":%" PRIu64 ",\"reason\":\"%s\"",
          info->call_id, info->attempts, info->transparent_retries,
          info->hedges, info->backoff_ms,
          grit_attempt_reason_name(call_reason(att, n_att, st->code)));
  if (r->attempts)
    print_json_timeline(f, att, n_att);
  fprintf(f, ",\"response\":\"");
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
    if (is_bin_key(k)) {
      fputc('"', f);
      tool_print_base64(f, v, vl);
      fputc('"', f);
    } else {
      print_json_string(f, (const char *)v, vl);
    }
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
    printf("trailer %s: ", k);
    if (is_bin_key(k))
      tool_print_base64(stdout, v, vl);
    else
      fwrite(v, 1, vl, stdout);
    printf("\n");
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
  att_rec att[MAX_CALL_ATTEMPTS];
  size_t n_att =
      r->json || r->attempts
          ? take_attempts(&r->store, info->call_id, att, MAX_CALL_ATTEMPTS)
          : 0;
  if (r->json) {
    print_json_result(r, st, resp, len, info, r->lat_us[idx], att, n_att);
  } else {
    if (r->verbose)
      print_plain_result(st, resp, len, info, r->lat_us[idx]);
    if (r->attempts)
      print_plain_timeline(info->call_id, st, att, n_att);
  }
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

/* With --json the summary is one more JSON line, {"summary":{...}}, so
 * stdout holds nothing but JSON. */
static void print_json_summary(call_run *r, double qps, const tool_pcts *p) {
  printf("{\"summary\":{\"calls\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"failed\":{",
         r->count, r->codes[0]);
  bool first = true;
  for (int c = 1; c < GRIT_STATUS_COUNT; c++) {
    if (r->codes[c]) {
      printf("%s\"%s\":%" PRIu64, first ? "" : ",",
             grit_status_code_name((grit_status_code)c), r->codes[c]);
      first = false;
    }
  }
  printf("},\"qps\":%.0f,\"p50_us\":%" PRIu64 ",\"p90_us\":%" PRIu64
         ",\"p99_us\":%" PRIu64 ",\"p999_us\":%" PRIu64 ",\"max_us\":%" PRIu64
         ",\"peers\":{",
         qps, p->p50, p->p90, p->p99, p->p999, p->max);
  for (int i = 0; i < MAX_PEERS && r->peers[i][0]; i++) {
    printf("%s", i ? "," : "");
    print_json_string(stdout, r->peers[i], strlen(r->peers[i]));
    printf(":%" PRIu64, r->peer_calls[i]);
  }
  printf("}}}\n");
}

static void print_summary(call_run *r, uint64_t elapsed_us) {
  tool_pcts p = tool_percentiles(r->lat_us, (size_t)r->count);
  double qps = elapsed_us ? (double)r->count * 1e6 / (double)elapsed_us : 0;
  if (r->json) {
    print_json_summary(r, qps, &p);
    return;
  }
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
             "  --service-config FILE|@FILE|JSON\n"
             "                              default service config: a file, "
             "or JSON\n"
             "                              if it starts with '{'\n"
             "  --tls                       use TLS\n"
             "  --ca FILE                   root certificates (PEM)\n"
             "  --authority NAME            :authority and TLS name\n"
             "  --count N --concurrency C   N calls, C in flight\n"
             "  --wait-for-ready            queue until the channel is READY\n"
             "  --attempts                  print each call's attempts\n"
             "  --json                      one JSON object per line\n"
             "exit status: 0 every call OK, 1 a call failed, 2 usage or "
             "set-up error\n");
}

typedef struct call_flags {
  const char *data, *service_config, *ca, *authority;
  grit_metadata *md;
  uint64_t deadline_ms, count, concurrency;
  bool tls, json, wfr, attempts;
} call_flags;

/* A count or a number of milliseconds: at least 1, at most 2^53 so that
 * microsecond arithmetic on it cannot overflow. */
static bool number_arg(const char *flag, const char *arg, uint64_t *out) {
  if (tool_parse_u64(arg, 1, UINT64_C(1) << 53, out))
    return true;
  fprintf(stderr, "grit: %s wants a positive integer, got '%s'\n", flag, arg);
  return false;
}

/* 0 to go on, 1 after --help, 2 on a usage error (message printed). */
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
      {"attempts", no_argument, 0, 'A'},
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
      if (!number_arg("--deadline", optarg, &fl->deadline_ms))
        return 2;
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
      if (!number_arg("--count", optarg, &fl->count))
        return 2;
      break;
    case 'C':
      if (!number_arg("--concurrency", optarg, &fl->concurrency))
        return 2;
      break;
    case 'w':
      fl->wfr = true;
      break;
    case 'j':
      fl->json = true;
      break;
    case 'A':
      fl->attempts = true;
      break;
    case 'm': {
      const char *colon = strchr(optarg, ':');
      if (!colon) {
        fprintf(stderr, "grit: --metadata wants k:v, got '%s'\n", optarg);
        return 2;
      }
      char *k = strndup(optarg, (size_t)(colon - optarg));
      grit_err rv =
          k ? grit_metadata_add(fl->md, k, colon + 1, strlen(colon + 1))
            : GRIT_ERR_NOMEM;
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

/* The channel arguments the flags ask for; |sc| is the service config
 * text or NULL. On failure *out is NULL and the error says which. */
static grit_err make_args(const call_flags *fl, const char *sc,
                          att_store *store, grit_channel_args **out) {
  grit_channel_args *a;
  *out = NULL;
  grit_err rv = grit_channel_args_create(&a);
  if (rv != GRIT_OK)
    return rv;
  if (sc)
    rv = grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, sc);
  if (rv == GRIT_OK && (fl->json || fl->attempts))
    rv = grit_channel_args_set_observer(a, on_attempt, store);
  if (rv == GRIT_OK && fl->tls)
    rv = grit_channel_args_set_int(a, GRIT_ARG_TLS, 1);
  if (rv == GRIT_OK && fl->ca)
    rv = grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS_FILE, fl->ca);
  if (rv == GRIT_OK && fl->authority)
    rv = grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_AUTHORITY,
                                      fl->authority);
  if (rv == GRIT_OK && fl->authority)
    rv = grit_channel_args_set_string(a, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE,
                                      fl->authority);
  if (rv != GRIT_OK) {
    grit_channel_args_destroy(a);
    return rv;
  }
  *out = a;
  return GRIT_OK;
}

static int run_calls(call_run *r, uint64_t concurrency, bool summary) {
  r->slots = calloc(r->count, sizeof(call_slot));
  r->lat_us = calloc(r->count, sizeof(uint64_t));
  if (!r->slots || !r->lat_us) {
    fprintf(stderr, "grit: out of memory for %" PRIu64 " calls\n", r->count);
    free(r->slots);
    free(r->lat_us);
    return 2;
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
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
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  return rc;
}

/* Exit status: 0 when every call ended OK, 1 when one did not, 2 on a
 * usage or set-up error (bad flag, unreadable file, bad target or service
 * config). */
int cmd_call(int argc, char **argv) {
  static char prog[] = "grit call"; /* getopt's messages name argv[0] */
  argv[0] = prog;
  call_flags fl = {.count = 1, .concurrency = 1};
  if (grit_metadata_create(&fl.md) != GRIT_OK) {
    fprintf(stderr, "grit: out of memory\n");
    return 2;
  }
  call_run r = {0};
  pthread_mutex_init(&r.store.mu, NULL);
  char *sc = NULL;
  int rc = parse_flags(argc, argv, &fl);
  if (rc != 0) {
    rc = rc == 1 ? 0 : rc;
    goto done;
  }
  rc = 2;
  r.method = argv[optind + 1];
  r.count = fl.count;
  r.json = fl.json;
  r.attempts = fl.attempts;
  r.verbose = fl.count == 1;
  if (fl.data && fl.data[0] == '@') {
    if (!(r.req = (uint8_t *)tool_read_file(fl.data + 1, &r.req_len)))
      goto done;
  } else if (fl.data && !tool_parse_hex(fl.data, &r.req, &r.req_len)) {
    fprintf(stderr, "grit: --data is not hex: %s\n", fl.data);
    goto done;
  }
  if (fl.service_config && !(sc = tool_read_json_arg(fl.service_config, NULL)))
    goto done;
  grit_channel_args *a;
  grit_error_detail d = {0};
  grit_err rv = make_args(&fl, sc, &r.store, &a);
  if (rv == GRIT_OK)
    rv = grit_channel_create(NULL, argv[optind], a, &d, &r.ch);
  grit_channel_args_destroy(a);
  if (rv != GRIT_OK) {
    fprintf(stderr, "grit: cannot create channel to %s: %s%s%s%s%s\n",
            argv[optind], grit_strerror(rv), d.reason[0] ? ": " : "", d.path,
            d.path[0] ? ": " : "", d.reason);
    goto done;
  }
  r.opts = (grit_call_opts){.version = GRIT_CALL_OPTS_VERSION,
                            .timeout_ms = fl.deadline_ms,
                            .metadata = fl.md};
  if (fl.wfr)
    r.opts.wait_for_ready = GRIT_WFR_ON;
  rc = run_calls(&r, fl.concurrency, r.count > 1);
  grit_channel_destroy(r.ch);
done:
  grit_metadata_destroy(fl.md);
  free(sc);
  free(r.req);
  free(r.store.v);
  pthread_mutex_destroy(&r.store.mu);
  return rc;
}
