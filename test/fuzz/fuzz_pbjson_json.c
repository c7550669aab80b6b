/* libFuzzer target: arbitrary text as proto3 JSON of a grit.test.Kitchen
 * through pbjson's JSON -> wire encoder; what encodes must print, and the
 * printed JSON must survive JSON -> wire -> JSON unchanged (issue 14). */
#include "test/fuzz/pbjson_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  uint8_t *wire;
  size_t n;
  if (!pbj_from_json(kitchen_pool(), KITCHEN, (const char *)data, size, &wire,
                     &n, err, sizeof(err)))
    return 0;
  char *json = pbj_to_json(kitchen_pool(), KITCHEN, wire, n, err, sizeof(err));
  if (!json) {
    /* The encoder wrote it, so the printer must read it; only values the
     * mapping cannot print (a Timestamp out of range) may fail. */
    if (!strstr(err, "out of range")) {
      fprintf(stderr, "encoded but does not print: %s\n", err);
      abort();
    }
  } else {
    check_fixed_point(json);
  }
  free(json);
  free(wire);
  return 0;
}
