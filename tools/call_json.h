/* Message types for grit call, list and describe (call_json.c): loading
 * descriptors, the --data-json decoder, JSON responses. */
#ifndef GRIT_TOOLS_CALL_JSON_H
#define GRIT_TOOLS_CALL_JSON_H

#include "tools.h"

/* Where the descriptors come from: --protoset, or --proto files compiled
 * with protoc (with --import-path directories); neither: reflection. */
typedef struct types_flags {
  const char *protoset;
  const char *proto[32];
  size_t n_proto;
  const char *import[32];
  size_t n_import;
} types_flags;

typedef struct call_types call_types;

/* Load the descriptors: from the flags, else by reflection for |symbol|
 * (a method path; NULL: no reflection). Returns a TOOL_EXIT_* code
 * (message printed); |*out| is set on TOOL_EXIT_OK. */
int types_load(const types_flags *tf, grit_channel *ch,
               const grit_call_opts *opts, const char *symbol,
               call_types **out);
void types_free(call_types *t);
/* Select |path|'s request and response types and say its kind. */
int types_find_method(call_types *t, const char *path, grit_method_kind *kind);
/* A response as proto3 JSON (malloc'd), or NULL: types unknown, or it does
 * not decode (a warning printed). */
char *types_response_json(const call_types *t, const uint8_t *p, size_t len);
/* The request type req_decode_json encodes; set before it is used. */
void types_use_for_requests(const call_types *t);
/* A req_decode_fn: JSON text, or @FILE holding it. */
bool req_decode_json(const char *text, uint8_t **out, size_t *len,
                     const char **why);

/* grit list / grit describe bodies. */
int types_list(const types_flags *tf, grit_channel *ch);
int types_describe(const types_flags *tf, grit_channel *ch, const char *symbol);

#endif
