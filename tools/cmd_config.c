/* grit config check: validate a service config (file or inline JSON) or
 * the one published in DNS, and explain it in plain words. Exit status: 0
 * valid, 1 invalid (report on stderr) or the DNS record not fetched, 2
 * usage (an unreadable file too). */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void config_usage(FILE *f) {
  fprintf(f, "usage: grit config check FILE_OR_JSON\n"
             "       grit config check --dns HOST [--dns-server ADDR:PORT]\n"
             "FILE_OR_JSON: a path, @path, or JSON text starting with '{'\n");
}

static int usage_error(void) {
  config_usage(stderr);
  return TOOL_EXIT_USAGE;
}

static int print_report(grit_err rv, char *report) {
  if (report)
    fputs(report, rv == GRIT_OK ? stdout : stderr);
  grit_free(report);
  if (rv == GRIT_OK)
    return 0;
  if (!report)
    fprintf(stderr, "grit: %s\n", grit_strerror(rv));
  return 1;
}

static int check_dns(int argc, char **argv) {
  const char *host = NULL, *server = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--dns") == 0 && i + 1 < argc)
      host = argv[++i];
    else if (strcmp(argv[i], "--dns-server") == 0 && i + 1 < argc)
      server = argv[++i];
    else
      return usage_error();
  }
  if (!host)
    return usage_error();
  char *report = NULL;
  grit_err rv = grit_service_config_check_dns(host, server, 5000, &report);
  return print_report(rv, report);
}

int cmd_config(int argc, char **argv) {
  if ((argc == 2 && tool_is_help(argv[1])) ||
      (argc == 3 && tool_is_help(argv[2]))) {
    config_usage(stdout);
    return TOOL_EXIT_OK;
  }
  if (argc < 3 || strcmp(argv[1], "check") != 0)
    return usage_error();
  if (strncmp(argv[2], "--dns", 5) == 0)
    return check_dns(argc - 2, argv + 2);
  /* An option we do not know is a usage error, not a file name. */
  if (argc != 3 || argv[2][0] == '-')
    return usage_error();
  size_t len = 0;
  char *json = tool_read_json_arg(argv[2], &len);
  if (!json)
    return TOOL_EXIT_USAGE; /* a file argument that cannot be read */
  char *report = NULL;
  grit_err rv = grit_service_config_check(json, len, &report);
  free(json);
  return print_report(rv, report);
}
