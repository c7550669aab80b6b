/* xoshiro256** seeded through splitmix64: fast, replayable from one seed
 * (SPEC RT-03 wants a backoff sequence that a seed can replay). */
#include "util/util.h"

#include <sys/random.h>

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void grit_rng_seed(grit_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&seed);
}

void grit_rng_seed_os(grit_rng *r) {
  uint64_t seed;
  if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
    seed = grit_clock_now_us() ^ (uint64_t)(uintptr_t)r;
  grit_rng_seed(r, seed);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

uint64_t grit_rng_next(grit_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double grit_rng_uniform(grit_rng *r, double lo, double hi) {
  /* 53 random bits give a double in [0, 1). */
  double u = (double)(grit_rng_next(r) >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}

uint32_t grit_rng_below(grit_rng *r, uint32_t n) {
  if (n == 0)
    return 0;
  return (uint32_t)(((grit_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}
