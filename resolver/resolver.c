/* DNS resolution through c-ares on the loop (SPEC DNS-01..DNS-05): A and
 * AAAA by ares_getaddrinfo, and the _grpc_config.<host> TXT record when
 * enabled. c-ares reports socket interest through ARES_OPT_SOCK_STATE_CB;
 * each fd gets a uv_poll_t, and one uv_timer_t is re-armed from
 * ares_timeout() after every entry into c-ares. Re-resolution is rate
 * limited, and failures retry with backoff 1 s x1.6 up to 120 s.
 *
 * The TXT query is separate from the address lookup, and its answer is
 * waited for at most GRIT_ARG_DNS_TXT_TIMEOUT_MS after the addresses came
 * (DNS-07): a resolver that drops TXT queries never holds the channel for
 * c-ares' own 75 s. A late answer is ignored (each query carries the
 * generation of the resolution that asked); the next resolution asks
 * again.
 *
 * SPEC OP-04: the whole resolution is bounded by
 * GRIT_ARG_DNS_LOOKUP_TIMEOUT_MS (a server that never answers fails the
 * lookup, named and counted, instead of c-ares' 75 s), and a healthy
 * channel resolves again when the answers' TTLs run out (the A/AAAA TTL
 * from ares_getaddrinfo, the TXT's from the raw answer, dns_ttl.c), no
 * sooner than the minimum interval, no later than the max config age. */
#include "resolver/resolver.h"
#include "lb/lb.h"
#include "service_config/service_config.h"

#include <ares.h>
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define RETRY_INITIAL_MS 1000
#define RETRY_MAX_MS 120000

typedef struct dns_poll {
  grit_list link;
  uv_poll_t poll;
  ares_socket_t fd;
  struct grit_resolver *r;
} dns_poll;

/* What the schedule timer is waiting for: a deferred request, a failure
 * backoff (which a request does not cut short, DNS-05) or a refresh
 * (TTL or max config age, which a request may bring forward). */
typedef enum res_sched {
  RES_SCHED_DEFER,
  RES_SCHED_BACKOFF,
  RES_SCHED_REFRESH,
} res_sched;

struct grit_resolver {
  uv_loop_t *loop;
  ares_channel ares;
  const grit_target *target; /* borrowed from the channel */
  bool want_txt;
  const grit_rng *draw; /* DNS-09: copied for each choice, same draws */
  grit_resolver_cb cb;
  void *ctx;
  uint64_t min_interval_ms;
  uv_timer_t ares_timer;   /* c-ares' own timeouts */
  uv_timer_t sched_timer;  /* rate limit and failure backoff */
  uv_timer_t txt_timer;    /* DNS-07: the bound on the TXT wait */
  uv_timer_t lookup_timer; /* OP-04: the bound on the whole resolution */
  uint64_t txt_timeout_ms;
  uint64_t lookup_timeout_ms; /* 0: c-ares' own timeouts only */
  uint64_t max_age_ms;        /* GRIT_ARG_MAX_CONFIG_AGE_MS; 0 off */
  bool use_ttl;               /* GRIT_ARG_DNS_USE_TTL */
  res_sched sched;            /* what sched_timer waits for, when active */
  uint64_t sched_due_ms;      /* loop time it fires */
  bool failing;               /* the last lookup failed (logged once) */
  unsigned gen;               /* of the resolution under way */
  grit_list polls;
  unsigned pending_closes;
  bool destroyed;

  bool running;
  bool again; /* a request came while running */
  bool addr_done;
  bool txt_pending;
  bool txt_timed_out;
  uint64_t last_start_ms;
  bool has_run;
  uint64_t retry_ms;
  uint64_t reject_ms; /* backoff after grit_resolver_result_rejected */
  /* OP-04: TTLs of this resolution's answers, in seconds. */
  bool addr_ttl_known, txt_ttl_known;
  uint32_t addr_ttl_s, txt_ttl_s;

  /* The result being assembled. */
  grit_addr *addrs;
  size_t naddrs;
  char addr_error[256];
  grit_txt_state txt;
  char *config_json;
  size_t config_len;
  char txt_error[600];
};

static void res_maybe_free(grit_resolver *r) {
  if (r->destroyed && r->pending_closes == 0)
    grit_free(r);
}

static void res_handle_closed(uv_handle_t *h) {
  grit_resolver *r = h->data;
  r->pending_closes--;
  res_maybe_free(r);
}

static void poll_closed(uv_handle_t *h) {
  dns_poll *p = h->data;
  grit_resolver *r = p->r;
  grit_free(p);
  r->pending_closes--;
  res_maybe_free(r);
}

static void res_ares_timer_fire(uv_timer_t *t);

/* After every entry into c-ares: arm the timer for its next timeout. */
static void res_rearm(grit_resolver *r) {
  if (r->destroyed)
    return;
  struct timeval tv;
  if (!ares_timeout(r->ares, NULL, &tv)) {
    uv_timer_stop(&r->ares_timer);
    return;
  }
  uint64_t ms =
      (uint64_t)tv.tv_sec * 1000 + ((uint64_t)tv.tv_usec + 999) / 1000;
  uv_timer_start(&r->ares_timer, res_ares_timer_fire, ms, 0);
}

static void res_ares_timer_fire(uv_timer_t *t) {
  grit_resolver *r = t->data;
  ares_process_fd(r->ares, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
  res_rearm(r);
}

static void res_poll_cb(uv_poll_t *h, int status, int events) {
  dns_poll *p = h->data;
  grit_resolver *r = p->r;
  ares_socket_t rfd = ARES_SOCKET_BAD, wfd = ARES_SOCKET_BAD;
  if (status < 0 || (events & UV_READABLE))
    rfd = p->fd;
  if (status < 0 || (events & UV_WRITABLE))
    wfd = p->fd;
  ares_process_fd(r->ares, rfd, wfd);
  res_rearm(r);
}

static dns_poll *res_find_poll(grit_resolver *r, ares_socket_t fd) {
  grit_list *e;
  GRIT_LIST_FOREACH(e, &r->polls) {
    dns_poll *p = GRIT_CONTAINER_OF(e, dns_poll, link);
    if (p->fd == fd)
      return p;
  }
  return NULL;
}

/* c-ares tells us which sockets to watch; (0, 0) means it is about to
 * close the fd, so the poll handle goes first. */
static void res_sock_state(void *data, ares_socket_t fd, int readable,
                           int writable) {
  grit_resolver *r = data;
  dns_poll *p = res_find_poll(r, fd);
  if (!readable && !writable) {
    if (p) {
      uv_poll_stop(&p->poll);
      grit_list_remove(&p->link);
      uv_close((uv_handle_t *)&p->poll, poll_closed);
    }
    return;
  }
  if (!p) {
    p = grit_calloc(1, sizeof(*p));
    if (!p)
      return; /* c-ares' own timeout will fail the query */
    int rv = uv_poll_init_socket(r->loop, &p->poll, fd);
    if (rv != 0) {
      /* Rare (an fd the loop still watches): the query then waits for
       * c-ares' own timeout, so say so rather than stall silently. */
      GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_NOTICE,
                 "dns: cannot watch socket %d: %s (the query waits for "
                 "c-ares' timeout)",
                 (int)fd, uv_strerror(rv));
      grit_free(p);
      return;
    }
    p->fd = fd;
    p->r = r;
    p->poll.data = p;
    r->pending_closes++;
    grit_list_insert_tail(&r->polls, &p->link);
  }
  int ev = (readable ? UV_READABLE : 0) | (writable ? UV_WRITABLE : 0);
  uv_poll_start(&p->poll, ev, res_poll_cb);
}

static void res_deliver(grit_resolver *r);

static void res_maybe_deliver(grit_resolver *r) {
  if (r->running && r->addr_done && !r->txt_pending)
    res_deliver(r);
}

static void res_txt_timer_fire(uv_timer_t *t) {
  grit_resolver *r = t->data;
  if (!r->running || !r->txt_pending)
    return;
  /* DNS-07: give the TXT up for this resolution; keep the config. */
  r->txt_pending = false;
  r->txt_timed_out = true;
  r->txt = GRIT_TXT_KEEP;
  r->gen++; /* its answer, if it ever comes, is for nobody */
  GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_INFO,
             "TXT _grpc_config.%s: no answer within %llu ms, using the "
             "addresses",
             r->target->host, (unsigned long long)r->txt_timeout_ms);
  res_deliver(r);
}

/* OP-04: an answer with TTL 0 from the hosts file has no TTL at all; one
 * from a DNS server means "at the minimum interval". */
static bool res_in_hosts_file(grit_resolver *r) {
  static const int families[] = {AF_INET, AF_INET6};
  for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
    struct hostent *he = NULL;
    if (ares_gethostbyname_file(r->ares, r->target->host, families[i], &he) ==
        ARES_SUCCESS) {
      ares_free_hostent(he);
      return true;
    }
  }
  return false;
}

/* The least TTL of the address answer and the CNAMEs that led to it. */
static void res_addr_ttl(grit_resolver *r, const struct ares_addrinfo *ai) {
  uint32_t least = UINT32_MAX;
  bool any = false;
  for (const struct ares_addrinfo_node *nd = ai->nodes; nd; nd = nd->ai_next) {
    uint32_t t = nd->ai_ttl > 0 ? (uint32_t)nd->ai_ttl : 0;
    least = t < least ? t : least;
    any = true;
  }
  for (const struct ares_addrinfo_cname *c = ai->cnames; c; c = c->next) {
    uint32_t t = c->ttl > 0 ? (uint32_t)c->ttl : 0;
    least = t < least ? t : least;
  }
  if (!any || (least == 0 && res_in_hosts_file(r)))
    return;
  r->addr_ttl_known = true;
  r->addr_ttl_s = least;
}

/* Each query carries the generation of the resolution that asked, so an
 * answer after the lookup bound (OP-04) or the TXT bound (DNS-07) is for
 * nobody. */
typedef struct res_req {
  grit_resolver *r;
  unsigned gen;
} res_req;

static void res_addrinfo_cb(void *arg, int status, int timeouts,
                            struct ares_addrinfo *ai) {
  res_req *q = arg;
  grit_resolver *r = q->r;
  bool stale = q->gen != r->gen || !r->running || r->addr_done;
  grit_free(q);
  if (status == ARES_EDESTRUCTION || r->destroyed || stale) {
    ares_freeaddrinfo(ai);
    return;
  }
  size_t n = 0;
  for (struct ares_addrinfo_node *nd = ai ? ai->nodes : NULL; nd;
       nd = nd->ai_next)
    n++;
  if (status == ARES_SUCCESS && n > 0)
    res_addr_ttl(r, ai);
  if (status == ARES_SUCCESS && n > 0) {
    r->addrs = grit_calloc(n, sizeof(*r->addrs));
    for (struct ares_addrinfo_node *nd = ai->nodes; nd && r->addrs;
         nd = nd->ai_next) {
      char host[INET6_ADDRSTRLEN];
      const void *ip =
          nd->ai_family == AF_INET6
              ? (const void *)&((struct sockaddr_in6 *)nd->ai_addr)->sin6_addr
              : (const void *)&((struct sockaddr_in *)nd->ai_addr)->sin_addr;
      if (!inet_ntop(nd->ai_family, ip, host, sizeof(host)))
        continue;
      if (grit_addr_from_ip(&r->addrs[r->naddrs], host, r->target->port) ==
          GRIT_OK)
        r->naddrs++;
    }
    if (!r->addrs)
      snprintf(r->addr_error, sizeof(r->addr_error), "out of memory");
  } else {
    snprintf(r->addr_error, sizeof(r->addr_error),
             "DNS resolution failed for %s: %s", r->target->host,
             status == ARES_SUCCESS ? "no addresses" : ares_strerror(status));
  }
  ares_freeaddrinfo(ai);
  r->addr_done = true;
  if (r->txt_pending && r->txt_timeout_ms > 0)
    uv_timer_start(&r->txt_timer, res_txt_timer_fire, r->txt_timeout_ms, 0);
  res_maybe_deliver(r);
}

/* DNS-02..04: turn a TXT answer into a config choice. */
static void res_txt_parse(grit_resolver *r, const unsigned char *abuf,
                          int alen) {
  struct ares_txt_ext *txt = NULL;
  if (ares_parse_txt_reply_ext(abuf, alen, &txt) != ARES_SUCCESS) {
    r->txt = GRIT_TXT_NONE;
    return;
  }
  size_t n = 0;
  for (struct ares_txt_ext *t = txt; t; t = t->next)
    n++;
  grit_txt_chunk *chunks = grit_calloc(n ? n : 1, sizeof(*chunks));
  char *value = NULL;
  size_t vlen = 0;
  grit_err rv = chunks ? GRIT_OK : GRIT_ERR_NOMEM;
  if (rv == GRIT_OK) {
    size_t i = 0;
    for (struct ares_txt_ext *t = txt; t; t = t->next, i++)
      chunks[i] = (grit_txt_chunk){.data = t->txt,
                                   .len = t->length,
                                   .record_start = t->record_start != 0};
    rv = grit_svccfg_txt_extract(chunks, n, &value, &vlen);
  }
  grit_free(chunks);
  ares_free_data(txt);
  if (rv != GRIT_OK) {
    r->txt = rv == GRIT_ERR_NOT_FOUND ? GRIT_TXT_NONE : GRIT_TXT_KEEP;
    return;
  }
  char hostname[256] = "";
  gethostname(hostname, sizeof(hostname) - 1);
  grit_error_detail d = {0};
  /* DNS-09: the same draws at every resolution, so a percentage choice is
   * made once per channel. */
  grit_rng draw = *r->draw;
  rv = grit_svccfg_choose_txt(value, vlen, hostname, &draw, &r->config_json,
                              &r->config_len, &d);
  grit_free(value);
  if (rv == GRIT_OK) {
    r->txt = GRIT_TXT_CONFIG;
  } else if (rv == GRIT_ERR_INVALID_CONFIG) {
    r->txt = GRIT_TXT_ERROR;
    snprintf(r->txt_error, sizeof(r->txt_error), "TXT record %s: %s", d.path,
             d.reason);
  } else {
    r->txt = rv == GRIT_ERR_NOT_FOUND ? GRIT_TXT_NONE : GRIT_TXT_KEEP;
  }
}

static void res_txt_cb(void *arg, int status, int timeouts, unsigned char *abuf,
                       int alen) {
  res_req *q = arg;
  grit_resolver *r = q->r;
  bool stale = q->gen != r->gen || !r->running || !r->txt_pending;
  grit_free(q);
  if (status == ARES_EDESTRUCTION || r->destroyed)
    return;
  if (stale) {
    GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_DEBUG,
               "TXT _grpc_config.%s: late answer ignored (%s)", r->target->host,
               ares_strerror(status));
    return;
  }
  /* OP-04: the TTL of the record, or of its absence (RFC 2308). */
  uint32_t ttl;
  if (abuf && alen > 0 &&
      grit_dns_answer_ttl(abuf, (size_t)alen, ns_t_txt, &ttl) == GRIT_OK) {
    r->txt_ttl_known = true;
    r->txt_ttl_s = ttl;
  }
  if (status == ARES_SUCCESS)
    res_txt_parse(r, abuf, alen);
  else if (status == ARES_ENOTFOUND || status == ARES_ENODATA)
    r->txt = GRIT_TXT_NONE; /* DNS-04: silently no config */
  else
    r->txt = GRIT_TXT_KEEP; /* timeout and the like: keep what we have */
  GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_INFO, "TXT _grpc_config.%s: %s",
             r->target->host, ares_strerror(status));
  r->txt_pending = false;
  uv_timer_stop(&r->txt_timer);
  res_maybe_deliver(r);
}

/* OP-04: the resolution took too long. Its queries are cancelled (their
 * answers would be stale anyway), and it completes as a failed lookup. */
static void res_lookup_timer_fire(uv_timer_t *t) {
  grit_resolver *r = t->data;
  if (!r->running)
    return;
  if (!r->addr_done) {
    r->addr_done = true;
    r->naddrs = 0;
    snprintf(r->addr_error, sizeof(r->addr_error),
             "DNS resolution failed for %s: timeout after %llu ms",
             r->target->host, (unsigned long long)r->lookup_timeout_ms);
  }
  if (r->txt_pending) {
    r->txt_pending = false;
    r->txt = GRIT_TXT_KEEP;
    r->txt_timed_out = !r->addr_error[0]; /* DNS-07's case, cut shorter */
  }
  r->gen++;
  ares_cancel(r->ares); /* the callbacks see a stale generation */
  res_rearm(r);
  res_deliver(r);
}

static void res_start(grit_resolver *r) {
  r->running = true;
  r->again = false;
  r->has_run = true;
  r->last_start_ms = uv_now(r->loop);
  r->naddrs = 0;
  r->addr_error[0] = '\0';
  r->txt = GRIT_TXT_NONE;
  r->txt_error[0] = '\0';
  r->gen++;
  r->addr_done = false;
  r->txt_pending = r->want_txt;
  r->txt_timed_out = false;
  r->addr_ttl_known = r->txt_ttl_known = false;
  GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_INFO, "resolving %s%s", r->target->host,
             r->want_txt ? " (+TXT)" : "");
  if (r->lookup_timeout_ms > 0)
    uv_timer_start(&r->lookup_timer, res_lookup_timer_fire,
                   r->lookup_timeout_ms, 0);
  char port[8];
  snprintf(port, sizeof(port), "%u", (unsigned)r->target->port);
  struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC,
                                      .ai_socktype = SOCK_STREAM};
  /* The TXT query first: an address answer given at once (from c-ares'
   * cache or a hosts file) must find it pending. */
  if (r->want_txt) {
    res_req *q = grit_malloc(sizeof(*q));
    if (q) {
      *q = (res_req){.r = r, .gen = r->gen};
      char name[300];
      snprintf(name, sizeof(name), "_grpc_config.%s", r->target->host);
      ares_query(r->ares, name, ns_c_in, ns_t_txt, res_txt_cb, q);
    } else {
      r->txt_pending = false;
      r->txt = GRIT_TXT_KEEP;
    }
  }
  if (!r->destroyed && r->running && !r->addr_done) {
    res_req *q = grit_malloc(sizeof(*q));
    if (q) {
      *q = (res_req){.r = r, .gen = r->gen};
      ares_getaddrinfo(r->ares, r->target->host, port, &hints, res_addrinfo_cb,
                       q);
    } else {
      /* Fails like any lookup: counted, retried with backoff. */
      snprintf(r->addr_error, sizeof(r->addr_error),
               "DNS resolution failed for %s: out of memory", r->target->host);
      r->addr_done = true;
      if (r->txt_pending) {
        r->txt_pending = false;
        r->txt = GRIT_TXT_KEEP;
        r->gen++; /* the TXT answer, if any, is for nobody */
      }
      res_maybe_deliver(r);
    }
  }
  res_rearm(r);
}

static void res_sched_fire(uv_timer_t *t) {
  grit_resolver *r = t->data;
  if (!r->running)
    res_start(r);
}

static void res_schedule(grit_resolver *r, res_sched kind, uint64_t delay_ms) {
  r->sched = kind;
  r->sched_due_ms = uv_now(r->loop) + delay_ms;
  uv_timer_start(&r->sched_timer, res_sched_fire, delay_ms, 0);
}

/* OP-04: when a healthy channel looks again. The answers' least TTL, at
 * least 1 s (TTLs are whole seconds; a TTL of 0 must not make a channel
 * with no minimum interval query in a loop), capped by the max config age,
 * never sooner than the minimum interval; nothing known and no max age:
 * only on request. */
#define TTL_FLOOR_MS 1000

static bool res_refresh_ms(const grit_resolver *r, uint64_t *out) {
  uint64_t ms = UINT64_MAX;
  if (r->use_ttl && r->addr_ttl_known)
    ms = (uint64_t)r->addr_ttl_s * 1000;
  if (r->use_ttl && r->txt_ttl_known && (uint64_t)r->txt_ttl_s * 1000 < ms)
    ms = (uint64_t)r->txt_ttl_s * 1000;
  if (ms < TTL_FLOOR_MS)
    ms = TTL_FLOOR_MS;
  if (r->max_age_ms > 0 && r->max_age_ms < ms)
    ms = r->max_age_ms;
  if (ms == UINT64_MAX)
    return false;
  *out = ms > r->min_interval_ms ? ms : r->min_interval_ms;
  return true;
}

static void res_deliver(grit_resolver *r) {
  r->running = false;
  uv_timer_stop(&r->txt_timer);
  uv_timer_stop(&r->lookup_timer);
  grit_resolver_result res = {
      .txt_timed_out = r->txt_timed_out,
      .addrs = r->addrs,
      .naddrs = r->naddrs,
      .addr_error = r->addr_error[0] ? r->addr_error : NULL,
      .txt = r->txt,
      .config_json = r->config_json,
      .config_len = r->config_len,
      .txt_error = r->txt_error,
  };
  GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_INFO, "%s: %zu addresses%s%s",
             r->target->host, r->naddrs, r->addr_error[0] ? ", " : "",
             r->addr_error);
  if (r->addr_error[0]) {
    /* DNS-05: retry failures with backoff, even without a request. */
    r->retry_ms = grit_lb_backoff_next_ms(r->retry_ms, RETRY_INITIAL_MS,
                                          RETRY_MAX_MS, NULL);
    res_schedule(r, RES_SCHED_BACKOFF, r->retry_ms);
    /* OP-04: an operator sees a failing resolver without any trace
     * setting, once per run of failures, never per lookup. */
    if (!r->failing)
      GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_NOTICE,
                 "%s (retrying with backoff from %llu ms up to %llu ms; "
                 "further failures are counted, not logged)",
                 r->addr_error, (unsigned long long)RETRY_INITIAL_MS,
                 (unsigned long long)RETRY_MAX_MS);
    r->failing = true;
  } else {
    if (r->failing)
      GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_NOTICE,
                 "DNS resolution for %s succeeds again: %zu address%s",
                 r->target->host, r->naddrs, r->naddrs == 1 ? "" : "es");
    r->failing = false;
    r->retry_ms = 0;
    uint64_t refresh_ms;
    if (r->again) {
      grit_resolver_request(r);
    } else if (res_refresh_ms(r, &refresh_ms)) {
      /* Even while connected: a changed record reaches the channel
       * without a connection drop. */
      GRIT_TRACE(
          GRIT_TRACE_DNS, GRIT_LEVEL_DEBUG,
          "%s: next resolution in %llu ms (TTL %s%lu s, TXT %s%lu s)",
          r->target->host, (unsigned long long)refresh_ms,
          r->addr_ttl_known ? "" : "unknown ", (unsigned long)r->addr_ttl_s,
          r->txt_ttl_known ? "" : "unknown ", (unsigned long)r->txt_ttl_s);
      res_schedule(r, RES_SCHED_REFRESH, refresh_ms);
    }
  }
  r->cb(r->ctx, &res);
  grit_free(r->addrs);
  r->addrs = NULL;
  grit_free(r->config_json);
  r->config_json = NULL;
}

void grit_resolver_request(grit_resolver *r) {
  if (!r || r->destroyed)
    return;
  if (r->running) {
    r->again = true;
    return;
  }
  uint64_t now = uv_now(r->loop);
  uint64_t next = r->last_start_ms + r->min_interval_ms;
  if (!r->has_run || next < now)
    next = now;
  if (uv_is_active((uv_handle_t *)&r->sched_timer)) {
    /* A failure backoff stands (DNS-05); a later refresh is brought
     * forward to what the rate limit allows. */
    if (r->sched != RES_SCHED_REFRESH || r->sched_due_ms <= next)
      return;
    uv_timer_stop(&r->sched_timer);
  }
  if (next <= now) {
    res_start(r);
  } else {
    GRIT_TRACE(GRIT_TRACE_DNS, GRIT_LEVEL_INFO,
               "re-resolution of %s deferred %llu ms (at most one per %llu "
               "ms)",
               r->target->host, (unsigned long long)(next - now),
               (unsigned long long)r->min_interval_ms);
    res_schedule(r, RES_SCHED_DEFER, next - now);
  }
}

void grit_resolver_result_rejected(grit_resolver *r) {
  if (!r || r->destroyed || r->running)
    return;
  r->reject_ms = grit_lb_backoff_next_ms(r->reject_ms, RETRY_INITIAL_MS,
                                         RETRY_MAX_MS, NULL);
  uv_timer_stop(&r->sched_timer);
  res_schedule(r, RES_SCHED_BACKOFF, r->reject_ms);
}

static grit_err res_set_servers(grit_resolver *r, const grit_resolver_opts *o) {
  const char *servers = o->dns_server;
  if (r->target->dns_authority)
    servers = r->target->dns_authority;
  if (!servers)
    return GRIT_OK;
  return ares_set_servers_ports_csv(r->ares, servers) == ARES_SUCCESS
             ? GRIT_OK
             : GRIT_ERR_INVALID_ARG;
}

static void res_library_init(void) {
  ares_library_init(ARES_LIB_INIT_ALL); /* a no-op on Linux */
}

grit_err grit_resolver_create(uv_loop_t *loop, const grit_target *t,
                              const grit_resolver_opts *o, const grit_rng *draw,
                              grit_resolver_cb cb, void *ctx,
                              grit_resolver **out) {
  *out = NULL;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, res_library_init);
  grit_resolver *r = grit_calloc(1, sizeof(*r));
  if (!r)
    return GRIT_ERR_NOMEM;
  r->loop = loop;
  r->target = t;
  r->draw = draw;
  r->txt_timeout_ms = (uint64_t)o->dns_txt_timeout_ms;
  r->max_age_ms = (uint64_t)o->max_config_age_ms;
  r->lookup_timeout_ms = (uint64_t)o->dns_lookup_timeout_ms;
  r->use_ttl = o->dns_use_ttl != 0;
  r->cb = cb;
  r->ctx = ctx;
  r->min_interval_ms = (uint64_t)o->dns_min_reresolve_ms;
  /* DNS-01: TXT only when enabled, never for literals or localhost. */
  r->want_txt = o->dns_enable_txt && !t->host_is_literal;
  grit_list_init(&r->polls);
  struct ares_options opts = {.sock_state_cb = res_sock_state,
                              .sock_state_cb_data = r};
  if (ares_init_options(&r->ares, &opts, ARES_OPT_SOCK_STATE_CB) !=
      ARES_SUCCESS) {
    grit_free(r);
    return GRIT_ERR_NOMEM;
  }
  if (res_set_servers(r, o) != GRIT_OK) {
    ares_destroy(r->ares);
    grit_free(r);
    return GRIT_ERR_INVALID_ARG;
  }
  uv_timer_init(loop, &r->ares_timer);
  uv_timer_init(loop, &r->sched_timer);
  uv_timer_init(loop, &r->txt_timer);
  uv_timer_init(loop, &r->lookup_timer);
  r->ares_timer.data = r;
  r->sched_timer.data = r;
  r->txt_timer.data = r;
  r->lookup_timer.data = r;
  *out = r;
  return GRIT_OK;
}

void grit_resolver_destroy(grit_resolver *r) {
  if (!r)
    return;
  r->destroyed = true;
  /* Callbacks see ARES_EDESTRUCTION; sockets report (0, 0) and their poll
   * handles close. */
  ares_destroy(r->ares);
  grit_free(r->addrs);
  grit_free(r->config_json);
  r->pending_closes += 4;
  uv_close((uv_handle_t *)&r->ares_timer, res_handle_closed);
  uv_close((uv_handle_t *)&r->sched_timer, res_handle_closed);
  uv_close((uv_handle_t *)&r->txt_timer, res_handle_closed);
  uv_close((uv_handle_t *)&r->lookup_timer, res_handle_closed);
}
