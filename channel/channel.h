/*
 * channel: the public API's implementation. Runtime (libuv loop thread and
 * the cross-thread task queue), channel arguments, target parsing, the
 * c-ares resolver, config selection, calls and deadlines. It is the only
 * module that includes every other module's header. Only target parsing is
 * exported to other code (unit tests); everything else is behind grit.h.
 */
#ifndef GRIT_CHANNEL_H
#define GRIT_CHANNEL_H

#include "transport/transport.h"

typedef enum grit_target_kind {
  GRIT_TARGET_DNS = 0,
  GRIT_TARGET_IPV4 = 1,
  GRIT_TARGET_IPV6 = 2,
  GRIT_TARGET_UNIX = 3,
} grit_target_kind;

/* A parsed target (SPEC DNS-06). For DNS targets |host| and |port| are to
 * be resolved (|addrs| empty unless the host is an IP literal); for the
 * others |addrs| holds the addresses. */
typedef struct grit_target {
  grit_target_kind kind;
  char *host;           /* DNS host, without brackets */
  uint16_t port;        /* default 443 */
  char *dns_authority;  /* "dns://8.8.8.8/host" authority, or NULL */
  char *authority;      /* default :authority ("host:port" as written) */
  bool host_is_literal; /* DNS target naming an IP literal or localhost */
  grit_addr *addrs;
  size_t naddrs;
} grit_target;

/* Parse |s| into |t| (zeroed first). Returns GRIT_OK,
 * GRIT_ERR_INVALID_TARGET (reason in |d|) or GRIT_ERR_NOMEM. */
grit_err grit_target_parse(const char *s, grit_target *t, grit_error_detail *d);
void grit_target_free(grit_target *t);

#endif
