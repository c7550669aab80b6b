/* HTTP and HTTP/2 codes to gRPC status codes (SPEC HS-02, HS-03). */
#include "transport/transport.h"

#include <nghttp2/nghttp2.h>

grit_status_code grit_status_from_http(int http_status) {
  switch (http_status) {
  case 400:
    return GRIT_STATUS_INTERNAL;
  case 401:
    return GRIT_STATUS_UNAUTHENTICATED;
  case 403:
    return GRIT_STATUS_PERMISSION_DENIED;
  case 404:
    return GRIT_STATUS_UNIMPLEMENTED;
  case 429:
  case 502:
  case 503:
  case 504:
    return GRIT_STATUS_UNAVAILABLE;
  }
  return GRIT_STATUS_UNKNOWN;
}

grit_status_code grit_status_from_rst(uint32_t h2_error_code) {
  switch (h2_error_code) {
  case NGHTTP2_REFUSED_STREAM:
    return GRIT_STATUS_UNAVAILABLE; /* and transparently retryable, TR-02 */
  case NGHTTP2_CANCEL:
    return GRIT_STATUS_CANCELLED;
  case NGHTTP2_ENHANCE_YOUR_CALM:
    return GRIT_STATUS_RESOURCE_EXHAUSTED;
  case NGHTTP2_INADEQUATE_SECURITY:
    return GRIT_STATUS_PERMISSION_DENIED;
  }
  return GRIT_STATUS_INTERNAL;
}

grit_status_code grit_status_from_text(const char *s, size_t len) {
  /* Digits only: no sign, no blanks. Longer than 3 digits cannot be in
   * range and must not overflow. */
  if (!s || len == 0 || len > 3)
    return GRIT_STATUS_UNKNOWN;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return GRIT_STATUS_UNKNOWN;
    v = v * 10 + (s[i] - '0');
  }
  if (v > 16)
    return GRIT_STATUS_UNKNOWN;
  return (grit_status_code)v;
}
