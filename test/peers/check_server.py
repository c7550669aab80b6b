#!/usr/bin/python3
"""Check interop_server.py with grpcio's own client, independently of grit.

Runs the same interop cases as grit-interop-client against a running server,
so a failure of the grit client can be told apart from a broken peer.

  check_server.py --port N [--ca ca.pem --host-override foo.test.google.fr]
                  [--stub-dir DIR]
"""

import argparse
import importlib
import os
import sys
import tempfile

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import interop_server  # noqa: E402  (stub generation helpers)

INITIAL = ("x-grpc-test-echo-initial", "test_initial_metadata_value")
TRAILING = ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab")
SPECIAL = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP " \
    "\U0001f608\t\n"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def run(stub, empty_pb2, pb, channel):
    zeros = lambda n: pb.Payload(body=b"\0" * n)  # noqa: E731
    cases = []

    def case(f):
        cases.append(f)
        return f

    @case
    def empty_unary():
        expect(stub.EmptyCall(empty_pb2.Empty()) == empty_pb2.Empty(),
               "empty response")

    @case
    def large_unary():
        r = stub.UnaryCall(pb.SimpleRequest(response_size=314159,
                                            payload=zeros(271828)))
        expect(len(r.payload.body) == 314159, "size 314159")

    @case
    def client_streaming():
        reqs = [pb.StreamingInputCallRequest(payload=zeros(n))
                for n in (27182, 8, 1828, 45904)]
        r = stub.StreamingInputCall(iter(reqs))
        expect(r.aggregated_payload_size == 74922, "aggregated 74922")

    @case
    def server_streaming():
        sizes = [31415, 9, 2653, 58979]
        req = pb.StreamingOutputCallRequest(response_parameters=[
            pb.ResponseParameters(size=s, interval_us=1000) for s in sizes])
        got = [len(r.payload.body) for r in stub.StreamingOutputCall(req)]
        expect(got == sizes, "sizes %r" % got)

    @case
    def ping_pong():
        pairs = [(31415, 27182), (9, 8), (2653, 1828), (58979, 45904)]
        got = [len(r.payload.body) for r in stub.FullDuplexCall(iter([
            pb.StreamingOutputCallRequest(
                response_parameters=[pb.ResponseParameters(size=o)],
                payload=zeros(i)) for o, i in pairs]))]
        expect(got == [o for o, _ in pairs], "sizes %r" % got)

    @case
    def empty_stream():
        expect(list(stub.FullDuplexCall(iter([]))) == [], "no responses")

    @case
    def timeout_on_sleeping_server():
        def forever():
            yield pb.StreamingOutputCallRequest(payload=zeros(27182))
            threading_event.wait(5)

        import threading
        threading_event = threading.Event()
        try:
            list(stub.FullDuplexCall(forever(), timeout=0.001))
            expect(False, "DEADLINE_EXCEEDED expected")
        except grpc.RpcError as e:
            expect(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED,
                   "got %s" % e.code())
        finally:
            threading_event.set()

    @case
    def status_code_and_message():
        st = pb.EchoStatus(code=2, message="test status message")
        try:
            stub.UnaryCall(pb.SimpleRequest(response_status=st))
            expect(False, "UNKNOWN expected")
        except grpc.RpcError as e:
            expect(e.code() == grpc.StatusCode.UNKNOWN, "code %s" % e.code())
            expect(e.details() == st.message, "details %r" % e.details())
        try:
            list(stub.FullDuplexCall(iter([
                pb.StreamingOutputCallRequest(response_status=st)])))
            expect(False, "UNKNOWN expected")
        except grpc.RpcError as e:
            expect(e.code() == grpc.StatusCode.UNKNOWN, "code %s" % e.code())
            expect(e.details() == st.message, "details %r" % e.details())

    @case
    def special_status_message():
        st = pb.EchoStatus(code=2, message=SPECIAL)
        try:
            stub.UnaryCall(pb.SimpleRequest(response_status=st))
            expect(False, "UNKNOWN expected")
        except grpc.RpcError as e:
            expect(e.details() == SPECIAL, "details %r" % e.details())

    @case
    def unimplemented_method():
        m = channel.unary_unary(
            "/grpc.testing.TestService/UnimplementedCall",
            request_serializer=empty_pb2.Empty.SerializeToString,
            response_deserializer=empty_pb2.Empty.FromString)
        try:
            m(empty_pb2.Empty())
            expect(False, "UNIMPLEMENTED expected")
        except grpc.RpcError as e:
            expect(e.code() == grpc.StatusCode.UNIMPLEMENTED,
                   "code %s" % e.code())

    @case
    def unimplemented_service():
        m = channel.unary_unary(
            "/grpc.testing.UnimplementedService/UnimplementedCall",
            request_serializer=empty_pb2.Empty.SerializeToString,
            response_deserializer=empty_pb2.Empty.FromString)
        try:
            m(empty_pb2.Empty())
            expect(False, "UNIMPLEMENTED expected")
        except grpc.RpcError as e:
            expect(e.code() == grpc.StatusCode.UNIMPLEMENTED,
                   "code %s" % e.code())

    @case
    def custom_metadata():
        md = [INITIAL, TRAILING]
        _, call = stub.UnaryCall.with_call(
            pb.SimpleRequest(response_size=314159, payload=zeros(271828)),
            metadata=md)
        expect(INITIAL in call.initial_metadata(), "initial echoed")
        expect(TRAILING in call.trailing_metadata(), "trailing echoed")
        it = stub.FullDuplexCall(iter([pb.StreamingOutputCallRequest(
            response_parameters=[pb.ResponseParameters(size=314159)],
            payload=zeros(271828))]), metadata=md)
        got = [len(r.payload.body) for r in it]
        expect(got == [314159], "sizes %r" % got)
        expect(INITIAL in it.initial_metadata(), "initial echoed (bidi)")
        expect(TRAILING in it.trailing_metadata(), "trailing echoed (bidi)")

    failed = 0
    for f in cases:
        try:
            f()
            print("PASS", f.__name__)
        except Exception as e:  # report every case, then fail
            failed += 1
            print("FAIL", f.__name__, "-", e)
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--ca", help="PEM root CA: use TLS")
    ap.add_argument("--host-override", help="TLS target name override")
    ap.add_argument("--stub-dir")
    args = ap.parse_args()

    own = None if args.stub_dir else tempfile.TemporaryDirectory(
        prefix="grit-stubs-")
    stub_dir = args.stub_dir or own.name
    if not os.path.exists(os.path.join(stub_dir, "test_pb2_grpc.py")):
        interop_server.generate_stubs(interop_server.DEFAULT_PROTO_DIR,
                                      stub_dir)
    empty_pb2, pb, test_pb2_grpc = interop_server.load_stubs(stub_dir)

    target = "%s:%d" % (args.host, args.port)
    if args.ca:
        with open(args.ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        opts = []
        if args.host_override:
            opts.append(("grpc.ssl_target_name_override", args.host_override))
        channel = grpc.secure_channel(target, creds, options=opts)
    else:
        channel = grpc.insecure_channel(target)
    with channel:
        stub = test_pb2_grpc.TestServiceStub(channel)
        failed = run(stub, empty_pb2, pb, channel)
    if own:
        own.cleanup()
    print("%s: %d failed" % ("FAIL" if failed else "PASS", failed))
    return 1 if failed else 0


if __name__ == "__main__":
    importlib.invalidate_caches()
    sys.exit(main())
