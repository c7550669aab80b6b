#!/usr/bin/python3
"""A grpcio server for retry tests (test/behaviour/test_retry_grpcio.c).

Service retry.Svc, raw bytes (no protos):

  Call    unary: echoes the request once the call's attempts may succeed
  Stream  client streaming: answers with the messages joined by ","
  Log     unary: the request is a call key; the answer has one line per
          attempt seen for it: "prev=P idem=K OUTCOME" (P is the
          grpc-previous-rpc-attempts value or "-", K the idempotency-key
          or "-", OUTCOME "ok" or the status code number)

Each attempt is counted under its call key: the "x-call-key" request
metadata, else the "idempotency-key" header. The first N attempts of a key
fail with a status code and, optionally, a grpc-retry-pushback-ms trailer.
Request metadata sets them per call, command-line flags set the defaults:

  x-fail / --fail N          fail the first N attempts (default 0)
  x-code / --code NAME       status to fail with (default UNAVAILABLE)
  x-pushback / --pushback V  grpc-retry-pushback-ms value, verbatim
  x-message                  status message (default "attempt K failed")

Listens on 127.0.0.1 (ephemeral port unless --port) and prints "PORT n"
once serving; runs until its stdin closes or it gets SIGTERM/SIGINT.
"""

import argparse
import sys
import threading
from concurrent import futures

import grpc

import peerlife  # noqa: E402  (beside this script)

LOCK = threading.Lock()
LOG = {}  # call key -> list of lines
COUNT = {}  # call key -> attempts seen


def metadata(context):
    return dict(context.invocation_metadata())


def status_code(name):
    name = name.strip().upper()
    for c in grpc.StatusCode:
        if c.name == name or str(c.value[0]) == name:
            return c
    raise ValueError("unknown status code %r" % name)


class Policy:
    def __init__(self, args):
        self.args = args

    def attempt(self, context):
        """Count the attempt; abort it if it is to fail."""
        md = metadata(context)
        key = md.get("x-call-key") or md.get("idempotency-key") or ""
        fail = int(md.get("x-fail", self.args.fail))
        code = status_code(md.get("x-code", self.args.code))
        pushback = md.get("x-pushback", self.args.pushback)
        with LOCK:
            n = COUNT.get(key, 0) + 1
            COUNT[key] = n
            failing = n <= fail
            LOG.setdefault(key, []).append("prev=%s idem=%s %s" % (
                md.get("grpc-previous-rpc-attempts", "-"),
                md.get("idempotency-key", "-"),
                str(code.value[0]) if failing else "ok"))
        if failing:
            if pushback is not None:
                context.set_trailing_metadata(
                    (("grpc-retry-pushback-ms", pushback),))
            context.abort(code, md.get("x-message", "attempt %d failed" % n))

    def call(self, request, context):
        self.attempt(context)
        return request

    def stream(self, request_iterator, context):
        msgs = list(request_iterator)  # read everything, then decide
        self.attempt(context)
        return b",".join(msgs)

    def log(self, request, context):
        key = request.decode("utf-8", "replace")
        with LOCK:
            lines = list(LOG.get(key, []))
        return "".join(line + "\n" for line in lines).encode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fail", type=int, default=0)
    ap.add_argument("--code", default="UNAVAILABLE")
    ap.add_argument("--pushback", default=None)
    args = ap.parse_args()
    status_code(args.code)  # fail early on a bad name
    p = Policy(args)
    handler = grpc.method_handlers_generic_handler("retry.Svc", {
        "Call": grpc.unary_unary_rpc_method_handler(p.call),
        "Stream": grpc.stream_unary_rpc_method_handler(p.stream),
        "Log": grpc.unary_unary_rpc_method_handler(p.log),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:%d" % args.port)
    if not port:
        print("cannot listen on 127.0.0.1:%d" % args.port, file=sys.stderr)
        return 1
    server.start()
    peerlife.announce_and_wait(port)
    server.stop(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
