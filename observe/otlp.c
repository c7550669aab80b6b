/* OTLP trace export, encoded by hand (SPEC OP-02): an
 * opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest with
 * one ResourceSpans (resource service.name), one ScopeSpans (scope
 * "grit") and the spans, wire-compatible with the opentelemetry-proto
 * field numbers (trace/v1/trace.proto, common/v1/common.proto,
 * resource/v1/resource.proto). Pure: no I/O, no clock. */
#include "observe/observe.h"

#include <string.h>

/* Protobuf wire types. */
#define WT_VARINT 0
#define WT_I64 1
#define WT_LEN 2
#define WT_I32 5

static grit_err put_varint(grit_buf *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return grit_buf_append(b, tmp, n);
}

static grit_err put_tag(grit_buf *b, unsigned field, unsigned wt) {
  return put_varint(b, (uint64_t)field << 3 | wt);
}

static grit_err put_bytes(grit_buf *b, unsigned field, const void *p,
                          size_t n) {
  grit_err rv = put_tag(b, field, WT_LEN);
  if (rv == GRIT_OK)
    rv = put_varint(b, n);
  if (rv == GRIT_OK && n)
    rv = grit_buf_append(b, p, n);
  return rv;
}

static grit_err put_str(grit_buf *b, unsigned field, const char *s) {
  return put_bytes(b, field, s, strlen(s));
}

static grit_err put_fixed64(grit_buf *b, unsigned field, uint64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; i++)
    le[i] = (uint8_t)(v >> (8 * i));
  grit_err rv = put_tag(b, field, WT_I64);
  return rv == GRIT_OK ? grit_buf_append(b, le, 8) : rv;
}

static grit_err put_fixed32(grit_buf *b, unsigned field, uint32_t v) {
  uint8_t le[4];
  for (int i = 0; i < 4; i++)
    le[i] = (uint8_t)(v >> (8 * i));
  grit_err rv = put_tag(b, field, WT_I32);
  return rv == GRIT_OK ? grit_buf_append(b, le, 4) : rv;
}

static grit_err put_uint(grit_buf *b, unsigned field, uint64_t v) {
  grit_err rv = put_tag(b, field, WT_VARINT);
  return rv == GRIT_OK ? put_varint(b, v) : rv;
}

/* A nested message: |sub| as field |field| of |b|. */
static grit_err put_msg(grit_buf *b, unsigned field, const grit_buf *sub) {
  return put_bytes(b, field, sub->data, sub->len);
}

/* KeyValue {1: key, 2: AnyValue {1: string_value | 2: bool_value |
 * 3: int_value}}. */
typedef enum { KV_STR, KV_BOOL, KV_INT } kv_kind;

static grit_err put_kv(grit_buf *b, unsigned field, const char *key,
                       kv_kind kind, const char *s, int64_t i) {
  grit_buf any, kv;
  grit_buf_init(&any);
  grit_buf_init(&kv);
  grit_err rv = GRIT_OK;
  switch (kind) {
  case KV_STR:
    rv = put_str(&any, 1, s);
    break;
  case KV_BOOL:
    rv = put_uint(&any, 2, i != 0);
    break;
  case KV_INT:
    rv = put_uint(&any, 3, (uint64_t)i); /* int64: two's complement */
    break;
  }
  if (rv == GRIT_OK)
    rv = put_str(&kv, 1, key);
  if (rv == GRIT_OK)
    rv = put_msg(&kv, 2, &any);
  if (rv == GRIT_OK)
    rv = put_msg(b, field, &kv);
  grit_buf_free(&any);
  grit_buf_free(&kv);
  return rv;
}

/* Span kinds and status codes of trace.proto. */
#define SPAN_KIND_INTERNAL 1
#define SPAN_KIND_CLIENT 3
#define STATUS_CODE_ERROR 2

static grit_err put_span(grit_buf *b, const grit_otlp_span *s) {
  grit_buf sp, st;
  grit_buf_init(&sp);
  grit_buf_init(&st);
  grit_err rv = put_bytes(&sp, 1, s->trace_id, 16);
  if (rv == GRIT_OK)
    rv = put_bytes(&sp, 2, s->span_id, 8);
  if (rv == GRIT_OK && s->has_parent)
    rv = put_bytes(&sp, 4, s->parent_span_id, 8);
  if (rv == GRIT_OK)
    rv = put_str(&sp, 5, s->name);
  if (rv == GRIT_OK)
    rv = put_uint(&sp, 6, s->attempt ? SPAN_KIND_INTERNAL : SPAN_KIND_CLIENT);
  if (rv == GRIT_OK)
    rv = put_fixed64(&sp, 7, s->start_ns);
  if (rv == GRIT_OK)
    rv = put_fixed64(&sp, 8, s->end_ns);
  /* A72's attempt attributes, and the gRPC status as OpenTelemetry's RPC
   * conventions name it. */
  if (rv == GRIT_OK && s->attempt)
    rv = put_kv(&sp, 9, "previous-rpc-attempts", KV_INT, NULL,
                s->previous_rpc_attempts);
  if (rv == GRIT_OK && s->attempt)
    rv = put_kv(&sp, 9, "transparent-retry", KV_BOOL, NULL,
                s->transparent_retry);
  if (rv == GRIT_OK && !s->attempt)
    rv = put_kv(&sp, 9, "grpc.attempts", KV_INT, NULL, s->attempts);
  if (rv == GRIT_OK)
    rv = put_kv(&sp, 9, "rpc.grpc.status_code", KV_INT, NULL, s->code);
  if (rv == GRIT_OK && s->peer[0])
    rv = put_kv(&sp, 9, "net.sock.peer.addr", KV_STR, s->peer, 0);
  /* Status {2: message, 3: code}: OK leaves it unset, others ERROR. */
  if (rv == GRIT_OK && s->code != 0) {
    rv = put_str(&st, 2, s->message);
    if (rv == GRIT_OK)
      rv = put_uint(&st, 3, STATUS_CODE_ERROR);
    if (rv == GRIT_OK)
      rv = put_msg(&sp, 15, &st);
  }
  if (rv == GRIT_OK)
    rv = put_fixed32(&sp, 16, s->flags);
  if (rv == GRIT_OK)
    rv = put_msg(b, 2, &sp); /* ScopeSpans.spans */
  grit_buf_free(&sp);
  grit_buf_free(&st);
  return rv;
}

grit_err grit_otlp_encode(const grit_otlp_span *spans, size_t n,
                          const char *service_name, grit_buf *out) {
  grit_buf res, scope, ss, rs;
  grit_buf_init(&res);
  grit_buf_init(&scope);
  grit_buf_init(&ss);
  grit_buf_init(&rs);
  /* Resource {1: attributes}; InstrumentationScope {1: name, 2: version}. */
  grit_err rv = put_kv(&res, 1, "service.name", KV_STR, service_name, 0);
  if (rv == GRIT_OK)
    rv = put_str(&scope, 1, "grit");
  if (rv == GRIT_OK)
    rv = put_str(&scope, 2, GRIT_VERSION);
  /* ScopeSpans {1: scope, 2: spans}. */
  if (rv == GRIT_OK)
    rv = put_msg(&ss, 1, &scope);
  for (size_t i = 0; i < n && rv == GRIT_OK; i++)
    rv = put_span(&ss, &spans[i]);
  /* ResourceSpans {1: resource, 2: scope_spans}. */
  if (rv == GRIT_OK)
    rv = put_msg(&rs, 1, &res);
  if (rv == GRIT_OK)
    rv = put_msg(&rs, 2, &ss);
  /* ExportTraceServiceRequest {1: resource_spans}. */
  if (rv == GRIT_OK)
    rv = put_msg(out, 1, &rs);
  grit_buf_free(&res);
  grit_buf_free(&scope);
  grit_buf_free(&ss);
  grit_buf_free(&rs);
  return rv;
}
