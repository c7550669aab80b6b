/* libFuzzer target: arbitrary bytes as a grit.test.Kitchen (every field
 * kind of the proto3 JSON mapping) through pbjson's wire -> JSON printer;
 * whatever prints must survive JSON -> wire -> JSON unchanged (issue
 * 14). */
#include "test/fuzz/pbjson_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  char *json =
      pbj_to_json(kitchen_pool(), KITCHEN, data, size, err, sizeof(err));
  if (json)
    check_fixed_point(json);
  free(json);
  return 0;
}
