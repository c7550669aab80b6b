/* Public entry points for `grit config check` (tools/ sees only grit.h). */
#include "service_config/service_config_int.h"

#include <string.h>
#include <unistd.h>

typedef struct check_ctx {
  grit_buf *b;
  size_t count;
  grit_err rv;
} check_ctx;

static void on_problem(const grit_error_detail *p, void *user_data) {
  check_ctx *k = user_data;
  k->count++;
  if (k->rv == GRIT_OK)
    k->rv = grit_buf_appendf(k->b, "  %s: %s\n", p->path, p->reason);
}

static grit_err finish(grit_buf *b, grit_err rv, char **report) {
  if (rv == GRIT_ERR_NOMEM || !report) {
    grit_buf_free(b);
    return rv;
  }
  *report = (char *)b->data;
  return rv;
}

grit_err grit_service_config_check(const char *json, size_t len,
                                   char **report) {
  if (report)
    *report = NULL;
  if (!json)
    return GRIT_ERR_INVALID_ARG;
  grit_buf probs, out;
  grit_buf_init(&probs);
  grit_buf_init(&out);
  check_ctx k = {.b = &probs, .count = 0, .rv = GRIT_OK};
  grit_svccfg_opts o = {.on_problem = on_problem, .user_data = &k};
  grit_error_detail d;
  grit_svccfg *cfg = grit_svccfg_parse(json, len, &o, &d);
  grit_err rv = grit_buf_reserve(&out, 0);
  if (rv == GRIT_OK && k.rv != GRIT_OK)
    rv = k.rv;
  if (rv == GRIT_OK && !cfg && d.code == GRIT_ERR_NOMEM)
    rv = GRIT_ERR_NOMEM;
  if (rv == GRIT_OK && cfg) {
    rv = grit_buf_appendf(&out, "valid service config\n");
    if (rv == GRIT_OK)
      rv = grit_sc_describe_into(&out, cfg, "");
  } else if (rv == GRIT_OK) {
    rv = grit_buf_appendf(&out, "invalid service config (%zu problem%s):\n%s",
                          k.count, k.count == 1 ? "" : "s",
                          (const char *)probs.data);
    if (rv == GRIT_OK)
      rv = GRIT_ERR_INVALID_CONFIG;
  }
  grit_svccfg_unref(cfg);
  grit_buf_free(&probs);
  /* Warnings, valid or not (issue 20): a second, lenient load. */
  if (rv == GRIT_OK || rv == GRIT_ERR_INVALID_CONFIG) {
    json_t *root = json_loadb(json, len, JSON_DECODE_ANY, NULL);
    grit_buf w;
    grit_buf_init(&w);
    size_t n = 0;
    grit_err lrv = root ? grit_sc_lint(&w, root, "$", &n) : GRIT_OK;
    if (lrv == GRIT_OK && n > 0)
      lrv = grit_buf_appendf(&out, "%zu warning%s (accepted, but check):\n%s",
                             n, n == 1 ? "" : "s", (const char *)w.data);
    if (lrv != GRIT_OK)
      rv = lrv;
    grit_buf_free(&w);
    json_decref(root);
  }
  return finish(&out, rv, report);
}

grit_err grit_service_config_check_txt(const char *txt, size_t len,
                                       const char *hostname, char **report) {
  return grit_service_config_check_txt_for(txt, len, hostname, NULL, report);
}

grit_err grit_service_config_check_txt_for(const char *txt, size_t len,
                                           const char *hostname,
                                           const char *language,
                                           char **report) {
  if (report)
    *report = NULL;
  if (!txt)
    return GRIT_ERR_INVALID_ARG;
  char host[256];
  if (!hostname && gethostname(host, sizeof(host)) == 0) {
    host[sizeof(host) - 1] = '\0';
    hostname = host;
  }
  grit_buf out;
  grit_buf_init(&out);
  grit_err verdict = GRIT_OK;
  grit_err rv = grit_buf_reserve(&out, 0);
  if (rv == GRIT_OK)
    rv = grit_sc_txt_report(&out, txt, len, hostname, language, &verdict);
  if (rv == GRIT_OK)
    rv = verdict;
  return finish(&out, rv, report);
}
