/* grit call --count N: N unary calls (grit_unary_call_async), C in
 * flight, each started as one ends; per-call output with --json or
 * --attempts, and a summary of codes, peers, qps and latency
 * percentiles. */
#include "call.h"

#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

typedef struct unary_run unary_run;

/* One call's context: its start time, matched exactly to its completion. */
typedef struct call_slot {
  unary_run *r;
  uint64_t start_us;
} call_slot;

struct unary_run {
  const call_setup *cs;
  const uint8_t *req;
  size_t req_len;
  uint64_t started, finished;
  bool paced; /* --rate: the main thread starts every call */
  call_slot *slots;
  uint64_t *lat_us;
  call_tally tally;
  bool start_failed;
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

static void start_next(unary_run *r);

static void on_done(const grit_status *st, const uint8_t *resp, size_t len,
                    const grit_call_info *info, void *ud) {
  call_slot *slot = ud;
  unary_run *r = slot->r;
  const call_out *o = &r->cs->out;
  uint64_t now = tool_now_us();
  att_rec att[MAX_CALL_ATTEMPTS];
  size_t n = att_take(r->cs->store, info->call_id, att, MAX_CALL_ATTEMPTS);
  call_result res = {.st = st,
                     .info = info,
                     .peer = att_call_peer(info, att, n),
                     .latency_us = now - slot->start_us,
                     .responses = resp != NULL,
                     .att = att,
                     .n_att = n};
  pthread_mutex_lock(&r->mu);
  r->lat_us[r->finished++] = res.latency_us;
  tally_add(&r->tally, st->code, res.peer);
  if (o->json) {
    if (resp)
      out_response(o, info->call_id, resp, len);
    out_result(o, &res);
  } else {
    out_timeline(o, &res);
  }
  bool all = r->finished == r->tally.count;
  if (all || r->paced)
    pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
  if (!all && !r->paced)
    start_next(r);
}

/* Start one more call if any are left. */
static void start_next(unary_run *r) {
  pthread_mutex_lock(&r->mu);
  if (r->started == r->tally.count || r->start_failed) {
    pthread_mutex_unlock(&r->mu);
    return;
  }
  call_slot *slot = &r->slots[r->started++];
  slot->r = r;
  slot->start_us = tool_now_us();
  pthread_mutex_unlock(&r->mu);
  grit_err rv = grit_unary_call_async(r->cs->ch, r->cs->method, r->req,
                                      r->req_len, &r->cs->opts, on_done, slot);
  if (rv != GRIT_OK) {
    fprintf(stderr, "grit: cannot start call: %s\n", grit_strerror(rv));
    pthread_mutex_lock(&r->mu);
    r->start_failed = true;
    r->started--; /* never started: the wait below must not expect it */
    r->tally.count = r->started;
    if (r->finished == r->tally.count)
      pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
  }
}

/* Sleep until the tool clock reads |at| (microseconds). */
static void sleep_until(uint64_t at) {
  for (uint64_t now = tool_now_us(); now < at; now = tool_now_us()) {
    uint64_t wait = at - now;
    struct timespec ts = {.tv_sec = (time_t)(wait / 1000000u),
                          .tv_nsec = (long)(wait % 1000000u) * 1000};
    nanosleep(&ts, NULL);
  }
}

/* --rate: call i is due at t0 + i/rate s, with at most |concurrency| in
 * flight (a full window waits for an end, and the schedule catches up).
 * The thread sleeps at least PACE_TICK_US at a time and then starts every
 * call due by then: above 1 000 calls a second they leave in bursts of
 * rate/1000 a millisecond. A wake-up per call cost the client 26 to 28 us
 * of CPU a call at 20 000 a second, 8 us in ticks (docs/operations.md,
 * "Span export cost, sixth round"). */
#define PACE_TICK_US 1000
static void run_paced(unary_run *r, uint64_t t0, uint64_t concurrency,
                      uint64_t rate) {
  uint64_t tick_end = t0; /* the next wake-up is not before this */
  for (uint64_t i = 0; i < r->tally.count; i++) {
    uint64_t at = t0 + (uint64_t)((double)i * 1e6 / (double)rate);
    if (tool_now_us() < at) {
      if (at < tick_end)
        at = tick_end;
      sleep_until(at);
      tick_end = at + PACE_TICK_US;
    }
    pthread_mutex_lock(&r->mu);
    while (r->started - r->finished >= concurrency && !r->start_failed)
      pthread_cond_wait(&r->cv, &r->mu);
    bool failed = r->start_failed;
    pthread_mutex_unlock(&r->mu);
    if (failed)
      return;
    start_next(r);
  }
}

int call_run_unary(const call_setup *cs, uint64_t count, uint64_t concurrency,
                   uint64_t rate) {
  unary_run r = {.cs = cs, .tally = {.count = count}, .paced = rate > 0};
  req_source_single(cs->src, &r.req, &r.req_len);
  r.slots = calloc(count, sizeof(call_slot));
  r.lat_us = calloc(count, sizeof(uint64_t));
  if (!r.slots || !r.lat_us) {
    fprintf(stderr, "grit: out of memory for %" PRIu64 " calls\n", count);
    free(r.slots);
    free(r.lat_us);
    return 1;
  }
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  uint64_t t0 = tool_now_us();
  if (r.paced)
    run_paced(&r, t0, concurrency, rate);
  else
    for (uint64_t i = 0; i < concurrency && i < count; i++)
      start_next(&r);
  pthread_mutex_lock(&r.mu);
  while (r.finished < r.tally.count)
    pthread_cond_wait(&r.cv, &r.mu);
  pthread_mutex_unlock(&r.mu);
  uint64_t elapsed = tool_now_us() - t0;
  int rc = 1;
  if (!r.start_failed) {
    out_summary(&cs->out, &r.tally, r.lat_us, elapsed);
    int worst = 0; /* the most frequent non-OK code, lowest of a tie */
    for (int c = 1; c < GRIT_STATUS_COUNT; c++) {
      if (r.tally.codes[c] &&
          (worst == 0 || r.tally.codes[c] > r.tally.codes[worst]))
        worst = c;
    }
    rc = tool_exit_for_code((grit_status_code)worst);
  }
  free(r.slots);
  free(r.lat_us);
  pthread_cond_destroy(&r.cv);
  pthread_mutex_destroy(&r.mu);
  return rc;
}
