/* The server reflection client (grpc.reflection.v1.ServerReflection, and
 * v1alpha for servers without v1: the same messages under another
 * service name). One bidi call per job: a request, then its response,
 * until the job is done. The few message fields used are encoded and
 * read here directly with the wire helpers. */
#include "pbjson/pbjson_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const REFL_PATH[2] = {
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
};

/* ServerReflectionRequest fields. */
enum {
  REQ_FILE_BY_FILENAME = 3,
  REQ_FILE_CONTAINING_SYMBOL = 4,
  REQ_LIST_SERVICES = 7
};
/* ServerReflectionResponse fields. */
enum { RESP_FILE_DESCRIPTOR = 4, RESP_LIST_SERVICES = 6, RESP_ERROR = 7 };

typedef struct refl {
  grit_channel *ch;
  grit_call_opts opts;
  grit_call *call;
  int version;
  bool unimplemented; /* the server lacks this version */
  char *err;
  size_t errlen;
} refl;

/* Send one request and read its response into |resp|. False with err
 * set, or with |unimplemented| when the server lacks the service. */
static bool ask(refl *r, int field, const char *arg, grit_bytes *resp) {
  if (!r->call && grit_call_start(r->ch, REFL_PATH[r->version], &r->opts, NULL,
                                  NULL, &r->call) != GRIT_OK) {
    snprintf(r->err, r->errlen, "cannot start the reflection call");
    return false;
  }
  pbj_buf req = {0};
  pbj_put_tag(&req, (uint32_t)field, 2);
  pbj_put_varint(&req, strlen(arg));
  pbj_puts(&req, arg);
  grit_err rv =
      req.oom ? GRIT_ERR_NOMEM : grit_call_send(r->call, req.p, req.len);
  pbj_buf_free(&req);
  if (rv == GRIT_OK)
    rv = grit_call_recv(r->call, resp);
  if (rv == GRIT_OK)
    return true;
  grit_status st = {0};
  grit_call_finish(r->call, &st);
  if (st.code == GRIT_STATUS_UNIMPLEMENTED)
    r->unimplemented = true;
  snprintf(r->err, r->errlen, "server reflection (%s) failed: %s: %s",
           REFL_PATH[r->version], grit_status_code_name(st.code),
           st.message ? st.message : "");
  grit_status_free(&st);
  return false;
}

static void end_call(refl *r) {
  if (!r->call)
    return;
  grit_call_close_send(r->call);
  grit_status st = {0};
  grit_call_finish(r->call, &st);
  grit_status_free(&st);
  grit_call_destroy(r->call);
  r->call = NULL;
}

/* The response's error_response as text, if it is one. */
static bool response_error(refl *r, const grit_bytes *resp) {
  const uint8_t *p = resp->data, *end = p + resp->len;
  pbj_wire_field w, x;
  int rc;
  while ((rc = pbj_wire_next(&p, end, &w)) == 1) {
    if (w.num != RESP_ERROR || w.wt != 2)
      continue;
    int code = 0;
    const char *msg = "";
    size_t msg_len = 0;
    const uint8_t *q = w.data, *qe = w.data + w.len;
    while (pbj_wire_next(&q, qe, &x) == 1) {
      if (x.num == 1 && x.wt == 0)
        code = (int)x.v;
      else if (x.num == 2 && x.wt == 2) {
        msg = (const char *)x.data;
        msg_len = x.len;
      }
    }
    snprintf(r->err, r->errlen, "server reflection: %s: %.*s",
             grit_status_code_name((grit_status_code)code)
                 ? grit_status_code_name((grit_status_code)code)
                 : "error",
             (int)msg_len, msg);
    return true;
  }
  if (rc < 0) {
    snprintf(r->err, r->errlen, "server reflection: a malformed response");
    return true;
  }
  return false;
}

/* Add the file_descriptor_response's files to |pool|. */
static bool add_files(refl *r, pbj_pool *pool, const grit_bytes *resp) {
  if (response_error(r, resp))
    return false;
  const uint8_t *p = resp->data, *end = p + resp->len;
  pbj_wire_field w, x;
  size_t added = 0;
  while (pbj_wire_next(&p, end, &w) == 1) {
    if (w.num != RESP_FILE_DESCRIPTOR || w.wt != 2)
      continue;
    const uint8_t *q = w.data, *qe = w.data + w.len;
    while (pbj_wire_next(&q, qe, &x) == 1) {
      if (x.num != 1 || x.wt != 2)
        continue;
      if (!pbj_pool_add_file(pool, x.data, x.len, r->err, r->errlen))
        return false;
      added++;
    }
  }
  if (added == 0)
    snprintf(r->err, r->errlen, "server reflection: no file descriptors");
  return added > 0;
}

typedef bool (*job_fn)(refl *r, void *ctx);

/* Run |job| over v1, then over v1alpha if the server lacks v1. */
static bool run(grit_channel *ch, const grit_call_opts *opts, job_fn job,
                void *ctx, char *err, size_t errlen) {
  for (int version = 0; version < 2; version++) {
    refl r = {.ch = ch,
              .opts = {.version = GRIT_CALL_OPTS_VERSION},
              .version = version,
              .err = err,
              .errlen = errlen};
    if (opts)
      r.opts = *opts;
    r.opts.kind = GRIT_METHOD_BIDI_STREAMING;
    bool ok = job(&r, ctx);
    end_call(&r);
    if (ok || !r.unimplemented)
      return ok;
  }
  return false;
}

typedef struct symbol_job {
  pbj_pool *pool;
  const char *symbol;
} symbol_job;

static bool symbol_run(refl *r, void *ctx) {
  symbol_job *j = ctx;
  grit_bytes resp = {0};
  if (!ask(r, REQ_FILE_CONTAINING_SYMBOL, j->symbol, &resp))
    return false;
  bool ok = add_files(r, j->pool, &resp);
  grit_bytes_free(&resp);
  /* Fetch imports the server did not send along. */
  for (int i = 0; ok && i < 1000; i++) {
    const char *dep = pbj_pool_missing_dep(j->pool);
    if (!dep)
      return true;
    char name[512];
    snprintf(name, sizeof(name), "%s", dep);
    ok = ask(r, REQ_FILE_BY_FILENAME, name, &resp) &&
         add_files(r, j->pool, &resp);
    grit_bytes_free(&resp);
    if (ok && !pbj_pool_has_file(j->pool, name)) {
      snprintf(r->err, r->errlen,
               "server reflection: asked for %s, got other files", name);
      ok = false;
    }
  }
  return ok && !pbj_pool_missing_dep(j->pool);
}

bool pbj_reflect_symbol(grit_channel *ch, const grit_call_opts *opts,
                        pbj_pool *pool, const char *symbol, char *err,
                        size_t errlen) {
  symbol_job j = {pool, symbol};
  return run(ch, opts, symbol_run, &j, err, errlen);
}

typedef struct list_job {
  char **names;
  size_t n;
} list_job;

static bool list_run(refl *r, void *ctx) {
  list_job *j = ctx;
  grit_bytes resp = {0};
  if (!ask(r, REQ_LIST_SERVICES, "", &resp))
    return false;
  bool ok = !response_error(r, &resp);
  const uint8_t *p = resp.data, *end = p + resp.len;
  pbj_wire_field w, x, y;
  while (ok && pbj_wire_next(&p, end, &w) == 1) {
    if (w.num != RESP_LIST_SERVICES || w.wt != 2)
      continue;
    const uint8_t *q = w.data, *qe = w.data + w.len;
    while (ok && pbj_wire_next(&q, qe, &x) == 1) {
      if (x.num != 1 || x.wt != 2)
        continue;
      const uint8_t *s = x.data, *se = x.data + x.len;
      while (ok && pbj_wire_next(&s, se, &y) == 1) {
        if (y.num != 1 || y.wt != 2)
          continue;
        char **v = realloc(j->names, (j->n + 1) * sizeof(*v));
        char *name = v ? strndup((const char *)y.data, y.len) : NULL;
        if (v)
          j->names = v;
        if (!name) {
          snprintf(r->err, r->errlen, "out of memory");
          ok = false;
          break;
        }
        j->names[j->n++] = name;
      }
    }
  }
  grit_bytes_free(&resp);
  return ok;
}

bool pbj_reflect_list(grit_channel *ch, const grit_call_opts *opts,
                      char ***names, size_t *n, char *err, size_t errlen) {
  list_job j = {0};
  bool ok = run(ch, opts, list_run, &j, err, errlen);
  if (!ok) {
    for (size_t i = 0; i < j.n; i++)
      free(j.names[i]);
    free(j.names);
    j = (list_job){0};
  }
  *names = j.names;
  *n = j.n;
  return ok;
}
