#!/usr/bin/python3
"""A grpcio (C-core) server for large-message tests (test_flow_grpcio.c).

Service flow.Flow, raw bytes (no protos):

  Size    unary: answers with the request's length in decimal ASCII; with
          "x-respond: N" request metadata, with N bytes of a pattern instead
  Reject  client streaming: fails RESOURCE_EXHAUSTED at once, before it
          reads a single request message (a server that answers early)

The receive limit is 8 MiB, or FLOW_MAX_RECV bytes from the environment
(C-core's default is 4 MiB). With the environment variable FLOW_TLS_DIR set, it serves TLS with the
certificates test/peers/gen_certs.sh writes there (made if missing).

Listens on 127.0.0.1 (ephemeral port) and prints "PORT n" once serving;
runs until its stdin closes or it gets SIGTERM/SIGINT.
"""

import argparse
import os
import subprocess
import sys
from concurrent import futures

import grpc

import peerlife  # noqa: E402  (beside this script)

HERE = os.path.dirname(os.path.abspath(__file__))
PATTERN = bytes(range(256)) * 4096  # 1 MiB


def pattern(n):
    reps = n // len(PATTERN) + 1
    return (PATTERN * reps)[:n]


def size(request, context):
    md = dict(context.invocation_metadata())
    if "x-respond" in md:
        return pattern(int(md["x-respond"]))
    return str(len(request)).encode()


def reject(request_iterator, context):
    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                  "rejected before reading the request")


def credentials(cert_dir):
    if not os.path.exists(os.path.join(cert_dir, "server.pem")):
        subprocess.run(["bash", os.path.join(HERE, "gen_certs.sh"), cert_dir],
                       check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(cert_dir, "server.key"), "rb") as f:
        key = f.read()
    with open(os.path.join(cert_dir, "server.pem"), "rb") as f:
        chain = f.read()
    return grpc.ssl_server_credentials([(key, chain)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-recv", type=int,
                    default=int(os.environ.get("FLOW_MAX_RECV", 8 << 20)))
    args = ap.parse_args()
    handler = grpc.method_handlers_generic_handler("flow.Flow", {
        "Size": grpc.unary_unary_rpc_method_handler(size),
        "Reject": grpc.stream_unary_rpc_method_handler(reject),
    })
    opts = [("grpc.max_receive_message_length", args.max_recv),
            ("grpc.max_send_message_length", 16 * 1024 * 1024)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         handlers=[handler], options=opts)
    cert_dir = os.environ.get("FLOW_TLS_DIR")
    addr = "127.0.0.1:0"
    if cert_dir:
        port = server.add_secure_port(addr, credentials(cert_dir))
    else:
        port = server.add_insecure_port(addr)
    if not port:
        print("cannot listen on %s" % addr, file=sys.stderr)
        return 1
    server.start()
    peerlife.announce_and_wait(port)
    server.stop(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
