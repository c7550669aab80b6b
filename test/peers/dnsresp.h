/*
 * A scripted UDP DNS responder for tests (issue 20), for what dnsmasq
 * cannot do: drop or refuse TXT queries while answering A at once, and
 * change its answers without a restart. One thread on a 127.0.0.1 port;
 * every name gets the same answers:
 *   A      the address in |a_ip| (or dropped / refused, per a_mode)
 *   AAAA   no data (NOERROR, no answer), or as a_mode when not ANSWER
 *   TXT    |txt| as one record split into 255-byte strings, or dropped,
 *          NXDOMAIN or refused, per txt_mode
 * Answers carry TTL 0 unless dnsr_set_ttl says otherwise (issue 28).
 * Queries are counted by type. dnsr_set_* change the answers at once.
 * dnsr_stop joins the thread (bounded by its 50 ms poll) and closes the
 * socket. Use from the test's main thread.
 */
#ifndef GRIT_TEST_PEERS_DNSRESP_H
#define GRIT_TEST_PEERS_DNSRESP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef enum dnsr_mode {
  DNSR_ANSWER = 0,
  DNSR_DROP = 1,     /* no reply at all */
  DNSR_NXDOMAIN = 2, /* rcode 3 */
  DNSR_REFUSE = 3,   /* rcode 5 */
} dnsr_mode;

typedef struct dnsr {
  int fd;
  uint16_t port;
  char server[32]; /* "127.0.0.1:PORT", for GRIT_ARG_DNS_SERVER */
  pthread_t thread;
  bool running;
  pthread_mutex_t mu;
  /* under mu */
  bool stop;
  dnsr_mode a_mode, txt_mode;
  char a_ip[16];
  char txt[4096];
  uint32_t ttl;                /* of every answer record */
  unsigned n_a, n_aaaa, n_txt; /* queries seen */
} dnsr;

/* Length of the question name at |p| (labels only, no compression), or 0. */
static inline size_t dnsr_qname_len_(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n && p[i] != 0) {
    if (p[i] & 0xc0)
      return 0;
    i += 1 + p[i];
  }
  return i < n ? i + 1 : 0;
}

static inline size_t dnsr_build_(dnsr *d, const uint8_t *q, size_t qlen,
                                 uint8_t *out, size_t cap, bool *send) {
  *send = false;
  if (qlen < 12 + 5)
    return 0;
  size_t nl = dnsr_qname_len_(q + 12, qlen - 12);
  if (nl == 0 || 12 + nl + 4 > qlen)
    return 0;
  size_t qend = 12 + nl + 4;
  uint16_t type = (uint16_t)(q[12 + nl] << 8 | q[12 + nl + 1]);
  pthread_mutex_lock(&d->mu);
  dnsr_mode mode = DNSR_ANSWER;
  if (type == 1) {
    d->n_a++;
    mode = d->a_mode;
  } else if (type == 28) {
    d->n_aaaa++;
    mode = d->a_mode;
  } else if (type == 16) {
    d->n_txt++;
    mode = d->txt_mode;
  }
  char ip[16], txt[4096];
  uint32_t ttl = d->ttl;
  memcpy(ip, d->a_ip, sizeof(ip));
  memcpy(txt, d->txt, sizeof(txt));
  pthread_mutex_unlock(&d->mu);
  if (mode == DNSR_DROP || qend > cap)
    return 0;
  memcpy(out, q, qend);
  out[2] = (uint8_t)(0x80 | (q[2] & 0x79)); /* QR, opcode, RD */
  out[3] = 0x80;                            /* RA */
  out[4] = 0, out[5] = 1;                   /* QDCOUNT 1 */
  memset(out + 6, 0, 6);                    /* AN, NS, AR 0 */
  size_t k = qend;
  *send = true;
  if (mode == DNSR_NXDOMAIN) {
    out[3] |= 3;
    return k;
  }
  if (mode == DNSR_REFUSE) {
    out[3] |= 5;
    return k;
  }
  uint8_t rdata[4400];
  size_t rlen = 0;
  if (type == 1) {
    if (inet_pton(AF_INET, ip, rdata) != 1)
      return k;
    rlen = 4;
  } else if (type == 16) {
    size_t tl = strlen(txt);
    for (size_t off = 0; off < tl || tl == 0; off += 255) {
      size_t c = tl - off < 255 ? tl - off : 255;
      rdata[rlen++] = (uint8_t)c;
      memcpy(rdata + rlen, txt + off, c);
      rlen += c;
      if (tl == 0)
        break;
    }
  } else {
    return k; /* AAAA and the rest: no data */
  }
  if (k + 12 + rlen > cap)
    return k;
  uint8_t rr[] = {0xc0, 0x0c, (uint8_t)(type >> 8), (uint8_t)type, 0, 1, 0, 0,
                  0,    0,    (uint8_t)(rlen >> 8), (uint8_t)rlen};
  for (int i = 0; i < 4; i++) /* TTL, big-endian */
    rr[6 + i] = (uint8_t)(ttl >> (24 - 8 * i));
  memcpy(out + k, rr, sizeof(rr));
  memcpy(out + k + sizeof(rr), rdata, rlen);
  out[7] = 1; /* ANCOUNT */
  return k + sizeof(rr) + rlen;
}

static inline void *dnsr_main_(void *arg) {
  dnsr *d = arg;
  for (;;) {
    pthread_mutex_lock(&d->mu);
    bool stop = d->stop;
    pthread_mutex_unlock(&d->mu);
    if (stop)
      return NULL;
    struct pollfd p = {.fd = d->fd, .events = POLLIN};
    if (poll(&p, 1, 50) != 1)
      continue;
    uint8_t q[1500], out[8192];
    struct sockaddr_storage from;
    socklen_t fl = sizeof(from);
    ssize_t n = recvfrom(d->fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
    if (n <= 0)
      continue;
    bool send = false;
    size_t len = dnsr_build_(d, q, (size_t)n, out, sizeof(out), &send);
    if (send && len > 0)
      sendto(d->fd, out, len, 0, (struct sockaddr *)&from, fl);
  }
}

/* Start on a free port answering A with |ip| and TXT with |txt| (NULL:
 * NXDOMAIN). Returns 0 or -1. */
static inline int dnsr_start(dnsr *d, const char *ip, const char *txt) {
  memset(d, 0, sizeof(*d));
  pthread_mutex_init(&d->mu, NULL);
  snprintf(d->a_ip, sizeof(d->a_ip), "%s", ip);
  d->txt_mode = txt ? DNSR_ANSWER : DNSR_NXDOMAIN;
  snprintf(d->txt, sizeof(d->txt), "%s", txt ? txt : "");
  d->fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (d->fd < 0)
    return -1;
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof(a);
  if (bind(d->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      getsockname(d->fd, (struct sockaddr *)&a, &al) != 0) {
    close(d->fd);
    return -1;
  }
  d->port = ntohs(a.sin_port);
  snprintf(d->server, sizeof(d->server), "127.0.0.1:%u", (unsigned)d->port);
  if (pthread_create(&d->thread, NULL, dnsr_main_, d) != 0) {
    close(d->fd);
    return -1;
  }
  d->running = true;
  return 0;
}

static inline void dnsr_set_a(dnsr *d, dnsr_mode m) {
  pthread_mutex_lock(&d->mu);
  d->a_mode = m;
  pthread_mutex_unlock(&d->mu);
}

/* TXT answers: |txt| with mode ANSWER (NULL keeps the text). */
static inline void dnsr_set_txt(dnsr *d, dnsr_mode m, const char *txt) {
  pthread_mutex_lock(&d->mu);
  d->txt_mode = m;
  if (txt)
    snprintf(d->txt, sizeof(d->txt), "%s", txt);
  pthread_mutex_unlock(&d->mu);
}

/* The TTL of every answer record from now on (seconds). */
static inline void dnsr_set_ttl(dnsr *d, uint32_t ttl) {
  pthread_mutex_lock(&d->mu);
  d->ttl = ttl;
  pthread_mutex_unlock(&d->mu);
}

static inline unsigned dnsr_count_a(dnsr *d) {
  pthread_mutex_lock(&d->mu);
  unsigned n = d->n_a;
  pthread_mutex_unlock(&d->mu);
  return n;
}

static inline unsigned dnsr_count_txt(dnsr *d) {
  pthread_mutex_lock(&d->mu);
  unsigned n = d->n_txt;
  pthread_mutex_unlock(&d->mu);
  return n;
}

/* Idempotent. */
static inline void dnsr_stop(dnsr *d) {
  if (!d->running)
    return;
  pthread_mutex_lock(&d->mu);
  d->stop = true;
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->thread, NULL);
  close(d->fd);
  pthread_mutex_destroy(&d->mu);
  d->running = false;
}

#endif
