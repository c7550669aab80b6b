/*
 * grit-h2server: the fault-injecting server as a standalone program, for
 * manual tests and bench/ scripts. Prints "listening HOST:PORT" first, then
 * runs until SIGINT or SIGTERM. With --log, one line per finished request.
 */
#include "h2server.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

static void usage(FILE *f) {
  fputs("usage: grit-h2server [--port N] [--host ADDR] [--unix PATH]\n"
        "  [--tls-cert FILE --tls-key FILE] [--script FILE]\n"
        "  [--action SPEC]... [--default SPEC] [--max-concurrent-streams N]\n"
        "  [--initial-window-size N] [--no-ping-ack]\n"
        "  [--accept serve|close|reset|silent] [--log] [--quiet]\n"
        "SPEC is a script step, e.g. \"repeat=2 trailers_only status=14 "
        "pushback=100\";\nsee h2server/README.md.\n",
        f);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 2) {
      char *bigger = realloc(buf, cap * 2);
      if (bigger == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf)
    buf[len] = '\0';
  return buf;
}

static void append_line(char **text, const char *line) {
  size_t old = *text ? strlen(*text) : 0;
  char *t = realloc(*text, old + strlen(line) + 2);
  if (t == NULL) {
    perror("grit-h2server");
    exit(1);
  }
  t[old] = '\0';
  strcat(t, line);
  strcat(t, "\n");
  *text = t;
}

static bool parse_num(const char *s, unsigned long max, unsigned long *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || *end || s[0] == '-' || v > max)
    return false;
  *out = v;
  return true;
}

static void print_request(const h2s_request *r) {
  printf("req %zu conn %u stream %d %s msgs %zu bytes %zu%s%s status %d\n",
         r->seq, r->conn_index, r->stream_id, r->path ? r->path : "-",
         r->n_msgs, r->msg_bytes, r->client_rst ? " client-rst" : "",
         r->half_closed ? "" : " open", r->status_sent);
  fflush(stdout);
}

int main(int argc, char **argv) {
  h2s_config cfg = {0};
  char *script = NULL;
  h2s_step dflt = {0};
  bool have_dflt = false, log = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    unsigned long n;
    bool takes = true;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--no-ping-ack") == 0) {
      cfg.no_ping_ack = true;
      takes = false;
    } else if (strcmp(a, "--quiet") == 0) {
      cfg.quiet = true;
      takes = false;
    } else if (strcmp(a, "--log") == 0) {
      log = true;
      takes = false;
    } else if (v == NULL) {
      usage(stderr);
      return 2;
    } else if (strcmp(a, "--port") == 0 && parse_num(v, 65535, &n)) {
      cfg.port = (uint16_t)n;
    } else if (strcmp(a, "--host") == 0) {
      cfg.host = v;
    } else if (strcmp(a, "--unix") == 0) {
      cfg.unix_path = v;
    } else if (strcmp(a, "--tls-cert") == 0) {
      cfg.tls_cert_file = v;
    } else if (strcmp(a, "--tls-key") == 0) {
      cfg.tls_key_file = v;
    } else if (strcmp(a, "--script") == 0) {
      char *text = read_file(v);
      if (text == NULL) {
        fprintf(stderr, "grit-h2server: %s: %s\n", v, strerror(errno));
        return 2;
      }
      append_line(&script, text);
      free(text);
    } else if (strcmp(a, "--action") == 0) {
      append_line(&script, v);
    } else if (strcmp(a, "--default") == 0) {
      char err[128];
      h2s_step_free(&dflt);
      if (h2s_step_parse(v, &dflt, err, sizeof(err)) != 0) {
        fprintf(stderr, "grit-h2server: --default: %s\n", err);
        return 2;
      }
      have_dflt = true;
    } else if (strcmp(a, "--accept") == 0 && strcmp(v, "serve") == 0) {
      cfg.accept = H2S_ACCEPT_SERVE;
    } else if (strcmp(a, "--accept") == 0 && strcmp(v, "close") == 0) {
      cfg.accept = H2S_ACCEPT_CLOSE;
    } else if (strcmp(a, "--accept") == 0 && strcmp(v, "reset") == 0) {
      cfg.accept = H2S_ACCEPT_RESET;
    } else if (strcmp(a, "--accept") == 0 && strcmp(v, "silent") == 0) {
      cfg.accept = H2S_ACCEPT_SILENT;
    } else if (strcmp(a, "--max-concurrent-streams") == 0 &&
               parse_num(v, UINT32_MAX, &n)) {
      cfg.max_concurrent_streams = (uint32_t)n;
    } else if (strcmp(a, "--initial-window-size") == 0 &&
               parse_num(v, INT32_MAX, &n)) {
      cfg.initial_window_size = (uint32_t)n;
    } else {
      usage(stderr);
      return 2;
    }
    i += takes;
  }
  cfg.script_text = script;
  cfg.default_action = have_dflt ? &dflt.action : NULL;

  /* Block the signals before the server thread exists; sigwait below. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  h2s_server *srv;
  int rv = h2s_server_start(&cfg, &srv);
  free(script);
  h2s_step_free(&dflt);
  if (rv != 0) {
    fprintf(stderr, "grit-h2server: %s\n", uv_strerror(rv));
    return 1;
  }
  char addr[80];
  printf("listening %s\n", h2s_server_addr(srv, addr, sizeof(addr)));
  fflush(stdout);

  size_t printed = 0;
  struct timespec tick = {0, 100 * 1000 * 1000};
  for (;;) {
    int sig = sigtimedwait(&set, NULL, &tick);
    if (sig == SIGINT || sig == SIGTERM)
      break;
    /* Print requests in order, each once its stream has closed. */
    while (log && printed < h2s_server_request_count(srv)) {
      const h2s_request *r = h2s_server_request(srv, printed);
      if (!r->closed)
        break;
      print_request(r);
      printed++;
    }
  }
  h2s_server_stop(srv);
  return 0;
}
