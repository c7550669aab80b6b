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
/* A service, method ("pkg.Svc.Method" or "pkg.Svc/Method"), message or
 * enum as .proto text: malloc'd, or NULL with |err| set. */
char *pbj_describe(const pbj_pool *pool, const char *symbol, char *err,
                   size_t errlen);

/* Message |type| (full name) of |n| wire bytes as compact proto3 JSON:
 * malloc'd, NUL-terminated, or NULL with |err| set (not protobuf, or
 * nesting deeper than 64). Fields the descriptor lacks are kept under
 * their number. */
char *pbj_to_json(const pbj_pool *pool, const char *type, const uint8_t *p,
                  size_t n, char *err, size_t errlen);
/* Proto3 JSON text (|len| bytes) of message |type| into wire bytes
 * (|*out| malloc'd). Unknown fields, wrong types and bad enum names are
 * errors naming the JSON path. */
bool pbj_from_json(const pbj_pool *pool, const char *type, const char *json,
                   size_t len, uint8_t **out, size_t *outlen, char *err,
                   size_t errlen);

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
