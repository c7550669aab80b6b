/*
 * Internals shared by the h2server sources: the server, connection and stream
 * structs, the growable buffer, the log and the script. Everything here runs
 * on the server thread unless it says it takes srv->mu.
 */
#ifndef H2S_INT_H
#define H2S_INT_H

#include "h2server.h"

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <uv.h>

typedef struct h2s_buf {
  uint8_t *p;
  size_t len, cap;
} h2s_buf;

typedef struct h2s_conn h2s_conn;
typedef struct h2s_stream h2s_stream;

/* A log record: the public view plus the storage behind it. */
typedef struct h2s_rec {
  h2s_request pub;
  h2s_header *hdrs;
  size_t hcap;
  h2s_msg *msgs;
  size_t mcap;
} h2s_rec;

typedef struct h2s_slot {
  h2s_step step; /* owned copy */
  uint32_t left;
} h2s_slot;

struct h2s_server {
  h2s_config cfg; /* strings and script not kept: see below */
  char *host, *unix_path;
  uint16_t port;
  SSL_CTX *ssl_ctx;
  uv_loop_t loop;
  uv_thread_t thread;
  uv_async_t async;
  uv_tcp_t *tcp;   /* listener, NULL while killed */
  uv_pipe_t *pipe; /* unix listener */
  h2s_conn *conns;
  uint32_t next_conn_index;
  uint64_t t0_ms; /* uv_now() at start */

  uv_mutex_t cmd_mu; /* one test-thread command at a time */
  int cmd;           /* under mu */
  uint32_t cmd_code;
  bool cmd_flag;
  int cmd_result;
  bool cmd_done;
  h2s_setting cmd_settings[8]; /* H2S_CMD_SETTINGS, 0-terminated */

  uv_mutex_t mu; /* guards everything below */
  uv_cond_t cond;
  uint64_t gen; /* bumped on every logged event */
  h2s_rec **recs;
  size_t n_recs, cap_recs;
  size_t n_closed;
  void **snaps;
  size_t n_snaps, cap_snaps;
  h2s_slot *slots;
  size_t n_slots, cap_slots;
  h2s_action dflt; /* owned */
  h2s_accept accept;
  h2s_stats stats;
};

typedef enum h2s_cmd {
  H2S_CMD_NONE = 0,
  H2S_CMD_STOP,
  H2S_CMD_KILL,
  H2S_CMD_LISTEN,
  H2S_CMD_GOAWAY,
  H2S_CMD_SETTINGS
} h2s_cmd;

struct h2s_conn {
  h2s_server *srv;
  h2s_conn *next, *prev;
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } h;
  bool is_tcp;
  uint32_t index;
  nghttp2_session *ng;
  SSL *ssl;
  BIO *rbio, *wbio; /* network -> SSL, SSL -> network */
  bool handshake_done;
  h2s_stream *streams, *streams_tail; /* in arrival order */
  h2s_buf raw;           /* bytes to inject after nghttp2's output */
  size_t pending_writes; /* uv_write requests in flight */
  bool closing;          /* uv_close started */
  bool close_on_flush;   /* close once writes are done */
  bool drop_reset;
  bool flushing;
  bool stop_reading;
  bool freeze_window;
  bool no_ping_ack;
  bool work;            /* some stream has deferred work */
  uint32_t n_open;      /* streams open now */
  uint32_t iws_current; /* INITIAL_WINDOW_SIZE last sent */
  /* The session ended (GOAWAY, streams done): once the writes are out,
   * half-close (FIN) and read until the peer closes, so that a late
   * WINDOW_UPDATE or PING ACK reaching a closed socket cannot make the
   * kernel answer RST, which would discard the tail of the response
   * still in the client's receive buffer. */
  bool graceful;
  bool lingering;
  uv_shutdown_t shutdown_req;
};

struct h2s_stream {
  h2s_conn *c;
  h2s_stream *next, *prev;
  int32_t id;
  h2s_rec *rec;
  h2s_buf in;     /* partial request message */
  h2s_action act; /* owned; bound at HEADERS */
  bool has_act;
  bool headers_done; /* request HEADERS complete: bind a step */
  bool end_pending;  /* END_STREAM seen, not yet handled */
  bool started;      /* the action is applied or its delay runs */
  bool acted;
  bool live;   /* answer each request message as it arrives */
  h2s_buf out; /* framed response bytes not yet given to nghttp2 */
  size_t out_off;
  bool out_done;      /* no more messages will be added */
  bool deferred;      /* the data provider returned DEFERRED */
  bool post_eof;      /* the last DATA went out: apply act.end */
  bool rst_after_end; /* END_STREAM went out before the client's */
  size_t unconsumed;  /* received DATA bytes not yet consumed */
  uv_timer_t *timer;  /* delay_ms; closed and freed on its own */
  /* act.window_step / window_every_ms: window returned by hand. */
  uint64_t unreturned; /* consumed, window not yet returned */
  uint32_t step_next;  /* the next WINDOW_UPDATE increment */
  uv_timer_t *wtimer;  /* window_every_ms */
  size_t iws_next;     /* next act.iws_at entry */
};

/* util.c */
void *h2s_xmalloc(size_t n);
void *h2s_xcalloc(size_t n, size_t size);
void *h2s_xrealloc(void *p, size_t n);
char *h2s_xstrdup(const char *s);
void h2s_buf_add(h2s_buf *b, const void *p, size_t n);
void h2s_buf_free(h2s_buf *b);
uint64_t h2s_now_ms(const h2s_server *srv);

/* action.c: owned copies of actions and steps. */
void h2s_action_copy(h2s_action *dst, const h2s_action *src);
void h2s_action_free(h2s_action *a);

/* log.c: all of these take srv->mu. */
h2s_rec *h2s_log_new_request(h2s_server *srv, h2s_conn *c, int32_t id);
void h2s_log_add_header(h2s_server *srv, h2s_rec *r, const uint8_t *name,
                        size_t nlen, const uint8_t *value, size_t vlen);
void h2s_log_add_msg(h2s_server *srv, h2s_rec *r, const uint8_t *p, size_t n,
                     uint8_t flags);
void h2s_log_update(h2s_server *srv); /* bump gen, wake waiters */
void h2s_log_lock(h2s_server *srv);
void h2s_log_unlock(h2s_server *srv); /* also bumps gen and wakes */
void h2s_log_free(h2s_server *srv);

/* script.c */
bool h2s_script_take(h2s_server *srv, const char *path, h2s_action *out);
void h2s_script_free(h2s_server *srv);

/* conn.c */
void h2s_conn_accept(h2s_server *srv, uv_stream_t *listener, bool is_tcp);
void h2s_conn_close(h2s_conn *c);
void h2s_conn_flush(h2s_conn *c);
void h2s_conn_goaway(h2s_conn *c, uint32_t code, bool now);
void h2s_conn_settings(h2s_conn *c, const h2s_setting *list, size_t max);

/* stream.c */
h2s_stream *h2s_stream_new(h2s_conn *c, int32_t id);
void h2s_stream_free(h2s_stream *s);
void h2s_stream_on_data(h2s_stream *s, const uint8_t *p, size_t n);
void h2s_stream_on_headers_done(h2s_stream *s);
void h2s_stream_on_end(h2s_stream *s);
void h2s_stream_work(h2s_stream *s); /* outside nghttp2 callbacks */
void h2s_stream_frame(h2s_stream *s, const void *p, size_t n);

/* testservice.c: grpc.testing.TestService answers for the echo default. */
bool h2s_testservice_live(const char *path);
bool h2s_testservice_msg(h2s_stream *s, const uint8_t *p, size_t n);
void h2s_testservice_metadata(h2s_stream *s);

#endif
