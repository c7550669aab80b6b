/* grit list [TARGET] and grit describe [TARGET] SYMBOL: the services of a
 * server, and a service, method, message or enum as .proto text, over
 * server reflection or from --protoset/--proto (then TARGET may be left
 * out). */
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
};

static const struct option LONGOPTS[] = {
    {"protoset", required_argument, NULL, OPT_PROTOSET},
    {"proto", required_argument, NULL, OPT_PROTO},
    {"import-path", required_argument, NULL, OPT_IMPORT_PATH},
    {"tls", no_argument, NULL, OPT_TLS},
    {"ca", required_argument, NULL, OPT_CA},
    {"authority", required_argument, NULL, OPT_AUTHORITY},
    {"help", no_argument, NULL, 'h'},
    {0},
};

static const char OPTIONS_HELP[] =
    "options:\n"
    "  --protoset FILE     types from a descriptor set (protoc "
    "--include_imports -o)\n"
    "  --proto FILE        types from a .proto file (repeatable; run through "
    "protoc)\n"
    "  --import-path DIR   protoc -I for --proto (repeatable)\n"
    "  --tls               use TLS\n"
    "  --ca FILE           root certificates (PEM); implies --tls\n"
    "  --authority NAME    :authority and TLS name\n"
    "  --help              this text (also -h)\n"
    "Without --protoset or --proto, asks the server's reflection service\n"
    "(grpc.reflection.v1, else v1alpha). Exit status: see 'grit help'.\n";

void list_usage(FILE *f) {
  fprintf(f,
          "usage: grit list [options] TARGET\n"
          "       grit list --protoset FILE|--proto FILE [options]\n"
          "prints the services, one per line\n%s",
          OPTIONS_HELP);
}

void describe_usage(FILE *f) {
  fprintf(f,
          "usage: grit describe [options] TARGET SYMBOL\n"
          "       grit describe --protoset FILE|--proto FILE [options] "
          "SYMBOL\n"
          "prints a service, method (pkg.Service.Method), message or enum "
          "as .proto text\n%s",
          OPTIONS_HELP);
}

typedef struct desc_flags {
  types_flags tf;
  bool tls;
  const char *ca, *authority;
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
      fl->tls = true;
      break;
    case OPT_CA:
      fl->ca = optarg;
      break;
    case OPT_AUTHORITY:
      fl->authority = optarg;
      break;
    case 'h':
      usage(stdout);
      return 1;
    default:
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
  if (rv == GRIT_OK && fl->tls)
    rv = grit_channel_args_set_int(a, GRIT_ARG_TLS, 1);
  if (rv == GRIT_OK && fl->ca)
    rv = grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS_FILE, fl->ca);
  if (rv == GRIT_OK && fl->authority)
    rv = grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_AUTHORITY,
                                      fl->authority);
  /* SPEC AP-05: --ca is TLS material and implies --tls (the library's
   * rule too); the name override is TLS material, so only with TLS. */
  if (rv == GRIT_OK && fl->authority && (fl->tls || fl->ca))
    rv = grit_channel_args_set_string(a, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE,
                                      fl->authority);
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

/* |nargs| positional arguments after the options: TARGET (unless types
 * come from files) and |extra| more. */
static int run(int argc, char **argv, size_t extra, void (*usage)(FILE *),
               int (*body)(const desc_flags *, grit_channel *, char **)) {
  desc_flags fl = {0};
  optind = 1;
  int rc = parse(argc, argv, &fl, usage);
  if (rc)
    return rc == 1 ? TOOL_EXIT_OK : TOOL_EXIT_USAGE;
  bool files = fl.tf.protoset || fl.tf.n_proto;
  size_t left = (size_t)(argc - optind);
  if (fl.tf.protoset && fl.tf.n_proto) {
    fprintf(stderr, "grit: --protoset or --proto, not both\n");
    return TOOL_EXIT_USAGE;
  }
  if (left != extra + 1 && !(files && left == extra)) {
    usage(stderr);
    return TOOL_EXIT_USAGE;
  }
  grit_channel *ch = NULL;
  if (left == extra + 1) {
    rc = open_channel(&fl, argv[optind], &ch);
    if (rc != TOOL_EXIT_OK)
      return rc;
  }
  rc = body(&fl, ch, argv + argc - extra);
  grit_channel_destroy(ch);
  return rc;
}

static int list_body(const desc_flags *fl, grit_channel *ch, char **args) {
  (void)args;
  return types_list(&fl->tf, ch);
}

static int describe_body(const desc_flags *fl, grit_channel *ch, char **args) {
  return types_describe(&fl->tf, ch, args[0]);
}

int cmd_list(int argc, char **argv) {
  return run(argc, argv, 0, list_usage, list_body);
}

int cmd_describe(int argc, char **argv) {
  return run(argc, argv, 1, describe_usage, describe_body);
}
