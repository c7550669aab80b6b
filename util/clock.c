/* Monotonic clock for the runtime; pure modules take now_ms instead. */
#include "util/util.h"

#include <time.h>

uint64_t grit_clock_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t grit_clock_now_ms(void) {
  return grit_clock_now_us() / 1000u;
}

uint64_t grit_add_sat_u64(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint64_t grit_ns_to_ms_ceil(int64_t ns) {
  if (ns <= 0)
    return 0;
  return (uint64_t)(ns / 1000000) + (ns % 1000000 != 0);
}

int64_t grit_ms_to_ns_sat(uint64_t ms) {
  return ms > (uint64_t)(INT64_MAX / 1000000) ? INT64_MAX
                                              : (int64_t)ms * 1000000;
}
