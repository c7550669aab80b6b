/* The static stride scheduler of weighted_round_robin (SPEC LP-02; gRFC
 * A58), after the one grpc-core uses: weights scaled to 16 bits with the
 * largest at 65535, unknown (0) weights set to the mean of the known
 * ones, each capped to [mean x 0.01, mean x 10]. A pick draws the next
 * sequence number: its remainder by n names a backend, its quotient a
 * generation, and the backend is taken in |weight| of every 65535
 * generations, spread by a multiply-and-modulus. Picks cost O(1) on
 * average (the caps bound the skips) and need no lock: the only state is
 * the caller's sequence counter. Pure: no clock, no loop. */
#include "lb/lb_algo.h"

#include <math.h>

#define STRIDE_MAX_WEIGHT 65535u
#define STRIDE_MAX_RATIO 10.0
#define STRIDE_MIN_RATIO 0.01

grit_err grit_stride_sched_build(const float *w, size_t n,
                                 grit_stride_sched *out) {
  out->weights = NULL;
  out->n = 0;
  size_t known = 0;
  double sum = 0;
  float max = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(w[i] > 0)) /* 0, negative or NaN: unknown */
      continue;
    known++;
    sum += w[i];
    if (w[i] > max)
      max = w[i];
  }
  if (n < 2 || known < 2)
    return GRIT_OK; /* LP-02: round robin until two weights are known */
  double mean = sum / (double)known;
  double top = max;
  if (top / mean > STRIDE_MAX_RATIO)
    top = STRIDE_MAX_RATIO * mean;
  double scale = STRIDE_MAX_WEIGHT / top;
  long scaled_mean = lround(scale * mean);
  long lower = lround((double)scaled_mean * STRIDE_MIN_RATIO);
  if (lower < 1)
    lower = 1;
  uint16_t *sw = grit_calloc(n, sizeof(*sw));
  if (!sw)
    return GRIT_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    long v;
    if (!(w[i] > 0)) {
      v = scaled_mean;
    } else {
      double capped = w[i] < top ? w[i] : top;
      v = lround(capped * scale);
      if (v < lower)
        v = lower;
    }
    if (v > (long)STRIDE_MAX_WEIGHT)
      v = STRIDE_MAX_WEIGHT;
    sw[i] = (uint16_t)v;
  }
  out->weights = sw;
  out->n = n;
  return GRIT_OK;
}

size_t grit_stride_sched_pick(const grit_stride_sched *s, uint32_t *seq) {
  const uint32_t offset = STRIDE_MAX_WEIGHT / 2;
  for (;;) {
    uint32_t q = (*seq)++;
    uint64_t idx = q % s->n;
    uint64_t generation = q / s->n;
    uint64_t weight = s->weights[idx];
    uint64_t mod = (weight * generation + idx * offset) % STRIDE_MAX_WEIGHT;
    if (mod < STRIDE_MAX_WEIGHT - weight)
      continue;
    return (size_t)idx;
  }
}

void grit_stride_sched_free(grit_stride_sched *s) {
  if (!s)
    return;
  grit_free(s->weights);
  s->weights = NULL;
  s->n = 0;
}
