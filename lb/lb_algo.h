/*
 * lb_algo: the pure parts of the load-aware policies (SPEC LP-02, LP-03):
 * XXH64, weighted_round_robin's static stride scheduler and ring_hash's
 * ring. No loop, no clock, no subchannel: the policies own the state and
 * unit tests drive these directly (test/unit/test_lbpol.c).
 */
#ifndef GRIT_LB_ALGO_H
#define GRIT_LB_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* XXH64 of |len| bytes with |seed| (xxhash.c), as grpc-core's XXH64. */
uint64_t grit_xxh64(const void *data, size_t len, uint64_t seed);

/* weighted_round_robin's static stride scheduler (stride.c, after
 * grpc-core's). |weights| NULL after build: fewer than two of the |n|
 * weights were known (> 0), so the caller does round robin. */
typedef struct grit_stride_sched {
  uint16_t *weights;
  size_t n;
} grit_stride_sched;
/* Build from |n| float weights (0: unknown, gets the mean). Returns
 * GRIT_OK or GRIT_ERR_NOMEM (|out| empty). */
grit_err grit_stride_sched_build(const float *weights, size_t n,
                                 grit_stride_sched *out);
/* The next index, advancing |*seq| (once, or a few times on skips). */
size_t grit_stride_sched_pick(const grit_stride_sched *s, uint32_t *seq);
void grit_stride_sched_free(grit_stride_sched *s);

/* ring_hash's ring (ring.c), as grpc-core builds it: entries sorted by
 * hash, |index| naming the endpoint. */
typedef struct grit_ring_entry {
  uint64_t hash;
  uint32_t index;
} grit_ring_entry;
/* Build for |n| endpoints keyed |keys| ("127.0.0.1:5000", "[::1]:5000"),
 * |weights| (NULL: all 1), ring sizes already clamped (1 <= min <= max).
 * |*out| is new (grit_free). Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_ring_build(const char *const *keys, const uint32_t *weights,
                         size_t n, uint64_t min_size, uint64_t max_size,
                         grit_ring_entry **out, size_t *out_n);
/* The entry for |hash|: the first with hash >= |hash|, else 0. n > 0. */
size_t grit_ring_lookup(const grit_ring_entry *ring, size_t n, uint64_t hash);

#endif
