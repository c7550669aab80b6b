/* The call machine (SPEC SM-01): every decision about a call's attempts,
 * from events to actions. The order of the actions is the order in which
 * channel/ must execute them: a slot's RECORD comes before its DROP, and
 * a DROP before the slot is used again; FINISH is followed only by DROPs
 * (the finishing attempt's object gives the call its peer). */
#include "callsm/callsm.h"

#include <string.h>

static grit_callsm_action *emit(grit_callsm_actions *out,
                                grit_callsm_action_kind kind, uint8_t slot) {
  GRIT_ASSERT(out->n < GRIT_CALLSM_MAX_ACTIONS);
  grit_callsm_action *a = &out->a[out->n++];
  *a = (grit_callsm_action){.kind = kind, .slot = slot};
  return a;
}

static void record(grit_callsm_actions *out, uint8_t slot,
                   grit_status_code code, const char *msg,
                   grit_attempt_reason reason) {
  grit_callsm_action *a = emit(out, GRIT_CALLSM_RECORD, slot);
  a->code = code;
  a->message = msg;
  a->reason = reason;
}

/* The slot is free; its attempt object goes (DROP). */
static void drop(grit_callsm_actions *out, uint8_t slot) {
  emit(out, GRIT_CALLSM_DROP_ATTEMPT, slot);
}

static void release(grit_callsm *m, uint8_t slot) {
  m->slots[slot].state = GRIT_CALLSM_FREE;
  m->live--;
}

static void stop_timer(grit_callsm *m, grit_callsm_actions *out,
                       grit_callsm_timer t) {
  bool *on =
      t == GRIT_CALLSM_TIMER_RETRY ? &m->retry_timer_on : &m->recv_timer_on;
  if (!*on)
    return;
  *on = false;
  emit(out, GRIT_CALLSM_STOP_TIMER, GRIT_CALLSM_NO_SLOT)->timer = t;
}

static void start_timer(grit_callsm *m, grit_callsm_actions *out,
                        grit_callsm_timer t, uint64_t ms) {
  if (t == GRIT_CALLSM_TIMER_RETRY)
    m->retry_timer_on = true;
  else
    m->recv_timer_on = true;
  grit_callsm_action *a =
      emit(out, GRIT_CALLSM_START_TIMER, GRIT_CALLSM_NO_SLOT);
  a->timer = t;
  a->ms = ms;
}

static uint8_t free_slot(const grit_callsm *m) {
  for (uint8_t i = 0; i < GRIT_CALLSM_SLOTS; i++)
    if (m->slots[i].state == GRIT_CALLSM_FREE)
      return i;
  return GRIT_CALLSM_NO_SLOT;
}

/* ---- attempts ---- */

/* A new attempt (RT-08 numbering; counted here and only here). Returns
 * false when every slot is busy (a hedge then waits for one). */
static bool start_attempt(grit_callsm *m, grit_callsm_actions *out,
                          grit_attempt_kind kind, uint64_t backoff_ms,
                          bool pushback) {
  uint8_t s = free_slot(m);
  if (s == GRIT_CALLSM_NO_SLOT)
    return false;
  m->slots[s] = (grit_callsm_slot){
      .number = ++m->next_number,
      .state = GRIT_CALLSM_PICKING,
      .kind = (uint8_t)kind,
  };
  m->live++;
  m->rs.attempts++; /* RT-02: maxAttempts counts the first */
  m->counts.attempts++;
  if (kind == GRIT_ATTEMPT_RETRY)
    m->counts.retries++;
  else if (kind == GRIT_ATTEMPT_HEDGE)
    m->counts.hedges++;
  grit_callsm_action *a = emit(out, GRIT_CALLSM_START_ATTEMPT, s);
  a->attempt_kind = kind;
  a->number = m->slots[s].number;
  a->backoff_ms = backoff_ms;
  a->pushback = pushback;
  if (m->rs.committed && m->winner == GRIT_CALLSM_NO_SLOT) {
    m->winner = s; /* RT-07: committed before any attempt was live */
    emit(out, GRIT_CALLSM_COMMIT, s);
  }
  return true;
}

/* The call ends. |slot| was recorded by the caller (or NO_SLOT); every
 * other live attempt gets its record (MX-03): those that lose to a
 * Trailers-Only OK or a fatal status as HEDGE_LOST (HG-02, HG-03), the
 * rest with the call's own status and reason (deadline, cancel). */
static void finish(grit_callsm *m, grit_callsm_actions *out,
                   grit_status_code code, const char *msg, const void *trailers,
                   grit_attempt_reason reason, uint8_t slot, bool use_saved,
                   grit_throttle *thr) {
  bool lost = reason == GRIT_REASON_OK || reason == GRIT_REASON_FATAL;
  uint8_t ended[GRIT_CALLSM_SLOTS];
  size_t n = 0;
  for (uint8_t i = 0; i < GRIT_CALLSM_SLOTS; i++) {
    if (i == slot || m->slots[i].state == GRIT_CALLSM_FREE)
      continue;
    record(out, i, lost ? GRIT_STATUS_CANCELLED : code,
           lost ? "another attempt won" : msg,
           lost ? GRIT_REASON_HEDGE_LOST : reason);
    release(m, i);
    ended[n++] = i;
  }
  if (code == GRIT_STATUS_OK && thr)
    grit_throttle_on_success(thr); /* TH-02 */
  m->done = true;
  m->retry_timer_on = m->recv_timer_on = false; /* the caller closes them */
  uint8_t peer = slot != GRIT_CALLSM_NO_SLOT ? slot : m->winner;
  grit_callsm_action *a = emit(out, GRIT_CALLSM_FINISH, peer);
  a->code = code;
  a->message = msg;
  a->trailers = trailers;
  a->reason = reason;
  a->use_saved = use_saved;
  a->attempt_kind = GRIT_ATTEMPT_FIRST;
  if (slot != GRIT_CALLSM_NO_SLOT)
    drop(out, slot);
  for (size_t i = 0; i < n; i++)
    drop(out, ended[i]);
}

/* RT-05, HG-02, HG-07: commit to |s|, once; the others lose. */
static void commit(grit_callsm *m, grit_callsm_actions *out, uint8_t s) {
  if (m->rs.committed)
    return;
  m->rs.committed = true;
  m->winner = s;
  stop_timer(m, out, GRIT_CALLSM_TIMER_RETRY); /* no more retries, hedges */
  stop_timer(m, out, GRIT_CALLSM_TIMER_RECV);
  for (uint8_t i = 0; i < GRIT_CALLSM_SLOTS; i++) {
    if (i == s || m->slots[i].state == GRIT_CALLSM_FREE)
      continue;
    record(out, i, GRIT_STATUS_CANCELLED, "another attempt won",
           GRIT_REASON_HEDGE_LOST);
    release(m, i);
    drop(out, i);
  }
  emit(out, GRIT_CALLSM_COMMIT, s);
}

/* ---- hedging (HG-01..HG-09) on hedging/schedule.c ---- */

static bool hedge_more(const grit_callsm *m) {
  return !m->rs.committed && grit_hedge_more(&m->hs);
}

/* Send the next hedge if tokens allow (HG-06) and a slot is free. */
static bool hedge_send(grit_callsm *m, grit_callsm_actions *out, uint64_t now,
                       grit_throttle *thr) {
  if (!hedge_more(m) || free_slot(m) == GRIT_CALLSM_NO_SLOT)
    return false;
  if (thr && !grit_throttle_allows(thr)) {
    emit(out, GRIT_CALLSM_THROTTLED, GRIT_CALLSM_NO_SLOT);
    grit_hedge_stop(&m->hs, GRIT_REASON_THROTTLED);
    return false;
  }
  uint64_t wait_ms = m->hs.wait_ms;
  bool pushback = m->hs.wait_pushback;
  grit_hedge_on_sent(&m->hs, now);
  return start_attempt(m, out, GRIT_ATTEMPT_HEDGE, wait_ms, pushback);
}

/* Send every hedge due now (all at once with hedgingDelay 0, SC-11), then
 * arm the timer for the next. */
static void hedge_pump(grit_callsm *m, grit_callsm_actions *out, uint64_t now,
                       grit_throttle *thr) {
  while (grit_hedge_wait_ms(&m->hs, now) == 0 && hedge_send(m, out, now, thr))
    ;
  uint64_t ms = grit_hedge_wait_ms(&m->hs, now);
  if (hedge_more(m) && ms != GRIT_HEDGE_NONE && ms > 0)
    start_timer(m, out, GRIT_CALLSM_TIMER_RETRY, ms);
}

static void hedge_failed(grit_callsm *m, grit_callsm_actions *out,
                         const grit_callsm_event *ev, uint8_t s) {
  grit_hedge_verdict v = grit_hedge_classify(&m->hs, ev->code);
  if (v != GRIT_HEDGE_NON_FATAL) { /* HG-02, HG-03: final */
    grit_attempt_reason why =
        v == GRIT_HEDGE_WIN ? GRIT_REASON_OK : GRIT_REASON_FATAL;
    record(out, s, ev->code, ev->message, why);
    finish(m, out, ev->code, ev->message, ev->trailers, why, s, false,
           ev->throttle);
    return;
  }
  grit_callsm_action *sv = emit(out, GRIT_CALLSM_SAVE_STATUS, s);
  sv->code = ev->code;
  sv->message = ev->message;
  sv->trailers = ev->trailers;
  bool could = hedge_more(m);
  bool tokens = true; /* HG-06, TH-02: a non-fatal failure costs a token */
  if (ev->throttle) {
    grit_throttle_on_failure(ev->throttle);
    tokens = grit_throttle_allows(ev->throttle);
  }
  grit_hedge_on_non_fatal(&m->hs, &ev->pushback, tokens, ev->now_ms);
  if (could && m->hs.stop_why == GRIT_REASON_THROTTLED)
    emit(out, GRIT_CALLSM_THROTTLED, GRIT_CALLSM_NO_SLOT);
  stop_timer(m, out, GRIT_CALLSM_TIMER_RETRY);
  bool last = m->live == 0 && !hedge_more(m);
  if (last) { /* HG-04: the last status, once every attempt has ended */
    grit_attempt_reason why = grit_hedge_final_reason(&m->hs);
    record(out, s, ev->code, ev->message, why);
    finish(m, out, ev->code, ev->message, ev->trailers, why, s, true,
           ev->throttle);
    return;
  }
  record(out, s, ev->code, ev->message, GRIT_REASON_NONE);
  drop(out, s);
  hedge_pump(m, out, ev->now_ms, ev->throttle); /* HG-03, HG-05 */
}

/* ---- retries (RT-01..RT-14) on retry/decide.c ---- */

static void retry_failed(grit_callsm *m, grit_callsm_actions *out,
                         const grit_callsm_event *ev, uint8_t s,
                         bool recv_timed_out) {
  grit_retry_policy p = *m->cfg.retry;
  if (recv_timed_out) /* RT-10: a recv timeout is retried as CANCELLED */
    p.retryable_codes |= GRIT_CODE_BIT(GRIT_STATUS_CANCELLED);
  grit_retry_decision d =
      grit_retry_decide(&p, &m->rs, ev->code, &ev->pushback, ev->throttle,
                        ev->now_ms, m->cfg.deadline_at_ms, ev->rng);
  if (!d.retry && d.reason == GRIT_REASON_DEADLINE) {
    /* RT-09: no time for another attempt. As in grpc-core, the call
     * waits for its deadline (DEADLINE) and ends DEADLINE_EXCEEDED. */
    record(out, s, ev->code, ev->message, d.reason);
    out->a[out->n - 1].keep_peer = true;
    drop(out, s);
    return;
  }
  if (!d.retry) {
    if (d.reason == GRIT_REASON_THROTTLED)
      emit(out, GRIT_CALLSM_THROTTLED, GRIT_CALLSM_NO_SLOT);
    record(out, s, ev->code, ev->message, d.reason);
    finish(m, out, ev->code, ev->message, ev->trailers, d.reason, s, false,
           ev->throttle);
    return;
  }
  record(out, s, ev->code, ev->message, GRIT_REASON_NONE);
  drop(out, s);
  m->pending_backoff_ms = d.delay_ms;
  m->pending_pushback = d.pushback_used;
  m->counts.backoff_ms += d.delay_ms;
  start_timer(m, out, GRIT_CALLSM_TIMER_RETRY, d.delay_ms);
}

/* An uncommitted attempt failed (or the committed one ended): what the
 * policy says. The slot is released before the decision. */
static void attempt_failed(grit_callsm *m, grit_callsm_actions *out,
                           const grit_callsm_event *ev, uint8_t s) {
  bool recv_timed_out = m->slots[s].recv_timed_out;
  release(m, s);
  if (ev->drop) { /* an LB drop ends the call, its other attempts too */
    record(out, s, ev->code, ev->message, GRIT_REASON_DROPPED);
    finish(m, out, ev->code, ev->message, ev->trailers, GRIT_REASON_DROPPED, s,
           false, ev->throttle);
    return;
  }
  if (m->winner == s) { /* RT-05: committed, so final */
    grit_attempt_reason why =
        ev->code == GRIT_STATUS_OK ? GRIT_REASON_OK : GRIT_REASON_COMMITTED;
    record(out, s, ev->code, ev->message, why);
    finish(m, out, ev->code, ev->message, ev->trailers, why, s, false,
           ev->throttle);
    return;
  }
  if (m->cfg.hedge) {
    hedge_failed(m, out, ev, s);
    return;
  }
  if (m->cfg.retry) {
    retry_failed(m, out, ev, s, recv_timed_out);
    return;
  }
  grit_attempt_reason why = ev->code == GRIT_STATUS_OK ? GRIT_REASON_OK
                            : m->cfg.policy_disabled   ? GRIT_REASON_DISABLED
                                                       : GRIT_REASON_NO_POLICY;
  record(out, s, ev->code, ev->message, why);
  finish(m, out, ev->code, ev->message, ev->trailers, why, s, false,
         ev->throttle);
}

/* TR-01..TR-04: may this ended stream be replayed transparently? */
static bool transparent_ok(grit_callsm *m, const grit_callsm_event *ev) {
  if (m->rs.committed || ev->headers_received || !m->cfg.transparent)
    return false; /* TR-03: never after commit; RT-01: off with retries */
  if (ev->wire == GRIT_CALLSM_WIRE_NOT_SENT)
    return true; /* TR-01 */
  if (ev->wire == GRIT_CALLSM_WIRE_REFUSED && !m->refused_retry_used) {
    m->refused_retry_used = true; /* TR-02: once per call */
    return true;
  }
  return false; /* TR-04: the server may have seen it */
}

static void stream_end(grit_callsm *m, grit_callsm_actions *out,
                       const grit_callsm_event *ev, uint8_t s) {
  if (!transparent_ok(m, ev)) {
    attempt_failed(m, out, ev, s);
    return;
  }
  if (m->counts.transparent >= GRIT_CALLSM_TRANSPARENT_CAP) {
    release(m, s);
    record(out, s, ev->code, ev->message, GRIT_REASON_EXHAUSTED);
    finish(m, out, GRIT_STATUS_INTERNAL, "transparent retry limit reached",
           NULL, GRIT_REASON_EXHAUSTED, s, false, NULL);
    return;
  }
  /* TR-03: no backoff, same number, not counted against maxAttempts nor
   * by throttling. */
  m->counts.transparent++;
  m->counts.attempts++;
  record(out, s, ev->code, ev->message, GRIT_REASON_NONE);
  grit_callsm_slot *sl = &m->slots[s];
  sl->state = GRIT_CALLSM_PICKING;
  sl->kind = GRIT_ATTEMPT_TRANSPARENT;
  sl->sent = 0;
  sl->headers = false;
  sl->recv_timed_out = false;
  grit_callsm_action *a = emit(out, GRIT_CALLSM_REPICK, s);
  a->attempt_kind = GRIT_ATTEMPT_TRANSPARENT;
  a->number = sl->number;
}

/* ---- the other events ---- */

static void config_ready(grit_callsm *m, grit_callsm_actions *out,
                         const grit_callsm_event *ev) {
  if (m->configured)
    return;
  m->cfg = *ev->config;
  m->configured = true;
  if (m->cfg.hedge) {
    /* HG-01: attempt 1 at t = 0; HG-06: it always goes. */
    grit_hedge_init(&m->hs, m->cfg.hedge, ev->now_ms);
    grit_hedge_on_sent(&m->hs, ev->now_ms);
    start_attempt(m, out, GRIT_ATTEMPT_FIRST, 0, false);
    hedge_pump(m, out, ev->now_ms, ev->throttle);
    return;
  }
  start_attempt(m, out, GRIT_ATTEMPT_FIRST, 0, false);
}

/* RT-07, HG-07: a send over the replay limit commits the call to the
 * attempt that has sent the most (one with a stream over one without). */
static void send_overflow(grit_callsm *m, grit_callsm_actions *out) {
  if (m->rs.committed)
    return;
  uint8_t best = GRIT_CALLSM_NO_SLOT;
  for (uint8_t i = 0; i < GRIT_CALLSM_SLOTS; i++) {
    const grit_callsm_slot *sl = &m->slots[i];
    if (sl->state == GRIT_CALLSM_FREE)
      continue;
    if (best == GRIT_CALLSM_NO_SLOT || sl->sent > m->slots[best].sent ||
        (sl->state == GRIT_CALLSM_STREAM &&
         m->slots[best].state != GRIT_CALLSM_STREAM))
      best = i;
  }
  if (best != GRIT_CALLSM_NO_SLOT) {
    commit(m, out, best);
    return;
  }
  /* No attempt live (before the first, or in a backoff): the next attempt
   * is the committed one. */
  m->rs.committed = true;
  emit(out, GRIT_CALLSM_COMMIT, GRIT_CALLSM_NO_SLOT);
}

static void timer_fired(grit_callsm *m, grit_callsm_actions *out,
                        const grit_callsm_event *ev) {
  if (ev->timer == GRIT_CALLSM_TIMER_RECV) {
    m->recv_timer_on = false;
    for (uint8_t i = 0; i < GRIT_CALLSM_SLOTS; i++) {
      grit_callsm_slot *sl = &m->slots[i];
      if (sl->state != GRIT_CALLSM_STREAM || sl->headers)
        continue;
      sl->recv_timed_out = true; /* RT-10: fails as CANCELLED */
      grit_callsm_action *a = emit(out, GRIT_CALLSM_RESET_STREAM, i);
      a->code = GRIT_STATUS_CANCELLED;
      a->message = "per-attempt recv timeout";
    }
    return;
  }
  if (!m->retry_timer_on)
    return; /* stopped after the caller's timer fired: stale */
  m->retry_timer_on = false;
  if (m->rs.committed) {
    /* A send overflowed the replay buffer while no attempt was live: this
     * attempt is the committed one (RT-07). */
    if (m->winner == GRIT_CALLSM_NO_SLOT)
      start_attempt(m, out,
                    m->cfg.hedge ? GRIT_ATTEMPT_HEDGE : GRIT_ATTEMPT_RETRY,
                    m->cfg.hedge ? m->hs.wait_ms : m->pending_backoff_ms,
                    m->cfg.hedge ? m->hs.wait_pushback : m->pending_pushback);
    return;
  }
  if (m->cfg.hedge) {
    hedge_pump(m, out, ev->now_ms, ev->throttle);
    return;
  }
  start_attempt(m, out, GRIT_ATTEMPT_RETRY, m->pending_backoff_ms,
                m->pending_pushback);
}

static void stream_started(grit_callsm *m, grit_callsm_actions *out,
                           uint8_t s) {
  m->slots[s].state = GRIT_CALLSM_STREAM;
  const grit_retry_policy *r = m->cfg.retry;
  if (r && r->has_per_attempt_recv_timeout && !m->rs.committed)
    start_timer(m, out, GRIT_CALLSM_TIMER_RECV, /* RT-10 */
                grit_ns_to_ms_ceil(r->per_attempt_recv_timeout_ns));
}

void grit_callsm_init(grit_callsm *m) {
  memset(m, 0, sizeof(*m));
  m->winner = GRIT_CALLSM_NO_SLOT;
}

static bool slot_live(const grit_callsm *m, uint8_t s) {
  return s < GRIT_CALLSM_SLOTS && m->slots[s].state != GRIT_CALLSM_FREE;
}

void grit_callsm_feed(grit_callsm *m, const grit_callsm_event *ev,
                      grit_callsm_actions *out) {
  out->n = 0;
  if (m->done)
    return;
  uint8_t s = ev->slot;
  switch (ev->kind) {
  case GRIT_CALLSM_EV_CONFIG:
    config_ready(m, out, ev);
    return;
  case GRIT_CALLSM_EV_SEND:
    if (!ev->fits)
      send_overflow(m, out);
    return;
  case GRIT_CALLSM_EV_PICK_FAILED: /* RT-12: the policy decides */
    if (slot_live(m, s))
      attempt_failed(m, out, ev, s);
    return;
  case GRIT_CALLSM_EV_STREAM_STARTED:
    if (slot_live(m, s))
      stream_started(m, out, s);
    return;
  case GRIT_CALLSM_EV_HEADERS:
    if (!slot_live(m, s))
      return;
    m->slots[s].headers = true;
    stop_timer(m, out, GRIT_CALLSM_TIMER_RECV);
    commit(m, out, s); /* RT-05, HG-02 */
    return;
  case GRIT_CALLSM_EV_MESSAGE:
    if (slot_live(m, s))
      commit(m, out, s); /* RT-05 */
    return;
  case GRIT_CALLSM_EV_STREAM_END:
    if (slot_live(m, s))
      stream_end(m, out, ev, s);
    return;
  case GRIT_CALLSM_EV_TIMER:
    timer_fired(m, out, ev);
    return;
  case GRIT_CALLSM_EV_CANCEL: /* RT-11, HG-09 */
    finish(m, out, GRIT_STATUS_CANCELLED,
           ev->message ? ev->message : "Cancelled", NULL, GRIT_REASON_CANCELLED,
           GRIT_CALLSM_NO_SLOT, false, NULL);
    return;
  case GRIT_CALLSM_EV_DEADLINE: /* RT-09, HG-09: final */
    finish(m, out, GRIT_STATUS_DEADLINE_EXCEEDED, "Deadline Exceeded", NULL,
           GRIT_REASON_DEADLINE, GRIT_CALLSM_NO_SLOT, false, NULL);
    return;
  case GRIT_CALLSM_EV_FAIL:
    finish(m, out, ev->code, ev->message, ev->trailers,
           ev->code == GRIT_STATUS_CANCELLED ? GRIT_REASON_CANCELLED
                                             : GRIT_REASON_COMMITTED,
           GRIT_CALLSM_NO_SLOT, false, NULL);
    return;
  }
}
