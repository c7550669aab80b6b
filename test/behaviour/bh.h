/*
 * Helpers for behaviour tests: grit's public API against h2server/
 * backends on loopback. Every wait is bounded.
 */
#ifndef GRIT_TEST_BH_H
#define GRIT_TEST_BH_H

#include <grit/grit.h>
#include <stdio.h>
#include <string.h>

#include "h2server.h"
#include "test/harness.h"

/* Start a quiet backend; |script| (h2server text steps) may be NULL. */
static inline h2s_server *bh_server(const char *script) {
  h2s_config cfg = {.quiet = true, .script_text = script};
  h2s_server *s = NULL;
  if (h2s_server_start(&cfg, &s) != 0)
    fprintf(stderr, "bh: cannot start h2server\n");
  return s;
}

/* "ipv4:127.0.0.1:P1,127.0.0.1:P2..." for |n| servers. */
static inline const char *bh_target(char *buf, size_t len, h2s_server **s,
                                    size_t n) {
  size_t k = (size_t)snprintf(buf, len, "ipv4:");
  for (size_t i = 0; i < n && k < len; i++)
    k += (size_t)snprintf(buf + k, len - k, "%s127.0.0.1:%u", i ? "," : "",
                          h2s_server_port(s[i]));
  return buf;
}

/* A channel to |n| servers with |args| (set by the caller; not consumed);
 * |service_config| may be NULL. */
static inline grit_channel *bh_channel_args(h2s_server **s, size_t n,
                                            const char *service_config,
                                            grit_channel_args *args) {
  char target[512];
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (service_config)
    grit_channel_args_set_string(args, GRIT_ARG_SERVICE_CONFIG, service_config);
  if (grit_channel_create(NULL, bh_target(target, sizeof(target), s, n), args,
                          &d, &ch) != GRIT_OK)
    fprintf(stderr, "bh: channel: %s: %s\n", d.path, d.reason);
  return ch;
}

static inline grit_channel *bh_channel(h2s_server **s, size_t n,
                                       const char *service_config) {
  grit_channel_args *a = NULL;
  grit_channel_args_create(&a);
  grit_channel *ch = bh_channel_args(s, n, service_config, a);
  grit_channel_args_destroy(a);
  return ch;
}

/* A blocking unary call; returns the status code, fills |st| if given. */
static inline grit_status_code bh_unary(grit_channel *ch, const char *method,
                                        const char *req, uint64_t timeout_ms,
                                        grit_status *st_out) {
  grit_call_opts o = {.version = GRIT_CALL_OPTS_VERSION,
                      .timeout_ms = timeout_ms};
  grit_status st;
  grit_bytes resp;
  grit_err rv = grit_unary_call(ch, method, req, req ? strlen(req) : 0, &o,
                                &resp, &st, NULL);
  grit_bytes_free(&resp);
  if (rv != GRIT_OK)
    return (grit_status_code)-1;
  grit_status_code c = st.code;
  if (st_out)
    *st_out = st;
  else
    grit_status_free(&st);
  return c;
}

#endif
