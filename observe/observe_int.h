/* Shared by the files of observe/ only: the registry layout. */
#ifndef GRIT_OBSERVE_INT_H
#define GRIT_OBSERVE_INT_H

#include "observe/observe.h"

#define GRIT_OBS_STATUSES 17 /* grpc status codes 0..16 */

typedef struct grit_obs_inst {
  const char *name, *unit;
  grit_obs_buckets buckets;
  grit_obs_scope scope;
  const char *help;
} grit_obs_inst;

extern const grit_obs_inst grit_obs_insts[GRIT_OBS_N];

struct grit_obs_method {
  grit_obs_method_text text; /* first: observe.h reads it inline */
  grit_obs_method *next;     /* atomic */
  char *name;
  uint64_t *plain;                        /* instruments without status */
  uint64_t *by_status[GRIT_OBS_STATUSES]; /* atomic; NULL until used */
};

struct grit_obs_target {
  grit_obs_target *next; /* atomic */
  char *name;
  uint64_t *cells;          /* GRIT_OBS_S_TARGET instruments */
  grit_obs_method *methods; /* atomic head */
  unsigned nmethods;        /* named ones, under the registry mutex */
  uint64_t sc_states[5];    /* subchannels per state IDLE..SHUTDOWN */
  bool sc_seen;             /* a subchannel was ever made */
};

grit_obs_target *grit_obs_targets(void);
const uint64_t *grit_obs_bounds(grit_obs_buckets b, size_t *n);
size_t grit_obs_cells(grit_obs_id id);
size_t grit_obs_offset(grit_obs_id id);
size_t grit_obs_collectors(grit_obs_collector_fn *out, size_t cap);
/* |t|'s subchannels per connectivity state (IDLE..SHUTDOWN); false if
 * none was ever made. */
bool grit_obs_subchannel_counts(const grit_obs_target *t, uint64_t out[5]);

#endif
