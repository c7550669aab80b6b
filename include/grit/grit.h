/*
 * grit: a gRPC client channel in C.
 *
 * This header is the whole public API. It includes only libc headers.
 *
 * Threading: every function may be called from any thread unless its
 * comment says otherwise. Work is handed to the runtime's I/O thread (a libuv
 * loop); blocking functions wait for it. Callbacks run on the I/O thread and
 * must not block it; inside a callback every grit function is safe except the
 * blocking ones (they would wait for the thread they run on and return
 * GRIT_ERR_WOULD_DEADLOCK).
 *
 * Lifetimes (SPEC AP-06; docs/security.md), the rules every function below
 * follows:
 *  - A destroyed handle (channel, call, runtime, metadata, args) must not be
 *    used again, as after free(): pass it to no grit function, not even a
 *    second destroy, and do not race a destroy against other use of the
 *    same handle from another thread.
 *  - A call may outlive its channel: grit_channel_destroy ends the
 *    channel's calls CANCELLED, and each call handle stays valid (every
 *    grit_call_* function answers as for an ended call) until its own
 *    grit_call_destroy, which frees the last of the channel.
 *  - Inside a call's callbacks, grit_call_destroy of that call and
 *    grit_channel_destroy of its channel are safe; both return at once.
 *  - A runtime (grit_runtime_destroy, grit_default_runtime_shutdown) stops
 *    once its channels are destroyed, even while call handles made on them
 *    are open; those stay valid as above.
 *
 * fork() (SPEC AP-06): in a child process, the default runtime starts
 * afresh on first use, so new channels work. Objects made before the fork
 * (channels, calls, runtimes) belong to the parent: their thread does not
 * exist in the child, so every function on them answers at once, never
 * waits: calls fail with GRIT_ERR_SHUTDOWN (a filled status is UNAVAILABLE
 * saying "created before fork()"), grit_channel_get_state gives
 * GRIT_STATE_SHUTDOWN, and their destroy functions release nothing (the
 * memory is the parent's snapshot). The parent's objects are unharmed.
 * Calling fork() from a grit callback is not supported.
 *
 * Ownership words, as in jansson: "copied" (grit keeps its own copy, the
 * default), "borrowed, valid while ..." (grit or the caller keeps ownership),
 * "new" (the receiver must release it with the named function).
 *
 * Structs that grow (docs/abi.md): a result struct the caller allocates and
 * grit fills (grit_channel_stats, grit_call_info, grit_service_config_info)
 * begins with |size|, which the caller sets to sizeof the struct as its
 * grit.h declares it (the GRIT_..._INIT macros do). grit writes only the
 * fields that fit in |size| bytes, and zeroes what it does not know, so a
 * program built against an older grit.h keeps working with a newer
 * library of the same soname. Input structs grow the same way by their
 * |version| (grit_call_opts, grit_call_cbs). The other public structs
 * (grit_allocator, grit_error_detail, grit_bytes, grit_status) are frozen:
 * they never change within a soname.
 */
#ifndef GRIT_GRIT_H
#define GRIT_GRIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grit/grit_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(BUILDING_GRIT) && defined(__GNUC__)
#  define GRIT_EXTERN __attribute__((visibility("default")))
#else
#  define GRIT_EXTERN
#endif

/* ------------------------------------------------------------------------
 * Library errors. A grit_err says whether a library call worked; it is never
 * a gRPC status. Values are stable: never renumbered or removed. Errors are
 * negative; GRIT_OK and the positive results (GRIT_END_OF_STREAM) are not
 * errors.
 */
#define GRIT_ERR_MAP(XX)                                                       \
  XX(OK, 0, "success")                                                         \
  XX(END_OF_STREAM, 1, "end of the response stream")                           \
  XX(ERR_NOMEM, -1, "out of memory")                                           \
  XX(ERR_INVALID_ARG, -2, "invalid argument")                                  \
  XX(ERR_INVALID_TARGET, -3, "invalid target")                                 \
  XX(ERR_INVALID_CONFIG, -4, "invalid service config")                         \
  XX(ERR_INVALID_METADATA, -5, "invalid metadata key or value")                \
  XX(ERR_SHUTDOWN, -6, "object is shutting down")                              \
  XX(ERR_CALL_STATE, -7, "operation not valid in the call's state")            \
  XX(ERR_SYSTEM, -8, "system call failed")                                     \
  XX(ERR_TLS, -9, "TLS set-up failed")                                         \
  XX(ERR_WOULD_DEADLOCK, -10, "blocking call made on the I/O thread")          \
  XX(ERR_PARSE, -11, "input could not be parsed")                              \
  XX(ERR_TIMEOUT, -12, "timed out")                                            \
  XX(ERR_NOT_FOUND, -13, "not found")                                          \
  XX(ERR_BUSY, -14, "still in use")                                            \
  XX(ERR_AGAIN, -15, "not now: the call's send buffer is full")

typedef enum grit_err {
#define GRIT_ERR_GEN(name, val, text) GRIT_##name = (val),
  GRIT_ERR_MAP(GRIT_ERR_GEN)
#undef GRIT_ERR_GEN
} grit_err;

/** Describe a library error in plain words.
 *
 * Ownership: returns a static string. Thread: any.
 * Returns "unknown error" for values outside GRIT_ERR_MAP. */
GRIT_EXTERN const char *grit_strerror(grit_err err);

/** Name of a library error ("ERR_NOMEM"), "OK" for GRIT_OK.
 *
 * Ownership: static string. Thread: any. Unknown values give "UNKNOWN". */
GRIT_EXTERN const char *grit_err_name(grit_err err);

/* ------------------------------------------------------------------------
 * gRPC status codes, 0..16 as on the wire.
 */
#define GRIT_STATUS_MAP(XX)                                                    \
  XX(OK, 0)                                                                    \
  XX(CANCELLED, 1)                                                             \
  XX(UNKNOWN, 2)                                                               \
  XX(INVALID_ARGUMENT, 3)                                                      \
  XX(DEADLINE_EXCEEDED, 4)                                                     \
  XX(NOT_FOUND, 5)                                                             \
  XX(ALREADY_EXISTS, 6)                                                        \
  XX(PERMISSION_DENIED, 7)                                                     \
  XX(RESOURCE_EXHAUSTED, 8)                                                    \
  XX(FAILED_PRECONDITION, 9)                                                   \
  XX(ABORTED, 10)                                                              \
  XX(OUT_OF_RANGE, 11)                                                         \
  XX(UNIMPLEMENTED, 12)                                                        \
  XX(INTERNAL, 13)                                                             \
  XX(UNAVAILABLE, 14)                                                          \
  XX(DATA_LOSS, 15)                                                            \
  XX(UNAUTHENTICATED, 16)

typedef enum grit_status_code {
#define GRIT_STATUS_GEN(name, val) GRIT_STATUS_##name = (val),
  GRIT_STATUS_MAP(GRIT_STATUS_GEN)
#undef GRIT_STATUS_GEN
} grit_status_code;

#define GRIT_STATUS_COUNT 17

/** Canonical upper-case name of a status code ("UNAVAILABLE").
 *
 * Ownership: static string. Thread: any. Values outside 0..16 give NULL. */
GRIT_EXTERN const char *grit_status_code_name(grit_status_code code);

/** Parse a status code name, case-insensitively ("unavailable" -> 14).
 *
 * |name| is |len| bytes, not necessarily NUL-terminated.
 * Thread: any.
 * Returns GRIT_OK and sets |*out|, or GRIT_ERR_NOT_FOUND. */
GRIT_EXTERN grit_err grit_status_code_parse(const char *name, size_t len,
                                            grit_status_code *out);

/* ------------------------------------------------------------------------
 * Allocator hook, shaped like nghttp2_mem. Install it before any other grit
 * call; it applies to the whole process's use of grit (and to nghttp2
 * sessions grit creates). grit never changes a dependency's global hooks.
 */
typedef struct grit_allocator {
  void *user_data;
  void *(*malloc)(size_t size, void *user_data);
  void (*free)(void *ptr, void *user_data);
  void *(*calloc)(size_t nmemb, size_t size, void *user_data);
  void *(*realloc)(void *ptr, size_t size, void *user_data);
} grit_allocator;

/** Install |a| as the allocator for everything grit allocates, or restore
 * libc's when |a| is NULL.
 *
 * Ownership: copied. Thread: any, but only while no grit object exists.
 * Returns nothing. */
GRIT_EXTERN void grit_set_allocator(const grit_allocator *a);

/** Release memory grit returned as "new, release with grit_free".
 *
 * Thread: any. NULL is a no-op. */
GRIT_EXTERN void grit_free(void *ptr);

/** Allocate |size| bytes through the allocator grit_set_allocator
 * installed (libc's by default). With grit_allocator_free it has the shape
 * of protobuf-c's ProtobufCAllocator (alloc, free, allocator_data), which
 * is how code generated by protoc-gen-grit hands grit's allocator to
 * protobuf-c. |allocator_data| is ignored.
 *
 * Ownership: new; release with grit_allocator_free or grit_free.
 * Thread: any. Returns NULL when out of memory. */
GRIT_EXTERN void *grit_allocator_alloc(void *allocator_data, size_t size);

/** Release |ptr| from grit_allocator_alloc. |allocator_data| is ignored.
 * Thread: any. NULL is a no-op. */
GRIT_EXTERN void grit_allocator_free(void *allocator_data, void *ptr);

/* ------------------------------------------------------------------------
 * Error detail for parsers: the code, the JSON path of the offending value
 * ("$.methodConfig[1].retryPolicy.maxAttempts") and the rule broken. Lives
 * in caller storage.
 */
typedef struct grit_error_detail {
  grit_err code;
  char path[256];
  char reason[256];
} grit_error_detail;

/* ------------------------------------------------------------------------
 * Byte buffers handed to the caller.
 */
typedef struct grit_bytes {
  uint8_t *data; /* new; release with grit_bytes_free */
  size_t len;
} grit_bytes;

/** Release the data of |b| and set it empty. Thread: any. NULL is a no-op. */
GRIT_EXTERN void grit_bytes_free(grit_bytes *b);

/* ------------------------------------------------------------------------
 * Metadata: an ordered list of (key, value) pairs. Keys are lower-case
 * [0-9a-z_.-]; keys ending in "-bin" carry arbitrary bytes (grit base64s
 * them on the wire and decodes received ones); other values are printable
 * ASCII (0x20-0x7E). Reserved keys (":..." names, "content-type", "te",
 * "user-agent", "grpc-*") cannot be added by the application.
 */
typedef struct grit_metadata grit_metadata;

/** Create an empty metadata list.
 *
 * Ownership: |*out| is new; release with grit_metadata_destroy.
 * Thread: any.
 * Returns GRIT_OK, or GRIT_ERR_NOMEM (|*out| set to NULL). */
GRIT_EXTERN grit_err grit_metadata_create(grit_metadata **out);

/** Destroy |md|. Thread: any. NULL is a no-op. */
GRIT_EXTERN void grit_metadata_destroy(grit_metadata *md);

/** Append one pair. |key| is NUL-terminated; |value| is |len| bytes.
 *
 * Ownership: key and value copied. Thread: any, one thread at a time per
 * list.
 * Returns GRIT_OK; GRIT_ERR_INVALID_METADATA if the key is not lower-case
 * [0-9a-z_.-], is reserved, or a non-"-bin" value has a byte outside
 * 0x20-0x7E; GRIT_ERR_INVALID_ARG if |md| or |key| is NULL;
 * GRIT_ERR_NOMEM. On error the list is unchanged. */
GRIT_EXTERN grit_err grit_metadata_add(grit_metadata *md, const char *key,
                                       const void *value, size_t len);

/** Number of pairs in |md| (0 for NULL). Thread: any. */
GRIT_EXTERN size_t grit_metadata_count(const grit_metadata *md);

/** The |i|-th pair, in insertion (or wire) order.
 *
 * Ownership: |*key| and |*value| are borrowed, valid while |md| lives
 * unchanged. |*value| is followed by a NUL byte not counted in |*len|.
 * Thread: any.
 * Returns GRIT_OK, or GRIT_ERR_INVALID_ARG when |i| is out of range. */
GRIT_EXTERN grit_err grit_metadata_get(const grit_metadata *md, size_t i,
                                       const char **key, const uint8_t **value,
                                       size_t *len);

/** The first value for |key|, or NULL (and |*len| untouched) if absent.
 *
 * Ownership: borrowed, valid while |md| lives unchanged. |len| may be NULL.
 * Thread: any. */
GRIT_EXTERN const uint8_t *grit_metadata_find(const grit_metadata *md,
                                              const char *key, size_t *len);

/** Remove every pair whose key is |key| (an interceptor replacing a value
 * removes it, then adds the new one). Pointers from grit_metadata_get and
 * grit_metadata_find into |md| are invalid afterwards.
 * Thread: any, one thread at a time per list.
 * Returns the number of pairs removed (0 for NULL arguments). */
GRIT_EXTERN size_t grit_metadata_remove(grit_metadata *md, const char *key);

/* ------------------------------------------------------------------------
 * Status: the outcome of a call.
 *
 * A function that fills a caller's grit_status (grit_unary_call,
 * grit_call_finish) fills it on every return, including its own errors:
 * then the code is never OK and the message says what was wrong, e.g.
 * "invalid argument: the method must be ...". Its grit_err maps to the
 * code as follows: GRIT_ERR_INVALID_ARG -> INVALID_ARGUMENT;
 * GRIT_ERR_SHUTDOWN -> UNAVAILABLE; GRIT_ERR_NOMEM -> RESOURCE_EXHAUSTED;
 * GRIT_ERR_CALL_STATE and GRIT_ERR_WOULD_DEADLOCK -> FAILED_PRECONDITION;
 * anything else -> INTERNAL. So checking st.code alone never mistakes a
 * call that did not run for a success.
 */
typedef struct grit_status {
  grit_status_code code;
  char *message;           /* decoded grpc-message; never NULL once set */
  grit_metadata *trailers; /* trailing metadata; never NULL once set */
} grit_status;

/** Release what a status filled by grit holds and zero it. Thread: any.
 * NULL is a no-op. */
GRIT_EXTERN void grit_status_free(grit_status *st);

/** Replace the code and message of a status grit filled, keeping its
 * trailers: for generated stubs (protoc-gen-grit) that end a call
 * INTERNAL when a response does not decode.
 *
 * Ownership: |message| copied (NULL means ""); the old message is freed.
 * Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (|st| NULL); GRIT_ERR_NOMEM (the
 * code is set, the message says it ran out of memory). */
GRIT_EXTERN grit_err grit_status_replace(grit_status *st, grit_status_code code,
                                         const char *message);

/* ------------------------------------------------------------------------
 * Runtime: a libuv loop on its own I/O thread.
 */
typedef struct grit_runtime grit_runtime;

/** Create a runtime and start its I/O thread.
 *
 * Ownership: |*out| is new; release with grit_runtime_destroy after every
 * channel using it is destroyed.
 * Thread: any.
 * Returns GRIT_OK; GRIT_ERR_NOMEM; GRIT_ERR_SYSTEM if the loop or thread
 * could not be started. |*out| is NULL on error. */
GRIT_EXTERN grit_err grit_runtime_create(grit_runtime **out);

/** Stop the I/O thread and release the runtime. Destroy every channel on it
 * first: a channel still open is a caller bug (its connections may keep
 * the thread, and this call, waiting; once the thread has ended the
 * channel cannot be destroyed). Call handles made on its destroyed channels
 * may still be open; they stay valid (Lifetimes, above), and the last of
 * them frees what is left of the runtime. Must not be called from the
 * runtime's own thread (there it does nothing). In a fork()ed child, on a
 * runtime made before the fork, it returns at once. Thread: any other.
 * NULL is a no-op. */
GRIT_EXTERN void grit_runtime_destroy(grit_runtime *rt);

/** Stop the shared default runtime (the one channels created with a NULL
 * runtime use): end its I/O thread and free it, so that a program can exit
 * with nothing of grit's left (valgrind-clean). Call it after destroying
 * every channel created on the default runtime; call handles made on them
 * may still be open (they have ended, and stay valid until
 * grit_call_destroy, which frees the rest). A later grit_channel_create
 * with a NULL runtime starts a new one.
 *
 * It returns once the I/O thread has ended: connections still closing are
 * closed first. The xDS client of "xds:///" channels (its ADS stream and
 * channel, on this runtime) ends in the background once its last channel
 * is destroyed: it waits up to 10 s for that first. Calling it when the default
 * runtime never started, or again after it stopped, does nothing and returns
 * GRIT_OK; concurrent calls wait for the one that stops it. When no channel is
 * left in the process (on any runtime), it also frees the process's metric
 * series (grit_metrics_write_prometheus then starts again from zero); do not
 * call it while another thread renders metrics.
 *
 * Ownership: none. Thread: any but the default runtime's I/O thread.
 * Returns GRIT_OK; GRIT_ERR_BUSY if a channel created on the default
 * runtime has not been destroyed (nothing is stopped; destroy it and call
 * again); GRIT_ERR_WOULD_DEADLOCK when called from a grit callback on the
 * default runtime's thread. */
GRIT_EXTERN grit_err grit_default_runtime_shutdown(void);

/* ------------------------------------------------------------------------
 * Attempt records (SPEC MX-03): one per attempt, to an optional observer.
 */

/** Kind of attempt: the first one, a retry after a failure (RT-*), a
 * hedge (HG-*), or the first or a retry replayed transparently (TR-*). */
#define GRIT_ATTEMPT_KIND_MAP(XX)                                              \
  XX(FIRST, 0)                                                                 \
  XX(RETRY, 1)                                                                 \
  XX(HEDGE, 2)                                                                 \
  XX(TRANSPARENT, 3)

typedef enum grit_attempt_kind {
#define GRIT_ATTEMPT_KIND_GEN(name, val) GRIT_ATTEMPT_##name = (val),
  GRIT_ATTEMPT_KIND_MAP(GRIT_ATTEMPT_KIND_GEN)
#undef GRIT_ATTEMPT_KIND_GEN
} grit_attempt_kind;

/** Short name of an attempt kind ("HEDGE"); NULL for unknown values.
 * Ownership: static. Thread: any. */
GRIT_EXTERN const char *grit_attempt_kind_name(grit_attempt_kind k);

/** Why no further attempt followed an attempt (SPEC MX-03), or
 * GRIT_REASON_NONE when one did. */
#define GRIT_REASON_MAP(XX)                                                    \
  XX(NONE, 0, "another attempt followed")                                      \
  XX(OK, 1, "succeeded")                                                       \
  XX(COMMITTED, 2, "committed by response headers or a message")               \
  XX(NO_POLICY, 3, "no retry or hedging policy")                               \
  XX(NON_RETRYABLE, 4, "status code not retryable")                            \
  XX(THROTTLED, 5, "retry throttling")                                         \
  XX(EXHAUSTED, 6, "maxAttempts reached")                                      \
  XX(PUSHBACK, 7, "server pushback said do not retry")                         \
  XX(DEADLINE, 8, "deadline")                                                  \
  XX(CANCELLED, 9, "cancelled by the application")                             \
  XX(BUFFER, 10, "replay buffer limit reached")                                \
  XX(DISABLED, 11, "retries disabled by channel argument")                     \
  XX(HEDGE_LOST, 12, "another hedge won")                                      \
  XX(FATAL, 13, "fatal status for hedging")                                    \
  XX(DROPPED, 14, "dropped by the load balancer")

typedef enum grit_attempt_reason {
#define GRIT_REASON_GEN(name, val, text) GRIT_REASON_##name = (val),
  GRIT_REASON_MAP(GRIT_REASON_GEN)
#undef GRIT_REASON_GEN
} grit_attempt_reason;

/** Short name of a reason ("EXHAUSTED"); NULL for unknown values.
 * Ownership: static. Thread: any. */
GRIT_EXTERN const char *grit_attempt_reason_name(grit_attempt_reason r);

/** One attempt, as it ended. Every pointer is borrowed for the callback. */
typedef struct grit_attempt_record {
  uint64_t call_id;   /* grit_call_info.call_id of its call */
  const char *method; /* "/pkg.Service/Method" */
  uint32_t attempt;   /* 1-based; a transparent retry keeps the number */
  grit_attempt_kind kind;
  const char *peer;  /* "" if no stream was opened */
  uint64_t start_us; /* monotonic clock, microseconds */
  uint64_t end_us;
  grit_status_code code; /* how this attempt ended */
  const char *message;
  uint64_t backoff_ms;        /* waited before this attempt */
  bool pushback;              /* that wait came from grpc-retry-pushback-ms */
  grit_attempt_reason reason; /* why nothing followed, or NONE */
  /** Backends the load balancer passed over when it picked this attempt's,
   * each with why: "127.0.0.1:5001 (ejected by outlier
   * detection), 127.0.0.1:5002 (health: not SERVING)"; "" if none. Lists
   * the backends that health checks or outlier detection keep out of
   * rotation at the time of the pick. */
  const char *skipped;
  /** The call's request encoding ("identity", "gzip", "deflate"; SPEC
   * CP-01) and the response's grpc-encoding ("" if the server sent none). */
  const char *request_encoding;
  const char *response_encoding;
  /* Trace context (SPEC OB-02, gRFC A72), "" when it is off: the call's
   * trace id (32 hex digits), this attempt's span id (16 hex digits, the
   * one its traceparent header carried; a transparent retry gets its own)
   * and the caller's span id (its parent; "" if the trace was made
   * fresh). */
  const char *trace_id;
  const char *span_id;
  const char *parent_span_id;
  /* A72 attributes: grpc-previous-rpc-attempts sent with this attempt,
   * and whether it replays one the server never saw (TR-*). The peer is
   * |peer| above. */
  uint32_t previous_rpc_attempts;
  bool transparent_retry;
  /** How the load balancer chose this attempt's backend, where the policy
   * says (SPEC LP-02..LP-04): "weighted_round_robin: weight 4.9 (57.1% of
   * picks)", "ring_hash_experimental: header hash 1f2e..., ring entry 17
   * of 1024", "least_request_experimental: 0 outstanding (best of 2)",
   * "round_robin", "pick_first"; "" when the attempt had no pick. */
  const char *picked_by;
} grit_attempt_record;

/** Observer callback: runs on the I/O thread for every attempt of every
 * call of the channel, before the call's own completion callback. */
typedef void (*grit_attempt_observer_cb)(const grit_attempt_record *rec,
                                         void *user_data);

/* ------------------------------------------------------------------------
 * Channel arguments: string keys with typed values. Unknown keys are an
 * error, so a typo never passes silently.
 */
typedef struct grit_channel_args grit_channel_args;

/** String. A default service config JSON, used when the resolver gives none
 * (SPEC SC-03). It must be valid, or channel creation fails. */
#define GRIT_ARG_SERVICE_CONFIG "grit.service_config"
/** Int 0/1. Ignore service configs from the resolver (SPEC SC-03). */
#define GRIT_ARG_IGNORE_RESOLVER_CONFIG "grit.ignore_resolver_config"
/** Int 0/1, default 0. Look up _grpc_config.<host> TXT records (DNS-01). */
#define GRIT_ARG_DNS_ENABLE_TXT "grit.dns_enable_txt"
/** String "addr:port[,addr:port...]". DNS servers for dns: targets, tried
 * in order; default: the system's. Each address is an IPv4 literal or a
 * bracketed IPv6 one ("127.0.0.1:53", "[::1]:5353"), each port a decimal
 * 1..65535; no host names, spaces or empty entries. A malformed value makes
 * grit_channel_create fail with GRIT_ERR_INVALID_ARG, whatever the target.
 * A dns://authority/ in the target takes precedence over it. */
#define GRIT_ARG_DNS_SERVER "grit.dns_server"
/** Int ms, default 30000. Minimum time between re-resolutions (DNS-05). */
#define GRIT_ARG_DNS_MIN_RERESOLVE_MS "grit.dns_min_reresolve_ms"
/** Int, default 5. Cap on maxAttempts in retry and hedging policies. */
#define GRIT_ARG_MAX_ATTEMPTS_CAP "grit.max_attempts_cap"
/** Int 0/1, default 1. 0 disables retries, hedging and transparent retries. */
#define GRIT_ARG_ENABLE_RETRIES "grit.enable_retries"
/** Int bytes, default 262144. Replay buffer limit per call (RT-07). */
#define GRIT_ARG_PER_CALL_RETRY_BUFFER "grit.per_call_retry_buffer_size"
/** Int bytes 1..2^31, default 65536. Bound on a call's unsent request
 * bytes (SPEC AP-03): grit_call_send waits, and grit_call_try_send
 * refuses, while accepting a message would take the bytes the call has
 * queued but not yet handed to HTTP/2 past it. A message is always
 * accepted when nothing is unsent, whatever its size. */
#define GRIT_ARG_PER_CALL_SEND_BUFFER "grit.per_call_send_buffer_size"
/** Int bytes, default 16 MiB. Replay buffer limit per channel (RT-07). */
#define GRIT_ARG_PER_CHANNEL_RETRY_BUFFER "grit.per_channel_retry_buffer_size"
/** Int. Seed for the channel's backoff PRNG; unset = random (RT-03). */
#define GRIT_ARG_RNG_SEED "grit.rng_seed"
/** Int bytes, default 4194304; -1 unlimited. Largest response message. */
#define GRIT_ARG_MAX_RECV_MESSAGE "grit.max_receive_message_length"
/** Int bytes, default -1 (unlimited). Largest request message. */
#define GRIT_ARG_MAX_SEND_MESSAGE "grit.max_send_message_length"
/** Int bytes, default 16384. Largest response header list (HS-06). */
#define GRIT_ARG_MAX_HEADER_LIST "grit.max_metadata_size"
/** String. :authority for every call (default: the target's host:port). */
#define GRIT_ARG_DEFAULT_AUTHORITY "grit.default_authority"
/** Int 0/1. The channel's security, chosen explicitly (SPEC AP-05, HS-07):
 * 1 is TLS (the anchors' SslCredentials), 0 is an explicit insecure choice
 * (their InsecureChannelCredentials). The rule, the one place it is said:
 *  - TLS material implies TLS: setting any TLS-only argument (every
 *    GRIT_ARG_TLS_* key below) without GRIT_ARG_TLS makes the channel TLS;
 *    nothing configured as secure ever goes out in cleartext.
 *  - TLS material with GRIT_ARG_TLS set to 0 is a contradiction:
 *    grit_channel_create refuses it with GRIT_ERR_INVALID_ARG, the
 *    detail's path naming the TLS argument.
 *  - No argument at all (NULL args, or neither GRIT_ARG_TLS nor any TLS
 *    material) is cleartext; set GRIT_ARG_TLS to 0 to make
 *    that choice visible in your code. */
#define GRIT_ARG_TLS "grit.tls"
/** String path. PEM root certificates; default: the system store. */
#define GRIT_ARG_TLS_ROOT_CERTS_FILE "grit.tls_root_certs_file"
/** String. PEM root certificates given as text (gRPC's pem_root_certs);
 * with GRIT_ARG_TLS_ROOT_CERTS_FILE, both are trusted; either one replaces
 * the system store. Text holding no certificate fails channel creation
 * with GRIT_ERR_TLS. */
#define GRIT_ARG_TLS_ROOT_CERTS "grit.tls_root_certs"
/** String path. PEM client certificate chain (with the key below). */
#define GRIT_ARG_TLS_CERT_CHAIN_FILE "grit.tls_cert_chain_file"
/** String path. PEM private key of the client certificate. */
#define GRIT_ARG_TLS_PRIVATE_KEY_FILE "grit.tls_private_key_file"
/** String. Name used for SNI and hostname checks instead of the target host
 * (tests; the gRPC "ssl_target_name_override"). */
#define GRIT_ARG_TLS_TARGET_NAME_OVERRIDE "grit.tls_target_name_override"
/** Int 0/1, default 1. Verify the server's hostname (TLS material: see
 * GRIT_ARG_TLS). */
#define GRIT_ARG_TLS_VERIFY_HOSTNAME "grit.tls_verify_hostname"
/** Int 0/1, default 0. 1: accept any server certificate, no chain or
 * hostname check (issue 29; `grit call --insecure`). The connection is
 * still encrypted but not authenticated: anyone on the path can read and
 * change the calls. For tests against self-signed servers only; a
 * channel with it set logs nothing of its own, callers should say so. */
#define GRIT_ARG_TLS_SKIP_VERIFY "grit.tls_skip_verify"
/** Int ms, defaults 1000, 120000, 20000. Reconnect backoff (CB-01). */
#define GRIT_ARG_INITIAL_RECONNECT_BACKOFF_MS                                  \
  "grit.initial_reconnect_backoff_ms"
#define GRIT_ARG_MAX_RECONNECT_BACKOFF_MS "grit.max_reconnect_backoff_ms"
#define GRIT_ARG_MIN_CONNECT_TIMEOUT_MS "grit.min_connect_timeout_ms"
/** Int ms, default 0 (off). HTTP/2 keepalive ping interval (LB-04). */
#define GRIT_ARG_KEEPALIVE_TIME_MS "grit.keepalive_time_ms"
/** Int ms, default 20000. Keepalive ping ack timeout. */
#define GRIT_ARG_KEEPALIVE_TIMEOUT_MS "grit.keepalive_timeout_ms"
/** Int 0/1, default 0. Send keepalive pings with no calls in flight. */
#define GRIT_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS                                \
  "grit.keepalive_permit_without_calls"
/** Int µs 0..10000, default 0 (off: the I/O thread always sleeps in epoll
 * between reads). When set, after a read that brought DATA for a stream
 * that stays open (a response stream under way) the I/O thread polls the
 * connections without sleeping for this long, so the next messages are
 * read without a wake-up each: server streams of small messages run about
 * 10 % faster for about twice the client CPU per message
 * (docs/performance.md). A library should not burn its user's CPU unasked, so
 * it is off unless the application opts in. */
#define GRIT_ARG_READ_SPIN_US "grit.read_spin_us"
/** Int ms, default 1800000. Idle time after which connections close. */
#define GRIT_ARG_IDLE_TIMEOUT_MS "grit.client_idle_timeout_ms"
/** String, appended to the user-agent ("grit-c/<version> <this>"). */
#define GRIT_ARG_USER_AGENT "grit.primary_user_agent"
/** Int 0/1, default 0. Stamp calls that have a retry or hedging policy with
 * an idempotency-key header, one random 128-bit value per call, the same
 * on every attempt (SPEC ID-01). grit_call_opts.idempotency_key supplies
 * the application's own key instead (and turns the header on for that
 * call). */
#define GRIT_ARG_IDEMPOTENCY_KEYS "grit.idempotency_keys"
/** Int 0/1, default 1. 0 turns client-side health checking off (SPEC
 * HC-02; gRFC A17): a service config's healthCheckConfig is then ignored
 * and no grpc.health.v1.Health/Watch stream is opened. */
#define GRIT_ARG_HEALTH_CHECKS "grit.health_checks"
/** String "identity" (default), "gzip" or "deflate": how calls compress
 * their request messages unless grit_call_opts.compression says otherwise
 * (SPEC CP-01). Any other value: GRIT_ERR_INVALID_ARG from the setter. */
#define GRIT_ARG_DEFAULT_COMPRESSION "grit.default_compression"
/** Int ms, default 1000; 0 waits as long as c-ares does (about 75 s). How
 * long a resolution waits for the _grpc_config TXT answer after the
 * address answer (SPEC DNS-07). Past it the addresses are used, the config
 * in force stays (on a first resolution: the default config, else none),
 * a line is logged, and the TXT is asked again on the next resolution. */
#define GRIT_ARG_DNS_TXT_TIMEOUT_MS "grit.dns_txt_timeout_ms"
/** Int ms, default 0 (off). Re-resolve once the last resolution is this
 * old, even while connected, so a changed TXT record spreads without a
 * connection drop. Still at most one resolution per
 * GRIT_ARG_DNS_MIN_RERESOLVE_MS. */
#define GRIT_ARG_MAX_CONFIG_AGE_MS "grit.max_config_age_ms"
/** Int ms, default 10000; 0 waits as long as c-ares does (about 75 s with
 * the system's default resolver options). The longest a DNS resolution
 * (A/AAAA, and the TXT if enabled) may take (SPEC OP-04). Past it the
 * lookup fails: it counts in grit_channel_stats.dns_lookup_failures and
 * grit_client_dns_lookup_failures_total, the first failure of a run is
 * logged (one NOTICE line, and one when lookups succeed again), retries
 * follow DNS-05's backoff, and a channel that never had addresses fails
 * its calls (not wait-for-ready) UNAVAILABLE with "DNS resolution failed
 * for <host>: timeout after <N> ms". A channel with addresses keeps using
 * them (DNS-08). */
#define GRIT_ARG_DNS_LOOKUP_TIMEOUT_MS "grit.dns_lookup_timeout_ms"
/** Int 0/1, default 1. Honour DNS TTLs (SPEC OP-04): a channel resolves
 * its target again when the A/AAAA answer or the _grpc_config TXT answer
 * (or, for a missing record, its negative-caching TTL) expires, even while
 * connected, so a changed address list or TXT config reaches a long-lived
 * channel without a connection drop. Never sooner than
 * GRIT_ARG_DNS_MIN_RERESOLVE_MS after the previous resolution; never later
 * than GRIT_ARG_MAX_CONFIG_AGE_MS when that is set. A TTL below 1 s counts
 * as 1 s; answers from the hosts file have no TTL. 0: only
 * connection failures and GRIT_ARG_MAX_CONFIG_AGE_MS re-resolve. */
#define GRIT_ARG_DNS_USE_TTL "grit.dns_use_ttl"
/** String: the xDS bootstrap (gRFC A27) of an "xds:///name" channel, as
 * JSON text (SPEC XD-01). It wins over the environment for this channel;
 * without it the bootstrap comes from the file GRPC_XDS_BOOTSTRAP names,
 * else from the JSON in GRPC_XDS_BOOTSTRAP_CONFIG. Channels whose
 * bootstraps name the same first server_uri share one ADS stream (and the
 * first bootstrap's node). grit_channel_create checks it: an invalid one
 * fails with GRIT_ERR_INVALID_CONFIG, |detail| naming the JSON path
 * ("$.xds_servers[0].server_uri") and the reason. Ignored by other
 * schemes. */
#define GRIT_ARG_XDS_BOOTSTRAP_CONFIG "grit.xds_bootstrap_config"
/** Int 0/1, default 0. W3C trace context on every call (SPEC OB-02, gRFC
 * A72): each call belongs to a trace, whose id comes from the caller
 * (grit_call_opts.traceparent, or a "traceparent" entry in the call's
 * metadata) or is made fresh per call; every attempt, retry, hedge and
 * transparent retry sends "traceparent: 00-<trace id>-<span id>-<flags>"
 * with a new span id of its own and the caller's flags (01 for a fresh
 * trace). A "tracestate" entry in the metadata passes through unchanged.
 * The ids appear in grit_attempt_record and in GRIT_TRACE=channel lines. */
#define GRIT_ARG_TRACE_CONTEXT "grit.trace_context"

/** String "host:port" (any grit target): export spans over OTLP/gRPC
 * (opentelemetry.proto.collector.trace.v1.TraceService/Export, SPEC
 * OP-02, gRFC A72) to the collector there, through a grit channel of its
 * own. Implies GRIT_ARG_TRACE_CONTEXT. Per sampled call (trace flags bit
 * 0; a fresh trace is sampled): a CLIENT span "Sent.<service>/<method>"
 * (child of the caller's span, if any) and per attempt an INTERNAL span
 * "Attempt.<service>/<method>", child of the call's span, whose id is the
 * one the attempt's traceparent carries; attributes previous-rpc-attempts
 * and transparent-retry (A72) and rpc.grpc.status_code; status ERROR with
 * the message for a non-OK end (OK leaves it unset); wall-clock times.
 * Spans wait in a bounded queue (2048 per collector) and a thread of the
 * exporter sends them in batches (up to 512, at least every 200 ms), so a
 * call never waits for the collector: when the queue is full or an export
 * fails (collector down or slow: 2 s per export), spans are dropped and
 * counted (grit_span_export_get_stats; grit_otlp_spans_dropped_total in
 * the metrics). Channels with the same endpoint share one exporter;
 * grit_channel_destroy from a thread that is not an I/O thread waits (up
 * to the export timeout) until the channel's spans were sent or dropped.
 * The exporter's own channel lives on the default runtime (and shows in
 * channelz and the metrics) until the last channel naming the endpoint is
 * freed; grit_default_runtime_shutdown answers GRIT_ERR_BUSY until then. */
#define GRIT_ARG_OTLP_ENDPOINT "grit.otlp_endpoint"

/** A finished span (SPEC OP-02), as exported over OTLP; for users who bring
 * their own tracer (grit_channel_args_set_span_callback). Strings are
 * borrowed for the callback. */
typedef struct grit_span {
  /** "Sent.pkg.Service/Method" (the call) or "Attempt.pkg.Service/Method" */
  const char *name;
  bool attempt; /* an attempt's span: INTERNAL, child of the call's */
  uint8_t trace_id[16];
  uint8_t span_id[8];        /* an attempt's: the one its traceparent sent */
  uint8_t parent_span_id[8]; /* all zero: none (a root span) */
  uint8_t flags;             /* W3C trace flags (01: sampled) */
  uint64_t start_unix_ns;    /* wall clock */
  uint64_t end_unix_ns;
  grit_status_code code; /* how the call or attempt ended */
  const char *message;   /* its status message, "" if none */
  uint64_t call_id;      /* grit_call_info.call_id */
  /* Attempts (A72 attributes): grpc-previous-rpc-attempts sent with it,
   * whether it replays one the server never saw, and its peer ("" if no
   * stream was opened). For the call's span: the attempts made. */
  uint32_t previous_rpc_attempts;
  bool transparent_retry;
  const char *peer;
  uint32_t attempts;
} grit_span;

/** Span callback: runs on the I/O thread when an attempt or a sampled call
 * ends (each attempt's span before its call's), before the call's own
 * completion callback. It must not block. */
typedef void (*grit_span_cb)(const grit_span *span, void *user_data);

/** Install |cb| as the span callback of channels made with |a| (NULL
 * removes it); it implies GRIT_ARG_TRACE_CONTEXT. It works with or
 * without GRIT_ARG_OTLP_ENDPOINT.
 * Ownership: |user_data| is never dereferenced by grit and must stay
 * valid while such a channel lives. Thread: any, one at a time per set.
 * Returns GRIT_OK or GRIT_ERR_INVALID_ARG (|a| NULL). */
GRIT_EXTERN grit_err grit_channel_args_set_span_callback(grit_channel_args *a,
                                                         grit_span_cb cb,
                                                         void *user_data);

/** Process-wide counts of OTLP span export (SPEC OP-02). */
typedef struct grit_span_export_stats {
  uint64_t exported; /* spans a collector accepted (status OK) */
  uint64_t dropped;  /* spans dropped: queue full, or their export failed */
  uint64_t exports_failed; /* Export calls that did not end OK */
} grit_span_export_stats;

/** Read the span export counts into |out|. Thread: any.
 * Returns GRIT_OK or GRIT_ERR_INVALID_ARG (|out| NULL). */
GRIT_EXTERN grit_err grit_span_export_get_stats(grit_span_export_stats *out);

/** Create an empty argument set.
 *
 * Ownership: |*out| is new; release with grit_channel_args_destroy.
 * Thread: any.
 * Returns GRIT_OK or GRIT_ERR_NOMEM (|*out| NULL). */
GRIT_EXTERN grit_err grit_channel_args_create(grit_channel_args **out);

/** Destroy |a|. Thread: any. NULL is a no-op. */
GRIT_EXTERN void grit_channel_args_destroy(grit_channel_args *a);

/** Set integer argument |key| (one of the GRIT_ARG_ keys documented Int).
 *
 * Ownership: key copied. Thread: any, one thread at a time per set.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG if the key is unknown, takes a
 * string, or |value| is out of its range; GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_channel_args_set_int(grit_channel_args *a,
                                               const char *key, int64_t value);

/** Set string argument |key| (one of the GRIT_ARG_ keys documented String).
 *
 * Ownership: key and value copied. Thread: any, one thread at a time.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG if the key is unknown or takes an
 * integer, or |value| is NULL; GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_channel_args_set_string(grit_channel_args *a,
                                                  const char *key,
                                                  const char *value);

/** Install |cb| as the attempt observer of channels made with |a| (NULL
 * removes it).
 *
 * Ownership: |user_data| is never dereferenced by grit and must stay
 * valid while such a channel lives. Thread: any, one at a time per set.
 * Returns GRIT_OK or GRIT_ERR_INVALID_ARG (|a| NULL). */
GRIT_EXTERN grit_err grit_channel_args_set_observer(grit_channel_args *a,
                                                    grit_attempt_observer_cb cb,
                                                    void *user_data);

/* ------------------------------------------------------------------------
 * Backend load reports (SPEC LP-01; gRFC A51, ORCA): what backends say
 * about their load, per call in the endpoint-load-metrics-bin trailer and,
 * with weighted_round_robin's enableOobLoadReport, on the out-of-band
 * xds.service.orca.v3.OpenRcaService/StreamCoreMetrics stream.
 */

/** One entry of a report's request_cost, utilization or named_metrics
 * map. */
typedef struct grit_load_metric {
  const char *name;
  double value;
} grit_load_metric;

/** One xds.data.orca.v3.OrcaLoadReport from a backend. Absent fields are
 * 0. Every pointer is borrowed for the callback. */
typedef struct grit_load_report {
  const char *peer; /* the backend's address, "127.0.0.1:50051" */
  bool out_of_band; /* from the OOB stream (else a call's trailer) */
  double cpu_utilization;
  double mem_utilization;
  double application_utilization;
  double rps_fractional;
  double eps;
  uint64_t rps; /* deprecated field 3 */
  const grit_load_metric *request_cost;
  size_t n_request_cost;
  const grit_load_metric *utilization;
  size_t n_utilization;
  const grit_load_metric *named_metrics;
  size_t n_named_metrics;
} grit_load_report;

/** Load report callback: runs on the I/O thread for every report a
 * channel receives (a trailer that does not decode is skipped). It must
 * not block. */
typedef void (*grit_load_report_cb)(const grit_load_report *report,
                                    void *user_data);

/** Install |cb| as the load report callback of channels made with |a|
 * (NULL removes it). With a callback, every call's trailer report is
 * decoded, whatever the LB policy.
 *
 * Ownership: |user_data| is never dereferenced by grit and must stay
 * valid while such a channel lives. Thread: any, one at a time per set.
 * Returns GRIT_OK or GRIT_ERR_INVALID_ARG (|a| NULL). */
GRIT_EXTERN grit_err grit_channel_args_set_load_report_cb(
    grit_channel_args *a, grit_load_report_cb cb, void *user_data);

typedef struct grit_channel grit_channel; /* the channel, below */

/** Where the service config in force came from (SPEC DNS-10). */
typedef enum grit_config_source {
  GRIT_CONFIG_SOURCE_NONE = 0,    /* the empty config (or none valid yet) */
  GRIT_CONFIG_SOURCE_DEFAULT = 1, /* GRIT_ARG_SERVICE_CONFIG */
  GRIT_CONFIG_SOURCE_DNS = 2,     /* a _grpc_config TXT record */
  GRIT_CONFIG_SOURCE_XDS = 3,     /* an xDS update (xds: targets) */
} grit_config_source;

/** The service config a channel uses, and its history (SPEC DNS-10). In
 * caller storage (grit_channel_get_service_config) set |size| first
 * (GRIT_SERVICE_CONFIG_INFO_INIT); fields are added at the end only. */
typedef struct grit_service_config_info {
  size_t size; /* sizeof(grit_service_config_info) as the caller knows it */
  /** The config in force as compact JSON, NUL-terminated; NULL when none
   * (the empty config). */
  char *json;
  grit_config_source source;
  /** Wall-clock time (Unix ms) the config in force was applied; 0: never. */
  uint64_t applied_at_ms;
  /** The last rejected config's JSON path and reason; NULL: none so far. */
  char *last_rejection;
  uint64_t rejected_at_ms; /* Unix ms of that rejection; 0: none */
  /** Fingerprint of |json| (FNV-1a 64), the one logged on a change. */
  uint64_t hash;
} grit_service_config_info;

/** A grit_service_config_info with |size| set and everything else zero. */
#define GRIT_SERVICE_CONFIG_INFO_INIT                                          \
  { .size = sizeof(grit_service_config_info) }

/** Config-change callback: runs on the I/O thread after the config in
 * force changed (content or source) or a config was rejected. |info| and
 * its strings are borrowed, valid during the call only; |info->size| is
 * the library's own sizeof. */
typedef void (*grit_config_change_cb)(grit_channel *ch,
                                      const grit_service_config_info *info,
                                      void *user_data);

/** Install |cb| as the config-change callback of channels made with |a|
 * (NULL removes it).
 * Ownership: |user_data| is never dereferenced by grit. Thread: any, one
 * thread at a time per set.
 * Returns GRIT_OK or GRIT_ERR_INVALID_ARG (|a| NULL). */
GRIT_EXTERN grit_err grit_channel_args_set_config_watcher(
    grit_channel_args *a, grit_config_change_cb cb, void *user_data);

/* ------------------------------------------------------------------------
 * Channel (grit_channel is declared above, once: C99 has no repeated
 * typedefs).
 */

typedef enum grit_connectivity_state {
  GRIT_STATE_IDLE = 0,
  GRIT_STATE_CONNECTING = 1,
  GRIT_STATE_READY = 2,
  GRIT_STATE_TRANSIENT_FAILURE = 3,
  GRIT_STATE_SHUTDOWN = 4,
} grit_connectivity_state;

/** Name of a connectivity state ("READY"); NULL for unknown values.
 * Ownership: static. Thread: any. */
GRIT_EXTERN const char *grit_connectivity_state_name(grit_connectivity_state s);

/** Create a channel to |target| on runtime |rt| (NULL: the process's shared
 * default runtime, started on first use).
 *
 * |target| is "dns:[//authority/]host[:port]", "host:port",
 * "ipv4:addr:port[,addr:port...]", "ipv6:[addr]:port[,...]", "unix:path"
 * or "unix:///abs/path" (SPEC DNS-06), or "xds:///name" (SPEC XD-01,
 * docs/xds.md: the xDS resolver is built in; its bootstrap comes from
 * GRIT_ARG_XDS_BOOTSTRAP_CONFIG, else GRPC_XDS_BOOTSTRAP (a file), else
 * GRPC_XDS_BOOTSTRAP_CONFIG (JSON)). The channel starts IDLE and connects
 * on the first call or on grit_channel_get_state(ch, true).
 *
 * Ownership: target and |args| copied (|args| may be NULL); |*out| is new,
 * release with grit_channel_destroy.
 * Thread: any.
 * Security follows the rule at GRIT_ARG_TLS: TLS material makes the channel
 * TLS.
 *
 * Returns GRIT_OK; GRIT_ERR_INVALID_TARGET if the target does not parse;
 * GRIT_ERR_INVALID_ARG (NULL |out|; TLS material with GRIT_ARG_TLS set to
 * 0, |detail|'s path naming the TLS argument; a malformed
 * GRIT_ARG_DNS_SERVER); GRIT_ERR_INVALID_CONFIG if GRIT_ARG_SERVICE_CONFIG
 * is invalid (the reason goes to |detail| when not NULL), or for an xds:
 * target whose bootstrap is invalid (|detail|: its JSON path and reason)
 * or cannot be found (|detail|'s path "GRPC_XDS_BOOTSTRAP" for a file that
 * cannot be read; "$" with a reason naming GRIT_ARG_XDS_BOOTSTRAP_CONFIG,
 * GRPC_XDS_BOOTSTRAP and GRPC_XDS_BOOTSTRAP_CONFIG when none is set);
 * GRIT_ERR_TLS if
 * a certificate or key file cannot be loaded (reason in |detail|);
 * GRIT_ERR_SHUTDOWN if |rt| was made before fork() (in the child);
 * GRIT_ERR_NOMEM; GRIT_ERR_SYSTEM if the default runtime could not
 * start. */
GRIT_EXTERN grit_err grit_channel_create(grit_runtime *rt, const char *target,
                                         const grit_channel_args *args,
                                         grit_error_detail *detail,
                                         grit_channel **out);

/** Destroy |ch|: calls still in flight are cancelled (they end CANCELLED
 * with their callbacks run), connections close. Returns after the I/O
 * thread has released the channel; when called from a grit callback it
 * returns at once and the release completes later. |ch| must not be used
 * afterwards (Lifetimes, at the top); call handles made on it stay valid
 * until their own grit_call_destroy.
 * Thread: any. NULL is a no-op. */
GRIT_EXTERN void grit_channel_destroy(grit_channel *ch);

/** Current connectivity state of |ch|. With |try_to_connect| an IDLE
 * channel starts connecting. GRIT_STATE_SHUTDOWN for NULL and, in a
 * fork()ed child, for a channel made before the fork. Thread: any. */
GRIT_EXTERN grit_connectivity_state grit_channel_get_state(grit_channel *ch,
                                                           bool try_to_connect);

/** Callback for grit_channel_watch_state: |state| is the new state, or the
 * unchanged one when |timed_out|. Runs on the I/O thread. */
typedef void (*grit_state_cb)(grit_channel *ch, grit_connectivity_state state,
                              bool timed_out, void *user_data);

/** Call |cb| once, when the state differs from |last_seen| or after
 * |timeout_ms| (0: no timeout).
 *
 * Ownership: |user_data| is never dereferenced by grit. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (|ch| or |cb| NULL);
 * GRIT_ERR_NOMEM; GRIT_ERR_SHUTDOWN if the channel was made before fork()
 * (in the child). */
GRIT_EXTERN grit_err grit_channel_watch_state(grit_channel *ch,
                                              grit_connectivity_state last_seen,
                                              uint64_t timeout_ms,
                                              grit_state_cb cb,
                                              void *user_data);

/** Block until the state differs from |last_seen| or |timeout_ms| passes
 * (0: forever), and return the state then.
 * Thread: any but the I/O thread (there it returns |last_seen| at once). */
GRIT_EXTERN grit_connectivity_state grit_channel_wait_for_state_change(
    grit_channel *ch, grit_connectivity_state last_seen, uint64_t timeout_ms);

/** Channel-wide counters (SPEC MX-01). Caller storage: set |size| first
 * (GRIT_CHANNEL_STATS_INIT); new counters are added at the end only. */
typedef struct grit_channel_stats {
  size_t size; /* sizeof(grit_channel_stats) as the caller knows it */
  uint64_t calls_started, calls_succeeded, calls_failed;
  uint64_t attempts;            /* every attempt, transparent included */
  uint64_t retries;             /* attempts of kind RETRY */
  uint64_t transparent_retries; /* attempts of kind TRANSPARENT */
  uint64_t hedges;              /* attempts of kind HEDGE */
  uint64_t throttled;           /* retries or hedges refused by throttling */
  /** Retries per call, for calls that had any (gRFC A96): bucket i counts
   * calls with at most 1, 2, 3, 4, 5, 10, 100, 1000 retries. */
  uint64_t retries_per_call[8];
  /* Outlier detection and health checks (SPEC OD-01, HC-01): */
  uint64_t ejections;          /* outlier detection ejected an address */
  uint64_t unejections;        /* ... and let one back in */
  uint64_t health_not_serving; /* a READY backend's health left SERVING */
  /** Resolver and config counters (SPEC DNS-10): DNS resolutions
   * finished, those whose address lookup failed, those whose TXT answer
   * came too late (GRIT_ARG_DNS_TXT_TIMEOUT_MS), changes of the config in
   * force, and configs rejected. */
  uint64_t dns_lookups, dns_lookup_failures, dns_txt_timeouts;
  uint64_t config_updates, config_rejections;
} grit_channel_stats;

/** A grit_channel_stats with |size| set and every counter zero. */
#define GRIT_CHANNEL_STATS_INIT                                                \
  { .size = sizeof(grit_channel_stats) }

/** Read |ch|'s counters into |out|, as many as |out->size| holds (the rest
 * of a larger struct is zeroed). Each is read atomically; together they
 * are a near-consistent snapshot. Thread: any.
 * Returns GRIT_OK or GRIT_ERR_INVALID_ARG (|ch| or |out| NULL, or
 * |out->size| smaller than the size field itself: not set). */
GRIT_EXTERN grit_err grit_channel_get_stats(grit_channel *ch,
                                            grit_channel_stats *out);

/** Read the service config |ch| uses now, where it came from, when it was
 * applied and the last rejection, into |out| (SPEC DNS-10), as many fields
 * as |out->size| holds. Before the first resolution it reports the default
 * config (or none).
 * Ownership: |out|'s strings are new; release with
 * grit_service_config_info_free. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (|ch| or |out| NULL, or
 * |out->size| not set); GRIT_ERR_NOMEM (|out| zeroed but for |size|);
 * GRIT_ERR_SHUTDOWN (made before fork(), in the child). */
GRIT_EXTERN grit_err grit_channel_get_service_config(
    grit_channel *ch, grit_service_config_info *out);

/** Free the strings of |info| (not |info| itself) and zero it, keeping
 * |size|. Thread: any. NULL is a no-op. */
GRIT_EXTERN void grit_service_config_info_free(grit_service_config_info *info);

/** The source's name: "none", "default" or "dns". Thread: any. */
GRIT_EXTERN const char *grit_config_source_name(grit_config_source s);
/** Render metrics in the Prometheus text exposition format (version
 * 0.0.4; SPEC OB-01): the gRFC A66 and A96 client instruments
 * (grpc.client.attempt.started, .attempt.duration,
 * .attempt.sent_total_compressed_message_size,
 * .attempt.rcvd_total_compressed_message_size, .call.duration,
 * .call.retries, .call.transparent_retries, .call.hedges,
 * .call.retry_delay) and grit's own (grit.client.call.throttled, the retry
 * throttle's tokens per server name), named as the OpenTelemetry
 * Prometheus exporter names them: dots become underscores, units become
 * suffixes (_seconds, _bytes), counters end in _total; labels grpc_method,
 * grpc_target and, per A66, grpc_status. Histograms use A66's buckets
 * (A96 counts: 1, 2, 3, 4, 5, 10, 100, 1000). Series are process-wide per
 * target and method and outlive channels, as a scrape expects.
 *
 * Labels (SPEC OP-01, gRFC A66): grpc_target is the canonical target
 * ("dns:///host:port" for a channel made with "host:port"); the first 100
 * distinct targets of the process (grit_metrics_set_max_targets) that the
 * filter (grit_metrics_set_target_filter) accepts keep their name, the
 * others are recorded as grpc_target="other". grpc_method is written as
 * other gRPC stacks write it, "pkg.Service/Method" without the leading
 * slash, for known methods: those registered with
 * grit_metrics_register_method and those the service config in force when
 * the call starts names (exactly or by service). Calls of any other method
 * are recorded as grpc_method="other" (A66's generic methods), as are
 * known methods past 64 per target. The gauge grit_client_subchannels has
 * grpc_target and grpc_connectivity_state. With a NULL |ch|, the text of
 * every source added with grit_metrics_add_source follows.
 *
 * |ch| selects the series of its target (its canonical target, or "other"
 * when it is recorded so); NULL renders every target of the process.
 *
 * Ownership: |out| receives new data (release with grit_bytes_free).
 * Thread: any; recording never waits for it.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (|out| NULL); GRIT_ERR_NOMEM (|out|
 * empty). */
GRIT_EXTERN grit_err grit_metrics_write_prometheus(grit_channel *ch,
                                                   grit_bytes *out);

/* ---- Metric labels and sources (SPEC OP-01) ---- */

/** Bound the targets recorded under their own name to |n| (default 100;
 * 0: every target is "other"). Applies to targets first seen after the
 * call; targets named already keep their name.
 * Thread: any. Returns GRIT_OK. */
GRIT_EXTERN grit_err grit_metrics_set_max_targets(size_t n);

/** Target filter: return true to record |target| (the canonical target,
 * e.g. "dns:///db.internal:5432") under its own name, false to record it
 * as "other". It runs once per distinct target, when the first channel to
 * it is created, on that thread, under a lock of the metric registry: it
 * must not call grit. |target| is borrowed for the call. */
typedef bool (*grit_metrics_target_filter_cb)(const char *target,
                                              void *user_data);

/** Install |cb| as the process's target filter (NULL removes it: every
 * target is named, within the bound). Set it before creating channels;
 * targets seen before keep what they were given.
 * Ownership: |user_data| is never dereferenced by grit and must stay valid
 * while the filter is installed. Thread: any. Returns GRIT_OK. */
GRIT_EXTERN grit_err grit_metrics_set_target_filter(
    grit_metrics_target_filter_cb cb, void *user_data);

/** Register |method| ("/pkg.Service/Method" or "pkg.Service/Method") as a
 * known method of the application: its calls are recorded under its name
 * instead of "other" (gRFC A66: generated stubs register their methods;
 * `grit call` registers the method it calls). Registering a method twice
 * is a no-op. Up to 1024 methods per process. Registrations belong to the
 * process's metric series: grit_default_runtime_shutdown clears them when it
 * frees the series.
 * Ownership: copied. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (NULL or empty); GRIT_ERR_NOMEM
 * (no memory, or 1024 methods are registered already). */
GRIT_EXTERN grit_err grit_metrics_register_method(const char *method);

/** A metric source of another library (grit-dedup's
 * grit_dedup_metrics_text): writes complete Prometheus text families
 * (HELP, TYPE and samples, format 0.0.4) into |buf|, snprintf-style: at
 * most |cap| bytes, and returns the length the whole text needs; grit
 * calls it again with more room when that is |cap| or more. It runs on the
 * thread rendering the exposition, with a lock held: it must not call
 * grit_metrics_* functions. */
typedef size_t (*grit_metrics_source_cb)(char *buf, size_t cap,
                                         void *user_data);

/** Add |cb| with |user_data| to the process's exposition: its text follows
 * grit's own in grit_metrics_write_prometheus(NULL, ...) and the admin
 * endpoint's GET /metrics. Adding the same pair twice is a no-op; up to 16.
 * Ownership: |user_data| is passed to |cb| and must stay valid until
 * grit_metrics_remove_source returns. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (|cb| NULL); GRIT_ERR_NOMEM (16
 * sources already). */
GRIT_EXTERN grit_err grit_metrics_add_source(grit_metrics_source_cb cb,
                                             void *user_data);

/** Remove the pair added with grit_metrics_add_source. When it returns,
 * |cb| is not running and will not be called again for this pair.
 * Thread: any, but not from inside |cb|.
 * Returns GRIT_OK or GRIT_ERR_NOT_FOUND. */
GRIT_EXTERN grit_err grit_metrics_remove_source(grit_metrics_source_cb cb,
                                                void *user_data);

/* ---- Introspection: channelz JSON and the admin endpoint (SPEC OP-03) ---- */

/** Render channelz-style data as JSON: for |ch|, one channel object; for
 * NULL, {"channels":[...]} with every channel of the process not yet
 * destroyed. A channel object holds "id" (process-wide number), "target"
 * (as given), "metrics_target" (its grpc_target label), "state",
 * "calls_started", "calls_succeeded", "calls_failed", "attempts",
 * "retries", "transparent_retries", "last_call_started" (RFC 3339 UTC,
 * null before the first call), "service_config" ({"source": "none" |
 * "default" | "dns", "config": the config in force or null,
 * "applied_at", "last_rejection"}) and "subchannels": per subchannel
 * "address", "state" (as its LB policy sees it), "calls_started",
 * "calls_succeeded", "calls_failed" (streams on its connections, grpc
 * status OK or not), "last_failure" (connect or connection error, or
 * null) and "not_picked_because" (ejected, health; or null).
 *
 * The subchannels are read on each channel's I/O thread: the caller waits
 * for each loop in turn (microseconds on an idle loop), and the default
 * runtime's shutdown answers GRIT_ERR_BUSY meanwhile.
 * Ownership: |out| receives new data (grit_bytes_free).
 * Thread: any thread but a grit I/O thread (there, only for |ch| of that
 * thread's own runtime). A runtime made with grit_runtime_create must
 * not be destroyed while a NULL-|ch| render is running.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (|out| NULL); GRIT_ERR_NOMEM;
 * GRIT_ERR_SHUTDOWN (|ch| is being destroyed, from its own I/O thread). */
GRIT_EXTERN grit_err grit_channelz_json(grit_channel *ch, grit_bytes *out);

/** The admin HTTP endpoint (SPEC OP-03): an HTTP/1.1 server on a thread
 * of its own answering GET /metrics (grit_metrics_write_prometheus of the
 * whole process, with the sources added) and GET /channelz
 * (grit_channelz_json(NULL)). Connections are served by events, so an
 * idle or slow scraper never blocks another; keep-alive is honoured; at
 * most 64 connections at a time. Off unless started. */
typedef struct grit_admin grit_admin;

/** Flag of grit_admin_start: serve on an address that is not loopback
 * (anyone who can reach it reads the metrics and channelz). */
#define GRIT_ADMIN_ALLOW_REMOTE (1u << 0)

/** Start the admin endpoint on |host| (an IPv4 or IPv6 literal; NULL:
 * "127.0.0.1") and |port| (0: any free port, see grit_admin_port).
 * Ownership: |*out| is new; stop it with grit_admin_stop. |d| (optional)
 * receives the reason of a failure. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (|out| NULL, |host| not an IP
 * literal, or not loopback without GRIT_ADMIN_ALLOW_REMOTE);
 * GRIT_ERR_NOMEM; GRIT_ERR_SYSTEM (bind, listen or thread failed: the
 * reason in |d|). |*out| is NULL on error. */
GRIT_EXTERN grit_err grit_admin_start(const char *host, uint16_t port,
                                      unsigned flags, grit_error_detail *d,
                                      grit_admin **out);

/** The port |a| listens on (0 for NULL). Thread: any. */
GRIT_EXTERN uint16_t grit_admin_port(const grit_admin *a);

/** Close every connection, stop the thread and free |a|. A scrape being
 * answered finishes first (a /channelz scrape may be waiting for a grit
 * I/O thread, so do not stop the endpoint from one). Thread: any but a
 * grit I/O thread. NULL is a no-op. */
GRIT_EXTERN void grit_admin_stop(grit_admin *a);

/* ------------------------------------------------------------------------
 * Call credentials (SPEC CR-01, CR-02, AP-05): metadata such as an
 * "authorization" token that grit asks for before every attempt (first,
 * retry, hedge, transparent retry), so a rotating token reaches every
 * attempt. grpc C++'s CallCredentials and MetadataCredentialsPlugin, in C.
 *
 * - Attach them to a channel (grit_channel_args_set_call_credentials) and
 *   to a call (grit_call_opts.call_credentials); both apply, the channel's
 *   first. grit_call_credentials_create_composite joins several.
 * - An attempt starts only once every credential has answered; the wait
 *   counts against the call's deadline and never blocks the I/O thread.
 * - A credential that fails fails the attempt with its status (the codes
 *   gRFC A54 keeps for the control plane, INVALID_ARGUMENT, NOT_FOUND,
 *   ALREADY_EXISTS, FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE and
 *   DATA_LOSS, become INTERNAL); the retry policy then decides as for any
 *   status.
 * - Security: a call with credentials on a cleartext channel fails
 *   UNAUTHENTICATED before anything is sent, unless the channel has
 *   GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS (local development only).
 * - grit never writes a credential's metadata values to its traces, logs,
 *   error messages or metrics.
 */
typedef struct grit_call_credentials grit_call_credentials;

/** One attempt's question to a plugin; answered with
 * grit_credentials_request_add (any number of times) and then
 * grit_credentials_request_done (exactly once). */
typedef struct grit_credentials_request grit_credentials_request;

/** What a plugin is asked for. Strings are borrowed, valid during
 * get_metadata only (copy what you keep). */
typedef struct grit_credentials_context {
  /** "https://" + the attempt's authority (":443" dropped) + "/" + the
   * service: "https://api.example.com/pkg.Service", as grpc's plugins get
   * it (the audience of a JWT). */
  const char *service_url;
  const char *method_name; /* "Method" of "/pkg.Service/Method" */
  const char *authority;   /* the attempt's :authority */
  /** Milliseconds left before the call's deadline; -1 when it has none. */
  int64_t deadline_left_ms;
  unsigned
      attempt; /* 1 for the first attempt, as grpc-previous-rpc-attempts + 1 */
} grit_credentials_context;

#define GRIT_CREDENTIALS_PLUGIN_VERSION 1

/** A metadata credentials plugin. */
typedef struct grit_credentials_plugin {
  unsigned version; /* GRIT_CREDENTIALS_PLUGIN_VERSION */
  /** A short name for traces and error messages ("oauth2"); copied; may be
   * NULL ("plugin"). Never a secret. */
  const char *type;
  /** Asked before every attempt, on the I/O thread: it must not block.
   * Answer now (from inside this function) or later from any thread:
   * grit_credentials_request_add for each pair, then
   * grit_credentials_request_done. |req| stays valid until done. */
  void (*get_metadata)(void *user_data, const grit_credentials_context *ctx,
                       grit_credentials_request *req);
  /** Called once when the last reference to the credentials goes (any
   * thread); may be NULL. */
  void (*destroy)(void *user_data);
} grit_credentials_plugin;

/** Add one pair to the answer of |req|. Keys and values follow
 * grit_metadata_add's rules ("authorization" is allowed; reserved keys are
 * not).
 * Ownership: copied. Thread: the one answering |req|.
 * Returns GRIT_OK; GRIT_ERR_INVALID_METADATA (the answer will fail the
 * attempt INTERNAL, naming the key, never the value);
 * GRIT_ERR_INVALID_ARG (|req| or |key| NULL); GRIT_ERR_NOMEM (the answer
 * will fail the attempt RESOURCE_EXHAUSTED). */
GRIT_EXTERN grit_err grit_credentials_request_add(grit_credentials_request *req,
                                                  const char *key,
                                                  const void *value,
                                                  size_t len);

/** Finish |req|: |code| GRIT_STATUS_OK sends the pairs added; any other
 * code fails the attempt with it (mapped per gRFC A54) and |message|
 * (copied; NULL means ""), prefixed with the plugin's type. Exactly once
 * per request; |req| must not be used afterwards.
 * Thread: any. */
GRIT_EXTERN void grit_credentials_request_done(grit_credentials_request *req,
                                               grit_status_code code,
                                               const char *message);

/** Credentials from |plugin| (copied) and |user_data| (never dereferenced
 * by grit; passed to the plugin; released through plugin->destroy).
 * Ownership: |*out| new; grit_call_credentials_unref.
 * Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (NULL pointer, NULL get_metadata,
 * unknown version); GRIT_ERR_NOMEM (destroy is not called). */
GRIT_EXTERN grit_err grit_call_credentials_create_plugin(
    const grit_credentials_plugin *plugin, void *user_data,
    grit_call_credentials **out);

/** Credentials that send "authorization: Bearer <token>" on every attempt.
 * Ownership: |token| copied; |*out| new. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (NULL, empty, or a byte outside
 * printable ASCII such as CR or LF); GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_call_credentials_create_bearer(
    const char *token, grit_call_credentials **out);

/** Credentials that send "authorization: Bearer <content>" where content is
 * the file at |path| with leading and trailing white space removed (a
 * Kubernetes projected service-account token, for instance). The file is
 * checked before every attempt (stat) and read again when its inode,
 * size or modification time changed, so a rotated token reaches the next
 * attempt. A missing, unreadable, empty, over-64-KiB or non-printable file
 * fails the attempt UNAVAILABLE with the path and the reason (never the
 * content).
 * Ownership: |path| copied; |*out| new. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (NULL or empty path);
 * GRIT_ERR_NOMEM. The file need not exist yet. */
GRIT_EXTERN grit_err grit_call_credentials_create_token_file(
    const char *path, grit_call_credentials **out);

/** Credentials that apply |a|, then |b| (both borrowed; the result takes
 * its own references). Either may itself be composite.
 * Ownership: |*out| new. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (a NULL argument); GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_call_credentials_create_composite(
    grit_call_credentials *a, grit_call_credentials *b,
    grit_call_credentials **out);

/** Take a reference to |c| (NULL is a no-op). Thread: any. */
GRIT_EXTERN void grit_call_credentials_ref(grit_call_credentials *c);

/** Drop a reference; the last one releases |c| (a plugin's destroy runs
 * then, on the calling thread or, if an attempt still holds it, on the I/O
 * thread). NULL is a no-op. Thread: any. */
GRIT_EXTERN void grit_call_credentials_unref(grit_call_credentials *c);

/** Attach |creds| to every call of channels made with |a| (NULL removes).
 * Ownership: the args take a reference; each channel takes its own.
 * Thread: any, one at a time per set.
 * Returns GRIT_OK or GRIT_ERR_INVALID_ARG (|a| NULL). */
GRIT_EXTERN grit_err grit_channel_args_set_call_credentials(
    grit_channel_args *a, grit_call_credentials *creds);

/** Int: 1 lets call credentials go out on a cleartext channel (local
 * development only). Default 0: such a call fails UNAUTHENTICATED before
 * anything is sent. */
#define GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS                               \
  "grit.allow_insecure_call_credentials"

/* ------------------------------------------------------------------------
 * Calls.
 */
typedef struct grit_call grit_call;

/** Layout version of grit_call_opts: 3 adds call_credentials and
 * interceptors. grit accepts this version and 2 (the struct before them:
 * docs/abi.md); any other is GRIT_ERR_INVALID_ARG. */
#define GRIT_CALL_OPTS_VERSION 3

/** Wait-for-ready (the service config's "waitForReady", SPEC SC-07):
 * whether a call whose pick fails waits for a ready connection (until its
 * deadline) instead of failing UNAVAILABLE. */
typedef enum grit_wait_for_ready {
  GRIT_WFR_DEFAULT = 0, /* the method's service config decides (else off) */
  GRIT_WFR_OFF = 1,     /* off, whatever the config says */
  GRIT_WFR_ON = 2,      /* on, whatever the config says */
} grit_wait_for_ready;

/** What a method streams (its proto "stream" keywords). Unary and
 * client-streaming methods answer with exactly one message: a call of
 * either kind that gets more, or none with an OK status, ends INTERNAL
 * ("cardinality violation: ...", as grpc-go and grpc-java); after a
 * second message grit cancels the stream (RST_STREAM CANCEL). A non-OK
 * status without a message is passed on unchanged. The check decides the
 * call's final status only: it never causes a retry or a hedge, and the
 * attempt records (MX-03) still show what the server sent. */
#define GRIT_METHOD_KIND_MAP(XX)                                               \
  XX(UNKNOWN, 0) /* not said: no check */                                      \
  XX(UNARY, 1)                                                                 \
  XX(CLIENT_STREAMING, 2)                                                      \
  XX(SERVER_STREAMING, 3)                                                      \
  XX(BIDI_STREAMING, 4)

typedef enum grit_method_kind {
#define GRIT_METHOD_KIND_GEN(name, val) GRIT_METHOD_##name = (val),
  GRIT_METHOD_KIND_MAP(GRIT_METHOD_KIND_GEN)
#undef GRIT_METHOD_KIND_GEN
} grit_method_kind;

/** Name of a method kind ("CLIENT_STREAMING"); NULL for unknown values.
 * Ownership: static. Thread: any. */
GRIT_EXTERN const char *grit_method_kind_name(grit_method_kind k);

/** Request message compression (SPEC CP-01..CP-04, the gRPC compression
 * spec). Whatever a call sends, grit announces grpc-accept-encoding
 * "identity, deflate, gzip" and decodes responses in any of them. A call
 * that compresses sends grpc-encoding and sets a message's compressed flag
 * only when the compressed body is smaller (so empty and incompressible
 * messages go as they are). Messages are compressed once, on the sending
 * thread; retries and hedges replay those bytes, and the send and retry
 * buffers (GRIT_ARG_PER_CALL_SEND_BUFFER, GRIT_ARG_PER_CALL_RETRY_BUFFER)
 * count them as compressed. The send limit
 * (GRIT_ARG_MAX_SEND_MESSAGE) applies to the uncompressed size, the
 * receive limit to the decompressed size, checked while inflating. */
typedef enum grit_compression {
  GRIT_COMPRESSION_DEFAULT = 0,  /* GRIT_ARG_DEFAULT_COMPRESSION */
  GRIT_COMPRESSION_IDENTITY = 1, /* none */
  GRIT_COMPRESSION_DEFLATE = 2,
  GRIT_COMPRESSION_GZIP = 3,
} grit_compression;

/** Name of an encoding ("identity", "deflate", "gzip"; "default" for
 * GRIT_COMPRESSION_DEFAULT); NULL for other values.
 * Ownership: static. Thread: any. */
GRIT_EXTERN const char *grit_compression_name(grit_compression c);

/* ------------------------------------------------------------------------
 * Client interceptors (SPEC IC-01): code that sees every call of a channel
 * (logging, metrics, header injection, a policy check) and may change its
 * request metadata or fail it before anything is sent.
 *
 * Order: a channel's interceptors in the order added, then the call's
 * (grit_call_opts.interceptors). Outbound events (start, each message
 * sent) go first to last; inbound events (response headers, each message
 * received, the final status) last to first, so the first interceptor is
 * the outermost, as grpc-go chains them.
 *
 * Threads: on_start runs on the thread that starts the call
 * (grit_call_start, grit_unary_call, grit_unary_call_async) and on_send on
 * the thread that sends; on_headers, on_message and on_done run on the I/O
 * thread, like the call's own callbacks, and must not block it. Each call
 * gets one |call_data| slot per interceptor, NULL until on_start sets it;
 * on_done runs exactly once for every interceptor whose on_start ran (and
 * returned OK or failed the call) and is the place to free it.
 *
 * Ending a call: on_start returns a non-OK code (and a message) to fail the
 * call with that status before anything is sent; the interceptors after it
 * are not asked, those before it see on_done with that status. Messages
 * are seen, not changed. An interceptor may call grit functions of other
 * calls, but must not block, and must not destroy the call it is shown.
 */
typedef struct grit_interceptor grit_interceptor;

/** What on_start is told about the call. Borrowed, valid during on_start. */
typedef struct grit_interceptor_call_info {
  const char *method;    /* "/pkg.Service/Method" */
  const char *authority; /* the call's override; NULL: the channel's */
  grit_method_kind kind; /* as given in grit_call_opts (UNARY for unary) */
  uint64_t timeout_ms;   /* the call's own timeout; 0: none */
} grit_interceptor_call_info;

#define GRIT_INTERCEPTOR_OPS_VERSION 1

/** An interceptor's hooks; any but version may be NULL. */
typedef struct grit_interceptor_ops {
  unsigned version; /* GRIT_INTERCEPTOR_OPS_VERSION */
  /** The call starts. |md| is the call's request metadata, which the
   * interceptor may change (grit_metadata_add, grit_metadata_remove).
   * Return GRIT_STATUS_OK to go on, or another code and set |*message|
   * (static or alive until the call's on_done; may stay NULL) to fail the
   * call. */
  grit_status_code (*on_start)(void *user_data,
                               const grit_interceptor_call_info *info,
                               grit_metadata *md, void **call_data,
                               const char **message);
  /** One request message, as given to grit (before compression). */
  void (*on_send)(void *user_data, void *call_data, const uint8_t *data,
                  size_t len);
  /** Response headers (not for a Trailers-Only response). */
  void (*on_headers)(void *user_data, void *call_data,
                     const grit_metadata *headers);
  /** One response message, decompressed. */
  void (*on_message)(void *user_data, void *call_data, const uint8_t *data,
                     size_t len);
  /** The call's final status; exactly once, last. */
  void (*on_done)(void *user_data, void *call_data, const grit_status *st);
  /** The last reference to the interceptor went (any thread). */
  void (*destroy)(void *user_data);
} grit_interceptor_ops;

/** An interceptor from |ops| (copied) and |user_data| (never dereferenced
 * by grit).
 * Ownership: |*out| new; grit_interceptor_unref. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (NULL |ops| or |out|, unknown
 * version); GRIT_ERR_NOMEM (destroy is not called). */
GRIT_EXTERN grit_err grit_interceptor_create(const grit_interceptor_ops *ops,
                                             void *user_data,
                                             grit_interceptor **out);

/** Take a reference (NULL is a no-op). Thread: any. */
GRIT_EXTERN void grit_interceptor_ref(grit_interceptor *ic);

/** Drop a reference; the last runs ops->destroy. NULL is a no-op.
 * Thread: any. */
GRIT_EXTERN void grit_interceptor_unref(grit_interceptor *ic);

/** Append |ic| to the interceptors of channels made with |a| (the args take
 * a reference; each channel takes its own).
 * Thread: any, one at a time per set.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (a NULL argument); GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_channel_args_add_interceptor(grit_channel_args *a,
                                                       grit_interceptor *ic);

/** Per-call options. Zero-initialise, then set version; zero is the
 * default for every other field. */
typedef struct grit_call_opts {
  unsigned version;    /* GRIT_CALL_OPTS_VERSION */
  uint64_t timeout_ms; /* deadline = start + timeout_ms; 0 = none */
  /** GRIT_WFR_DEFAULT (0): the config decides. */
  grit_wait_for_ready wait_for_ready;
  const grit_metadata *metadata; /* copied; may be NULL */
  const char *authority;         /* copied; NULL = channel default */
  const char *idempotency_key;   /* copied; NULL = generated if enabled */
  /** The method's kind, for the one-response check (GRIT_METHOD_UNKNOWN:
   * none). grit_unary_call and grit_unary_call_async use UNARY whatever
   * this says. */
  grit_method_kind kind;
  /** Request compression; GRIT_COMPRESSION_DEFAULT (0): the channel's. */
  grit_compression compression;
  /** W3C traceparent of the caller's span (copied; NULL = none): the
   * call joins that trace, and trace context is on for this call even if
   * GRIT_ARG_TRACE_CONTEXT is not (SPEC OB-02). A malformed value makes
   * call creation fail with GRIT_ERR_INVALID_ARG. */
  const char *traceparent;
  /* ---- version 3 ---- */
  /** Call credentials for this call only (SPEC CR-01), applied after the
   * channel's (borrowed: the call takes its own reference). */
  grit_call_credentials *call_credentials;
  /** Interceptors for this call only (SPEC IC-01), after the channel's:
   * an array of |interceptor_count| (borrowed: the call references each). */
  grit_interceptor *const *interceptors;
  size_t interceptor_count;
} grit_call_opts;

/** Callbacks of an asynchronous call. Any member may be NULL. Each runs on
 * the I/O thread; pointers passed in are borrowed for the callback only. */
typedef struct grit_call_cbs {
  unsigned version; /* GRIT_CALL_CBS_VERSION */
  /** Response headers arrived (not called for a Trailers-Only response). */
  void (*on_headers)(grit_call *call, const grit_metadata *headers,
                     void *user_data);
  /** One response message. */
  void (*on_message)(grit_call *call, const uint8_t *data, size_t len,
                     void *user_data);
  /** The call ended; exactly once, last. |st| is borrowed. */
  void (*on_done)(grit_call *call, const grit_status *st, void *user_data);
  /** After grit_call_try_send returned GRIT_ERR_AGAIN: the call's unsent
   * bytes have drained to half of GRIT_ARG_PER_CALL_SEND_BUFFER, so a send
   * will be accepted (as Java's onReady). Once per refusal; not after the
   * call has ended (on_done comes instead). */
  void (*on_send_ready)(grit_call *call, void *user_data);
} grit_call_cbs;

#define GRIT_CALL_CBS_VERSION 2

/** Start a call to |method| ("/pkg.Service/Method").
 *
 * With |cbs| NULL the call is in blocking mode: read with grit_call_recv
 * and grit_call_finish. With |cbs| the results arrive by callback and
 * grit_call_recv/grit_call_finish return GRIT_ERR_CALL_STATE.
 * Send with grit_call_send and grit_call_close_send in either mode.
 *
 * Ownership: method and |opts| copied (|opts| may be NULL); |*out| is new,
 * release with grit_call_destroy (which cancels an unfinished call).
 * |user_data| is never dereferenced.
 * Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (NULL channel, method or |out|,
 * method not starting with '/', opts version other than
 * GRIT_CALL_OPTS_VERSION, wait_for_ready or kind out of range, unknown cbs
 * version); GRIT_ERR_SHUTDOWN (the channel was made before fork(), in the
 * child); GRIT_ERR_NOMEM. |*out| is NULL on error. A destroyed channel
 * must not be passed (Lifetimes, at the top). */
GRIT_EXTERN grit_err grit_call_start(grit_channel *ch, const char *method,
                                     const grit_call_opts *opts,
                                     const grit_call_cbs *cbs, void *user_data,
                                     grit_call **out);

/** Send one request message of |len| bytes, waiting for room (SPEC AP-03).
 *
 * Sends are flow controlled: the call's unsent bytes (accepted by grit but
 * not yet handed to HTTP/2, which takes them as the server's window
 * allows) stay within GRIT_ARG_PER_CALL_SEND_BUFFER. When accepting this
 * message would pass that bound, grit_call_send waits until the bytes
 * ahead of it have gone out, or the call ends. A message is accepted at
 * once when nothing is unsent, so a message larger than the bound still
 * goes. Works in both modes.
 *
 * Ownership: data copied (once, into the frame that goes on the wire).
 * Thread: any, one thread at a time per call. On the I/O thread (inside a
 * callback) it never waits: there, use grit_call_try_send.
 * Returns GRIT_OK once the message is accepted; GRIT_ERR_CALL_STATE after
 * grit_call_close_send or once the call has ended, also while waiting (the
 * message is dropped; the call's status says why); GRIT_ERR_WOULD_DEADLOCK
 * on the I/O thread when it would have to wait; GRIT_ERR_INVALID_ARG;
 * GRIT_ERR_NOMEM. An oversize message is not an error here: the call ends
 * RESOURCE_EXHAUSTED (SPEC SC-07). */
GRIT_EXTERN grit_err grit_call_send(grit_call *call, const void *data,
                                    size_t len);

/** Send one request message if there is room now, never waiting: the
 * non-blocking form of grit_call_send, for callback-mode calls.
 *
 * When the message would take the call's unsent bytes past
 * GRIT_ARG_PER_CALL_SEND_BUFFER, nothing is queued and it returns
 * GRIT_ERR_AGAIN; the call's on_send_ready callback then runs once there
 * is room again.
 * Ownership: data copied. Thread: any, including the call's callbacks.
 * Returns GRIT_OK; GRIT_ERR_AGAIN; GRIT_ERR_CALL_STATE (half-closed or
 * ended); GRIT_ERR_INVALID_ARG; GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_call_try_send(grit_call *call, const void *data,
                                        size_t len);

/** grit_call_send_flags: this message goes uncompressed even when the
 * call compresses (as C-core's GRPC_WRITE_NO_COMPRESS). */
#define GRIT_SEND_NO_COMPRESS (1u << 0)
/** grit_call_send_flags: never wait; GRIT_ERR_AGAIN instead (as
 * grit_call_try_send). */
#define GRIT_SEND_NO_WAIT (1u << 1)

/** Send one request message with |flags| (GRIT_SEND_NO_COMPRESS,
 * GRIT_SEND_NO_WAIT, or 0): grit_call_send and grit_call_try_send are
 * this with 0 and GRIT_SEND_NO_WAIT.
 *
 * Ownership: data copied (compressed into the frame when the call
 * compresses). Thread: as grit_call_send, or as grit_call_try_send with
 * GRIT_SEND_NO_WAIT.
 * Returns what those return; GRIT_ERR_INVALID_ARG also for unknown flag
 * bits. */
GRIT_EXTERN grit_err grit_call_send_flags(grit_call *call, const void *data,
                                          size_t len, unsigned flags);

/** Half-close: no more request messages. Thread: any.
 * Returns GRIT_OK or GRIT_ERR_CALL_STATE if already half-closed. */
GRIT_EXTERN grit_err grit_call_close_send(grit_call *call);

/** Blocking mode: wait for the next response message.
 *
 * Ownership: |out| receives new data; release with grit_bytes_free.
 * Thread: any but the I/O thread.
 * Returns GRIT_OK with a message; GRIT_END_OF_STREAM (positive, not an
 * error) at the end of the response stream, and again on every later call
 * (then call grit_call_finish for the status);
 * GRIT_ERR_NOMEM when the copy could not be made (the message stays
 * queued: call again);
 * GRIT_ERR_CALL_STATE for an async call; GRIT_ERR_WOULD_DEADLOCK on the
 * I/O thread. */
GRIT_EXTERN grit_err grit_call_recv(grit_call *call, grit_bytes *out);

/** Blocking mode: wait for the call's final status. Response messages not
 * yet read are discarded.
 *
 * Ownership: |st| is filled with new data, on error too (see grit_status);
 * release it with grit_status_free.
 * Thread: any but the I/O thread.
 * Returns GRIT_OK with the call's status; GRIT_ERR_INVALID_ARG (|st| NULL,
 * nothing filled; or |call| NULL: INVALID_ARGUMENT); GRIT_ERR_CALL_STATE
 * for an async call or a second finish (FAILED_PRECONDITION);
 * GRIT_ERR_WOULD_DEADLOCK on the I/O thread (FAILED_PRECONDITION). */
GRIT_EXTERN grit_err grit_call_finish(grit_call *call, grit_status *st);

/** Blocking mode: the response headers, waiting for them (or for the end
 * of a Trailers-Only call, which gives an empty list).
 *
 * Ownership: borrowed, valid until grit_call_destroy.
 * Thread: any but the I/O thread. Returns NULL on an async call. */
GRIT_EXTERN const grit_metadata *grit_call_headers(grit_call *call);

/** Cancel the call: it ends CANCELLED unless it has already ended, the
 * server sees RST_STREAM CANCEL, and no retry follows (SPEC RT-11).
 * Thread: any, including inside the call's callbacks. Idempotent. */
GRIT_EXTERN void grit_call_cancel(grit_call *call);

/** Release the caller's handle on |call|, cancelling it first if it has not
 * ended. For an async call on_done still runs exactly once (with CANCELLED
 * if the cancel decided the outcome); grit keeps the call alive until then.
 * Thread: any, including the call's own callbacks. NULL is a no-op. */
GRIT_EXTERN void grit_call_destroy(grit_call *call);

/** Per-call result information (SPEC MX-02). In caller storage
 * (grit_call_get_info, grit_unary_call) set |size| first
 * (GRIT_CALL_INFO_INIT); fields are added at the end only. */
typedef struct grit_call_info {
  size_t size; /* sizeof(grit_call_info) as the caller knows it */
  /** The call's id: process-wide (shared by every channel and runtime),
   * unique, increasing in the order calls are created, never 0. The same
   * value as grit_attempt_record.call_id and in grit's trace lines. */
  uint64_t call_id;
  uint32_t attempts;            /* attempts started, transparent included */
  uint32_t transparent_retries; /* of which transparent */
  uint32_t hedges;              /* hedges beyond the first attempt */
  uint64_t backoff_ms;          /* total time waiting in backoff */
  char peer[128];               /* committed attempt's peer, "" if none */
  /** The request encoding ("identity", "gzip", "deflate"; set from the
   * start) and the committed attempt's response grpc-encoding ("" if
   * none). */
  char request_encoding[16];
  char response_encoding[32];
} grit_call_info;

/** A grit_call_info with |size| set and everything else zero. */
#define GRIT_CALL_INFO_INIT                                                    \
  { .size = sizeof(grit_call_info) }

/** Fill |info| for |call|, as many fields as |info->size| holds. call_id is
 * set from the start; the rest is meaningful once the call has ended.
 * Thread: any. Returns GRIT_OK or GRIT_ERR_INVALID_ARG (NULL, or
 * |info->size| not set). */
GRIT_EXTERN grit_err grit_call_get_info(grit_call *call, grit_call_info *info);

/* ------------------------------------------------------------------------
 * Unary convenience.
 */

/** Blocking unary call: send |req| (|req_len| bytes), half-close, wait.
 *
 * Ownership: req copied; |resp| receives new data (empty unless the call
 * ended OK with a message; release with grit_bytes_free); |st| filled with
 * new data on every return (release with grit_status_free); |info| filled
 * as grit_call_get_info would once the call has ended (attempts, hedges,
 * backoff, peer; as many fields as |info->size| holds), all zero (call_id
 * 0) when the call did not run. Each of the three may be NULL.
 * Thread: any but the I/O thread.
 * Returns GRIT_OK when the call ran (its outcome is in |st|, which may be
 * an error status); otherwise the call did not run and |st| holds the
 * mapped code (see grit_status) and the cause: GRIT_ERR_INVALID_ARG (NULL
 * channel or method, method not starting with '/', bad opts version,
 * wait_for_ready or kind, NULL |req| with a length, |req_len| over 4 GiB,
 * |info->size| not set);
 * GRIT_ERR_SHUTDOWN (the channel was made before fork(), in the child);
 * GRIT_ERR_NOMEM; GRIT_ERR_WOULD_DEADLOCK on the I/O thread. A destroyed
 * channel must not be passed (Lifetimes, at the top). */
GRIT_EXTERN grit_err grit_unary_call(grit_channel *ch, const char *method,
                                     const void *req, size_t req_len,
                                     const grit_call_opts *opts,
                                     grit_bytes *resp, grit_status *st,
                                     grit_call_info *info);

/** Completion of grit_unary_call_async. |resp| is the response message
 * (NULL and 0 when none), |st| the status; both borrowed for the callback.
 * |info| is the call's result information (borrowed; |info->size| is the
 * library's own sizeof). Runs on the I/O thread. */
typedef void (*grit_unary_cb)(const grit_status *st, const uint8_t *resp,
                              size_t resp_len, const grit_call_info *info,
                              void *user_data);

/** Asynchronous unary call; |cb| runs exactly once unless this returns an
 * error.
 *
 * Ownership: req, method and opts copied. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (as grit_unary_call, or |cb|
 * NULL); GRIT_ERR_SHUTDOWN; GRIT_ERR_NOMEM. On error |cb| never runs.
 */
GRIT_EXTERN grit_err grit_unary_call_async(grit_channel *ch, const char *method,
                                           const void *req, size_t req_len,
                                           const grit_call_opts *opts,
                                           grit_unary_cb cb, void *user_data);

/* ------------------------------------------------------------------------
 * Service config checks, for operators and the `grit config check` command.
 */

/** Validate a service config JSON of |len| bytes and describe it.
 *
 * On success |*report| describes, for each method name, the effective
 * policy in plain words (timeout, wait-for-ready, retry or hedging, limits),
 * then throttling and load balancing. On a rejection it lists every problem
 * with its JSON path and the rule broken (SPEC SC-02).
 *
 * Ownership: |*report| is new (release with grit_free); NULL on NOMEM.
 * |report| may be NULL. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_CONFIG (problems in the report);
 * GRIT_ERR_INVALID_ARG (|json| NULL); GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_service_config_check(const char *json, size_t len,
                                               char **report);

/* ---- xDS, for operators (issue 27; SPEC XD-01, docs/xds.md) ---- */

/** Validate an xDS bootstrap (gRFC A27) of |len| bytes of JSON, as an
 * "xds:///" channel would read it.
 * Ownership: none kept. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_CONFIG (|detail|, when not NULL: the
 * JSON path, e.g. "$.xds_servers[0].channel_creds", and the reason);
 * GRIT_ERR_INVALID_ARG (|json| NULL); GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_xds_bootstrap_check(const char *json, size_t len,
                                              grit_error_detail *detail);

/** What the process's xDS client for a bootstrap's server holds, as JSON
 * (the client status an operator reads; `grit call --show-xds`): the
 * server, whether its ADS stream is connected, stream and failure counts,
 * and for each of "listener", "route_config", "cluster" and "endpoints"
 * the version ACKed last, the last NACK's reason, the valid and invalid
 * update counts and every watched resource with its cache state
 * ("requested", "does_not_exist", "acked", "nacked",
 * "nacked_but_cached") and what it holds (routes and their clusters, a
 * cluster's type and policy, endpoints per locality with priority, weight
 * and health). The client exists while an "xds:///" channel using that
 * server has started (made its first call or connect).
 *
 * |bootstrap| is JSON as GRIT_ARG_XDS_BOOTSTRAP_CONFIG (NULL: the
 * environment's, as a channel without the argument reads it).
 * Ownership: |*json_out| new (release with grit_free). Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_ARG (|json_out| NULL);
 * GRIT_ERR_INVALID_CONFIG (no or an invalid bootstrap: |detail| as for
 * grit_channel_create); GRIT_ERR_NOT_FOUND (no client for that server
 * now); GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_xds_client_status(const char *bootstrap,
                                            grit_error_detail *detail,
                                            char **json_out);

/** Explain a DNS TXT config value (the text after "grpc_config=", a JSON
 * array of choices): each choice, which one this client picks for
 * language "c" and |hostname| (NULL: the machine's), and why; then the
 * chosen config checked as grit_service_config_check does (SPEC DNS-03).
 *
 * Ownership: |*report| new (grit_free); may be NULL. Thread: any.
 * Returns GRIT_OK; GRIT_ERR_INVALID_CONFIG (the TXT value or the chosen
 * config is invalid); GRIT_ERR_NOT_FOUND (no choice matches);
 * GRIT_ERR_INVALID_ARG; GRIT_ERR_NOMEM. */
GRIT_EXTERN grit_err grit_service_config_check_txt(const char *txt, size_t len,
                                                   const char *hostname,
                                                   char **report);

/** grit_service_config_check_txt for a client of |language| (NULL: "c",
 * grit's own; clientLanguage lists are matched case-insensitively), to see
 * which choice a Go or Java client with |hostname| gets. Every choice's
 * serviceConfig is validated, reachable or not; an invalid one anywhere
 * makes the verdict GRIT_ERR_INVALID_CONFIG.
 *
 * Ownership: |*report| new (grit_free); may be NULL. Thread: any.
 * Returns what grit_service_config_check_txt returns. */
GRIT_EXTERN grit_err grit_service_config_check_txt_for(const char *txt,
                                                       size_t len,
                                                       const char *hostname,
                                                       const char *language,
                                                       char **report);

/** Fetch the _grpc_config.<host> TXT record through DNS (server
 * |dns_server| "addr:port", or NULL for the system's) and explain it like
 * grit_service_config_check_txt. Blocks up to |timeout_ms| (0: 5000).
 *
 * Ownership: |*report| new (grit_free); may be NULL. Thread: any but a
 * runtime's I/O thread.
 * Returns what grit_service_config_check_txt returns, plus
 * GRIT_ERR_NOT_FOUND when there is no such record (NXDOMAIN, no TXT, no
 * "grpc_config=" record), GRIT_ERR_TIMEOUT, GRIT_ERR_SYSTEM (DNS failure
 * such as no server reachable, reason in the report), GRIT_ERR_INVALID_ARG
 * (bad |dns_server| or |host| form). */
GRIT_EXTERN grit_err grit_service_config_check_dns(const char *host,
                                                   const char *dns_server,
                                                   uint64_t timeout_ms,
                                                   char **report);

/** grit_service_config_check_dns for a client of |language| with
 * |hostname| (either NULL: "c" and this machine's name), as
 * grit_service_config_check_txt_for. |target| is "host", "host:port",
 * "dns:///host[:port]" or "dns://ADDR:PORT/host[:port]" (the port is not
 * part of the TXT name; a server in the target is used when |dns_server|
 * is NULL); grit_service_config_check_dns takes the same forms.
 *
 * Ownership: |*report| new (grit_free); may be NULL. Thread: any but a
 * runtime's I/O thread.
 * Returns what grit_service_config_check_dns returns. */
GRIT_EXTERN grit_err grit_service_config_check_dns_for(
    const char *target, const char *dns_server, uint64_t timeout_ms,
    const char *hostname, const char *language, char **report);

#ifdef __cplusplus
}
#endif

#endif
