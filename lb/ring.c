/* The ring of ring_hash_experimental (SPEC LP-03; gRFC A42), built as
 * grpc-core builds it so the same addresses give the same ring: weights
 * normalized to their sum; scale = min(ceil(min_weight x minRingSize) /
 * min_weight, maxRingSize); walking the endpoints in order, endpoint i
 * gets entries while the running count is below the running target
 * (sum of scale x weight so far), entry k hashing "<key>_<k>" with XXH64
 * seed 0; then the entries are sorted by hash. A lookup takes the first
 * entry whose hash is >= the request's (wrapping to entry 0), with
 * ketama's binary search as grpc-core runs it. Pure. */
#include "lb/lb_algo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ring_cmp(const void *a, const void *b) {
  const grit_ring_entry *x = a, *y = b;
  if (x->hash != y->hash)
    return x->hash < y->hash ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

grit_err grit_ring_build(const char *const *keys, const uint32_t *weights,
                         size_t n, uint64_t min_size, uint64_t max_size,
                         grit_ring_entry **out, size_t *out_n) {
  *out = NULL;
  *out_n = 0;
  if (n == 0)
    return GRIT_OK;
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += weights ? weights[i] : 1;
  double min_w = 1.0;
  for (size_t i = 0; i < n; i++) {
    double w = (weights ? weights[i] : 1) / sum;
    if (w < min_w)
      min_w = w;
  }
  double scale = ceil(min_w * (double)min_size) / min_w;
  if (scale > (double)max_size)
    scale = (double)max_size;
  size_t cap = (size_t)ceil(scale) + n; /* rounding slack */
  grit_ring_entry *ring = grit_calloc(cap, sizeof(*ring));
  if (!ring)
    return GRIT_ERR_NOMEM;
  size_t used = 0;
  double current = 0, target = 0;
  char key[160];
  for (size_t i = 0; i < n; i++) {
    target += scale * ((weights ? weights[i] : 1) / sum);
    for (size_t k = 0; current < target && used < cap; k++) {
      int len = snprintf(key, sizeof(key), "%s_%zu", keys[i], k);
      if (len < 0 || (size_t)len >= sizeof(key))
        len = (int)strlen(key);
      ring[used].hash = grit_xxh64(key, (size_t)len, 0);
      ring[used].index = (uint32_t)i;
      used++;
      current += 1;
    }
  }
  qsort(ring, used, sizeof(*ring), ring_cmp);
  *out = ring;
  *out_n = used;
  return GRIT_OK;
}

size_t grit_ring_lookup(const grit_ring_entry *ring, size_t n, uint64_t hash) {
  /* ketama_get_server, signed bounds as grpc-core keeps them. */
  int64_t lowp = 0, highp = (int64_t)n, index = 0;
  for (;;) {
    index = (lowp + highp) / 2;
    if (index == (int64_t)n)
      return 0;
    uint64_t midval = ring[index].hash;
    uint64_t midval1 = index == 0 ? 0 : ring[index - 1].hash;
    if (hash <= midval && hash > midval1)
      return (size_t)index;
    if (midval < hash)
      lowp = index + 1;
    else
      highp = index - 1;
    if (lowp > highp)
      return 0;
  }
}
