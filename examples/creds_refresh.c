/*
 * Call credentials from a plugin whose token a background thread refreshes
 * (SPEC CR-01; docs/credentials.md), as an OAuth2 client does: the plugin
 * never blocks the I/O thread; a request that arrives while no fresh token
 * is at hand waits in a queue, and the refresher answers it from its own
 * thread as soon as the next token is minted.
 *
 *   creds_refresh TARGET [CA_FILE]
 *
 * With CA_FILE the channel is TLS with those roots (hostname check off, for
 * a loopback test server); without it the channel is cleartext and the
 * example opts in to sending credentials there
 * (GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS), which a real program must not.
 * Makes 5 EmptyCalls of the interop test service, one every 300 ms, and
 * prints which token each went with. Only the public API.
 */
#include <grit/grit.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_WAITING 64
#define TOKEN_LIFETIME_MS 500

typedef struct token_source {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char token[64];
  unsigned generation;
  long long expires_ms;
  grit_credentials_request *waiting[MAX_WAITING];
  int nwaiting;
  int stop;
} token_source;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Answer |req| with the current token. Called with mu held. */
static void answer(token_source *s, grit_credentials_request *req) {
  char value[80];
  snprintf(value, sizeof(value), "Bearer %s", s->token);
  grit_err rv =
      grit_credentials_request_add(req, "authorization", value, strlen(value));
  grit_credentials_request_done(
      req, rv == GRIT_OK ? GRIT_STATUS_OK : GRIT_STATUS_INTERNAL,
      rv == GRIT_OK ? NULL : grit_strerror(rv));
}

/* The plugin: on the I/O thread, so it only looks and queues. */
static void get_metadata(void *user_data, const grit_credentials_context *ctx,
                         grit_credentials_request *req) {
  token_source *s = user_data;
  (void)ctx; /* a JWT minter would use ctx->service_url as the audience */
  pthread_mutex_lock(&s->mu);
  if (s->generation > 0 && now_ms() < s->expires_ms) {
    answer(s, req); /* fresh: answer at once */
  } else if (s->nwaiting < MAX_WAITING) {
    s->waiting[s->nwaiting++] = req; /* the refresher answers it */
    pthread_cond_signal(&s->cv);
  } else {
    grit_credentials_request_done(req, GRIT_STATUS_UNAVAILABLE,
                                  "too many calls waiting for a token");
  }
  pthread_mutex_unlock(&s->mu);
}

/* The refresher: mints a new token when the old one is about to expire, or
 * at once when a request waits. A real one would call its identity
 * provider here (slowly: that is why it has its own thread). */
static void *refresher(void *arg) {
  token_source *s = arg;
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    if (s->nwaiting == 0 && now_ms() < s->expires_ms - 100) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 50 * 1000000;
      if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
      }
      pthread_cond_timedwait(&s->cv, &s->mu, &ts);
      continue;
    }
    pthread_mutex_unlock(&s->mu);
    usleep(20000); /* the identity provider's round trip */
    pthread_mutex_lock(&s->mu);
    s->generation++;
    snprintf(s->token, sizeof(s->token), "token-%u", s->generation);
    s->expires_ms = now_ms() + TOKEN_LIFETIME_MS;
    for (int i = 0; i < s->nwaiting; i++)
      answer(s, s->waiting[i]);
    s->nwaiting = 0;
  }
  for (int i = 0; i < s->nwaiting; i++) /* never leave a request unanswered */
    grit_credentials_request_done(s->waiting[i], GRIT_STATUS_UNAVAILABLE,
                                  "shutting down");
  s->nwaiting = 0;
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: creds_refresh TARGET [CA_FILE]\n");
    return 2;
  }
  token_source src = {.mu = PTHREAD_MUTEX_INITIALIZER,
                      .cv = PTHREAD_COND_INITIALIZER};
  pthread_t thr;
  pthread_create(&thr, NULL, refresher, &src);

  grit_credentials_plugin plugin = {.version = GRIT_CREDENTIALS_PLUGIN_VERSION,
                                    .type = "oauth2-example",
                                    .get_metadata = get_metadata};
  grit_call_credentials *creds = NULL;
  grit_channel_args *args = NULL;
  grit_channel *ch = NULL;
  grit_error_detail detail = {0};
  int failed = 1;
  if (grit_call_credentials_create_plugin(&plugin, &src, &creds) != GRIT_OK ||
      grit_channel_args_create(&args) != GRIT_OK ||
      grit_channel_args_set_call_credentials(args, creds) != GRIT_OK)
    goto done;
  if (argc == 3) {
    grit_channel_args_set_string(args, GRIT_ARG_TLS_ROOT_CERTS_FILE, argv[2]);
    grit_channel_args_set_int(args, GRIT_ARG_TLS_VERIFY_HOSTNAME, 0);
  } else {
    fprintf(stderr, "creds_refresh: cleartext: sending credentials anyway "
                    "(GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS)\n");
    grit_channel_args_set_int(args, GRIT_ARG_ALLOW_INSECURE_CALL_CREDENTIALS,
                              1);
  }
  grit_err rv = grit_channel_create(NULL, argv[1], args, &detail, &ch);
  if (rv != GRIT_OK) {
    fprintf(stderr, "%s: %s %s\n", argv[1], grit_strerror(rv), detail.reason);
    goto done;
  }
  failed = 0;
  for (int i = 0; i < 5; i++) {
    grit_call_opts opts = {.version = GRIT_CALL_OPTS_VERSION,
                           .timeout_ms = 5000};
    grit_status st = {0};
    rv = grit_unary_call(ch, "/grpc.testing.TestService/EmptyCall", "", 0,
                         &opts, NULL, &st, NULL);
    pthread_mutex_lock(&src.mu);
    unsigned gen = src.generation;
    pthread_mutex_unlock(&src.mu);
    printf("call %d: %s (token generation %u)\n", i + 1,
           grit_status_code_name(st.code), gen);
    if (rv != GRIT_OK || st.code != GRIT_STATUS_OK) {
      fprintf(stderr, "  %s\n", st.message);
      failed = 1;
    }
    grit_status_free(&st);
    usleep(300000);
  }
done:
  grit_channel_destroy(ch);
  grit_channel_args_destroy(args);
  grit_call_credentials_unref(creds);
  pthread_mutex_lock(&src.mu);
  src.stop = 1;
  pthread_cond_signal(&src.cv);
  pthread_mutex_unlock(&src.mu);
  pthread_join(thr, NULL);
  grit_default_runtime_shutdown();
  return failed;
}
