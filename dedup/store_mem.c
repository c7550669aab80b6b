/* The in-process store: a chained hash table under one mutex, records with
 * a TTL from their claim and a memory bound (SPEC DD-04). The clock is the
 * process's monotonic clock, so wall-clock steps change nothing. Followers
 * wait on one condition variable that every change broadcasts. */
#include "dedup/dedup_int.h"

#include <string.h>
#include <time.h>

typedef struct mem_rec {
  struct mem_rec *next;
  char *key;
  uint8_t fp[DD_MAX_FP];
  size_t fp_len;
  int state;
  uint64_t token;
  uint64_t lease_until_ms;
  uint64_t expires_at_ms;
  int status;
  char *message;
  uint8_t *response;
  size_t response_len;
  size_t bytes; /* counted against max_bytes */
} mem_rec;

typedef struct mem_store {
  grit_dedup_store base;
  pthread_mutex_t mu;
  pthread_cond_t changed;
  mem_rec **buckets;
  size_t n_buckets, n_recs, bytes;
} mem_store;

static uint64_t hash_key(const char *k) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *k; k++)
    h = (h ^ (uint8_t)*k) * 1099511628211ull;
  return h;
}

static mem_rec **slot_of(mem_store *m, const char *key) {
  mem_rec **p = &m->buckets[hash_key(key) & (m->n_buckets - 1)];
  while (*p && strcmp((*p)->key, key) != 0)
    p = &(*p)->next;
  return p;
}

static void rec_destroy(mem_store *m, mem_rec *r) {
  m->bytes -= r->bytes;
  m->n_recs--;
  grit_free(r->key);
  grit_free(r->message);
  grit_free(r->response);
  grit_free(r);
}

static size_t rec_bytes(size_t klen, size_t msg, size_t resp) {
  return sizeof(mem_rec) + klen + 1 + msg + resp;
}

/* Drop every expired record; returns how many. */
static uint64_t purge_locked(mem_store *m, uint64_t now) {
  uint64_t n = 0;
  for (size_t i = 0; i < m->n_buckets; i++) {
    mem_rec **p = &m->buckets[i];
    while (*p) {
      mem_rec *r = *p;
      if (r->expires_at_ms <= now) {
        *p = r->next;
        rec_destroy(m, r);
        n++;
      } else {
        p = &r->next;
      }
    }
  }
  return n;
}

static void grow_locked(mem_store *m) {
  if (m->n_recs < m->n_buckets)
    return;
  size_t nb = m->n_buckets * 2;
  mem_rec **b = grit_calloc(nb, sizeof(*b));
  if (!b)
    return; /* longer chains, still correct */
  for (size_t i = 0; i < m->n_buckets; i++) {
    mem_rec *r = m->buckets[i];
    while (r) {
      mem_rec *next = r->next;
      size_t j = hash_key(r->key) & (nb - 1);
      r->next = b[j];
      b[j] = r;
      r = next;
    }
  }
  grit_free(m->buckets);
  m->buckets = b;
  m->n_buckets = nb;
}

static grit_dedup_err snapshot(const mem_rec *r, uint64_t now, dd_rec *out) {
  memset(out, 0, sizeof(*out));
  out->state = r->state;
  memcpy(out->fp, r->fp, r->fp_len);
  out->fp_len = r->fp_len;
  out->token = r->token;
  out->lease_left_ms = r->lease_until_ms > now ? r->lease_until_ms - now : 0;
  out->status = r->status;
  if (r->message && !(out->message = grit_strdup(r->message)))
    return GRIT_DEDUP_ERR_NOMEM;
  if (r->state == DD_SUCCEEDED) {
    out->response = grit_malloc(r->response_len ? r->response_len : 1);
    if (!out->response) {
      grit_dedup_rec_free(out);
      return GRIT_DEDUP_ERR_NOMEM;
    }
    if (r->response_len)
      memcpy(out->response, r->response, r->response_len);
    out->response_len = r->response_len;
  }
  return GRIT_DEDUP_OK;
}

static grit_dedup_err mem_insert(grit_dedup_store *s, const char *key,
                                 const void *fp, size_t fp_len, uint64_t token,
                                 bool *inserted, dd_rec *rec) {
  mem_store *m = (mem_store *)s;
  uint64_t now = grit_clock_now_ms();
  grit_dedup_err e = GRIT_DEDUP_OK;
  *inserted = false;
  pthread_mutex_lock(&m->mu);
  mem_rec **p = slot_of(m, key);
  if (*p && (*p)->expires_at_ms <= now) {
    /* DD-04: past its TTL the key protects nothing; a new claim starts. */
    mem_rec *old = *p;
    *p = old->next;
    rec_destroy(m, old);
    p = slot_of(m, key);
  }
  if (*p) {
    e = snapshot(*p, now, rec);
    goto done;
  }
  size_t klen = strlen(key);
  size_t need = rec_bytes(klen, 0, 0);
  if (m->bytes + need > s->opts.max_bytes) {
    purge_locked(m, now);
    if (m->bytes + need > s->opts.max_bytes) {
      /* Never evict a live record: that would silently drop protection. */
      e = GRIT_DEDUP_ERR_FULL;
      goto done;
    }
    p = slot_of(m, key);
  }
  mem_rec *r = grit_calloc(1, sizeof(*r));
  if (!r || !(r->key = grit_strdup(key))) {
    grit_free(r);
    e = GRIT_DEDUP_ERR_NOMEM;
    goto done;
  }
  memcpy(r->fp, fp, fp_len);
  r->fp_len = fp_len;
  r->state = DD_PENDING;
  r->token = token;
  r->lease_until_ms = grit_add_sat_u64(now, s->opts.lease_ms);
  r->expires_at_ms = grit_add_sat_u64(now, s->opts.ttl_ms);
  r->bytes = need;
  *p = r;
  m->bytes += need;
  m->n_recs++;
  *inserted = true;
  grow_locked(m);
done:
  pthread_mutex_unlock(&m->mu);
  return e;
}

/* The pending record of |key| held by |token|, or NULL. */
static mem_rec *held(mem_store *m, const char *key, uint64_t token) {
  mem_rec *r = *slot_of(m, key);
  return r && r->state == DD_PENDING && r->token == token ? r : NULL;
}

static grit_dedup_err mem_finish(grit_dedup_store *s, const char *key,
                                 uint64_t token, int state, int status,
                                 const char *message, const void *resp,
                                 size_t len) {
  mem_store *m = (mem_store *)s;
  grit_dedup_err e = GRIT_DEDUP_OK;
  char *msg = message ? grit_strdup(message) : NULL;
  uint8_t *copy = state == DD_SUCCEEDED ? grit_malloc(len ? len : 1) : NULL;
  if ((message && !msg) || (state == DD_SUCCEEDED && !copy)) {
    grit_free(msg);
    grit_free(copy);
    return GRIT_DEDUP_ERR_NOMEM;
  }
  if (len && copy)
    memcpy(copy, resp, len);
  pthread_mutex_lock(&m->mu);
  mem_rec *r = held(m, key, token);
  if (!r) {
    e = GRIT_DEDUP_ERR_STALE;
    goto done;
  }
  size_t mlen = msg ? strlen(msg) : 0;
  size_t need = rec_bytes(strlen(r->key), mlen, copy ? len : 0);
  if (m->bytes - r->bytes + need > s->opts.max_bytes) {
    purge_locked(m, grit_clock_now_ms());
    r = held(m, key, token);
    if (!r) {
      e = GRIT_DEDUP_ERR_STALE;
      goto done;
    }
  }
  /* Finishing a claim is never refused for memory: its bytes were the
   * caller's to spend once it became leader; the bound applies to claims. */
  m->bytes = m->bytes - r->bytes + need;
  r->bytes = need;
  r->state = state;
  r->status = status;
  r->message = msg;
  r->response = copy;
  r->response_len = copy ? len : 0;
  msg = NULL;
  copy = NULL;
  pthread_cond_broadcast(&m->changed);
done:
  pthread_mutex_unlock(&m->mu);
  grit_free(msg);
  grit_free(copy);
  return e;
}

static grit_dedup_err mem_takeover(grit_dedup_store *s, const char *key,
                                   uint64_t old, uint64_t token) {
  mem_store *m = (mem_store *)s;
  uint64_t now = grit_clock_now_ms();
  pthread_mutex_lock(&m->mu);
  mem_rec *r = held(m, key, old);
  grit_dedup_err e = GRIT_DEDUP_ERR_STALE;
  if (r && r->lease_until_ms <= now) {
    r->token = token;
    r->lease_until_ms = grit_add_sat_u64(now, s->opts.lease_ms);
    e = GRIT_DEDUP_OK;
  }
  pthread_mutex_unlock(&m->mu);
  return e;
}

static grit_dedup_err mem_abandon(grit_dedup_store *s, const char *key,
                                  uint64_t token) {
  mem_store *m = (mem_store *)s;
  pthread_mutex_lock(&m->mu);
  mem_rec *r = held(m, key, token);
  if (r) {
    r->lease_until_ms = 0;
    pthread_cond_broadcast(&m->changed);
  }
  pthread_mutex_unlock(&m->mu);
  return r ? GRIT_DEDUP_OK : GRIT_DEDUP_ERR_STALE;
}

static void mem_wait(grit_dedup_store *s, const char *key, uint64_t ms) {
  mem_store *m = (mem_store *)s;
  (void)key;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (ms % 1000) * 1000000u;
  ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  pthread_mutex_lock(&m->mu);
  /* One wake-up per change of any key: the caller re-reads its key. */
  pthread_cond_timedwait(&m->changed, &m->mu, &ts);
  pthread_mutex_unlock(&m->mu);
}

static grit_dedup_err mem_purge(grit_dedup_store *s, uint64_t *removed) {
  mem_store *m = (mem_store *)s;
  pthread_mutex_lock(&m->mu);
  uint64_t n = purge_locked(m, grit_clock_now_ms());
  pthread_mutex_unlock(&m->mu);
  if (removed)
    *removed = n;
  return GRIT_DEDUP_OK;
}

static void mem_stats(grit_dedup_store *s, grit_dedup_stats *out) {
  mem_store *m = (mem_store *)s;
  pthread_mutex_lock(&m->mu);
  out->records = m->n_recs;
  out->bytes = m->bytes;
  pthread_mutex_unlock(&m->mu);
}

static void mem_destroy(grit_dedup_store *s) {
  mem_store *m = (mem_store *)s;
  if (m->buckets) {
    for (size_t i = 0; i < m->n_buckets; i++) {
      while (m->buckets[i]) {
        mem_rec *r = m->buckets[i];
        m->buckets[i] = r->next;
        rec_destroy(m, r);
      }
    }
  }
  grit_free(m->buckets);
  pthread_cond_destroy(&m->changed);
  pthread_mutex_destroy(&m->mu);
  grit_dedup_base_free(s);
  grit_free(m);
}

static const dd_store_ops mem_ops = {
    .name = "memory",
    .insert = mem_insert,
    .finish = mem_finish,
    .takeover = mem_takeover,
    .abandon = mem_abandon,
    .wait = mem_wait,
    .purge = mem_purge,
    .stats = mem_stats,
    .destroy = mem_destroy,
};

grit_dedup_err grit_dedup_store_create_mem(const grit_dedup_opts *opts,
                                           grit_dedup_store **out) {
  if (!out)
    return GRIT_DEDUP_ERR_INVALID_ARG;
  *out = NULL;
  mem_store *m = grit_calloc(1, sizeof(*m));
  if (!m)
    return GRIT_DEDUP_ERR_NOMEM;
  grit_dedup_err e = grit_dedup_base_init(&m->base, &mem_ops, opts);
  if (e != GRIT_DEDUP_OK) {
    grit_free(m);
    return e;
  }
  m->n_buckets = 64;
  m->buckets = grit_calloc(m->n_buckets, sizeof(*m->buckets));
  pthread_mutex_init(&m->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&m->changed, &ca);
  pthread_condattr_destroy(&ca);
  if (!m->buckets) {
    mem_destroy(&m->base);
    return GRIT_DEDUP_ERR_NOMEM;
  }
  *out = &m->base;
  return GRIT_DEDUP_OK;
}

/* Only the PostgreSQL store has a transaction to join. */
#ifndef GRIT_DEDUP_HAVE_PG
grit_dedup_err grit_dedup_store_create_pg(const char *conninfo,
                                          const grit_dedup_opts *opts,
                                          grit_dedup_store **out, char *err,
                                          size_t errlen) {
  (void)conninfo;
  (void)opts;
  if (out)
    *out = NULL;
  if (err && errlen)
    grit_str_copy(err, errlen, "built without libpq");
  return GRIT_DEDUP_ERR_STORE;
}

grit_dedup_err grit_dedup_pg_succeed_tx(grit_dedup_store *s,
                                        struct pg_conn *conn, const char *key,
                                        uint64_t token, const void *response,
                                        size_t len) {
  return GRIT_DEDUP_ERR_INVALID_ARG;
}
#endif
