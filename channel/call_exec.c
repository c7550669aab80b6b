/* The executor of the call machine (callsm/, SPEC SM-01, SM-02): channel/
 * feeds it one event, then runs the list of actions it returns, in order,
 * to the end. While a list runs the machine is never fed: an attempt's
 * pick or stream start that reports at once (a failed pick, a stream
 * opened) waits in the attempt and is fed after the list. So no action
 * ever finds the call changed under it by a nested end. */
#include "channel/channel_int.h"

#include <stdio.h>
#include <string.h>

/* ---- timers (RT-03, RT-10, HG-01) ---- */

static void call_retry_timer_fired(uv_timer_t *t) {
  grit_callsm_event ev = {.kind = GRIT_CALLSM_EV_TIMER,
                          .timer = GRIT_CALLSM_TIMER_RETRY};
  grit_call_sm_feed(t->data, &ev);
}

static void call_recv_timer_fired(uv_timer_t *t) {
  grit_callsm_event ev = {.kind = GRIT_CALLSM_EV_TIMER,
                          .timer = GRIT_CALLSM_TIMER_RECV};
  grit_call_sm_feed(t->data, &ev);
}

static void call_timer_start(grit_call *c, grit_callsm_timer which,
                             uint64_t ms) {
  if (which == GRIT_CALLSM_TIMER_RETRY && (c->timers & CALL_TIMER_RETRY))
    uv_timer_start(&c->pol->retry_timer, call_retry_timer_fired, ms, 0);
  else if (which == GRIT_CALLSM_TIMER_RECV && (c->timers & CALL_TIMER_RECV))
    uv_timer_start(&c->pol->recv_timer, call_recv_timer_fired, ms, 0);
}

static void call_timer_stop(grit_call *c, grit_callsm_timer which) {
  if (which == GRIT_CALLSM_TIMER_RETRY && (c->timers & CALL_TIMER_RETRY))
    uv_timer_stop(&c->pol->retry_timer);
  else if (which == GRIT_CALLSM_TIMER_RECV && (c->timers & CALL_TIMER_RECV))
    uv_timer_stop(&c->pol->recv_timer);
}

static void call_timer_init(grit_call *c, uv_timer_t *t, unsigned bit) {
  uv_timer_init(&c->ch->rt->loop, t);
  t->data = c;
  c->loop_holds++;
  c->timers |= bit;
}

grit_err grit_call_sm_policy_init(grit_call *c, const grit_callsm_config *k) {
  /* Only calls with a policy use the retry timer, and only a retry policy
   * with perAttemptRecvTimeout the recv timer (RT-10). */
  if (!k->retry && !k->hedge)
    return GRIT_OK;
  c->pol = grit_calloc(1, sizeof(*c->pol));
  if (!c->pol)
    return GRIT_ERR_NOMEM;
  call_timer_init(c, &c->pol->retry_timer, CALL_TIMER_RETRY);
  if (k->retry && k->retry->has_per_attempt_recv_timeout)
    call_timer_init(c, &c->pol->recv_timer, CALL_TIMER_RECV);
  return GRIT_OK;
}

/* ---- actions ---- */

/* HG-04: the status the call ends with if no attempt is left. */
static void call_save_status(grit_call *c, const grit_callsm_action *act) {
  call_policy_part *p = c->pol; /* hedging only, so never NULL */
  p->last_code = act->code;
  grit_free(p->last_message);
  p->last_message = grit_strdup(act->message ? act->message : "");
  grit_metadata_destroy(p->last_trailers);
  p->last_trailers = NULL;
  if (act->trailers)
    grit_metadata_copy(act->trailers, &p->last_trailers);
}

/* MX-01 and OB-01: a retry or hedge that throttling refused. */
static void call_count_throttled(grit_call *c) {
  __atomic_add_fetch(&c->ch->stats.throttled, 1, __ATOMIC_RELAXED);
  grit_obs_add(c->obs, GRIT_OBS_CALL_THROTTLED, 1);
}

static void call_record(grit_call *c, const grit_callsm_action *act) {
  call_attempt *a = c->att[act->slot];
  if (!a)
    return;
  if (act->keep_peer) { /* RT-09: the call waits for its deadline */
    pthread_mutex_lock(&c->mu);
    snprintf(c->info.peer, sizeof(c->info.peer), "%s", a->peer);
    pthread_mutex_unlock(&c->mu);
  }
  if (act->reason == GRIT_REASON_HEDGE_LOST) {
    const call_attempt *w = grit_call_winner(c);
    if (w)
      GRIT_TRACE(GRIT_TRACE_HEDGING, GRIT_LEVEL_INFO,
                 "call %llu: attempt %u cancelled (attempt %u won)",
                 (unsigned long long)c->id, a->number, w->number);
    else /* a Trailers-Only OK or a fatal status ended the call */
      GRIT_TRACE(GRIT_TRACE_HEDGING, GRIT_LEVEL_INFO,
                 "call %llu: attempt %u cancelled (another attempt ended "
                 "the call)",
                 (unsigned long long)c->id, a->number);
  } else
    GRIT_TRACE(c->sm.cfg.hedge ? GRIT_TRACE_HEDGING : GRIT_TRACE_RETRY,
               GRIT_LEVEL_INFO, "call %llu attempt %u: %s, %s",
               (unsigned long long)c->id, a->number,
               grit_status_code_name(act->code),
               act->reason == GRIT_REASON_NONE
                   ? "another attempt follows"
                   : grit_attempt_reason_name(act->reason));
  grit_attempt_observe(a, act->code, act->message, act->reason); /* SM-02 */
}

static void call_commit(grit_call *c, const grit_callsm_action *act) {
  call_attempt *a = act->slot != GRIT_CALLSM_NO_SLOT ? c->att[act->slot] : NULL;
  if (!a) {
    GRIT_TRACE(GRIT_TRACE_RETRY, GRIT_LEVEL_INFO,
               "call %llu: committed before an attempt (RT-07)",
               (unsigned long long)c->id);
    return;
  }
  GRIT_TRACE(c->sm.cfg.hedge ? GRIT_TRACE_HEDGING : GRIT_TRACE_RETRY,
             GRIT_LEVEL_INFO, "call %llu: committed to attempt %u",
             (unsigned long long)c->id, a->number);
  grit_attempt_flush(a); /* drops the replay buffer */
}

static void call_finish(grit_call *c, const grit_callsm_action *act) {
  const call_attempt *peer =
      act->slot != GRIT_CALLSM_NO_SLOT ? c->att[act->slot] : NULL;
  if (act->use_saved)
    grit_call_end(c, c->pol->last_code, c->pol->last_message,
                  c->pol->last_trailers, act->reason, peer);
  else
    grit_call_end(c, act->code, act->message, act->trailers, act->reason, peer);
}

static void call_run(grit_call *c, const grit_callsm_actions *out) {
  for (size_t i = 0; i < out->n; i++) {
    const grit_callsm_action *act = &out->a[i];
    call_attempt *a =
        act->slot != GRIT_CALLSM_NO_SLOT ? c->att[act->slot] : NULL;
    switch (act->kind) {
    case GRIT_CALLSM_START_ATTEMPT:
      if (act->attempt_kind != GRIT_ATTEMPT_FIRST)
        GRIT_TRACE(act->attempt_kind == GRIT_ATTEMPT_HEDGE ? GRIT_TRACE_HEDGING
                                                           : GRIT_TRACE_RETRY,
                   GRIT_LEVEL_INFO, "call %llu: %s %u sent after %llu ms%s",
                   (unsigned long long)c->id,
                   act->attempt_kind == GRIT_ATTEMPT_HEDGE ? "hedge" : "retry",
                   act->number, (unsigned long long)act->backoff_ms,
                   act->pushback ? " (pushback)" : "");
      grit_attempt_start(c, act);
      break;
    case GRIT_CALLSM_REPICK:
      if (a)
        grit_attempt_repick(a);
      break;
    case GRIT_CALLSM_RESET_STREAM: /* RT-10: its STREAM_END follows */
      if (a && a->stream)
        grit_stream_cancel(a->stream, act->code, act->message);
      break;
    case GRIT_CALLSM_DROP_ATTEMPT:
      if (a)
        grit_attempt_drop(a);
      break;
    case GRIT_CALLSM_COMMIT:
      call_commit(c, act);
      break;
    case GRIT_CALLSM_START_TIMER:
      call_timer_start(c, act->timer, act->ms);
      break;
    case GRIT_CALLSM_STOP_TIMER:
      call_timer_stop(c, act->timer);
      break;
    case GRIT_CALLSM_RECORD:
      call_record(c, act);
      break;
    case GRIT_CALLSM_SAVE_STATUS:
      call_save_status(c, act);
      break;
    case GRIT_CALLSM_THROTTLED:
      call_count_throttled(c);
      break;
    case GRIT_CALLSM_FINISH:
      call_finish(c, act);
      break;
    }
  }
}

static void call_feed_once(grit_call *c, grit_callsm_event *ev) {
  grit_callsm_actions out;
  ev->now_ms = uv_now(&c->ch->rt->loop);
  ev->rng = &c->ch->rng;
  /* TH-01: the bucket is shared by name; locked only while the machine
   * reads it, never while actions run (they may feed other calls). */
  if (c->throttle)
    ev->throttle = grit_throttle_table_lock(c->throttle);
  grit_callsm_feed(&c->sm, ev, &out);
  if (c->throttle)
    grit_throttle_table_unlock(c->throttle);
  call_run(c, &out);
}

/* The lowest slot whose attempt holds an event, as an event. */
static bool call_next_waiting(grit_call *c, grit_callsm_event *ev) {
  for (uint8_t i = 0; i < GRIT_CALLSM_SLOTS; i++) {
    if (!(c->sm_waiting & (1u << i)))
      continue;
    c->sm_waiting &= (uint8_t) ~(1u << i);
    call_attempt *a = c->att[i];
    if (!a)
      continue;
    *ev = (grit_callsm_event){.slot = i};
    if (a->pick_failed) {
      a->pick_failed = false;
      ev->kind = GRIT_CALLSM_EV_PICK_FAILED;
      ev->drop = a->pick_drop;
      ev->code = a->pick_code;
      ev->message = a->pick_msg ? a->pick_msg : "pick failed";
    } else {
      a->started = false;
      ev->kind = GRIT_CALLSM_EV_STREAM_STARTED;
    }
    return true;
  }
  return false;
}

void grit_call_sm_feed(grit_call *c, grit_callsm_event *ev) {
  if (c->sm_busy) {
    /* Only a local failure arrives here (out of memory starting an
     * attempt); its message is static. It is fed after the list. */
    GRIT_ASSERT(ev->kind == GRIT_CALLSM_EV_FAIL);
    if (!c->fail_waiting) {
      c->fail_waiting = true;
      c->fail_code = ev->code;
      c->fail_msg = ev->message;
    }
    return;
  }
  c->sm_busy = true;
  c->loop_holds++; /* FINISH may release the call's last hold */
  call_feed_once(c, ev);
  for (;;) {
    grit_callsm_event next;
    if (c->fail_waiting) {
      c->fail_waiting = false;
      next = (grit_callsm_event){.kind = GRIT_CALLSM_EV_FAIL,
                                 .code = c->fail_code,
                                 .message = c->fail_msg};
    } else if (!c->sm_waiting || !call_next_waiting(c, &next)) {
      break;
    }
    call_feed_once(c, &next);
  }
  c->sm_busy = false;
  grit_call_loop_release(c);
}

void grit_call_sm_attempt_event(call_attempt *a, grit_callsm_event_kind kind,
                                grit_status_code code, const char *msg) {
  grit_call *c = a->c;
  if (!c->sm_busy) {
    grit_callsm_event ev = {.kind = kind,
                            .slot = a->slot,
                            .code = code,
                            .message = msg,
                            .drop = kind == GRIT_CALLSM_EV_PICK_FAILED &&
                                    a->pick_drop};
    grit_call_sm_feed(c, &ev);
    return;
  }
  /* A list is running: the event waits in the attempt (SM-01). */
  if (kind == GRIT_CALLSM_EV_PICK_FAILED) {
    a->pick_failed = true;
    a->pick_code = code;
    grit_free(a->pick_msg);
    a->pick_msg = msg ? grit_strdup(msg) : NULL; /* NULL: "pick failed" */
  } else {
    a->started = true;
  }
  c->sm_waiting |= (uint8_t)(1u << a->slot);
}
