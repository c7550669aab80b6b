/* OTLP trace export, encoded by hand (SPEC OP-02): an
 * opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest with
 * one ResourceSpans (resource service.name), one ScopeSpans (scope
 * "grit") and the spans, wire-compatible with the opentelemetry-proto
 * field numbers (trace/v1/trace.proto, common/v1/common.proto,
 * resource/v1/resource.proto). Pure: no I/O, no clock.
 *
 * Two passes: the sizes of every nested message first, then one write
 * into a buffer reserved once, so a batch costs one allocation. The
 * attribute keys and their KeyValue framing are constant: their sizes are
 * compile-time constants, and each span costs a few hundred instructions
 * (bench/ops-figures, docs/operations.md "Figures"). */
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

uint16_t grit_otlp_put_text(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap);
  memcpy(dst, src, n);
  return (uint16_t)n;
}

void grit_otlp_fix_text(char *s, size_t n) {
  uint8_t *p = (uint8_t *)s;
  if (grit_otlp_ascii(p, n)) /* the usual case */
    return;
  size_t i = 0;
  while (i < n) {
    size_t l = utf8_seq(p + i, n - i);
    if (l) {
      i += l;
    } else {
      p[i++] = '?'; /* OTLP strings are UTF-8: a stray byte becomes '?' */
    }
  }
}

/* ---- sizes ---- */

static inline size_t varint_len(uint64_t v) {
  if (v < 0x80) /* lengths, codes: nearly always one byte */
    return 1;
  size_t n = 1;
  while (v > 0x7f) {
    v >>= 7;
    n++;
  }
  return n;
}

/* A LEN field with a one-byte tag (field numbers up to 15) of |n| bytes. */
static inline size_t len_field(size_t n) {
  return 1 + varint_len(n) + n;
}

/* A VARINT field with a one-byte tag. */
static inline size_t uint_field(uint64_t v) {
  return 1 + varint_len(v);
}

/* The attributes (A72's attempt attributes, and the gRPC status as
 * OpenTelemetry's RPC conventions name it): constant keys. */
#define K_PREV "previous-rpc-attempts"
#define K_TRANSPARENT "transparent-retry"
#define K_ATTEMPTS "grpc.attempts"
#define K_STATUS "rpc.grpc.status_code"
#define K_PEER "net.sock.peer.addr"
#define KLEN(k) (sizeof(k) - 1)

/* Field 9 tag, KeyValue length (key + 6), key tag and length, the key,
 * value tag, AnyValue length 2, and the int_value (3) or bool_value (2)
 * tag. The asserts keep the lengths written here true. */
#define H_PREV "\x4a\x1b\x0a\x15" K_PREV "\x12\x02\x18"
#define H_TRANSPARENT "\x4a\x17\x0a\x11" K_TRANSPARENT "\x12\x02\x10"
#define H_ATTEMPTS "\x4a\x13\x0a\x0d" K_ATTEMPTS "\x12\x02\x18"
#define H_STATUS "\x4a\x1a\x0a\x14" K_STATUS "\x12\x02\x18"
_Static_assert(KLEN(K_PREV) == 0x15, "H_PREV");
_Static_assert(KLEN(K_TRANSPARENT) == 0x11, "H_TRANSPARENT");
_Static_assert(KLEN(K_ATTEMPTS) == 0x0d, "H_ATTEMPTS");
_Static_assert(KLEN(K_STATUS) == 0x14, "H_STATUS");
/* The peer's KeyValue: field 9 tag, then (the length, 24 + the peer's),
 * key tag and length, the key, value tag, then (AnyValue length, 2 + the
 * peer's), string_value tag, then (the peer's length) and the peer. With
 * the peer cut to GRIT_OTLP_PEER_MAX each length is one byte. */
#define H_PEER_KEY "\x0a\x12" K_PEER "\x12"
#define PEER_KV_LEN(n) (1 + 1 + KLEN(H_PEER_KEY) + 1 + 1 + 1 + (n))
_Static_assert(KLEN(K_PEER) == 0x12, "H_PEER_KEY");
_Static_assert(GRIT_OTLP_PEER_MAX + 24 < 0x80, "one-byte peer lengths");

/* KeyValue {1: key, 2: AnyValue {3: int_value}} and the like. */
static inline size_t kv_int_len(size_t klen, uint64_t v) {
  return len_field(klen) + len_field(uint_field(v));
}
static inline size_t kv_bool_len(size_t klen) {
  return len_field(klen) + len_field(2);
}
static inline size_t kv_str_len(size_t klen, size_t n) {
  return len_field(klen) + len_field(len_field(n));
}

/* Status {2: message, 3: code}. */
static size_t status_len(const grit_otlp_span *s) {
  return len_field(s->message_len) + 2;
}

static size_t name_len(const grit_otlp_span *s) {
  return (s->attempt ? KLEN("Attempt.") : KLEN("Sent.")) + s->method_len;
}

/* The attributes of a span whose counts and code are below 128: each is
 * its constant header (H_* above) and one byte. */
static inline size_t attrs_small_len(const grit_otlp_span *s) {
  return (s->attempt ? KLEN(H_PREV) + KLEN(H_TRANSPARENT) + 2
                     : KLEN(H_ATTEMPTS) + 1) +
         KLEN(H_STATUS) + 1;
}

/* Any span's length. */
static size_t span_len_any(const grit_otlp_span *s) {
  size_t nl = name_len(s);
  size_t n = len_field(16) + len_field(8) + 1 + varint_len(nl) + nl +
             2 /* kind */ + 2 * (1 + 8) /* fixed64 start, end */
             + (2 + 4);                 /* fixed32 flags (field 16) */
  if (s->has_parent)
    n += len_field(8);
  if ((s->previous_rpc_attempts | s->attempts | (uint32_t)s->code) < 0x80) {
    n += attrs_small_len(s);
  } else {
    if (s->attempt)
      n += len_field(kv_int_len(KLEN(K_PREV), s->previous_rpc_attempts)) +
           len_field(kv_bool_len(KLEN(K_TRANSPARENT)));
    else
      n += len_field(kv_int_len(KLEN(K_ATTEMPTS), s->attempts));
    n += len_field(kv_int_len(KLEN(K_STATUS), (uint64_t)(int64_t)s->code));
  }
  if (s->peer_len)
    n += PEER_KV_LEN(s->peer_len);
  if (s->code != 0)
    n += len_field(status_len(s));
  return n;
}

/* The same for the usual span (status OK, counts below 128) in a few
 * adds: small attributes, the name's length one or two bytes. The
 * encoder's size pass runs this per span; test_observe's otlp_shapes
 * covers both. */
#define SPAN_FIXED                                                             \
  (len_field(16) + len_field(8) + 1 + 1 /* name tag, length's 1st byte */ +    \
   2 /* kind */ + 2 * (1 + 8) + (2 + 4))
static inline size_t span_len(const grit_otlp_span *s) {
  if ((s->previous_rpc_attempts | s->attempts) >= 0x80 || s->code != 0)
    return span_len_any(s);
  size_t nl = name_len(s);
  return SPAN_FIXED + nl + (nl >= 0x80) + (s->has_parent ? len_field(8) : 0) +
         attrs_small_len(s) + (s->peer_len ? PEER_KV_LEN(s->peer_len) : 0);
}

/* ---- writing (into space reserved by the sizes above) ---- */

static inline uint8_t *w_varint(uint8_t *p, uint64_t v) {
  if (v < 0x80) { /* tags, lengths, codes: nearly always one byte */
    *p = (uint8_t)v;
    return p + 1;
  }
  while (v > 0x7f) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline uint8_t *w_tag(uint8_t *p, unsigned field, unsigned wt) {
  return w_varint(p, (uint64_t)field << 3 | wt);
}

static inline uint8_t *w_len(uint8_t *p, unsigned field, size_t n) {
  return w_varint(w_tag(p, field, WT_LEN), n);
}

/* The same for a length of two varint bytes, the usual span's. */
static inline uint8_t *w_len2(uint8_t *p, unsigned field, size_t n) {
  if (n < 0x80 || n >= 0x4000)
    return w_len(p, field, n);
  p[0] = (uint8_t)(field << 3 | WT_LEN);
  p[1] = (uint8_t)(n | 0x80);
  p[2] = (uint8_t)(n >> 7);
  return p + 3;
}

static inline uint8_t *w_bytes(uint8_t *p, unsigned field, const void *d,
                               size_t n) {
  p = w_len(p, field, n);
  memcpy(p, d, n);
  return p + n;
}

/* A string field from raw bytes, made valid UTF-8 in the output. */
static inline uint8_t *w_text(uint8_t *p, unsigned field, const char *s,
                              size_t n) {
  p = w_bytes(p, field, s, n);
  grit_otlp_fix_text((char *)p - n, n);
  return p;
}

static inline uint8_t *w_uint(uint8_t *p, unsigned field, uint64_t v) {
  return w_varint(w_tag(p, field, WT_VARINT), v);
}

static inline uint8_t *w_fixed(uint8_t *p, unsigned field, unsigned wt,
                               uint64_t v, int bytes) {
  p = w_tag(p, field, wt);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (bytes == 8) { /* protobuf fixed fields are little-endian, as here */
    memcpy(p, &v, 8);
    return p + 8;
  }
  if (bytes == 4) {
    uint32_t w = (uint32_t)v;
    memcpy(p, &w, 4);
    return p + 4;
  }
#endif
  for (int i = 0; i < bytes; i++)
    *p++ = (uint8_t)(v >> (8 * i));
  return p;
}

/* Span.attributes (field 9) entries. */
static inline uint8_t *w_kv_int(uint8_t *p, const char *k, size_t klen,
                                uint64_t v) {
  p = w_len(p, 9, kv_int_len(klen, v));
  p = w_bytes(p, 1, k, klen);
  p = w_len(p, 2, uint_field(v));
  return w_uint(p, 3, v); /* int64: two's complement */
}

/* The same for a value below 128, the usual case: the whole KeyValue
 * but its last byte is constant, |hdr| (|n| bytes) below. */
static inline uint8_t *w_kv_small(uint8_t *p, const char *hdr, size_t n,
                                  uint8_t v) {
  memcpy(p, hdr, n);
  p[n] = v;
  return p + n + 1;
}

#define W_KV_SMALL(p, h, v) w_kv_small(p, h, KLEN(h), (uint8_t)(v))

/* The peer attribute (|n| <= GRIT_OTLP_PEER_MAX bytes at |peer|). */
static inline uint8_t *w_kv_peer(uint8_t *p, const char *peer, size_t n) {
  p[0] = 9 << 3 | WT_LEN;
  p[1] = (uint8_t)(PEER_KV_LEN(n) - 2);
  memcpy(p + 2, H_PEER_KEY, KLEN(H_PEER_KEY));
  p += 2 + KLEN(H_PEER_KEY);
  p[0] = (uint8_t)(n + 2);
  p[1] = 1 << 3 | WT_LEN;
  p[2] = (uint8_t)n;
  memcpy(p + 3, peer, n);
  if (!grit_otlp_ascii(p + 3, n))
    grit_otlp_fix_text((char *)p + 3, n);
  return p + 3 + n;
}

static uint8_t *w_span(uint8_t *p, const grit_otlp_span *s, size_t len) {
  p = w_len2(p, 2, len); /* ScopeSpans.spans */
  p = w_bytes(p, 1, s->trace_id, 16);
  p = w_bytes(p, 2, s->span_id, 8);
  if (s->has_parent)
    p = w_bytes(p, 4, s->parent_span_id, 8);
  p = w_len(p, 5, name_len(s));
  if (s->attempt) {
    memcpy(p, "Attempt.", KLEN("Attempt."));
    p += KLEN("Attempt.");
  } else {
    memcpy(p, "Sent.", KLEN("Sent."));
    p += KLEN("Sent.");
  }
  memcpy(p, GRIT_OTLP_METHOD(s), s->method_len);
  if (!s->method_ascii) /* the producer looked once per call */
    grit_otlp_fix_text((char *)p, s->method_len);
  p += s->method_len;
  p = w_uint(p, 6, s->attempt ? SPAN_KIND_INTERNAL : SPAN_KIND_CLIENT);
  p = w_fixed(p, 7, WT_I64, s->start_ns, 8);
  p = w_fixed(p, 8, WT_I64, s->end_ns, 8);
  if (s->attempt) {
    p = s->previous_rpc_attempts < 0x80
            ? W_KV_SMALL(p, H_PREV, s->previous_rpc_attempts)
            : w_kv_int(p, K_PREV, KLEN(K_PREV), s->previous_rpc_attempts);
    p = W_KV_SMALL(p, H_TRANSPARENT, s->transparent_retry);
  } else {
    p = s->attempts < 0x80
            ? W_KV_SMALL(p, H_ATTEMPTS, s->attempts)
            : w_kv_int(p, K_ATTEMPTS, KLEN(K_ATTEMPTS), s->attempts);
  }
  p = s->code >= 0 && s->code < 0x80
          ? W_KV_SMALL(p, H_STATUS, s->code)
          : w_kv_int(p, K_STATUS, KLEN(K_STATUS), (uint64_t)(int64_t)s->code);
  if (s->peer_len)
    p = w_kv_peer(p, GRIT_OTLP_PEER(s), s->peer_len);
  if (s->code != 0) { /* OK leaves the status unset; others are ERROR */
    p = w_len(p, 15, status_len(s));
    p = w_text(p, 2, GRIT_OTLP_MESSAGE(s), s->message_len);
    p = w_uint(p, 3, STATUS_CODE_ERROR);
  }
  return w_fixed(p, 16, WT_I32, s->flags, 4);
}

/* The request's parts: the sizes of the nested messages (every span's
 * kept for the write, up to OTLP_LENS of them). */
#define OTLP_LENS 2048
typedef struct otlp_req {
  const char *svc;
  size_t svc_len, svc_kv, res, scope, ss, rs, total;
  size_t lens[OTLP_LENS];
} otlp_req;

static void req_size(otlp_req *r, const grit_otlp_span *spans, size_t n,
                     const char *service_name) {
  r->svc = service_name;
  r->svc_len = strlen(service_name);
  r->svc_kv = kv_str_len(KLEN("service.name"), r->svc_len);
  r->res = len_field(r->svc_kv);
  r->scope = len_field(4) + len_field(strlen(GRIT_VERSION));
  r->ss = len_field(r->scope);
  size_t ss = r->ss;
  for (size_t i = 0; i < n; i++) {
    size_t l = span_len(&spans[i]);
    if (i < OTLP_LENS)
      r->lens[i] = l;
    /* A span's length: two bytes, nearly always. */
    ss += 1 + (l >= 0x80 && l < 0x4000 ? 2 : varint_len(l)) + l;
  }
  r->ss = ss;
  r->rs = len_field(r->res) + len_field(r->ss);
  r->total = len_field(r->rs);
}

static void req_write(const otlp_req *r, const grit_otlp_span *spans, size_t n,
                      uint8_t *p) {
  uint8_t *start = p;
  p = w_len(p, 1, r->rs);  /* ExportTraceServiceRequest.resource_spans */
  p = w_len(p, 1, r->res); /* ResourceSpans.resource */
  /* Resource.attributes (field 1) {service.name: string} */
  p = w_len(p, 1, r->svc_kv);
  p = w_bytes(p, 1, "service.name", KLEN("service.name"));
  p = w_len(p, 2, len_field(r->svc_len));
  p = w_text(p, 1, r->svc, r->svc_len);
  p = w_len(p, 2, r->ss);    /* ResourceSpans.scope_spans */
  p = w_len(p, 1, r->scope); /* ScopeSpans.scope */
  p = w_bytes(p, 1, "grit", 4);
  p = w_bytes(p, 2, GRIT_VERSION, strlen(GRIT_VERSION));
  for (size_t i = 0; i < n; i++)
    p = w_span(p, &spans[i], i < OTLP_LENS ? r->lens[i] : span_len(&spans[i]));
  GRIT_ASSERT((size_t)(p - start) == r->total);
}

grit_err grit_otlp_encode(const grit_otlp_span *spans, size_t n,
                          const char *service_name, grit_buf *out) {
  otlp_req r;
  req_size(&r, spans, n, service_name);
  grit_err rv = grit_buf_reserve(out, r.total);
  if (rv != GRIT_OK)
    return rv;
  req_write(&r, spans, n, out->data + out->len);
  out->len += r.total;
  return GRIT_OK;
}

grit_err grit_otlp_encode_slice(const grit_otlp_span *spans, size_t n,
                                const char *service_name, size_t head,
                                grit_slice **io, size_t *cap) {
  otlp_req r;
  req_size(&r, spans, n, service_name);
  size_t need = head + r.total;
  if (!*io || *cap < need) {
    grit_slice_unref(*io);
    *cap = need + need / 4; /* room for somewhat longer batches */
    *io = grit_slice_new(*cap);
    if (!*io) {
      *cap = 0;
      return GRIT_ERR_NOMEM;
    }
  }
  (*io)->len = need;
  req_write(&r, spans, n, (*io)->data + head);
  return GRIT_OK;
}
