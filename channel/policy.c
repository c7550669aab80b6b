/* The channel's LB policies. The current one answers picks. A config that
 * names another policy (SPEC SC-08) starts it as pending: it gets the
 * resolver's updates and connects while the current one keeps serving, and
 * it takes over once it reports READY or TRANSIENT_FAILURE, as grpc-core's
 * ChildPolicyHandler does. Only then is the old policy destroyed, and its
 * connections drain the calls still on them (lb/README.md), so a switch
 * costs no call and no gap in picks. The SPEC is silent here; this is what
 * a gRPC user expects. */
#include "channel/channel_int.h"

static const char *slot_name(const grit_lb_slot *s) {
  return s && s->p ? s->p->vt->name : "none";
}

/* Resolver results go to the pending policy if there is one. */
static grit_lb_slot *lb_latest(grit_channel *ch) {
  return ch->lb_pending ? ch->lb_pending : ch->lb;
}

static void slot_clear(grit_lb_slot *s) {
  if (!s || !s->p)
    return;
  grit_lb_policy *p = s->p;
  s->p = NULL;
  p->vt->destroy(p);
}

static void lb_take_over(grit_channel *ch) {
  grit_lb_slot *old = ch->lb;
  ch->lb = ch->lb_pending;
  ch->lb_pending = NULL;
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
             "channel %s: lb policy %s takes over from %s",
             ch->target.authority, slot_name(ch->lb), slot_name(old));
  slot_clear(old);
}

static void lb_update_state(void *ctx, grit_connectivity_state s) {
  grit_lb_slot *slot = ctx;
  grit_channel *ch = slot->ch;
  if (slot == ch->lb_pending) {
    /* grpc-core swaps on anything but CONNECTING; IDLE waits here too,
     * since our policies report it only before their first exit_idle. */
    if (s != GRIT_STATE_READY && s != GRIT_STATE_TRANSIENT_FAILURE)
      return;
    lb_take_over(ch);
  } else if (slot != ch->lb) {
    return;
  }
  grit_channel_set_state(ch, s);
}

static void lb_request_reresolution(void *ctx) {
  grit_lb_slot *slot = ctx;
  /* Only the latest policy's requests count: the result goes to it. */
  if (slot == lb_latest(slot->ch))
    grit_channel_request_reresolution(slot->ch);
}

static grit_err lb_create(grit_channel *ch, const grit_lb_policy_vtable *vt,
                          grit_lb_slot **out) {
  grit_lb_slot *slot = &ch->lb_slots[ch->lb == &ch->lb_slots[0] ? 1 : 0];
  grit_lb_helper h = {.update_state = lb_update_state,
                      .request_reresolution = lb_request_reresolution,
                      .ctx = slot};
  slot->ch = ch;
  grit_err rv = vt->create(&ch->sc_args, &h, &slot->p);
  *out = rv == GRIT_OK ? slot : NULL;
  return rv;
}

grit_err grit_channel_lb_select(grit_channel *ch,
                                const grit_lb_policy_vtable *vt,
                                grit_lb_policy **out) {
  *out = NULL;
  grit_lb_slot *latest = lb_latest(ch);
  if (latest && latest->p->vt == vt) {
    *out = latest->p;
    return GRIT_OK;
  }
  /* A newer config replaces a pending policy; one naming the current
   * policy again keeps it, connections and all. */
  slot_clear(ch->lb_pending);
  ch->lb_pending = NULL;
  if (ch->lb && ch->lb->p->vt == vt) {
    *out = ch->lb->p;
    return GRIT_OK;
  }
  grit_lb_slot *slot;
  grit_err rv = lb_create(ch, vt, &slot);
  if (rv != GRIT_OK)
    return rv;
  *out = slot->p;
  if (ch->lb && grit_channel_get_state(ch, false) == GRIT_STATE_READY) {
    ch->lb_pending = slot;
    GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO,
               "channel %s: lb policy %s pending, %s serves until it is ready",
               ch->target.authority, vt->name, slot_name(ch->lb));
    return GRIT_OK;
  }
  /* Nothing READY to keep serving with: switch at once. */
  grit_lb_slot *old = ch->lb;
  ch->lb = slot;
  GRIT_TRACE(GRIT_TRACE_LB, GRIT_LEVEL_INFO, "channel %s: lb policy %s",
             ch->target.authority, vt->name);
  slot_clear(old);
  return GRIT_OK;
}

void grit_channel_lb_exit_idle(grit_channel *ch) {
  if (ch->lb)
    ch->lb->p->vt->exit_idle(ch->lb->p);
  if (ch->lb_pending)
    ch->lb_pending->p->vt->exit_idle(ch->lb_pending->p);
}

void grit_channel_lb_destroy(grit_channel *ch) {
  slot_clear(ch->lb_pending);
  ch->lb_pending = NULL;
  slot_clear(ch->lb);
  ch->lb = NULL;
}
