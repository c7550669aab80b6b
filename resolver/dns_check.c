/* grit_service_config_check_dns: fetch _grpc_config.<host> once, blocking
 * on a private c-ares channel (select loop, bounded by a timeout), and
 * explain it with grit_service_config_check_txt. Used by `grit config
 * check --dns`; never runs on a runtime's loop. */
#include "resolver/resolver.h"
#include "service_config/service_config.h"

#include <ares.h>
#include <arpa/nameser.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>

typedef struct txt_query {
  bool done;
  int status;
  grit_err rv;
  char *value;
  size_t len;
} txt_query;

static void txt_query_cb(void *arg, int status, int timeouts,
                         unsigned char *abuf, int alen) {
  txt_query *q = arg;
  q->done = true;
  q->status = status;
  q->rv = GRIT_ERR_NOT_FOUND;
  struct ares_txt_ext *txt = NULL;
  if (status != ARES_SUCCESS ||
      ares_parse_txt_reply_ext(abuf, alen, &txt) != ARES_SUCCESS)
    return;
  size_t n = 0;
  for (struct ares_txt_ext *t = txt; t; t = t->next)
    n++;
  grit_txt_chunk *chunks = grit_calloc(n ? n : 1, sizeof(*chunks));
  q->rv = GRIT_ERR_NOMEM;
  if (chunks) {
    size_t i = 0;
    for (struct ares_txt_ext *t = txt; t; t = t->next, i++)
      chunks[i] = (grit_txt_chunk){.data = t->txt,
                                   .len = t->length,
                                   .record_start = t->record_start != 0};
    q->rv = grit_svccfg_txt_extract(chunks, n, &q->value, &q->len);
  }
  grit_free(chunks);
  ares_free_data(txt);
}

static void txt_query_wait(ares_channel ch, txt_query *q, uint64_t limit_ms) {
  uint64_t end = grit_clock_now_ms() + limit_ms;
  while (!q->done) {
    uint64_t now = grit_clock_now_ms();
    if (now >= end)
      return;
    fd_set r, w;
    FD_ZERO(&r);
    FD_ZERO(&w);
    int nfds = ares_fds(ch, &r, &w);
    struct timeval max = {.tv_sec = (time_t)((end - now) / 1000),
                          .tv_usec = (suseconds_t)((end - now) % 1000 * 1000)};
    struct timeval tv, *tvp = ares_timeout(ch, &max, &tv);
    select(nfds, &r, &w, NULL, tvp);
    ares_process(ch, &r, &w);
  }
}

static grit_err report_text(char **report, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static grit_err report_text(char **report, const char *fmt, ...) {
  if (!report)
    return GRIT_OK;
  char line[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  *report = grit_strdup(line);
  return *report ? GRIT_OK : GRIT_ERR_NOMEM;
}

static grit_err explain(const char *name, txt_query *q, const char *hostname,
                        const char *language, char **report) {
  char *body = NULL;
  grit_err rv = grit_service_config_check_txt_for(q->value, q->len, hostname,
                                                  language, &body);
  if (report) {
    grit_buf buf;
    grit_buf_init(&buf);
    if (grit_buf_appendf(&buf, "TXT %s:\n  grpc_config=%s\n\n%s", name,
                         q->value, body ? body : "") != GRIT_OK)
      rv = GRIT_ERR_NOMEM;
    *report = (char *)buf.data;
  }
  grit_free(body);
  return rv;
}

/* issue 20: |target| is "host", "host:port", "[v6]:port",
 * "dns:///host[:port]" or "dns://server/host[:port]": the host into |host|,
 * a server from the target into |server| ("" if none). */
static bool split_target(const char *target, char *host, size_t hlen,
                         char *server, size_t slen) {
  server[0] = '\0';
  const char *h = target;
  if (strncmp(h, "dns:", 4) == 0) {
    h += 4;
    if (strncmp(h, "//", 2) == 0) {
      h += 2;
      const char *slash = strchr(h, '/');
      if (!slash)
        return false;
      if (slash > h)
        snprintf(server, slen, "%.*s", (int)(slash - h), h);
      h = slash + 1;
    }
  }
  const char *end = h + strlen(h);
  if (*h == '[') { /* [v6]:port: the TXT name of a literal makes no sense */
    return false;
  }
  const char *colon = strchr(h, ':');
  if (colon)
    end = colon;
  if (end == h || (size_t)(end - h) >= hlen)
    return false;
  snprintf(host, hlen, "%.*s", (int)(end - h), h);
  return true;
}

static grit_err check_dns(const char *target, const char *dns_server,
                          uint64_t timeout_ms, const char *hostname,
                          const char *language, char **report) {
  if (report)
    *report = NULL;
  char host[256], tserver[256];
  if (!target ||
      !split_target(target, host, sizeof(host), tserver, sizeof(tserver)))
    return GRIT_ERR_INVALID_ARG;
  if (!dns_server && tserver[0])
    dns_server = tserver;
  if (dns_server && !grit_dns_server_valid(dns_server))
    return GRIT_ERR_INVALID_ARG;
  ares_channel ch;
  if (ares_init_options(&ch, NULL, 0) != ARES_SUCCESS)
    return GRIT_ERR_NOMEM;
  if (dns_server &&
      ares_set_servers_ports_csv(ch, dns_server) != ARES_SUCCESS) {
    ares_destroy(ch);
    return GRIT_ERR_INVALID_ARG;
  }
  char name[300];
  snprintf(name, sizeof(name), "_grpc_config.%s", host);
  txt_query q = {.done = false};
  ares_query(ch, name, ns_c_in, ns_t_txt, txt_query_cb, &q);
  txt_query_wait(ch, &q, timeout_ms ? timeout_ms : 5000);
  ares_destroy(ch); /* finishes an unanswered query with EDESTRUCTION */
  grit_err rv;
  if (!q.done || q.status == ARES_ETIMEOUT || q.status == ARES_EDESTRUCTION) {
    rv = GRIT_ERR_TIMEOUT;
    report_text(report, "TXT %s: no answer in time\n", name);
  } else if (q.status == ARES_ENOTFOUND || q.status == ARES_ENODATA ||
             (q.status == ARES_SUCCESS && q.rv == GRIT_ERR_NOT_FOUND)) {
    rv = GRIT_ERR_NOT_FOUND;
    report_text(report, "TXT %s: no grpc_config record (%s)\n", name,
                q.status == ARES_SUCCESS ? "no grpc_config= prefix"
                                         : ares_strerror(q.status));
  } else if (q.status != ARES_SUCCESS) {
    rv = GRIT_ERR_SYSTEM;
    report_text(report, "TXT %s: DNS failure: %s\n", name,
                ares_strerror(q.status));
  } else if (q.rv != GRIT_OK) {
    rv = q.rv;
  } else {
    rv = explain(name, &q, hostname, language, report);
  }
  grit_free(q.value);
  return rv;
}

grit_err grit_service_config_check_dns(const char *host, const char *dns_server,
                                       uint64_t timeout_ms, char **report) {
  return check_dns(host, dns_server, timeout_ms, NULL, NULL, report);
}

grit_err
grit_service_config_check_dns_for(const char *target, const char *dns_server,
                                  uint64_t timeout_ms, const char *hostname,
                                  const char *language, char **report) {
  return check_dns(target, dns_server, timeout_ms, hostname, language, report);
}
