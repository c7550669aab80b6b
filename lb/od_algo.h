/*
 * od_algo: the outlier detection ejection algorithm of gRFC A50 (SPEC
 * OD-01) as pure arithmetic over an array of per-address counters. The
 * outlier_detection policy (lb/outlier_detection.c) owns the array, feeds
 * it call results and runs it every interval; unit tests drive it with a
 * fake clock and a seeded rng. No loop, no clock, no subchannel here.
 */
#ifndef GRIT_LB_OD_ALGO_H
#define GRIT_LB_OD_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* The policy's settings, as the service config gives them (A50 names). */
typedef struct grit_od_params {
  uint64_t interval_ms;
  uint64_t base_ejection_time_ms;
  uint64_t max_ejection_time_ms;
  uint32_t max_ejection_percent;
  bool success_rate;
  uint32_t sr_stdev_factor; /* thousandths */
  uint32_t sr_enforcement_percentage;
  uint32_t sr_minimum_hosts;
  uint32_t sr_request_volume;
  bool failure_percentage;
  uint32_t fp_threshold;
  uint32_t fp_enforcement_percentage;
  uint32_t fp_minimum_hosts;
  uint32_t fp_request_volume;
} grit_od_params;

/* One address: the counting bucket, the last interval's, and ejection. */
typedef struct grit_od_addr {
  uint64_t successes, failures;           /* this interval so far */
  uint64_t last_successes, last_failures; /* the interval evaluated */
  bool ejected;
  uint64_t ejected_at_ms;
  uint32_t multiplier; /* ejections in a row, decays by 1 per interval */
  bool changed;        /* set by grit_od_run when |ejected| flipped */
} grit_od_addr;

/* grit_od_record: one call's final status on |a| (OK or not). */
void grit_od_record(grit_od_addr *a, bool ok);

/* grit_od_run: one interval at |now_ms| (A50 "the timer"): swap the
 * buckets, run the success-rate then the failure-percentage algorithm,
 * then decay multipliers and un-eject those whose time is up. Marks each
 * address whose ejection flipped with |changed| (cleared first) and
 * returns how many were ejected in this run. |rng| draws the enforcement
 * percentages. An ejection starts only while the ejected share is below
 * max_ejection_percent (A50), so at most one address beyond the share. */
size_t grit_od_run(const grit_od_params *p, grit_od_addr *addrs, size_t n,
                   uint64_t now_ms, grit_rng *rng);

/* grit_od_ejection_ms: how long an address ejected |multiplier| times
 * stays out: min(base * multiplier, max(base, max)). */
uint64_t grit_od_ejection_ms(const grit_od_params *p, uint32_t multiplier);

#endif
