/* grit config check: validate a service config (file or inline JSON) or
 * the one published in DNS, and explain it in plain words. */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int config_usage(void) {
  fprintf(stderr,
          "usage: grit config check FILE_OR_JSON\n"
          "       grit config check --dns HOST [--dns-server ADDR:PORT]\n");
  return 2;
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
      return config_usage();
  }
  if (!host)
    return config_usage();
  char *report = NULL;
  grit_err rv = grit_service_config_check_dns(host, server, 5000, &report);
  return print_report(rv, report);
}

int cmd_config(int argc, char **argv) {
  if (argc < 3 || strcmp(argv[1], "check") != 0)
    return config_usage();
  if (strncmp(argv[2], "--dns", 5) == 0)
    return check_dns(argc - 2, argv + 2);
  if (argc != 3)
    return config_usage();
  /* A path that exists is read; otherwise the argument is the JSON. */
  const char *arg = argv[2];
  char *json = NULL;
  size_t len = 0;
  FILE *f = arg[0] != '{' && arg[0] != '@' ? fopen(arg, "rb") : NULL;
  if (f) {
    fclose(f);
    char spec[4096];
    snprintf(spec, sizeof(spec), "@%s", arg);
    json = tool_read_text_or_file(spec, &len);
  } else {
    json = tool_read_text_or_file(arg, &len);
  }
  if (!json)
    return 1;
  char *report = NULL;
  grit_err rv = grit_service_config_check(json, len, &report);
  free(json);
  return print_report(rv, report);
}
