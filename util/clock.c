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
