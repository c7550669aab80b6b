/*
 * transport internals shared by the transport/ sources only: the connection and
 * stream objects, the TLS session wrapper (tls.c), and the hooks between
 * the uv side (conn.c), the nghttp2 side (h2.c) and streams (stream.c).
 * See transport/README.md for the state machines.
 */
#ifndef GRIT_TRANSPORT_INT_H
#define GRIT_TRANSPORT_INT_H

#include <nghttp2/nghttp2.h>

#include "transport/transport.h"

/* ---- tls.c: one TLS client session over memory BIOs ---- */

/* A flush stops once it has this many bytes for the socket: the rest
 * waits for the write, so reads run in between (an early response stops
 * a large upload: test_flow early_*). */
#define GRIT_CONN_WRITE_CHUNK (1024 * 1024)

typedef struct grit_tls_conn grit_tls_conn;

/* Create a session for |ctx| with SNI and hostname check for
 * |server_name|. Returns GRIT_OK; GRIT_ERR_NOMEM; GRIT_ERR_TLS (reason in
 * |why|). */
grit_err grit_tls_conn_create(grit_tls_ctx *ctx, const char *server_name,
                              bool verify_hostname, grit_tls_conn **out,
                              char *why, size_t whylen);
void grit_tls_conn_destroy(grit_tls_conn *c);
/* Start the handshake (the ClientHello is then pending output). */
grit_err grit_tls_conn_start(grit_tls_conn *c, char *why, size_t whylen);
/* Feed ciphertext; advance the handshake; append plaintext to |plain|.
 * Returns GRIT_OK; GRIT_ERR_TLS (handshake, certificate, ALPN or record
 * failure, reason in |why|); GRIT_ERR_SHUTDOWN on close_notify;
 * GRIT_ERR_NOMEM. */
grit_err grit_tls_conn_recv(grit_tls_conn *c, const uint8_t *p, size_t n,
                            grit_buf *plain, char *why, size_t whylen);
/* Encrypt plaintext; the records become pending output. */
grit_err grit_tls_conn_send(grit_tls_conn *c, const uint8_t *p, size_t n,
                            char *why, size_t whylen);
/* Move pending ciphertext to the end of |out|. */
grit_err grit_tls_conn_take(grit_tls_conn *c, grit_buf *out);
bool grit_tls_conn_ready(const grit_tls_conn *c);

/* ---- h2mem.c: nghttp2's memory for one session ---- */

/* Free lists of nghttp2's small blocks, by size class (16, 32, ... 512
 * bytes), over the process allocator in force when made. */
#define GRIT_H2MEM_CLASSES 32
typedef struct grit_h2mem {
  grit_allocator a;
  void *free[GRIT_H2MEM_CLASSES];
  unsigned nfree[GRIT_H2MEM_CLASSES];
} grit_h2mem;

void grit_h2mem_init(grit_h2mem *m);
/* The nghttp2_mem for nghttp2_session_client_new3 (which copies it). */
nghttp2_mem grit_h2mem_nghttp2(grit_h2mem *m);
/* Return every kept block; only after the session is deleted. */
void grit_h2mem_release(grit_h2mem *m);

/* ---- the connection ---- */

/* A FIFO of slice references: a ring that doubles, never shrinks, so a
 * steady stream of messages allocates nothing after warm-up. */
typedef struct grit_slice_fifo {
  grit_slice **v;
  size_t head, count, cap;
} grit_slice_fifo;

/* A cleartext DATA payload of the flush written from its slice, not
 * copied into wbuf (grit_conn_data_frame): it goes after |at| bytes of
 * wbuf, and holds a reference on |sl| until its write completes. */
typedef struct grit_conn_seg {
  size_t at;
  grit_slice *sl;
  const uint8_t *p;
  size_t len;
} grit_conn_seg;

typedef enum grit_tp_phase {
  GRIT_TP_CONNECTING = 0, /* TCP or unix connect in progress */
  GRIT_TP_HANDSHAKE,      /* TLS handshake */
  GRIT_TP_SETTINGS,       /* waiting for the server's first SETTINGS */
  GRIT_TP_READY,
  GRIT_TP_CLOSED, /* connection over; on_closed queued or delivered */
} grit_tp_phase;

#define GRIT_STREAM_SLOTS 32
#define GRIT_STREAM_SLOT(id) (((uint32_t)(id) >> 1) & (GRIT_STREAM_SLOTS - 1))

struct grit_transport {
  grit_transport_calls calls; /* OP-03: streams started and how they ended */
  uv_loop_t *loop;
  grit_addr addr;
  grit_transport_cbs cbs;
  void *user_data;

  /* Options (strings copied). */
  grit_tls_ctx *tls_ctx;
  char *server_name;
  bool verify_hostname;
  char *user_agent;
  size_t user_agent_len; /* strlen(user_agent), once known (stream.c) */
  /* stream.c: "grpc-timeout" and "traceparent" were sent once with
   * indexing, so their names are in the peer's HPACK table. */
  bool timeout_named, traceparent_named;
  uint32_t max_header_list_bytes;
  int64_t max_recv_message_bytes;
  uint64_t connect_timeout_ms;
  uint64_t keepalive_time_ms;
  uint64_t keepalive_timeout_ms;
  bool keepalive_permit_without_calls;
  uint64_t read_spin_ns;
  uint64_t spin_until_ns; /* keep the pump polling until then (hrtime) */

  /* libuv handles; memory is freed only when open_handles drops to 0. */
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } sock;
  uv_connect_t connect_req;
  uv_write_t write_req;
  uv_timer_t connect_timer;
  uv_timer_t keepalive_timer;
  uv_idle_t pump; /* deferred delivery and coalesced flushes */
  int open_handles;

  nghttp2_session *h2;
  grit_h2mem h2mem; /* nghttp2's memory (h2mem.c) */
  grit_tls_conn *tls;
  grit_buf wbuf;   /* the bytes of the write in flight */
  grit_buf plain;  /* decrypted input of one read, reused */
  grit_buf staged; /* plaintext of one flush, encrypted in one go */

  grit_tp_phase phase;
  bool connected; /* socket connected and not failed */
  bool io_dead;   /* read/write failed or EOF: no more writes */
  bool writing;
  bool more_output; /* the last flush stopped at CONN_WRITE_CHUNK */
  /* During conn_flush's nghttp2_session_mem_send loop: the buffer the
   * flush fills, where grit_conn_data_frame puts the NO_COPY DATA frames
   * (at most GRIT_CONN_WRITE_CHUNK bytes a flush, with the copied ones). */
  grit_buf *flush_out;
  /* The flush's uncopied payloads (cleartext only), in order, |seg_bytes|
   * in all, and the uv_buf_t array that writes them with wbuf. */
  grit_conn_seg *segs;
  size_t nsegs, segs_cap, seg_bytes;
  uv_buf_t *iov;
  size_t iov_cap;
  bool going_away; /* GOAWAY received or drain started: no new streams */
  bool goaway_received;
  uint32_t goaway_last_id;
  bool ping_outstanding;
  bool at_capacity;

  /* Pending transport-level events (delivered by conn.c). */
  bool ev_ready, ev_goaway, ev_capacity, ev_closed;
  uint32_t ev_goaway_last_id, ev_goaway_code;
  bool closed_delivered; /* on_closed ran: no callback after this */
  bool destroying;       /* grit_transport_destroy was called */
  bool shut;             /* uv_close started on every handle */
  bool delivering;       /* inside the delivery loop */

  grit_transport_close_info close_info;
  char close_reason[256];

  grit_list streams;      /* every stream not yet freed */
  grit_list free_streams; /* freed streams kept for reuse (stream.c) */
  size_t nfree_streams;
  grit_list ev_streams; /* streams with undelivered events */
  grit_list rx_streams; /* streams that got DATA in the current read */
  /* Streams by id, one per slot (h2.c h2_lookup): ids go up by 2, so the
   * last GRIT_STREAM_SLOTS streams started have a slot each. */
  grit_stream *slots[GRIT_STREAM_SLOTS];
  size_t active;   /* streams whose result is not yet fixed */
  size_t withheld; /* DATA bytes of paused streams not given back */

  /* Socket reads land here; allocated with the HTTP/2 session once the
   * connection is up (conn_on_connect), so that a transport still
   * connecting, or one whose connect fails, costs little (issue 27:
   * 1 000 endpoints in one update). */
  uint8_t *rbuf;
};

#define GRIT_TRANSPORT_RBUF_SIZE (64 * 1024)

/* Block kinds while receiving a HEADERS frame. */
typedef enum grit_blk_kind {
  GRIT_BLK_NONE = 0,
  GRIT_BLK_HEADERS,
  GRIT_BLK_TRAILERS_ONLY,
  GRIT_BLK_TRAILERS,
} grit_blk_kind;

struct grit_stream {
  grit_transport *t;
  grit_list node;    /* in t->streams */
  grit_list ev_node; /* in t->ev_streams while in_ev */
  grit_list rx_node; /* in t->rx_streams while its DATA is unacknowledged */
  int32_t id;        /* nghttp2 stream id, 0 before submission */
  grit_stream_cbs cbs;
  void *user_data;

  /* Send side. */
  grit_slice_fifo sendq;
  size_t send_off; /* bytes of the head slice already handed over */
  size_t pending_bytes;
  bool half_close;    /* grit_stream_close_send was called */
  bool data_deferred; /* the data provider returned DEFERRED */
  bool headers_sent;  /* our HEADERS frame went out: wire SENT */
  bool eos_sent;      /* our END_STREAM went out */
  bool in_ev;         /* on t->ev_streams (ev_node) */

  /* Receive side. */
  bool read_paused; /* grit_stream_set_read_paused: withhold window */
  size_t withheld;  /* DATA bytes received while paused, not given back */
  grit_deframer deframer;
  grit_blk_kind blk_kind;
  bool discard_headers; /* keep no response header metadata */
  grit_metadata *blk;   /* the header block being received; made on the
                           first entry kept */
  size_t blk_bytes;
  int http_status;
  grit_status_code grpc_status;
  int64_t content_length; /* -1: none received (HS-08) */
  uint64_t data_bytes;    /* DATA payload received */
  char *grpc_message;
  bool content_type_ok;
  bool have_grpc_status;
  bool blk_status;  /* this block had :status (HS-08) */
  bool blk_regular; /* this block had a regular field: no more pseudo */
  bool headers_received;
  bool trailers_only;

  /* Undelivered events. */
  bool ev_send_progress; /* grit_stream_take_send took bytes */
  bool ev_headers_pending;
  grit_metadata *ev_headers; /* NULL: an empty list */
  grit_slice_fifo recvq;

  /* The result, fixed once finished is set. */
  bool finished;
  grit_status_code code;
  char *message;           /* NULL: "" */
  grit_metadata *trailers; /* NULL: an empty list */
  grit_wire_state wire;
};

/* conn.c */
void grit_transport_schedule(grit_transport *t);
void grit_transport_fail(grit_transport *t, grit_status_code code,
                         const char *reason);
void grit_transport_on_settings(grit_transport *t);
void grit_transport_on_ping_ack(grit_transport *t);

/* h2.c */
grit_err grit_h2_session_new(grit_transport *t);
/* SPEC HS-08: whether a received field is valid by RFC 9113 8.2.1: a
 * name of lower-case tchar (after one leading ':' for a pseudo-header), a
 * value without NUL, CR, LF, other controls but HTAB, or white space at
 * either end. */
bool grit_h2_field_ok(const uint8_t *name, size_t namelen, const uint8_t *value,
                      size_t valuelen);
void grit_h2_on_goaway(grit_transport *t, uint32_t last_id, uint32_t code,
                       const uint8_t *debug, size_t debug_len);
/* After a read: give back the flow-control window of the DATA it brought
 * (WINDOW_UPDATE), as a gRPC peer expects of a reader that keeps up.
 * Returns whether a stream that got DATA is still open (more may come). */
bool grit_h2_ack_received(grit_transport *t);
/* Give back the window withheld for |s| (it resumed, or it is ending). */
void grit_h2_release_withheld(grit_transport *t, grit_stream *s);
ssize_t grit_h2_data_read(nghttp2_session *session, int32_t stream_id,
                          uint8_t *buf, size_t length, uint32_t *data_flags,
                          nghttp2_data_source *source, void *user_data);

/* stream.c */
/* Fix the result of |s| and queue its on_done. |rst_code| >= 0 also
 * submits RST_STREAM with that code; |drop| discards undelivered headers
 * and messages (cancel). No-op when already finished. */
void grit_stream_finish(grit_stream *s, grit_status_code code,
                        const char *message, grit_wire_state wire, bool drop,
                        int rst_code);
void grit_stream_queue_event(grit_stream *s);
/* Deliver the events of the head of t->ev_streams; may free the stream. */
void grit_stream_deliver(grit_stream *s);
/* Free a stream without callbacks (transport teardown); its memory is
 * kept for reuse while the transport's cache has room. */
void grit_stream_free(grit_stream *s);
/* Release the transport's cache of freed streams. */
void grit_stream_cache_free(grit_transport *t);
/* Copy up to |len| queued request bytes into |buf|. */
size_t grit_stream_take_send(grit_stream *s, uint8_t *buf, size_t len);
/* |n| queued request bytes were handed to the connection (by
 * grit_stream_take_send or grit_conn_data_frame): count them and tell the
 * stream's owner. */
void grit_stream_sent(grit_stream *s, size_t n);
/* NGHTTP2_DATA_FLAG_NO_COPY's frame of |length| (<= s->pending_bytes)
 * bytes with 9-byte header |framehd|, added to the flush: on cleartext
 * the payload's slices are referenced and written from where they are,
 * with TLS it is copied into the staged plaintext. 0, or
 * NGHTTP2_ERR_WOULDBLOCK (the flush is full: the frame waits for the
 * next), or NGHTTP2_ERR_CALLBACK_FAILURE (no memory). During a flush only
 * (t->flush_out set). */
int grit_conn_data_frame(grit_transport *t, grit_stream *s,
                         const uint8_t *framehd, size_t length);
bool grit_slice_fifo_push(grit_slice_fifo *f, grit_slice *s);
grit_slice *grit_slice_fifo_pop(grit_slice_fifo *f);
/* Drop every reference; clear keeps the ring's memory, free releases it. */
void grit_slice_fifo_clear(grit_slice_fifo *f);
void grit_slice_fifo_free(grit_slice_fifo *f);

#endif
