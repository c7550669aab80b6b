/* The callback stubs (issue 29 part 6): for each streaming method an
 * asynchronous form whose callbacks get typed messages, and for each unary
 * method L__call_ex, which also hands back the response headers, the
 * trailers and grit_call_info. Written beside emit.c's blocking stubs:
 *
 *   every streaming method:   L__async (caller storage, L__ASYNC_INIT),
 *                             L__async_cbs, L__async_start,
 *                             L__async_cancel, L__async_info,
 *                             L__async_destroy
 *   client or bidi streaming: L__async_send (waits for room),
 *                             L__async_try_send (GRIT_ERR_AGAIN, then
 *                             on_send_ready), L__async_close_send
 *   unary:                    L__call_ex with a grit_stub_result,
 *                             L__call_async_ex with L__unary_cbs
 *
 * A response that does not decode cancels the call and its on_done gets
 * INTERNAL, as the blocking stubs do (README "Generated stubs"). The
 * generated text is kept in this file's own functions so the blocking
 * stubs in emit.c can change on their own. */
#include "codegen.h"

#include <stdio.h>
#include <string.h>

static const char *kindsym(bool cs, bool ss) {
  return cs && ss ? "GRIT_METHOD_BIDI_STREAMING"
         : cs     ? "GRIT_METHOD_CLIENT_STREAMING"
                  : "GRIT_METHOD_SERVER_STREAMING";
}

/* Once per .grit.c with a streaming method, after emit.c's common
 * helpers (grit_stub_opts, grit_stub_pack). The state an asynchronous
 * stream shares between the caller's handle, the starting thread and the
 * callbacks is counted (three holders) so that on_done may free the
 * caller's struct, and a callback may run before the start returns. */
static const char *const async_common[] = {
    "/* ---- asynchronous streams ---- */\n\n"
    "/* One asynchronous stream's state, held by the caller's handle, the\n"
    " * start (while it runs) and the call's on_done: the last to let go\n"
    " * releases the call. |call| is stored by the start and by every\n"
    " * callback (the same value), since a callback may run before the\n"
    " * start has returned. */\n"
    "typedef struct grit_stub_actx {\n"
    "  int refs;         /* atomic */\n"
    "  grit_call *call;  /* atomic */\n"
    "  void *s;          /* the caller's stream struct */\n"
    "  void *user_data;\n"
    "  const ProtobufCMessageDescriptor *rd;\n"
    "  grit_err send_err;       /* atomic: the request could not be sent */\n"
    "  bool bad;                /* I/O thread: a response did not decode */\n"
    "  ProtobufCMessage *resp;  /* I/O thread: client streaming's response */\n"
    "} grit_stub_actx;\n\n"
    "static void grit_stub_actx_unref(grit_stub_actx *a) {\n"
    "  if (__atomic_sub_fetch(&a->refs, 1, __ATOMIC_ACQ_REL) != 0)\n"
    "    return;\n"
    "  grit_call_destroy(__atomic_load_n(&a->call, __ATOMIC_ACQUIRE));\n"
    "  if (a->resp)\n"
    "    protobuf_c_message_free_unpacked(a->resp, "
    "GRIT_PROTOBUF_C_ALLOCATOR);\n"
    "  grit_allocator_free(NULL, a);\n"
    "}\n\n",
    "static void grit_stub_actx_enter(grit_stub_actx *a, grit_call *call) {\n"
    "  __atomic_store_n(&a->call, call, __ATOMIC_RELEASE);\n"
    "}\n\n",
    "/* Decode one response; NULL after a response that did not decode\n"
    " * (the call is cancelled then, and on_done reports INTERNAL). */\n"
    "static ProtobufCMessage *grit_stub_actx_decode(grit_stub_actx *a,\n"
    "                                               grit_call *call,\n"
    "                                               const uint8_t *data,\n"
    "                                               size_t len) {\n"
    "  grit_stub_actx_enter(a, call);\n"
    "  if (a->bad)\n"
    "    return NULL;\n"
    "  ProtobufCMessage *m = protobuf_c_message_unpack(a->rd, "
    "GRIT_PROTOBUF_C_ALLOCATOR, len, "
    "data);\n"
    "  if (!m) {\n"
    "    a->bad = true;\n"
    "    grit_call_cancel(call);\n"
    "  }\n"
    "  return m;\n"
    "}\n\n",
    "/* The status on_done reports: |st|, or INTERNAL when a response did\n"
    " * not decode, or the reason the start could not send the request. */\n"
    "static const grit_status *grit_stub_actx_status(grit_stub_actx *a,\n"
    "                                                const grit_status *st,\n"
    "                                                grit_status *local,\n"
    "                                                char *msg, size_t cap) "
    "{\n"
    "  grit_err se = __atomic_load_n(&a->send_err, __ATOMIC_ACQUIRE);\n"
    "  if (!a->bad && (se == GRIT_OK || st->code != GRIT_STATUS_CANCELLED))\n"
    "    return st;\n"
    "  *local = *st;\n"
    "  if (a->bad) {\n"
    "    snprintf(msg, cap, \"grit: the response does not decode as %s\",\n"
    "             a->rd->name);\n"
    "    local->code = GRIT_STATUS_INTERNAL;\n"
    "  } else {\n"
    "    snprintf(msg, cap, \"grit: the request could not be sent: %s\",\n"
    "             grit_strerror(se));\n"
    "    local->code = se == GRIT_ERR_NOMEM ? "
    "GRIT_STATUS_RESOURCE_EXHAUSTED\n"
    "                                      : GRIT_STATUS_INTERNAL;\n"
    "  }\n"
    "  local->message = msg;\n"
    "  return local;\n"
    "}\n\n",
    "/* Start the call of |a|; for server streaming (|send_req|) also send\n"
    " * |req| and half-close. On error no callback runs and |a| is the\n"
    " * caller's to free; on GRIT_OK on_done runs exactly once. */\n"
    "static grit_err grit_stub_astart(grit_channel *ch, const char *path,\n"
    "                                 const grit_call_opts *opts,\n"
    "                                 grit_method_kind kind,\n"
    "                                 const grit_call_cbs *cbs,\n"
    "                                 grit_stub_actx *a,\n"
    "                                 const ProtobufCMessage *req,\n"
    "                                 bool send_req) {\n"
    "  uint8_t *buf = NULL;\n"
    "  size_t len = 0;\n"
    "  grit_err rv = send_req ? grit_stub_pack(req, &buf, &len) : GRIT_OK;\n"
    "  if (rv != GRIT_OK)\n"
    "    return rv;\n"
    "  grit_call_opts o = grit_stub_opts(opts, kind);\n"
    "  a->refs = 3; /* the caller's handle, on_done, this start */\n"
    "  grit_call *c;\n"
    "  rv = grit_call_start(ch, path, &o, cbs, a, &c);\n"
    "  if (rv != GRIT_OK) {\n"
    "    grit_allocator_free(NULL, buf);\n"
    "    return rv;\n"
    "  }\n"
    "  grit_stub_actx_enter(a, c);\n"
    "  if (send_req) {\n"
    "    /* The first message is taken at once: nothing is unsent yet. */\n"
    "    grit_err se = grit_call_send(c, buf, len);\n"
    "    if (se == GRIT_OK)\n"
    "      se = grit_call_close_send(c);\n"
    "    /* CALL_STATE: the call has already ended; on_done says how. */\n"
    "    if (se != GRIT_OK && se != GRIT_ERR_CALL_STATE) {\n"
    "      __atomic_store_n(&a->send_err, se, __ATOMIC_RELEASE);\n"
    "      grit_call_cancel(c);\n"
    "    }\n"
    "  }\n"
    "  grit_allocator_free(NULL, buf);\n"
    "  grit_stub_actx_unref(a);\n"
    "  return GRIT_OK;\n"
    "}\n\n",
    NULL};

/* Once per .grit.c with a streaming method. */
static const char *const async_stream[] = {
    "static grit_call *grit_stub_actx_call(grit_stub_actx *a) {\n"
    "  return __atomic_load_n(&a->call, __ATOMIC_ACQUIRE);\n"
    "}\n\n",
    NULL};

/* Once per .grit.c with a client- or bidi-streaming method. */
static const char *const async_send[] = {
    "static grit_err grit_stub_asend(grit_stub_actx *a, const "
    "ProtobufCMessage *m,\n"
    "                                unsigned flags) {\n"
    "  uint8_t *buf;\n"
    "  size_t len;\n"
    "  grit_err rv = grit_stub_pack(m, &buf, &len);\n"
    "  if (rv == GRIT_OK)\n"
    "    rv = grit_call_send_flags(grit_stub_actx_call(a), buf, len, "
    "flags);\n"
    "  grit_allocator_free(NULL, buf);\n"
    "  return rv;\n"
    "}\n\n",
    NULL};

/* Once per .grit.c with a unary method. */
static const char *const unary_ex_common[] = {
    "/* ---- unary calls with headers, trailers and call info ---- */\n\n"
    "static grit_err grit_stub_unary_ex(grit_channel *ch, const char *path,\n"
    "                                   const ProtobufCMessage *req,\n"
    "                                   const grit_call_opts *opts,\n"
    "                                   const ProtobufCMessageDescriptor "
    "*rd,\n"
    "                                   ProtobufCMessage **resp,\n"
    "                                   grit_status *status,\n"
    "                                   grit_stub_result *result) {\n"
    "  grit_status local = {0};\n"
    "  grit_status *st = status ? status : &local;\n"
    "  if (resp)\n"
    "    *resp = NULL;\n"
    "  if (result)\n"
    "    *result = (grit_stub_result)GRIT_STUB_RESULT_INIT;\n"
    "  uint8_t *buf = NULL;\n"
    "  size_t len;\n"
    "  grit_err rv = ch ? grit_stub_pack(req, &buf, &len) : "
    "GRIT_ERR_INVALID_ARG;\n"
    "  grit_call *c = NULL;\n"
    "  grit_call_opts o = grit_stub_opts(opts, GRIT_METHOD_UNARY);\n"
    "  if (rv == GRIT_OK)\n"
    "    rv = grit_call_start(ch, path, &o, NULL, NULL, &c);\n"
    "  if (rv != GRIT_OK) {\n"
    "    grit_allocator_free(NULL, buf);\n"
    "    grit_stub_fail(st, rv);\n"
    "    grit_status_free(&local);\n"
    "    return rv;\n"
    "  }\n"
    "  /* CALL_STATE here means the call already ended: finish says how. */\n"
    "  grit_err se = grit_call_send(c, buf, len);\n"
    "  grit_allocator_free(NULL, buf);\n"
    "  if (se == GRIT_OK)\n"
    "    grit_call_close_send(c);\n"
    "  else if (se != GRIT_ERR_CALL_STATE)\n"
    "    grit_call_cancel(c);\n"
    "  const grit_metadata *headers = grit_call_headers(c);\n"
    "  grit_bytes b = {0};\n"
    "  grit_err got = grit_call_recv(c, &b);\n"
    "  rv = grit_call_finish(c, st);\n"
    "  if (rv == GRIT_OK && se != GRIT_OK && se != GRIT_ERR_CALL_STATE &&\n"
    "      st->code == GRIT_STATUS_CANCELLED) {\n"
    "    char msg[160];\n"
    "    snprintf(msg, sizeof(msg), \"grit: the request could not be sent: "
    "%s\",\n"
    "             grit_strerror(se));\n"
    "    grit_status_replace(st, se == GRIT_ERR_NOMEM\n"
    "                                ? GRIT_STATUS_RESOURCE_EXHAUSTED\n"
    "                                : GRIT_STATUS_INTERNAL, msg);\n"
    "  }\n"
    "  if (rv == GRIT_OK && st->code == GRIT_STATUS_OK && got == GRIT_OK) {\n"
    "    ProtobufCMessage *m = protobuf_c_message_unpack(rd, "
    "GRIT_PROTOBUF_C_ALLOCATOR, b.len, "
    "b.data);\n"
    "    if (!m)\n"
    "      grit_stub_bad_response(st, rd->name);\n"
    "    else if (resp)\n"
    "      *resp = m;\n"
    "    else\n"
    "      protobuf_c_message_free_unpacked(m, GRIT_PROTOBUF_C_ALLOCATOR);\n"
    "  }\n"
    "  grit_bytes_free(&b);\n"
    "  grit_status_free(&local);\n"
    "  if (result) {\n"
    "    grit_call_get_info(c, &result->info);\n"
    "    result->headers = headers;\n"
    "    result->call = c;\n"
    "  } else {\n"
    "    grit_call_destroy(c);\n"
    "  }\n"
    "  return rv;\n"
    "}\n\n",
    NULL};

/* Once per .grit.h with a unary method: the result type L__call_ex fills,
 * guarded since a program may include several generated headers. */
static const char *const result_type[] = {
    "#ifndef GRIT_STUB_RESULT_DEFINED\n"
    "#define GRIT_STUB_RESULT_DEFINED\n"
    "/** What a unary call gives besides its response and status (whose\n"
    " * |trailers| are the trailing metadata), filled by the L__call_ex "
    "stubs.\n"
    " * Initialise with GRIT_STUB_RESULT_INIT; release with\n"
    " * grit_stub_result_free once done with |headers|. */\n"
    "typedef struct grit_stub_result {\n"
    "  /** The response headers (an empty list for a Trailers-Only "
    "response),\n"
    "   * borrowed from |call|: valid until grit_stub_result_free. NULL when "
    "the\n"
    "   * call did not run. */\n"
    "  const grit_metadata *headers;\n"
    "  /** Attempts, hedges, backoff, peer and encodings (SPEC MX-02); all\n"
    "   * zero when the call did not run. */\n"
    "  grit_call_info info;\n"
    "  /** The finished call, kept for |headers|. */\n"
    "  grit_call *call;\n"
    "} grit_stub_result;\n\n"
    "#define GRIT_STUB_RESULT_INIT {NULL, GRIT_CALL_INFO_INIT, NULL}\n\n"
    "/** Release what |r| holds and reset it to GRIT_STUB_RESULT_INIT.\n"
    " * Thread: any. NULL is a no-op. */\n"
    "static inline void grit_stub_result_free(grit_stub_result *r) {\n"
    "  if (r) {\n"
    "    grit_call_destroy(r->call);\n"
    "    *r = (grit_stub_result)GRIT_STUB_RESULT_INIT;\n"
    "  }\n"
    "}\n"
    "#endif\n\n",
    NULL};

/* Text kept as pieces under the 4095 bytes C11 promises per literal. */
static void emit_text(cg_buf *b, const char *const *pieces) {
  for (; *pieces; pieces++)
    cg_printf(b, "%s", *pieces);
}

void cg_emit_async_common(cg_buf *h, cg_buf *c,
                          const Google__Protobuf__FileDescriptorProto *f) {
  bool any_unary = false, any_stream = false, any_send = false;
  for (size_t i = 0; i < f->n_service; i++) {
    for (size_t j = 0; j < f->service[i]->n_method; j++) {
      const Google__Protobuf__MethodDescriptorProto *m =
          f->service[i]->method[j];
      bool cs = m->has_client_streaming && m->client_streaming;
      bool ss = m->has_server_streaming && m->server_streaming;
      any_unary |= !cs && !ss;
      any_stream |= cs || ss;
      any_send |= cs;
    }
  }
  if (any_unary) {
    emit_text(h, result_type);
    emit_text(c, unary_ex_common);
  }
  if (any_stream || any_unary) /* __call_async_ex uses it too */
    emit_text(c, async_common);
  if (any_stream)
    emit_text(c, async_stream);
  if (any_send)
    emit_text(c, async_send);
}

/* L__call_async_ex: a unary call with callbacks for the response headers
 * and for the end, which also gets grit_call_info (as the C++
 * ClientUnaryReactor's OnReadInitialMetadataDone and OnDone). */
static void emit_unary_async_ex(cg_buf *h, cg_buf *c, const cg_method *m) {
  const char *l = m->l;
  cg_printf(h,
            "/** The callbacks of %s__call_async_ex, on grit's I/O thread; "
            "only\n"
            " * on_done is required. */\n"
            "typedef struct %s__unary_cbs {\n"
            "  /** The response headers, borrowed for the callback (not for "
            "a\n"
            "   * Trailers-Only response). */\n"
            "  void (*on_headers)(const grit_metadata *headers, void "
            "*user_data);\n"
            "  /** Exactly once, last: |status| (its trailers included) and "
            "|info|\n"
            "   * are borrowed for the callback; |resp| is new (free with\n"
            "   * %s__free_unpacked) and NULL unless the status is OK;\n"
            "   * a response that does not decode ends the call INTERNAL. "
            "*/\n"
            "  void (*on_done)(const grit_status *status, %s *resp,\n"
            "      const grit_call_info *info, void *user_data);\n"
            "} %s__unary_cbs;\n\n"
            "/** Asynchronous unary call of %s with its headers and call\n"
            " * info. |req| NULL sends the default message; |opts| may be "
            "NULL;\n"
            " * |cbs| is copied. Returns GRIT_OK (on_done will run); "
            "GRIT_ERR_INVALID_ARG\n"
            " * (|ch|, |cbs| or cbs->on_done NULL, or what grit_call_start "
            "rejects);\n"
            " * GRIT_ERR_NOMEM; GRIT_ERR_SHUTDOWN; on error no callback "
            "runs.\n"
            " * Thread: any. */\n"
            "grit_err %s__call_async_ex(grit_channel *ch, const %s *req,\n"
            "    const grit_call_opts *opts, const %s__unary_cbs *cbs,\n"
            "    void *user_data);\n\n",
            l, l, m->out_l, m->out_c, l, m->path, l, m->in_c, l);
  cg_printf(c,
            "struct %s__uctx {\n"
            "  grit_stub_actx base; /* first */\n"
            "  %s__unary_cbs cbs;\n"
            "};\n\n"
            "static void %s__u_headers(grit_call *call, const grit_metadata "
            "*md,\n"
            "    void *ud) {\n"
            "  struct %s__uctx *x = ud;\n"
            "  grit_stub_actx_enter(&x->base, call);\n"
            "  if (x->cbs.on_headers)\n"
            "    x->cbs.on_headers(md, x->base.user_data);\n"
            "}\n\n"
            "static void %s__u_message(grit_call *call, const uint8_t "
            "*data,\n"
            "    size_t len, void *ud) {\n"
            "  struct %s__uctx *x = ud;\n"
            "  ProtobufCMessage *m = grit_stub_actx_decode(&x->base, call, "
            "data, len);\n"
            "  if (!m)\n"
            "    return;\n"
            "  if (x->base.resp) /* the core lets one through (SPEC AP-02) "
            "*/\n"
            "    protobuf_c_message_free_unpacked(x->base.resp, "
            "GRIT_PROTOBUF_C_ALLOCATOR);\n"
            "  x->base.resp = m;\n"
            "}\n\n",
            l, l, l, l, l, l);
  cg_printf(
      c,
      "static void %s__u_done(grit_call *call, const grit_status *st,\n"
      "    void *ud) {\n"
      "  struct %s__uctx *x = ud;\n"
      "  grit_status local;\n"
      "  char msg[256];\n"
      "  grit_call_info info = GRIT_CALL_INFO_INIT;\n"
      "  grit_stub_actx_enter(&x->base, call);\n"
      "  const grit_status *out =\n"
      "      grit_stub_actx_status(&x->base, st, &local, msg, "
      "sizeof(msg));\n"
      "  ProtobufCMessage *r = x->base.resp;\n"
      "  x->base.resp = NULL;\n"
      "  if (r && out->code != GRIT_STATUS_OK) {\n"
      "    protobuf_c_message_free_unpacked(r, GRIT_PROTOBUF_C_ALLOCATOR);\n"
      "    r = NULL;\n"
      "  }\n"
      "  if (grit_call_get_info(call, &info) != GRIT_OK)\n"
      "    info = (grit_call_info)GRIT_CALL_INFO_INIT;\n"
      "  x->cbs.on_done(out, (%s *)r, &info, x->base.user_data);\n"
      "  grit_stub_actx_unref(&x->base);\n"
      "}\n\n"
      "static const grit_call_cbs %s__u_cbs = {\n"
      "  .version = GRIT_CALL_CBS_VERSION,\n"
      "  .on_headers = %s__u_headers,\n"
      "  .on_message = %s__u_message,\n"
      "  .on_done = %s__u_done,\n"
      "};\n\n",
      l, l, m->out_c, l, l, l, l);
  cg_printf(c,
            "grit_err %s__call_async_ex(grit_channel *ch, const %s *req,\n"
            "    const grit_call_opts *opts, const %s__unary_cbs *cbs,\n"
            "    void *user_data) {\n"
            "  if (!ch || !cbs || !cbs->on_done)\n"
            "    return GRIT_ERR_INVALID_ARG;\n"
            "  struct %s__uctx *x = grit_allocator_alloc(NULL, sizeof(*x));\n"
            "  if (x)\n"
            "    memset(x, 0, sizeof(*x));\n"
            "  if (!x)\n"
            "    return GRIT_ERR_NOMEM;\n"
            "  x->base.user_data = user_data;\n"
            "  x->base.rd = &%s__descriptor;\n"
            "  x->cbs = *cbs;\n"
            "  grit_err rv = grit_stub_astart(ch, %s__PATH, opts,\n"
            "      GRIT_METHOD_UNARY, &%s__u_cbs, &x->base,\n"
            "      (const ProtobufCMessage *)req, true);\n"
            "  if (rv != GRIT_OK) {\n"
            "    grit_allocator_free(NULL, x);\n"
            "    return rv;\n"
            "  }\n"
            "  grit_stub_actx_unref(&x->base); /* no caller handle here */\n"
            "  return GRIT_OK;\n"
            "}\n\n",
            l, m->in_c, l, l, m->out_l, m->u, l);
}

void cg_emit_unary_ex(cg_buf *h, cg_buf *c, const cg_method *m) {
  cg_printf(h,
            "/** %s__call with more of the outcome: as that, and when "
            "|result|\n"
            " * is not NULL it receives the response headers and the call's\n"
            " * grit_call_info (the trailers are |status->trailers|); "
            "release it\n"
            " * with grit_stub_result_free, on every return. |ch| NULL: "
            "GRIT_ERR_INVALID_ARG.\n"
            " * Thread: any but grit's I/O thread. */\n"
            "grit_err %s__call_ex(grit_channel *ch, const %s *req,\n"
            "    const grit_call_opts *opts, %s **resp, grit_status "
            "*status,\n"
            "    grit_stub_result *result);\n\n",
            m->l, m->l, m->in_c, m->out_c);
  cg_printf(c,
            "grit_err %s__call_ex(grit_channel *ch, const %s *req,\n"
            "    const grit_call_opts *opts, %s **resp, grit_status "
            "*status,\n"
            "    grit_stub_result *result) {\n"
            "  return grit_stub_unary_ex(ch, %s__PATH,\n"
            "      (const ProtobufCMessage *)req, opts, &%s__descriptor,\n"
            "      (ProtobufCMessage **)resp, status, result);\n"
            "}\n\n",
            m->l, m->in_c, m->out_c, m->u, m->out_l);
  emit_unary_async_ex(h, c, m);
}

static void emit_async_header(cg_buf *h, const cg_method *m, bool cs, bool ss,
                              const char *kind) {
  const char *l = m->l;
  cg_printf(h,
            "/** An asynchronous %s call of %s, in caller storage\n"
            " * (initialise with %s__ASYNC_INIT). After %s__async_start "
            "returns\n"
            " * GRIT_OK, on_done runs exactly once, last; the struct must "
            "stay valid\n"
            " * until it has returned, and %s__async_destroy must be called "
            "once\n"
            " * (from any thread, on_done included). */\n"
            "typedef struct %s__async {\n"
            "  struct %s__async_ctx *ctx; /* grit's; NULL when not started "
            "*/\n"
            "} %s__async;\n\n"
            "#define %s__ASYNC_INIT {NULL}\n\n",
            kind, m->path, m->u, l, l, l, l, l, m->u);
  cg_printf(h,
            "/** The callbacks of a %s__async call, on grit's I/O thread "
            "(never\n"
            " * block in them; %s__async_try_send is the send to use there).\n"
            " * Only on_done is required. */\n"
            "typedef struct %s__async_cbs {\n"
            "  /** The response headers (borrowed for the callback); not for "
            "a\n"
            "   * Trailers-Only response. */\n"
            "  void (*on_headers)(%s__async *s, const grit_metadata *headers,\n"
            "      void *user_data);\n",
            l, l, l, l);
  if (ss)
    cg_printf(h,
              "  /** One response, decoded: |msg| is new, the callback's to "
              "free\n"
              "   * (%s__free_unpacked). One that does not decode is not "
              "passed on:\n"
              "   * the call is cancelled and ends INTERNAL. */\n"
              "  void (*on_message)(%s__async *s, %s *msg, void *user_data);\n"
              "  /** The call ended with |status| (borrowed for the "
              "callback). */\n"
              "  void (*on_done)(%s__async *s, const grit_status *status,\n"
              "      void *user_data);\n",
              m->out_l, l, m->out_c, l);
  else
    cg_printf(h,
              "  /** The call ended with |status| (borrowed for the "
              "callback); on OK\n"
              "   * |resp| is the one response, new (free with "
              "%s__free_unpacked),\n"
              "   * else NULL. A response that does not decode ends the "
              "call INTERNAL. */\n"
              "  void (*on_done)(%s__async *s, const grit_status *status,\n"
              "      %s *resp, void *user_data);\n",
              m->out_l, l, m->out_c);
  if (cs)
    cg_printf(h,
              "  /** After %s__async_try_send returned GRIT_ERR_AGAIN: there "
              "is\n"
              "   * room again (once per refusal; not after the call ended). "
              "*/\n"
              "  void (*on_send_ready)(%s__async *s, void *user_data);\n",
              l, l);
  cg_printf(h, "} %s__async_cbs;\n\n", l);
  if (ss && !cs)
    cg_printf(h,
              "/** Start the call: send |req| (NULL: the default message) "
              "and\n"
              " * half-close; responses come to cbs->on_message. |opts| may "
              "be NULL\n"
              " * (kind is set to %s). |cbs| is copied; |user_data|\n"
              " * is passed to every callback. Callbacks may run before this "
              "returns.\n"
              " * Returns GRIT_OK (on_done will run); GRIT_ERR_INVALID_ARG "
              "(|ch|, |s|,\n"
              " * |cbs| or cbs->on_done NULL, or what grit_call_start "
              "rejects);\n"
              " * GRIT_ERR_NOMEM; GRIT_ERR_SHUTDOWN. On error no callback "
              "runs and\n"
              " * |s->ctx| is NULL. Thread: any. */\n"
              "grit_err %s__async_start(grit_channel *ch, const %s *req,\n"
              "    const grit_call_opts *opts, const %s__async_cbs *cbs,\n"
              "    void *user_data, %s__async *s);\n\n",
              kindsym(cs, ss), l, m->in_c, l, l);
  else
    cg_printf(h,
              "/** Start the call; send with %s__async_send or\n"
              " * %s__async_try_send, then %s__async_close_send.\n"
              " * |opts| may be NULL (kind is set to %s).\n"
              " * |cbs| is copied; |user_data| is passed to every callback.\n"
              " * Callbacks may run before this returns.\n"
              " * Returns GRIT_OK (on_done will run); GRIT_ERR_INVALID_ARG "
              "(|ch|, |s|,\n"
              " * |cbs| or cbs->on_done NULL, or what grit_call_start "
              "rejects);\n"
              " * GRIT_ERR_NOMEM; GRIT_ERR_SHUTDOWN. On error no callback "
              "runs and\n"
              " * |s->ctx| is NULL. Thread: any. */\n"
              "grit_err %s__async_start(grit_channel *ch,\n"
              "    const grit_call_opts *opts, const %s__async_cbs *cbs,\n"
              "    void *user_data, %s__async *s);\n\n",
              l, l, l, kindsym(cs, ss), l, l, l);
  if (cs)
    cg_printf(h,
              "/** Send one request (NULL: the default message), waiting "
              "for room as\n"
              " * grit_call_send does. Thread: any but grit's I/O thread "
              "(there it\n"
              " * returns GRIT_ERR_WOULD_DEADLOCK rather than wait).\n"
              " * Returns what grit_call_send returns; GRIT_ERR_INVALID_ARG "
              "when |s|\n"
              " * is NULL or not started. */\n"
              "grit_err %s__async_send(%s__async *s, const %s *msg);\n\n"
              "/** Send one request if there is room now, never waiting: "
              "GRIT_OK, or\n"
              " * GRIT_ERR_AGAIN (nothing queued; cbs->on_send_ready runs "
              "when there\n"
              " * is room), else what grit_call_try_send returns; "
              "GRIT_ERR_INVALID_ARG\n"
              " * when |s| is NULL or not started. Thread: any, callbacks "
              "included. */\n"
              "grit_err %s__async_try_send(%s__async *s, const %s *msg);\n\n"
              "/** No more requests. Returns what grit_call_close_send "
              "returns;\n"
              " * GRIT_ERR_INVALID_ARG when |s| is NULL or not started. "
              "Thread: any. */\n"
              "grit_err %s__async_close_send(%s__async *s);\n\n",
              l, l, m->in_c, l, l, m->in_c, l, l);
  cg_printf(h,
            "/** Cancel the call (it ends CANCELLED unless it has ended). "
            "Thread:\n"
            " * any, callbacks included. NULL or not started: a no-op. */\n"
            "void %s__async_cancel(%s__async *s);\n\n"
            "/** The call's grit_call_info (attempts, peer, encodings; "
            "complete\n"
            " * once on_done runs). Returns GRIT_OK; GRIT_ERR_INVALID_ARG "
            "(|s| or\n"
            " * |info| NULL, or not started). Thread: any. */\n"
            "grit_err %s__async_info(%s__async *s, grit_call_info *info);\n\n"
            "/** Release the caller's handle, cancelling the call if it has "
            "not\n"
            " * ended (on_done still runs, once). |s->ctx| becomes NULL. "
            "Thread:\n"
            " * any, callbacks included. NULL or not started: a no-op. */\n"
            "void %s__async_destroy(%s__async *s);\n\n",
            l, l, l, l, l, l);
}

static void emit_async_source(cg_buf *c, const cg_method *m, bool cs, bool ss) {
  const char *l = m->l;
  cg_printf(c,
            "struct %s__async_ctx {\n"
            "  grit_stub_actx base; /* first */\n"
            "  %s__async_cbs cbs;\n"
            "};\n\n"
            "static void %s__a_headers(grit_call *call, const grit_metadata "
            "*md,\n"
            "    void *ud) {\n"
            "  struct %s__async_ctx *x = ud;\n"
            "  grit_stub_actx_enter(&x->base, call);\n"
            "  if (x->cbs.on_headers)\n"
            "    x->cbs.on_headers((%s__async *)x->base.s, md, "
            "x->base.user_data);\n"
            "}\n\n"
            "static void %s__a_message(grit_call *call, const uint8_t *data,\n"
            "    size_t len, void *ud) {\n"
            "  struct %s__async_ctx *x = ud;\n"
            "  ProtobufCMessage *m = grit_stub_actx_decode(&x->base, call, "
            "data, len);\n"
            "  if (!m)\n"
            "    return;\n",
            l, l, l, l, l, l, l);
  if (ss)
    cg_printf(
        c,
        "  if (x->cbs.on_message)\n"
        "    x->cbs.on_message((%s__async *)x->base.s, (%s *)m,\n"
        "        x->base.user_data);\n"
        "  else\n"
        "    protobuf_c_message_free_unpacked(m, GRIT_PROTOBUF_C_ALLOCATOR);\n"
        "}\n\n",
        l, m->out_c);
  else
    cg_printf(c, "  /* The core lets one response through (SPEC AP-02). */\n"
                 "  if (x->base.resp)\n"
                 "    protobuf_c_message_free_unpacked(x->base.resp, "
                 "GRIT_PROTOBUF_C_ALLOCATOR);\n"
                 "  x->base.resp = m;\n"
                 "}\n\n");
  cg_printf(c,
            "static void %s__a_done(grit_call *call, const grit_status *st,\n"
            "    void *ud) {\n"
            "  struct %s__async_ctx *x = ud;\n"
            "  grit_status local;\n"
            "  char msg[256];\n"
            "  grit_stub_actx_enter(&x->base, call);\n"
            "  const grit_status *out =\n"
            "      grit_stub_actx_status(&x->base, st, &local, msg, "
            "sizeof(msg));\n",
            l, l);
  if (ss)
    cg_printf(c,
              "  x->cbs.on_done((%s__async *)x->base.s, out, "
              "x->base.user_data);\n",
              l);
  else
    cg_printf(
        c,
        "  ProtobufCMessage *r = x->base.resp;\n"
        "  x->base.resp = NULL;\n"
        "  if (r && out->code != GRIT_STATUS_OK) {\n"
        "    protobuf_c_message_free_unpacked(r, GRIT_PROTOBUF_C_ALLOCATOR);\n"
        "    r = NULL;\n"
        "  }\n"
        "  x->cbs.on_done((%s__async *)x->base.s, out, (%s *)r,\n"
        "      x->base.user_data);\n",
        l, m->out_c);
  cg_printf(c, "  grit_stub_actx_unref(&x->base);\n"
               "}\n\n");
  if (cs)
    cg_printf(c,
              "static void %s__a_ready(grit_call *call, void *ud) {\n"
              "  struct %s__async_ctx *x = ud;\n"
              "  grit_stub_actx_enter(&x->base, call);\n"
              "  if (x->cbs.on_send_ready)\n"
              "    x->cbs.on_send_ready((%s__async *)x->base.s, "
              "x->base.user_data);\n"
              "}\n\n",
              l, l, l);
  cg_printf(c,
            "static const grit_call_cbs %s__a_cbs = {\n"
            "  .version = GRIT_CALL_CBS_VERSION,\n"
            "  .on_headers = %s__a_headers,\n"
            "  .on_message = %s__a_message,\n"
            "  .on_done = %s__a_done,\n",
            l, l, l, l);
  if (cs)
    cg_printf(c, "  .on_send_ready = %s__a_ready,\n", l);
  cg_printf(c, "};\n\n");
  bool send_req = ss && !cs;
  cg_printf(c, "grit_err %s__async_start(grit_channel *ch,%s%s%s\n", l,
            send_req ? " const " : "", send_req ? m->in_c : "",
            send_req ? " *req," : "");
  cg_printf(
      c,
      "    const grit_call_opts *opts, const %s__async_cbs *cbs,\n"
      "    void *user_data, %s__async *s) {\n"
      "  if (!s)\n"
      "    return GRIT_ERR_INVALID_ARG;\n"
      "  s->ctx = NULL;\n"
      "  if (!ch || !cbs || !cbs->on_done)\n"
      "    return GRIT_ERR_INVALID_ARG;\n"
      "  struct %s__async_ctx *x = grit_allocator_alloc(NULL, sizeof(*x));\n"
      "  if (x)\n"
      "    memset(x, 0, sizeof(*x));\n"
      "  if (!x)\n"
      "    return GRIT_ERR_NOMEM;\n"
      "  x->base.s = s;\n"
      "  x->base.user_data = user_data;\n"
      "  x->base.rd = &%s__descriptor;\n"
      "  x->cbs = *cbs;\n"
      "  s->ctx = x; /* before the start: callbacks may use it */\n"
      "  grit_err rv = grit_stub_astart(ch, %s__PATH, opts, %s,\n"
      "      &%s__a_cbs, &x->base, %s, %s);\n"
      "  if (rv != GRIT_OK) {\n"
      "    s->ctx = NULL;\n"
      "    grit_allocator_free(NULL, x);\n"
      "  }\n"
      "  return rv;\n"
      "}\n\n",
      l, l, l, m->out_l, m->u, kindsym(cs, ss), l,
      send_req ? "(const ProtobufCMessage *)req" : "NULL",
      send_req ? "true" : "false");
  if (cs)
    cg_printf(
        c,
        "grit_err %s__async_send(%s__async *s, const %s *msg) {\n"
        "  if (!s || !s->ctx)\n"
        "    return GRIT_ERR_INVALID_ARG;\n"
        "  return grit_stub_asend(&s->ctx->base, (const "
        "ProtobufCMessage *)msg, 0);\n"
        "}\n\n"
        "grit_err %s__async_try_send(%s__async *s, const %s *msg) {\n"
        "  if (!s || !s->ctx)\n"
        "    return GRIT_ERR_INVALID_ARG;\n"
        "  return grit_stub_asend(&s->ctx->base, (const "
        "ProtobufCMessage *)msg,\n"
        "      GRIT_SEND_NO_WAIT);\n"
        "}\n\n"
        "grit_err %s__async_close_send(%s__async *s) {\n"
        "  if (!s || !s->ctx)\n"
        "    return GRIT_ERR_INVALID_ARG;\n"
        "  return grit_call_close_send(grit_stub_actx_call(&s->ctx->base));\n"
        "}\n\n",
        l, l, m->in_c, l, l, m->in_c, l, l);
  cg_printf(c,
            "void %s__async_cancel(%s__async *s) {\n"
            "  if (s && s->ctx)\n"
            "    grit_call_cancel(grit_stub_actx_call(&s->ctx->base));\n"
            "}\n\n"
            "grit_err %s__async_info(%s__async *s, grit_call_info *info) {\n"
            "  if (!s || !s->ctx || !info)\n"
            "    return GRIT_ERR_INVALID_ARG;\n"
            "  return grit_call_get_info(grit_stub_actx_call(&s->ctx->base), "
            "info);\n"
            "}\n\n"
            "void %s__async_destroy(%s__async *s) {\n"
            "  if (!s || !s->ctx)\n"
            "    return;\n"
            "  struct %s__async_ctx *x = s->ctx;\n"
            "  s->ctx = NULL;\n"
            "  grit_call_cancel(grit_stub_actx_call(&x->base));\n"
            "  grit_stub_actx_unref(&x->base);\n"
            "}\n\n",
            l, l, l, l, l, l, l);
}

void cg_emit_async_stream(cg_buf *h, cg_buf *c, const cg_method *m, bool cs,
                          bool ss) {
  const char *kind = cs && ss ? "bidi-streaming"
                     : cs     ? "client-streaming"
                              : "server-streaming";
  cg_printf(h,
            "/** Initialiser for a %s__stream (the blocking form). */\n"
            "#define %s__STREAM_INIT {0}\n\n",
            m->l, m->u);
  emit_async_header(h, m, cs, ss, kind);
  emit_async_source(c, m, cs, ss);
}
