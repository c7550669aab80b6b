/* Call credential objects: plugin, static bearer, token file, composite.
 * SPEC CR-01, CR-02, AP-05. Every kind answers through the same request
 * path (fetch.c), so a built-in credential behaves exactly like a plugin
 * that answers at once. */
#include "credentials/creds_int.h"

#include <string.h>

static grit_call_credentials *creds_new(creds_kind kind, const char *type) {
  grit_call_credentials *c = grit_calloc(1, sizeof(*c));
  if (!c)
    return NULL;
  c->refs = 1;
  c->kind = kind;
  grit_str_copy(c->type, sizeof(c->type), type);
  return c;
}

void grit_call_credentials_ref(grit_call_credentials *c) {
  if (c)
    __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

static void creds_free(grit_call_credentials *c) {
  switch (c->kind) {
  case CREDS_PLUGIN:
    if (c->u.plugin.p.destroy)
      c->u.plugin.p.destroy(c->u.plugin.user_data);
    break;
  case CREDS_BEARER:
    /* Scrub the secret before the memory goes back. */
    grit_creds_scrub(c->u.bearer.value, c->u.bearer.len);
    grit_free(c->u.bearer.value);
    break;
  case CREDS_TOKEN_FILE:
    grit_creds_token_file_free(c);
    break;
  case CREDS_COMPOSITE:
    for (size_t i = 0; i < c->u.comp.n; i++)
      grit_call_credentials_unref(c->u.comp.items[i]);
    grit_free(c->u.comp.items);
    break;
  }
  grit_free(c);
}

void grit_call_credentials_unref(grit_call_credentials *c) {
  if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
    creds_free(c);
}

grit_err
grit_call_credentials_create_plugin(const grit_credentials_plugin *plugin,
                                    void *user_data,
                                    grit_call_credentials **out) {
  if (out)
    *out = NULL;
  if (!plugin || !out || !plugin->get_metadata ||
      plugin->version != GRIT_CREDENTIALS_PLUGIN_VERSION)
    return GRIT_ERR_INVALID_ARG;
  grit_call_credentials *c = creds_new(CREDS_PLUGIN, "plugin");
  if (!c)
    return GRIT_ERR_NOMEM;
  if (plugin->type && plugin->type[0])
    grit_str_copy(c->type, sizeof(c->type), plugin->type);
  c->u.plugin.p = *plugin;
  c->u.plugin.p.type = NULL; /* copied into c->type */
  c->u.plugin.user_data = user_data;
  *out = c;
  return GRIT_OK;
}

void grit_creds_scrub(void *p, size_t n) {
  volatile unsigned char *b = p;
  while (n--)
    *b++ = 0;
}

/* "Bearer " + |tok| (|len| bytes) as one allocation. */
char *grit_creds_bearer_value(const uint8_t *tok, size_t len) {
  static const char prefix[] = "Bearer ";
  char *v = grit_malloc(sizeof(prefix) + len);
  if (!v)
    return NULL;
  memcpy(v, prefix, sizeof(prefix) - 1);
  memcpy(v + sizeof(prefix) - 1, tok, len);
  v[sizeof(prefix) - 1 + len] = '\0';
  return v;
}

grit_err grit_call_credentials_create_bearer(const char *token,
                                             grit_call_credentials **out) {
  if (out)
    *out = NULL;
  if (!token || !out)
    return GRIT_ERR_INVALID_ARG;
  size_t len = strlen(token), start, tok_len;
  const char *why;
  if (!grit_creds_token_parse((const uint8_t *)token, len, &start, &tok_len,
                              &why) ||
      start != 0 || tok_len != len)
    return GRIT_ERR_INVALID_ARG; /* padded, empty or not printable */
  grit_call_credentials *c = creds_new(CREDS_BEARER, "bearer");
  if (!c)
    return GRIT_ERR_NOMEM;
  c->u.bearer.value = grit_creds_bearer_value((const uint8_t *)token, len);
  if (!c->u.bearer.value) {
    grit_free(c);
    return GRIT_ERR_NOMEM;
  }
  c->u.bearer.len = strlen(c->u.bearer.value);
  *out = c;
  return GRIT_OK;
}

/* Leaves of |c| (itself, or a composite's flattened items). */
static size_t creds_leaf_count(const grit_call_credentials *c) {
  return c->kind == CREDS_COMPOSITE ? c->u.comp.n : 1;
}

static grit_call_credentials *creds_leaf(grit_call_credentials *c, size_t i) {
  return c->kind == CREDS_COMPOSITE ? c->u.comp.items[i] : c;
}

grit_err grit_call_credentials_create_composite(grit_call_credentials *a,
                                                grit_call_credentials *b,
                                                grit_call_credentials **out) {
  if (out)
    *out = NULL;
  if (!a || !b || !out)
    return GRIT_ERR_INVALID_ARG;
  size_t na = creds_leaf_count(a), nb = creds_leaf_count(b);
  if (na + nb > CREDS_MAX_LEAVES)
    return GRIT_ERR_INVALID_ARG;
  grit_call_credentials *c = creds_new(CREDS_COMPOSITE, "composite");
  if (!c)
    return GRIT_ERR_NOMEM;
  c->u.comp.items = grit_calloc(na + nb, sizeof(*c->u.comp.items));
  if (!c->u.comp.items) {
    grit_free(c);
    return GRIT_ERR_NOMEM;
  }
  for (size_t i = 0; i < na + nb; i++) {
    grit_call_credentials *leaf =
        i < na ? creds_leaf(a, i) : creds_leaf(b, i - na);
    grit_call_credentials_ref(leaf);
    c->u.comp.items[c->u.comp.n++] = leaf;
  }
  *out = c;
  return GRIT_OK;
}

size_t grit_creds_leaves(grit_call_credentials *c,
                         grit_call_credentials **leaves, size_t cap) {
  size_t n = creds_leaf_count(c);
  for (size_t i = 0; i < n && i < cap; i++)
    leaves[i] = creds_leaf(c, i);
  return n;
}

grit_status_code grit_creds_map_code(grit_status_code code) {
  switch (code) { /* gRFC A54 */
  case GRIT_STATUS_INVALID_ARGUMENT:
  case GRIT_STATUS_NOT_FOUND:
  case GRIT_STATUS_ALREADY_EXISTS:
  case GRIT_STATUS_FAILED_PRECONDITION:
  case GRIT_STATUS_ABORTED:
  case GRIT_STATUS_OUT_OF_RANGE:
  case GRIT_STATUS_DATA_LOSS:
    return GRIT_STATUS_INTERNAL;
  case GRIT_STATUS_OK:
  case GRIT_STATUS_CANCELLED:
  case GRIT_STATUS_UNKNOWN:
  case GRIT_STATUS_DEADLINE_EXCEEDED:
  case GRIT_STATUS_PERMISSION_DENIED:
  case GRIT_STATUS_RESOURCE_EXHAUSTED:
  case GRIT_STATUS_UNIMPLEMENTED:
  case GRIT_STATUS_INTERNAL:
  case GRIT_STATUS_UNAVAILABLE:
  case GRIT_STATUS_UNAUTHENTICATED:
    return code;
  }
  return GRIT_STATUS_UNKNOWN; /* not a code at all */
}

bool grit_creds_service_url(const char *authority, const char *method,
                            char *url, size_t url_size, char *name,
                            size_t name_size) {
  if (!authority || !method || method[0] != '/')
    return false;
  const char *slash = strchr(method + 1, '/');
  if (!slash || slash == method + 1 || !slash[1] || strchr(slash + 1, '/'))
    return false;
  size_t alen = strlen(authority);
  if (alen > 4 && strcmp(authority + alen - 4, ":443") == 0)
    alen -= 4; /* as grpc's service URL: the default https port is implied */
  size_t slen = (size_t)(slash - method);
  size_t mlen = strlen(slash + 1);
  size_t need = strlen("https://") + alen + slen + 1;
  if (need > url_size || mlen + 1 > name_size)
    return false;
  memcpy(url, "https://", 8);
  memcpy(url + 8, authority, alen);
  memcpy(url + 8 + alen, method, slen);
  url[8 + alen + slen] = '\0';
  memcpy(name, slash + 1, mlen + 1);
  return true;
}

static bool is_space(uint8_t b) {
  return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' ||
         b == '\v';
}

bool grit_creds_token_parse(const uint8_t *data, size_t len, size_t *start,
                            size_t *tok_len, const char **why) {
  size_t b = 0, e = len;
  while (b < e && is_space(data[b]))
    b++;
  while (e > b && is_space(data[e - 1]))
    e--;
  if (b == e) {
    *why = "empty token";
    return false;
  }
  for (size_t i = b; i < e; i++) {
    if (data[i] < 0x20 || data[i] > 0x7e) {
      *why = "token has a byte outside printable ASCII";
      return false;
    }
  }
  *start = b;
  *tok_len = e - b;
  return true;
}
