/*
 * resolver: names to addresses. Target parsing (SPEC DNS-06: dns:, ipv4:,
 * ipv6:, unix:), the c-ares resolver on a runtime's loop (A/AAAA and the
 * _grpc_config TXT record, DNS-01..DNS-09) and the blocking one-shot TXT
 * check behind `grit config check --dns`. Below channel/: it hands its
 * results to a callback and never sees a channel; the channel copies the
 * options it needs into a grit_resolver_opts.
 * Layout: floor 3 of docs/layout.md.
 */
#ifndef GRIT_RESOLVER_H
#define GRIT_RESOLVER_H

#include <uv.h>

#include "transport/transport.h"

/* ---- target.c: target strings ---- */

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

/* GRIT_ARG_DNS_SERVER's form: "ip:port" / "[ipv6]:port", comma-separated. */
bool grit_dns_server_valid(const char *s);

/* ---- resolver.c: c-ares A/AAAA (+ TXT) on the loop ---- */

typedef enum grit_txt_state {
  GRIT_TXT_NONE = 0,   /* disabled, NXDOMAIN, no record, no choice matched */
  GRIT_TXT_CONFIG = 1, /* config_json holds the chosen service config */
  GRIT_TXT_ERROR = 2,  /* the TXT config is invalid: txt_error says why */
  GRIT_TXT_KEEP = 3,   /* TXT lookup timed out: keep what we have */
} grit_txt_state;

typedef struct grit_resolver_result {
  const grit_addr *addrs;
  size_t naddrs;
  const char *addr_error; /* non-NULL when the address lookup failed */
  grit_txt_state txt;
  const char *config_json;
  size_t config_len;
  const char *txt_error;
  bool txt_timed_out; /* DNS-07: the TXT answer came too late */
} grit_resolver_result;

/* What the resolver reads of the channel's arguments: the same names and
 * types as the channel's option fields, which channel/ copies in. */
typedef struct grit_resolver_opts {
  const char *dns_server;        /* GRIT_ARG_DNS_SERVER, or NULL */
  int64_t dns_enable_txt;        /* DNS-01 */
  int64_t dns_min_reresolve_ms;  /* DNS-05 */
  int64_t dns_txt_timeout_ms;    /* DNS-07 */
  int64_t max_config_age_ms;     /* 0: off */
  int64_t dns_lookup_timeout_ms; /* OP-04; 0: c-ares' own timeouts */
  int64_t dns_use_ttl;           /* OP-04: refresh when TTLs run out */
} grit_resolver_opts;

typedef void (*grit_resolver_cb)(void *ctx, const grit_resolver_result *r);
typedef struct grit_resolver grit_resolver;

grit_err grit_resolver_create(uv_loop_t *loop, const grit_target *t,
                              const grit_resolver_opts *o, const grit_rng *draw,
                              grit_resolver_cb cb, void *ctx,
                              grit_resolver **out);
/* dns_ttl.c (SPEC OP-04): how long the raw DNS answer |msg| to a |qtype|
 * query may be cached: the least TTL of its answer records of |qtype| and
 * CNAME; with none, the negative TTL min(SOA TTL, SOA MINIMUM) of its
 * authority section (RFC 2308). GRIT_OK with |*ttl_s|; GRIT_ERR_NOT_FOUND
 * (nothing to go by); GRIT_ERR_PARSE (malformed). */
grit_err grit_dns_answer_ttl(const uint8_t *msg, size_t len, uint16_t qtype,
                             uint32_t *ttl_s);
/* Ask for a resolution; rate-limited (DNS-05), coalesced if one runs. */
void grit_resolver_request(grit_resolver *r);
/* The channel rejected the last result (an invalid config and no good one
 * before, SPEC SC-03): resolve again after the failure backoff (DNS-05). */
void grit_resolver_result_rejected(grit_resolver *r);
void grit_resolver_destroy(grit_resolver *r);

#endif
