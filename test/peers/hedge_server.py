#!/usr/bin/python3
"""A grpcio server for hedging tests (test/behaviour/test_hedging_grpcio.c).

Every method of every service is handled with raw bytes. The request body
(or, for client streaming, the first message) holds tokens that pick what
each attempt does, by its grpc-previous-rpc-attempts value N:

  dN=MS     sleep MS ms (watching for cancellation) before answering
  fN=CODE   fail with status CODE (a number) instead of answering

Unary calls echo the request; client-streaming calls (methods ending in
"Stream") answer with the number of messages. /hedge.Log/Get returns one
line per finished attempt:

  METHOD prev=N start=MS end=MS OUTCOME msgs=HEX,HEX,...

where OUTCOME is ok, cancelled or a status number. /hedge.Log/Clear empties
the log. Prints "PORT n" once listening on 127.0.0.1.
"""

import sys
import threading
import time
from concurrent import futures

import grpc

T0 = time.monotonic()
LOG = []
LOCK = threading.Lock()
CODES = {c.value[0]: c for c in grpc.StatusCode}


def now_ms():
    return int((time.monotonic() - T0) * 1000)


def plan(body, prev):
    delay, fail = 0, None
    for tok in body.decode("ascii", "replace").split():
        key, _, val = tok.partition("=")
        if key == "d%d" % prev:
            delay = int(val)
        elif key == "f%d" % prev:
            fail = int(val)
    return delay, fail


def previous(context):
    for k, v in context.invocation_metadata():
        if k == "grpc-previous-rpc-attempts":
            return int(v)
    return 0


def attempt(method, msgs, context, reply):
    prev = previous(context)
    start = now_ms()
    delay, fail = plan(msgs[0] if msgs else b"", prev)
    end_at = time.monotonic() + delay / 1000.0
    outcome = "ok"
    while time.monotonic() < end_at:
        if not context.is_active():
            outcome = "cancelled"
            break
        time.sleep(0.002)
    if not context.is_active():
        outcome = "cancelled"
    if outcome == "ok" and fail is not None:
        outcome = str(fail)
    with LOCK:
        LOG.append("%s prev=%d start=%d end=%d %s msgs=%s" % (
            method, prev, start, now_ms(), outcome,
            ",".join(m.hex() for m in msgs)))
    if fail is not None and outcome != "cancelled":
        context.abort(CODES[fail], "attempt %d failed" % prev)
    return reply


class Handler(grpc.GenericRpcHandler):
    def service(self, details):
        method = details.method
        if method == "/hedge.Log/Get":
            def get(req, context):
                with LOCK:
                    return ("\n".join(LOG) + "\n").encode() if LOG else b""
            return grpc.unary_unary_rpc_method_handler(get)
        if method == "/hedge.Log/Clear":
            def clear(req, context):
                with LOCK:
                    LOG.clear()
                return b""
            return grpc.unary_unary_rpc_method_handler(clear)
        if method.endswith("Stream"):
            def stream(it, context):
                msgs = []
                try:
                    for m in it:
                        msgs.append(m)
                except grpc.RpcError:
                    # Cancelled while the handler was still reading (a
                    # slow thread pool start): log what arrived.
                    pass
                return attempt(method, msgs, context,
                               str(len(msgs)).encode())
            return grpc.stream_unary_rpc_method_handler(stream)

        def unary(req, context):
            return attempt(method, [req], context, req)
        return grpc.unary_unary_rpc_method_handler(unary)


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32),
                         handlers=[Handler()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("PORT %d" % port, flush=True)
    try:
        sys.stdin.read()  # until the test closes our stdin or kills us
    except KeyboardInterrupt:
        pass
    server.stop(0)


if __name__ == "__main__":
    main()
