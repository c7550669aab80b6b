/* LOGICAL_DNS clusters (issue 27; SPEC XD-03; gRFC A27): the cluster's
 * host and port resolved by grit's own DNS resolver (resolver/, c-ares on
 * the channel's loop), its addresses kept for the cluster's tree
 * (cluster_lb.c: pick_first over them, as grpc's one endpoint with every
 * resolved address). Loop thread only. */
#include <stdio.h>
#include <string.h>

#include "resolver/resolver.h"
#include "xdsclient/xdsclient.h"

struct grit_xds_dns {
  char *host;
  uint16_t port;
  grit_target target;
  grit_resolver *r;
  grit_rng draw;
  grit_addr *addrs;
  size_t naddrs;
  bool have;
  char err[256];
  void (*changed)(void *ud);
  void *ud;
};

static void dns_result(void *ctx, const grit_resolver_result *r) {
  grit_xds_dns *d = ctx;
  if (r->addr_error) {
    /* DNS-08: addresses already known are kept. */
    if (!d->have)
      snprintf(d->err, sizeof(d->err), "xds: LOGICAL_DNS %s:%u: %s", d->host,
               d->port, r->addr_error);
  } else {
    grit_addr *copy = r->naddrs ? grit_calloc(r->naddrs, sizeof(*copy)) : NULL;
    if (r->naddrs && !copy) {
      snprintf(d->err, sizeof(d->err), "xds: out of memory");
    } else {
      if (r->naddrs)
        memcpy(copy, r->addrs, r->naddrs * sizeof(*copy));
      grit_free(d->addrs);
      d->addrs = copy;
      d->naddrs = r->naddrs;
      d->have = true;
      d->err[0] = '\0';
    }
  }
  d->changed(d->ud);
}

grit_err grit_xds_dns_start(uv_loop_t *loop, const char *host, uint16_t port,
                            void (*changed)(void *ud), void *ud,
                            grit_xds_dns **out) {
  *out = NULL;
  grit_xds_dns *d = grit_calloc(1, sizeof(*d));
  if (!d)
    return GRIT_ERR_NOMEM;
  d->host = grit_strdup(host);
  d->port = port;
  d->changed = changed;
  d->ud = ud;
  grit_rng_seed_os(&d->draw);
  char name[600];
  bool v6 = strchr(host, ':') != NULL;
  snprintf(name, sizeof(name), "dns:///%s%s%s:%u", v6 ? "[" : "", host,
           v6 ? "]" : "", port);
  grit_error_detail det = {0};
  grit_err rv =
      d->host ? grit_target_parse(name, &d->target, &det) : GRIT_ERR_NOMEM;
  if (rv == GRIT_OK && d->target.naddrs) { /* an IP literal */
    d->addrs = grit_calloc(d->target.naddrs, sizeof(*d->addrs));
    if (!d->addrs) {
      rv = GRIT_ERR_NOMEM;
    } else {
      memcpy(d->addrs, d->target.addrs, d->target.naddrs * sizeof(*d->addrs));
      d->naddrs = d->target.naddrs;
      d->have = true;
    }
  } else if (rv == GRIT_OK) {
    grit_resolver_opts o = {.dns_min_reresolve_ms = 30000};
    rv = grit_resolver_create(loop, &d->target, &o, &d->draw, dns_result, d,
                              &d->r);
  }
  if (rv != GRIT_OK) {
    grit_xds_dns_stop(d);
    return rv;
  }
  if (d->r)
    grit_resolver_request(d->r);
  *out = d;
  return GRIT_OK;
}

bool grit_xds_dns_is(const grit_xds_dns *d, const char *host, uint16_t port) {
  return d && d->port == port && strcmp(d->host, host) == 0;
}

const grit_addr *grit_xds_dns_addrs(const grit_xds_dns *d, size_t *n,
                                    const char **err) {
  *n = d->naddrs;
  *err = d->err[0] ? d->err : NULL;
  return d->have ? d->addrs : NULL;
}

void grit_xds_dns_stop(grit_xds_dns *d) {
  if (!d)
    return;
  grit_resolver_destroy(d->r);
  grit_target_free(&d->target);
  grit_free(d->addrs);
  grit_free(d->host);
  grit_free(d);
}
