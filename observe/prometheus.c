/* The Prometheus text exposition format (0.0.4) of the registry, named as
 * the OpenTelemetry Prometheus exporter names OTel instruments: dots become
 * underscores, the unit becomes a suffix ("s" _seconds, "By" _bytes,
 * annotations like "{attempt}" none), counters end in _total, labels are
 * sorted (SPEC OB-01). */
#include "observe/observe_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void prom_name(const grit_obs_inst *in, char *out, size_t cap) {
  size_t k = 0;
  for (const char *p = in->name; *p && k + 1 < cap; p++)
    out[k++] = *p == '.' ? '_' : *p;
  out[k] = '\0';
  const char *suffix = "";
  if (strcmp(in->unit, "s") == 0)
    suffix = "_seconds";
  else if (strcmp(in->unit, "By") == 0)
    suffix = "_bytes";
  snprintf(out + k, cap - k, "%s%s", suffix,
           in->buckets == GRIT_OBS_B_NONE ? "_total" : "");
}

/* Label value escaping: backslash, double quote and newline. */
static grit_err esc(grit_buf *b, const char *s) {
  grit_err rv = GRIT_OK;
  for (; *s && rv == GRIT_OK; s++) {
    if (*s == '\\')
      rv = grit_buf_append(b, "\\\\", 2);
    else if (*s == '"')
      rv = grit_buf_append(b, "\\\"", 2);
    else if (*s == '\n')
      rv = grit_buf_append(b, "\\n", 2);
    else
      rv = grit_buf_append(b, s, 1);
  }
  return rv;
}

/* Microseconds as decimal seconds, exact ("0.00005", "2.5", "100"). */
static void fmt_us(char *out, size_t cap, uint64_t us) {
  int n = snprintf(out, cap, "%llu.%06llu", (unsigned long long)(us / 1000000),
                   (unsigned long long)(us % 1000000));
  while (n > 0 && out[n - 1] == '0')
    out[--n] = '\0';
  if (n > 0 && out[n - 1] == '.')
    out[--n] = '\0';
}

static void fmt_value(char *out, size_t cap, grit_obs_buckets b, uint64_t v) {
  if (b == GRIT_OBS_B_LATENCY)
    fmt_us(out, cap, v);
  else
    snprintf(out, cap, "%llu", (unsigned long long)v);
}

/* {[grpc_method="m",][grpc_status="S",]grpc_target="t"[,le="x"]} */
static grit_err labels(grit_buf *b, const char *method, int status,
                       const char *target, const char *le) {
  grit_err rv = grit_buf_append(b, "{", 1);
  if (rv == GRIT_OK && method)
    rv = grit_buf_append(b, "grpc_method=\"", 13);
  if (rv == GRIT_OK && method)
    rv = esc(b, method);
  if (rv == GRIT_OK && method)
    rv = grit_buf_append(b, "\",", 2);
  if (rv == GRIT_OK && status >= 0)
    rv = grit_buf_appendf(b, "grpc_status=\"%s\",",
                          grit_status_code_name((grit_status_code)status));
  if (rv == GRIT_OK)
    rv = grit_buf_append(b, "grpc_target=\"", 13);
  if (rv == GRIT_OK)
    rv = esc(b, target);
  if (rv == GRIT_OK && le)
    rv = grit_buf_appendf(b, "\",le=\"%s", le);
  if (rv == GRIT_OK)
    rv = grit_buf_append(b, "\"}", 2);
  return rv;
}

static uint64_t load(const uint64_t *p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* One series: a counter sample, or a histogram's buckets, sum and count. */
static grit_err series(grit_buf *b, const grit_obs_inst *in, const char *name,
                       const uint64_t *cells, const char *method, int status,
                       const char *target) {
  size_t n;
  const uint64_t *bounds = grit_obs_bounds(in->buckets, &n);
  grit_err rv = GRIT_OK;
  if (!bounds) {
    rv = grit_buf_appendf(b, "%s", name);
    if (rv == GRIT_OK)
      rv = labels(b, method, status, target, NULL);
    if (rv == GRIT_OK)
      rv = grit_buf_appendf(b, " %llu\n", (unsigned long long)load(cells));
    return rv;
  }
  uint64_t cum = 0;
  char le[32];
  for (size_t i = 0; i <= n && rv == GRIT_OK; i++) {
    cum += load(&cells[1 + i]);
    if (i < n)
      fmt_value(le, sizeof(le), in->buckets, bounds[i]);
    else
      snprintf(le, sizeof(le), "+Inf");
    rv = grit_buf_appendf(b, "%s_bucket", name);
    if (rv == GRIT_OK)
      rv = labels(b, method, status, target, le);
    if (rv == GRIT_OK)
      rv = grit_buf_appendf(b, " %llu\n", (unsigned long long)cum);
  }
  char sum[32];
  fmt_value(sum, sizeof(sum), in->buckets, load(&cells[0]));
  if (rv == GRIT_OK)
    rv = grit_buf_appendf(b, "%s_sum", name);
  if (rv == GRIT_OK)
    rv = labels(b, method, status, target, NULL);
  if (rv == GRIT_OK)
    rv = grit_buf_appendf(b, " %s\n%s_count", sum, name);
  if (rv == GRIT_OK)
    rv = labels(b, method, status, target, NULL);
  if (rv == GRIT_OK)
    rv = grit_buf_appendf(b, " %llu\n", (unsigned long long)cum);
  return rv;
}

/* Whether a histogram cell block has any observation. */
static bool hist_used(const grit_obs_inst *in, const uint64_t *cells) {
  size_t n;
  if (!grit_obs_bounds(in->buckets, &n))
    return true; /* counters are written from their first series on */
  for (size_t i = 0; i <= n; i++)
    if (load(&cells[1 + i]))
      return true;
  return false;
}

/* One family being written: the HELP and TYPE lines go before its first
 * series, and a family without any is left out. */
typedef struct fam {
  grit_buf *b;
  const grit_obs_inst *in;
  char name[128];
  bool head;
} fam;

static grit_err fam_series(fam *f, const uint64_t *cells, const char *method,
                           int status, const char *target) {
  if (!cells || !hist_used(f->in, cells))
    return GRIT_OK;
  grit_err rv = GRIT_OK;
  if (!f->head) {
    f->head = true;
    rv = grit_buf_appendf(
        f->b, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->in->help, f->name,
        f->in->buckets == GRIT_OBS_B_NONE ? "counter" : "histogram");
  }
  if (rv == GRIT_OK)
    rv = series(f->b, f->in, f->name, cells, method, status, target);
  return rv;
}

static grit_err family(grit_buf *b, grit_obs_id id, const char *target) {
  fam f = {.b = b, .in = &grit_obs_insts[id]};
  prom_name(f.in, f.name, sizeof(f.name));
  size_t off = grit_obs_offset(id);
  grit_obs_scope sc = f.in->scope;
  grit_err rv = GRIT_OK;
  for (grit_obs_target *t = grit_obs_targets(); t && rv == GRIT_OK;
       t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE)) {
    if (target && strcmp(target, t->name) != 0)
      continue;
    if (sc == GRIT_OBS_S_TARGET) {
      rv = fam_series(&f, t->cells + off, NULL, -1, t->name);
      continue;
    }
    for (grit_obs_method *m = __atomic_load_n(&t->methods, __ATOMIC_ACQUIRE);
         m && rv == GRIT_OK; m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE)) {
      if (sc == GRIT_OBS_S_METHOD) {
        rv = fam_series(&f, m->plain + off, m->name, -1, t->name);
        continue;
      }
      for (int st = 0; st < GRIT_OBS_STATUSES && rv == GRIT_OK; st++) {
        const uint64_t *cells =
            __atomic_load_n(&m->by_status[st], __ATOMIC_ACQUIRE);
        rv = fam_series(&f, cells ? cells + off : NULL, m->name, st, t->name);
      }
    }
  }
  return rv;
}

/* Subchannels per target and connectivity state (OP-01). */
static grit_err subchannel_gauge(grit_buf *out, const char *target) {
  static const char name[] = "grit_client_subchannels";
  bool head = false;
  grit_err rv = GRIT_OK;
  for (grit_obs_target *t = grit_obs_targets(); t && rv == GRIT_OK;
       t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE)) {
    uint64_t n[5];
    if ((target && strcmp(target, t->name) != 0) ||
        !grit_obs_subchannel_counts(t, n))
      continue;
    if (!head) {
      head = true;
      rv = grit_buf_appendf(out,
                            "# HELP %s Subchannels of the target per "
                            "connectivity state.\n# TYPE %s gauge\n",
                            name, name);
    }
    for (int i = 0; i < 4 && rv == GRIT_OK; i++) { /* never SHUTDOWN */
      rv = grit_buf_appendf(
          out, "%s{grpc_connectivity_state=\"%s\",grpc_target=\"", name,
          grit_connectivity_state_name((grit_connectivity_state)i));
      if (rv == GRIT_OK)
        rv = esc(out, t->name);
      if (rv == GRIT_OK)
        rv = grit_buf_appendf(out, "\"} %llu\n", (unsigned long long)n[i]);
    }
  }
  return rv;
}

grit_err grit_obs_write_gauge(grit_buf *out, const char *name, const char *help,
                              const char *label, size_t n,
                              const char *const *label_values,
                              const double *values) {
  if (n == 0)
    return GRIT_OK;
  grit_err rv = grit_buf_appendf(out, "# HELP %s %s\n# TYPE %s gauge\n", name,
                                 help, name);
  for (size_t i = 0; i < n && rv == GRIT_OK; i++) {
    rv = grit_buf_appendf(out, "%s{%s=\"", name, label);
    if (rv == GRIT_OK)
      rv = esc(out, label_values[i]);
    if (rv == GRIT_OK)
      rv = grit_buf_appendf(out, "\"} %.17g\n", values[i]);
  }
  return rv;
}

/* Text sources of other libraries (grit-dedup), rendered with the whole
 * process's exposition (OP-01). The mutex is held while they run, so a
 * source removed is never called after its removal returns. */
static pthread_mutex_t src_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  grit_obs_source_fn fn;
  void *data;
} sources[GRIT_OBS_MAX_SOURCES];
static size_t nsources;

grit_err grit_obs_add_source(grit_obs_source_fn fn, void *data) {
  if (!fn)
    return GRIT_ERR_INVALID_ARG;
  grit_err rv = GRIT_OK;
  pthread_mutex_lock(&src_mu);
  size_t i = 0;
  while (i < nsources && (sources[i].fn != fn || sources[i].data != data))
    i++;
  if (i == nsources) {
    if (nsources == GRIT_OBS_MAX_SOURCES) {
      rv = GRIT_ERR_NOMEM; /* the fixed table is full */
    } else {
      sources[nsources].fn = fn;
      sources[nsources++].data = data;
    }
  }
  pthread_mutex_unlock(&src_mu);
  return rv;
}

grit_err grit_obs_remove_source(grit_obs_source_fn fn, void *data) {
  grit_err rv = GRIT_ERR_NOT_FOUND;
  pthread_mutex_lock(&src_mu);
  for (size_t i = 0; i < nsources; i++) {
    if (sources[i].fn == fn && sources[i].data == data) {
      sources[i] = sources[--nsources];
      rv = GRIT_OK;
      break;
    }
  }
  pthread_mutex_unlock(&src_mu);
  return rv;
}

/* Append each source's text; one that asks for more than it was given is
 * called again with room for all of it. */
static grit_err write_sources(grit_buf *out) {
  grit_err rv = GRIT_OK;
  pthread_mutex_lock(&src_mu);
  for (size_t i = 0; i < nsources && rv == GRIT_OK; i++) {
    size_t cap = 4096;
    for (int round = 0; round < 2 && rv == GRIT_OK; round++) {
      rv = grit_buf_reserve(out, cap);
      if (rv != GRIT_OK)
        break;
      size_t n =
          sources[i].fn((char *)out->data + out->len, cap, sources[i].data);
      if (n < cap) {
        out->len += n;
        break;
      }
      cap = n + 1; /* the text and its NUL */
    }
  }
  pthread_mutex_unlock(&src_mu);
  return rv;
}

grit_err grit_obs_write_prometheus(const char *target, grit_buf *out) {
  grit_err rv = GRIT_OK;
  for (int i = 0; i < GRIT_OBS_N && rv == GRIT_OK; i++)
    rv = family(out, (grit_obs_id)i, target);
  if (rv == GRIT_OK)
    rv = subchannel_gauge(out, target);
  grit_obs_collector_fn fns[8];
  size_t n = grit_obs_collectors(fns, 8);
  for (size_t i = 0; i < n && rv == GRIT_OK; i++)
    rv = fns[i](out, target);
  if (rv == GRIT_OK && !target)
    rv = write_sources(out);
  return rv;
}
