/*
 * retry: the pure parts of gRFC A6 retries that channel/ drives per call:
 * backoff (SPEC RT-03), server pushback (RT-04), the retry decision in the
 * exact order of RT-14, and the replay buffer of refcounted slices (RT-07).
 * No loop, no clock, no I/O: time and randomness come in as arguments.
 * Layout: floor 2 of docs/layout.md.
 */
#ifndef GRIT_RETRY_H
#define GRIT_RETRY_H

#include "service_config/service_config.h"
#include "throttle/throttle.h"
#include "util/util.h"

/* grit_backoff_next_ms: the wait before retry |n| (1 = first retry):
 * min(initial * multiplier^(n-1), max) * U(0.8, 1.2), in ms rounded up. */
uint64_t grit_backoff_next_ms(const grit_retry_policy *p, uint32_t n,
                              grit_rng *rng);

/* What grpc-retry-pushback-ms in a trailer list says (SPEC RT-04). */
typedef enum grit_pushback_kind {
  GRIT_PUSHBACK_NONE = 0,  /* absent */
  GRIT_PUSHBACK_DELAY = 1, /* retry after exactly |ms| */
  GRIT_PUSHBACK_STOP = 2,  /* negative, unparsable or repeated */
} grit_pushback_kind;

typedef struct grit_pushback {
  grit_pushback_kind kind;
  uint64_t ms;
} grit_pushback;

/* grit_retry_parse_pushback: read every grpc-retry-pushback-ms entry. */
grit_pushback grit_retry_parse_pushback(const grit_metadata *trailers);

/* Per-call retry state the decision updates. */
typedef struct grit_retry_state {
  uint32_t attempts;  /* attempts made, transparent retries excluded */
  uint32_t backoff_n; /* retries since the last pushback (RT-04 restart) */
  bool committed;
} grit_retry_state;

typedef struct grit_retry_decision {
  bool retry;
  uint64_t delay_ms;
  bool pushback_used;
  grit_attempt_reason reason; /* why not, when !retry */
} grit_retry_decision;

/* grit_retry_decide: after an attempt ended with |code|, decide per SPEC
 * RT-14 exactly: no policy; OK (no retry; throttle success is the caller's
 * on call end); non-retryable code (throttle untouched); record a throttle
 * failure, then throttled; committed; attempts used up; pushback stop;
 * else retry after pushback or backoff if before |deadline_ms| (0: none).
 * |p| NULL means no policy; |thr| NULL means no throttling. */
grit_retry_decision grit_retry_decide(const grit_retry_policy *p,
                                      grit_retry_state *st,
                                      grit_status_code code,
                                      const grit_pushback *pb,
                                      grit_throttle *thr, uint64_t now_ms,
                                      uint64_t deadline_ms, grit_rng *rng);

/* Replay buffer (SPEC RT-07): framed sends kept as slice references until
 * commit, within a per-call limit and a channel-wide limit whose counter
 * lives in the channel (loop-only, so a plain integer). */
typedef struct grit_replay_item {
  grit_list link;
  grit_slice *slice;
} grit_replay_item;

typedef struct grit_replay_buf {
  grit_list items;
  size_t count;
  size_t bytes;
  size_t call_limit;
  size_t *channel_bytes; /* shared; may be NULL */
  size_t channel_limit;
  bool closed; /* half-close is part of the replay */
  /* The first item lives here, so that a unary call's one message costs
   * no allocation (issue 24); later ones are allocated. */
  bool first_used;
  grit_replay_item first;
} grit_replay_buf;

void grit_replay_init(grit_replay_buf *rb, size_t call_limit,
                      size_t *channel_bytes, size_t channel_limit);
/* grit_replay_fits: whether |len| more bytes stay within both limits. */
bool grit_replay_fits(const grit_replay_buf *rb, size_t len);
/* grit_replay_add: keep a reference to |s|. GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_replay_add(grit_replay_buf *rb, grit_slice *s);
/* grit_replay_free: drop every reference and return the bytes. */
void grit_replay_free(grit_replay_buf *rb);

#endif
