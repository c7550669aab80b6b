/* The grit command: make calls, check service configs, run the demo. */
#include "tools.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: grit <command> [options]\n"
          "\n"
          "commands:\n"
          "  call [options] TARGET /pkg.Service/Method   make calls\n"
          "  config check FILE_OR_JSON                   validate a service "
          "config\n"
          "  config check --dns HOST [--dns-server A:P]  validate the DNS TXT "
          "config\n"
          "  demo                                        calls against "
          "embedded backends\n"
          "  version                                     print the version\n"
          "\n"
          "'grit call --help' lists the call options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "call") == 0)
    return cmd_call(argc - 1, argv + 1);
  if (strcmp(cmd, "demo") == 0)
    return cmd_demo(argc - 1, argv + 1);
  if (strcmp(cmd, "config") == 0)
    return cmd_config(argc - 1, argv + 1);
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    printf("grit %s\n", GRIT_VERSION);
    return 0;
  }
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "grit: unknown command '%s'\n", cmd);
  usage(stderr);
  return 2;
}
