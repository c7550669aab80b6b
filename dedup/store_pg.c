/* The PostgreSQL store, for several server replicas sharing keys. Claims
 * are INSERT ... ON CONFLICT DO NOTHING (SPEC DD-04); completions and
 * takeovers are UPDATEs conditional on the claim token, so a stale leader
 * never overwrites a healed key. Leases and expiry use the database clock
 * (now()), so replicas' clocks do not matter. A small pool of connections
 * serves the handler threads; a connection that broke is reset on its next
 * use, and the operation that saw it break reports GRIT_DEDUP_ERR_STORE
 * (never retried here: its outcome is unknown, and healing settles it). */
#include "dedup/dedup_int.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SCHEMA_VERSION 1

typedef struct pg_slot {
  PGconn *conn;
  bool busy;
} pg_slot;

typedef struct pg_store {
  grit_dedup_store base;
  pthread_mutex_t mu;
  pthread_cond_t freed;
  pg_slot *slots;
  unsigned n_slots;
  char *conninfo;
  /* SQL with the table name filled in. */
  char q_del_expired[160], q_insert[400], q_select[400], q_finish[200],
      q_takeover[240], q_abandon[200], q_purge[120];
} pg_store;

static grit_dedup_err conn_error(PGconn *c, const char *what) {
  if (PQstatus(c) == CONNECTION_BAD)
    return grit_dedup_store_error("PostgreSQL connection lost during %s: %s",
                                  what, PQerrorMessage(c));
  return grit_dedup_store_error("PostgreSQL %s failed: %s", what,
                                PQerrorMessage(c));
}

static PGconn *pool_get(pg_store *p) {
  pthread_mutex_lock(&p->mu);
  pg_slot *slot = NULL;
  for (;;) {
    for (unsigned i = 0; i < p->n_slots && !slot; i++)
      if (!p->slots[i].busy)
        slot = &p->slots[i];
    if (slot)
      break;
    pthread_cond_wait(&p->freed, &p->mu);
  }
  slot->busy = true;
  pthread_mutex_unlock(&p->mu);
  /* A connection that broke last time is reset now, outside the lock. */
  if (PQstatus(slot->conn) != CONNECTION_OK)
    PQreset(slot->conn);
  return slot->conn;
}

static void pool_put(pg_store *p, PGconn *c) {
  pthread_mutex_lock(&p->mu);
  for (unsigned i = 0; i < p->n_slots; i++)
    if (p->slots[i].conn == c)
      p->slots[i].busy = false;
  pthread_cond_signal(&p->freed);
  pthread_mutex_unlock(&p->mu);
}

/* Run |sql| with text parameters except those flagged binary in |bin|. */
static PGresult *run(PGconn *c, const char *sql, int n, const char *const *vals,
                     const int *lens, const int *bin) {
  return PQexecParams(c, sql, n, NULL, vals, lens, bin, 0);
}

/* Number of rows an UPDATE/DELETE touched, or -1 on error. */
static long affected(PGresult *r) {
  if (PQresultStatus(r) != PGRES_COMMAND_OK)
    return -1;
  return strtol(PQcmdTuples(r), NULL, 10);
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  return -1;
}

/* Decode a text-format bytea ("\x0a1b...") into grit_malloc'd bytes. */
static grit_dedup_err unhex(const char *s, uint8_t **out, size_t *len) {
  if (s[0] != '\\' || s[1] != 'x')
    return grit_dedup_store_error("unexpected bytea format");
  s += 2;
  size_t n = strlen(s) / 2;
  uint8_t *b = grit_malloc(n ? n : 1);
  if (!b)
    return GRIT_DEDUP_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      grit_free(b);
      return grit_dedup_store_error("bad bytea hex");
    }
    b[i] = (uint8_t)(hi << 4 | lo);
  }
  *out = b;
  *len = n;
  return GRIT_DEDUP_OK;
}

/* Row of q_select: state, fingerprint, token, lease_left_ms, status,
 * message, response. */
static grit_dedup_err read_row(PGresult *r, dd_rec *rec) {
  memset(rec, 0, sizeof(*rec));
  rec->state = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
  uint8_t *fp = NULL;
  size_t fp_len = 0;
  grit_dedup_err e = unhex(PQgetvalue(r, 0, 1), &fp, &fp_len);
  if (e != GRIT_DEDUP_OK)
    return e;
  rec->fp_len = fp_len < DD_MAX_FP ? fp_len : DD_MAX_FP;
  memcpy(rec->fp, fp, rec->fp_len);
  grit_free(fp);
  rec->token = strtoull(PQgetvalue(r, 0, 2), NULL, 10);
  rec->lease_left_ms = strtoull(PQgetvalue(r, 0, 3), NULL, 10);
  rec->status = (int)strtol(PQgetvalue(r, 0, 4), NULL, 10);
  if (!PQgetisnull(r, 0, 5) &&
      !(rec->message = grit_strdup(PQgetvalue(r, 0, 5))))
    return GRIT_DEDUP_ERR_NOMEM;
  if (rec->state == DD_SUCCEEDED) {
    if (PQgetisnull(r, 0, 6)) {
      rec->response = grit_malloc(1);
      if (!rec->response)
        return GRIT_DEDUP_ERR_NOMEM;
    } else {
      e = unhex(PQgetvalue(r, 0, 6), &rec->response, &rec->response_len);
    }
  }
  return e;
}

static grit_dedup_err pg_insert(grit_dedup_store *s, const char *key,
                                const void *fp, size_t fp_len, uint64_t token,
                                bool *inserted, dd_rec *rec) {
  pg_store *p = (pg_store *)s;
  char tok[24], lease[24], ttl[24];
  snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
  snprintf(lease, sizeof(lease), "%llu", (unsigned long long)s->opts.lease_ms);
  snprintf(ttl, sizeof(ttl), "%llu", (unsigned long long)s->opts.ttl_ms);
  *inserted = false;
  PGconn *c = pool_get(p);
  grit_dedup_err e = GRIT_DEDUP_OK;
  /* A record past its TTL protects nothing (DD-04): it gives way. Retry
   * when the row we conflicted with vanished before we could read it. */
  for (int round = 0; round < 5; round++) {
    const char *v1[1] = {key};
    PGresult *r = run(c, p->q_del_expired, 1, v1, NULL, NULL);
    long n = affected(r);
    PQclear(r);
    if (n < 0) {
      e = conn_error(c, "claim");
      break;
    }
    const char *v[5] = {key, fp, tok, lease, ttl};
    int lens[5] = {0, (int)fp_len, 0, 0, 0};
    int bin[5] = {0, 1, 0, 0, 0};
    r = run(c, p->q_insert, 5, v, lens, bin);
    n = affected(r);
    PQclear(r);
    if (n < 0) {
      e = conn_error(c, "claim");
      break;
    }
    if (n == 1) {
      *inserted = true;
      break;
    }
    r = run(c, p->q_select, 1, v1, NULL, NULL);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      PQclear(r);
      e = conn_error(c, "claim");
      break;
    }
    if (PQntuples(r) == 1) {
      e = read_row(r, rec);
      PQclear(r);
      if (e != GRIT_DEDUP_OK)
        grit_dedup_rec_free(rec);
      break;
    }
    PQclear(r);
    if (round == 4)
      e = grit_dedup_store_error("claim: key kept vanishing");
  }
  pool_put(p, c);
  return e;
}

static grit_dedup_err finish_on(pg_store *p, PGconn *c, const char *key,
                                uint64_t token, int state, int status,
                                const char *message, const void *resp,
                                size_t len) {
  char tok[24], st[8], stat[8];
  snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
  snprintf(st, sizeof(st), "%d", state);
  snprintf(stat, sizeof(stat), "%d", status);
  const char *v[6] = {
      key,  tok,     st,
      stat, message, state == DD_SUCCEEDED ? (resp ? resp : "") : NULL};
  int lens[6] = {0, 0, 0, 0, 0, (int)len};
  int bin[6] = {0, 0, 0, 0, 0, 1};
  PGresult *r = run(c, p->q_finish, 6, v, lens, bin);
  long n = affected(r);
  PQclear(r);
  if (n < 0)
    return conn_error(c, "completion");
  return n == 1 ? GRIT_DEDUP_OK : GRIT_DEDUP_ERR_STALE;
}

static grit_dedup_err pg_finish(grit_dedup_store *s, const char *key,
                                uint64_t token, int state, int status,
                                const char *message, const void *resp,
                                size_t len) {
  pg_store *p = (pg_store *)s;
  PGconn *c = pool_get(p);
  grit_dedup_err e =
      finish_on(p, c, key, token, state, status, message, resp, len);
  pool_put(p, c);
  return e;
}

grit_dedup_err grit_dedup_pg_succeed_tx(grit_dedup_store *s,
                                        struct pg_conn *conn, const char *key,
                                        uint64_t token, const void *response,
                                        size_t len) {
  if (!s || !conn || !key || (!response && len) ||
      strcmp(s->ops->name, "postgresql") != 0)
    return GRIT_DEDUP_ERR_INVALID_ARG;
  if (len > s->opts.max_response)
    return GRIT_DEDUP_ERR_TOO_LARGE;
  return finish_on((pg_store *)s, conn, key, token, DD_SUCCEEDED, 0, NULL,
                   response, len);
}

/* The application borrows a pooled connection (issue 28): it gets the
 * same reset-on-next-use after a broken connection as the store's own
 * operations, so its domain writes survive a database restart. */
grit_dedup_err grit_dedup_pg_conn_acquire(grit_dedup_store *s,
                                          struct pg_conn **out) {
  if (out)
    *out = NULL;
  if (!s || !out || strcmp(s->ops->name, "postgresql") != 0)
    return GRIT_DEDUP_ERR_INVALID_ARG;
  PGconn *c = pool_get((pg_store *)s);
  if (PQstatus(c) != CONNECTION_OK) {
    grit_dedup_err e = conn_error(c, "reconnect");
    pool_put((pg_store *)s, c);
    return e;
  }
  *out = c;
  return GRIT_DEDUP_OK;
}

void grit_dedup_pg_conn_release(grit_dedup_store *s, struct pg_conn *conn) {
  if (!s || !conn || strcmp(s->ops->name, "postgresql") != 0)
    return;
  /* A transaction left open would hold its locks into the next user's
   * statements: end it (the application meant to roll back). */
  if (PQstatus(conn) == CONNECTION_OK &&
      PQtransactionStatus(conn) != PQTRANS_IDLE)
    PQclear(PQexec(conn, "ROLLBACK"));
  pool_put((pg_store *)s, conn);
}

static grit_dedup_err pg_update2(grit_dedup_store *s, const char *sql,
                                 const char *key, uint64_t a, uint64_t b,
                                 const char *what) {
  pg_store *p = (pg_store *)s;
  char sa[24], sb[24], lease[24];
  snprintf(sa, sizeof(sa), "%llu", (unsigned long long)a);
  snprintf(sb, sizeof(sb), "%llu", (unsigned long long)b);
  snprintf(lease, sizeof(lease), "%llu", (unsigned long long)s->opts.lease_ms);
  const char *v[4] = {key, sa, sb, lease};
  PGconn *c = pool_get(p);
  PGresult *r = run(c, sql, sql == p->q_takeover ? 4 : 2, v, NULL, NULL);
  long n = affected(r);
  PQclear(r);
  grit_dedup_err e = n < 0    ? conn_error(c, what)
                     : n == 1 ? GRIT_DEDUP_OK
                              : GRIT_DEDUP_ERR_STALE;
  pool_put(p, c);
  return e;
}

static grit_dedup_err pg_takeover(grit_dedup_store *s, const char *key,
                                  uint64_t old, uint64_t token) {
  return pg_update2(s, ((pg_store *)s)->q_takeover, key, old, token,
                    "takeover");
}

static grit_dedup_err pg_abandon(grit_dedup_store *s, const char *key,
                                 uint64_t token) {
  return pg_update2(s, ((pg_store *)s)->q_abandon, key, token, 0, "abandon");
}

static void pg_wait(grit_dedup_store *s, const char *key, uint64_t ms) {
  (void)s;
  (void)key;
  /* Followers poll: a short sleep keeps the wait cheap for the database. */
  if (ms > 10)
    ms = 10;
  struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000};
  nanosleep(&ts, NULL);
}

static grit_dedup_err pg_purge(grit_dedup_store *s, uint64_t *removed) {
  pg_store *p = (pg_store *)s;
  PGconn *c = pool_get(p);
  PGresult *r = run(c, p->q_purge, 0, NULL, NULL, NULL);
  long n = affected(r);
  PQclear(r);
  grit_dedup_err e = n < 0 ? conn_error(c, "purge") : GRIT_DEDUP_OK;
  pool_put(p, c);
  if (removed && n > 0)
    *removed = (uint64_t)n;
  return e;
}

static void pg_destroy(grit_dedup_store *s) {
  pg_store *p = (pg_store *)s;
  for (unsigned i = 0; p->slots && i < p->n_slots; i++)
    if (p->slots[i].conn)
      PQfinish(p->slots[i].conn);
  grit_free(p->slots);
  grit_free(p->conninfo);
  pthread_cond_destroy(&p->freed);
  pthread_mutex_destroy(&p->mu);
  grit_dedup_base_free(s);
  grit_free(p);
}

/* libpq prints NOTICEs ("relation already exists") to stderr by default;
 * a library must not print. */
static void quiet_notice(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

static const dd_store_ops pg_ops = {
    .name = "postgresql",
    .insert = pg_insert,
    .finish = pg_finish,
    .takeover = pg_takeover,
    .abandon = pg_abandon,
    .wait = pg_wait,
    .purge = pg_purge,
    .destroy = pg_destroy,
};

static bool table_ok(const char *t) {
  size_t n = strlen(t);
  if (n == 0 || n > 40 || (t[0] >= '0' && t[0] <= '9'))
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9') ||
          t[i] == '_'))
      return false;
  return true;
}

/* Create the versioned schema once, whichever replica comes first. */
static grit_dedup_err make_schema(pg_store *p, PGconn *c) {
  const char *t = p->base.table;
  char sql[1200];
  snprintf(sql, sizeof(sql),
           "BEGIN;"
           "SELECT pg_advisory_xact_lock(hashtext('grit_dedup:%s'));"
           "CREATE TABLE IF NOT EXISTS %s_schema (version int NOT NULL);"
           "INSERT INTO %s_schema SELECT %d WHERE NOT EXISTS "
           "(SELECT 1 FROM %s_schema);"
           /* state: 0 pending, 1 succeeded, 2 failed. */
           "CREATE TABLE IF NOT EXISTS %s ("
           " key text PRIMARY KEY,"
           " fingerprint bytea NOT NULL,"
           " state smallint NOT NULL,"
           " token bigint NOT NULL,"
           " lease_until timestamptz NOT NULL,"
           " expires_at timestamptz NOT NULL,"
           " status int NOT NULL DEFAULT 0,"
           " message text,"
           " response bytea);"
           "CREATE INDEX IF NOT EXISTS %s_expires ON %s (expires_at);"
           "COMMIT;",
           t, t, t, SCHEMA_VERSION, t, t, t, t);
  PGresult *r = PQexec(c, sql);
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) {
    grit_dedup_err e = conn_error(c, "schema creation");
    PQclear(PQexec(c, "ROLLBACK"));
    return e;
  }
  snprintf(sql, sizeof(sql), "SELECT max(version) FROM %s_schema", t);
  r = PQexec(c, sql);
  long v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
               ? strtol(PQgetvalue(r, 0, 0), NULL, 10)
               : -1;
  PQclear(r);
  if (v != SCHEMA_VERSION)
    return grit_dedup_store_error("table %s has schema version %ld; this "
                                  "library knows version %d",
                                  t, v, SCHEMA_VERSION);
  return GRIT_DEDUP_OK;
}

static void fill_sql(pg_store *p) {
  const char *t = p->base.table;
  snprintf(p->q_del_expired, sizeof(p->q_del_expired),
           "DELETE FROM %s WHERE key = $1 AND expires_at <= now()", t);
  snprintf(p->q_insert, sizeof(p->q_insert),
           "INSERT INTO %s (key, fingerprint, state, token, lease_until, "
           "expires_at) VALUES ($1, $2, 0, $3, "
           "now() + $4::bigint * interval '1 millisecond', "
           "now() + $5::bigint * interval '1 millisecond') "
           "ON CONFLICT (key) DO NOTHING",
           t);
  snprintf(p->q_select, sizeof(p->q_select),
           "SELECT state, fingerprint, token, GREATEST(0, ceil(extract(epoch "
           "FROM lease_until - now()) * 1000))::bigint, status, message, "
           "response FROM %s WHERE key = $1 AND expires_at > now()",
           t);
  snprintf(p->q_finish, sizeof(p->q_finish),
           "UPDATE %s SET state = $3, status = $4, message = $5, "
           "response = $6 WHERE key = $1 AND token = $2 AND state = 0",
           t);
  snprintf(p->q_takeover, sizeof(p->q_takeover),
           "UPDATE %s SET token = $3, lease_until = now() + $4::bigint * "
           "interval '1 millisecond' WHERE key = $1 AND token = $2 AND "
           "state = 0 AND lease_until <= now()",
           t);
  snprintf(p->q_abandon, sizeof(p->q_abandon),
           "UPDATE %s SET lease_until = now() - interval '1 millisecond' "
           "WHERE key = $1 AND token = $2 AND state = 0",
           t);
  snprintf(p->q_purge, sizeof(p->q_purge),
           "DELETE FROM %s WHERE expires_at <= now()", t);
}

grit_dedup_err grit_dedup_store_create_pg(const char *conninfo,
                                          const grit_dedup_opts *opts,
                                          grit_dedup_store **out, char *err,
                                          size_t errlen) {
  if (err && errlen)
    err[0] = '\0';
  if (!out || !conninfo)
    return GRIT_DEDUP_ERR_INVALID_ARG;
  *out = NULL;
  pg_store *p = grit_calloc(1, sizeof(*p));
  if (!p)
    return GRIT_DEDUP_ERR_NOMEM;
  grit_dedup_err e = grit_dedup_base_init(&p->base, &pg_ops, opts);
  if (e != GRIT_DEDUP_OK) {
    grit_free(p);
    return e;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->freed, NULL);
  if (!table_ok(p->base.table)) {
    pg_destroy(&p->base);
    return GRIT_DEDUP_ERR_INVALID_ARG;
  }
  fill_sql(p);
  p->n_slots = p->base.opts.pool_size;
  p->slots = grit_calloc(p->n_slots, sizeof(*p->slots));
  p->conninfo = grit_strdup(conninfo);
  if (!p->slots || !p->conninfo) {
    pg_destroy(&p->base);
    return GRIT_DEDUP_ERR_NOMEM;
  }
  for (unsigned i = 0; i < p->n_slots; i++) {
    p->slots[i].conn = PQconnectdb(conninfo);
    if (!p->slots[i].conn) {
      pg_destroy(&p->base);
      return GRIT_DEDUP_ERR_NOMEM;
    }
    PQsetNoticeProcessor(p->slots[i].conn, quiet_notice, NULL);
    if (PQstatus(p->slots[i].conn) != CONNECTION_OK) {
      e = grit_dedup_store_error("cannot connect to PostgreSQL: %s",
                                 PQerrorMessage(p->slots[i].conn));
      goto fail;
    }
  }
  e = make_schema(p, p->slots[0].conn);
  if (e != GRIT_DEDUP_OK)
    goto fail;
  *out = &p->base;
  return GRIT_DEDUP_OK;
fail:
  if (err && errlen)
    grit_str_copy(err, errlen, grit_dedup_last_error());
  pg_destroy(&p->base);
  return e;
}
