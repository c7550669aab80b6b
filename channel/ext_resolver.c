/* A target scheme served by a layer above channel/ (issue 27): see
 * channel.h. The front runs on the channel's loop; its kicks are posted
 * there holding a channel reference. */
#include <string.h>

#include "channel/channel_int.h"

#define EXT_MAX 4

static pthread_mutex_t ext_mu = PTHREAD_MUTEX_INITIALIZER;
static const grit_ext_resolver_ops *ext_table[EXT_MAX];
static bool builtins_loaded; /* under ext_mu */

/* The library's own schemes (issue 27: "xds" on the installed libgrit)
 * enter the table on first use (ext_mu held). */
static void load_builtins(void) {
  if (builtins_loaded)
    return;
  builtins_loaded = true;
  for (size_t b = 0; grit_ext_builtin_resolvers[b]; b++) {
    for (size_t i = 0; i < EXT_MAX; i++) {
      if (ext_table[i] == grit_ext_builtin_resolvers[b] || !ext_table[i]) {
        ext_table[i] = grit_ext_builtin_resolvers[b];
        break;
      }
    }
  }
}

grit_err grit_channel_register_ext_resolver(const grit_ext_resolver_ops *ops) {
  grit_err rv = GRIT_ERR_NOMEM;
  pthread_mutex_lock(&ext_mu);
  load_builtins();
  for (size_t i = 0; i < EXT_MAX; i++) {
    if (ext_table[i] == ops || !ext_table[i]) {
      ext_table[i] = ops;
      rv = GRIT_OK;
      break;
    }
  }
  pthread_mutex_unlock(&ext_mu);
  return rv;
}

const grit_ext_resolver_ops *grit_channel_ext_find(const char *target) {
  const char *colon = strchr(target, ':');
  if (!colon)
    return NULL;
  size_t n = (size_t)(colon - target);
  const grit_ext_resolver_ops *found = NULL;
  pthread_mutex_lock(&ext_mu);
  load_builtins();
  for (size_t i = 0; i < EXT_MAX && ext_table[i]; i++)
    if (strlen(ext_table[i]->scheme) == n &&
        strncmp(ext_table[i]->scheme, target, n) == 0)
      found = ext_table[i];
  pthread_mutex_unlock(&ext_mu);
  return found;
}

const char *grit_channel_ext_name(const char *target) {
  const char *p = strchr(target, ':') + 1;
  if (p[0] == '/' && p[1] == '/') { /* "//authority/name" */
    const char *slash = strchr(p + 2, '/');
    return slash ? slash + 1 : p + 2;
  }
  return p;
}

void grit_channel_ext_wait_idle(uint64_t ms) {
  const grit_ext_resolver_ops *ops[EXT_MAX] = {0};
  pthread_mutex_lock(&ext_mu);
  memcpy(ops, ext_table, sizeof(ops));
  pthread_mutex_unlock(&ext_mu);
  for (size_t i = 0; i < EXT_MAX && ops[i]; i++)
    if (ops[i]->wait_idle)
      ops[i]->wait_idle(ms);
}

static void ext_on_kick(grit_task *t) {
  grit_channel *ch = GRIT_CONTAINER_OF(t, grit_channel, ext_task);
  if (ch->ext_started && !ch->shutting_down)
    ch->ext_ops->kick(ch->ext_state);
  grit_channel_unref(ch);
}

void grit_channel_ext_kick(grit_channel *ch) {
  grit_channel_ref(ch);
  if (!grit_rt_post(ch->rt, &ch->ext_task))
    grit_channel_unref(ch); /* already queued (coalesced), or stopped */
}

void grit_channel_ext_start(grit_channel *ch) {
  if (ch->ext_started) { /* after idle: deliver again */
    ch->ext_ops->kick(ch->ext_state);
    return;
  }
  ch->ext_task.fn = ext_on_kick; /* before the front can kick */
  grit_channel_set_state(ch, GRIT_STATE_CONNECTING);
  grit_err e = ch->ext_ops->start(ch, ch->cz_target ? ch->cz_target : "",
                                  &ch->ext_state);
  if (e != GRIT_OK) {
    snprintf(ch->resolve_error, sizeof(ch->resolve_error),
             "cannot start the %s resolver: %s", ch->ext_ops->scheme,
             grit_strerror(e));
    grit_channel_set_state(ch, GRIT_STATE_TRANSIENT_FAILURE);
    return;
  }
  ch->ext_started = true;
}

void grit_channel_ext_stop(grit_channel *ch) {
  if (!ch->ext_started)
    return;
  ch->ext_started = false;
  ch->ext_ops->stop(ch->ext_state);
  ch->ext_state = NULL;
}

void grit_channel_ext_result(grit_channel *ch, const grit_addr *addrs, size_t n,
                             const char *config_json, const char *error) {
  grit_resolver_result r = {
      .addrs = addrs,
      .naddrs = n,
      .addr_error = error,
      .txt = config_json ? GRIT_TXT_CONFIG : GRIT_TXT_NONE,
      .config_json = config_json,
      .config_len = config_json ? strlen(config_json) : 0,
  };
  grit_channel_on_resolved(ch, &r);
}

void grit_channel_ext_result_clusters(grit_channel *ch,
                                      const grit_lb_cm_child *kids, size_t n,
                                      const char *config_json) {
  grit_resolver_result r = {
      .txt = config_json ? GRIT_TXT_CONFIG : GRIT_TXT_NONE,
      .config_json = config_json,
      .config_len = config_json ? strlen(config_json) : 0,
  };
  grit_channel_on_resolved_clusters(ch, &r, kids, n);
}

uv_loop_t *grit_channel_ext_loop(grit_channel *ch) {
  return &ch->rt->loop;
}

const char *grit_channel_ext_config(const grit_channel *ch) {
  return ch->o.xds_bootstrap_config;
}

void grit_channel_ext_note(grit_channel *ch, const char *note) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (const char *p = note; *p; p++)
    h = (h ^ (uint8_t)*p) * 1099511628211ULL;
  ch->ext_note_hash = h;
}
