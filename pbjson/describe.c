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
  pbj_putf(b, "%s = %d", f->name ? f->name : "?", f->number);
  /* A json_name other than protoc's default (lowerCamelCase) is what
   * JSON requests and responses use: show it (issue 29). */
  if (f->json_name && f->name) {
    Google__Protobuf__FieldDescriptorProto plain = *f;
    plain.json_name = NULL;
    char tmp[256];
    if (strcmp(pbj_json_name(&plain, tmp, sizeof(tmp)), f->json_name) != 0)
      pbj_putf(b, " [json_name = \"%s\"]", f->json_name);
  }
  pbj_puts(b, ";\n");
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

/* |symbol| = "PARENT.NAME": a field NAME of message PARENT, or a value
 * NAME of enum PARENT ("pkg.Color.RED", as people write it) or of an enum
 * declared in scope PARENT ("pkg.RED", its protobuf full name). */
static bool describe_member(const pbj_pool *pool, pbj_buf *b,
                            const char *symbol) {
  const char *dot = strrchr(symbol, '.');
  if (!dot || dot == symbol || (size_t)(dot - symbol) >= 512)
    return false;
  char parent[512];
  snprintf(parent, sizeof(parent), "%.*s", (int)(dot - symbol), symbol);
  const char *name = dot + 1;
  const Google__Protobuf__DescriptorProto *m = pbj_find_message(pool, parent);
  for (size_t i = 0; m && i < m->n_field; i++) {
    if (m->field[i]->name && strcmp(m->field[i]->name, name) == 0) {
      pbj_putf(b, "%s is a field of %s:\n", symbol, parent);
      put_field(pool, b, m->field[i], is_proto3(pool, parent), 0);
      return true;
    }
  }
  const char *enum_full = parent;
  const Google__Protobuf__EnumDescriptorProto *e = pbj_find_enum(pool, parent);
  if (!e)
    e = pbj_find_enum_value(pool, parent, name, &enum_full);
  for (size_t i = 0; e && i < e->n_value; i++) {
    if (e->value[i]->name && strcmp(e->value[i]->name, name) == 0) {
      pbj_putf(b, "%s is a value of enum %s:\n%s = %d;\n", symbol, enum_full,
               name, e->value[i]->number);
      return true;
    }
  }
  return false;
}

char *pbj_describe(const pbj_pool *pool, const char *symbol, char *err,
                   size_t errlen) {
  pbj_buf b = {0};
  if (symbol[0] == '.') /* ".pkg.Msg", as descriptors spell type names */
    symbol++;
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
    if (!b.p && !describe_member(pool, &b, symbol)) {
      pbj_buf_free(&b);
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

/* ---- templates (describe --template) ---- */

/* |type|'s JSON with every field present: scalars at their defaults,
 * enums by their first name, one element in each repeated field, one
 * entry (key "" or 0) in each map, messages filled in unless they recur
 * (then {}), well-known types in their JSON forms. */
static void put_template(const pbj_pool *pool, pbj_buf *b, const char *type,
                         const char **stack, int depth);

static void put_template_value(const pbj_pool *pool, pbj_buf *b,
                               const field_desc *f, const char **stack,
                               int depth) {
  switch (f->type) {
  case T(STRING):
  case T(BYTES):
    pbj_puts(b, "\"\"");
    return;
  case T(BOOL):
    pbj_puts(b, "false");
    return;
  case T(INT64):
  case T(UINT64):
  case T(SINT64):
  case T(FIXED64):
  case T(SFIXED64):
    pbj_puts(b, "\"0\"");
    return;
  case T(FLOAT):
  case T(DOUBLE):
    pbj_puts(b, "0.0");
    return;
  case T(ENUM): {
    const Google__Protobuf__EnumDescriptorProto *e =
        pbj_find_enum(pool, pbj_strip_dot(f->type_name));
    if (e && strcmp(pbj_strip_dot(f->type_name), "google.protobuf.NullValue"))
      pbj_putf(b, "\"%s\"", e->n_value ? e->value[0]->name : "");
    else
      pbj_puts(b, e ? "null" : "0");
    return;
  }
  case T(MESSAGE):
    put_template(pool, b, pbj_strip_dot(f->type_name), stack, depth + 1);
    return;
  default:
    pbj_puts(b, "0");
  }
}

static void put_template(const pbj_pool *pool, pbj_buf *b, const char *type,
                         const char **stack, int depth) {
  static const struct {
    const char *name, *json;
  } wkt[] = {
      {"google.protobuf.Timestamp", "\"1970-01-01T00:00:00Z\""},
      {"google.protobuf.Duration", "\"0s\""},
      {"google.protobuf.FieldMask", "\"\""},
      {"google.protobuf.Struct", "{}"},
      {"google.protobuf.Value", "null"},
      {"google.protobuf.ListValue", "[]"},
      {"google.protobuf.Any", "{}"},
  };
  for (size_t i = 0; i < sizeof(wkt) / sizeof(wkt[0]); i++) {
    if (strcmp(type, wkt[i].name) == 0) {
      pbj_puts(b, wkt[i].json);
      return;
    }
  }
  const Google__Protobuf__DescriptorProto *d = pbj_find_message(pool, type);
  bool recurs = depth >= 16;
  for (int i = 0; i < depth && !recurs; i++)
    recurs = strcmp(stack[i], type) == 0;
  if (!d || recurs) {
    pbj_puts(b, "{}");
    return;
  }
  if (strncmp(type, "google.protobuf.", 16) == 0 && strstr(type, "Value") &&
      d->n_field == 1) { /* a wrapper: its value */
    put_template_value(pool, b, d->field[0], stack, depth);
    return;
  }
  stack[depth] = type;
  pbj_puts(b, "{");
  bool first = true;
  for (size_t i = 0; i < d->n_field; i++) {
    const field_desc *f = d->field[i];
    /* One member of each oneof: the first (two would be an error). */
    bool later = false;
    for (size_t j = 0; j < i && in_oneof(f); j++)
      later = later || (in_oneof(d->field[j]) &&
                        d->field[j]->oneof_index == f->oneof_index);
    if (later)
      continue;
    char tmp[256];
    const char *jn = pbj_json_name(f, tmp, sizeof(tmp));
    pbj_putf(b, "%s", first ? "" : ",");
    first = false;
    pbj_put_json_string(b, jn, strlen(jn));
    pbj_puts(b, ":");
    const Google__Protobuf__DescriptorProto *entry =
        f->type == T(MESSAGE)
            ? pbj_find_message(pool, pbj_strip_dot(f->type_name))
            : NULL;
    bool repeated =
        f->label ==
        GOOGLE__PROTOBUF__FIELD_DESCRIPTOR_PROTO__LABEL__LABEL_REPEATED;
    if (repeated && pbj_is_map_entry(entry) && entry->n_field == 2) {
      const field_desc *kf = pbj_field_by_number(entry, 1);
      const field_desc *vf = pbj_field_by_number(entry, 2);
      pbj_puts(b, kf && kf->type == T(STRING) ? "{\"\":"
                  : kf && kf->type == T(BOOL) ? "{\"false\":"
                                              : "{\"0\":");
      if (vf)
        put_template_value(pool, b, vf, stack, depth);
      else
        pbj_puts(b, "null");
      pbj_puts(b, "}");
    } else if (repeated) {
      pbj_puts(b, "[");
      put_template_value(pool, b, f, stack, depth);
      pbj_puts(b, "]");
    } else {
      put_template_value(pool, b, f, stack, depth);
    }
  }
  pbj_puts(b, "}");
}

char *pbj_template(const pbj_pool *pool, const char *symbol, char *err,
                   size_t errlen) {
  if (symbol[0] == '.')
    symbol++;
  char type[512];
  snprintf(type, sizeof(type), "%s", symbol);
  if (!pbj_find_message(pool, type)) {
    /* A method: its request type. */
    char path[520];
    snprintf(path, sizeof(path), "/%s", symbol);
    char *sep = strchr(path + 1, '/');
    if (!sep)
      sep = strrchr(path, '.');
    pbj_method m;
    if (sep && sep > path + 1) {
      *sep = '/';
      if (pbj_pool_method(pool, path, &m))
        snprintf(type, sizeof(type), "%s", m.in);
    }
  }
  if (!pbj_find_message(pool, type)) {
    snprintf(err, errlen, "not a message or method: %s", symbol);
    return NULL;
  }
  pbj_buf b = {0};
  const char *stack[17];
  put_template(pool, &b, type, stack, 0);
  if (b.oom) {
    pbj_buf_free(&b);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  return (char *)b.p;
}

size_t pbj_service_methods(const pbj_pool *pool, const char *service,
                           const char **names, size_t max) {
  if (service[0] == '.')
    service++;
  const Google__Protobuf__ServiceDescriptorProto *s =
      pbj_find_service(pool, service);
  size_t n = 0;
  for (size_t i = 0; s && i < s->n_method; i++) {
    if (n < max)
      names[n] = s->method[i]->name ? s->method[i]->name : "?";
    n++;
  }
  return s ? n : (size_t)-1;
}
