/* Call credentials (SPEC CR-01, CR-02, AP-05): the objects behind the
 * public grit_call_credentials (plugins, a static bearer token, a token
 * file re-read when it changes, composition) and one attempt's fetch of
 * metadata through them. channel/ creates a fetch before an attempt and is
 * told, through a hook it supplies, when the answer is ready; this module
 * knows nothing of the loop, the call or the transport.
 * Layout: floor 1 of docs/layout.md. */
#ifndef GRIT_CREDENTIALS_H
#define GRIT_CREDENTIALS_H

#include "util/util.h"

/* A54: the codes a plugin may not produce become INTERNAL. */
grit_status_code grit_creds_map_code(grit_status_code code);

/* "https://" + |authority| without a ":443" suffix + "/" + the service of
 * |method| ("/pkg.Svc/M" -> "https://host/pkg.Svc"), and the method name
 * ("M"), into caller buffers. Returns false when a buffer is too small or
 * |method| is not "/service/method". */
bool grit_creds_service_url(const char *authority, const char *method,
                            char *url, size_t url_size, char *name,
                            size_t name_size);

/* The trimmed content of a token file as an "authorization" value: leading
 * and trailing ASCII white space removed, then every byte must be
 * printable ASCII (0x20-0x7E) and it must not be empty. On success
 * |*start| and |*len| describe the token inside |data|. |why| gets a
 * reason that never contains the token. */
bool grit_creds_token_parse(const uint8_t *data, size_t len, size_t *start,
                            size_t *tok_len, const char **why);

/* One attempt's request for metadata, walking every credential of a
 * (possibly composite) grit_call_credentials in order. */
typedef struct grit_creds_fetch grit_creds_fetch;

/* Called when the fetch has its answer (or failed): from the plugin's
 * thread, any thread, possibly inside grit_creds_fetch_start. The hook
 * must only schedule grit_creds_fetch_resume on the owner's thread. */
typedef void (*grit_creds_ready_fn)(grit_creds_fetch *f, void *ud);

typedef struct grit_creds_ctx {
  const char *service_url;
  const char *method_name;
  const char *authority;
  int64_t deadline_left_ms; /* -1: none */
  unsigned attempt;         /* 1-based */
} grit_creds_ctx;

/* Start asking |creds| (borrowed; the fetch takes its own reference). The
 * context strings are copied. |ready| runs once each time a plugin has
 * answered; the owner then calls grit_creds_fetch_resume on its thread.
 * Returns GRIT_OK or GRIT_ERR_NOMEM. */
grit_err grit_creds_fetch_start(grit_call_credentials *creds,
                                const grit_creds_ctx *ctx,
                                grit_creds_ready_fn ready, void *ud,
                                grit_creds_fetch **out);

/* On the owner's thread after |ready|: takes the answer in, and asks the
 * next credential if there is one (returns false: wait for |ready|
 * again) or is finished (returns true: read the result). */
bool grit_creds_fetch_resume(grit_creds_fetch *f);

/* The result once finished: GRIT_STATUS_OK with every pair in order in
 * |*md| (borrowed, valid until grit_creds_fetch_release), or the failure
 * code (already mapped per A54) and a message naming the credential
 * type, never its secret. */
grit_status_code grit_creds_fetch_result(const grit_creds_fetch *f,
                                         const grit_metadata **md,
                                         const char **message);

/* The owner lets go: before or after the answer. A plugin answering later
 * still finds valid memory; |ready| is not called after this returns.
 * Returns true when |ready| already ran for an answer not yet taken by
 * grit_creds_fetch_resume: the owner's scheduled resume will still run
 * and must then only clean up its own side (not touch |f|). */
bool grit_creds_fetch_release(grit_creds_fetch *f);

#endif
