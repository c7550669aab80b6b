/* Unit tests for target parsing (SPEC DNS-06): dns:[//authority/]host[:port],
 * bare host:port, ipv4:a:p[,a:p...], ipv6:[a]:p[,...], unix:path and
 * unix:///abs, the default port 443 (DNS-05) and the default :authority. */
#include "resolver/resolver.h"

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
  /* A unix path longer than sun_path. */
  char longp[300] = "unix:/";
  memset(longp + 6, 'a', sizeof(longp) - 7);
  longp[sizeof(longp) - 1] = '\0';
  ASSERT_EQ(grit_target_parse(longp, &t, NULL), GRIT_ERR_INVALID_TARGET);
}

static const test_case tests[] = {
    {"dns_forms", test_dns_forms}, {"dns_literals", test_dns_literals},
    {"ip_lists", test_ip_lists},   {"unix", test_unix},
    {"invalid", test_invalid},     {NULL, NULL},
};

int main(int argc, char **argv) {
  return test_main(tests, argc, argv);
}
