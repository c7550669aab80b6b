/* Channelz-style introspection as JSON (SPEC OP-03): per channel its
 * target, state, call counts, last call time and the service config in
 * force with its source; per subchannel its address, state, calls and
 * last failure. Channel-level fields are read from any thread; the
 * subchannels live on the channel's loop, so a task copies them there
 * while the reader waits.
 *
 * Which channels: those registered in observe.c's live list (created and
 * not yet destroyed by their user). The reader holds a reference and a
 * runtime count on each while it waits (see grit_obs_channels_hold). */
#include "channel/channel_int.h"

#include <jansson.h>
#include <string.h>
#include <time.h>

/* Unix ms of a monotonic microsecond time |mono_us| in the past. */
static uint64_t cz_unix_ms(uint64_t mono_us) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t real_us =
      (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
  uint64_t now_us = grit_clock_now_us();
  uint64_t ago = now_us > mono_us ? now_us - mono_us : 0;
  return real_us > ago ? (real_us - ago) / 1000u : 0;
}

/* RFC 3339 UTC with milliseconds, or JSON null for 0 (never). */
static json_t *cz_time(uint64_t unix_ms) {
  if (!unix_ms)
    return json_null();
  time_t s = (time_t)(unix_ms / 1000u);
  struct tm tm;
  char buf[40];
  if (!gmtime_r(&s, &tm))
    return json_null();
  size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, sizeof(buf) - n, ".%03uZ", (unsigned)(unix_ms % 1000u));
  return json_string(buf);
}

static json_t *cz_state(grit_connectivity_state s) {
  const char *n = grit_connectivity_state_name(s);
  return json_string(n ? n : "UNKNOWN");
}

/* ---- on a runtime's loop: the subchannels of its channels ---- */

/* One visit to a loop: the channels |chs| (all of that runtime) get their
 * subchannel arrays filled in |subs| (NULL entries: out of memory). */
typedef struct cz_req {
  grit_task task;
  grit_channel **chs;
  json_t **subs;
  size_t n;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
} cz_req;

static void cz_sub(const grit_subchannel *sc, void *ud) {
  json_t **subs = ud;
  if (!*subs)
    return;
  grit_transport_calls calls;
  grit_subchannel_calls(sc, &calls);
  const char *err = grit_subchannel_error(sc);
  const char *skip = grit_subchannel_skip_reason(sc);
  json_t *o = json_pack(
      "{s:s, s:o, s:I, s:I, s:I, s:o, s:o}", "address",
      grit_subchannel_addr(sc)->text, "state",
      cz_state(grit_subchannel_state(sc)), "calls_started",
      (json_int_t)calls.started, "calls_succeeded", (json_int_t)calls.succeeded,
      "calls_failed", (json_int_t)calls.failed, "last_failure",
      err && *err ? json_string(err) : json_null(), "not_picked_because",
      skip && *skip ? json_string(skip) : json_null());
  if (!o || json_array_append_new(*subs, o) != 0) {
    json_decref(*subs);
    *subs = NULL;
  }
}

static void cz_collect(cz_req *r) {
  for (size_t i = 0; i < r->n; i++) {
    grit_channel *ch = r->chs[i];
    r->subs[i] = json_array();
    if (r->subs[i] && !ch->shutting_down && ch->lb)
      grit_lb_shared_foreach(&ch->lb_shared, cz_sub, &r->subs[i]);
  }
}

static void cz_on_loop(grit_task *t) {
  cz_req *r = GRIT_CONTAINER_OF(t, cz_req, task);
  cz_collect(r);
  pthread_mutex_lock(&r->mu);
  r->done = true;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* Fill |subs| for |chs| (|n| channels of runtime |rt|), on its loop. */
static void cz_subchannels(grit_runtime *rt, grit_channel **chs, json_t **subs,
                           size_t n) {
  cz_req r = {.chs = chs, .subs = subs, .n = n};
  if (grit_rt_on_loop(rt)) {
    cz_collect(&r);
    return;
  }
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  r.task.fn = cz_on_loop;
  grit_rt_post(rt, &r.task);
  pthread_mutex_lock(&r.mu);
  while (!r.done)
    pthread_cond_wait(&r.cv, &r.mu);
  pthread_mutex_unlock(&r.mu);
  pthread_mutex_destroy(&r.mu);
  pthread_cond_destroy(&r.cv);
}

/* ---- any thread: one channel ---- */

static json_t *cz_config(grit_channel *ch) {
  grit_service_config_info info = GRIT_SERVICE_CONFIG_INFO_INIT;
  if (grit_channel_get_service_config(ch, &info) != GRIT_OK)
    return NULL;
  json_t *cfg = info.json ? json_loads(info.json, 0, NULL) : json_null();
  json_t *o = json_pack(
      "{s:s, s:o, s:o, s:o}", "source", grit_config_source_name(info.source),
      "config", cfg ? cfg : json_null(), "applied_at",
      cz_time(info.applied_at_ms), "last_rejection",
      info.last_rejection ? json_string(info.last_rejection) : json_null());
  grit_service_config_info_free(&info);
  return o;
}

/* |ch| as a JSON object; |subs| (taken) its subchannels or NULL. */
static json_t *cz_channel(grit_channel *ch, json_t *subs) {
  grit_channel_stats st = GRIT_CHANNEL_STATS_INIT; /* docs/abi.md */
  if (grit_channel_get_stats(ch, &st) != GRIT_OK)
    memset(&st, 0, sizeof(st));
  uint64_t last = __atomic_load_n(&ch->cz_last_call_us, __ATOMIC_RELAXED);
  json_t *cfg = cz_config(ch);
  json_t *o = json_pack(
      "{s:I, s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "id",
      (json_int_t)ch->cz_id, "target", ch->cz_target ? ch->cz_target : "",
      "metrics_target", ch->obs ? grit_obs_target_name(ch->obs) : "", "state",
      cz_state(grit_channel_get_state(ch, false)), "calls_started",
      (json_int_t)st.calls_started, "calls_succeeded",
      (json_int_t)st.calls_succeeded, "calls_failed",
      (json_int_t)st.calls_failed, "attempts", (json_int_t)st.attempts,
      "retries", (json_int_t)st.retries, "transparent_retries",
      (json_int_t)st.transparent_retries, "last_call_started",
      last ? cz_time(cz_unix_ms(last)) : json_null(), "service_config",
      cfg ? cfg : json_null(), "subchannels", subs ? subs : json_null());
  return o;
}

/* ---- the API ---- */

static grit_err cz_dump(json_t *root, grit_bytes *out) {
  if (!root)
    return GRIT_ERR_NOMEM;
  size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER;
  size_t n = json_dumpb(root, NULL, 0, flags);
  out->data = n ? grit_malloc(n + 1) : NULL;
  if (out->data) {
    json_dumpb(root, (char *)out->data, n, flags);
    out->data[n] = 0;
    out->len = n;
  }
  json_decref(root);
  return out->data ? GRIT_OK : GRIT_ERR_NOMEM;
}

grit_err grit_channelz_json(grit_channel *ch, grit_bytes *out) {
  if (!out)
    return GRIT_ERR_INVALID_ARG;
  out->data = NULL;
  out->len = 0;
  if (ch) {
    if (grit_rt_on_loop(ch->rt) && ch->shutting_down)
      return GRIT_ERR_SHUTDOWN;
    json_t *subs = NULL;
    cz_subchannels(ch->rt, &ch, &subs, 1);
    return cz_dump(cz_channel(ch, subs), out);
  }
  grit_channel **held = NULL;
  size_t n = 0;
  grit_err rv = grit_obs_channels_hold(&held, &n);
  if (rv != GRIT_OK)
    return rv;
  json_t **subs = n ? grit_calloc(n, sizeof(*subs)) : NULL;
  grit_channel **group = n ? grit_calloc(n, sizeof(*group)) : NULL;
  json_t **gsubs = n ? grit_calloc(n, sizeof(*gsubs)) : NULL;
  bool *seen = n ? grit_calloc(n, sizeof(*seen)) : NULL;
  json_t *arr = n && (!subs || !group || !gsubs || !seen) ? NULL : json_array();
  /* One visit per runtime: its channels' subchannels in one task. */
  for (size_t i = 0; i < n && arr; i++) {
    if (seen[i])
      continue;
    size_t k = 0;
    for (size_t j = i; j < n; j++) {
      if (!seen[j] && held[j]->rt == held[i]->rt) {
        seen[j] = true;
        group[k++] = held[j];
      }
    }
    cz_subchannels(held[i]->rt, group, gsubs, k);
    for (size_t j = i, g = 0; j < n && g < k; j++)
      if (held[j] == group[g])
        subs[j] = gsubs[g++];
  }
  for (size_t i = 0; i < n && arr; i++) {
    json_t *o = cz_channel(held[i], subs[i]);
    subs[i] = NULL;
    if (!o || json_array_append_new(arr, o) != 0) {
      json_decref(arr);
      arr = NULL;
    }
  }
  for (size_t i = 0; i < n && subs; i++)
    json_decref(subs[i]); /* left over after a failure */
  grit_free(subs);
  grit_free(group);
  grit_free(gsubs);
  grit_free(seen);
  grit_obs_channels_release(held, n);
  return cz_dump(arr ? json_pack("{s:o}", "channels", arr) : NULL, out);
}
