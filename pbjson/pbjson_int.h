/* Shared by the pbjson module's .c files only: a growable byte buffer,
 * wire-format reading and writing, base64, JSON string output, and
 * descriptor lookups. */
#ifndef GRIT_PBJSON_INT_H
#define GRIT_PBJSON_INT_H

#include "pbjson/pbjson.h"

#define PBJ_MAX_DEPTH 64

typedef struct pbj_buf {
  uint8_t *p;
  size_t len, cap;
  bool oom;
} pbj_buf;

void pbj_put(pbj_buf *b, const void *p, size_t n);
void pbj_puts(pbj_buf *b, const char *s);
void pbj_putf(pbj_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void pbj_put_varint(pbj_buf *b, uint64_t v);
void pbj_put_tag(pbj_buf *b, uint32_t field, int wire_type);
void pbj_put_json_string(pbj_buf *b, const char *s, size_t n);
void pbj_put_base64(pbj_buf *b, const uint8_t *p, size_t n);
void pbj_buf_free(pbj_buf *b);

/* One field on the wire. */
typedef struct pbj_wire_field {
  uint32_t num;
  int wt;              /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
  uint64_t v;          /* varint, fixed64 or fixed32 value */
  const uint8_t *data; /* wire type 2 */
  size_t len;
} pbj_wire_field;

/* Read the field at |*p| (before |end|) and advance. 1: a field; 0: end;
 * -1: malformed (groups are malformed here). */
int pbj_wire_next(const uint8_t **p, const uint8_t *end, pbj_wire_field *f);
/* Read a varint; false if malformed or past |end|. */
bool pbj_read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v);
bool pbj_base64_decode(const char *s, size_t n, pbj_buf *out);

/* Lookups by full name without the leading dot; NULL if absent. */
const Google__Protobuf__DescriptorProto *pbj_find_message(const pbj_pool *pool,
                                                          const char *full);
const Google__Protobuf__EnumDescriptorProto *pbj_find_enum(const pbj_pool *pool,
                                                           const char *full);
const Google__Protobuf__ServiceDescriptorProto *
pbj_find_service(const pbj_pool *pool, const char *full);
/* An enum declared in |scope| (a package or message full name) that has
 * a value |name| (protobuf scopes enum values beside their enum), and its
 * full name in |*enum_full| (borrowed); NULL if none. */
const Google__Protobuf__EnumDescriptorProto *
pbj_find_enum_value(const pbj_pool *pool, const char *scope, const char *name,
                    const char **enum_full);
/* A file whose package holds |full|, for its syntax; NULL if none. */
const Google__Protobuf__FileDescriptorProto *pbj_file_of(const pbj_pool *pool,
                                                         const char *full);
/* A type name as fields hold it (".pkg.Msg") without its dot. */
const char *pbj_strip_dot(const char *type_name);
/* The JSON name of a field: json_name, else lowerCamelCase of the name
 * (into |tmp|, |tmplen| bytes). */
const char *pbj_json_name(const Google__Protobuf__FieldDescriptorProto *f,
                          char *tmp, size_t tmplen);
bool pbj_is_map_entry(const Google__Protobuf__DescriptorProto *d);
/* The message's field numbered |num|, or NULL. */
const Google__Protobuf__FieldDescriptorProto *
pbj_field_by_number(const Google__Protobuf__DescriptorProto *d, uint32_t num);

#endif
