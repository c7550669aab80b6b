/* grit call, list and describe with message types: where the descriptors
 * come from (--protoset, --proto via protoc -o, or server reflection), the
 * --data-json request decoder, and responses as proto3 JSON. The codec
 * itself is pbjson/. */
#include "call_json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "pbjson/pbjson.h"

struct call_types {
  pbj_pool *pool;
  pbj_method m; /* valid when has_method */
  bool has_method;
  unsigned json_flags; /* PBJ_EMIT_DEFAULTS */
  /* Types came by reflection: an Any naming a type the pool lacks asks
   * the server for it (on |ch| with |opts|). */
  grit_channel *ch;
  grit_call_opts opts;
  bool reflected;
};

/* Reflection calls without a deadline of their own get this one, so that
 * a server whose reflection never answers cannot hang grit. */
#define REFLECT_DEFAULT_TIMEOUT_MS 10000

static grit_call_opts reflect_opts(const grit_call_opts *opts) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION};
  if (opts) {
    o.version = opts->version;
    o.timeout_ms = opts->timeout_ms;
    o.metadata = opts->metadata;
  }
  if (!o.timeout_ms)
    o.timeout_ms = REFLECT_DEFAULT_TIMEOUT_MS;
  return o;
}

/* Run protoc --include_imports -o TMP over the --proto files and return
 * the descriptor set it wrote (malloc'd), or NULL (message printed). */
static char *run_protoc(const types_flags *tf, size_t *len) {
  const char *tmpdir = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof(path), "%s/grit-protoset.XXXXXX",
           tmpdir && tmpdir[0] ? tmpdir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) {
    fprintf(stderr, "grit: mkstemp: %s\n", strerror(errno));
    return NULL;
  }
  close(fd);
  size_t argc = 0, max = 4 + tf->n_import + tf->n_proto;
  char **argv = calloc(max + 1, sizeof(char *));
  char *out_arg = malloc(strlen(path) + 3);
  char *data = NULL;
  if (!argv || !out_arg) {
    fprintf(stderr, "grit: out of memory\n");
    goto done;
  }
  snprintf(out_arg, strlen(path) + 3, "-o%s", path);
  argv[argc++] = (char *)"protoc";
  argv[argc++] = (char *)"--include_imports";
  argv[argc++] = out_arg;
  char **imports = calloc(tf->n_import + 1, sizeof(char *));
  for (size_t i = 0; imports && i < tf->n_import; i++) {
    size_t n = strlen(tf->import[i]) + 3;
    imports[i] = malloc(n);
    if (imports[i]) {
      snprintf(imports[i], n, "-I%s", tf->import[i]);
      argv[argc++] = imports[i];
    }
  }
  for (size_t i = 0; i < tf->n_proto; i++)
    argv[argc++] = (char *)tf->proto[i];
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    execvp("protoc", argv);
    fprintf(stderr, "grit: cannot run protoc: %s\n", strerror(errno));
    _exit(127);
  }
  int status = 0;
  bool ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0;
  if (pid < 0)
    fprintf(stderr, "grit: fork: %s\n", strerror(errno));
  else if (!ok)
    fprintf(stderr, "grit: protoc could not compile the --proto files\n");
  if (ok)
    data = tool_read_file(path, len);
  for (size_t i = 0; imports && i < tf->n_import; i++)
    free(imports[i]);
  free(imports);
done:
  unlink(path);
  free(argv);
  free(out_arg);
  return data;
}

/* A full symbol name out of "/pkg.Svc/Method": "pkg.Svc". */
static char *service_of(const char *path) {
  const char *s = path[0] == '/' ? path + 1 : path;
  const char *slash = strrchr(s, '/');
  return slash ? strndup(s, (size_t)(slash - s)) : strdup(s);
}

int types_load(const types_flags *tf, grit_channel *ch,
               const grit_call_opts *opts, const char *symbol,
               call_types **out) {
  *out = NULL;
  call_types *t = calloc(1, sizeof(*t));
  if (!t || !(t->pool = pbj_pool_create())) {
    free(t);
    fprintf(stderr, "grit: out of memory\n");
    return TOOL_EXIT_FAILED;
  }
  char err[512] = "";
  int rc = TOOL_EXIT_OK;
  /* The standard error details, so that an Any packing one resolves
   * whatever the server's files are. */
  if (!pbj_pool_add_rpc_status(t->pool, err, sizeof(err))) {
    fprintf(stderr, "grit: %s\n", err);
    types_free(t);
    return TOOL_EXIT_FAILED;
  }
  if (tf->protoset || tf->n_proto) {
    size_t len = 0;
    char *data = tf->protoset ? tool_read_file(tf->protoset, &len)
                              : run_protoc(tf, &len);
    if (!data) {
      rc = TOOL_EXIT_USAGE;
    } else if (!pbj_pool_add_set(t->pool, (const uint8_t *)data, len, err,
                                 sizeof(err))) {
      fprintf(stderr, "grit: %s: %s\n", tf->protoset ? tf->protoset : "--proto",
              err);
      rc = TOOL_EXIT_USAGE;
    }
    free(data);
  } else if (symbol) {
    char *svc = service_of(symbol);
    t->ch = ch;
    t->opts = reflect_opts(opts);
    t->reflected = true;
    if (!svc ||
        !pbj_reflect_symbol(ch, &t->opts, t->pool, svc, err, sizeof(err))) {
      fprintf(stderr, "grit: cannot load the types of %s: %s\n",
              svc ? svc : symbol, svc ? err : "out of memory");
      rc = TOOL_EXIT_FAILED;
    }
    free(svc);
  }
  if (rc != TOOL_EXIT_OK) {
    types_free(t);
    return rc;
  }
  *out = t;
  return rc;
}

void types_free(call_types *t) {
  if (!t)
    return;
  pbj_pool_destroy(t->pool);
  free(t);
}

int types_find_method(call_types *t, const char *path, grit_method_kind *kind) {
  if (!pbj_pool_method(t->pool, path, &t->m)) {
    fprintf(stderr, "grit: method %s is not in the descriptors\n", path);
    return TOOL_EXIT_USAGE;
  }
  if (!pbj_pool_has_message(t->pool, t->m.in) ||
      !pbj_pool_has_message(t->pool, t->m.out)) {
    fprintf(stderr,
            "grit: the descriptors lack %s or %s (for a descriptor set, "
            "use protoc --include_imports)\n",
            t->m.in, t->m.out);
    return TOOL_EXIT_USAGE;
  }
  t->has_method = true;
  *kind = t->m.client_streaming && t->m.server_streaming
              ? GRIT_METHOD_BIDI_STREAMING
          : t->m.client_streaming ? GRIT_METHOD_CLIENT_STREAMING
          : t->m.server_streaming ? GRIT_METHOD_SERVER_STREAMING
                                  : GRIT_METHOD_UNARY;
  return TOOL_EXIT_OK;
}

void types_set_emit_defaults(call_types *t, bool on) {
  if (on)
    t->json_flags |= PBJ_EMIT_DEFAULTS;
  else
    t->json_flags &= ~(unsigned)PBJ_EMIT_DEFAULTS;
}

/* Load the file defining |type| by reflection; false if it cannot be. */
static bool reflect_more(const call_types *t, const char *type) {
  char err[256];
  if (!t->reflected || pbj_pool_has_message(t->pool, type))
    return false;
  grit_call_opts o = t->opts;
  return pbj_reflect_symbol(t->ch, &o, t->pool, type, err, sizeof(err));
}

char *types_response_json(const call_types *t, const uint8_t *p, size_t len,
                          bool resolve) {
  if (!t || !t->has_method)
    return NULL;
  char err[256], missing[256];
  char *json = NULL;
  /* An Any of a type the pool lacks: ask reflection (a few times: the
   * packed message may hold more Anys), else print it raw. */
  for (int round = 0; !json && round < 8; round++) {
    json = pbj_to_json_ex(t->pool, t->m.out, p, len, t->json_flags, missing,
                          sizeof(missing), err, sizeof(err));
    if (json || !missing[0])
      break;
    if (!resolve || !reflect_more(t, missing)) {
      json =
          pbj_to_json_ex(t->pool, t->m.out, p, len, t->json_flags | PBJ_ANY_RAW,
                         NULL, 0, err, sizeof(err));
      break;
    }
  }
  if (!json)
    fprintf(stderr,
            "grit: the response does not decode as %s (%s); "
            "printed in hex\n",
            t->m.out, err);
  return json;
}

/* The request decoder's type: req_decode_fn has no context argument, and
 * one grit call has one request type. */
static const call_types *json_types;
static char json_why[600];

void types_use_for_requests(const call_types *t) {
  json_types = t;
}

bool req_decode_json(const char *text, uint8_t **out, size_t *len,
                     const char **why) {
  const char *arg = text;
  char *file = NULL;
  size_t n = strlen(text);
  if (text[0] == '@') {
    file = tool_read_file(text + 1, &n);
    if (!file) {
      *why = "unreadable";
      return false;
    }
    text = file;
  }
  char err[512], missing[256];
  bool ok = false;
  for (int round = 0; round < 8; round++) {
    ok = pbj_from_json_ex(json_types->pool, json_types->m.in, text, n, missing,
                          sizeof(missing), out, len, err, sizeof(err));
    if (ok || !missing[0] || !reflect_more(json_types, missing))
      break;
  }
  if (!ok) {
    snprintf(json_why, sizeof(json_why), "not a valid %s (%s)",
             json_types->m.in, err);
    *why = json_why;
    /* The source prints nothing for @FILE (a read error has been
     * printed); a file that reads but does not decode is said here. */
    if (file)
      fprintf(stderr, "grit: --data-json %s is %s\n", arg, json_why);
  }
  free(file);
  return ok;
}

/* ---- grit list, grit describe ---- */

/* A pool with |symbol|'s file: from the files, or by reflection (for a
 * method, field or enum value "pkg.X.y" or "pkg.X/y": its parent's).
 * NULL with a message printed; |*rc| the exit status. */
static call_types *load_for(const types_flags *tf, grit_channel *ch,
                            const grit_call_opts *opts, const char *symbol,
                            int *rc) {
  call_types *t = NULL;
  char err[512] = "";
  if (tf->protoset || tf->n_proto) {
    *rc = types_load(tf, ch, opts, NULL, &t);
    return t;
  }
  *rc = TOOL_EXIT_FAILED;
  t = calloc(1, sizeof(*t));
  if (!t || !(t->pool = pbj_pool_create())) {
    free(t);
    fprintf(stderr, "grit: out of memory\n");
    return NULL;
  }
  if (symbol[0] == '.')
    symbol++;
  bool ok = pbj_reflect_symbol(ch, opts, t->pool, symbol, err, sizeof(err));
  if (!ok) {
    /* A member: ask for its parent. */
    char *parent = strdup(symbol);
    char *sep = parent ? strchr(parent, '/') : NULL;
    if (parent && !sep)
      sep = strrchr(parent, '.');
    if (sep) {
      *sep = '\0';
      char err2[512];
      ok = pbj_reflect_symbol(ch, opts, t->pool, parent, err2, sizeof(err2));
    }
    free(parent);
  }
  if (!ok) {
    fprintf(stderr, "grit: %s\n", err);
    types_free(t);
    return NULL;
  }
  *rc = TOOL_EXIT_OK;
  return t;
}

int types_list(const types_flags *tf, grit_channel *ch,
               const grit_call_opts *opts, const char *service) {
  if (service) {
    int rc;
    call_types *t = load_for(tf, ch, opts, service, &rc);
    if (!t)
      return rc;
    const char *names[512];
    const char *svc = service[0] == '.' ? service + 1 : service;
    size_t n = pbj_service_methods(t->pool, svc, names, 512);
    if (n == (size_t)-1) {
      fprintf(stderr, "grit: %s is not a service\n", svc);
      types_free(t);
      return TOOL_EXIT_FAILED;
    }
    for (size_t i = 0; i < n && i < 512; i++)
      printf("%s.%s\n", svc, names[i]);
    types_free(t);
    return TOOL_EXIT_OK;
  }
  if (!tf->protoset && !tf->n_proto) {
    char **names = NULL;
    size_t n = 0;
    char err[512];
    if (!pbj_reflect_list(ch, opts, &names, &n, err, sizeof(err))) {
      fprintf(stderr, "grit: %s\n", err);
      return TOOL_EXIT_FAILED;
    }
    for (size_t i = 0; i < n; i++) {
      printf("%s\n", names[i]);
      free(names[i]);
    }
    free(names);
    return TOOL_EXIT_OK;
  }
  call_types *t;
  int rc = types_load(tf, ch, opts, NULL, &t);
  if (rc != TOOL_EXIT_OK)
    return rc;
  const char *names[256];
  size_t n = pbj_pool_services(t->pool, names, 256);
  for (size_t i = 0; i < n && i < 256; i++)
    printf("%s\n", names[i]);
  types_free(t);
  return TOOL_EXIT_OK;
}

int types_describe(const types_flags *tf, grit_channel *ch,
                   const grit_call_opts *opts, const char *symbol,
                   bool template) {
  int rc;
  call_types *t = load_for(tf, ch, opts, symbol, &rc);
  if (!t)
    return rc;
  char err[512];
  char *text = template ? pbj_template(t->pool, symbol, err, sizeof(err))
                        : pbj_describe(t->pool, symbol, err, sizeof(err));
  if (text && template) {
    /* Indented, to edit by hand. */
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    char *pretty =
        j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (pretty) {
      free(text);
      text = pretty;
    }
    printf("%s\n", text);
  } else if (text) {
    fputs(text, stdout);
  } else {
    fprintf(stderr, "grit: %s\n", err);
  }
  bool ok = text != NULL;
  free(text);
  types_free(t);
  return ok ? TOOL_EXIT_OK : TOOL_EXIT_FAILED;
}
