/* grpc-status-details-bin (a google.rpc.Status) for people: as proto3 JSON
 * and as text lines, with the standard error details (BadRequest,
 * ErrorInfo, RetryInfo, QuotaFailure, PreconditionFailure, ResourceInfo,
 * Help, LocalizedMessage, DebugInfo, RequestInfo) decoded through the
 * descriptors embedded in rpc_desc.c; a detail of another type is shown
 * by its type URL. */
#include "pbjson/pbjson_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const uint8_t pbj_rpc_desc[];
extern const size_t pbj_rpc_desc_len;

bool pbj_pool_add_rpc_status(pbj_pool *pool, char *err, size_t errlen) {
  return pbj_pool_add_set(pool, pbj_rpc_desc, pbj_rpc_desc_len, err, errlen);
}

/* A pool of the embedded files, or NULL (|err| set). */
static pbj_pool *rpc_pool(char *err, size_t errlen) {
  pbj_pool *pool = pbj_pool_create();
  if (!pool) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (!pbj_pool_add_rpc_status(pool, err, errlen)) {
    pbj_pool_destroy(pool);
    return NULL;
  }
  return pool;
}

char *pbj_status_json(const uint8_t *p, size_t n, char *err, size_t errlen) {
  pbj_pool *pool = rpc_pool(err, errlen);
  if (!pool)
    return NULL;
  char *json = pbj_to_json_ex(pool, "google.rpc.Status", p, n, PBJ_ANY_RAW,
                              NULL, 0, err, errlen);
  pbj_pool_destroy(pool);
  return json;
}

/* One detail (an Any's bytes) as "  NAME {json}\n" or "  URL (N bytes,
 * ...)\n". */
static bool put_detail(const pbj_pool *pool, pbj_buf *b, const uint8_t *p,
                       size_t n, char *err, size_t errlen) {
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w, url = {0}, val = {0};
  int r;
  while ((r = pbj_wire_next(&q, end, &w)) == 1) {
    if (w.num == 1 && w.wt == 2)
      url = w;
    else if (w.num == 2 && w.wt == 2)
      val = w;
  }
  if (r < 0) {
    snprintf(err, errlen, "a malformed detail (google.protobuf.Any)");
    return false;
  }
  const uint8_t *slash =
      url.len && url.data ? memrchr(url.data, '/', url.len) : NULL;
  size_t off = slash ? (size_t)(slash - url.data) + 1 : 0;
  char name[256];
  snprintf(name, sizeof(name), "%.*s",
           (int)(url.len - off > 255 ? 255 : url.len - off),
           url.data ? (const char *)url.data + off : "");
  pbj_puts(b, "  ");
  if (!pbj_pool_has_message(pool, name)) {
    pbj_put_json_string(b, url.data ? (const char *)url.data : "", url.len);
    pbj_putf(b, " (%zu bytes, not a standard error detail)\n", val.len);
    return true;
  }
  char *json = pbj_to_json_ex(pool, name, val.data ? val.data : (uint8_t *)"",
                              val.len, PBJ_ANY_RAW, NULL, 0, err, errlen);
  if (!json)
    return false;
  pbj_putf(b, "%s %s\n", name, json);
  free(json);
  return true;
}

char *pbj_status_text(const uint8_t *p, size_t n, char *err, size_t errlen) {
  pbj_pool *pool = rpc_pool(err, errlen);
  if (!pool)
    return NULL;
  const uint8_t *q = p, *end = p + n;
  pbj_wire_field w;
  int64_t code = 0;
  const uint8_t *msg = NULL;
  size_t msg_len = 0;
  size_t details = 0;
  int r;
  while ((r = pbj_wire_next(&q, end, &w)) == 1) {
    if (w.num == 1 && w.wt == 0)
      code = (int32_t)(uint32_t)w.v;
    else if (w.num == 2 && w.wt == 2) {
      msg = w.data;
      msg_len = w.len;
    } else if (w.num == 3 && w.wt == 2)
      details++;
  }
  pbj_buf b = {0};
  bool ok = r == 0;
  if (!ok)
    snprintf(err, errlen, "not a google.rpc.Status");
  if (ok) {
    pbj_putf(&b, "status details: code %lld, message ", (long long)code);
    pbj_put_json_string(&b, msg ? (const char *)msg : "", msg_len);
    pbj_putf(&b, ", %zu detail%s\n", details, details == 1 ? "" : "s");
  }
  for (q = p; ok && pbj_wire_next(&q, end, &w) == 1;) {
    if (w.num == 3 && w.wt == 2)
      ok = put_detail(pool, &b, w.data, w.len, err, errlen);
  }
  pbj_pool_destroy(pool);
  if (ok && b.oom) {
    snprintf(err, errlen, "out of memory");
    ok = false;
  }
  if (!ok) {
    pbj_buf_free(&b);
    return NULL;
  }
  return (char *)b.p;
}
