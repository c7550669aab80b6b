/* Retry throttling per server name (SPEC TH-01): one token bucket per
 * name, shared by every channel in the process, behind one mutex because
 * channels may live on different runtimes' threads. A config change scales
 * the current tokens proportionally. */
#include "channel/channel_int.h"

#include <string.h>

typedef struct throttle_entry {
  grit_list link;
  char *name;
  unsigned refs;
  grit_throttle t;
} throttle_entry;

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static grit_list table = {&table, &table};

/* OB-01: the tokens of every bucket, as a gauge per server name, at
 * scrape time. Buckets are process-wide, so any target's scrape shows all;
 * at most 64 names per scrape. */
static grit_err throttle_collect(grit_buf *out, const char *target) {
  const char *names[64];
  double tokens[64];
  size_t n = 0;
  pthread_mutex_lock(&table_mu);
  grit_list *e;
  GRIT_LIST_FOREACH(e, &table) {
    throttle_entry *te = GRIT_CONTAINER_OF(e, throttle_entry, link);
    if (n < 64 && (names[n] = grit_strdup(te->name)) != NULL)
      tokens[n++] = te->t.tokens_milli / 1000.0;
  }
  pthread_mutex_unlock(&table_mu);
  grit_err rv =
      grit_obs_write_gauge(out, "grit_client_retry_throttle_tokens",
                           "Retry throttling tokens left per server name.",
                           "grpc_server_name", n, names, tokens);
  for (size_t i = 0; i < n; i++)
    grit_free((char *)names[i]);
  return rv;
}

grit_throttle_handle *grit_throttle_table_get(const char *name,
                                              uint32_t max_milli,
                                              uint32_t ratio_milli) {
  static bool collecting; /* register the gauge once */
  if (!__atomic_exchange_n(&collecting, true, __ATOMIC_ACQ_REL))
    grit_obs_add_collector(throttle_collect);
  pthread_mutex_lock(&table_mu);
  grit_list *e;
  throttle_entry *found = NULL;
  GRIT_LIST_FOREACH(e, &table) {
    throttle_entry *te = GRIT_CONTAINER_OF(e, throttle_entry, link);
    if (strcmp(te->name, name) == 0) {
      found = te;
      break;
    }
  }
  if (found) {
    if (found->t.max_tokens_milli != max_milli ||
        found->t.token_ratio_milli != ratio_milli)
      grit_throttle_reconfigure(&found->t, max_milli, ratio_milli);
    found->refs++;
  } else {
    found = grit_calloc(1, sizeof(*found));
    if (found)
      found->name = grit_strdup(name);
    if (found && found->name) {
      found->refs = 1;
      grit_throttle_init(&found->t, max_milli, ratio_milli);
      grit_list_insert_tail(&table, &found->link);
    } else if (found) {
      grit_free(found);
      found = NULL;
    }
  }
  pthread_mutex_unlock(&table_mu);
  return (grit_throttle_handle *)found;
}

void grit_throttle_table_put(grit_throttle_handle *h) {
  throttle_entry *te = (throttle_entry *)h;
  if (!te)
    return;
  pthread_mutex_lock(&table_mu);
  bool last = --te->refs == 0;
  if (last)
    grit_list_remove(&te->link);
  pthread_mutex_unlock(&table_mu);
  if (last) {
    grit_free(te->name);
    grit_free(te);
  }
}

grit_throttle *grit_throttle_table_lock(grit_throttle_handle *h) {
  pthread_mutex_lock(&table_mu);
  return &((throttle_entry *)h)->t;
}

void grit_throttle_table_unlock(grit_throttle_handle *h) {
  (void)h;
  pthread_mutex_unlock(&table_mu);
}

void grit_throttle_table_fork_lock(void) {
  pthread_mutex_lock(&table_mu);
}

void grit_throttle_table_fork_unlock(void) {
  pthread_mutex_unlock(&table_mu);
}
