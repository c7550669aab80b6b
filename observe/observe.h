/*
 * observe: metrics (gRFC A66, A96 instruments and histograms) with their
 * label bounds, their Prometheus text form, W3C trace context
 * (traceparent, gRFC A72), the OTLP span encoding and the admin endpoint's
 * HTTP request parser (SPEC OB-01, OB-02, OP-01..03). channel/ reports
 * attempt start, attempt end and call end here; the writer reads the same
 * cells from any thread. Recording is lock-free (relaxed atomics). It
 * knows nothing of the channel, the loop, the network or the clock.
 * Layout: floor 1 of docs/layout.md.
 */
#ifndef GRIT_OBSERVE_H
#define GRIT_OBSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/util.h"

/* Bucket sets: A66 latency (seconds, recorded in us), A66 size (bytes),
 * A96 counts (retries, hedges). */
typedef enum grit_obs_buckets {
  GRIT_OBS_B_NONE = 0, /* a counter */
  GRIT_OBS_B_LATENCY = 1,
  GRIT_OBS_B_SIZE = 2,
  GRIT_OBS_B_COUNT = 3,
} grit_obs_buckets;

/* What an instrument's series are per: the target (label grpc.target), the
 * method of the target (grpc.method, grpc.target), or the method and the
 * status a call or attempt ended with (grpc.method, grpc.status,
 * grpc.target), as A66 labels each. */
typedef enum grit_obs_scope {
  GRIT_OBS_S_TARGET = 0,
  GRIT_OBS_S_METHOD = 1,
  GRIT_OBS_S_STATUS = 2,
} grit_obs_scope;

/* Every instrument, once: ID, OpenTelemetry name, unit, buckets (NONE: a
 * monotonic counter), scope, help. A new instrument is one line here and
 * one grit_obs_add/_record (per method) or grit_obs_target_add/_record
 * (per target: resolutions, config updates, ejections) where it happens
 * (OB-01). */
#define GRIT_OBS_INSTRUMENTS(XX)                                               \
  XX(ATTEMPT_STARTED, "grpc.client.attempt.started", "{attempt}",              \
     GRIT_OBS_B_NONE, GRIT_OBS_S_METHOD,                                       \
     "Number of client call attempts started.")                                \
  XX(ATTEMPT_DURATION, "grpc.client.attempt.duration", "s",                    \
     GRIT_OBS_B_LATENCY, GRIT_OBS_S_STATUS,                                    \
     "End-to-end time taken to complete a client call attempt.")               \
  XX(ATTEMPT_SENT_SIZE,                                                        \
     "grpc.client.attempt.sent_total_compressed_message_size", "By",           \
     GRIT_OBS_B_SIZE, GRIT_OBS_S_STATUS,                                       \
     "Compressed message bytes sent per client call attempt.")                 \
  XX(ATTEMPT_RCVD_SIZE,                                                        \
     "grpc.client.attempt.rcvd_total_compressed_message_size", "By",           \
     GRIT_OBS_B_SIZE, GRIT_OBS_S_STATUS,                                       \
     "Compressed message bytes received per call attempt.")                    \
  XX(CALL_DURATION, "grpc.client.call.duration", "s", GRIT_OBS_B_LATENCY,      \
     GRIT_OBS_S_STATUS,                                                        \
     "Time taken by gRPC to complete an RPC from application's "               \
     "perspective.")                                                           \
  XX(CALL_RETRIES, "grpc.client.call.retries", "{retry}", GRIT_OBS_B_COUNT,    \
     GRIT_OBS_S_METHOD,                                                        \
     "Number of retries during the client call (not recorded "                 \
     "without retries).")                                                      \
  XX(CALL_TRANSPARENT_RETRIES, "grpc.client.call.transparent_retries",         \
     "{transparent_retry}", GRIT_OBS_B_COUNT, GRIT_OBS_S_METHOD,               \
     "Number of transparent retries during the client call (not recorded "     \
     "without any).")                                                          \
  XX(CALL_HEDGES, "grpc.client.call.hedges", "{hedge}", GRIT_OBS_B_COUNT,      \
     GRIT_OBS_S_METHOD,                                                        \
     "Number of hedges during the client call (not recorded without "          \
     "hedges).")                                                               \
  XX(CALL_RETRY_DELAY, "grpc.client.call.retry_delay", "s",                    \
     GRIT_OBS_B_LATENCY, GRIT_OBS_S_METHOD,                                    \
     "Total time of delay while there is no active attempt during the "        \
     "client call (recorded for calls with retries or hedges).")               \
  XX(CALL_THROTTLED, "grit.client.call.throttled", "{attempt}",                \
     GRIT_OBS_B_NONE, GRIT_OBS_S_METHOD,                                       \
     "Retries or hedges refused by retry throttling.")                         \
  XX(CHANNELS_CREATED, "grit.client.channel.created", "{channel}",             \
     GRIT_OBS_B_NONE, GRIT_OBS_S_TARGET, "Channels created for the target.")   \
  XX(DNS_LOOKUPS, "grit.client.dns.lookups", "{lookup}", GRIT_OBS_B_NONE,      \
     GRIT_OBS_S_TARGET, "DNS resolutions finished (SPEC DNS-10).")             \
  XX(DNS_LOOKUP_FAILURES, "grit.client.dns.lookup_failures", "{lookup}",       \
     GRIT_OBS_B_NONE, GRIT_OBS_S_TARGET,                                       \
     "DNS resolutions whose address lookup failed.")                           \
  XX(DNS_TXT_TIMEOUTS, "grit.client.dns.txt_timeouts", "{lookup}",             \
     GRIT_OBS_B_NONE, GRIT_OBS_S_TARGET,                                       \
     "DNS resolutions whose TXT answer came too late (SPEC DNS-07).")          \
  XX(CONFIG_UPDATES, "grit.client.config.updates", "{config}",                 \
     GRIT_OBS_B_NONE, GRIT_OBS_S_TARGET,                                       \
     "Changes of the service config in force.")                                \
  XX(CONFIG_REJECTIONS, "grit.client.config.rejections", "{config}",           \
     GRIT_OBS_B_NONE, GRIT_OBS_S_TARGET, "Service configs rejected.")          \
  XX(LB_EJECTIONS, "grit.client.lb.ejections", "{ejection}", GRIT_OBS_B_NONE,  \
     GRIT_OBS_S_TARGET,                                                        \
     "Addresses ejected by outlier detection (SPEC "                           \
     "OD-01).")                                                                \
  XX(LB_UNEJECTIONS, "grit.client.lb.unejections", "{ejection}",               \
     GRIT_OBS_B_NONE, GRIT_OBS_S_TARGET,                                       \
     "Ejected addresses let back in by outlier detection.")                    \
  XX(LB_HEALTH_NOT_SERVING, "grit.client.lb.health_not_serving", "{event}",    \
     GRIT_OBS_B_NONE, GRIT_OBS_S_TARGET,                                       \
     "READY backends whose health left SERVING (SPEC HC-01).")

typedef enum grit_obs_id {
#define GRIT_OBS_ID_GEN(id, name, unit, b, st, help) GRIT_OBS_##id,
  GRIT_OBS_INSTRUMENTS(GRIT_OBS_ID_GEN)
#undef GRIT_OBS_ID_GEN
      GRIT_OBS_N
} grit_obs_id;

/* Distinct methods a target labels by name; later ones are "other" (A66
 * bounds the cardinality of grpc.method). A safety cap: only registered
 * methods and those the service config names get a name at all (OP-01). */
#define GRIT_OBS_MAX_METHODS 64
/* Distinct targets labelled by name unless grit_obs_set_max_targets says
 * otherwise; later ones are GRIT_OBS_OTHER (OP-01, A66). */
#define GRIT_OBS_DEFAULT_MAX_TARGETS 100
#define GRIT_OBS_OTHER "other"
/* Methods the application may register (grit_metrics_register_method). */
#define GRIT_OBS_MAX_REGISTERED 1024

typedef struct grit_obs_target grit_obs_target;
typedef struct grit_obs_method grit_obs_method;

/* The process-wide series of |target|, created on first use and kept for
 * the life of the process (so a scrape sees counts of closed channels
 * too). Past the target bound, or when the filter declines it, the series
 * of GRIT_OBS_OTHER. NULL only on out-of-memory: then nothing is recorded. */
grit_obs_target *grit_obs_target_get(const char *target);
/* Bound on targets with a name of their own (OP-01); applies to targets
 * seen from now on. */
void grit_obs_set_max_targets(size_t n);
/* A target filter: true to label |target| by name (OP-01). Called once
 * per new target, under the registry lock: it must not call observe/. */
typedef bool (*grit_obs_target_filter_fn)(const char *target, void *data);
void grit_obs_set_target_filter(grit_obs_target_filter_fn fn, void *data);
/* Register |method| ("/pkg.S/M" or "pkg.S/M"; copied, until
 * grit_obs_release) as known: its series get its name (A66 generic methods).
 * Returns GRIT_OK, GRIT_ERR_INVALID_ARG (NULL or empty) or GRIT_ERR_NOMEM (the
 * table of GRIT_OBS_MAX_REGISTERED is full). */
grit_err grit_obs_method_register(const char *method);
/* Whether |method| (with or without its leading '/') was registered. */
bool grit_obs_method_registered(const char *method);
/* The existing series of |method| under |t|, or NULL; lock-free. */
grit_obs_method *grit_obs_method_find(grit_obs_target *t, const char *method);
/* Free every series and registered method (counts start again from
 * zero). Only while nothing
 * records or writes: no channel, call or scrape exists. */
void grit_obs_release(void);
/* fork() (SPEC AP-06): the registry lock, held across it by the runtime's
 * atfork handlers and released in parent and child. */
void grit_obs_registry_fork_lock(void);
void grit_obs_registry_fork_unlock(void);
/* The series of |method| under |t| ("other" past GRIT_OBS_MAX_METHODS).
 * Lock-free once it exists; NULL if |t| is NULL or on out-of-memory. */
grit_obs_method *grit_obs_method_get(grit_obs_target *t, const char *method);
/* What a method series begins with: whether it is a method's own (not
 * GRIT_OBS_OTHER's), its name's length and whether the name is all ASCII,
 * measured once when the series was made, so that OP-02 spans name the
 * method without measuring it per call. NULL |m|: NULL. */
typedef struct grit_obs_method_text {
  uint32_t len;
  bool ascii;
  bool own;
} grit_obs_method_text;
static inline const grit_obs_method_text *
grit_obs_method_text_of(const grit_obs_method *m) {
  return (const grit_obs_method_text *)(const void *)m; /* its first member */
}
/* The target string |t| was made for (borrowed, lives with the process). */
const char *grit_obs_target_name(const grit_obs_target *t);

/* Record. Each is a few relaxed atomic adds; |m| NULL is a no-op. |status|
 * is a grpc status code 0..16 for instruments labelled by status (others
 * ignore it). Values are in us for "s" units, else as counted. */
void grit_obs_add(grit_obs_method *m, grit_obs_id id, uint64_t n);
void grit_obs_record(grit_obs_method *m, grit_obs_id id, int status,
                     uint64_t value);
/* The same for GRIT_OBS_S_TARGET instruments; |t| NULL is a no-op. */
void grit_obs_target_add(grit_obs_target *t, grit_obs_id id, uint64_t n);
void grit_obs_target_record(grit_obs_target *t, grit_obs_id id, uint64_t value);
/* A subchannel of |t| (NULL: not recorded) moved between connectivity
 * states (grit_connectivity_state values; -1: created or destroyed). A
 * gauge per target and state. */
void grit_obs_subchannel_state(grit_obs_target *t, int from, int to);

/* Extra metric families computed at scrape time (gauges of other modules:
 * throttle tokens, buffers, subchannel states). The function appends
 * complete families in Prometheus text to |out| for |target| (NULL: all)
 * with grit_obs_write_gauge. Registered once per process; up to 8. */
typedef grit_err (*grit_obs_collector_fn)(grit_buf *out, const char *target);
void grit_obs_add_collector(grit_obs_collector_fn fn);
/* Append one gauge family with one sample per (label value, value):
 * name (already in Prometheus form), help, label name, then |n| pairs.
 * Nothing when |n| is 0. Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_obs_write_gauge(grit_buf *out, const char *name, const char *help,
                              const char *label, size_t n,
                              const char *const *label_values,
                              const double *values);

/* Text sources of other libraries (grit_metrics_source_cb): snprintf-style
 * writers of complete families, rendered when every target is (OP-01).
 * Up to GRIT_OBS_MAX_SOURCES; adding one twice is a no-op. Add: GRIT_OK,
 * GRIT_ERR_INVALID_ARG, GRIT_ERR_NOMEM (full). Remove: GRIT_OK or
 * GRIT_ERR_NOT_FOUND; after it returns the source is not running. */
#define GRIT_OBS_MAX_SOURCES 16
typedef size_t (*grit_obs_source_fn)(char *buf, size_t cap, void *data);
grit_err grit_obs_add_source(grit_obs_source_fn fn, void *data);
grit_err grit_obs_remove_source(grit_obs_source_fn fn, void *data);

/* Render the Prometheus text exposition (format 0.0.4, as the
 * OpenTelemetry exporter names things: dots become underscores, units
 * become suffixes, counters end in _total) of |target|'s series, or of
 * every target when NULL. Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_obs_write_prometheus(const char *target, grit_buf *out);

/* ---- HTTP/1.1 requests of the admin endpoint (SPEC OP-03) ---- */

/* Longest request head accepted (request line and headers). */
#define GRIT_HTTP_MAX_HEAD 8192
#define GRIT_HTTP_INCOMPLETE 0
#define GRIT_HTTP_DONE 1
#define GRIT_HTTP_BAD (-1)

typedef struct grit_http_req {
  char method[16]; /* "GET" */
  char path[256];  /* "/metrics", without the query */
  bool keep_alive; /* the connection stays open after the response */
  size_t consumed; /* bytes of |buf| the head took */
} grit_http_req;

/* Parse the head of one request at the start of |buf|: DONE (|out| set),
 * INCOMPLETE (read more), or BAD (malformed, over GRIT_HTTP_MAX_HEAD, or
 * with a body). */
int grit_http_parse_request(const char *buf, size_t len, grit_http_req *out);

/* ---- OTLP trace export (SPEC OP-02, gRFC A72) ---- */

/* One finished span, self-contained (it waits in the exporter's queue).
 * The I/O thread fills it in place in the exporter's ring with plain
 * copies (no formatting, no allocation): the texts are the raw bytes, cut
 * to fit, one after the other in |text| (the method, the peer, the status
 * message), so a span of an OK call touches the fixed fields and one
 * short run of bytes, two or three cache lines; the encoder (on the
 * exporter's thread) makes them valid UTF-8 and puts "Sent." or
 * "Attempt." before the method to name the span. */
#define GRIT_OTLP_METHOD_MAX 160
#define GRIT_OTLP_MESSAGE_MAX 160
#define GRIT_OTLP_PEER_MAX 64
typedef struct grit_otlp_span {
  uint8_t trace_id[16];
  uint8_t span_id[8];
  uint8_t parent_span_id[8];
  uint64_t start_ns, end_ns; /* Unix time */
  int32_t code;              /* grpc status */
  uint32_t previous_rpc_attempts;
  uint32_t attempts;
  uint16_t method_len, peer_len, message_len;
  bool has_parent;
  bool attempt; /* INTERNAL attempt span; else the call's CLIENT span */
  bool transparent_retry;
  bool method_ascii; /* the method is all ASCII: the encoder need not check */
  uint8_t flags;
  /* "pkg.Service/Method" (no '/'), then the peer, then the message. */
  char text[GRIT_OTLP_METHOD_MAX + GRIT_OTLP_PEER_MAX + GRIT_OTLP_MESSAGE_MAX];
} grit_otlp_span;

#define GRIT_OTLP_METHOD(s) ((s)->text)
#define GRIT_OTLP_PEER(s) ((s)->text + (s)->method_len)
#define GRIT_OTLP_MESSAGE(s) ((s)->text + (s)->method_len + (s)->peer_len)

/* Copy at most |cap| bytes of |src| into |dst| (no NUL); returns how many.
 * The call path's only text work: a bounded length and a memcpy. */
uint16_t grit_otlp_put_text(char *dst, size_t cap, const char *src);
/* Make the |n| bytes at |s| valid UTF-8 in place, as protobuf strings
 * must be, keeping the length: each byte that does not start a valid
 * sequence (a stray byte, an overlong form, a surrogate, a sequence cut
 * by the end) becomes '?'. */
void grit_otlp_fix_text(char *s, size_t n);
/* True when the |n| bytes at |p| are all ASCII (so valid UTF-8): 8 bytes
 * a load, the last load overlapping the one before, so a 34-byte method
 * name is 5 loads. */
static inline bool grit_otlp_ascii(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t w, acc = 0;
  if (n >= 8) {
    size_t i = 0;
    for (; i + 8 < n; i += 8) {
      memcpy(&w, b + i, 8);
      acc |= w;
    }
    memcpy(&w, b + n - 8, 8);
    return ((acc | w) & 0x8080808080808080u) == 0;
  }
  for (size_t i = 0; i < n; i++)
    acc |= b[i];
  return (acc & 0x80) == 0;
}
/* Fill |s|'s texts: |method_len| bytes of |method| (at most
 * GRIT_OTLP_METHOD_MAX, measured once per call by the caller), |peer_len|
 * bytes of |peer| (cut to GRIT_OTLP_PEER_MAX), then |msg| (NUL-terminated,
 * cut to its maximum; "" for none). */
static inline void grit_otlp_set_texts(grit_otlp_span *s, const char *method,
                                       size_t method_len, const char *peer,
                                       size_t peer_len, const char *msg) {
  memcpy(s->text, method, method_len);
  s->method_len = (uint16_t)method_len;
  if (peer_len > GRIT_OTLP_PEER_MAX)
    peer_len = GRIT_OTLP_PEER_MAX;
  memcpy(s->text + method_len, peer, peer_len);
  s->peer_len = (uint16_t)peer_len;
  s->message_len = msg[0] ? grit_otlp_put_text(GRIT_OTLP_MESSAGE(s),
                                               GRIT_OTLP_MESSAGE_MAX, msg)
                          : 0;
}
/* Append the ExportTraceServiceRequest of |spans| (resource service.name
 * |service_name|) to |out|: each span named "Sent.<method>" (the call) or
 * "Attempt.<method>", its texts made valid UTF-8 on the way (the records
 * are not changed). GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_otlp_encode(const grit_otlp_span *spans, size_t n,
                          const char *service_name, grit_buf *out);
/* The same request in a slice of |head| bytes left for the caller (a gRPC
 * message prefix) and the request after them: the exporter sends it as it
 * is, without a framing copy. |*io| is NULL or a slice of |*cap| bytes
 * whose only reference the caller holds: reused when large enough (its
 * len set), else released and replaced by a new one (|*cap| updated), so
 * an exporter allocates once, not per batch. GRIT_OK or GRIT_ERR_NOMEM
 * (*io NULL). */
grit_err grit_otlp_encode_slice(const grit_otlp_span *spans, size_t n,
                                const char *service_name, size_t head,
                                grit_slice **io, size_t *cap);

/* ---- W3C trace context (traceparent), gRFC A72 ---- */

typedef struct grit_traceparent {
  uint8_t trace_id[16];
  uint8_t span_id[8]; /* the parent's span: the caller's, or an attempt's */
  uint8_t flags;
} grit_traceparent;

/* "00-" 32 hex "-" 16 hex "-" 2 hex, plus NUL. */
#define GRIT_TRACEPARENT_LEN 55

/* Parse |s| (|len| bytes) as a W3C traceparent: lower-case hex, version not
 * "ff", version 00 exactly 55 characters (a later version may carry more
 * after a '-'), trace id and span id not all zero. Returns GRIT_OK or
 * GRIT_ERR_INVALID_ARG. */
grit_err grit_traceparent_parse(const char *s, size_t len,
                                grit_traceparent *out);
/* Format |tp| as version 00 into |out| (GRIT_TRACEPARENT_LEN + 1 bytes). */
void grit_traceparent_format(const grit_traceparent *tp, char *out);
/* The same from ids already in hex: |trace_hex| 32 and |span_hex| 16
 * lower-case digits (as grit_obs_hex writes them), and |flags|. */
void grit_traceparent_compose(const char *trace_hex, const char *span_hex,
                              uint8_t flags, char *out);
/* Lower-case hex of |n| bytes into |out| (2n + 1 bytes). */
void grit_obs_hex(const uint8_t *p, size_t n, char *out);

#endif
