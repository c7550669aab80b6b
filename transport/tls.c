/* TLS under nghttp2: an OpenSSL client driven through two memory BIOs, so
 * SSL never touches the socket (STYLE 3.7). OpenSSL's error queue is
 * drained into reason text here and nowhere else (STYLE 3.4). */
#include "transport/transport.h"
#include "transport/transport_int.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct grit_tls_ctx {
  uint32_t refs;
  SSL_CTX *ctx;
};

struct grit_tls_conn {
  SSL *ssl;
  BIO *rbio; /* ciphertext from the network, read by SSL */
  BIO *wbio; /* ciphertext written by SSL, for the network */
  bool handshake_done;
};

/* Append "what: lib error; lib error" to |why|, emptying the queue. */
static void tls_reason(char *why, size_t cap, const char *what) {
  size_t used = (size_t)snprintf(why, cap, "%s", what);
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char one[200];
    ERR_error_string_n(e, one, sizeof(one));
    if (used + 3 < cap)
      used += (size_t)snprintf(why + used, cap - used, ": %s", one);
  }
}

/* Add every certificate of the PEM text |pem| to |ctx|'s trust store.
 * False when it holds none or one does not parse. */
static bool tls_add_pem_roots(SSL_CTX *ctx, const char *pem) {
  BIO *bio = BIO_new_mem_buf(pem, -1);
  if (!bio)
    return false;
  X509_STORE *store = SSL_CTX_get_cert_store(ctx);
  int added = 0;
  X509 *x;
  while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
    int ok = X509_STORE_add_cert(store, x);
    X509_free(x);
    if (!ok) {
      BIO_free(bio);
      return false;
    }
    added++;
  }
  BIO_free(bio);
  /* The loop ends on "no start line" once the text is used up. */
  unsigned long e = ERR_peek_last_error();
  if (added && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
    ERR_clear_error();
  return added > 0 && ERR_peek_error() == 0;
}

/* The roots: the file and/or PEM text given, else the system store. */
static bool tls_load_roots(SSL_CTX *ctx, const grit_tls_opts *o, char *why,
                           size_t cap) {
  const char *file = o ? o->root_certs_file : NULL;
  const char *pem = o ? o->root_certs_pem : NULL;
  if (file && !SSL_CTX_load_verify_locations(ctx, file, NULL)) {
    char what[200];
    snprintf(what, sizeof(what), "cannot load root certificates from %s", file);
    tls_reason(why, cap, what);
    return false;
  }
  if (pem && !tls_add_pem_roots(ctx, pem)) {
    tls_reason(why, cap, "root certificates text holds no valid certificate");
    return false;
  }
  if (!file && !pem && !SSL_CTX_set_default_verify_paths(ctx)) {
    tls_reason(why, cap, "cannot load the system root certificates");
    return false;
  }
  return true;
}

grit_err grit_tls_ctx_create(const grit_tls_opts *o, grit_error_detail *d,
                             grit_tls_ctx **out) {
  char why[256];
  *out = NULL;
  ERR_clear_error();
  grit_tls_ctx *c = grit_calloc(1, sizeof(*c));
  if (!c) {
    grit_error_set(d, GRIT_ERR_NOMEM, NULL, "out of memory");
    return GRIT_ERR_NOMEM;
  }
  c->refs = 1;
  c->ctx = SSL_CTX_new(TLS_client_method());
  if (!c->ctx) {
    tls_reason(why, sizeof(why), "SSL_CTX_new failed");
    goto fail;
  }
  /* h2 requires TLS 1.2 or later (RFC 9113 §9.2). */
  if (!SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION)) {
    tls_reason(why, sizeof(why), "cannot require TLS 1.2");
    goto fail;
  }
  /* GRIT_ARG_TLS_SKIP_VERIFY: the handshake ignores the verify result
   * (chain and host name alike). */
  SSL_CTX_set_verify(
      c->ctx, o && o->skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
  if (!tls_load_roots(c->ctx, o, why, sizeof(why)))
    goto fail;
  if (o && o->cert_chain_file) {
    const char *key =
        o->private_key_file ? o->private_key_file : o->cert_chain_file;
    char what[200];
    if (SSL_CTX_use_certificate_chain_file(c->ctx, o->cert_chain_file) != 1) {
      snprintf(what, sizeof(what), "cannot load certificate chain %s",
               o->cert_chain_file);
      tls_reason(why, sizeof(why), what);
      goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(c->ctx, key, SSL_FILETYPE_PEM) != 1) {
      snprintf(what, sizeof(what), "cannot load private key %s", key);
      tls_reason(why, sizeof(why), what);
      goto fail;
    }
    if (SSL_CTX_check_private_key(c->ctx) != 1) {
      tls_reason(why, sizeof(why), "private key does not match certificate");
      goto fail;
    }
  }
  /* SPEC HS-07: ALPN h2 is required. Note the inverted return value. */
  static const unsigned char alpn[] = {2, 'h', '2'};
  if (SSL_CTX_set_alpn_protos(c->ctx, alpn, sizeof(alpn)) != 0) {
    tls_reason(why, sizeof(why), "cannot set ALPN");
    goto fail;
  }
  *out = c;
  return GRIT_OK;

fail:
  grit_error_set(d, GRIT_ERR_TLS, NULL, "%s", why);
  grit_tls_ctx_unref(c);
  return GRIT_ERR_TLS;
}

/* Atomic: a channel may create or drop its context off the loop thread
 * while transports hold references on it. */
grit_tls_ctx *grit_tls_ctx_ref(grit_tls_ctx *c) {
  if (c)
    __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  return c;
}

void grit_tls_ctx_unref(grit_tls_ctx *c) {
  if (!c || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) > 0)
    return;
  SSL_CTX_free(c->ctx);
  grit_free(c);
}

static bool tls_is_ip(const char *name) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, name, buf) == 1 ||
         inet_pton(AF_INET6, name, buf) == 1;
}

grit_err grit_tls_conn_create(grit_tls_ctx *ctx, const char *server_name,
                              bool verify_hostname, grit_tls_conn **out,
                              char *why, size_t whylen) {
  *out = NULL;
  ERR_clear_error();
  grit_tls_conn *c = grit_calloc(1, sizeof(*c));
  if (!c) {
    snprintf(why, whylen, "out of memory");
    return GRIT_ERR_NOMEM;
  }
  c->ssl = SSL_new(ctx->ctx);
  c->rbio = BIO_new(BIO_s_mem());
  c->wbio = BIO_new(BIO_s_mem());
  if (!c->ssl || !c->rbio || !c->wbio) {
    tls_reason(why, whylen, "cannot create a TLS session");
    BIO_free(c->rbio);
    BIO_free(c->wbio);
    goto fail;
  }
  /* An empty BIO means "try again", not end of file. */
  BIO_set_mem_eof_return(c->rbio, -1);
  BIO_set_mem_eof_return(c->wbio, -1);
  SSL_set_bio(c->ssl, c->rbio, c->wbio);
  SSL_set_connect_state(c->ssl);

  if (server_name && *server_name) {
    char name[256];
    size_t n = strlen(server_name);
    const char *colon = strchr(server_name, ':');
    if (n >= 2 && server_name[0] == '[') {
      /* "[::1]" or "[::1]:443" */
      const char *end = strchr(server_name, ']');
      if (end) {
        server_name++;
        n = (size_t)(end - server_name);
      }
    } else if (colon && !strchr(colon + 1, ':')) {
      n = (size_t)(colon - server_name); /* "host:443": the host only */
    }
    if (n >= sizeof(name)) {
      snprintf(why, whylen, "TLS server name too long");
      goto fail;
    }
    memcpy(name, server_name, n);
    name[n] = '\0';
    bool ip = tls_is_ip(name);
    /* RFC 6066 §3: SNI carries host names only, never addresses. */
    if (!ip && !SSL_set_tlsext_host_name(c->ssl, name)) {
      tls_reason(why, whylen, "cannot set SNI");
      goto fail;
    }
    if (verify_hostname) {
      int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), name)
                  : SSL_set1_host(c->ssl, name);
      if (ok != 1) {
        tls_reason(why, whylen, "cannot set the host name to verify");
        goto fail;
      }
    }
  }
  *out = c;
  return GRIT_OK;

fail:
  grit_tls_conn_destroy(c);
  return GRIT_ERR_TLS;
}

void grit_tls_conn_destroy(grit_tls_conn *c) {
  if (!c)
    return;
  SSL_free(c->ssl); /* frees both BIOs */
  grit_free(c);
}

bool grit_tls_conn_ready(const grit_tls_conn *c) {
  return c->handshake_done;
}

/* Why the handshake or a read failed: the peer certificate's verify result
 * first, since "certificate verify failed" alone helps nobody. */
static void tls_fail_reason(grit_tls_conn *c, int err, char *why,
                            size_t whylen) {
  long vr = SSL_get_verify_result(c->ssl);
  if (!c->handshake_done && vr != X509_V_OK) {
    char what[200];
    snprintf(what, sizeof(what), "TLS certificate verification failed: %s",
             X509_verify_cert_error_string(vr));
    tls_reason(why, whylen, what);
    return;
  }
  if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_SSL) {
    tls_reason(why, whylen,
               c->handshake_done ? "TLS error" : "TLS handshake failed");
    return;
  }
  char what[64];
  snprintf(what, sizeof(what), "TLS error %d", err);
  tls_reason(why, whylen, what);
}

static grit_err tls_handshake(grit_tls_conn *c, char *why, size_t whylen) {
  int r = SSL_do_handshake(c->ssl);
  if (r != 1) {
    int err = SSL_get_error(c->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
      return GRIT_OK;
    tls_fail_reason(c, err, why, whylen);
    return GRIT_ERR_TLS;
  }
  const unsigned char *proto = NULL;
  unsigned int len = 0;
  SSL_get0_alpn_selected(c->ssl, &proto, &len);
  if (len != 2 || memcmp(proto, "h2", 2) != 0) {
    snprintf(why, whylen,
             "TLS server did not select ALPN protocol h2 (it is required "
             "for gRPC)");
    return GRIT_ERR_TLS;
  }
  c->handshake_done = true;
  return GRIT_OK;
}

grit_err grit_tls_conn_start(grit_tls_conn *c, char *why, size_t whylen) {
  ERR_clear_error();
  return tls_handshake(c, why, whylen);
}

grit_err grit_tls_conn_recv(grit_tls_conn *c, const uint8_t *p, size_t n,
                            grit_buf *plain, char *why, size_t whylen) {
  ERR_clear_error();
  while (n > 0) {
    int chunk = n > INT_MAX ? INT_MAX : (int)n;
    int w = BIO_write(c->rbio, p, chunk);
    if (w <= 0) {
      tls_reason(why, whylen, "cannot buffer TLS input");
      return GRIT_ERR_NOMEM;
    }
    p += w;
    n -= (size_t)w;
  }
  if (!c->handshake_done) {
    grit_err rv = tls_handshake(c, why, whylen);
    if (rv != GRIT_OK || !c->handshake_done)
      return rv;
  }
  for (;;) {
    if (grit_buf_reserve(plain, 16384) != GRIT_OK) {
      snprintf(why, whylen, "out of memory decrypting TLS input");
      return GRIT_ERR_NOMEM;
    }
    int r = SSL_read(c->ssl, plain->data + plain->len, 16384);
    if (r > 0) {
      plain->len += (size_t)r;
      continue;
    }
    int err = SSL_get_error(c->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
      return GRIT_OK;
    if (err == SSL_ERROR_ZERO_RETURN) {
      snprintf(why, whylen, "TLS connection closed by peer (close_notify)");
      return GRIT_ERR_SHUTDOWN;
    }
    tls_fail_reason(c, err, why, whylen);
    return GRIT_ERR_TLS;
  }
}

grit_err grit_tls_conn_send(grit_tls_conn *c, const uint8_t *p, size_t n,
                            char *why, size_t whylen) {
  ERR_clear_error();
  while (n > 0) {
    int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
    int r = SSL_write(c->ssl, p, chunk);
    if (r <= 0) {
      tls_fail_reason(c, SSL_get_error(c->ssl, r), why, whylen);
      return GRIT_ERR_TLS;
    }
    p += r;
    n -= (size_t)r;
  }
  return GRIT_OK;
}

grit_err grit_tls_conn_take(grit_tls_conn *c, grit_buf *out) {
  size_t pend = BIO_ctrl_pending(c->wbio);
  if (pend == 0)
    return GRIT_OK;
  if (grit_buf_reserve(out, pend) != GRIT_OK)
    return GRIT_ERR_NOMEM;
  int r = BIO_read(c->wbio, out->data + out->len,
                   pend > INT_MAX ? INT_MAX : (int)pend);
  if (r > 0)
    out->len += (size_t)r;
  return GRIT_OK;
}
