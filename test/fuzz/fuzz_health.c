/* libFuzzer target: the hand-written grpc.health.v1 HealthCheckResponse
 * decoder (SPEC HC-01) on arbitrary bytes, and the request encoder on the
 * input as a service name. */
#include "lb/lb.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint32_t status = 99;
  bool ok = grit_health_decode_response(data, size, &status);
  /* Field 1 as a one-byte varint alone is read as it is. */
  if (size == 2 && data[0] == 0x08 && data[1] < 0x80)
    GRIT_ASSERT(ok && status == data[1]);
  /* Encoding a name and decoding the frame's body as a request-shaped
   * message (field 1, length-delimited) must round-trip its length. */
  char name[256];
  size_t n = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
  memcpy(name, data, n);
  name[n] = '\0';
  grit_slice *s = grit_health_encode_request(name);
  if (s) {
    size_t len = strlen(name);
    uint32_t body = (uint32_t)s->data[1] << 24 | (uint32_t)s->data[2] << 16 |
                    (uint32_t)s->data[3] << 8 | s->data[4];
    GRIT_ASSERT(body == s->len - 5);
    GRIT_ASSERT(len == 0 ? body == 0 : body >= len + 2);
    GRIT_ASSERT(len == 0 || memcmp(s->data + s->len - len, name, len) == 0);
    uint32_t st;
    GRIT_ASSERT(grit_health_decode_response(s->data + 5, body, &st));
    grit_slice_unref(s);
  }
  return 0;
}
