/*
 * A gRPC server on gRPC's C core API (libgrpc-dev) that makes a
 * non-idempotent method safe to retry and hedge with grit-dedup.
 *
 *   dedup_server [--port N] [--pg CONNINFO] [--name REPLICA]
 *                [--slow-ms N] [--crash-after-commit K]
 *
 * It serves /grit.demo.Groups/CreateGroup: the request message is a group
 * name, the response "created NAME". Every call must carry an
 * idempotency-key header (grit sends one with GRIT_ARG_IDEMPOTENCY_KEYS).
 * Without --pg the store and the domain table live in this process (one
 * replica); with --pg both live in PostgreSQL, so several replicas can
 * share them, and the leader records its success in the same transaction
 * as its domain row (grit_dedup_pg_succeed_tx). --crash-after-commit K
 * makes the K-th execution commit its row and then die (SIGKILL) before it
 * records success: the next replica to see the key heals it from the
 * groups table. Prints "listening PORT" once it accepts calls.
 *
 * With --pg the domain writes use a connection borrowed from the store's
 * pool (grit_dedup_pg_conn_acquire), not one of its own: a connection that
 * broke is reset before it is lent, so after a PostgreSQL restart the
 * calls that failed meanwhile (UNAVAILABLE or ABORTED, which a client's
 * retry policy retries) give way to calls that succeed again.
 *
 * One call at a time, on one thread: grpc_server_request_call, then
 * grpc_call_start_batch for each step, each waited for on the queue.
 */
#include <grit/dedup.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CREATE "/grit.demo.Groups/CreateGroup"

static grpc_completion_queue *cq;
static grit_dedup_store *store;
static bool use_pg; /* --pg: domain rows in PostgreSQL, on the pool's
                       connections */
static const char *replica = "replica";
static int slow_ms, crash_after;
static unsigned executions;

/* In-process domain table (without --pg). */
static struct { char key[257], name[128]; } rows[100000];
static size_t n_rows;

static void wait_tag(void *tag) {
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(
        cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_OP_COMPLETE && ev.tag == tag)
      return;
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
      exit(1);
  }
}

static grit_dedup_verdict heal(const char *key, grit_dedup_heal_ctx *ctx,
                               void *ud) {
  (void)ud;
  char resp[160];
  if (use_pg) {
    PGconn *db = NULL;
    if (grit_dedup_pg_conn_acquire(store, &db) != GRIT_DEDUP_OK)
      return GRIT_DEDUP_UNKNOWN; /* cannot read the truth now */
    const char *v[1] = {key};
    PGresult *r = PQexecParams(db, "SELECT name FROM groups WHERE key = $1", 1,
                               NULL, v, NULL, NULL, 0);
    grit_dedup_pg_conn_release(store, db);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      PQclear(r);
      return GRIT_DEDUP_UNKNOWN; /* cannot read the truth now */
    }
    int found = PQntuples(r) == 1;
    if (found)
      snprintf(resp, sizeof(resp), "created %s", PQgetvalue(r, 0, 0));
    PQclear(r);
    if (!found)
      return GRIT_DEDUP_NOT_COMMITTED;
  } else {
    size_t i = 0;
    while (i < n_rows && strcmp(rows[i].key, key) != 0)
      i++;
    if (i == n_rows)
      return GRIT_DEDUP_NOT_COMMITTED;
    snprintf(resp, sizeof(resp), "created %s", rows[i].name);
  }
  grit_dedup_heal_set_response(ctx, resp, strlen(resp));
  return GRIT_DEDUP_COMMITTED;
}

/* The handler body for a leader: the domain write and the completion.
 * Returns the gRPC status; |resp| gets the response. */
static grpc_status_code execute(const char *key, uint64_t token,
                                const char *name, char *resp, size_t cap) {
  snprintf(resp, cap, "created %s", name);
  bool crash = crash_after && ++executions == (unsigned)crash_after;
  if (slow_ms)
    usleep((useconds_t)slow_ms * 1000);
  if (!use_pg) {
    if (n_rows < sizeof(rows) / sizeof(rows[0])) {
      snprintf(rows[n_rows].key, sizeof(rows[0].key), "%s", key);
      snprintf(rows[n_rows].name, sizeof(rows[0].name), "%s", name);
      n_rows++;
    }
    grit_dedup_succeed(store, key, token, resp, strlen(resp));
    return GRPC_STATUS_OK;
  }
  PGconn *db = NULL;
  if (grit_dedup_pg_conn_acquire(store, &db) != GRIT_DEDUP_OK) {
    /* The database is not back yet: nothing was written. The key stays
     * pending for the next claimer to heal at once (it finds no row). */
    grit_dedup_abandon(store, key, token);
    return GRPC_STATUS_UNAVAILABLE;
  }
  const char *v[3] = {key, name, replica};
  PQclear(PQexec(db, "BEGIN"));
  PGresult *r = PQexecParams(
      db, "INSERT INTO groups (key, name, replica) VALUES ($1, $2, $3)", 3,
      NULL, v, NULL, NULL, 0);
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (ok && crash) {
    /* Commit the row alone, then die before recording success. */
    PQclear(PQexec(db, "COMMIT"));
    raise(SIGKILL);
  }
  grit_dedup_err e =
      ok ? grit_dedup_pg_succeed_tx(store, db, key, token, resp, strlen(resp))
         : GRIT_DEDUP_ERR_STORE;
  if (e != GRIT_DEDUP_OK) {
    PQclear(PQexec(db, "ROLLBACK"));
    grit_dedup_pg_conn_release(store, db);
    if (e == GRIT_DEDUP_ERR_STALE)
      return GRPC_STATUS_ABORTED; /* another replica healed it meanwhile */
    /* Nothing committed (rolled back): safe to record the failure? No:
     * the INSERT may have failed for a transient reason; leave the key
     * for healing, which reads the groups table. */
    grit_dedup_abandon(store, key, token);
    return GRPC_STATUS_UNAVAILABLE;
  }
  r = PQexec(db, "COMMIT");
  ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  grit_dedup_pg_conn_release(store, db);
  if (!ok) {
    /* COMMIT's outcome is unknown: DD-02, leave it pending. */
    grit_dedup_abandon(store, key, token);
    return GRPC_STATUS_UNAVAILABLE;
  }
  return GRPC_STATUS_OK;
}

static void serve_one(grpc_server *server) {
  grpc_call *call = NULL;
  grpc_call_details details;
  grpc_metadata_array md;
  grpc_call_details_init(&details);
  grpc_metadata_array_init(&md);
  if (grpc_server_request_call(server, &call, &details, &md, cq, cq,
                               (void *)1) != GRPC_CALL_OK)
    exit(1);
  wait_tag((void *)1);

  /* Initial metadata goes out only with the answer: response headers
   * commit a hedged call to this attempt, so they must not precede it. */
  grpc_byte_buffer *req = NULL;
  grpc_op ops[4];
  memset(ops, 0, sizeof(ops));
  ops[0].op = GRPC_OP_RECV_MESSAGE;
  ops[0].data.recv_message.recv_message = &req;
  grpc_call_start_batch(call, ops, 1, (void *)2, NULL);
  wait_tag((void *)2);

  char name[128] = "", key[257] = "", resp[160] = "";
  bool have_req = req != NULL; /* none: the client cancelled the attempt */
  if (req) {
    grpc_byte_buffer_reader rd;
    grpc_byte_buffer_reader_init(&rd, req);
    grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
    snprintf(name, sizeof(name), "%.*s", (int)GRPC_SLICE_LENGTH(s),
             (const char *)GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    grpc_byte_buffer_reader_destroy(&rd);
    grpc_byte_buffer_destroy(req);
  }
  for (size_t i = 0; i < md.count; i++)
    if (grpc_slice_str_cmp(md.metadata[i].key, "idempotency-key") == 0)
      snprintf(key, sizeof(key), "%.*s",
               (int)GRPC_SLICE_LENGTH(md.metadata[i].value),
               (const char *)GRPC_SLICE_START_PTR(md.metadata[i].value));

  grpc_status_code code = GRPC_STATUS_OK;
  const char *msg = "";
  if (grpc_slice_str_cmp(details.method, CREATE) != 0) {
    code = GRPC_STATUS_UNIMPLEMENTED;
  } else if (!have_req) {
    code = GRPC_STATUS_INVALID_ARGUMENT; /* never claim for no request */
    msg = "no request message";
  } else if (!key[0]) {
    code = GRPC_STATUS_FAILED_PRECONDITION;
    msg = "idempotency-key required";
  } else {
    /* The fingerprint: method and request bytes (DD-03). */
    char fp[64];
    unsigned long long h = 1469598103934665603ull;
    for (const char *p = CREATE "\n"; *p; p++)
      h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (const char *p = name; *p; p++)
      h = (h ^ (unsigned char)*p) * 1099511628211ull;
    int fplen = snprintf(fp, sizeof(fp), "%016llx", h);
    grit_dedup_result r;
    grit_dedup_err e =
        grit_dedup_claim(store, key, fp, (size_t)fplen, 2000, &r);
    if (e != GRIT_DEDUP_OK) {
      code = GRPC_STATUS_UNAVAILABLE; /* nothing ran */
      msg = "dedup store unavailable";
    } else if (r.outcome == GRIT_DEDUP_LEADER) {
      code = execute(key, r.token, name, resp, sizeof(resp));
    } else if (r.outcome == GRIT_DEDUP_REPLAY) {
      code = (grpc_status_code)r.status;
      snprintf(resp, sizeof(resp), "%.*s", (int)r.response_len,
               r.response ? (const char *)r.response : "");
    } else if (r.outcome == GRIT_DEDUP_MISMATCH) {
      code = GRPC_STATUS_FAILED_PRECONDITION;
      msg = "idempotency-key reused for another request";
    } else {
      code = GRPC_STATUS_ABORTED;
      msg = "in progress";
    }
    grit_dedup_result_free(&r);
  }

  grpc_slice body = grpc_slice_from_copied_string(resp);
  grpc_byte_buffer *out = grpc_raw_byte_buffer_create(&body, 1);
  grpc_slice details_slice = grpc_slice_from_static_string(msg);
  int cancelled = 0;
  memset(ops, 0, sizeof(ops));
  size_t n = 0;
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (code == GRPC_STATUS_OK) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = out;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = code;
  ops[n++].data.send_status_from_server.status_details = &details_slice;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n++].data.recv_close_on_server.cancelled = &cancelled;
  grpc_call_start_batch(call, ops, n, (void *)3, NULL);
  wait_tag((void *)3);
  grpc_byte_buffer_destroy(out);
  grpc_slice_unref(body);
  grpc_call_unref(call);
  grpc_call_details_destroy(&details);
  grpc_metadata_array_destroy(&md);
}

int main(int argc, char **argv) {
  int port = 50051;
  const char *pg = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--port") == 0)
      port = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--pg") == 0)
      pg = argv[i + 1];
    else if (strcmp(argv[i], "--name") == 0)
      replica = argv[i + 1];
    else if (strcmp(argv[i], "--slow-ms") == 0)
      slow_ms = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--crash-after-commit") == 0)
      crash_after = atoi(argv[i + 1]);
  }
  /* Two pooled connections: the store's operations and the handler's
   * borrowed one never wait for each other. */
  grit_dedup_opts o = {.version = GRIT_DEDUP_OPTS_VERSION,
                       .heal = heal,
                       .lease_ms = 1000,
                       .pool_size = 2};
  char err[256] = "";
  grit_dedup_err e;
  use_pg = pg != NULL;
  if (pg)
    e = grit_dedup_store_create_pg(pg, &o, &store, err, sizeof(err));
  else
    e = grit_dedup_store_create_mem(&o, &store);
  if (e != GRIT_DEDUP_OK) {
    fprintf(stderr, "dedup_server: %s %s\n", grit_dedup_strerror(e), err);
    return 1;
  }
  if (pg) {
    PGconn *db = NULL;
    if (grit_dedup_pg_conn_acquire(store, &db) != GRIT_DEDUP_OK) {
      fprintf(stderr, "dedup_server: %s\n", grit_dedup_last_error());
      return 1;
    }
    PQclear(PQexec(db, "SET client_min_messages = warning"));
    PGresult *r =
        PQexec(db, "CREATE TABLE IF NOT EXISTS groups (key text PRIMARY "
                   "KEY, name text NOT NULL, replica text)");
    bool made = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!made) { /* another replica may have created it just now */
      r = PQexec(db, "SELECT 1 FROM groups LIMIT 0");
      made = PQresultStatus(r) == PGRES_TUPLES_OK;
      if (!made)
        fprintf(stderr, "dedup_server: %s", PQerrorMessage(db));
      PQclear(r);
    }
    grit_dedup_pg_conn_release(store, db);
    if (!made)
      return 1;
  }
  grpc_init();
  cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server *server = grpc_server_create(NULL, NULL);
  grpc_server_register_completion_queue(server, cq, NULL);
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  int bound = grpc_server_add_http2_port(server, addr, creds);
  grpc_server_credentials_release(creds);
  if (bound == 0) {
    fprintf(stderr, "dedup_server: cannot listen on %s\n", addr);
    return 1;
  }
  grpc_server_start(server);
  printf("listening %d\n", bound);
  fflush(stdout);
  for (;;)
    serve_one(server);
}
