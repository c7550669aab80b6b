/* grit config check: validate a service config (file or inline JSON) or
 * the one published in DNS or given as a TXT value, and explain it in plain
 * words, with warnings for what is accepted but likely wrong. Exit status:
 * 0 valid (warnings too), 1 invalid (report on stderr) or the DNS record
 * not fetched, 2 usage (an unreadable file too). */
#include "tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void config_usage(FILE *f) {
  fprintf(f,
          "usage: grit config check FILE_OR_JSON\n"
          "       grit config check --dns TARGET [--dns-server ADDR:PORT]\n"
          "                         [--hostname NAME] [--language LANG]\n"
          "       grit config check --txt FILE_OR_TEXT [--hostname NAME]\n"
          "                         [--language LANG]\n"
          "       grit config check --bootstrap FILE_OR_JSON\n"
          "FILE_OR_JSON: a path, @path, or JSON text starting with '{'\n"
          "TARGET: HOST, HOST:PORT, dns:///HOST:PORT or "
          "dns://ADDR:PORT/HOST:PORT\n"
          "FILE_OR_TEXT: a TXT value (a grpc_config= JSON array of choices), "
          "as\n"
          "  text starting with '[' or 'grpc_config=', or a path or @path\n"
          "--hostname, --language: check as a client on that host in that\n"
          "  language would (default: this host, c)\n"
          "--bootstrap: validate an xDS bootstrap (what GRPC_XDS_BOOTSTRAP\n"
          "  names) as an xds:/// channel reads it; an error names its JSON\n"
          "  path and reason\n");
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

/* A TXT value given on the command line or in a file (issue 20). */
static char *read_txt_arg(const char *arg, size_t *len) {
  if (arg[0] == '[' || strncmp(arg, "grpc_config=", 12) == 0) {
    *len = strlen(arg);
    return strdup(arg);
  }
  const char *path = arg[0] == '@' ? arg + 1 : arg;
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "grit: cannot open %s: %s\n", path, strerror(errno));
    return NULL;
  }
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 > cap) {
      char *nb = realloc(buf, cap = cap * 2 + 4096);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    size_t k = fread(buf + n, 1, cap - n - 1, f);
    n += k;
    if (k == 0)
      break;
  }
  fclose(f);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    n--;
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* "ADDR:PORT[,...]" roughly: each entry ends in :digits. The library
 * checks the rest. */
static bool server_form_ok(const char *s) {
  while (*s) {
    const char *end = strchr(s, ',');
    size_t n = end ? (size_t)(end - s) : strlen(s);
    const char *colon = NULL;
    for (size_t i = 0; i < n; i++)
      if (s[i] == ':')
        colon = s + i;
    if (!colon || colon + 1 == s + n)
      return false;
    for (const char *p = colon + 1; p < s + n; p++)
      if (*p < '0' || *p > '9')
        return false;
    s += n + (end ? 1 : 0);
  }
  return true;
}

static int check_dns_or_txt(int argc, char **argv) {
  const char *host = NULL, *server = NULL, *txt = NULL, *hostname = NULL,
             *language = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--dns") == 0 && i + 1 < argc)
      host = argv[++i];
    else if (strcmp(argv[i], "--txt") == 0 && i + 1 < argc)
      txt = argv[++i];
    else if (strcmp(argv[i], "--dns-server") == 0 && i + 1 < argc)
      server = argv[++i];
    else if (strcmp(argv[i], "--hostname") == 0 && i + 1 < argc)
      hostname = argv[++i];
    else if (strcmp(argv[i], "--language") == 0 && i + 1 < argc)
      language = argv[++i];
    else
      return usage_error();
  }
  if (!host == !txt || (txt && server))
    return usage_error();
  if (server && !server_form_ok(server)) {
    fprintf(stderr,
            "grit: --dns-server wants ADDR:PORT (IPv4, or [IPv6]:PORT; "
            "comma-separated), got '%s'\n",
            server);
    return TOOL_EXIT_USAGE;
  }
  char *report = NULL;
  grit_err rv;
  if (txt) {
    size_t len = 0;
    char *value = read_txt_arg(txt, &len);
    if (!value)
      return TOOL_EXIT_USAGE;
    rv = grit_service_config_check_txt_for(value, len, hostname, language,
                                           &report);
    free(value);
  } else {
    rv = grit_service_config_check_dns_for(host, server, 5000, hostname,
                                           language, &report);
    if (rv == GRIT_ERR_INVALID_ARG) {
      fprintf(stderr,
              "grit: --dns wants HOST, HOST:PORT, dns:///HOST:PORT or "
              "dns://ADDR:PORT/HOST:PORT, and --dns-server ADDR:PORT; got "
              "'%s'%s%s\n",
              host, server ? " and " : "", server ? server : "");
      return TOOL_EXIT_USAGE;
    }
  }
  return print_report(rv, report);
}

/* grit config check --bootstrap FILE_OR_JSON (issue 27). */
static int check_bootstrap(int argc, char **argv) {
  if (argc != 2)
    return usage_error();
  size_t len = 0;
  char *json = tool_read_json_arg(argv[1], &len);
  if (!json)
    return TOOL_EXIT_USAGE; /* a file argument that cannot be read */
  grit_error_detail d = {0};
  grit_err rv = grit_xds_bootstrap_check(json, len, &d);
  free(json);
  if (rv == GRIT_OK) {
    printf("xDS bootstrap: valid\n");
    return 0;
  }
  if (rv == GRIT_ERR_INVALID_CONFIG)
    fprintf(stderr, "xDS bootstrap: invalid: %s: %s\n", d.path, d.reason);
  else
    fprintf(stderr, "grit: %s\n", grit_strerror(rv));
  return 1;
}

int cmd_config(int argc, char **argv) {
  if ((argc == 2 && tool_is_help(argv[1])) ||
      (argc == 3 && tool_is_help(argv[2]))) {
    config_usage(stdout);
    return TOOL_EXIT_OK;
  }
  if (argc < 3 || strcmp(argv[1], "check") != 0)
    return usage_error();
  if (strcmp(argv[2], "--bootstrap") == 0)
    return check_bootstrap(argc - 2, argv + 2);
  if (strncmp(argv[2], "--dns", 5) == 0 || strcmp(argv[2], "--txt") == 0 ||
      strcmp(argv[2], "--hostname") == 0 || strcmp(argv[2], "--language") == 0)
    return check_dns_or_txt(argc - 2, argv + 2);
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
