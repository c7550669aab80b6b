/* The nghttp2 side of a transport: session set-up and every nghttp2
 * callback. Nothing here calls a user callback: results are recorded on
 * the stream and queued, and conn.c delivers them after
 * nghttp2_session_mem_recv returns (transport.h contract). */
#include "transport/transport.h"
#include "transport/transport_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Our receive windows: wide enough that a fast server is not throttled by
 * window updates (grpc-core probes bandwidth; a fixed large window is the
 * simple equivalent), and a 4 MiB message fits in one. */
#define H2_STREAM_WINDOW (4 * 1024 * 1024)
#define H2_CONN_WINDOW (16 * 1024 * 1024)
/* Window is given back by hand (nghttp2's automatic WINDOW_UPDATE is off):
 * after each read, for what arrived on streams whose reader keeps up, once
 * this much is unacknowledged. grpc-core's reader does the same as
 * messages are read; a grpc-core server streaming small messages paces
 * itself on those updates and batches its writes, while with an update at
 * half of a wide window it hears nothing and wakes up per message
 * (bench/run stream-1000x64B: about 1.3x the messages per second). What a
 * paused stream (grit_stream_set_read_paused) receives is withheld until
 * it resumes, so a slow reader stops the server (SPEC FC-04). */
#define H2_ACK_MIN_BYTES 1024

/* The stream of |id|, finished or not, or NULL. Streams in flight sit in
 * t->slots by id (grit_transport_start_stream puts them there,
 * grit_stream_free takes them out), so most callbacks find theirs without
 * asking nghttp2's stream map; one whose slot a later stream took is
 * found through nghttp2's stream user data (cleared on free). */
static grit_stream *h2_lookup(grit_transport *t, nghttp2_session *session,
                              int32_t id) {
  grit_stream *s = t->slots[GRIT_STREAM_SLOT(id)];
  if (s && s->id == id)
    return s;
  return nghttp2_session_get_stream_user_data(session, id);
}

/* The stream of |id| that is not finished, or NULL. nghttp2 only drops a
 * stream after on_stream_close, which finishes it, so a slotted stream
 * that nghttp2 no longer has is a finished one, NULL either way. */
static grit_stream *h2_stream(void *user_data, nghttp2_session *session,
                              int32_t id) {
  grit_stream *s = h2_lookup(user_data, session, id);
  return s && !s->finished ? s : NULL;
}

static bool h2_name_is(const uint8_t *name, size_t len, const char *lit) {
  size_t n = strlen(lit);
  return len == n && memcmp(name, lit, n) == 0;
}

static bool h2_is_grpc_content_type(const uint8_t *v, size_t len) {
  static const char ct[] = "application/grpc";
  size_t n = sizeof(ct) - 1;
  if (len < n || memcmp(v, ct, n) != 0)
    return false;
  return len == n || v[n] == '+' || v[n] == ';';
}

/* SPEC HS-08: the checks of RFC 9113 8.2-8.3 on a response's fields, made
 * here rather than by nghttp2's HTTP messaging (turned off in
 * grit_h2_session_new: it validated every field again, about a twentieth
 * of a unary call's instructions). Name characters: lower-case tchar. */
static const uint32_t h2_name_chars[8] = {0x0, 0x3ff6cfa, 0xc0000000,
                                          0x57ffffff};

static bool h2_value_char(uint8_t c) {
  return c >= 0x20 ? c != 0x7f : c == '\t';
}

/* A field value by RFC 9113 8.2.1: no NUL, CR, LF or other control but
 * HTAB, no leading or trailing white space. Eight bytes at a time: any
 * byte below 0x20 or equal to 0x7f sends the rest to the byte loop. */
static bool h2_value_ok(const uint8_t *v, size_t len) {
  if (len == 0)
    return true;
  if (v[0] == ' ' || v[0] == '\t' || v[len - 1] == ' ' || v[len - 1] == '\t')
    return false;
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t x, y;
    memcpy(&x, v + i, 8);
    y = x ^ (0x7f * ones);
    if (((x - 0x20 * ones) & ~x & highs) | ((y - ones) & ~y & highs))
      break;
  }
  for (; i < len; i++)
    if (!h2_value_char(v[i]))
      return false;
  return true;
}

bool grit_h2_field_ok(const uint8_t *name, size_t namelen, const uint8_t *value,
                      size_t valuelen) {
  size_t i = namelen > 0 && name[0] == ':' ? 1 : 0;
  if (namelen <= i)
    return false;
  for (; i < namelen; i++)
    if (!(h2_name_chars[name[i] >> 5] & (1u << (name[i] & 31))))
      return false;
  return h2_value_ok(value, valuelen);
}

/* SPEC HS-08: a malformed response fails the call INTERNAL and resets the
 * stream PROTOCOL_ERROR (RFC 9113 8.1.1); what came before is kept. */
static int h2_malformed(grit_stream *s, const char *why) {
  char msg[120];
  snprintf(msg, sizeof(msg), "malformed response: %s", why);
  grit_stream_finish(s, GRIT_STATUS_INTERNAL, msg, GRIT_WIRE_SENT, false,
                     NGHTTP2_PROTOCOL_ERROR);
  return 0;
}

/* A pseudo-header of a response: :status once, first, not in trailers. */
static int h2_on_pseudo(grit_stream *s, const uint8_t *name, size_t namelen,
                        const uint8_t *value, size_t valuelen) {
  if (s->blk_kind == GRIT_BLK_TRAILERS)
    return h2_malformed(s, "pseudo-header in trailers");
  if (s->blk_regular)
    return h2_malformed(s, "pseudo-header after a regular header");
  if (!h2_name_is(name, namelen, ":status"))
    return h2_malformed(s, "unknown pseudo-header");
  if (s->blk_status)
    return h2_malformed(s, "repeated :status");
  if (valuelen != 3 || value[0] < '0' || value[0] > '9' || value[1] < '0' ||
      value[1] > '9' || value[2] < '0' || value[2] > '9')
    return h2_malformed(s, ":status is not three digits");
  s->http_status =
      (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
  if (s->http_status == 101)
    return h2_malformed(s, ":status 101 in HTTP/2");
  s->blk_status = true;
  return 0;
}

/* The decimal value of a content-length, or -1. */
static int64_t h2_parse_length(const uint8_t *v, size_t len) {
  int64_t n = 0;
  if (len == 0 || len > 18)
    return -1;
  for (size_t i = 0; i < len; i++) {
    if (v[i] < '0' || v[i] > '9')
      return -1;
    n = n * 10 + (v[i] - '0');
  }
  return n;
}

/* Fields a response may not carry (8.2.2), and content-length (8.1.1).
 * Returns 1 when the field is to be dropped, 0 to keep it, -1 when the
 * stream was failed. */
static int h2_check_regular(grit_stream *s, const uint8_t *name, size_t namelen,
                            const uint8_t *value, size_t valuelen) {
  if (h2_name_is(name, namelen, "connection") ||
      h2_name_is(name, namelen, "keep-alive") ||
      h2_name_is(name, namelen, "proxy-connection") ||
      h2_name_is(name, namelen, "transfer-encoding") ||
      h2_name_is(name, namelen, "upgrade")) {
    h2_malformed(s, "connection-specific header");
    return -1;
  }
  if (h2_name_is(name, namelen, "te")) {
    if (valuelen != 8 || strncasecmp((const char *)value, "trailers", 8) != 0) {
      h2_malformed(s, "te other than trailers");
      return -1;
    }
    return 0;
  }
  if (!h2_name_is(name, namelen, "content-length"))
    return 0;
  int64_t n = h2_parse_length(value, valuelen);
  if (s->content_length >= 0 || n < 0 ||
      (s->http_status >= 100 && s->http_status < 200) ||
      (s->http_status == 204 && n != 0)) {
    h2_malformed(s, "bad content-length");
    return -1;
  }
  s->content_length = n;
  return s->http_status == 204 ? 1 : 0;
}

/* HS-08, at END_STREAM: a content-length the DATA did not add up to
 * fails the stream (true). */
static bool h2_length_differs(grit_stream *s) {
  if (s->content_length < 0 || (uint64_t)s->content_length == s->data_bytes)
    return false;
  h2_malformed(s, "content-length differs from the DATA received");
  return true;
}

static int h2_on_begin_headers(nghttp2_session *session,
                               const nghttp2_frame *frame, void *user_data) {
  if (frame->hd.type != NGHTTP2_HEADERS)
    return 0;
  grit_stream *s = h2_stream(user_data, session, frame->hd.stream_id);
  if (!s)
    return 0;
  if (s->headers_received)
    s->blk_kind = GRIT_BLK_TRAILERS;
  else if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
    s->blk_kind = GRIT_BLK_TRAILERS_ONLY;
  else
    s->blk_kind = GRIT_BLK_HEADERS;
  grit_metadata_destroy(s->blk);
  s->blk = NULL;
  s->blk_bytes = 0;
  s->http_status = s->blk_kind == GRIT_BLK_TRAILERS ? s->http_status : 0;
  if (s->blk_kind != GRIT_BLK_TRAILERS)
    s->content_type_ok = false;
  s->blk_status = false;
  s->blk_regular = false;
  s->have_grpc_status = false;
  grit_free(s->grpc_message);
  s->grpc_message = NULL;
  return 0;
}

/* Keep one entry of the block being received, making the list on the
 * first one (most trailers have none beyond grpc-status). */
static grit_err h2_keep_header(grit_stream *s, const uint8_t *name,
                               size_t namelen, const uint8_t *value,
                               size_t valuelen) {
  if (s->blk_kind == GRIT_BLK_HEADERS && s->discard_headers)
    return GRIT_OK;
  if (!s->blk && grit_metadata_create(&s->blk) != GRIT_OK)
    return GRIT_ERR_NOMEM;
  if (namelen > 4 && memcmp(name + namelen - 4, "-bin", 4) == 0) {
    size_t n;
    uint8_t *bin = grit_base64_decode((const char *)value, valuelen, &n);
    /* An undecodable value is kept as it came rather than dropped. */
    grit_err rv = bin ? grit_metadata_add_unchecked(s->blk, (const char *)name,
                                                    namelen, bin, n)
                      : grit_metadata_add_unchecked(s->blk, (const char *)name,
                                                    namelen, value, valuelen);
    grit_free(bin);
    return rv;
  }
  return grit_metadata_add_unchecked(s->blk, (const char *)name, namelen, value,
                                     valuelen);
}

static int h2_on_header(nghttp2_session *session, const nghttp2_frame *frame,
                        const uint8_t *name, size_t namelen,
                        const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data) {
  (void)flags;
  grit_transport *t = user_data;
  if (frame->hd.type != NGHTTP2_HEADERS)
    return 0;
  grit_stream *s = h2_stream(user_data, session, frame->hd.stream_id);
  if (!s || s->blk_kind == GRIT_BLK_NONE)
    return 0;
  /* SPEC HS-06: the limit fails this call, not the connection. Returning
   * TEMPORAL_CALLBACK_FAILURE makes nghttp2 reset just this stream. */
  s->blk_bytes += namelen + valuelen + 32;
  if (s->blk_bytes > t->max_header_list_bytes) {
    char why[160];
    snprintf(why, sizeof(why),
             "response header list larger than max (%zu vs. %u bytes)",
             s->blk_bytes, (unsigned)t->max_header_list_bytes);
    grit_stream_finish(s, GRIT_STATUS_INTERNAL, why, GRIT_WIRE_SENT, true, -1);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  /* SPEC HS-08: each field is checked before anything keeps it: an
   * invalid one is malformed (as it was to nghttp2 without an
   * on_invalid_header callback). The names compared here are valid;
   * their values are checked; :status is three digits. */
  if (namelen > 0 && name[0] == ':')
    return h2_on_pseudo(s, name, namelen, value, valuelen);
  s->blk_regular = true;
  if (h2_name_is(name, namelen, "content-type")) {
    s->content_type_ok = h2_is_grpc_content_type(value, valuelen);
    if (valuelen == 16 && s->content_type_ok)
      return 0; /* "application/grpc" itself is valid */
    return h2_value_ok(value, valuelen)
               ? 0
               : h2_malformed(s, "invalid content-type value");
  }
  if (h2_name_is(name, namelen, "grpc-status")) {
    bool digit = valuelen == 1 && value[0] >= '0' && value[0] <= '9';
    if (!digit && !h2_value_ok(value, valuelen))
      return h2_malformed(s, "invalid grpc-status value");
    s->have_grpc_status = true;
    s->grpc_status = grit_status_from_text((const char *)value, valuelen);
    return 0;
  }
  if (!grit_h2_field_ok(name, namelen, value, valuelen))
    return h2_malformed(s, "invalid header field");
  if (s->blk_kind == GRIT_BLK_HEADERS &&
      h2_name_is(name, namelen, "grpc-encoding")) /* SPEC CP-02 */
    grit_deframer_set_encoding(&s->deframer, (const char *)value, valuelen);
  if (h2_name_is(name, namelen, "grpc-message")) {
    grit_free(s->grpc_message);
    s->grpc_message = grit_percent_decode(value, valuelen, NULL);
    if (s->grpc_message)
      return 0;
    goto nomem;
  }
  int drop = h2_check_regular(s, name, namelen, value, valuelen);
  if (drop != 0)
    return 0;
  if (h2_keep_header(s, name, namelen, value, valuelen) == GRIT_OK)
    return 0;
nomem:
  grit_stream_finish(s, GRIT_STATUS_RESOURCE_EXHAUSTED,
                     "out of memory receiving headers", GRIT_WIRE_SENT, true,
                     -1);
  return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

/* The stream's end came (trailers, Trailers-Only or END_STREAM on DATA):
 * fix the status from grpc-status, else from :status (SPEC HS-02). */
static void h2_stream_ended(grit_stream *s, bool have_trailers) {
  grit_status_code code;
  const char *msg = s->grpc_message ? s->grpc_message : "";
  char why[160];
  if (s->have_grpc_status) {
    code = s->grpc_status;
  } else if (s->http_status != 0 && s->http_status != 200) {
    code = grit_status_from_http(s->http_status);
    snprintf(why, sizeof(why), "received HTTP status %d without grpc-status",
             s->http_status);
    msg = why;
  } else {
    code = GRIT_STATUS_UNKNOWN;
    msg = have_trailers ? "missing grpc-status in trailers"
                        : "stream ended without trailers (missing "
                          "grpc-status)";
  }
  if (code == GRIT_STATUS_OK && grit_deframer_mid_message(&s->deframer)) {
    code = GRIT_STATUS_INTERNAL;
    msg = "stream ended in the middle of a message";
  }
  if (have_trailers && s->blk) {
    grit_metadata_destroy(s->trailers);
    s->trailers = s->blk;
    s->blk = NULL;
  }
  /* SPEC HS-03: the server finished before we did: stop our side with
   * RST_STREAM NO_ERROR instead of sending the rest. */
  int rst = s->eos_sent ? -1 : NGHTTP2_NO_ERROR;
  grit_stream_finish(s, code, msg, GRIT_WIRE_SENT, false, rst);
}

static void h2_headers_done(grit_stream *s, const nghttp2_frame *frame) {
  grit_transport *t = s->t;
  bool eos = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
  if (s->blk_kind == GRIT_BLK_NONE)
    return;
  grit_blk_kind kind = s->blk_kind;
  s->blk_kind = GRIT_BLK_NONE;
  /* SPEC HS-08: a response has :status; trailers end the stream; an
   * informational response does not, and a final one follows it. */
  if (kind != GRIT_BLK_TRAILERS && !s->blk_status) {
    h2_malformed(s, "no :status");
    return;
  }
  if (kind == GRIT_BLK_TRAILERS && !eos) {
    h2_malformed(s, "trailers without END_STREAM");
    return;
  }
  if (s->http_status >= 100 && s->http_status < 200) {
    if (eos)
      h2_malformed(s, "stream ended after an informational response");
    return; /* an informational response: the real one follows */
  }
  if (s->http_status == 204 || s->http_status == 304)
    s->content_length = 0; /* no content (RFC 9110 6.4.1) */
  if (eos && h2_length_differs(s))
    return;
  if (kind == GRIT_BLK_HEADERS) {
    char why[200];
    if (s->http_status != 200 && !s->have_grpc_status) {
      snprintf(why, sizeof(why), "received HTTP status %d", s->http_status);
      grit_stream_finish(s, grit_status_from_http(s->http_status), why,
                         GRIT_WIRE_SENT, true, NGHTTP2_CANCEL);
      return;
    }
    if (!s->content_type_ok) {
      grit_stream_finish(s, GRIT_STATUS_UNKNOWN,
                         "response content-type is not application/grpc",
                         GRIT_WIRE_SENT, true, NGHTTP2_CANCEL);
      return;
    }
    s->headers_received = true;
    s->ev_headers = s->blk;
    s->ev_headers_pending = true;
    s->blk = NULL;
    GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG,
               "transport %s: stream %d: response headers", t->addr.text,
               (int)s->id);
    grit_stream_queue_event(s);
    if (eos)
      h2_stream_ended(s, false);
    return;
  }
  if (kind == GRIT_BLK_TRAILERS_ONLY)
    s->trailers_only = true;
  h2_stream_ended(s, true);
}

static int h2_on_frame_recv(nghttp2_session *session,
                            const nghttp2_frame *frame, void *user_data) {
  grit_transport *t = user_data;
  grit_stream *s;
  switch (frame->hd.type) {
  case NGHTTP2_HEADERS:
    if ((s = h2_stream(user_data, session, frame->hd.stream_id)) != NULL)
      h2_headers_done(s, frame);
    break;
  case NGHTTP2_DATA:
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        (s = h2_stream(user_data, session, frame->hd.stream_id)) != NULL) {
      /* HS-08: only after an informational response (DATA before any
       * HEADERS is nghttp2's connection error); an empty frame brought
       * no chunk for h2_on_data_chunk_recv to refuse. */
      if (!s->headers_received)
        h2_malformed(s, "stream ended after an informational response");
      else if (!h2_length_differs(s))
        h2_stream_ended(s, false);
    }
    break;
  case NGHTTP2_RST_STREAM:
    if ((s = h2_stream(user_data, session, frame->hd.stream_id)) != NULL) {
      uint32_t code = frame->rst_stream.error_code;
      char why[120];
      snprintf(why, sizeof(why), "stream reset by server: %s (%u)",
               nghttp2_http2_strerror(code), (unsigned)code);
      /* SPEC TR-02: REFUSED_STREAM means the server did not process it. */
      grit_stream_finish(s, grit_status_from_rst(code), why,
                         code == NGHTTP2_REFUSED_STREAM ? GRIT_WIRE_REFUSED
                                                        : GRIT_WIRE_SENT,
                         false, -1);
    }
    break;
  case NGHTTP2_SETTINGS:
    if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
      grit_transport_on_settings(t);
    break;
  case NGHTTP2_PING:
    if (frame->hd.flags & NGHTTP2_FLAG_ACK)
      grit_transport_on_ping_ack(t);
    break;
  case NGHTTP2_GOAWAY:
    grit_h2_on_goaway(t, (uint32_t)frame->goaway.last_stream_id,
                      frame->goaway.error_code, frame->goaway.opaque_data,
                      frame->goaway.opaque_data_len);
    break;
  default:
    break;
  }
  return 0;
}

typedef struct h2_deframe_ctx {
  grit_stream *s;
  bool nomem;
} h2_deframe_ctx;

static void h2_on_message(grit_slice *msg, void *ud) {
  h2_deframe_ctx *c = ud;
  if (c->nomem || !grit_slice_fifo_push(&c->s->recvq, msg)) {
    grit_slice_unref(msg);
    c->nomem = true;
  }
}

static int h2_on_data_chunk_recv(nghttp2_session *session, uint8_t flags,
                                 int32_t stream_id, const uint8_t *data,
                                 size_t len, void *user_data) {
  (void)flags;
  grit_stream *s = h2_stream(user_data, session, stream_id);
  if (!s)
    return 0;
  if (s->read_paused) {
    s->withheld += len;
    s->t->withheld += len;
  }
  if (!s->headers_received) {
    grit_stream_finish(s, GRIT_STATUS_INTERNAL,
                       "received DATA before response headers", GRIT_WIRE_SENT,
                       true, NGHTTP2_PROTOCOL_ERROR);
    return 0;
  }
  s->data_bytes += len;
  if (s->content_length >= 0 && s->data_bytes > (uint64_t)s->content_length)
    return h2_malformed(s, "more DATA than content-length"); /* HS-08 */
  if (grit_list_empty(&s->rx_node))
    grit_list_insert_tail(&s->t->rx_streams, &s->rx_node);
  h2_deframe_ctx c = {.s = s, .nomem = false};
  const char *why = NULL;
  size_t before = s->recvq.count;
  grit_status_code code =
      grit_deframer_feed(&s->deframer, data, len, h2_on_message, &c, &why);
  if (c.nomem) {
    grit_stream_finish(s, GRIT_STATUS_RESOURCE_EXHAUSTED,
                       "out of memory receiving a message", GRIT_WIRE_SENT,
                       true, NGHTTP2_CANCEL);
    return 0;
  }
  if (s->recvq.count != before)
    grit_stream_queue_event(s);
  if (code != GRIT_STATUS_OK) {
    char buf[160];
    if (code == GRIT_STATUS_RESOURCE_EXHAUSTED && s->deframer.hdr_have == 5 &&
        strstr(why, "larger") != NULL) {
      const uint8_t *h = s->deframer.hdr;
      uint32_t n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 |
                   (uint32_t)h[3] << 8 | h[4];
      snprintf(buf, sizeof(buf),
               "received message larger than max (%u vs. %lld)", (unsigned)n,
               (long long)s->deframer.max_len);
      why = buf;
    } else if (code == GRIT_STATUS_RESOURCE_EXHAUSTED &&
               strncmp(why, "decompressed", 12) == 0) {
      snprintf(buf, sizeof(buf),
               "received message larger than max when decompressed (over "
               "%lld bytes)",
               (long long)s->deframer.max_len);
      why = buf;
    }
    grit_stream_finish(s, code, why, GRIT_WIRE_SENT, false, NGHTTP2_CANCEL);
  }
  return 0;
}

static int h2_on_stream_close(nghttp2_session *session, int32_t stream_id,
                              uint32_t error_code, void *user_data) {
  grit_stream *s = h2_stream(user_data, session, stream_id);
  if (!s)
    return 0;
  char why[120];
  if (error_code == NGHTTP2_NO_ERROR) {
    grit_stream_finish(s, GRIT_STATUS_UNKNOWN,
                       "stream closed without grpc-status", GRIT_WIRE_SENT,
                       false, -1);
    return 0;
  }
  snprintf(why, sizeof(why), "stream closed: %s (%u)",
           nghttp2_http2_strerror(error_code), (unsigned)error_code);
  grit_wire_state wire = !s->headers_sent ? GRIT_WIRE_NOT_SENT
                         : error_code == NGHTTP2_REFUSED_STREAM
                             ? GRIT_WIRE_REFUSED
                             : GRIT_WIRE_SENT;
  grit_stream_finish(s, grit_status_from_rst(error_code), why, wire, false, -1);
  return 0;
}

static int h2_on_frame_send(nghttp2_session *session,
                            const nghttp2_frame *frame, void *user_data) {
  grit_transport *t = user_data;
  if (frame->hd.stream_id == 0)
    return 0;
  grit_stream *s = h2_lookup(t, session, frame->hd.stream_id);
  if (!s)
    return 0;
  if (frame->hd.type == NGHTTP2_HEADERS) {
    /* SPEC TR-01: from here on the server may have seen the request. */
    s->headers_sent = true;
    GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG,
               "transport %s: stream %d: request headers sent", t->addr.text,
               (int)s->id);
  }
  if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    s->eos_sent = true;
  return 0;
}

static int h2_on_frame_not_send(nghttp2_session *session,
                                const nghttp2_frame *frame, int lib_error_code,
                                void *user_data) {
  grit_transport *t = user_data;
  if (frame->hd.type != NGHTTP2_HEADERS)
    return 0;
  if (lib_error_code == NGHTTP2_ERR_START_STREAM_NOT_ALLOWED &&
      !t->going_away) {
    /* nghttp2 gave up on the session (we sent GOAWAY after an error): tell
     * the owner as for a GOAWAY, so no more streams are offered here and
     * not-sent calls are not replayed onto it in a loop (TR-01). */
    t->going_away = true;
    t->ev_goaway = true;
    t->ev_goaway_last_id = INT32_MAX;
    t->ev_goaway_code = NGHTTP2_NO_ERROR;
    grit_transport_schedule(t);
  }
  grit_stream *s = h2_stream(user_data, session, frame->hd.stream_id);
  if (!s)
    return 0;
  char why[120];
  snprintf(why, sizeof(why), "request not sent: %s",
           nghttp2_strerror(lib_error_code));
  grit_stream_finish(s, GRIT_STATUS_UNAVAILABLE, why,
                     s->headers_sent ? GRIT_WIRE_SENT : GRIT_WIRE_NOT_SENT,
                     false, -1);
  return 0;
}

static int h2_on_error(nghttp2_session *session, int lib_error_code,
                       const char *msg, size_t len, void *user_data) {
  (void)session;
  (void)lib_error_code;
  grit_transport *t = user_data;
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_DEBUG, "transport %s: h2: %.*s",
             t->addr.text, (int)len, msg);
  return 0;
}

void grit_h2_on_goaway(grit_transport *t, uint32_t last_id, uint32_t code,
                       const uint8_t *debug, size_t debug_len) {
  GRIT_TRACE(GRIT_TRACE_TRANSPORT, GRIT_LEVEL_INFO,
             "transport %s: GOAWAY last_stream_id=%u code=%s debug=\"%.*s\"",
             t->addr.text, (unsigned)last_id, nghttp2_http2_strerror(code),
             (int)(debug_len > 100 ? 100 : debug_len),
             debug ? (const char *)debug : "");
  t->going_away = true;
  t->goaway_received = true;
  t->goaway_last_id = last_id;
  if (code == NGHTTP2_ENHANCE_YOUR_CALM && debug_len == 14 &&
      memcmp(debug, "too_many_pings", 14) == 0)
    t->close_info.too_many_pings = true;
  /* SPEC TR-02: streams above last_stream_id were not processed. */
  char why[120];
  snprintf(why, sizeof(why), "server sent GOAWAY (%s, last stream %u)",
           nghttp2_http2_strerror(code), (unsigned)last_id);
  grit_list *it;
  GRIT_LIST_FOREACH(it, &t->streams) {
    grit_stream *s = GRIT_CONTAINER_OF(it, grit_stream, node);
    if (!s->finished && (s->id <= 0 || (uint32_t)s->id > last_id))
      grit_stream_finish(
          s, GRIT_STATUS_UNAVAILABLE, why,
          s->headers_sent ? GRIT_WIRE_REFUSED : GRIT_WIRE_NOT_SENT, false, -1);
  }
  t->ev_goaway = true;
  t->ev_goaway_last_id = last_id;
  t->ev_goaway_code = code;
  if (t->active == 0)
    grit_transport_fail(t, GRIT_STATUS_UNAVAILABLE, why);
  grit_transport_schedule(t);
}

/* Give back what was received on |stream_id| (0: the connection) less
 * what is withheld for paused readers. On failure (out of memory) the
 * bytes stay counted and go back with the next update. */
static void h2_ack(grit_transport *t, int32_t stream_id, int32_t received,
                   size_t withheld) {
  if (received <= 0 || (size_t)received <= withheld)
    return;
  int32_t n = received - (int32_t)withheld;
  if (n >= H2_ACK_MIN_BYTES)
    nghttp2_submit_window_update(t->h2, NGHTTP2_FLAG_NONE, stream_id, n);
}

static bool h2_stream_open(grit_transport *t, const grit_stream *s) {
  return !s->finished && s->id > 0 &&
         !nghttp2_session_get_stream_remote_close(t->h2, s->id);
}

static void h2_ack_stream(grit_transport *t, grit_stream *s) {
  h2_ack(t, s->id,
         nghttp2_session_get_stream_effective_recv_data_length(t->h2, s->id),
         s->withheld);
}

static void h2_ack_connection(grit_transport *t) {
  h2_ack(t, 0, nghttp2_session_get_effective_recv_data_length(t->h2),
         t->withheld);
}

bool grit_h2_ack_received(grit_transport *t) {
  bool open = false;
  grit_list *e;
  while ((e = grit_list_pop_head(&t->rx_streams)) != NULL) {
    grit_stream *s = GRIT_CONTAINER_OF(e, grit_stream, rx_node);
    /* A stream the server has finished needs no more window. */
    if (!h2_stream_open(t, s))
      continue;
    open = true;
    h2_ack_stream(t, s);
  }
  h2_ack_connection(t);
  return open;
}

void grit_h2_release_withheld(grit_transport *t, grit_stream *s) {
  if (s->withheld == 0)
    return;
  t->withheld -= s->withheld;
  s->withheld = 0;
  if (t->h2 && !t->io_dead) {
    if (h2_stream_open(t, s))
      h2_ack_stream(t, s);
    h2_ack_connection(t);
    grit_transport_schedule(t);
  }
}

/* DATA frames of at least this many bytes skip nghttp2's copy: nghttp2
 * hands the frame to h2_send_data, and the connection writes its payload
 * from the stream's slices (cleartext) or copies it once into the flush's
 * plaintext (TLS), instead of two copies. Smaller frames are cheaper
 * copied. */
#define H2_NO_COPY_MIN 1024

/* NGHTTP2_DATA_FLAG_NO_COPY's frame: the 9-byte header, then |length|
 * bytes from the stream's queue (no padding: grit sets none). */
static int h2_send_data(nghttp2_session *session, nghttp2_frame *frame,
                        const uint8_t *framehd, size_t length,
                        nghttp2_data_source *source, void *user_data) {
  (void)source;
  grit_transport *t = user_data;
  grit_stream *s = h2_stream(user_data, session, frame->hd.stream_id);
  if (!t->flush_out)
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  /* A frame held back by WOULDBLOCK goes on a later flush: its stream may
   * have finished (cancelled) meanwhile. That stream alone is reset. */
  if (!s || s->pending_bytes < length)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return grit_conn_data_frame(t, s, framehd, length);
}

ssize_t grit_h2_data_read(nghttp2_session *session, int32_t stream_id,
                          uint8_t *buf, size_t length, uint32_t *data_flags,
                          nghttp2_data_source *source, void *user_data) {
  (void)source;
  grit_transport *t = user_data;
  /* Look the stream up rather than trusting source->ptr: the stream may
   * have been finished and freed while nghttp2 still holds the item. */
  grit_stream *s = h2_stream(user_data, session, stream_id);
  if (!s)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (t->flush_out && s->pending_bytes >= H2_NO_COPY_MIN) {
    size_t n = s->pending_bytes < length ? s->pending_bytes : length;
    *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (n == s->pending_bytes && s->half_close)
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
  }
  size_t n = grit_stream_take_send(s, buf, length);
  if (s->sendq.count == 0 && s->half_close) {
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
  }
  if (n == 0) {
    s->data_deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

grit_err grit_h2_session_new(grit_transport *t) {
  nghttp2_session_callbacks *cbs;
  if (nghttp2_session_callbacks_new(&cbs) != 0)
    return GRIT_ERR_NOMEM;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs,
                                                          h2_on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, h2_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, h2_on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
      cbs, h2_on_data_chunk_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs,
                                                         h2_on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, h2_on_frame_send);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(
      cbs, h2_on_frame_not_send);
  nghttp2_session_callbacks_set_error_callback2(cbs, h2_on_error);
  nghttp2_session_callbacks_set_send_data_callback(cbs, h2_send_data);

  nghttp2_option *opt;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cbs);
    return GRIT_ERR_NOMEM;
  }
  /* Our own limit is checked per header in h2_on_header. */
  nghttp2_option_set_max_send_header_block_length(opt, 256 * 1024);
  /* Window goes back as grit_h2_ack_received decides (FC-04). */
  nghttp2_option_set_no_auto_window_update(opt, 1);
  /* SPEC HS-08: grit checks the response's fields itself (h2_on_header),
   * once, instead of nghttp2 checking them all a second time. */
  nghttp2_option_set_no_http_messaging(opt, 1);

  /* All of nghttp2's memory goes through grit's allocator (STYLE 3.5),
   * its small blocks kept for reuse by the session (h2mem.c). */
  grit_h2mem_init(&t->h2mem);
  nghttp2_mem mem = grit_h2mem_nghttp2(&t->h2mem);
  int rv = nghttp2_session_client_new3(&t->h2, cbs, t, opt, &mem);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) {
    t->h2 = NULL;
    return GRIT_ERR_NOMEM;
  }
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, t->max_header_list_bytes},
  };
  rv = nghttp2_submit_settings(t->h2, NGHTTP2_FLAG_NONE, iv,
                               sizeof(iv) / sizeof(iv[0]));
  if (rv == 0)
    rv = nghttp2_session_set_local_window_size(t->h2, NGHTTP2_FLAG_NONE, 0,
                                               H2_CONN_WINDOW);
  if (rv != 0) {
    nghttp2_session_del(t->h2);
    t->h2 = NULL;
    return GRIT_ERR_NOMEM;
  }
  return GRIT_OK;
}
