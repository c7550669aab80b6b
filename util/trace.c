/* Tracing to stderr, switched on by GRIT_TRACE and GRIT_VERBOSITY
 * (SPEC MX-04). The environment is read once, thread-safely. */
#include "util/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static unsigned trace_flags;
unsigned grit_trace_gate; /* util.h: trace_flags | READY, set once */
static grit_trace_level trace_level = GRIT_LEVEL_INFO;
static bool trace_silent; /* GRIT_VERBOSITY=none: not even NOTICE lines */

static const struct {
  const char *name;
  unsigned flag;
} trace_names[] = {
    {"retry", GRIT_TRACE_RETRY},
    {"hedging", GRIT_TRACE_HEDGING},
    {"transport", GRIT_TRACE_TRANSPORT},
    {"lb", GRIT_TRACE_LB},
    {"dns", GRIT_TRACE_DNS},
    {"config", GRIT_TRACE_CONFIG},
    {"channel", GRIT_TRACE_CHANNEL},
};

static unsigned trace_parse_one(const char *w, size_t n) {
  if (n == 3 && strncasecmp(w, "all", 3) == 0)
    return ~0u;
  for (size_t i = 0; i < sizeof(trace_names) / sizeof(trace_names[0]); i++) {
    if (strlen(trace_names[i].name) == n &&
        strncasecmp(w, trace_names[i].name, n) == 0)
      return trace_names[i].flag;
  }
  return 0;
}

static void trace_init(void) {
  const char *env = getenv("GRIT_TRACE");
  while (env && *env) {
    size_t n = strcspn(env, ", ");
    unsigned f = trace_parse_one(env, n);
    if (f == 0 && n > 0)
      fprintf(stderr,
              "W grit: GRIT_TRACE: unknown category '%.*s' ignored (known: "
              "retry,hedging,transport,lb,dns,config,channel,all)\n",
              (int)n, env);
    trace_flags |= f;
    env += n;
    env += strspn(env, ", ");
  }
  const char *v = getenv("GRIT_VERBOSITY");
  if (v && strcasecmp(v, "debug") == 0)
    trace_level = GRIT_LEVEL_DEBUG;
  else if (v && strcasecmp(v, "error") == 0)
    trace_level = GRIT_LEVEL_ERROR;
  else if (v && strcasecmp(v, "none") == 0)
    trace_silent = true;
  __atomic_store_n(&grit_trace_gate, GRIT_TRACE_GATE_READY | trace_flags,
                   __ATOMIC_RELEASE);
}

bool grit_trace_on(grit_trace_flag flag, grit_trace_level level) {
  pthread_once(&trace_once, trace_init);
  if (level == GRIT_LEVEL_NOTICE)
    return !trace_silent;
  return (trace_flags & (unsigned)flag) && level >= trace_level;
}

static const char *trace_flag_name(grit_trace_flag flag) {
  for (size_t i = 0; i < sizeof(trace_names) / sizeof(trace_names[0]); i++) {
    if (trace_names[i].flag == (unsigned)flag)
      return trace_names[i].name;
  }
  return "?";
}

size_t grit_trace_timestamp(const struct timespec *ts, char *buf, size_t len) {
  struct tm tm;
  time_t sec = ts->tv_sec;
  if (len < GRIT_TRACE_TIMESTAMP_LEN || !gmtime_r(&sec, &tm)) {
    if (len)
      buf[0] = '\0';
    return 0;
  }
  int n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                   tm.tm_min, tm.tm_sec, (long)(ts->tv_nsec / 1000000));
  return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

void grit_trace_log(grit_trace_flag flag, grit_trace_level level,
                    const char *fmt, ...) {
  static const char lv[] = {'D', 'I', 'E', 'W'};
  char line[1024];
  /* Wall-clock UTC (issue 28): an operator lines these up with other
   * logs; the monotonic clock meant seconds since boot. */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char stamp[GRIT_TRACE_TIMESTAMP_LEN];
  grit_trace_timestamp(&now, stamp, sizeof(stamp));
  int n = snprintf(line, sizeof(line), "%c %s grit %s: ", lv[level], stamp,
                   trace_flag_name(flag));
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof(line))
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s\n", line);
}
