#!/usr/bin/python3
"""A grpcio server for call credentials and interceptors
(test/behaviour/test_creds_grpcio.c).

Service creds.Svc, raw bytes (no protos), one method per call kind:

  Unary   echoes the request
  Server  server streaming: the request split at "," is sent back, one
          message per part
  Client  client streaming: the messages joined by ","
  Bidi    echoes every message as it comes
  Log     unary: the request is a call key; the answer has one line per
          attempt seen for it: "prev=P auth=A OUTCOME" (P the
          grpc-previous-rpc-attempts value or "-", A the authorization
          header or "-", OUTCOME "ok" or the status code number)

Each attempt is logged under its "x-call-key" request metadata. Per call:

  x-fail N      the first N attempts of the key fail with UNAVAILABLE
  x-delay-ms D  the call's original attempt (the one without
                grpc-previous-rpc-attempts) waits D ms, watching for
                cancellation, before answering: hedges go past it. Keyed on
                the header, not on arrival order: when both attempts wait
                for the connection, the server's threads may take the
                hedge first

With --cert and --key it serves TLS, else cleartext. Listens on
127.0.0.1 (ephemeral port) and prints "PORT n"; runs until its stdin
closes or it gets SIGTERM/SIGINT.
"""

import argparse
import sys
import threading
import time
from concurrent import futures

import grpc

import peerlife  # noqa: E402  (beside this script)

LOCK = threading.Lock()
LOG = {}
COUNT = {}


def attempt(context):
    """Log the attempt; wait or fail as the metadata says."""
    pairs = list(context.invocation_metadata())
    md = dict(pairs)
    auth = ",".join(v for k, v in pairs if k == "authorization") or "-"
    key = md.get("x-call-key", "")
    fail = int(md.get("x-fail", "0"))
    delay = int(md.get("x-delay-ms", "0"))
    with LOCK:
        n = COUNT.get(key, 0) + 1
        COUNT[key] = n
        failing = n <= fail
        line = "prev=%s auth=%s" % (md.get("grpc-previous-rpc-attempts", "-"),
                                    auth)
        LOG.setdefault(key, []).append(line)
        idx = len(LOG[key]) - 1
    original = "grpc-previous-rpc-attempts" not in md
    if original and delay:
        end = time.monotonic() + delay / 1000.0
        while time.monotonic() < end and context.is_active():
            time.sleep(0.01)
    outcome = "14" if failing else "ok"
    if not context.is_active():
        outcome = "cancelled"
    with LOCK:
        LOG[key][idx] += " " + outcome
    if failing:
        context.abort(grpc.StatusCode.UNAVAILABLE, "attempt %d failed" % n)


def unary(request, context):
    attempt(context)
    return request


def server_stream(request, context):
    attempt(context)
    for part in request.split(b","):
        yield part


def client_stream(request_iterator, context):
    msgs = list(request_iterator)
    attempt(context)
    return b",".join(msgs)


def bidi(request_iterator, context):
    attempt(context)
    for m in request_iterator:
        yield m


def log(request, context):
    key = request.decode("utf-8", "replace")
    with LOCK:
        lines = list(LOG.get(key, []))
    return "".join(line + "\n" for line in lines).encode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cert")
    ap.add_argument("--key")
    args = ap.parse_args()
    handler = grpc.method_handlers_generic_handler("creds.Svc", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Server": grpc.unary_stream_rpc_method_handler(server_stream),
        "Client": grpc.stream_unary_rpc_method_handler(client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Log": grpc.unary_unary_rpc_method_handler(log),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         handlers=[handler])
    if args.cert:
        with open(args.cert, "rb") as f:
            cert = f.read()
        with open(args.key, "rb") as f:
            key = f.read()
        creds = grpc.ssl_server_credentials([(key, cert)])
        port = server.add_secure_port("127.0.0.1:0", creds)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    if not port:
        print("cannot listen on 127.0.0.1", file=sys.stderr)
        return 1
    server.start()
    peerlife.announce_and_wait(port)
    server.stop(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
