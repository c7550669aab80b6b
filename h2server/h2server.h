/*
 * h2server: a scriptable, fault-injecting gRPC-over-HTTP/2 server for tests.
 * It runs its own libuv loop on its own thread, answers each request with an
 * action (from a script, a handler callback, or the echo default) and logs
 * what it saw so tests assert on the log, not on sleeps. Independent of grit:
 * it links only nghttp2, libuv and OpenSSL.
 * Layout: floor 5 of docs/layout.md.
 */
#ifndef H2SERVER_H
#define H2SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct h2s_server h2s_server;

/* Metadata entries an action adds; a NULL name ends a list. */
#define H2S_MAX_MD 8

typedef struct h2s_header {
  const char *name;
  const char *value;
} h2s_header;

/* What happens to the stream. Zero is the echo reply. */
typedef enum h2s_kind {
  H2S_REPLY = 0,          /* HEADERS, messages, then |end| (trailers) */
  H2S_TRAILERS_ONLY,      /* one HEADERS with :status + grpc-status, END */
  H2S_HANG,               /* never answer this stream */
  H2S_RST,                /* RST_STREAM(rst_code) instead of any answer */
  H2S_DROP,               /* close the transport: no GOAWAY, no answer */
  H2S_INJECT,             /* write |data| raw into the connection, hang */
  H2S_CONTINUATION_FLOOD, /* HEADERS w/o END_HEADERS + |count| CONTINUATION */
  H2S_DEFER               /* handler at headers time: decide at END_STREAM */
} h2s_kind;

/* Response messages of H2S_REPLY. */
typedef enum h2s_body {
  H2S_BODY_ECHO = 0, /* each request message back (none if status != OK) */
  H2S_BODY_BYTES,    /* |count| messages (0: 1) holding |data|,|len| */
  H2S_BODY_SIZE,     /* |count| messages (0: 1) of |size| pattern bytes */
  H2S_BODY_NONE,     /* no messages: "headers then status" */
  H2S_BODY_RAW       /* |data|,|len| verbatim as DATA, no gRPC framing */
} h2s_body;

/* How an H2S_REPLY ends once its messages are out. */
typedef enum h2s_end {
  H2S_END_TRAILERS = 0, /* trailers with grpc-status, END_STREAM */
  H2S_END_HANG,         /* nothing more: the stream stays open */
  H2S_END_RST,          /* RST_STREAM(rst_code) */
  H2S_END_DROP          /* close the connection without GOAWAY */
} h2s_end;

/* Mid-stream SETTINGS_INITIAL_WINDOW_SIZE change: see h2s_action.iws_at. */
#define H2S_MAX_IWS 4

typedef struct h2s_iws_change {
  uint64_t after_bytes; /* once the stream has received this much DATA */
  uint32_t value;       /* ... send SETTINGS_INITIAL_WINDOW_SIZE = value */
} h2s_iws_change;

/* Initial SETTINGS entries; an id of 0 ends the list. */
typedef struct h2s_setting {
  int32_t id;
  uint32_t value;
} h2s_setting;

#define H2S_MAX_SETTINGS 4

/*
 * One answer. A zero-initialised action echoes with status OK. Pointers are
 * copied when the action is handed to the server, so they may point to stack
 * memory. Connection effects (GOAWAY, floods, stop reading) happen first,
 * then the stream effect |kind|, after |delay_ms| if set.
 */
typedef struct h2s_action {
  h2s_kind kind;
  bool at_headers;   /* script steps: act on HEADERS, not on END_STREAM */
  uint32_t delay_ms; /* wait this long (uv timer) before acting */

  /* Response headers and trailers (H2S_REPLY, H2S_TRAILERS_ONLY). */
  int http_status;                /* :status; 0 means 200 */
  const char *content_type;       /* NULL: application/grpc; "": omitted */
  int grpc_status;                /* 0..16 or anything else, sent as a number */
  const char *grpc_status_raw;    /* sent verbatim instead, e.g. "abc" */
  bool no_grpc_status;            /* send no grpc-status at all */
  const char *grpc_message;       /* verbatim, NULL: none */
  const char *pushback;           /* grpc-retry-pushback-ms, verbatim */
  h2s_header headers[H2S_MAX_MD]; /* extra response headers */
  h2s_header trailers[H2S_MAX_MD]; /* extra trailers */
  size_t big_header;               /* add a header with a value this big */

  /* Messages. */
  h2s_body body;
  const void *data; /* H2S_BODY_BYTES, H2S_BODY_RAW, H2S_INJECT */
  size_t len;
  size_t size;         /* H2S_BODY_SIZE */
  uint32_t count;      /* messages, or CONTINUATION frames of the flood */
  bool compressed;     /* set the compressed flag byte to 1 */
  uint32_t prefix_len; /* nonzero: the prefix claims this length */
  h2s_end end;
  uint32_t rst_code; /* H2S_RST, H2S_END_RST: an HTTP/2 error code */

  /* Connection effects. */
  bool goaway;               /* send GOAWAY before acting on the stream */
  int32_t goaway_last_delta; /* last-stream-id = stream id + this */
  uint32_t goaway_code;      /* GOAWAY error code */
  bool goaway_now;           /* close right after GOAWAY, not on drain */
  uint32_t ping_flood;       /* send this many PINGs */
  uint32_t settings_flood;   /* send this many empty SETTINGS */
  bool stop_reading;         /* stop reading the socket for good */
  bool freeze_window;        /* stop sending WINDOW_UPDATEs */
  bool no_ping_ack;          /* stop acking PINGs on this connection */
  bool drop_reset;           /* H2S_DROP and H2S_END_DROP close with RST */
  h2s_setting settings[H2S_MAX_SETTINGS]; /* send these SETTINGS (id 0 ends) */

  /*
   * Receive flow control of this stream, from the time the action is bound
   * (at HEADERS). By default received DATA is consumed at once and nghttp2
   * returns window when half of it is used. window_step: return window
   * (stream and connection) in WINDOW_UPDATEs of 1, 2, ... window_step
   * bytes, cycling, right as DATA arrives. window_every_ms: consume and
   * return window only on a timer of this period (a slow reader).
   * iws_at: each entry (both fields 0 ends the list) sends SETTINGS
   * INITIAL_WINDOW_SIZE once the stream's DATA reaches after_bytes; a
   * lower value waits until more than |value| bytes are received and not
   * yet returned, so the client's stream window goes negative (RFC 9113
   * §6.9.2); see h2s_request.window_low.
   */
  uint32_t window_step;
  uint32_t window_every_ms;
  h2s_iws_change iws_at[H2S_MAX_IWS];

  /*
   * Shape of the response DATA frames (gRPC's http2 test server cases
   * data_frame_padding and no_df_padding_sanity_test): data_chunk > 0
   * puts at most that many data bytes in each frame; data_pad > 0 pads
   * every frame with a Pad Length of data_pad (1..255: the frame then
   * carries 1 + data_pad bytes of padding, within the flow-control
   * window).
   */
  uint32_t data_chunk;
  uint32_t data_pad;
} h2s_action;

/* A script step: |action| for the next |repeat| requests on |path|. */
#define H2S_FOREVER UINT32_MAX

typedef struct h2s_step {
  const char *path; /* NULL: any path */
  uint32_t repeat;  /* 0 means 1; H2S_FOREVER never runs out */
  h2s_action action;
} h2s_step;

typedef struct h2s_msg {
  const uint8_t *data;
  size_t len;
  uint8_t flags; /* the prefix's flag byte: 1 = compressed */
} h2s_msg;

/*
 * A request as the server saw it. The handler gets the live record (server
 * thread); h2s_server_request() returns a snapshot. Times are ms of the
 * server loop's clock since start, the clock delay_ms timers run on.
 */
typedef struct h2s_request {
  size_t seq;          /* 0-based, per server, in HEADERS arrival order */
  uint32_t conn_index; /* 0-based, in accept order */
  int32_t stream_id;
  const char *path; /* shortcuts into |headers|, NULL when absent */
  const char *authority;
  const char *method;
  const char *content_type;
  const char *grpc_timeout;
  const h2s_header *headers; /* all, pseudo-headers first, in order */
  size_t n_headers;
  const h2s_msg *msgs; /* complete request messages */
  size_t n_msgs;
  size_t msg_bytes;         /* total payload bytes of |msgs| */
  bool truncated;           /* END_STREAM inside a message */
  bool half_closed;         /* the client sent END_STREAM */
  bool client_rst;          /* the client sent RST_STREAM ... */
  uint32_t client_rst_code; /* ... with this code */
  bool closed;              /* the stream is gone */
  uint32_t close_code;      /* nghttp2's error code at close */
  bool acted;               /* the server applied an action ... */
  h2s_kind kind;            /* ... of this kind */
  int status_sent;          /* grpc-status number sent, -1 if none */
  uint32_t rst_sent;        /* RST_STREAM code sent, 0 if none */
  bool goaway_sent;         /* this request's action sent a GOAWAY */
  uint64_t headers_ms;      /* when HEADERS arrived */
  uint64_t end_ms;          /* when END_STREAM arrived (0: never) */
  uint64_t acted_ms;        /* when the action was applied */
  uint64_t data_bytes;      /* DATA payload received on the open stream */
  uint32_t open_streams;    /* streams open on the connection at its HEADERS,
                               itself included */
  uint32_t iws_sent;        /* iws_at changes sent */
  int64_t window_low; /* lowest client stream window an iws_at change left:
                         value - bytes not yet returned (0: none sent) */
} h2s_request;

/*
 * Handler, on the server thread: |act| is prefilled with the script's step
 * (or the default) and the handler may change it. Called at END_STREAM
 * (|at_end| true); with h2s_config.handler_at_headers also on HEADERS, where
 * |act->kind| starts as H2S_DEFER unless the step acts at headers. It must
 * not block and must not call h2s_server_* functions that wait.
 */
typedef void (*h2s_handler_cb)(const h2s_request *req, bool at_end,
                               h2s_action *act, void *user_data);

/* What happens right after accept, before HTTP/2 starts. */
typedef enum h2s_accept {
  H2S_ACCEPT_SERVE = 0, /* normal */
  H2S_ACCEPT_CLOSE,     /* close the socket at once */
  H2S_ACCEPT_RESET,     /* close it with a TCP RST */
  H2S_ACCEPT_SILENT     /* keep it open, never read nor write */
} h2s_accept;

typedef struct h2s_config {
  uint16_t port;             /* 0: ephemeral */
  const char *host;          /* NULL: 127.0.0.1 */
  const char *unix_path;     /* also listen on this unix socket */
  const char *tls_cert_file; /* both set: TLS, ALPN h2 */
  const char *tls_key_file;
  uint32_t max_concurrent_streams; /* 0: not sent (unlimited) */
  uint32_t initial_window_size;    /* 0: not sent (65535) */
  uint32_t connection_window_size; /* > 65535: granted at start */
  h2s_setting settings[8];         /* more SETTINGS, sent verbatim */
  bool no_ping_ack;                /* never ack PINGs */
  h2s_accept accept;               /* see h2s_server_set_accept */
  const h2s_step *script;          /* copied */
  size_t script_len;
  const char *script_text;          /* steps in text form, see h2s_step_parse */
  const h2s_action *default_action; /* NULL: echo */
  h2s_handler_cb handler;
  void *handler_data;
  bool handler_at_headers;
  bool quiet; /* no diagnostics on stderr */
  /* TLS only: require a client certificate signed by this CA file. */
  const char *tls_client_ca_file;
  bool tls_no_alpn; /* TLS only: select no ALPN protocol (not even h2) */
} h2s_config;

typedef struct h2s_stats {
  uint64_t connections;      /* accepted */
  uint64_t connections_open; /* currently open */
  uint64_t requests;         /* HEADERS seen */
  uint64_t pings_received;   /* non-ACK PINGs */
  uint64_t ping_acks_sent;
  uint64_t settings_received; /* non-ACK SETTINGS */
  uint64_t goaways_sent;
  uint64_t goaways_received;
  uint64_t rst_received;
  uint64_t window_updates_received;
  uint64_t window_updates_sent;
  uint64_t settings_sent;    /* non-ACK SETTINGS, the initial one too */
  uint64_t refused_sent;     /* RST_STREAM(REFUSED_STREAM), nghttp2's too */
  uint64_t max_open_streams; /* most streams open at once on a connection */
  uint64_t bytes_received;   /* HTTP/2 bytes (after TLS), all connections */
  uint64_t data_frames_received;
  uint64_t max_data_frame_received; /* largest DATA frame payload */
  uint64_t data_bytes_sent;    /* DATA frame payload written, all streams */
  uint64_t ping_acks_received; /* PING ACKs from the client */
  uint64_t data_frames_sent;
  uint64_t padded_frames_sent; /* DATA frames sent with padding */
} h2s_stats;

/*
 * Start a server and its thread. Listens before returning, so the port is
 * known. Returns 0, or a negative errno (libuv's codes, which equal -errno
 * on Unix): -EADDRINUSE, -EINVAL for a bad script or TLS files, ...
 * |*out| is NULL on failure.
 */
int h2s_server_start(const h2s_config *cfg, h2s_server **out);

/* Close everything, join the thread, free. NULL is a no-op. */
void h2s_server_stop(h2s_server *srv);

/* The TCP port it listens on (stays the same across restarts). */
uint16_t h2s_server_port(const h2s_server *srv);

/* "127.0.0.1:PORT" into |buf|. */
const char *h2s_server_addr(const h2s_server *srv, char *buf, size_t len);

/* Close the listeners and every connection abruptly (no GOAWAY). */
void h2s_server_kill(h2s_server *srv);

/* Kill, then listen again on the same port(s). Returns 0 or -errno. */
int h2s_server_restart(h2s_server *srv);

/* GOAWAY(last seen stream, |code|) on every connection; each closes once
 * drained, or at once when |close_now|. The listener stays open. */
void h2s_server_goaway(h2s_server *srv, uint32_t code, bool close_now);

/* SETTINGS |list| (an id of 0 ends it, at most 8) on every open
 * connection, from the test thread; returns once they are queued. */
void h2s_server_settings(h2s_server *srv, const h2s_setting *list);

/* Treatment of connections accepted from now on; thread-safe. */
void h2s_server_set_accept(h2s_server *srv, h2s_accept mode);

/* Append steps to the script; thread-safe. Returns 0 or -EINVAL. */
int h2s_server_script_add(h2s_server *srv, const h2s_step *steps, size_t n);
int h2s_server_script_add_text(h2s_server *srv, const char *text);
void h2s_server_script_clear(h2s_server *srv);
size_t h2s_server_script_left(h2s_server *srv); /* steps not used up */
void h2s_server_set_default(h2s_server *srv, const h2s_action *act);

/* The log. Snapshots are owned by the server and freed by _stop. */
size_t h2s_server_request_count(h2s_server *srv);
const h2s_request *h2s_server_request(h2s_server *srv, size_t seq);
void h2s_server_get_stats(h2s_server *srv, h2s_stats *out);

/* First value of header |name| (lowercase) in |req|, or NULL. */
const char *h2s_request_header(const h2s_request *req, const char *name);

/*
 * Waits, bounded by |timeout_ms|; return true when the condition holds.
 * _requests: |n| requests seen; _closed: |n| requests whose streams closed;
 * _connections: |n| connections accepted. h2s_server_wait re-checks |pred|
 * (called on the waiting thread without locks) after every logged event.
 */
bool h2s_server_wait_requests(h2s_server *srv, size_t n, int timeout_ms);
bool h2s_server_wait_closed(h2s_server *srv, size_t n, int timeout_ms);
bool h2s_server_wait_connections(h2s_server *srv, uint64_t n, int timeout_ms);
typedef bool (*h2s_pred_cb)(h2s_server *srv, void *user_data);
bool h2s_server_wait(h2s_server *srv, h2s_pred_cb pred, void *user_data,
                     int timeout_ms);

/*
 * Text steps, one per line (or ';'), tokens separated by spaces or commas,
 * '#' starts a comment. Values may use %XX escapes. See README.md. Parses one
 * line into |out|; strings are allocated: free with h2s_step_free. Returns 0,
 * or -EINVAL with a message in |err|.
 */
int h2s_step_parse(const char *line, h2s_step *out, char *err, size_t errlen);
void h2s_step_free(h2s_step *step);

/* Names: "UNAVAILABLE" or "14"; "REFUSED_STREAM" or "7". -1 if unknown. */
int h2s_status_from_name(const char *s);
int64_t h2s_h2_error_from_name(const char *s);

#ifdef __cplusplus
}
#endif

#endif
