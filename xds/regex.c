/* Regular expressions with RE2's semantics for what xDS resources carry
 * (safe_regex: full match, linear time): PCRE2 in DFA mode, which cannot
 * backtrack, after a syntax check that refuses what RE2 refuses
 * (backreferences, lookaround, atomic groups, possessive quantifiers,
 * recursion and subroutine calls, backtracking verbs, \C). PCRE2's memory
 * goes through grit's allocator. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "xds/xds_int.h"

#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#define DFA_WORKSPACE 1000 /* ints; grown on PCRE2_ERROR_DFA_WSSIZE */

struct xds_regex {
  pcre2_code *code;
  pcre2_general_context *gc;
};

static void *re_malloc(PCRE2_SIZE n, void *ud) {
  (void)ud;
  return grit_malloc(n);
}

static void re_free(void *p, void *ud) {
  (void)ud;
  grit_free(p);
}

void grit_xds_regex_free(xds_regex *re) {
  if (!re)
    return;
  pcre2_code_free(re->code);
  pcre2_general_context_free(re->gc);
  grit_free(re);
}

/* What RE2 does not have. Walks the pattern outside character classes. */
static const char *re2_unsupported(const char *p) {
  bool in_class = false;
  for (size_t i = 0; p[i]; i++) {
    char ch = p[i];
    if (ch == '\\') {
      char n = p[i + 1];
      if (!n)
        return "trailing backslash";
      if (!in_class && ((n >= '1' && n <= '9') || n == 'g' || n == 'k'))
        return "backreferences are not supported (RE2)";
      if (n == 'C')
        return "\\C is not supported (RE2)";
      i++;
      continue;
    }
    if (in_class) {
      if (ch == ']')
        in_class = false;
      continue;
    }
    if (ch == '[') {
      in_class = true;
      if (p[i + 1] == '^')
        i++;
      if (p[i + 1] == ']')
        i++; /* a leading ']' is literal */
      continue;
    }
    if (ch == '(' && p[i + 1] == '*')
      return "backtracking verbs are not supported (RE2)";
    if (ch == '(' && p[i + 1] == '?') {
      const char *q = p + i + 2;
      if (*q == '=' || *q == '!' || (*q == '<' && (q[1] == '=' || q[1] == '!')))
        return "lookaround is not supported (RE2)";
      if (*q == '>')
        return "atomic groups are not supported (RE2)";
      if (*q == 'R' || (*q >= '0' && *q <= '9') || *q == '&' || *q == '+' ||
          (*q == 'P' && q[1] == '>') || *q == '|' || *q == '(')
        return "recursion, subroutines and conditionals are not supported "
               "(RE2)";
    }
    if ((ch == '*' || ch == '+' || ch == '?' || ch == '}') && p[i + 1] == '+')
      return "possessive quantifiers are not supported (RE2)";
  }
  return in_class ? "missing ]" : NULL;
}

xds_regex *grit_xds_regex_compile(xds_arena *a, const char *pattern,
                                  const char **why) {
  *why = re2_unsupported(pattern);
  if (*why)
    return NULL;
  xds_regex *re = grit_calloc(1, sizeof(*re));
  if (!re)
    return NULL;
  re->gc = pcre2_general_context_create(re_malloc, re_free, NULL);
  pcre2_compile_context *cc =
      re->gc ? pcre2_compile_context_create(re->gc) : NULL;
  if (!cc) {
    grit_xds_regex_free(re);
    return NULL;
  }
  int errcode;
  PCRE2_SIZE erroff;
  re->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                           PCRE2_UTF, &errcode, &erroff, cc);
  pcre2_compile_context_free(cc);
  if (!re->code) {
    char text[128];
    if (errcode == PCRE2_ERROR_NOMEMORY || errcode == PCRE2_ERROR_HEAP_FAILED) {
      grit_xds_regex_free(re);
      return NULL;
    }
    /* A static buffer only for the reason text of this one failure: the
     * decoder copies it into its error at once, on the same thread. */
    static __thread char buf[160];
    pcre2_get_error_message(errcode, (PCRE2_UCHAR *)text, sizeof(text));
    snprintf(buf, sizeof(buf), "invalid regex at %zu: %s", (size_t)erroff,
             text);
    *why = buf;
    grit_xds_regex_free(re);
    return NULL;
  }
  if (!grit_xds_arena_keep_regex(a, re)) {
    grit_xds_regex_free(re);
    return NULL;
  }
  return re;
}

bool grit_xds_regex_match(const xds_regex *re, const char *s, size_t len) {
  pcre2_match_data *md = pcre2_match_data_create(1, re->gc);
  if (!md)
    return false;
  int ws_size = DFA_WORKSPACE;
  int rc;
  for (;;) {
    int *ws = grit_malloc((size_t)ws_size * sizeof(int));
    if (!ws) {
      rc = PCRE2_ERROR_NOMEMORY;
      break;
    }
    rc = pcre2_dfa_match(re->code, (PCRE2_SPTR)s, len, 0,
                         PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, NULL, ws,
                         (PCRE2_SIZE)ws_size);
    grit_free(ws);
    if (rc != PCRE2_ERROR_DFA_WSSIZE || ws_size >= 1 << 20)
      break;
    ws_size *= 4;
  }
  pcre2_match_data_free(md);
  return rc >= 0;
}

char *grit_xds_regex_replace(const xds_regex *re, const char *s,
                             const char *sub) {
  /* RE2's "\1" references become PCRE2's "$1"; "\\" a backslash. */
  size_t sl = strlen(sub);
  char *rep = grit_malloc(2 * sl + 1);
  if (!rep)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < sl; i++) {
    if (sub[i] == '\\' && i + 1 < sl && sub[i + 1] >= '0' &&
        sub[i + 1] <= '9') {
      rep[o++] = '$';
      rep[o++] = sub[++i];
    } else if (sub[i] == '\\' && i + 1 < sl && sub[i + 1] == '\\') {
      rep[o++] = '\\';
      i++;
    } else if (sub[i] == '$') {
      rep[o++] = '$';
      rep[o++] = '$';
    } else {
      rep[o++] = sub[i];
    }
  }
  rep[o] = '\0';
  /* Substitution needs the captures that matching the rule itself did not
   * need: a backtracking match of the same code, bounded by a match limit
   * so a hostile pattern cannot run away. */
  pcre2_match_context *mc = pcre2_match_context_create(re->gc);
  char *out = NULL;
  if (mc) {
    pcre2_set_match_limit(mc, 100000);
    PCRE2_SIZE cap = strlen(s) * 2 + 64;
    for (int tries = 0; tries < 8 && !out; tries++) {
      PCRE2_UCHAR *buf = grit_malloc(cap);
      if (!buf)
        break;
      PCRE2_SIZE outlen = cap;
      int rc = pcre2_substitute(
          re->code, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0,
          PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH, NULL, mc,
          (PCRE2_SPTR)rep, PCRE2_ZERO_TERMINATED, buf, &outlen);
      if (rc >= 0) {
        out = (char *)buf;
      } else {
        grit_free(buf);
        if (rc != PCRE2_ERROR_NOMEMORY)
          break;
        cap = outlen + 1;
      }
    }
    pcre2_match_context_free(mc);
  }
  grit_free(rep);
  return out;
}
