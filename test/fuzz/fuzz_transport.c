/* libFuzzer target: a fuzzed HTTP/2 *server* byte stream fed into a real
 * client grit_transport with calls in flight. The server side is a bare
 * socket on the same uv loop: it sends a valid SETTINGS preface, waits for
 * the client to be ready and to start its streams, then writes the fuzzer's
 * bytes and closes. Whatever the bytes, every stream must end exactly once,
 * on_closed must follow, the loop must go quiet within a bound and nothing
 * may leak (ASan). */
#include "transport/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_MAX_STREAMS 3

typedef struct fz_state {
  /* Client. */
  grit_transport *t;
  int ready, closed;
  grit_stream *s[FZ_MAX_STREAMS];
  int done[FZ_MAX_STREAMS];
  int msgs;
  /* Server end of the connection. */
  uv_tcp_t *conn;
  bool accepted;
  int writes_pending;
} fz_state;

static uv_loop_t fz_loop;
static uv_tcp_t fz_listener;
static uint16_t fz_port;
static fz_state fz;

static uint64_t fz_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- the server end ---- */

static void fz_srv_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
  static char rbuf[65536];
  (void)h;
  (void)sz;
  *buf = uv_buf_init(rbuf, sizeof(rbuf));
}

static void fz_srv_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)buf;
  if (n < 0)
    uv_read_stop(s); /* the client closed: keep the handle until we close */
}

static void fz_srv_on_write(uv_write_t *req, int status) {
  (void)status;
  fz.writes_pending--;
  free(req);
}

static void fz_srv_write(const uint8_t *p, size_t n) {
  if (!fz.conn || n == 0)
    return;
  uv_write_t *req = malloc(sizeof(*req) + n);
  if (!req)
    return;
  memcpy(req + 1, p, n);
  uv_buf_t b = uv_buf_init((char *)(req + 1), (unsigned)n);
  if (uv_write(req, (uv_stream_t *)fz.conn, &b, 1, fz_srv_on_write) < 0) {
    free(req);
    return;
  }
  fz.writes_pending++;
}

static void fz_srv_on_close(uv_handle_t *h) {
  free(h);
}

static void fz_srv_close(void) {
  if (fz.conn) {
    uv_close((uv_handle_t *)fz.conn, fz_srv_on_close);
    fz.conn = NULL;
  }
}

static void fz_on_connection(uv_stream_t *l, int status) {
  if (status < 0)
    return;
  uv_tcp_t *c = malloc(sizeof(*c));
  if (!c)
    return;
  uv_tcp_init(&fz_loop, c);
  if (uv_accept(l, (uv_stream_t *)c) < 0 || fz.conn) {
    uv_close((uv_handle_t *)c, fz_srv_on_close);
    return;
  }
  fz.conn = c;
  fz.accepted = true;
  uv_read_start((uv_stream_t *)c, fz_srv_alloc, fz_srv_read);
  /* An empty SETTINGS frame: the server preface. */
  static const uint8_t settings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
  fz_srv_write(settings, sizeof(settings));
}

static void fz_init(void) {
  uv_loop_init(&fz_loop);
  uv_tcp_init(&fz_loop, &fz_listener);
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", 0, &sa);
  if (uv_tcp_bind(&fz_listener, (const struct sockaddr *)&sa, 0) < 0 ||
      uv_listen((uv_stream_t *)&fz_listener, 16, fz_on_connection) < 0) {
    fprintf(stderr, "fuzz_transport: cannot listen\n");
    abort();
  }
  struct sockaddr_in got;
  int len = sizeof(got);
  uv_tcp_getsockname(&fz_listener, (struct sockaddr *)&got, &len);
  fz_port = ntohs(got.sin_port);
}

/* ---- the client ---- */

static void fz_on_ready(grit_transport *t, void *ud) {
  (void)t;
  (void)ud;
  fz.ready++;
}

static void fz_on_closed(grit_transport *t, const grit_transport_close_info *ci,
                         void *ud) {
  (void)t;
  (void)ud;
  GRIT_ASSERT(ci->code != GRIT_STATUS_OK && ci->reason != NULL);
  fz.closed++;
}

static const grit_transport_cbs fz_tcbs = {.on_ready = fz_on_ready,
                                           .on_closed = fz_on_closed};

static void fz_on_headers(grit_stream *s, const grit_metadata *md, void *ud) {
  (void)s;
  (void)ud;
  for (size_t i = 0; i < grit_metadata_count(md); i++) {
    const char *k;
    const uint8_t *v;
    size_t n;
    GRIT_ASSERT(grit_metadata_get(md, i, &k, &v, &n) == GRIT_OK);
    GRIT_ASSERT(k && v && v[n] == '\0');
  }
}

static void fz_on_message(grit_stream *s, grit_slice *msg, void *ud) {
  (void)s;
  (void)ud;
  fz.msgs++;
  grit_slice_unref(msg);
}

static void fz_on_done(grit_stream *s, const grit_stream_result *r, void *ud) {
  int i = (int)(intptr_t)ud;
  (void)s;
  GRIT_ASSERT(r->message != NULL && r->trailers != NULL);
  GRIT_ASSERT((int)r->code >= 0 && (int)r->code < GRIT_STATUS_COUNT);
  fz.done[i]++;
  GRIT_ASSERT(fz.done[i] == 1);
  fz.s[i] = NULL;
}

static const grit_stream_cbs fz_scbs = {.on_headers = fz_on_headers,
                                        .on_message = fz_on_message,
                                        .on_done = fz_on_done};

static int fz_streams_open(int n) {
  int open = 0;
  for (int i = 0; i < n; i++)
    open += fz.done[i] == 0;
  return open;
}

/* Run the loop until |pred| holds or |ms| pass. */
static bool fz_run_until(bool (*pred)(int), int arg, uint64_t ms) {
  uint64_t end = fz_now_ms() + ms;
  while (!pred(arg)) {
    if (fz_now_ms() > end)
      return false;
    uv_run(&fz_loop, UV_RUN_NOWAIT);
  }
  return true;
}

static bool fz_pred_started(int n) {
  (void)n;
  return (fz.accepted && fz.ready) || fz.closed;
}

static bool fz_pred_ended(int n) {
  return fz.closed && fz_streams_open(n) == 0;
}

static bool fz_pred_written(int n) {
  (void)n;
  return fz.writes_pending == 0;
}

static void fz_count_handle(uv_handle_t *h, void *arg) {
  if (h != (uv_handle_t *)&fz_listener)
    (*(int *)arg)++;
}

static bool fz_pred_quiet(int n) {
  (void)n;
  int count = 0;
  uv_walk(&fz_loop, fz_count_handle, &count);
  return count == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool inited;
  if (!inited) {
    fz_init();
    inited = true;
  }
  if (size < 1)
    return 0;
  /* Byte 0: bits 0-1 streams (0 -> 1), bit 2 a small receive limit, bit 3
   * a small header list limit, bit 4 leave the last stream open for
   * sending, bit 5 write the bytes in two halves with loop turns between.
   * The rest is what the server sends after its SETTINGS. */
  uint8_t flags = data[0];
  int nstreams = flags & 3 ? flags & 3 : 1;
  const uint8_t *p = data + 1;
  size_t n = size - 1;

  memset(&fz, 0, sizeof(fz));
  grit_addr a;
  GRIT_ASSERT(grit_addr_from_ip(&a, "127.0.0.1", fz_port) == GRIT_OK);
  grit_transport_opts o = {
      .max_recv_message_bytes = flags & 4 ? 16 : -1,
      .max_header_list_bytes = flags & 8 ? 256 : 0,
      .user_agent = "grit-fuzz",
  };
  if (grit_transport_create(&fz_loop, &a, &o, &fz_tcbs, NULL, &fz.t) != GRIT_OK)
    return 0;
  GRIT_ASSERT(fz_run_until(fz_pred_started, 0, 5000));

  if (fz.ready && !fz.closed) {
    grit_stream_head h = {.path = "/pkg.Svc/Fuzz",
                          .authority = "fuzz:1",
                          .timeout_ns = 1000000000,
                          .max_recv_message_bytes = 0};
    for (int i = 0; i < nstreams; i++) {
      if (grit_transport_start_stream(fz.t, &h, &fz_scbs, (void *)(intptr_t)i,
                                      &fz.s[i]) != GRIT_OK) {
        fz.done[i] = 1; /* never started */
        continue;
      }
      grit_slice *m = grit_frame_message("ping", 4);
      if (m) {
        grit_stream_send(fz.s[i], m);
        grit_slice_unref(m);
      }
      if (!((flags & 16) && i == nstreams - 1))
        grit_stream_close_send(fz.s[i]);
    }
    /* Let the request frames go out before the answer comes. */
    for (int i = 0; i < 4; i++)
      uv_run(&fz_loop, UV_RUN_NOWAIT);
  } else {
    for (int i = 0; i < nstreams; i++)
      fz.done[i] = 1;
  }

  if (flags & 32) {
    fz_srv_write(p, n / 2);
    for (int i = 0; i < 4; i++)
      uv_run(&fz_loop, UV_RUN_NOWAIT);
    fz_srv_write(p + n / 2, n - n / 2);
  } else {
    fz_srv_write(p, n);
  }
  fz_run_until(fz_pred_written, 0, 2000);
  for (int i = 0; i < 8; i++)
    uv_run(&fz_loop, UV_RUN_NOWAIT);
  /* The server goes away: whatever state the bytes left the client in,
   * every stream must end and the transport must close. */
  fz_srv_close();
  if (!fz_run_until(fz_pred_ended, nstreams, 5000)) {
    fprintf(stderr, "fuzz_transport: hang: closed=%d open=%d\n", fz.closed,
            fz_streams_open(nstreams));
    abort();
  }
  grit_transport_destroy(fz.t);
  fz.t = NULL;
  if (!fz_run_until(fz_pred_quiet, 0, 5000)) {
    fprintf(stderr, "fuzz_transport: handles left open\n");
    abort();
  }
  return 0;
}
