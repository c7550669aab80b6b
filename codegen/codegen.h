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

#endif
