/* libFuzzer target: service config parsing (SPEC SC-01..SC-12), with and
 * without problem collection, plus lookup and description of what parses. */
#include "service_config/service_config.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void count_problem(const grit_error_detail *p, void *user_data) {
  size_t *n = user_data;
  /* Every problem has a path rooted at "$" and a reason. */
  GRIT_ASSERT(p->path[0] == '$' && p->reason[0] != '\0');
  (*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The first byte picks the attempts cap, the rest is the JSON. */
  uint32_t cap = size ? data[0] % 8 : 0;
  const char *json = size ? (const char *)data + 1 : "";
  size_t len = size ? size - 1 : 0;
  grit_svccfg_opts o = {.max_attempts_cap = cap};
  grit_error_detail d;
  grit_svccfg *cfg = grit_svccfg_parse(json, len, &o, &d);

  size_t problems = 0;
  grit_svccfg_opts all = {.max_attempts_cap = cap,
                          .on_problem = count_problem,
                          .user_data = &problems};
  grit_svccfg *cfg2 = grit_svccfg_parse(json, len, &all, NULL);
  /* The checker's report, warnings (lint.c, issue 20) included. */
  char *report = NULL;
  grit_err crv = grit_service_config_check(json, len, &report);
  GRIT_ASSERT(crv == GRIT_ERR_NOMEM || report != NULL);
  GRIT_ASSERT(crv != GRIT_OK || cfg2 != NULL);
  grit_free(report);
  /* Collecting problems never changes the verdict. */
  GRIT_ASSERT((cfg == NULL) == (cfg2 == NULL));
  GRIT_ASSERT(cfg != NULL || problems > 0 || d.code == GRIT_ERR_NOMEM);
  grit_svccfg_unref(cfg2);

  if (!cfg) {
    GRIT_ASSERT(d.code == GRIT_ERR_INVALID_CONFIG || d.code == GRIT_ERR_NOMEM);
    return 0;
  }
  static const char *const paths[] = {"/S/M", "/pkg.Svc/Get", "",    "/",
                                      "//",   "/S/",          "S/M", "/a/b/c"};
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    const grit_method_cfg *m = grit_svccfg_find(cfg, paths[i]);
    if (m && m->policy == GRIT_POLICY_RETRY)
      GRIT_ASSERT(m->retry.max_attempts >= 2 || cap < 2);
  }
  const grit_svccfg_global *g = grit_svccfg_get_global(cfg);
  if (g->has_throttling)
    GRIT_ASSERT(g->max_tokens_milli > 0 && g->token_ratio_milli > 0);
  char *text = NULL;
  if (grit_svccfg_describe(cfg, &text) == GRIT_OK)
    GRIT_ASSERT(text && strlen(text) > 0);
  grit_free(text);
  grit_svccfg_unref(cfg);

  /* The element parsers on the same bytes. */
  int64_t ns;
  grit_svccfg_parse_duration(json, len, &ns, NULL);
  grit_status_code code;
  grit_svccfg_parse_status_code(json, len, &code, NULL);
  return 0;
}
