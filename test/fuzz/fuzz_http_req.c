/* libFuzzer target: the admin endpoint's HTTP/1.1 request-head parser
 * (SPEC OP-03) on arbitrary bytes: it never reads past |size| (ASan), a
 * DONE head consumed at most |size| bytes and ends in the empty line, the
 * method and path are NUL-terminated, the path starts with '/', and a
 * longer input with the same head gives the same answer. */
#include "observe/observe.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy of exactly |size| bytes, so ASan sees any over-read. */
  char *buf = malloc(size ? size : 1);
  if (!buf)
    return 0;
  memcpy(buf, data, size);
  grit_http_req req;
  int r = grit_http_parse_request(buf, size, &req);
  GRIT_ASSERT(r == GRIT_HTTP_DONE || r == GRIT_HTTP_INCOMPLETE ||
              r == GRIT_HTTP_BAD);
  if (r == GRIT_HTTP_DONE) {
    GRIT_ASSERT(req.consumed >= 4 && req.consumed <= size);
    GRIT_ASSERT(memcmp(buf + req.consumed - 4, "\r\n\r\n", 4) == 0);
    GRIT_ASSERT(memchr(req.method, '\0', sizeof(req.method)) != NULL);
    GRIT_ASSERT(memchr(req.path, '\0', sizeof(req.path)) != NULL);
    GRIT_ASSERT(req.path[0] == '/');
    grit_http_req again;
    GRIT_ASSERT(grit_http_parse_request(buf, req.consumed, &again) ==
                GRIT_HTTP_DONE);
    GRIT_ASSERT(again.consumed == req.consumed &&
                again.keep_alive == req.keep_alive &&
                strcmp(again.path, req.path) == 0);
  }
  free(buf);
  return 0;
}
