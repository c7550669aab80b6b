/*
 * Just enough of grpc.testing.TestService (grpc/testing/test.proto) for the
 * echo default to answer as a real servicer: SimpleRequest and
 * StreamingOutputCallRequest are read with a tiny protobuf reader, responses
 * carry zero-filled payloads of the asked sizes, response_status becomes the
 * call's status, and the interop echo-metadata headers come back.
 */
#include "h2s_int.h"

#include <stdlib.h>
#include <string.h>

#define TS_PREFIX "/grpc.testing.TestService/"

typedef struct ts_reader {
  const uint8_t *p, *end;
} ts_reader;

typedef struct ts_field {
  uint32_t num;
  uint64_t v;         /* varint value */
  const uint8_t *buf; /* length-delimited value */
  size_t len;
} ts_field;

static bool ts_varint(ts_reader *r, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && r->p < r->end; shift += 7) {
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

/* Next field; false at the end or on malformed input. */
static bool ts_next(ts_reader *r, ts_field *f) {
  uint64_t key;
  if (r->p >= r->end || !ts_varint(r, &key))
    return false;
  *f = (ts_field){.num = (uint32_t)(key >> 3)};
  switch (key & 7) {
  case 0:
    return ts_varint(r, &f->v);
  case 1:
  case 5: {
    size_t n = (key & 7) == 1 ? 8 : 4;
    if ((size_t)(r->end - r->p) < n)
      return false;
    r->p += n;
    return true;
  }
  case 2:
    if (!ts_varint(r, &f->v) || f->v > (uint64_t)(r->end - r->p))
      return false;
    f->buf = r->p;
    f->len = (size_t)f->v;
    r->p += f->len;
    return true;
  default:
    return false;
  }
}

static void ts_put_varint(h2s_buf *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      tmp[n] |= 0x80;
    n++;
  } while (v);
  h2s_buf_add(b, tmp, n);
}

/* Appends field 1 = Payload{body(2) = |size| zero bytes}. */
static void ts_put_payload(h2s_buf *b, size_t size) {
  h2s_buf payload = {0};
  if (size) {
    ts_put_varint(&payload, 2 << 3 | 2);
    ts_put_varint(&payload, size);
    uint8_t *zero = h2s_xcalloc(1, size);
    h2s_buf_add(&payload, zero, size);
    free(zero);
  }
  ts_put_varint(b, 1 << 3 | 2);
  ts_put_varint(b, payload.len);
  h2s_buf_add(b, payload.p, payload.len);
  h2s_buf_free(&payload);
}

static const char *ts_method(const h2s_stream *s) {
  const char *path = s->rec->pub.path;
  if (path == NULL || strncmp(path, TS_PREFIX, strlen(TS_PREFIX)) != 0)
    return NULL;
  return path + strlen(TS_PREFIX);
}

/* response_status (field 7): EchoStatus{code = 1, message = 2}. */
static void ts_echo_status(h2s_stream *s, const ts_field *f) {
  ts_reader r = {f->buf, f->buf + f->len};
  ts_field g;
  while (ts_next(&r, &g)) {
    if (g.num == 1 && g.buf == NULL) {
      s->act.grpc_status = (int)g.v;
    } else if (g.num == 2 && g.buf) {
      char *msg = h2s_xmalloc(g.len + 1);
      memcpy(msg, g.buf, g.len);
      msg[g.len] = '\0';
      free((char *)s->act.grpc_message);
      s->act.grpc_message = msg;
    }
  }
}

bool h2s_testservice_live(const char *path) {
  return path && strcmp(path, TS_PREFIX "FullDuplexCall") == 0;
}

bool h2s_testservice_msg(h2s_stream *s, const uint8_t *p, size_t n) {
  const char *m = ts_method(s);
  if (m == NULL || strcmp(m, "EmptyCall") == 0)
    return false;
  bool unary = strcmp(m, "UnaryCall") == 0;
  bool streaming = strcmp(m, "StreamingOutputCall") == 0 ||
                   strcmp(m, "FullDuplexCall") == 0 ||
                   strcmp(m, "HalfDuplexCall") == 0;
  if (!unary && !streaming)
    return false;
  h2s_buf resp = {0};
  size_t nresp = 0;
  ts_reader r = {p, p + n};
  ts_field f;
  while (ts_next(&r, &f)) {
    if (unary && f.num == 2 && f.buf == NULL) {
      ts_put_payload(&resp, (size_t)f.v);
      nresp = 1;
    } else if (streaming && f.num == 2 && f.buf) {
      /* ResponseParameters{size = 1}: one response each. */
      ts_reader pr = {f.buf, f.buf + f.len};
      ts_field g;
      size_t size = 0;
      while (ts_next(&pr, &g))
        if (g.num == 1 && g.buf == NULL)
          size = (size_t)g.v;
      h2s_buf one = {0};
      ts_put_payload(&one, size);
      h2s_stream_frame(s, one.p, one.len);
      h2s_buf_free(&one);
    } else if (f.num == 7 && f.buf) {
      ts_echo_status(s, &f);
    }
  }
  if (unary && s->act.grpc_status == 0) {
    if (nresp == 0)
      ts_put_payload(&resp, 0);
    h2s_stream_frame(s, resp.p, resp.len);
  }
  h2s_buf_free(&resp);
  return true;
}

static void ts_add_md(h2s_header *md, const char *name, const char *value) {
  for (size_t i = 0; i < H2S_MAX_MD - 1; i++) {
    if (md[i].name == NULL) {
      md[i].name = h2s_xstrdup(name);
      md[i].value = h2s_xstrdup(value);
      return;
    }
  }
}

void h2s_testservice_metadata(h2s_stream *s) {
  if (ts_method(s) == NULL)
    return;
  const char *v = h2s_request_header(&s->rec->pub, "x-grpc-test-echo-initial");
  if (v)
    ts_add_md(s->act.headers, "x-grpc-test-echo-initial", v);
  v = h2s_request_header(&s->rec->pub, "x-grpc-test-echo-trailing-bin");
  if (v)
    ts_add_md(s->act.trailers, "x-grpc-test-echo-trailing-bin", v);
}
