/* grit list [TARGET] [SERVICE] and grit describe [TARGET] SYMBOL: the
 * services of a server (or a service's methods), and a service, method,
 * message, enum, field or enum value as .proto text (or, with --template,
 * a message's JSON template), over server reflection or from
 * --protoset/--proto (then TARGET may be left out). Reflection calls have
 * a deadline (--timeout, default 10 s) and take --metadata. */
#include "call_json.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum {
  OPT_PROTOSET = 1500,
  OPT_PROTO,
  OPT_IMPORT_PATH,
  OPT_TLS,
  OPT_CA,
  OPT_AUTHORITY,
  OPT_CONNECT_TIMEOUT,
  OPT_METADATA,
  OPT_TIMEOUT,
  OPT_TEMPLATE,
};

static const struct option LONGOPTS[] = {
    {"protoset", required_argument, NULL, OPT_PROTOSET},
    {"proto", required_argument, NULL, OPT_PROTO},
    {"import-path", required_argument, NULL, OPT_IMPORT_PATH},
    {"tls", no_argument, NULL, OPT_TLS},
    {"ca", required_argument, NULL, OPT_CA},
    {"cert", required_argument, NULL, TOOL_OPT_CERT},
    {"key", required_argument, NULL, TOOL_OPT_KEY},
    {"insecure", no_argument, NULL, TOOL_OPT_INSECURE},
    {"token-file", required_argument, NULL, TOOL_OPT_TOKEN_FILE},
    {"insecure-credentials", no_argument, NULL, TOOL_OPT_INSECURE_CREDS},
    {"servername", required_argument, NULL, TOOL_OPT_SERVERNAME},
    {"authority", required_argument, NULL, OPT_AUTHORITY},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"metadata", required_argument, NULL, OPT_METADATA},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"template", no_argument, NULL, OPT_TEMPLATE},
    {"help", no_argument, NULL, 'h'},
    {0},
};

static const char OPTIONS_HELP[] =
    "options:\n"
    "  --protoset FILE       types from a descriptor set (protoc "
    "--include_imports -o)\n"
    "  --proto FILE          types from a .proto file (repeatable; run "
    "through protoc)\n"
    "  --import-path DIR     protoc -I for --proto (repeatable)\n"
    "  --metadata 'K: V'     metadata on the reflection calls "
    "(repeatable; as grit call)\n"
    "  --timeout MS          deadline of each reflection call (default "
    "10000)\n"
    "  --tls                 use TLS\n"
    "  --ca FILE             root certificates (PEM; implies --tls)\n"
    "  --cert FILE           client certificate chain (PEM; with --key; "
    "implies --tls)\n"
    "  --key FILE            the client certificate's private key (PEM)\n"
    "  --insecure            TLS without checking the server's "
    "certificate (warns)\n"
    "  --servername NAME     TLS server name instead of the target's host\n"
    "  --authority NAME      :authority (and TLS name without "
    "--servername)\n"
    "  --connect-timeout MS  connection attempt timeout (default 20000)\n"
    "  --token-file FILE     'authorization: Bearer <content>' on the "
    "reflection calls\n"
    "  --insecure-credentials  let --token-file go out over cleartext\n"
    "  --help                this text (also -h)\n"
    "Without --protoset or --proto, asks the server's reflection service\n"
    "(grpc.reflection.v1, else v1alpha). Exit status: see 'grit help'.\n";

void list_usage(FILE *f) {
  fprintf(f,
          "usage: grit list [options] TARGET [SERVICE]\n"
          "       grit list --protoset FILE|--proto FILE [options] "
          "[SERVICE]\n"
          "prints the services, one per line; with SERVICE, its methods "
          "(pkg.Service.Method)\n%s",
          OPTIONS_HELP);
}

void describe_usage(FILE *f) {
  fprintf(f,
          "usage: grit describe [options] TARGET SYMBOL\n"
          "       grit describe --protoset FILE|--proto FILE [options] "
          "SYMBOL\n"
          "prints a service, method (pkg.Service.Method), message, enum, "
          "field\n"
          "(pkg.Message.field) or enum value as .proto text; a leading "
          "'.' is allowed\n"
          "  --template            instead, a JSON template of the message "
          "(or of the\n"
          "                        method's request) for --data-json\n%s",
          OPTIONS_HELP);
}

typedef struct desc_flags {
  types_flags tf;
  tool_conn_flags conn;
  grit_metadata *md;
  uint64_t timeout_ms;
  bool template;
} desc_flags;

/* 0 to go on, 1 after --help, 2 on a usage error. */
static int parse(int argc, char **argv, desc_flags *fl, void (*usage)(FILE *)) {
  int o;
  while ((o = getopt_long(argc, argv, "h", LONGOPTS, NULL)) != -1) {
    switch (o) {
    case OPT_PROTOSET:
      fl->tf.protoset = optarg;
      break;
    case OPT_PROTO:
      if (fl->tf.n_proto == 32)
        return 2;
      fl->tf.proto[fl->tf.n_proto++] = optarg;
      break;
    case OPT_IMPORT_PATH:
      if (fl->tf.n_import == 32)
        return 2;
      fl->tf.import[fl->tf.n_import++] = optarg;
      break;
    case OPT_TLS:
      fl->conn.tls = true;
      break;
    case OPT_CA:
      fl->conn.ca = optarg;
      break;
    case OPT_AUTHORITY:
      fl->conn.authority = optarg;
      break;
    case OPT_CONNECT_TIMEOUT:
    case OPT_TIMEOUT: {
      uint64_t *v =
          o == OPT_TIMEOUT ? &fl->timeout_ms : &fl->conn.connect_timeout_ms;
      if (!tool_parse_u64(optarg, 1, UINT64_C(1) << 53, v)) {
        fprintf(stderr, "grit: --%s wants a positive number of ms, got '%s'\n",
                o == OPT_TIMEOUT ? "timeout" : "connect-timeout", optarg);
        return 2;
      }
      break;
    }
    case OPT_METADATA:
      if (!tool_add_metadata(fl->md, optarg))
        return 2;
      break;
    case OPT_TEMPLATE:
      fl->template = true;
      break;
    case 'h':
      usage(stdout);
      return 1;
    default:
      if (tool_conn_option(&fl->conn, o, optarg))
        break;
      usage(stderr);
      return 2;
    }
  }
  return 0;
}

static int open_channel(const desc_flags *fl, const char *target,
                        grit_channel **ch) {
  grit_channel_args *a = NULL;
  grit_error_detail d = {0};
  grit_err rv = grit_channel_args_create(&a);
  if (rv == GRIT_OK)
    rv = tool_conn_args(&fl->conn, a);
  if (rv == GRIT_OK)
    rv = grit_channel_create(NULL, target, a, &d, ch);
  grit_channel_args_destroy(a);
  if (rv != GRIT_OK) {
    fprintf(stderr, "grit: cannot create channel to %s: %s%s%s\n", target,
            grit_strerror(rv), d.reason[0] ? ": " : "", d.reason);
    return rv == GRIT_ERR_NOMEM ? TOOL_EXIT_FAILED : TOOL_EXIT_USAGE;
  }
  return TOOL_EXIT_OK;
}

/* After the options: TARGET (unless types come from files), then
 * |min_extra| to |max_extra| more arguments. */
static int run(int argc, char **argv, size_t min_extra, size_t max_extra,
               void (*usage)(FILE *),
               int (*body)(const desc_flags *, grit_channel *,
                           const grit_call_opts *, char **, size_t)) {
  desc_flags fl = {0};
  optind = 1;
  if (grit_metadata_create(&fl.md) != GRIT_OK) {
    fprintf(stderr, "grit: out of memory\n");
    return TOOL_EXIT_FAILED;
  }
  int rc = parse(argc, argv, &fl, usage);
  if (rc) {
    grit_metadata_destroy(fl.md);
    return rc == 1 ? TOOL_EXIT_OK : TOOL_EXIT_USAGE;
  }
  bool files = fl.tf.protoset || fl.tf.n_proto;
  size_t left = (size_t)(argc - optind);
  size_t need = files ? 0 : 1; /* TARGET */
  rc = TOOL_EXIT_USAGE;
  if (fl.tf.protoset && fl.tf.n_proto) {
    fprintf(stderr, "grit: --protoset or --proto, not both\n");
    goto done;
  }
  /* With files, TARGET is optional: more arguments than the most extra
   * ones means the first is a TARGET. */
  bool has_target = !files || left > max_extra;
  size_t extra = left - (has_target ? 1 : 0);
  if (left < need || extra < min_extra || extra > max_extra) {
    usage(stderr);
    goto done;
  }
  grit_channel *ch = NULL;
  if (has_target) {
    rc = open_channel(&fl, argv[optind], &ch);
    if (rc != TOOL_EXIT_OK)
      goto done;
  }
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                         .timeout_ms = fl.timeout_ms ? fl.timeout_ms : 10000,
                         .metadata = fl.md};
  rc = body(&fl, ch, &opts, argv + argc - extra, extra);
  grit_channel_destroy(ch);
done:
  grit_metadata_destroy(fl.md);
  return rc;
}

static int list_body(const desc_flags *fl, grit_channel *ch,
                     const grit_call_opts *opts, char **args, size_t n) {
  return types_list(&fl->tf, ch, opts, n ? args[0] : NULL);
}

static int describe_body(const desc_flags *fl, grit_channel *ch,
                         const grit_call_opts *opts, char **args, size_t n) {
  (void)n;
  return types_describe(&fl->tf, ch, opts, args[0], fl->template);
}

int cmd_list(int argc, char **argv) {
  return run(argc, argv, 0, 1, list_usage, list_body);
}

int cmd_describe(int argc, char **argv) {
  return run(argc, argv, 1, 1, describe_usage, describe_body);
}
