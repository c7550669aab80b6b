/*
 * callsm: one call's attempts as a pure state machine (SPEC SM-01, SM-02).
 *
 * channel/ feeds it events (the config is known, a send did not fit the
 * replay buffer, a pick failed, an attempt's stream opened, got headers or
 * a message, or ended with a status and wire facts, a timer fired, the
 * application cancelled, the deadline passed, a local error) and it answers
 * with a list of actions (start an attempt, re-pick one for a transparent
 * retry, reset one's stream, drop one, commit, start or stop a timer, record an
 * attempt, keep a status as the last, count a throttled retry, finish).
 * It owns the retry and hedging state of the call and its attempt table:
 * which attempts live, their numbers and kinds, who is committed, which
 * attempt won. Every retry, hedging, transparent-retry and commit decision
 * is taken here, calling the arithmetic of retry/ (RT-14), hedging/
 * (HG-*) and throttle/ (TH-*).
 *
 * No loop, no clock (|now_ms| comes with each event), no I/O, no locks
 * (the caller holds the throttle bucket's lock while it passes the bucket
 * in an event), no allocation. The caller executes a list completely
 * before it feeds the next event; events that arise while it executes
 * (a pick that fails at once) are queued by the caller and fed after.
 * Pointers in events (messages, trailers) are never read: they come back
 * unchanged in the actions that need them.
 *
 * docs/call-machine.md describes the events, the actions and how to add
 * one.
 */
#ifndef GRIT_CALLSM_H
#define GRIT_CALLSM_H

#include "hedging/hedging.h"
#include "retry/retry.h"
#include "throttle/throttle.h"
#include "util/util.h"

/* Attempts alive at once. A hedge due while every slot is busy is sent
 * when one frees (only with maxAttempts above it, GRIT_ARG_MAX_ATTEMPTS_CAP).
 */
#define GRIT_CALLSM_SLOTS 8
/* No slot (an action about no attempt). */
#define GRIT_CALLSM_NO_SLOT 0xff
/* SPEC TR-01's safety cap on transparent retries per call. */
#define GRIT_CALLSM_TRANSPARENT_CAP 1000
/* The most actions one event produces: a record and a cancel per slot,
 * and a few more. */
#define GRIT_CALLSM_MAX_ACTIONS (2 * GRIT_CALLSM_SLOTS + 8)

/* The call's timers the machine starts and stops. The deadline timer is
 * the caller's (armed from the call's deadline); it feeds DEADLINE. */
typedef enum grit_callsm_timer {
  GRIT_CALLSM_TIMER_RETRY = 0, /* backoff before a retry, or the next hedge */
  GRIT_CALLSM_TIMER_RECV = 1,  /* perAttemptRecvTimeout (RT-10) */
} grit_callsm_timer;

/* What the call's config says, fixed once it is known (CONFIG). */
typedef struct grit_callsm_config {
  const grit_retry_policy *retry;   /* NULL: no retry policy */
  const grit_hedging_policy *hedge; /* NULL: no hedging policy */
  bool policy_disabled;    /* a policy is configured but retries are off */
  bool transparent;        /* transparent retries allowed (RT-01) */
  uint64_t deadline_at_ms; /* 0: none (RT-09) */
} grit_callsm_config;

typedef enum grit_callsm_event_kind {
  GRIT_CALLSM_EV_CONFIG = 0,      /* .config: start the first attempt(s) */
  GRIT_CALLSM_EV_SEND = 1,        /* .fits: whether it fit the replay buffer */
  GRIT_CALLSM_EV_PICK_FAILED = 2, /* .slot, .code: no stream (RT-12) */
  GRIT_CALLSM_EV_STREAM_STARTED = 3, /* .slot: a stream opened */
  GRIT_CALLSM_EV_HEADERS = 4,        /* .slot: response headers */
  GRIT_CALLSM_EV_MESSAGE = 5,        /* .slot: a response message */
  GRIT_CALLSM_EV_STREAM_END = 6,     /* .slot, .code, .wire, ... */
  GRIT_CALLSM_EV_TIMER = 7,          /* .timer fired */
  GRIT_CALLSM_EV_CANCEL = 8,         /* the application cancelled (RT-11) */
  GRIT_CALLSM_EV_DEADLINE = 9,       /* the call's deadline passed (RT-09) */
  GRIT_CALLSM_EV_FAIL = 10,          /* a local error ends the call: .code */
} grit_callsm_event_kind;

/* Wire facts of an ended stream (TR-01, TR-02, TR-04). */
typedef enum grit_callsm_wire {
  GRIT_CALLSM_WIRE_NOT_SENT = 0, /* no HEADERS frame was written */
  GRIT_CALLSM_WIRE_REFUSED = 1,  /* REFUSED_STREAM, or GOAWAY below it */
  GRIT_CALLSM_WIRE_SENT = 2,     /* the server may have processed it */
} grit_callsm_wire;

typedef struct grit_callsm_event {
  grit_callsm_event_kind kind;
  uint64_t now_ms; /* the caller's loop time */
  uint8_t slot;
  grit_callsm_timer timer;
  bool fits;                        /* SEND */
  const grit_callsm_config *config; /* CONFIG; copied by the machine */
  grit_status_code code;            /* PICK_FAILED, STREAM_END, FAIL */
  const char *message;              /* passed back in RECORD and FINISH */
  const void *trailers;             /* passed back in SAVE_STATUS and FINISH */
  grit_callsm_wire wire;            /* STREAM_END */
  bool headers_received;            /* STREAM_END: not Trailers-Only */
  /* PICK_FAILED: the load balancer dropped the call (an xDS drop category
   * or circuit breaker, issue 27): final, never retried or hedged (as
   * grpc-core and grpc-go); the record's reason is DROPPED. */
  bool drop;
  grit_pushback pushback;  /* STREAM_END: parsed trailers (RT-04) */
  grit_throttle *throttle; /* the call's bucket, locked; or NULL */
  grit_rng *rng; /* the channel's PRNG, for backoff (RT-03); loop-owned */
} grit_callsm_event;

typedef enum grit_callsm_action_kind {
  /* Pick (RT-12, HG-08) and open a stream for the attempt in .slot,
   * numbered .number (grpc-previous-rpc-attempts = number - 1, RT-08),
   * of .attempt_kind, after .backoff_ms (.pushback: from the server).
   * The caller may defer it (credentials, docs/call-machine.md); its
   * outcome comes back as STREAM_STARTED or PICK_FAILED. */
  GRIT_CALLSM_START_ATTEMPT = 0,
  /* Pick again for the attempt in .slot and replay from the first send:
   * a transparent retry (TR-01..TR-03); kind TRANSPARENT, same number. */
  GRIT_CALLSM_REPICK = 1,
  /* End .slot's stream with CANCELLED (.message); the slot stays live
   * and its STREAM_END follows (RT-10's recv timeout). */
  GRIT_CALLSM_RESET_STREAM = 2,
  /* The slot is free: let go of its attempt. One still running is
   * cancelled (RST_STREAM CANCEL, or it leaves the pick queue); feed
   * nothing more about it. Every slot that frees gets one, after its
   * RECORD and before the slot is used again. */
  GRIT_CALLSM_DROP_ATTEMPT = 3,
  /* The call commits to .slot (RT-05, HG-02, HG-07); NO_SLOT: before
   * any attempt (RT-07). The replay buffer may go once it is flushed. */
  GRIT_CALLSM_COMMIT = 4,
  GRIT_CALLSM_START_TIMER = 5, /* .timer, in .ms */
  GRIT_CALLSM_STOP_TIMER = 6,  /* .timer */
  /* SM-02: the attempt in .slot ended with .code (.message); .reason is
   * why nothing followed it, or NONE. Metrics, the MX-03 observer and
   * the attempt's span hang off this one action. .keep_peer: the call's
   * info takes its peer (the call waits for its deadline, RT-09). */
  GRIT_CALLSM_RECORD = 7,
  /* HG-04: keep .code, .message, .trailers as the call's last status. */
  GRIT_CALLSM_SAVE_STATUS = 8,
  /* MX-01: a retry or hedge was refused by throttling (TH-03). */
  GRIT_CALLSM_THROTTLED = 9,
  /* The call ends with .code, .message, .trailers (or, with .use_saved,
   * the status SAVE_STATUS kept), for .reason; .slot is the attempt whose
   * peer the call's info reports (or NO_SLOT). Only DROPs follow it. */
  GRIT_CALLSM_FINISH = 10,
} grit_callsm_action_kind;

typedef struct grit_callsm_action {
  grit_callsm_action_kind kind;
  uint8_t slot;
  grit_callsm_timer timer;
  grit_attempt_kind attempt_kind;
  grit_attempt_reason reason;
  grit_status_code code;
  bool pushback;
  bool keep_peer;
  bool use_saved;
  uint32_t number;
  uint64_t backoff_ms; /* START_ATTEMPT */
  uint64_t ms;         /* START_TIMER */
  const char *message;
  const void *trailers;
} grit_callsm_action;

/* The caller's buffer for one event's actions (on its stack). */
typedef struct grit_callsm_actions {
  size_t n;
  grit_callsm_action a[GRIT_CALLSM_MAX_ACTIONS];
} grit_callsm_actions;

typedef enum grit_callsm_slot_state {
  GRIT_CALLSM_FREE = 0,
  GRIT_CALLSM_PICKING = 1, /* started or re-picked, no stream yet */
  GRIT_CALLSM_STREAM = 2,  /* a stream is open */
} grit_callsm_slot_state;

typedef struct grit_callsm_slot {
  uint32_t number;
  uint32_t sent; /* replay items handed over (HG-07); the caller's fact */
  uint8_t state; /* grit_callsm_slot_state */
  uint8_t kind;  /* grit_attempt_kind */
  bool headers;
  bool recv_timed_out; /* RT-10: its stream was reset for the timeout */
} grit_callsm_slot;

/* Per-call counts for grit_call_info and MX-01 (read at the end). */
typedef struct grit_callsm_counts {
  uint32_t attempts;    /* every attempt started, transparent ones too */
  uint32_t retries;     /* RETRY attempts */
  uint32_t hedges;      /* HEDGE attempts */
  uint32_t transparent; /* transparent retries */
  uint64_t backoff_ms;  /* total waited before retries and hedges */
} grit_callsm_counts;

typedef struct grit_callsm {
  grit_callsm_config cfg;
  grit_retry_state rs; /* rs.committed is the call's one commit flag */
  grit_hedge_sched hs;
  grit_callsm_counts counts;
  grit_callsm_slot slots[GRIT_CALLSM_SLOTS];
  uint64_t pending_backoff_ms; /* for the retry the timer will start */
  uint32_t next_number;
  uint8_t winner; /* the committed attempt, or NO_SLOT */
  uint8_t live;   /* slots not FREE */
  bool configured;
  bool pending_pushback;
  bool refused_retry_used; /* TR-02: once per call */
  bool retry_timer_on;
  bool recv_timer_on;
  bool done;
} grit_callsm;

/* A machine before its config: no attempt, nothing committed. */
void grit_callsm_init(grit_callsm *m);
/* Feed one event; |out| gets the actions, in the order to execute them.
 * Events about a free slot, and every event after FINISH, yield none. */
void grit_callsm_feed(grit_callsm *m, const grit_callsm_event *ev,
                      grit_callsm_actions *out);

static inline bool grit_callsm_committed(const grit_callsm *m) {
  return m->rs.committed;
}
/* The committed attempt's slot, or NO_SLOT. */
static inline uint8_t grit_callsm_winner(const grit_callsm *m) {
  return m->winner;
}
static inline bool grit_callsm_done(const grit_callsm *m) {
  return m->done;
}
/* The caller handed |sent| replay items to |slot|'s stream (HG-07). */
static inline void grit_callsm_note_sent(grit_callsm *m, uint8_t slot,
                                         uint32_t sent) {
  m->slots[slot].sent = sent;
}
/* Whether |slot|'s response headers came (the recv timeout spares it). */
static inline bool grit_callsm_has_headers(const grit_callsm *m, uint8_t slot) {
  return m->slots[slot].headers;
}

#endif
