#!/usr/bin/env python3
"""A grpcio server (Debian's python3-grpcio) with a hand-made server
reflection service, for the deadline and metadata tests of grit list and
describe (issue 29 part 4):

  refl_peer.py hang          reflection (v1 and v1alpha) never answers
  refl_peer.py auth TOKEN    reflection answers list_services with
                             grit.test.Hidden only when the request carries
                             "authorization: Bearer TOKEN"; else the call
                             ends UNAUTHENTICATED

Binds 127.0.0.1 on an ephemeral port; prints "PORT n" and lives as every
peer does (test/peers/peerlife.py)."""

import os
import sys
import threading

import grpc
from concurrent import futures

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "peers"))
import peerlife  # noqa: E402

SERVICES = ("grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection")


def pb_len(field, body):
    """A length-delimited protobuf field (bodies here are short)."""
    return bytes([field << 3 | 2, len(body)]) + body


def list_response(request):
    """ServerReflectionResponse{original_request=2, list_services_response=6
    {service=1 {name=1}}}."""
    svc = pb_len(1, pb_len(1, b"grit.test.Hidden"))
    return pb_len(2, request) + pb_len(6, svc)


def main():
    mode = sys.argv[1]
    token = sys.argv[2] if mode == "auth" else None
    stop = threading.Event()

    def reflection(request_iterator, context):
        if mode == "hang":
            stop.wait()  # never answers; ends when the peer stops
            return
        md = dict(context.invocation_metadata())
        if md.get("authorization") != "Bearer " + token:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no token")
        for req in request_iterator:
            yield list_response(req)

    handlers = [grpc.method_handlers_generic_handler(name, {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            reflection)}) for name in SERVICES]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         handlers=handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        peerlife.announce_and_wait(port)
    finally:
        stop.set()
        server.stop(0)


if __name__ == "__main__":
    main()
