/* Numeric socket addresses and their text form. No name resolution here:
 * channel/ resolves names and hands over numbers. */
#include "transport/transport.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

grit_err grit_addr_from_ip(grit_addr *a, const char *host, uint16_t port) {
  if (!a || !host)
    return GRIT_ERR_INVALID_ARG;
  memset(a, 0, sizeof(*a));
  char buf[INET6_ADDRSTRLEN + 32];
  size_t n = strlen(host);
  /* Accept "[::1]" as well as "::1". */
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    host++;
    n -= 2;
  }
  if (n >= sizeof(buf))
    return GRIT_ERR_INVALID_ARG;
  memcpy(buf, host, n);
  buf[n] = '\0';

  struct sockaddr_in *in4 = (struct sockaddr_in *)&a->u.ss;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->u.ss;
  char ip[INET6_ADDRSTRLEN];
  if (uv_ip4_addr(buf, port, in4) == 0 && strchr(buf, ':') == NULL) {
    a->len = sizeof(*in4);
    inet_ntop(AF_INET, &in4->sin_addr, ip, sizeof(ip));
    snprintf(a->text, sizeof(a->text), "%s:%u", ip, (unsigned)port);
    return GRIT_OK;
  }
  memset(a, 0, sizeof(*a));
  /* uv_ip6_addr understands a "%zone" suffix. */
  if (uv_ip6_addr(buf, port, in6) == 0) {
    a->len = sizeof(*in6);
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
    snprintf(a->text, sizeof(a->text), "[%s]:%u", ip, (unsigned)port);
    return GRIT_OK;
  }
  memset(a, 0, sizeof(*a));
  return GRIT_ERR_INVALID_ARG;
}

grit_err grit_addr_from_unix(grit_addr *a, const char *path) {
  if (!a || !path)
    return GRIT_ERR_INVALID_ARG;
  memset(a, 0, sizeof(*a));
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof(a->u.un.sun_path))
    return GRIT_ERR_INVALID_ARG;
  a->u.un.sun_family = AF_UNIX;
  memcpy(a->u.un.sun_path, path, n + 1);
  a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
  snprintf(a->text, sizeof(a->text), "unix:%s", path);
  return GRIT_OK;
}
