/*
 * The compression cases of gRPC's interop-test-descriptions.md:
 * client_compressed_unary, client_compressed_streaming (each with its
 * feature probe: a request the server expects compressed but that is not
 * must fail INVALID_ARGUMENT), server_compressed_unary and
 * server_compressed_streaming. Requests go out in gzip through
 * grit_call_opts.compression; GRIT_SEND_NO_COMPRESS sends one message of a
 * compressed stream as it is.
 */
#include "interop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_REQ_SIZE 271828
#define LARGE_RESP_SIZE 314159

static grit_call_opts gzip_opts(const interop_ctx *ctx, bool compress) {
  grit_call_opts o = interop_opts(ctx, NULL);
  o.compression = compress ? GRIT_COMPRESSION_GZIP : GRIT_COMPRESSION_IDENTITY;
  return o;
}

/* One UnaryCall: |compress| the request or not, with expect_compressed
 * and response_compressed set as asked (NULL: absent). Checks the status
 * is |want| and, when OK, the payload size; |info| gets the call info. */
static bool unary_once(const interop_ctx *ctx, bool compress,
                       const bool *expect_compressed,
                       const bool *response_compressed, grit_status_code want,
                       grit_call_info *info, const char *what) {
  bool ok = false;
  Grpc__Testing__SimpleRequest req = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  Grpc__Testing__BoolValue expect = GRPC__TESTING__BOOL_VALUE__INIT;
  Grpc__Testing__BoolValue respc = GRPC__TESTING__BOOL_VALUE__INIT;
  Grpc__Testing__SimpleResponse *resp = NULL;
  uint8_t *buf = NULL;
  size_t len = 0;
  grit_bytes out = {0};
  grit_status st = {0};
  grit_call_opts opts = gzip_opts(ctx, compress);

  CHECK(interop_payload_zeros(&payload, LARGE_REQ_SIZE), "out of memory");
  req.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  req.response_size = LARGE_RESP_SIZE;
  req.payload = &payload;
  if (expect_compressed) {
    expect.value = *expect_compressed;
    req.expect_compressed = &expect;
  }
  if (response_compressed) {
    respc.value = *response_compressed;
    req.response_compressed = &respc;
  }
  buf = interop_pack(&req.base, &len);
  CHECK(buf, "out of memory");
  CHECK_OK(grit_unary_call(ctx->ch, INTEROP_UNARY_CALL, buf, len, &opts, &out,
                           &st, info));
  REQUIRE(interop_status_is(&st, want, NULL, what));
  CHECK(!strcmp(info->request_encoding, compress ? "gzip" : "identity"),
        "%s: request encoding: expected %s, got %s", what,
        compress ? "gzip" : "identity", info->request_encoding);
  if (want == GRIT_STATUS_OK) {
    resp = grpc__testing__simple_response__unpack(NULL, out.len, out.data);
    CHECK(resp, "%s: response of %zu bytes does not parse", what, out.len);
    REQUIRE(interop_payload_is(resp->payload, LARGE_RESP_SIZE, what));
  }
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

bool interop_client_compressed_unary(const interop_ctx *ctx) {
  static const bool yes = true, no = false;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  /* The probe: expected compressed, sent plain: the server checks. */
  if (!unary_once(ctx, false, &yes, NULL, GRIT_STATUS_INVALID_ARGUMENT, &info,
                  "UnaryCall (probe: expect_compressed, not compressed)")) {
    return false;
  }
  if (!unary_once(ctx, true, &yes, NULL, GRIT_STATUS_OK, &info,
                  "UnaryCall (compressed, expect_compressed)")) {
    return false;
  }
  return unary_once(ctx, false, &no, NULL, GRIT_STATUS_OK, &info,
                    "UnaryCall (not compressed, !expect_compressed)");
}

bool interop_server_compressed_unary(const interop_ctx *ctx) {
  static const bool yes = true, no = false;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  bool ok = false;

  REQUIRE(unary_once(ctx, false, NULL, &yes, GRIT_STATUS_OK, &info,
                     "UnaryCall (response_compressed)"));
  /* The response came in an encoding grit offered, and was decoded. */
  CHECK(!strcmp(info.response_encoding, "gzip") ||
            !strcmp(info.response_encoding, "deflate"),
        "UnaryCall (response_compressed): response grpc-encoding: expected "
        "gzip or deflate, got \"%s\"",
        info.response_encoding);
  REQUIRE(unary_once(ctx, false, NULL, &no, GRIT_STATUS_OK, &info,
                     "UnaryCall (!response_compressed)"));
  ok = true;
done:
  return ok;
}

/* Send one StreamingInputCallRequest of |size| zeros, expect_compressed
 * as given, with |flags|. */
static grit_err send_input(grit_call *call, size_t size, bool expect,
                           unsigned flags) {
  Grpc__Testing__StreamingInputCallRequest req =
      GRPC__TESTING__STREAMING_INPUT_CALL_REQUEST__INIT;
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  Grpc__Testing__BoolValue ev = GRPC__TESTING__BOOL_VALUE__INIT;
  size_t len = 0;
  uint8_t *buf;
  grit_err err;

  if (!interop_payload_zeros(&payload, size)) {
    return GRIT_ERR_NOMEM;
  }
  ev.value = expect;
  req.payload = &payload;
  req.expect_compressed = &ev;
  buf = interop_pack(&req.base, &len);
  err = buf ? grit_call_send_flags(call, buf, len, flags) : GRIT_ERR_NOMEM;
  free(buf);
  interop_payload_clear(&payload);
  return err;
}

bool interop_client_compressed_streaming(const interop_ctx *ctx) {
  bool ok = false;
  grit_call *call = NULL;
  grit_bytes msg = {0};
  grit_status st = {0};
  Grpc__Testing__StreamingInputCallResponse *resp = NULL;
  grit_call_opts plain = gzip_opts(ctx, false);
  grit_call_opts gz = gzip_opts(ctx, true);

  /* The probe: expect_compressed on a message sent plain. */
  CHECK_OK(grit_call_start(ctx->ch, INTEROP_STREAMING_INPUT_CALL, &plain, NULL,
                           NULL, &call));
  CHECK_OK(send_input(call, 27182, true, 0));
  CHECK_OK(grit_call_close_send(call));
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_INVALID_ARGUMENT, NULL,
                            "StreamingInputCall (probe)"));
  grit_status_free(&st);
  grit_call_destroy(call);
  call = NULL;

  /* Compressed, then one message sent as it is (GRIT_SEND_NO_COMPRESS). */
  CHECK_OK(grit_call_start(ctx->ch, INTEROP_STREAMING_INPUT_CALL, &gz, NULL,
                           NULL, &call));
  CHECK_OK(send_input(call, 27182, true, 0));
  CHECK_OK(send_input(call, 45904, false, GRIT_SEND_NO_COMPRESS));
  CHECK_OK(grit_call_close_send(call));
  grit_err err = grit_call_recv(call, &msg);
  if (err != GRIT_OK && grit_call_finish(call, &st) == GRIT_OK)
    CHECK(false, "grit_call_recv: expected the response, got %s (%s: %s)",
          grit_err_name(err), grit_status_code_name(st.code),
          st.message ? st.message : "");
  CHECK(err == GRIT_OK, "grit_call_recv: expected the response, got %s",
        grit_err_name(err));
  resp = grpc__testing__streaming_input_call_response__unpack(NULL, msg.len,
                                                              msg.data);
  CHECK(resp, "response of %zu bytes does not parse", msg.len);
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "StreamingInputCall"));
  CHECK(resp->aggregated_payload_size == 73086,
        "aggregated_payload_size: expected 73086, got %d",
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

bool interop_server_compressed_streaming(const interop_ctx *ctx) {
  static const size_t sizes[] = {31415, 92653};
  bool ok = false;
  grit_call *call = NULL;
  grit_status st = {0};
  grit_bytes msg = {0};
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  Grpc__Testing__ResponseParameters params[2];
  Grpc__Testing__ResponseParameters *pp[2];
  Grpc__Testing__BoolValue comp[2];
  Grpc__Testing__StreamingOutputCallResponse *resp = NULL;
  grit_call_opts opts = interop_opts(ctx, NULL);

  for (size_t i = 0; i < 2; i++) {
    grpc__testing__response_parameters__init(&params[i]);
    grpc__testing__bool_value__init(&comp[i]);
    comp[i].value = i == 0; /* the first compressed, the second not */
    params[i].size = (int32_t)sizes[i];
    params[i].compressed = &comp[i];
    pp[i] = &params[i];
  }
  req.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  req.n_response_parameters = 2;
  req.response_parameters = pp;
  CHECK_OK(grit_call_start(ctx->ch, INTEROP_STREAMING_OUTPUT_CALL, &opts, NULL,
                           NULL, &call));
  CHECK_OK(interop_send(call, &req.base));
  CHECK_OK(grit_call_close_send(call));
  for (size_t i = 0; i < 2; i++) {
    grit_err err = grit_call_recv(call, &msg);
    CHECK(err == GRIT_OK, "response %zu: grit_call_recv: %s", i + 1,
          grit_err_name(err));
    resp = grpc__testing__streaming_output_call_response__unpack(NULL, msg.len,
                                                                 msg.data);
    grit_bytes_free(&msg);
    CHECK(resp, "response %zu does not parse", i + 1);
    REQUIRE(interop_payload_is(resp->payload, sizes[i], "StreamingOutputCall"));
    grpc__testing__streaming_output_call_response__free_unpacked(resp, NULL);
    resp = NULL;
  }
  grit_err err = grit_call_recv(call, &msg);
  CHECK(err == GRIT_END_OF_STREAM, "expected the end of the stream, got %s",
        grit_err_name(err));
  CHECK_OK(grit_call_finish(call, &st));
  REQUIRE(interop_status_is(&st, GRIT_STATUS_OK, NULL, "StreamingOutputCall"));
  ok = true;
done:
  if (resp) {
    grpc__testing__streaming_output_call_response__free_unpacked(resp, NULL);
  }
  grit_bytes_free(&msg);
  grit_status_free(&st);
  grit_call_destroy(call);
  return ok;
}
