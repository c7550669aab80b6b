/*
 * Message compression end to end against h2server/ (SPEC CP-01..CP-04,
 * issue 13): what goes on the wire (headers, the compressed flag, sizes),
 * per-call and per-message choices, responses in gzip/deflate, a gzip bomb
 * and encodings grit did not offer, the send limit on the uncompressed
 * size, and retries replaying the compressed bytes.
 */
#include <stdlib.h>
#include <zlib.h>

#include "test/behaviour/bh.h"
#include "test/bomb.h"

#define BIG 271828 /* the interop compressed cases' payload */

/* |n| bytes compressed with zlib (gzip or zlib wrapper); malloc'd. */
static uint8_t *zip(const void *p, size_t n, bool gzip, size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  if (deflateInit2(&z, 6, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    return NULL;
  size_t cap = deflateBound(&z, (uLong)n);
  uint8_t *o = malloc(cap);
  z.next_in = (Bytef *)(uintptr_t)p;
  z.avail_in = (uInt)n;
  z.next_out = o;
  z.avail_out = (uInt)cap;
  deflate(&z, Z_FINISH);
  *out_len = cap - z.avail_out;
  deflateEnd(&z);
  return o;
}

static grit_channel *channel_with(h2s_server *srv, const char *compression,
                                  int64_t max_send, const char *sc) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  if (compression &&
      grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_COMPRESSION,
                                   compression) != GRIT_OK)
    fprintf(stderr, "bad compression %s\n", compression);
  if (max_send)
    grit_channel_args_set_int(a, GRIT_ARG_MAX_SEND_MESSAGE, max_send);
  grit_channel *ch = bh_channel_args(&srv, 1, sc, a);
  grit_channel_args_destroy(a);
  return ch;
}

static grit_status_code unary(grit_channel *ch, const void *req, size_t len,
                              grit_compression comp, grit_status *st,
                              grit_bytes *resp, grit_call_info *info) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = 20000,
                      .compression = comp};
  if (grit_unary_call(ch, "/cp.Svc/Unary", req, len, &o, resp, st, info) !=
      GRIT_OK)
    return (grit_status_code)-1;
  return st->code;
}

/* CP-01: a channel default of gzip: grpc-encoding gzip, the accept list,
 * and a 271828-byte zero payload arrives flagged and a few hundred bytes
 * long. The per-call option overrides the default either way. */
static void test_request_gzip_on_wire(void) {
  h2s_server *srv = bh_server("text=ok repeat=*");
  grit_channel *ch = channel_with(srv, "gzip", 0, NULL);
  uint8_t *big = calloc(1, BIG);
  grit_status st;
  grit_bytes resp;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, big, BIG, GRIT_COMPRESSION_DEFAULT, &st, &resp, &info),
            GRIT_STATUS_OK);
  ASSERT_STR_EQ(info.request_encoding, "gzip");
  grit_bytes_free(&resp);
  grit_status_free(&st);
  ASSERT_EQ(unary(ch, big, BIG, GRIT_COMPRESSION_IDENTITY, &st, &resp, &info),
            GRIT_STATUS_OK);
  ASSERT_STR_EQ(info.request_encoding, "identity");
  grit_bytes_free(&resp);
  grit_status_free(&st);
  ASSERT_EQ(unary(ch, big, BIG, GRIT_COMPRESSION_DEFLATE, &st, &resp, &info),
            GRIT_STATUS_OK);
  grit_bytes_free(&resp);
  grit_status_free(&st);
  ASSERT(h2s_server_wait_closed(srv, 3, 10000));

  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_STR_EQ(h2s_request_header(r, "grpc-encoding"), "gzip");
  ASSERT_STR_EQ(h2s_request_header(r, "grpc-accept-encoding"),
                "identity, deflate, gzip");
  ASSERT_EQ(r->n_msgs, 1);
  ASSERT_EQ(r->msgs[0].flags, 1);
  ASSERT_CMP(r->msgs[0].len, <, 1000); /* 271828 zeros */
  ASSERT_EQ(r->msgs[0].data[0], 0x1f); /* gzip magic */
  ASSERT_EQ(r->msgs[0].data[1], 0x8b);
  uint8_t *back = malloc(BIG);
  uLongf n = BIG;
  /* The server's view, decoded with zlib itself (gzip: inflate 31). */
  z_stream z;
  memset(&z, 0, sizeof(z));
  ASSERT_EQ(inflateInit2(&z, 31), Z_OK);
  z.next_in = (Bytef *)(uintptr_t)r->msgs[0].data;
  z.avail_in = (uInt)r->msgs[0].len;
  z.next_out = back;
  z.avail_out = BIG;
  ASSERT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  ASSERT_EQ(z.total_out, BIG);
  inflateEnd(&z);

  r = h2s_server_request(srv, 1); /* identity: no header, no flag */
  ASSERT_NULL(h2s_request_header(r, "grpc-encoding"));
  ASSERT_STR_EQ(h2s_request_header(r, "grpc-accept-encoding"),
                "identity, deflate, gzip");
  ASSERT_EQ(r->msgs[0].flags, 0);
  ASSERT_EQ(r->msgs[0].len, BIG);

  r = h2s_server_request(srv, 2); /* deflate: the zlib format */
  ASSERT_STR_EQ(h2s_request_header(r, "grpc-encoding"), "deflate");
  ASSERT_EQ(r->msgs[0].flags, 1);
  n = BIG;
  ASSERT_EQ(uncompress(back, &n, r->msgs[0].data, (uLong)r->msgs[0].len), Z_OK);
  ASSERT_EQ(n, BIG);
  free(back);
  free(big);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* A stream that compresses, with GRIT_SEND_NO_COMPRESS on one message and
 * an empty message: flags 1, 0, 0 on the wire. */
static void test_stream_no_compress_flag(void) {
  h2s_server *srv = bh_server("text=ok");
  grit_channel *ch = channel_with(srv, NULL, 0, NULL);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = 20000,
                      .compression = GRIT_COMPRESSION_GZIP};
  grit_call *c;
  ASSERT_OK(grit_call_start(ch, "/cp.Svc/Up", &o, NULL, NULL, &c));
  static uint8_t m[10000];
  ASSERT_OK(grit_call_send_flags(c, m, sizeof(m), 0));
  ASSERT_OK(grit_call_send_flags(c, m, sizeof(m), GRIT_SEND_NO_COMPRESS));
  ASSERT_OK(grit_call_send_flags(c, m, 0, 0));
  ASSERT_EQ(grit_call_send_flags(c, m, 1, 1u << 7), GRIT_ERR_INVALID_ARG);
  ASSERT_OK(grit_call_close_send(c));
  grit_status st;
  ASSERT_OK(grit_call_finish(c, &st));
  ASSERT_EQ(st.code, GRIT_STATUS_OK);
  grit_status_free(&st);
  grit_call_destroy(c);
  ASSERT(h2s_server_wait_closed(srv, 1, 10000));
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_EQ(r->n_msgs, 3);
  ASSERT_EQ(r->msgs[0].flags, 1);
  ASSERT_CMP(r->msgs[0].len, <, 200);
  ASSERT_EQ(r->msgs[1].flags, 0);
  ASSERT_EQ(r->msgs[1].len, sizeof(m));
  ASSERT_EQ(r->msgs[2].flags, 0);
  ASSERT_EQ(r->msgs[2].len, 0);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* Responses in gzip and deflate are decoded; the call info and the
 * attempt record say which encoding came back. */
static char last_rec_resp[32], last_rec_req[16];
static void observe(const grit_attempt_record *r, void *ud) {
  (void)ud;
  snprintf(last_rec_resp, sizeof(last_rec_resp), "%s", r->response_encoding);
  snprintf(last_rec_req, sizeof(last_rec_req), "%s", r->request_encoding);
}

static void test_response_decoded(void) {
  static const char text[] = "compressed response compressed response";
  size_t gzn, dfn;
  uint8_t *gz = zip(text, sizeof(text) - 1, true, &gzn);
  uint8_t *df = zip(text, sizeof(text) - 1, false, &dfn);
  h2s_step steps[2] = {
      {.action = {.body = H2S_BODY_BYTES,
                  .data = gz,
                  .len = gzn,
                  .compressed = true,
                  .headers = {{"grpc-encoding", "gzip"}}}},
      {.action = {.body = H2S_BODY_BYTES,
                  .data = df,
                  .len = dfn,
                  .compressed = true,
                  .headers = {{"grpc-encoding", "deflate"}}}},
  };
  h2s_server *srv = NULL;
  ASSERT_EQ(
      h2s_server_start(
          &(h2s_config){.quiet = true, .script = steps, .script_len = 2}, &srv),
      0);
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel_args_set_observer(a, observe, NULL);
  grit_channel *ch = bh_channel_args(&srv, 1, NULL, a);
  grit_channel_args_destroy(a);
  for (int i = 0; i < 2; i++) {
    grit_status st;
    grit_bytes resp;
    grit_call_info info = GRIT_CALL_INFO_INIT;
    ASSERT_EQ(unary(ch, "x", 1, GRIT_COMPRESSION_DEFAULT, &st, &resp, &info),
              GRIT_STATUS_OK);
    ASSERT_EQ(resp.len, sizeof(text) - 1);
    ASSERT_MEM_EQ(resp.data, text, resp.len);
    ASSERT_STR_EQ(info.request_encoding, "identity");
    ASSERT_STR_EQ(info.response_encoding, i == 0 ? "gzip" : "deflate");
    ASSERT_STR_EQ(last_rec_resp, i == 0 ? "gzip" : "deflate");
    ASSERT_STR_EQ(last_rec_req, "identity");
    grit_bytes_free(&resp);
    grit_status_free(&st);
  }
  free(gz);
  free(df);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* CP-03: 1 GiB of zeros in about 1 MiB of gzip, against the default
 * 4 MiB receive limit: RESOURCE_EXHAUSTED, quickly, and the channel goes
 * on serving. */
static void test_gzip_bomb(void) {
  size_t n;
  uint8_t *bomb = bomb_gzip(1024, &n);
  ASSERT_NOT_NULL(bomb);
  h2s_step steps[1] = {
      {.action = {.body = H2S_BODY_BYTES,
                  .data = bomb,
                  .len = n,
                  .compressed = true,
                  .headers = {{"grpc-encoding", "gzip"}}}},
  };
  h2s_server *srv = NULL;
  ASSERT_EQ(
      h2s_server_start(
          &(h2s_config){.quiet = true, .script = steps, .script_len = 1}, &srv),
      0);
  free(bomb); /* the server copied it */
  grit_channel *ch = channel_with(srv, NULL, 0, NULL);
  grit_status st;
  grit_bytes resp;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, "x", 1, GRIT_COMPRESSION_DEFAULT, &st, &resp, &info),
            GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_STR_EQ(st.message, "received message larger than max when "
                            "decompressed (over 4194304 bytes)");
  grit_bytes_free(&resp);
  grit_status_free(&st);
  ASSERT_EQ(unary(ch, "x", 1, GRIT_COMPRESSION_DEFAULT, &st, &resp, &info),
            GRIT_STATUS_OK); /* echo: the channel lives on */
  grit_bytes_free(&resp);
  grit_status_free(&st);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* CP-02: an encoding grit did not offer, a flag without an encoding, and
 * corrupt gzip: INTERNAL, with the encoding named. */
static void test_wrong_encoding(void) {
  h2s_server *srv = bh_server(
      "path=/cp.Svc/Unary text=abc compressed header=grpc-encoding:br\n"
      "path=/cp.Svc/Unary text=abc compressed\n"
      "path=/cp.Svc/Unary text=abc compressed header=grpc-encoding:gzip\n"
      "path=/cp.Svc/Unary text=abc compressed header=grpc-encoding:identity");
  grit_channel *ch = channel_with(srv, NULL, 0, NULL);
  static const char *want[] = {
      ("compressed message in grpc-encoding \"br\", which grit did not offer "
       "(identity, deflate, gzip)"),
      "compressed message without grpc-encoding",
      "corrupt compressed message",
      "compressed message with grpc-encoding \"identity\"",
  };
  for (int i = 0; i < 4; i++) {
    grit_status st;
    grit_bytes resp;
    grit_call_info info = GRIT_CALL_INFO_INIT;
    ASSERT_EQ(unary(ch, "x", 1, GRIT_COMPRESSION_DEFAULT, &st, &resp, &info),
              GRIT_STATUS_INTERNAL);
    ASSERT_STR_EQ(st.message, want[i]);
    grit_bytes_free(&resp);
    grit_status_free(&st);
  }
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* A server without the encoding answers UNIMPLEMENTED: reported as such,
 * one request, no silent retry in identity. */
static void test_unimplemented_not_retried(void) {
  h2s_server *srv = bh_server(
      "trailers_only status=UNIMPLEMENTED message=Compression%20algorithm%20"
      "'gzip'%20not%20supported");
  grit_channel *ch = channel_with(srv, "gzip", 0, NULL);
  grit_status st;
  grit_bytes resp;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  uint8_t *big = calloc(1, BIG);
  ASSERT_EQ(unary(ch, big, BIG, GRIT_COMPRESSION_DEFAULT, &st, &resp, &info),
            GRIT_STATUS_UNIMPLEMENTED);
  ASSERT_STR_EQ(st.message, "Compression algorithm 'gzip' not supported");
  ASSERT_EQ(info.attempts, 1);
  grit_bytes_free(&resp);
  grit_status_free(&st);
  free(big);
  ASSERT(h2s_server_wait_closed(srv, 1, 10000));
  ASSERT_EQ(h2s_server_request(srv, 0)->msgs[0].flags, 1);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* CP-03: the send limit applies to the uncompressed size: 271828 zeros
 * (a few hundred bytes compressed) over a 100000-byte limit fail
 * RESOURCE_EXHAUSTED before anything is sent; 100000 zeros pass. */
static void test_send_limit_uncompressed(void) {
  h2s_server *srv = bh_server("text=ok repeat=*");
  grit_channel *ch = channel_with(srv, "gzip", 100000, NULL);
  uint8_t *big = calloc(1, BIG);
  grit_status st;
  grit_bytes resp;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, big, BIG, GRIT_COMPRESSION_DEFAULT, &st, &resp, &info),
            GRIT_STATUS_RESOURCE_EXHAUSTED);
  ASSERT_STR_EQ(st.message, "sent message larger than max (271828 vs. 100000)");
  grit_bytes_free(&resp);
  grit_status_free(&st);
  ASSERT_EQ(unary(ch, big, 100000, GRIT_COMPRESSION_DEFAULT, &st, &resp, &info),
            GRIT_STATUS_OK);
  grit_bytes_free(&resp);
  grit_status_free(&st);
  ASSERT(h2s_server_wait_closed(srv, 1, 10000));
  ASSERT_EQ(h2s_server_request(srv, 0)->msgs[0].flags, 1);
  free(big);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* CP-04: a retry replays the bytes as sent: both attempts carry the same
 * compressed message, and grpc-encoding. */
static void test_retry_replays_compressed(void) {
  h2s_server *srv = bh_server("trailers_only status=UNAVAILABLE\ntext=ok");
  const char *sc =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"cp.Svc\"}],"
      "\"retryPolicy\":{\"maxAttempts\":3,\"initialBackoff\":\"0.01s\","
      "\"maxBackoff\":\"0.01s\",\"backoffMultiplier\":1,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}";
  grit_channel *ch = channel_with(srv, "deflate", 0, sc);
  uint8_t *big = calloc(1, BIG);
  grit_status st;
  grit_bytes resp;
  grit_call_info info = GRIT_CALL_INFO_INIT;
  ASSERT_EQ(unary(ch, big, BIG, GRIT_COMPRESSION_DEFAULT, &st, &resp, &info),
            GRIT_STATUS_OK);
  ASSERT_EQ(info.attempts, 2);
  grit_bytes_free(&resp);
  grit_status_free(&st);
  ASSERT(h2s_server_wait_closed(srv, 2, 10000));
  const h2s_request *r0 = h2s_server_request(srv, 0);
  const h2s_request *r1 = h2s_server_request(srv, 1);
  ASSERT_STR_EQ(h2s_request_header(r1, "grpc-encoding"), "deflate");
  ASSERT_EQ(r0->msgs[0].flags, 1);
  ASSERT_EQ(r1->msgs[0].flags, 1);
  ASSERT_EQ(r0->msgs[0].len, r1->msgs[0].len);
  ASSERT_CMP(r1->msgs[0].len, <, 1000);
  ASSERT_MEM_EQ(r0->msgs[0].data, r1->msgs[0].data, r1->msgs[0].len);
  free(big);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

/* The argument and option are checked. */
static void test_bad_values(void) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  ASSERT_EQ(grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_COMPRESSION, "br"),
            GRIT_ERR_INVALID_ARG);
  ASSERT_EQ(
      grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_COMPRESSION, "GZIP"),
      GRIT_ERR_INVALID_ARG);
  ASSERT_OK(
      grit_channel_args_set_string(a, GRIT_ARG_DEFAULT_COMPRESSION, "deflate"));
  grit_channel_args_destroy(a);
  h2s_server *srv = bh_server(NULL);
  grit_channel *ch = channel_with(srv, NULL, 0, NULL);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .compression = (grit_compression)7};
  grit_call *c = NULL;
  ASSERT_EQ(grit_call_start(ch, "/cp.Svc/Up", &o, NULL, NULL, &c),
            GRIT_ERR_INVALID_ARG);
  ASSERT_NULL(grit_compression_name((grit_compression)7));
  ASSERT_STR_EQ(grit_compression_name(GRIT_COMPRESSION_GZIP), "gzip");
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static const test_case tests[] = {
    {"request_gzip_on_wire", test_request_gzip_on_wire},
    {"stream_no_compress_flag", test_stream_no_compress_flag},
    {"response_decoded", test_response_decoded},
    {"gzip_bomb", test_gzip_bomb},
    {"wrong_encoding", test_wrong_encoding},
    {"unimplemented_not_retried", test_unimplemented_not_retried},
    {"send_limit_uncompressed", test_send_limit_uncompressed},
    {"retry_replays_compressed", test_retry_replays_compressed},
    {"bad_values", test_bad_values},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
