/* Helpers shared by the grit subcommands. */
#include "tools.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t tool_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

char *tool_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "grit: cannot open %s: %s\n", path, strerror(errno));
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (cap - n - 1 == 0) {
      char *nb = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
      if (!nb)
        free(buf);
      buf = nb;
      cap *= 2;
    }
  }
  bool failed = ferror(f) != 0;
  fclose(f);
  if (!buf || failed) {
    fprintf(stderr, "grit: cannot read %s\n", path);
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  if (len)
    *len = n;
  return buf;
}

char *tool_read_json_arg(const char *spec, size_t *len) {
  if (spec[0] == '@')
    return tool_read_file(spec + 1, len);
  /* JSON text may start with blanks (RFC 8259 §2); a path never starts
   * with '{' in practice. */
  const char *p = spec;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  if (*p != '{')
    return tool_read_file(spec, len);
  char *s = strdup(spec);
  if (!s) {
    fprintf(stderr, "grit: out of memory\n");
    return NULL;
  }
  if (len)
    *len = strlen(s);
  return s;
}

bool tool_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out) {
  /* strtoull alone takes a sign, blanks and an empty string. */
  if (s[0] < '0' || s[0] > '9')
    return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    return false;
  *out = v;
  return true;
}

void tool_print_base64(FILE *f, const uint8_t *p, size_t n) {
  static const char abc[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
      "0123456789+/";
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16;
    if (i + 1 < n)
      v |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n)
      v |= p[i + 2];
    fputc(abc[v >> 18 & 63], f);
    fputc(abc[v >> 12 & 63], f);
    fputc(i + 1 < n ? abc[v >> 6 & 63] : '=', f);
    fputc(i + 2 < n ? abc[v & 63] : '=', f);
  }
}

bool tool_is_help(const char *arg) {
  return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

bool tool_is_bin_key(const char *k) {
  size_t n = strlen(k);
  return n >= 4 && strcmp(k + n - 4, "-bin") == 0;
}

static int b64val(int c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+' || c == '-')
    return 62;
  if (c == '/' || c == '_')
    return 63;
  return -1;
}

bool tool_parse_base64(const char *s, size_t n, uint8_t **out, size_t *len) {
  /* Padding, if any, completes the last group of 4. */
  size_t pad = 0;
  while (pad < 2 && n > pad && s[n - 1 - pad] == '=')
    pad++;
  if (pad && n % 4 != 0)
    return false;
  size_t m = n - pad; /* symbols */
  if (m % 4 == 1)
    return false;
  uint8_t *b = malloc(m / 4 * 3 + 3);
  if (!b)
    return false;
  size_t k = 0;
  uint32_t acc = 0;
  for (size_t i = 0; i < m; i++) {
    int v = b64val((unsigned char)s[i]);
    if (v < 0) {
      free(b);
      return false;
    }
    acc = acc << 6 | (uint32_t)v;
    if (i % 4 == 3) {
      b[k++] = (uint8_t)(acc >> 16);
      b[k++] = (uint8_t)(acc >> 8);
      b[k++] = (uint8_t)acc;
      acc = 0;
    }
  }
  if (m % 4 == 2) {
    b[k++] = (uint8_t)(acc >> 4);
  } else if (m % 4 == 3) {
    b[k++] = (uint8_t)(acc >> 10);
    b[k++] = (uint8_t)(acc >> 2);
  }
  *out = b;
  *len = k;
  return true;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c = tolower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

bool tool_parse_hex(const char *s, uint8_t **out, size_t *len) {
  size_t n = strlen(s);
  uint8_t *b = malloc(n / 2 + 1);
  size_t k = 0;
  int hi = -1;
  for (size_t i = 0; b && i < n; i++) {
    if (isspace((unsigned char)s[i]))
      continue;
    int v = hexval((unsigned char)s[i]);
    if (v < 0) {
      free(b);
      return false;
    }
    if (hi < 0) {
      hi = v;
    } else {
      b[k++] = (uint8_t)(hi << 4 | v);
      hi = -1;
    }
  }
  if (!b || hi >= 0) {
    free(b);
    return false;
  }
  *out = b;
  *len = k;
  return true;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint64_t pct(const uint64_t *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

tool_pcts tool_percentiles(uint64_t *us, size_t n) {
  qsort(us, n, sizeof(*us), cmp_u64);
  tool_pcts p = {.p50 = pct(us, n, 0.5),
                 .p90 = pct(us, n, 0.9),
                 .p99 = pct(us, n, 0.99),
                 .p999 = pct(us, n, 0.999),
                 .max = n ? us[n - 1] : 0};
  return p;
}

int tool_exit_for_code(grit_status_code code) {
  if (code == GRIT_STATUS_OK)
    return TOOL_EXIT_OK;
  if (code > 0 && code < GRIT_STATUS_COUNT)
    return TOOL_EXIT_STATUS_BASE + (int)code;
  return TOOL_EXIT_FAILED;
}

bool tool_conn_option(tool_conn_flags *c, int key, const char *arg) {
  switch (key) {
  case TOOL_OPT_CERT:
    c->cert = arg;
    return true;
  case TOOL_OPT_KEY:
    c->key = arg;
    return true;
  case TOOL_OPT_INSECURE:
    c->insecure = true;
    return true;
  case TOOL_OPT_TOKEN_FILE:
    c->token_file = arg;
    return true;
  case TOOL_OPT_INSECURE_CREDS:
    c->insecure_creds = true;
    return true;
  case TOOL_OPT_SERVERNAME:
    c->servername = arg;
    return true;
  default:
    return false;
  }
}

grit_err tool_conn_args(const tool_conn_flags *c, grit_channel_args *a) {
  if ((c->cert != NULL) != (c->key != NULL)) {
    fprintf(stderr, "grit: --cert and --key go together (a client "
                    "certificate and its private key)\n");
    return GRIT_ERR_INVALID_ARG;
  }
  bool tls =
      c->tls || c->ca || c->cert || c->key || c->servername || c->insecure;
  grit_err rv = GRIT_OK;
  if (tls)
    rv = grit_channel_args_set_int(a, GRIT_ARG_TLS, 1);
  if (rv == GRIT_OK && c->ca)
    rv = grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS_FILE, c->ca);
  if (rv == GRIT_OK && c->cert)
    rv = grit_channel_args_set_string(a, GRIT_ARG_TLS_CERT_CHAIN_FILE, c->cert);
  if (rv == GRIT_OK && c->key)
    rv = grit_channel_args_set_string(a, GRIT_ARG_TLS_PRIVATE_KEY_FILE, c->key);
  if (rv == GRIT_OK && c->insecure) {
    rv = grit_channel_args_set_int(a, GRIT_ARG_TLS_SKIP_VERIFY, 1);
    fprintf(stderr,
            "grit: WARNING: --insecure: the server's certificate is NOT "
            "checked; anyone on the path can read and change these calls\n");
  }
  if (rv == GRIT_OK && c->authority)
    rv = grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_AUTHORITY,
                                      c->authority);
  /* The TLS name: --servername, else --authority. */
  const char *name = c->servername ? c->servername : c->authority;
  if (rv == GRIT_OK && name && tls)
    rv = grit_channel_args_set_string(a, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE,
                                      name);
  if (rv == GRIT_OK && c->connect_timeout_ms)
    rv = grit_channel_args_set_int(a, GRIT_ARG_MIN_CONNECT_TIMEOUT_MS,
                                   (int64_t)c->connect_timeout_ms);
  if (rv == GRIT_OK && c->token_file) {
    /* Checked before every attempt; over cleartext the call fails
     * UNAUTHENTICATED unless --insecure-credentials (SPEC AP-05). */
    grit_call_credentials *creds = NULL;
    rv = grit_call_credentials_create_token_file(c->token_file, &creds);
    if (rv == GRIT_OK)
      rv = grit_channel_args_set_call_credentials(a, creds);
    grit_call_credentials_unref(creds);
  }
  if (rv == GRIT_OK && c->insecure_creds) {
    if (!c->token_file) {
      fprintf(stderr, "grit: --insecure-credentials goes with --token-file\n");
      return GRIT_ERR_INVALID_ARG;
    }
    if (!tls)
      fprintf(stderr, "grit: WARNING: --insecure-credentials: the token goes "
                      "out in cleartext\n");
    rv = grit_channel_args_set_int(a, GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS,
                                   1);
  }
  return rv;
}
