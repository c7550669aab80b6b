/* Metadata lists: the public grit_metadata functions and the unchecked
 * internals used for received headers (SPEC HS-06). */
#include "util/util.h"

#include <string.h>

typedef struct md_entry {
  char *key;
  uint8_t *value; /* NUL-terminated, len bytes before the NUL */
  size_t len;
} md_entry;

struct grit_metadata {
  md_entry *entries;
  size_t count, cap;
};

grit_metadata *grit_metadata_empty(void) {
  static grit_metadata empty;
  return &empty;
}

grit_err grit_metadata_create(grit_metadata **out) {
  *out = grit_calloc(1, sizeof(**out));
  return *out ? GRIT_OK : GRIT_ERR_NOMEM;
}

void grit_metadata_destroy(grit_metadata *md) {
  if (!md)
    return;
  for (size_t i = 0; i < md->count; i++) {
    grit_free(md->entries[i].key);
    grit_free(md->entries[i].value);
  }
  grit_free(md->entries);
  grit_free(md);
}

static bool key_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

static bool key_reserved(const char *key, size_t len) {
  static const char *const reserved[] = {"content-type", "te", "user-agent",
                                         "host", "connection"};
  if (len >= 5 && memcmp(key, "grpc-", 5) == 0)
    return true;
  for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
    if (strlen(reserved[i]) == len && memcmp(reserved[i], key, len) == 0)
      return true;
  }
  return false;
}

bool grit_metadata_key_ok(const char *key, size_t len, bool allow_reserved) {
  if (len == 0)
    return false;
  for (size_t i = 0; i < len; i++) {
    if (!key_char_ok(key[i]))
      return false;
  }
  return allow_reserved || !key_reserved(key, len);
}

static bool key_is_bin(const char *key, size_t len) {
  return len > 4 && memcmp(key + len - 4, "-bin", 4) == 0;
}

grit_err grit_metadata_add_unchecked(grit_metadata *md, const char *key,
                                     size_t key_len, const void *value,
                                     size_t len) {
  if (md->count == md->cap) {
    size_t cap = md->cap ? md->cap * 2 : 8;
    md_entry *e = grit_realloc(md->entries, cap * sizeof(*e));
    if (!e)
      return GRIT_ERR_NOMEM;
    md->entries = e;
    md->cap = cap;
  }
  char *k = grit_strndup(key, key_len);
  uint8_t *v = grit_malloc(len + 1);
  if (!k || !v) {
    grit_free(k);
    grit_free(v);
    return GRIT_ERR_NOMEM;
  }
  if (len)
    memcpy(v, value, len);
  v[len] = '\0';
  md->entries[md->count++] = (md_entry){.key = k, .value = v, .len = len};
  return GRIT_OK;
}

grit_err grit_metadata_add(grit_metadata *md, const char *key,
                           const void *value, size_t len) {
  if (!md || !key || (!value && len))
    return GRIT_ERR_INVALID_ARG;
  size_t klen = strlen(key);
  if (!grit_metadata_key_ok(key, klen, false))
    return GRIT_ERR_INVALID_METADATA;
  if (!key_is_bin(key, klen)) {
    const uint8_t *v = value;
    for (size_t i = 0; i < len; i++) {
      if (v[i] < 0x20 || v[i] > 0x7e)
        return GRIT_ERR_INVALID_METADATA;
    }
  }
  return grit_metadata_add_unchecked(md, key, klen, value, len);
}

size_t grit_metadata_count(const grit_metadata *md) {
  return md ? md->count : 0;
}

grit_err grit_metadata_get(const grit_metadata *md, size_t i, const char **key,
                           const uint8_t **value, size_t *len) {
  if (!md || i >= md->count)
    return GRIT_ERR_INVALID_ARG;
  if (key)
    *key = md->entries[i].key;
  if (value)
    *value = md->entries[i].value;
  if (len)
    *len = md->entries[i].len;
  return GRIT_OK;
}

const uint8_t *grit_metadata_find(const grit_metadata *md, const char *key,
                                  size_t *len) {
  if (!md || !key)
    return NULL;
  for (size_t i = 0; i < md->count; i++) {
    if (strcmp(md->entries[i].key, key) == 0) {
      if (len)
        *len = md->entries[i].len;
      return md->entries[i].value;
    }
  }
  return NULL;
}

grit_err grit_metadata_copy(const grit_metadata *src, grit_metadata **out) {
  grit_metadata *md;
  grit_err rv = grit_metadata_create(&md);
  for (size_t i = 0; rv == GRIT_OK && src && i < src->count; i++) {
    const md_entry *e = &src->entries[i];
    rv = grit_metadata_add_unchecked(md, e->key, strlen(e->key), e->value,
                                     e->len);
  }
  if (rv != GRIT_OK) {
    grit_metadata_destroy(md);
    md = NULL;
  }
  *out = md;
  return rv;
}

size_t grit_metadata_wire_size(const grit_metadata *md) {
  size_t n = 0;
  for (size_t i = 0; md && i < md->count; i++)
    n += strlen(md->entries[i].key) + md->entries[i].len + 32;
  return n;
}

size_t grit_metadata_remove(grit_metadata *md, const char *key) {
  if (!md || !key || md == grit_metadata_empty())
    return 0;
  size_t kept = 0, removed = 0;
  for (size_t i = 0; i < md->count; i++) {
    md_entry e = md->entries[i];
    if (strcmp(e.key, key) == 0) {
      grit_free(e.key);
      grit_free(e.value);
      removed++;
      continue;
    }
    md->entries[kept++] = e; /* order of the rest unchanged */
  }
  md->count = kept;
  return removed;
}
