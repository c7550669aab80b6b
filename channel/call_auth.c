/* A call's credentials and interceptors (SPEC CR-01, CR-02, IC-01,
 * AP-05): the glue between credentials/ and intercept/ and the call. The
 * call machine's START_ATTEMPT (and a transparent retry's REPICK) reach
 * attempt_pick only after the credentials answered; a refusal is the
 * attempt's failure, which the machine judges like any other. */
#include "channel/channel_int.h"

#include <string.h>

/* ---- per call ---- */

static call_auth_part *auth_part(grit_call *c) {
  if (!c->auth)
    c->auth = grit_calloc(1, sizeof(*c->auth));
  return c->auth;
}

grit_err grit_call_auth_setup(grit_call *c, const grit_call_opts *opts) {
  grit_channel *ch = c->ch;
  bool v3 = opts && opts->version >= 3;
  grit_call_credentials *mine = v3 ? opts->call_credentials : NULL;
  grit_interceptor *const *ics = v3 ? opts->interceptors : NULL;
  size_t nics = v3 && opts->interceptors ? opts->interceptor_count : 0;
  if (!ch->o.call_creds && !mine && !ch->o.interceptors.n && !nics)
    return GRIT_OK; /* nothing to do: no part, no cost */
  call_auth_part *p = auth_part(c);
  if (!p)
    return GRIT_ERR_NOMEM;
  if (ch->o.call_creds && mine) { /* CR-02: the channel's, then the call's */
    grit_err rv = grit_call_credentials_create_composite(ch->o.call_creds, mine,
                                                         &p->creds);
    if (rv != GRIT_OK)
      return rv == GRIT_ERR_INVALID_ARG ? GRIT_ERR_INVALID_ARG : rv;
  } else if (ch->o.call_creds || mine) {
    p->creds = ch->o.call_creds ? ch->o.call_creds : mine;
    grit_call_credentials_ref(p->creds);
  }
  return grit_ic_call_create(ch->o.interceptors.items, ch->o.interceptors.n,
                             ics, nics, &p->ic);
}

grit_err grit_call_auth_start(grit_call *c) {
  call_auth_part *p = c->auth;
  if (!p || !p->ic)
    return GRIT_OK;
  if (!c->metadata && grit_metadata_create(&c->metadata) != GRIT_OK)
    return GRIT_ERR_NOMEM;
  grit_interceptor_call_info info = {
      .method = c->method,
      .authority = c->authority,
      .kind = c->kind,
      .timeout_ms = c->timeout_ms,
  };
  char msg[256];
  grit_status_code code =
      grit_ic_call_start(p->ic, &info, c->metadata, msg, sizeof(msg));
  if (code != GRIT_STATUS_OK) { /* IC-01: the call ends, nothing is sent */
    p->fail_code = code;
    p->fail_msg = grit_strdup(msg);
  }
  return GRIT_OK;
}

bool grit_call_auth_check_on_loop(grit_call *c) {
  call_auth_part *p = c->auth;
  if (!p)
    return true;
  if (p->fail_code != GRIT_STATUS_OK) {
    c->hooks->fail(c, p->fail_code,
                   p->fail_msg ? p->fail_msg : "failed by an interceptor");
    return false;
  }
  if (p->creds && !c->ch->o.tls && !c->ch->o.allow_insecure_call_creds) {
    /* AP-05: a secret never goes out in cleartext. */
    c->hooks->fail(
        c, GRIT_STATUS_UNAUTHENTICATED,
        "call credentials need a secure channel (TLS); "
        "GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS allows them in cleartext");
    return false;
  }
  return true;
}

void grit_call_auth_send(grit_call *c, const void *data, size_t len) {
  if (c->auth && c->auth->fail_code == GRIT_STATUS_OK)
    grit_ic_call_send(c->auth->ic, data, len);
}

void grit_call_auth_headers(grit_call *c, const grit_metadata *md) {
  if (c->auth)
    grit_ic_call_headers(c->auth->ic, md);
}

void grit_call_auth_message(grit_call *c, const uint8_t *data, size_t len) {
  if (c->auth)
    grit_ic_call_message(c->auth->ic, data, len);
}

void grit_call_auth_done(grit_call *c, grit_status_code code, const char *msg,
                         const grit_metadata *trailers) {
  if (!c->auth || !c->auth->ic)
    return;
  grit_status st = {
      .code = code,
      .message = (char *)(msg ? msg : ""),
      .trailers =
          (grit_metadata *)(trailers ? trailers : grit_metadata_empty()),
  };
  grit_ic_call_done(c->auth->ic, &st);
}

void grit_call_auth_free(grit_call *c) {
  call_auth_part *p = c->auth;
  if (!p)
    return;
  grit_call_credentials_unref(p->creds);
  grit_ic_call_destroy(p->ic);
  grit_free(p->fail_msg);
  grit_free(p);
  c->auth = NULL;
}

/* ---- per attempt: credentials before the pick (CR-01) ---- */

typedef struct attempt_creds {
  grit_task task; /* posted by the fetch's ready hook */
  grit_creds_fetch *f;
  call_attempt *a; /* NULL once the attempt let go */
  grit_channel *ch;
} attempt_creds;

/* Any thread, under the fetch's lock: hand the answer to the loop. The
 * channel is held until the task ran, so the runtime outlives it. */
static void creds_ready(grit_creds_fetch *f, void *ud) {
  attempt_creds *w = ud;
  (void)f;
  grit_channel_ref(w->ch);
  if (!grit_rt_post(w->ch->rt, &w->task))
    grit_channel_unref(w->ch); /* already queued: that run takes it in */
}

static void creds_free(attempt_creds *w) {
  grit_free(w);
}

/* Build the attempt's request metadata: the call's, then the pairs. */
static bool creds_apply(call_attempt *a, const grit_metadata *pairs) {
  grit_call *c = a->c;
  grit_metadata *md;
  if (grit_metadata_copy(c->metadata, &md) != GRIT_OK)
    return false;
  size_t n = grit_metadata_count(pairs);
  for (size_t i = 0; i < n; i++) {
    const char *k;
    const uint8_t *v;
    size_t len;
    grit_metadata_get(pairs, i, &k, &v, &len);
    if (grit_metadata_add_unchecked(md, k, strlen(k), v, len) != GRIT_OK) {
      grit_metadata_destroy(md);
      return false;
    }
  }
  grit_metadata_destroy(a->creds_md);
  a->creds_md = md;
  return true;
}

static void creds_task(grit_task *t) {
  attempt_creds *w = GRIT_CONTAINER_OF(t, attempt_creds, task);
  grit_channel *ch = w->ch;
  call_attempt *a = w->a;
  if (!a) { /* the attempt was dropped after the answer came */
    creds_free(w);
    grit_channel_unref(ch);
    return;
  }
  if (!grit_creds_fetch_resume(w->f)) {
    grit_channel_unref(ch); /* the next credential was asked */
    return;
  }
  const grit_metadata *pairs;
  const char *msg;
  grit_status_code code = grit_creds_fetch_result(w->f, &pairs, &msg);
  bool ok = code == GRIT_STATUS_OK && creds_apply(a, pairs);
  if (code == GRIT_STATUS_OK && !ok) {
    code = GRIT_STATUS_RESOURCE_EXHAUSTED;
    msg = "out of memory adding call credentials";
  }
  char copy[256];
  grit_str_copy(copy, sizeof(copy), msg);
  a->creds_wait = NULL;
  grit_creds_fetch_release(w->f);
  creds_free(w);
  if (ok)
    grit_attempt_pick_now(a);
  else /* CR-02: the attempt fails with the credential's status */
    a->c->hooks->attempt_event(a, GRIT_CALLSM_EV_PICK_FAILED, code, copy);
  grit_channel_unref(ch);
}

/* The milliseconds left before the call's deadline; -1: none. */
static int64_t creds_deadline_left(const grit_call *c) {
  if (!c->deadline_at_ms)
    return -1;
  uint64_t now = uv_now(&c->ch->rt->loop);
  return now >= c->deadline_at_ms ? 0 : (int64_t)(c->deadline_at_ms - now);
}

void grit_attempt_begin(call_attempt *a) {
  grit_call *c = a->c;
  if (!c->auth || !c->auth->creds) {
    grit_attempt_pick_now(a);
    return;
  }
  attempt_creds *w = grit_calloc(1, sizeof(*w));
  const char *authority = c->authority ? c->authority : c->ch->target.authority;
  char url[512], name[256];
  if (!grit_creds_service_url(authority, c->method, url, sizeof(url), name,
                              sizeof(name))) {
    url[0] = '\0';
    grit_str_copy(name, sizeof(name), c->method);
  }
  grit_creds_ctx ctx = {
      .service_url = url,
      .method_name = name,
      .authority = authority,
      .deadline_left_ms = creds_deadline_left(c),
      .attempt = a->number,
  };
  if (w) {
    w->task.fn = creds_task;
    w->a = a;
    w->ch = c->ch;
    a->creds_wait = w;
  }
  if (!w || grit_creds_fetch_start(c->auth->creds, &ctx, creds_ready, w,
                                   &w->f) != GRIT_OK) {
    if (w) {
      a->creds_wait = NULL;
      creds_free(w);
    }
    a->c->hooks->attempt_event(a, GRIT_CALLSM_EV_PICK_FAILED,
                               GRIT_STATUS_RESOURCE_EXHAUSTED,
                               "out of memory asking for call credentials");
    return;
  }
  /* The answer may have come already (a built-in credential): its task is
   * posted and runs after this list, as every other answer does. */
}

void grit_attempt_creds_release(call_attempt *a) {
  attempt_creds *w = a->creds_wait;
  grit_metadata_destroy(a->creds_md);
  a->creds_md = NULL;
  if (!w)
    return;
  a->creds_wait = NULL;
  w->a = NULL;
  if (!grit_creds_fetch_release(w->f))
    creds_free(w); /* no task is coming */
  /* else: the posted task sees w->a == NULL and frees it */
}
