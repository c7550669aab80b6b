/*
 * The client side of gRPC's HTTP/2 server test cases (grpc's
 * test/http2_test server, whose client is test/cpp/interop/http2_client.cc,
 * and the two cases the harness runs with the interop client's
 * large_unary): every call is UnaryCall with a 271828-byte request asking
 * for 314159 bytes, and the case checks what the server's behaviour must
 * come to. Named only (--test_case=NAME): "all" does not run them, since
 * they need that server. Issue 29 part 7.
 */
#include "interop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define H2_REQ_SIZE 271828
#define H2_RESP_SIZE 314159
#define MAX_STREAMS_CALLS 10

/* One UnaryCall with the default request: |st| filled; |*resp| the parsed
 * response when the call ended OK with one (else NULL). False (after
 * printing why) when the call could not be made or an OK response does not
 * parse. */
static bool default_call(const interop_ctx *ctx, grit_status *st,
                         Grpc__Testing__SimpleResponse **resp) {
  bool ok = false;
  Grpc__Testing__SimpleRequest req = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  uint8_t *buf = NULL;
  size_t len = 0;
  grit_bytes out = {0};
  grit_call_opts opts = interop_opts(ctx, NULL);

  *resp = NULL;
  *st = (grit_status){0};
  CHECK(interop_payload_zeros(&payload, H2_REQ_SIZE), "out of memory");
  req.response_size = H2_RESP_SIZE;
  req.payload = &payload;
  buf = interop_pack(&req.base, &len);
  CHECK(buf, "out of memory");
  CHECK_OK(grit_unary_call(ctx->ch, INTEROP_UNARY_CALL, buf, len, &opts, &out,
                           st, NULL));
  if (st->code == GRIT_STATUS_OK) {
    *resp = grpc__testing__simple_response__unpack(NULL, out.len, out.data);
    CHECK(*resp,
          "UnaryCall: response of %zu bytes does not parse as "
          "SimpleResponse",
          out.len);
  } else {
    CHECK(out.len == 0, "UnaryCall: %s with a response of %zu bytes",
          grit_status_code_name(st->code), out.len);
  }
  ok = true;
done:
  grit_bytes_free(&out);
  free(buf);
  interop_payload_clear(&payload);
  return ok;
}

/* A call that must succeed with the full 314159-byte payload. */
static bool call_ok(const interop_ctx *ctx, const char *what) {
  grit_status st;
  Grpc__Testing__SimpleResponse *resp = NULL;
  bool ok = default_call(ctx, &st, &resp) &&
            interop_status_is(&st, GRIT_STATUS_OK, NULL, what) &&
            interop_payload_is(resp->payload, H2_RESP_SIZE, what);
  if (resp) {
    grpc__testing__simple_response__free_unpacked(resp, NULL);
  }
  grit_status_free(&st);
  return ok;
}

/* A call the server resets: INTERNAL and no response message (the reset
 * is RST_STREAM(NO_ERROR) before any status, which gRPC maps to
 * INTERNAL). */
static bool call_reset(const interop_ctx *ctx, const char *what) {
  grit_status st;
  Grpc__Testing__SimpleResponse *resp = NULL;
  bool ok = default_call(ctx, &st, &resp) &&
            interop_status_is(&st, GRIT_STATUS_INTERNAL, NULL, what);
  if (resp) {
    grpc__testing__simple_response__free_unpacked(resp, NULL);
  }
  grit_status_free(&st);
  return ok;
}

/* rst_after_header: HEADERS, then RST_STREAM. */
static bool rst_after_header(const interop_ctx *ctx) {
  return call_reset(ctx, "UnaryCall reset after headers");
}

/* rst_after_data: HEADERS, the whole response message, RST_STREAM with no
 * trailers: the call fails (the message may or may not have been seen). */
static bool rst_after_data(const interop_ctx *ctx) {
  return call_reset(ctx, "UnaryCall reset after data");
}

/* rst_during_data: HEADERS, half the response message, RST_STREAM. */
static bool rst_during_data(const interop_ctx *ctx) {
  return call_reset(ctx, "UnaryCall reset during data");
}

/* goaway: the server answers, then sends GOAWAY naming that stream as the
 * last; after a second the next call must succeed (on a new connection,
 * which the test server checks). */
static bool goaway(const interop_ctx *ctx) {
  if (!call_ok(ctx, "UnaryCall before GOAWAY")) {
    return false;
  }
  struct timespec second = {1, 0};
  nanosleep(&second, NULL);
  return call_ok(ctx, "UnaryCall after GOAWAY");
}

/* ping: the server sends PINGs around its answer; the call succeeds (the
 * server checks that every PING was acknowledged). */
static bool ping(const interop_ctx *ctx) {
  return call_ok(ctx, "UnaryCall among PINGs");
}

typedef struct max_streams_worker {
  const interop_ctx *ctx;
  pthread_t thread;
  bool started;
  bool ok;
} max_streams_worker;

static void *max_streams_run(void *arg) {
  max_streams_worker *w = arg;
  w->ok = call_ok(w->ctx, "concurrent UnaryCall");
  return NULL;
}

/* max_streams: the server allows one stream at a time
 * (SETTINGS_MAX_CONCURRENT_STREAMS 1). One call first, so the setting has
 * arrived, then ten calls at once from ten threads: each must succeed,
 * queued by the client rather than refused (the server checks that no two
 * streams were ever open together). */
static bool max_streams(const interop_ctx *ctx) {
  if (!call_ok(ctx, "first UnaryCall")) {
    return false;
  }
  max_streams_worker w[MAX_STREAMS_CALLS];
  bool ok = true;
  for (size_t i = 0; i < MAX_STREAMS_CALLS; i++) {
    w[i] = (max_streams_worker){.ctx = ctx};
    w[i].started =
        pthread_create(&w[i].thread, NULL, max_streams_run, &w[i]) == 0;
    if (!w[i].started) {
      interop_fail(__FILE__, __LINE__, "pthread_create failed");
      ok = false;
    }
  }
  size_t passed = 0;
  for (size_t i = 0; i < MAX_STREAMS_CALLS; i++) {
    if (w[i].started) {
      pthread_join(w[i].thread, NULL);
      passed += w[i].ok;
    }
  }
  if (passed != MAX_STREAMS_CALLS) {
    interop_fail(__FILE__, __LINE__, "concurrent calls: %zu of %d succeeded",
                 passed, MAX_STREAMS_CALLS);
    ok = false;
  }
  return ok;
}

/* data_frame_padding and no_df_padding_sanity_test: the harness runs the
 * interop client's large_unary against a server that sends the response
 * in DATA frames of 5 bytes, padded with 255 bytes or not padded. */
static bool padded_large_unary(const interop_ctx *ctx) {
  return call_ok(ctx, "UnaryCall in 5-byte DATA frames");
}

const interop_case interop_http2_cases[] = {
    {"rst_after_header", rst_after_header},
    {"rst_after_data", rst_after_data},
    {"rst_during_data", rst_during_data},
    {"goaway", goaway},
    {"ping", ping},
    {"max_streams", max_streams},
    {"data_frame_padding", padded_large_unary},
    {"no_df_padding_sanity_test", padded_large_unary},
};

const size_t interop_http2_case_count =
    sizeof(interop_http2_cases) / sizeof(interop_http2_cases[0]);
