/*
 * gRPC's HTTP/2 server test cases against grit-interop-client (issue 29
 * part 7). For each case the test server (test/h2server) plays what grpc's
 * test/http2_test server does, the interop client runs the case as gRPC's
 * harness runs it (--use_test_ca=true with --use_tls=false, as
 * run_interop_tests passes to every cleartext job), and the test asserts
 * the client's exit status and, from the server's log, what the client
 * must have done on the wire.
 * With GRIT_HTTP2_VALGRIND=1 the client runs under valgrind memcheck
 * (errors and definite leaks make it exit 99).
 *   test_http2_cases CLIENT [CASE...]
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "h2server.h"

extern char **environ;

#define UNARY "path=/grpc.testing.TestService/UnaryCall repeat=* "
/* SimpleResponse{payload{body: 314159 zero bytes}} is 314167 bytes. */
#define RESP_LEN 314167
#define RESP_FRAMES (((RESP_LEN + 5) + 4) / 5) /* in 5-byte DATA frames */
#define CLIENT_TIMEOUT_MS 120000

typedef struct h2case {
  const char *name;
  const char *script;              /* steps for UnaryCall */
  uint32_t max_concurrent_streams; /* 0: none announced */
  /* Checks on the server's log once the client has exited 0. */
  bool (*check)(h2s_server *srv, const char *name);
} h2case;

static int failures;

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "FAIL %s: ", name);                                      \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      return false;                                                            \
    }                                                                          \
  } while (0)

/* Every request got the server's answer and no grpc-status (a reset). */
static bool check_reset(h2s_server *srv, const char *name) {
  EXPECT(h2s_server_wait_closed(srv, 1, 10000), "the stream never closed");
  const h2s_request *r = h2s_server_request(srv, 0);
  EXPECT(r && r->acted, "no request answered");
  EXPECT(r->status_sent == -1, "a grpc-status (%d) was sent", r->status_sent);
  EXPECT(h2s_server_request_count(srv) == 1,
         "%zu requests: the client retried a call reset by the server",
         h2s_server_request_count(srv));
  return true;
}

static bool check_goaway(h2s_server *srv, const char *name) {
  EXPECT(h2s_server_request_count(srv) == 2, "%zu requests, want 2",
         h2s_server_request_count(srv));
  const h2s_request *a = h2s_server_request(srv, 0);
  const h2s_request *b = h2s_server_request(srv, 1);
  EXPECT(a->goaway_sent && a->status_sent == 0, "first call: no GOAWAY/OK");
  EXPECT(b->conn_index != a->conn_index,
         "the call after GOAWAY went on the same connection (%u)",
         b->conn_index);
  return true;
}

/* The client acknowledged every PING the server sent (4 per call). */
static bool ping_acked(h2s_server *srv, void *arg) {
  h2s_stats st;
  (void)arg;
  h2s_server_get_stats(srv, &st);
  return st.ping_acks_received >= 4;
}

static bool check_ping(h2s_server *srv, const char *name) {
  h2s_stats st;
  h2s_server_wait(srv, ping_acked, NULL, 5000);
  h2s_server_get_stats(srv, &st);
  EXPECT(st.ping_acks_received == 4, "%llu PING ACKs for 4 PINGs",
         (unsigned long long)st.ping_acks_received);
  return true;
}

static bool check_max_streams(h2s_server *srv, const char *name) {
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  EXPECT(h2s_server_request_count(srv) == 11, "%zu requests, want 11",
         h2s_server_request_count(srv));
  EXPECT(st.max_open_streams == 1,
         "%llu streams open at once under MAX_CONCURRENT_STREAMS 1",
         (unsigned long long)st.max_open_streams);
  EXPECT(st.refused_sent == 0, "%llu streams refused",
         (unsigned long long)st.refused_sent);
  EXPECT(st.connections == 1, "%llu connections, want 1",
         (unsigned long long)st.connections);
  return true;
}

static bool check_padding(h2s_server *srv, const char *name) {
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  EXPECT(st.data_frames_sent >= RESP_FRAMES, "%llu DATA frames, want >= %d",
         (unsigned long long)st.data_frames_sent, RESP_FRAMES);
  /* Padding is cut only where the client's window leaves no room. */
  EXPECT(st.padded_frames_sent * 10 >= st.data_frames_sent * 9,
         "%llu of %llu DATA frames padded",
         (unsigned long long)st.padded_frames_sent,
         (unsigned long long)st.data_frames_sent);
  return true;
}

static bool check_no_padding(h2s_server *srv, const char *name) {
  h2s_stats st;
  h2s_server_get_stats(srv, &st);
  EXPECT(st.data_frames_sent >= RESP_FRAMES, "%llu DATA frames, want >= %d",
         (unsigned long long)st.data_frames_sent, RESP_FRAMES);
  EXPECT(st.padded_frames_sent == 0, "%llu padded DATA frames",
         (unsigned long long)st.padded_frames_sent);
  return true;
}

/* What grpc's test/http2_test server does in each case. */
static const h2case cases[] = {
    /* HEADERS on the request's HEADERS, then RST_STREAM(NO_ERROR). */
    {"rst_after_header", UNARY "at_headers nomsg end_rst=NO_ERROR", 0,
     check_reset},
    /* HEADERS, the whole response, RST_STREAM(NO_ERROR) for trailers. */
    {"rst_after_data", UNARY "end_rst=NO_ERROR", 0, check_reset},
    /* HEADERS, the first half of the framed response, RST_STREAM. */
    {"rst_during_data", UNARY "size=157081 prefix_len=314167 end_rst=NO_ERROR",
     0, check_reset},
    /* GOAWAY naming the call's stream as the last, then the answer: the
     * next call needs a new connection. */
    {"goaway", UNARY "goaway=0", 0, check_goaway},
    /* PINGs around the answer. */
    {"ping", UNARY "ping_flood=4", 0, check_ping},
    /* One stream at a time, announced in the first SETTINGS. */
    {"max_streams", NULL, 1, check_max_streams},
    /* The response in DATA frames of 5 bytes, each padded with 255. */
    {"data_frame_padding", UNARY "data_chunk=5 data_pad=255", 0, check_padding},
    {"no_df_padding_sanity_test", UNARY "data_chunk=5", 0, check_no_padding},
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Run the client for |name| against |port|; its exit status, or -1 when
 * it did not exit normally within CLIENT_TIMEOUT_MS (then it is killed). */
static int run_client(const char *client, const char *name, uint16_t port) {
  char port_arg[32], case_arg[96];
  char host_arg[] = "--server_host=127.0.0.1";
  char tls_arg[] = "--use_tls=false";
  char ca_arg[] = "--use_test_ca=true";
  snprintf(port_arg, sizeof(port_arg), "--server_port=%u", (unsigned)port);
  snprintf(case_arg, sizeof(case_arg), "--test_case=%s", name);
  char vg[] = "valgrind", vg_q[] = "-q", vg_rc[] = "--error-exitcode=99",
       vg_leak[] = "--leak-check=full",
       vg_kinds[] = "--errors-for-leak-kinds=definite,indirect";
  char *argv[] = {vg,       vg_q,           vg_rc,    vg_leak,
                  vg_kinds, (char *)client, host_arg, port_arg,
                  case_arg, tls_arg,        ca_arg,   NULL};
  const char *env = getenv("GRIT_HTTP2_VALGRIND");
  char **args = env && strcmp(env, "1") == 0 ? argv : argv + 5;
  pid_t pid;
  if (posix_spawnp(&pid, args[0], NULL, NULL, args, environ) != 0) {
    fprintf(stderr, "FAIL %s: cannot start %s: %s\n", name, client,
            strerror(errno));
    return -1;
  }
  uint64_t deadline = now_ms() + CLIENT_TIMEOUT_MS;
  int status = 0;
  for (;;) {
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid)
      break;
    if (got < 0 && errno != EINTR)
      return -1;
    if (now_ms() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      fprintf(stderr, "FAIL %s: the client did not finish in %d ms\n", name,
              CLIENT_TIMEOUT_MS);
      return -1;
    }
    struct timespec tick = {0, 20 * 1000 * 1000};
    nanosleep(&tick, NULL);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void run_case(const char *client, const h2case *c) {
  const char *name = c->name;
  h2s_server *srv = NULL;
  h2s_config cfg = {.script_text = c->script,
                    .max_concurrent_streams = c->max_concurrent_streams};
  int rv = h2s_server_start(&cfg, &srv);
  if (rv != 0) {
    fprintf(stderr, "FAIL %s: test server: %s\n", name, strerror(-rv));
    failures++;
    return;
  }
  int code = run_client(client, name, h2s_server_port(srv));
  bool ok = code == 0;
  if (!ok)
    fprintf(stderr, "FAIL %s: the client exited %d, want 0\n", name, code);
  else
    ok = c->check(srv, name);
  printf("%s %s\n", ok ? "PASS" : "FAIL", name);
  fflush(stdout);
  failures += !ok;
  h2s_server_stop(srv);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_http2_cases CLIENT [CASE...]\n");
    return 2;
  }
  size_t n = sizeof(cases) / sizeof(cases[0]);
  for (size_t i = 0; i < n; i++) {
    bool wanted = argc == 2;
    for (int a = 2; a < argc; a++)
      wanted |= strcmp(argv[a], cases[i].name) == 0;
    if (wanted)
      run_case(argv[1], &cases[i]);
  }
  printf("%s: %d failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
