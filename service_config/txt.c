/* Service config in DNS TXT records (SPEC DNS-02..DNS-04; gRFC A2). */
#include "service_config/service_config_int.h"

#include <string.h>
#include <strings.h>

#define TXT_PREFIX "grpc_config="
#define TXT_PREFIX_LEN (sizeof(TXT_PREFIX) - 1)

grit_err grit_svccfg_txt_extract(const grit_txt_chunk *chunks, size_t n,
                                 char **value, size_t *len) {
  *value = NULL;
  if (len)
    *len = 0;
  /* DNS-02: the first record whose first string has the prefix; the other
   * records are ignored (grpc-core also takes the first such record). */
  size_t start = n;
  for (size_t i = 0; i < n; i++) {
    bool rec_start = i == 0 || chunks[i].record_start;
    if (rec_start && chunks[i].len >= TXT_PREFIX_LEN &&
        memcmp(chunks[i].data, TXT_PREFIX, TXT_PREFIX_LEN) == 0) {
      start = i;
      break;
    }
  }
  if (start == n)
    return GRIT_ERR_NOT_FOUND;
  grit_buf b;
  grit_buf_init(&b);
  grit_err rv = grit_buf_reserve(&b, 0);
  for (size_t i = start; rv == GRIT_OK && i < n; i++) {
    if (i > start && chunks[i].record_start)
      break;
    size_t skip = i == start ? TXT_PREFIX_LEN : 0;
    rv = grit_buf_append(&b, chunks[i].data + skip, chunks[i].len - skip);
  }
  if (rv != GRIT_OK) {
    grit_buf_free(&b);
    return GRIT_ERR_NOMEM;
  }
  *value = (char *)b.data;
  if (len)
    *len = b.len;
  return GRIT_OK;
}

/* Whether a clientLanguage / clientHostname list holds |want|. */
static bool list_has(const json_t *arr, const char *want, bool nocase) {
  size_t i;
  json_t *e;
  if (!want)
    return false;
  json_array_foreach(arr, i, e) {
    const char *s = json_string_value(e);
    if (nocase ? strcasecmp(s, want) == 0 : strcmp(s, want) == 0)
      return true;
  }
  return false;
}

static bool check_string_list(sc_ctx *c, const json_t *v) {
  if (!json_is_array(v)) {
    grit_sc_problem(c, "must be an array of strings");
    return false;
  }
  size_t i;
  json_t *e;
  json_array_foreach(v, i, e) {
    if (!json_is_string(e)) {
      size_t m = grit_sc_push_index(c, i);
      grit_sc_problem(c, "must be a string");
      grit_sc_pop(c, m);
      return false;
    }
  }
  return true;
}

/* DNS-03: the shape of one choice. Every choice is checked, not just the
 * one picked: an unknown key anywhere makes the whole TXT config invalid. */
static void check_choice(sc_ctx *c, const json_t *ch) {
  if (!json_is_object(ch)) {
    grit_sc_problem(c, "a choice must be an object");
    return;
  }
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)ch, key, v) {
    size_t m = grit_sc_push_key(c, key);
    bool null = json_is_null(v);
    if (strcmp(key, "clientLanguage") == 0 ||
        strcmp(key, "clientHostname") == 0) {
      if (!null)
        check_string_list(c, v);
    } else if (strcmp(key, "percentage") == 0) {
      if (!null && (!json_is_integer(v) || json_integer_value(v) < 0 ||
                    json_integer_value(v) > 100))
        grit_sc_problem(c, "must be an integer in 0..100");
    } else if (strcmp(key, "serviceConfig") == 0) {
      if (!json_is_object(v))
        grit_sc_problem(c, "must be an object");
    } else {
      grit_sc_problem(c, "unknown key in a service config choice");
    }
    grit_sc_pop(c, m);
  }
  if (!grit_sc_get(ch, "serviceConfig")) {
    size_t m = grit_sc_push_key(c, "serviceConfig");
    grit_sc_problem(c, "is required");
    grit_sc_pop(c, m);
  }
}

/* Whether the criteria other than percentage match this client. */
static bool choice_static_match(const json_t *ch, const char *hostname,
                                const char *language) {
  json_t *v;
  if ((v = grit_sc_get(ch, "clientLanguage")) && !list_has(v, language, true))
    return false;
  if ((v = grit_sc_get(ch, "clientHostname")) && !list_has(v, hostname, false))
    return false;
  return true;
}

static bool choice_matches(const json_t *ch, const char *hostname,
                           grit_rng *rng) {
  if (!choice_static_match(ch, hostname, "c"))
    return false;
  json_t *v = grit_sc_get(ch, "percentage");
  if (!v)
    return true;
  json_int_t p = json_integer_value(v);
  /* 0 never, 100 always, without drawing; otherwise p% of draws. */
  if (p <= 0)
    return false;
  if (p >= 100)
    return true;
  return rng && grit_rng_below(rng, 100) < (uint32_t)p;
}

/* Validate the TXT value: a JSON array of well-formed choices. */
static json_t *load_choices(sc_ctx *c, const char *txt, size_t len) {
  json_t *root = grit_sc_load(c, txt, len);
  if (!root)
    return NULL;
  if (!json_is_array(root)) {
    grit_sc_problem(c, "the TXT config must be a JSON array of choices");
    json_decref(root);
    return NULL;
  }
  size_t i;
  json_t *ch;
  json_array_foreach(root, i, ch) {
    size_t m = grit_sc_push_index(c, i);
    check_choice(c, ch);
    grit_sc_pop(c, m);
  }
  if (c->invalid) {
    json_decref(root);
    return NULL;
  }
  return root;
}

/* Compact JSON text of |v| in grit-allocated memory. */
static grit_err dump_json(const json_t *v, char **out, size_t *out_len) {
  size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
  if (n == 0)
    return GRIT_ERR_NOMEM;
  char *s = grit_malloc(n + 1);
  if (!s)
    return GRIT_ERR_NOMEM;
  json_dumpb(v, s, n, JSON_COMPACT);
  s[n] = '\0';
  *out = s;
  if (out_len)
    *out_len = n;
  return GRIT_OK;
}

grit_err grit_svccfg_choose_txt(const char *txt, size_t len,
                                const char *hostname, grit_rng *rng,
                                char **chosen, size_t *chosen_len,
                                grit_error_detail *d) {
  sc_ctx c;
  grit_sc_ctx_init(&c, d, NULL);
  *chosen = NULL;
  if (chosen_len)
    *chosen_len = 0;
  json_t *root = load_choices(&c, txt, len);
  if (!root)
    return GRIT_ERR_INVALID_CONFIG;
  grit_err rv = GRIT_ERR_NOT_FOUND;
  size_t i;
  json_t *ch;
  json_array_foreach(root, i, ch) {
    if (!choice_matches(ch, hostname, rng))
      continue;
    GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_DEBUG, "dns: TXT choice %zu chosen",
               i);
    rv = dump_json(grit_sc_get(ch, "serviceConfig"), chosen, chosen_len);
    if (rv == GRIT_ERR_NOMEM)
      grit_error_set(d, GRIT_ERR_NOMEM, "", "out of memory");
    break;
  }
  if (rv == GRIT_ERR_NOT_FOUND)
    grit_error_set(d, GRIT_ERR_NOT_FOUND, "$", "no choice matches");
  json_decref(root);
  return rv;
}

/* ---- `grit config check --dns` report ---- */

typedef struct report_ctx {
  grit_buf *b;
  const char *prefix; /* replaces the leading "$" of each problem path */
  grit_err rv;
} report_ctx;

static void report_problem(const grit_error_detail *p, void *user_data) {
  report_ctx *r = user_data;
  if (r->rv == GRIT_OK)
    r->rv = grit_buf_appendf(r->b, "  %s%s: %s\n", r->prefix, p->path + 1,
                             p->reason);
}

/* Validate choice |i|'s serviceConfig; describe it when |describe|, else
 * only say whether it is valid. Lint warnings either way. */
static grit_err report_choice_config(grit_buf *b, const json_t *sc, size_t i,
                                     bool describe, bool *valid) {
  char prefix[48];
  snprintf(prefix, sizeof(prefix), "$[%zu].serviceConfig", i);
  report_ctx r = {.b = b, .prefix = prefix, .rv = GRIT_OK};
  grit_svccfg_opts o = {.on_problem = report_problem, .user_data = &r};
  grit_error_detail d;
  sc_ctx c;
  grit_sc_ctx_init(&c, &d, &o);
  grit_svccfg *cfg = grit_sc_parse_value(&c, sc, &o);
  if (r.rv != GRIT_OK || c.nomem) {
    grit_svccfg_unref(cfg);
    return GRIT_ERR_NOMEM;
  }
  grit_err rv = GRIT_OK;
  if (!cfg) {
    *valid = false;
    rv = grit_buf_appendf(b, describe
                                 ? "  its serviceConfig is invalid (a client "
                                   "choosing it keeps its previous config)\n"
                                 : "  its serviceConfig is invalid too\n");
  } else if (describe) {
    rv = grit_sc_describe_into(b, cfg, "    ");
  } else {
    rv = grit_buf_appendf(b, "  its serviceConfig is valid\n");
  }
  grit_svccfg_unref(cfg);
  size_t n = 0;
  if (rv == GRIT_OK)
    rv = grit_sc_lint(b, sc, prefix, &n);
  return rv;
}

grit_err grit_sc_txt_report(grit_buf *b, const char *txt, size_t len,
                            const char *hostname, const char *language,
                            grit_err *verdict) {
  if (!language)
    language = "c";
  if (txt && len >= TXT_PREFIX_LEN &&
      memcmp(txt, TXT_PREFIX, TXT_PREFIX_LEN) == 0) {
    txt += TXT_PREFIX_LEN;
    len -= TXT_PREFIX_LEN;
  }
  grit_buf probs;
  grit_buf_init(&probs);
  report_ctx r = {.b = &probs, .prefix = "$", .rv = GRIT_OK};
  grit_svccfg_opts o = {.on_problem = report_problem, .user_data = &r};
  sc_ctx c;
  grit_sc_ctx_init(&c, NULL, &o);
  json_t *root = load_choices(&c, txt, len);
  grit_err rv = r.rv;
  bool valid = root != NULL, reachable = false, others_valid = true;
  *verdict = GRIT_ERR_INVALID_CONFIG;
  if (rv == GRIT_OK && !root)
    rv = grit_buf_appendf(b, "invalid TXT config (no config from DNS):\n%s",
                          probs.data ? (const char *)probs.data : "");
  grit_buf_free(&probs);
  if (!root)
    return rv;

  rv = grit_buf_appendf(b,
                        "TXT config: %zu choices, checked in order for "
                        "language %s, hostname %s\n",
                        json_array_size(root), language,
                        hostname ? hostname : "(none)");
  bool decided = false; /* an earlier choice always matches */
  size_t i;
  json_t *ch;
  json_array_foreach(root, i, ch) {
    if (rv != GRIT_OK)
      break;
    json_t *pct = grit_sc_get(ch, "percentage");
    json_int_t p = pct ? json_integer_value(pct) : 100;
    json_t *lang = grit_sc_get(ch, "clientLanguage");
    bool mine = choice_static_match(ch, hostname, language);
    bool chosen = false;
    if (decided) {
      rv = grit_buf_appendf(b,
                            "choice [%zu]: never reached (an earlier choice "
                            "always matches this client)\n",
                            i);
    } else if (!mine) {
      rv = grit_buf_appendf(b, "choice [%zu]: not for this client (%s)\n", i,
                            lang && !list_has(lang, language, true)
                                ? "clientLanguage does not list it"
                                : "clientHostname does not list this host");
    } else if (p == 0) {
      rv = grit_buf_appendf(b, "choice [%zu]: percentage 0, never chosen\n", i);
    } else {
      if (p >= 100)
        rv = grit_buf_appendf(b,
                              "choice [%zu]: chosen (every client that "
                              "reaches it)\n",
                              i);
      else
        rv = grit_buf_appendf(b,
                              "choice [%zu]: chosen by %d%% of the "
                              "clients that reach it\n",
                              i, (int)p);
      chosen = true;
      decided = p >= 100;
      reachable = true;
    }
    /* Every choice is validated: another client may choose it. */
    bool ok = true;
    if (rv == GRIT_OK)
      rv = report_choice_config(b, grit_sc_get(ch, "serviceConfig"), i, chosen,
                                &ok);
    if (!ok && chosen)
      valid = false;
    else if (!ok)
      others_valid = false;
  }
  if (rv == GRIT_OK && !decided)
    rv = grit_buf_appendf(b, "a client that matches no choice gets no config "
                             "from DNS\n");
  json_decref(root);
  *verdict = !valid || !others_valid ? GRIT_ERR_INVALID_CONFIG
             : reachable             ? GRIT_OK
                                     : GRIT_ERR_NOT_FOUND;
  return rv;
}
