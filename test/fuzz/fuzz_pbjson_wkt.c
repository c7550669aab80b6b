/* libFuzzer target (issue 29): arbitrary text as proto3 JSON of a
 * grit.test.Wkt, the message holding every well-known type (Struct,
 * Value, ListValue, NullValue, Any, FieldMask, wrappers, big numbers),
 * through pbjson's JSON -> wire encoder; what encodes must print (an Any
 * of an unknown type as {"@type", "@value"}), and the printed JSON must
 * survive JSON -> wire -> JSON unchanged. The same bytes as Wkt wire
 * data must print or fail cleanly. */
#include "test/fuzz/pbjson_fuzz.h"

#define WKT "grit.test.Wkt"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pbj_pool *pool = kitchen_pool();
  char err[512];
  char *raw = pbj_to_json_ex(pool, WKT, data, size, PBJ_ANY_RAW, NULL, 0, err,
                             sizeof(err));
  free(raw);
  uint8_t *wire;
  size_t n;
  if (!pbj_from_json(pool, WKT, (const char *)data, size, &wire, &n, err,
                     sizeof(err)))
    return 0;
  char *json = pbj_to_json_ex(pool, WKT, wire, n, PBJ_ANY_RAW, NULL, 0, err,
                              sizeof(err));
  free(wire);
  if (!json) {
    /* Only values the mapping cannot print may fail: a Timestamp or
     * Duration out of range, a FieldMask path without a JSON form. */
    if (!strstr(err, "out of range") && !strstr(err, "no JSON form")) {
      fprintf(stderr, "encoded but does not print: %s\n", err);
      abort();
    }
    return 0;
  }
  uint8_t *wire2;
  size_t n2;
  if (!pbj_from_json(pool, WKT, json, strlen(json), &wire2, &n2, err,
                     sizeof(err))) {
    fprintf(stderr, "printed but does not read back: %s\n%s\n", err, json);
    abort();
  }
  char *again = pbj_to_json_ex(pool, WKT, wire2, n2, PBJ_ANY_RAW, NULL, 0, err,
                               sizeof(err));
  if (!again || strcmp(again, json) != 0) {
    fprintf(stderr, "not a fixed point:\n%s\n%s\n", json, again ? again : err);
    abort();
  }
  free(again);
  free(wire2);
  free(json);
  return 0;
}
