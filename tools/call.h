/* Pieces of `grit call`, shared by tools/call_*.c and cmd_call.c only:
 * the parsed flags, where request messages come from (call_source.c), the
 * attempt records of the observer (call_attempts.c), the one output
 * formatter (call_output.c), and the two ways of running calls: the
 * streaming call API for one call (call_stream.c) and unary calls for
 * --count runs (call_unary.c). Only the public API (grit/grit.h). */
#ifndef GRIT_TOOLS_CALL_H
#define GRIT_TOOLS_CALL_H

#include "call_json.h"
#include "tools.h"

#include <pthread.h>

/* ---- request messages (call_source.c) ---- */

/* The request messages of a call, in order: one per --data argument, and
 * for "--data -" one per line of stdin, read while the call runs. Each
 * argument or line is decoded by the source's codec: today hex (blanks
 * allowed) or @FILE (the file's bytes). Another codec (e.g. JSON) is
 * another req_decode_fn. */
typedef struct req_source req_source;

/* Decode one --data value or stdin line |text| into a malloc'd message.
 * Returns false with a reason (static text) in |*why|. */
typedef bool (*req_decode_fn)(const char *text, uint8_t **out, size_t *len,
                              const char **why);
bool req_decode_hex_or_file(const char *text, uint8_t **out, size_t *len,
                            const char **why);

req_source *req_source_create(req_decode_fn decode);
void req_source_destroy(req_source *s);
/* Add one --data value: "-" is stdin, anything else is decoded now.
 * Returns false (message printed) if it does not decode. */
bool req_source_add(req_source *s, const char *arg);
/* Messages given as arguments, and whether stdin is one of the sources. */
size_t req_source_fixed_count(const req_source *s);
bool req_source_uses_stdin(const req_source *s);
/* The only message of a source without stdin (empty if none given);
 * borrowed. */
void req_source_single(const req_source *s, const uint8_t **data, size_t *len);

typedef enum req_next {
  REQ_MESSAGE,   /* |*data|, |*len| set, malloc'd: free it */
  REQ_END,       /* no more messages */
  REQ_BAD,       /* a stdin line did not decode (message printed) */
  REQ_CANCELLED, /* req_source_cancel was called */
} req_next;
/* The next message, blocking on stdin if needed. One thread at a time. */
req_next req_source_next(req_source *s, uint8_t **data, size_t *len);
/* Read every message now, stdin to its end included, so that
 * req_source_fixed_count is exact (methods that take one request
 * message). False if one did not decode (message printed). */
bool req_source_collect(req_source *s);
/* Make a blocked or later req_source_next return REQ_CANCELLED.
 * Thread: any. */
void req_source_cancel(req_source *s);

/* ---- attempt records (call_attempts.c) ---- */

/* An attempt record, copied out of the observer callback. */
typedef struct att_rec {
  uint64_t call_id;
  uint32_t attempt;
  grit_attempt_kind kind;
  char peer[64];
  uint64_t start_us, end_us;
  grit_status_code code;
  char message[128];
  uint64_t backoff_ms;
  bool pushback;
  grit_attempt_reason reason;
  char skipped[160];              /* backends the pick passed over, and why */
  char picked_by[96];             /* how the LB policy chose (LP-02..04) */
  char req_enc[16], resp_enc[32]; /* encodings sent and received */
  char trace_id[33], span_id[17]; /* OB-02; "" when off */
  uint32_t previous_rpc_attempts;
  bool transparent_retry;
} att_rec;

#define MAX_CALL_ATTEMPTS 64 /* records kept per call for its timeline */
/* Records held at once (of calls still running); later ones are dropped. */
#define ATT_STORE_MAX 65536

/* Records of calls still running: the observer adds (I/O thread), the
 * call's completion takes its own out. */
typedef struct att_store {
  pthread_mutex_t mu;
  att_rec *v;
  size_t n, cap;
} att_store;

void att_store_init(att_store *s);
void att_store_free(att_store *s);
/* The grit_attempt_observer_cb; |ud| is the att_store. */
void att_observe(const grit_attempt_record *rec, void *ud);
/* Move call |id|'s records into |out|, in timeline order. */
size_t att_take(att_store *s, uint64_t id, att_rec *out, size_t max);
/* Why the call made no further attempt. */
grit_attempt_reason att_call_reason(const att_rec *a, size_t n,
                                    grit_status_code code);
/* The peer to show: the committed one, else the last attempt's that
 * reached a server (e.g. a deadline with the request at the server),
 * else "". Borrowed from |info| or |a|. */
const char *att_call_peer(const grit_call_info *info, const att_rec *a,
                          size_t n);

/* ---- output (call_output.c) ---- */

/* What one call printed as it ended. */
typedef struct call_result {
  const grit_status *st;
  const grit_call_info *info;
  const char *peer; /* att_call_peer */
  uint64_t latency_us;
  uint64_t responses; /* response messages received */
  const att_rec *att;
  size_t n_att;
} call_result;

typedef struct call_out {
  bool json;
  bool attempts;     /* --attempts: the timeline */
  bool show_headers; /* --show-headers */
  /* Message types (--protoset, --proto, reflection): responses print as
   * proto3 JSON. NULL: hex. */
  const call_types *types;
  /* Responses may load Any types by reflection (one streaming call; not
   * in --count runs, whose responses print from call callbacks). */
  bool resolve_any;
} call_out;

void out_headers(const call_out *o, uint64_t call_id,
                 const grit_metadata *headers);
void out_response(const call_out *o, uint64_t call_id, const uint8_t *p,
                  size_t len);
/* The status, peer, latency and trailers (and the timeline). */
void out_result(const call_out *o, const call_result *r);
/* Only the timeline, for --count runs that print nothing else per call. */
void out_timeline(const call_out *o, const call_result *r);

/* Counts over a run of calls, for the summary. */
#define MAX_PEERS 32
typedef struct call_tally {
  uint64_t count;
  uint64_t codes[GRIT_STATUS_COUNT];
  char peers[MAX_PEERS][128];
  uint64_t peer_calls[MAX_PEERS];
} call_tally;
void tally_add(call_tally *t, grit_status_code code, const char *peer);
void out_summary(const call_out *o, const call_tally *t, uint64_t *lat_us,
                 uint64_t elapsed_us);
/* --show-config: the service config in force, its source, when it was
 * applied and the last rejection (one JSON line with --json). */
/* --show-xds (issue 27): the xDS client's status for |bootstrap| (NULL:
 * the environment's), as JSON on stdout (one line with --json). */
void out_xds_status(const call_out *o, const char *bootstrap);
void out_service_config(const call_out *o,
                        const grit_service_config_info *info);

/* ---- running calls ---- */

typedef struct call_setup {
  grit_channel *ch;
  const char *method; /* "/pkg.Service/Method" */
  grit_call_opts opts;
  req_source *src;
  att_store *store;
  call_out out;
} call_setup;

/* One call on the streaming API: every request message, every response.
 * Returns the exit status (0 OK, 64 + code for a non-OK status, 2 a bad
 * stdin line). */
int call_run_stream(const call_setup *cs);
/* |count| unary calls, |concurrency| in flight, then the summary; with
 * |rate| > 0, call i starts no earlier than i/|rate| s after the first
 * (--rate, OP-03). Returns the exit status (0 every call OK, else
 * tool_exit_for_code of the most frequent non-OK code). */
int call_run_unary(const call_setup *cs, uint64_t count, uint64_t concurrency,
                   uint64_t rate);

/* --metrics: the channel's Prometheus text on stdout (call_attempts.c). */
void call_print_metrics(grit_channel *ch);

#endif
