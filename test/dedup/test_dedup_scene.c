/*
 * The `grit demo` dedup scene (tools/demo_dedup.c) as a test: hedged and
 * retried CreateGroup calls against two h2server replicas sharing one
 * store; every call gets its own group back, more requests than calls
 * reach the replicas, the domain has exactly one row per call and no
 * duplicate ran. `test_dedup_scene mem` uses the in-process store,
 * `test_dedup_scene pg` a throwaway PostgreSQL server.
 */
#include <grit/grit.h>
#include <stdio.h>
#include <string.h>

#include "demo_dedup.h"
#include "pgtmp.h"

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "mem") && strcmp(argv[1], "pg"))) {
    fprintf(stderr, "usage: test_dedup_scene mem|pg\n");
    return 2;
  }
  if (strcmp(argv[1], "mem") == 0) {
    int rc = demo_scene_dedup(200, NULL);
    grit_default_runtime_shutdown();
    return rc;
  }
  pgtmp pg;
  int r = pgtmp_start(&pg);
  if (r == -1) {
    fprintf(stderr, "PostgreSQL server not installed: skipped\n");
    return 77;
  }
  if (r != 0) {
    fprintf(stderr, "cannot start PostgreSQL\n");
    return 1;
  }
  int rc = demo_scene_dedup(200, pg.conninfo);
  grit_default_runtime_shutdown();
  pgtmp_stop(&pg);
  return rc;
}
