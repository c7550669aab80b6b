/* OTLP trace export, encoded by hand (SPEC OP-02): an
 * opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest with
 * one ResourceSpans (resource service.name), one ScopeSpans (scope
 * "grit") and the spans, wire-compatible with the opentelemetry-proto
 * field numbers (trace/v1/trace.proto, common/v1/common.proto,
 * resource/v1/resource.proto). Pure: no I/O, no clock.
 *
 * Two passes: the sizes of every nested message first, then one write
 * into a buffer reserved once, so a batch costs one allocation and each
 * span a few hundred instructions. */
#include "observe/observe.h"

#include <string.h>

/* Protobuf wire types. */
#define WT_VARINT 0
#define WT_I64 1
#define WT_LEN 2
#define WT_I32 5

/* Span kinds and status codes of trace.proto. */
#define SPAN_KIND_INTERNAL 1
#define SPAN_KIND_CLIENT 3
#define STATUS_CODE_ERROR 2

/* ---- text fields ---- */

/* The length of the valid UTF-8 sequence at |p| (|n| bytes left), or 0
 * (RFC 3629: no overlongs, no surrogates, at most U+10FFFF). */
static size_t utf8_seq(const uint8_t *p, size_t n) {
  uint8_t c = p[0];
  size_t len;
  uint32_t min, cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    min = 0x80;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    min = 0x800;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    min = 0x10000;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

void grit_otlp_copy_text(char *dst, size_t cap, const char *src) {
  const uint8_t *p = (const uint8_t *)src;
  size_t n = strlen(src), k = 0, i = 0;
  while (i < n) {
    size_t l = utf8_seq(p + i, n - i);
    if (k + (l ? l : 1) >= cap)
      break; /* cut to fit, never inside a character */
    if (l) {
      memcpy(dst + k, p + i, l);
      k += l;
      i += l;
    } else {
      dst[k++] = '?'; /* OTLP strings are UTF-8: a stray byte becomes '?' */
      i++;
    }
  }
  dst[k] = '\0';
}

/* ---- sizes ---- */

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v > 0x7f) {
    v >>= 7;
    n++;
  }
  return n;
}

/* A field with a one-byte tag (field numbers up to 15) or two. */
static size_t tag_len(unsigned field) {
  return field < 16 ? 1 : 2;
}

static size_t len_field(unsigned field, size_t n) {
  return tag_len(field) + varint_len(n) + n;
}

static size_t uint_field(unsigned field, uint64_t v) {
  return tag_len(field) + varint_len(v);
}

typedef enum { KV_STR, KV_BOOL, KV_INT } kv_kind;

/* AnyValue {1: string_value | 2: bool_value | 3: int_value}. */
static size_t any_len(kv_kind k, const char *s, int64_t i) {
  switch (k) {
  case KV_STR:
    return len_field(1, strlen(s));
  case KV_BOOL:
    return uint_field(2, i != 0);
  case KV_INT:
    return uint_field(3, (uint64_t)i);
  }
  return 0;
}

/* KeyValue {1: key, 2: value}. */
static size_t kv_len(const char *key, kv_kind k, const char *s, int64_t i) {
  return len_field(1, strlen(key)) + len_field(2, any_len(k, s, i));
}

/* Status {2: message, 3: code}. */
static size_t status_len(const grit_otlp_span *s) {
  return len_field(2, strlen(s->message)) + uint_field(3, STATUS_CODE_ERROR);
}

/* The span's attributes, in the order written (A72's attempt attributes,
 * and the gRPC status as OpenTelemetry's RPC conventions name it). */
typedef struct attr {
  const char *key;
  kv_kind kind;
  const char *s;
  int64_t i;
} attr;

static size_t span_attrs(const grit_otlp_span *s, attr out[5]) {
  size_t n = 0;
  if (s->attempt) {
    out[n++] =
        (attr){"previous-rpc-attempts", KV_INT, NULL, s->previous_rpc_attempts};
    out[n++] = (attr){"transparent-retry", KV_BOOL, NULL, s->transparent_retry};
  } else {
    out[n++] = (attr){"grpc.attempts", KV_INT, NULL, s->attempts};
  }
  out[n++] = (attr){"rpc.grpc.status_code", KV_INT, NULL, s->code};
  if (s->peer[0])
    out[n++] = (attr){"net.sock.peer.addr", KV_STR, s->peer, 0};
  return n;
}

static size_t span_len(const grit_otlp_span *s) {
  size_t n = len_field(1, 16) + len_field(2, 8) +
             (s->has_parent ? len_field(4, 8) : 0) +
             len_field(5, strlen(s->name)) +
             uint_field(6, s->attempt ? SPAN_KIND_INTERNAL : SPAN_KIND_CLIENT) +
             2 * (1 + 8) /* fixed64 start, end */
             + (2 + 4);  /* fixed32 flags (field 16) */
  attr a[5];
  size_t na = span_attrs(s, a);
  for (size_t i = 0; i < na; i++)
    n += len_field(9, kv_len(a[i].key, a[i].kind, a[i].s, a[i].i));
  if (s->code != 0)
    n += len_field(15, status_len(s));
  return n;
}

/* ---- writing (into space reserved by the sizes above) ---- */

static uint8_t *w_varint(uint8_t *p, uint64_t v) {
  while (v > 0x7f) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static uint8_t *w_tag(uint8_t *p, unsigned field, unsigned wt) {
  return w_varint(p, (uint64_t)field << 3 | wt);
}

static uint8_t *w_len(uint8_t *p, unsigned field, size_t n) {
  return w_varint(w_tag(p, field, WT_LEN), n);
}

static uint8_t *w_bytes(uint8_t *p, unsigned field, const void *d, size_t n) {
  p = w_len(p, field, n);
  memcpy(p, d, n);
  return p + n;
}

static uint8_t *w_str(uint8_t *p, unsigned field, const char *s) {
  return w_bytes(p, field, s, strlen(s));
}

static uint8_t *w_uint(uint8_t *p, unsigned field, uint64_t v) {
  return w_varint(w_tag(p, field, WT_VARINT), v);
}

static uint8_t *w_fixed(uint8_t *p, unsigned field, unsigned wt, uint64_t v,
                        int bytes) {
  p = w_tag(p, field, wt);
  for (int i = 0; i < bytes; i++)
    *p++ = (uint8_t)(v >> (8 * i));
  return p;
}

static uint8_t *w_kv(uint8_t *p, unsigned field, const attr *a) {
  p = w_len(p, field, kv_len(a->key, a->kind, a->s, a->i));
  p = w_str(p, 1, a->key);
  p = w_len(p, 2, any_len(a->kind, a->s, a->i));
  switch (a->kind) {
  case KV_STR:
    return w_str(p, 1, a->s);
  case KV_BOOL:
    return w_uint(p, 2, a->i != 0);
  case KV_INT:
    return w_uint(p, 3, (uint64_t)a->i); /* int64: two's complement */
  }
  return p;
}

static uint8_t *w_span(uint8_t *p, const grit_otlp_span *s, size_t len) {
  p = w_len(p, 2, len); /* ScopeSpans.spans */
  p = w_bytes(p, 1, s->trace_id, 16);
  p = w_bytes(p, 2, s->span_id, 8);
  if (s->has_parent)
    p = w_bytes(p, 4, s->parent_span_id, 8);
  p = w_str(p, 5, s->name);
  p = w_uint(p, 6, s->attempt ? SPAN_KIND_INTERNAL : SPAN_KIND_CLIENT);
  p = w_fixed(p, 7, WT_I64, s->start_ns, 8);
  p = w_fixed(p, 8, WT_I64, s->end_ns, 8);
  attr a[5];
  size_t na = span_attrs(s, a);
  for (size_t i = 0; i < na; i++)
    p = w_kv(p, 9, &a[i]);
  if (s->code != 0) { /* OK leaves the status unset; others are ERROR */
    p = w_len(p, 15, status_len(s));
    p = w_str(p, 2, s->message);
    p = w_uint(p, 3, STATUS_CODE_ERROR);
  }
  return w_fixed(p, 16, WT_I32, s->flags, 4);
}

grit_err grit_otlp_encode(const grit_otlp_span *spans, size_t n,
                          const char *service_name, grit_buf *out) {
  attr svc = {"service.name", KV_STR, service_name, 0};
  size_t res = len_field(1, kv_len(svc.key, svc.kind, svc.s, 0));
  size_t scope = len_field(1, 4) + len_field(2, strlen(GRIT_VERSION));
  size_t ss = len_field(1, scope);
  size_t lens[512]; /* the sizes of the first spans, kept for the write */
  for (size_t i = 0; i < n; i++) {
    size_t l = span_len(&spans[i]);
    if (i < 512)
      lens[i] = l;
    ss += len_field(2, l);
  }
  size_t rs = len_field(1, res) + len_field(2, ss);
  size_t total = len_field(1, rs);
  grit_err rv = grit_buf_reserve(out, total);
  if (rv != GRIT_OK)
    return rv;
  uint8_t *p = out->data + out->len, *start = p;
  p = w_len(p, 1, rs);  /* ExportTraceServiceRequest.resource_spans */
  p = w_len(p, 1, res); /* ResourceSpans.resource */
  p = w_kv(p, 1, &svc);
  p = w_len(p, 2, ss);    /* ResourceSpans.scope_spans */
  p = w_len(p, 1, scope); /* ScopeSpans.scope */
  p = w_str(p, 1, "grit");
  p = w_str(p, 2, GRIT_VERSION);
  for (size_t i = 0; i < n; i++)
    p = w_span(p, &spans[i], i < 512 ? lens[i] : span_len(&spans[i]));
  GRIT_ASSERT((size_t)(p - start) == total);
  out->len += total;
  return GRIT_OK;
}
