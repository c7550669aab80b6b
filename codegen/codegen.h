/* protoc-gen-grit: typed C stubs on protobuf-c for the services of a
 * .proto file. main.c speaks the protoc plugin protocol (a
 * CodeGeneratorRequest on stdin, a CodeGeneratorResponse on stdout);
 * emit.c writes one file's x.grit.h and x.grit.c. The generated code uses
 * only <grit/grit.h> and protobuf-c; this program links neither grit nor
 * anything but protobuf-c.
 * Layout: floor 5 of docs/layout.md. */
#ifndef GRIT_CODEGEN_H
#define GRIT_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>

#include "descriptor.pb-c.h"

/* A growable text buffer; |oom| once an append failed. */
typedef struct cg_buf {
  char *p;
  size_t len, cap;
  bool oom;
} cg_buf;

void cg_printf(cg_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cg_buf_free(cg_buf *b);

/* protobuf-c's names for a full name such as ".grpc.testing.TestService":
 * FullNameToLower ("grpc__testing__test_service"), FullNameToUpper
 * ("GRPC__TESTING__TEST_SERVICE") and FullNameToC
 * ("Grpc__Testing__TestService"). Malloc'd; NULL when out of memory. */
char *cg_lower(const char *full);
char *cg_upper(const char *full);
char *cg_camel(const char *full);

/* Write the stubs of |f| into |h| (the header) and |c| (the source).
 * Returns false with a reason in |*why| (static text). */
bool cg_emit_file(const Google__Protobuf__FileDescriptorProto *f, cg_buf *h,
                  cg_buf *c, const char **why);

/* ---- callback stubs and unary results (emit_async.c, issue 29) ---- */

/* One method's names, as emit.c makes them. */
typedef struct cg_method {
  const char *l;     /* grpc__testing__test_service__unary_call */
  const char *u;     /* GRPC__TESTING__TEST_SERVICE__UNARY_CALL */
  const char *in_c;  /* Grpc__Testing__SimpleRequest */
  const char *out_c; /* Grpc__Testing__SimpleResponse */
  const char *out_l; /* grpc__testing__simple_response */
  const char *path;  /* /grpc.testing.TestService/UnaryCall */
} cg_method;

/* Once per file, after emit.c's common helpers: grit_stub_result and
 * its helper when |f| has a unary method, the async stream helpers when
 * it has streaming ones. */
void cg_emit_async_common(cg_buf *h, cg_buf *c,
                          const Google__Protobuf__FileDescriptorProto *f);
/* L__call_ex for a unary method. */
void cg_emit_unary_ex(cg_buf *h, cg_buf *c, const cg_method *m);
/* L__STREAM_INIT and the L__async stubs of a streaming method. */
void cg_emit_async_stream(cg_buf *h, cg_buf *c, const cg_method *m, bool cs,
                          bool ss);

#endif
