/*
 * transport: one HTTP/2 connection (TCP or unix socket, cleartext or TLS
 * through OpenSSL memory BIOs) carrying gRPC streams, driven by nghttp2 on a
 * libuv loop. lb/ (subchannels) and channel/ call it. It knows nothing of
 * service config, retries or load balancing. Everything here is loop-only.
 *
 * Callback contract: a transport never invokes a grit_transport_cbs or
 * grit_stream_cbs callback from inside an nghttp2, OpenSSL or libuv-read
 * call chain that it is still walking; events found while parsing input are
 * queued and delivered after nghttp2_session_mem_recv returns. So a callback
 * may call any function of this header, including cancel and shutdown.
 * Layout: floor 1 of docs/layout.md.
 */
#ifndef GRIT_TRANSPORT_H
#define GRIT_TRANSPORT_H

#include <sys/socket.h>
#include <sys/un.h>
#include <uv.h>

#include "compress/compress.h"
#include "util/util.h"

/* A resolved address: IPv4, IPv6 or a unix socket path. */
typedef struct grit_addr {
  union {
    struct sockaddr sa;
    struct sockaddr_storage ss;
    struct sockaddr_un un;
  } u;
  socklen_t len;
  char text[120]; /* "127.0.0.1:50051", "[::1]:443", "unix:/tmp/s" */
} grit_addr;

/* Fill |a| from a numeric IPv4/IPv6 host and port, or a unix path. */
grit_err grit_addr_from_ip(grit_addr *a, const char *host, uint16_t port);
grit_err grit_addr_from_unix(grit_addr *a, const char *path);

/* TLS context shared by the transports of a channel: roots, optional client
 * certificate, ALPN "h2". Refcounted; OpenSSL errors are drained into
 * |d->reason|. */
typedef struct grit_tls_ctx grit_tls_ctx;

typedef struct grit_tls_opts {
  const char *root_certs_file;  /* NULL: system default store */
  const char *root_certs_pem;   /* PEM text; with the file, both trusted */
  const char *cert_chain_file;  /* NULL: no client certificate */
  const char *private_key_file; /* with cert_chain_file */
  bool skip_verify; /* GRIT_ARG_TLS_SKIP_VERIFY: no certificate check */
} grit_tls_opts;

grit_err grit_tls_ctx_create(const grit_tls_opts *o, grit_error_detail *d,
                             grit_tls_ctx **out);
grit_tls_ctx *grit_tls_ctx_ref(grit_tls_ctx *c);
void grit_tls_ctx_unref(grit_tls_ctx *c);

typedef struct grit_transport grit_transport;
typedef struct grit_stream grit_stream;

typedef struct grit_transport_opts {
  grit_tls_ctx *tls;           /* NULL: cleartext h2 with prior knowledge */
  const char *tls_server_name; /* SNI and hostname check; copied */
  bool tls_verify_hostname;
  uint32_t max_header_list_bytes; /* response header/trailer list limit */
  int64_t max_recv_message_bytes; /* -1 unlimited; per-stream override */
  uint64_t connect_timeout_ms;    /* TCP + TLS + SETTINGS; 0 = none */
  uint64_t keepalive_time_ms;     /* 0 = no keepalive pings */
  uint64_t keepalive_timeout_ms;
  bool keepalive_permit_without_calls;
  uint32_t read_spin_us;  /* poll without sleeping after stream DATA */
  const char *user_agent; /* full user-agent value; copied */
} grit_transport_opts;

/* Why a connection ended, for on_closed. */
typedef struct grit_transport_close_info {
  grit_status_code code; /* UNAVAILABLE for network and TLS failures */
  const char *reason;    /* borrowed for the callback */
  bool was_ready;        /* the connection had become ready before */
  bool keepalive_timeout;
  bool too_many_pings; /* GOAWAY ENHANCE_YOUR_CALM "too_many_pings" seen */
} grit_transport_close_info;

typedef struct grit_transport_cbs {
  /* TCP (and TLS) is up and the server's first SETTINGS has arrived. */
  void (*on_ready)(grit_transport *t, void *user_data);
  /* GOAWAY received: no new stream may start here. Streams above
   * |last_stream_id| have already ended (refused, see grit_stream_result);
   * the ones at or below it run on. */
  void (*on_goaway)(grit_transport *t, uint32_t last_stream_id,
                    uint32_t h2_error_code, void *user_data);
  /* The connection is gone (connect failure, error, GOAWAY drained, peer
   * close, keepalive timeout). Every stream's on_done has run before this.
   * Called once; the owner then calls grit_transport_destroy. */
  void (*on_closed)(grit_transport *t, const grit_transport_close_info *ci,
                    void *user_data);
  /* A stream slot freed up under MAX_CONCURRENT_STREAMS (optional). */
  void (*on_capacity)(grit_transport *t, void *user_data);
} grit_transport_cbs;

/* Start connecting to |addr|. Returns GRIT_OK and a transport whose
 * callbacks report progress; GRIT_ERR_NOMEM; GRIT_ERR_SYSTEM. */
grit_err grit_transport_create(uv_loop_t *loop, const grit_addr *addr,
                               const grit_transport_opts *o,
                               const grit_transport_cbs *cbs, void *user_data,
                               grit_transport **out);

/* Abort: every open stream ends UNAVAILABLE (their on_done callbacks run,
 * deferred), on_closed runs, then the memory is freed once the libuv
 * handles close. Safe to call at any time, also from callbacks, and after
 * on_closed. No callback runs after on_closed. NULL is a no-op. */
void grit_transport_destroy(grit_transport *t);

/* Send GOAWAY(NO_ERROR) and let streams finish; then close. */
void grit_transport_drain(grit_transport *t);

bool grit_transport_is_ready(const grit_transport *t);
/* Streams open (including those queued under MAX_CONCURRENT_STREAMS). */
size_t grit_transport_stream_count(const grit_transport *t);
/* Streams started on a transport, and how many ended with grpc status OK
 * or another (SPEC OP-03, channelz); loop only. */
typedef struct grit_transport_calls {
  uint64_t started, succeeded, failed;
} grit_transport_calls;
/* Add |t|'s counts to |acc| (NULL |t|: nothing). */
void grit_transport_calls_add(const grit_transport *t,
                              grit_transport_calls *acc);
const grit_addr *grit_transport_peer(const grit_transport *t);

/* How far a stream's request got, for transparent retry (SPEC TR-01..04). */
typedef enum grit_wire_state {
  GRIT_WIRE_NOT_SENT = 0, /* no HEADERS frame was written for it */
  GRIT_WIRE_REFUSED = 1,  /* written, but the server says it did not
                             process it: RST_STREAM REFUSED_STREAM, or a
                             GOAWAY whose last_stream_id is below it */
  GRIT_WIRE_SENT = 2,     /* written; the server may have processed it */
} grit_wire_state;

typedef struct grit_stream_result {
  grit_status_code code;
  const char *message;     /* decoded grpc-message, borrowed, never NULL */
  grit_metadata *trailers; /* borrowed for the callback; never NULL */
  bool trailers_only;      /* no response headers came before the status */
  bool headers_received;   /* response headers came (not trailers-only) */
  grit_wire_state wire;
  const char *encoding; /* the response's grpc-encoding; "" if none */
} grit_stream_result;

typedef struct grit_stream_cbs {
  /* Response headers (not for Trailers-Only). |md| is borrowed for the
   * callback (take a copy to keep it). */
  void (*on_headers)(grit_stream *s, const grit_metadata *md, void *user_data);
  /* One whole response message (prefix removed); the callee takes the
   * reference. */
  void (*on_message)(grit_stream *s, grit_slice *msg, void *user_data);
  /* The stream ended: status from trailers, HTTP status, RST_STREAM,
   * connection loss, local limits or cancel. Exactly once, last; the
   * stream is freed right after it returns. */
  void (*on_done)(grit_stream *s, const grit_stream_result *r, void *user_data);
  /* Queued request bytes went to HTTP/2 (optional; deferred, at most once
   * per flush): grit_stream_pending_bytes has dropped. */
  void (*on_send_progress)(grit_stream *s, void *user_data);
} grit_stream_cbs;

/* What goes in a request's HEADERS frame (SPEC HS-01, HS-04, RT-08). */
typedef struct grit_stream_head {
  const char *path;               /* "/pkg.Service/Method" */
  size_t path_len;                /* strlen(path), or 0 to measure it */
  const char *authority;          /* :authority */
  int64_t timeout_ns;             /* grpc-timeout; < 0 = none; 0 sends "1n" */
  const grit_metadata *metadata;  /* application metadata; may be NULL */
  uint32_t previous_attempts;     /* grpc-previous-rpc-attempts if > 0 */
  int64_t max_recv_message_bytes; /* per call; -1 unlimited; 0 = transport
                                     default */
  bool discard_headers;    /* nobody reads the response headers: on_headers
                              still runs, with an empty list */
  const char *encoding;    /* grpc-encoding of the request messages (CP-01);
                              NULL: none (identity) */
  const char *traceparent; /* W3C traceparent to send, or NULL (OB-02) */
} grit_stream_head;

/* Open a stream. Everything in |h| is copied. If the server's
 * MAX_CONCURRENT_STREAMS is reached the stream waits (wire state
 * NOT_SENT). Returns GRIT_OK; GRIT_ERR_SHUTDOWN if the transport is not
 * ready, going away or closed; GRIT_ERR_NOMEM. */
grit_err grit_transport_start_stream(grit_transport *t,
                                     const grit_stream_head *h,
                                     const grit_stream_cbs *cbs,
                                     void *user_data, grit_stream **out);

/* Queue one framed message (5-byte prefix included, see frame.h); the
 * stream takes a reference of its own (the caller keeps its). Returns GRIT_OK
 * or GRIT_ERR_CALL_STATE after close_send or once the stream ended. */
grit_err grit_stream_send(grit_stream *s, grit_slice *framed);
/* Half-close (END_STREAM after the queued messages). */
grit_err grit_stream_close_send(grit_stream *s);
/* RST_STREAM CANCEL now; on_done follows (deferred) with |code| and
 * |message| as the result. Safe after on_done was queued (no-op). */
void grit_stream_cancel(grit_stream *s, grit_status_code code,
                        const char *message);
/* Bytes queued on the stream and not yet handed to nghttp2. */
size_t grit_stream_pending_bytes(const grit_stream *s);
/* Pause or resume giving back |s|'s flow-control window (SPEC FC-04).
 * While paused, DATA still arrives and is delivered, but its window is
 * withheld, so the server stops once it has used what it has; resuming
 * gives it all back. The owner pauses while its reader lags. */
void grit_stream_set_read_paused(grit_stream *s, bool paused);

/* ---- pure helpers (each in its own file, unit-tested) ---- */

/* frame.c: gRPC message framing. grit_frame_message makes one slice of
 * 5 + len bytes: flag 0, big-endian length, body copied once. */
grit_slice *grit_frame_message(const void *data, size_t len);

/* The incremental deframer: feed DATA payload bytes; each whole message
 * is passed to |cb| as a new slice, decompressed if its flag says so.
 * Errors: a compressed flag without an encoding, or with one grit did not
 * offer, or corrupt compressed data (INTERNAL, SPEC CP-02); a length, or a
 * decompressed length, over |max_len| (RESOURCE_EXHAUSTED, CP-03); out of
 * memory (RESOURCE_EXHAUSTED). */
typedef enum grit_deframer_enc {
  GRIT_DEFRAMER_ENC_NONE = 0,    /* no grpc-encoding: flag 1 is an error */
  GRIT_DEFRAMER_ENC_CODEC = 1,   /* a codec grit offered */
  GRIT_DEFRAMER_ENC_UNKNOWN = 2, /* a name grit did not offer */
} grit_deframer_enc;

typedef struct grit_deframer {
  uint8_t hdr[5];
  size_t hdr_have;
  grit_slice *msg;
  size_t msg_have;
  int64_t max_len;
  grit_deframer_enc enc;
  grit_codec codec;
  char enc_name[32]; /* the response's grpc-encoding, truncated */
  char why[128];     /* an error reason naming the encoding */
} grit_deframer;

typedef void (*grit_deframe_cb)(grit_slice *msg, void *user_data);
void grit_deframer_init(grit_deframer *d, int64_t max_len);
void grit_deframer_free(grit_deframer *d);
/* Returns GRIT_STATUS_OK, or the status code that fails the stream with a
 * reason in |why| (static string). */
grit_status_code grit_deframer_feed(grit_deframer *d, const uint8_t *p,
                                    size_t n, grit_deframe_cb cb, void *ud,
                                    const char **why);
bool grit_deframer_mid_message(const grit_deframer *d);
/* grit_deframer_set_encoding: the response's grpc-encoding value (|len|
 * bytes), from its headers, says how flagged messages are decoded. */
void grit_deframer_set_encoding(grit_deframer *d, const char *name, size_t len);

/* timeout.c: grpc-timeout (SPEC HS-04). Encode rounds up, at most 8 digits,
 * never "0" (an expired deadline is "1n"); |out| needs 10 bytes. Parse
 * returns false on malformed input. */
void grit_timeout_encode(int64_t ns, char out[10]);
bool grit_timeout_parse(const char *s, size_t len, int64_t *ns);

/* percent.c: grpc-message (SPEC HS-05). Encode bytes outside 0x20-0x7E and
 * '%'; decode permissively. Both return new NUL-terminated strings or NULL
 * on out-of-memory. */
char *grit_percent_encode(const uint8_t *p, size_t n, size_t *out_len);
char *grit_percent_decode(const uint8_t *p, size_t n, size_t *out_len);

/* base64.c: -bin values (SPEC HS-06). Encode unpadded; decode accepts padded
 * and unpadded. Return new buffers or NULL (bad input / out of memory). */
char *grit_base64_encode(const uint8_t *p, size_t n, size_t *out_len);
uint8_t *grit_base64_decode(const char *p, size_t n, size_t *out_len);

/* status_map.c: HTTP :status to gRPC code (SPEC HS-02); RST_STREAM error
 * code to gRPC code (SPEC HS-03); grpc-status text to code (not 0..16 is
 * UNKNOWN, and absent/garbage is UNKNOWN). */
grit_status_code grit_status_from_http(int http_status);
grit_status_code grit_status_from_rst(uint32_t h2_error_code);
grit_status_code grit_status_from_text(const char *s, size_t len);

#endif
