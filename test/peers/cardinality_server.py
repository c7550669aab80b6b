#!/usr/bin/python3
"""A grpcio server for the one-response check (test/behaviour/test_api.c).

Service card.Svc, raw bytes (no protos); each method is registered with the
kind that lets it break the rule a unary caller expects:

  Many   server streaming: answers with 3 messages, "m1", "m2", "m3"
  None   bidi streaming: reads every request, answers with no message, OK
  One    unary: echoes the request

Listens on 127.0.0.1 (ephemeral port) and prints "PORT n" once serving;
runs until its stdin closes or it gets SIGTERM/SIGINT.
"""

import sys
from concurrent import futures

import grpc

import peerlife  # noqa: E402  (beside this script)


def many(request, context):
    for i in range(3):
        yield b"m%d" % (i + 1)


def none(request_iterator, context):
    for _ in request_iterator:
        pass
    return iter(())


def one(request, context):
    return request


def main():
    handler = grpc.method_handlers_generic_handler("card.Svc", {
        "Many": grpc.unary_stream_rpc_method_handler(many),
        "None": grpc.stream_stream_rpc_method_handler(none),
        "One": grpc.unary_unary_rpc_method_handler(one),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         handlers=[handler])
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
