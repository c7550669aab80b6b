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
                       timeout=CALL_TIMEOUT_S, preexec_fn=die_with_parent,
                       stdin=None if stdin is not None else subprocess.DEVNULL)
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
        # stdin a pipe held open: Python peers live until it closes.
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
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
    ARGS.wkt_set = os.path.join(ARGS.tmp, "wkt.protoset")
    protoc("--include_imports", "-o" + ARGS.wkt_set, "-I" + HERE,
           "kitchen.proto")
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
    # The status goes to stderr: stdout is the response alone (| jq).
    check("status: OK (0)" in r.err, "status line on stderr", r)
    check(len(r.out.splitlines()) == 1, "stdout: the response only", r)


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



# ---- issue 29: well-known types, status details, discovery ----

def wkt_message():
    """A Wkt with every well-known type in every position: singular,
    repeated, map value, packed in Any (WKTs in their "value" form, an Any
    in an Any), NullValue in a oneof, json_name, U+0000 in strings,
    uint64 max, the Timestamp range ends."""
    pb = ARGS.kitchen_pb2
    from google.protobuf import (any_pb2, duration_pb2, empty_pb2,
                                 field_mask_pb2, struct_pb2, timestamp_pb2,
                                 wrappers_pb2)
    w = pb.Wkt()
    w.any.Pack(pb.Inner(name="packed\u0000nul", nums=[1, 2]))
    w.st.update({"a": 1.5, "b": [True, None, "x", {"c": {}}], "n": None,
                 "big": 1e300})
    w.val.string_value = "v"
    w.list.extend([1, "two", None, [3], {"k": False}])
    w.mask.paths.extend(["foo_bar.baz_qux", "x"])
    w.empty.SetInParent()
    w.when.seconds = -62135596800
    w.took.seconds, w.took.nanos = -1, -500000000
    w.w_double.value = 0.0
    w.w_float.value = 1.25
    w.w_int64.value = -(1 << 63)
    w.w_uint64.value = (1 << 64) - 1
    w.w_int32.value = -5
    w.w_uint32.value = 4294967295
    w.w_bool.value = False
    w.w_string.value = "s\u0000"
    w.w_bytes.value = b"\x00\x01"
    for m in (duration_pb2.Duration(seconds=3),
              struct_pb2.Value(number_value=2), struct_pb2.Struct(),
              empty_pb2.Empty(), wrappers_pb2.Int64Value(value=7),
              field_mask_pb2.FieldMask(paths=["a_b"]),
              timestamp_pb2.Timestamp(seconds=1),
              struct_pb2.ListValue()):
        w.anys.add().Pack(m)
    nested = any_pb2.Any()
    nested.Pack(pb.Inner(name="deep"))
    w.anys.add().Pack(nested)
    w.vals.add().null_value = 0
    w.vals.add().bool_value = True
    w.vals.add().list_value.values.add().number_value = 1
    w.vmap["x"].string_value = "y"
    w.vmap["n"].null_value = 0
    w.renamed = "r"
    w.kitchen.u64 = (1 << 64) - 1
    w.kitchen.text = "a\u0000b"
    w.pick_null = 0
    w.nuls.extend([0, 0])
    w.whens.add(seconds=253402300799, nanos=999999999)
    return w


def diff(got, want):
    return "\n got %s\nwant %s" % (json.dumps(got, sort_keys=True),
                                   json.dumps(want, sort_keys=True))


def wkt_round_trip():
    """Issue 29 part 1: JSON of every well-known type both ways, equal to
    json_format.MessageToJson field for field: python's JSON -> grit ->
    C++ server echo -> grit's JSON; python then parses grit's output back
    to the same message. Over reflection and from a protoset."""
    from google.protobuf import json_format
    w = wkt_message()
    req = json_format.MessageToJson(w, indent=None)
    want = json.loads(req)
    for types in ([], ["--protoset", ARGS.wkt_set]):
        r = grit("call", *types, "--data-json", req, ARGS.refl.target,
                 "grit.test.Echo.EchoWkt")
        check_rc(r, 0)
        got = json.loads(r.out)  # stdout is the response alone
        check(got == want, "EchoWkt JSON differs:" + diff(got, want), r)
    # python-protobuf reads grit's output back to the same message (but
    # for nuls: python cannot read [null] back, its own output included).
    w.ClearField("nuls")
    got.pop("nuls")
    back = json_format.Parse(json.dumps(got), ARGS.kitchen_pb2.Wkt())
    check(back == w, "json_format.Parse of grit's JSON differs", r)
    # Each field alone, so that a failure names the field.
    for name, value in want.items():
        one = json.dumps({name: value})
        r = grit("call", "--protoset", ARGS.wkt_set, "--data-json", one,
                 ARGS.refl.target, "grit.test.Echo.EchoWkt")
        check_rc(r, 0)
        check(json.loads(r.out) == {name: value},
              "field %s:%s" % (name, diff(json.loads(r.out), value)), r)


def wkt_parse_forms():
    """Input forms python-protobuf accepts: uint64 and doubles past 2^63 as
    JSON numbers, \\u0000 in strings, a FieldMask in camelCase, an Any of a
    WKT in its "value" form; and their errors naming the JSON path."""
    from google.protobuf import json_format
    pb = ARGS.kitchen_pb2
    good = [
        '{"kitchen":{"u64":18446744073709551615,"db":18446744073709551616,'
        '"f64":9223372036854775808,"text":"a\\u0000b"}}',
        '{"mask":"fooBar,a.bC","val":{"k":[1,null]}}',
        '{"any":{"@type":"type.googleapis.com/google.protobuf.Timestamp",'
        '"value":"2024-01-02T03:04:05.5Z"}}',
        '{"st":{"x":18446744073709551615}}',
        '{"customName":"via json_name","renamed":"ignored-later"}',
        # Strings that look like grit's internal mark for big numbers.
        '{"renamed":"\\u0000#5","kitchen":{"u64":18446744073709551615,'
        '"text":"\\u0000\\u0000#7"}}',
    ]
    for text in good:
        r = grit("call", "--protoset", ARGS.wkt_set, "--data-json", text,
                 ARGS.refl.target, "grit.test.Echo.EchoWkt")
        check_rc(r, 0)
        want = json.loads(json_format.MessageToJson(
            json_format.Parse(text, pb.Wkt()), indent=None))
        check(json.loads(r.out) == want,
              "%s:%s" % (text, diff(json.loads(r.out), want)), r)
    bad = [
        ('{"kitchen":{"i64":9223372036854775808}}', "$.kitchen.i64"),
        ('{"kitchen":{"u64":-1}}', "$.kitchen.u64"),
        ('{"kitchen":{"text":18446744073709551615}}', "$.kitchen.text"),
        ('{"mask":"foo_bar"}', "$.mask"),
        ('{"any":{"name":"x"}}', "$.any"),
        ('{"any":{"@type":"type.googleapis.com/nope.Nope"}}', "nope.Nope"),
        ('{"any":{"@type":"type.googleapis.com/google.protobuf.Duration",'
         '"seconds":1}}', "$.any"),
        ('{"st":[1]}', "$.st"),
        ('{"list":{}}', "$.list"),
    ]
    for text, where in bad:
        r = grit("call", "--protoset", ARGS.wkt_set, "--data-json", text,
                 ARGS.refl.target, "grit.test.Echo.EchoWkt")
        check_rc(r, 2)
        check(where in r.err, "error for %s names %r" % (text, where), r)
        check(r.out == "", "nothing on stdout", r)


def any_by_reflection():
    """An Any packing a type from a file the method's files do not import
    (grit.extra.Extra): grit asks reflection for it, both ways; from a
    protoset that lacks it, the response shows it raw ({"@type",
    "@value"}) and a request naming it is an error naming the type."""
    extra = {"@type": "type.googleapis.com/grit.extra.Extra",
             "note": "packed by the server", "n": 7}
    r = grit("call", "--data-json", '{"customName":"pack-extra"}',
             ARGS.refl.target, "grit.test.Echo.EchoWkt")
    check_rc(r, 0)
    check(json.loads(r.out)["any"] == extra, "resolved by reflection", r)
    r = grit("call", "--protoset", ARGS.wkt_set, "--data-json",
             '{"customName":"pack-extra"}', ARGS.refl.target,
             "grit.test.Echo.EchoWkt")
    check_rc(r, 0)
    raw = json.loads(r.out)["any"]
    check(raw["@type"] == extra["@type"] and
          base64.b64decode(raw["@value"]) ==
          b"\x0a\x14packed by the server\x10\x07", "raw form %r" % raw, r)
    # The raw form reads back: the same bytes go out and come back.
    r = grit("call", "--protoset", ARGS.wkt_set, "--data-json",
             json.dumps({"any": raw}), ARGS.refl.target,
             "grit.test.Echo.EchoWkt")
    check_rc(r, 0)
    check(json.loads(r.out)["any"] == raw, "raw round trip", r)
    # Requests: reflection loads the type the Any names.
    req = {"any": dict(extra, note="from grit")}
    r = grit("call", "--data-json", json.dumps(req), ARGS.refl.target,
             "grit.test.Echo.EchoWkt")
    check_rc(r, 0)
    check(json.loads(r.out) == req, "request Any by reflection", r)
    r = grit("call", "--protoset", ARGS.wkt_set, "--data-json",
             json.dumps(req), ARGS.refl.target, "grit.test.Echo.EchoWkt")
    check_rc(r, 2)
    check("grit.extra.Extra, is not in the descriptors" in r.err,
          "names the missing type", r)


def emit_defaults():
    """--emit-defaults = json_format's including_default_value_fields."""
    from google.protobuf import json_format
    for typ, method in (("Kitchen", "Echo"), ("Wkt", "EchoWkt")):
        r = grit("call", "--emit-defaults", "--data-json", "{}",
                 ARGS.refl.target, "grit.test.Echo." + method)
        check_rc(r, 0)
        msg = getattr(ARGS.kitchen_pb2, typ)()
        if typ == "Kitchen":
            msg.server_note = "from the server"
        want = json.loads(json_format.MessageToJson(
            msg, including_default_value_fields=True, indent=None))
        check(json.loads(r.out) == want,
              "%s:%s" % (typ, diff(json.loads(r.out), want)), r)


def status_details():
    """Issue 29 part 2: grpc-status-details-bin decoded (every standard
    detail, an unknown one by its URL) in text on stderr and in --json;
    the exit status is 64 + the code."""
    r = grit("call", "--data-json", '{"code":9,"message":"no"}',
             ARGS.refl.target, "grit.test.Echo.Fail")
    check_rc(r, 64 + 9)
    check(r.out == "", "no response data on stdout", r)
    for line in (
            'status: FAILED_PRECONDITION (9) no',
            'status details: code 9, message "no", 10 details',
            'google.rpc.BadRequest {"fieldViolations":[{"field":"name",'
            '"description":"must not be empty"}]}',
            'google.rpc.ErrorInfo {"reason":"QUOTA_LOW","domain":'
            '"grit.test","metadata":{"zone":"z1"}}',
            'google.rpc.RetryInfo {"retryDelay":"2.500s"}',
            'google.rpc.QuotaFailure {"violations":[{"subject":"project:1",'
            '"description":"daily limit"}]}',
            'google.rpc.PreconditionFailure {"violations":[{"type":"TOS",'
            '"subject":"user","description":"terms not accepted"}]}',
            'google.rpc.ResourceInfo {"resourceType":"book",',
            'google.rpc.Help {"links":[{"description":"docs",',
            'google.rpc.LocalizedMessage {"locale":"fr-FR","message":'
            '"\u00e9chec"}',
            'google.rpc.DebugInfo {"stackEntries":["frame 1","frame 2"],'
            '"detail":"boom"}',
            '"type.googleapis.com/grit.test.Secret" (5 bytes, not a '
            'standard error detail)'):
        check(line in r.err, "stderr has %r" % line, r)
    r = grit("call", "--json", "--data-json", '{"code":5}', ARGS.refl.target,
             "grit.test.Echo.Fail")
    check_rc(r, 64 + 5)
    end = json.loads(r.out.splitlines()[-1])
    sd = end["status_details"]
    check(sd["code"] == 5 and len(sd["details"]) == 10, "details", r)
    types = [d["@type"].split("/")[-1] for d in sd["details"]]
    check(types == ["google.rpc." + t for t in (
        "BadRequest", "ErrorInfo", "RetryInfo", "QuotaFailure",
        "PreconditionFailure", "ResourceInfo", "Help", "LocalizedMessage",
        "DebugInfo")] + ["grit.test.Secret"], "detail types %r" % types, r)
    check(sd["details"][9] == {
        "@type": "type.googleapis.com/grit.test.Secret",
        "@value": base64.b64encode(b"\x0a\x03abc").decode()},
        "unknown detail by URL and bytes", r)
    check(sd["details"][2]["retryDelay"] == "2.500s", "RetryInfo", r)


def stdout_is_data():
    """`grit call ... | jq` without --json: stdout holds the responses
    only, one JSON value each; everything else is on stderr."""
    lines = ['{"text":"m%d"}' % i for i in range(3)]
    r = grit("call", "--show-headers", "--attempts", "--data-json", "-",
             ARGS.refl.target, "grit.test.Echo.EchoStream",
             stdin="".join(lines))
    check_rc(r, 0)
    got = [json.loads(l) for l in r.out.splitlines()]
    check([g["text"] for g in got] == ["m0", "m1", "m2"], "responses", r)
    for word in ("status: OK", "peer:", "latency:", "header grpc-accept-",
                 "attempt"):
        check(word in r.err, "stderr has %r" % word, r)


def json_stream_whitespace():
    """Issue 29 part 4: stdin JSON values with any whitespace (or none)
    between them, objects spanning lines included."""
    text = ('{"i32":1}{"i32":2}  \n\n\t{\n  "i32": 3,\n  "text": "}{"\n}\r\n'
            '{"i32":4}')
    r = grit("call", "--protoset", ARGS.kitchen_set, "--data-json", "-",
             ARGS.refl.target, "/grit.test.Echo/EchoStream", stdin=text)
    check_rc(r, 0)
    got = [json.loads(l) for l in r.out.splitlines()]
    check([g.get("i32") for g in got] == [1, 2, 3, 4], "four responses", r)
    check(got[2]["text"] == "}{", "braces inside strings", r)
    r = grit("call", "--protoset", ARGS.kitchen_set, "--data-json", "-",
             ARGS.refl.target, "/grit.test.Echo/EchoStream",
             stdin='{"i32":1} {"i32":')
    check_rc(r, 2)
    check("stdin message 2" in r.err, "the bad message is named", r)


def cardinality():
    """Issue 29 part 5: a unary (or server-streaming) method given two
    messages is a usage error naming its kind, nothing sent; empty stdin
    sends {}."""
    r = grit("call", "--data-json", '{"i32":1}', "--data-json", '{"i32":2}',
             ARGS.refl.target, "grit.test.Echo.Echo")
    check_rc(r, 2)
    check("is a unary method: it takes one request message, got 2" in r.err,
          "names the kind", r)
    check(r.out == "", "nothing sent", r)
    r = grit("call", "--data-json", "-", ARGS.refl.target,
             "grit.test.Echo.Echo", stdin='{"i32":1}\n{"i32":2}\n')
    check_rc(r, 2)
    check("unary method" in r.err, "stdin counted", r)
    r = grit("call", "--data-json", "-", ARGS.refl.target,
             "grpc.testing.TestService.StreamingOutputCall",
             stdin='{} {}')
    check_rc(r, 2)
    check("is a server-streaming method" in r.err, "server streaming", r)
    r = grit("call", "--data-json", "-", ARGS.refl.target,
             "grit.test.Echo.Echo", stdin="")
    check_rc(r, 0)
    check(json.loads(r.out) == {"serverNote": "from the server"},
          "empty stdin sends {}", r)


def discovery():
    """Issue 29 part 4: list SERVICE, describe with a leading dot, fields
    (json_name shown) and enum values, --template that sends back."""
    r = grit("list", ARGS.refl.target, "grit.test.Echo")
    check_rc(r, 0)
    check(r.out.split() == ["grit.test.Echo." + m for m in (
        "Echo", "EchoStream", "EchoWkt", "Fail")], "methods", r)
    r = grit("list", "--protoset", ARGS.wkt_set, ".grit.test.Echo")
    check_rc(r, 0)
    check("grit.test.Echo.EchoWkt" in r.out.split(), "from a protoset", r)
    r = grit("list", ARGS.refl.target, "grit.test.Nope")
    check_rc(r, 1)
    r = grit("describe", ARGS.refl.target, ".grit.test.Wkt")
    check_rc(r, 0)
    check('string renamed = 22 [json_name = "customName"];' in r.out,
          "json_name shown", r)
    r = grit("describe", ARGS.refl.target, "grit.test.Wkt.renamed")
    check_rc(r, 0)
    check(r.out == "grit.test.Wkt.renamed is a field of grit.test.Wkt:\n"
          'string renamed = 22 [json_name = "customName"];\n', "field", r)
    r = grit("describe", "--protoset", ARGS.kitchen_set, "grit.test.Color.RED")
    check_rc(r, 0)
    check("RED = 1;" in r.out, "enum value", r)
    r = grit("describe", ARGS.refl.target, ".grit.test.GREEN")
    check_rc(r, 0)
    check(r.out == "grit.test.GREEN is a value of enum grit.test.Color:\n"
          "GREEN = 2;\n", "enum value by its full name", r)
    r = grit("describe", "--template", ARGS.refl.target,
             "grit.test.Echo.Echo")
    check_rc(r, 0)
    tmpl = json.loads(r.out)
    check(tmpl["inners"] == [{"name": "", "nums": [0]}] and
          tmpl["color"] == "COLOR_UNSPECIFIED" and
          tmpl["byId"] == {"0": {"name": "", "nums": [0]}} and
          tmpl["when"] == "1970-01-01T00:00:00Z" and
          "choiceText" in tmpl and "choiceNum" not in tmpl,
          "template %r" % tmpl, r)
    r = grit("call", "--data-json", json.dumps(tmpl), ARGS.refl.target,
             "grit.test.Echo.Echo")
    check_rc(r, 0)
    r = grit("describe", "--template", ARGS.refl.target, "grit.test.Wkt")
    check_rc(r, 0)
    r = grit("call", "--data-json", r.out, ARGS.refl.target,
             "grit.test.Echo.EchoWkt")
    check_rc(r, 0)


def reflection_deadline_metadata():
    """list/describe against reflection that never answers end at their
    deadline (--timeout; 10 s by default); reflection behind auth takes
    --metadata."""
    hang = Server([PYTHON, os.path.join(HERE, "refl_peer.py"), "hang"])
    try:
        for cmd in (["list"], ["describe"]):
            args = cmd + ["--timeout", "300", hang.target]
            if cmd == ["describe"]:
                args.append("grit.test.Echo")
            t0 = time.monotonic()
            r = grit(*args)
            check_rc(r, 1)
            check("DEADLINE_EXCEEDED" in r.err, "deadline named", r)
            check(time.monotonic() - t0 < CALL_TIMEOUT_S, "ended", r)
        t0 = time.monotonic()
        r = grit("list", hang.target)
        check_rc(r, 1)
        secs = time.monotonic() - t0
        check("DEADLINE_EXCEEDED" in r.err and 9.5 < secs,
              "default deadline 10 s (took %.1f s)" % secs, r)
    finally:
        hang.stop()
    auth = Server([PYTHON, os.path.join(HERE, "refl_peer.py"), "auth", "t0k"])
    try:
        r = grit("list", auth.target)
        check_rc(r, 1)
        check("UNAUTHENTICATED" in r.err, "refused without the token", r)
        r = grit("list", "--metadata", "authorization: Bearer t0k",
                 auth.target)
        check_rc(r, 0)
        check(r.out == "grit.test.Hidden\n", "listed with the token", r)
    finally:
        auth.stop()


def tls_flags():
    """Issue 29 part 3 against grpcio with certificates made now: mTLS
    with --cert/--key (each implying --tls), --servername, --insecure
    (warns), --max-recv, --connect-timeout; bad combinations exit 2."""
    certs = os.path.join(ARGS.tmp, "certs")
    g = subprocess.run([os.path.join(ARGS.peers, "gen_certs.sh"), certs],
                       capture_output=True, text=True, timeout=120)
    check(g.returncode == 0, "gen_certs.sh: " + g.stderr)
    c = lambda n: os.path.join(certs, n)  # noqa: E731
    srv = Server([PYTHON, os.path.join(ARGS.peers, "interop_server.py"),
                  "--port", "0", "--stub-dir",
                  os.path.join(ARGS.tmp, "grpcio-stubs"),
                  "--tls-cert", c("server.pem"), "--tls-key", c("server.key"),
                  "--tls-client-ca", c("ca.pem"), "--require-client-auth"])
    base = ["call", "--protoset", ARGS.interop_set]
    method = "/grpc.testing.TestService/UnaryCall"
    try:
        r = grit(*base, "--ca", c("ca.pem"), "--cert", c("client.pem"),
                 "--key", c("client.key"), "--servername",
                 "foo.test.google.fr", "--data-json", '{"responseSize":3}',
                 srv.target, method)
        check_rc(r, 0)
        check(json.loads(r.out) == {"payload": {"body": "AAAA"}}, "mTLS", r)
        # Without a client certificate the server refuses the handshake.
        r = grit(*base, "--ca", c("ca.pem"), "--data-json", "{}",
                 "--deadline", "5000", srv.target, method)
        check(r.rc == 64 + 14 or r.rc == 64 + 4, "no client cert fails", r)
        # --insecure: an untrusted server certificate is accepted, loudly.
        r = grit(*base, "--insecure", "--cert", c("client.pem"), "--key",
                 c("client.key"), "--data-json", "{}", srv.target, method)
        check_rc(r, 0)
        check("WARNING: --insecure" in r.err, "warns", r)
        # Without --insecure and without the CA: verification fails.
        r = grit(*base, "--cert", c("client.pem"), "--key", c("client.key"),
                 "--deadline", "5000", "--data-json", "{}", srv.target,
                 method)
        check(r.rc in (64 + 14, 64 + 4), "untrusted fails", r)
        # --servername names the certificate's host: a wrong one fails.
        r = grit(*base, "--ca", c("ca.pem"), "--cert", c("client.pem"),
                 "--key", c("client.key"), "--servername", "wrong.example",
                 "--deadline", "5000", "--data-json", "{}", srv.target,
                 method)
        check(r.rc in (64 + 14, 64 + 4), "wrong servername fails", r)
        # --max-recv: a 6 MiB response needs more than the 4 MiB default.
        big = ["--ca", c("ca.pem"), "--cert", c("client.pem"), "--key",
               c("client.key"), "--data-json",
               '{"responseSize":%d}' % (6 << 20)]
        r = grit(*base, *big, "--json", srv.target, method)
        check_rc(r, 64 + 8)
        r = grit(*base, *big, "--json", "--max-recv", str(7 << 20),
                 srv.target, method)
        check_rc(r, 0)
    finally:
        srv.stop()
    for bad in (["--cert", c("client.pem")], ["--key", c("client.key")],
                ["--max-recv", "x"], ["--connect-timeout", "0"]):
        r = grit(*base, *bad, "--data-json", "{}", "127.0.0.1:1", method)
        check_rc(r, 2)
    # --connect-timeout bounds a connection attempt to a peer that never
    # completes TLS (a listening socket nobody serves): the attempt fails
    # and the call (not wait-for-ready) ends UNAVAILABLE, long before its
    # 15 s deadline, which the 20 s default connect timeout would reach.
    import socket
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    try:
        r = grit(*base, "--tls", "--connect-timeout", "300", "--deadline",
                 "15000", "--data-json", "{}",
                 "ipv4:127.0.0.1:%d" % ls.getsockname()[1], method)
        check_rc(r, 64 + 14)
    finally:
        ls.close()


def cpp_call_credentials():
    """Issue 25 against the gRPC C++ server over TLS (certificates made
    now): --token-file's token arrives as authorization on every call, the
    one the file holds when the call is made; cleartext is refused."""
    certs = os.path.join(ARGS.tmp, "cpp-certs")
    g = subprocess.run([os.path.join(ARGS.peers, "gen_certs.sh"), certs],
                       capture_output=True, text=True, timeout=120)
    check(g.returncode == 0, "gen_certs.sh: " + g.stderr)
    c = lambda n: os.path.join(certs, n)  # noqa: E731
    tok = os.path.join(ARGS.tmp, "cpp-token")
    srv = Server([os.path.join(ARGS.work, "reflection_server"), "--port", "0",
                  "--tls-cert", c("server.pem"), "--tls-key", c("server.key")])
    method = "/grpc.testing.TestService/UnaryCall"
    try:
        for text, want in (("tok-one\n", "Bearer tok-one"),
                           (" tok-two ", "Bearer tok-two")):
            with open(tok, "w") as f:
                f.write(text)
            r = grit("call", "--protoset", ARGS.interop_set, "--ca",
                     c("ca.pem"), "--token-file", tok, "--data-json",
                     '{"fillUsername":true}', srv.target, method)
            check_rc(r, 0)
            check(json.loads(r.out).get("username") == want,
                  "the server saw %r" % want, r)
            check("tok-" not in r.err, "the token is not printed", r)
    finally:
        srv.stop()
    plain = Server([os.path.join(ARGS.work, "reflection_server"), "--port",
                    "0"])
    try:
        r = grit("call", "--protoset", ARGS.interop_set, "--token-file", tok,
                 "--data-json", '{"fillUsername":true}', plain.target, method)
        check_rc(r, 64 + 16)
        check("secure channel" in r.err, "cleartext refused", r)
    finally:
        plain.stop()


CASES = [unary_protoset, unary_reflection, proto_files, kitchen_round_trip,
         kitchen_stream, request_errors, list_services, describe_symbols,
         grpcio_without_reflection, wkt_round_trip, wkt_parse_forms,
         any_by_reflection, emit_defaults, status_details, stdout_is_data,
         json_stream_whitespace, cardinality, discovery,
         reflection_deadline_metadata, tls_flags, cpp_call_credentials]


def on_sigterm(signum, frame):
    raise SystemExit("killed by signal %d" % signum)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--grit", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--case", action="append",
                    help="run only this case (repeatable)")
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
                if ARGS.case and case.__name__ not in ARGS.case:
                    continue
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
