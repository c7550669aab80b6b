/* Names of library errors and gRPC status codes, generated from the
 * X-macro lists in grit.h; status and byte-buffer release. */
#include "util/util.h"

#include <string.h>
#include <strings.h>

const char *grit_strerror(grit_err err) {
  switch (err) {
#define GRIT_ERR_TEXT(name, val, text)                                         \
  case GRIT_##name:                                                            \
    return text;
    GRIT_ERR_MAP(GRIT_ERR_TEXT)
#undef GRIT_ERR_TEXT
  }
  return "unknown error";
}

const char *grit_err_name(grit_err err) {
  switch (err) {
#define GRIT_ERR_NAME(name, val, text)                                         \
  case GRIT_##name:                                                            \
    return #name;
    GRIT_ERR_MAP(GRIT_ERR_NAME)
#undef GRIT_ERR_NAME
  }
  return "UNKNOWN";
}

const char *grit_status_code_name(grit_status_code code) {
  switch (code) {
#define GRIT_STATUS_NAME(name, val)                                            \
  case GRIT_STATUS_##name:                                                     \
    return #name;
    GRIT_STATUS_MAP(GRIT_STATUS_NAME)
#undef GRIT_STATUS_NAME
  }
  return NULL;
}

grit_err grit_status_code_parse(const char *name, size_t len,
                                grit_status_code *out) {
  if (!name || !out)
    return GRIT_ERR_INVALID_ARG;
  for (int c = 0; c < GRIT_STATUS_COUNT; c++) {
    const char *n = grit_status_code_name((grit_status_code)c);
    if (strlen(n) == len && strncasecmp(n, name, len) == 0) {
      *out = (grit_status_code)c;
      return GRIT_OK;
    }
  }
  return GRIT_ERR_NOT_FOUND;
}

const char *grit_connectivity_state_name(grit_connectivity_state s) {
  switch (s) {
  case GRIT_STATE_IDLE:
    return "IDLE";
  case GRIT_STATE_CONNECTING:
    return "CONNECTING";
  case GRIT_STATE_READY:
    return "READY";
  case GRIT_STATE_TRANSIENT_FAILURE:
    return "TRANSIENT_FAILURE";
  case GRIT_STATE_SHUTDOWN:
    return "SHUTDOWN";
  }
  return NULL;
}

/* Stand-ins for a status message or trailer list that could not be
 * allocated, so that neither is ever NULL once set (grit.h); the message
 * is writable only because grit_status.message is a char *. */
static char status_nomem_message[] = "out of memory copying the status";

grit_err grit_status_set(grit_status *st, grit_status_code code,
                         const char *message, const grit_metadata *trailers) {
  st->code = code;
  st->message = grit_strdup(message ? message : "");
  grit_err rv = GRIT_OK;
  if (trailers)
    rv = grit_metadata_copy(trailers, &st->trailers);
  else
    rv = grit_metadata_create(&st->trailers);
  if (!st->trailers)
    st->trailers = grit_metadata_empty();
  if (!st->message) {
    st->message = status_nomem_message;
    rv = GRIT_ERR_NOMEM;
  }
  return rv;
}

void grit_status_free(grit_status *st) {
  if (!st)
    return;
  if (st->message != status_nomem_message)
    grit_free(st->message);
  if (st->trailers != grit_metadata_empty())
    grit_metadata_destroy(st->trailers);
  st->message = NULL;
  st->trailers = NULL;
  st->code = GRIT_STATUS_OK;
}

void grit_bytes_free(grit_bytes *b) {
  if (!b)
    return;
  grit_free(b->data);
  b->data = NULL;
  b->len = 0;
}

const char *grit_attempt_reason_name(grit_attempt_reason r) {
  switch (r) {
#define GRIT_REASON_NAME(name, val, text)                                      \
  case GRIT_REASON_##name:                                                     \
    return #name;
    GRIT_REASON_MAP(GRIT_REASON_NAME)
#undef GRIT_REASON_NAME
  }
  return NULL;
}

const char *grit_method_kind_name(grit_method_kind k) {
  switch (k) {
#define GRIT_METHOD_KIND_NAME(name, val)                                       \
  case GRIT_METHOD_##name:                                                     \
    return #name;
    GRIT_METHOD_KIND_MAP(GRIT_METHOD_KIND_NAME)
#undef GRIT_METHOD_KIND_NAME
  }
  return NULL;
}

const char *grit_attempt_kind_name(grit_attempt_kind k) {
  switch (k) {
#define GRIT_ATTEMPT_KIND_NAME(name, val)                                      \
  case GRIT_ATTEMPT_##name:                                                    \
    return #name;
    GRIT_ATTEMPT_KIND_MAP(GRIT_ATTEMPT_KIND_NAME)
#undef GRIT_ATTEMPT_KIND_NAME
  }
  return NULL;
}

grit_err grit_status_replace(grit_status *st, grit_status_code code,
                             const char *message) {
  if (!st)
    return GRIT_ERR_INVALID_ARG;
  char *m = grit_strdup(message ? message : "");
  if (st->message != status_nomem_message)
    grit_free(st->message);
  st->code = code;
  st->message = m ? m : status_nomem_message;
  if (!st->trailers)
    st->trailers = grit_metadata_empty();
  return m ? GRIT_OK : GRIT_ERR_NOMEM;
}
