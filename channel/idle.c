/* Client idle timeout (GRIT_ARG_IDLE_TIMEOUT_MS, default 30 min): the
 * channel goes idle once no call has been live for that long. When it does,
 * it drops its LB policy (closing every connection) and its resolver and
 * goes IDLE; the next pick, or grit_channel_get_state(ch, true), starts
 * over as on first use. 0 turns the timeout off.
 *
 * The timer is lazy: the end of the last live call notes the loop time and
 * starts the timer only if it is not already running; a call start leaves
 * it alone. When it fires it checks: calls live, nothing (the next last
 * end starts it again); idle for less than the timeout, it runs again for
 * the rest; else the channel goes idle. One call at a time otherwise paid a
 * timer start and stop per call (issue 24: about 100 instructions). The
 * timer is heap-allocated on first arming so its memory can outlive the
 * channel until libuv's close callback. */
#include "channel/channel_int.h"

static void idle_fire(uv_timer_t *t) {
  grit_channel *ch = t->data;
  if (ch->shutting_down || !grit_list_empty(&ch->live_calls) || !ch->lb)
    return;
  uint64_t timeout = (uint64_t)ch->o.idle_timeout_ms;
  uint64_t idle = uv_now(&ch->rt->loop) - ch->idle_since;
  if (idle < timeout) {
    uv_timer_start(t, idle_fire, timeout - idle, 0);
    return;
  }
  GRIT_TRACE(GRIT_TRACE_CHANNEL, GRIT_LEVEL_INFO,
             "channel %s: idle for %lld ms, closing connections",
             ch->target.authority, (long long)ch->o.idle_timeout_ms);
  grit_channel_enter_idle(ch);
}

void grit_channel_idle_arm(grit_channel *ch) {
  if (ch->shutting_down || ch->o.idle_timeout_ms <= 0 ||
      !grit_list_empty(&ch->live_calls))
    return;
  if (!ch->idle_timer) {
    ch->idle_timer = grit_calloc(1, sizeof(*ch->idle_timer));
    if (!ch->idle_timer)
      return; /* out of memory: stay connected */
    uv_timer_init(&ch->rt->loop, ch->idle_timer);
    ch->idle_timer->data = ch;
  }
  ch->idle_since = uv_now(&ch->rt->loop);
  if (!uv_is_active((uv_handle_t *)ch->idle_timer))
    uv_timer_start(ch->idle_timer, idle_fire, (uint64_t)ch->o.idle_timeout_ms,
                   0);
}

static void idle_timer_closed(uv_handle_t *h) {
  grit_free(h);
}

void grit_channel_idle_close(grit_channel *ch) {
  if (!ch->idle_timer)
    return;
  uv_close((uv_handle_t *)ch->idle_timer, idle_timer_closed);
  ch->idle_timer = NULL;
}
