#!/usr/bin/python3
"""grpcio interop TestService server for grit's real-peer tests.

Implements the server features of gRPC's interop-test-descriptions.md:
EmptyCall, UnaryCall, CacheableUnaryCall, StreamingOutputCall,
StreamingInputCall, FullDuplexCall, HalfDuplexCall, Echo Status, Echo
Metadata and ResponseParameters.interval_us. UnimplementedCall is left
unimplemented (grpcio answers UNIMPLEMENTED), and UnimplementedService is not
registered at all.

Run it with /usr/bin/python3 (Debian's python3-grpcio). Python stubs are
generated at start-up from interop/proto/grpc/testing into --stub-dir (a new
temporary directory by default), with grpc_tools when present, otherwise with
protoc and /usr/bin/grpc_python_plugin.

It binds 127.0.0.1 only. With --port 0 the kernel picks the port; either way
the bound port is printed on stdout as "PORT <n>" once the server is serving.
"""

import argparse
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO_DIR = os.path.join(HERE, "..", "..", "interop", "proto", "grpc",
                                 "testing")
PROTOS = ("empty.proto", "messages.proto", "test.proto")

ECHO_INITIAL_KEY = "x-grpc-test-echo-initial"
ECHO_TRAILING_KEY = "x-grpc-test-echo-trailing-bin"

# Wire code -> grpc.StatusCode.
STATUS_BY_CODE = {c.value[0]: c for c in grpc.StatusCode}


def log(msg):
    print("interop_server: " + msg, file=sys.stderr, flush=True)


def generate_stubs(proto_dir, out_dir):
    """Compile the interop protos into Python modules in out_dir."""
    proto_dir = os.path.abspath(proto_dir)
    files = [os.path.join(proto_dir, p) for p in PROTOS]
    try:
        from grpc_tools import protoc as grpc_protoc  # noqa: F401
        cmd = [sys.executable, "-m", "grpc_tools.protoc"]
        plugin = []
    except ImportError:
        protoc = shutil.which("protoc")
        plugin_path = "/usr/bin/grpc_python_plugin"
        if not os.path.exists(plugin_path):
            plugin_path = shutil.which("grpc_python_plugin") or plugin_path
        if protoc is None or not os.path.exists(plugin_path):
            raise SystemExit("interop_server: need grpc_tools, or protoc and "
                             "grpc_python_plugin, to generate stubs")
        cmd = [protoc]
        plugin = ["--plugin=protoc-gen-grpc=" + plugin_path]
    cmd += plugin + ["-I" + proto_dir, "--python_out=" + out_dir,
                     "--grpc_out=" + out_dir] + files
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit("interop_server: stub generation failed (%s):\n%s" %
                         (" ".join(cmd), res.stderr))


def load_stubs(stub_dir):
    sys.path.insert(0, stub_dir)
    empty_pb2 = importlib.import_module("empty_pb2")
    messages_pb2 = importlib.import_module("messages_pb2")
    test_pb2_grpc = importlib.import_module("test_pb2_grpc")
    return empty_pb2, messages_pb2, test_pb2_grpc


def make_servicer(empty_pb2, messages_pb2, test_pb2_grpc):
    pb = messages_pb2

    def payload(size):
        if size < 0:
            raise ValueError("negative size")
        return pb.Payload(type=pb.COMPRESSABLE, body=b"\0" * size)

    def echo_metadata(context):
        """Echo Metadata: initial key back in headers, -bin key in trailers."""
        initial = []
        trailing = []
        for key, value in context.invocation_metadata():
            if key == ECHO_INITIAL_KEY:
                initial.append((key, value))
            elif key == ECHO_TRAILING_KEY:
                trailing.append((key, value))
        if initial:
            context.send_initial_metadata(initial)
        if trailing:
            context.set_trailing_metadata(trailing)

    def echo_status(request, context):
        """Echo Status: end the call with the requested status, if any."""
        if not request.HasField("response_status"):
            return
        code = request.response_status.code
        if code == 0:
            return
        status = STATUS_BY_CODE.get(code, grpc.StatusCode.UNKNOWN)
        context.abort(status, request.response_status.message)

    def check_type(response_type, context):
        if response_type != pb.COMPRESSABLE:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "unsupported response_type %d" % response_type)

    def streamed(requests, context):
        """Responses for each ResponseParameters of each request, in order,
        sleeping interval_us before each one."""
        for request in requests:
            echo_status(request, context)
            check_type(request.response_type, context)
            for params in request.response_parameters:
                if params.interval_us > 0:
                    time.sleep(params.interval_us / 1e6)
                yield pb.StreamingOutputCallResponse(
                    payload=payload(params.size))

    class TestService(test_pb2_grpc.TestServiceServicer):
        def EmptyCall(self, request, context):
            echo_metadata(context)
            return empty_pb2.Empty()

        def UnaryCall(self, request, context):
            echo_metadata(context)
            echo_status(request, context)
            check_type(request.response_type, context)
            return pb.SimpleResponse(payload=payload(request.response_size))

        def CacheableUnaryCall(self, request, context):
            context.send_initial_metadata([("cache-control", "max-age=60")])
            body = str(time.time_ns()).encode()
            return pb.SimpleResponse(
                payload=pb.Payload(type=pb.COMPRESSABLE, body=body))

        def StreamingOutputCall(self, request, context):
            echo_metadata(context)
            yield from streamed([request], context)

        def StreamingInputCall(self, request_iterator, context):
            echo_metadata(context)
            total = 0
            for request in request_iterator:
                total += len(request.payload.body)
            return pb.StreamingInputCallResponse(aggregated_payload_size=total)

        def FullDuplexCall(self, request_iterator, context):
            echo_metadata(context)
            yield from streamed(request_iterator, context)

        def HalfDuplexCall(self, request_iterator, context):
            echo_metadata(context)
            requests = list(request_iterator)
            yield from streamed(requests, context)

        # UnimplementedCall stays the generated default: UNIMPLEMENTED.

    return TestService()


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0,
                    help="port on 127.0.0.1; 0 picks a free one")
    ap.add_argument("--tls-cert", help="PEM server certificate chain")
    ap.add_argument("--tls-key", help="PEM server private key")
    ap.add_argument("--tls-client-ca",
                    help="PEM CA for client certificates (enables mTLS)")
    ap.add_argument("--require-client-auth", action="store_true",
                    help="with --tls-client-ca: reject clients without one")
    ap.add_argument("--proto-dir", default=DEFAULT_PROTO_DIR)
    ap.add_argument("--stub-dir",
                    help="where to generate stubs (default: a temp dir)")
    args = ap.parse_args()

    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls-cert and --tls-key go together")

    own_stub_dir = args.stub_dir is None
    stub_dir = tempfile.mkdtemp(prefix="grit-stubs-") if own_stub_dir \
        else args.stub_dir
    os.makedirs(stub_dir, exist_ok=True)
    try:
        generate_stubs(args.proto_dir, stub_dir)
        empty_pb2, messages_pb2, test_pb2_grpc = load_stubs(stub_dir)
    finally:
        if own_stub_dir:
            shutil.rmtree(stub_dir, ignore_errors=True)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    test_pb2_grpc.add_TestServiceServicer_to_server(
        make_servicer(empty_pb2, messages_pb2, test_pb2_grpc), server)

    address = "127.0.0.1:%d" % args.port
    if args.tls_cert:
        client_ca = read_file(args.tls_client_ca) if args.tls_client_ca \
            else None
        creds = grpc.ssl_server_credentials(
            [(read_file(args.tls_key), read_file(args.tls_cert))],
            root_certificates=client_ca,
            require_client_auth=bool(client_ca and args.require_client_auth))
        port = server.add_secure_port(address, creds)
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        raise SystemExit("interop_server: could not bind " + address)

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    server.start()
    print("PORT %d" % port, flush=True)
    log("serving on 127.0.0.1:%d (%s)" %
        (port, "TLS" if args.tls_cert else "cleartext"))
    while not stop.wait(1.0):
        pass
    server.stop(grace=0).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
