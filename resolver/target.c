/* Target parsing (SPEC DNS-06): dns:[//authority/]host[:port], bare
 * host:port, ipv4:a:p[,a:p...], ipv6:[a]:p[,...], unix:path, unix:///abs. */
#include "resolver/resolver.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_PORT 443 /* SPEC DNS-05 */

static bool parse_port(const char *s, size_t n, uint16_t *port) {
  if (n == 0 || n > 5)
    return false;
  unsigned v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    v = v * 10 + (unsigned)(s[i] - '0');
  }
  if (v > 65535)
    return false;
  *port = (uint16_t)v;
  return true;
}

/* Split "host[:port]" or "[v6]:port"; |host| gets a new string. */
static grit_err split_host_port(const char *s, size_t n, char **host,
                                uint16_t *port, bool *has_port) {
  const char *h = s, *p = NULL;
  size_t hn = n;
  if (n > 0 && s[0] == '[') {
    const char *close = memchr(s, ']', n);
    if (!close)
      return GRIT_ERR_INVALID_TARGET;
    h = s + 1;
    hn = (size_t)(close - h);
    if (close + 1 < s + n) {
      if (close[1] != ':')
        return GRIT_ERR_INVALID_TARGET;
      p = close + 2;
    }
  } else {
    const char *colon = memchr(s, ':', n);
    if (colon && memchr(colon + 1, ':', (size_t)(s + n - colon - 1)))
      colon = NULL; /* bare IPv6 literal without brackets: no port */
    if (colon) {
      hn = (size_t)(colon - s);
      p = colon + 1;
    }
  }
  *has_port = p != NULL;
  *port = DEFAULT_PORT;
  if (p && !parse_port(p, (size_t)(s + n - p), port))
    return GRIT_ERR_INVALID_TARGET;
  if (hn == 0)
    return GRIT_ERR_INVALID_TARGET;
  *host = grit_strndup(h, hn);
  return *host ? GRIT_OK : GRIT_ERR_NOMEM;
}

static grit_err add_addr(grit_target *t, const grit_addr *a) {
  grit_addr *n = grit_realloc(t->addrs, (t->naddrs + 1) * sizeof(*n));
  if (!n)
    return GRIT_ERR_NOMEM;
  t->addrs = n;
  t->addrs[t->naddrs++] = *a;
  return GRIT_OK;
}

static grit_err parse_ip_list(const char *s, grit_target *t, int family) {
  while (*s) {
    size_t n = strcspn(s, ",");
    char *host = NULL;
    uint16_t port;
    bool has_port;
    grit_err rv = split_host_port(s, n, &host, &port, &has_port);
    if (rv == GRIT_OK && !has_port)
      rv = GRIT_ERR_INVALID_TARGET; /* DNS-06: ipv4:a:p, as grpc-core */
    if (rv == GRIT_OK) {
      unsigned char buf[sizeof(struct in6_addr)];
      grit_addr a;
      if (inet_pton(family, host, buf) != 1)
        rv = GRIT_ERR_INVALID_TARGET;
      else
        rv = grit_addr_from_ip(&a, host, port);
      if (rv == GRIT_OK)
        rv = add_addr(t, &a);
    }
    grit_free(host);
    if (rv != GRIT_OK)
      return rv;
    s += n;
    if (*s == ',')
      s++;
  }
  return t->naddrs ? GRIT_OK : GRIT_ERR_INVALID_TARGET;
}

static bool is_ip_literal(const char *host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host, buf) == 1 ||
         inet_pton(AF_INET6, host, buf) == 1;
}

static grit_err parse_dns(const char *s, grit_target *t) {
  t->kind = GRIT_TARGET_DNS;
  if (strncmp(s, "//", 2) == 0) {
    const char *slash = strchr(s + 2, '/');
    if (!slash)
      return GRIT_ERR_INVALID_TARGET;
    if (slash > s + 2) {
      t->dns_authority = grit_strndup(s + 2, (size_t)(slash - s - 2));
      if (!t->dns_authority)
        return GRIT_ERR_NOMEM;
    }
    s = slash + 1;
  }
  bool has_port;
  grit_err rv = split_host_port(s, strlen(s), &t->host, &t->port, &has_port);
  if (rv != GRIT_OK)
    return rv;
  t->authority = grit_strdup(s);
  if (!t->authority)
    return GRIT_ERR_NOMEM;
  t->host_is_literal = is_ip_literal(t->host) ||
                       strcasecmp(t->host, "localhost") == 0 ||
                       strcasecmp(t->host, "localhost.") == 0;
  if (is_ip_literal(t->host)) {
    grit_addr a;
    rv = grit_addr_from_ip(&a, t->host, t->port);
    if (rv == GRIT_OK)
      rv = add_addr(t, &a);
  }
  return rv;
}

static grit_err parse_unix(const char *s, grit_target *t) {
  t->kind = GRIT_TARGET_UNIX;
  if (strncmp(s, "//", 2) == 0) {
    if (s[2] != '/')
      return GRIT_ERR_INVALID_TARGET; /* unix://host/path is not allowed */
    s += 2;
  }
  grit_addr a;
  grit_err rv = grit_addr_from_unix(&a, s);
  if (rv == GRIT_ERR_INVALID_ARG)
    return GRIT_ERR_INVALID_TARGET; /* empty, or longer than sun_path */
  if (rv == GRIT_OK)
    rv = add_addr(t, &a);
  if (rv == GRIT_OK) {
    t->authority = grit_strdup("localhost");
    rv = t->authority ? GRIT_OK : GRIT_ERR_NOMEM;
  }
  return rv;
}

static grit_err parse_any(const char *s, grit_target *t) {
  if (strncmp(s, "dns:", 4) == 0)
    return parse_dns(s + 4, t);
  if (strncmp(s, "unix:", 5) == 0)
    return parse_unix(s + 5, t);
  bool v4 = strncmp(s, "ipv4:", 5) == 0, v6 = strncmp(s, "ipv6:", 5) == 0;
  if (v4 || v6) {
    t->kind = v4 ? GRIT_TARGET_IPV4 : GRIT_TARGET_IPV6;
    grit_err rv = parse_ip_list(s + 5, t, v4 ? AF_INET : AF_INET6);
    if (rv == GRIT_OK) {
      size_t n = strcspn(s + 5, ",");
      t->authority = grit_strndup(s + 5, n);
      rv = t->authority ? GRIT_OK : GRIT_ERR_NOMEM;
    }
    return rv;
  }
  return parse_dns(s, t); /* a bare host:port means dns */
}

/* The length of a scheme grit does not know in "scheme://...", as
 * "xds:///name" (RFC 3986: a letter, then letters, digits, + - .);
 * 0 if |s| does not start that way or the scheme is one of grit's. */
static size_t unknown_scheme_len(const char *s) {
  size_t n = 0;
  if (!isalpha((unsigned char)s[0]))
    return 0;
  while (isalnum((unsigned char)s[n]) || s[n] == '+' || s[n] == '-' ||
         s[n] == '.')
    n++;
  if (strncmp(s + n, "://", 3) != 0)
    return 0;
  static const char *const known[] = {"dns", "unix", "ipv4", "ipv6"};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    if (strlen(known[i]) == n && strncmp(known[i], s, n) == 0)
      return 0; /* known, but the rest is wrong */
  return n;
}

grit_err grit_target_parse(const char *s, grit_target *t,
                           grit_error_detail *d) {
  memset(t, 0, sizeof(*t));
  if (!s || !*s) {
    grit_error_set(d, GRIT_ERR_INVALID_TARGET, "", "empty target");
    return GRIT_ERR_INVALID_TARGET;
  }
  grit_err rv = parse_any(s, t);
  if (rv != GRIT_OK) {
    grit_target_free(t);
    size_t n = unknown_scheme_len(s);
    if (n)
      grit_error_set(d, rv, "",
                     "cannot parse target \"%s\": scheme \"%.*s\" is not "
                     "supported (dns, ipv4, ipv6, unix)",
                     s, (int)n, s);
    else
      grit_error_set(d, rv, "", "cannot parse target \"%s\"", s);
  }
  return rv;
}

void grit_target_free(grit_target *t) {
  grit_free(t->host);
  grit_free(t->dns_authority);
  grit_free(t->authority);
  grit_free(t->addrs);
  memset(t, 0, sizeof(*t));
}

/* A decimal port 1..65535 in [p, end), at most 5 digits, nothing else. */
static bool port_valid(const char *p, const char *end) {
  if (p == end || end - p > 5)
    return false;
  unsigned v = 0;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9')
      return false;
    v = v * 10 + (unsigned)(*p - '0');
  }
  return v >= 1 && v <= 65535;
}

/* One "a.b.c.d:port" or "[v6]:port" in [p, end). */
static bool dns_server_one_valid(const char *p, const char *end) {
  char addr[INET6_ADDRSTRLEN];
  unsigned char bin[sizeof(struct in6_addr)];
  const char *a = p, *a_end, *colon;
  int family = AF_INET;
  if (*p == '[') {
    a = p + 1;
    a_end = memchr(a, ']', (size_t)(end - a));
    if (!a_end || a_end + 1 == end || a_end[1] != ':')
      return false;
    colon = a_end + 1;
    family = AF_INET6;
  } else {
    colon = memchr(p, ':', (size_t)(end - p));
    if (!colon)
      return false;
    a_end = colon;
  }
  size_t n = (size_t)(a_end - a);
  if (n == 0 || n >= sizeof(addr))
    return false;
  memcpy(addr, a, n);
  addr[n] = '\0';
  return inet_pton(family, addr, bin) == 1 && port_valid(colon + 1, end);
}

/* GRIT_ARG_DNS_SERVER: "addr:port[,addr:port...]", each address an IPv4
 * literal or a bracketed IPv6 one, each port 1..65535. c-ares would take
 * more forms (no port, bare IPv6) and reject the rest only when the channel
 * first resolves, leaving it in TRANSIENT_FAILURE; checked here instead,
 * so a typo fails grit_channel_create. */
bool grit_dns_server_valid(const char *s) {
  for (;;) {
    const char *comma = strchr(s, ',');
    const char *end = comma ? comma : s + strlen(s);
    if (end == s || !dns_server_one_valid(s, end))
      return false;
    if (!comma)
      return true;
    s = comma + 1;
  }
}
