/* SPEC AP-05 (issue 23 point 1), as a user builds it: against a cleartext
 * grpcio server (interop_server.py --log-calls), a channel given TLS
 * material without GRIT_ARG_TLS must not succeed, and the server must see
 * no request from it (check_install.sh counts its "call:" lines). A
 * channel made explicitly insecure (GRIT_ARG_TLS 0) works; TLS material on
 * such a channel is refused, naming the argument.
 *
 *   tls_material HOST:PORT CA_FILE
 *
 * Exit 0 when all holds; the one successful call is the insecure one. */
#include <grit/grit.h>

#include <stdio.h>
#include <string.h>

static const char method[] = "/grpc.testing.TestService/EmptyCall";

/* One EmptyCall; returns its status code, or -1 when it did not run. */
static int call(grit_channel *ch) {
  grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION, .timeout_ms = 5000};
  grit_status st = {0};
  grit_err rv = grit_unary_call(ch, method, NULL, 0, &opts, NULL, &st, NULL);
  int code = rv == GRIT_OK ? (int)st.code : -1;
  printf("  %s \"%s\"\n", grit_status_code_name(st.code), st.message);
  grit_status_free(&st);
  return code;
}

/* A channel to |target| with |key| (string |sval| or int |ival|) and, when
 * |tls| is 0 or 1, GRIT_ARG_TLS; |detail| gets the reason on failure. */
static grit_err channel(const char *target, const char *key, const char *sval,
                        int ival, int tls, grit_error_detail *detail,
                        grit_channel **ch) {
  grit_channel_args *a;
  grit_err rv = grit_channel_args_create(&a);
  if (rv != GRIT_OK)
    return rv;
  if (tls >= 0)
    grit_channel_args_set_int(a, GRIT_ARG_TLS, tls);
  if (key && sval)
    grit_channel_args_set_string(a, key, sval);
  else if (key)
    grit_channel_args_set_int(a, key, ival);
  rv = grit_channel_create(NULL, target, a, detail, ch);
  grit_channel_args_destroy(a);
  return rv;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: tls_material HOST:PORT CA_FILE\n");
    return 2;
  }
  char target[256];
  snprintf(target, sizeof(target), "ipv4:%s", argv[1]);
  int failures = 0;
  grit_channel *ch;
  grit_error_detail d = {0};

  printf("explicitly insecure (grit.tls = 0):\n");
  if (channel(target, NULL, NULL, 0, 0, &d, &ch) != GRIT_OK) {
    printf("  FAIL: create: %s %s\n", d.path, d.reason);
    return 1;
  }
  if (call(ch) != GRIT_STATUS_OK) {
    printf("  FAIL: the cleartext call on an insecure channel failed\n");
    failures++;
  }
  grit_channel_destroy(ch);

  struct {
    const char *key, *sval;
    int ival;
  } material[] = {
      {GRIT_ARG_TLS_ROOT_CERTS_FILE, argv[2], 0},
      {GRIT_ARG_TLS_TARGET_NAME_OVERRIDE, "foo.test.google.fr", 0},
      {GRIT_ARG_TLS_VERIFY_HOSTNAME, NULL, 0},
  };
  for (size_t i = 0; i < sizeof(material) / sizeof(material[0]); i++) {
    printf("%s alone:\n", material[i].key);
    if (channel(target, material[i].key, material[i].sval, material[i].ival, -1,
                &d, &ch) != GRIT_OK) {
      printf("  FAIL: create: %s %s\n", d.path, d.reason);
      return 1;
    }
    int code = call(ch);
    if (code != GRIT_STATUS_UNAVAILABLE) {
      printf("  FAIL: want UNAVAILABLE (TLS against a cleartext server)\n");
      failures++;
    }
    grit_channel_destroy(ch);

    printf("%s with grit.tls = 0:\n", material[i].key);
    memset(&d, 0, sizeof(d));
    ch = NULL;
    grit_err rv = channel(target, material[i].key, material[i].sval,
                          material[i].ival, 0, &d, &ch);
    printf("  %s: %s: %s\n", grit_err_name(rv), d.path, d.reason);
    if (rv != GRIT_ERR_INVALID_ARG || ch || strcmp(d.path, material[i].key)) {
      printf("  FAIL: want ERR_INVALID_ARG naming %s\n", material[i].key);
      failures++;
      grit_channel_destroy(ch);
    }
  }
  grit_default_runtime_shutdown();
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
