/*
 * grit-interop-client: the gRPC interop client on grit.
 *
 * Flags follow gRPC's interop-test-descriptions.md, as --flag=value or
 * --flag value; a boolean flag given alone means true.
 *
 *   --server_host=HOST            default localhost
 *   --server_port=PORT            required
 *   --test_case=NAME              one case, or "all"; default large_unary.
 *                                 The HTTP/2 server test cases (goaway,
 *                                 max_streams, ping, rst_after_header,
 *                                 rst_after_data, rst_during_data,
 *                                 data_frame_padding,
 *                                 no_df_padding_sanity_test) run by name
 *                                 only, against gRPC's http2 test server.
 *   --use_tls=BOOL                default false
 *   --use_test_ca=BOOL            trust only the test CA (with --use_tls;
 *                                 ignored without it, as grpc-go does:
 *                                 gRPC's harness passes it to every job)
 *   --ca_file=PATH                the test CA, PEM; default: $GRIT_TEST_CA,
 *                                 else gRPC's interop test CA (built in,
 *                                 interop/test_ca.c).
 *   --server_host_override=NAME   TLS name (SNI and hostname check) and
 *                                 :authority
 *   --service_config_json=JSON    default service config; resolver configs
 *                                 are then ignored
 *   --additional_metadata=K:V;K:V sent on every call
 *   --client_cert_file=PATH, --client_key_file=PATH   client certificate
 *   --rpc_timeout_ms=N            deadline of calls that do not test
 *                                 deadlines; default 30000, 0 none
 *   --soak_iterations=N           rpc_soak, channel_soak: default 10
 *   --soak_max_failures=N         default 0
 *   --soak_per_iteration_max_acceptable_latency_ms=N   default 1000
 *   --soak_overall_timeout_seconds=N                   default 0 (none)
 *   --soak_min_time_ms_between_rpcs=N                  default 0
 *
 * Exit status: 0 when every case passed, 1 when one failed (each failed
 * check prints a FAIL line to stderr with what was expected and what came),
 * 2 for bad flags or a channel that could not be created.
 */
#include "interop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct flags {
  const char *server_host;
  const char *server_port;
  const char *test_case;
  bool use_tls;
  bool use_test_ca;
  const char *ca_file;
  const char *server_host_override;
  const char *service_config_json;
  const char *additional_metadata;
  const char *client_cert_file;
  const char *client_key_file;
  const char *rpc_timeout_ms;
  const char *soak_iterations;
  const char *soak_max_failures;
  const char *soak_per_iteration_max_acceptable_latency_ms;
  const char *soak_overall_timeout_seconds;
  const char *soak_min_time_ms_between_rpcs;
} flags;

typedef enum flag_kind { FLAG_STRING, FLAG_BOOL } flag_kind;

typedef struct flag_def {
  const char *name;
  flag_kind kind;
  size_t offset;
} flag_def;

#define FLAG_STR(field)                                                        \
  { #field, FLAG_STRING, offsetof(flags, field) }
#define FLAG_BOOL(field)                                                       \
  { #field, FLAG_BOOL, offsetof(flags, field) }

static const flag_def flag_defs[] = {
    FLAG_STR(server_host),
    FLAG_STR(server_port),
    FLAG_STR(test_case),
    FLAG_BOOL(use_tls),
    FLAG_BOOL(use_test_ca),
    FLAG_STR(ca_file),
    FLAG_STR(server_host_override),
    FLAG_STR(service_config_json),
    FLAG_STR(additional_metadata),
    FLAG_STR(client_cert_file),
    FLAG_STR(client_key_file),
    FLAG_STR(rpc_timeout_ms),
    FLAG_STR(soak_iterations),
    FLAG_STR(soak_max_failures),
    FLAG_STR(soak_per_iteration_max_acceptable_latency_ms),
    FLAG_STR(soak_overall_timeout_seconds),
    FLAG_STR(soak_min_time_ms_between_rpcs),
};

#define FLAG_COUNT (sizeof(flag_defs) / sizeof(flag_defs[0]))

static void usage(FILE *f) {
  fputs("usage: grit-interop-client --server_port=PORT [--flag=value ...]\n"
        "flags:\n",
        f);
  for (size_t i = 0; i < FLAG_COUNT; i++) {
    fprintf(f, "  --%s%s\n", flag_defs[i].name,
            flag_defs[i].kind == FLAG_BOOL ? "=true|false" : "=VALUE");
  }
  fputs("test cases: all", f);
  for (size_t i = 0; i < interop_case_count; i++) {
    fprintf(f, " %s", interop_cases[i].name);
  }
  fputs("\nHTTP/2 server test cases (by name only):", f);
  for (size_t i = 0; i < interop_http2_case_count; i++) {
    fprintf(f, " %s", interop_http2_cases[i].name);
  }
  fputs("\nthe test CA is --ca_file, else $GRIT_TEST_CA, else gRPC's interop "
        "test CA (built in)\n",
        f);
}

/* Parse "true"/"false" (and 1/0, yes/no). Returns 1, 0, or -1. */
static int parse_bool(const char *s) {
  if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes")) {
    return 1;
  }
  if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no")) {
    return 0;
  }
  return -1;
}

static bool parse_flags(int argc, char **argv, flags *fl) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];

    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (strncmp(arg, "--", 2) != 0) {
      fprintf(stderr, "grit-interop-client: unexpected argument '%s'\n", arg);
      return false;
    }
    arg += 2;
    const char *eq = strchr(arg, '=');
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    const flag_def *def = NULL;
    for (size_t j = 0; j < FLAG_COUNT; j++) {
      if (strlen(flag_defs[j].name) == name_len &&
          !strncmp(flag_defs[j].name, arg, name_len)) {
        def = &flag_defs[j];
      }
    }
    if (!def) {
      fprintf(stderr, "grit-interop-client: unknown flag '--%.*s'\n",
              (int)name_len, arg);
      return false;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!value && def->kind == FLAG_BOOL) {
      /* "--use_tls" alone, or followed by an explicit boolean. */
      value = "true";
      if (i + 1 < argc && parse_bool(argv[i + 1]) >= 0) {
        value = argv[++i];
      }
    } else if (!value) {
      if (i + 1 >= argc) {
        fprintf(stderr, "grit-interop-client: --%s needs a value\n", def->name);
        return false;
      }
      value = argv[++i];
    }
    char *field = (char *)fl + def->offset;
    if (def->kind == FLAG_BOOL) {
      int b = parse_bool(value);
      if (b < 0) {
        fprintf(stderr,
                "grit-interop-client: --%s: expected true or false, got "
                "'%s'\n",
                def->name, value);
        return false;
      }
      *(bool *)(void *)field = b == 1;
    } else {
      *(const char **)(void *)field = value;
    }
  }
  return true;
}

/* Parse "k1:v1;k2:v2" into |md|. Empty items are skipped; a value may
 * contain ':' (only the first one splits). */
static bool parse_additional_metadata(const char *spec, grit_metadata *md) {
  const char *p = spec;

  while (*p) {
    const char *end = strchr(p, ';');
    size_t item_len = end ? (size_t)(end - p) : strlen(p);
    const char *colon = memchr(p, ':', item_len);

    if (item_len > 0) {
      if (!colon || colon == p) {
        fprintf(stderr,
                "grit-interop-client: --additional_metadata: '%.*s' is not "
                "key:value\n",
                (int)item_len, p);
        return false;
      }
      size_t key_len = (size_t)(colon - p);
      char *key = malloc(key_len + 1);
      if (!key) {
        fputs("grit-interop-client: out of memory\n", stderr);
        return false;
      }
      memcpy(key, p, key_len);
      key[key_len] = '\0';
      grit_err err =
          grit_metadata_add(md, key, colon + 1, item_len - key_len - 1);
      if (err != GRIT_OK) {
        fprintf(stderr,
                "grit-interop-client: --additional_metadata: cannot add "
                "'%s': %s (%s)\n",
                key, grit_err_name(err), grit_strerror(err));
        free(key);
        return false;
      }
      free(key);
    }
    p += item_len;
    if (*p == ';') {
      p++;
    }
  }
  return true;
}

/* Report a failed channel-args setter and return false. */
static bool arg_failed(const char *key, grit_err err) {
  fprintf(stderr, "grit-interop-client: channel arg %s: %s (%s)\n", key,
          grit_err_name(err), grit_strerror(err));
  return false;
}

static bool set_str(grit_channel_args *a, const char *key, const char *v) {
  grit_err err = grit_channel_args_set_string(a, key, v);

  return err == GRIT_OK || arg_failed(key, err);
}

static bool set_int(grit_channel_args *a, const char *key, int64_t v) {
  grit_err err = grit_channel_args_set_int(a, key, v);

  return err == GRIT_OK || arg_failed(key, err);
}

/* Translate the flags into channel arguments. */
static bool build_args(const flags *fl, grit_channel_args *a) {
  if (fl->service_config_json) {
    /* interop: "disables service config lookups and sets the provided
     * string as the default service config". */
    if (!set_str(a, GRIT_ARG_SERVICE_CONFIG, fl->service_config_json) ||
        !set_int(a, GRIT_ARG_IGNORE_RESOLVER_CONFIG, 1)) {
      return false;
    }
  }
  if (fl->server_host_override &&
      !set_str(a, GRIT_ARG_DEFAULT_AUTHORITY, fl->server_host_override)) {
    return false;
  }
  if (!fl->use_tls) {
    /* gRPC's run_interop_tests passes --use_test_ca=true to insecure jobs
     * too; grpc-go ignores it there, and so does grit. */
    if (fl->client_cert_file) {
      fputs("grit-interop-client: --client_cert_file needs --use_tls=true\n",
            stderr);
      return false;
    }
    return true;
  }
  if (!set_int(a, GRIT_ARG_TLS, 1)) {
    return false;
  }
  if (fl->use_test_ca) {
    const char *ca = fl->ca_file ? fl->ca_file : getenv("GRIT_TEST_CA");
    bool ok = ca && *ca
                  ? set_str(a, GRIT_ARG_TLS_ROOT_CERTS_FILE, ca)
                  : set_str(a, GRIT_ARG_TLS_ROOT_CERTS, interop_test_ca_pem);
    if (!ok) {
      return false;
    }
  } else if (fl->ca_file) {
    fputs("grit-interop-client: note: --ca_file is used only with "
          "--use_test_ca=true; using the system roots\n",
          stderr);
  }
  if (fl->server_host_override && !set_str(a, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE,
                                           fl->server_host_override)) {
    return false;
  }
  if (!fl->client_cert_file != !fl->client_key_file) {
    fputs("grit-interop-client: --client_cert_file and --client_key_file go "
          "together\n",
          stderr);
    return false;
  }
  if (fl->client_cert_file &&
      (!set_str(a, GRIT_ARG_TLS_CERT_CHAIN_FILE, fl->client_cert_file) ||
       !set_str(a, GRIT_ARG_TLS_PRIVATE_KEY_FILE, fl->client_key_file))) {
    return false;
  }
  return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end = NULL;

  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || *s == '-') {
    return false;
  }
  *out = v;
  return true;
}

static uint64_t now_ms(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool run_case(const interop_ctx *ctx, const interop_case *c) {
  uint64_t start = now_ms();

  interop_current_case = c->name;
  bool ok = c->run(ctx);
  printf("%s %s (%llu ms)\n", ok ? "PASS" : "FAIL", c->name,
         (unsigned long long)(now_ms() - start));
  fflush(stdout);
  return ok;
}

int main(int argc, char **argv) {
  flags fl = {
      .server_host = "localhost",
      .test_case = "large_unary",
      .rpc_timeout_ms = "30000",
      .soak_iterations = "10",
      .soak_max_failures = "0",
      .soak_per_iteration_max_acceptable_latency_ms = "1000",
      .soak_overall_timeout_seconds = "0",
      .soak_min_time_ms_between_rpcs = "0",
  };
  interop_ctx ctx = {0};
  grit_metadata *extra_md = NULL;
  grit_channel_args *args = NULL;
  grit_error_detail detail = {0};
  int status = 2;

  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!parse_flags(argc, argv, &fl)) {
    usage(stderr);
    return 2;
  }
  uint64_t port = 0;
  if (!fl.server_port || !parse_u64(fl.server_port, &port) || port == 0 ||
      port > 65535) {
    fprintf(stderr,
            "grit-interop-client: --server_port: expected 1-65535, "
            "got '%s'\n",
            fl.server_port ? fl.server_port : "(none)");
    return 2;
  }
  if (!parse_u64(fl.rpc_timeout_ms, &ctx.rpc_timeout_ms)) {
    fprintf(stderr, "grit-interop-client: --rpc_timeout_ms: bad value '%s'\n",
            fl.rpc_timeout_ms);
    return 2;
  }
  const struct {
    const char *name, *text;
    uint64_t *out;
  } soak_flags[] = {
      {"soak_iterations", fl.soak_iterations, &ctx.soak.iterations},
      {"soak_max_failures", fl.soak_max_failures, &ctx.soak.max_failures},
      {"soak_per_iteration_max_acceptable_latency_ms",
       fl.soak_per_iteration_max_acceptable_latency_ms,
       &ctx.soak.max_latency_ms},
      {"soak_overall_timeout_seconds", fl.soak_overall_timeout_seconds,
       &ctx.soak.overall_timeout_s},
      {"soak_min_time_ms_between_rpcs", fl.soak_min_time_ms_between_rpcs,
       &ctx.soak.min_between_ms},
  };
  for (size_t i = 0; i < sizeof(soak_flags) / sizeof(soak_flags[0]); i++) {
    if (!parse_u64(soak_flags[i].text, soak_flags[i].out)) {
      fprintf(stderr, "grit-interop-client: --%s: bad value '%s'\n",
              soak_flags[i].name, soak_flags[i].text);
      return 2;
    }
  }
  const interop_case *only = NULL;
  if (strcmp(fl.test_case, "all") != 0) {
    for (size_t i = 0; i < interop_case_count; i++) {
      if (!strcmp(interop_cases[i].name, fl.test_case)) {
        only = &interop_cases[i];
      }
    }
    for (size_t i = 0; i < interop_http2_case_count; i++) {
      if (!strcmp(interop_http2_cases[i].name, fl.test_case)) {
        only = &interop_http2_cases[i];
      }
    }
    if (!only) {
      fprintf(stderr, "grit-interop-client: unknown test case '%s'\n",
              fl.test_case);
      usage(stderr);
      return 2;
    }
  }

  if (fl.additional_metadata) {
    grit_err err = grit_metadata_create(&extra_md);
    if (err != GRIT_OK) {
      fprintf(stderr, "grit-interop-client: grit_metadata_create: %s\n",
              grit_strerror(err));
      goto done;
    }
    if (!parse_additional_metadata(fl.additional_metadata, extra_md)) {
      goto done;
    }
    ctx.extra_md = extra_md;
  }

  grit_err err = grit_channel_args_create(&args);
  if (err != GRIT_OK) {
    fprintf(stderr, "grit-interop-client: grit_channel_args_create: %s\n",
            grit_strerror(err));
    goto done;
  }
  if (!build_args(&fl, args)) {
    goto done;
  }

  /* An IPv6 literal needs brackets before the port. */
  bool v6 = strchr(fl.server_host, ':') && fl.server_host[0] != '[';
  size_t target_len = strlen(fl.server_host) + 16;
  char *target = malloc(target_len);
  if (!target) {
    fputs("grit-interop-client: out of memory\n", stderr);
    goto done;
  }
  snprintf(target, target_len, v6 ? "[%s]:%u" : "%s:%u", fl.server_host,
           (unsigned)port);
  err = grit_channel_create(NULL, target, args, &detail, &ctx.ch);
  if (err != GRIT_OK) {
    fprintf(stderr, "grit-interop-client: grit_channel_create(%s): %s (%s)",
            target, grit_err_name(err), grit_strerror(err));
    if (detail.reason[0]) {
      fprintf(stderr, ": %s%s%s", detail.path[0] ? detail.path : "",
              detail.path[0] ? ": " : "", detail.reason);
    }
    fputc('\n', stderr);
    free(target);
    goto done;
  }
  fprintf(stderr, "grit-interop-client: %s %s%s%s\n", target,
          fl.use_tls ? "TLS" : "cleartext",
          fl.server_host_override ? " as " : "",
          fl.server_host_override ? fl.server_host_override : "");
  ctx.target = target;
  ctx.args = args;

  size_t failed = 0;
  size_t ran = 0;
  for (size_t i = 0; i < (only ? 1 : interop_case_count); i++) {
    ran++;
    if (!run_case(&ctx, only ? only : &interop_cases[i])) {
      failed++;
    }
  }
  if (!only) {
    printf("%s: %zu of %zu cases passed\n", failed ? "FAIL" : "PASS",
           ran - failed, ran);
  }
  status = failed ? 1 : 0;

done:
  grit_channel_destroy(ctx.ch);
  free((char *)ctx.target);
  grit_channel_args_destroy(args);
  grit_metadata_destroy(extra_md);
  grit_default_runtime_shutdown(); /* valgrind-clean exit */
  return status;
}
