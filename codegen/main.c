/* protoc-gen-grit: the protoc plugin protocol. protoc runs this program
 * with a CodeGeneratorRequest on stdin and reads a CodeGeneratorResponse
 * from stdout; for each file to generate, x.proto, it answers x.grit.h
 * and x.grit.c (beside protobuf-c's x.pb-c.h and x.pb-c.c). */
#include "codegen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.pb-c.h"

void cg_printf(cg_buf *b, const char *fmt, ...) {
  if (b->oom)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->len;
    int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = true;
      return;
    }
    if ((size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len <= (size_t)n)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
}

void cg_buf_free(cg_buf *b) {
  free(b->p);
  *b = (cg_buf){0};
}

static uint8_t *read_all(FILE *f, size_t *len) {
  size_t cap = 65536, n = 0;
  uint8_t *p = malloc(cap);
  while (p) {
    size_t got = fread(p + n, 1, cap - n, f);
    n += got;
    if (n < cap)
      break;
    uint8_t *q = realloc(p, cap * 2);
    if (!q) {
      free(p);
      return NULL;
    }
    p = q;
    cap *= 2;
  }
  if (p && ferror(f)) {
    free(p);
    return NULL;
  }
  *len = n;
  return p;
}

static const Google__Protobuf__FileDescriptorProto *
find_file(const Google__Protobuf__Compiler__CodeGeneratorRequest *req,
          const char *name) {
  for (size_t i = 0; i < req->n_proto_file; i++) {
    if (strcmp(req->proto_file[i]->name, name) == 0)
      return req->proto_file[i];
  }
  return NULL;
}

/* "dir/x.proto" -> "dir/x" + |ext|, malloc'd. */
static char *out_name(const char *proto, const char *ext) {
  size_t n = strlen(proto);
  if (n > 6 && strcmp(proto + n - 6, ".proto") == 0)
    n -= 6;
  size_t sz = n + strlen(ext) + 1;
  char *s = malloc(sz);
  if (s)
    snprintf(s, sz, "%.*s%s", (int)n, proto, ext);
  return s;
}

/* The --grit_opt parameters (protoc's "a=b,c" text). protoc-gen-grit takes
 * none yet: each one is refused by name, as protoc-c and grpc_cpp_plugin
 * refuse theirs, so a typo never passes silently. NULL when all is well,
 * else a malloc'd reason. */
static char *check_parameters(const char *param) {
  if (!param || !*param)
    return NULL;
  const char *end = strchr(param, ',');
  int n = end ? (int)(end - param) : (int)strlen(param);
#define BAD_PARAM                                                              \
  "unknown parameter '%.*s' (protoc-gen-grit takes no parameters; remove "     \
  "--grit_opt or the part before ':' in --grit_out)"
  int len = snprintf(NULL, 0, BAD_PARAM, n, param);
  char *why = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (why)
    snprintf(why, (size_t)len + 1, BAD_PARAM, n, param);
#undef BAD_PARAM
  return why;
}

static const char usage[] =
    "usage: protoc --plugin=protoc-gen-grit=PATH --c_out=DIR --grit_out=DIR "
    "FILE.proto\n"
    "protoc-gen-grit is a protoc plugin: protoc runs it with a\n"
    "CodeGeneratorRequest on stdin and reads the response on stdout.\n"
    "For x.proto it writes x.grit.h and x.grit.c (next to protoc-c's\n"
    "x.pb-c.h and x.pb-c.c). It takes no parameters; see docs/stubs.md.\n";

/* The plugin takes no arguments of its own (protoc passes none); -h and
 * --help print how it is run. Returns -1 to go on, else the exit status. */
static int check_args(int argc, char **argv) {
  if (argc == 2 &&
      (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    fputs(usage, stdout);
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "protoc-gen-grit: unexpected argument '%s'\n%s", argv[1],
            usage);
    return 2;
  }
  if (isatty(STDIN_FILENO)) {
    fprintf(stderr, "protoc-gen-grit: stdin is a terminal, not protoc\n%s",
            usage);
    return 2;
  }
  return -1;
}

int main(int argc, char **argv) {
  int arc = check_args(argc, argv);
  if (arc >= 0)
    return arc;
  size_t len = 0;
  uint8_t *in = read_all(stdin, &len);
  if (!in) {
    fprintf(stderr, "protoc-gen-grit: cannot read the request\n");
    return 1;
  }
  Google__Protobuf__Compiler__CodeGeneratorRequest *req =
      google__protobuf__compiler__code_generator_request__unpack(NULL, len, in);
  free(in);
  if (!req) {
    fprintf(stderr, "protoc-gen-grit: the request does not decode\n");
    return 1;
  }
  Google__Protobuf__Compiler__CodeGeneratorResponse resp =
      GOOGLE__PROTOBUF__COMPILER__CODE_GENERATOR_RESPONSE__INIT;
  /* proto3 optional fields are fine: the stubs never look at fields. */
  resp.has_supported_features = 1;
  resp.supported_features = 1; /* FEATURE_PROTO3_OPTIONAL */
  size_t nfiles = req->n_file_to_generate * 2;
  Google__Protobuf__Compiler__CodeGeneratorResponse__File *files =
      calloc(nfiles ? nfiles : 1, sizeof(*files));
  Google__Protobuf__Compiler__CodeGeneratorResponse__File **fp =
      calloc(nfiles ? nfiles : 1, sizeof(*fp));
  cg_buf *bufs = calloc(nfiles ? nfiles : 1, sizeof(*bufs));
  const char *why = files && fp && bufs ? NULL : "out of memory";
  char *bad_param = why ? NULL : check_parameters(req->parameter);
  if (bad_param)
    why = bad_param;
  else if (!why && req->parameter && *req->parameter)
    why = "out of memory";
  for (size_t i = 0; !why && i < req->n_file_to_generate; i++) {
    const char *name = req->file_to_generate[i];
    const Google__Protobuf__FileDescriptorProto *f = find_file(req, name);
    if (!f) {
      why = "a file to generate is missing from the request";
      break;
    }
    cg_buf *h = &bufs[2 * i], *c = &bufs[2 * i + 1];
    if (!cg_emit_file(f, h, c, &why))
      break;
    for (size_t k = 0; k < 2; k++) {
      Google__Protobuf__Compiler__CodeGeneratorResponse__File *o =
          &files[2 * i + k];
      google__protobuf__compiler__code_generator_response__file__init(o);
      o->name = out_name(name, k == 0 ? ".grit.h" : ".grit.c");
      o->content = bufs[2 * i + k].p;
      if (!o->name || bufs[2 * i + k].oom)
        why = "out of memory";
      fp[2 * i + k] = o;
    }
  }
  if (why) {
    resp.error = (char *)why;
  } else {
    resp.n_file = nfiles;
    resp.file = fp;
  }
  size_t olen =
      google__protobuf__compiler__code_generator_response__get_packed_size(
          &resp);
  uint8_t *out = malloc(olen ? olen : 1);
  int rc = 1;
  if (out) {
    google__protobuf__compiler__code_generator_response__pack(&resp, out);
    rc = fwrite(out, 1, olen, stdout) == olen && fflush(stdout) == 0 ? 0 : 1;
  }
  free(out);
  for (size_t i = 0; files && i < nfiles; i++)
    free(files[i].name);
  for (size_t i = 0; bufs && i < nfiles; i++)
    cg_buf_free(&bufs[i]);
  free(files);
  free(fp);
  free(bufs);
  free(bad_param);
  google__protobuf__compiler__code_generator_request__free_unpacked(req, NULL);
  return rc;
}
