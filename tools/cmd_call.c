/* grit call: parse the command line (one table of options), set up the
 * channel, and run either one call on the streaming API (every request
 * and response message; call_stream.c) or, with --count N > 1, N unary
 * calls with a summary (call_unary.c). Output: call_output.c. */
#include "call.h"

#include <ctype.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* The options, in the order usage lists them. |help| may hold '\n' for
 * more lines. A new option is a row here and a case in parse_flags. */
/* Option keys past the char range, for options without a short form. */
enum {
  OPT_DATA_JSON = 1400,
  OPT_PROTOSET,
  OPT_PROTO,
  OPT_IMPORT_PATH,
  /* issue 29: TLS, limits, output */
  OPT_MAX_RECV,
  OPT_CONNECT_TIMEOUT,
  OPT_EMIT_DEFAULTS,
  OPT_ADMIN, /* OP-03 */
  OPT_RATE,
  OPT_OTLP,          /* OP-02 */
  OPT_SHOW_XDS,      /* issue 27 */
  OPT_XDS_BOOTSTRAP, /* issue 27 */
};

typedef struct opt_row {
  const char *name;
  int key;
  const char *arg; /* NULL: a switch */
  const char *help;
} opt_row;

static const opt_row OPTS[] = {
    {"data", 'd', "HEX|@FILE|-",
     "a request message: hex (blanks allowed), or\n"
     "@FILE for a file's bytes; repeat for several\n"
     "messages; - reads stdin, one message per line\n"
     "in the same forms (an empty line is an empty\n"
     "message). Default: one empty message"},
    /* Message types and JSON (docs/cli.md, "JSON"). */
    {"data-json", OPT_DATA_JSON, "JSON|@FILE|-",
     "a request message in proto3 JSON, or @FILE\n"
     "holding it; repeatable; - reads stdin: JSON\n"
     "values one after another, any whitespace\n"
     "between. Responses print as JSON. Types:\n"
     "--protoset, --proto, else reflection. A unary\n"
     "or server-streaming method takes exactly one\n"
     "message; empty stdin sends {}"},
    {"emit-defaults", OPT_EMIT_DEFAULTS, NULL,
     "JSON responses show fields at their default\n"
     "values too (0, \"\", [], {})"},
    {"protoset", OPT_PROTOSET, "FILE",
     "message types from a descriptor set (protoc\n"
     "--include_imports -o FILE)"},
    {"proto", OPT_PROTO, "FILE",
     "message types from a .proto file (repeatable;\n"
     "compiled with protoc -o)"},
    {"import-path", OPT_IMPORT_PATH, "DIR",
     "where --proto files and their imports are\n"
     "(repeatable; protoc -I)"},
    {"metadata", 'm', "'KEY: VALUE'",
     "request metadata (repeatable); blanks around\n"
     "VALUE are dropped, KEY is lower-cased; a KEY\n"
     "ending in -bin takes VALUE in base64"},
    {"deadline", 't', "MS", "per-call deadline in milliseconds"},
    {"service-config", 's', "FILE|@FILE|JSON",
     "default service config: a file, or JSON if it\n"
     "starts with '{'"},
    {"tls", 'T', NULL, "use TLS"},
    {"ca", 'c', "FILE", "root certificates (PEM; implies --tls)"},
    {"cert", TOOL_OPT_CERT, "FILE",
     "client certificate chain (PEM) for mutual TLS;\n"
     "with --key; implies --tls"},
    {"key", TOOL_OPT_KEY, "FILE", "the client certificate's private key (PEM)"},
    {"insecure", TOOL_OPT_INSECURE, NULL,
     "TLS without checking the server's certificate\n"
     "(chain and name); warns on stderr. Tests only"},
    {"servername", TOOL_OPT_SERVERNAME, "NAME",
     "TLS server name (SNI, certificate check)\n"
     "instead of the target's host; implies --tls"},
    {"token-file", TOOL_OPT_TOKEN_FILE, "FILE",
     "send 'authorization: Bearer <FILE's trimmed\n"
     "content>' on every attempt, read again when\n"
     "the file changes; refused over cleartext"},
    {"insecure-credentials", TOOL_OPT_INSECURE_CREDS, NULL,
     "let --token-file go out over cleartext\n"
     "(local development only; warns)"},
    {"authority", 'a', "NAME",
     ":authority, and the TLS name if no\n"
     "--servername"},
    {"connect-timeout", OPT_CONNECT_TIMEOUT, "MS",
     "give up a connection attempt after MS ms\n"
     "(default 20000)"},
    {"max-recv", OPT_MAX_RECV, "BYTES",
     "largest response message accepted\n"
     "(default 4194304)"},
    {"wait-for-ready", 'w', NULL, "queue until the channel is READY"},
    {"show-headers", 'H', NULL, "print the response headers too"},
    {"count", 'n', "N",
     "N unary calls (one request message each), then\n"
     "a summary"},
    {"concurrency", 'C', "C", "with --count: C calls in flight"},
    {"attempts", 'A', NULL, "print each call's attempts"},
    {"json", 'j', NULL, "JSON lines on stdout"},
    {"compress", 'z', "gzip|deflate",
     "compress request messages (grpc-encoding);\n"
     "responses in gzip or deflate are always\n"
     "decoded"},
    {"dns-txt", 'X', NULL,
     "look up _grpc_config TXT records (service config\n"
     "from DNS, as GRIT_ARG_DNS_ENABLE_TXT)"},
    {"dns-server", 'D', "ADDR:PORT",
     "DNS server for dns: targets (IPv4 or [IPv6],\n"
     "comma-separated); dns://ADDR:PORT/host in the\n"
     "target does the same"},
    {"show-config", 'S', NULL,
     "after the calls, print the service config in\n"
     "force, its source, when applied, last rejection"},
    {"xds-bootstrap", OPT_XDS_BOOTSTRAP, "FILE|@FILE|JSON",
     "xDS bootstrap of an xds:/// TARGET (instead of\n"
     "GRPC_XDS_BOOTSTRAP, GRPC_XDS_BOOTSTRAP_CONFIG)"},
    {"show-xds", OPT_SHOW_XDS, NULL,
     "after the calls, print what the xDS client of an\n"
     "xds:/// TARGET holds: listener, routes, clusters,\n"
     "endpoints (health, priority), versions, last\n"
     "NACK with its reason (JSON)"},
    {"metrics", 'M', NULL,
     "print the channel's metrics (Prometheus text)\n"
     "on stdout after the run"},
    {"trace-context", 'R', NULL,
     "W3C traceparent on every attempt (a trace per\n"
     "call; ids in --attempts)"},
    {"traceparent", 'P', "VALUE",
     "the caller's traceparent (implies\n"
     "--trace-context)"},
    {"admin", OPT_ADMIN, "ADDR:PORT",
     "serve GET /metrics and /channelz over HTTP on\n"
     "ADDR:PORT (loopback; port 0: any, printed on\n"
     "stderr) while the command runs"},
    {"otlp", OPT_OTLP, "ADDR:PORT",
     "export the call and attempt spans over OTLP/gRPC\n"
     "to the collector at ADDR:PORT (implies\n"
     "--trace-context); counts on stderr at the end"},
    {"rate", OPT_RATE, "N",
     "with --count: start N calls per second (in\n"
     "flight: --concurrency if given, else any;\n"
     "above 1000, in bursts once a millisecond)"},
    {"help", 'h', NULL, "this text (also -h)"},
};
#define N_OPTS (sizeof(OPTS) / sizeof(OPTS[0]))

void call_usage(FILE *f) {
  fprintf(f, "usage: grit call [options] TARGET METHOD\n"
             "METHOD: /pkg.Service/Method, pkg.Service/Method or "
             "pkg.Service.Method\n"
             "options:\n");
  for (size_t i = 0; i < N_OPTS; i++) {
    char left[40];
    int n = snprintf(left, sizeof(left), "  --%s%s%s", OPTS[i].name,
                     OPTS[i].arg ? " " : "", OPTS[i].arg ? OPTS[i].arg : "");
    fprintf(f, "%-32s", left);
    if (n >= 32)
      fprintf(f, "\n%32s", "");
    for (const char *p = OPTS[i].help; *p; p++) {
      fputc(*p, f);
      if (*p == '\n')
        fprintf(f, "%32s", "");
    }
    fputc('\n', f);
  }
  fprintf(f, "Prints each response on stdout as it arrives, then the status, "
             "peer, latency,\ntrailers and decoded status details on stderr "
             "(--json: all on stdout).\nExit status: 0 OK, 64 + the status "
             "code (e.g. 69 NOT_FOUND), 2 usage\nerror; see 'grit help'.\n");
}

typedef struct call_flags {
  const char *service_config;
  tool_conn_flags conn; /* --tls, --ca, --cert, ... */
  uint64_t max_recv;    /* --max-recv; 0: the library's default */
  bool emit_defaults;
  const char *dns_server; /* --dns-server */
  bool dns_txt, show_config;
  bool show_xds;             /* --show-xds (issue 27) */
  const char *xds_bootstrap; /* --xds-bootstrap */
  grit_metadata *md;
  req_source *src;
  uint64_t deadline_ms, count, concurrency;
  bool json, wfr, attempts, show_headers;
  grit_compression compression;
  bool metrics, trace_context; /* --metrics, --trace-context (OB-01, 02) */
  const char *traceparent;
  const char *admin;    /* --admin ADDR:PORT (OP-03) */
  const char *otlp;     /* --otlp ADDR:PORT (OP-02) */
  uint64_t rate;        /* --rate N calls per second; 0: as fast as ends */
  bool concurrency_set; /* --concurrency given */
  /* --data-json values (decoded once the types are known), and where
   * the types come from. */
  const char *json_data[64];
  size_t n_json_data;
  bool hex_data;
  types_flags tf;
} call_flags;

/* A count or a number of milliseconds: at least 1, at most 2^53 so that
 * microsecond arithmetic on it cannot overflow. */
static bool number_arg(const char *flag, const char *arg, uint64_t *out) {
  if (tool_parse_u64(arg, 1, UINT64_C(1) << 53, out))
    return true;
  fprintf(stderr, "grit: %s wants a positive integer, got '%s'\n", flag, arg);
  return false;
}

/* HTTP/2 field values have no leading or trailing blanks (RFC 9113
 * §8.2.1); a header line's optional whitespace (RFC 9110 §5.6.3) is not
 * part of the value. */
static bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

/* --metadata 'key: value', as curl -H and grpcurl -H take it. */
bool tool_add_metadata(grit_metadata *md, const char *arg) {
  const char *colon = strchr(arg, ':');
  if (!colon || colon == arg) {
    fprintf(stderr, "grit: --metadata wants 'key: value', got '%s'\n", arg);
    return false;
  }
  /* Keys are case-insensitive and lower-case on the wire (RFC 9113
   * §8.2.1); grpc-go and grpcurl lower-case them too. */
  char *key = strndup(arg, (size_t)(colon - arg));
  const char *v = colon + 1, *end = v + strlen(v);
  while (v < end && is_ows(*v))
    v++;
  while (end > v && is_ows(end[-1]))
    end--;
  uint8_t *bin = NULL;
  size_t len = (size_t)(end - v);
  bool ok = key != NULL;
  for (char *p = key; ok && *p; p++)
    *p = (char)tolower((unsigned char)*p);
  if (ok && tool_is_bin_key(key)) {
    /* grpcurl takes -bin values in base64; grit sends the bytes (base64
     * again on the wire, SPEC HS-06) and prints them back in base64. */
    ok = tool_parse_base64(v, len, &bin, &len);
    if (!ok)
      fprintf(stderr, "grit: --metadata '%s': a -bin value must be base64\n",
              key);
  } else if (ok) {
    for (size_t i = 0; ok && i < len; i++) {
      unsigned char c = (unsigned char)v[i];
      if (c < 0x20 || c > 0x7e) {
        fprintf(stderr,
                "grit: --metadata '%s': byte 0x%02x at %zu is not allowed in "
                "a value (printable ASCII only; use a -bin key for bytes)\n",
                key, c, i);
        ok = false;
      }
    }
  }
  if (ok) {
    grit_err rv = grit_metadata_add(md, key, bin ? (const void *)bin : v, len);
    if (rv == GRIT_ERR_INVALID_METADATA)
      fprintf(stderr,
              "grit: --metadata '%s': not a valid key ([0-9a-z_.-], not "
              "reserved such as grpc-*, te, content-type, user-agent)\n",
              key);
    else if (rv != GRIT_OK)
      fprintf(stderr, "grit: --metadata '%s': %s\n", key, grit_strerror(rv));
    ok = rv == GRIT_OK;
  }
  if (!key)
    fprintf(stderr, "grit: out of memory\n");
  free(bin);
  free(key);
  return ok;
}

/* METHOD in grpcurl's forms: "/pkg.Svc/Method", "pkg.Svc/Method" or
 * "pkg.Svc.Method" (the last dot splits; protobuf names only, so that a
 * target given as METHOD is not taken for one). Returns the malloc'd path
 * "/pkg.Svc/Method", or NULL if it is none of them. */
static char *method_path(const char *m) {
  const char *s = m[0] == '/' ? m + 1 : m;
  const char *sep = strchr(s, '/');
  bool dotted = !sep;
  if (dotted)
    sep = strrchr(s, '.');
  if (!sep || sep == s || sep[1] == '\0' || strchr(sep + 1, '/'))
    return NULL;
  for (const char *p = s; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c <= 0x20 || c >= 0x7f ||
        (dotted && !isalnum(c) && c != '_' && c != '.'))
      return NULL;
  }
  size_t n = strlen(s) + 2;
  char *path = malloc(n);
  if (path)
    snprintf(path, n, "/%.*s/%s", (int)(sep - s), s, sep + 1);
  return path;
}

/* --traceparent: the W3C form the library accepts (lower-case hex, version
 * not ff, version 00 exactly 55 characters, ids not all zero), checked
 * here so that a bad value is a usage error. */
static bool traceparent_ok(const char *s) {
  size_t len = strlen(s);
  if (len < 55 || (len > 55 && (strncmp(s, "00", 2) == 0 || s[55] != '-')) ||
      strncmp(s, "ff", 2) == 0)
    return false;
  bool trace_zero = true, span_zero = true;
  for (size_t i = 0; i < 55; i++) {
    bool dash = i == 2 || i == 35 || i == 52;
    if (dash ? s[i] != '-'
             : !isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
      return false;
    if (!dash && s[i] != '0' && i > 2 && i < 35)
      trace_zero = false;
    if (!dash && s[i] != '0' && i > 35 && i < 52)
      span_zero = false;
  }
  return !trace_zero && !span_zero;
}

/* 0 to go on, 1 after --help, 2 on a usage error (message printed). */
static int parse_flags(int argc, char **argv, call_flags *fl) {
  struct option longopts[N_OPTS + 1];
  for (size_t i = 0; i < N_OPTS; i++)
    longopts[i] = (struct option){OPTS[i].name,
                                  OPTS[i].arg ? required_argument : no_argument,
                                  NULL, OPTS[i].key};
  longopts[N_OPTS] = (struct option){0};
  int o;
  while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (o) {
    case 'd':
      fl->hex_data = true;
      if (!req_source_add(fl->src, optarg))
        return 2;
      break;
    case OPT_DATA_JSON:
      if (fl->n_json_data == sizeof(fl->json_data) / sizeof(fl->json_data[0])) {
        fprintf(stderr, "grit: too many --data-json values\n");
        return 2;
      }
      fl->json_data[fl->n_json_data++] = optarg;
      break;
    case OPT_PROTOSET:
      fl->tf.protoset = optarg;
      break;
    case OPT_PROTO:
    case OPT_IMPORT_PATH: {
      bool proto = o == OPT_PROTO;
      size_t *n = proto ? &fl->tf.n_proto : &fl->tf.n_import;
      if (*n == 32) {
        fprintf(stderr, "grit: too many --%s values\n",
                proto ? "proto" : "import-path");
        return 2;
      }
      (proto ? fl->tf.proto : fl->tf.import)[(*n)++] = optarg;
      break;
    }
    case 'm':
      if (!tool_add_metadata(fl->md, optarg))
        return 2;
      break;
    case 't':
      if (!number_arg("--deadline", optarg, &fl->deadline_ms))
        return 2;
      break;
    case 's':
      fl->service_config = optarg;
      break;
    case 'T':
      fl->conn.tls = true;
      break;
    case 'c':
      fl->conn.ca = optarg;
      break;
    case 'a':
      fl->conn.authority = optarg;
      break;
    case OPT_CONNECT_TIMEOUT:
      if (!number_arg("--connect-timeout", optarg,
                      &fl->conn.connect_timeout_ms))
        return 2;
      break;
    case OPT_MAX_RECV:
      if (!tool_parse_u64(optarg, 1, INT64_MAX, &fl->max_recv)) {
        fprintf(stderr, "grit: --max-recv wants a number of bytes, got '%s'\n",
                optarg);
        return 2;
      }
      break;
    case OPT_EMIT_DEFAULTS:
      fl->emit_defaults = true;
      break;
    case 'w':
      fl->wfr = true;
      break;
    case 'H':
      fl->show_headers = true;
      break;
    case 'n':
      if (!number_arg("--count", optarg, &fl->count))
        return 2;
      break;
    case 'C':
      if (!number_arg("--concurrency", optarg, &fl->concurrency))
        return 2;
      fl->concurrency_set = true;
      break;
    case OPT_ADMIN:
      fl->admin = optarg;
      break;
    case OPT_SHOW_XDS:
      fl->show_xds = true;
      break;
    case OPT_XDS_BOOTSTRAP:
      fl->xds_bootstrap = optarg;
      break;
    case OPT_OTLP:
      fl->otlp = optarg;
      fl->trace_context = true;
      break;
    case OPT_RATE:
      if (!number_arg("--rate", optarg, &fl->rate))
        return 2;
      break;
    case 'A':
      fl->attempts = true;
      break;
    case 'j':
      fl->json = true;
      break;
    case 'z':
      if (!strcmp(optarg, "gzip"))
        fl->compression = GRIT_COMPRESSION_GZIP;
      else if (!strcmp(optarg, "deflate"))
        fl->compression = GRIT_COMPRESSION_DEFLATE;
      else if (!strcmp(optarg, "identity"))
        fl->compression = GRIT_COMPRESSION_IDENTITY;
      else {
        fprintf(stderr,
                "grit: --compress wants gzip, deflate or identity, "
                "got '%s'\n",
                optarg);
        return 2;
      }
      break;
    case 'X':
      fl->dns_txt = true;
      break;
    case 'D':
      fl->dns_server = optarg;
      break;
    case 'S':
      fl->show_config = true;
      break;
    case 'M':
      fl->metrics = true;
      break;
    case 'R':
      fl->trace_context = true;
      break;
    case 'P':
      if (!traceparent_ok(optarg)) {
        fprintf(stderr,
                "grit: --traceparent wants a W3C traceparent, "
                "00-<32 hex>-<16 hex>-<2 hex> in lower case, got '%s'\n",
                optarg);
        return 2;
      }
      fl->traceparent = optarg;
      fl->trace_context = true;
      break;
    case 'h':
      call_usage(stdout);
      return 1;
    default:
      if (tool_conn_option(&fl->conn, o, optarg))
        break;
      call_usage(stderr);
      return 2;
    }
  }
  if (argc - optind != 2) {
    call_usage(stderr);
    return 2;
  }
  if (fl->n_json_data && fl->hex_data) {
    fprintf(stderr, "grit: --data and --data-json do not mix\n");
    return 2;
  }
  if (fl->tf.protoset && fl->tf.n_proto) {
    fprintf(stderr, "grit: --protoset or --proto, not both\n");
    return 2;
  }
  /* No --data: one empty request message, as a unary call needs. */
  if (req_source_fixed_count(fl->src) == 0 && !req_source_uses_stdin(fl->src) &&
      !req_source_add(fl->src, ""))
    return 2;
  /* --count runs are unary calls: one request message each, no headers
   * (grit_unary_call_async has none to give). */
  if (fl->count > 1 && (req_source_fixed_count(fl->src) > 1 ||
                        req_source_uses_stdin(fl->src) || fl->show_headers)) {
    fprintf(stderr, "grit: --count N makes unary calls: at most one --data "
                    "(not -), no --show-headers\n");
    return 2;
  }
  return 0;
}

/* The channel arguments the flags ask for; |sc| is the service config
 * text or NULL. On failure *out is NULL and the error says which. */
static grit_err make_args(const call_flags *fl, const char *sc,
                          const char *xds_boot, att_store *store,
                          grit_channel_args **out) {
  grit_channel_args *a;
  *out = NULL;
  grit_err rv = grit_channel_args_create(&a);
  if (rv != GRIT_OK)
    return rv;
  if (sc)
    rv = grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, sc);
  if (rv == GRIT_OK && xds_boot)
    rv = grit_channel_args_set_string(a, GRIT_ARG_XDS_BOOTSTRAP_CONFIG,
                                      xds_boot);
  /* The records give a timeline (--attempts), the JSON "reason" and the
   * peer of a call that never committed. A --count run without
   * --attempts or --json needs none of them: no observer, so it costs no
   * more per call than the library (issue 24). */
  if (rv == GRIT_OK && (fl->count <= 1 || fl->attempts || fl->json))
    rv = grit_channel_args_set_observer(a, att_observe, store);
  if (rv == GRIT_OK)
    rv = tool_conn_args(&fl->conn, a);
  if (rv == GRIT_OK && fl->max_recv)
    rv = grit_channel_args_set_int(a, GRIT_ARG_MAX_RECV_MESSAGE,
                                   (int64_t)fl->max_recv);
  if (rv == GRIT_OK && fl->dns_txt)
    rv = grit_channel_args_set_int(a, GRIT_ARG_DNS_ENABLE_TXT, 1);
  if (rv == GRIT_OK && fl->dns_server)
    rv = grit_channel_args_set_string(a, GRIT_ARG_DNS_SERVER, fl->dns_server);
  if (rv == GRIT_OK && fl->trace_context)
    rv = grit_channel_args_set_int(a, GRIT_ARG_TRACE_CONTEXT, 1);
  if (rv == GRIT_OK && fl->otlp)
    rv = grit_channel_args_set_string(a, GRIT_ARG_OTLP_ENDPOINT, fl->otlp);
  if (rv != GRIT_OK) {
    grit_channel_args_destroy(a);
    return rv;
  }
  *out = a;
  return GRIT_OK;
}

static const char *kind_name(grit_method_kind k) {
  switch (k) {
  case GRIT_METHOD_UNARY:
    return "a unary method";
  case GRIT_METHOD_SERVER_STREAMING:
    return "a server-streaming method";
  case GRIT_METHOD_CLIENT_STREAMING:
    return "a client-streaming method";
  case GRIT_METHOD_BIDI_STREAMING:
    return "a bidi-streaming method";
  default:
    return "a method";
  }
}

/* A unary or server-streaming method (the types say so) takes exactly
 * one request message: stdin is read to its end first; none at all sends
 * the empty message ({}), as grpcurl does; two or more are a usage error
 * naming the method kind, and nothing is sent. Returns 0 or an exit
 * status. */
static int check_cardinality(call_setup *cs, bool json) {
  grit_method_kind k = cs->opts.kind;
  if (k != GRIT_METHOD_UNARY && k != GRIT_METHOD_SERVER_STREAMING)
    return 0;
  if (req_source_uses_stdin(cs->src) && !req_source_collect(cs->src))
    return 2;
  size_t n = req_source_fixed_count(cs->src);
  if (n == 0 && !req_source_add(cs->src, json ? "{}" : ""))
    return 1;
  if (n > 1) {
    fprintf(stderr,
            "grit: %s is %s: it takes one request message, got %zu (stdin "
            "and --data values together)\n",
            cs->method, kind_name(k), n);
    return 2;
  }
  return 0;
}

/* --admin ADDR:PORT ("127.0.0.1:9464", "[::1]:0"): start the endpoint
 * (OP-03) and say where it listens. NULL on error (message printed). */
static grit_admin *start_admin(const char *arg) {
  const char *colon = strrchr(arg, ':');
  uint64_t port;
  char host[64];
  size_t hn = colon ? (size_t)(colon - arg) : 0;
  if (hn >= 2 && arg[0] == '[' && arg[hn - 1] == ']') {
    arg++;
    hn -= 2;
  }
  if (!colon || hn == 0 || hn >= sizeof(host) ||
      !tool_parse_u64(colon + 1, 0, 65535, &port)) {
    fprintf(stderr, "grit: --admin wants ADDR:PORT, got '%s'\n", arg);
    return NULL;
  }
  memcpy(host, arg, hn);
  host[hn] = '\0';
  grit_admin *a = NULL;
  grit_error_detail d = {0};
  grit_err rv = grit_admin_start(host, (uint16_t)port, 0, &d, &a);
  if (rv != GRIT_OK) {
    fprintf(stderr, "grit: --admin %s: %s%s%s\n", arg, grit_strerror(rv),
            d.reason[0] ? ": " : "", d.reason);
    return NULL;
  }
  fprintf(stderr, "grit: admin endpoint on http://%s%s%s:%u/\n",
          strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
          (unsigned)grit_admin_port(a));
  return a;
}

/* The one place that sets wait-for-ready on the call options. */
static void set_wait_for_ready(grit_call_opts *o) {
  o->wait_for_ready = GRIT_WFR_ON;
}

int cmd_call(int argc, char **argv) {
  static char prog[] = "grit call"; /* getopt's messages name argv[0] */
  argv[0] = prog;
  call_flags fl = {.count = 1, .concurrency = 1};
  att_store store;
  att_store_init(&store);
  char *sc = NULL, *method = NULL, *xds_boot = NULL;
  grit_channel *ch = NULL;
  call_types *types = NULL;
  grit_admin *admin = NULL;
  int rc = 2;
  if (grit_metadata_create(&fl.md) != GRIT_OK ||
      !(fl.src = req_source_create(req_decode_hex_or_file))) {
    fprintf(stderr, "grit: out of memory\n");
    rc = 1;
    goto done;
  }
  rc = parse_flags(argc, argv, &fl);
  if (rc != 0) {
    rc = rc == 1 ? 0 : rc;
    goto done;
  }
  rc = 2;
  const char *target = argv[optind];
  if (!(method = method_path(argv[optind + 1]))) {
    fprintf(stderr,
            "grit: malformed method '%s': use /pkg.Service/Method, "
            "pkg.Service/Method or pkg.Service.Method\n",
            argv[optind + 1]);
    goto done;
  }
  if (fl.service_config && !(sc = tool_read_json_arg(fl.service_config, NULL)))
    goto done;
  /* OP-01: the method named on the command line is known: its metrics
   * carry its name (a failure only leaves it "other"). */
  (void)grit_metrics_register_method(method);
  grit_channel_args *a;
  grit_error_detail d = {0};
  if (fl.xds_bootstrap &&
      !(xds_boot = tool_read_json_arg(fl.xds_bootstrap, NULL)))
    goto done;
  if ((fl.show_xds || fl.xds_bootstrap) && strncmp(target, "xds:", 4) != 0) {
    fprintf(stderr,
            "grit: --show-xds and --xds-bootstrap want an xds:/// "
            "target, got '%s'\n",
            target);
    goto done;
  }
  grit_err rv = make_args(&fl, sc, xds_boot, &store, &a);
  if (rv == GRIT_OK)
    rv = grit_channel_create(NULL, target, a, &d, &ch);
  grit_channel_args_destroy(a);
  if (rv != GRIT_OK) {
    /* issue 27: an xds: target without --service-config was refused for
     * its bootstrap. */
    bool boot =
        rv == GRIT_ERR_INVALID_CONFIG && !sc && strncmp(target, "xds:", 4) == 0;
    fprintf(stderr, "grit: cannot create channel to %s: %s%s%s%s%s\n", target,
            boot ? "invalid xDS bootstrap" : grit_strerror(rv),
            d.reason[0] ? ": " : "", d.path, d.path[0] ? ": " : "", d.reason);
    rc = rv == GRIT_ERR_NOMEM ? 1 : 2;
    goto done;
  }
  call_setup cs = {
      .ch = ch,
      .method = method,
      .opts = {.version = GRIT_CALL_OPTS_VERSION,
               .timeout_ms = fl.deadline_ms,
               .metadata = fl.md,
               .compression = fl.compression,
               .traceparent = fl.traceparent},
      .src = fl.src,
      .store = &store,
      .out = {.json = fl.json,
              .attempts = fl.attempts,
              .show_headers = fl.show_headers},
  };
  if (fl.wfr)
    set_wait_for_ready(&cs.opts);
  /* Message types: from --protoset/--proto, or by reflection when
   * --data-json needs them. */
  if (fl.tf.protoset || fl.tf.n_proto || fl.n_json_data) {
    rc = types_load(&fl.tf, ch, &cs.opts, method, &types);
    if (rc == 0)
      rc = types_find_method(types, method, &cs.opts.kind);
    if (rc != 0)
      goto done;
    cs.out.types = types;
    cs.out.resolve_any = fl.count <= 1;
    types_set_emit_defaults(types, fl.emit_defaults);
  }
  if (fl.n_json_data) {
    types_use_for_requests(types);
    req_source *js = req_source_create(req_decode_json);
    if (!js) {
      fprintf(stderr, "grit: out of memory\n");
      rc = 1;
      goto done;
    }
    req_source_destroy(fl.src);
    cs.src = fl.src = js;
    rc = 2;
    for (size_t i = 0; i < fl.n_json_data; i++) {
      if (!req_source_add(js, fl.json_data[i]))
        goto done;
    }
    if (fl.count > 1 &&
        (req_source_fixed_count(js) > 1 || req_source_uses_stdin(js))) {
      fprintf(stderr, "grit: --count N makes unary calls: at most one "
                      "--data-json (not -)\n");
      goto done;
    }
  }
  rc = check_cardinality(&cs, fl.n_json_data > 0);
  if (rc != 0)
    goto done;
  if (fl.admin && !(admin = start_admin(fl.admin))) {
    rc = 2;
    goto done;
  }
  if (fl.rate && !fl.concurrency_set)
    fl.concurrency = fl.count; /* the rate alone paces the run */
  if (fl.count > 1)
    rc = call_run_unary(&cs, fl.count, fl.concurrency, fl.rate);
  else
    rc = call_run_stream(&cs);
  if (fl.show_config) {
    grit_service_config_info info = GRIT_SERVICE_CONFIG_INFO_INIT;
    if (grit_channel_get_service_config(ch, &info) == GRIT_OK) {
      out_service_config(&cs.out, &info);
      grit_service_config_info_free(&info);
    }
  }
  if (fl.show_xds) /* issue 27: before the channel (its client) goes */
    out_xds_status(&cs.out, xds_boot);
  if (fl.metrics) /* OB-01: after the result and any summary line */
    call_print_metrics(ch);
done:
  grit_admin_stop(admin);
  types_free(types);
  grit_channel_destroy(ch); /* OP-02: sends the spans still queued */
  if (fl.otlp && ch) {
    grit_span_export_stats xs;
    grit_span_export_get_stats(&xs);
    fprintf(stderr,
            "grit: otlp %s: %llu spans exported, %llu dropped (%llu exports "
            "failed)\n",
            fl.otlp, (unsigned long long)xs.exported,
            (unsigned long long)xs.dropped,
            (unsigned long long)xs.exports_failed);
  }
  grit_metadata_destroy(fl.md);
  req_source_destroy(fl.src);
  free(sc);
  free(xds_boot);
  free(method);
  att_store_free(&store);
  return rc;
}
