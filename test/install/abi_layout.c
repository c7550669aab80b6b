/* Issue 23 point 7 (docs/abi.md): a program built against an older grit.h
 * keeps working with a newer library of the same soname. Its result structs
 * are smaller; grit writes only the fields that fit in their |size|. Here
 * the older layouts are copies of today's structs as they stood before
 * their last fields came (before the DNS-10 counters, the CP-01 encodings,
 * the rejection history), each in a heap block of exactly its size, so
 * ASan or valgrind catches a single byte written past it. A larger, newer
 * layout gets its unknown tail zeroed; a size left unset is refused.
 *
 * Public API only, no server: calls go to a closed port. Exit 0 on pass. */
#include <grit/grit.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* grit_channel_stats before the resolver and config counters. */
typedef struct old_channel_stats {
  size_t size;
  uint64_t calls_started, calls_succeeded, calls_failed;
  uint64_t attempts, retries, transparent_retries, hedges, throttled;
  uint64_t retries_per_call[8];
  uint64_t ejections, unejections, health_not_serving;
} old_channel_stats;

/* grit_call_info before the compression fields. */
typedef struct old_call_info {
  size_t size;
  uint64_t call_id;
  uint32_t attempts, transparent_retries, hedges;
  uint64_t backoff_ms;
  char peer[128];
} old_call_info;

/* grit_service_config_info before the rejection history and the hash. */
typedef struct old_config_info {
  size_t size;
  char *json;
  grit_config_source source;
  uint64_t applied_at_ms;
} old_config_info;

/* A layout from a grit.h newer than the library. */
typedef struct new_call_info {
  grit_call_info now;
  uint64_t later[4];
} new_call_info;

static int failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond);         \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static const char config[] = "{\"loadBalancingConfig\":[{\"round_robin\":{}}]}";

int main(void) {
  grit_channel_args *a;
  CHECK(grit_channel_args_create(&a) == GRIT_OK);
  CHECK(grit_channel_args_set_string(a, GRIT_ARG_SERVICE_CONFIG, config) ==
        GRIT_OK);
  grit_channel *ch;
  grit_error_detail d = {0};
  if (grit_channel_create(NULL, "ipv4:127.0.0.1:1", a, &d, &ch) != GRIT_OK) {
    fprintf(stderr, "channel: %s %s\n", d.path, d.reason);
    return 1;
  }
  grit_channel_args_destroy(a);

  /* A call through the older grit_call_info. */
  old_call_info *oi = malloc(sizeof(*oi));
  memset(oi, 0xab, sizeof(*oi));
  oi->size = sizeof(*oi);
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 5000};
  grit_status st;
  CHECK(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, NULL, &st,
                        (grit_call_info *)oi) == GRIT_OK);
  CHECK(st.code == GRIT_STATUS_UNAVAILABLE);
  grit_status_free(&st);
  CHECK(oi->size == sizeof(*oi));
  CHECK(oi->call_id != 0);
  CHECK(oi->attempts == 1);
  CHECK(oi->hedges == 0);
  CHECK(memchr(oi->peer, '\0', sizeof(oi->peer)) != NULL);
  uint64_t first_id = oi->call_id;
  memset(oi, 0xab, sizeof(*oi));
  oi->size = sizeof(*oi);
  grit_call *c;
  CHECK(grit_call_start(ch, "/pkg.Svc/M", &o, NULL, NULL, &c) == GRIT_OK);
  CHECK(grit_call_get_info(c, (grit_call_info *)oi) == GRIT_OK);
  CHECK(oi->call_id > first_id);
  grit_call_destroy(c);
  free(oi);

  /* A newer, larger layout: what grit does not know reads as zero. */
  new_call_info *ni = malloc(sizeof(*ni));
  memset(ni, 0xab, sizeof(*ni));
  ni->now.size = sizeof(*ni);
  CHECK(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, NULL, &st,
                        (grit_call_info *)ni) == GRIT_OK);
  grit_status_free(&st);
  CHECK(ni->now.size == sizeof(*ni));
  CHECK(ni->now.attempts == 1);
  CHECK(strcmp(ni->now.request_encoding, "identity") == 0);
  for (int i = 0; i < 4; i++)
    CHECK(ni->later[i] == 0);
  free(ni);

  /* The counters through the older grit_channel_stats. */
  old_channel_stats *os = malloc(sizeof(*os));
  memset(os, 0xab, sizeof(*os));
  os->size = sizeof(*os);
  CHECK(grit_channel_get_stats(ch, (grit_channel_stats *)os) == GRIT_OK);
  CHECK(os->size == sizeof(*os));
  CHECK(os->calls_started == 3);
  CHECK(os->calls_failed >= 2 && os->calls_succeeded == 0);
  CHECK(os->ejections == 0);
  free(os);

  /* The config through the older grit_service_config_info: its strings
   * are the caller's to free, and none is made for a field it lacks. */
  old_config_info *oc = malloc(sizeof(*oc));
  memset(oc, 0xab, sizeof(*oc));
  oc->size = sizeof(*oc);
  CHECK(grit_channel_get_service_config(ch, (grit_service_config_info *)oc) ==
        GRIT_OK);
  CHECK(oc->json && strstr(oc->json, "round_robin"));
  CHECK(oc->source == GRIT_CONFIG_SOURCE_DEFAULT);
  grit_service_config_info_free((grit_service_config_info *)oc);
  CHECK(oc->size == sizeof(*oc) && oc->json == NULL);
  free(oc);

  /* Today's layouts, and a size left unset. */
  grit_channel_stats s = GRIT_CHANNEL_STATS_INIT;
  CHECK(grit_channel_get_stats(ch, &s) == GRIT_OK);
  CHECK(s.size == sizeof(s) && s.calls_started == 3);
  grit_channel_stats unset = {0};
  CHECK(grit_channel_get_stats(ch, &unset) == GRIT_ERR_INVALID_ARG);
  grit_call_info iunset = {0};
  CHECK(grit_unary_call(ch, "/pkg.Svc/M", "x", 1, &o, NULL, &st, &iunset) ==
        GRIT_ERR_INVALID_ARG);
  CHECK(st.code == GRIT_STATUS_INVALID_ARGUMENT);
  CHECK(st.message && strstr(st.message, "GRIT_CALL_INFO_INIT"));
  grit_status_free(&st);
  grit_service_config_info cunset = {0};
  CHECK(grit_channel_get_service_config(ch, &cunset) == GRIT_ERR_INVALID_ARG);
  grit_service_config_info_free(&cunset); /* nothing to free: a no-op */

  grit_channel_destroy(ch);
  CHECK(grit_default_runtime_shutdown() == GRIT_OK);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
