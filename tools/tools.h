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
};
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
