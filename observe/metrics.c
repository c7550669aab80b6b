/* The metric registry: process-wide series per target and method, each a
 * block of uint64 cells updated with relaxed atomics (OB-01). Series are
 * found lock-free (lists that only grow, published with release stores);
 * the mutex only serialises creation, which happens once per method. */
#include "observe/observe_int.h"

#include <pthread.h>
#include <string.h>

/* gRFC A66 latency boundaries, in microseconds (0, 0.00001 s, ... 100 s). */
static const uint64_t latency_us[] = {
    0,       10,      50,       100,      300,      600,      800,
    1000,    2000,    3000,     4000,     5000,     6000,     8000,
    10000,   13000,   16000,    20000,    25000,    30000,    40000,
    50000,   65000,   80000,    100000,   130000,   160000,   200000,
    250000,  300000,  400000,   500000,   650000,   800000,   1000000,
    2000000, 5000000, 10000000, 20000000, 50000000, 100000000};
/* gRFC A66 size boundaries, in bytes (0, 1 KiB, ... 4 GiB). */
static const uint64_t size_bytes[] = {
    0,       1024,    2048,     4096,     16384,     65536,      262144,
    1048576, 4194304, 16777216, 67108864, 268435456, 1073741824, 4294967296ull};
/* gRFC A96 count boundaries (as SPEC MX-01). */
static const uint64_t counts[] = {1, 2, 3, 4, 5, 10, 100, 1000};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

const grit_obs_inst grit_obs_insts[GRIT_OBS_N] = {
#define GRIT_OBS_INST_GEN(id, nm, un, b, st, hp)                               \
  {.name = nm, .unit = un, .buckets = b, .scope = st, .help = hp},
    GRIT_OBS_INSTRUMENTS(GRIT_OBS_INST_GEN)
#undef GRIT_OBS_INST_GEN
};

const uint64_t *grit_obs_bounds(grit_obs_buckets b, size_t *n) {
  switch (b) {
  case GRIT_OBS_B_NONE:
    break;
  case GRIT_OBS_B_LATENCY:
    *n = N_OF(latency_us);
    return latency_us;
  case GRIT_OBS_B_SIZE:
    *n = N_OF(size_bytes);
    return size_bytes;
  case GRIT_OBS_B_COUNT:
    *n = N_OF(counts);
    return counts;
  }
  *n = 0;
  return NULL;
}

/* Cells of one instrument: a counter is one; a histogram is its sum, then
 * one count per bucket and +Inf (not cumulative; the writer sums). */
size_t grit_obs_cells(grit_obs_id id) {
  size_t n;
  if (!grit_obs_bounds(grit_obs_insts[id].buckets, &n))
    return 1;
  return 1 + n + 1;
}

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static grit_obs_target *targets; /* atomic head; the list only grows */

/* Each instrument's offset in its block (the plain block or a per-status
 * block) and the blocks' sizes: computed under the mutex before the first
 * target is published, so every reader of a series sees them. */
static size_t offsets[GRIT_OBS_N];
static size_t block_size[3]; /* by grit_obs_scope */

static void layout_init_locked(void) {
  if (block_size[GRIT_OBS_S_METHOD])
    return;
  for (int i = 0; i < GRIT_OBS_N; i++) {
    grit_obs_scope sc = grit_obs_insts[i].scope;
    offsets[i] = block_size[sc];
    block_size[sc] += grit_obs_cells((grit_obs_id)i);
  }
  for (int sc = 0; sc < 3; sc++)
    if (block_size[sc] == 0)
      block_size[sc] = 1; /* never a zero-size allocation */
}

size_t grit_obs_offset(grit_obs_id id) {
  return offsets[id];
}

static size_t block_cells(grit_obs_scope sc) {
  return block_size[sc];
}

grit_obs_target *grit_obs_targets(void) {
  return __atomic_load_n(&targets, __ATOMIC_ACQUIRE);
}

static grit_obs_target *target_find(const char *target) {
  for (grit_obs_target *t = grit_obs_targets(); t;
       t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE))
    if (strcmp(t->name, target) == 0)
      return t;
  return NULL;
}

/* OP-01 (gRFC A66): at most |max_targets| targets keep their own name
 * (default 100); later ones, and the ones the user's filter declines, are
 * recorded as "other", so a process that dials many short-lived targets
 * keeps a bounded exposition. */
static size_t max_targets = GRIT_OBS_DEFAULT_MAX_TARGETS;
static size_t named_targets; /* under reg_mu */
static grit_obs_target_filter_fn target_filter;
static void *target_filter_data;

void grit_obs_set_max_targets(size_t n) {
  pthread_mutex_lock(&reg_mu);
  max_targets = n;
  pthread_mutex_unlock(&reg_mu);
}

void grit_obs_set_target_filter(grit_obs_target_filter_fn fn, void *data) {
  pthread_mutex_lock(&reg_mu);
  target_filter = fn;
  target_filter_data = data;
  pthread_mutex_unlock(&reg_mu);
}

/* A series' name (a copy of |src|) and its |n| zeroed cells: both, or
 * neither (false, out of memory). */
static bool series_alloc(char **name, uint64_t **cells, const char *src,
                         size_t n) {
  *name = grit_strdup(src);
  *cells = grit_calloc(n, sizeof(uint64_t));
  if (*name && *cells)
    return true;
  grit_free(*name);
  grit_free(*cells);
  return false;
}

static grit_obs_target *target_make_locked(const char *name) {
  grit_obs_target *t = grit_calloc(1, sizeof(*t));
  if (!t || !series_alloc(&t->name, &t->cells, name,
                          block_cells(GRIT_OBS_S_TARGET))) {
    grit_free(t);
    return NULL;
  }
  t->next = targets;
  __atomic_store_n(&targets, t, __ATOMIC_RELEASE);
  return t;
}

grit_obs_target *grit_obs_target_get(const char *target) {
  grit_obs_target *t = target_find(target);
  if (t)
    return t;
  pthread_mutex_lock(&reg_mu);
  layout_init_locked();
  t = target_find(target);
  if (!t) {
    bool named = strcmp(target, GRIT_OBS_OTHER) != 0 &&
                 named_targets < max_targets &&
                 (!target_filter || target_filter(target, target_filter_data));
    const char *name = named ? target : GRIT_OBS_OTHER;
    if (!named)
      t = target_find(name);
    if (!t && (t = target_make_locked(name)) != NULL && named)
      named_targets++;
  }
  pthread_mutex_unlock(&reg_mu);
  return t;
}

/* Methods registered by the application (generated stubs, `grit call`):
 * copies, freed with the series. Slots are published with release stores;
 * readers scan up to the published count. */
static char *registered[GRIT_OBS_MAX_REGISTERED];
static size_t nregistered;

static const char *strip_slash(const char *m) {
  return m[0] == '/' ? m + 1 : m;
}

grit_err grit_obs_method_register(const char *method) {
  if (!method || !*strip_slash(method))
    return GRIT_ERR_INVALID_ARG;
  grit_err rv = GRIT_OK;
  pthread_mutex_lock(&reg_mu);
  if (!grit_obs_method_registered(method)) {
    char *copy = NULL;
    if (nregistered == GRIT_OBS_MAX_REGISTERED ||
        !(copy = grit_strdup(strip_slash(method)))) {
      rv = GRIT_ERR_NOMEM; /* out of memory, or the fixed table is full */
    } else {
      registered[nregistered] = copy;
      __atomic_store_n(&nregistered, nregistered + 1, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&reg_mu);
  return rv;
}

bool grit_obs_method_registered(const char *method) {
  size_t n = __atomic_load_n(&nregistered, __ATOMIC_ACQUIRE);
  const char *m = strip_slash(method);
  for (size_t i = 0; i < n; i++)
    if (strcmp(registered[i], m) == 0)
      return true;
  return false;
}

static grit_obs_method *method_find(grit_obs_target *t, const char *name) {
  for (grit_obs_method *m = __atomic_load_n(&t->methods, __ATOMIC_ACQUIRE); m;
       m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE))
    if (strcmp(m->name, name) == 0)
      return m;
  return NULL;
}

const char *grit_obs_target_name(const grit_obs_target *t) {
  return t->name;
}

grit_obs_method *grit_obs_method_find(grit_obs_target *t, const char *method) {
  return t ? method_find(t, method) : NULL;
}

/* A new series of |method| under |t|, linked in; NULL on out-of-memory.
 * Under the registry lock. Out of line: grit_obs_method_get's lock-free
 * path, once per call, stays short. */
__attribute__((noinline)) static grit_obs_method *
method_new(grit_obs_target *t, const char *method) {
  grit_obs_method *m = grit_calloc(1, sizeof(*m));
  if (!m || !series_alloc(&m->name, &m->plain, method,
                          block_cells(GRIT_OBS_S_METHOD))) {
    grit_free(m);
    return NULL;
  }
  size_t len = strlen(method);
  m->text.own = strcmp(method, GRIT_OBS_OTHER) != 0;
  m->text.len = len < UINT32_MAX ? (uint32_t)len : UINT32_MAX;
  m->text.ascii = grit_otlp_ascii(method, len);
  if (m->text.own)
    __atomic_add_fetch(&t->nmethods, 1, __ATOMIC_RELEASE);
  m->next = t->methods;
  __atomic_store_n(&t->methods, m, __ATOMIC_RELEASE);
  return m;
}

grit_obs_method *grit_obs_method_get(grit_obs_target *t, const char *method) {
  if (!t)
    return NULL;
  grit_obs_method *m = method_find(t, method);
  if (m)
    return m;
  if (__atomic_load_n(&t->nmethods, __ATOMIC_ACQUIRE) >= GRIT_OBS_MAX_METHODS &&
      (m = method_find(t, GRIT_OBS_OTHER)) != NULL)
    return m; /* no lock once the cap is reached */
  pthread_mutex_lock(&reg_mu);
  /* A66: past the cap, methods are "other", so a client that calls
   * arbitrary names cannot grow the registry without bound. */
  if (t->nmethods >= GRIT_OBS_MAX_METHODS)
    method = GRIT_OBS_OTHER;
  m = method_find(t, method);
  if (!m)
    m = method_new(t, method);
  pthread_mutex_unlock(&reg_mu);
  return m;
}

void grit_obs_add(grit_obs_method *m, grit_obs_id id, uint64_t n) {
  if (!m || grit_obs_insts[id].scope != GRIT_OBS_S_METHOD)
    return;
  __atomic_add_fetch(&m->plain[grit_obs_offset(id)], n, __ATOMIC_RELAXED);
}

/* Add |value| to a counter, or observe it in a histogram, at |cells|. */
static void cells_record(uint64_t *cells, const grit_obs_inst *in,
                         uint64_t value);

void grit_obs_target_add(grit_obs_target *t, grit_obs_id id, uint64_t n) {
  if (t && grit_obs_insts[id].scope == GRIT_OBS_S_TARGET &&
      grit_obs_insts[id].buckets == GRIT_OBS_B_NONE)
    __atomic_add_fetch(&t->cells[grit_obs_offset(id)], n, __ATOMIC_RELAXED);
}

void grit_obs_target_record(grit_obs_target *t, grit_obs_id id,
                            uint64_t value) {
  if (t && grit_obs_insts[id].scope == GRIT_OBS_S_TARGET)
    cells_record(t->cells + grit_obs_offset(id), &grit_obs_insts[id], value);
}

/* The per-status block, made on first use; a racing maker frees its own. */
static uint64_t *status_block(grit_obs_method *m, int status) {
  uint64_t *b = __atomic_load_n(&m->by_status[status], __ATOMIC_ACQUIRE);
  if (b)
    return b;
  uint64_t *nb = grit_calloc(block_cells(GRIT_OBS_S_STATUS), sizeof(uint64_t));
  if (!nb)
    return NULL;
  uint64_t *expected = NULL;
  if (__atomic_compare_exchange_n(&m->by_status[status], &expected, nb, false,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return nb;
  grit_free(nb);
  return expected;
}

void grit_obs_record(grit_obs_method *m, grit_obs_id id, int status,
                     uint64_t value) {
  if (!m)
    return;
  const grit_obs_inst *in = &grit_obs_insts[id];
  uint64_t *cells;
  if (in->scope == GRIT_OBS_S_TARGET)
    return;
  if (in->scope == GRIT_OBS_S_STATUS) {
    if (status < 0 || status >= GRIT_OBS_STATUSES)
      status = 2; /* UNKNOWN */
    if (!(cells = status_block(m, status)))
      return;
  } else {
    cells = m->plain;
  }
  cells_record(cells + grit_obs_offset(id), in, value);
}

static void cells_record(uint64_t *cells, const grit_obs_inst *in,
                         uint64_t value) {
  size_t n;
  const uint64_t *bounds = grit_obs_bounds(in->buckets, &n);
  if (!bounds) {
    __atomic_add_fetch(cells, value, __ATOMIC_RELAXED);
    return;
  }
  size_t i = 0, hi = n; /* the first bound >= value: le is inclusive */
  while (i < hi) {
    size_t mid = (i + hi) / 2;
    if (bounds[mid] < value)
      i = mid + 1;
    else
      hi = mid;
  }
  __atomic_add_fetch(&cells[0], value, __ATOMIC_RELAXED);
  __atomic_add_fetch(&cells[1 + i], 1, __ATOMIC_RELAXED);
}

void grit_obs_release(void) {
  pthread_mutex_lock(&reg_mu);
  grit_obs_target *t = targets;
  __atomic_store_n(&targets, NULL, __ATOMIC_RELEASE);
  named_targets = 0;
  for (size_t i = 0; i < nregistered; i++) {
    grit_free(registered[i]);
    registered[i] = NULL;
  }
  __atomic_store_n(&nregistered, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&reg_mu);
  while (t) {
    grit_obs_target *tn = t->next;
    for (grit_obs_method *m = t->methods, *mn; m; m = mn) {
      mn = m->next;
      for (int i = 0; i < GRIT_OBS_STATUSES; i++)
        grit_free(m->by_status[i]);
      grit_free(m->plain);
      grit_free(m->name);
      grit_free(m);
    }
    grit_free(t->cells);
    grit_free(t->name);
    grit_free(t);
    t = tn;
  }
}

static grit_obs_collector_fn collectors[8];
static unsigned ncollectors;

void grit_obs_add_collector(grit_obs_collector_fn fn) {
  pthread_mutex_lock(&reg_mu);
  bool have = false;
  for (unsigned i = 0; i < ncollectors; i++)
    have |= collectors[i] == fn;
  if (!have && ncollectors < N_OF(collectors)) {
    collectors[ncollectors] = fn;
    __atomic_store_n(&ncollectors, ncollectors + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&reg_mu);
}

size_t grit_obs_collectors(grit_obs_collector_fn *out, size_t cap) {
  unsigned n = __atomic_load_n(&ncollectors, __ATOMIC_ACQUIRE);
  size_t k = 0;
  for (unsigned i = 0; i < n && k < cap; i++)
    out[k++] = collectors[i];
  return k;
}

void grit_obs_subchannel_state(grit_obs_target *t, int from, int to) {
  if (!t)
    return;
  __atomic_store_n(&t->sc_seen, true, __ATOMIC_RELAXED);
  if (from >= 0 && from < 5)
    __atomic_sub_fetch(&t->sc_states[from], 1, __ATOMIC_RELAXED);
  if (to >= 0 && to < 5)
    __atomic_add_fetch(&t->sc_states[to], 1, __ATOMIC_RELAXED);
}

bool grit_obs_subchannel_counts(const grit_obs_target *t, uint64_t out[5]) {
  for (int i = 0; i < 5; i++)
    out[i] = __atomic_load_n(&t->sc_states[i], __ATOMIC_RELAXED);
  return __atomic_load_n(&t->sc_seen, __ATOMIC_RELAXED);
}

void grit_obs_registry_fork_lock(void) {
  pthread_mutex_lock(&reg_mu);
}

void grit_obs_registry_fork_unlock(void) {
  pthread_mutex_unlock(&reg_mu);
}
