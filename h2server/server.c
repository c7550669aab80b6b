/*
 * Server lifecycle: config copy, listeners, the loop thread, and commands
 * from test threads. A command is one slot under srv->mu, posted with
 * uv_async_send; the caller waits on srv->cond until the loop has run it.
 */
#include "h2s_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>

static void server_free_handle(uv_handle_t *h) {
  free(h);
}

static void server_on_connection(uv_stream_t *listener, int status) {
  h2s_server *srv = listener->data;
  if (status == 0)
    h2s_conn_accept(srv, listener, listener->type == UV_TCP);
}

static int server_listen_tcp(h2s_server *srv) {
  struct sockaddr_storage ss;
  int rv = strchr(srv->host, ':')
               ? uv_ip6_addr(srv->host, srv->port, (struct sockaddr_in6 *)&ss)
               : uv_ip4_addr(srv->host, srv->port, (struct sockaddr_in *)&ss);
  if (rv != 0)
    return rv;
  uv_tcp_t *tcp = h2s_xmalloc(sizeof(*tcp));
  uv_tcp_init(&srv->loop, tcp);
  tcp->data = srv;
  rv = uv_tcp_bind(tcp, (const struct sockaddr *)&ss, 0);
  if (rv == 0)
    rv = uv_listen((uv_stream_t *)tcp, 128, server_on_connection);
  if (rv != 0) {
    uv_close((uv_handle_t *)tcp, server_free_handle);
    return rv;
  }
  int len = sizeof(ss);
  uv_tcp_getsockname(tcp, (struct sockaddr *)&ss, &len);
  srv->port =
      ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
  srv->tcp = tcp;
  return 0;
}

static int server_listen_unix(h2s_server *srv) {
  unlink(srv->unix_path);
  uv_pipe_t *pipe = h2s_xmalloc(sizeof(*pipe));
  uv_pipe_init(&srv->loop, pipe, 0);
  pipe->data = srv;
  int rv = uv_pipe_bind(pipe, srv->unix_path);
  if (rv == 0)
    rv = uv_listen((uv_stream_t *)pipe, 128, server_on_connection);
  if (rv != 0) {
    uv_close((uv_handle_t *)pipe, server_free_handle);
    return rv;
  }
  srv->pipe = pipe;
  return 0;
}

/* Loop thread: close listeners and connections, without any goodbye. */
static void server_kill_on_loop(h2s_server *srv) {
  if (srv->tcp) {
    uv_close((uv_handle_t *)srv->tcp, server_free_handle);
    srv->tcp = NULL;
  }
  if (srv->pipe) {
    uv_close((uv_handle_t *)srv->pipe, server_free_handle);
    srv->pipe = NULL;
    unlink(srv->unix_path);
  }
  while (srv->conns)
    h2s_conn_close(srv->conns);
}

static int server_listen_on_loop(h2s_server *srv) {
  int rv = server_listen_tcp(srv);
  if (rv == 0 && srv->unix_path) {
    rv = server_listen_unix(srv);
    if (rv != 0)
      server_kill_on_loop(srv);
  }
  return rv;
}

static void server_on_async(uv_async_t *async) {
  h2s_server *srv = async->data;
  uv_mutex_lock(&srv->mu);
  int cmd = srv->cmd;
  uint32_t code = srv->cmd_code;
  bool flag = srv->cmd_flag;
  uv_mutex_unlock(&srv->mu);
  int result = 0;
  switch ((h2s_cmd)cmd) {
  case H2S_CMD_NONE:
    return;
  case H2S_CMD_STOP:
    server_kill_on_loop(srv);
    uv_close((uv_handle_t *)&srv->async, NULL);
    break;
  case H2S_CMD_KILL:
    server_kill_on_loop(srv);
    break;
  case H2S_CMD_LISTEN:
    server_kill_on_loop(srv);
    result = server_listen_on_loop(srv);
    break;
  case H2S_CMD_GOAWAY:
    for (h2s_conn *c = srv->conns, *next; c; c = next) {
      next = c->next;
      h2s_conn_goaway(c, code, flag);
    }
    break;
  case H2S_CMD_SETTINGS:
    for (h2s_conn *c = srv->conns, *next; c; c = next) {
      next = c->next;
      if (c->ng && !c->closing) {
        h2s_conn_settings(c, srv->cmd_settings, 8);
        h2s_conn_flush(c);
      }
    }
    break;
  }
  uv_mutex_lock(&srv->mu);
  srv->cmd = H2S_CMD_NONE;
  srv->cmd_result = result;
  srv->cmd_done = true;
  uv_cond_broadcast(&srv->cond);
  uv_mutex_unlock(&srv->mu);
}

static int server_command(h2s_server *srv, h2s_cmd cmd, uint32_t code,
                          bool flag, const h2s_setting *list) {
  uv_mutex_lock(&srv->cmd_mu);
  uv_mutex_lock(&srv->mu);
  size_t n = 0;
  for (; list && n < 8 && list[n].id; n++)
    srv->cmd_settings[n] = list[n];
  if (n < 8)
    srv->cmd_settings[n] = (h2s_setting){0};
  srv->cmd = cmd;
  srv->cmd_code = code;
  srv->cmd_flag = flag;
  srv->cmd_done = false;
  uv_mutex_unlock(&srv->mu);
  uv_async_send(&srv->async);
  uv_mutex_lock(&srv->mu);
  while (!srv->cmd_done)
    uv_cond_wait(&srv->cond, &srv->mu);
  int rv = srv->cmd_result;
  uv_mutex_unlock(&srv->mu);
  uv_mutex_unlock(&srv->cmd_mu);
  return rv;
}

static void server_run(void *arg) {
  h2s_server *srv = arg;
  uv_run(&srv->loop, UV_RUN_DEFAULT);
}

static int server_alpn_select(SSL *ssl, const unsigned char **out,
                              unsigned char *outlen, const unsigned char *in,
                              unsigned int inlen, void *arg) {
  unsigned char *o;
  if (nghttp2_select_next_protocol(&o, outlen, in, inlen) != 1)
    return SSL_TLSEXT_ERR_NOACK;
  *out = o;
  return SSL_TLSEXT_ERR_OK;
}

static int server_tls_init(h2s_server *srv) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL)
    return UV_ENOMEM;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, srv->cfg.tls_cert_file) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, srv->cfg.tls_key_file,
                                  SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    if (!srv->cfg.quiet)
      ERR_print_errors_fp(stderr);
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return UV_EINVAL;
  }
  if (srv->cfg.tls_client_ca_file) {
    if (SSL_CTX_load_verify_locations(ctx, srv->cfg.tls_client_ca_file, NULL) !=
        1) {
      ERR_clear_error();
      SSL_CTX_free(ctx);
      return UV_EINVAL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       NULL);
  }
  if (!srv->cfg.tls_no_alpn)
    SSL_CTX_set_alpn_select_cb(ctx, server_alpn_select, NULL);
  srv->ssl_ctx = ctx;
  return 0;
}

/* Frees everything a half-built or stopped server holds; the loop is idle. */
static void server_free(h2s_server *srv) {
  uv_run(&srv->loop, UV_RUN_DEFAULT); /* finish pending closes */
  uv_loop_close(&srv->loop);
  h2s_log_free(srv);
  h2s_script_free(srv);
  h2s_action_free(&srv->dflt);
  SSL_CTX_free(srv->ssl_ctx);
  uv_cond_destroy(&srv->cond);
  uv_mutex_destroy(&srv->mu);
  uv_mutex_destroy(&srv->cmd_mu);
  free(srv->host);
  free(srv->unix_path);
  free(srv);
}

int h2s_server_start(const h2s_config *cfg, h2s_server **out) {
  *out = NULL;
  h2s_server *srv = h2s_xcalloc(1, sizeof(*srv));
  srv->cfg = *cfg;
  srv->cfg.script = NULL;
  srv->cfg.script_text = NULL;
  srv->cfg.default_action = NULL;
  srv->host = h2s_xstrdup(cfg->host ? cfg->host : "127.0.0.1");
  srv->unix_path = h2s_xstrdup(cfg->unix_path);
  srv->cfg.host = srv->host;
  srv->cfg.unix_path = srv->unix_path;
  srv->port = cfg->port;
  srv->accept = cfg->accept;
  uv_mutex_init(&srv->mu);
  uv_mutex_init(&srv->cmd_mu);
  uv_cond_init(&srv->cond);
  uv_loop_init(&srv->loop);
  srv->t0_ms = uv_now(&srv->loop);
  h2s_action_copy(&srv->dflt,
                  cfg->default_action ? cfg->default_action : &(h2s_action){0});
  int rv = h2s_server_script_add(srv, cfg->script, cfg->script_len);
  if (rv == 0 && cfg->script_text)
    rv = h2s_server_script_add_text(srv, cfg->script_text);
  if (rv == 0 && (cfg->tls_cert_file || cfg->tls_key_file))
    rv = cfg->tls_cert_file && cfg->tls_key_file ? server_tls_init(srv)
                                                 : UV_EINVAL;
  /* The loop is not running yet, so this thread may use it. */
  if (rv == 0)
    rv = server_listen_on_loop(srv);
  if (rv == 0) {
    uv_async_init(&srv->loop, &srv->async, server_on_async);
    srv->async.data = srv;
    rv = uv_thread_create(&srv->thread, server_run, srv);
    if (rv != 0) {
      server_kill_on_loop(srv);
      uv_close((uv_handle_t *)&srv->async, NULL);
    }
  }
  if (rv != 0) {
    server_free(srv);
    return rv;
  }
  *out = srv;
  return 0;
}

void h2s_server_stop(h2s_server *srv) {
  if (srv == NULL)
    return;
  server_command(srv, H2S_CMD_STOP, 0, false, NULL);
  uv_thread_join(&srv->thread);
  server_free(srv);
}

uint16_t h2s_server_port(const h2s_server *srv) {
  return srv->port;
}

const char *h2s_server_addr(const h2s_server *srv, char *buf, size_t len) {
  bool v6 = strchr(srv->host, ':') != NULL;
  snprintf(buf, len, "%s%s%s:%u", v6 ? "[" : "", srv->host, v6 ? "]" : "",
           (unsigned)srv->port);
  return buf;
}

void h2s_server_kill(h2s_server *srv) {
  server_command(srv, H2S_CMD_KILL, 0, false, NULL);
}

int h2s_server_restart(h2s_server *srv) {
  return server_command(srv, H2S_CMD_LISTEN, 0, false, NULL);
}

void h2s_server_set_accept(h2s_server *srv, h2s_accept mode) {
  uv_mutex_lock(&srv->mu);
  srv->accept = mode;
  uv_mutex_unlock(&srv->mu);
}

void h2s_server_goaway(h2s_server *srv, uint32_t code, bool close_now) {
  server_command(srv, H2S_CMD_GOAWAY, code, close_now, NULL);
}

void h2s_server_settings(h2s_server *srv, const h2s_setting *list) {
  server_command(srv, H2S_CMD_SETTINGS, 0, false, list);
}
