/* libFuzzer target: W3C traceparent parsing and formatting (SPEC OB-02) on
 * arbitrary bytes: an accepted value formats back to itself (version 00,
 * or the first 55 characters as version 00 for later versions), and what
 * grit formats it accepts again. */
#include "observe/observe.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  grit_traceparent tp;
  if (grit_traceparent_parse((const char *)data, size, &tp) != GRIT_OK)
    return 0;
  GRIT_ASSERT(size >= GRIT_TRACEPARENT_LEN);
  char out[GRIT_TRACEPARENT_LEN + 1];
  grit_traceparent_format(&tp, out);
  GRIT_ASSERT(strlen(out) == GRIT_TRACEPARENT_LEN);
  GRIT_ASSERT(memcmp(out + 2, data + 2, GRIT_TRACEPARENT_LEN - 2) == 0);
  if (memcmp(data, "00", 2) == 0)
    GRIT_ASSERT(size == GRIT_TRACEPARENT_LEN);
  grit_traceparent back;
  GRIT_ASSERT(grit_traceparent_parse(out, strlen(out), &back) == GRIT_OK);
  GRIT_ASSERT(memcmp(&back, &tp, sizeof(tp)) == 0);
  return 0;
}
