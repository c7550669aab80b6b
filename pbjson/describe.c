/* A service, method, message or enum as .proto text, for
 * `grit describe`. Types print fully qualified (".pkg.Msg"), as grpcurl
 * does; nested messages and enums print inside their parent, map entry
 * types as map<K, V> fields. */
#include "pbjson/pbjson_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef Google__Protobuf__FieldDescriptorProto field_desc;
#define T(x) GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__TYPE__TYPE_##x

static const char *scalar_name(int type) {
  switch (type) {
  case T(DOUBLE):
    return "double";
  case T(FLOAT):
    return "float";
  case T(INT64):
    return "int64";
  case T(UINT64):
    return "uint64";
  case T(INT32):
    return "int32";
  case T(FIXED64):
    return "fixed64";
  case T(FIXED32):
    return "fixed32";
  case T(BOOL):
    return "bool";
  case T(STRING):
    return "string";
  case T(BYTES):
    return "bytes";
  case T(UINT32):
    return "uint32";
  case T(SFIXED32):
    return "sfixed32";
  case T(SFIXED64):
    return "sfixed64";
  case T(SINT32):
    return "sint32";
  case T(SINT64):
    return "sint64";
  default:
    return NULL;
  }
}

static void put_type(pbj_buf *b, const field_desc *f) {
  const char *s = scalar_name(f->type);
  pbj_puts(b, s ? s : (f->type_name ? f->type_name : "?"));
}

static void indent(pbj_buf *b, int depth) {
  for (int i = 0; i < depth; i++)
    pbj_puts(b, "  ");
}

static void put_enum(pbj_buf *b, const Google__Protobuf__EnumDescriptorProto *e,
                     int depth) {
  indent(b, depth);
  pbj_putf(b, "enum %s {\n", e->name);
  for (size_t i = 0; i < e->n_value; i++) {
    indent(b, depth + 1);
    pbj_puts(b, e->value[i]->name ? e->value[i]->name : "?");
    pbj_putf(b, " = %d;\n", e->value[i]->number);
  }
  indent(b, depth);
  pbj_puts(b, "}\n");
}

/* A member of a real oneof (not proto3 optional's synthetic one). */
static bool in_oneof(const field_desc *f) {
  return f->has_oneof_index && !(f->has_proto3_optional && f->proto3_optional);
}

static void put_field(const pbj_pool *pool, pbj_buf *b, const field_desc *f,
                      bool proto3, int depth);

static void put_message(const pbj_pool *pool, pbj_buf *b,
                        const Google__Protobuf__DescriptorProto *d, bool proto3,
                        int depth) {
  indent(b, depth);
  pbj_putf(b, "message %s {\n", d->name);
  for (size_t i = 0; i < d->n_field; i++) {
    const field_desc *f = d->field[i];
    if (!in_oneof(f)) {
      put_field(pool, b, f, proto3, depth + 1);
      continue;
    }
    /* The oneof, at its first member, with all its members. */
    bool first = true;
    for (size_t j = 0; j < i; j++)
      first = first && !(in_oneof(d->field[j]) &&
                         d->field[j]->oneof_index == f->oneof_index);
    if (!first)
      continue;
    indent(b, depth + 1);
    pbj_putf(b, "oneof %s {\n",
             (size_t)f->oneof_index < d->n_oneof_decl &&
                     d->oneof_decl[f->oneof_index]->name
                 ? d->oneof_decl[f->oneof_index]->name
                 : "?");
    for (size_t j = i; j < d->n_field; j++) {
      if (in_oneof(d->field[j]) && d->field[j]->oneof_index == f->oneof_index)
        put_field(pool, b, d->field[j], true, depth + 2);
    }
    indent(b, depth + 1);
    pbj_puts(b, "}\n");
  }
  for (size_t i = 0; i < d->n_nested_type; i++) {
    if (!pbj_is_map_entry(d->nested_type[i]))
      put_message(pool, b, d->nested_type[i], proto3, depth + 1);
  }
  for (size_t i = 0; i < d->n_enum_type; i++)
    put_enum(b, d->enum_type[i], depth + 1);
  indent(b, depth);
  pbj_puts(b, "}\n");
}

static void put_field(const pbj_pool *pool, pbj_buf *b, const field_desc *f,
                      bool proto3, int depth) {
  indent(b, depth);
  const Google__Protobuf__DescriptorProto *entry =
      f->type == T(MESSAGE)
          ? pbj_find_message(pool, pbj_strip_dot(f->type_name))
          : NULL;
  bool repeated =
      f->label ==
      GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__LABEL__LABEL_REPEATED;
  if (repeated && pbj_is_map_entry(entry) && entry->n_field == 2) {
    pbj_puts(b, "map<");
    put_type(b, pbj_field_by_number(entry, 1) ? pbj_field_by_number(entry, 1)
                                              : entry->field[0]);
    pbj_puts(b, ", ");
    put_type(b, pbj_field_by_number(entry, 2) ? pbj_field_by_number(entry, 2)
                                              : entry->field[1]);
    pbj_puts(b, "> ");
  } else {
    if (repeated)
      pbj_puts(b, "repeated ");
    else if (f->has_proto3_optional && f->proto3_optional)
      pbj_puts(b, "optional ");
    else if (!proto3)
      pbj_puts(
          b,
          f->label ==
                  GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__LABEL__LABEL_REQUIRED
              ? "required "
              : "optional ");
    put_type(b, f);
    pbj_puts(b, " ");
  }
  pbj_putf(b, "%s = %d;\n", f->name ? f->name : "?", f->number);
}

static void put_method(pbj_buf *b,
                       const Google__Protobuf__MethodDescriptorProto *m,
                       int depth) {
  indent(b, depth);
  pbj_putf(b, "rpc %s(%s%s) returns (%s%s);\n", m->name,
           m->has_client_streaming && m->client_streaming ? "stream " : "",
           m->input_type,
           m->has_server_streaming && m->server_streaming ? "stream " : "",
           m->output_type);
}

static bool is_proto3(const pbj_pool *pool, const char *full) {
  const Google__Protobuf__FileDescriptorProto *f = pbj_file_of(pool, full);
  return f && f->syntax && strcmp(f->syntax, "proto3") == 0;
}

char *pbj_describe(const pbj_pool *pool, const char *symbol, char *err,
                   size_t errlen) {
  pbj_buf b = {0};
  const Google__Protobuf__ServiceDescriptorProto *s =
      pbj_find_service(pool, symbol);
  const Google__Protobuf__DescriptorProto *m = pbj_find_message(pool, symbol);
  const Google__Protobuf__EnumDescriptorProto *e = pbj_find_enum(pool, symbol);
  if (s) {
    pbj_putf(&b, "%s is a service:\nservice %s {\n", symbol, s->name);
    for (size_t i = 0; i < s->n_method; i++)
      put_method(&b, s->method[i], 1);
    pbj_puts(&b, "}\n");
  } else if (m) {
    pbj_putf(&b, "%s is a message:\n", symbol);
    put_message(pool, &b, m, is_proto3(pool, symbol), 0);
  } else if (e) {
    pbj_putf(&b, "%s is an enum:\n", symbol);
    put_enum(&b, e, 0);
  } else {
    /* A method: "pkg.Svc.Method" or "pkg.Svc/Method". */
    char svc[512];
    snprintf(svc, sizeof(svc), "%s", symbol);
    char *sep = strchr(svc, '/');
    if (!sep)
      sep = strrchr(svc, '.');
    if (sep) {
      *sep = '\0';
      s = pbj_find_service(pool, svc);
    }
    for (size_t i = 0; s && i < s->n_method; i++) {
      if (s->method[i]->name && strcmp(s->method[i]->name, sep + 1) == 0) {
        pbj_putf(&b, "%s.%s is a method:\n", svc, sep + 1);
        put_method(&b, s->method[i], 0);
        break;
      }
    }
    if (!b.p) {
      snprintf(err, errlen, "symbol not found: %s", symbol);
      return NULL;
    }
  }
  if (b.oom) {
    pbj_buf_free(&b);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  return (char *)b.p;
}
