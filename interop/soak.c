/*
 * rpc_soak and channel_soak (interop-test-descriptions.md): the large
 * unary call --soak_iterations times, on the one channel or on a new
 * channel each time. An iteration fails on a non-OK status or a latency
 * over --soak_per_iteration_max_acceptable_latency_ms; the case fails
 * when more than --soak_max_failures iterations fail, or when
 * --soak_overall_timeout_seconds passes before all have run. Iterations
 * start at least --soak_min_time_ms_between_rpcs apart.
 */
#include "interop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t soak_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void soak_sleep_ms(uint64_t ms) {
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                        .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* One large unary call on |ch|; fills |code|, |msg|. */
static void soak_call(const interop_ctx *ctx, grit_channel *ch,
                      const uint8_t *req, size_t len, grit_status_code *code,
                      char *msg, size_t cap) {
  grit_bytes out = {0};
  grit_status st = {0};
  grit_call_opts opts = interop_opts(ctx, NULL);
  grit_err err =
      grit_unary_call(ch, INTEROP_UNARY_CALL, req, len, &opts, &out, &st, NULL);
  *code = st.code;
  snprintf(msg, cap, "%s", st.message ? st.message : grit_strerror(err));
  if (err == GRIT_OK && st.code == GRIT_STATUS_OK) {
    Grpc__Testing__SimpleResponse *resp =
        grpc__testing__simple_response__unpack(NULL, out.len, out.data);
    if (!resp || !resp->payload || resp->payload->body.len != 314159) {
      *code = GRIT_STATUS_INTERNAL;
      snprintf(msg, cap, "response is not a 314159-byte payload");
    }
    if (resp) {
      grpc__testing__simple_response__free_unpacked(resp, NULL);
    }
  }
  grit_status_free(&st);
  grit_bytes_free(&out);
}

static bool soak(const interop_ctx *ctx, bool new_channel) {
  const interop_soak *k = &ctx->soak;
  Grpc__Testing__SimpleRequest req = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  size_t len = 0;
  uint8_t *buf = NULL;
  bool ok = false;
  uint64_t failures = 0, ran = 0, worst = 0;
  uint64_t start = soak_now_ms();
  uint64_t end = k->overall_timeout_s ? start + k->overall_timeout_s * 1000 : 0;

  CHECK(interop_payload_zeros(&payload, 271828), "out of memory");
  req.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  req.response_size = 314159;
  req.payload = &payload;
  buf = interop_pack(&req.base, &len);
  CHECK(buf, "out of memory");
  for (; ran < k->iterations && (!end || soak_now_ms() < end); ran++) {
    uint64_t t0 = soak_now_ms();
    grit_channel *ch = ctx->ch;
    grit_status_code code = GRIT_STATUS_UNKNOWN;
    char msg[160] = "";
    if (new_channel) {
      grit_error_detail d = {0};
      grit_err err = grit_channel_create(NULL, ctx->target, ctx->args, &d, &ch);
      if (err != GRIT_OK) {
        ch = NULL;
        snprintf(msg, sizeof(msg), "grit_channel_create: %s",
                 grit_err_name(err));
      }
    }
    if (ch) {
      soak_call(ctx, ch, buf, len, &code, msg, sizeof(msg));
    }
    if (new_channel) {
      grit_channel_destroy(ch);
    }
    uint64_t took = soak_now_ms() - t0;
    worst = took > worst ? took : worst;
    if (code != GRIT_STATUS_OK || took > k->max_latency_ms) {
      failures++;
      fprintf(stderr, "%s iteration %llu: %s %s, %llu ms (max %llu ms)\n",
              new_channel ? "channel_soak" : "rpc_soak",
              (unsigned long long)ran, grit_status_code_name(code), msg,
              (unsigned long long)took, (unsigned long long)k->max_latency_ms);
    }
    uint64_t spent = soak_now_ms() - t0;
    if (spent < k->min_between_ms) {
      soak_sleep_ms(k->min_between_ms - spent);
    }
  }
  fprintf(stderr, "%s: %llu iterations, %llu failed, worst %llu ms\n",
          new_channel ? "channel_soak" : "rpc_soak", (unsigned long long)ran,
          (unsigned long long)failures, (unsigned long long)worst);
  CHECK(ran == k->iterations,
        "overall timeout of %llu s after %llu of %llu iterations",
        (unsigned long long)k->overall_timeout_s, (unsigned long long)ran,
        (unsigned long long)k->iterations);
  CHECK(failures <= k->max_failures,
        "%llu iterations failed, at most %llu allowed",
        (unsigned long long)failures, (unsigned long long)k->max_failures);
  ok = true;
done:
  free(buf);
  interop_payload_clear(&payload);
  return ok;
}

bool interop_rpc_soak(const interop_ctx *ctx) {
  return soak(ctx, false);
}

bool interop_channel_soak(const interop_ctx *ctx) {
  return soak(ctx, true);
}
