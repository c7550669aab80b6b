/* Unit tests for target parsing (SPEC DNS-06): dns:[//authority/]host[:port],
 * bare host:port, ipv4:a:p[,a:p...], ipv6:[a]:p[,...], unix:path and
 * unix:///abs, the default port 443 (DNS-05) and the default :authority. */
#include "resolver/resolver.h"

#include <string.h>

#include "test/harness.h"

static void test_dns_forms(void) {
  grit_target t;
  grit_error_detail d = {0};

  ASSERT_OK(grit_target_parse("dns:foo.example:50051", &t, &d));
  ASSERT_EQ(t.kind, GRIT_TARGET_DNS);
  ASSERT_STR_EQ(t.host, "foo.example");
  ASSERT_EQ(t.port, 50051);
  ASSERT_NULL(t.dns_authority);
  ASSERT_STR_EQ(t.authority, "foo.example:50051");
  ASSERT(!t.host_is_literal);
  ASSERT_EQ(t.naddrs, 0);
  grit_target_free(&t);

  /* No port: 443 (DNS-05); the authority is the host as written. */
  ASSERT_OK(grit_target_parse("dns:foo.example", &t, &d));
  ASSERT_EQ(t.port, 443);
  ASSERT_STR_EQ(t.authority, "foo.example");
  grit_target_free(&t);

  /* An empty authority: dns:///host:port. */
  ASSERT_OK(grit_target_parse("dns:///foo.example:1234", &t, &d));
  ASSERT_EQ(t.kind, GRIT_TARGET_DNS);
  ASSERT_NULL(t.dns_authority);
  ASSERT_STR_EQ(t.host, "foo.example");
  ASSERT_EQ(t.port, 1234);
  ASSERT_STR_EQ(t.authority, "foo.example:1234");
  grit_target_free(&t);

  /* A DNS server authority. */
  ASSERT_OK(grit_target_parse("dns://8.8.8.8:53/foo.example:1", &t, &d));
  ASSERT_STR_EQ(t.dns_authority, "8.8.8.8:53");
  ASSERT_STR_EQ(t.host, "foo.example");
  ASSERT_EQ(t.port, 1);
  ASSERT_STR_EQ(t.authority, "foo.example:1");
  grit_target_free(&t);

  /* A bare host:port means dns. */
  ASSERT_OK(grit_target_parse("foo.example:50051", &t, &d));
  ASSERT_EQ(t.kind, GRIT_TARGET_DNS);
  ASSERT_STR_EQ(t.host, "foo.example");
  ASSERT_EQ(t.port, 50051);
  ASSERT_STR_EQ(t.authority, "foo.example:50051");
  grit_target_free(&t);

  ASSERT_OK(grit_target_parse("foo", &t, &d));
  ASSERT_EQ(t.kind, GRIT_TARGET_DNS);
  ASSERT_EQ(t.port, 443);
  grit_target_free(&t);
}

static void test_dns_literals(void) {
  grit_target t;
  grit_error_detail d = {0};

  /* localhost and IP literals are "literal" (no TXT lookups, DNS-01). */
  ASSERT_OK(grit_target_parse("localhost:8080", &t, &d));
  ASSERT(t.host_is_literal);
  ASSERT_EQ(t.naddrs, 0); /* still resolved */
  grit_target_free(&t);

  ASSERT_OK(grit_target_parse("dns:127.0.0.1:5", &t, &d));
  ASSERT(t.host_is_literal);
  ASSERT_EQ(t.naddrs, 1);
  ASSERT_STR_EQ(t.addrs[0].text, "127.0.0.1:5");
  grit_target_free(&t);

  ASSERT_OK(grit_target_parse("dns:[::1]:5", &t, &d));
  ASSERT_STR_EQ(t.host, "::1");
  ASSERT(t.host_is_literal);
  ASSERT_EQ(t.naddrs, 1);
  ASSERT_STR_EQ(t.addrs[0].text, "[::1]:5");
  ASSERT_STR_EQ(t.authority, "[::1]:5");
  grit_target_free(&t);

  /* A bare IPv6 literal without brackets has no port. */
  ASSERT_OK(grit_target_parse("dns:::1", &t, &d));
  ASSERT_STR_EQ(t.host, "::1");
  ASSERT_EQ(t.port, 443);
  ASSERT(t.host_is_literal);
  grit_target_free(&t);

  ASSERT_OK(grit_target_parse("[::1]", &t, &d));
  ASSERT_STR_EQ(t.host, "::1");
  ASSERT_EQ(t.port, 443);
  grit_target_free(&t);
}

static void test_ip_lists(void) {
  grit_target t;
  grit_error_detail d = {0};

  ASSERT_OK(grit_target_parse("ipv4:127.0.0.1:1,10.0.0.2:65535", &t, &d));
  ASSERT_EQ(t.kind, GRIT_TARGET_IPV4);
  ASSERT_EQ(t.naddrs, 2);
  ASSERT_STR_EQ(t.addrs[0].text, "127.0.0.1:1");
  ASSERT_STR_EQ(t.addrs[1].text, "10.0.0.2:65535");
  ASSERT_STR_EQ(t.authority, "127.0.0.1:1"); /* the first address */
  grit_target_free(&t);

  ASSERT_OK(grit_target_parse("ipv6:[::1]:1,[fe80::1]:2", &t, &d));
  ASSERT_EQ(t.kind, GRIT_TARGET_IPV6);
  ASSERT_EQ(t.naddrs, 2);
  ASSERT_STR_EQ(t.addrs[0].text, "[::1]:1");
  ASSERT_STR_EQ(t.addrs[1].text, "[fe80::1]:2");
  ASSERT_STR_EQ(t.authority, "[::1]:1");
  grit_target_free(&t);
}

static void test_unix(void) {
  grit_target t;
  grit_error_detail d = {0};

  ASSERT_OK(grit_target_parse("unix:/tmp/grit.sock", &t, &d));
  ASSERT_EQ(t.kind, GRIT_TARGET_UNIX);
  ASSERT_EQ(t.naddrs, 1);
  ASSERT_STR_EQ(t.addrs[0].text, "unix:/tmp/grit.sock");
  ASSERT_STR_EQ(t.authority, "localhost");
  grit_target_free(&t);

  ASSERT_OK(grit_target_parse("unix:///tmp/grit.sock", &t, &d));
  ASSERT_EQ(t.kind, GRIT_TARGET_UNIX);
  ASSERT_STR_EQ(t.addrs[0].text, "unix:/tmp/grit.sock");
  grit_target_free(&t);

  /* A relative path. */
  ASSERT_OK(grit_target_parse("unix:rel/sock", &t, &d));
  ASSERT_STR_EQ(t.addrs[0].text, "unix:rel/sock");
  grit_target_free(&t);
}

static void test_invalid(void) {
  static const char *const bad[] = {
      "",
      "ipv4:",
      "ipv4:127.0.0.1:99999",
      "ipv4:127.0.0.1:abc",
      "ipv4:127.0.0.1:",
      "ipv4:127.0.0.1", /* DNS-06: the port is required, as in grpc-core */
      "ipv6:[::1]",
      "ipv4:[::1]:1",
      "ipv4:localhost:1",
      "ipv4:,127.0.0.1:1",
      "ipv4:1.2.3.4:1,bad:2",
      "ipv6:127.0.0.1:1",
      "ipv6:[::1",
      "ipv6:[::1]x1",
      "dns://8.8.8.8",
      "dns:",
      "dns:host:",
      "dns:host:123456",
      "dns:host:-1",
      ":50051",
      "[::1]:",
      "[]:1",
      "unix:",
      "unix://host/path",
      "unix://",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    grit_target t;
    grit_error_detail d = {0};
    grit_err rv = grit_target_parse(bad[i], &t, &d);
    if (rv != GRIT_ERR_INVALID_TARGET)
      fprintf(stderr, "target \"%s\": %d\n", bad[i], (int)rv);
    ASSERT_EQ(rv, GRIT_ERR_INVALID_TARGET);
    ASSERT_EQ(d.code, GRIT_ERR_INVALID_TARGET);
    ASSERT(d.reason[0] != '\0');
    /* Nothing is left allocated on failure. */
    ASSERT_NULL(t.host);
    ASSERT_NULL(t.authority);
    ASSERT_NULL(t.addrs);
    grit_target_free(&t);
  }
  grit_target t;
  ASSERT_EQ(grit_target_parse(NULL, &t, NULL), GRIT_ERR_INVALID_TARGET);
  /* A scheme grit does not serve is named as such (xDS is not in the
   * installed library; docs/xds.md). */
  grit_error_detail d = {0};
  ASSERT_EQ(grit_target_parse("xds:///svc.example", &t, &d),
            GRIT_ERR_INVALID_TARGET);
  ASSERT(strstr(d.reason, "scheme \"xds\" is not supported") != NULL);
  grit_error_detail d2 = {0};
  ASSERT_EQ(grit_target_parse("dns://8.8.8.8", &t, &d2),
            GRIT_ERR_INVALID_TARGET);
  ASSERT(strstr(d2.reason, "scheme") == NULL);
  /* A unix path longer than sun_path. */
  char longp[300] = "unix:/";
  memset(longp + 6, 'a', sizeof(longp) - 7);
  longp[sizeof(longp) - 1] = '\0';
  ASSERT_EQ(grit_target_parse(longp, &t, NULL), GRIT_ERR_INVALID_TARGET);
}

/* ---- SPEC OP-04: the TTL of a raw DNS answer (channel/dns_ttl.c) ---- */

typedef struct dmsg {
  uint8_t b[512];
  size_t n;
} dmsg;

static void put(dmsg *m, const void *p, size_t n) {
  memcpy(m->b + m->n, p, n);
  m->n += n;
}

static void put16(dmsg *m, unsigned v) {
  uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
  put(m, b, 2);
}

static void put32(dmsg *m, uint32_t v) {
  put16(m, v >> 16);
  put16(m, v & 0xffff);
}

/* Header with |an| answers, |ns| authority records and |rcode|, then the
 * question "_grpc_config.svc.test" TXT at offset 12. */
static void start(dmsg *m, unsigned an, unsigned ns, unsigned rcode) {
  m->n = 0;
  put16(m, 0x1234);
  put16(m, 0x8180 | rcode);
  put16(m, 1);
  put16(m, an);
  put16(m, ns);
  put16(m, 0);
  put(m, "\x0c_grpc_config\x03svc\x04test\x00", 23);
  put16(m, 16);
  put16(m, 1);
}

/* A record owned by the question's name (pointer to offset 12). */
static void rr(dmsg *m, unsigned type, uint32_t ttl, const void *rdata,
               size_t len) {
  put16(m, 0xc00c);
  put16(m, type);
  put16(m, 1);
  put32(m, ttl);
  put16(m, (unsigned)len);
  put(m, rdata, len);
}

static void soa(dmsg *m, uint32_t ttl, uint32_t minimum) {
  dmsg r = {.n = 0};
  put(&r, "\x02ns\xc0\x1d", 5); /* ns.test via a pointer to "test" */
  put(&r,
      "\x05"
      "admin\x00",
      7);
  for (int i = 0; i < 4; i++)
    put32(&r, 100);
  put32(&r, minimum);
  rr(m, 6, ttl, r.b, r.n);
}

static void test_dns_answer_ttl(void) {
  dmsg m;
  uint32_t ttl;
  /* The least TTL of the TXT records and CNAMEs in the answer section. */
  start(&m, 3, 0, 0);
  rr(&m, 16, 300, "\x0egrpc_config=[]", 15);
  rr(&m, 5, 45,
     "\x03"
     "cfg\xc0\x1d",
     6);
  rr(&m, 16, 600, "\x01x", 2);
  ASSERT_OK(grit_dns_answer_ttl(m.b, m.n, 16, &ttl));
  ASSERT_EQ(ttl, 45);
  /* Another type's records do not count; nothing left to go by. */
  ASSERT_EQ(grit_dns_answer_ttl(m.b, m.n, 1, &ttl), GRIT_OK); /* CNAME */
  ASSERT_EQ(ttl, 45);
  start(&m, 1, 0, 0);
  rr(&m, 16, 300, "\x01x", 2);
  ASSERT_EQ(grit_dns_answer_ttl(m.b, m.n, 1, &ttl), GRIT_ERR_NOT_FOUND);
  ASSERT_EQ(ttl, 0);
  /* RFC 2181 8: a TTL with the top bit set counts as 0. */
  start(&m, 1, 0, 0);
  rr(&m, 16, 0x80000005u, "\x01x", 2);
  ASSERT_OK(grit_dns_answer_ttl(m.b, m.n, 16, &ttl));
  ASSERT_EQ(ttl, 0);
  /* RFC 2308: NXDOMAIN or NODATA lives min(SOA TTL, SOA MINIMUM). */
  start(&m, 0, 1, 3);
  soa(&m, 3600, 60);
  ASSERT_OK(grit_dns_answer_ttl(m.b, m.n, 16, &ttl));
  ASSERT_EQ(ttl, 60);
  start(&m, 0, 1, 0);
  soa(&m, 20, 900);
  ASSERT_OK(grit_dns_answer_ttl(m.b, m.n, 16, &ttl));
  ASSERT_EQ(ttl, 20);
  start(&m, 0, 0, 3); /* no SOA: no negative TTL */
  ASSERT_EQ(grit_dns_answer_ttl(m.b, m.n, 16, &ttl), GRIT_ERR_NOT_FOUND);
  /* Malformed: every cut of a good message, a bad label type, an RDATA
   * running past the end, a SOA whose RDATA is the wrong size. */
  start(&m, 1, 1, 0);
  rr(&m, 16, 300, "\x01x", 2);
  soa(&m, 5, 5);
  ASSERT_OK(grit_dns_answer_ttl(m.b, m.n, 16, &ttl));
  for (size_t cut = 0; cut < m.n; cut++)
    ASSERT_EQ(grit_dns_answer_ttl(m.b, cut, 16, &ttl), GRIT_ERR_PARSE);
  start(&m, 0, 0, 0);
  m.b[12] = 0x40;
  ASSERT_EQ(grit_dns_answer_ttl(m.b, m.n, 16, &ttl), GRIT_ERR_PARSE);
  start(&m, 1, 0, 0);
  rr(&m, 16, 300, "\x01x", 2);
  m.b[m.n - 3] = 9; /* RDLENGTH 9, 2 bytes there */
  ASSERT_EQ(grit_dns_answer_ttl(m.b, m.n, 16, &ttl), GRIT_ERR_PARSE);
  start(&m, 0, 1, 3);
  rr(&m, 6, 30,
     "\x00\x00"
     "abcd",
     6);
  ASSERT_EQ(grit_dns_answer_ttl(m.b, m.n, 16, &ttl), GRIT_ERR_PARSE);
  ASSERT_EQ(grit_dns_answer_ttl(NULL, 0, 16, &ttl), GRIT_ERR_PARSE);
}

static const test_case tests[] = {
    {"dns_forms", test_dns_forms},
    {"dns_literals", test_dns_literals},
    {"ip_lists", test_ip_lists},
    {"unix", test_unix},
    {"invalid", test_invalid},
    {"dns_answer_ttl", test_dns_answer_ttl},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
