/*
 * The interop test cases, as gRPC's doc/interop-test-descriptions.md defines
 * them. Each case releases everything it holds at its "done" label, which
 * every failed CHECK jumps to, so resources are declared at the top.
 *
 * The cases use every way grit offers to make a call: grit_unary_call
 * (blocking), grit_unary_call_async, blocking streaming calls
 * (grit_call_recv/grit_call_finish/grit_call_headers) and async streaming
 * calls (callbacks, with grit_call_cancel from inside a callback).
 */
#include "interop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sizes from the interop descriptions. */
#define LARGE_REQ_SIZE 271828
#define LARGE_RESP_SIZE 314159

static const size_t stream_req_sizes[] = {27182, 8, 1828, 45904};
static const size_t stream_resp_sizes[] = {31415, 9, 2653, 58979};
#define STREAM_COUNT (sizeof(stream_req_sizes) / sizeof(stream_req_sizes[0]))
#define AGGREGATED_SIZE 74922

#define ECHO_INITIAL_KEY "x-grpc-test-echo-initial"
#define ECHO_INITIAL_VALUE "test_initial_metadata_value"
#define ECHO_TRAILING_KEY "x-grpc-test-echo-trailing-bin"
static const uint8_t echo_trailing_value[] = {0xab, 0xab, 0xab};

#define STATUS_MESSAGE "test status message"
#define SPECIAL_STATUS_MESSAGE                                                 \
  "\t\ntest with whitespace\r\nand Unicode BMP \xe2\x98\xba and non-BMP "      \
  "\xf0\x9f\x98\x88\t\n"

/* How much longer than the call's own deadline to wait for an async
 * completion before declaring that grit lost it. */
#define ASYNC_GRACE_MS 5000

static uint64_t async_wait_ms(const interop_ctx *ctx) {
  return (ctx->rpc_timeout_ms ? ctx->rpc_timeout_ms : 60000) + ASYNC_GRACE_MS;
}

/* Receive one message and parse it as a StreamingOutputCallResponse.
 * Returns the new message (free with ..._free_unpacked) or NULL after
 * printing why (|what| names the step). */
static Grpc__Testing__StreamingOutputCallResponse *
recv_output(grit_call *call, const char *what) {
  grit_bytes msg = {0};
  grit_err err = grit_call_recv(call, &msg);

  if (err != GRIT_OK) {
    interop_fail(__FILE__, __LINE__,
                 "%s: grit_call_recv: expected a message, got %s (%s)", what,
                 grit_err_name(err), grit_strerror(err));
    return NULL;
  }
  Grpc__Testing__StreamingOutputCallResponse *resp =
      grpc__testing__streaming_output_call_response__unpack(NULL, msg.len,
                                                            msg.data);
  if (!resp) {
    interop_fail(__FILE__, __LINE__,
                 "%s: response of %zu bytes does not parse as "
                 "StreamingOutputCallResponse",
                 what, msg.len);
  }
  grit_bytes_free(&msg);
  return resp;
}

/* Check that the response stream has ended: grit_call_recv gives
 * GRIT_END_OF_STREAM. */
static bool recv_end(grit_call *call, const char *what) {
  grit_bytes msg = {0};
  grit_err err = grit_call_recv(call, &msg);

  if (err == GRIT_END_OF_STREAM) {
    return true;
  }
  if (err == GRIT_OK) {
    interop_fail(__FILE__, __LINE__,
                 "%s: expected the end of the response stream, got another "
                 "message (%zu bytes)",
                 what, msg.len);
    grit_bytes_free(&msg);
  } else {
    interop_fail(__FILE__, __LINE__,
                 "%s: grit_call_recv: expected END_OF_STREAM, "
                 "got %s (%s)",
                 what, grit_err_name(err), grit_strerror(err));
  }
  return false;
}

/* ---- empty_unary: grit_unary_call_async ---- */

typedef struct unary_result {
  interop_waiter w;
  grit_status_code code;
  char *message;
  size_t resp_len;
} unary_result;

static void empty_unary_done(const grit_status *st, const uint8_t *resp,
                             size_t resp_len, const grit_call_info *info,
                             void *user_data) {
  unary_result *r = user_data;

  r->code = st->code;
  r->message = strdup(st->message ? st->message : "");
  r->resp_len = resp_len;
  interop_waiter_signal(&r->w);
}

static bool empty_unary(const interop_ctx *ctx) {
  bool ok = false;
  unary_result r = {.code = GRIT_STATUS_UNKNOWN};
  grit_call_opts opts = interop_opts(ctx, NULL);
  /* Empty serializes to zero bytes; pass a valid pointer all the same. */
  static const uint8_t empty_req[1];

  interop_waiter_init(&r.w);
  CHECK_OK(grit_unary_call_async(ctx->ch, INTEROP_EMPTY_CALL, empty_req, 0,
                                 &opts, empty_unary_done, &r));
  CHECK(interop_waiter_wait(&r.w, async_wait_ms(ctx)),
        "grit_unary_call_async: completion callback did not run within "
        "%llu ms",
        (unsigned long long)async_wait_ms(ctx));
  grit_status st = {.code = r.code, .message = r.message};
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "EmptyCall"));
  CHECK(r.resp_len == 0,
        "EmptyCall: expected a zero-length response, got %zu bytes",
        r.resp_len);
  ok = true;
done:
  free(r.message);
  interop_waiter_free(&r.w);
  return ok;
}

/* ---- large_unary: grit_unary_call ---- */

static bool large_unary(const interop_ctx *ctx) {
  bool ok = false;
  Grpc__Testing__SimpleRequest req = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  Grpc__Testing__SimpleResponse *resp = NULL;
  uint8_t *buf = NULL;
  size_t len = 0;
  grit_bytes out = {0};
  grit_status st = {0};
  grit_call_opts opts = interop_opts(ctx, NULL);

  CHECK(interop_payload_zeros(&payload, LARGE_REQ_SIZE), "out of memory");
  req.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  req.response_size = LARGE_RESP_SIZE;
  req.payload = &payload;
  buf = interop_pack(&req.base, &len);
  CHECK(buf, "out of memory");

  CHECK_OK(grit_unary_call(ctx->ch, INTEROP_UNARY_CALL, buf, len, &opts, &out,
                           &st, NULL));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "UnaryCall"));
  resp = grpc__testing__simple_response__unpack(NULL, out.len, out.data);
  CHECK(resp,
        "UnaryCall: response of %zu bytes does not parse as "
        "SimpleResponse",
        out.len);
  REQUIRE(interop_payload_is(resp->payload, LARGE_RESP_SIZE, "UnaryCall"));
  ok = true;
done:
  if (resp) {
    grpc__testing__simple_response__free_unpacked(resp, NULL);
  }
  grit_status_free(&st);
  grit_bytes_free(&out);
  free(buf);
  interop_payload_clear(&payload);
  return ok;
}

/* ---- client_streaming: blocking streaming call ---- */

static bool client_streaming(const interop_ctx *ctx) {
  bool ok = false;
  grit_call *call = NULL;
  grit_bytes msg = {0};
  grit_status st = {0};
  Grpc__Testing__StreamingInputCallResponse *resp = NULL;
  grit_call_opts opts = interop_opts(ctx, NULL);

  CHECK_OK(grit_call_start(ctx->ch, INTEROP_STREAMING_INPUT_CALL, &opts, NULL,
                           NULL, &call));
  for (size_t i = 0; i < STREAM_COUNT; i++) {
    Grpc__Testing__StreamingInputCallRequest req =
        GRPC__TESTING__STREAMING_INPUT_CALL_REQUEST__INIT;
    Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;

    CHECK(interop_payload_zeros(&payload, stream_req_sizes[i]),
          "out of memory");
    req.payload = &payload;
    grit_err err = interop_send(call, &req.base);
    interop_payload_clear(&payload);
    CHECK(err == GRIT_OK, "grit_call_send (request %zu, %zu bytes): %s (%s)",
          i + 1, stream_req_sizes[i], grit_err_name(err), grit_strerror(err));
  }
  CHECK_OK(grit_call_close_send(call));

  grit_err err = grit_call_recv(call, &msg);
  CHECK(err == GRIT_OK, "grit_call_recv: expected the response, got %s (%s)",
        grit_err_name(err), grit_strerror(err));
  resp = grpc__testing__streaming_input_call_response__unpack(NULL, msg.len,
                                                              msg.data);
  CHECK(resp,
        "response of %zu bytes does not parse as "
        "StreamingInputCallResponse",
        msg.len);
  REQUIRE(recv_end(call, "StreamingInputCall"));
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "StreamingInputCall"));
  CHECK(resp->aggregated_payload_size == AGGREGATED_SIZE,
        "aggregated_payload_size: expected %d, got %d", AGGREGATED_SIZE,
        (int)resp->aggregated_payload_size);
  ok = true;
done:
  if (resp) {
    grpc__testing__streaming_input_call_response__free_unpacked(resp, NULL);
  }
  grit_bytes_free(&msg);
  grit_status_free(&st);
  grit_call_destroy(call);
  return ok;
}

/* ---- server_streaming ---- */

static bool server_streaming(const interop_ctx *ctx) {
  bool ok = false;
  grit_call *call = NULL;
  grit_status st = {0};
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  Grpc__Testing__ResponseParameters params[STREAM_COUNT];
  Grpc__Testing__ResponseParameters *param_ptrs[STREAM_COUNT];
  Grpc__Testing__StreamingOutputCallResponse *resp = NULL;
  grit_call_opts opts = interop_opts(ctx, NULL);

  for (size_t i = 0; i < STREAM_COUNT; i++) {
    grpc__testing__response_parameters__init(&params[i]);
    params[i].size = (int32_t)stream_resp_sizes[i];
    param_ptrs[i] = &params[i];
  }
  req.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  req.n_response_parameters = STREAM_COUNT;
  req.response_parameters = param_ptrs;

  CHECK_OK(grit_call_start(ctx->ch, INTEROP_STREAMING_OUTPUT_CALL, &opts, NULL,
                           NULL, &call));
  CHECK_OK(interop_send(call, &req.base));
  CHECK_OK(grit_call_close_send(call));
  for (size_t i = 0; i < STREAM_COUNT; i++) {
    char what[64];

    snprintf(what, sizeof(what), "StreamingOutputCall response %zu of %zu",
             i + 1, (size_t)STREAM_COUNT);
    resp = recv_output(call, what);
    REQUIRE(resp);
    REQUIRE(interop_payload_is(resp->payload, stream_resp_sizes[i], what));
    grpc__testing__streaming_output_call_response__free_unpacked(resp, NULL);
    resp = NULL;
  }
  REQUIRE(recv_end(call, "StreamingOutputCall (exactly four responses)"));
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "StreamingOutputCall"));
  ok = true;
done:
  if (resp) {
    grpc__testing__streaming_output_call_response__free_unpacked(resp, NULL);
  }
  grit_status_free(&st);
  grit_call_destroy(call);
  return ok;
}

/* ---- ping_pong ---- */

static bool ping_pong(const interop_ctx *ctx) {
  bool ok = false;
  grit_call *call = NULL;
  grit_status st = {0};
  Grpc__Testing__StreamingOutputCallResponse *resp = NULL;
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  grit_call_opts opts = interop_opts(ctx, NULL);

  CHECK_OK(grit_call_start(ctx->ch, INTEROP_FULL_DUPLEX_CALL, &opts, NULL, NULL,
                           &call));
  for (size_t i = 0; i < STREAM_COUNT; i++) {
    Grpc__Testing__StreamingOutputCallRequest req =
        GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
    Grpc__Testing__ResponseParameters param =
        GRPC__TESTING__RESPONSE_PARAMETERS__INIT;
    Grpc__Testing__ResponseParameters *param_ptr = &param;
    char what[64];

    param.size = (int32_t)stream_resp_sizes[i];
    CHECK(interop_payload_zeros(&payload, stream_req_sizes[i]),
          "out of memory");
    req.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
    req.n_response_parameters = 1;
    req.response_parameters = &param_ptr;
    req.payload = &payload;
    snprintf(what, sizeof(what), "FullDuplexCall ping %zu of %zu", i + 1,
             (size_t)STREAM_COUNT);
    CHECK_OK(interop_send(call, &req.base));
    interop_payload_clear(&payload);
    resp = recv_output(call, what);
    REQUIRE(resp);
    REQUIRE(interop_payload_is(resp->payload, stream_resp_sizes[i], what));
    grpc__testing__streaming_output_call_response__free_unpacked(resp, NULL);
    resp = NULL;
  }
  CHECK_OK(grit_call_close_send(call));
  REQUIRE(recv_end(call, "FullDuplexCall (exactly four responses)"));
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "FullDuplexCall"));
  ok = true;
done:
  if (resp) {
    grpc__testing__streaming_output_call_response__free_unpacked(resp, NULL);
  }
  interop_payload_clear(&payload);
  grit_status_free(&st);
  grit_call_destroy(call);
  return ok;
}

/* ---- empty_stream ---- */

static bool empty_stream(const interop_ctx *ctx) {
  bool ok = false;
  grit_call *call = NULL;
  grit_status st = {0};
  grit_call_opts opts = interop_opts(ctx, NULL);

  CHECK_OK(grit_call_start(ctx->ch, INTEROP_FULL_DUPLEX_CALL, &opts, NULL, NULL,
                           &call));
  CHECK_OK(grit_call_close_send(call));
  REQUIRE(recv_end(call, "FullDuplexCall (exactly zero responses)"));
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "FullDuplexCall"));
  ok = true;
done:
  grit_status_free(&st);
  grit_call_destroy(call);
  return ok;
}

/* ---- cancel_after_begin ---- */

static bool cancel_after_begin(const interop_ctx *ctx) {
  bool ok = false;
  grit_call *call = NULL;
  grit_status st = {0};
  grit_call_opts opts = interop_opts(ctx, NULL);

  CHECK_OK(grit_call_start(ctx->ch, INTEROP_STREAMING_INPUT_CALL, &opts, NULL,
                           NULL, &call));
  grit_call_cancel(call);
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_CANCELLED, NULL,
                            "StreamingInputCall cancelled after begin"));
  ok = true;
done:
  grit_status_free(&st);
  grit_call_destroy(call);
  return ok;
}

/* ---- cancel_after_first_response: async call, cancel in on_message ---- */

typedef struct cancel_state {
  interop_waiter w;
  int messages;
  grit_status_code code;
  char *message;
} cancel_state;

static void cancel_on_message(grit_call *call, const uint8_t *data, size_t len,
                              void *user_data) {
  cancel_state *s = user_data;

  /* grit_call_cancel is safe inside the call's own callbacks. */
  if (++s->messages == 1) {
    grit_call_cancel(call);
  }
}

static void cancel_on_done(grit_call *call, const grit_status *st,
                           void *user_data) {
  cancel_state *s = user_data;

  s->code = st->code;
  s->message = strdup(st->message ? st->message : "");
  interop_waiter_signal(&s->w);
}

static bool cancel_after_first_response(const interop_ctx *ctx) {
  bool ok = false;
  grit_call *call = NULL;
  cancel_state s = {.code = GRIT_STATUS_UNKNOWN};
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  Grpc__Testing__ResponseParameters param =
      GRPC__TESTING__RESPONSE_PARAMETERS__INIT;
  Grpc__Testing__ResponseParameters *param_ptr = &param;
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  const grit_call_cbs cbs = {
      .version = GRIT_CALL_CBS_VERSION,
      .on_message = cancel_on_message,
      .on_done = cancel_on_done,
  };
  grit_call_opts opts = interop_opts(ctx, NULL);

  interop_waiter_init(&s.w);
  param.size = (int32_t)stream_resp_sizes[0];
  CHECK(interop_payload_zeros(&payload, stream_req_sizes[0]), "out of memory");
  req.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  req.n_response_parameters = 1;
  req.response_parameters = &param_ptr;
  req.payload = &payload;

  CHECK_OK(grit_call_start(ctx->ch, INTEROP_FULL_DUPLEX_CALL, &opts, &cbs, &s,
                           &call));
  CHECK_OK(interop_send(call, &req.base));
  CHECK(interop_waiter_wait(&s.w, async_wait_ms(ctx)),
        "on_done did not run within %llu ms (messages seen: %d)",
        (unsigned long long)async_wait_ms(ctx), s.messages);
  CHECK(s.messages >= 1,
        "expected the first response before the call ended, got none");
  grit_status st = {.code = s.code, .message = s.message};
  REQUIRE(interop_status_is(&st, GRIT_STATUS_CANCELLED, NULL,
                            "FullDuplexCall cancelled after first response"));
  ok = true;
done:
  grit_call_destroy(call);
  interop_payload_clear(&payload);
  free(s.message);
  interop_waiter_free(&s.w);
  return ok;
}

/* ---- timeout_on_sleeping_server ---- */

static bool timeout_on_sleeping_server(const interop_ctx *ctx) {
  bool ok = false;
  grit_call *call = NULL;
  grit_status st = {0};
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  grit_call_opts opts = interop_opts(ctx, NULL);

  opts.timeout_ms = 1;
  CHECK(interop_payload_zeros(&payload, stream_req_sizes[0]), "out of memory");
  req.payload = &payload;
  CHECK_OK(grit_call_start(ctx->ch, INTEROP_FULL_DUPLEX_CALL, &opts, NULL, NULL,
                           &call));
  /* The deadline may pass before the send: then it is refused, as the call
   * has ended; the status below tells. */
  grit_err err = interop_send(call, &req.base);
  CHECK(err == GRIT_OK || err == GRIT_ERR_CALL_STATE,
        "grit_call_send: expected OK or ERR_CALL_STATE, got %s (%s)",
        grit_err_name(err), grit_strerror(err));
  /* No half-close: the server keeps waiting for more requests. */
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_DEADLINE_EXCEEDED, NULL,
                            "FullDuplexCall with a 1 ms deadline"));
  ok = true;
done:
  interop_payload_clear(&payload);
  grit_status_free(&st);
  grit_call_destroy(call);
  return ok;
}

/* ---- status_code_and_message, special_status_message ---- */

/* Unary call asking the server to end with (2, |message|). */
static bool unary_echo_status(const interop_ctx *ctx, const char *message) {
  bool ok = false;
  Grpc__Testing__SimpleRequest req = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  Grpc__Testing__EchoStatus echo = GRPC__TESTING__ECHO_STATUS__INIT;
  uint8_t *buf = NULL;
  size_t len = 0;
  grit_status st = {0};
  grit_call_opts opts = interop_opts(ctx, NULL);

  echo.code = GRIT_STATUS_UNKNOWN;
  echo.message = (char *)message;
  req.response_status = &echo;
  buf = interop_pack(&req.base, &len);
  CHECK(buf, "out of memory");
  CHECK_OK(grit_unary_call(ctx->ch, INTEROP_UNARY_CALL, buf, len, &opts, NULL,
                           &st, NULL));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_UNKNOWN, message,
                            "UnaryCall with response_status"));
  ok = true;
done:
  grit_status_free(&st);
  free(buf);
  return ok;
}

static bool status_code_and_message(const interop_ctx *ctx) {
  bool ok = false;
  grit_call *call = NULL;
  grit_status st = {0};
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  Grpc__Testing__EchoStatus echo = GRPC__TESTING__ECHO_STATUS__INIT;
  grit_call_opts opts = interop_opts(ctx, NULL);

  REQUIRE(unary_echo_status(ctx, STATUS_MESSAGE));

  echo.code = GRIT_STATUS_UNKNOWN;
  echo.message = (char *)STATUS_MESSAGE;
  req.response_status = &echo;
  CHECK_OK(grit_call_start(ctx->ch, INTEROP_FULL_DUPLEX_CALL, &opts, NULL, NULL,
                           &call));
  CHECK_OK(interop_send(call, &req.base));
  CHECK_OK(grit_call_close_send(call));
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_UNKNOWN, STATUS_MESSAGE,
                            "FullDuplexCall with response_status"));
  ok = true;
done:
  grit_status_free(&st);
  grit_call_destroy(call);
  return ok;
}

static bool special_status_message(const interop_ctx *ctx) {
  return unary_echo_status(ctx, SPECIAL_STATUS_MESSAGE);
}

/* ---- unimplemented_method, unimplemented_service ---- */

static bool expect_unimplemented(const interop_ctx *ctx, const char *method) {
  bool ok = false;
  grit_status st = {0};
  grit_call_opts opts = interop_opts(ctx, NULL);
  static const uint8_t empty_req[1];

  CHECK_OK(
      grit_unary_call(ctx->ch, method, empty_req, 0, &opts, NULL, &st, NULL));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_UNIMPLEMENTED, NULL, method));
  ok = true;
done:
  grit_status_free(&st);
  return ok;
}

static bool unimplemented_method(const interop_ctx *ctx) {
  return expect_unimplemented(ctx, INTEROP_UNIMPLEMENTED_CALL);
}

static bool unimplemented_service(const interop_ctx *ctx) {
  return expect_unimplemented(ctx, INTEROP_UNIMPLEMENTED_SVC_CALL);
}

/* ---- custom_metadata ---- */

/* Check the echoed initial value in |headers| and the -bin value in
 * |trailers|. */
static bool echoed(const grit_metadata *headers, const grit_metadata *trailers,
                   const char *what) {
  bool ok = false;
  size_t len = 0;
  const uint8_t *v = grit_metadata_find(headers, ECHO_INITIAL_KEY, &len);

  CHECK(v, "%s: response headers lack %s (%zu headers)", what, ECHO_INITIAL_KEY,
        grit_metadata_count(headers));
  CHECK(len == strlen(ECHO_INITIAL_VALUE) &&
            memcmp(v, ECHO_INITIAL_VALUE, len) == 0,
        "%s: header %s: expected \"%s\", got \"%.*s\"", what, ECHO_INITIAL_KEY,
        ECHO_INITIAL_VALUE, (int)len, (const char *)v);
  len = 0;
  v = grit_metadata_find(trailers, ECHO_TRAILING_KEY, &len);
  CHECK(v, "%s: trailers lack %s (%zu trailers)", what, ECHO_TRAILING_KEY,
        grit_metadata_count(trailers));
  CHECK(len == sizeof(echo_trailing_value) &&
            memcmp(v, echo_trailing_value, len) == 0,
        "%s: trailer %s: expected 3 bytes ab ab ab, got %zu bytes%s%02x", what,
        ECHO_TRAILING_KEY, len, len ? " starting " : " ", len ? v[0] : 0);
  ok = true;
done:
  return ok;
}

static bool custom_metadata(const interop_ctx *ctx) {
  bool ok = false;
  grit_metadata *md = NULL;
  grit_call *call = NULL;
  grit_status st = {0};
  grit_bytes msg = {0};
  Grpc__Testing__SimpleResponse *uresp = NULL;
  Grpc__Testing__StreamingOutputCallResponse *sresp = NULL;
  Grpc__Testing__SimpleRequest ureq = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  Grpc__Testing__StreamingOutputCallRequest sreq =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  Grpc__Testing__ResponseParameters param =
      GRPC__TESTING__RESPONSE_PARAMETERS__INIT;
  Grpc__Testing__ResponseParameters *param_ptr = &param;
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;

  CHECK_OK(interop_metadata_create(ctx, &md));
  CHECK_OK(grit_metadata_add(md, ECHO_INITIAL_KEY, ECHO_INITIAL_VALUE,
                             strlen(ECHO_INITIAL_VALUE)));
  CHECK_OK(grit_metadata_add(md, ECHO_TRAILING_KEY, echo_trailing_value,
                             sizeof(echo_trailing_value)));
  grit_call_opts opts = interop_opts(ctx, md);
  CHECK(interop_payload_zeros(&payload, LARGE_REQ_SIZE), "out of memory");

  /* Step 1: UnaryCall, as a blocking call so the headers are visible. */
  ureq.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  ureq.response_size = LARGE_RESP_SIZE;
  ureq.payload = &payload;
  CHECK_OK(
      grit_call_start(ctx->ch, INTEROP_UNARY_CALL, &opts, NULL, NULL, &call));
  CHECK_OK(interop_send(call, &ureq.base));
  CHECK_OK(grit_call_close_send(call));
  const grit_metadata *headers = grit_call_headers(call);
  CHECK(headers, "UnaryCall: grit_call_headers returned NULL");
  grit_err err = grit_call_recv(call, &msg);
  CHECK(err == GRIT_OK,
        "UnaryCall: grit_call_recv: expected the response, got %s (%s)",
        grit_err_name(err), grit_strerror(err));
  uresp = grpc__testing__simple_response__unpack(NULL, msg.len, msg.data);
  CHECK(uresp, "UnaryCall: response of %zu bytes does not parse", msg.len);
  REQUIRE(interop_payload_is(uresp->payload, LARGE_RESP_SIZE, "UnaryCall"));
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "UnaryCall"));
  REQUIRE(echoed(headers, st.trailers, "UnaryCall"));
  grit_status_free(&st);
  grit_call_destroy(call);
  call = NULL;

  /* Step 2: FullDuplexCall, then half-close. */
  param.size = LARGE_RESP_SIZE;
  sreq.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  sreq.n_response_parameters = 1;
  sreq.response_parameters = &param_ptr;
  sreq.payload = &payload;
  CHECK_OK(grit_call_start(ctx->ch, INTEROP_FULL_DUPLEX_CALL, &opts, NULL, NULL,
                           &call));
  CHECK_OK(interop_send(call, &sreq.base));
  CHECK_OK(grit_call_close_send(call));
  headers = grit_call_headers(call);
  CHECK(headers, "FullDuplexCall: grit_call_headers returned NULL");
  sresp = recv_output(call, "FullDuplexCall");
  REQUIRE(sresp);
  REQUIRE(
      interop_payload_is(sresp->payload, LARGE_RESP_SIZE, "FullDuplexCall"));
  REQUIRE(recv_end(call, "FullDuplexCall (exactly one response)"));
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "FullDuplexCall"));
  REQUIRE(echoed(headers, st.trailers, "FullDuplexCall"));
  ok = true;
done:
  if (sresp) {
    grpc__testing__streaming_output_call_response__free_unpacked(sresp, NULL);
  }
  if (uresp) {
    grpc__testing__simple_response__free_unpacked(uresp, NULL);
  }
  grit_bytes_free(&msg);
  grit_status_free(&st);
  grit_call_destroy(call);
  interop_payload_clear(&payload);
  grit_metadata_destroy(md);
  return ok;
}

const interop_case interop_cases[] = {
    {"empty_unary", empty_unary},
    {"large_unary", large_unary},
    {"client_streaming", client_streaming},
    {"server_streaming", server_streaming},
    {"ping_pong", ping_pong},
    {"empty_stream", empty_stream},
    {"cancel_after_begin", cancel_after_begin},
    {"cancel_after_first_response", cancel_after_first_response},
    {"timeout_on_sleeping_server", timeout_on_sleeping_server},
    {"status_code_and_message", status_code_and_message},
    {"special_status_message", special_status_message},
    {"unimplemented_method", unimplemented_method},
    {"unimplemented_service", unimplemented_service},
    {"custom_metadata", custom_metadata},
    {"client_compressed_unary", interop_client_compressed_unary},
    {"server_compressed_unary", interop_server_compressed_unary},
    {"client_compressed_streaming", interop_client_compressed_streaming},
    {"server_compressed_streaming", interop_server_compressed_streaming},
    {"rpc_soak", interop_rpc_soak},
    {"channel_soak", interop_channel_soak},
};

const size_t interop_case_count =
    sizeof(interop_cases) / sizeof(interop_cases[0]);
