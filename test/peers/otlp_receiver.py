#!/usr/bin/python3
"""An OTLP/gRPC trace receiver on grpcio for grit's span export test
(SPEC OP-02; test/tools/test_ops.py).

  otlp_receiver.py GENDIR [--quiet] [--delay-ms N] [--no-decode]

GENDIR holds otlp_trace_pb2.py and otlp_trace_pb2_grpc.py, compiled by the
test from test/peers/otlp_trace.proto with protoc. Serves
opentelemetry.proto.collector.trace.v1.TraceService/Export on 127.0.0.1
(ephemeral port, printed as "PORT n") and prints one JSON line per span
received: name, kind, ids in hex, times, status, attributes, and the
resource's and scope's names (--quiet: nothing, for benchmarks).
--delay-ms N: every Export waits N ms before answering (a slow
collector). --no-decode: answer every Export without parsing it (implies
--quiet; bench/ops-figures uses it to measure grit's own export cost
without a Python decoder on the same cores). Runs until stdin closes or
SIGTERM/SIGINT.
"""

import json
import os
import sys
import threading
import time
from concurrent import futures

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlife  # noqa: E402

sys.path.insert(0, sys.argv[1])
import otlp_trace_pb2 as pb  # noqa: E402
import otlp_trace_pb2_grpc as pbg  # noqa: E402

OUT = threading.Lock()
NO_DECODE = "--no-decode" in sys.argv[2:]
QUIET = "--quiet" in sys.argv[2:] or NO_DECODE
DELAY_S = 0.0
if "--delay-ms" in sys.argv[2:]:
    DELAY_S = int(sys.argv[sys.argv.index("--delay-ms") + 1]) / 1000.0


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class Receiver(pbg.TraceServiceServicer):
    def Export(self, request, context):
        if DELAY_S:
            time.sleep(DELAY_S)
        if QUIET:
            return pb.ExportTraceServiceResponse()
        lines = []
        for rs in request.resource_spans:
            res = {kv.key: value(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    lines.append(json.dumps({
                        "name": s.name,
                        "kind": s.kind,
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "flags": s.flags,
                        "status_code": s.status.code,
                        "status_message": s.status.message,
                        "attributes": {kv.key: value(kv.value)
                                       for kv in s.attributes},
                        "service": res.get("service.name"),
                        "scope": ss.scope.name,
                    }))
        with OUT:
            for line in lines:
                print(line, flush=True)
        return pb.ExportTraceServiceResponse()


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    if NO_DECODE:
        # The request stays bytes (no deserializer); the reply is an empty
        # ExportTraceServiceResponse, which is zero bytes on the wire.
        def export_raw(request, context):
            if DELAY_S:
                time.sleep(DELAY_S)
            return b""

        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {"Export": grpc.unary_unary_rpc_method_handler(
                export_raw, request_deserializer=None,
                response_serializer=None)}),))
    else:
        pbg.add_TraceServiceServicer_to_server(Receiver(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    peerlife.announce_and_wait(port)
    server.stop(0)


if __name__ == "__main__":
    main()
