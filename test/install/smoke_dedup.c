/* grit-dedup as installed: built with `pkg-config --cflags --libs
 * grit-dedup` alone; a claim, a success, a replay and a mismatch on the
 * in-process store. */
#include <grit/dedup.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  grit_dedup_store *s;
  if (grit_dedup_store_create_mem(NULL, &s) != GRIT_DEDUP_OK)
    return 1;
  grit_dedup_result a, b, c;
  int ok = grit_dedup_claim(s, "key", "fp", 2, 0, &a) == GRIT_DEDUP_OK &&
           a.outcome == GRIT_DEDUP_LEADER &&
           grit_dedup_succeed(s, "key", a.token, "resp", 4) == GRIT_DEDUP_OK &&
           grit_dedup_claim(s, "key", "fp", 2, 0, &b) == GRIT_DEDUP_OK &&
           b.outcome == GRIT_DEDUP_REPLAY && b.response_len == 4 &&
           memcmp(b.response, "resp", 4) == 0 &&
           grit_dedup_claim(s, "key", "other", 5, 0, &c) == GRIT_DEDUP_OK &&
           c.outcome == GRIT_DEDUP_MISMATCH;
  grit_dedup_result_free(&b);
  grit_dedup_store_destroy(s);
  printf("dedup smoke: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
