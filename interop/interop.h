/*
 * grit interop client: shared declarations of the interop client's own files
 * (main.c parses flags and runs cases, cases.c holds the test cases,
 * support.c the message, check and wait helpers). It sees only the public
 * <grit/grit.h> and the protobuf-c code generated from interop/proto.
 * Layout: floor 5 of docs/layout.md.
 */
#ifndef GRIT_INTEROP_INTEROP_H
#define GRIT_INTEROP_INTEROP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grit/grit.h>

#include "empty.pb-c.h"
#include "messages.pb-c.h"
#include "test.pb-c.h"

/* Method paths of the interop services. */
#define INTEROP_SVC "/grpc.testing.TestService/"
#define INTEROP_EMPTY_CALL INTEROP_SVC "EmptyCall"
#define INTEROP_UNARY_CALL INTEROP_SVC "UnaryCall"
#define INTEROP_STREAMING_OUTPUT_CALL INTEROP_SVC "StreamingOutputCall"
#define INTEROP_STREAMING_INPUT_CALL INTEROP_SVC "StreamingInputCall"
#define INTEROP_FULL_DUPLEX_CALL INTEROP_SVC "FullDuplexCall"
#define INTEROP_UNIMPLEMENTED_CALL INTEROP_SVC "UnimplementedCall"
#define INTEROP_UNIMPLEMENTED_SVC_CALL                                         \
  "/grpc.testing.UnimplementedService/UnimplementedCall"

/* What every case gets: the channel, the --additional_metadata pairs and the
 * deadline for calls that do not test deadlines. */
typedef struct interop_soak {
  uint64_t iterations;        /* --soak_iterations */
  uint64_t max_failures;      /* --soak_max_failures */
  uint64_t max_latency_ms;    /* --soak_per_iteration_max_acceptable_... */
  uint64_t overall_timeout_s; /* --soak_overall_timeout_seconds; 0: none */
  uint64_t min_between_ms;    /* --soak_min_time_ms_between_rpcs */
} interop_soak;

typedef struct interop_ctx {
  grit_channel *ch;
  const grit_metadata *extra_md; /* borrowed; NULL when none */
  uint64_t rpc_timeout_ms;       /* 0: no deadline */
  /* channel_soak makes channels of its own, as main made ctx->ch. */
  const char *target;
  const grit_channel_args *args;
  interop_soak soak;
} interop_ctx;

/* One test case: returns true when every check passed. A failing check has
 * already printed which check, what was expected and what came. */
typedef struct interop_case {
  const char *name;
  bool (*run)(const interop_ctx *ctx);
} interop_case;

/* The cases, in the order --test_case=all runs them. */
extern const interop_case interop_cases[];
extern const size_t interop_case_count;

/* gRPC's HTTP/2 server test cases (cases_http2.c): run by name only. */
extern const interop_case interop_http2_cases[];
extern const size_t interop_http2_case_count;

/* Name of the case running now, for failure lines. */
extern const char *interop_current_case;

/* The gRPC interop test CA, PEM (test_ca.c): --use_test_ca's default. */
extern const char interop_test_ca_pem[];

/* Print "FAIL <case> (file:line): <message>" to stderr. */
void interop_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Check |cond|; on failure print the message and jump to the case's
 * "done" label (every case has one that releases what it holds). */
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      interop_fail(__FILE__, __LINE__, __VA_ARGS__);                           \
      goto done;                                                               \
    }                                                                          \
  } while (0)

/* Jump to "done" when |cond| fails, printing nothing: for helpers that
 * print their own failure lines. */
#define REQUIRE(cond)                                                          \
  do {                                                                         \
    if (!(cond)) {                                                             \
      goto done;                                                               \
    }                                                                          \
  } while (0)

/* Check that a grit call returned |want|; names the call (|text|, its
 * unexpanded source) and both errors. */
#define CHECK_ERR_(expr, want, text)                                           \
  do {                                                                         \
    grit_err check_err_ = (expr);                                              \
    CHECK(check_err_ == (want), "%s: expected %s, got %s (%s)", text,          \
          grit_err_name(want), grit_err_name(check_err_),                      \
          grit_strerror(check_err_));                                          \
  } while (0)

#define CHECK_ERR(expr, want) CHECK_ERR_(expr, want, #expr)
#define CHECK_OK(expr) CHECK_ERR_(expr, GRIT_OK, #expr)

/* Whether |st| has code |code| and, unless |message| is NULL, exactly that
 * message; on mismatch prints |what| with both sides (escaped). */
bool interop_status_is(const grit_status *st, grit_status_code code,
                       const char *message, const char *what);

/* Whether |p| is a COMPRESSABLE payload of |size| zero bytes (a missing
 * payload counts as empty); on mismatch prints |what| and the difference. */
bool interop_payload_is(const Grpc__Testing__Payload *p, size_t size,
                        const char *what);

/* Fill |p| with |size| zero bytes (calloc'd, free with
 * interop_payload_clear). Returns false on out of memory. */
bool interop_payload_zeros(Grpc__Testing__Payload *p, size_t size);
void interop_payload_clear(Grpc__Testing__Payload *p);

/* Serialize |msg| into a new malloc'd buffer (free it) of |*len| bytes.
 * Returns NULL on out of memory. */
uint8_t *interop_pack(const ProtobufCMessage *msg, size_t *len);

/* Serialize |msg| and grit_call_send it. Returns what grit_call_send
 * returned, or GRIT_ERR_NOMEM. */
grit_err interop_send(grit_call *call, const ProtobufCMessage *msg);

/* A new metadata list holding the --additional_metadata pairs, to which a
 * case may add its own. Release with grit_metadata_destroy. */
grit_err interop_metadata_create(const interop_ctx *ctx, grit_metadata **out);

/* Call options with the context's deadline and |md| (may be NULL). */
grit_call_opts interop_opts(const interop_ctx *ctx, const grit_metadata *md);

/* The cases of cases_compress.c and soak.c (interop_cases lists them). */
bool interop_client_compressed_unary(const interop_ctx *ctx);
bool interop_server_compressed_unary(const interop_ctx *ctx);
bool interop_client_compressed_streaming(const interop_ctx *ctx);
bool interop_server_compressed_streaming(const interop_ctx *ctx);
bool interop_rpc_soak(const interop_ctx *ctx);
bool interop_channel_soak(const interop_ctx *ctx);

/* A one-shot completion flag for async calls, signalled from grit's I/O
 * thread and waited on by the case's thread. */
typedef struct interop_waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
} interop_waiter;

void interop_waiter_init(interop_waiter *w);
void interop_waiter_free(interop_waiter *w);
void interop_waiter_signal(interop_waiter *w);
/* Wait until signalled or |timeout_ms| passes; true when signalled. */
bool interop_waiter_wait(interop_waiter *w, uint64_t timeout_ms);

#endif
