/* gRFC A50's ejection algorithm (SPEC OD-01), pure: the caller gives the
 * time and the rng. Steps and names follow A50's "Ejection algorithm"
 * section; where A50 leaves room, grpc-core's outlier_detection.cc is the
 * reference (candidates are the addresses with enough requests, and the
 * minimum-hosts test counts candidates). */
#include "lb/od_algo.h"

#include <math.h>

void grit_od_record(grit_od_addr *a, bool ok) {
  if (ok)
    a->successes++;
  else
    a->failures++;
}

uint64_t grit_od_ejection_ms(const grit_od_params *p, uint32_t multiplier) {
  uint64_t cap = p->base_ejection_time_ms > p->max_ejection_time_ms
                     ? p->base_ejection_time_ms
                     : p->max_ejection_time_ms;
  if (multiplier && p->base_ejection_time_ms > cap / multiplier)
    return cap;
  uint64_t t = p->base_ejection_time_ms * multiplier;
  return t < cap ? t : cap;
}

static uint64_t volume(const grit_od_addr *a) {
  return a->last_successes + a->last_failures;
}

/* A50: "If the percentage of ejected addresses is greater than or equal
 * to max_ejection_percent, stop." */
static bool at_max(const grit_od_params *p, size_t ejected, size_t n) {
  return (uint64_t)ejected * 100 >= (uint64_t)p->max_ejection_percent * n;
}

static void eject(grit_od_addr *a, uint64_t now_ms, size_t *ejected,
                  size_t *fresh) {
  a->ejected = true;
  a->ejected_at_ms = now_ms;
  a->multiplier++;
  (*ejected)++;
  (*fresh)++;
}

static bool draw(grit_rng *rng, uint32_t percentage) {
  /* A50: a random integer in [0, 100) below enforcement_percentage. */
  return grit_rng_below(rng, 100) < percentage;
}

static void success_rate(const grit_od_params *p, grit_od_addr *addrs, size_t n,
                         uint64_t now_ms, grit_rng *rng, size_t *ejected,
                         size_t *fresh) {
  size_t candidates = 0;
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    if (volume(&addrs[i]) >= p->sr_request_volume && volume(&addrs[i]) > 0) {
      candidates++;
      sum += (double)addrs[i].last_successes / (double)volume(&addrs[i]);
    }
  }
  if (candidates == 0 || candidates < p->sr_minimum_hosts)
    return;
  double mean = sum / (double)candidates, var = 0;
  for (size_t i = 0; i < n; i++) {
    if (volume(&addrs[i]) >= p->sr_request_volume && volume(&addrs[i]) > 0) {
      double d =
          (double)addrs[i].last_successes / (double)volume(&addrs[i]) - mean;
      var += d * d;
    }
  }
  double stdev = sqrt(var / (double)candidates);
  double limit = mean - stdev * ((double)p->sr_stdev_factor / 1000.0);
  for (size_t i = 0; i < n; i++) {
    grit_od_addr *a = &addrs[i];
    if (at_max(p, *ejected, n))
      return;
    if (a->ejected || volume(a) < p->sr_request_volume || volume(a) == 0)
      continue;
    double rate = (double)a->last_successes / (double)volume(a);
    if (rate < limit && draw(rng, p->sr_enforcement_percentage))
      eject(a, now_ms, ejected, fresh);
  }
}

static void failure_percentage(const grit_od_params *p, grit_od_addr *addrs,
                               size_t n, uint64_t now_ms, grit_rng *rng,
                               size_t *ejected, size_t *fresh) {
  size_t candidates = 0;
  for (size_t i = 0; i < n; i++) {
    if (volume(&addrs[i]) >= p->fp_request_volume && volume(&addrs[i]) > 0)
      candidates++;
  }
  if (candidates == 0 || candidates < p->fp_minimum_hosts)
    return;
  for (size_t i = 0; i < n; i++) {
    grit_od_addr *a = &addrs[i];
    if (at_max(p, *ejected, n))
      return;
    if (a->ejected || volume(a) < p->fp_request_volume || volume(a) == 0)
      continue;
    /* A50: failure percentage strictly above the threshold. */
    if (a->last_failures * 100 > (uint64_t)p->fp_threshold * volume(a) &&
        draw(rng, p->fp_enforcement_percentage))
      eject(a, now_ms, ejected, fresh);
  }
}

size_t grit_od_run(const grit_od_params *p, grit_od_addr *addrs, size_t n,
                   uint64_t now_ms, grit_rng *rng) {
  size_t ejected = 0, fresh = 0;
  for (size_t i = 0; i < n; i++) {
    grit_od_addr *a = &addrs[i];
    a->changed = a->ejected; /* the state before, until the end */
    a->last_successes = a->successes;
    a->last_failures = a->failures;
    a->successes = a->failures = 0;
    if (a->ejected)
      ejected++;
  }
  if (n == 0)
    return 0;
  if (p->success_rate)
    success_rate(p, addrs, n, now_ms, rng, &ejected, &fresh);
  if (p->failure_percentage)
    failure_percentage(p, addrs, n, now_ms, rng, &ejected, &fresh);
  for (size_t i = 0; i < n; i++) {
    grit_od_addr *a = &addrs[i];
    if (!a->ejected) {
      if (a->multiplier > 0)
        a->multiplier--;
    } else if (now_ms >=
               a->ejected_at_ms + grit_od_ejection_ms(p, a->multiplier)) {
      a->ejected = false;
    }
    a->changed = a->changed != a->ejected;
  }
  return fresh;
}
