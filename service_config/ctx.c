/* Validation context (JSON paths, problem reporting), JSON loading, and the
 * element parsers: durations and status codes. */
#include "service_config/service_config_int.h"

#include <stdio.h>
#include <string.h>

void grit_sc_ctx_init(sc_ctx *c, grit_error_detail *d,
                      const grit_svccfg_opts *o) {
  memset(c, 0, sizeof(*c));
  c->d = d;
  if (o) {
    c->on_problem = o->on_problem;
    c->user_data = o->user_data;
  }
  c->path[0] = '$';
  c->path[1] = '\0';
  c->plen = 1;
  if (d) {
    d->code = GRIT_OK;
    d->path[0] = '\0';
    d->reason[0] = '\0';
  }
}

/* Keep the path NUL-terminated; a path too long for the buffer is cut. */
static void ctx_advance(sc_ctx *c, int n) {
  size_t room = sizeof(c->path) - c->plen;
  if (n < 0)
    n = 0;
  c->plen += (size_t)n < room ? (size_t)n : room - 1;
}

size_t grit_sc_push_key(sc_ctx *c, const char *key) {
  size_t mark = c->plen;
  ctx_advance(
      c, snprintf(c->path + c->plen, sizeof(c->path) - c->plen, ".%s", key));
  return mark;
}

size_t grit_sc_push_index(sc_ctx *c, size_t i) {
  size_t mark = c->plen;
  ctx_advance(
      c, snprintf(c->path + c->plen, sizeof(c->path) - c->plen, "[%zu]", i));
  return mark;
}

void grit_sc_pop(sc_ctx *c, size_t mark) {
  c->plen = mark;
  c->path[mark] = '\0';
}

void grit_sc_problem(sc_ctx *c, const char *fmt, ...) {
  grit_error_detail p;
  p.code = GRIT_ERR_INVALID_CONFIG;
  snprintf(p.path, sizeof(p.path), "%s", c->path);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p.reason, sizeof(p.reason), fmt, ap);
  va_end(ap);
  if (!c->invalid && c->d)
    *c->d = p;
  c->invalid = true;
  GRIT_TRACE(GRIT_TRACE_CONFIG, GRIT_LEVEL_DEBUG, "config: %s: %s", p.path,
             p.reason);
  if (c->on_problem)
    c->on_problem(&p, c->user_data);
}

void grit_sc_nomem(sc_ctx *c) {
  c->nomem = true;
  grit_error_set(c->d, GRIT_ERR_NOMEM, "", "out of memory");
}

json_t *grit_sc_get(const json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  return json_is_null(v) ? NULL : v;
}

json_t *grit_sc_load(sc_ctx *c, const char *text, size_t len) {
  json_error_t je;
  if (!text) {
    grit_sc_problem(c, "no JSON text");
    return NULL;
  }
  /* Duplicate keys are an error, as in grpc-core's JSON reader: a config
   * whose meaning depends on which duplicate wins is not accepted. */
  json_t *root =
      json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
  if (!root) {
    /* jansson reports its own allocation failures like syntax errors; grit
     * cannot tell them apart, so both are INVALID_CONFIG. */
    grit_sc_problem(c, "invalid JSON at line %d column %d: %s", je.line,
                    je.column, je.text);
  }
  return root;
}

/* SPEC SC-06: proto3 JSON Duration, "<sec>[.<1-9 digits>]s". Stricter than
 * grpc-core's SimpleAtoi-based parser: no sign, no spaces, no ".5s". */
#define SC_MAX_SECONDS 315576000000LL

bool grit_sc_duration_from_text(const char *s, size_t len, int64_t *out_ns,
                                sc_dur *exact, const char **why) {
  if (len == 0 || s[len - 1] != 's') {
    *why = "must be a duration string ending in 's', like \"1.5s\"";
    return false;
  }
  len--;
  size_t i = 0;
  if (i < len && s[i] == '-') {
    *why = "must not be negative";
    return false;
  }
  int64_t sec = 0;
  size_t digits = 0;
  for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
    sec = sec * 10 + (s[i] - '0');
    if (sec > SC_MAX_SECONDS) {
      *why = "seconds must be at most 315576000000";
      return false;
    }
  }
  if (digits == 0) {
    *why = "must start with a digit, like \"0.5s\"";
    return false;
  }
  int64_t nanos = 0;
  if (i < len && s[i] == '.') {
    i++;
    size_t fd = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, fd++) {
      if (fd == 9) {
        *why = "at most 9 digits may follow '.'";
        return false;
      }
      nanos = nanos * 10 + (s[i] - '0');
    }
    if (fd == 0) {
      *why = "a digit must follow '.'";
      return false;
    }
    for (; fd < 9; fd++)
      nanos *= 10;
  }
  if (i != len) {
    *why = "must be a duration string like \"1.5s\"";
    return false;
  }
  if (exact)
    *exact = (sc_dur){.sec = sec, .nanos = (int32_t)nanos};
  /* Nanoseconds in int64 reach about 292 years; longer saturates. */
  if (sec > (INT64_MAX - nanos) / 1000000000LL)
    *out_ns = INT64_MAX;
  else
    *out_ns = sec * 1000000000LL + nanos;
  return true;
}

grit_err grit_svccfg_parse_duration(const char *s, size_t len, int64_t *out_ns,
                                    grit_error_detail *d) {
  const char *why = "no input";
  int64_t ns = 0;
  if (s && grit_sc_duration_from_text(s, len, &ns, NULL, &why)) {
    if (out_ns)
      *out_ns = ns;
    if (d)
      d->code = GRIT_OK;
    return GRIT_OK;
  }
  grit_error_set(d, GRIT_ERR_PARSE, "$", "%s", why);
  return GRIT_ERR_PARSE;
}

/* SPEC SC-10/SC-11: an integer 0..16 or a case-insensitive name; OK is not
 * a valid member of either list. Integral reals (14.0) and numeric strings
 * ("14") are refused, as grpc-core refuses non-integers. */
bool grit_sc_status_code_from_json(const json_t *v, grit_status_code *out,
                                   const char **why) {
  grit_status_code code;
  if (json_is_integer(v)) {
    json_int_t n = json_integer_value(v);
    if (n < 0 || n >= GRIT_STATUS_COUNT) {
      *why = "status code must be in 0..16";
      return false;
    }
    code = (grit_status_code)n;
  } else if (json_is_string(v)) {
    if (grit_status_code_parse(json_string_value(v), json_string_length(v),
                               &code) != GRIT_OK) {
      *why = "unknown status code name";
      return false;
    }
  } else {
    *why = "status code must be an integer or a name like \"UNAVAILABLE\"";
    return false;
  }
  if (code == GRIT_STATUS_OK) {
    *why = "OK is not allowed in a status code list";
    return false;
  }
  *out = code;
  return true;
}

grit_err grit_svccfg_parse_status_code(const char *json, size_t len,
                                       grit_status_code *out,
                                       grit_error_detail *d) {
  if (!json) {
    grit_error_set(d, GRIT_ERR_PARSE, "$", "no input");
    return GRIT_ERR_PARSE;
  }
  json_error_t je;
  json_t *v = json_loadb(json, len, JSON_DECODE_ANY, &je);
  if (!v) {
    grit_error_set(d, GRIT_ERR_PARSE, "$", "invalid JSON: %s", je.text);
    return GRIT_ERR_PARSE;
  }
  const char *why = NULL;
  grit_status_code code;
  bool ok = grit_sc_status_code_from_json(v, &code, &why);
  json_decref(v);
  if (!ok) {
    grit_error_set(d, GRIT_ERR_PARSE, "$", "%s", why);
    return GRIT_ERR_PARSE;
  }
  if (out)
    *out = code;
  if (d)
    d->code = GRIT_OK;
  return GRIT_OK;
}
