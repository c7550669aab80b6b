/* pbjson: protobuf messages <-> proto3 JSON, driven at run time by
 * descriptors (a FileDescriptorSet, or files fetched by server
 * reflection), for the grit command only (tools/), never the library.
 * Depends on protobuf-c's descriptor types (codegen/), jansson, and for
 * reflect.c the public grit API. Errors come back as text in a caller
 * buffer, naming the JSON path ("$.payload.type") where there is one.
 * Layout: floor 5 of docs/layout.md. */
#ifndef GRIT_PBJSON_H
#define GRIT_PBJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grit/grit.h>

#include "descriptor.pb-c.h"

typedef struct pbj_pool pbj_pool;

/* An empty pool; NULL when out of memory. */
pbj_pool *pbj_pool_create(void);
/* NULL is a no-op. */
void pbj_pool_destroy(pbj_pool *pool);
/* Add every file of a serialized FileDescriptorSet (protoc -o), or one
 * serialized FileDescriptorProto (server reflection). A file whose name is
 * already in the pool is skipped. Returns false with |err| set. */
bool pbj_pool_add_set(pbj_pool *pool, const uint8_t *p, size_t n, char *err,
                      size_t errlen);
bool pbj_pool_add_file(pbj_pool *pool, const uint8_t *p, size_t n, char *err,
                       size_t errlen);
bool pbj_pool_has_file(const pbj_pool *pool, const char *name);
/* The first dependency some file imports that the pool lacks, or NULL.
 * Borrowed, valid while the pool lives. */
const char *pbj_pool_missing_dep(const pbj_pool *pool);

/* A method found by path ("/pkg.Svc/Method"); borrowed from the pool. */
typedef struct pbj_method {
  const char *in, *out; /* full type names, no leading dot */
  bool client_streaming, server_streaming;
} pbj_method;
bool pbj_pool_method(const pbj_pool *pool, const char *path, pbj_method *out);
/* Whether a message type of that full name is in the pool. */
bool pbj_pool_has_message(const pbj_pool *pool, const char *full);
/* Full names of the services in the pool, in the order added; borrowed.
 * Returns how many there are (at most |max| are stored). */
size_t pbj_pool_services(const pbj_pool *pool, const char **names, size_t max);
/* A service, method ("pkg.Svc.Method" or "pkg.Svc/Method"), message,
 * enum, field ("pkg.Msg.field") or enum value ("pkg.Enum.VALUE") as .proto
 * text: malloc'd, or NULL with |err| set. A leading '.' is allowed. */
char *pbj_describe(const pbj_pool *pool, const char *symbol, char *err,
                   size_t errlen);

/* A JSON template of a message, or of a method's request type: every
 * field present at its default (enums by their first name, one element
 * per repeated field, one entry per map, recurring messages as {}),
 * ready to edit and send with --data-json. Malloc'd, or NULL with |err|
 * set. A leading '.' is allowed. */
char *pbj_template(const pbj_pool *pool, const char *symbol, char *err,
                   size_t errlen);
/* The method names of |service| (full name, a leading '.' allowed) into
 * |names| (at most |max|, borrowed). Returns how many it has, or
 * (size_t)-1 if the pool has no such service. */
size_t pbj_service_methods(const pbj_pool *pool, const char *service,
                           const char **names, size_t max);

/* Message |type| (full name) of |n| wire bytes as compact proto3 JSON:
 * malloc'd, NUL-terminated, or NULL with |err| set (not protobuf, or
 * nesting deeper than 64). Fields the descriptor lacks are kept under
 * their number. */
char *pbj_to_json(const pbj_pool *pool, const char *type, const uint8_t *p,
                  size_t n, char *err, size_t errlen);
/* pbj_to_json_ex flags. */
enum {
  /* Absent scalars, repeated fields and maps at their defaults (as
   * json_format's including_default_value_fields). */
  PBJ_EMIT_DEFAULTS = 1,
  /* An Any whose type the pool lacks prints as {"@type": URL, "@value":
   * "<base64 of the packed bytes>"} instead of failing. */
  PBJ_ANY_RAW = 2,
};
/* pbj_to_json with |flags|. When it fails because the pool lacks the type
 * packed in an Any, that type's full name goes into |missing| (if not
 * NULL; "" otherwise), so that the caller can load it (reflection) and
 * try again. */
char *pbj_to_json_ex(const pbj_pool *pool, const char *type, const uint8_t *p,
                     size_t n, unsigned flags, char *missing,
                     size_t missing_len, char *err, size_t errlen);
/* Proto3 JSON text (|len| bytes) of message |type| into wire bytes
 * (|*out| malloc'd). Unknown fields, wrong types and bad enum names are
 * errors naming the JSON path. */
bool pbj_from_json(const pbj_pool *pool, const char *type, const char *json,
                   size_t len, uint8_t **out, size_t *outlen, char *err,
                   size_t errlen);

/* pbj_from_json that, when it fails because the pool lacks the type an
 * Any names, puts that type's full name into |missing| ("" otherwise). */
bool pbj_from_json_ex(const pbj_pool *pool, const char *type, const char *json,
                      size_t len, char *missing, size_t missing_len,
                      uint8_t **out, size_t *outlen, char *err, size_t errlen);

/* grpc-status-details-bin: a serialized google.rpc.Status. Decoded with
 * descriptors of google/rpc/status.proto and error_details.proto embedded
 * in grit (no files, no network); a detail of a type they lack prints as
 * {"@type": URL, "@value": base64}. As proto3 JSON, or as text: a
 * "status details:" line with code, message and the number of details,
 * then one line per detail ("  google.rpc.BadRequest {json}", or
 * "  "URL" (N bytes, not a standard error detail)"). Malloc'd, or NULL
 * with |err| set (the bytes are not a Status). */
char *pbj_status_json(const uint8_t *p, size_t n, char *err, size_t errlen);
char *pbj_status_text(const uint8_t *p, size_t n, char *err, size_t errlen);
/* Add the embedded google.rpc files to |pool| (so that an Any in a
 * response resolves the standard error details too). */
bool pbj_pool_add_rpc_status(pbj_pool *pool, char *err, size_t errlen);

/* Server reflection (grpc.reflection.v1.ServerReflection, falling back to
 * v1alpha when the server does not implement v1): load the file defining
 * |symbol| and its imports into |pool|, or list the services into the
 * pool-independent array |*names| (malloc'd strings in a malloc'd array).
 * |opts| may be NULL. Return false with |err| set. */
bool pbj_reflect_symbol(grit_channel *ch, const grit_call_opts *opts,
                        pbj_pool *pool, const char *symbol, char *err,
                        size_t errlen);
bool pbj_reflect_list(grit_channel *ch, const grit_call_opts *opts,
                      char ***names, size_t *n, char *err, size_t errlen);

#endif
