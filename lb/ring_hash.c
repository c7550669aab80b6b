/* ring_hash_experimental (SPEC LP-03; gRFC A42, A76): each address owns
 * entries of a hash ring built as grpc-core builds it (ring.c: XXH64 of
 * "<addr>_<k>"), so a grit and a grpc client send a key to the same
 * backend. A call's hash is XXH64 of its requestHashHeader value (A76);
 * a call without the header gets a random hash. The pick takes the ring
 * entry at or after the hash and walks on from there.
 *
 * Connections are made on demand, as A42 says: nothing connects until a
 * pick lands on an IDLE endpoint (that one starts connecting and the call
 * waits). An endpoint behaves as grpc-core's pick_first child: after a
 * failed connect it stays TRANSIENT_FAILURE (sticky) and reconnects by
 * itself when its backoff ends, until it is READY. A pick with a header
 * hash walks past TRANSIENT_FAILURE endpoints to the first READY one and
 * waits on the first IDLE or CONNECTING one; a random hash takes the
 * first READY one and starts at most one IDLE one. The policy state is
 * A42's: READY if any endpoint is; else TRANSIENT_FAILURE if two or more
 * are; else CONNECTING if any is, or if one is failing among several;
 * else IDLE if any is; else TRANSIENT_FAILURE. In CONNECTING or
 * TRANSIENT_FAILURE with nothing connecting, one IDLE endpoint is started
 * so the policy makes progress without picks (as grpc-core). Duplicate
 * addresses are one endpoint with their count as its weight. */
#include "lb/lb_int.h"

#include <stdio.h>
#include <string.h>

#define RH_RING_SIZE_CAP 4096 /* A42: grpc's default ring size cap */

typedef struct rh_ep {
  uint32_t weight;
  bool failed; /* TRANSIENT_FAILURE since the last READY (sticky) */
} rh_ep;

typedef struct ring_hash {
  grit_lb_policy base;
  grit_subchannel_args a;
  grit_lb_helper h;
  uint64_t min_ring, max_ring; /* as configured */
  char *header;                /* requestHashHeader; NULL: random */
  grit_lb_sclist list;         /* one per distinct address */
  rh_ep *eps;                  /* parallel to |list| */
  grit_ring_entry *ring;
  size_t ring_n;
  grit_connectivity_state state;
  char error[300];
  grit_lb_skipcache skipped;
  char detail[128];
  char fail[1100];
} ring_hash;

static const grit_lb_policy_vtable *rh_vt(void);

static grit_connectivity_state rh_ep_state(const ring_hash *rh, size_t i) {
  grit_connectivity_state s = grit_subchannel_state(rh->list.scs[i]);
  if (s != GRIT_STATE_READY && rh->eps[i].failed)
    return GRIT_STATE_TRANSIENT_FAILURE;
  return s;
}

/* A42's aggregation; *idle is an IDLE endpoint (or n), *connecting the
 * number of CONNECTING ones. */
static grit_connectivity_state rh_aggregate(const ring_hash *rh, size_t *idle,
                                            size_t *connecting) {
  size_t ready = 0, tf = 0, conn = 0, nidle = 0;
  *idle = rh->list.n;
  for (size_t i = 0; i < rh->list.n; i++) {
    switch (rh_ep_state(rh, i)) {
    case GRIT_STATE_READY:
      ready++;
      break;
    case GRIT_STATE_IDLE:
      if (!nidle++)
        *idle = i;
      break;
    case GRIT_STATE_CONNECTING:
      conn++;
      break;
    case GRIT_STATE_TRANSIENT_FAILURE:
    case GRIT_STATE_SHUTDOWN:
      tf++;
      break;
    }
  }
  *connecting = conn;
  if (ready)
    return GRIT_STATE_READY;
  if (tf >= 2)
    return GRIT_STATE_TRANSIENT_FAILURE;
  if (conn)
    return GRIT_STATE_CONNECTING;
  if (tf == 1 && rh->list.n > 1)
    return GRIT_STATE_CONNECTING;
  if (nidle)
    return GRIT_STATE_IDLE;
  return GRIT_STATE_TRANSIENT_FAILURE;
}

static void rh_publish(ring_hash *rh) {
  size_t idle, connecting;
  grit_connectivity_state s = rh_aggregate(rh, &idle, &connecting);
  rh->skipped.valid = false;
  rh->state = s;
  rh->h.update_state(rh->h.ctx, s);
  /* As grpc-core: keep trying when nothing would without picks. */
  if ((s == GRIT_STATE_CONNECTING || s == GRIT_STATE_TRANSIENT_FAILURE) &&
      connecting == 0 && idle < rh->list.n)
    grit_subchannel_connect(rh->list.scs[idle]);
}

static void rh_on_sc_state(grit_subchannel *sc, grit_connectivity_state s,
                           void *ud) {
  ring_hash *rh = ud;
  size_t i = grit_lb_sclist_index(&rh->list, sc);
  if (i == rh->list.n)
    return;
  switch (s) {
  case GRIT_STATE_READY:
    rh->eps[i].failed = false;
    break;
  case GRIT_STATE_TRANSIENT_FAILURE:
    rh->eps[i].failed = true;
    snprintf(rh->error, sizeof(rh->error), "%s: %s",
             grit_subchannel_addr(sc)->text, grit_subchannel_error(sc));
    rh->h.request_reresolution(rh->h.ctx);
    break;
  case GRIT_STATE_IDLE:
    if (grit_subchannel_prev_state(sc) == GRIT_STATE_READY)
      rh->h.request_reresolution(rh->h.ctx); /* DNS-05 */
    if (rh->eps[i].failed)
      grit_subchannel_connect(sc); /* sticky TF: retry after the backoff */
    break;
  case GRIT_STATE_CONNECTING:
  case GRIT_STATE_SHUTDOWN:
    break;
  }
  rh_publish(rh);
}

static grit_err rh_create(const grit_subchannel_args *a,
                          const grit_lb_helper *h, grit_lb_policy **out) {
  ring_hash *rh = grit_calloc(1, sizeof(*rh));
  *out = rh ? &rh->base : NULL;
  if (!rh)
    return GRIT_ERR_NOMEM;
  rh->base.vt = rh_vt();
  rh->a = *a;
  rh->a.health_applies = true; /* grpc-core's child pick_first checks */
  rh->h = *h;
  rh->min_ring = 1024;
  rh->max_ring = 4096;
  rh->state = GRIT_STATE_IDLE;
  return GRIT_OK;
}

static grit_err rh_build_ring(ring_hash *rh) {
  uint64_t lo =
      rh->min_ring < RH_RING_SIZE_CAP ? rh->min_ring : RH_RING_SIZE_CAP;
  uint64_t hi =
      rh->max_ring < RH_RING_SIZE_CAP ? rh->max_ring : RH_RING_SIZE_CAP;
  const char **keys = grit_calloc(rh->list.n ? rh->list.n : 1, sizeof(*keys));
  uint32_t *w = grit_calloc(rh->list.n ? rh->list.n : 1, sizeof(*w));
  grit_ring_entry *ring = NULL;
  size_t ring_n = 0;
  grit_err rv = keys && w ? GRIT_OK : GRIT_ERR_NOMEM;
  for (size_t i = 0; rv == GRIT_OK && i < rh->list.n; i++) {
    keys[i] = grit_subchannel_addr(rh->list.scs[i])->text;
    w[i] = rh->eps[i].weight;
  }
  if (rv == GRIT_OK)
    rv = grit_ring_build(keys, w, rh->list.n, lo, hi, &ring, &ring_n);
  grit_free(keys);
  grit_free(w);
  if (rv != GRIT_OK)
    return rv;
  grit_free(rh->ring);
  rh->ring = ring;
  rh->ring_n = ring_n;
  return GRIT_OK;
}

static grit_err rh_configure(grit_lb_policy *p, const grit_lb_params *params) {
  ring_hash *rh = (ring_hash *)p;
  char *header = NULL;
  if (params->request_hash_header && params->request_hash_header[0] &&
      !(header = grit_strdup(params->request_hash_header)))
    return GRIT_ERR_NOMEM;
  uint64_t old_min = rh->min_ring, old_max = rh->max_ring;
  rh->min_ring = params->min_ring_size;
  rh->max_ring = params->max_ring_size;
  if ((old_min != rh->min_ring || old_max != rh->max_ring) &&
      rh_build_ring(rh) != GRIT_OK) {
    rh->min_ring = old_min;
    rh->max_ring = old_max;
    grit_free(header);
    return GRIT_ERR_NOMEM;
  }
  grit_free(rh->header);
  rh->header = header;
  return GRIT_OK;
}

static grit_err rh_update(grit_lb_policy *p, const grit_addr *addrs, size_t n,
                          bool shuffle) {
  ring_hash *rh = (ring_hash *)p;
  (void)shuffle;
  /* Distinct addresses, in first-seen order, each weighted by its count. */
  grit_addr *uniq = grit_calloc(n ? n : 1, sizeof(*uniq));
  rh_ep *eps = grit_calloc(n ? n : 1, sizeof(*eps));
  if (!uniq || !eps) {
    grit_free(uniq);
    grit_free(eps);
    return GRIT_ERR_NOMEM;
  }
  size_t nu = 0;
  for (size_t i = 0; i < n; i++) {
    size_t k = 0;
    while (k < nu && strcmp(uniq[k].text, addrs[i].text) != 0)
      k++;
    if (k == nu)
      uniq[nu++] = addrs[i];
    eps[k].weight++;
  }
  size_t oldn = rh->list.n;
  grit_subchannel **oldscs =
      oldn ? grit_memdup(rh->list.scs, oldn * sizeof(*oldscs)) : NULL;
  grit_lb_sclist fresh;
  grit_err rv = oldscs || !oldn
                    ? grit_lb_sclist_reconcile(&rh->list, uniq, nu, &rh->a,
                                               rh_on_sc_state, rh, &fresh)
                    : GRIT_ERR_NOMEM;
  if (rv != GRIT_OK) {
    grit_free(oldscs);
    grit_free(uniq);
    grit_free(eps);
    return rv;
  }
  /* Endpoints kept keep their sticky failure. */
  for (size_t i = 0; i < fresh.n; i++) {
    for (size_t k = 0; k < oldn; k++) {
      if (oldscs[k] == fresh.scs[i]) {
        eps[i].failed = rh->eps[k].failed;
        break;
      }
    }
  }
  grit_free(oldscs);
  grit_free(uniq);
  grit_free(rh->eps);
  rh->eps = eps;
  rh->list = fresh;
  if (rh_build_ring(rh) != GRIT_OK) {
    grit_free(rh->ring); /* no ring: picks fail until the next update */
    rh->ring = NULL;
    rh->ring_n = 0;
    rv = GRIT_ERR_NOMEM;
  }
  if (rh->list.n == 0)
    snprintf(rh->error, sizeof(rh->error), "empty address list");
  rh_publish(rh);
  return rv;
}

static void rh_exit_idle(grit_lb_policy *p) {
  /* A42: connections are made on demand, by picks; the state machine
   * (rh_publish) keeps one attempt going when the policy is failing. */
  rh_publish((ring_hash *)p);
}

/* The pick's detail, written without snprintf: it is on every pick. */
static char *rh_put(char *o, const char *s) {
  while (*s)
    *o++ = *s++;
  return o;
}

static char *rh_put_dec(char *o, size_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n)
    *o++ = tmp[--n];
  return o;
}

static grit_pick_result rh_found(ring_hash *rh, grit_pick_result r, size_t e,
                                 size_t entry, uint64_t hash, bool random,
                                 const grit_pick_args *args) {
  static const char hex[] = "0123456789abcdef";
  r.kind = GRIT_PICK_COMPLETE;
  r.transport = grit_subchannel_transport(rh->list.scs[e]);
  if (!args || !args->want_detail)
    return r;
  /* "ring_hash_experimental: header hash <16 hex>, ring entry E of N" */
  char *o = rh_put(rh->detail, random ? "ring_hash_experimental: random hash "
                                      : "ring_hash_experimental: header hash ");
  for (int k = 60; k >= 0; k -= 4)
    *o++ = hex[(hash >> k) & 15];
  o = rh_put(o, ", ring entry ");
  o = rh_put_dec(o, entry);
  o = rh_put(o, " of ");
  o = rh_put_dec(o, rh->ring_n);
  *o = '\0';
  r.detail = rh->detail;
  return r;
}

/* A76: the hash of the call's requestHashHeader; a header sent more than
 * once counts as its values joined with ",", as grpc-core reads it.
 * False when the call does not have it. */
static bool rh_header_hash(const ring_hash *rh, const grit_pick_args *args,
                           uint64_t *hash) {
  size_t len = 0;
  const uint8_t *v = grit_metadata_find(args->metadata, rh->header, &len);
  if (!v)
    return false;
  size_t count = grit_metadata_count(args->metadata), total = 0, seen = 0;
  for (size_t i = 0; i < count; i++) {
    const char *key;
    const uint8_t *val;
    size_t vlen;
    if (grit_metadata_get(args->metadata, i, &key, &val, &vlen) == GRIT_OK &&
        strcmp(key, rh->header) == 0) {
      total += vlen + (seen ? 1 : 0);
      seen++;
    }
  }
  if (seen < 2) {
    *hash = grit_xxh64(v, len, 0);
    return true;
  }
  uint8_t *joined = grit_malloc(total);
  if (!joined) { /* out of memory: the first value alone */
    *hash = grit_xxh64(v, len, 0);
    return true;
  }
  size_t at = 0;
  for (size_t i = 0; i < count; i++) {
    const char *key;
    const uint8_t *val;
    size_t vlen;
    if (grit_metadata_get(args->metadata, i, &key, &val, &vlen) == GRIT_OK &&
        strcmp(key, rh->header) == 0) {
      if (at)
        joined[at++] = ',';
      memcpy(joined + at, val, vlen);
      at += vlen;
    }
  }
  *hash = grit_xxh64(joined, at, 0);
  grit_free(joined);
  return true;
}

static grit_pick_result rh_pick(grit_lb_policy *p, const grit_pick_args *args) {
  ring_hash *rh = (ring_hash *)p;
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  r.skipped = grit_lb_skipped_cached(&rh->list, &rh->skipped);
  if (rh->ring_n == 0) {
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    r.message =
        rh->list.n ? "ring hash: out of memory building the ring" : rh->error;
    return r;
  }
  const grit_pick_route *route = args ? args->route : NULL;
  uint64_t hash = route && route->has_hash ? route->hash : 0;
  /* A42: the xDS route's hash policy, else A76's header, else random. */
  bool random = !(route && route->has_hash) &&
                (!rh->header || !args || !rh_header_hash(rh, args, &hash));
  if (random)
    hash = grit_rng_next(rh->a.rng);
  size_t start = grit_ring_lookup(rh->ring, rh->ring_n, hash);
  if (!random) {
    for (size_t k = 0; k < rh->ring_n; k++) {
      size_t entry = (start + k) % rh->ring_n;
      size_t e = rh->ring[entry].index;
      switch (rh_ep_state(rh, e)) {
      case GRIT_STATE_READY:
        if (grit_subchannel_transport(rh->list.scs[e]))
          return rh_found(rh, r, e, entry, hash, false, args);
        return r;
      case GRIT_STATE_IDLE:
        grit_subchannel_connect(rh->list.scs[e]);
        return r;
      case GRIT_STATE_CONNECTING:
        return r;
      case GRIT_STATE_TRANSIENT_FAILURE:
      case GRIT_STATE_SHUTDOWN:
        break;
      }
    }
  } else {
    bool requested = false, counted = false;
    size_t to_start = rh->list.n;
    for (size_t k = 0; k < rh->ring_n; k++) {
      size_t entry = (start + k) % rh->ring_n;
      size_t e = rh->ring[entry].index;
      grit_connectivity_state s = rh_ep_state(rh, e);
      if (s == GRIT_STATE_READY && grit_subchannel_transport(rh->list.scs[e]))
        return rh_found(rh, r, e, entry, hash, true, args);
      if (!counted) { /* only when the first entry is not READY */
        size_t idle, connecting;
        rh_aggregate(rh, &idle, &connecting);
        requested = connecting > 0;
        counted = true;
      }
      if (!requested && s == GRIT_STATE_IDLE) {
        to_start = e;
        requested = true;
      }
    }
    if (to_start < rh->list.n)
      grit_subchannel_connect(rh->list.scs[to_start]);
    if (requested)
      return r;
  }
  r.kind = GRIT_PICK_FAIL;
  r.code = GRIT_STATUS_UNAVAILABLE;
  /* Every backend and why it cannot take the call (issue 28). */
  char why[1024];
  snprintf(rh->fail, sizeof(rh->fail),
           "ring hash cannot find a connected endpoint: %s",
           grit_lb_sclist_why_unusable(&rh->list, why, sizeof(why)));
  r.message = rh->fail;
  return r;
}

static void rh_destroy(grit_lb_policy *p) {
  ring_hash *rh = (ring_hash *)p;
  if (!rh)
    return;
  grit_lb_sclist_free(&rh->list);
  grit_free(rh->eps);
  grit_free(rh->ring);
  grit_free(rh->header);
  grit_free(rh);
}

const grit_lb_policy_vtable grit_lb_ring_hash = {
    .name = "ring_hash_experimental",
    .create = rh_create,
    .update_addresses = rh_update,
    .exit_idle = rh_exit_idle,
    .pick = rh_pick,
    .destroy = rh_destroy,
    .configure = rh_configure,
};

static const grit_lb_policy_vtable *rh_vt(void) {
  return &grit_lb_ring_hash;
}
