/*
 * grit-dedup: server-side deduplication of idempotency keys (SPEC DD-01..04).
 *
 * A separate library (pkg-config name grit-dedup) for gRPC servers in C. A
 * client such as grit stamps every attempt of one logical call with the same
 * `idempotency-key` header (SPEC ID-01); a handler passes that key and a
 * fingerprint of the request to grit_dedup_claim() before it does anything:
 *
 *   LEADER       run the handler; then grit_dedup_succeed() (response cached)
 *                or grit_dedup_fail() (only when nothing was committed) or
 *                grit_dedup_abandon() (outcome unknown: left for healing).
 *   REPLAY       answer with the recorded response or failure, run nothing.
 *   MISMATCH     the key was used for a different request:
 *                answer FAILED_PRECONDITION (never a replay).
 *   IN_PROGRESS  another execution still holds the key after the wait:
 *                answer ABORTED (retryable for the client), run nothing.
 *
 * Healing: a pending key whose leader's lease has run out (the process died
 * between its domain commit and grit_dedup_succeed, or it abandoned the key)
 * is taken over by the next claimer, which asks the application's heal
 * callback whether the domain write committed (the domain tables are the
 * source of truth): if so the record becomes succeeded with the response the
 * callback rebuilds, otherwise the claimer becomes the new leader.
 *
 * Stores: in-process (one server process; a hash table with a TTL and a
 * memory bound) and PostgreSQL (several replicas; libpq). This header
 * includes only libc and is independent of grit.h.
 *
 * Threading: every function may be called from any thread; a store is shared
 * by all handler threads. Blocking: grit_dedup_claim may wait up to its
 * |wait_ms|; PostgreSQL calls block on the network.
 */
#ifndef GRIT_DEDUP_H
#define GRIT_DEDUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(BUILDING_GRIT_DEDUP) && defined(__GNUC__)
#  define GRIT_DEDUP_EXTERN __attribute__((visibility("default")))
#else
#  define GRIT_DEDUP_EXTERN
#endif

/* Library errors: whether a call worked. Values are stable. */
#define GRIT_DEDUP_ERR_MAP(XX)                                                 \
  XX(OK, 0, "success")                                                         \
  XX(ERR_NOMEM, -1, "out of memory")                                           \
  XX(ERR_INVALID_ARG, -2, "invalid argument")                                  \
  XX(ERR_STORE, -3, "the store failed or is unreachable")                      \
  XX(ERR_STALE, -4, "the claim no longer holds the key")                       \
  XX(ERR_TOO_LARGE, -5, "response larger than the configured limit")           \
  XX(ERR_FULL, -6, "the in-process store is at its memory bound")

typedef enum grit_dedup_err {
#define GRIT_DEDUP_ERR_GEN(name, val, text) GRIT_DEDUP_##name = (val),
  GRIT_DEDUP_ERR_MAP(GRIT_DEDUP_ERR_GEN)
#undef GRIT_DEDUP_ERR_GEN
} grit_dedup_err;

/** Describe |err| in plain words.
 *
 * Ownership: static string. Thread: any. Unknown values: "unknown error". */
GRIT_DEDUP_EXTERN const char *grit_dedup_strerror(grit_dedup_err err);

/* What grit_dedup_claim decided. */
typedef enum grit_dedup_outcome {
  GRIT_DEDUP_LEADER = 0,
  GRIT_DEDUP_REPLAY = 1,
  GRIT_DEDUP_MISMATCH = 2,
  GRIT_DEDUP_IN_PROGRESS = 3
} grit_dedup_outcome;

/* What the application's heal callback found in its domain tables. */
typedef enum grit_dedup_verdict {
  GRIT_DEDUP_COMMITTED = 0,     /* the write is there: set the response */
  GRIT_DEDUP_NOT_COMMITTED = 1, /* nothing was written: safe to run again */
  GRIT_DEDUP_UNKNOWN = 2        /* cannot tell now: leave the key pending */
} grit_dedup_verdict;

/* The result of a claim (caller storage). Its layout is frozen for the
 * life of the soname (docs/abi.md): what a claim reports later comes
 * through new functions, never new fields here. */
typedef struct grit_dedup_result {
  grit_dedup_outcome outcome;
  uint64_t token;    /* LEADER: pass to succeed/fail/abandon */
  bool healed;       /* the key was taken over from a leader that had gone */
  int status;        /* REPLAY: the gRPC status recorded, 0 for success */
  char *message;     /* REPLAY of a failure: its message, or NULL */
  uint8_t *response; /* REPLAY of a success: the cached response bytes */
  size_t response_len;
} grit_dedup_result;

/** Release what a claim put into |r| (message, response) and zero it.
 *
 * Thread: any. NULL is a no-op. */
GRIT_DEDUP_EXTERN void grit_dedup_result_free(grit_dedup_result *r);

typedef struct grit_dedup_heal_ctx grit_dedup_heal_ctx;

/** Heal callback: did the execution holding |key| commit its domain write?
 * Runs on the claiming thread, inside grit_dedup_claim, with no store lock
 * held; it may block on its own database. On GRIT_DEDUP_COMMITTED it calls
 * grit_dedup_heal_set_response() with the response the call would have
 * returned (rebuilt from the domain rows). */
typedef grit_dedup_verdict (*grit_dedup_heal_cb)(const char *key,
                                                 grit_dedup_heal_ctx *ctx,
                                                 void *user_data);

/** Set the response a healed key records (copied). Only inside a heal
 * callback.
 *
 * Returns GRIT_DEDUP_OK, GRIT_DEDUP_ERR_NOMEM, or GRIT_DEDUP_ERR_TOO_LARGE
 * when |len| is over the store's max_response. */
GRIT_DEDUP_EXTERN grit_dedup_err grit_dedup_heal_set_response(
    grit_dedup_heal_ctx *ctx, const void *data, size_t len);

#define GRIT_DEDUP_OPTS_VERSION 1

/* Store options; zero fields take the defaults. Copied at creation. */
typedef struct grit_dedup_opts {
  unsigned version;        /* GRIT_DEDUP_OPTS_VERSION */
  uint64_t ttl_ms;         /* record lifetime from its claim; 0: 24 h */
  uint64_t lease_ms;       /* a pending key older than this may be healed;
                              0: 30 s. It must exceed the handler's run time. */
  size_t max_response;     /* largest cached response; 0: 1 MiB */
  size_t max_bytes;        /* in-process: memory bound of all records;
                              0: 64 MiB */
  grit_dedup_heal_cb heal; /* NULL: expired leases stay IN_PROGRESS */
  void *heal_data;
  const char *table;  /* PostgreSQL: table name (copied); NULL "grit_dedup" */
  unsigned pool_size; /* PostgreSQL: connections; 0: 4 */
} grit_dedup_opts;

typedef struct grit_dedup_store grit_dedup_store;

/** Create an in-process store (one server process).
 *
 * |opts| may be NULL (defaults). Ownership: *out is new, release with
 * grit_dedup_store_destroy. Thread: any.
 * Returns GRIT_DEDUP_OK, GRIT_DEDUP_ERR_NOMEM, or GRIT_DEDUP_ERR_INVALID_ARG
 * (|out| NULL, a wrong opts version). *out is NULL on failure. */
GRIT_DEDUP_EXTERN grit_dedup_err grit_dedup_store_create_mem(
    const grit_dedup_opts *opts, grit_dedup_store **out);

/** Create a PostgreSQL store on |conninfo| (libpq syntax, copied). Opens
 * pool_size connections and creates the versioned schema (table |table| and
 * |table|_schema) if it is missing; replicas may do so at the same time.
 * The database's clock decides leases and expiry, so replicas' clocks may
 * differ.
 *
 * Ownership: *out is new. Thread: any; blocks on the network.
 * Returns GRIT_DEDUP_OK, GRIT_DEDUP_ERR_NOMEM, GRIT_DEDUP_ERR_INVALID_ARG (a
 * bad table name, opts version), GRIT_DEDUP_ERR_STORE (cannot connect, or
 * the schema has a newer version); |err|, if not NULL, gets the reason
 * (|errlen| bytes, NUL-terminated). */
GRIT_DEDUP_EXTERN grit_dedup_err
grit_dedup_store_create_pg(const char *conninfo, const grit_dedup_opts *opts,
                           grit_dedup_store **out, char *err, size_t errlen);

/** Destroy |s|; claims still held stay pending (healable). NULL: no-op.
 * No call on |s| may be running. Thread: any. */
GRIT_DEDUP_EXTERN void grit_dedup_store_destroy(grit_dedup_store *s);

/** The reason of the last GRIT_DEDUP_ERR_STORE on this thread (libpq's
 * message), or "". Ownership: borrowed, valid until the thread's next call.
 */
GRIT_DEDUP_EXTERN const char *grit_dedup_last_error(void);

/** Claim |key| (a NUL-terminated string, at most 256 bytes) for a request
 * whose fingerprint is |fp| (|fp_len| bytes, 1..64, e.g. a SHA-256 of the
 * request message and method). A follower finding the key pending waits up
 * to |wait_ms| (0: no wait) for the leader; a pending key whose lease ran
 * out is healed (see the file comment). SPEC DD-01, DD-03.
 *
 * Ownership: |out| is caller storage, filled on GRIT_DEDUP_OK; release it
 * with grit_dedup_result_free. Thread: any; blocks up to |wait_ms| plus
 * store round trips and the heal callback.
 * Returns GRIT_DEDUP_OK (see out->outcome), GRIT_DEDUP_ERR_INVALID_ARG,
 * GRIT_DEDUP_ERR_NOMEM, GRIT_DEDUP_ERR_FULL (in-process store at its memory
 * bound: answer RESOURCE_EXHAUSTED), GRIT_DEDUP_ERR_STORE (the store failed,
 * e.g. PostgreSQL connection lost: run nothing, answer UNAVAILABLE; a claim
 * that may have been recorded is healed once its lease runs out). */
GRIT_DEDUP_EXTERN grit_dedup_err grit_dedup_claim(grit_dedup_store *s,
                                                  const char *key,
                                                  const void *fp, size_t fp_len,
                                                  uint64_t wait_ms,
                                                  grit_dedup_result *out);

/** The leader's success: cache |response| (|len| bytes, copied) for |key|.
 *
 * Thread: any. Returns GRIT_DEDUP_OK, GRIT_DEDUP_ERR_STALE (|token| no
 * longer holds the key: its lease ran out and it was healed),
 * GRIT_DEDUP_ERR_TOO_LARGE (nothing recorded: the key stays pending, as an
 * unknown outcome), GRIT_DEDUP_ERR_NOMEM, GRIT_DEDUP_ERR_STORE (outcome
 * unknown: healing will settle it). */
GRIT_DEDUP_EXTERN grit_dedup_err grit_dedup_succeed(grit_dedup_store *s,
                                                    const char *key,
                                                    uint64_t token,
                                                    const void *response,
                                                    size_t len);

/** The leader's terminal failure with gRPC |status| (1..16) and |message|
 * (copied, may be NULL). Only when nothing can have been committed: later
 * claims replay this failure and never run the handler (SPEC DD-02).
 *
 * Thread: any. Returns as grit_dedup_succeed, or GRIT_DEDUP_ERR_INVALID_ARG
 * for status 0. */
GRIT_DEDUP_EXTERN grit_dedup_err grit_dedup_fail(grit_dedup_store *s,
                                                 const char *key,
                                                 uint64_t token, int status,
                                                 const char *message);

/** The leader cannot tell whether its write committed (e.g. its database
 * connection broke during COMMIT): the key stays pending and the next
 * claimer heals it at once, without waiting for the lease (SPEC DD-02).
 *
 * Thread: any. Returns GRIT_DEDUP_OK, GRIT_DEDUP_ERR_STALE,
 * GRIT_DEDUP_ERR_STORE. */
GRIT_DEDUP_EXTERN grit_dedup_err grit_dedup_abandon(grit_dedup_store *s,
                                                    const char *key,
                                                    uint64_t token);

struct pg_conn; /* libpq's PGconn */

/** PostgreSQL store: record the leader's success on the application's own
 * connection |conn|, inside the transaction that holds its domain writes, so
 * both commit or neither does. Run it before COMMIT; on
 * GRIT_DEDUP_ERR_STALE roll back (the key was healed by another replica).
 * |s| must be a PostgreSQL store (for its table name and limits).
 *
 * Thread: any (|conn| is the caller's). Returns GRIT_DEDUP_OK,
 * GRIT_DEDUP_ERR_STALE, GRIT_DEDUP_ERR_TOO_LARGE, GRIT_DEDUP_ERR_INVALID_ARG
 * (not a PostgreSQL store), GRIT_DEDUP_ERR_STORE (the statement failed). */
GRIT_DEDUP_EXTERN grit_dedup_err grit_dedup_pg_succeed_tx(
    grit_dedup_store *s, struct pg_conn *conn, const char *key, uint64_t token,
    const void *response, size_t len);

/** PostgreSQL store: lend the application one of the store's pooled
 * connections, for its own statements (domain writes, the transaction of
 * grit_dedup_pg_succeed_tx, heal queries). A connection that broke (the
 * server restarted, the network dropped) is reset before it is lent, as the
 * store does for its own operations, so an application using this instead
 * of its own PGconn reconnects by itself after a database restart.
 * Blocks while every pooled connection is lent or in use; the store's own
 * functions need a free one too, so with pool_size 1 release before calling
 * them.
 *
 * Ownership: |*out| stays the store's; give it back with
 * grit_dedup_pg_conn_release, never PQfinish it. Thread: any.
 * Returns GRIT_DEDUP_OK, GRIT_DEDUP_ERR_INVALID_ARG (not a PostgreSQL store,
 * |out| NULL), GRIT_DEDUP_ERR_STORE (it could not reconnect now:
 * grit_dedup_last_error says why; nothing was lent, |*out| is
 * NULL). */
GRIT_DEDUP_EXTERN grit_dedup_err
grit_dedup_pg_conn_acquire(grit_dedup_store *s, struct pg_conn **out);

/** Give back a connection from grit_dedup_pg_conn_acquire. A transaction
 * still open on it is rolled back. NULL |conn| is a no-op. Thread: any. */
GRIT_DEDUP_EXTERN void grit_dedup_pg_conn_release(grit_dedup_store *s,
                                                  struct pg_conn *conn);

/** Delete expired records now (the stores also do it as they go).
 *
 * Thread: any. Returns GRIT_DEDUP_OK or GRIT_DEDUP_ERR_STORE. |*removed|, if
 * not NULL, gets the count. */
GRIT_DEDUP_EXTERN grit_dedup_err grit_dedup_purge(grit_dedup_store *s,
                                                  uint64_t *removed);

/* Counters of a store, for tests and metrics (this process only). Caller
 * storage: set |size| first (GRIT_DEDUP_STATS_INIT); counters are added at
 * the end only, and the store writes only those that fit (docs/abi.md). */
typedef struct grit_dedup_stats {
  size_t size; /* sizeof(grit_dedup_stats) as the caller knows it */
  uint64_t claims, leaders, replays, mismatches, in_progress, heals;
  uint64_t records;      /* in-process: records held */
  uint64_t bytes;        /* in-process: bytes counted against max_bytes */
  uint64_t store_errors; /* operations that ended GRIT_DEDUP_ERR_STORE */
} grit_dedup_stats;

/** A grit_dedup_stats with |size| set and every counter zero. */
#define GRIT_DEDUP_STATS_INIT                                                  \
  { .size = sizeof(grit_dedup_stats) }

/** Copy the counters of |s| into |out|, as many as |out->size| holds (the
 * rest of a larger struct is zeroed). Thread: any.
 * Returns GRIT_DEDUP_OK, or GRIT_DEDUP_ERR_INVALID_ARG (|s| or |out| NULL,
 * or |out->size| not set; nothing written). */
GRIT_DEDUP_EXTERN grit_dedup_err grit_dedup_get_stats(grit_dedup_store *s,
                                                      grit_dedup_stats *out);

/** Write |store|'s counters (a grit_dedup_store *) as Prometheus text
 * (format 0.0.4): grit_dedup_claims_total, _leaders_total, _replays_total,
 * _mismatches_total, _in_progress_total, _heals_total, _store_errors_total
 * and the in-process gauges grit_dedup_records, grit_dedup_bytes (SPEC
 * OP-01). snprintf-style: writes at most |cap| bytes (NUL-terminated when
 * |cap| > 0) and returns the length the whole text needs, so |buf| may be
 * NULL with |cap| 0. Its signature is grit_metrics_source_cb's, so
 * `grit_metrics_add_source(grit_dedup_metrics_text, store)` puts the
 * counters in grit's exposition (grit_metrics_write_prometheus with a NULL
 * channel, and the admin endpoint's GET /metrics).
 * Thread: any. */
GRIT_DEDUP_EXTERN size_t grit_dedup_metrics_text(char *buf, size_t cap,
                                                 void *store);

#ifdef __cplusplus
}
#endif

#endif
