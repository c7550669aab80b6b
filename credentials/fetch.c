/* One attempt's fetch of call-credential metadata (SPEC CR-01, CR-02):
 * the leaves of the credentials are asked one after another, each answer
 * is taken in on the owner's thread (grit_creds_fetch_resume), and the
 * pairs are merged in order. A plugin may answer from any thread, at once
 * or later, even after the owner let go; the fetch lives until both sides
 * are done with it. */
#include "credentials/creds_int.h"

#include <stdio.h>
#include <string.h>

#define FETCH_MSG_MAX 256

struct grit_credentials_request {
  grit_creds_fetch *f;
};

struct grit_creds_fetch {
  pthread_mutex_t mu;
  unsigned refs;  /* under mu: the owner, and a plugin still asked */
  bool released;  /* under mu: the owner let go */
  bool signalled; /* under mu: |ready| ran, resume not yet */
  bool answered;  /* under mu: the current leaf called done */
  grit_credentials_request req;
  grit_creds_ready_fn ready;
  void *ud;
  grit_call_credentials *creds; /* a reference */
  grit_call_credentials *leaves[CREDS_MAX_LEAVES];
  size_t nleaves, next;
  /* The current leaf's answer, written by the answering thread. */
  grit_metadata *pending;
  grit_status_code pending_code;
  char pending_msg[FETCH_MSG_MAX];
  /* The merged result, owner's thread only. */
  grit_metadata *md;
  grit_status_code code;
  char message[FETCH_MSG_MAX];
  bool finished;
  /* The context handed to plugins. */
  grit_credentials_context ctx;
  char *strings; /* one block: service_url, method_name, authority */
};

static void fetch_unref_locked(grit_creds_fetch *f, bool *free_it) {
  *free_it = --f->refs == 0;
}

static void fetch_free(grit_creds_fetch *f) {
  grit_metadata_destroy(f->pending);
  grit_metadata_destroy(f->md);
  grit_free(f->strings);
  grit_call_credentials_unref(f->creds);
  pthread_mutex_destroy(&f->mu);
  grit_free(f);
}

static grit_err ctx_copy(grit_creds_fetch *f, const grit_creds_ctx *ctx) {
  const char *s[3] = {ctx->service_url ? ctx->service_url : "",
                      ctx->method_name ? ctx->method_name : "",
                      ctx->authority ? ctx->authority : ""};
  size_t l[3], total = 0;
  for (int i = 0; i < 3; i++)
    total += (l[i] = strlen(s[i])) + 1;
  char *p = f->strings = grit_malloc(total);
  if (!p)
    return GRIT_ERR_NOMEM;
  const char **dst[3] = {&f->ctx.service_url, &f->ctx.method_name,
                         &f->ctx.authority};
  for (int i = 0; i < 3; i++) {
    memcpy(p, s[i], l[i] + 1);
    *dst[i] = p;
    p += l[i] + 1;
  }
  f->ctx.deadline_left_ms = ctx->deadline_left_ms;
  f->ctx.attempt = ctx->attempt;
  return GRIT_OK;
}

/* Ask the leaf at f->next. The owner's thread; the answer may come at once
 * (then |ready| runs before this returns). */
static void fetch_ask(grit_creds_fetch *f) {
  grit_call_credentials *leaf = f->leaves[f->next++];
  pthread_mutex_lock(&f->mu);
  f->answered = false;
  f->refs++; /* the asked side's hold, dropped in request_done */
  pthread_mutex_unlock(&f->mu);
  f->pending_code = GRIT_STATUS_OK;
  f->pending_msg[0] = '\0';
  switch (leaf->kind) {
  case CREDS_PLUGIN:
    leaf->u.plugin.p.get_metadata(leaf->u.plugin.user_data, &f->ctx, &f->req);
    return;
  case CREDS_BEARER: {
    grit_err rv = grit_credentials_request_add(
        &f->req, "authorization", leaf->u.bearer.value, leaf->u.bearer.len);
    grit_credentials_request_done(
        &f->req,
        rv == GRIT_OK ? GRIT_STATUS_OK : GRIT_STATUS_RESOURCE_EXHAUSTED,
        rv == GRIT_OK ? NULL : "out of memory");
    return;
  }
  case CREDS_TOKEN_FILE:
    grit_creds_token_file_answer(leaf, &f->req);
    return;
  case CREDS_COMPOSITE:
    break; /* leaves are never composite */
  }
  GRIT_ASSERT(0);
}

grit_err grit_creds_fetch_start(grit_call_credentials *creds,
                                const grit_creds_ctx *ctx,
                                grit_creds_ready_fn ready, void *ud,
                                grit_creds_fetch **out) {
  *out = NULL;
  grit_creds_fetch *f = grit_calloc(1, sizeof(*f));
  if (!f)
    return GRIT_ERR_NOMEM;
  pthread_mutex_init(&f->mu, NULL);
  f->refs = 1;
  f->req.f = f;
  f->ready = ready;
  f->ud = ud;
  grit_call_credentials_ref(creds);
  f->creds = creds;
  f->nleaves = grit_creds_leaves(creds, f->leaves, CREDS_MAX_LEAVES);
  if (ctx_copy(f, ctx) != GRIT_OK || grit_metadata_create(&f->md) != GRIT_OK) {
    fetch_free(f);
    return GRIT_ERR_NOMEM;
  }
  *out = f;
  fetch_ask(f);
  return GRIT_OK;
}

grit_err grit_credentials_request_add(grit_credentials_request *req,
                                      const char *key, const void *value,
                                      size_t len) {
  if (!req || !key)
    return GRIT_ERR_INVALID_ARG;
  grit_creds_fetch *f = req->f;
  if (f->pending_code != GRIT_STATUS_OK)
    return GRIT_ERR_INVALID_ARG; /* an earlier pair already failed it */
  grit_err rv = f->pending ? GRIT_OK : grit_metadata_create(&f->pending);
  if (rv == GRIT_OK)
    rv =
        grit_metadata_add(f->pending, key, value ? value : "", value ? len : 0);
  if (rv == GRIT_ERR_INVALID_METADATA) {
    f->pending_code = GRIT_STATUS_INTERNAL;
    char k[64];
    grit_str_copy(k, sizeof(k), key);
    for (char *p = k; *p; p++)
      if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
        *p = '?';
    snprintf(f->pending_msg, sizeof(f->pending_msg),
             "invalid metadata key \"%s\" or value", k);
  } else if (rv == GRIT_ERR_NOMEM) {
    f->pending_code = GRIT_STATUS_RESOURCE_EXHAUSTED;
    grit_str_copy(f->pending_msg, sizeof(f->pending_msg), "out of memory");
  }
  return rv;
}

void grit_credentials_request_done(grit_credentials_request *req,
                                   grit_status_code code, const char *message) {
  if (!req)
    return;
  grit_creds_fetch *f = req->f;
  if (f->pending_code == GRIT_STATUS_OK && code != GRIT_STATUS_OK) {
    f->pending_code = code;
    grit_str_copy(f->pending_msg, sizeof(f->pending_msg),
                  message ? message : "");
  }
  bool free_it;
  pthread_mutex_lock(&f->mu);
  f->answered = true;
  if (!f->released) {
    f->signalled = true;
    f->ready(f, f->ud); /* schedules resume; under mu so release waits */
  }
  fetch_unref_locked(f, &free_it);
  pthread_mutex_unlock(&f->mu);
  if (free_it)
    fetch_free(f);
}

/* Append the current leaf's pairs to the merged list, or record its
 * failure. The owner's thread, after the leaf answered. */
static void fetch_take(grit_creds_fetch *f, const char *type) {
  grit_status_code code = f->pending_code;
  if (code == GRIT_STATUS_OK) {
    size_t n = grit_metadata_count(f->pending);
    for (size_t i = 0; i < n && code == GRIT_STATUS_OK; i++) {
      const char *k;
      const uint8_t *v;
      size_t len;
      grit_metadata_get(f->pending, i, &k, &v, &len);
      if (grit_metadata_add_unchecked(f->md, k, strlen(k), v, len) != GRIT_OK) {
        code = GRIT_STATUS_RESOURCE_EXHAUSTED;
        grit_str_copy(f->pending_msg, sizeof(f->pending_msg), "out of memory");
      }
    }
  }
  grit_metadata_destroy(f->pending);
  f->pending = NULL;
  if (code != GRIT_STATUS_OK) {
    f->code = grit_creds_map_code(code); /* SPEC CR-02, gRFC A54 */
    /* Bounded on purpose: a long plugin message is cut, not an error. */
    int n = snprintf(f->message, sizeof(f->message),
                     "call credentials (%s): ", type);
    if (n > 0 && (size_t)n < sizeof(f->message))
      grit_str_copy(f->message + n, sizeof(f->message) - (size_t)n,
                    f->pending_msg);
    f->finished = true;
  }
}

bool grit_creds_fetch_resume(grit_creds_fetch *f) {
  pthread_mutex_lock(&f->mu);
  GRIT_ASSERT(f->answered && f->signalled);
  f->signalled = false;
  pthread_mutex_unlock(&f->mu);
  fetch_take(f, f->leaves[f->next - 1]->type);
  if (f->finished)
    return true;
  if (f->next == f->nleaves) {
    f->code = GRIT_STATUS_OK;
    f->finished = true;
    return true;
  }
  fetch_ask(f);
  return false;
}

grit_status_code grit_creds_fetch_result(const grit_creds_fetch *f,
                                         const grit_metadata **md,
                                         const char **message) {
  GRIT_ASSERT(f->finished);
  if (md)
    *md = f->md;
  if (message)
    *message = f->message;
  return f->code;
}

bool grit_creds_fetch_release(grit_creds_fetch *f) {
  if (!f)
    return false;
  bool free_it;
  pthread_mutex_lock(&f->mu);
  f->released = true;
  bool pending = f->signalled;
  fetch_unref_locked(f, &free_it);
  pthread_mutex_unlock(&f->mu);
  if (free_it)
    fetch_free(f);
  return pending;
}
