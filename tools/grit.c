/* The grit command: make calls, check service configs, run the demo. */
#include "tools.h"

#include <stdio.h>
#include <string.h>

static void version_usage(FILE *f) {
  fprintf(f, "usage: grit version\nprints the version of grit\n");
}

static int cmd_version(int argc, char **argv) {
  if (argc == 2 && tool_is_help(argv[1])) {
    version_usage(stdout);
    return TOOL_EXIT_OK;
  }
  if (argc != 1) {
    version_usage(stderr);
    return TOOL_EXIT_USAGE;
  }
  printf("grit %s\n", GRIT_VERSION);
  return TOOL_EXIT_OK;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: grit <command> [options]\n"
          "\n"
          "commands:\n"
          "  call [options] TARGET METHOD                make calls (unary "
          "or streaming)\n"
          "  config check FILE_OR_JSON                   validate a service "
          "config\n"
          "  config check --dns HOST [--dns-server A:P]  validate the DNS TXT "
          "config\n"
          "  config check --txt FILE_OR_TEXT             validate a TXT value "
          "offline\n"
          "  config check --bootstrap FILE_OR_JSON       validate an xDS "
          "bootstrap\n"
          "  demo                                        calls against "
          "embedded backends\n"
          "  list [options] TARGET [SERVICE]             the services, or "
          "a service's methods\n"
          "  describe [options] TARGET SYMBOL            a service, method, "
          "message, field\n"
          "  version                                     print the version\n"
          "  help [COMMAND]                              this text, or "
          "COMMAND's usage\n"
          "\n"
          "'grit COMMAND --help' (or -h) prints that command's usage.\n"
          "\n"
          "exit status, for every command:\n"
          "  0  success: every call ended OK, the config is valid, the demo "
          "passed\n"
          "  1  failure: the config is invalid or its DNS record could "
          "not be fetched,\n"
          "     a demo scene went wrong, reflection or the channel failed "
          "before a call\n"
          "  2  usage error: unknown command or option, bad or missing "
          "value, a file\n"
          "     named on the command line that cannot be read, a target or "
          "service\n"
          "     config the channel refuses, two request messages for a "
          "unary method\n"
          "  64+C  grit call: the call ended with gRPC status code C (65 "
          "CANCELLED ...\n"
          "     69 NOT_FOUND ... 78 UNAVAILABLE ... 80 UNAUTHENTICATED); "
          "--count runs:\n"
          "     the most frequent non-OK code\n");
}

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  void (*usage)(FILE *f);
} command;

static const command COMMANDS[] = {
    {"call", cmd_call, call_usage}, {"config", cmd_config, config_usage},
    {"demo", cmd_demo, demo_usage}, {"version", cmd_version, version_usage},
    {"list", cmd_list, list_usage}, {"describe", cmd_describe, describe_usage},
};

static const command *find(const char *name) {
  for (size_t i = 0; i < sizeof(COMMANDS) / sizeof(COMMANDS[0]); i++) {
    if (strcmp(COMMANDS[i].name, name) == 0)
      return &COMMANDS[i];
  }
  return NULL;
}

static int unknown(const char *name) {
  fprintf(stderr, "grit: unknown command '%s'\n", name);
  usage(stderr);
  return TOOL_EXIT_USAGE;
}

/* grit help [COMMAND] */
static int help(int argc, char **argv) {
  if (argc == 1 || (argc == 2 && tool_is_help(argv[1]))) {
    usage(stdout);
    return TOOL_EXIT_OK;
  }
  const command *c = argc == 2 ? find(argv[1]) : NULL;
  if (!c)
    return argc == 2 ? unknown(argv[1]) : (usage(stderr), TOOL_EXIT_USAGE);
  c->usage(stdout);
  return TOOL_EXIT_OK;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return TOOL_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "help") == 0 || tool_is_help(name))
    return help(argc - 1, argv + 1);
  if (strcmp(name, "--version") == 0)
    return cmd_version(1, argv + 1);
  const command *c = find(name);
  return c ? c->run(argc - 1, argv + 1) : unknown(name);
}
