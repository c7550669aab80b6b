/*
 * grit-dedup's counters in grit's exposition (SPEC OP-01, issue 28): a
 * store's text added as a metric source appears in the whole-process
 * render with the store's counts, passes promtool, and is gone once the
 * source is removed. Links grit and grit-dedup, as a server using both
 * does; neither library depends on the other.
 */
#include <grit/dedup.h>
#include <grit/grit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/harness.h"

static char *render(void) {
  grit_bytes b = {0};
  if (grit_metrics_write_prometheus(NULL, &b) != GRIT_OK)
    return NULL;
  char *s = malloc(b.len + 1);
  if (b.len) /* an empty exposition has no data at all */
    memcpy(s, b.data, b.len);
  s[b.len] = '\0';
  grit_bytes_free(&b);
  return s;
}

/* promtool check metrics on |text|: its exit status (127: not found). */
static int promtool(const char *text) {
  char path[] = "/tmp/grit-dedup-metrics-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return -1;
  size_t len = strlen(text);
  if (write(fd, text, len) != (ssize_t)len) {
    close(fd);
    unlink(path);
    return -1;
  }
  close(fd);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
  int st = system(cmd);
  unlink(path);
  return st == -1 ? -1 : WEXITSTATUS(st);
}

static void test_dedup_source(void) {
  grit_dedup_opts o = {.version = GRIT_DEDUP_OPTS_VERSION};
  grit_dedup_store *s = NULL;
  ASSERT_EQ(grit_dedup_store_create_mem(&o, &s), GRIT_DEDUP_OK);
  ASSERT_OK(grit_metrics_add_source(grit_dedup_metrics_text, s));
  grit_dedup_result r;
  for (int i = 0; i < 3; i++) {
    char key[16];
    snprintf(key, sizeof(key), "k%d", i);
    ASSERT_EQ(grit_dedup_claim(s, key, "fp", 2, 0, &r), GRIT_DEDUP_OK);
    ASSERT_EQ(grit_dedup_succeed(s, key, r.token, "ok", 2), GRIT_DEDUP_OK);
  }
  ASSERT_EQ(grit_dedup_claim(s, "k0", "fp", 2, 0, &r), GRIT_DEDUP_OK);
  ASSERT_EQ(r.outcome, GRIT_DEDUP_REPLAY);
  grit_dedup_result_free(&r);
  char *text = render();
  ASSERT_NOT_NULL(text);
  ASSERT_NOT_NULL(strstr(text, "\ngrit_dedup_claims_total 4\n"));
  ASSERT_NOT_NULL(strstr(text, "\ngrit_dedup_replays_total 1\n"));
  ASSERT_NOT_NULL(strstr(text, "\ngrit_dedup_heals_total 0\n"));
  ASSERT_NOT_NULL(strstr(text, "\ngrit_dedup_in_progress_total 0\n"));
  ASSERT_NOT_NULL(strstr(text, "\ngrit_dedup_store_errors_total 0\n"));
  ASSERT_NOT_NULL(strstr(text, "\ngrit_dedup_records 3\n"));
  int rc = promtool(text);
  if (rc != 127)
    ASSERT_EQ(rc, 0);
  free(text);
  ASSERT_OK(grit_metrics_remove_source(grit_dedup_metrics_text, s));
  text = render();
  ASSERT_NOT_NULL(text);
  ASSERT_NULL(strstr(text, "grit_dedup_"));
  free(text);
  grit_dedup_store_destroy(s);
}

static const test_case tests[] = {
    {"dedup_source", test_dedup_source},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
