/* The xDS bootstrap (gRFC A27; SPEC XD-01): which control plane to ask,
 * with which channel credentials, and who this client is (the Node sent on
 * the ADS stream). Read as grpc reads it: GRPC_XDS_BOOTSTRAP names a file,
 * else GRPC_XDS_BOOTSTRAP_CONFIG holds the JSON itself; a program may pass
 * the JSON directly. Errors name the JSON path. */
#include "xds/xds_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void grit_xds_bootstrap_free(xds_bootstrap *b) {
  if (!b)
    return;
  for (size_t i = 0; i < b->nservers; i++) {
    grit_free(b->servers[i].uri);
    grit_free(b->servers[i].ca_file);
    grit_free(b->servers[i].cert_file);
    grit_free(b->servers[i].key_file);
  }
  grit_free(b->servers);
  grit_free(b->node_id);
  grit_free(b->node_cluster);
  grit_free(b->region);
  grit_free(b->zone);
  grit_free(b->sub_zone);
  grit_free(b->node_metadata);
  grit_free(b->listener_template);
  grit_free(b);
}

static grit_err bad(grit_error_detail *d, const char *path, const char *why) {
  grit_error_set(d, GRIT_ERR_INVALID_ARG, path, "%s", why);
  return GRIT_ERR_INVALID_ARG;
}

/* A string member |key| of |obj| (absent: NULL and OK). */
static grit_err opt_string(json_t *obj, const char *key, const char *path,
                           char **out, grit_error_detail *d) {
  *out = NULL;
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v))
    return GRIT_OK;
  if (!json_is_string(v)) {
    char p[640];
    snprintf(p, sizeof(p), "%s.%s", path, key);
    return bad(d, p, "must be a string");
  }
  *out = grit_strdup(json_string_value(v));
  return *out ? GRIT_OK : GRIT_ERR_NOMEM;
}

/* channel_creds: the first type grit supports wins ("insecure", "tls");
 * none supported is an error (as grpc). */
static grit_err server_creds(json_t *creds, const char *path, xds_server *s,
                             grit_error_detail *d) {
  if (!json_is_array(creds))
    return bad(d, path, "must be an array");
  size_t i;
  json_t *c;
  json_array_foreach(creds, i, c) {
    char p[256];
    snprintf(p, sizeof(p), "%.200s[%zu]", path, i);
    if (!json_is_object(c))
      return bad(d, p, "must be an object");
    json_t *type = json_object_get(c, "type");
    if (!json_is_string(type)) {
      char pt[320];
      snprintf(pt, sizeof(pt), "%s.type", p);
      return bad(d, pt, "must be a string");
    }
    const char *t = json_string_value(type);
    if (strcmp(t, "insecure") == 0) {
      s->tls = false;
      return GRIT_OK;
    }
    if (strcmp(t, "tls") == 0) {
      s->tls = true;
      json_t *cfg = json_object_get(c, "config");
      if (!cfg || json_is_null(cfg))
        return GRIT_OK; /* system roots */
      if (!json_is_object(cfg)) {
        char pc[320];
        snprintf(pc, sizeof(pc), "%s.config", p);
        return bad(d, pc, "must be an object");
      }
      char pc[320];
      snprintf(pc, sizeof(pc), "%s.config", p);
      grit_err rv = opt_string(cfg, "ca_certificate_file", pc, &s->ca_file, d);
      if (rv == GRIT_OK)
        rv = opt_string(cfg, "certificate_file", pc, &s->cert_file, d);
      if (rv == GRIT_OK)
        rv = opt_string(cfg, "private_key_file", pc, &s->key_file, d);
      if (rv == GRIT_OK && !s->cert_file != !s->key_file)
        return bad(d, pc, "certificate_file and private_key_file go together");
      return rv;
    }
  }
  return bad(d, path, "no supported channel credentials (insecure, tls)");
}

static grit_err parse_server(json_t *o, const char *path, xds_server *s,
                             grit_error_detail *d) {
  if (!json_is_object(o))
    return bad(d, path, "must be an object");
  grit_err rv = opt_string(o, "server_uri", path, &s->uri, d);
  if (rv != GRIT_OK)
    return rv;
  if (!s->uri || !s->uri[0]) {
    char p[300];
    snprintf(p, sizeof(p), "%s.server_uri", path);
    return bad(d, p, "is required");
  }
  char p[300];
  snprintf(p, sizeof(p), "%s.channel_creds", path);
  json_t *creds = json_object_get(o, "channel_creds");
  if (!creds)
    return bad(d, p, "is required");
  if ((rv = server_creds(creds, p, s, d)) != GRIT_OK)
    return rv;
  json_t *feats = json_object_get(o, "server_features");
  if (feats && !json_is_null(feats)) {
    snprintf(p, sizeof(p), "%s.server_features", path);
    if (!json_is_array(feats))
      return bad(d, p, "must be an array");
    size_t i;
    json_t *f;
    json_array_foreach(feats, i, f) {
      if (json_is_string(f) &&
          strcmp(json_string_value(f), "ignore_resource_deletion") == 0)
        s->ignore_resource_deletion = true;
    }
  }
  return GRIT_OK;
}

static grit_err parse_node(json_t *node, xds_bootstrap *b,
                           grit_error_detail *d) {
  if (!node || json_is_null(node))
    return GRIT_OK;
  if (!json_is_object(node))
    return bad(d, "$.node", "must be an object");
  grit_err rv = opt_string(node, "id", "$.node", &b->node_id, d);
  if (rv == GRIT_OK)
    rv = opt_string(node, "cluster", "$.node", &b->node_cluster, d);
  if (rv != GRIT_OK)
    return rv;
  json_t *loc = json_object_get(node, "locality");
  if (loc && !json_is_null(loc)) {
    if (!json_is_object(loc))
      return bad(d, "$.node.locality", "must be an object");
    rv = opt_string(loc, "region", "$.node.locality", &b->region, d);
    if (rv == GRIT_OK)
      rv = opt_string(loc, "zone", "$.node.locality", &b->zone, d);
    if (rv == GRIT_OK)
      rv = opt_string(loc, "sub_zone", "$.node.locality", &b->sub_zone, d);
    if (rv != GRIT_OK)
      return rv;
  }
  json_t *md = json_object_get(node, "metadata");
  if (md && !json_is_null(md)) {
    if (!json_is_object(md))
      return bad(d, "$.node.metadata", "must be an object");
    b->node_metadata = json_dumps(md, JSON_COMPACT);
    if (!b->node_metadata)
      return GRIT_ERR_NOMEM;
    /* jansson allocated it with its own allocator (grit never sets
     * jansson's hooks, so that is libc's): copy into ours. */
    char *copy = grit_strdup(b->node_metadata);
    json_free_t jfree;
    json_get_alloc_funcs(NULL, &jfree);
    jfree(b->node_metadata);
    b->node_metadata = copy;
    if (!copy)
      return GRIT_ERR_NOMEM;
  }
  return GRIT_OK;
}

grit_err grit_xds_bootstrap_parse(const char *json, size_t len,
                                  xds_bootstrap **out, grit_error_detail *d) {
  *out = NULL;
  json_error_t je;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    grit_error_set(d, GRIT_ERR_INVALID_ARG, "$", "not JSON: %s (line %d)",
                   je.text, je.line);
    return GRIT_ERR_INVALID_ARG;
  }
  xds_bootstrap *b = grit_calloc(1, sizeof(*b));
  grit_err rv = b ? GRIT_OK : GRIT_ERR_NOMEM;
  json_t *servers = json_object_get(root, "xds_servers");
  if (rv == GRIT_OK && !json_is_object(root))
    rv = bad(d, "$", "must be an object");
  else if (rv == GRIT_OK &&
           (!json_is_array(servers) || json_array_size(servers) == 0))
    rv = bad(d, "$.xds_servers", "must be a non-empty array");
  if (rv == GRIT_OK) {
    b->servers = grit_calloc(json_array_size(servers), sizeof(xds_server));
    if (!b->servers)
      rv = GRIT_ERR_NOMEM;
  }
  for (size_t i = 0; rv == GRIT_OK && i < json_array_size(servers); i++) {
    char p[64];
    snprintf(p, sizeof(p), "$.xds_servers[%zu]", i);
    b->nservers++;
    rv = parse_server(json_array_get(servers, i), p, &b->servers[i], d);
  }
  if (rv == GRIT_OK)
    rv = parse_node(json_object_get(root, "node"), b, d);
  if (rv == GRIT_OK)
    rv = opt_string(root, "client_default_listener_resource_name_template", "$",
                    &b->listener_template, d);
  if (rv == GRIT_OK && json_object_get(root, "authorities"))
    rv = bad(d, "$.authorities",
             "federation (gRFC A47) is not supported by grit");
  json_decref(root);
  if (rv != GRIT_OK) {
    if (rv == GRIT_ERR_NOMEM)
      grit_error_set(d, rv, "$", "out of memory");
    grit_xds_bootstrap_free(b);
    return rv;
  }
  *out = b;
  return GRIT_OK;
}

grit_err grit_xds_bootstrap_from_env(xds_bootstrap **out,
                                     grit_error_detail *d) {
  *out = NULL;
  const char *file = getenv("GRPC_XDS_BOOTSTRAP");
  if (file && file[0]) {
    FILE *f = fopen(file, "rb");
    if (!f) {
      grit_error_set(d, GRIT_ERR_NOT_FOUND, "GRPC_XDS_BOOTSTRAP", "%s: %s",
                     file, strerror(errno));
      return GRIT_ERR_NOT_FOUND;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    grit_err rv = GRIT_OK;
    for (;;) {
      if (n == cap) {
        cap = cap ? cap * 2 : 4096;
        char *grown = cap <= (1u << 20) ? grit_realloc(buf, cap) : NULL;
        if (!grown) {
          rv = cap > (1u << 20) ? GRIT_ERR_INVALID_ARG : GRIT_ERR_NOMEM;
          break;
        }
        buf = grown;
      }
      size_t got = fread(buf + n, 1, cap - n, f);
      n += got;
      if (got == 0)
        break;
    }
    fclose(f);
    if (rv == GRIT_OK)
      rv = grit_xds_bootstrap_parse(buf, n, out, d);
    else
      grit_error_set(d, rv, "GRPC_XDS_BOOTSTRAP", "%s: %s", file,
                     rv == GRIT_ERR_NOMEM ? "out of memory"
                                          : "larger than 1 MiB");
    grit_free(buf);
    return rv;
  }
  const char *text = getenv("GRPC_XDS_BOOTSTRAP_CONFIG");
  if (text && text[0])
    return grit_xds_bootstrap_parse(text, strlen(text), out, d);
  grit_error_set(d, GRIT_ERR_NOT_FOUND, "$",
                 "no xDS bootstrap: set GRPC_XDS_BOOTSTRAP (a file) or "
                 "GRPC_XDS_BOOTSTRAP_CONFIG (JSON)");
  return GRIT_ERR_NOT_FOUND;
}
