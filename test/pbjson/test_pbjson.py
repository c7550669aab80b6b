#!/usr/bin/env python3
"""Tests of message types and JSON in the grit command (issue 14): grit
call --data-json/--protoset/--proto and reflection, grit list, grit
describe, against a real gRPC C++ server with the reflection service
(reflection_server.cc, built by build_reflection_server.sh into --work)
and Debian's grpcio (no reflection). Expected JSON comes from Debian's
python3-protobuf (google.protobuf.json_format), the reference mapping.

  test_pbjson.py --grit PATH --work DIR --peers DIR

Exit status: 0 passed, 1 a case failed, 77 the C++ server cannot be built
(g++ or libgrpc++-dev missing) or grpcio/protobuf are missing.
"""

import argparse
import base64
import ctypes
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
INTEROP_PROTO = os.path.join(ROOT, "interop", "proto", "grpc", "testing")
PYTHON = "/usr/bin/python3"
CALL_TIMEOUT_S = 30
ARGS = None


class Skip(Exception):
    pass


def die_with_parent():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Res:
    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    def __str__(self):
        return "$ %s\nrc=%s\n--- stdout\n%s--- stderr\n%s" % (
            " ".join(self.argv), self.rc, self.out, self.err)


def grit(*argv, stdin=None):
    cmd = [ARGS.grit] + list(argv)
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                       timeout=CALL_TIMEOUT_S, preexec_fn=die_with_parent)
    return Res(cmd, p.returncode, p.stdout, p.stderr)


def check(cond, what, res=None):
    if not cond:
        raise AssertionError(what + ("\n%s" % res if res else ""))


def check_rc(res, rc):
    check(res.rc == rc, "exit status %s, want %s" % (res.rc, rc), res)


def first_json(res):
    """The first stdout line that is a JSON object."""
    for line in res.out.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError("no JSON line\n%s" % res)


class Server:
    """A server that prints "PORT n" on stdout; stopped on exit."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True,
                                  preexec_fn=die_with_parent)
        deadline = time.monotonic() + 30
        self.port = None
        while time.monotonic() < deadline:
            line = self.p.stdout.readline()
            if not line:
                break
            if line.startswith("PORT "):
                self.port = int(line.split()[1])
                break
        if self.port is None:
            self.stop()
            raise AssertionError("server %s printed no port: %s" %
                                 (argv[0], self.p.stderr.read()))
        self.target = "ipv4:127.0.0.1:%d" % self.port

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


# ---- set-up: protosets, Python stubs ----

def protoc(*args):
    r = subprocess.run(["protoc"] + list(args), capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0, "protoc %s: %s" % (" ".join(args), r.stderr))


def client_kitchen_dir():
    """kitchen.proto as a client sees it: without server_note (99)."""
    d = os.path.join(ARGS.tmp, "client")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(HERE, "kitchen.proto")) as f:
        text = "".join(l for l in f if "SERVER ONLY" not in l)
    with open(os.path.join(d, "kitchen.proto"), "w") as f:
        f.write(text)
    return d


def make_protosets():
    ARGS.interop_set = os.path.join(ARGS.tmp, "interop.protoset")
    protoc("--include_imports", "-o" + ARGS.interop_set, "-I" + INTEROP_PROTO,
           "test.proto")
    ARGS.kitchen_dir = client_kitchen_dir()
    ARGS.kitchen_set = os.path.join(ARGS.tmp, "kitchen.protoset")
    protoc("--include_imports", "-o" + ARGS.kitchen_set,
           "-I" + ARGS.kitchen_dir, "kitchen.proto")
    # Python classes of the server's view (with server_note).
    pydir = os.path.join(ARGS.tmp, "py")
    os.makedirs(pydir)
    protoc("--python_out=" + pydir, "-I" + HERE, "kitchen.proto")
    sys.path.insert(0, pydir)
    ARGS.kitchen_pb2 = importlib.import_module("kitchen_pb2")


# ---- cases ----

def unary_protoset():
    """Done-when: --protoset and --data-json print payload.body, serverId."""
    r = grit("call", "--protoset", ARGS.interop_set, "--data-json",
             '{"responseSize":5,"fillServerId":true}', ARGS.refl.target,
             "/grpc.testing.TestService/UnaryCall")
    check_rc(r, 0)
    obj = first_json(r)
    check(obj == {"payload": {"body": base64.b64encode(b"xxxxx").decode()},
                  "serverId": "grit-reflection-server"},
          "response JSON %r" % obj, r)
    check("status: OK (0)" in r.out, "status line", r)


def unary_reflection():
    """The same with no --protoset: types over reflection (v1 -> v1alpha,
    which is all libgrpc++ 1.51 has)."""
    r = grit("call", "--json", "--data-json",
             '{"responseSize":3,"fillServerId":true,"fillUsername":true,'
             '"responseType":"COMPRESSABLE"}',
             ARGS.refl.target, "grpc.testing.TestService/UnaryCall")
    check_rc(r, 0)
    lines = [json.loads(l) for l in r.out.splitlines()]
    check(lines[0] == {"response": {
        "payload": {"body": base64.b64encode(b"xxx").decode()},
        "username": "grit-user", "serverId": "grit-reflection-server"}},
        "response line %r" % lines[0], r)
    check(lines[1]["code_name"] == "OK", "end line", r)


def proto_files():
    """--proto with --import-path runs protoc -o."""
    r = grit("call", "--proto", "test.proto", "--import-path", INTEROP_PROTO,
             "--data-json", '{"responseSize":2}', ARGS.refl.target,
             "/grpc.testing.TestService/UnaryCall")
    check_rc(r, 0)
    check(first_json(r) == {"payload": {"body": "eHg="}}, "response", r)
    r = grit("call", "--proto", "nonexistent.proto", "--import-path",
             INTEROP_PROTO, "--data-json", "{}", ARGS.refl.target,
             "/grpc.testing.TestService/UnaryCall")
    check_rc(r, 2)


def kitchen_message():
    k = ARGS.kitchen_pb2.Kitchen(
        i32=-7, i64=-(1 << 40), u32=4000000000, u64=(1 << 64) - 1, s32=-3,
        s64=-(1 << 50), f32=7, f64=1 << 60, sf32=-9, sf64=-(1 << 62),
        fl=1.5, db=0.1, flag=True, text="héllo \"q\"\n", blob=b"\x00\xff\x10",
        color=ARGS.kitchen_pb2.GREEN, tags=["a", "b"], ratios=[0.25, -1e300],
        colors=[ARGS.kitchen_pb2.RED, ARGS.kitchen_pb2.GREEN], opt_i32=0,
        choice_num=5)
    k.inner.name = "in"
    k.inner.nums.extend([1, -2, 3])
    k.inners.add(name="x")
    k.inners.add(nums=[9])
    k.counts["one"] = 1
    k.counts["big"] = 1 << 53
    k.by_id[3].name = "three"
    k.by_id[-1].nums.append(0)
    k.when.seconds = 1700000000
    k.when.nanos = 500000000
    k.took.seconds = 3
    k.took.nanos = 1000
    k.maybe_i64.value = 0
    k.maybe_text.value = "wrapped"
    return k


def kitchen_round_trip():
    """JSON -> wire -> server echo -> wire -> JSON for every special field
    type, against python-protobuf's json_format; the server's field 99,
    missing from grit's descriptors, comes back under its number."""
    from google.protobuf import json_format
    k = kitchen_message()
    req_json = json_format.MessageToJson(k, indent=None)
    r = grit("call", "--protoset", ARGS.kitchen_set, "--data-json", req_json,
             ARGS.refl.target, "/grit.test.Echo/Echo")
    check_rc(r, 0)
    got = first_json(r)
    note = got.pop("99", None)
    check(note == base64.b64encode(b"from the server").decode(),
          "unknown field 99 kept as base64: %r" % note, r)
    want = json.loads(req_json)
    check(got == want, "echo JSON differs:\n got %s\nwant %s" %
          (json.dumps(got, sort_keys=True), json.dumps(want, sort_keys=True)),
          r)
    # The server's own view parses grit's request bytes the same way:
    # reflection gives the full type, server_note included.
    r = grit("call", "--data-json", req_json, ARGS.refl.target,
             "grit.test.Echo.Echo")
    check_rc(r, 0)
    got = first_json(r)
    k.server_note = "from the server"
    check(got == json.loads(json_format.MessageToJson(k, indent=None)),
          "reflection echo differs: %s" % json.dumps(got), r)


def kitchen_stream():
    """A bidi stream: one JSON object per stdin line, one per stdout
    line."""
    lines = ['{"i64":"%d","text":"m%d"}' % ((i + 1) << 33, i) for i in range(3)]
    r = grit("call", "--protoset", ARGS.kitchen_set, "--data-json", "-",
             ARGS.refl.target, "/grit.test.Echo/EchoStream",
             stdin="\n".join(lines) + "\n")
    check_rc(r, 0)
    got = [json.loads(l) for l in r.out.splitlines() if l.startswith("{")]
    check(len(got) == 3, "three responses", r)
    for i, g in enumerate(got):
        g.pop("99")
        check(g == json.loads(lines[i]), "response %d: %r" % (i, g), r)


def request_errors():
    """Unknown fields, wrong types, bad enum names: usage errors (exit 2)
    naming the JSON path; nothing is sent."""
    cases = [
        ('{"inner":{"nope":1}}', "$.inner.nope: unknown field"),
        ('{"i32":"abc"}', "$.i32: 'abc' is not an integer"),
        ('{"color":"BLUE"}', "$.color: 'BLUE' is not a value of the enum"),
        ('{"inners":[{},{"nums":[1,"x"]}]}', "$.inners[1].nums[1]"),
        ('{"flag":1}', "$.flag: wants true or false"),
        ('{"blob":"***"}', "$.blob: is not base64"),
        ('{"when":"yesterday"}', "$.when: 'yesterday' is not an RFC 3339"),
        ('{"u32":4294967296}', "$.u32: out of range"),
        ('[1]', "$: wants an object"),
        ('{', "not JSON"),
    ]
    for text, want in cases:
        r = grit("call", "--protoset", ARGS.kitchen_set, "--data-json", text,
                 ARGS.refl.target, "/grit.test.Echo/Echo")
        check_rc(r, 2)
        check(want in r.err, "error for %s names %r" % (text, want), r)
        check(r.out == "", "nothing printed on stdout", r)
    # @FILE: read, then decoded the same way.
    path = os.path.join(ARGS.tmp, "bad.json")
    with open(path, "w") as f:
        f.write('{"tags":"a"}')
    r = grit("call", "--protoset", ARGS.kitchen_set, "--data-json",
             "@" + path, ARGS.refl.target, "/grit.test.Echo/Echo")
    check_rc(r, 2)
    check("$.tags: wants an array" in r.err, "@FILE error names the path", r)
    # A bad stdin line of a stream: exit 2 too.
    r = grit("call", "--protoset", ARGS.kitchen_set, "--data-json", "-",
             ARGS.refl.target, "/grit.test.Echo/EchoStream",
             stdin='{"i32":1}\n{"i32":true}\n')
    check_rc(r, 2)
    check("$.i32" in r.err, "stdin error names the path", r)


def list_services():
    r = grit("list", ARGS.refl.target)
    check_rc(r, 0)
    names = r.out.split()
    for s in ("grpc.testing.TestService", "grit.test.Echo"):
        check(s in names, "list has " + s, r)
    r = grit("list", "--protoset", ARGS.kitchen_set)
    check_rc(r, 0)
    check(r.out == "grit.test.Echo\n", "list from a protoset", r)


def describe_symbols():
    r = grit("describe", ARGS.refl.target, "grit.test.Echo")
    check_rc(r, 0)
    check("rpc EchoStream(stream .grit.test.Kitchen) returns "
          "(stream .grit.test.Kitchen);" in r.out, "service text", r)
    r = grit("describe", ARGS.refl.target, "grit.test.Kitchen")
    check_rc(r, 0)
    for line in ("map<int32, .grit.test.Inner> by_id = 21;",
                 "optional int32 opt_i32 = 26;", "oneof choice {",
                 "string server_note = 99;"):
        check(line in r.out, "message text has %r" % line, r)
    r = grit("describe", ARGS.refl.target,
             "grpc.testing.TestService.FullDuplexCall")
    check_rc(r, 0)
    check("is a method" in r.out, "method", r)
    r = grit("describe", "--protoset", ARGS.kitchen_set, "grit.test.Color")
    check_rc(r, 0)
    check("GREEN = 2;" in r.out, "enum from a protoset", r)
    r = grit("describe", ARGS.refl.target, "grit.test.Nope")
    check_rc(r, 1)


def grpcio_without_reflection():
    """grpcio without reflection: v1 then v1alpha both UNIMPLEMENTED; the
    call fails (exit 1) saying so. Hex calls and --protoset still work."""
    srv = Server([PYTHON, os.path.join(ARGS.peers, "interop_server.py"),
                  "--port", "0", "--stub-dir",
                  os.path.join(ARGS.tmp, "grpcio-stubs")])
    try:
        r = grit("call", "--data-json", "{}", srv.target,
                 "/grpc.testing.TestService/UnaryCall")
        check_rc(r, 1)
        check("v1alpha.ServerReflection" in r.err and
              "UNIMPLEMENTED" in r.err, "fallback tried v1alpha", r)
        r = grit("call", "--protoset", ARGS.interop_set, "--data-json",
                 '{"responseSize":4}', srv.target,
                 "/grpc.testing.TestService/UnaryCall")
        check_rc(r, 0)
        check(first_json(r) == {"payload": {"body": "AAAAAA=="}},
              "grpcio response", r)
    finally:
        srv.stop()


CASES = [unary_protoset, unary_reflection, proto_files, kitchen_round_trip,
         kitchen_stream, request_errors, list_services, describe_symbols,
         grpcio_without_reflection]


def on_sigterm(signum, frame):
    raise SystemExit("killed by signal %d" % signum)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--grit", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--peers", required=True)
    ARGS = ap.parse_args()
    signal.signal(signal.SIGTERM, on_sigterm)
    # The expected JSON comes from Debian's python3-protobuf, which only
    # Debian's interpreter sees (docs/design.md "Environment notes").
    try:
        importlib.import_module("google.protobuf.json_format")
    except ImportError:
        if sys.executable != PYTHON and os.path.exists(PYTHON):
            os.execv(PYTHON, [PYTHON] + sys.argv)
        print("SKIP: no google.protobuf for %s" % sys.executable)
        return 77
    if subprocess.run([PYTHON, "-c", "import grpc, google.protobuf"],
                      capture_output=True).returncode != 0:
        print("SKIP: %s lacks grpcio/protobuf" % PYTHON)
        return 77
    b = subprocess.run([os.path.join(HERE, "build_reflection_server.sh"),
                        ARGS.work], capture_output=True, text=True,
                       timeout=900)
    if b.returncode == 77:
        print("SKIP: " + b.stderr.strip())
        return 77
    if b.returncode != 0:
        print("cannot build the reflection server:\n" + b.stderr)
        return 1
    failed = 0
    with tempfile.TemporaryDirectory(prefix="grit-pbjson-") as tmp:
        ARGS.tmp = tmp
        make_protosets()
        ARGS.refl = Server([os.path.join(ARGS.work, "reflection_server")])
        try:
            for case in CASES:
                t0 = time.monotonic()
                try:
                    case()
                    status = "ok"
                except AssertionError as e:
                    status = "FAIL\n%s" % e
                    failed += 1
                except Exception:
                    status = "FAIL\n%s" % traceback.format_exc()
                    failed += 1
                print("%-28s %5.2fs %s" % (case.__name__,
                                           time.monotonic() - t0, status),
                      flush=True)
        finally:
            ARGS.refl.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
