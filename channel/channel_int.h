/* Shared by the channel module's files only. */
#ifndef GRIT_CHANNEL_INT_H
#define GRIT_CHANNEL_INT_H

#include <pthread.h>

#include "channel/channel.h"
#include "callsm/callsm.h"
#include "compress/compress.h"
#include "credentials/credentials.h"
#include "hedging/hedging.h"
#include "intercept/intercept.h"
#include "lb/lb.h"
#include "observe/observe.h"
#include "retry/retry.h"
#include "runtime/runtime.h"
#include "service_config/service_config.h"

typedef struct grit_throttle_handle grit_throttle_handle;

/* ---- otlp_export.c: span export per collector (SPEC OP-02) ---- */

typedef struct grit_otlp_exporter grit_otlp_exporter;
/* The exporter of |endpoint| (shared; a reference): GRIT_OK, NOMEM,
 * SYSTEM, or the error of creating its channel (INVALID_TARGET...). */
grit_err grit_otlp_get(const char *endpoint, grit_otlp_exporter **out);
/* Drop a reference; the last one sends what is queued, then stops. */
void grit_otlp_put(grit_otlp_exporter *e);
/* A free slot of the queue, the caller's to fill in place (plain stores
 * and copies, then grit_otlp_commit at once); NULL when the queue is full:
 * the span is dropped and counted. Any thread; no lock, no allocation, no
 * wait (a compare-and-swap on the queue's tail). */
grit_otlp_span *grit_otlp_reserve(grit_otlp_exporter *e);
/* Hand the slot |o| grit_otlp_reserve returned to the exporter. */
void grit_otlp_commit(grit_otlp_exporter *e, grit_otlp_span *o);
/* Wait until what was queued before now was sent or dropped (bounded by
 * the export timeout). Not on an I/O thread. */
void grit_otlp_flush(grit_otlp_exporter *e);
/* api_call.c: grit_unary_call_async for a message already framed: |framed|
 * holds the gRPC message prefix and |raw_len| bytes and is taken in every
 * case; |cb| runs exactly once when this returns GRIT_OK, else |*why|
 * says what failed (SHUTDOWN after fork, NOMEM, or a creation error).
 * The exporter, below the call machinery, calls up through this table. */
typedef struct grit_framed_unary_ops {
  grit_err (*start)(grit_channel *ch, const char *method, grit_slice *framed,
                    size_t raw_len, const grit_call_opts *opts,
                    grit_unary_cb cb, void *user_data, const char **why);
} grit_framed_unary_ops;
extern const grit_framed_unary_ops grit_framed_unary;

/* ---- args.c: channel arguments, resolved ---- */

typedef struct grit_chan_opts {
  char *service_config;
  int64_t ignore_resolver_config;
  int64_t dns_enable_txt;
  char *dns_server;
  int64_t dns_min_reresolve_ms;
  int64_t max_attempts_cap;
  int64_t enable_retries;
  int64_t per_call_retry_buffer;
  int64_t per_call_send_buffer;
  int64_t per_channel_retry_buffer;
  int64_t rng_seed;
  bool rng_seed_set;
  int64_t max_recv_message;
  int64_t max_send_message;
  int64_t max_header_list;
  char *default_authority;
  int64_t tls; /* -1: not set (AP-05: material decides), 0 insecure, 1 TLS */
  const char *tls_material; /* the first TLS-only key set, or NULL */
  char *tls_root_certs_file;
  char *tls_root_certs; /* PEM text */
  char *tls_cert_chain_file;
  char *tls_private_key_file;
  char *tls_target_name_override;
  int64_t tls_verify_hostname;
  int64_t tls_skip_verify; /* GRIT_ARG_TLS_SKIP_VERIFY */
  int64_t initial_reconnect_backoff_ms;
  int64_t max_reconnect_backoff_ms;
  int64_t min_connect_timeout_ms;
  int64_t keepalive_time_ms;
  int64_t read_spin_us;
  int64_t keepalive_timeout_ms;
  int64_t keepalive_permit_without_calls;
  int64_t idle_timeout_ms;
  char *user_agent;
  int64_t idempotency_keys;
  int64_t health_checks; /* HC-02 */
  grit_attempt_observer_cb observer;
  void *observer_data;
  grit_load_report_cb load_report_cb; /* LP-01 */
  void *load_report_data;
  char *default_compression;  /* CP-01: a codec name, validated */
  int64_t dns_txt_timeout_ms; /* DNS-07 */
  int64_t max_config_age_ms;  /* 0: off */
  grit_config_change_cb config_cb;
  void *config_cb_data;
  int64_t trace_context; /* GRIT_ARG_TRACE_CONTEXT (OB-02) */

  /* SPEC OP-04: GRIT_ARG_DNS_LOOKUP_TIMEOUT_MS (0: c-ares' own timeouts)
   * and GRIT_ARG_DNS_USE_TTL. */
  int64_t dns_lookup_timeout_ms;
  int64_t dns_use_ttl;
  char *otlp_endpoint;  /* GRIT_ARG_OTLP_ENDPOINT (OP-02) */
  grit_span_cb span_cb; /* OP-02 */
  void *span_cb_data;
  /* CR-01, IC-01: a reference, and references to each interceptor. */
  grit_call_credentials *call_creds;
  grit_ic_list interceptors;
  int64_t allow_insecure_call_creds; /* AP-05 */
  char *xds_bootstrap_config;        /* GRIT_ARG_XDS_BOOTSTRAP_CONFIG */
} grit_chan_opts;

struct grit_channel_args {
  grit_chan_opts o;
};

void grit_chan_opts_defaults(grit_chan_opts *o);
grit_err grit_chan_opts_copy(const grit_chan_opts *src, grit_chan_opts *dst);
void grit_chan_opts_free(grit_chan_opts *o);
/* SPEC AP-05: settle |o|'s security. TLS material (any TLS-only key) with
 * GRIT_ARG_TLS unset means TLS; with GRIT_ARG_TLS=0 (explicitly insecure)
 * it is GRIT_ERR_INVALID_ARG, the key named in |d|. */
grit_err grit_chan_opts_security(grit_chan_opts *o, grit_error_detail *d);

/* ---- policy.c: the LB policy in use, and a pending one ---- */

/* An LB policy of the channel; also the context of its helper callbacks,
 * so the channel knows which policy reports. */
typedef struct grit_lb_slot {
  grit_channel *ch;
  grit_lb_policy *p; /* NULL: the slot is free */
} grit_lb_slot;

/* The policy a resolver result goes to, for the config's |vt|: the latest
 * one if it has that vtable, else a new one. A new one is pending while
 * the current one is READY: it takes over (and the old one is destroyed,
 * its connections draining) once it reports READY or TRANSIENT_FAILURE.
 * Returns GRIT_OK or GRIT_ERR_NOMEM (|*out| NULL). */
grit_err grit_channel_lb_select(grit_channel *ch,
                                const grit_lb_policy_vtable *vt,
                                grit_lb_policy **out);
/* exit_idle on the current policy and on the pending one. */
void grit_channel_lb_exit_idle(grit_channel *ch);
/* Destroy both policies (idle timeout, channel destroy). */
void grit_channel_lb_destroy(grit_channel *ch);

/* ---- lb_config.c: health checks and outlier detection (issue 15) ---- */

/* The policy |cfg| asks for: outlier_detection (OD-01) if configured,
 * else its round_robin or pick_first. */
const grit_lb_policy_vtable *grit_channel_lb_choice(const grit_svccfg *cfg);
/* Apply the config in force to |p| (the outlier detection settings) and
 * to every subchannel (the health check service, HC-01). GRIT_OK or
 * GRIT_ERR_NOMEM. */
grit_err grit_channel_lb_configure(grit_channel *ch, grit_lb_policy *p);
/* An attempt's stream ended with a status from |peer| (A50 counting) and
 * |trailers| (may be NULL), whose ORCA report (LP-01) goes to the policy
 * and the application. */
void grit_channel_lb_on_call_result(grit_channel *ch, const grit_addr *peer,
                                    bool ok, const grit_metadata *trailers);

/* ---- channel.c ---- */

typedef struct grit_watcher {
  grit_list link;
  grit_channel *ch;
  grit_connectivity_state last_seen;
  uint64_t timeout_ms;
  grit_state_cb cb;
  void *user_data;
  uv_timer_t timer;
  grit_task task;
} grit_watcher;

#define GRIT_RETRY_BUCKETS 8

/* MX-01 counters; updated on the loop, read from any thread (atomics). */
typedef struct grit_chan_stats {
  uint64_t calls_started, calls_succeeded, calls_failed;
  uint64_t attempts, retries, transparent_retries, hedges, throttled;
  uint64_t retries_hist[GRIT_RETRY_BUCKETS];
  uint64_t dns_lookups, dns_lookup_failures, dns_txt_timeouts;
  uint64_t config_updates, config_rejections;
} grit_chan_stats;

struct grit_channel {
  grit_runtime *rt;
  uint32_t refs; /* atomic: the user's handle plus one per live call */
  grit_chan_opts o;
  grit_target target;
  grit_tls_ctx *tls;
  grit_transport_opts topts;
  char *user_agent;
  char *tls_server_name;
  grit_rng rng;
  grit_svccfg *default_config; /* from the channel argument, or NULL */
  grit_svccfg_opts cfg_opts;

  /* Loop-only state. */
  grit_svccfg *config;   /* in force; NULL = empty config */
  char *config_error;    /* no good config yet and the last one was bad */
  struct {               /* the last method looked up (call.c) */
    grit_svccfg *config; /* a reference */
    const grit_method_cfg *mcfg;
    char method[96];
  } last_find;
  bool have_resolver_result;
  grit_resolver *resolver;
  /* A scheme served from above (ext_resolver.c): its ops, its state once
   * started, the task its kicks post. */
  const grit_ext_resolver_ops *ext_ops;
  void *ext_state;
  bool ext_started;
  grit_task ext_task;
  uint64_t ext_note_hash; /* grit_channel_ext_note: mixed into cfg hash */
  grit_lb_slot lb_slots[2];
  grit_lb_slot *lb;         /* answers picks; NULL until the first result */
  grit_lb_slot *lb_pending; /* a policy switch under way (policy.c) */
  grit_subchannel_args sc_args;
  grit_lb_shared lb_shared;       /* issue 15: health settings, OD counters */
  char *health_service;           /* lb_shared.health_service's storage */
  grit_list queued_attempts;      /* waiting for a pick */
  grit_list config_waiters;       /* calls waiting for the first config */
  size_t replay_bytes;            /* RT-07: replay buffers of every call */
  grit_throttle_handle *throttle; /* TH-01, once configured */
  grit_chan_stats stats;
  grit_list live_calls; /* every call started on the loop, not done */
  grit_list watchers;
  bool shutting_down;
  char resolve_error[256];
  grit_task connect_task;
  grit_task destroy_task;
  uv_timer_t *idle_timer; /* idle.c; NULL until first armed */
  uint64_t idle_since;    /* idle.c: loop time the last live call ended */

  uint32_t state; /* grit_connectivity_state; atomic for any-thread reads */

  /* config_state.c (DNS-10): the config in force as reported, under
   * cfg_mu; json is borrowed from o.service_config for the default. */
  pthread_mutex_t cfg_mu;
  grit_service_config_info cfg_info;
  uint64_t cfg_rejection_hash; /* loop: the last rejection logged */
  bool txt_timing_out;         /* loop: the last TXT wait timed out */
  grit_task config_task;       /* runs the config-change callback */
  grit_rng txt_draw;           /* DNS-09: the percentage draws, fixed */

  /* destroy handshake with the user thread */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool destroy_done;

  /* The memory of the last call freed, kept for the next call (atomic
   * exchange; NULL: none): a steady call rate then takes no big block from
   * malloc per call (issue 24). Freed with the channel. */
  grit_call *spare_call;
  /* The same for a traced call's trace part (SPEC OB-02): call.c keeps the
   * last one freed, observe.c takes it for the next traced call. */
  struct call_trace_part *spare_tr;

  grit_obs_target *obs; /* OB-01 series of this target; NULL: none (OOM) */
  grit_list obs_link;   /* in observe.c's live channels; next NULL: not */
  /* OP-03 (channelz.c): the target as given, a process-wide id, and the
   * monotonic start of the last call (us, atomic; 0: none yet). */
  char *cz_target;
  uint64_t cz_id;
  uint64_t cz_last_call_us;
  /* OP-02 (otlp_export.c): the collector's exporter, or NULL; spans: an
   * exporter or a span callback wants the spans of sampled calls. */
  grit_otlp_exporter *otlp;
  bool spans;
};

void grit_channel_ref(grit_channel *ch);
/* ext_resolver.c: the ops serving |target|'s scheme, or NULL. */
const grit_ext_resolver_ops *grit_channel_ext_find(const char *target);
/* The name part of an ext target ("xds:///svc" -> "svc"). */
const char *grit_channel_ext_name(const char *target);
/* Loop thread: start the front (or, started, have it deliver again);
 * stop it for good. */
void grit_channel_ext_start(grit_channel *ch);
void grit_channel_ext_stop(grit_channel *ch);
/* Any thread: each registered front's wait_idle (default runtime shutdown). */
void grit_channel_ext_wait_idle(uint64_t ms);
/* The resolver's result, as ch_on_resolved takes it (channel.c). */
void grit_channel_on_resolved(grit_channel *ch, const grit_resolver_result *r);
/* The same with one child policy per cluster (grit_lb_cluster_manager)
 * instead of |r|'s address list (issue 27). */
void grit_channel_on_resolved_clusters(grit_channel *ch,
                                       const grit_resolver_result *r,
                                       const grit_lb_cm_child *kids, size_t n);
void grit_channel_unref(grit_channel *ch);
/* The current policy's state (or the channel's own: resolving, config
 * error, idle); watchers are told and queued calls pick again. */
void grit_channel_set_state(grit_channel *ch, grit_connectivity_state s);
/* Ask the resolver for a new result (rate-limited there, DNS-05). */
void grit_channel_request_reresolution(grit_channel *ch);
/* Offer every queued call a pick again (state changed). */
void grit_channel_retry_queued(grit_channel *ch);
grit_pick_result grit_channel_pick(grit_channel *ch, const grit_pick_args *pa);
/* The config a new call should use: a new reference or NULL (empty). */
grit_svccfg *grit_channel_config_ref(grit_channel *ch);
/* The channel's throttle bucket for |g|'s parameters (TH-01). */
grit_throttle_handle *grit_channel_throttle(grit_channel *ch,
                                            const grit_svccfg_global *g);
/* Start the channel if needed; true while the first resolver result, and
 * so the config for new calls, is still to come (the call queues). */
bool grit_channel_config_pending(grit_channel *ch);
/* Drop the LB policy (and its connections) and the resolver; state IDLE.
 * The next pick starts over as on first use. No-op while calls live. */
void grit_channel_enter_idle(grit_channel *ch);

/* ---- config_state.c: the config in force as reported (DNS-10) ---- */

/* At creation (after o is set) / at the end. */
void grit_channel_config_init(grit_channel *ch);
void grit_channel_config_free(grit_channel *ch);
/* The config in force is now |json| from |src| (the default's text is
 * taken from the channel); logs and counts it if it changed. */
void grit_channel_config_applied(grit_channel *ch, grit_config_source src,
                                 const char *json, size_t len);
/* A config from the resolver was rejected; |kept|: a config stays. */
void grit_channel_config_rejected(grit_channel *ch, const char *path,
                                  const char *reason, bool kept);
/* A resolution's TXT wait did (not) time out (DNS-07); logs streaks. */
void grit_channel_config_txt_timeout(grit_channel *ch, bool timed_out);

/* ---- idle.c: client idle timeout ---- */

/* No call is live (the last one ended, or the user asked to connect):
 * the idle time counts from now. A call going live needs no call here:
 * the timer finds it in live_calls. */
void grit_channel_idle_arm(grit_channel *ch);
/* Channel teardown: close the timer. */
void grit_channel_idle_close(grit_channel *ch);

/* ---- throttle_table.c: retry throttling per server name (TH-01) ---- */

/* A reference to the bucket for |name|, created or reconfigured (scaling
 * the tokens) to the given parameters; NULL on out-of-memory. */
grit_throttle_handle *grit_throttle_table_get(const char *name,
                                              uint32_t max_milli,
                                              uint32_t ratio_milli);
void grit_throttle_table_put(grit_throttle_handle *h);
/* Lock the table and return the bucket, for the call machine to read and
 * update during one event (TH-02, TH-03; call_exec.c). */
grit_throttle *grit_throttle_table_lock(grit_throttle_handle *h);
void grit_throttle_table_unlock(grit_throttle_handle *h);
/* fork() (AP-06): hold the table's lock across it; released in both. */
void grit_throttle_table_fork_lock(void);
void grit_throttle_table_fork_unlock(void);

/* ---- call.c, call_exec.c, attempt.c: calls, the machine, attempts ---- */

typedef enum call_op_kind {
  CALL_OP_START,
  CALL_OP_SEND,
  CALL_OP_CLOSE,
  CALL_OP_CANCEL,
} call_op_kind;

typedef struct call_op {
  grit_list link;
  call_op_kind kind;
  grit_slice *slice;
  size_t raw_len; /* CALL_OP_SEND: the message's uncompressed length */
} call_op;

/* FC-04: a blocking call's reader lags once this many message bytes wait
 * in its queue; the stream's window is withheld until the queue drains to
 * half of it, so the server stops within a window of the reader. */
#define CALL_RECV_QUEUE_HIGH (256 * 1024)

typedef struct recv_msg {
  grit_list link;
  grit_slice *slice;
} recv_msg;

typedef enum call_state {
  CALL_NEW = 0,
  CALL_ACTIVE = 1,
  CALL_DONE = 2,
} call_state;

/* One attempt: a pick and at most one stream at a time (a transparent
 * retry reuses the attempt). The machine knows it by its slot. */
typedef struct call_attempt {
  grit_list qlink; /* in ch->queued_attempts while waiting for a pick */
  struct grit_call *c;
  grit_stream *stream;
  grit_transport *transport;
  /* The pick's done hook (xds_cluster_impl's calls in flight, issue 27):
   * called once when the picked stream ends or cannot start. */
  grit_pick_done *pick_done;
  uint32_t number; /* 1-based; what grpc-previous-rpc-attempts counts */
  uint8_t slot;    /* in c->sm and c->att */
  grit_attempt_kind kind;
  bool queued;
  bool ended;       /* dropped while its stream runs: on_done frees it */
  bool pick_failed; /* an event waits in pick_code, pick_msg (SM-01) */
  bool started;     /* a STREAM_STARTED waits */
  bool pick_drop;   /* the pick failed as an LB drop (issue 27) */
  grit_status_code pick_code;
  char *pick_msg;        /* NULL: "pick failed" */
  size_t sent;           /* replay items handed to the stream */
  uint64_t handed_bytes; /* their bytes */
  bool close_sent;
  uint64_t start_us;
  uint64_t backoff_ms; /* waited before it */
  bool pushback;
  char peer[128];
  /* strlen(peer) (OP-02 spans) */
  uint8_t peer_len;
  char *skipped; /* issue 15: what its pick passed over, and why; NULL: "" */
  char *picked;  /* LP-02..LP-04: how the policy chose (observer only) */
  char response_encoding[32]; /* the response's grpc-encoding (CP-02) */
  /* OB-01, OB-02: message bytes each way, and this attempt's span. */
  uint64_t sent_msg_bytes;
  uint64_t rcvd_msg_bytes;
  bool transparent_retry; /* A72: this stream replays one never sent */
  char span_id[17];       /* "" with trace context off */
  uint8_t span_raw[8];    /* the same 8 bytes (OP-02 spans, the header) */
  /* CR-01: the fetch of this attempt's credentials while it runs, then
   * the request metadata with their pairs (NULL: the call's as it is). */
  struct attempt_creds *creds_wait;
  grit_metadata *creds_md;
} call_attempt;

/* What only a call with a retry or hedging policy needs (allocated with
 * its config, so that a plain call stays small: issue 24). */
typedef struct call_policy_part {
  uv_timer_t retry_timer;     /* backoff before a retry, or the next hedge */
  uv_timer_t recv_timer;      /* perAttemptRecvTimeout (RT-10) */
  grit_status_code last_code; /* SAVE_STATUS (HG-04) */
  char *last_message;
  grit_metadata *last_trailers;
} call_policy_part;

/* A call's credentials and interceptors (CR-01, IC-01; call_auth.c),
 * allocated only for calls that have either. */
typedef struct call_auth_part {
  grit_call_credentials *creds; /* the channel's then the call's; or NULL */
  grit_ic_call *ic;             /* NULL: no interceptors */
  grit_status_code fail_code;   /* an interceptor failed the call: != OK */
  char *fail_msg;
} call_auth_part;

/* A call's trace context (OB-02), allocated when tracing is on. */
typedef struct call_trace_part {
  bool has_parent;     /* the caller gave a traceparent */
  grit_traceparent tp; /* trace id, caller's span id and flags */
  char trace_id[33];   /* hex */
  char parent_span_id[17];
  bool span;          /* OP-02: this call's spans are produced */
  uint8_t span_id[8]; /* ... and its own span's id (the call span) */
  uint64_t real0_ns;  /* OP-02: the wall clock at start_us */
  uint16_t name_len;  /* OP-02: bytes of the method without its '/' */
  bool name_ascii;    /* OP-02: ... all ASCII (no UTF-8 check per span) */
} call_trace_part;

/* Method paths up to this long live in the call itself (no allocation). */
#define CALL_METHOD_INLINE 48

/* Which of the call's timers are initialized (and closed at its end). */
#define CALL_TIMER_DEADLINE (1u << 0)
#define CALL_TIMER_RETRY (1u << 1) /* retry_timer */
#define CALL_TIMER_RECV (1u << 2)  /* recv_timer (perAttemptRecvTimeout) */

/* The calls up into the call that channel/'s lower files make: attempt.c
 * (stream events, delivery), call_auth.c (a failed fetch) and channel.c (its
 * waiting lists, shutdown). call.c puts one table on every call
 * (grit_call.hooks), so those files name no function of call.c or
 * call_exec.c and the arrows among channel/'s files point one way: call.c
 * and call_exec.c (the call and its machine) -> call_auth.c -> attempt.c
 * (streams and picks) -> channel.c (the channel and its waiting lists) ->
 * the rest. test/check_layers.py fails on a cycle of more than two files. */
typedef struct grit_call_hooks {
  /* call_exec.c: feed the machine one event (SPEC SM-01). */
  void (*feed)(grit_call *c, grit_callsm_event *ev);
  /* call_exec.c: an attempt's pick or stream start, fed now or after the
   * list that runs (grit_call_sm_attempt_event). */
  void (*attempt_event)(call_attempt *a, grit_callsm_event_kind kind,
                        grit_status_code code, const char *msg);
  /* call.c: a local error ends the call (grit_call_fail_on_loop). */
  void (*fail)(grit_call *c, grit_status_code code, const char *msg);
  /* call.c: the committed attempt's headers and messages to the app. */
  void (*deliver_headers)(grit_call *c, const grit_metadata *md);
  void (*deliver_message)(grit_call *c, grit_slice *msg);
  /* call.c: drop one loop hold (grit_call_loop_release). */
  void (*loop_release)(grit_call *c);
  /* call.c: |out| request bytes handed to HTTP/2 (AP-03). */
  void (*send_progress)(grit_call *c, uint64_t out);
  /* call.c: the channel's first config came (or failed). */
  void (*config_ready)(grit_call *c);
  /* attempt.c: the channel's picker changed; pick again. */
  void (*pick_ready)(call_attempt *a);
} grit_call_hooks;

struct grit_call {
  /* Shared with user threads: the fields marked "under mu" below. Set up
   * once per allocation: a channel's spare call keeps them (call.c), and
   * what follows from |ch| on is zeroed for each new call. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  grit_channel *ch;
  const grit_call_hooks *hooks; /* call.c's table: never NULL */
  uint32_t refs; /* atomic: user handle + loop side + queued task */
  bool blocking;
  /* grit_call_launch_unary: start, send |unary_req| and half-close in the
   * first task run, without an op each (set before the post). */
  bool unary_launch;
  uint64_t id;
  char *method; /* method_inline or allocated */
  char method_inline[CALL_METHOD_INLINE];
  grit_metadata *metadata;
  char *authority;
  char *idempotency_key;
  uint64_t timeout_ms;
  grit_wait_for_ready wait_for_ready_opt;
  grit_method_kind kind; /* UNARY, CLIENT_STREAMING: one response */
  grit_call_cbs cbs;
  void *user_data;
  uint64_t send_limit;    /* GRIT_ARG_PER_CALL_SEND_BUFFER (AP-03) */
  grit_unary_cb unary_cb; /* grit_unary_call_async */
  grit_slice *unary_resp;
  grit_slice *unary_req;
  size_t unary_req_raw; /* its uncompressed length */
  grit_codec codec;     /* request compression (CP-01), fixed at creation */
  uint32_t method_len;  /* strlen(method); 0 (measure it) past UINT32_MAX */

  /* Shared with user threads, under mu. */
  grit_list ops;
  bool cancel_requested; /* a cancel posted without an op (no memory) */
  bool send_closed_user;
  bool finish_taken;
  bool send_ready_wanted; /* grit_call_try_send refused: on_send_ready */
  uint64_t send_queued;   /* framed request bytes accepted (AP-03) */
  uint64_t send_out;      /* of which handed to HTTP/2 by some attempt */
  grit_list recvq;
  size_t recv_bytes;     /* message bytes waiting in recvq */
  bool recv_paused;      /* FC-04: the reader lags; window withheld */
  bool recv_state_dirty; /* recv_paused changed off the loop */
  bool recv_discard;     /* grit_call_finish: drop what comes */
  bool headers_set;
  bool done;
  grit_metadata *headers;
  grit_status status;
  grit_call_info info;
  grit_task task;

  /* Loop-only. */
  call_state state;
  bool started_on_loop;
  grit_list link;      /* in ch->config_waiters */
  grit_list live_link; /* in ch->live_calls */
  grit_svccfg *config;
  const grit_method_cfg *mcfg;
  /* Issue 27: the route an ext front chose (its retry policy and timeout
   * replace the method config's), or NULL on other channels. */
  grit_ext_route *route;
  grit_throttle_handle *throttle; /* NULL: no throttling */
  bool wait_for_ready;
  bool setup_failed;   /* out of memory adding the idempotency key */
  bool attempt0_used;  /* attempt0 holds a live attempt */
  bool attempt0_dirty; /* attempt0 held one: zero it before the next */
  int64_t max_send;
  int64_t max_recv;
  uint64_t deadline_at_ms;    /* loop time; 0 = none */
  uv_timer_t *deadline_timer; /* NULL until a deadline is armed */
  call_policy_part *pol;      /* NULL: no retry or hedging policy */
  unsigned timers;            /* CALL_TIMER_* initialized */
  unsigned loop_holds;        /* the call until it ends, open timers, streams */
  call_attempt attempt0; /* the first attempt's storage, reused when free */

  grit_replay_buf sends; /* framed sends not yet dropped (RT-07) */
  size_t sends_dropped;  /* items freed from the front after commit */
  bool close_sent;       /* the application half-closed */
  uint32_t responses;    /* messages delivered, for the one-response check */
  /* The call machine (callsm/, SPEC SM-01): every retry, hedging and
   * commit decision; call_exec.c feeds it and runs its actions. */
  grit_callsm sm;
  call_attempt *att[GRIT_CALLSM_SLOTS]; /* the attempt in each live slot */
  uint8_t att_live;   /* slots with an attempt in att (bits) */
  bool sm_busy;       /* running an action list: events wait */
  uint8_t sm_waiting; /* slots whose attempt holds an event (bits) */
  bool fail_waiting;  /* a FAIL arose while a list ran */
  grit_status_code fail_code;
  const char *fail_msg; /* static */
  uint64_t start_ms;
  size_t sends_max_raw; /* largest uncompressed send before the config */

  /* observe/ (OB-01, OB-02). */
  grit_obs_method *obs; /* the method's series; NULL: not recorded */
  uint64_t start_us;
  call_trace_part *tr;  /* NULL: trace context off for this call */
  call_auth_part *auth; /* NULL: no call credentials, no interceptors */
};

/* User-thread halves (call.c): create, then launch to the loop; queue
 * sends, half-close and cancel as ops the loop drains in order. On error
 * create sets |*why| to a static description (for the status, issue 19). */
grit_err grit_call_create_internal(grit_channel *ch, const char *method,
                                   const grit_call_opts *opts, grit_call **out,
                                   const char **why);
/* call_auth.c (CR-01, CR-02, IC-01, AP-05): the call's credentials and
 * interceptors. setup at creation (caller's thread), start runs the
 * interceptors' on_start (caller's thread), check_on_loop refuses a call
 * an interceptor failed or whose credentials would go out in cleartext
 * (false: the call is failed). The rest report the call's events. */
grit_err grit_call_auth_setup(grit_call *c, const grit_call_opts *opts);
grit_err grit_call_auth_start(grit_call *c);
bool grit_call_auth_check_on_loop(grit_call *c);
void grit_call_auth_send(grit_call *c, const void *data, size_t len);
void grit_call_auth_headers(grit_call *c, const grit_metadata *md);
void grit_call_auth_message(grit_call *c, const uint8_t *data, size_t len);
void grit_call_auth_done(grit_call *c, grit_status_code code, const char *msg,
                         const grit_metadata *trailers);
void grit_call_auth_free(grit_call *c);
/* An attempt asks its credentials, then picks (grit_attempt_pick_now);
 * creds_release lets a running fetch go (attempt freed). */
void grit_attempt_begin(call_attempt *a);
void grit_attempt_pick_now(call_attempt *a);
void grit_attempt_creds_release(call_attempt *a);

grit_err grit_call_launch(grit_call *c);
/* |raw_len|: the message's uncompressed length, for the send limit. */
grit_err grit_call_queue_send(grit_call *c, grit_slice *framed, size_t raw_len);
grit_err grit_call_queue_close(grit_call *c);
grit_err grit_call_queue_cancel(grit_call *c);
/* Launch a unary call: start, send |framed| and half-close, as one task
 * run that needs no allocation. */
grit_err grit_call_launch_unary(grit_call *c, grit_slice *framed,
                                size_t raw_len);
/* With c->mu held, on a user thread: the reader took |len| bytes from
 * recvq; resumes a paused stream once the queue has drained (FC-04). */
void grit_call_recv_taken_locked(grit_call *c, size_t len);
/* Loop: an attempt has handed |out| request bytes to HTTP/2; wakes
 * senders waiting for room, or calls on_send_ready (AP-03). */
void grit_call_on_send_progress(grit_call *c, uint64_t out);
/* With c->mu held: whether a message of |framed_len| bytes fits now. */
bool grit_call_send_room_locked(const grit_call *c, size_t framed_len);
void grit_call_unref(grit_call *c);

/* Loop halves. call.c: */
/* A local error ends the call (SPEC SM-01: fed to the machine as FAIL). */
void grit_call_fail_on_loop(grit_call *c, grit_status_code code,
                            const char *msg);
/* The machine's FINISH: the status goes to the application. */
void grit_call_end(grit_call *c, grit_status_code code, const char *msg,
                   const grit_metadata *trailers, grit_attempt_reason reason,
                   const call_attempt *peer);
void grit_call_deliver_headers(grit_call *c, const grit_metadata *md);
void grit_call_deliver_message(grit_call *c, grit_slice *msg);
void grit_call_loop_release(grit_call *c);
void grit_call_config_ready(grit_call *c);

/* call_exec.c: feeds the machine and runs its actions, never re-entering
 * it while a list runs (SPEC SM-01). */
void grit_call_sm_feed(grit_call *c, grit_callsm_event *ev);
/* An attempt's pick or stream start produced |kind| (PICK_FAILED with
 * |code|, |msg|, or STREAM_STARTED): fed now, or after the list that is
 * running. */
void grit_call_sm_attempt_event(call_attempt *a, grit_callsm_event_kind kind,
                                grit_status_code code, const char *msg);
/* The policy part (timers) of a call whose config |k| has a policy:
 * GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_call_sm_policy_init(grit_call *c, const grit_callsm_config *k);

/* attempt.c: what call_exec.c runs for the machine's attempt actions. */
/* The committed attempt, or NULL. */
call_attempt *grit_call_winner(const grit_call *c);
void grit_attempt_start(grit_call *c, const grit_callsm_action *act);
void grit_attempt_repick(call_attempt *a);
void grit_attempt_on_pick_ready(call_attempt *a);
/* Let go of |a| (the machine's DROP): cancel its stream (its on_done
 * frees it later) or its queued pick, or free it. */
void grit_attempt_drop(call_attempt *a);
/* Hand new replay items (and the half-close) to every live stream. */
void grit_attempt_flush_all(grit_call *c);
void grit_attempt_flush(call_attempt *a);

/* observe.c: the one place calls and attempts are reported (MX-03, OB-01,
 * OB-02). trace_setup runs at creation on the user thread: the caller's
 * traceparent (|opt_tp| or metadata), or |*why| and INVALID_ARG. */
grit_err grit_call_trace_setup(grit_call *c, const char *opt_tp,
                               const char **why);
void grit_obs_call_start(grit_call *c);
/* The metric series of a channel made for |target| (OP-01: canonical). */
grit_obs_target *grit_obs_channel_series(const char *target);
/* An attempt (or its transparent replay) starts: count it, new span. */
void grit_obs_attempt_start(call_attempt *a);
/* An attempt ended: its metrics and the observer record (MX-03). */
void grit_attempt_observe(call_attempt *a, grit_status_code code,
                          const char *msg, grit_attempt_reason reason);
void grit_obs_call_end(grit_call *c, grit_status_code code, const char *msg);
/* A channel is made or freed: scrapes read its buffer bytes (any thread). */
void grit_obs_channel_register(grit_channel *ch);
void grit_obs_channel_unregister(grit_channel *ch);
/* With no channel left in the process, free the metric series (their
 * counts start again from zero); returns whether it did. */
bool grit_obs_release_if_idle(void);
/* fork() (AP-06): hold the live-channel and registry locks across it. */
void grit_obs_fork_lock(void);
void grit_obs_fork_unlock(void);
/* OP-03: a reference and a runtime count on every channel not yet
 * destroyed by its user (|*out| new, release both with _release). */
grit_err grit_obs_channels_hold(grit_channel ***out, size_t *n);
void grit_obs_channels_release(grit_channel **v, size_t n);

/* compression.c: request compression (SPEC CP-01..CP-04). Whether
 * |v| names a codec (GRIT_ARG_DEFAULT_COMPRESSION); the codec a call with
 * option |opt| uses; one framed message for |c|, compressed unless
 * |flags| has GRIT_SEND_NO_COMPRESS (GRIT_OK, GRIT_ERR_NOMEM). */
bool grit_compression_arg_valid(const char *v);
grit_codec grit_call_codec(const grit_chan_opts *o, grit_compression opt);
grit_err grit_call_frame(const grit_call *c, const void *data, size_t len,
                         unsigned flags, grit_slice **out);

#endif
