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

Compression (issue 13): response_compressed and ResponseParameters.compressed
are honoured with grpcio's set_compression/disable_next_message_compression.
grpcio does not tell a servicer whether a request message came compressed, so
with --wiretap the port is a front that reads the HTTP/2 frames the client
sends (terminating TLS itself when --tls-cert is given) and forwards them to
grpcio on an internal cleartext port. It notes each request message's flag
and sizes; expect_compressed is checked against that note, as the C++ interop
server checks the flag, and a wrong one is INVALID_ARGUMENT. Each compressed
message, either way, is logged as "wiretap: <dir> message: <n> bytes
compressed to <m> on the wire".
"""

import argparse
import importlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import zlib
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


class WireTap:
    """What the client sent, message by message: (compressed, wire bytes,
    message bytes), in arrival order, for the servicer to take."""

    def __init__(self):
        self.lock = threading.Condition()
        self.notes = []

    def add(self, compressed, wire_len, raw_len):
        with self.lock:
            self.notes.append((compressed, wire_len, raw_len))
            del self.notes[:-1000]
            self.lock.notify_all()

    def take(self, raw_len, wait_s=5.0):
        """The oldest note of a message of |raw_len| bytes, waiting up to
        |wait_s| for it; None if none came. The wait is needed: the front
        notes a message once it has read the whole DATA frame that ends
        it, while grpcio hands a message to its handler as soon as the
        message's bytes are in, which can be before the end of a frame that
        also carries the start of the next message."""
        deadline = time.monotonic() + wait_s
        with self.lock:
            while True:
                for i, n in enumerate(self.notes):
                    if n[2] == raw_len:
                        return self.notes.pop(i)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.lock.wait(left)


class H2Reader:
    """Splits one direction of an HTTP/2 connection into gRPC messages:
    DATA payloads per stream, 5-byte prefixes, inflating flagged ones."""

    def __init__(self, preface, on_message):
        self.buf = b""
        self.skip = 24 if preface else 0
        self.streams = {}
        self.on_message = on_message

    def feed(self, data):
        self.buf += data
        if self.skip:
            n = min(self.skip, len(self.buf))
            self.buf = self.buf[n:]
            self.skip -= n
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[0:3], "big")
            if len(self.buf) < 9 + length:
                return
            ftype, flags = self.buf[3], self.buf[4]
            sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            payload = self.buf[9:9 + length]
            self.buf = self.buf[9 + length:]
            if ftype != 0:
                continue
            if flags & 0x8 and payload:
                payload = payload[1:len(payload) - payload[0]]
            sbuf = self.streams.get(sid, b"") + payload
            while len(sbuf) >= 5:
                n = int.from_bytes(sbuf[1:5], "big")
                if len(sbuf) < 5 + n:
                    break
                self.message(sbuf[0], sbuf[5:5 + n])
                sbuf = sbuf[5 + n:]
            self.streams[sid] = sbuf

    def message(self, flag, body):
        raw_len = len(body)
        if flag & 1:
            try:
                raw_len = len(zlib.decompress(body, 47))  # gzip or zlib
            except zlib.error:
                raw_len = -1
        self.on_message(bool(flag & 1), len(body), raw_len)


def serve_wiretap(listener, backend_port, tls_ctx, tap):
    """Accept on |listener|; per connection, pump both ways to grpcio on
    |backend_port|, reading the frames as they pass."""

    def pump(src, dst, reader):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if reader:
                    reader.feed(data)  # before forwarding: notes first
                dst.sendall(data)
        except (OSError, ssl.SSLError):
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def note(direction, record):
        def on_message(compressed, wire_len, raw_len):
            if compressed:
                log("wiretap: %s message: %d bytes compressed to %d on the "
                    "wire" % (direction, raw_len, wire_len))
            if record:
                tap.add(compressed, wire_len, raw_len)
        return on_message

    def handle(conn):
        try:
            if tls_ctx:
                conn = tls_ctx.wrap_socket(conn, server_side=True)
            back = socket.create_connection(("127.0.0.1", backend_port))
        except (OSError, ssl.SSLError) as e:
            log("wiretap: connection dropped: %s" % e)
            conn.close()
            return
        up = H2Reader(True, note("request", True))
        down = H2Reader(False, note("response", False))
        t = threading.Thread(target=pump, args=(back, conn, down),
                             daemon=True)
        t.start()
        pump(conn, back, up)
        t.join()
        conn.close()
        back.close()

    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def make_servicer(empty_pb2, messages_pb2, test_pb2_grpc, tap=None):
    pb = messages_pb2

    def check_compressed(request, context):
        """expect_compressed against the wiretap's note of this message."""
        if not request.HasField("expect_compressed") or tap is None:
            return
        want = request.expect_compressed.value
        n = tap.take(request.ByteSize())
        if n is None:
            context.abort(grpc.StatusCode.INTERNAL,
                          "wiretap saw no message of %d bytes" %
                          request.ByteSize())
        if n[0] != want:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "expected a %scompressed request" %
                          ("" if want else "non-"))

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
            if any(p.HasField("compressed")
                   for p in request.response_parameters):
                context.set_compression(grpc.Compression.Gzip)
            for params in request.response_parameters:
                if params.interval_us > 0:
                    time.sleep(params.interval_us / 1e6)
                if params.HasField("compressed") and \
                        not params.compressed.value:
                    context.disable_next_message_compression()
                yield pb.StreamingOutputCallResponse(
                    payload=payload(params.size))

    class TestService(test_pb2_grpc.TestServiceServicer):
        def EmptyCall(self, request, context):
            echo_metadata(context)
            return empty_pb2.Empty()

        def UnaryCall(self, request, context):
            echo_metadata(context)
            check_compressed(request, context)
            if request.HasField("response_compressed"):
                context.set_compression(
                    grpc.Compression.Gzip if request.response_compressed.value
                    else grpc.Compression.NoCompression)
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
                check_compressed(request, context)
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


class CallLogger(grpc.ServerInterceptor):
    """--log-calls: one "call: <method>" line on stderr per RPC that
    reached grpcio (issue 23: proof that nothing arrived in cleartext)."""

    def intercept_service(self, continuation, handler_call_details):
        log("call: " + handler_call_details.method)
        return continuation(handler_call_details)


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
    ap.add_argument("--wiretap", action="store_true",
                    help="serve through a front that notes what the client "
                    "sends, to check expect_compressed (see above)")
    ap.add_argument("--log-calls", action="store_true",
                    help='log "call: <method>" on stderr for every RPC')
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

    tap = WireTap() if args.wiretap else None
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32),
                         interceptors=[CallLogger()] if args.log_calls else [])
    test_pb2_grpc.add_TestServiceServicer_to_server(
        make_servicer(empty_pb2, messages_pb2, test_pb2_grpc, tap), server)

    address = "127.0.0.1:%d" % args.port
    if args.wiretap:
        # grpcio on an internal cleartext port; the front owns |address|.
        backend = server.add_insecure_port("127.0.0.1:0")
        tls_ctx = None
        if args.tls_cert:
            tls_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls_ctx.load_cert_chain(args.tls_cert, args.tls_key)
            tls_ctx.set_alpn_protocols(["h2"])
            if args.tls_client_ca:
                tls_ctx.load_verify_locations(args.tls_client_ca)
                tls_ctx.verify_mode = ssl.CERT_REQUIRED \
                    if args.require_client_auth else ssl.CERT_OPTIONAL
        listener = socket.create_server(("127.0.0.1", args.port))
        port = listener.getsockname()[1]
        threading.Thread(target=serve_wiretap,
                         args=(listener, backend, tls_ctx, tap),
                         daemon=True).start()
    elif args.tls_cert:
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
