/*
 * Helpers shared by the interop cases: failure lines, status and payload
 * checks, protobuf-c packing, metadata and call options, and a waiter for
 * async completions.
 */
#include "interop.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *interop_current_case = "?";

void interop_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  const char *base = strrchr(file, '/');

  fprintf(stderr, "FAIL %s (%s:%d): ", interop_current_case,
          base ? base + 1 : file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* Print |s| (|len| bytes) as a C string literal, so whitespace and UTF-8 in
 * status messages show exactly. */
static void print_escaped(FILE *f, const char *s, size_t len) {
  fputc('"', f);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
    case '\n':
      fputs("\\n", f);
      break;
    case '\r':
      fputs("\\r", f);
      break;
    case '\t':
      fputs("\\t", f);
      break;
    case '"':
    case '\\':
      fputc('\\', f);
      fputc(c, f);
      break;
    default:
      if (c < 0x20 || c >= 0x7f) {
        fprintf(f, "\\x%02x", c);
      } else {
        fputc(c, f);
      }
    }
  }
  fputc('"', f);
}

static const char *code_name(grit_status_code code) {
  const char *name = grit_status_code_name(code);

  return name ? name : "(not a status code)";
}

bool interop_status_is(const grit_status *st, grit_status_code code,
                       const char *message, const char *what) {
  const char *got_msg = st->message ? st->message : "";
  bool ok = st->code == code && (!message || strcmp(got_msg, message) == 0);

  if (ok) {
    return true;
  }
  interop_fail(__FILE__, __LINE__, "%s: status mismatch", what);
  fprintf(stderr, "  expected: %d %s", (int)code, code_name(code));
  if (message) {
    fputs(" message ", stderr);
    print_escaped(stderr, message, strlen(message));
  }
  fprintf(stderr, "\n  got:      %d %s message ", (int)st->code,
          code_name(st->code));
  print_escaped(stderr, got_msg, strlen(got_msg));
  fputc('\n', stderr);
  return false;
}

bool interop_payload_is(const Grpc__Testing__Payload *p, size_t size,
                        const char *what) {
  size_t got = p ? p->body.len : 0;

  if (got != size) {
    interop_fail(__FILE__, __LINE__,
                 "%s: payload body size: expected %zu, got %zu%s", what, size,
                 got, p ? "" : " (no payload)");
    return false;
  }
  if (!p) {
    return true;
  }
  if (p->type != GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE) {
    interop_fail(__FILE__, __LINE__,
                 "%s: payload type: expected COMPRESSABLE (0), got %d", what,
                 (int)p->type);
    return false;
  }
  for (size_t i = 0; i < got; i++) {
    if (p->body.data[i] != 0) {
      interop_fail(__FILE__, __LINE__,
                   "%s: payload body byte %zu: expected 0x00, got 0x%02x", what,
                   i, p->body.data[i]);
      return false;
    }
  }
  return true;
}

bool interop_payload_zeros(Grpc__Testing__Payload *p, size_t size) {
  /* calloc(0) may return NULL; keep a real pointer for empty bodies. */
  uint8_t *body = calloc(size ? size : 1, 1);

  if (!body) {
    return false;
  }
  p->type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  p->body.data = body;
  p->body.len = size;
  return true;
}

void interop_payload_clear(Grpc__Testing__Payload *p) {
  free(p->body.data);
  p->body.data = NULL;
  p->body.len = 0;
}

uint8_t *interop_pack(const ProtobufCMessage *msg, size_t *len) {
  size_t size = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = malloc(size ? size : 1);

  if (!buf) {
    return NULL;
  }
  *len = protobuf_c_message_pack(msg, buf);
  return buf;
}

grit_err interop_send(grit_call *call, const ProtobufCMessage *msg) {
  size_t len = 0;
  uint8_t *buf = interop_pack(msg, &len);

  if (!buf) {
    return GRIT_ERR_NOMEM;
  }
  grit_err err = grit_call_send(call, buf, len);
  free(buf);
  return err;
}

grit_err interop_metadata_create(const interop_ctx *ctx, grit_metadata **out) {
  grit_metadata *md = NULL;
  grit_err err = grit_metadata_create(&md);

  if (err != GRIT_OK) {
    *out = NULL;
    return err;
  }
  for (size_t i = 0; i < grit_metadata_count(ctx->extra_md); i++) {
    const char *key;
    const uint8_t *value;
    size_t len;

    err = grit_metadata_get(ctx->extra_md, i, &key, &value, &len);
    if (err == GRIT_OK) {
      err = grit_metadata_add(md, key, value, len);
    }
    if (err != GRIT_OK) {
      grit_metadata_destroy(md);
      *out = NULL;
      return err;
    }
  }
  *out = md;
  return GRIT_OK;
}

grit_call_opts interop_opts(const interop_ctx *ctx, const grit_metadata *md) {
  grit_call_opts opts = {
      .version = GRIT_CALL_OPTS_VERSION,
      .timeout_ms = ctx->rpc_timeout_ms,
      .metadata = md ? md : ctx->extra_md,
  };

  return opts;
}

void interop_waiter_init(interop_waiter *w) {
  pthread_condattr_t attr;

  pthread_mutex_init(&w->mu, NULL);
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &attr);
  pthread_condattr_destroy(&attr);
  w->done = false;
}

void interop_waiter_free(interop_waiter *w) {
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}

void interop_waiter_signal(interop_waiter *w) {
  pthread_mutex_lock(&w->mu);
  w->done = true;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

bool interop_waiter_wait(interop_waiter *w, uint64_t timeout_ms) {
  struct timespec until;

  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += (time_t)(timeout_ms / 1000);
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&w->mu);
  int rc = 0;
  while (!w->done && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
  }
  bool done = w->done;
  pthread_mutex_unlock(&w->mu);
  return done;
}
