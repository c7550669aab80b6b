/* Shared pieces of the grit command: argument helpers, latency stats. Only
 * the public API (grit/grit.h) is used.
 * Layout: floor 5 of docs/layout.md. */
#ifndef GRIT_TOOLS_H
#define GRIT_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <grit/grit.h>

/* Each command: run with argv[0] the command's name; its usage on |f|
 * (stdout for -h/--help and 'grit help CMD', stderr on a usage error).
 * Exit status, the same for every command (listed in 'grit help'). */
enum {
  TOOL_EXIT_OK = 0,     /* every call OK, config valid, demo passed */
  TOOL_EXIT_FAILED = 1, /* a call ended non-OK, a config is invalid, ... */
  TOOL_EXIT_USAGE = 2,  /* bad command line, unreadable file argument, ... */
  /* grit call: the call ended with status code C (1..16): exit 64 + C, as
   * grpcurl does, so that a script can tell UNAVAILABLE (78) from
   * NOT_FOUND (69). For a --count run, the most frequent non-OK code (the
   * lowest of a tie). */
  TOOL_EXIT_STATUS_BASE = 64,
};
/* The exit status of a call that ended with |code|. */
int tool_exit_for_code(grit_status_code code);
int cmd_call(int argc, char **argv);
void call_usage(FILE *f);
int cmd_demo(int argc, char **argv);
void demo_usage(FILE *f);
/* demo_lb.c (issue 15): outlier detection and health checking scenes;
 * 0 when the scene's outcome is as expected. */
int demo_scene_outlier(void);
int demo_scene_health(void);
int cmd_config(int argc, char **argv);
void config_usage(FILE *f);
int cmd_list(int argc, char **argv);
void list_usage(FILE *f);
int cmd_describe(int argc, char **argv);
void describe_usage(FILE *f);
/* TLS and connection flags shared by call, list and describe (issue 29):
 * --tls, --ca, --cert, --key, --insecure, --servername, --authority,
 * --connect-timeout. Any of --ca, --cert, --key, --insecure, --servername
 * implies --tls (TLS material means TLS, never cleartext). */
typedef struct tool_conn_flags {
  bool tls, insecure;
  const char *ca, *cert, *key, *servername, *authority;
  uint64_t connect_timeout_ms; /* 0: the library's 20 s */
  /* CR-01: --token-file (a bearer token re-read when the file changes);
   * AP-05: --insecure-credentials lets it go out in cleartext. */
  const char *token_file;
  bool insecure_creds;
} tool_conn_flags;
/* Option keys of the connection flags call, list and describe share (past
 * the char range and below each command's own keys). */
enum {
  TOOL_OPT_CERT = 1300,
  TOOL_OPT_KEY,
  TOOL_OPT_INSECURE,
  TOOL_OPT_TOKEN_FILE,     /* CR-01 */
  TOOL_OPT_INSECURE_CREDS, /* AP-05 */
  TOOL_OPT_SERVERNAME,
};
/* Store option |key| (a TOOL_OPT_*) with its argument |arg| in |c|.
 * False if |key| is not one of them. */
bool tool_conn_option(tool_conn_flags *c, int key, const char *arg);
/* Set the channel arguments for |c| on |a|; prints the --insecure warning
 * on stderr. --key without --cert (or the reverse) is a usage error,
 * returned as GRIT_ERR_INVALID_ARG with a message printed. */
grit_err tool_conn_args(const tool_conn_flags *c, grit_channel_args *a);

/* --metadata 'key: value' (call, list, describe) into |md|: the key
 * lower-cased, blanks around the value dropped, a -bin value in base64.
 * False with a message printed if it is not valid. */
bool tool_add_metadata(grit_metadata *md, const char *arg);

/* -h or --help. */
bool tool_is_help(const char *arg);

/* Read the whole file at |path|. Returns a malloc'd NUL-terminated buffer
 * (|len| bytes before the NUL) or NULL (message printed). */
char *tool_read_file(const char *path, size_t *len);
/* A JSON argument (--service-config, config check): "@path" or a plain
 * path reads the file; text whose first non-blank character is '{' is the
 * JSON itself. Returns a malloc'd NUL-terminated buffer or NULL (message
 * printed). */
char *tool_read_json_arg(const char *spec, size_t *len);
/* A decimal integer in [min, max]: digits only, no sign, blanks or rest. */
bool tool_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* |n| bytes in standard base64 with padding (RFC 4648 §4), as gRPC shows
 * -bin metadata values. */
void tool_print_base64(FILE *f, const uint8_t *p, size_t n);
/* A metadata key ending in "-bin": its value is bytes (SPEC HS-06). */
bool tool_is_bin_key(const char *key);
/* Decode |n| bytes of base64 (RFC 4648 §4 or the URL-safe §5 alphabet,
 * padding optional, as grpcurl takes -bin values) into a malloc'd buffer.
 * Returns false if |s| is not base64. */
bool tool_parse_base64(const char *s, size_t n, uint8_t **out, size_t *len);
/* Decode hex (whitespace allowed) into a malloc'd buffer. */
bool tool_parse_hex(const char *s, uint8_t **out, size_t *len);
uint64_t tool_now_us(void);

/* Latency percentiles over |n| samples (sorted in place). */
typedef struct tool_pcts {
  uint64_t p50, p90, p99, p999, max;
} tool_pcts;
tool_pcts tool_percentiles(uint64_t *us, size_t n);

#endif
