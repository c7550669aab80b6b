/* TLS failures (SPEC HS-07, issue 7): against h2server with the bad
 * certificates from test/peers/gen_certs.sh (untrusted, wrong host,
 * expired) and without ALPN h2, a call fails UNAVAILABLE with a message
 * naming the problem, and the server never sees a request: nothing went
 * out in clear. The good certificate works with
 * GRIT_ARG_TLS_ROOT_CERTS_FILE or GRIT_ARG_TLS_ROOT_CERTS (PEM text), and a
 * client certificate satisfies a server that requires one.
 * GRIT_ARG_TLS_VERIFY_HOSTNAME 0 accepts a certificate
 * for another name, but still not an untrusted or expired one. Skipped
 * (exit 77) without openssl. */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "bh.h"

#define CALL_MS 5000

static grit_runtime *g_rt;
static char certs[256];

static bool make_certs(void) {
  if (system("command -v openssl >/dev/null 2>&1") != 0)
    return false;
  char script[PATH_MAX];
  const char *src = getenv("GRIT_SOURCE_ROOT");
  if (src) {
    snprintf(script, sizeof(script), "%s/test/peers/gen_certs.sh", src);
  } else {
    snprintf(script, sizeof(script), "%s", __FILE__);
    char *slash = strrchr(script, '/');
    if (!slash)
      return false;
    snprintf(slash, sizeof(script) - (size_t)(slash - script),
             "/../peers/gen_certs.sh");
  }
  char tmpl[] = "/tmp/grit-tls-certs-XXXXXX";
  if (!mkdtemp(tmpl))
    return false;
  snprintf(certs, sizeof(certs), "%s", tmpl);
  char cmd[PATH_MAX * 2 + 64];
  snprintf(cmd, sizeof(cmd), "bash '%s' '%s' >/dev/null 2>&1", script, tmpl);
  if (system(cmd) != 0) {
    fprintf(stderr, "cannot run %s\n", script);
    return false;
  }
  return true;
}

static const char *cert(char *buf, const char *name) {
  snprintf(buf, PATH_MAX, "%s/%s", certs, name);
  return buf;
}

/* A TLS server with certificate |name| (.pem and .key). */
static h2s_server *tls_server(const char *name, const char *client_ca,
                              bool no_alpn) {
  char c[PATH_MAX], k[PATH_MAX], n[64];
  snprintf(n, sizeof(n), "%s.pem", name);
  cert(c, n);
  snprintf(n, sizeof(n), "%s.key", name);
  cert(k, n);
  h2s_config cfg = {.quiet = true,
                    .tls_cert_file = c,
                    .tls_key_file = k,
                    .tls_client_ca_file = client_ca,
                    .tls_no_alpn = no_alpn};
  h2s_server *s = NULL;
  if (h2s_server_start(&cfg, &s) != 0)
    fprintf(stderr, "cannot start TLS h2server (%s)\n", name);
  return s;
}

typedef enum verify_host {
  VERIFY_DEFAULT = 0, /* GRIT_ARG_TLS_VERIFY_HOSTNAME not set */
  VERIFY_ON,
  VERIFY_OFF,
} verify_host;

typedef struct tls_opts {
  const char *name_override; /* NULL: the target host */
  bool client_cert;
  bool no_roots;  /* the system store instead of the test CA */
  bool roots_pem; /* the test CA as text (GRIT_ARG_TLS_ROOT_CERTS) */
  verify_host verify;
  bool skip_verify; /* GRIT_ARG_TLS_SKIP_VERIFY (issue 29) */
} tls_opts;

/* The whole of file |path|, NUL-terminated (free it), or NULL. */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = calloc(1, 65536);
  size_t n = buf ? fread(buf, 1, 65535, f) : 0;
  fclose(f);
  if (buf && n == 0) {
    free(buf);
    buf = NULL;
  }
  return buf;
}

static grit_channel *tls_channel(h2s_server *srv, const tls_opts *o) {
  char buf[PATH_MAX], target[64];
  grit_channel_args *a = NULL;
  if (grit_channel_args_create(&a) != GRIT_OK)
    return NULL;
  grit_channel_args_set_int(a, GRIT_ARG_TLS, 1);
  char *pem = o->roots_pem ? read_file(cert(buf, "ca.pem")) : NULL;
  if (pem)
    grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS, pem);
  else if (!o->no_roots)
    grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS_FILE,
                                 cert(buf, "ca.pem"));
  free(pem);
  if (o->name_override)
    grit_channel_args_set_string(a, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE,
                                 o->name_override);
  if (o->verify != VERIFY_DEFAULT)
    grit_channel_args_set_int(a, GRIT_ARG_TLS_VERIFY_HOSTNAME,
                              o->verify == VERIFY_ON);
  if (o->skip_verify)
    grit_channel_args_set_int(a, GRIT_ARG_TLS_SKIP_VERIFY, 1);
  if (o->client_cert) {
    grit_channel_args_set_string(a, GRIT_ARG_TLS_CERT_CHAIN_FILE,
                                 cert(buf, "client.pem"));
    grit_channel_args_set_string(a, GRIT_ARG_TLS_PRIVATE_KEY_FILE,
                                 cert(buf, "client.key"));
  }
  grit_channel *ch = NULL;
  grit_error_detail d = {0};
  if (grit_channel_create(g_rt, bh_target(target, sizeof(target), &srv, 1), a,
                          &d, &ch) != GRIT_OK)
    fprintf(stderr, "channel: %s %s\n", d.path, d.reason);
  grit_channel_args_destroy(a);
  return ch;
}

/* A call through |o| to a server with certificate |name| fails UNAVAILABLE
 * with |want| in the message, and the server logs no request. */
static void expect_failure(const char *name, const tls_opts *o,
                           const char *client_ca, bool no_alpn,
                           const char *want) {
  h2s_server *srv = tls_server(name, client_ca, no_alpn);
  ASSERT_NOT_NULL(srv);
  grit_channel *ch = tls_channel(srv, o);
  ASSERT_NOT_NULL(ch);
  for (int i = 0; i < 3; i++) {
    grit_status st;
    grit_status_code c = bh_unary(ch, "/pkg.Svc/M", "secret", CALL_MS, &st);
    ASSERT_CMP((int)c, >=, 0);
    if (i == 0)
      fprintf(stderr, "  %-10s %s \"%s\"\n", name, grit_status_code_name(c),
              st.message);
    bool named = st.message && strstr(st.message, want) != NULL;
    if (c != GRIT_STATUS_UNAVAILABLE || !named)
      fprintf(stderr, "  want UNAVAILABLE naming \"%s\", got %s \"%s\"\n", want,
              grit_status_code_name(c), st.message);
    grit_status_free(&st);
    ASSERT_EQ(c, GRIT_STATUS_UNAVAILABLE);
    ASSERT(named);
  }
  /* The TCP connection was made, yet no request reached HTTP/2. */
  ASSERT(h2s_server_wait_connections(srv, 1, 2000));
  ASSERT_EQ(h2s_server_request_count(srv), 0);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

#define NEED_CERTS()                                                           \
  do {                                                                         \
    if (!certs[0]) {                                                           \
      fprintf(stderr, "  skipped: no certificates\n");                         \
      return;                                                                  \
    }                                                                          \
  } while (0)

static void test_untrusted(void) {
  NEED_CERTS();
  tls_opts o = {.name_override = "foo.test.google.fr"};
  expect_failure("untrusted", &o, NULL, false,
                 "certificate verification failed");
  /* The system store does not know the test CA either. */
  tls_opts sys = {.name_override = "foo.test.google.fr", .no_roots = true};
  expect_failure("server", &sys, NULL, false,
                 "certificate verification failed");
}

static void test_wrong_host(void) {
  NEED_CERTS();
  tls_opts o = {.name_override = "foo.test.google.fr"};
  expect_failure("wronghost", &o, NULL, false, "hostname mismatch");
  /* The good certificate, but a name it does not carry. */
  tls_opts other = {.name_override = "other.example"};
  expect_failure("server", &other, NULL, false, "hostname mismatch");
}

/* GRIT_ARG_TLS_VERIFY_HOSTNAME: set to 1 it behaves as the default; set
 * to 0 the name check alone is skipped. */
static void test_verify_hostname(void) {
  NEED_CERTS();
  tls_opts on = {.name_override = "foo.test.google.fr", .verify = VERIFY_ON};
  expect_failure("wronghost", &on, NULL, false, "hostname mismatch");
  tls_opts on_other = {.name_override = "other.example", .verify = VERIFY_ON};
  expect_failure("server", &on_other, NULL, false, "hostname mismatch");

  /* Off: the certificate for wrong.example.com (signed by the trusted CA)
   * is accepted for foo.test.google.fr, and the call goes through. */
  h2s_server *srv = tls_server("wronghost", NULL, false);
  ASSERT_NOT_NULL(srv);
  tls_opts off = {.name_override = "foo.test.google.fr", .verify = VERIFY_OFF};
  grit_channel *ch = tls_channel(srv, &off);
  ASSERT_NOT_NULL(ch);
  grit_status st;
  grit_status_code c = bh_unary(ch, "/pkg.Svc/M", "hi", CALL_MS, &st);
  if ((int)c >= 0) {
    if (c != GRIT_STATUS_OK)
      fprintf(stderr, "  verify off: %s \"%s\"\n", grit_status_code_name(c),
              st.message);
    grit_status_free(&st);
  }
  ASSERT_EQ(c, GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_NOT_NULL(r);
  ASSERT_STR_EQ(h2s_request_header(r, ":scheme"), "https");
  grit_channel_destroy(ch);
  h2s_server_stop(srv);

  /* Off does not mean unverified: the chain is still checked. */
  tls_opts off_untrusted = {.name_override = "foo.test.google.fr",
                            .verify = VERIFY_OFF};
  expect_failure("untrusted", &off_untrusted, NULL, false,
                 "certificate verification failed");
  expect_failure("expired", &off_untrusted, NULL, false, "expired");
}

/* GRIT_ARG_TLS_SKIP_VERIFY (issue 29, grit call --insecure): an
 * untrusted, expired or wrong-host certificate is accepted and the call
 * goes out over TLS (":scheme https"); still encrypted, never cleartext.
 * Set to 0 it is the default: the untrusted certificate fails. */
static void test_skip_verify(void) {
  NEED_CERTS();
  const char *names[] = {"untrusted", "expired", "wronghost"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    h2s_server *srv = tls_server(names[i], NULL, false);
    ASSERT_NOT_NULL(srv);
    tls_opts o = {.name_override = "foo.test.google.fr", .skip_verify = true};
    grit_channel *ch = tls_channel(srv, &o);
    ASSERT_NOT_NULL(ch);
    grit_status st;
    grit_status_code c = bh_unary(ch, "/pkg.Svc/M", "hi", CALL_MS, &st);
    if ((int)c >= 0) {
      if (c != GRIT_STATUS_OK)
        fprintf(stderr, "  skip verify %s: %s \"%s\"\n", names[i],
                grit_status_code_name(c), st.message);
      grit_status_free(&st);
    }
    ASSERT_EQ(c, GRIT_STATUS_OK);
    ASSERT_EQ(h2s_server_request_count(srv), 1);
    const h2s_request *r = h2s_server_request(srv, 0);
    ASSERT_NOT_NULL(r);
    ASSERT_STR_EQ(h2s_request_header(r, ":scheme"), "https");
    grit_channel_destroy(ch);
    h2s_server_stop(srv);
  }
  tls_opts off = {.name_override = "foo.test.google.fr"};
  expect_failure("untrusted", &off, NULL, false,
                 "certificate verification failed");
}

static void test_expired(void) {
  NEED_CERTS();
  tls_opts o = {.name_override = "foo.test.google.fr"};
  expect_failure("expired", &o, NULL, false, "expired");
}

static void test_no_alpn_h2(void) {
  NEED_CERTS();
  tls_opts o = {.name_override = "foo.test.google.fr"};
  expect_failure("server", &o, NULL, true, "ALPN");
}

static void test_client_cert_required(void) {
  NEED_CERTS();
  char ca[PATH_MAX];
  cert(ca, "ca.pem");
  /* Without a client certificate the server aborts the handshake. */
  tls_opts o = {.name_override = "foo.test.google.fr"};
  expect_failure("server", &o, ca, false, "TLS");
  /* With one, the call goes through. */
  h2s_server *srv = tls_server("server", ca, false);
  ASSERT_NOT_NULL(srv);
  tls_opts m = {.name_override = "foo.test.google.fr", .client_cert = true};
  grit_channel *ch = tls_channel(srv, &m);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(bh_unary(ch, "/pkg.Svc/M", "hi", CALL_MS, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(srv), 1);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);
}

static void test_good_certificate(void) {
  NEED_CERTS();
  h2s_server *srv = tls_server("server", NULL, false);
  ASSERT_NOT_NULL(srv);
  /* By the name in the certificate, and by the IP SAN of the target. */
  tls_opts byname = {.name_override = "foo.test.google.fr"};
  tls_opts byip = {0};
  const tls_opts *os[] = {&byname, &byip};
  for (size_t i = 0; i < 2; i++) {
    grit_channel *ch = tls_channel(srv, os[i]);
    ASSERT_NOT_NULL(ch);
    grit_status st;
    grit_status_code c = bh_unary(ch, "/pkg.Svc/M", "hi", CALL_MS, &st);
    if (c != GRIT_STATUS_OK)
      fprintf(stderr, "  good certificate: %s \"%s\"\n",
              grit_status_code_name(c), st.message);
    if ((int)c >= 0)
      grit_status_free(&st);
    ASSERT_EQ(c, GRIT_STATUS_OK);
    grit_channel_destroy(ch);
  }
  ASSERT_EQ(h2s_server_request_count(srv), 2);
  const h2s_request *r = h2s_server_request(srv, 0);
  ASSERT_NOT_NULL(r);
  ASSERT_STR_EQ(h2s_request_header(r, ":scheme"), "https");
  h2s_server_stop(srv);
}

/* GRIT_ARG_TLS_ROOT_CERTS: the test CA given as PEM text is trusted as the
 * file is; text with no certificate fails channel creation. */
static void test_root_certs_text(void) {
  NEED_CERTS();
  h2s_server *srv = tls_server("server", NULL, false);
  ASSERT_NOT_NULL(srv);
  tls_opts o = {.name_override = "foo.test.google.fr", .roots_pem = true};
  grit_channel *ch = tls_channel(srv, &o);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(bh_unary(ch, "/pkg.Svc/M", "hi", CALL_MS, NULL), GRIT_STATUS_OK);
  grit_channel_destroy(ch);
  h2s_server_stop(srv);

  static const char *const bad[] = {
      "not a certificate",
      "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"};
  for (size_t i = 0; i < 2; i++) {
    grit_channel_args *a = NULL;
    ASSERT_OK(grit_channel_args_create(&a));
    ASSERT_OK(grit_channel_args_set_int(a, GRIT_ARG_TLS, 1));
    ASSERT_OK(grit_channel_args_set_string(a, GRIT_ARG_TLS_ROOT_CERTS, bad[i]));
    grit_error_detail d = {0};
    grit_channel *c = NULL;
    ASSERT_EQ(grit_channel_create(g_rt, "ipv4:127.0.0.1:1", a, &d, &c),
              GRIT_ERR_TLS);
    ASSERT_NULL(c);
    ASSERT(strstr(d.reason, "holds no valid certificate") != NULL);
    grit_channel_args_destroy(a);
  }
}

/* The TLS-only arguments, each set alone on |a| (SPEC AP-05). Files are
 * the test CA and client pair, so each loads. */
static const char *const material_keys[] = {
    GRIT_ARG_TLS_ROOT_CERTS_FILE, GRIT_ARG_TLS_ROOT_CERTS,
    GRIT_ARG_TLS_CERT_CHAIN_FILE, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE,
    GRIT_ARG_TLS_VERIFY_HOSTNAME,
};
#define N_MATERIAL (sizeof(material_keys) / sizeof(material_keys[0]))

static void set_material(grit_channel_args *a, size_t i) {
  char buf[PATH_MAX];
  const char *key = material_keys[i];
  if (strcmp(key, GRIT_ARG_TLS_ROOT_CERTS_FILE) == 0) {
    ASSERT_OK(grit_channel_args_set_string(a, key, cert(buf, "ca.pem")));
  } else if (strcmp(key, GRIT_ARG_TLS_ROOT_CERTS) == 0) {
    char *pem = read_file(cert(buf, "ca.pem"));
    ASSERT_NOT_NULL(pem);
    ASSERT_OK(grit_channel_args_set_string(a, key, pem));
    free(pem);
  } else if (strcmp(key, GRIT_ARG_TLS_CERT_CHAIN_FILE) == 0) {
    /* A client certificate goes with its key. */
    ASSERT_OK(grit_channel_args_set_string(a, key, cert(buf, "client.pem")));
    ASSERT_OK(grit_channel_args_set_string(a, GRIT_ARG_TLS_PRIVATE_KEY_FILE,
                                           cert(buf, "client.key")));
  } else if (strcmp(key, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE) == 0) {
    ASSERT_OK(grit_channel_args_set_string(a, key, "foo.test.google.fr"));
  } else {
    ASSERT_OK(grit_channel_args_set_int(a, key, 0));
  }
}

/* SPEC AP-05, issue 23: TLS material without GRIT_ARG_TLS means TLS. Against
 * a cleartext server every such channel's call fails UNAVAILABLE and the
 * server sees no request: nothing went out in clear. The same channel
 * against the TLS server succeeds, so the material was used, not ignored. */
static void test_material_implies_tls(void) {
  NEED_CERTS();
  h2s_server *clear = bh_server(NULL);
  ASSERT_NOT_NULL(clear);
  h2s_server *tls = tls_server("server", NULL, false);
  ASSERT_NOT_NULL(tls);
  for (size_t i = 0; i < N_MATERIAL; i++) {
    grit_channel_args *a = NULL;
    ASSERT_OK(grit_channel_args_create(&a));
    set_material(a, i);
    grit_channel *ch = bh_channel_args(&clear, 1, NULL, a);
    ASSERT_NOT_NULL(ch);
    grit_status st;
    grit_status_code c = bh_unary(ch, "/pkg.Svc/M", "secret", CALL_MS, &st);
    fprintf(stderr, "  %s alone, cleartext server: %s \"%s\"\n",
            material_keys[i], grit_status_code_name(c),
            (int)c >= 0 ? st.message : "");
    if ((int)c >= 0)
      grit_status_free(&st);
    ASSERT_EQ(c, GRIT_STATUS_UNAVAILABLE);
    grit_channel_destroy(ch);
    /* Roots and name are what a TLS server needs; the others give the
     * system store, which does not know the test CA. */
    if (i == 0 || i == 1) {
      ASSERT_OK(grit_channel_args_set_string(
          a, GRIT_ARG_TLS_TARGET_NAME_OVERRIDE, "foo.test.google.fr"));
      ch = bh_channel_args(&tls, 1, NULL, a);
      ASSERT_NOT_NULL(ch);
      ASSERT_EQ(bh_unary(ch, "/pkg.Svc/M", "hi", CALL_MS, NULL),
                GRIT_STATUS_OK);
      grit_channel_destroy(ch);
    }
    grit_channel_args_destroy(a);
  }
  ASSERT(h2s_server_wait_connections(clear, 1, 2000));
  ASSERT_EQ(h2s_server_request_count(clear), 0);
  ASSERT_EQ(h2s_server_request_count(tls), 2);
  h2s_server_stop(tls);
  h2s_server_stop(clear);
}

/* SPEC AP-05: TLS material on a channel made explicitly insecure
 * (GRIT_ARG_TLS 0) is refused, naming the argument; GRIT_ARG_TLS 0 alone
 * is the explicit cleartext choice and works. */
static void test_material_with_tls_off(void) {
  NEED_CERTS();
  for (size_t i = 0; i < N_MATERIAL; i++) {
    for (int order = 0; order < 2; order++) {
      grit_channel_args *a = NULL;
      ASSERT_OK(grit_channel_args_create(&a));
      if (order == 0)
        ASSERT_OK(grit_channel_args_set_int(a, GRIT_ARG_TLS, 0));
      set_material(a, i);
      if (order == 1)
        ASSERT_OK(grit_channel_args_set_int(a, GRIT_ARG_TLS, 0));
      grit_error_detail d = {0};
      grit_channel *c = (grit_channel *)&d; /* must come back NULL */
      ASSERT_EQ(grit_channel_create(g_rt, "ipv4:127.0.0.1:1", a, &d, &c),
                GRIT_ERR_INVALID_ARG);
      ASSERT_NULL(c);
      ASSERT_EQ(d.code, GRIT_ERR_INVALID_ARG);
      ASSERT_STR_EQ(d.path, material_keys[i]);
      ASSERT(strstr(d.reason, "insecure") != NULL);
      grit_channel_args_destroy(a);
    }
  }
  h2s_server *clear = bh_server(NULL);
  ASSERT_NOT_NULL(clear);
  grit_channel_args *a = NULL;
  ASSERT_OK(grit_channel_args_create(&a));
  ASSERT_OK(grit_channel_args_set_int(a, GRIT_ARG_TLS, 0));
  grit_channel *ch = bh_channel_args(&clear, 1, NULL, a);
  ASSERT_NOT_NULL(ch);
  ASSERT_EQ(bh_unary(ch, "/pkg.Svc/M", "hi", CALL_MS, NULL), GRIT_STATUS_OK);
  ASSERT_EQ(h2s_server_request_count(clear), 1);
  const h2s_request *r = h2s_server_request(clear, 0);
  ASSERT_NOT_NULL(r);
  ASSERT_STR_EQ(h2s_request_header(r, ":scheme"), "http");
  grit_channel_destroy(ch);
  grit_channel_args_destroy(a);
  h2s_server_stop(clear);
}

static const test_case tests[] = {
    {"material_implies_tls", test_material_implies_tls},
    {"material_with_tls_off", test_material_with_tls_off},
    {"root_certs_text", test_root_certs_text},
    {"good_certificate", test_good_certificate},
    {"untrusted", test_untrusted},
    {"wrong_host", test_wrong_host},
    {"verify_hostname", test_verify_hostname},
    {"expired", test_expired},
    {"skip_verify", test_skip_verify},
    {"no_alpn_h2", test_no_alpn_h2},
    {"client_cert_required", test_client_cert_required},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  if (!make_certs()) {
    fprintf(stderr, "skipped: openssl or gen_certs.sh unavailable\n");
    return 77;
  }
  if (grit_runtime_create(&g_rt) != GRIT_OK)
    return 1;
  int rc = test_main(tests, argc, argv);
  grit_runtime_destroy(g_rt);
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", certs);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", certs);
  return rc;
}
