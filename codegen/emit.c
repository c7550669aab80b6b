/* The generated stubs. For each method of each service in x.proto,
 * x.grit.h declares and x.grit.c defines, with L the method's protobuf-c
 * style lower-case name (package, service and method: for
 * grpc.testing.TestService.UnaryCall, grpc__testing__test_service__unary_call):
 *
 *   L__PATH (upper case)   the method path, "/grpc.testing.TestService/..."
 *   unary:                 L__call (blocking), L__call_async
 *   client streaming:      L__start, L__send, L__finish (half-close, the
 *                          response, the status), L__destroy
 *   server streaming:      L__start (sends the request), L__recv,
 *                          L__finish, L__destroy
 *   bidi streaming:        L__start, L__send, L__close_send, L__recv,
 *                          L__finish, L__destroy
 *
 * Streams are value types in caller storage (L__stream). Every stub sets
 * grit_call_opts.kind, so the core checks the response count (SPEC
 * AP-02). A response that does not decode ends the call INTERNAL. */
#include "codegen.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Split |full| at dots and join the converted pieces with "__", skipping
 * empty pieces, as protobuf-c's FullNameTo{Lower,Upper,C}. */
typedef enum { CONV_LOWER, CONV_UPPER, CONV_CAMEL } conv;

static char *convert(const char *full, conv how) {
  size_t n = strlen(full);
  char *out = malloc(2 * n + 1), *o = out;
  if (!out)
    return NULL;
  bool first_piece = true;
  for (const char *p = full; *p;) {
    if (*p == '.') {
      p++;
      continue;
    }
    const char *end = strchr(p, '.');
    if (!end)
      end = p + strlen(p);
    if (!first_piece) {
      *o++ = '_';
      *o++ = '_';
    }
    first_piece = false;
    bool was_upper = true, next_upper = true;
    for (; p < end; p++) {
      unsigned char ch = (unsigned char)*p;
      bool up = isupper(ch) != 0;
      if (how == CONV_CAMEL) {
        if (ch == '_') {
          next_upper = true;
        } else {
          *o++ = (char)(next_upper ? toupper(ch) : ch);
          next_upper = false;
        }
        continue;
      }
      if (up && !was_upper)
        *o++ = '_';
      *o++ = (char)(how == CONV_LOWER ? tolower(ch) : toupper(ch));
      was_upper = up;
    }
  }
  *o = '\0';
  return out;
}

char *cg_lower(const char *full) {
  return convert(full, CONV_LOWER);
}

char *cg_upper(const char *full) {
  return convert(full, CONV_UPPER);
}

char *cg_camel(const char *full) {
  return convert(full, CONV_CAMEL);
}

/* Names of one method, all malloc'd. */
typedef struct names {
  char *l;       /* grpc__testing__test_service__unary_call */
  char *u;       /* GRPC__TESTING__TEST_SERVICE__UNARY_CALL */
  char *in_c;    /* Grpc__Testing__SimpleRequest */
  char *out_c;   /* Grpc__Testing__SimpleResponse */
  char *out_l;   /* grpc__testing__simple_response */
  char *path;    /* /grpc.testing.TestService/UnaryCall */
  char *out_dot; /* grpc.testing.SimpleResponse */
} names;

static void names_free(names *n) {
  free(n->l);
  free(n->u);
  free(n->in_c);
  free(n->out_c);
  free(n->out_l);
  free(n->path);
  free(n->out_dot);
}

static char *join3(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *s = malloc(n);
  if (s)
    snprintf(s, n, "%s%s%s", a, b, c);
  return s;
}

static bool make_names(const char *pkg, const char *svc,
                       const Google__Protobuf__MethodDescriptorProto *m,
                       names *n) {
  char *full = join3(pkg, pkg[0] ? "." : "", svc);
  char *mfull = full ? join3(full, ".", m->name) : NULL;
  *n = (names){0};
  if (mfull) {
    n->l = cg_lower(mfull);
    n->u = cg_upper(mfull);
    n->path = join3("/", full, "/");
  }
  char *path = n->path ? join3(n->path, m->name, "") : NULL;
  free(n->path);
  n->path = path;
  n->in_c = cg_camel(m->input_type);
  n->out_c = cg_camel(m->output_type);
  n->out_l = cg_lower(m->output_type);
  n->out_dot =
      strdup(m->output_type[0] == '.' ? m->output_type + 1 : m->output_type);
  free(full);
  free(mfull);
  return n->l && n->u && n->path && n->in_c && n->out_c && n->out_l &&
         n->out_dot;
}

static const char *kind_name(bool cs, bool ss) {
  return cs && ss ? "GRIT_METHOD_BIDI_STREAMING"
         : cs     ? "GRIT_METHOD_CLIENT_STREAMING"
         : ss     ? "GRIT_METHOD_SERVER_STREAMING"
                  : "GRIT_METHOD_UNARY";
}

/* ---- shared helpers, emitted once per .grit.c as static functions ---- */

static void emit_common(cg_buf *c) {
  cg_printf(
      c,
      "static void grit_stub_register(void);\n\n"
      "/* Every stub starts here: its call's options, and the methods of\n"
      " * this file registered for the metrics (issue 28) before the first\n"
      " * call. */\n"
      "static grit_call_opts grit_stub_opts(const grit_call_opts *opts,\n"
      "                                     grit_method_kind kind) {\n"
      "  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION};\n"
      "  grit_stub_register();\n"
      "  if (opts)\n"
      "    o = *opts;\n"
      "  o.kind = kind;\n"
      "  return o;\n"
      "}\n\n"
      "/* NULL packs as the empty (default) message. */\n"
      "static grit_err grit_stub_pack(const ProtobufCMessage *m, uint8_t "
      "**out,\n"
      "                               size_t *len) {\n"
      "  *len = m ? protobuf_c_message_get_packed_size(m) : 0;\n"
      "  *out = grit_allocator_alloc(NULL, *len ? *len : 1);\n"
      "  if (!*out)\n"
      "    return GRIT_ERR_NOMEM;\n"
      "  if (m)\n"
      "    protobuf_c_message_pack(m, *out);\n"
      "  return GRIT_OK;\n"
      "}\n\n"
      "/* A status for a call that did not start: never OK (SPEC AP-01). */\n"
      "static grit_err grit_stub_fail(grit_status *st, grit_err rv) {\n"
      "  if (st) {\n"
      "    *st = (grit_status){0};\n"
      "    grit_status_replace(st, rv == GRIT_ERR_NOMEM\n"
      "                                ? GRIT_STATUS_RESOURCE_EXHAUSTED\n"
      "                                : GRIT_STATUS_INVALID_ARGUMENT,\n"
      "                        grit_strerror(rv));\n"
      "  }\n"
      "  return rv;\n"
      "}\n\n"
      "static void grit_stub_bad_response(grit_status *st,\n"
      "                                   const char *type) {\n"
      "  char msg[256];\n"
      "  snprintf(msg, sizeof(msg), \"grit: the response does not decode as "
      "%%s\",\n"
      "           type);\n"
      "  grit_status_replace(st, GRIT_STATUS_INTERNAL, msg);\n"
      "}\n\n");
}

static void emit_unary_common(cg_buf *c) {
  cg_printf(
      c,
      "static grit_err grit_stub_unary(grit_channel *ch, const char *path,\n"
      "                                const ProtobufCMessage *req,\n"
      "                                const grit_call_opts *opts,\n"
      "                                const ProtobufCMessageDescriptor "
      "*rd,\n"
      "                                ProtobufCMessage **resp,\n"
      "                                grit_status *status) {\n"
      "  grit_status local = {0};\n"
      "  grit_status *st = status ? status : &local;\n"
      "  if (resp)\n"
      "    *resp = NULL;\n"
      "  uint8_t *buf;\n"
      "  size_t len;\n"
      "  grit_err rv = grit_stub_pack(req, &buf, &len);\n"
      "  if (rv != GRIT_OK) {\n"
      "    grit_stub_fail(st, rv);\n"
      "    grit_status_free(&local);\n"
      "    return rv;\n"
      "  }\n"
      "  grit_call_opts o = grit_stub_opts(opts, GRIT_METHOD_UNARY);\n"
      "  grit_bytes b = {0};\n"
      "  rv = grit_unary_call(ch, path, buf, len, &o, &b, st, NULL);\n"
      "  grit_allocator_free(NULL, buf);\n"
      "  if (rv == GRIT_OK && st->code == GRIT_STATUS_OK) {\n"
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
      "  return rv;\n"
      "}\n\n"
      "/* Any function pointer; cast back to its type before the call. */\n"
      "typedef void (*grit_stub_fn)(void);\n\n"
      "typedef void (*grit_stub_done_fn)(const grit_status *st,\n"
      "                                  ProtobufCMessage *resp, grit_stub_fn "
      "cb,\n"
      "                                  void *user_data);\n\n"
      "typedef struct grit_stub_async {\n"
      "  const ProtobufCMessageDescriptor *rd;\n"
      "  grit_stub_done_fn done;\n"
      "  grit_stub_fn cb;\n"
      "  void *user_data;\n"
      "} grit_stub_async;\n\n"
      "static void grit_stub_on_done(const grit_status *st, const uint8_t "
      "*resp,\n"
      "                              size_t len, const grit_call_info "
      "*info,\n"
      "                              void *ud) {\n"
      "  grit_stub_async *a = ud;\n"
      "  ProtobufCMessage *m = NULL;\n"
      "  grit_status bad = *st;\n"
      "  char msg[256];\n"
      "  (void)info;\n"
      "  if (st->code == GRIT_STATUS_OK) {\n"
      "    m = protobuf_c_message_unpack(a->rd, GRIT_PROTOBUF_C_ALLOCATOR, "
      "len, resp);\n"
      "    if (!m) {\n"
      "      snprintf(msg, sizeof(msg),\n"
      "               \"grit: the response does not decode as %%s\", "
      "a->rd->name);\n"
      "      bad.code = GRIT_STATUS_INTERNAL;\n"
      "      bad.message = msg;\n"
      "    }\n"
      "  }\n"
      "  a->done(&bad, m, a->cb, a->user_data);\n"
      "  grit_allocator_free(NULL, a);\n"
      "}\n\n"
      "static grit_err grit_stub_unary_async(grit_channel *ch, const char "
      "*path,\n"
      "                                      const ProtobufCMessage *req,\n"
      "                                      const grit_call_opts *opts,\n"
      "                                      const "
      "ProtobufCMessageDescriptor *rd,\n"
      "                                      grit_stub_done_fn done,\n"
      "                                      grit_stub_fn cb,\n"
      "                                      void *user_data) {\n"
      "  grit_stub_async *a = grit_allocator_alloc(NULL, sizeof(*a));\n"
      "  uint8_t *buf = NULL;\n"
      "  size_t len;\n"
      "  grit_err rv = a ? grit_stub_pack(req, &buf, &len) : "
      "GRIT_ERR_NOMEM;\n"
      "  if (rv == GRIT_OK) {\n"
      "    *a = (grit_stub_async){rd, done, cb, user_data};\n"
      "    grit_call_opts o = grit_stub_opts(opts, GRIT_METHOD_UNARY);\n"
      "    rv = grit_unary_call_async(ch, path, buf, len, &o, "
      "grit_stub_on_done, a);\n"
      "  }\n"
      "  grit_allocator_free(NULL, buf);\n"
      "  if (rv != GRIT_OK)\n"
      "    grit_allocator_free(NULL, a);\n"
      "  return rv;\n"
      "}\n\n");
}

static void emit_stream_common(cg_buf *c) {
  cg_printf(
      c,
      "static grit_err grit_stub_send(grit_call *call, const "
      "ProtobufCMessage *m) {\n"
      "  uint8_t *buf;\n"
      "  size_t len;\n"
      "  grit_err rv = grit_stub_pack(m, &buf, &len);\n"
      "  if (rv == GRIT_OK)\n"
      "    rv = grit_call_send(call, buf, len);\n"
      "  grit_allocator_free(NULL, buf);\n"
      "  return rv;\n"
      "}\n\n"
      "static grit_err grit_stub_recv(grit_call *call, bool *bad,\n"
      "                               const ProtobufCMessageDescriptor *rd,\n"
      "                               ProtobufCMessage **out) {\n"
      "  grit_bytes b = {0};\n"
      "  *out = NULL;\n"
      "  grit_err rv = grit_call_recv(call, &b);\n"
      "  if (rv != GRIT_OK)\n"
      "    return rv;\n"
      "  *out = protobuf_c_message_unpack(rd, GRIT_PROTOBUF_C_ALLOCATOR, "
      "b.len, b.data);\n"
      "  grit_bytes_free(&b);\n"
      "  if (!*out) {\n"
      "    *bad = true;\n"
      "    grit_call_cancel(call);\n"
      "    return GRIT_ERR_PARSE;\n"
      "  }\n"
      "  return GRIT_OK;\n"
      "}\n\n"
      "static grit_err grit_stub_finish(grit_call *call, bool bad,\n"
      "                                 const ProtobufCMessageDescriptor "
      "*rd,\n"
      "                                 grit_status *st) {\n"
      "  grit_err rv = grit_call_finish(call, st);\n"
      "  if (rv == GRIT_OK && bad)\n"
      "    grit_stub_bad_response(st, rd->name);\n"
      "  return rv;\n"
      "}\n\n");
}

/* ---- per method ---- */

static void emit_unary(cg_buf *h, cg_buf *c, const names *n) {
  cg_printf(h,
            "/** Blocking unary call of %s.\n"
            " * |req| NULL sends the default message; |opts| may be NULL "
            "(kind is\n"
            " * set to GRIT_METHOD_UNARY). On an OK status |*resp| is the "
            "new response\n"
            " * (free with %s__free_unpacked), else NULL; a response that "
            "does\n"
            " * not decode ends the call INTERNAL. |resp| and |status| may "
            "be NULL.\n"
            " * Returns what grit_unary_call returns: GRIT_OK when the call "
            "ran (its\n"
            " * outcome in |status|). Thread: any but grit's I/O thread. */\n"
            "grit_err %s__call(grit_channel *ch, const %s *req,\n"
            "    const grit_call_opts *opts, %s **resp, grit_status "
            "*status);\n\n",
            n->path, n->out_l, n->l, n->in_c, n->out_c);
  cg_printf(h,
            "/** Completion of %s__call_async, on grit's I/O thread: "
            "|status| is\n"
            " * borrowed; |resp| is new (free with %s__free_unpacked) and "
            "NULL\n"
            " * unless the status is OK. */\n"
            "typedef void (*%s__done_cb)(const grit_status *status,\n"
            "    %s *resp, void *user_data);\n\n"
            "/** Asynchronous unary call of %s: |cb| runs exactly once "
            "unless\n"
            " * this returns an error (as grit_unary_call_async). */\n"
            "grit_err %s__call_async(grit_channel *ch, const %s *req,\n"
            "    const grit_call_opts *opts, %s__done_cb cb, void "
            "*user_data);\n\n",
            n->l, n->out_l, n->l, n->out_c, n->path, n->l, n->in_c, n->l);
  cg_printf(c,
            "grit_err %s__call(grit_channel *ch, const %s *req,\n"
            "    const grit_call_opts *opts, %s **resp, grit_status "
            "*status) {\n"
            "  return grit_stub_unary(ch, %s__PATH,\n"
            "      (const ProtobufCMessage *)req, opts, &%s__descriptor,\n"
            "      (ProtobufCMessage **)resp, status);\n"
            "}\n\n",
            n->l, n->in_c, n->out_c, n->u, n->out_l);
  cg_printf(c,
            "static void %s__done(const grit_status *st, ProtobufCMessage "
            "*resp,\n"
            "    grit_stub_fn cb, void *user_data) {\n"
            "  ((%s__done_cb)cb)(st, (%s *)resp, user_data);\n"
            "}\n\n"
            "grit_err %s__call_async(grit_channel *ch, const %s *req,\n"
            "    const grit_call_opts *opts, %s__done_cb cb, void "
            "*user_data) {\n"
            "  if (!cb)\n"
            "    return GRIT_ERR_INVALID_ARG;\n"
            "  return grit_stub_unary_async(ch, %s__PATH,\n"
            "      (const ProtobufCMessage *)req, opts, &%s__descriptor,\n"
            "      %s__done, (grit_stub_fn)cb, user_data);\n"
            "}\n\n",
            n->l, n->l, n->out_c, n->l, n->in_c, n->l, n->u, n->out_l, n->l);
}

static void emit_stream(cg_buf *h, cg_buf *c, const names *n, bool cs,
                        bool ss) {
  const char *kind = kind_name(cs, ss);
  cg_printf(h,
            "/** A %s call of %s, in caller storage: start it,\n"
            " * then always %s__destroy it. */\n"
            "typedef struct %s__stream {\n"
            "  grit_call *call; /* the call, for grit_call_cancel etc. */\n"
            "  bool bad_response; /* a response did not decode */\n"
            "} %s__stream;\n\n",
            kind + strlen("GRIT_METHOD_"), n->path, n->l, n->l, n->l);
  /* start */
  if (ss && !cs) {
    cg_printf(h,
              "/** Start the call, send |req| (NULL: the default message) "
              "and\n"
              " * half-close. |opts| may be NULL (kind is set to %s).\n"
              " * Returns what grit_call_start or grit_call_send returns; on "
              "error\n"
              " * |s| holds no call. Thread: any. */\n"
              "grit_err %s__start(grit_channel *ch, const %s *req,\n"
              "    const grit_call_opts *opts, %s__stream *s);\n\n",
              kind, n->l, n->in_c, n->l);
    cg_printf(c,
              "grit_err %s__start(grit_channel *ch, const %s *req,\n"
              "    const grit_call_opts *opts, %s__stream *s) {\n"
              "  if (!s)\n"
              "    return GRIT_ERR_INVALID_ARG;\n"
              "  grit_call_opts o = grit_stub_opts(opts, %s);\n"
              "  s->call = NULL;\n"
              "  s->bad_response = false;\n"
              "  grit_err rv = grit_call_start(ch, %s__PATH, &o, NULL, NULL, "
              "&s->call);\n"
              "  if (rv == GRIT_OK)\n"
              "    rv = grit_stub_send(s->call, (const ProtobufCMessage "
              "*)req);\n"
              "  if (rv == GRIT_OK)\n"
              "    rv = grit_call_close_send(s->call);\n"
              "  if (rv != GRIT_OK && s->call) {\n"
              "    grit_call_destroy(s->call);\n"
              "    s->call = NULL;\n"
              "  }\n"
              "  return rv;\n"
              "}\n\n",
              n->l, n->in_c, n->l, kind, n->u);
  } else {
    cg_printf(h,
              "/** Start the call (blocking mode). |opts| may be NULL (kind "
              "is set to\n"
              " * %s). Returns what grit_call_start returns.\n"
              " * Thread: any. */\n"
              "grit_err %s__start(grit_channel *ch, const grit_call_opts "
              "*opts,\n"
              "    %s__stream *s);\n\n"
              "/** Send one request message (NULL: the default message), "
              "waiting\n"
              " * for room. Returns what grit_call_send returns. */\n"
              "grit_err %s__send(%s__stream *s, const %s *msg);\n\n",
              kind, n->l, n->l, n->l, n->l, n->in_c);
    cg_printf(c,
              "grit_err %s__start(grit_channel *ch, const grit_call_opts "
              "*opts,\n"
              "    %s__stream *s) {\n"
              "  if (!s)\n"
              "    return GRIT_ERR_INVALID_ARG;\n"
              "  grit_call_opts o = grit_stub_opts(opts, %s);\n"
              "  s->call = NULL;\n"
              "  s->bad_response = false;\n"
              "  return grit_call_start(ch, %s__PATH, &o, NULL, NULL, "
              "&s->call);\n"
              "}\n\n"
              "grit_err %s__send(%s__stream *s, const %s *msg) {\n"
              "  if (!s)\n"
              "    return GRIT_ERR_INVALID_ARG;\n"
              "  return grit_stub_send(s->call, (const ProtobufCMessage "
              "*)msg);\n"
              "}\n\n",
              n->l, n->l, kind, n->u, n->l, n->l, n->in_c);
  }
  if (cs && ss) {
    cg_printf(h,
              "/** No more request messages. Returns what "
              "grit_call_close_send\n"
              " * returns. */\n"
              "grit_err %s__close_send(%s__stream *s);\n\n",
              n->l, n->l);
    cg_printf(c,
              "grit_err %s__close_send(%s__stream *s) {\n"
              "  if (!s)\n"
              "    return GRIT_ERR_INVALID_ARG;\n"
              "  return grit_call_close_send(s->call);\n"
              "}\n\n",
              n->l, n->l);
  }
  if (ss) {
    cg_printf(h,
              "/** Wait for the next response: GRIT_OK with |*msg| new (free "
              "with\n"
              " * %s__free_unpacked); GRIT_END_OF_STREAM at the end\n"
              " * (then call %s__finish); GRIT_ERR_PARSE when it does\n"
              " * not decode (the call is cancelled and finishes INTERNAL); "
              "else\n"
              " * what grit_call_recv returns. */\n"
              "grit_err %s__recv(%s__stream *s, %s **msg);\n\n"
              "/** Wait for the final status (filled on every return; free "
              "with\n"
              " * grit_status_free). Returns what grit_call_finish returns. "
              "*/\n"
              "grit_err %s__finish(%s__stream *s, grit_status *status);\n\n",
              n->out_l, n->l, n->l, n->l, n->out_c, n->l, n->l);
    cg_printf(c,
              "grit_err %s__recv(%s__stream *s, %s **msg) {\n"
              "  if (!s || !msg)\n"
              "    return GRIT_ERR_INVALID_ARG;\n"
              "  return grit_stub_recv(s->call, &s->bad_response, "
              "&%s__descriptor,\n"
              "      (ProtobufCMessage **)msg);\n"
              "}\n\n"
              "grit_err %s__finish(%s__stream *s, grit_status *status) {\n"
              "  if (!s)\n"
              "    return grit_stub_fail(status, GRIT_ERR_INVALID_ARG);\n"
              "  return grit_stub_finish(s->call, s->bad_response, "
              "&%s__descriptor,\n"
              "      status);\n"
              "}\n\n",
              n->l, n->l, n->out_c, n->out_l, n->l, n->l, n->out_l);
  } else {
    cg_printf(h,
              "/** Half-close, wait for the one response and the status. "
              "On an OK\n"
              " * status |*resp| is new (free with %s__free_unpacked),\n"
              " * else NULL; a response that does not decode ends the call "
              "INTERNAL.\n"
              " * |status| is filled on every return. Returns what "
              "grit_call_finish\n"
              " * returns; GRIT_ERR_INVALID_ARG for a NULL |s|, |resp| or "
              "|status|. */\n"
              "grit_err %s__finish(%s__stream *s, %s **resp,\n"
              "    grit_status *status);\n\n",
              n->out_l, n->l, n->l, n->out_c);
    cg_printf(
        c,
        "grit_err %s__finish(%s__stream *s, %s **resp,\n"
        "    grit_status *status) {\n"
        "  ProtobufCMessage *m = NULL;\n"
        "  if (resp)\n"
        "    *resp = NULL;\n"
        "  if (!s || !resp || !status)\n"
        "    return grit_stub_fail(status, GRIT_ERR_INVALID_ARG);\n"
        "  grit_call_close_send(s->call); /* CALL_STATE if already ended */\n"
        "  grit_err rv = grit_stub_recv(s->call, &s->bad_response,\n"
        "      &%s__descriptor, &m);\n"
        "  (void)rv; /* the status tells */\n"
        "  rv = grit_stub_finish(s->call, s->bad_response, "
        "&%s__descriptor,\n"
        "      status);\n"
        "  if (rv == GRIT_OK && status->code == GRIT_STATUS_OK)\n"
        "    *resp = (%s *)m;\n"
        "  else if (m)\n"
        "    protobuf_c_message_free_unpacked(m, GRIT_PROTOBUF_C_ALLOCATOR);\n"
        "  return rv;\n"
        "}\n\n",
        n->l, n->l, n->out_c, n->out_l, n->out_l, n->out_c);
  }
  cg_printf(h,
            "/** Release the call, cancelling it if it has not ended. NULL "
            "|s| is a\n"
            " * no-op. Thread: any. */\n"
            "void %s__destroy(%s__stream *s);\n\n",
            n->l, n->l);
  cg_printf(c,
            "void %s__destroy(%s__stream *s) {\n"
            "  if (!s)\n"
            "    return;\n"
            "  grit_call_destroy(s->call);\n"
            "  s->call = NULL;\n"
            "}\n\n",
            n->l, n->l);
}

/* Issue 28 (gRFC A66): grit's metrics name a method only when it is
 * registered (or named by the service config); others are "other". The
 * stubs register every method of the file once, the first time any of
 * them runs (grit_stub_opts calls grit_stub_register: after the first
 * time, a pthread_once check). grit_metrics_register_method is
 * idempotent; it fails only without memory or past its 1024 names, and
 * then the calls are recorded as "other", as before. */
static void emit_register(cg_buf *c,
                          const Google__Protobuf__FileDescriptorProto *f) {
  cg_printf(c, "static void grit_stub_register_once(void) {\n"
               "  static const char *const methods[] = {\n");
  const char *pkg = f->package ? f->package : "";
  for (size_t i = 0; i < f->n_service; i++) {
    const Google__Protobuf__ServiceDescriptorProto *s = f->service[i];
    for (size_t j = 0; j < s->n_method; j++)
      cg_printf(c, "      \"/%s%s%s/%s\",\n", pkg, pkg[0] ? "." : "", s->name,
                s->method[j]->name);
  }
  cg_printf(c, "  };\n"
               "  for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); "
               "i++)\n"
               "    (void)grit_metrics_register_method(methods[i]);\n"
               "}\n\n"
               "static void grit_stub_register(void) {\n"
               "  static pthread_once_t once = PTHREAD_ONCE_INIT;\n"
               "  (void)pthread_once(&once, grit_stub_register_once);\n"
               "}\n");
}

/* An include guard from the file name. */
static void emit_guard(cg_buf *h, const char *name) {
  cg_printf(h, "PROTOC_GEN_GRIT_");
  for (const char *p = name; *p; p++)
    cg_printf(h, "%c",
              isalnum((unsigned char)*p) ? toupper((unsigned char)*p) : '_');
}

bool cg_emit_file(const Google__Protobuf__FileDescriptorProto *f, cg_buf *h,
                  cg_buf *c, const char **why) {
  const char *pkg = f->package ? f->package : "";
  size_t n = strlen(f->name);
  if (n > 6 && strcmp(f->name + n - 6, ".proto") == 0)
    n -= 6;
  int base = (int)n;
  bool any_unary = false, any_stream = false;
  for (size_t i = 0; i < f->n_service; i++) {
    for (size_t j = 0; j < f->service[i]->n_method; j++) {
      const Google__Protobuf__MethodDescriptorProto *m =
          f->service[i]->method[j];
      bool st = (m->has_client_streaming && m->client_streaming) ||
                (m->has_server_streaming && m->server_streaming);
      any_unary |= !st;
      any_stream |= st;
    }
  }
  cg_printf(h, "/* Generated by protoc-gen-grit from %s. Do not edit. */\n",
            f->name);
  cg_printf(h, "#ifndef ");
  emit_guard(h, f->name);
  cg_printf(h, "\n#define ");
  emit_guard(h, f->name);
  cg_printf(h,
            "\n\n#include <stdbool.h>\n\n#include <grit/grit.h>\n\n"
            "#include \"%.*s.pb-c.h\"\n\n"
            "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
            base, f->name);
  /* Issue 23 point 5: the stubs' rules, said once per header. */
  cg_printf(
      h,
      "/* As grit's own functions do, every stub returns GRIT_ERR_INVALID_ARG "
      "for a\n"
      " * NULL pointer it needs (a stream, a message or response "
      "out-parameter, a\n"
      " * status a finish fills), never crashing; a NULL request or message "
      "sends\n"
      " * the default (empty) message. The stubs allocate through grit's "
      "allocator\n"
      " * (grit_set_allocator), responses included: free a response with its\n"
      " * __free_unpacked(msg, GRIT_PROTOBUF_C_ALLOCATOR) (NULL works as "
      "well while\n"
      " * grit uses libc's allocator, the default). */\n"
      "#ifndef GRIT_PROTOBUF_C_ALLOCATOR\n"
      "static inline ProtobufCAllocator *grit_protobuf_c_allocator(void) {\n"
      "  static ProtobufCAllocator a = {grit_allocator_alloc, "
      "grit_allocator_free,\n"
      "                                 NULL};\n"
      "  return &a;\n"
      "}\n"
      "#define GRIT_PROTOBUF_C_ALLOCATOR (grit_protobuf_c_allocator())\n"
      "#endif\n\n");
  cg_printf(c,
            "/* Generated by protoc-gen-grit from %s. Do not edit. */\n"
            "#include \"%.*s.grit.h\"\n\n"
            "#include <pthread.h>\n#include <stdio.h>\n#include "
            "<stdlib.h>\n#include <string.h>\n\n",
            f->name, base, f->name);
  if (any_unary || any_stream)
    emit_common(c);
  if (any_unary)
    emit_unary_common(c);
  if (any_stream)
    emit_stream_common(c);
  cg_emit_async_common(h, c, f);
  for (size_t i = 0; i < f->n_service; i++) {
    const Google__Protobuf__ServiceDescriptorProto *s = f->service[i];
    for (size_t j = 0; j < s->n_method; j++) {
      const Google__Protobuf__MethodDescriptorProto *m = s->method[j];
      names nm;
      if (!make_names(pkg, s->name, m, &nm)) {
        names_free(&nm);
        *why = "out of memory";
        return false;
      }
      bool cs = m->has_client_streaming && m->client_streaming;
      bool ss = m->has_server_streaming && m->server_streaming;
      cg_printf(h, "#define %s__PATH \"%s\"\n\n", nm.u, nm.path);
      if (!cs && !ss)
        emit_unary(h, c, &nm);
      else
        emit_stream(h, c, &nm, cs, ss);
      cg_method cm = {nm.l, nm.u, nm.in_c, nm.out_c, nm.out_l, nm.path};
      if (!cs && !ss)
        cg_emit_unary_ex(h, c, &cm);
      else
        cg_emit_async_stream(h, c, &cm, cs, ss);
      names_free(&nm);
    }
  }
  if (any_unary || any_stream)
    emit_register(c, f);
  cg_printf(h, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
  if (h->oom || c->oom) {
    *why = "out of memory";
    return false;
  }
  return true;
}
