/* grit_service_config_check_dns: fetch _grpc_config.<host> once, blocking
 * on a private c-ares channel (select loop, bounded by a timeout), and
 * explain it with grit_service_config_check_txt. Used by `grit config
 * check --dns`; never runs on a runtime's loop. */
#include "channel/channel_int.h"

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

static grit_err explain(const char *name, txt_query *q, char **report) {
  char *body = NULL;
  grit_err rv = grit_service_config_check_txt(q->value, q->len, NULL, &body);
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

grit_err grit_service_config_check_dns(const char *host, const char *dns_server,
                                       uint64_t timeout_ms, char **report) {
  if (report)
    *report = NULL;
  if (!host || !*host || (dns_server && !grit_dns_server_valid(dns_server)))
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
             q.rv == GRIT_ERR_NOT_FOUND) {
    rv = GRIT_ERR_NOT_FOUND;
    report_text(report, "TXT %s: no grpc_config record (%s)\n", name,
                q.status == ARES_SUCCESS ? "no grpc_config= prefix"
                                         : ares_strerror(q.status));
  } else if (q.status != ARES_SUCCESS) {
    rv = GRIT_ERR_SYSTEM;
    report_text(report, "TXT %s: DNS error: %s\n", name,
                ares_strerror(q.status));
  } else if (q.rv != GRIT_OK) {
    rv = q.rv;
  } else {
    rv = explain(name, &q, report);
  }
  grit_free(q.value);
  return rv;
}
