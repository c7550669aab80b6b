/* The service config as an operator sees it (SPEC DNS-10): which config is
 * in force, where it came from, when it was applied and the last
 * rejection, readable from any thread; a line at the default verbosity
 * when it changes, is dropped or is rejected (once per change, never per
 * lookup); the channel's config counters; the config-change callback,
 * run from a posted task so it never runs inside a c-ares callback. */
#include "channel/channel_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* FNV-1a 64: a short fingerprint for logs; not a security property. */
static uint64_t cfg_hash(const char *s, size_t len) {
  uint64_t h = UINT64_C(14695981039346656037);
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)s[i];
    h *= UINT64_C(1099511628211);
  }
  return h;
}

/* Wall-clock ms, for people reading "applied at"; never for durations. */
static uint64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

const char *grit_config_source_name(grit_config_source s) {
  switch (s) {
  case GRIT_CONFIG_SOURCE_NONE:
    return "none";
  case GRIT_CONFIG_SOURCE_DEFAULT:
    return "default";
  case GRIT_CONFIG_SOURCE_DNS:
    return "dns";
  case GRIT_CONFIG_SOURCE_XDS:
    return "xds";
  }
  return "?";
}

static void cfg_notify_on_loop(grit_task *t) {
  grit_channel *ch = GRIT_CONTAINER_OF(t, grit_channel, config_task);
  if (!ch->shutting_down && ch->o.config_cb) {
    grit_service_config_info info = GRIT_SERVICE_CONFIG_INFO_INIT;
    if (grit_channel_get_service_config(ch, &info) == GRIT_OK) {
      ch->o.config_cb(ch, &info, ch->o.config_cb_data);
      grit_service_config_info_free(&info);
    }
  }
  grit_channel_unref(ch);
}

static void cfg_notify(grit_channel *ch) {
  if (!ch->o.config_cb)
    return;
  grit_channel_ref(ch);
  if (!grit_rt_post(ch->rt, &ch->config_task))
    grit_channel_unref(ch); /* already queued: it reports the latest */
}

void grit_channel_config_init(grit_channel *ch) {
  ch->config_task.fn = cfg_notify_on_loop;
  ch->cfg_info.source = GRIT_CONFIG_SOURCE_NONE;
  if (ch->o.service_config) {
    ch->cfg_info.source = GRIT_CONFIG_SOURCE_DEFAULT;
    ch->cfg_info.json = ch->o.service_config; /* borrowed from ch->o */
    ch->cfg_info.hash =
        cfg_hash(ch->o.service_config, strlen(ch->o.service_config));
    ch->cfg_info.applied_at_ms = wall_ms();
  }
}

void grit_channel_config_free(grit_channel *ch) {
  if (ch->cfg_info.json != ch->o.service_config)
    grit_free(ch->cfg_info.json);
  ch->cfg_info.json = NULL;
  grit_free(ch->cfg_info.last_rejection);
  ch->cfg_info.last_rejection = NULL;
}

/* The retry and hedging policies of |old_json| (the DNS config being
 * dropped) that ch->config, the config now in force, does not give the
 * same names; NULL when none, or on out of memory (the line then says
 * none: only the report is lost). */
static char *cfg_lost_policies(grit_channel *ch, const char *old_json) {
  if (!old_json)
    return NULL;
  grit_svccfg *was =
      grit_svccfg_parse(old_json, strlen(old_json), &ch->cfg_opts, NULL);
  char *lost = NULL;
  if (was && grit_svccfg_lost_policies(was, ch->config, &lost) != GRIT_OK)
    lost = NULL;
  grit_svccfg_unref(was);
  return lost;
}

void grit_channel_config_applied(grit_channel *ch, grit_config_source src,
                                 const char *json, size_t len) {
  if (src == GRIT_CONFIG_SOURCE_DEFAULT) {
    json = ch->o.service_config;
    len = json ? strlen(json) : 0;
  }
  if (!json)
    src = GRIT_CONFIG_SOURCE_NONE;
  uint64_t h = json ? cfg_hash(json, len) : 0;
  if (src == GRIT_CONFIG_SOURCE_XDS)
    h ^= ch->ext_note_hash; /* one event per applied xDS update */
  grit_service_config_info *cur = &ch->cfg_info;
  if (cur->source == src && cur->hash == h)
    return; /* the same config again: nothing to say (DNS-10) */
  char *copy = NULL;
  if (src == GRIT_CONFIG_SOURCE_DNS || src == GRIT_CONFIG_SOURCE_XDS) {
    copy = grit_malloc(len + 1);
    if (!copy)
      return; /* only the report is lost; the config itself is applied */
    memcpy(copy, json, len);
    copy[len] = '\0';
  }
  grit_config_source old = cur->source;
  char *lost = NULL; /* issue 28: what the dropped DNS config took along */
  if (old == GRIT_CONFIG_SOURCE_DNS && src != GRIT_CONFIG_SOURCE_DNS)
    lost = cfg_lost_policies(ch, cur->json);
  pthread_mutex_lock(&ch->cfg_mu);
  if (cur->json != ch->o.service_config)
    grit_free(cur->json);
  cur->json = copy ? copy : (char *)json;
  cur->source = src;
  cur->hash = h;
  cur->applied_at_ms = wall_ms();
  pthread_mutex_unlock(&ch->cfg_mu);
  __atomic_add_fetch(&ch->stats.config_updates, 1, __ATOMIC_RELAXED);
  grit_obs_target_add(ch->obs, GRIT_OBS_CONFIG_UPDATES, 1);
  if (old == GRIT_CONFIG_SOURCE_DNS && src != GRIT_CONFIG_SOURCE_DNS) {
    GRIT_TRACE(GRIT_TRACE_CONFIG, GRIT_LEVEL_NOTICE,
               "channel %s: service config from DNS dropped (no "
               "_grpc_config record or no matching choice); now using %s; "
               "%s%.600s",
               ch->target.authority,
               src == GRIT_CONFIG_SOURCE_DEFAULT ? "the default config"
                                                 : "no config",
               lost ? "policies lost: " : "no retry or hedging policy lost",
               lost ? lost : "");
    grit_free(lost);
  } else
    GRIT_TRACE(GRIT_TRACE_CONFIG, GRIT_LEVEL_NOTICE,
               "channel %s: service config changed (source %s, hash "
               "%016llx): %.600s",
               ch->target.authority, grit_config_source_name(src),
               (unsigned long long)h, json ? json : "{}");
  cfg_notify(ch);
}

void grit_channel_config_rejected(grit_channel *ch, const char *path,
                                  const char *reason, bool kept) {
  char buf[700];
  snprintf(buf, sizeof(buf), "%s%s%s", path, path[0] ? ": " : "", reason);
  __atomic_add_fetch(&ch->stats.config_rejections, 1, __ATOMIC_RELAXED);
  grit_obs_target_add(ch->obs, GRIT_OBS_CONFIG_REJECTIONS, 1);
  uint64_t h = cfg_hash(buf, strlen(buf));
  bool same = ch->cfg_rejection_hash == h;
  char *copy = grit_strdup(buf);
  pthread_mutex_lock(&ch->cfg_mu);
  if (copy) {
    grit_free(ch->cfg_info.last_rejection);
    ch->cfg_info.last_rejection = copy;
  }
  ch->cfg_info.rejected_at_ms = wall_ms();
  pthread_mutex_unlock(&ch->cfg_mu);
  if (same)
    return; /* once per change, not per lookup (DNS-10) */
  ch->cfg_rejection_hash = h;
  GRIT_TRACE(GRIT_TRACE_CONFIG, GRIT_LEVEL_NOTICE,
             "channel %s: rejected service config from DNS: %s; %s",
             ch->target.authority, buf,
             kept ? "keeping the config in force"
                  : "no valid config yet: calls fail UNAVAILABLE");
  cfg_notify(ch);
}

void grit_channel_config_txt_timeout(grit_channel *ch, bool timed_out) {
  if (timed_out) {
    __atomic_add_fetch(&ch->stats.dns_txt_timeouts, 1, __ATOMIC_RELAXED);
    grit_obs_target_add(ch->obs, GRIT_OBS_DNS_TXT_TIMEOUTS, 1);
    if (!ch->txt_timing_out)
      GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_NOTICE,
                 "channel %s: no TXT answer for _grpc_config.%s within %lld "
                 "ms; addresses used, config kept (source %s); asked again "
                 "on the next resolution",
                 ch->target.authority, ch->target.host,
                 (long long)ch->o.dns_txt_timeout_ms,
                 grit_config_source_name(ch->cfg_info.source));
  } else if (ch->txt_timing_out) {
    GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_NOTICE,
               "channel %s: TXT answers for _grpc_config.%s arrive again",
               ch->target.authority, ch->target.host);
  }
  ch->txt_timing_out = timed_out;
}

/* Whether the caller's struct of |size| bytes holds the field that ends at
 * |end| (docs/abi.md). */
static bool cfg_holds(size_t size, size_t end) {
  return size >= end;
}

#define CFG_END(f)                                                             \
  (offsetof(grit_service_config_info, f) +                                     \
   sizeof(((grit_service_config_info *)0)->f))

grit_err grit_channel_get_service_config(grit_channel *ch,
                                         grit_service_config_info *out) {
  if (!ch || !out || grit_sized_size(out) < sizeof(size_t))
    return GRIT_ERR_INVALID_ARG;
  if (grit_rt_forked(ch->rt))
    return GRIT_ERR_SHUTDOWN; /* AP-06: cfg_mu may be the parent's, held */
  size_t size = grit_sized_size(out);
  grit_service_config_info all;
  grit_err rv = GRIT_OK;
  pthread_mutex_lock(&ch->cfg_mu);
  all = ch->cfg_info;
  all.size = sizeof(all);
  all.json = NULL;
  all.last_rejection = NULL;
  /* Strings go only into fields the caller has: nothing is left unowned. */
  if (ch->cfg_info.json && cfg_holds(size, CFG_END(json)) &&
      !(all.json = grit_strdup(ch->cfg_info.json)))
    rv = GRIT_ERR_NOMEM;
  if (ch->cfg_info.last_rejection && cfg_holds(size, CFG_END(last_rejection)) &&
      !(all.last_rejection = grit_strdup(ch->cfg_info.last_rejection)))
    rv = GRIT_ERR_NOMEM;
  pthread_mutex_unlock(&ch->cfg_mu);
  grit_sized_fill(out, &all, sizeof(all));
  if (rv != GRIT_OK)
    grit_service_config_info_free(out);
  return rv;
}

void grit_service_config_info_free(grit_service_config_info *info) {
  if (!info)
    return;
  size_t size = grit_sized_size(info);
  if (cfg_holds(size, CFG_END(json)))
    grit_free(info->json);
  if (cfg_holds(size, CFG_END(last_rejection)))
    grit_free(info->last_rejection);
  if (size > sizeof(size_t))
    memset((char *)info + sizeof(size_t), 0,
           (size < sizeof(*info) ? size : sizeof(*info)) - sizeof(size_t));
}
