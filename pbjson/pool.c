/* The descriptor pool: files decoded with protobuf-c, and an index of the
 * messages, enums and services they define by full name. */
#include "pbjson/pbjson_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { SYM_MESSAGE, SYM_ENUM, SYM_SERVICE } sym_kind;

typedef struct sym {
  char *full;
  sym_kind kind;
  const void *desc;
} sym;

struct pbj_pool {
  Google__Protobuf__FileDescriptorProto **files;
  size_t n_files;
  sym *syms;
  size_t n_syms, cap_syms;
};

pbj_pool *pbj_pool_create(void) {
  return calloc(1, sizeof(pbj_pool));
}

void pbj_pool_destroy(pbj_pool *pool) {
  if (!pool)
    return;
  for (size_t i = 0; i < pool->n_files; i++)
    google__protobuf__file_descriptor_proto__free_unpacked(pool->files[i],
                                                           NULL);
  for (size_t i = 0; i < pool->n_syms; i++)
    free(pool->syms[i].full);
  free(pool->files);
  free(pool->syms);
  free(pool);
}

static bool add_sym(pbj_pool *pool, const char *scope, const char *name,
                    sym_kind kind, const void *desc) {
  if (pool->n_syms == pool->cap_syms) {
    size_t cap = pool->cap_syms ? pool->cap_syms * 2 : 64;
    sym *s = realloc(pool->syms, cap * sizeof(*s));
    if (!s)
      return false;
    pool->syms = s;
    pool->cap_syms = cap;
  }
  size_t n = strlen(scope) + strlen(name) + 2;
  char *full = malloc(n);
  if (!full)
    return false;
  snprintf(full, n, "%s%s%s", scope, scope[0] ? "." : "", name);
  pool->syms[pool->n_syms++] = (sym){full, kind, desc};
  return true;
}

static bool index_message(pbj_pool *pool, const char *scope,
                          const Google__Protobuf__DescriptorProto *d) {
  if (!d->name || !add_sym(pool, scope, d->name, SYM_MESSAGE, d))
    return false;
  const char *full = pool->syms[pool->n_syms - 1].full;
  for (size_t i = 0; i < d->n_nested_type; i++) {
    if (!index_message(pool, full, d->nested_type[i]))
      return false;
  }
  for (size_t i = 0; i < d->n_enum_type; i++) {
    if (!d->enum_type[i]->name ||
        !add_sym(pool, full, d->enum_type[i]->name, SYM_ENUM, d->enum_type[i]))
      return false;
  }
  return true;
}

static bool index_file(pbj_pool *pool,
                       const Google__Protobuf__FileDescriptorProto *f) {
  const char *pkg = f->package ? f->package : "";
  for (size_t i = 0; i < f->n_message_type; i++) {
    if (!index_message(pool, pkg, f->message_type[i]))
      return false;
  }
  for (size_t i = 0; i < f->n_enum_type; i++) {
    if (!f->enum_type[i]->name ||
        !add_sym(pool, pkg, f->enum_type[i]->name, SYM_ENUM, f->enum_type[i]))
      return false;
  }
  for (size_t i = 0; i < f->n_service; i++) {
    if (!f->service[i]->name ||
        !add_sym(pool, pkg, f->service[i]->name, SYM_SERVICE, f->service[i]))
      return false;
  }
  return true;
}

bool pbj_pool_has_file(const pbj_pool *pool, const char *name) {
  for (size_t i = 0; i < pool->n_files; i++) {
    if (strcmp(pool->files[i]->name, name) == 0)
      return true;
  }
  return false;
}

/* Takes |f| (freed on failure too). */
static bool add_decoded(pbj_pool *pool,
                        Google__Protobuf__FileDescriptorProto *f, char *err,
                        size_t errlen) {
  if (!f->name) {
    snprintf(err, errlen, "a file descriptor without a name");
    google__protobuf__file_descriptor_proto__free_unpacked(f, NULL);
    return false;
  }
  if (pbj_pool_has_file(pool, f->name)) {
    google__protobuf__file_descriptor_proto__free_unpacked(f, NULL);
    return true;
  }
  Google__Protobuf__FileDescriptorProto **files =
      realloc(pool->files, (pool->n_files + 1) * sizeof(*files));
  if (!files) {
    google__protobuf__file_descriptor_proto__free_unpacked(f, NULL);
    snprintf(err, errlen, "out of memory");
    return false;
  }
  pool->files = files;
  pool->files[pool->n_files++] = f;
  if (!index_file(pool, f)) {
    snprintf(err, errlen, "out of memory, or a nameless type in %s", f->name);
    return false;
  }
  return true;
}

bool pbj_pool_add_file(pbj_pool *pool, const uint8_t *p, size_t n, char *err,
                       size_t errlen) {
  Google__Protobuf__FileDescriptorProto *f =
      google__protobuf__file_descriptor_proto__unpack(NULL, n, p);
  if (!f) {
    snprintf(err, errlen, "not a serialized FileDescriptorProto");
    return false;
  }
  return add_decoded(pool, f, err, errlen);
}

bool pbj_pool_add_set(pbj_pool *pool, const uint8_t *p, size_t n, char *err,
                      size_t errlen) {
  Google__Protobuf__FileDescriptorSet *set =
      google__protobuf__file_descriptor_set__unpack(NULL, n, p);
  if (!set) {
    snprintf(err, errlen,
             "not a serialized FileDescriptorSet (protoc --include_imports "
             "-o FILE)");
    return false;
  }
  bool ok = true;
  for (size_t i = 0; ok && i < set->n_file; i++) {
    /* Move each file out of the set, so that the pool owns it. */
    ok = add_decoded(pool, set->file[i], err, errlen);
    set->file[i] = NULL;
  }
  for (size_t i = 0; i < set->n_file; i++) {
    if (set->file[i])
      google__protobuf__file_descriptor_proto__free_unpacked(set->file[i],
                                                             NULL);
  }
  set->n_file = 0;
  google__protobuf__file_descriptor_set__free_unpacked(set, NULL);
  return ok;
}

const char *pbj_pool_missing_dep(const pbj_pool *pool) {
  for (size_t i = 0; i < pool->n_files; i++) {
    for (size_t j = 0; j < pool->files[i]->n_dependency; j++) {
      if (!pbj_pool_has_file(pool, pool->files[i]->dependency[j]))
        return pool->files[i]->dependency[j];
    }
  }
  return NULL;
}

static const void *find(const pbj_pool *pool, const char *full, sym_kind kind) {
  for (size_t i = 0; i < pool->n_syms; i++) {
    if (pool->syms[i].kind == kind && strcmp(pool->syms[i].full, full) == 0)
      return pool->syms[i].desc;
  }
  return NULL;
}

const Google__Protobuf__EnumDescriptorProto *
pbj_find_enum_value(const pbj_pool *pool, const char *scope, const char *name,
                    const char **enum_full) {
  size_t sl = strlen(scope);
  for (size_t i = 0; i < pool->n_syms; i++) {
    const sym *y = &pool->syms[i];
    const char *dot = strrchr(y->full, '.');
    size_t yl = dot ? (size_t)(dot - y->full) : 0;
    if (y->kind != SYM_ENUM || yl != sl || strncmp(y->full, scope, sl) != 0)
      continue;
    const Google__Protobuf__EnumDescriptorProto *e = y->desc;
    for (size_t j = 0; j < e->n_value; j++) {
      if (e->value[j]->name && strcmp(e->value[j]->name, name) == 0) {
        *enum_full = y->full;
        return e;
      }
    }
  }
  return NULL;
}

const Google__Protobuf__DescriptorProto *pbj_find_message(const pbj_pool *pool,
                                                          const char *full) {
  return find(pool, full, SYM_MESSAGE);
}

const Google__Protobuf__EnumDescriptorProto *pbj_find_enum(const pbj_pool *pool,
                                                           const char *full) {
  return find(pool, full, SYM_ENUM);
}

bool pbj_pool_has_message(const pbj_pool *pool, const char *full) {
  return pbj_find_message(pool, full) != NULL;
}

const char *pbj_strip_dot(const char *type_name) {
  return type_name && type_name[0] == '.' ? type_name + 1 : type_name;
}

bool pbj_pool_method(const pbj_pool *pool, const char *path, pbj_method *out) {
  const char *s = path[0] == '/' ? path + 1 : path;
  const char *slash = strrchr(s, '/');
  if (!slash)
    return false;
  char svc[512];
  if ((size_t)(slash - s) >= sizeof(svc))
    return false;
  snprintf(svc, sizeof(svc), "%.*s", (int)(slash - s), s);
  const Google__Protobuf__ServiceDescriptorProto *sd =
      find(pool, svc, SYM_SERVICE);
  for (size_t i = 0; sd && i < sd->n_method; i++) {
    const Google__Protobuf__MethodDescriptorProto *m = sd->method[i];
    if (m->name && strcmp(m->name, slash + 1) == 0) {
      *out = (pbj_method){
          .in = pbj_strip_dot(m->input_type),
          .out = pbj_strip_dot(m->output_type),
          .client_streaming = m->has_client_streaming && m->client_streaming,
          .server_streaming = m->has_server_streaming && m->server_streaming};
      return out->in && out->out;
    }
  }
  return false;
}

size_t pbj_pool_services(const pbj_pool *pool, const char **names, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < pool->n_syms; i++) {
    if (pool->syms[i].kind != SYM_SERVICE)
      continue;
    if (n < max)
      names[n] = pool->syms[i].full;
    n++;
  }
  return n;
}

const Google__Protobuf__ServiceDescriptorProto *
pbj_find_service(const pbj_pool *pool, const char *full) {
  return find(pool, full, SYM_SERVICE);
}

const Google__Protobuf__FileDescriptorProto *pbj_file_of(const pbj_pool *pool,
                                                         const char *full) {
  size_t n = strlen(full);
  for (size_t i = 0; i < pool->n_files; i++) {
    const char *pkg = pool->files[i]->package ? pool->files[i]->package : "";
    size_t k = strlen(pkg);
    if (k == 0 || (k < n && strncmp(full, pkg, k) == 0 && full[k] == '.'))
      return pool->files[i];
  }
  return NULL;
}

const char *pbj_json_name(const Google__Protobuf__FieldDescriptorProto *f,
                          char *tmp, size_t tmplen) {
  if (f->json_name)
    return f->json_name;
  /* protoc's ToJsonName: drop '_' and upper-case the letter after it. */
  size_t o = 0;
  bool up = false;
  for (const char *p = f->name; *p && o + 1 < tmplen; p++) {
    if (*p == '_') {
      up = true;
      continue;
    }
    tmp[o++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
    up = false;
  }
  tmp[o] = '\0';
  return tmp;
}

bool pbj_is_map_entry(const Google__Protobuf__DescriptorProto *d) {
  return d && d->options && d->options->has_map_entry && d->options->map_entry;
}

const Google__Protobuf__FieldDescriptorProto *
pbj_field_by_number(const Google__Protobuf__DescriptorProto *d, uint32_t num) {
  for (size_t i = 0; i < d->n_field; i++) {
    if (d->field[i]->has_number && (uint32_t)d->field[i]->number == num)
      return d->field[i];
  }
  return NULL;
}
