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
 * not decode (a warning printed). |resolve|: an Any of a type the pool
 * lacks may be loaded by reflection (a blocking call: never from a call
 * callback); else, or when that fails, it prints as {"@type", "@value"}. */
char *types_response_json(const call_types *t, const uint8_t *p, size_t len,
                          bool resolve);
/* --emit-defaults: fields at their defaults in responses too. */
void types_set_emit_defaults(call_types *t, bool on);
/* The request type req_decode_json encodes; set before it is used. */
void types_use_for_requests(const call_types *t);
/* A req_decode_fn: JSON text, or @FILE holding it. */
bool req_decode_json(const char *text, uint8_t **out, size_t *len,
                     const char **why);

/* grit list / grit describe bodies: reflection calls on |ch| with |opts|
 * (deadline, metadata) unless |tf| names files. types_list: the services,
 * or |service|'s methods (NULL: services). types_describe: |symbol| as
 * .proto text, or its JSON template (|template|). */
int types_list(const types_flags *tf, grit_channel *ch,
               const grit_call_opts *opts, const char *service);
int types_describe(const types_flags *tf, grit_channel *ch,
                   const grit_call_opts *opts, const char *symbol,
                   bool template);

#endif
