/* grit call, one call on the streaming call API: a thread sends the
 * request messages as the source yields them (so stdin can feed a bidi
 * stream line by line) and half-closes; this thread prints the response
 * headers, every response message as it arrives, then the status. The
 * same code serves unary, client-, server- and bidi-streaming methods. */
#include "call.h"

#include <stdlib.h>

/* grit_call_recv's end of the response stream. */
static bool recv_at_end(grit_err rv) {
  return rv == GRIT_END_OF_STREAM;
}

typedef struct sender {
  grit_call *call;
  req_source *src;
  bool bad; /* a stdin line did not decode: the call was cancelled */
} sender;

static void *send_all(void *arg) {
  sender *s = arg;
  for (;;) {
    uint8_t *data;
    size_t len;
    req_next r = req_source_next(s->src, &data, &len);
    if (r == REQ_MESSAGE) {
      grit_err rv = grit_call_send(s->call, data, len);
      free(data);
      /* CALL_STATE: the call has ended; its status says why. */
      if (rv == GRIT_ERR_CALL_STATE)
        return NULL;
      if (rv != GRIT_OK) {
        fprintf(stderr, "grit: cannot send: %s\n", grit_strerror(rv));
        grit_call_cancel(s->call);
        return NULL;
      }
      continue;
    }
    if (r == REQ_END)
      grit_call_close_send(s->call);
    if (r == REQ_BAD) {
      s->bad = true;
      grit_call_cancel(s->call);
    }
    return NULL;
  }
}

int call_run_stream(const call_setup *cs) {
  uint64_t t0 = tool_now_us();
  grit_call *call;
  grit_err rv =
      grit_call_start(cs->ch, cs->method, &cs->opts, NULL, NULL, &call);
  if (rv != GRIT_OK) {
    fprintf(stderr, "grit: cannot start call: %s\n", grit_strerror(rv));
    return 1;
  }
  sender snd = {.call = call, .src = cs->src};
  pthread_t th;
  if (pthread_create(&th, NULL, send_all, &snd) != 0) {
    fprintf(stderr, "grit: cannot start the sending thread\n");
    grit_call_destroy(call);
    return 1;
  }
  /* The call id is known once the call has ended (grit_call_info). */
  uint64_t id = 0;
  if (cs->out.show_headers) {
    const grit_metadata *h = grit_call_headers(call);
    if (h)
      out_headers(&cs->out, id, h);
    fflush(stdout);
  }
  uint64_t responses = 0;
  grit_bytes b;
  while ((rv = grit_call_recv(call, &b)) == GRIT_OK) {
    out_response(&cs->out, id, b.data, b.len);
    fflush(stdout); /* a stream's responses show as they come */
    grit_bytes_free(&b);
    responses++;
  }
  if (!recv_at_end(rv)) {
    fprintf(stderr, "grit: cannot receive: %s\n", grit_strerror(rv));
    grit_call_cancel(call);
  }
  grit_status st = {0};
  rv = grit_call_finish(call, &st);
  uint64_t lat = tool_now_us() - t0;
  req_source_cancel(cs->src); /* a call that ended reads no more stdin */
  pthread_join(th, NULL);
  int rc = 1;
  if (rv == GRIT_OK) {
    grit_call_info info = GRIT_CALL_INFO_INIT;
    grit_call_get_info(call, &info);
    att_rec att[MAX_CALL_ATTEMPTS];
    size_t n = att_take(cs->store, info.call_id, att, MAX_CALL_ATTEMPTS);
    call_result r = {.st = &st,
                     .info = &info,
                     .peer = att_call_peer(&info, att, n),
                     .latency_us = lat,
                     .responses = responses,
                     .att = att,
                     .n_att = n};
    out_result(&cs->out, &r);
    rc = tool_exit_for_code(st.code);
  } else {
    fprintf(stderr, "grit: cannot finish the call: %s\n", grit_strerror(rv));
  }
  grit_status_free(&st);
  grit_call_destroy(call);
  return snd.bad ? 2 : rc;
}
