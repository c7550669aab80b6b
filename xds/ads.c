/* The ADS protocol machine (see ads.h; gRFC A27, SPEC XD-01): per type the
 * watched names and their cache, the version ACKed and the nonce seen;
 * requests are the current state of a type, re-encoded whenever it
 * changes, so a burst of changes goes out as one request. Valid resources
 * of a response are applied even when others in it are refused; the NACK
 * then names each refused resource and its reason (as grpc does). */
#include "xds/ads.h"

#include "xds/xds_int.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define NACK_MAX 2048

typedef struct entry {
  char *name;
  unsigned watchers;
  xds_resource *res;  /* the resource in force, or NULL */
  uint64_t hash;      /* FNV-1a of its serialized form (change detection) */
  uint64_t dne_at_ms; /* 0: no does-not-exist timer armed */
  bool dne;           /* said not to exist (deleted, or the timer) */
  bool nacked;        /* its last update was refused */
} entry;

typedef struct type_state {
  entry *e;
  size_t n, cap;
  char *version; /* last ACKed; NULL: none */
  char *nonce;   /* last seen on this stream; NULL: none */
  char *nack;    /* the error_detail of the pending NACK, or NULL */
  char *last_nack;
  bool dirty; /* a request is due */
} type_state;

struct xds_ads {
  const xds_bootstrap *b;
  char *ua_version;
  xds_ads_cbs cbs;
  void *ud;
  type_state t[XDS_KINDS];
  bool up, node_sent;
  xds_ads_stats stats;
};

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

static grit_err set_str(char **dst, const char *s, size_t n) {
  char *copy = s ? grit_strndup(s, n) : NULL;
  if (s && !copy)
    return GRIT_ERR_NOMEM;
  grit_free(*dst);
  *dst = copy;
  return GRIT_OK;
}

grit_err grit_xds_ads_create(const xds_bootstrap *b,
                             const char *user_agent_version,
                             const xds_ads_cbs *cbs, void *ud, xds_ads **out) {
  *out = NULL;
  xds_ads *a = grit_calloc(1, sizeof(*a));
  if (!a)
    return GRIT_ERR_NOMEM;
  a->b = b;
  a->ua_version = grit_strdup(user_agent_version ? user_agent_version : "");
  if (!a->ua_version) {
    grit_free(a);
    return GRIT_ERR_NOMEM;
  }
  a->cbs = *cbs;
  a->ud = ud;
  *out = a;
  return GRIT_OK;
}

void grit_xds_ads_destroy(xds_ads *a) {
  if (!a)
    return;
  for (int k = 0; k < XDS_KINDS; k++) {
    type_state *t = &a->t[k];
    for (size_t i = 0; i < t->n; i++) {
      grit_free(t->e[i].name);
      grit_xds_resource_unref(t->e[i].res);
    }
    grit_free(t->e);
    grit_free(t->version);
    grit_free(t->nonce);
    grit_free(t->nack);
    grit_free(t->last_nack);
  }
  grit_free(a->ua_version);
  grit_free(a);
}

static entry *find(type_state *t, const char *name, size_t len) {
  for (size_t i = 0; i < t->n; i++)
    if (strlen(t->e[i].name) == len && memcmp(t->e[i].name, name, len) == 0)
      return &t->e[i];
  return NULL;
}

grit_err grit_xds_ads_watch(xds_ads *a, xds_kind k, const char *name,
                            uint64_t now_ms) {
  type_state *t = &a->t[k];
  entry *e = find(t, name, strlen(name));
  if (e) {
    e->watchers++;
    if (e->res && a->cbs.on_resource)
      a->cbs.on_resource(a->ud, k, e->name, e->res);
    return GRIT_OK;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 8;
    entry *grown = grit_realloc(t->e, cap * sizeof(*grown));
    if (!grown)
      return GRIT_ERR_NOMEM;
    t->e = grown;
    t->cap = cap;
  }
  e = &t->e[t->n];
  memset(e, 0, sizeof(*e));
  e->name = grit_strdup(name);
  if (!e->name)
    return GRIT_ERR_NOMEM;
  e->watchers = 1;
  if (a->up)
    e->dne_at_ms = now_ms + XDS_DNE_TIMEOUT_MS;
  t->n++;
  t->dirty = true;
  return GRIT_OK;
}

void grit_xds_ads_unwatch(xds_ads *a, xds_kind k, const char *name) {
  type_state *t = &a->t[k];
  entry *e = find(t, name, strlen(name));
  if (!e || --e->watchers > 0)
    return;
  grit_free(e->name);
  grit_xds_resource_unref(e->res);
  *e = t->e[--t->n];
  t->dirty = true;
}

void grit_xds_ads_stream_started(xds_ads *a, uint64_t now_ms) {
  a->up = true;
  a->node_sent = false;
  for (int k = 0; k < XDS_KINDS; k++) {
    type_state *t = &a->t[k];
    grit_free(t->nonce);
    t->nonce = NULL;
    grit_free(t->nack);
    t->nack = NULL;
    t->dirty = t->n > 0;
    for (size_t i = 0; i < t->n; i++)
      t->e[i].dne_at_ms = t->e[i].res ? 0 : now_ms + XDS_DNE_TIMEOUT_MS;
  }
}

void grit_xds_ads_stream_ended(xds_ads *a) {
  a->up = false;
  for (int k = 0; k < XDS_KINDS; k++)
    for (size_t i = 0; i < a->t[k].n; i++)
      a->t[k].e[i].dne_at_ms = 0; /* no timer without a stream (A27) */
}

/* ---- responses ---- */

/* Append "name: why" to the pending NACK text. */
static void nack_add(type_state *t, const char *name, const char *why) {
  size_t have = t->nack ? strlen(t->nack) : 0;
  if (have >= NACK_MAX)
    return;
  char line[600];
  int n =
      snprintf(line, sizeof(line), "%s%s%s%s", have ? "; " : "",
               name && name[0] ? name : "", name && name[0] ? ": " : "", why);
  if (n < 0)
    return;
  size_t add = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
  if (have + add > NACK_MAX)
    add = NACK_MAX - have;
  char *grown = grit_realloc(t->nack, have + add + 1);
  if (!grown)
    return; /* the NACK goes out with what fitted */
  memcpy(grown + have, line, add);
  grown[have + add] = '\0';
  t->nack = grown;
}

/* One resource of a response. |seen| collects the names present. */
static grit_err take_resource(xds_ads *a, xds_kind k, const grit_pbf *any,
                              const char *type_url, size_t type_len,
                              bool *seen) {
  type_state *t = &a->t[k];
  const char *rt;
  size_t rtl, vlen;
  const uint8_t *value;
  if (!grit_xds_any_unwrap(any->data, any->len, &rt, &rtl, &value, &vlen)) {
    nack_add(t, NULL, "a resource is not a valid Any");
    a->stats.invalid[k]++;
    return GRIT_OK;
  }
  if (rtl != type_len || memcmp(rt, type_url, rtl) != 0) {
    nack_add(t, NULL, "a resource of another type than the response's");
    a->stats.invalid[k]++;
    return GRIT_OK;
  }
  xds_resource *res;
  char name[256], why[512];
  grit_err rv = grit_xds_resource_decode(k, value, vlen, &res, name,
                                         sizeof(name), why, sizeof(why));
  if (rv == GRIT_ERR_NOMEM)
    return rv;
  entry *e = name[0] ? find(t, name, strlen(name)) : NULL;
  if (e)
    seen[e - t->e] = true;
  if (rv != GRIT_OK) {
    a->stats.invalid[k]++;
    nack_add(t, name, why);
    if (e) {
      e->dne_at_ms = 0; /* it exists, even if refused */
      e->dne = false;
      e->nacked = true;
      if (a->cbs.on_error)
        a->cbs.on_error(a->ud, k, e->name, why);
    }
    return GRIT_OK;
  }
  a->stats.valid[k]++;
  if (!e) { /* not watched (any more): ACKed, not kept */
    grit_xds_resource_unref(res);
    return GRIT_OK;
  }
  uint64_t h = fnv1a(value, vlen);
  e->dne_at_ms = 0;
  e->dne = false;
  e->nacked = false;
  if (e->res && e->hash == h) {
    grit_xds_resource_unref(res); /* unchanged: no notification */
    return GRIT_OK;
  }
  grit_xds_resource_unref(e->res);
  e->res = res;
  e->hash = h;
  if (a->cbs.on_resource)
    a->cbs.on_resource(a->ud, k, e->name, e->res);
  return GRIT_OK;
}

grit_err grit_xds_ads_on_response(xds_ads *a, const uint8_t *p, size_t n,
                                  uint64_t now_ms) {
  (void)now_ms;
  a->stats.responses++;
  const char *version = NULL, *type_url = NULL, *nonce = NULL;
  size_t vl = 0, tl = 0, nl = 0, nres = 0;
  grit_pbr r;
  grit_pbf f;
  int rc;
  grit_pbr_init(&r, p, n);
  while ((rc = grit_pbr_next(&r, &f)) == 1) {
    if (f.wt != GRIT_PB_LEN)
      continue;
    if (f.num == 1) {
      version = (const char *)f.data;
      vl = f.len;
    } else if (f.num == 2) {
      nres++;
    } else if (f.num == 4) {
      type_url = (const char *)f.data;
      tl = f.len;
    } else if (f.num == 5) {
      nonce = (const char *)f.data;
      nl = f.len;
    }
  }
  int kind = type_url ? grit_xds_kind_of(type_url, tl) : -1;
  if (rc < 0 || kind < 0) {
    if (kind >= 0) { /* NACK what could not be read */
      type_state *t = &a->t[kind];
      if (set_str(&t->nonce, nonce, nl) != GRIT_OK)
        return GRIT_ERR_NOMEM;
      nack_add(t, NULL, "malformed DiscoveryResponse");
      t->dirty = true;
    }
    return GRIT_ERR_INVALID_ARG;
  }
  type_state *t = &a->t[kind];
  grit_free(t->nack);
  t->nack = NULL;
  bool *seen = t->n ? grit_calloc(t->n, sizeof(bool)) : NULL;
  if (t->n && !seen)
    return GRIT_ERR_NOMEM;
  size_t watched = t->n;
  grit_pbr_init(&r, p, n);
  grit_err rv = GRIT_OK;
  while (rv == GRIT_OK && grit_pbr_next(&r, &f) == 1)
    if (f.num == 2 && f.wt == GRIT_PB_LEN)
      rv = take_resource(a, (xds_kind)kind, &f, type_url, tl, seen);
  if (rv == GRIT_OK && (kind == XDS_LISTENER || kind == XDS_CLUSTER) &&
      !(a->b->nservers && a->b->servers[0].ignore_resource_deletion)) {
    /* State of the world: a watched resource absent from the response is
     * gone (A27). The list cannot have changed during the walk: callbacks
     * do not re-enter. */
    for (size_t i = 0; i < watched && i < t->n; i++) {
      entry *e = &t->e[i];
      if (seen[i] || !e->res)
        continue;
      grit_xds_resource_unref(e->res);
      e->res = NULL;
      e->dne = true;
      e->nacked = false;
      if (a->cbs.on_does_not_exist)
        a->cbs.on_does_not_exist(a->ud, (xds_kind)kind, e->name);
    }
  }
  grit_free(seen);
  if (rv != GRIT_OK)
    return rv;
  if (set_str(&t->nonce, nonce, nl) != GRIT_OK)
    return GRIT_ERR_NOMEM;
  if (t->nack) {
    if (set_str(&t->last_nack, t->nack, strlen(t->nack)) != GRIT_OK)
      return GRIT_ERR_NOMEM;
  } else if (set_str(&t->version, version ? version : "", vl) != GRIT_OK) {
    return GRIT_ERR_NOMEM;
  }
  t->dirty = true;
  (void)nres;
  return GRIT_OK;
}

void grit_xds_ads_on_timer(xds_ads *a, uint64_t now_ms) {
  for (int k = 0; k < XDS_KINDS; k++) {
    type_state *t = &a->t[k];
    for (size_t i = 0; i < t->n; i++) {
      entry *e = &t->e[i];
      if (!e->dne_at_ms || now_ms < e->dne_at_ms)
        continue;
      e->dne_at_ms = 0;
      e->dne = true;
      if (a->cbs.on_does_not_exist)
        a->cbs.on_does_not_exist(a->ud, (xds_kind)k, e->name);
    }
  }
}

uint64_t grit_xds_ads_next_timer_ms(const xds_ads *a) {
  uint64_t next = 0;
  for (int k = 0; k < XDS_KINDS; k++)
    for (size_t i = 0; i < a->t[k].n; i++) {
      uint64_t at = a->t[k].e[i].dne_at_ms;
      if (at && (!next || at < next))
        next = at;
    }
  return next;
}

/* ---- requests ---- */

typedef struct wbuf {
  uint8_t *b;
  size_t n, cap;
  bool oom;
} wbuf;

static void w_raw(wbuf *w, const void *p, size_t n) {
  if (w->oom)
    return;
  if (w->n + n > w->cap) {
    size_t cap = (w->n + n) * 2 + 64;
    uint8_t *grown = grit_realloc(w->b, cap);
    if (!grown) {
      w->oom = true;
      return;
    }
    w->b = grown;
    w->cap = cap;
  }
  if (n)
    memcpy(w->b + w->n, p, n);
  w->n += n;
}

static void w_varint(wbuf *w, uint64_t v) {
  uint8_t buf[10];
  size_t n = 0;
  do {
    buf[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  w_raw(w, buf, n);
}

static void w_bytes(wbuf *w, uint32_t field, const void *p, size_t n) {
  w_varint(w, (uint64_t)field << 3 | 2);
  w_varint(w, n);
  w_raw(w, p, n);
}

static void w_str(wbuf *w, uint32_t field, const char *s) {
  if (s)
    w_bytes(w, field, s, strlen(s));
}

/* Append |sub| as a LEN field and free it. */
static void w_msg(wbuf *w, uint32_t field, wbuf *sub) {
  if (sub->oom)
    w->oom = true;
  else
    w_bytes(w, field, sub->b, sub->n);
  grit_free(sub->b);
  memset(sub, 0, sizeof(*sub));
}

static void w_value(wbuf *w, uint32_t field, json_t *v, int depth);

/* google.protobuf.Struct: fields=1 (map<string, Value>: key=1, value=2). */
static void w_struct(wbuf *w, json_t *obj, int depth) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    wbuf pair = {0};
    w_str(&pair, 1, key);
    w_value(&pair, 2, v, depth + 1);
    w_msg(w, 1, &pair);
  }
}

/* google.protobuf.Value: null_value=1, number_value=2, string_value=3,
 * bool_value=4, struct_value=5, list_value=6 (values=1). */
static void w_value(wbuf *w, uint32_t field, json_t *v, int depth) {
  wbuf val = {0};
  if (depth > 32) {
    w_varint(&val, 1 << 3); /* too deep: null */
    w_varint(&val, 0);
  } else if (json_is_object(v)) {
    wbuf st = {0};
    w_struct(&st, v, depth);
    w_msg(&val, 5, &st);
  } else if (json_is_array(v)) {
    wbuf list = {0};
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) w_value(&list, 1, item, depth + 1);
    w_msg(&val, 6, &list);
  } else if (json_is_string(v)) {
    w_str(&val, 3, json_string_value(v));
  } else if (json_is_boolean(v)) {
    w_varint(&val, 4 << 3);
    w_varint(&val, json_is_true(v));
  } else if (json_is_number(v)) {
    double d = json_number_value(v);
    uint64_t bits;
    memcpy(&bits, &d, 8);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
      le[i] = (uint8_t)(bits >> (8 * i));
    w_varint(&val, 2 << 3 | 1);
    w_raw(&val, le, 8);
  } else {
    w_varint(&val, 1 << 3);
    w_varint(&val, 0);
  }
  w_msg(w, field, &val);
}

/* envoy.config.core.v3.Node: id=1, cluster=2, metadata=3, locality=4,
 * user_agent_name=6, user_agent_version=7, client_features=10. */
static void w_node(wbuf *w, const xds_ads *a) {
  const xds_bootstrap *b = a->b;
  wbuf node = {0};
  w_str(&node, 1, b->node_id ? b->node_id : "");
  w_str(&node, 2, b->node_cluster);
  if (b->node_metadata) {
    json_t *md = json_loads(b->node_metadata, 0, NULL);
    if (md) {
      wbuf st = {0};
      w_struct(&st, md, 0);
      w_msg(&node, 3, &st);
      json_decref(md);
    }
  }
  if (b->region || b->zone || b->sub_zone) {
    wbuf loc = {0};
    w_str(&loc, 1, b->region);
    w_str(&loc, 2, b->zone);
    w_str(&loc, 3, b->sub_zone);
    w_msg(&node, 4, &loc);
  }
  w_str(&node, 6, "grit");
  w_str(&node, 7, a->ua_version);
  w_str(&node, 10, "envoy.lb.does_not_support_overprovisioning");
  w_str(&node, 10, "xds.config.resource-in-sotw");
  w_msg(w, 2, &node);
}

/* DiscoveryRequest: version_info=1, node=2, resource_names=3,
 * type_url=4, response_nonce=5, error_detail=6 (google.rpc.Status:
 * code=1, message=2). */
bool grit_xds_ads_next_request(xds_ads *a, grit_bytes *out) {
  out->data = NULL;
  out->len = 0;
  if (!a->up)
    return false;
  for (int k = 0; k < XDS_KINDS; k++) {
    type_state *t = &a->t[k];
    if (!t->dirty)
      continue;
    wbuf w = {0};
    w_str(&w, 1, t->version ? t->version : "");
    if (!a->node_sent)
      w_node(&w, a);
    for (size_t i = 0; i < t->n; i++)
      w_str(&w, 3, t->e[i].name);
    w_str(&w, 4, grit_xds_type_url((xds_kind)k));
    w_str(&w, 5, t->nonce ? t->nonce : "");
    if (t->nack) {
      wbuf st = {0};
      w_varint(&st, 1 << 3);
      w_varint(&st, GRIT_STATUS_INVALID_ARGUMENT);
      w_str(&st, 2, t->nack);
      w_msg(&w, 6, &st);
    }
    if (w.oom) {
      grit_free(w.b);
      return false; /* stays dirty: tried again on the next call */
    }
    t->dirty = false;
    grit_free(t->nack);
    t->nack = NULL;
    a->node_sent = true;
    a->stats.requests++;
    out->data = w.b;
    out->len = w.n;
    return true;
  }
  return false;
}

const char *grit_xds_ads_version(const xds_ads *a, xds_kind k) {
  return a->t[k].version;
}

const char *grit_xds_ads_last_nack(const xds_ads *a, xds_kind k) {
  return a->t[k].last_nack;
}

void grit_xds_ads_get_stats(const xds_ads *a, xds_ads_stats *st) {
  *st = a->stats;
}

void grit_xds_ads_foreach(const xds_ads *a, xds_kind k, xds_ads_entry_fn fn,
                          void *ud) {
  const type_state *t = &a->t[k];
  for (size_t i = 0; i < t->n; i++) {
    const entry *e = &t->e[i];
    xds_cache_state st;
    if (e->nacked)
      st = e->res ? XDS_CACHE_NACKED_BUT_CACHED : XDS_CACHE_NACKED;
    else if (e->res)
      st = XDS_CACHE_ACKED;
    else
      st = e->dne ? XDS_CACHE_DOES_NOT_EXIST : XDS_CACHE_REQUESTED;
    fn(ud, e->name, e->res, st);
  }
}

const char *grit_xds_cache_state_name(xds_cache_state st) {
  static const char *const names[] = {"requested", "does_not_exist", "acked",
                                      "nacked", "nacked_but_cached"};
  return (unsigned)st < sizeof(names) / sizeof(names[0]) ? names[st] : "?";
}
