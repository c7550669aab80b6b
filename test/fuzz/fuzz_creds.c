/* libFuzzer target: what a credential hands grit (SPEC CR-01, AP-05).
 * The input is split at its first NUL: the part before is a metadata key a
 * plugin adds, the rest its value; the whole input is also a token file's
 * content. A pair grit accepts is valid metadata (lower-case key, not
 * reserved, a printable value unless "-bin"); a refused one fails the
 * attempt INTERNAL and its message never holds the value. A token file's
 * content is either refused or trimmed to printable ASCII. */
#include "credentials/credentials.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct pair {
  const char *key;
  const uint8_t *value;
  size_t len;
  grit_err rv;
} pair;

static void get(void *ud, const grit_credentials_context *ctx,
                grit_credentials_request *req) {
  pair *p = ud;
  (void)ctx;
  p->rv = grit_credentials_request_add(req, p->key, p->value, p->len);
  grit_credentials_request_done(req, GRIT_STATUS_OK, NULL);
}

static void ready(grit_creds_fetch *f, void *ud) {
  (void)f;
  *(int *)ud += 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t start, len;
  const char *why;
  if (grit_creds_token_parse(data, size, &start, &len, &why)) {
    GRIT_ASSERT(len > 0 && start + len <= size);
    for (size_t i = 0; i < len; i++)
      GRIT_ASSERT(data[start + i] >= 0x20 && data[start + i] <= 0x7e);
  }
  const uint8_t *nul = memchr(data, 0, size);
  if (!nul)
    return 0;
  pair p = {.key = (const char *)data,
            .value = nul + 1,
            .len = size - (size_t)(nul + 1 - data)};
  grit_credentials_plugin def = {.version = GRIT_CREDENTIALS_PLUGIN_VERSION,
                                 .get_metadata = get};
  grit_call_credentials *c;
  if (grit_call_credentials_create_plugin(&def, &p, &c) != GRIT_OK)
    return 0;
  grit_creds_ctx ctx = {.service_url = "https://h/s", .method_name = "m"};
  int n = 0;
  grit_creds_fetch *f;
  if (grit_creds_fetch_start(c, &ctx, ready, &n, &f) == GRIT_OK) {
    GRIT_ASSERT(n == 1);
    GRIT_ASSERT(grit_creds_fetch_resume(f));
    const grit_metadata *md;
    const char *msg;
    grit_status_code code = grit_creds_fetch_result(f, &md, &msg);
    if (p.rv == GRIT_OK) {
      GRIT_ASSERT(code == GRIT_STATUS_OK && grit_metadata_count(md) == 1);
      GRIT_ASSERT(grit_metadata_key_ok(p.key, strlen(p.key), false));
    } else if (p.rv == GRIT_ERR_INVALID_METADATA) {
      /* Exactly the fixed text with the (cut, cleaned) key: no value. */
      GRIT_ASSERT(code == GRIT_STATUS_INTERNAL);
      char k[64], want[160];
      grit_str_copy(k, sizeof(k), p.key);
      for (char *q = k; *q; q++)
        if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e)
          *q = '?';
      snprintf(want, sizeof(want),
               "call credentials (plugin): invalid metadata key \"%s\" or "
               "value",
               k);
      GRIT_ASSERT(strcmp(msg, want) == 0);
    }
    grit_creds_fetch_release(f);
  }
  grit_call_credentials_unref(c);
  return 0;
}
