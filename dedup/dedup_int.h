/*
 * dedup internals: the store vtable that dedup.c (the keyed-idempotency
 * protocol: claim, wait, heal) drives, and the record snapshot the stores
 * return. Stores (store_mem.c, store_pg.c) keep records and their clock;
 * they know nothing of healing. Depends on util only.
 * Layout: floor 1 of docs/layout.md.
 */
#ifndef GRIT_DEDUP_INT_H
#define GRIT_DEDUP_INT_H

#include <pthread.h>

#include "grit/dedup.h"
#include "util/util.h"

#define DD_MAX_KEY 256
#define DD_MAX_FP 64

enum { DD_PENDING = 0, DD_SUCCEEDED = 1, DD_FAILED = 2 };

/* A record as a store saw it; message and response are new (grit_free). */
typedef struct dd_rec {
  int state;
  uint8_t fp[DD_MAX_FP];
  size_t fp_len;
  uint64_t token;
  uint64_t lease_left_ms; /* 0: the lease ran out or the key was abandoned */
  int status;
  char *message;
  uint8_t *response;
  size_t response_len;
} dd_rec;

void grit_dedup_rec_free(dd_rec *r);

typedef struct dd_store_ops {
  const char *name;
  /* Insert a pending record held by |token| unless a live (unexpired) one
   * exists: then *inserted is false and |rec| is filled. */
  grit_dedup_err (*insert)(grit_dedup_store *s, const char *key, const void *fp,
                           size_t fp_len, uint64_t token, bool *inserted,
                           dd_rec *rec);
  /* Pending and held by |token|: set |state| (and its status, message,
   * response). Otherwise GRIT_DEDUP_ERR_STALE. */
  grit_dedup_err (*finish)(grit_dedup_store *s, const char *key, uint64_t token,
                           int state, int status, const char *message,
                           const void *resp, size_t len);
  /* Pending, held by |old| and its lease over: |token| holds it now with a
   * fresh lease. Otherwise GRIT_DEDUP_ERR_STALE. */
  grit_dedup_err (*takeover)(grit_dedup_store *s, const char *key, uint64_t old,
                             uint64_t token);
  /* Pending and held by |token|: end its lease now. */
  grit_dedup_err (*abandon)(grit_dedup_store *s, const char *key,
                            uint64_t token);
  /* Block up to |ms| or until |key| changes (a store may just sleep). */
  void (*wait)(grit_dedup_store *s, const char *key, uint64_t ms);
  grit_dedup_err (*purge)(grit_dedup_store *s, uint64_t *removed);
  void (*stats)(grit_dedup_store *s, grit_dedup_stats *out);
  void (*destroy)(grit_dedup_store *s);
} dd_store_ops;

/* The base every store embeds first. */
struct grit_dedup_store {
  const dd_store_ops *ops;
  grit_dedup_opts opts; /* defaults filled in; table points to |table| */
  char *table;
  pthread_mutex_t mu; /* guards rng and stats */
  grit_rng rng;
  grit_dedup_stats stats;
};

/* Fill the base (defaults, rng); the store's create calls it first. */
grit_dedup_err grit_dedup_base_init(grit_dedup_store *s,
                                    const dd_store_ops *ops,
                                    const grit_dedup_opts *opts);
void grit_dedup_base_free(grit_dedup_store *s);
/* Remember |fmt| as this thread's last store error; returns ERR_STORE. */
grit_dedup_err grit_dedup_store_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

#endif
