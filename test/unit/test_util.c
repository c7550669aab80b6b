/* Unit tests for util/: slices, lists, buffers, the PRNG, metadata checks
 * (SPEC HS-06) and the generated status names. */
#include "util/util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/harness.h"

/* The shared empty slice: every reference given back leaves it alive;
 * the deframer hands it out for empty messages (no allocation each). */
static void test_slice_empty(void) {
  grit_slice *a = grit_slice_empty();
  grit_slice *b = grit_slice_empty();
  ASSERT_NOT_NULL(a);
  ASSERT(a == b);
  ASSERT_EQ(a->len, (size_t)0);
  ASSERT_NOT_NULL(a->data);
  uint32_t refs = a->refs;
  grit_slice_unref(a);
  grit_slice_unref(b);
  ASSERT_EQ(a->refs, refs - 2);
  for (int i = 0; i < 1000; i++)
    grit_slice_unref(grit_slice_empty());
  ASSERT_EQ(a->refs, refs - 2);
  ASSERT_CMP(a->refs, >=, 1u); /* its own, never given up */
}

static void test_slice_refcount(void) {
  grit_slice *s = grit_slice_from_copy("abc", 3);
  ASSERT_NOT_NULL(s);
  ASSERT_EQ(s->len, 3);
  ASSERT_MEM_EQ(s->data, "abc", 3);
  ASSERT(grit_slice_ref(s) == s);
  ASSERT_EQ(s->refs, 2);
  grit_slice_unref(s);
  ASSERT_EQ(s->refs, 1);
  grit_slice_unref(s);
  grit_slice_unref(NULL);
}

typedef struct item {
  int v;
  grit_list link;
} item;

static void test_list_order(void) {
  grit_list head;
  grit_list_init(&head);
  ASSERT(grit_list_empty(&head));
  item a = {.v = 1}, b = {.v = 2}, c = {.v = 3};
  grit_list_insert_tail(&head, &b.link);
  grit_list_insert_tail(&head, &c.link);
  grit_list_insert_head(&head, &a.link); /* a, b, c */
  grit_list_remove(&b.link);
  grit_list *e = grit_list_pop_head(&head);
  ASSERT_EQ(GRIT_CONTAINER_OF(e, item, link)->v, 1);
  e = grit_list_pop_head(&head);
  ASSERT_EQ(GRIT_CONTAINER_OF(e, item, link)->v, 3);
  ASSERT_NULL(grit_list_pop_head(&head));
}

static void test_buf_append(void) {
  grit_buf b;
  grit_buf_init(&b);
  for (int i = 0; i < 100; i++)
    ASSERT_OK(grit_buf_appendf(&b, "%d,", i));
  ASSERT_EQ(b.len, 290);
  ASSERT_MEM_EQ(b.data, "0,1,2,", 6);
  ASSERT_EQ(b.data[b.len], 0);
  grit_buf_free(&b);
  ASSERT_NULL(b.data);
}

static void test_rng_replay(void) {
  grit_rng a, b;
  grit_rng_seed(&a, 42);
  grit_rng_seed(&b, 42);
  for (int i = 0; i < 1000; i++)
    ASSERT_EQ(grit_rng_next(&a), grit_rng_next(&b));
  for (int i = 0; i < 1000; i++) {
    double u = grit_rng_uniform(&a, 0.8, 1.2);
    ASSERT(u >= 0.8 && u < 1.2);
    ASSERT_CMP(grit_rng_below(&a, 7), <, 7);
  }
}

static void test_metadata_keys(void) {
  grit_metadata *md;
  ASSERT_OK(grit_metadata_create(&md));
  ASSERT_OK(grit_metadata_add(md, "x-user", "v1", 2));
  ASSERT_EQ(grit_metadata_add(md, "X-Upper", "v", 1),
            GRIT_ERR_INVALID_METADATA);
  ASSERT_EQ(grit_metadata_add(md, "grpc-timeout", "1S", 2),
            GRIT_ERR_INVALID_METADATA);
  ASSERT_EQ(grit_metadata_add(md, ":path", "/", 1), GRIT_ERR_INVALID_METADATA);
  ASSERT_EQ(grit_metadata_add(md, "te", "trailers", 8),
            GRIT_ERR_INVALID_METADATA);
  ASSERT_EQ(grit_metadata_add(md, "x-ctl", "a\nb", 3),
            GRIT_ERR_INVALID_METADATA);
  ASSERT_OK(grit_metadata_add(md, "x-raw-bin", "\0\1\xff", 3));
  ASSERT_EQ(grit_metadata_count(md), 2);
  size_t len = 0;
  const uint8_t *v = grit_metadata_find(md, "x-raw-bin", &len);
  ASSERT_NOT_NULL(v);
  ASSERT_EQ(len, 3);
  ASSERT_EQ(v[2], 0xff);
  grit_metadata *copy;
  ASSERT_OK(grit_metadata_copy(md, &copy));
  const char *k;
  ASSERT_OK(grit_metadata_get(copy, 0, &k, &v, &len));
  ASSERT_STR_EQ(k, "x-user");
  ASSERT_EQ(grit_metadata_get(copy, 2, &k, &v, &len), GRIT_ERR_INVALID_ARG);
  grit_metadata_destroy(copy);
  grit_metadata_destroy(md);
}

static void test_status_names(void) {
  ASSERT_STR_EQ(grit_status_code_name(GRIT_STATUS_UNAVAILABLE), "UNAVAILABLE");
  ASSERT_STR_EQ(grit_status_code_name(GRIT_STATUS_UNAUTHENTICATED),
                "UNAUTHENTICATED");
  ASSERT_NULL(grit_status_code_name((grit_status_code)17));
  grit_status_code c;
  ASSERT_OK(grit_status_code_parse("unavailable", 11, &c));
  ASSERT_EQ(c, 14);
  ASSERT_OK(grit_status_code_parse("Deadline_Exceeded", 17, &c));
  ASSERT_EQ(c, 4);
  ASSERT_EQ(grit_status_code_parse("UNAVAIL", 7, &c), GRIT_ERR_NOT_FOUND);
  ASSERT_STR_EQ(grit_err_name(GRIT_ERR_NOMEM), "ERR_NOMEM");
  ASSERT_STR_EQ(grit_strerror(GRIT_OK), "success");
  ASSERT_STR_EQ(grit_connectivity_state_name(GRIT_STATE_READY), "READY");
  /* Issue 19: the end of a response stream is a result of its own, not an
   * error and not NOT_FOUND. */
  ASSERT(GRIT_END_OF_STREAM > 0);
  ASSERT_STR_EQ(grit_err_name(GRIT_END_OF_STREAM), "END_OF_STREAM");
  ASSERT_STR_EQ(grit_strerror(GRIT_END_OF_STREAM),
                "end of the response stream");
  ASSERT_STR_EQ(grit_attempt_kind_name(GRIT_ATTEMPT_FIRST), "FIRST");
  ASSERT_STR_EQ(grit_attempt_kind_name(GRIT_ATTEMPT_RETRY), "RETRY");
  ASSERT_STR_EQ(grit_attempt_kind_name(GRIT_ATTEMPT_HEDGE), "HEDGE");
  ASSERT_STR_EQ(grit_attempt_kind_name(GRIT_ATTEMPT_TRANSPARENT),
                "TRANSPARENT");
  ASSERT_NULL(grit_attempt_kind_name((grit_attempt_kind)4));
}

/* Huge timeouts and durations near SPEC SC-06's maximum saturate. */
static void test_time_saturation(void) {
  ASSERT_EQ(grit_add_sat_u64(1, 2), 3);
  ASSERT_EQ(grit_add_sat_u64(UINT64_MAX - 1, 5), UINT64_MAX);
  ASSERT_EQ(grit_ns_to_ms_ceil(0), 0);
  ASSERT_EQ(grit_ns_to_ms_ceil(-5), 0);
  ASSERT_EQ(grit_ns_to_ms_ceil(1), 1);
  ASSERT_EQ(grit_ns_to_ms_ceil(2000000), 2);
  ASSERT_EQ(grit_ns_to_ms_ceil(2000001), 3);
  ASSERT_EQ(grit_ns_to_ms_ceil(INT64_MAX), 9223372036855ull);
  ASSERT_EQ(grit_ms_to_ns_sat(7), 7000000);
  ASSERT_EQ(grit_ms_to_ns_sat(UINT64_MAX / 2), INT64_MAX);
}

/* issue 28: trace lines carry wall-clock UTC in ISO 8601, not seconds
 * since boot. */
static void test_trace_timestamp(void) {
  char b[GRIT_TRACE_TIMESTAMP_LEN];
  struct timespec ts = {.tv_sec = 1795737541, .tv_nsec = 123999999};
  ASSERT_EQ(grit_trace_timestamp(&ts, b, sizeof(b)), 24);
  ASSERT_STR_EQ(b, "2026-11-26T23:59:01.123Z");
  ts = (struct timespec){.tv_sec = 951782400, .tv_nsec = 7000000};
  grit_trace_timestamp(&ts, b, sizeof(b));
  ASSERT_STR_EQ(b, "2000-02-29T00:00:00.007Z"); /* a leap day */
  ASSERT_EQ(grit_trace_timestamp(&ts, b, 10), 0);
  ASSERT_STR_EQ(b, "");

  /* A NOTICE line as written: "W <now> grit config: ...". */
  fflush(stderr);
  int saved = dup(2);
  FILE *f = tmpfile();
  ASSERT_NOT_NULL(f);
  ASSERT_CMP(saved, >=, 0);
  dup2(fileno(f), 2);
  struct timespec before, after;
  clock_gettime(CLOCK_REALTIME, &before);
  GRIT_TRACE(GRIT_TRACE_CONFIG, GRIT_LEVEL_NOTICE, "hello %d", 28);
  clock_gettime(CLOCK_REALTIME, &after);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char line[256] = "";
  rewind(f);
  ASSERT_NOT_NULL(fgets(line, sizeof(line), f));
  fclose(f);
  char lo[GRIT_TRACE_TIMESTAMP_LEN], hi[GRIT_TRACE_TIMESTAMP_LEN];
  before.tv_nsec -= before.tv_nsec % 1000000;
  grit_trace_timestamp(&before, lo, sizeof(lo));
  grit_trace_timestamp(&after, hi, sizeof(hi));
  ASSERT_EQ(line[0], 'W');
  ASSERT_EQ(line[1], ' ');
  ASSERT_EQ(line[25], 'Z');
  char got[GRIT_TRACE_TIMESTAMP_LEN];
  snprintf(got, sizeof(got), "%.24s", line + 2);
  /* ISO 8601 with fixed widths sorts as text. */
  ASSERT_CMP(strcmp(got, lo), >=, 0);
  ASSERT_CMP(strcmp(got, hi), <=, 0);
  ASSERT_STR_EQ(line + 26, " grit config: hello 28\n");
}

static const test_case tests[] = {
    {"slice_refcount", test_slice_refcount},
    {"slice_empty", test_slice_empty},
    {"list_order", test_list_order},
    {"buf_append", test_buf_append},
    {"rng_replay", test_rng_replay},
    {"metadata_keys", test_metadata_keys},
    {"status_names", test_status_names},
    {"time_saturation", test_time_saturation},
    {"trace_timestamp", test_trace_timestamp},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
