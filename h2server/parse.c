/*
 * Text form of script steps, for the CLI, script files and terse tests:
 *   "path=/pkg.Svc/M repeat=2 trailers_only status=UNAVAILABLE pushback=100"
 * Each token is key or key=value; values may carry %XX escapes. Parsed
 * strings are owned by the step and released by h2s_step_free.
 */
#include "h2s_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const parse_status_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

static const char *const parse_h2_names[] = {
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
};

static const char *const parse_setting_names[] = {
    "",
    "HEADER_TABLE_SIZE",
    "ENABLE_PUSH",
    "MAX_CONCURRENT_STREAMS",
    "INITIAL_WINDOW_SIZE",
    "MAX_FRAME_SIZE",
    "MAX_HEADER_LIST_SIZE",
};

#define PARSE_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool parse_u64(const char *s, uint64_t *out) {
  if (s == NULL || *s == '\0' || *s == '-')
    return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno != 0 || *end != '\0')
    return false;
  *out = v;
  return true;
}

static bool parse_i64(const char *s, int64_t *out) {
  if (s == NULL || *s == '\0')
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno != 0 || *end != '\0')
    return false;
  *out = v;
  return true;
}

int h2s_status_from_name(const char *s) {
  int64_t v;
  if (parse_i64(s, &v))
    return v >= 0 && v <= 0x7fffffff ? (int)v : -1;
  for (size_t i = 0; s && i < PARSE_COUNT(parse_status_names); i++)
    if (strcasecmp(s, parse_status_names[i]) == 0)
      return (int)i;
  return -1;
}

int64_t h2s_h2_error_from_name(const char *s) {
  uint64_t v;
  if (parse_u64(s, &v))
    return v <= UINT32_MAX ? (int64_t)v : -1;
  for (size_t i = 0; s && i < PARSE_COUNT(parse_h2_names); i++)
    if (strcasecmp(s, parse_h2_names[i]) == 0)
      return (int64_t)i;
  return -1;
}

static int parse_hexval(int ch) {
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* Decode %XX escapes in place; returns the new length. */
static size_t parse_unescape(char *s) {
  char *w = s;
  for (const char *r = s; *r; r++) {
    int hi, lo;
    if (r[0] == '%' && (hi = parse_hexval(r[1])) >= 0 &&
        (lo = parse_hexval(r[2])) >= 0) {
      *w++ = (char)(hi * 16 + lo);
      r += 2;
    } else {
      *w++ = *r;
    }
  }
  *w = '\0';
  return (size_t)(w - s);
}

static bool parse_hex(const char *s, uint8_t **out, size_t *len) {
  size_t n = strlen(s);
  if (n % 2)
    return false;
  uint8_t *p = h2s_xmalloc(n / 2);
  for (size_t i = 0; i < n / 2; i++) {
    int hi = parse_hexval(s[2 * i]), lo = parse_hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      free(p);
      return false;
    }
    p[i] = (uint8_t)(hi * 16 + lo);
  }
  *out = p;
  *len = n / 2;
  return true;
}

static bool parse_md(h2s_header *md, const char *v) {
  const char *colon = strchr(v, ':');
  if (colon == NULL || colon == v)
    return false;
  for (size_t i = 0; i < H2S_MAX_MD - 1; i++) {
    if (md[i].name)
      continue;
    char *name = h2s_xmalloc((size_t)(colon - v) + 1);
    memcpy(name, v, (size_t)(colon - v));
    name[colon - v] = '\0';
    md[i].name = name;
    md[i].value = h2s_xstrdup(colon + 1);
    return true;
  }
  return false;
}

static void parse_set_data(h2s_action *a, uint8_t *p, size_t n) {
  free((void *)a->data);
  a->data = p;
  a->len = n;
}

static bool parse_u32_field(const char *v, uint32_t *out) {
  uint64_t n;
  if (!parse_u64(v, &n) || n > UINT32_MAX)
    return false;
  *out = (uint32_t)n;
  return true;
}

static bool parse_h2_field(const char *v, uint32_t *out) {
  int64_t code = h2s_h2_error_from_name(v);
  if (code < 0)
    return false;
  *out = (uint32_t)code;
  return true;
}

/* "A:B": splits at the colon; |a| gets the part before it. */
static char *parse_pair(char *v) {
  char *colon = strchr(v, ':');
  if (colon == NULL || colon == v)
    return NULL;
  *colon = '\0';
  return colon + 1;
}

/* setting=ID:VALUE, the id by number or name (MAX_CONCURRENT_STREAMS). */
static bool parse_setting(h2s_action *a, char *v) {
  char *val = parse_pair(v);
  uint64_t id = 0, n;
  if (val == NULL || !parse_u64(val, &n) || n > UINT32_MAX)
    return false;
  if (!parse_u64(v, &id)) {
    for (size_t i = 1; i < PARSE_COUNT(parse_setting_names); i++)
      if (strcasecmp(v, parse_setting_names[i]) == 0)
        id = i;
  }
  if (id == 0 || id > INT32_MAX)
    return false;
  for (size_t i = 0; i < H2S_MAX_SETTINGS; i++) {
    if (a->settings[i].id == 0) {
      a->settings[i] = (h2s_setting){(int32_t)id, (uint32_t)n};
      return true;
    }
  }
  return false;
}

/* iws_at=BYTES:VALUE */
static bool parse_iws_at(h2s_action *a, char *v) {
  char *val = parse_pair(v);
  uint64_t after, n;
  if (val == NULL || !parse_u64(v, &after) || !parse_u64(val, &n) ||
      n > INT32_MAX || (after == 0 && n == 0))
    return false;
  for (size_t i = 0; i < H2S_MAX_IWS; i++) {
    h2s_iws_change *ch = &a->iws_at[i];
    if (ch->after_bytes == 0 && ch->value == 0) {
      *ch = (h2s_iws_change){after, (uint32_t)n};
      return true;
    }
  }
  return false;
}

static void parse_set_str(const char **field, const char *v) {
  free((char *)*field);
  *field = h2s_xstrdup(v);
}

/* Applies one token. Returns false when it is unknown or its value bad. */
static bool parse_token(h2s_step *st, const char *k, char *v) {
  h2s_action *a = &st->action;
  uint64_t n;
  int64_t i64;
  uint8_t *bytes;
  size_t blen;
  if (v)
    blen = parse_unescape(v);
  else
    blen = 0;
#define IS(name) (strcmp(k, name) == 0)
  if (IS("path") && v) {
    parse_set_str(&st->path, v);
  } else if (IS("repeat") && v) {
    if (strcmp(v, "*") == 0 || strcmp(v, "forever") == 0)
      st->repeat = H2S_FOREVER;
    else if (!parse_u32_field(v, &st->repeat))
      return false;
  } else if (IS("at_headers") && !v) {
    a->at_headers = true;
  } else if (IS("delay") && v) {
    return parse_u32_field(v, &a->delay_ms);
  } else if ((IS("echo") || IS("reply") || IS("ok")) && !v) {
    a->kind = H2S_REPLY;
  } else if (IS("trailers_only") && !v) {
    a->kind = H2S_TRAILERS_ONLY;
  } else if (IS("hang") && !v) {
    a->kind = H2S_HANG;
  } else if (IS("rst")) {
    a->kind = H2S_RST;
    a->rst_code = NGHTTP2_REFUSED_STREAM;
    return !v || parse_h2_field(v, &a->rst_code);
  } else if ((IS("drop") || IS("drop_reset")) && !v) {
    a->kind = H2S_DROP;
    a->drop_reset |= IS("drop_reset");
  } else if (IS("tcp_reset") && !v) {
    a->drop_reset = true;
  } else if (IS("inject") && v) {
    a->kind = H2S_INJECT;
    if (!parse_hex(v, &bytes, &blen))
      return false;
    parse_set_data(a, bytes, blen);
  } else if (IS("continuation_flood") && v) {
    a->kind = H2S_CONTINUATION_FLOOD;
    return parse_u32_field(v, &a->count);
  } else if (IS("http") && v) {
    if (!parse_u64(v, &n) || n < 100 || n > 999)
      return false;
    a->http_status = (int)n;
  } else if (IS("content_type") && v) {
    parse_set_str(&a->content_type, v);
  } else if (IS("status") && v) {
    if ((a->grpc_status = h2s_status_from_name(v)) < 0)
      return false;
  } else if (IS("status_raw") && v) {
    parse_set_str(&a->grpc_status_raw, v);
  } else if (IS("no_grpc_status") && !v) {
    a->no_grpc_status = true;
  } else if (IS("message") && v) {
    parse_set_str(&a->grpc_message, v);
  } else if (IS("pushback") && v) {
    parse_set_str(&a->pushback, v);
  } else if (IS("header") && v) {
    return parse_md(a->headers, v);
  } else if (IS("trailer") && v) {
    return parse_md(a->trailers, v);
  } else if (IS("big_header") && v) {
    if (!parse_u64(v, &n))
      return false;
    a->big_header = (size_t)n;
  } else if (IS("nomsg") && !v) {
    a->body = H2S_BODY_NONE;
  } else if (IS("text") && v) {
    a->body = H2S_BODY_BYTES;
    bytes = h2s_xmalloc(blen);
    memcpy(bytes, v, blen);
    parse_set_data(a, bytes, blen);
  } else if ((IS("hex") || IS("raw")) && v) {
    a->body = IS("hex") ? H2S_BODY_BYTES : H2S_BODY_RAW;
    if (!parse_hex(v, &bytes, &blen))
      return false;
    parse_set_data(a, bytes, blen);
  } else if (IS("size") && v) {
    a->body = H2S_BODY_SIZE;
    if (!parse_u64(v, &n))
      return false;
    a->size = (size_t)n;
  } else if (IS("count") && v) {
    return parse_u32_field(v, &a->count);
  } else if (IS("compressed") && !v) {
    a->compressed = true;
  } else if (IS("prefix_len") && v) {
    return parse_u32_field(v, &a->prefix_len);
  } else if (IS("end") && v) {
    if (strcmp(v, "trailers") == 0)
      a->end = H2S_END_TRAILERS;
    else if (strcmp(v, "hang") == 0)
      a->end = H2S_END_HANG;
    else if (strcmp(v, "rst") == 0)
      a->end = H2S_END_RST;
    else if (strcmp(v, "drop") == 0)
      a->end = H2S_END_DROP;
    else
      return false;
    if (a->end == H2S_END_RST && a->rst_code == 0)
      a->rst_code = NGHTTP2_CANCEL;
  } else if (IS("end_rst") && v) {
    a->end = H2S_END_RST;
    return parse_h2_field(v, &a->rst_code);
  } else if (IS("goaway")) {
    a->goaway = true;
    if (v) {
      if (!parse_i64(v, &i64) || i64 < INT32_MIN || i64 > INT32_MAX)
        return false;
      a->goaway_last_delta = (int32_t)i64;
    }
  } else if (IS("goaway_code") && v) {
    a->goaway = true;
    return parse_h2_field(v, &a->goaway_code);
  } else if (IS("goaway_now") && !v) {
    a->goaway = a->goaway_now = true;
  } else if (IS("ping_flood") && v) {
    return parse_u32_field(v, &a->ping_flood);
  } else if (IS("settings_flood") && v) {
    return parse_u32_field(v, &a->settings_flood);
  } else if (IS("stop_reading") && !v) {
    a->stop_reading = true;
  } else if (IS("freeze_window") && !v) {
    a->freeze_window = true;
  } else if (IS("no_ping_ack") && !v) {
    a->no_ping_ack = true;
  } else if (IS("setting") && v) {
    return parse_setting(a, v);
  } else if (IS("window_step") && v) {
    return parse_u32_field(v, &a->window_step);
  } else if (IS("window_every") && v) {
    return parse_u32_field(v, &a->window_every_ms);
  } else if (IS("iws_at") && v) {
    return parse_iws_at(a, v);
  } else if (IS("data_chunk") && v) {
    return parse_u32_field(v, &a->data_chunk);
  } else if (IS("data_pad") && v) {
    return parse_u32_field(v, &a->data_pad) && a->data_pad <= 255;
  } else {
    return false;
  }
#undef IS
  return true;
}

int h2s_step_parse(const char *line, h2s_step *out, char *err, size_t errlen) {
  *out = (h2s_step){0};
  char *copy = h2s_xstrdup(line);
  int rv = 0;
  for (char *save = NULL, *tok = strtok_r(copy, " \t\r\n,", &save); tok;
       tok = strtok_r(NULL, " \t\r\n,", &save)) {
    char *eq = strchr(tok, '=');
    if (eq)
      *eq = '\0';
    if (!parse_token(out, tok, eq ? eq + 1 : NULL)) {
      if (err && errlen)
        snprintf(err, errlen, "bad token \"%s%s%s\"", tok, eq ? "=" : "",
                 eq ? eq + 1 : "");
      rv = UV_EINVAL;
      break;
    }
  }
  free(copy);
  if (rv != 0)
    h2s_step_free(out);
  return rv;
}

void h2s_step_free(h2s_step *step) {
  free((char *)step->path);
  h2s_action_free(&step->action);
  *step = (h2s_step){0};
}
