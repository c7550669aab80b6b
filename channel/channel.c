/* The channel on the loop: resolver results, config choice and swap
 * (SPEC SC-03), the LB policy and its state, queued calls, watchers and
 * teardown. Public entry points hand their work to the loop. */
#include "channel/channel_int.h"

#include <stdio.h>
#include <string.h>

void grit_channel_ref(grit_channel *ch) {
  __atomic_add_fetch(&ch->refs, 1, __ATOMIC_RELAXED);
}

static void ch_free(grit_channel *ch) {
  grit_channel_config_free(ch);
  pthread_mutex_destroy(&ch->cfg_mu);
  grit_obs_channel_unregister(ch);
  grit_throttle_table_put(ch->throttle);
  grit_svccfg_unref(ch->default_config);
  grit_svccfg_unref(ch->last_find.config);
  grit_tls_ctx_unref(ch->tls);
  grit_target_free(&ch->target);
  grit_chan_opts_free(&ch->o);
  grit_free(ch->user_agent);
  grit_free(ch->tls_server_name);
  grit_free(ch->health_service);
  grit_free(ch->cz_target);
  grit_otlp_put(ch->otlp);
  grit_free(ch->spare_tr);
  if (ch->spare_call) { /* call.c keeps its mutex and cv set up */
    pthread_mutex_destroy(&ch->spare_call->mu);
    pthread_cond_destroy(&ch->spare_call->cv);
    grit_free(ch->spare_call);
  }
  pthread_mutex_destroy(&ch->mu);
  pthread_cond_destroy(&ch->cv);
  grit_runtime *rt = ch->rt;
  grit_free(ch);
  grit_rt_unref(rt); /* last: a stopped runtime may go with its channel */
}

void grit_channel_unref(grit_channel *ch) {
  if (__atomic_sub_fetch(&ch->refs, 1, __ATOMIC_ACQ_REL) == 0)
    ch_free(ch);
}

static grit_connectivity_state ch_state(const grit_channel *ch) {
  return (grit_connectivity_state)__atomic_load_n(&ch->state, __ATOMIC_ACQUIRE);
}

/* ---- watchers ---- */

static void watcher_closed(uv_handle_t *h) {
  grit_watcher *w = h->data;
  grit_channel_unref(w->ch);
  grit_free(w);
}

static void watcher_fire(grit_watcher *w, bool timed_out) {
  grit_list_remove(&w->link);
  uv_timer_stop(&w->timer);
  w->cb(w->ch, ch_state(w->ch), timed_out, w->user_data);
  uv_close((uv_handle_t *)&w->timer, watcher_closed);
}

static void watcher_timeout(uv_timer_t *t) {
  watcher_fire(t->data, true);
}

static void watcher_on_loop(grit_task *t) {
  grit_watcher *w = GRIT_CONTAINER_OF(t, grit_watcher, task);
  grit_channel *ch = w->ch;
  uv_timer_init(&ch->rt->loop, &w->timer);
  w->timer.data = w;
  grit_list_insert_tail(&ch->watchers, &w->link);
  if (ch_state(ch) != w->last_seen || ch->shutting_down) {
    watcher_fire(w, false);
    return;
  }
  if (w->timeout_ms)
    uv_timer_start(&w->timer, watcher_timeout, w->timeout_ms, 0);
}

static void ch_notify_watchers(grit_channel *ch) {
  grit_list *e = ch->watchers.next;
  while (e != &ch->watchers) {
    grit_watcher *w = GRIT_CONTAINER_OF(e, grit_watcher, link);
    e = e->next;
    if (w->last_seen != ch_state(ch))
      watcher_fire(w, false);
  }
}

grit_err grit_channel_watch_state(grit_channel *ch,
                                  grit_connectivity_state last_seen,
                                  uint64_t timeout_ms, grit_state_cb cb,
                                  void *user_data) {
  if (!ch || !cb)
    return GRIT_ERR_INVALID_ARG;
  if (ch_state(ch) == GRIT_STATE_SHUTDOWN || grit_rt_forked(ch->rt))
    return GRIT_ERR_SHUTDOWN;
  grit_watcher *w = grit_calloc(1, sizeof(*w));
  if (!w)
    return GRIT_ERR_NOMEM;
  grit_channel_ref(ch);
  w->ch = ch;
  w->last_seen = last_seen;
  w->timeout_ms = timeout_ms;
  w->cb = cb;
  w->user_data = user_data;
  grit_list_init(&w->link);
  w->task.fn = watcher_on_loop;
  grit_rt_post(ch->rt, &w->task);
  return GRIT_OK;
}

typedef struct state_waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool fired;
  grit_connectivity_state state;
} state_waiter;

static void state_waiter_cb(grit_channel *ch, grit_connectivity_state s,
                            bool timed_out, void *ud) {
  state_waiter *sw = ud;
  pthread_mutex_lock(&sw->mu);
  sw->fired = true;
  sw->state = s;
  pthread_cond_signal(&sw->cv);
  pthread_mutex_unlock(&sw->mu);
}

grit_connectivity_state grit_channel_wait_for_state_change(
    grit_channel *ch, grit_connectivity_state last_seen, uint64_t timeout_ms) {
  if (!ch || grit_rt_on_loop(ch->rt))
    return last_seen;
  state_waiter sw = {.fired = false, .state = last_seen};
  pthread_mutex_init(&sw.mu, NULL);
  pthread_cond_init(&sw.cv, NULL);
  grit_connectivity_state s = last_seen;
  if (grit_channel_watch_state(ch, last_seen, timeout_ms, state_waiter_cb,
                               &sw) == GRIT_OK) {
    pthread_mutex_lock(&sw.mu);
    while (!sw.fired)
      pthread_cond_wait(&sw.cv, &sw.mu);
    s = sw.state;
    pthread_mutex_unlock(&sw.mu);
  }
  pthread_mutex_destroy(&sw.mu);
  pthread_cond_destroy(&sw.cv);
  return s;
}

/* ---- config and LB ---- */

static const grit_lb_policy_vtable *ch_lb_choice(const grit_svccfg *cfg) {
  return grit_channel_lb_choice(cfg); /* lb_config.c */
}

static bool ch_shuffle(const grit_channel *ch) {
  const grit_svccfg_global *g =
      ch->config ? grit_svccfg_get_global(ch->config) : NULL;
  return g && g->shuffle_address_list;
}

static void ch_set_config(grit_channel *ch, grit_svccfg *cfg) {
  grit_svccfg_unref(ch->config);
  ch->config = cfg;
  grit_free(ch->config_error);
  ch->config_error = NULL;
}

static void ch_use_default(grit_channel *ch) {
  ch_set_config(ch, grit_svccfg_ref(ch->default_config));
  grit_channel_config_applied(ch, GRIT_CONFIG_SOURCE_DEFAULT, NULL, 0);
}

/* SPEC SC-03: choose the config after a resolver result. */
static void ch_apply_resolver_config(grit_channel *ch,
                                     const grit_resolver_result *r) {
  if (ch->o.ignore_resolver_config || r->txt == GRIT_TXT_NONE) {
    ch_use_default(ch);
    return;
  }
  if (r->txt == GRIT_TXT_KEEP) { /* DNS-04: a TXT timeout keeps the config */
    if (!ch->have_resolver_result)
      ch_use_default(ch);
    return;
  }
  grit_error_detail d = {0};
  grit_svccfg *cfg = NULL;
  if (r->txt == GRIT_TXT_CONFIG)
    cfg = grit_svccfg_parse(r->config_json, r->config_len, &ch->cfg_opts, &d);
  else
    grit_error_set(&d, GRIT_ERR_INVALID_CONFIG, "", "%s", r->txt_error);
  if (cfg) {
    ch_set_config(ch, cfg);
    grit_channel_config_applied(
        ch, ch->ext_ops ? GRIT_CONFIG_SOURCE_XDS : GRIT_CONFIG_SOURCE_DNS,
        r->config_json, r->config_len);
    return;
  }
  bool keep = ch->config || ch->have_resolver_result || ch->default_config;
  grit_channel_config_rejected(ch, d.path, d.reason, keep);
  if (ch->config || ch->have_resolver_result)
    return;                 /* keep the last good one */
  if (ch->default_config) { /* gRFC A21: no good one yet, use the default */
    ch_use_default(ch);
    return;
  }
  char buf[600];
  snprintf(buf, sizeof(buf), "invalid service config: %s%s%s", d.path,
           d.path[0] ? ": " : "", d.reason);
  grit_free(ch->config_error);
  ch->config_error = grit_strdup(buf);
}

/* |kids|: an ext front's clusters (issue 27), or NULL: |r|'s addresses. */
static void ch_on_resolved_lb(grit_channel *ch, const grit_resolver_result *r,
                              const grit_lb_cm_child *kids, size_t nkids) {
  if (ch->shutting_down)
    return;
  if (ch->resolver) {
    __atomic_add_fetch(&ch->stats.dns_lookups, 1, __ATOMIC_RELAXED);
    grit_obs_target_add(ch->obs, GRIT_OBS_DNS_LOOKUPS, 1);
    if (r->addr_error) {
      __atomic_add_fetch(&ch->stats.dns_lookup_failures, 1, __ATOMIC_RELAXED);
      grit_obs_target_add(ch->obs, GRIT_OBS_DNS_LOOKUP_FAILURES, 1);
    }
    if (ch->o.dns_enable_txt && !ch->target.host_is_literal)
      grit_channel_config_txt_timeout(ch, r->txt_timed_out);
  }
  /* A failed lookup says nothing about the config: keep it (as grpc-core). */
  if (!r->addr_error || !ch->have_resolver_result)
    ch_apply_resolver_config(ch, r);
  ch->have_resolver_result = true;
  if (r->addr_error) {
    snprintf(ch->resolve_error, sizeof(ch->resolve_error), "%s", r->addr_error);
    /* DNS-08: the policy keeps its last addresses, and the channel's state
     * and picks stay its own; only with no policy yet is this an error. */
    if (!ch->lb)
      grit_channel_set_state(ch, GRIT_STATE_TRANSIENT_FAILURE);
    else
      grit_channel_retry_queued(ch);
    return;
  }
  ch->resolve_error[0] = '\0';
  grit_lb_policy *p = NULL;
  const grit_lb_policy_vtable *vt =
      kids ? &grit_lb_cluster_manager : ch_lb_choice(ch->config);
  if (grit_channel_lb_select(ch, vt, &p) != GRIT_OK ||
      grit_channel_lb_configure(ch, p) != GRIT_OK ||
      (kids ? grit_lb_cm_update(p, kids, nkids)
            : p->vt->update_addresses(p, r->addrs, r->naddrs,
                                      ch_shuffle(ch))) != GRIT_OK) {
    snprintf(ch->resolve_error, sizeof(ch->resolve_error),
             "out of memory applying resolver result");
    grit_channel_set_state(ch, GRIT_STATE_TRANSIENT_FAILURE);
    /* Nothing else would re-deliver it: ask the resolver again after a
     * backoff; a static address list is applied again on the next pick. */
    if (ch->resolver)
      grit_resolver_result_rejected(ch->resolver);
    else
      ch->have_resolver_result = false;
    return;
  }
  if (ch->config_error) {
    grit_channel_set_state(ch, GRIT_STATE_TRANSIENT_FAILURE);
    grit_resolver_result_rejected(ch->resolver); /* until a valid one */
  } else {
    p->vt->exit_idle(p);
  }
  grit_channel_retry_queued(ch);
}

static void ch_on_resolved(void *ctx, const grit_resolver_result *r) {
  ch_on_resolved_lb(ctx, r, NULL, 0);
}

void grit_channel_on_resolved(grit_channel *ch, const grit_resolver_result *r) {
  ch_on_resolved(ch, r);
}

void grit_channel_on_resolved_clusters(grit_channel *ch,
                                       const grit_resolver_result *r,
                                       const grit_lb_cm_child *kids, size_t n) {
  static const grit_lb_cm_child none;
  ch_on_resolved_lb(ch, r, kids ? kids : &none, n);
}

/* ext_resolver.c's front (channel.h): A27, a deleted Listener or Cluster
 * is not a failed lookup (DNS-08 keeps the last addresses for those):
 * nothing is served any more. */
void grit_channel_ext_fail(grit_channel *ch, const char *error) {
  grit_channel_lb_destroy(ch);
  ch->have_resolver_result = true;
  snprintf(ch->resolve_error, sizeof(ch->resolve_error), "%s", error);
  grit_channel_set_state(ch, GRIT_STATE_TRANSIENT_FAILURE);
}

void grit_channel_set_state(grit_channel *ch, grit_connectivity_state s) {
  if (ch->config_error && s != GRIT_STATE_SHUTDOWN)
    s = GRIT_STATE_TRANSIENT_FAILURE;
  if (ch_state(ch) == s) {
    /* Same state, new picks: round_robin reports every subchannel change,
     * and a queued attempt may now find a READY one. */
    grit_channel_retry_queued(ch);
    return;
  }
  GRIT_TRACE(GRIT_TRACE_CHANNEL, GRIT_LEVEL_INFO, "channel %s: %s -> %s",
             ch->target.authority, grit_connectivity_state_name(ch_state(ch)),
             grit_connectivity_state_name(s));
  __atomic_store_n(&ch->state, (uint32_t)s, __ATOMIC_RELEASE);
  ch_notify_watchers(ch);
  grit_channel_retry_queued(ch);
}

void grit_channel_request_reresolution(grit_channel *ch) {
  if (ch->resolver)
    grit_resolver_request(ch->resolver);
}

/* First use: build the resolver (or the static address list). */
static void ch_start(grit_channel *ch) {
  if (ch->have_resolver_result || ch->resolver || ch->shutting_down)
    return;
  if (ch->ext_ops) { /* a scheme served from above (ext_resolver.c) */
    grit_channel_ext_start(ch);
    return;
  }
  if (ch->target.kind == GRIT_TARGET_DNS && ch->target.naddrs == 0) {
    grit_channel_set_state(ch, GRIT_STATE_CONNECTING);
    grit_resolver_opts ro = {
        .dns_server = ch->o.dns_server,
        .dns_enable_txt = ch->o.dns_enable_txt,
        .dns_min_reresolve_ms = ch->o.dns_min_reresolve_ms,
        .dns_txt_timeout_ms = ch->o.dns_txt_timeout_ms,
        .max_config_age_ms = ch->o.max_config_age_ms,
        .dns_lookup_timeout_ms = ch->o.dns_lookup_timeout_ms,
        .dns_use_ttl = ch->o.dns_use_ttl,
    };
    if (grit_resolver_create(&ch->rt->loop, &ch->target, &ro, &ch->txt_draw,
                             ch_on_resolved, ch, &ch->resolver) != GRIT_OK) {
      snprintf(ch->resolve_error, sizeof(ch->resolve_error),
               "cannot start the DNS resolver");
      grit_channel_set_state(ch, GRIT_STATE_TRANSIENT_FAILURE);
      return;
    }
    grit_resolver_request(ch->resolver);
    return;
  }
  grit_resolver_result r = {.addrs = ch->target.addrs,
                            .naddrs = ch->target.naddrs,
                            .txt = GRIT_TXT_NONE};
  ch_on_resolved(ch, &r);
}

grit_pick_result grit_channel_pick(grit_channel *ch, const grit_pick_args *pa) {
  grit_pick_result r = {.kind = GRIT_PICK_QUEUE};
  ch_start(ch);
  if (ch->config_error) {
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    r.message = ch->config_error;
    return r;
  }
  /* DNS-08: only a channel with no addresses at all fails on the resolver's
   * error; otherwise the policy picks (an IDLE one wakes up). */
  if (ch->resolve_error[0] && !ch->lb) {
    r.kind = GRIT_PICK_FAIL;
    r.code = GRIT_STATUS_UNAVAILABLE;
    r.message = ch->resolve_error;
    return r;
  }
  if (!ch->lb)
    return r;
  return ch->lb->p->vt->pick(ch->lb->p, pa);
}

grit_svccfg *grit_channel_config_ref(grit_channel *ch) {
  if (ch->config)
    return grit_svccfg_ref(ch->config);
  if (!ch->have_resolver_result)
    return grit_svccfg_ref(ch->default_config);
  return NULL;
}

bool grit_channel_config_pending(grit_channel *ch) {
  ch_start(ch);
  if (ch->ext_ops) /* issue 27: a route is chosen from the front's result */
    return !ch->have_resolver_result && ch->ext_started;
  return !ch->have_resolver_result && ch->resolver &&
         !ch->o.ignore_resolver_config;
}

void grit_channel_retry_queued(grit_channel *ch) {
  grit_list q;
  grit_list *e;
  /* Calls waiting for the first config, once it has come (or failed). */
  if (ch->have_resolver_result ||
      (!ch->resolver && !(ch->ext_ops && ch->ext_started))) {
    grit_list_init(&q);
    while ((e = grit_list_pop_head(&ch->config_waiters)) != NULL)
      grit_list_insert_tail(&q, e);
    while ((e = grit_list_pop_head(&q)) != NULL) {
      grit_call *c = GRIT_CONTAINER_OF(e, grit_call, link);
      c->hooks->config_ready(c);
    }
  }
  /* Take the queue first: an attempt may queue itself again. */
  grit_list_init(&q);
  while ((e = grit_list_pop_head(&ch->queued_attempts)) != NULL)
    grit_list_insert_tail(&q, e);
  while ((e = grit_list_pop_head(&q)) != NULL) {
    call_attempt *a = GRIT_CONTAINER_OF(e, call_attempt, qlink);
    a->c->hooks->pick_ready(a);
  }
}

grit_throttle_handle *grit_channel_throttle(grit_channel *ch,
                                            const grit_svccfg_global *g) {
  /* One bucket per server name; the handle's identity never changes, so
   * calls may hold it while a new config rescales it (TH-01). */
  grit_throttle_handle *h = grit_throttle_table_get(
      ch->target.authority, g->max_tokens_milli, g->token_ratio_milli);
  if (!ch->throttle)
    ch->throttle = h;
  else
    grit_throttle_table_put(h);
  return ch->throttle;
}

grit_err grit_channel_get_stats(grit_channel *ch, grit_channel_stats *caller) {
  /* Filled whole here, then copied as far as the caller's size reaches
   * (docs/abi.md): a program built with fewer counters gets those. */
  if (!ch || !caller || grit_sized_size(caller) < sizeof(size_t))
    return GRIT_ERR_INVALID_ARG;
  grit_channel_stats all = {.size = sizeof(all)}, *out = &all;
  const grit_chan_stats *s = &ch->stats;
#define LOAD(f) __atomic_load_n(&s->f, __ATOMIC_RELAXED)
  out->calls_started = LOAD(calls_started);
  out->calls_succeeded = LOAD(calls_succeeded);
  out->calls_failed = LOAD(calls_failed);
  out->attempts = LOAD(attempts);
  out->retries = LOAD(retries);
  out->transparent_retries = LOAD(transparent_retries);
  out->hedges = LOAD(hedges);
  out->throttled = LOAD(throttled);
  for (int i = 0; i < GRIT_RETRY_BUCKETS; i++)
    out->retries_per_call[i] = LOAD(retries_hist[i]);
  out->dns_lookups = LOAD(dns_lookups);
  out->dns_lookup_failures = LOAD(dns_lookup_failures);
  out->dns_txt_timeouts = LOAD(dns_txt_timeouts);
  out->config_updates = LOAD(config_updates);
  out->config_rejections = LOAD(config_rejections);
#undef LOAD
  const grit_lb_shared *sh = &ch->lb_shared;
  out->ejections = __atomic_load_n(&sh->ejections, __ATOMIC_RELAXED);
  out->unejections = __atomic_load_n(&sh->unejections, __ATOMIC_RELAXED);
  out->health_not_serving =
      __atomic_load_n(&sh->health_not_serving, __ATOMIC_RELAXED);
  return grit_sized_fill(caller, &all, sizeof(all));
}

/* ---- public entry points ---- */

static void ch_connect_on_loop(grit_task *t) {
  grit_channel *ch = GRIT_CONTAINER_OF(t, grit_channel, connect_task);
  ch_start(ch);
  if (!ch->shutting_down)
    grit_channel_lb_exit_idle(ch);
  grit_channel_idle_arm(ch); /* connected without calls: may idle again */
}

void grit_channel_enter_idle(grit_channel *ch) {
  if (ch->shutting_down || !grit_list_empty(&ch->live_calls))
    return;
  grit_channel_lb_destroy(ch);
  grit_resolver_destroy(ch->resolver);
  ch->resolver = NULL;
  ch->have_resolver_result = false; /* so ch_start runs again */
  ch->resolve_error[0] = '\0';
  grit_channel_set_state(ch, GRIT_STATE_IDLE);
}

grit_connectivity_state grit_channel_get_state(grit_channel *ch,
                                               bool try_to_connect) {
  if (!ch || grit_rt_forked(ch->rt))
    return GRIT_STATE_SHUTDOWN; /* AP-06: made before fork(), unusable */
  grit_connectivity_state s = ch_state(ch);
  if (try_to_connect && s == GRIT_STATE_IDLE)
    grit_rt_post(ch->rt, &ch->connect_task);
  return s;
}

static void ch_destroy_on_loop(grit_task *t) {
  grit_channel *ch = GRIT_CONTAINER_OF(t, grit_channel, destroy_task);
  ch->shutting_down = true;
  /* Cancel every call; each removes itself from the lists. */
  while (!grit_list_empty(&ch->live_calls)) {
    grit_call *c = GRIT_CONTAINER_OF(ch->live_calls.next, grit_call, live_link);
    c->hooks->fail(c, GRIT_STATUS_CANCELLED, "channel destroyed");
  }
  grit_channel_idle_close(ch);
  grit_channel_lb_destroy(ch);
  grit_resolver_destroy(ch->resolver);
  ch->resolver = NULL;
  grit_channel_ext_stop(ch);
  __atomic_store_n(&ch->state, (uint32_t)GRIT_STATE_SHUTDOWN, __ATOMIC_RELEASE);
  ch_notify_watchers(ch);
  ch_set_config(ch, NULL);
  pthread_mutex_lock(&ch->mu);
  ch->destroy_done = true;
  pthread_cond_signal(&ch->cv);
  pthread_mutex_unlock(&ch->mu);
  grit_channel_unref(ch); /* the user's handle */
}

void grit_channel_destroy(grit_channel *ch) {
  if (!ch)
    return;
  grit_runtime *rt = ch->rt;
  if (grit_rt_forked(rt))
    return; /* AP-06: the parent's; its thread and locks are not here */
  /* OP-03: out of the live list first, so no reader starts on it now. */
  grit_obs_channel_unregister(ch);
  bool on_loop = grit_rt_on_loop(rt);
  if (!on_loop)
    grit_channel_ref(ch); /* keep it while we wait */
  /* Refused only when the runtime's thread has already ended (a caller
   * bug, grit.h): nothing can release the channel then, so do not wait. */
  bool posted = grit_rt_post(rt, &ch->destroy_task);
  if (!on_loop) {
    pthread_mutex_lock(&ch->mu);
    while (posted && !ch->destroy_done)
      pthread_cond_wait(&ch->cv, &ch->mu);
    pthread_mutex_unlock(&ch->mu);
    /* OP-02: the spans of its calls (all ended now) reach the collector
     * (or are dropped) before destroy returns. */
    grit_otlp_flush(ch->otlp);
    grit_channel_unref(ch);
  }
  /* On the loop the destroy task is queued; a stopping runtime runs every
   * queued task before its thread ends. */
  grit_rt_channel_closed(rt);
}

/* ---- creation ---- */

static grit_err ch_make_tls(grit_channel *ch, grit_error_detail *d) {
  if (!ch->o.tls)
    return GRIT_OK;
  grit_tls_opts to = {.root_certs_file = ch->o.tls_root_certs_file,
                      .root_certs_pem = ch->o.tls_root_certs,
                      .cert_chain_file = ch->o.tls_cert_chain_file,
                      .private_key_file = ch->o.tls_private_key_file,
                      .skip_verify = ch->o.tls_skip_verify != 0};
  grit_err rv = grit_tls_ctx_create(&to, d, &ch->tls);
  if (rv != GRIT_OK)
    return rv;
  const char *name = ch->o.tls_target_name_override;
  if (!name)
    name = ch->target.host ? ch->target.host : "localhost";
  ch->tls_server_name = grit_strdup(name);
  return ch->tls_server_name ? GRIT_OK : GRIT_ERR_NOMEM;
}

static grit_err ch_make_user_agent(grit_channel *ch) {
  grit_buf b;
  grit_buf_init(&b);
  grit_err rv =
      ch->o.user_agent
          ? grit_buf_appendf(&b, "grit-c/%s %s", GRIT_VERSION, ch->o.user_agent)
          : grit_buf_appendf(&b, "grit-c/%s", GRIT_VERSION);
  ch->user_agent = (char *)b.data;
  return rv;
}

static void ch_fill_transport_opts(grit_channel *ch) {
  grit_transport_opts *t = &ch->topts;
  t->tls = ch->tls;
  t->tls_server_name = ch->tls_server_name;
  t->tls_verify_hostname = ch->o.tls_verify_hostname != 0;
  t->max_header_list_bytes = (uint32_t)ch->o.max_header_list;
  t->max_recv_message_bytes = ch->o.max_recv_message;
  t->keepalive_time_ms = (uint64_t)ch->o.keepalive_time_ms;
  t->keepalive_timeout_ms = (uint64_t)ch->o.keepalive_timeout_ms;
  t->keepalive_permit_without_calls = ch->o.keepalive_permit_without_calls;
  t->read_spin_us = (uint32_t)ch->o.read_spin_us;
  t->user_agent = ch->user_agent;
  ch->sc_args = (grit_subchannel_args){
      .loop = &ch->rt->loop,
      .topts = ch->topts,
      .rng = &ch->rng,
      .initial_backoff_ms = (uint64_t)ch->o.initial_reconnect_backoff_ms,
      .max_backoff_ms = (uint64_t)ch->o.max_reconnect_backoff_ms,
      .min_connect_timeout_ms = (uint64_t)ch->o.min_connect_timeout_ms,
      .shared = &ch->lb_shared,
  };
  grit_list_init(&ch->lb_shared.scs);
  ch->lb_shared.health_disabled = ch->o.health_checks == 0;
  ch->lb_shared.load_report_cb = ch->o.load_report_cb; /* LP-01 */
  ch->lb_shared.load_report_data = ch->o.load_report_data;
}

static grit_err ch_init(grit_channel *ch, const char *target,
                        const grit_channel_args *args, grit_error_detail *d) {
  grit_chan_opts defaults;
  grit_chan_opts_defaults(&defaults);
  grit_err rv = grit_chan_opts_copy(args ? &args->o : &defaults, &ch->o);
  if (rv == GRIT_ERR_INVALID_ARG)
    grit_error_set(d, rv, GRIT_ARG_DNS_SERVER,
                   "want addr:port or [ipv6]:port, comma-separated");
  if (rv == GRIT_OK)
    rv = grit_chan_opts_security(&ch->o, d);
  if (rv != GRIT_OK)
    return rv;
  /* A scheme served from above: the rest names the service, which is the
   * authority (as grpc's xds resolver: "xds:///svc" -> "svc"). */
  ch->ext_ops = grit_channel_ext_find(target);
  if (ch->ext_ops && ch->ext_ops->check) {
    rv = ch->ext_ops->check(target, ch->o.xds_bootstrap_config, d);
    if (rv != GRIT_OK)
      return rv;
  }
  rv = grit_target_parse(ch->ext_ops ? grit_channel_ext_name(target) : target,
                         &ch->target, d);
  if (rv != GRIT_OK)
    return rv;
  if (ch->o.default_authority) {
    grit_free(ch->target.authority);
    ch->target.authority = grit_strdup(ch->o.default_authority);
    if (!ch->target.authority)
      return GRIT_ERR_NOMEM;
  }
  ch->cfg_opts.max_attempts_cap = (uint32_t)ch->o.max_attempts_cap;
  if (ch->o.service_config) {
    ch->default_config = grit_svccfg_parse(
        ch->o.service_config, strlen(ch->o.service_config), &ch->cfg_opts, d);
    if (!ch->default_config)
      return d && d->code == GRIT_ERR_NOMEM ? GRIT_ERR_NOMEM
                                            : GRIT_ERR_INVALID_CONFIG;
  }
  if (ch->o.rng_seed_set)
    grit_rng_seed(&ch->rng, (uint64_t)ch->o.rng_seed);
  else
    grit_rng_seed_os(&ch->rng);
  /* DNS-09: the percentage draws come from a copy, so ch->rng's sequence
   * (RT-03 replay by seed) is left as it was. */
  ch->txt_draw = ch->rng;
  grit_rng_seed(&ch->txt_draw, grit_rng_next(&ch->txt_draw) ^ 0x9e3779b9u);
  grit_channel_config_init(ch);
  rv = ch_make_tls(ch, d);
  if (rv == GRIT_OK)
    rv = ch_make_user_agent(ch);
  if (rv == GRIT_OK)
    ch_fill_transport_opts(ch);
  /* OB-01: the target's series; without them (no memory) the channel
   * works and records nothing. */
  ch->obs = grit_obs_channel_series(target);
  ch->cz_target = grit_strdup(target); /* NULL: channelz shows "" */
  /* OP-02: spans for an exporter or a callback; both need trace ids. */
  if (rv == GRIT_OK && ch->o.otlp_endpoint)
    rv = grit_otlp_get(ch->o.otlp_endpoint, &ch->otlp);
  ch->spans = ch->otlp || ch->o.span_cb;
  if (ch->spans)
    ch->o.trace_context = 1;
  ch->lb_shared.obs = ch->obs;
  grit_obs_target_add(ch->obs, GRIT_OBS_CHANNELS_CREATED, 1);
  grit_obs_channel_register(ch);
  return rv;
}

/* fork() (SPEC AP-06): the channel layer's global locks, held across it. */
static void ch_fork_lock(void) {
  grit_throttle_table_fork_lock();
  grit_obs_fork_lock();
}

static void ch_fork_unlock(void) {
  grit_obs_fork_unlock();
  grit_throttle_table_fork_unlock();
}

static void ch_fork_hooks(void) {
  grit_rt_fork_hooks(ch_fork_lock, ch_fork_unlock);
}

grit_err grit_channel_create(grit_runtime *rt, const char *target,
                             const grit_channel_args *args,
                             grit_error_detail *detail, grit_channel **out) {
  static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
  pthread_once(&hooks_once, ch_fork_hooks);
  if (!out)
    return GRIT_ERR_INVALID_ARG;
  *out = NULL;
  if (!target)
    return GRIT_ERR_INVALID_TARGET;
  grit_err rv = GRIT_OK;
  if (rt && grit_rt_forked(rt))
    return GRIT_ERR_SHUTDOWN; /* AP-06: a runtime made before fork() */
  if (rt)
    grit_rt_channel_opened(rt);
  else
    rv = grit_rt_default(&rt); /* counts the channel on it */
  if (rv != GRIT_OK)
    return rv;
  grit_channel *ch = grit_calloc(1, sizeof(*ch));
  if (!ch) {
    grit_rt_channel_closed(rt);
    return GRIT_ERR_NOMEM;
  }
  ch->rt = rt;
  grit_rt_ref(rt); /* AP-06: released with the channel's memory */
  ch->refs = 1;
  pthread_mutex_init(&ch->mu, NULL);
  pthread_cond_init(&ch->cv, NULL);
  pthread_mutex_init(&ch->cfg_mu, NULL);
  grit_list_init(&ch->queued_attempts);
  grit_list_init(&ch->config_waiters);
  grit_list_init(&ch->live_calls);
  grit_list_init(&ch->watchers);
  ch->connect_task.fn = ch_connect_on_loop;
  ch->destroy_task.fn = ch_destroy_on_loop;
  ch->state = GRIT_STATE_IDLE;
  rv = ch_init(ch, target, args, detail);
  if (rv != GRIT_OK) {
    ch_free(ch);
    grit_rt_channel_closed(rt);
    return rv;
  }
  *out = ch;
  return GRIT_OK;
}

static void ch_release_metrics(void) {
  grit_obs_release_if_idle();
}

/* The default runtime lives in runtime/; once it stopped with no channel
 * left anywhere, the metric series go too (their counts start again). */
grit_err grit_default_runtime_shutdown(void) {
  grit_err rv = grit_rt_default_shutdown(ch_release_metrics);
  if (rv != GRIT_ERR_BUSY)
    return rv; /* stopped, or called on the loop (nothing may wait) */
  /* The xDS client's stream and channel live on the default runtime and
   * go in the background once their last user went (issue 27): wait for
   * those (at once when there are none), then try again. */
  grit_channel_ext_wait_idle(10000);
  return grit_rt_default_shutdown(ch_release_metrics);
}
