#!/usr/bin/python3
"""A grpcio server for the observability test (test/behaviour/test_observe.c).

Service obs.Svc, raw bytes, methods Plain, Retry and Hedge (one handler).
The request body holds tokens that pick what each attempt does, by its
grpc-previous-rpc-attempts value N:

  dN=MS     sleep MS ms (watching for cancellation) before answering
  fN=CODE   fail with status CODE (a number) instead of answering

Each attempt is logged under the "x-call-key" request metadata as
"prev=P n=K tp=TRACEPARENT ts=TRACESTATE OUTCOME" (K is how many
traceparent headers came; "-" for an absent one; OUTCOME ok, cancelled or
a status number). obs.Svc/Log returns the lines of the key in the request.

In front of grpcio sits a TCP front on another port, the one printed as
"PORT n": it answers the first connection itself (server SETTINGS, then on
the first HEADERS a GOAWAY with last-stream-id 0, so the client's stream is
refused unprocessed: a transparent retry, SPEC TR-02) and passes every
later connection through to grpcio byte for byte.

Listens on 127.0.0.1; runs until stdin closes or SIGTERM/SIGINT.
"""

import socket
import struct
import sys
import threading
import time
from concurrent import futures

import grpc

import peerlife  # noqa: E402  (beside this script)

LOCK = threading.Lock()
LOG = {}
CODES = {c.value[0]: c for c in grpc.StatusCode}


def plan(body, prev):
    delay, fail = 0, None
    for tok in body.decode("ascii", "replace").split():
        if tok.startswith("d%d=" % prev):
            delay = int(tok.split("=", 1)[1])
        elif tok.startswith("f%d=" % prev):
            fail = int(tok.split("=", 1)[1])
    return delay, fail


def handle(request, context):
    md = list(context.invocation_metadata())
    tps = [v for k, v in md if k == "traceparent"]
    ts = [v for k, v in md if k == "tracestate"]
    d = dict(md)
    key = d.get("x-call-key", "")
    prev = int(d.get("grpc-previous-rpc-attempts", "0"))
    delay, fail = plan(request, prev)
    line = "prev=%d n=%d tp=%s ts=%s" % (prev, len(tps), tps[0] if tps else "-",
                                         ts[0] if ts else "-")
    outcome = "ok"
    end = time.monotonic() + delay / 1000.0
    while time.monotonic() < end and context.is_active():
        time.sleep(0.005)
    if not context.is_active():
        outcome = "cancelled"
    elif fail is not None:
        outcome = str(fail)
    with LOCK:
        LOG.setdefault(key, []).append(line + " " + outcome)
    if fail is not None:
        context.abort(CODES[fail], "attempt %d failed" % prev)
    return request


def log(request, context):
    key = request.decode("utf-8", "replace")
    with LOCK:
        lines = list(LOG.get(key, []))
    return "".join(line + "\n" for line in lines).encode()


def frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def refuse_first(conn):
    """Server SETTINGS, ACK the client's, GOAWAY(0) on the first HEADERS."""
    conn.settimeout(10)
    try:
        buf = b""
        conn.sendall(frame(4, 0, 0, b""))
        while len(buf) < 24:
            chunk = conn.recv(4096)
            if not chunk:
                return
            buf += chunk
        buf = buf[24:]
        while True:
            while len(buf) < 9:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                buf += chunk
            n = int.from_bytes(buf[0:3], "big")
            ftype, flags = buf[3], buf[4]
            while len(buf) < 9 + n:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                buf += chunk
            buf = buf[9 + n:]
            if ftype == 4 and not flags & 1:
                conn.sendall(frame(4, 1, 0, b""))
            elif ftype == 1:
                conn.sendall(frame(7, 0, 0, struct.pack(">II", 0, 0)))
                time.sleep(0.2)
                return
    except OSError:
        pass
    finally:
        conn.close()


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def front(lsock, backend):
    first = True
    while True:
        try:
            conn, _ = lsock.accept()
        except OSError:
            return
        if first:
            first = False
            threading.Thread(target=refuse_first, args=(conn,),
                             daemon=True).start()
            continue
        up = socket.create_connection(("127.0.0.1", backend))
        for a, b in ((conn, up), (up, conn)):
            threading.Thread(target=pipe, args=(a, b), daemon=True).start()


def main():
    handler = grpc.method_handlers_generic_handler("obs.Svc", {
        "Plain": grpc.unary_unary_rpc_method_handler(handle),
        "Retry": grpc.unary_unary_rpc_method_handler(handle),
        "Hedge": grpc.unary_unary_rpc_method_handler(handle),
        "Log": grpc.unary_unary_rpc_method_handler(log),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         handlers=[handler])
    backend = server.add_insecure_port("127.0.0.1:0")
    server.start()
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    threading.Thread(target=front, args=(lsock, backend), daemon=True).start()
    peerlife.announce_and_wait(lsock.getsockname()[1])
    lsock.close()
    server.stop(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
