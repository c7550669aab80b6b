/* libFuzzer target (issue 29): arbitrary bytes as grpc-status-details-bin
 * (a google.rpc.Status with its details) through pbjson's decoders for
 * `grit call`: the JSON form and the text form either fail with a reason
 * or give well-formed output (JSON that parses; text lines, the first a
 * "status details:" line). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson/pbjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[256] = "";
  char *json = pbj_status_json(data, size, err, sizeof(err));
  if (json) {
    json_error_t je;
    json_t *v = json_loads(json, JSON_ALLOW_NUL, &je);
    /* jansson cannot hold U+0000 in an object key (a map key of a
     * detail); that text is still JSON. */
    if (!json_is_object(v) && !strstr(je.text, "NUL byte in object key")) {
      fprintf(stderr, "status JSON does not parse (%s):\n%s\n", je.text, json);
      abort();
    }
    json_decref(v);
  } else if (!err[0]) {
    fprintf(stderr, "status JSON failed without a reason\n");
    abort();
  }
  free(json);
  err[0] = '\0';
  char *text = pbj_status_text(data, size, err, sizeof(err));
  if (text) {
    if (strncmp(text, "status details: code ", 21) != 0 ||
        text[strlen(text) - 1] != '\n') {
      fprintf(stderr, "status text malformed:\n%s\n", text);
      abort();
    }
  } else if (!err[0]) {
    fprintf(stderr, "status text failed without a reason\n");
    abort();
  }
  free(text);
  return 0;
}
