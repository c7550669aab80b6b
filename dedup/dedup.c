/* The keyed-idempotency protocol on top of a store (SPEC DD-01..DD-03):
 * claim, bounded wait for a pending leader, healing by the application's
 * source of truth, and the leader's completions. */
#include "dedup/dedup_int.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_TTL_MS (24ull * 3600 * 1000)
#define DEFAULT_LEASE_MS 30000ull
#define DEFAULT_MAX_RESPONSE (1u << 20)
#define DEFAULT_MAX_BYTES (64u << 20)
#define DEFAULT_POOL 4

static _Thread_local char last_error[256];

const char *grit_dedup_strerror(grit_dedup_err err) {
  switch (err) {
#define GRIT_DEDUP_ERR_STR(name, val, text)                                    \
  case GRIT_DEDUP_##name:                                                      \
    return text;
    GRIT_DEDUP_ERR_MAP(GRIT_DEDUP_ERR_STR)
#undef GRIT_DEDUP_ERR_STR
  }
  return "unknown error";
}

const char *grit_dedup_last_error(void) {
  return last_error;
}

grit_dedup_err grit_dedup_store_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof(last_error), fmt, ap);
  va_end(ap);
  /* libpq messages end in a newline; keep the reason on one line. */
  size_t n = strlen(last_error);
  while (n && (last_error[n - 1] == '\n' || last_error[n - 1] == ' '))
    last_error[--n] = '\0';
  return GRIT_DEDUP_ERR_STORE;
}

void grit_dedup_rec_free(dd_rec *r) {
  grit_free(r->message);
  grit_free(r->response);
  r->message = NULL;
  r->response = NULL;
}

void grit_dedup_result_free(grit_dedup_result *r) {
  if (!r)
    return;
  grit_free(r->message);
  grit_free(r->response);
  memset(r, 0, sizeof(*r));
}

grit_dedup_err grit_dedup_base_init(grit_dedup_store *s,
                                    const dd_store_ops *ops,
                                    const grit_dedup_opts *opts) {
  grit_dedup_opts o = {.version = GRIT_DEDUP_OPTS_VERSION};
  if (opts) {
    if (opts->version != GRIT_DEDUP_OPTS_VERSION)
      return GRIT_DEDUP_ERR_INVALID_ARG;
    o = *opts;
  }
  if (!o.ttl_ms)
    o.ttl_ms = DEFAULT_TTL_MS;
  if (!o.lease_ms)
    o.lease_ms = DEFAULT_LEASE_MS;
  if (!o.max_response)
    o.max_response = DEFAULT_MAX_RESPONSE;
  if (!o.max_bytes)
    o.max_bytes = DEFAULT_MAX_BYTES;
  if (!o.pool_size)
    o.pool_size = DEFAULT_POOL;
  s->table = grit_strdup(o.table ? o.table : "grit_dedup");
  if (!s->table)
    return GRIT_DEDUP_ERR_NOMEM;
  o.table = s->table;
  s->ops = ops;
  s->opts = o;
  pthread_mutex_init(&s->mu, NULL);
  grit_rng_seed_os(&s->rng);
  return GRIT_DEDUP_OK;
}

void grit_dedup_base_free(grit_dedup_store *s) {
  pthread_mutex_destroy(&s->mu);
  grit_free(s->table);
}

void grit_dedup_store_destroy(grit_dedup_store *s) {
  if (s)
    s->ops->destroy(s);
}

/* A fresh claim token: random, never 0 (0 means "nobody"), and kept in the
 * signed 64-bit range PostgreSQL's bigint holds. */
static uint64_t new_token(grit_dedup_store *s) {
  uint64_t t;
  pthread_mutex_lock(&s->mu);
  do
    t = grit_rng_next(&s->rng) >> 1;
  while (t == 0);
  pthread_mutex_unlock(&s->mu);
  return t;
}

#define COUNT(s, field)                                                        \
  do {                                                                         \
    pthread_mutex_lock(&(s)->mu);                                              \
    (s)->stats.field++;                                                        \
    pthread_mutex_unlock(&(s)->mu);                                            \
  } while (0)

/* A store operation's result, counting the store's own failures. */
static grit_dedup_err counted(grit_dedup_store *s, grit_dedup_err e) {
  if (e == GRIT_DEDUP_ERR_STORE)
    COUNT(s, store_errors);
  return e;
}

struct grit_dedup_heal_ctx {
  size_t max;
  uint8_t *resp;
  size_t len;
  bool set;
};

grit_dedup_err grit_dedup_heal_set_response(grit_dedup_heal_ctx *ctx,
                                            const void *data, size_t len) {
  if (!ctx || (!data && len))
    return GRIT_DEDUP_ERR_INVALID_ARG;
  if (len > ctx->max)
    return GRIT_DEDUP_ERR_TOO_LARGE;
  uint8_t *copy = grit_malloc(len ? len : 1);
  if (!copy)
    return GRIT_DEDUP_ERR_NOMEM;
  if (len)
    memcpy(copy, data, len);
  grit_free(ctx->resp);
  ctx->resp = copy;
  ctx->len = len;
  ctx->set = true;
  return GRIT_DEDUP_OK;
}

/* Hand a finished record to the caller as a replay. */
static void to_replay(dd_rec *rec, grit_dedup_result *out) {
  out->outcome = GRIT_DEDUP_REPLAY;
  out->status = rec->state == DD_SUCCEEDED ? 0 : rec->status;
  out->message = rec->message;
  out->response = rec->response;
  out->response_len = rec->response_len;
  rec->message = NULL;
  rec->response = NULL;
}

/* We hold |key| by |token| after a takeover: ask the application (DD-02:
 * the domain tables are the source of truth) and settle the record. */
static grit_dedup_err heal(grit_dedup_store *s, const char *key, uint64_t token,
                           grit_dedup_result *out) {
  grit_dedup_heal_ctx ctx = {.max = s->opts.max_response};
  grit_dedup_verdict v = s->opts.heal(key, &ctx, s->opts.heal_data);
  COUNT(s, heals);
  out->healed = true;
  grit_dedup_err e = GRIT_DEDUP_OK;
  switch (v) {
  case GRIT_DEDUP_COMMITTED:
    e = s->ops->finish(s, key, token, DD_SUCCEEDED, 0, NULL, ctx.resp,
                       ctx.set ? ctx.len : 0);
    if (e == GRIT_DEDUP_OK) {
      out->outcome = GRIT_DEDUP_REPLAY;
      out->response = ctx.resp;
      out->response_len = ctx.set ? ctx.len : 0;
      ctx.resp = NULL;
    }
    break;
  case GRIT_DEDUP_NOT_COMMITTED:
    /* Nothing was written: this claimer runs the handler. */
    out->outcome = GRIT_DEDUP_LEADER;
    out->token = token;
    break;
  case GRIT_DEDUP_UNKNOWN:
    e = s->ops->abandon(s, key, token);
    if (e == GRIT_DEDUP_OK)
      out->outcome = GRIT_DEDUP_IN_PROGRESS;
    break;
  }
  grit_free(ctx.resp);
  return e;
}

grit_dedup_err grit_dedup_claim(grit_dedup_store *s, const char *key,
                                const void *fp, size_t fp_len, uint64_t wait_ms,
                                grit_dedup_result *out) {
  if (!s || !key || !out || !fp || fp_len == 0 || fp_len > DD_MAX_FP)
    return GRIT_DEDUP_ERR_INVALID_ARG;
  size_t klen = strnlen(key, DD_MAX_KEY + 1);
  if (klen == 0 || klen > DD_MAX_KEY)
    return GRIT_DEDUP_ERR_INVALID_ARG;
  memset(out, 0, sizeof(*out));
  COUNT(s, claims);
  uint64_t deadline = grit_add_sat_u64(grit_clock_now_ms(), wait_ms);
  for (;;) {
    uint64_t token = new_token(s);
    bool inserted = false;
    dd_rec rec = {0};
    grit_dedup_err e =
        s->ops->insert(s, key, fp, fp_len, token, &inserted, &rec);
    if (e != GRIT_DEDUP_OK)
      return counted(s, e);
    if (inserted) {
      out->outcome = GRIT_DEDUP_LEADER;
      out->token = token;
      COUNT(s, leaders);
      return GRIT_DEDUP_OK;
    }
    /* DD-03: the same key for another request is never a replay. */
    if (rec.fp_len != fp_len || memcmp(rec.fp, fp, fp_len) != 0) {
      grit_dedup_rec_free(&rec);
      out->outcome = GRIT_DEDUP_MISMATCH;
      COUNT(s, mismatches);
      return GRIT_DEDUP_OK;
    }
    if (rec.state != DD_PENDING) {
      to_replay(&rec, out);
      COUNT(s, replays);
      return GRIT_DEDUP_OK;
    }
    if (rec.lease_left_ms == 0 && s->opts.heal) {
      e = s->ops->takeover(s, key, rec.token, token);
      if (e == GRIT_DEDUP_ERR_STALE)
        continue; /* another claimer healed it or the leader finished */
      if (e != GRIT_DEDUP_OK)
        return counted(s, e);
      e = counted(s, heal(s, key, token, out));
      if (e == GRIT_DEDUP_OK) {
        if (out->outcome == GRIT_DEDUP_LEADER)
          COUNT(s, leaders);
        else if (out->outcome == GRIT_DEDUP_REPLAY)
          COUNT(s, replays);
        else
          COUNT(s, in_progress);
      }
      return e;
    }
    uint64_t now = grit_clock_now_ms();
    if (now >= deadline) {
      out->outcome = GRIT_DEDUP_IN_PROGRESS;
      COUNT(s, in_progress);
      return GRIT_DEDUP_OK;
    }
    uint64_t ms = deadline - now;
    if (rec.lease_left_ms && rec.lease_left_ms < ms)
      ms = rec.lease_left_ms;
    s->ops->wait(s, key, ms);
  }
}

static bool key_ok(const char *key) {
  size_t n = key ? strnlen(key, DD_MAX_KEY + 1) : 0;
  return n > 0 && n <= DD_MAX_KEY;
}

grit_dedup_err grit_dedup_succeed(grit_dedup_store *s, const char *key,
                                  uint64_t token, const void *response,
                                  size_t len) {
  if (!s || !key_ok(key) || (!response && len))
    return GRIT_DEDUP_ERR_INVALID_ARG;
  if (len > s->opts.max_response)
    return GRIT_DEDUP_ERR_TOO_LARGE;
  return counted(
      s, s->ops->finish(s, key, token, DD_SUCCEEDED, 0, NULL, response, len));
}

grit_dedup_err grit_dedup_fail(grit_dedup_store *s, const char *key,
                               uint64_t token, int status,
                               const char *message) {
  if (!s || !key_ok(key) || status <= 0 || status > 16)
    return GRIT_DEDUP_ERR_INVALID_ARG;
  return counted(
      s, s->ops->finish(s, key, token, DD_FAILED, status, message, NULL, 0));
}

grit_dedup_err grit_dedup_abandon(grit_dedup_store *s, const char *key,
                                  uint64_t token) {
  if (!s || !key_ok(key))
    return GRIT_DEDUP_ERR_INVALID_ARG;
  return counted(s, s->ops->abandon(s, key, token));
}

grit_dedup_err grit_dedup_purge(grit_dedup_store *s, uint64_t *removed) {
  if (removed)
    *removed = 0;
  if (!s)
    return GRIT_DEDUP_ERR_INVALID_ARG;
  return counted(s, s->ops->purge(s, removed));
}

grit_dedup_err grit_dedup_get_stats(grit_dedup_store *s,
                                    grit_dedup_stats *caller) {
  /* Filled whole, then copied as far as the caller's size reaches (the
   * ABI rule of docs/abi.md). */
  if (!s || !caller || grit_sized_size(caller) < sizeof(size_t))
    return GRIT_DEDUP_ERR_INVALID_ARG;
  pthread_mutex_lock(&s->mu);
  grit_dedup_stats out = s->stats;
  pthread_mutex_unlock(&s->mu);
  out.size = sizeof(out);
  if (s->ops->stats)
    s->ops->stats(s, &out);
  grit_sized_fill(caller, &out, sizeof(out));
  return GRIT_DEDUP_OK;
}

/* OP-01: the counters as Prometheus text (format 0.0.4), snprintf-style,
 * to be included in grit's exposition through grit_metrics_add_source. */
size_t grit_dedup_metrics_text(char *buf, size_t cap, void *store) {
  grit_dedup_stats st = GRIT_DEDUP_STATS_INIT; /* docs/abi.md */
  if (grit_dedup_get_stats(store, &st) != GRIT_DEDUP_OK)
    return 0;
  static const struct {
    const char *name, *type, *help;
    size_t off;
  } fams[] = {
#define DD_FAM(f, t, h) {"grit_dedup_" #f, t, h, offsetof(grit_dedup_stats, f)}
      DD_FAM(claims, "counter", "Claims of an idempotency key."),
      DD_FAM(leaders, "counter", "Claims that made the caller the leader."),
      DD_FAM(replays, "counter", "Claims answered from a finished record."),
      DD_FAM(mismatches, "counter",
             "Claims of a key with another request fingerprint."),
      DD_FAM(in_progress, "counter",
             "Claims that found the key still pending after waiting."),
      DD_FAM(heals, "counter", "Pending records taken over and healed."),
      DD_FAM(store_errors, "counter", "Store operations that failed."),
      DD_FAM(records, "gauge", "Records held by the in-process store."),
      DD_FAM(bytes, "gauge", "Bytes held by the in-process store."),
#undef DD_FAM
  };
  size_t need = 0;
  for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
    uint64_t v;
    memcpy(&v, (const char *)&st + fams[i].off, sizeof(v));
    const char *suffix = strcmp(fams[i].type, "counter") == 0 ? "_total" : "";
    int n =
        snprintf(need < cap ? buf + need : NULL, need < cap ? cap - need : 0,
                 "# HELP %s%s %s\n# TYPE %s%s %s\n%s%s %llu\n", fams[i].name,
                 suffix, fams[i].help, fams[i].name, suffix, fams[i].type,
                 fams[i].name, suffix, (unsigned long long)v);
    if (n < 0)
      return 0;
    need += (size_t)n;
  }
  return need;
}
