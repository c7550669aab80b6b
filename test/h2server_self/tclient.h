/*
 * A blocking raw nghttp2 client for h2server's self-test: one socket, a poll
 * loop on the calling thread, bounded by timeouts. It records what the
 * server sent per stream so tests can check frames the gRPC client hides.
 */
#ifndef H2S_TCLIENT_H
#define H2S_TCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>

#define TC_MAX_STREAMS 16

typedef struct tc_stream {
  int32_t id;
  char headers[4096];  /* "name: value\n" of the first HEADERS block */
  char trailers[4096]; /* of the second one */
  int header_blocks;
  bool headers_ended; /* the first HEADERS block had END_STREAM */
  uint8_t *data;      /* DATA payload received */
  size_t data_len;
  uint8_t *send; /* request body (framed) */
  size_t send_len, send_off;
  bool send_end; /* END_STREAM after |send| */
  bool closed;
  uint32_t close_code; /* nghttp2 code at close: the RST code, or 0 */
  bool rst;            /* the server sent RST_STREAM */
  /* Our send window for the stream right after each server SETTINGS
   * (nghttp2 reports a negative window as 0); -1 before any. */
  int32_t settings_window_min;
} tc_stream;

typedef struct tclient {
  int fd;
  SSL_CTX *ssl_ctx; /* TLS, without certificate checks */
  SSL *ssl;
  char alpn[16]; /* the protocol the server chose */
  nghttp2_session *ng;
  tc_stream streams[TC_MAX_STREAMS];
  int n_streams;
  bool goaway;
  int32_t goaway_last;
  uint32_t goaway_code;
  bool eof;       /* the server closed the socket, or ... */
  int recv_error; /* ... nghttp2 failed on what it sent */
  int pings_acked;
  int pings_received;
  int settings_received;
  int window_updates; /* WINDOW_UPDATE frames received, ... */
  uint32_t wu_min;    /* ... their smallest and largest increments */
  uint32_t wu_max;
} tclient;

/* Connects to 127.0.0.1:|port| (or a unix socket) and sends the preface.
 * With |tls|, does a TLS handshake offering ALPN h2 first. 0 or -errno. */
int tc_connect(tclient *tc, uint16_t port);
int tc_connect_tls(tclient *tc, uint16_t port);
int tc_connect_unix(tclient *tc, const char *path);
void tc_close(tclient *tc);

/* Starts a POST to |path| with |msg| framed as one message (if non-NULL)
 * and optional extra headers (name, value pairs, NULL-terminated). Returns
 * the stream index, or -1. */
int tc_request(tclient *tc, const char *path, const void *msg, size_t len,
               bool end, const char *const *extra);

/* Queues more body on stream |i|: one framed message, END_STREAM if |end|. */
void tc_send(tclient *tc, int i, const void *msg, size_t len, bool end);

typedef bool (*tc_pred)(tclient *tc, void *arg);

/* Runs I/O until |pred| holds, the socket closes, or |timeout_ms| passes.
 * Returns whether |pred| held. */
bool tc_run(tclient *tc, tc_pred pred, void *arg, int timeout_ms);
bool tc_run_closed(tclient *tc, int i, int timeout_ms); /* stream i */

/* Value of |name| in a "name: value\n" block, copied to |buf|, or NULL. */
const char *tc_find(const char *block, const char *name, char *buf, size_t len);

#endif
