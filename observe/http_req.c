/* The request side of HTTP/1.1 (RFC 9112 §3, §5, §9.3) for the admin
 * endpoint (SPEC OP-03): the request line and the headers, enough to
 * route a GET and to know whether the connection stays open. No body is
 * accepted. Pure: no I/O, no allocation. */
#include "observe/observe.h"

#include <string.h>
#include <strings.h>

/* A token character of RFC 9110 §5.6.2 (methods and header names). */
static bool tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
      (c >= '0' && c <= '9'))
    return true;
  return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* The header value with surrounding blanks trimmed. */
static void trim(const char **v, size_t *n) {
  while (*n && ((*v)[0] == ' ' || (*v)[0] == '\t')) {
    (*v)++;
    (*n)--;
  }
  while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
    (*n)--;
}

/* Whether the comma-separated list |v| holds |tok| (case-insensitive). */
static bool list_has(const char *v, size_t n, const char *tok) {
  size_t tl = strlen(tok);
  while (n) {
    const char *comma = memchr(v, ',', n);
    size_t en = comma ? (size_t)(comma - v) : n;
    const char *e = v;
    size_t el = en;
    trim(&e, &el);
    if (el == tl && strncasecmp(e, tok, tl) == 0)
      return true;
    if (!comma)
      break;
    v = comma + 1;
    n -= en + 1;
  }
  return false;
}

static int parse_line(const char *p, size_t n, grit_http_req *out) {
  size_t i = 0;
  while (i < n && tchar(p[i]))
    i++;
  if (i == 0 || i >= sizeof(out->method) || i >= n || p[i] != ' ')
    return GRIT_HTTP_BAD;
  memcpy(out->method, p, i);
  out->method[i] = '\0';
  size_t t0 = ++i;
  while (i < n && p[i] != ' ')
    if ((unsigned char)p[i++] <= 0x20)
      return GRIT_HTTP_BAD;
  size_t tn = i - t0;
  if (tn == 0 || p[t0] != '/' || i >= n)
    return GRIT_HTTP_BAD;
  const char *q = memchr(p + t0, '?', tn);
  size_t pn = q ? (size_t)(q - (p + t0)) : tn; /* the query is not routed */
  if (pn >= sizeof(out->path))
    return GRIT_HTTP_BAD;
  memcpy(out->path, p + t0, pn);
  out->path[pn] = '\0';
  const char *ver = p + i + 1;
  size_t vn = n - i - 1;
  if (vn != 8 || memcmp(ver, "HTTP/1.", 7) != 0 ||
      (ver[7] != '0' && ver[7] != '1'))
    return GRIT_HTTP_BAD;
  out->keep_alive = ver[7] == '1'; /* 1.1 persists unless told (§9.3) */
  return GRIT_HTTP_DONE;
}

int grit_http_parse_request(const char *buf, size_t len, grit_http_req *out) {
  memset(out, 0, sizeof(*out));
  /* The whole head must be there: up to the empty line. */
  const char *end = NULL;
  for (size_t i = 0; i + 3 < len; i++) {
    if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
        buf[i + 3] == '\n') {
      end = buf + i;
      break;
    }
  }
  if (!end)
    return len > GRIT_HTTP_MAX_HEAD ? GRIT_HTTP_BAD : GRIT_HTTP_INCOMPLETE;
  if ((size_t)(end - buf) + 4 > GRIT_HTTP_MAX_HEAD)
    return GRIT_HTTP_BAD;
  const char *line = buf;
  const char *eol = memchr(line, '\r', (size_t)(end - line) + 1);
  if (!eol || eol[1] != '\n' ||
      parse_line(line, (size_t)(eol - line), out) != GRIT_HTTP_DONE)
    return GRIT_HTTP_BAD;
  bool v11 = out->keep_alive;
  while (eol < end) {
    line = eol + 2;
    eol = memchr(line, '\r', (size_t)(end - line) + 1);
    if (!eol || eol[1] != '\n')
      return GRIT_HTTP_BAD;
    size_t ln = (size_t)(eol - line);
    const char *colon = memchr(line, ':', ln);
    if (!colon || colon == line)
      return GRIT_HTTP_BAD; /* includes obsolete line folding (§5.2) */
    for (const char *c = line; c < colon; c++)
      if (!tchar(*c))
        return GRIT_HTTP_BAD;
    size_t nn = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vn = ln - nn - 1;
    trim(&v, &vn);
    if (nn == 10 && strncasecmp(line, "connection", 10) == 0) {
      if (list_has(v, vn, "close"))
        out->keep_alive = false;
      else if (!v11 && list_has(v, vn, "keep-alive"))
        out->keep_alive = true;
    } else if ((nn == 14 && strncasecmp(line, "content-length", 14) == 0 &&
                !(vn == 1 && v[0] == '0')) ||
               (nn == 17 && strncasecmp(line, "transfer-encoding", 17) == 0)) {
      return GRIT_HTTP_BAD; /* a request body: not for these resources */
    }
  }
  out->consumed = (size_t)(end - buf) + 4;
  return GRIT_HTTP_DONE;
}
