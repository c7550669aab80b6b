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

#include "pbjson/pbjson.h"

struct call_types {
  pbj_pool *pool;
  pbj_method m; /* valid when has_method */
  bool has_method;
};

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
    if (!svc || !pbj_reflect_symbol(ch, opts, t->pool, svc, err, sizeof(err))) {
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

char *types_response_json(const call_types *t, const uint8_t *p, size_t len) {
  if (!t || !t->has_method)
    return NULL;
  char err[256];
  char *json = pbj_to_json(t->pool, t->m.out, p, len, err, sizeof(err));
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
  char err[512];
  bool ok = pbj_from_json(json_types->pool, json_types->m.in, text, n, out, len,
                          err, sizeof(err));
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

int types_list(const types_flags *tf, grit_channel *ch) {
  if (!tf->protoset && !tf->n_proto) {
    char **names = NULL;
    size_t n = 0;
    char err[512];
    if (!pbj_reflect_list(ch, NULL, &names, &n, err, sizeof(err))) {
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
  int rc = types_load(tf, ch, NULL, NULL, &t);
  if (rc != TOOL_EXIT_OK)
    return rc;
  const char *names[256];
  size_t n = pbj_pool_services(t->pool, names, 256);
  for (size_t i = 0; i < n && i < 256; i++)
    printf("%s\n", names[i]);
  types_free(t);
  return TOOL_EXIT_OK;
}

/* The symbols reflection may need to ask for: SYMBOL itself, and for a
 * method "pkg.Svc.Method" its service "pkg.Svc". */
int types_describe(const types_flags *tf, grit_channel *ch,
                   const char *symbol) {
  call_types *t = NULL;
  char err[512] = "";
  int rc;
  if (tf->protoset || tf->n_proto) {
    rc = types_load(tf, ch, NULL, NULL, &t);
    if (rc != TOOL_EXIT_OK)
      return rc;
  } else {
    t = calloc(1, sizeof(*t));
    if (!t || !(t->pool = pbj_pool_create())) {
      free(t);
      fprintf(stderr, "grit: out of memory\n");
      return TOOL_EXIT_FAILED;
    }
    bool ok = pbj_reflect_symbol(ch, NULL, t->pool, symbol, err, sizeof(err));
    if (!ok) {
      /* A method: ask for its service. */
      char *svc = strdup(symbol);
      char *sep = svc ? strchr(svc, '/') : NULL;
      if (svc && !sep)
        sep = strrchr(svc, '.');
      if (sep) {
        *sep = '\0';
        char err2[512];
        ok = pbj_reflect_symbol(ch, NULL, t->pool, svc, err2, sizeof(err2));
      }
      free(svc);
    }
    if (!ok) {
      fprintf(stderr, "grit: %s\n", err);
      types_free(t);
      return TOOL_EXIT_FAILED;
    }
  }
  char *text = pbj_describe(t->pool, symbol, err, sizeof(err));
  if (text)
    fputs(text, stdout);
  else
    fprintf(stderr, "grit: %s\n", err);
  free(text);
  types_free(t);
  return text ? TOOL_EXIT_OK : TOOL_EXIT_FAILED;
}
