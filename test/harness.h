/*
 * Minimal test harness: typed asserts that print both sides and file:line,
 * and a table of named cases per executable. Run with no argument to run
 * every case, or with a case name to run one. Each meson test is its own
 * process with its own timeout.
 */
#ifndef GRIT_TEST_HARNESS_H
#define GRIT_TEST_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Monotonic milliseconds, for bounded waits and timing assertions. */
static inline uint64_t test_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

typedef struct test_case {
  const char *name;
  void (*fn)(void);
} test_case;

extern int test_failures;
int test_failures;

#define TEST_FAIL_AT(file, line, ...)                                          \
  do {                                                                         \
    fprintf(stderr, "%s:%d: ", file, line);                                    \
    fprintf(stderr, __VA_ARGS__);                                              \
    fputc('\n', stderr);                                                       \
    test_failures++;                                                           \
    return;                                                                    \
  } while (0)

#define ASSERT(cond)                                                           \
  do {                                                                         \
    if (!(cond))                                                               \
      TEST_FAIL_AT(__FILE__, __LINE__, "assertion failed: %s", #cond);         \
  } while (0)

#define ASSERT_EQ(a, b)                                                        \
  do {                                                                         \
    long long a_ = (long long)(a), b_ = (long long)(b);                        \
    if (a_ != b_)                                                              \
      TEST_FAIL_AT(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_,   \
                   b_);                                                        \
  } while (0)

#define ASSERT_NE(a, b)                                                        \
  do {                                                                         \
    long long a_ = (long long)(a), b_ = (long long)(b);                        \
    if (a_ == b_)                                                              \
      TEST_FAIL_AT(__FILE__, __LINE__, "%s != %s: both %lld", #a, #b, a_);     \
  } while (0)

#define ASSERT_CMP(a, op, b)                                                   \
  do {                                                                         \
    long long a_ = (long long)(a), b_ = (long long)(b);                        \
    if (!(a_ op b_))                                                           \
      TEST_FAIL_AT(__FILE__, __LINE__, "%s %s %s: %lld vs %lld", #a, #op, #b,  \
                   a_, b_);                                                    \
  } while (0)

#define ASSERT_OK(e)                                                           \
  do {                                                                         \
    int e_ = (int)(e);                                                         \
    if (e_ != 0)                                                               \
      TEST_FAIL_AT(__FILE__, __LINE__, "%s: expected GRIT_OK, got %d", #e,     \
                   e_);                                                        \
  } while (0)

#define ASSERT_NULL(p)                                                         \
  do {                                                                         \
    const void *p_ = (const void *)(p);                                        \
    if (p_ != NULL)                                                            \
      TEST_FAIL_AT(__FILE__, __LINE__, "%s: expected NULL, got %p", #p, p_);   \
  } while (0)

#define ASSERT_NOT_NULL(p)                                                     \
  do {                                                                         \
    if ((const void *)(p) == NULL)                                             \
      TEST_FAIL_AT(__FILE__, __LINE__, "%s: expected non-NULL", #p);           \
  } while (0)

#define ASSERT_STR_EQ(a, b)                                                    \
  do {                                                                         \
    const char *a_ = (a), *b_ = (b);                                           \
    if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                       \
      TEST_FAIL_AT(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,   \
                   a_ ? a_ : "(null)", b_ ? b_ : "(null)");                    \
  } while (0)

#define ASSERT_MEM_EQ(a, b, n)                                                 \
  do {                                                                         \
    if (memcmp((a), (b), (n)) != 0)                                            \
      TEST_FAIL_AT(__FILE__, __LINE__, "%s == %s over %zu bytes differ", #a,   \
                   #b, (size_t)(n));                                           \
  } while (0)

/* Run the cases of |tests| (terminated by {NULL, NULL}); argv[1] picks one. */
static inline int test_main(const test_case *tests, int argc, char **argv) {
  int run = 0, failed = 0;
  for (const test_case *t = tests; t->name; t++) {
    if (argc > 1 && strcmp(argv[1], t->name) != 0)
      continue;
    int before = test_failures;
    t->fn();
    run++;
    if (test_failures != before) {
      failed++;
      fprintf(stderr, "FAIL %s\n", t->name);
    } else {
      fprintf(stderr, "ok   %s\n", t->name);
    }
  }
  if (run == 0) {
    fprintf(stderr, "no test case named %s\n", argc > 1 ? argv[1] : "");
    return 1;
  }
  fprintf(stderr, "%d passed, %d failed\n", run - failed, failed);
  return failed ? 1 : 0;
}

#endif
