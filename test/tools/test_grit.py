#!/usr/bin/env python3
"""Tests of the grit command (tools/): run the built binary and check its
exit status, stdout and stderr.

  test_grit.py --grit PATH --h2server PATH --peers DIR GROUP

GROUP is one of: call, json, grpcio, config, usage, demo. Servers are real
and local: h2server's grit-h2server, and for 'grpcio' the Debian
grpcio peer test/peers/retry_server.py (run with /usr/bin/python3, as
test/behaviour/pypeer.h does). Both bind 127.0.0.1 on an ephemeral port.
Every child runs under a timeout and is stopped on the way out, also when
meson's timeout sends SIGTERM; a child gets SIGTERM if this script dies.

Exit status: 0 all cases passed, 1 a case failed, 77 every case skipped.
"""

import re
import argparse
import base64
import ctypes
import json
import os
import select
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback

PYPEER_PYTHON = "/usr/bin/python3"
CALL_TIMEOUT_S = 20  # bound on one grit run that should end by itself
START_TIMEOUT_S = 20  # bound on a server printing its port

ARGS = None


class Skip(Exception):
    pass


def die_with_parent():
    """In the child: SIGTERM when this script exits (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def fmt(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b)


class Result:
    def __init__(self, argv, rc, out, err, secs):
        self.argv, self.rc, self.out, self.err, self.secs = (argv, rc, out,
                                                             err, secs)

    def __str__(self):
        return "grit %s\n  exit %s after %.2fs\n  stdout: %r\n  stderr: %r" % (
            " ".join(fmt(a) for a in self.argv), self.rc, self.secs,
            fmt(self.out), fmt(self.err))


def grit_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("GRIT_")}


def grit(*argv, timeout=CALL_TIMEOUT_S, stdin=None, env=None):
    """Run grit with |argv| (str or bytes) and |stdin| (bytes; None: an
    empty stdin), GRIT_* variables removed and |env| added; a run past
    |timeout| fails."""
    t0 = time.monotonic()
    try:
        p = subprocess.run([ARGS.grit] + list(argv),
                           stdin=None if stdin is not None else
                           subprocess.DEVNULL, input=stdin,
                           capture_output=True, timeout=timeout,
                           env=dict(grit_env(), **(env or {})),
                           preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("grit %s: still running after %ss (killed)\n"
                             "  stdout: %r" % (" ".join(fmt(a) for a in argv),
                                               timeout, fmt(e.stdout or b"")))
    return Result(argv, p.returncode, p.stdout, p.stderr,
                  time.monotonic() - t0)


def check(cond, what, res=None):
    if not cond:
        raise AssertionError(what + ("\n" + str(res) if res else ""))


def check_eq(actual, expected, what, res=None):
    check(actual == expected,
          "%s: expected %r, got %r" % (what, expected, actual), res)


def check_rc(res, rc):
    check_eq(res.rc, rc, "exit status", res)


def check_in(needle, hay, what, res=None):
    check(needle in hay, "%s: %r not in %r" % (what, needle, hay), res)


def check_not_in(needle, hay, what, res=None):
    check(needle not in hay, "%s: %r in %r" % (what, needle, hay), res)


def out(res):
    return res.out.decode("utf-8", "replace")


def err(res):
    return res.err.decode("utf-8", "replace")


def json_lines(res):
    """stdout as JSON lines: UTF-8 (RFC 8259 §8.1), every line an object,
    nothing else."""
    try:
        text = res.out.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AssertionError("stdout is not UTF-8 (%s)\n%s" % (e, res))
    check(text.endswith("\n"), "stdout must end in a newline", res)
    objs = []
    for i, line in enumerate(text.split("\n")[:-1]):
        try:
            objs.append(json.loads(line))
        except ValueError as e:
            raise AssertionError("stdout line %d is not JSON (%s): %r\n%s" %
                                 (i + 1, e, line, res))
        check(isinstance(objs[-1], dict), "line %d is not an object" % (i + 1),
              res)
    return objs


def end_line(res):
    """The JSON line that ends the (only) call: the one with "code"."""
    ends = [o for o in json_lines(res) if "code" in o]
    check_eq(len(ends), 1, "lines with a status", res)
    return ends[0]


# ---- servers ----


def read_line(proc, timeout):
    """The child's first stdout line, within |timeout| seconds."""
    end = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        left = end - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            break
        r, _, _ = select.select([proc.stdout], [], [], min(left, 0.2))
        if r:
            chunk = os.read(proc.stdout.fileno(), 256)
            if not chunk:
                break
            buf += chunk
    return buf.decode("utf-8", "replace")


def stop(proc):
    if proc.stdin:
        proc.stdin.close()
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if proc.stdout:
        proc.stdout.close()


class H2Server:
    """grit-h2server with script steps (--action), ephemeral port."""

    def __init__(self, *actions):
        cmd = [ARGS.h2server, "--host", "127.0.0.1", "--port", "0"]
        for a in actions:
            cmd += ["--action", a]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     preexec_fn=die_with_parent)
        line = read_line(self.proc, START_TIMEOUT_S)
        if not line.startswith("listening 127.0.0.1:"):
            stop(self.proc)
            raise AssertionError("grit-h2server did not start: %r" % line)
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.target = "ipv4:127.0.0.1:%d" % self.port
        self.peer = "127.0.0.1:%d" % self.port

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop(self.proc)


class GrpcioPeer:
    """test/peers/retry_server.py under Debian's grpcio; exits when its
    stdin closes, so it cannot outlive this script."""

    def __init__(self, script, *args):
        if not os.access(PYPEER_PYTHON, os.X_OK) or subprocess.run(
                [PYPEER_PYTHON, "-c", "import grpc"], capture_output=True,
                timeout=CALL_TIMEOUT_S).returncode != 0:
            raise Skip("no grpcio for %s" % PYPEER_PYTHON)
        self.proc = subprocess.Popen(
            [PYPEER_PYTHON, os.path.join(ARGS.peers, script)] + list(args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            preexec_fn=die_with_parent)
        line = read_line(self.proc, START_TIMEOUT_S)
        if not line.startswith("PORT "):
            stop(self.proc)
            raise AssertionError("%s gave no port: %r" % (script, line))
        self.port = int(line.split()[1])
        self.target = "ipv4:127.0.0.1:%d" % self.port

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop(self.proc)


def write_tmp(text, suffix=".json"):
    f = tempfile.NamedTemporaryFile("w", suffix=suffix, dir=ARGS.tmp,
                                    delete=False)
    f.write(text)
    f.close()
    return f.name


# Scripted answers, by method (each step repeats forever).
BIN_TRAILERS = ("path=/pkg.Svc/Bin repeat=* trailer=x-blob-bin:AP/+ "
                "trailer=x-one-bin:AQ trailer=x-txt:hi")
FAIL = ("path=/pkg.Svc/Fail repeat=* trailers_only status=NOT_FOUND "
        "message=caf%C3%A9%20not%20here")
HANG = "path=/pkg.Svc/Hang repeat=* hang"
FLAKY = "path=/pkg.Svc/Flaky trailers_only status=UNAVAILABLE"

TIMEOUT_CONFIG = ('{"methodConfig":[{"name":[{"service":"pkg.Svc"}],'
                  '"timeout":"0.2s"}]}')
RETRY_CONFIG = ('{"methodConfig":[{"name":[{"service":"%s"}],'
                '"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s",'
                '"maxBackoff":"0.01s","backoffMultiplier":1,'
                '"retryableStatusCodes":["UNAVAILABLE"]}}]}')

# ---- group 'call': plain output against grit-h2server ----


def call_unary_ok():
    with H2Server() as s:
        r = grit("call", "--data", "68656c6c6f", s.target, "/pkg.Svc/Echo")
        check_rc(r, 0)
        # Issue 29: response data on stdout, the status on stderr.
        check_eq(out(r), "response (5 bytes): 68656c6c6f\n", "stdout", r)
        lines = err(r).splitlines()
        check_eq(len(lines), 3, "stderr lines", r)
        check_eq(lines[0], "status: OK (0)", "status line", r)
        check_eq(lines[1], "peer: " + s.peer, "peer line", r)
        check(lines[2].startswith("latency: ") and lines[2].endswith(" us"),
              "latency line", r)
        path = write_tmp("hello", suffix=".bin")
        r = grit("call", "--data", "@" + path, s.target, "/pkg.Svc/Echo")
        check_rc(r, 0)
        check_in("response (5 bytes): 68656c6c6f\n", out(r), "--data @FILE",
                 r)


def call_ca_implies_tls():
    """SPEC AP-05 (issue 23): --ca is TLS material and implies --tls. Against
    a cleartext server the call fails in the TLS handshake; nothing is sent
    in clear."""
    if not shutil.which("openssl"):
        raise Skip("no openssl")
    key = os.path.join(ARGS.tmp, "ca.key")
    pem = os.path.join(ARGS.tmp, "ca.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-keyout", key, "-out", pem, "-days", "1",
                    "-subj", "/CN=grit test CA"], capture_output=True,
                   check=True, timeout=CALL_TIMEOUT_S)
    with H2Server() as s:
        r = grit("call", "--ca", pem, s.target, "/pkg.Svc/Echo")
        check_rc(r, 64 + 14)  # UNAVAILABLE, as grpcurl's 64 + code
        check_in("UNAVAILABLE", err(r), "status", r)
        check_in("TLS handshake failed", err(r), "TLS, not cleartext", r)
        # --authority alone stays cleartext (the name override is TLS
        # material only when TLS is on).
        r = grit("call", "--authority", "x.test", s.target, "/pkg.Svc/Echo")
        check_rc(r, 0)


def call_non_ok_status():
    with H2Server(FAIL) as s:
        r = grit("call", s.target, "/pkg.Svc/Fail")
        check_rc(r, 64 + 5)  # issue 29: 64 + the code, as grpcurl
        check_eq(err(r).splitlines()[0], "status: NOT_FOUND (5) café not here",
                 "status line", r)
        check_eq(out(r), "", "no response data", r)


def call_deadline():
    with H2Server(HANG) as s:
        r = grit("call", "--deadline", "200", s.target, "/pkg.Svc/Hang")
        check_rc(r, 64 + 4)
        lines = err(r).splitlines()
        check(lines[0].startswith("status: DEADLINE_EXCEEDED (4)"),
              "DEADLINE_EXCEEDED expected", r)
        # Issue 19: the server got the call, so its peer shows.
        check_eq(lines[1], "peer: " + s.peer, "peer line", r)
        us = int(lines[2].split()[1])
        check(150000 <= us < CALL_TIMEOUT_S * 1000000,
              "latency %d us for a 200 ms deadline" % us, r)


def call_bin_trailers_base64():
    with H2Server(BIN_TRAILERS) as s:
        r = grit("call", s.target, "/pkg.Svc/Bin")
        check_rc(r, 0)
        text = err(r)
        check_in("trailer x-blob-bin: AP/+\n", text, "-bin trailer", r)
        check_in("trailer x-one-bin: AQ==\n", text, "padded -bin trailer", r)
        check_in("trailer x-txt: hi\n", text, "text trailer", r)


def call_metadata():
    # The test service echoes x-grpc-test-echo-trailing-bin as a trailer:
    # the raw bytes go out base64 on the wire and come back the same.
    value = b"\x01\xff\x80abc"
    with H2Server() as s:
        r = grit("call", "--metadata",
                 "x-grpc-test-echo-trailing-bin:" +
                 base64.b64encode(value).decode(), "--metadata",
                 "x-grpc-test-echo-initial:hello", s.target,
                 "/grpc.testing.TestService/EmptyCall")
        check_rc(r, 0)
        check_in(
            "trailer x-grpc-test-echo-trailing-bin: %s\n" %
            base64.b64encode(value).decode(), err(r), "echoed metadata", r)
        r = grit("call", "--metadata", "Bad Key:v", s.target, "/pkg.Svc/Echo")
        check_rc(r, 2)
        check_in("--metadata 'bad key': not a valid key", err(r), "message",
                 r)
        r = grit("call", "--metadata", "novalue", s.target, "/pkg.Svc/Echo")
        check_rc(r, 2)
        check_in("--metadata wants 'key: value'", err(r), "message", r)


def call_service_config_forms():
    # The config's 0.2 s timeout is the only deadline: the call ends
    # DEADLINE_EXCEEDED only if the config was read and applied.
    path = write_tmp(TIMEOUT_CONFIG)
    forms = {
        "plain path": path,
        "@path": "@" + path,
        "inline": TIMEOUT_CONFIG,
        "inline after blanks": "\n  " + TIMEOUT_CONFIG,
    }
    with H2Server(HANG) as s:
        for name, arg in forms.items():
            r = grit("call", "--service-config", arg, s.target,
                     "/pkg.Svc/Hang")
            check_rc(r, 64 + 4)
            check(
                err(r).startswith("status: DEADLINE_EXCEEDED (4)"),
                "--service-config as %s: timeout not applied" % name, r)
        missing = os.path.join(ARGS.tmp, "no-such-config.json")
        r = grit("call", "--service-config", missing, s.target,
                 "/pkg.Svc/Hang")
        check_rc(r, 2)
        check_eq(err(r),
                 "grit: cannot open %s: No such file or directory\n" % missing,
                 "stderr", r)
        r = grit("call", "--service-config",
                 '{"methodConfig":[{"name":[{}],"timeout":"1"}]}', s.target,
                 "/pkg.Svc/Hang")
        check_rc(r, 2)
        check_in("$.methodConfig[0].timeout", err(r), "problem path", r)


def call_count_summary():
    with H2Server(FAIL) as s:
        r = grit("call", "--count", "4", "--concurrency", "2", s.target,
                 "/pkg.Svc/Echo")
        check_rc(r, 0)
        lines = out(r).splitlines()
        check_eq(len(lines), 2, "summary lines", r)
        check(lines[0].startswith("calls=4 ok=4 failed={} qps="), "summary",
              r)
        check_eq(lines[1], "peers: %s=4" % s.peer, "peers line", r)
        r = grit("call", "--count", "2", s.target, "/pkg.Svc/Fail")
        check_rc(r, 64 + 5)
        check(out(r).startswith("calls=2 ok=0 failed={NOT_FOUND:2} "),
              "summary", r)


def call_round_robin_peers():
    # Issue 4: the per-peer counts of --count show round_robin's spread.
    # Each answer takes 25 ms, so the 40 calls last a second: time for
    # the second backend to connect, even on a loaded machine (unslowed,
    # 100 calls were seen to finish before it did).
    slow = "path=/pkg.Svc/Echo repeat=* delay=25"
    with H2Server(slow) as a, H2Server(slow) as b:
        target = "ipv4:127.0.0.1:%d,127.0.0.1:%d" % (a.port, b.port)
        r = grit("call", "--count", "40", "--service-config",
                 '{"loadBalancingConfig":[{"round_robin":{}}]}', target,
                 "/pkg.Svc/Echo")
        check_rc(r, 0)
        lines = out(r).splitlines()
        check_eq(len(lines), 2, "summary lines", r)
        check(lines[1].startswith("peers: "), "peers line", r)
        counts = dict(kv.rsplit("=", 1) for kv in lines[1][7:].split())
        check_eq(sorted(counts), sorted([a.peer, b.peer]), "peers", r)
        check_eq(sum(int(v) for v in counts.values()), 40, "calls", r)
        # Strict alternation once both are READY; the first calls may
        # all go to the one that connected first.
        check(all(int(v) >= 5 for v in counts.values()), "spread", r)


def call_attempts_picked_by():
    # Issue 26: --attempts says which policy picked, and how where it
    # helps.
    with H2Server("path=/pkg.Svc/Echo repeat=*") as a, \
            H2Server("path=/pkg.Svc/Echo repeat=*") as b:
        target = "ipv4:127.0.0.1:%d,127.0.0.1:%d" % (a.port, b.port)
        r = grit("call", "--attempts", "--metadata", "x-user:alice",
                 "--service-config",
                 '{"loadBalancingConfig":[{"ring_hash_experimental":'
                 '{"requestHashHeader":"x-user"}}]}', target, "/pkg.Svc/Echo")
        check_rc(r, 0)
        check_in("      picked by ring_hash_experimental: header hash ",
                 err(r), "ring_hash", r)
        check_in(", ring entry ", err(r), "ring entry", r)
        r = grit("call", "--attempts", "--service-config",
                 '{"loadBalancingConfig":[{"least_request_experimental":{}}]}',
                 target, "/pkg.Svc/Echo")
        check_rc(r, 0)
        check_in("      picked by least_request_experimental: 0 outstanding "
                 "(best of 2)\n", err(r), "least_request", r)
        r = grit("call", "--json", "--attempts", "--service-config",
                 '{"loadBalancingConfig":[{"weighted_round_robin":{}}]}',
                 target, "/pkg.Svc/Echo")
        check_rc(r, 0)
        o = end_line(r)
        check_in("weighted_round_robin: round robin",
                 o["timeline"][0]["picked_by"], "wrr json", r)
        r = grit("call", "--attempts", target, "/pkg.Svc/Echo")
        check_rc(r, 0)
        check_in("      picked by pick_first\n", err(r), "pick_first", r)


def call_attempts_timeline():
    with H2Server(FLAKY) as s:
        r = grit("call", "--attempts", "--service-config",
                 RETRY_CONFIG % "pkg.Svc", s.target, "/pkg.Svc/Flaky")
        check_rc(r, 0)
        text = err(r)
        check_in("call 1: OK after 2 attempts (OK: ", text, "call line", r)
        lines = [l.split() for l in text.splitlines() if l.startswith("  #")]
        check_eq([l[:3] for l in lines],
                 [["#1", "first", s.peer], ["#2", "retry", s.peer]],
                 "timeline", r)
        check_in("UNAVAILABLE", " ".join(lines[0]), "first attempt", r)



# Issue 19 point 6: the command as a newcomer meets it.

METHOD_FORMS_ERR = ("grit: malformed method '%s': use /pkg.Service/Method, "
                    "pkg.Service/Method or pkg.Service.Method\n")


def call_method_forms():
    # grpcurl's three forms reach the same method: only /pkg.Svc/Named is
    # scripted to answer "named".
    with H2Server("path=/pkg.Svc/Named repeat=* text=named") as s:
        for form in ("/pkg.Svc/Named", "pkg.Svc/Named", "pkg.Svc.Named"):
            r = grit("call", s.target, form)
            check_rc(r, 0)
            check_eq(out(r).splitlines()[0], "response (5 bytes): 6e616d6564",
                     "response of " + form, r)
        for bad in ("pkg", "/pkg.Svc/", "pkg.Svc/", "/a/b/c", ".Named",
                    "pkg.Svc.", "", "/", "pkg.Svc/Na med", "pkg/Svc/M",
                    s.target):
            r = grit("call", s.target, bad)
            check_rc(r, 2)
            check_eq(err(r), METHOD_FORMS_ERR % bad, "stderr", r)
            check_eq(out(r), "", "stdout", r)


ECHO_EMPTY = "/grpc.testing.TestService/EmptyCall"


def call_metadata_values():
    with H2Server() as s:
        # Blanks around the value are not part of it (HTTP/2 forbids them
        # at either end); the key is lower-cased; a -bin value is base64
        # (the echoed bytes 00 ff fe print back as AP/+).
        r = grit("call", "--show-headers", "--metadata",
                 "X-Grpc-Test-Echo-Initial: \t hi  there \t", "--metadata",
                 "x-grpc-test-echo-trailing-bin:  AP/+ ", s.target,
                 ECHO_EMPTY)
        check_rc(r, 0)
        check_in("header x-grpc-test-echo-initial: hi  there\n", err(r),
                 "trimmed value", r)
        check_in("trailer x-grpc-test-echo-trailing-bin: AP/+\n", err(r),
                 "base64 value", r)
        # URL-safe and unpadded base64 too, as grpcurl takes them.
        for value, shown in (("AP_-", "AP/+"), ("AQ", "AQ=="), ("", "")):
            r = grit("call", "--metadata",
                     "x-grpc-test-echo-trailing-bin:" + value, s.target,
                     ECHO_EMPTY)
            check_rc(r, 0)
            check_in("trailer x-grpc-test-echo-trailing-bin: %s\n" % shown,
                     err(r), "base64 form %r" % value, r)
        # Values HTTP/2 forbids are usage errors naming the key.
        for arg, msg in (
                ("x-a-bin: not base64!",
                 "grit: --metadata 'x-a-bin': a -bin value must be base64\n"),
                ("x-a-bin: AQ=A", "grit: --metadata 'x-a-bin': a -bin value "
                 "must be base64\n"),
                ("x-a: a\x01b", "grit: --metadata 'x-a': byte 0x01 at 1 is "
                 "not allowed in a value (printable ASCII only; use a -bin "
                 "key for bytes)\n"),
                ("x-a:  caf\u00e9", "grit: --metadata 'x-a': byte 0xc3 at 3 "
                 "is not allowed in a value (printable ASCII only; use a "
                 "-bin key for bytes)\n")):
            r = grit("call", "--metadata", arg, s.target, ECHO_EMPTY)
            check_rc(r, 2)
            check_eq(err(r), msg, "stderr", r)


def call_server_stream():
    # Every response of a server stream prints, in order (a line each
    # with --json), then the status.
    with H2Server("path=/pkg.Svc/Stream repeat=* text=abc count=3") as s:
        r = grit("call", s.target, "pkg.Svc.Stream")
        check_rc(r, 0)
        check_eq(out(r).splitlines(), ["response (3 bytes): 616263"] * 3,
                 "responses", r)
        check_eq(err(r).splitlines()[0], "status: OK (0)", "status", r)
        r = grit("call", "--json", s.target, "pkg.Svc.Stream")
        check_rc(r, 0)
        objs = json_lines(r)
        check_eq(len(objs), 4, "lines", r)
        check_eq(objs[:3], [{"response": "616263"}] * 3, "response lines", r)
        check_eq((objs[3]["code_name"], objs[3]["responses"]), ("OK", 3),
                 "end line", r)


def call_several_messages():
    # The test server echoes each request message: the responses show
    # which messages went out, in order.
    path = write_tmp("file", suffix=".bin")
    with H2Server() as s:
        r = grit("call", "--data", "01", "--data", "", "--data", "0a 0B",
                 s.target, "/pkg.Svc/Echo")
        check_rc(r, 0)
        check_eq(out(r).splitlines(), [
            "response (1 bytes): 01", "response (0 bytes): ",
            "response (2 bytes): 0a0b"], "responses", r)
        # --data -: one message per stdin line, in --data's forms; an
        # empty line is an empty message; CRLF and a last line without a
        # newline count.
        r = grit("call", "--data", "ff", "--data", "-", s.target,
                 "/pkg.Svc/Echo",
                 stdin=b"01 02\n\n@" + path.encode() + b"\r\n0a")
        check_rc(r, 0)
        check_eq(out(r).splitlines(), [
            "response (1 bytes): ff", "response (2 bytes): 0102",
            "response (0 bytes): ", "response (4 bytes): 66696c65",
            "response (1 bytes): 0a"], "responses", r)
        r = grit("call", "--data", "-", s.target, "/pkg.Svc/Echo", stdin=b"")
        check_rc(r, 0)
        check_eq(out(r), "", "no message", r)
        check_eq(err(r).splitlines()[0], "status: OK (0)", "status", r)
        # A line that does not decode: a usage error naming the line; the
        # call is cancelled.
        r = grit("call", "--data", "-", s.target, "/pkg.Svc/Echo",
                 stdin=b"01\nzz\n")
        check_rc(r, 2)
        check_in("grit: stdin line 2 is not hex", err(r), "stderr", r)
        # --count runs unary calls: one message each, no headers.
        for extra in (["--data", "01", "--data", "02"], ["--data", "-"],
                      ["--show-headers"]):
            r = grit("call", "--count", "2", *extra, s.target,
                     "/pkg.Svc/Echo")
            check_rc(r, 2)
            check_in("--count N makes unary calls", err(r), "stderr", r)


def call_stdin_live():
    # A bidi stream driven from stdin: each response prints while stdin
    # is still open (the server answers each message as it comes).
    with H2Server("path=/pkg.Svc/Chat repeat=* at_headers") as s:
        p = subprocess.Popen(
            [ARGS.grit, "call", "--data", "-", s.target, "/pkg.Svc/Chat"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=grit_env(),
            preexec_fn=die_with_parent)
        try:
            for msg, want in ((b"01\n", "response (1 bytes): 01\n"),
                              (b"0203\n", "response (2 bytes): 0203\n")):
                p.stdin.write(msg)
                p.stdin.flush()
                check_eq(read_line(p, CALL_TIMEOUT_S), want,
                         "response before end of stdin")
            rest, errs = p.communicate(timeout=CALL_TIMEOUT_S)  # closes stdin
            check_eq(p.returncode, 0, "exit status")
            check_eq(rest, b"", "no more responses")
            check(errs.startswith(b"status: OK (0)\n"), "status: %r" % errs)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    # A call that ends while stdin is open and silent does not wait for it
    # (the server answers at the request's headers).
    with H2Server("path=/pkg.Svc/Fail repeat=* at_headers trailers_only "
                  "status=NOT_FOUND") as s:
        p = subprocess.Popen(
            [ARGS.grit, "call", "--data", "-", s.target, "/pkg.Svc/Fail"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=grit_env(),
            preexec_fn=die_with_parent)
        try:
            try:
                p.wait(CALL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise AssertionError("grit waited for stdin after the call "
                                     "ended")
            check_eq(p.returncode, 64 + 5, "exit status")
            check(p.stderr.read().startswith(b"status: NOT_FOUND (5)"),
                  "status")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdin.close()
            p.stderr.close()


def call_show_headers():
    hdrs = ("path=/pkg.Svc/Hdr repeat=* header=x-h:one header=x-h-bin:AP/+ "
            "trailer=x-t:two trailer=x-m:1 trailer=x-m:2")
    with H2Server(hdrs, FAIL) as s:
        r = grit("call", s.target, "/pkg.Svc/Hdr")
        check_rc(r, 0)
        check("header " not in err(r), "no headers without the flag", r)
        r = grit("call", "--show-headers", s.target, "/pkg.Svc/Hdr")
        check_rc(r, 0)
        check_eq(out(r), "response (0 bytes): \n", "stdout", r)
        lines = err(r).splitlines()
        check_eq(lines[:2], ["header x-h: one", "header x-h-bin: AP/+"],
                 "headers first", r)
        check_eq(lines[-3:], ["trailer x-t: two", "trailer x-m: 1",
                              "trailer x-m: 2"], "trailers", r)
        r = grit("call", "--json", "--show-headers", s.target, "/pkg.Svc/Hdr")
        check_rc(r, 0)
        objs = json_lines(r)
        check_eq(objs[0], {"headers": {"x-h": "one", "x-h-bin": "AP/+"}},
                 "headers line", r)
        # A repeated key: one member, an array (never a duplicate key).
        check_eq(objs[-1]["trailers"], {"x-t": "two", "x-m": ["1", "2"]},
                 "trailers", r)
        check('"x-m"' in out(r) and out(r).count('"x-m"') == 1,
              "one x-m key", r)
        # Trailers-Only: no headers, the trailers still show.
        r = grit("call", "--json", "--show-headers", s.target,
                 "/pkg.Svc/Fail")
        check_rc(r, 64 + 5)
        check_eq(json_lines(r)[0], {"headers": {}}, "no headers", r)


# ---- group 'json': --json output is JSON lines only ----


def json_single_call():
    with H2Server() as s:
        r = grit("call", "--json", "--data", "0102 ff", s.target,
                 "/pkg.Svc/Echo")
        check_rc(r, 0)
        objs = json_lines(r)
        check_eq(len(objs), 2, "lines: the response, the end", r)
        check_eq(objs[0], {"response": "0102ff"}, "response line", r)
        o = objs[1]
        for k, v in {"code": 0, "code_name": "OK", "message": "",
                     "peer": s.peer, "call_id": 1, "attempts": 1,
                     "transparent_retries": 0, "hedges": 0,
                     "backoff_ms": 0, "reason": "OK", "responses": 1,
                     "trailers": {}}.items():
            check_eq(o.get(k), v, k, r)
        check(isinstance(o["latency_us"], int), "latency_us", r)
        check_eq(err(r), "", "stderr", r)


def json_non_ok_status():
    with H2Server(FAIL) as s:
        r = grit("call", "--json", s.target, "/pkg.Svc/Fail")
        check_rc(r, 64 + 5)
        o = json_lines(r)[0]
        check_eq((o["code"], o["code_name"], o["message"]),
                 (5, "NOT_FOUND", "café not here"), "status", r)


def json_bin_metadata_base64():
    value = b"\xfe\xff\x10 binary\x7f"  # argv cannot carry a NUL
    with H2Server(BIN_TRAILERS) as s:
        r = grit("call", "--json", s.target, "/pkg.Svc/Bin")
        check_rc(r, 0)
        t = end_line(r)["trailers"]
        check_eq(t, {"x-blob-bin": "AP/+", "x-one-bin": "AQ==",
                     "x-txt": "hi"}, "trailers", r)
        check_eq(base64.b64decode(t["x-blob-bin"], validate=True),
                 b"\x00\xff\xfe", "decoded", r)
        r = grit("call", "--json", "--metadata",
                 "x-grpc-test-echo-trailing-bin:" +
                 base64.b64encode(value).decode(), s.target,
                 "/grpc.testing.TestService/EmptyCall")
        check_rc(r, 0)
        got = end_line(r)["trailers"]["x-grpc-test-echo-trailing-bin"]
        check_eq(got, base64.b64encode(value).decode(), "base64 with padding",
                 r)
        check_eq(base64.b64decode(got, validate=True), value,
                 "echoed -bin value", r)


def json_count_summary():
    with H2Server(FAIL) as s:
        r = grit("call", "--json", "--count", "3", "--concurrency", "2",
                 s.target, "/pkg.Svc/Echo")
        check_rc(r, 0)
        objs = json_lines(r)
        check_eq(len(objs), 7, "lines: 3 calls (response, end) and the "
                 "summary", r)
        check_eq(sorted(o["call_id"] for o in objs[:6] if "code" in o),
                 [1, 2, 3], "call ids", r)
        # A call's response line comes right before its end line.
        for i in range(0, 6, 2):
            check_eq((objs[i], objs[i + 1]["responses"]),
                     ({"call_id": objs[i + 1]["call_id"], "response": ""}, 1),
                     "response then end", r)
        summ = objs[6].get("summary")
        check(isinstance(summ, dict), "last line is the summary", r)
        check_eq((summ["calls"], summ["ok"], summ["failed"], summ["peers"]),
                 (3, 3, {}, {s.peer: 3}), "summary", r)
        for k in ("qps", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"):
            check(isinstance(summ.get(k), (int, float)), k, r)
        check_eq(err(r), "", "stderr", r)
        r = grit("call", "--json", "--count", "2", s.target, "/pkg.Svc/Fail")
        check_rc(r, 64 + 5)
        objs = json_lines(r)
        check_eq(objs[-1]["summary"]["failed"], {"NOT_FOUND": 2}, "failed",
                 r)


def json_deadline_and_timeline():
    with H2Server(HANG, FLAKY) as s:
        r = grit("call", "--json", "--deadline", "100", s.target,
                 "/pkg.Svc/Hang")
        check_rc(r, 64 + 4)
        o = end_line(r)
        check_eq((o["code"], o["code_name"], o["reason"], o["peer"]),
                 (4, "DEADLINE_EXCEEDED", "DEADLINE", s.peer), "deadline",
                 r)
        r = grit("call", "--json", "--attempts", "--service-config",
                 RETRY_CONFIG % "pkg.Svc", s.target, "/pkg.Svc/Flaky")
        check_rc(r, 0)
        o = end_line(r)
        check_eq(o["attempts"], 2, "attempts", r)
        check_eq([(a["attempt"], a["kind"], a["code_name"])
                  for a in o["timeline"]],
                 [(1, "first", "UNAVAILABLE"), (2, "retry", "OK")],
                 "timeline", r)


# ---- group 'grpcio': against a real grpcio server ----


def grpcio_calls():
    key = "tools-%d" % os.getpid()
    with GrpcioPeer("retry_server.py") as p:
        r = grit("call", "--data", "6869", p.target, "/retry.Svc/Call")
        check_rc(r, 0)
        check_in("response (2 bytes): 6869\n", out(r), "echo", r)

        # Metadata steers the server: it fails the call as asked.
        md = ["--metadata", "x-call-key:%s-fail" % key, "--metadata",
              "x-fail:1", "--metadata", "x-code:PERMISSION_DENIED",
              "--metadata", "x-message:denied by test"]
        r = grit("call", *md, p.target, "/retry.Svc/Call")
        check_rc(r, 64 + 7)
        check_eq(err(r).splitlines()[0],
                 "status: PERMISSION_DENIED (7) denied by test", "status", r)
        # The optional blanks around a value are not sent (issue 19).
        md[-1] = "x-message:  \t denied by test \t "
        md[1] = "x-call-key:%s-fail2" % key
        r = grit("call", *md, p.target, "/retry.Svc/Call")
        check_rc(r, 64 + 7)
        check_eq(err(r).splitlines()[0],
                 "status: PERMISSION_DENIED (7) denied by test", "status", r)

        # A retry policy from a config file (plain path): two UNAVAILABLE
        # attempts, then OK, as the server's own log confirms.
        path = write_tmp(RETRY_CONFIG % "retry.Svc")
        r = grit("call", "--json", "--service-config", path, "--metadata",
                 "x-call-key:%s-retry" % key, "--metadata", "x-fail:2",
                 p.target, "/retry.Svc/Call")
        check_rc(r, 0)
        check_eq(end_line(r)["attempts"], 3, "attempts", r)
        r = grit("call", "--data", ("%s-retry" % key).encode().hex(),
                 p.target, "/retry.Svc/Log")
        check_rc(r, 0)
        hexed = out(r).splitlines()[0].split(": ")[1]
        check_eq(bytes.fromhex(hexed).decode().splitlines(),
                 ["prev=- idem=- 14", "prev=1 idem=- 14", "prev=2 idem=- ok"],
                 "server's log", r)



def varint(n):
    """A protobuf varint."""
    b = b""
    while n > 0x7f:
        b += bytes([n & 0x7f | 0x80])
        n >>= 7
    return b + bytes([n])


def pb_len(field, body):
    """A protobuf length-delimited field (short bodies only)."""
    return bytes([field << 3 | 2, len(body)]) + body


def grpcio_compress():
    # Issue 13: --compress against grpcio, which answers in gzip when asked
    # (response_compressed); --json and --attempts say both encodings.
    req = (bytes([0x10, 0xe8, 0x07])            # response_size 1000
           + pb_len(3, pb_len(2, bytes(100)))   # payload: 100 zeros
           + pb_len(6, bytes([0x08, 0x01])))    # response_compressed true
    with GrpcioPeer("interop_server.py") as p:
        r = grit("call", "--compress", "gzip", "--json", "--attempts",
                 "--data", req.hex(), p.target,
                 "/grpc.testing.TestService/UnaryCall")
        check_rc(r, 0)
        objs = json_lines(r)
        resp = [o["response"] for o in objs if "response" in o]
        check_eq([len(x) // 2 for x in resp], [1006], "decoded response", r)
        end = objs[-1]
        check_eq(end["request_encoding"], "gzip", "request encoding", r)
        check_eq(end["response_encoding"], "gzip", "response encoding", r)
        check_eq([(a["request_encoding"], a["response_encoding"])
                  for a in end["timeline"]], [("gzip", "gzip")],
                 "timeline encodings", r)
        r = grit("call", "--attempts", "--data", req.hex(), p.target,
                 "/grpc.testing.TestService/UnaryCall")
        check_rc(r, 0)
        check_in("encoding identity -> gzip", err(r), "plain timeline", r)
    r = grit("call", "--compress", "br", "ipv4:127.0.0.1:1", "a.B/C")
    check_rc(r, 2)
    check_in("--compress wants gzip, deflate or identity", err(r),
             "usage error", r)


def grpcio_token_file():
    """Issue 25 (SPEC CR-01, AP-05): --token-file against grpcio over TLS
    with certificates made here. Every call carries the file's trimmed
    content; a file rotated during a --count run reaches the later calls;
    over cleartext the call is refused (UNAUTHENTICATED, exit 80) and the
    server sees nothing, unless --insecure-credentials; a missing file fails
    the call naming it; the token is never printed."""
    if not shutil.which("openssl"):
        raise Skip("no openssl")
    certs = os.path.join(ARGS.tmp, "creds-certs")
    subprocess.run(["bash", os.path.join(ARGS.peers, "gen_certs.sh"), certs],
                   capture_output=True, check=True, timeout=60)
    ca = os.path.join(certs, "ca.pem")
    tok = os.path.join(ARGS.tmp, "token")

    def put(text):  # as a kubelet rotates a projected token
        with open(tok + ".new", "w") as f:
            f.write(text)
        os.rename(tok + ".new", tok)

    put("  secret-token-1\n")
    with GrpcioPeer("creds_server.py", "--cert",
                    os.path.join(certs, "server.pem"), "--key",
                    os.path.join(certs, "server.key")) as p:
        r = grit("call", "--ca", ca, "--token-file", tok, "--metadata",
                 "x-call-key: t1", "--data", "6869", p.target,
                 "/creds.Svc/Unary")
        check_rc(r, 0)
        check_not_in("secret-token", out(r) + err(r), "token not printed", r)
        r = grit("call", "--ca", ca, "--json", "--data",
                 "t1".encode().hex(), p.target, "/creds.Svc/Log")
        check_rc(r, 0)
        check_in("auth=Bearer secret-token-1 ok", log_text(r), "server saw it",
                 r)
        # Rotation inside one process: --count paced by --rate.
        timer = threading.Timer(0.6, put, args=("secret-token-2",))
        timer.start()
        r = grit("call", "--ca", ca, "--token-file", tok, "--metadata",
                 "x-call-key: t2", "--count", "30", "--rate", "20", "--data",
                 "6869", p.target, "/creds.Svc/Unary")
        timer.join()
        check_rc(r, 0)
        r = grit("call", "--ca", ca, "--json", "--data",
                 "t2".encode().hex(), p.target, "/creds.Svc/Log")
        text = log_text(r)
        check_in("auth=Bearer secret-token-1 ok", text, "before rotation", r)
        check_in("auth=Bearer secret-token-2 ok", text, "after rotation", r)
        r = grit("call", "--ca", ca, "--token-file",
                 os.path.join(ARGS.tmp, "no-such-token"), p.target,
                 "/creds.Svc/Unary")
        check_rc(r, 64 + 14)
        check_in("token file " + os.path.join(ARGS.tmp, "no-such-token"),
                 err(r), "names the file", r)
    with GrpcioPeer("creds_server.py") as p:  # cleartext
        r = grit("call", "--token-file", tok, "--metadata", "x-call-key: c1",
                 p.target, "/creds.Svc/Unary")
        check_rc(r, 64 + 16)
        check_in("UNAUTHENTICATED", err(r), "refused", r)
        r = grit("call", "--json", "--data", "c1".encode().hex(), p.target,
                 "/creds.Svc/Log")
        check_eq(log_text(r), "", "nothing reached the server", r)
        r = grit("call", "--token-file", tok, "--insecure-credentials",
                 "--metadata", "x-call-key: c2", p.target, "/creds.Svc/Unary")
        check_rc(r, 0)
        check_in("WARNING: --insecure-credentials", err(r), "warns", r)
    r = grit("call", "--insecure-credentials", "ipv4:127.0.0.1:1", "a.B/C")
    check_rc(r, 2)
    check_in("--insecure-credentials goes with --token-file", err(r),
             "usage", r)


def log_text(r):
    """The text of a /creds.Svc/Log answer printed by grit call --json."""
    for line in out(r).splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if "response" in o:
            return bytes.fromhex(o["response"]).decode()
    return ""


def grpcio_streams():
    # Issue 19: server, client and bidi streaming against grpcio's
    # interop TestService, with messages encoded here by hand.
    def out_req(*sizes):  # StreamingOutputCallRequest
        return b"".join(pb_len(2, bytes([0x08, n])) for n in sizes)

    def out_resp(n):  # StreamingOutputCallResponse with n zero bytes
        return pb_len(1, pb_len(2, bytes(n)))

    svc = "grpc.testing.TestService."
    with GrpcioPeer("interop_server.py") as p:
        r = grit("call", "--data", out_req(1, 2, 3).hex(), p.target,
                 svc + "StreamingOutputCall")
        check_rc(r, 0)
        check_eq(out(r).splitlines(),
                 ["response (%d bytes): %s" % (n + 4, out_resp(n).hex())
                  for n in (1, 2, 3)], "server stream", r)
        check_eq(err(r).splitlines()[0], "status: OK (0)", "status", r)
        # Client stream: the server adds up the payload sizes (3 + 5).
        r = grit("call", "--data", pb_len(1, pb_len(2, b"abc")).hex(),
                 "--data", pb_len(1, pb_len(2, b"defgh")).hex(), p.target,
                 svc + "StreamingInputCall")
        check_rc(r, 0)
        check_eq(out(r).splitlines()[0], "response (2 bytes): 0808",
                 "aggregated size", r)
        # Bidi from stdin, with the headers the server echoes.
        r = grit("call", "--json", "--show-headers", "--data", "-",
                 "--metadata", "x-grpc-test-echo-initial:  hi ", p.target,
                 "/grpc.testing.TestService/FullDuplexCall",
                 stdin=(out_req(2).hex() + "\n" + out_req(1, 3).hex() +
                        "\n").encode())
        check_rc(r, 0)
        objs = json_lines(r)
        check_eq(objs[0]["headers"].get("x-grpc-test-echo-initial"), "hi",
                 "headers", r)
        check_eq([o["response"] for o in objs if "response" in o],
                 [out_resp(n).hex() for n in (2, 1, 3)], "bidi responses", r)
        check_eq(objs[-1]["responses"], 3, "count", r)
        # The peer of a call the deadline ended, request at the server.
        # size 1 after interval_us 3 s, far past the 300 ms deadline
        slow = bytes([0x08, 1, 0x10]) + varint(3000000)
        r = grit("call", "--deadline", "300", "--data",
                 pb_len(2, slow).hex(), p.target,
                 svc + "StreamingOutputCall")
        check_rc(r, 64 + 4)
        lines = err(r).splitlines()
        check(lines[0].startswith("status: DEADLINE_EXCEEDED"), "deadline",
              r)
        check_eq(lines[1], "peer: 127.0.0.1:%d" % p.port, "peer", r)


# ---- group 'config': grit config check ----

GREETER = """{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "helloworld.Greeter"}],
    "timeout": "1.5s",
    "waitForReady": true,
    "maxResponseMessageBytes": 1048576,
    "retryPolicy": {
      "maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}
"""

GREETER_REPORT = """\
valid service config
methodConfig[0] applies to: /helloworld.Greeter/* (every method of \
helloworld.Greeter)
  timeout: 1.5s (or the call's deadline if sooner)
  wait for ready: yes
  largest response message: 1048576 bytes (or the channel's limit if \
smaller)
  retry: up to 4 attempts, the first included
    backoff: first 0.1s, x2 per retry, at most 1s, each randomised by +-20%
    retried on: UNAVAILABLE
retry throttling: 10 tokens per server name, -1 per failed attempt, +0.100 \
per successful call; retries and hedges stop while tokens <= 5.000
load balancing: round_robin (from loadBalancingConfig)
"""


def config_valid():
    path = write_tmp(GREETER)
    for arg in (path, "@" + path, GREETER, " " + GREETER):
        r = grit("config", "check", arg)
        check_rc(r, 0)
        check_eq(out(r), GREETER_REPORT, "report", r)
        check_eq(err(r), "", "stderr", r)


def config_per_method():
    cfg = {
        "methodConfig": [
            {"name": [{}], "timeout": "10s"},
            {"name": [{"service": "a.S", "method": "Get"}],
             "waitForReady": False,
             "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.05s",
                               "nonFatalStatusCodes": ["UNAVAILABLE"]}},
            {"name": [{"service": "a.S"}, {"service": "b.S"}],
             "maxRequestMessageBytes": 1024},
        ]
    }
    r = grit("config", "check", json.dumps(cfg))
    check_rc(r, 0)
    text = out(r)
    for want in [
            "methodConfig[0] applies to: default (every method not named "
            "elsewhere)\n  timeout: 10s (or the call's deadline if sooner)\n",
            "methodConfig[1] applies to: /a.S/Get\n  timeout: not set (only "
            "the call's deadline)\n  wait for ready: no\n",
            "  hedging: up to 3 attempts, the first included, a new one every "
            "0.05s until one gets a response\n",
            "    non-fatal codes (send the next hedge at once): UNAVAILABLE; ",
            "methodConfig[2] applies to: /a.S/* (every method of a.S), /b.S/* "
            "(every method of b.S)\n",
            "  largest request message: 1024 bytes",
            "  retries: none configured (transparent retries only)\n",
            "retry throttling: off\nload balancing: pick_first\n",
    ]:
        check_in(want, text, "report", r)


def config_invalid():
    readme = ('{"methodConfig":[{"name":[{}],"retryPolicy":'
              '{"maxAttempts":1}}]}')
    want = """\
invalid service config (5 problems):
  $.methodConfig[0].retryPolicy.maxAttempts: must be an integer > 1
  $.methodConfig[0].retryPolicy.initialBackoff: is required
  $.methodConfig[0].retryPolicy.maxBackoff: is required
  $.methodConfig[0].retryPolicy.backoffMultiplier: is required
  $.methodConfig[0].retryPolicy.retryableStatusCodes: must be a non-empty \
array unless perAttemptRecvTimeout is set
"""
    path = write_tmp(readme)
    for arg in (readme, path, "@" + path):
        r = grit("config", "check", arg)
        check_rc(r, 1)
        check_eq(err(r), want, "problems", r)
        check_eq(out(r), "", "stdout", r)
    # Problems in several places: each is listed with its path.
    r = grit("config", "check",
             '{"methodConfig":[{"name":[{"service":"s"}],"timeout":"1"},'
             '{"name":[{"method":"m"}],"waitForReady":1}],'
             '"retryThrottling":{"maxTokens":0,"tokenRatio":0.1}}')
    check_rc(r, 1)
    lines = err(r).splitlines()
    check_eq(lines[0], "invalid service config (4 problems):", "header", r)
    check_eq([l.split(": ")[0].strip() for l in lines[1:]], [
        "$.methodConfig[0].timeout", "$.methodConfig[1].name[0]",
        "$.methodConfig[1].waitForReady", "$.retryThrottling.maxTokens"
    ], "problem paths", r)
    r = grit("config", "check", '{"methodConfig": [}')
    check_rc(r, 1)
    check_in("$: invalid JSON", err(r), "syntax error", r)


def config_durations():
    # SPEC SC-06: seconds up to 315576000000, up to 9 decimals; printed
    # exactly, trailing zeros trimmed, not as saturated nanoseconds.
    cases = [
        ("315576000000s", "315576000000s"),
        ("315576000000.999999999s", "315576000000.999999999s"),
        ("315575999999.000000001s", "315575999999.000000001s"),
        ("9223372036.854775807s", "9223372036.854775807s"),
        ("9223372036.854775808s", "9223372036.854775808s"),
        ("9223372037s", "9223372037s"),
        ("0.000000001s", "0.000000001s"),
        ("0.100s", "0.1s"),
        ("1.500000000s", "1.5s"),
        ("0s", "0s"),
    ]
    entries = [{"name": [{"service": "s%d" % i}], "timeout": d}
               for i, (d, _) in enumerate(cases)]
    entries.append({
        "name": [{"service": "r"}],
        "retryPolicy": {
            "maxAttempts": 2, "initialBackoff": "315576000000s",
            "maxBackoff": "315576000000.5s", "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE"],
            "perAttemptRecvTimeout": "100000000000.000000010s"}})
    entries.append({
        "name": [{"service": "h"}],
        "hedgingPolicy": {"maxAttempts": 2,
                          "hedgingDelay": "315576000000.000000001s"}})
    r = grit("config", "check", json.dumps({"methodConfig": entries}))
    check_rc(r, 0)
    got = [l.split("timeout: ")[1].split(" ")[0]
           for l in out(r).splitlines() if l.startswith("  timeout: ")]
    check_eq(got[:len(cases)], [w for _, w in cases], "timeouts", r)
    for want in [
            "backoff: first 315576000000s, x2 per retry, at most "
            "315576000000.5s,",
            "per-attempt receive timeout: 100000000000.00000001s ",
            "a new one every 315576000000.000000001s until",
    ]:
        check_in(want, out(r), "report", r)
    r = grit("config", "check",
             '{"methodConfig":[{"name":[{}],"timeout":"315576000001s"}]}')
    check_rc(r, 1)
    check_in("$.methodConfig[0].timeout: seconds must be at most "
             "315576000000", err(r), "problem", r)


def config_lb_policies():
    # Issue 26 (SPEC LP-02..LP-04): the load-aware policies are validated
    # with JSON paths and explained.
    r = grit("config", "check",
             '{"loadBalancingConfig":[{"weighted_round_robin":{'
             '"enableOobLoadReport":true,"oobReportingPeriod":"0.5s",'
             '"blackoutPeriod":"2s","errorUtilizationPenalty":0.5}}]}')
    check_rc(r, 0)
    for want in [
            "load balancing: weighted_round_robin (from loadBalancingConfig)\n",
            "  load reports: out of band, each READY backend streams ORCA "
            "reports every 0.5s (per-call trailers are not used)\n",
            "weight = qps / (utilization + eps/qps x 0.5)",
            "a weight counts after 2s of reports (blackout) and is dropped "
            "after 180s without one; weights go to the scheduler every 1s",
    ]:
        check_in(want, out(r), "wrr report", r)
    check_eq(err(r), "", "stderr", r)
    r = grit("config", "check",
             '{"loadBalancingConfig":[{"ring_hash_experimental":{'
             '"requestHashHeader":"x-user","maxRingSize":10000}}]}')
    check_rc(r, 0)
    check_in("  ring of 1024..4096 entries (minRingSize 1024, maxRingSize "
             "10000, capped at 4096 as grpc caps them)", out(r), "ring", r)
    check_in("XXH64 of its \"x-user\" header; a call without it goes to a "
             "random backend", out(r), "ring header", r)
    r = grit("config", "check",
             '{"loadBalancingConfig":[{"least_request_experimental":{'
             '"choiceCount":3}}]}')
    check_rc(r, 0)
    check_in("  each pick draws 3 READY backends at random and takes the one "
             "with the fewest calls in flight\n", out(r), "lr", r)
    # A misspelt field is accepted with a warning naming the right one.
    r = grit("config", "check",
             '{"loadBalancingConfig":[{"least_request_experimental":{'
             '"choiseCount":3}}]}')
    check_rc(r, 0)
    check_in('$.loadBalancingConfig[0].least_request_experimental: unknown '
             'field "choiseCount" ignored (did you mean "choiceCount"?)',
             out(r) + err(r), "lint", r)
    r = grit("config", "check",
             '{"loadBalancingConfig":[{"ring_hash_experimental":{'
             '"minRingSize":0,"requestHashHeader":"X"}},'
             '{"weighted_round_robin":{"blackoutPeriod":1}}]}')
    check_rc(r, 1)
    check_eq(err(r).splitlines()[:3], [
        "invalid service config (2 problems):",
        "  $.loadBalancingConfig[0].ring_hash_experimental.minRingSize: "
        "must be an integer 1..8388608",
        "  $.loadBalancingConfig[0].ring_hash_experimental."
        "requestHashHeader: must be a lower-case header name [0-9a-z_.-]",
    ], "problems", r)


def config_bad_usage():
    missing = os.path.join(ARGS.tmp, "missing.json")
    r = grit("config", "check", missing)
    check_rc(r, 2)
    check_eq(err(r), "grit: cannot open %s: No such file or directory\n" %
             missing, "stderr", r)
    for argv in (["config"], ["config", "check"], ["config", "lint", "{}"],
                 ["config", "check", "{}", "{}"],
                 ["config", "check", "--bogus"]):
        r = grit(*argv)
        check_rc(r, 2)
        check(err(r).startswith("usage: grit config check"), "usage", r)
    r = grit("config", "check", "--help")
    check_rc(r, 0)
    check(out(r).startswith("usage: grit config check"), "usage", r)


# ---- group 'usage': bad command lines ----


def usage_commands():
    for argv, rc, stream, first in [
        ([], 2, "err", "usage: grit <command> [options]"),
        (["bogus"], 2, "err", "grit: unknown command 'bogus'"),
        (["help"], 0, "out", "usage: grit <command> [options]"),
        (["--help"], 0, "out", "usage: grit <command> [options]"),
    ]:
        r = grit(*argv)
        check_rc(r, rc)
        text = err(r) if stream == "err" else out(r)
        check_eq(text.splitlines()[0], first, "first line", r)
        check_in("\ncommands:\n", text, "usage", r)
    r = grit("version")
    check_rc(r, 0)
    check(out(r).startswith("grit ") and out(r).count("\n") == 1, "version",
          r)


def usage_call():
    t = "ipv4:127.0.0.1:9"  # never dialled: each of these fails first
    r = grit("call", "--bogus", t, "/pkg.Svc/M")
    check_rc(r, 2)
    check_in("grit call: unrecognized option '--bogus'", err(r), "message",
             r)
    check_in("usage: grit call [options] TARGET METHOD\n", err(r), "usage",
             r)
    check_eq(out(r), "", "stdout", r)
    for argv in (["call"], ["call", t], ["call", t, "/a/b", "extra"],
                 ["call", "--deadline"]):
        r = grit(*argv)
        check_rc(r, 2)
        check_in("usage: grit call", err(r), "usage", r)
    for flag, val in (("--deadline", "0"), ("--deadline", "-5"),
                      ("--deadline", "10ms"), ("--count", "0"),
                      ("--count", "x"), ("--concurrency", ""),
                      ("--count", "99999999999999999999")):
        r = grit("call", flag, val, t, "/pkg.Svc/M")
        check_rc(r, 2)
        check_eq(err(r), "grit: %s wants a positive integer, got '%s'\n" %
                 (flag, val), "stderr", r)
    r = grit("call", "--data", "abc", t, "/pkg.Svc/M")
    check_rc(r, 2)
    check_in("--data is not hex", err(r), "message", r)
    r = grit("call", "dns:///", "/pkg.Svc/M")
    check_rc(r, 2)
    check_in("grit: cannot create channel to dns:///: invalid target",
             err(r), "message", r)
    r = grit("call", "--help")
    check_rc(r, 0)
    check(out(r).startswith("usage: grit call"), "usage", r)
    check_in("Exit status: 0 OK, 64 + the status code (e.g. 69 NOT_FOUND)",
             out(r), "exit codes", r)



def usage_help_everywhere():
    # -h/--help on every command and `grit help CMD`: the usage on
    # stdout, exit 0, nothing run (no demo, no version line).
    first = {"": "usage: grit <command> [options]\n",
             "call": "usage: grit call [options] TARGET METHOD\n",
             "config": "usage: grit config check FILE_OR_JSON\n",
             "demo": "usage: grit demo\n",
             "version": "usage: grit version\n"}
    runs = [(["-h"], ""), (["--help"], ""), (["help"], ""),
            (["help", "-h"], "")]
    for cmd in ("call", "config", "demo", "version"):
        runs += [(["help", cmd], cmd), ([cmd, "-h"], cmd),
                 ([cmd, "--help"], cmd)]
    runs += [(["config", "check", "-h"], "config"),
             (["call", "--json", "-h", "x"], "call")]
    for argv, cmd in runs:
        r = grit(*argv)
        check_rc(r, 0)
        check(out(r).startswith(first[cmd]), "usage of %r" % cmd, r)
        check_eq(err(r), "", "stderr", r)
        check("demo:" not in out(r) and "grit 0" not in out(r),
              "nothing run", r)
    for argv in (["help", "bogus"], ["demo", "now"], ["version", "x"],
                 ["help", "call", "x"]):
        r = grit(*argv)
        check_rc(r, 2)
        check_eq(out(r), "", "stdout", r)
        check(err(r).startswith(("grit: unknown command", "usage: grit")),
              "usage on stderr", r)


def usage_exit_codes():
    # One list, in `grit help`, and one rule: a file named on the command
    # line that cannot be read is a usage error (2) for every command.
    r = grit("help")
    check_in("exit status, for every command:\n  0  success: ", out(r),
             "exit list", r)
    check_in("\n  1  failure: the config is invalid", out(r), "exit 1", r)
    check_in("\n  2  usage error: ", out(r), "exit 2", r)
    check_in("\n  64+C  grit call: the call ended with gRPC status code C",
             out(r), "exit 64+C", r)
    missing = os.path.join(ARGS.tmp, "missing")
    t = "ipv4:127.0.0.1:9"
    for argv in (["config", "check", missing],
                 ["config", "check", "@" + missing],
                 ["call", "--data", "@" + missing, t, "/a/b"],
                 ["call", "--service-config", missing, t, "/a/b"],
                 ["call", "--tls", "--ca", missing, t, "/a/b"]):
        r = grit(*argv)
        check_rc(r, 2)
        check_in(missing, err(r), "names the file", r)


def usage_issue29_flags():
    """Issue 29: every new flag is in -h, and bad values are usage errors
    (2) that name the flag; a --count run exits 64 + the most frequent
    non-OK code."""
    r = grit("call", "-h")
    check_rc(r, 0)
    for flag in ("--cert FILE", "--key FILE", "--insecure",
                 "--servername NAME", "--max-recv BYTES",
                 "--connect-timeout MS", "--emit-defaults"):
        check_in(flag, out(r), "call -h", r)
    for cmd in ("list", "describe"):
        r = grit(cmd, "-h")
        check_rc(r, 0)
        for flag in ("--metadata", "--timeout MS", "--cert FILE",
                     "--insecure", "--servername NAME"):
            check_in(flag, out(r), cmd + " -h", r)
    r = grit("describe", "-h")
    check_in("--template", out(r), "describe -h", r)
    r = grit("list", "-h")
    check_in("TARGET [SERVICE]", out(r), "list -h", r)
    t = "ipv4:127.0.0.1:9"
    for argv, msg in (
            (["call", "--max-recv", "-1", t, "/a/b"], "--max-recv wants"),
            (["call", "--max-recv", "0", t, "/a/b"], "--max-recv wants"),
            (["call", "--max-recv", "4k", t, "/a/b"], "--max-recv wants"),
            (["call", "--connect-timeout", "0", t, "/a/b"],
             "--connect-timeout wants"),
            (["call", "--cert", "c.pem", t, "/a/b"],
             "--cert and --key go together"),
            (["call", "--key", "k.pem", t, "/a/b"],
             "--cert and --key go together"),
            (["list", "--timeout", "x", t], "--timeout wants"),
            (["list", "--metadata", "nocolon", t], "--metadata wants"),
            (["describe", "--connect-timeout", "-5", t, "a.B"],
             "--connect-timeout wants"),
            (["list", t, "a.B", "extra"], "usage: grit list"),
            (["describe", t], "usage: grit describe")):
        r = grit(*argv)
        check_rc(r, 2)
        check_in(msg, err(r), "stderr", r)
    # A client certificate that does not exist: a usage error naming it.
    r = grit("call", "--cert", "/nonexistent/c.pem", "--key",
             "/nonexistent/k.pem", t, "/a/b")
    check_rc(r, 2)
    check_in("/nonexistent/c.pem", err(r), "names the file", r)
    # --insecure implies --tls and says so loudly, before anything else.
    r = grit("call", "--insecure", "--deadline", "200", t, "/a/b")
    check_in("WARNING: --insecure", err(r).splitlines()[0], "warning", r)
    with H2Server(FAIL) as s:
        r = grit("call", "--count", "3", s.target, "/pkg.Svc/Fail")
        check_rc(r, 64 + 5)


# ---- group 'dns': service config through DNS (issue 20) ----
# A scripted DNS responder (test/peers/dns_responder.py) answers every name
# with A 127.0.0.1 and the TXT given, or drops or refuses.


def dns_target(srv):
    return "dns:///svc.test:%d" % srv.port


def txt_of(config):
    return "grpc_config=[{\"serviceConfig\":%s}]" % config


def dns_txt_retry_policy():
    """SPEC DNS-01..03, issue 20 point 1: --dns-txt applies a retry policy
    published in TXT; without it the first UNAVAILABLE is final."""
    from dns_responder import DnsResponder
    with DnsResponder(txt=txt_of(RETRY_CONFIG % "pkg.Svc")) as dns:
        with H2Server(FLAKY) as s:
            r = grit("call", "--json", "--dns-txt", "--dns-server",
                     dns.server, dns_target(s), "/pkg.Svc/Flaky")
            check_rc(r, 0)
            end = end_line(r)
            check_eq(end["attempts"], 2, "attempts", r)
            check(dns.counts["TXT"] >= 1, "a TXT query was made", r)
        with H2Server(FLAKY) as s:
            r = grit("call", "--json", "--dns-server", dns.server,
                     dns_target(s), "/pkg.Svc/Flaky")
            check_rc(r, 64 + 14)
            check_eq(end_line(r)["code_name"], "UNAVAILABLE", "code", r)


def dns_show_config():
    """--show-config: the config in force, its source, when applied and
    the last rejection, as text and as a JSON line (DNS-10)."""
    from dns_responder import DnsResponder
    cfg = RETRY_CONFIG % "pkg.Svc"
    with DnsResponder(txt=txt_of(cfg)) as dns, H2Server() as s:
        r = grit("call", "--dns-txt", "--dns-server", dns.server,
                 "--show-config", dns_target(s), "/pkg.Svc/Echo")
        check_rc(r, 0)
        lines = out(r).splitlines()
        head = [i for i, l in enumerate(lines)
                if l.startswith("service config: source dns, applied 20")]
        check_eq(len(head), 1, "one 'service config: source dns' line", r)
        check_eq(json.loads(lines[head[0] + 1]), json.loads(cfg),
                 "the config JSON on the next line", r)
        check_eq(lines[head[0] + 2], "last rejection: none", "rejection", r)
        r = grit("call", "--json", "--dns-txt", "--dns-server", dns.server,
                 "--show-config", dns_target(s), "/pkg.Svc/Echo")
        check_rc(r, 0)
        sc = [o for o in json_lines(r) if "service_config" in o]
        check_eq(len(sc), 1, "one service_config line", r)
        check_eq(sc[0]["source"], "dns", "source", r)
        check_eq(sc[0]["service_config"], json.loads(cfg), "config", r)
        check_eq(sc[0]["last_rejection"], None, "last_rejection", r)
        check_eq(len(sc[0]["hash"]), 16, "hash digits", r)
        # No TXT: the default config from --service-config.
        r = grit("call", "--json", "--dns-server", dns.server,
                 "--service-config", TIMEOUT_CONFIG, "--show-config",
                 dns_target(s), "/pkg.Svc/Echo")
        sc = [o for o in json_lines(r) if "service_config" in o]
        check_eq(sc[0]["source"], "default", "source", r)
        check_eq(sc[0]["service_config"], json.loads(TIMEOUT_CONFIG),
                 "config", r)


def dns_rejected_config_logged():
    """DNS-10, issue 20 point 3: a rejected TXT config prints on stderr
    with no GRIT_TRACE set, with its JSON path; --show-config names it."""
    from dns_responder import DnsResponder
    bad = RETRY_CONFIG.replace('"maxAttempts":3', '"maxAttempts":1')
    with DnsResponder(txt=txt_of(bad % "pkg.Svc")) as dns, H2Server() as s:
        r = grit("call", "--dns-txt", "--dns-server", dns.server,
                 "--show-config", dns_target(s), "/pkg.Svc/Echo")
        check_rc(r, 64 + 14)  # no valid config yet: UNAVAILABLE (SC-03)
        check_in("rejected service config from DNS: "
                 "$.methodConfig[0].retryPolicy.maxAttempts", err(r),
                 "stderr", r)
        check_eq(err(r).count("rejected service config"), 1,
                 "printed once", r)
        check_in("last rejection: $.methodConfig[0].retryPolicy.maxAttempts",
                 out(r), "--show-config", r)
        check_in("service config: none", out(r), "--show-config", r)


def dns_txt_dropped():
    """DNS-07, issue 20 point 2: TXT queries dropped, A answered: the call
    succeeds after the 1 s TXT bound, and stderr says why it waited."""
    from dns_responder import DnsResponder, DROP
    with DnsResponder(txt_mode=DROP) as dns, H2Server() as s:
        r = grit("call", "--dns-txt", "--dns-server", dns.server,
                 "--deadline", "20000", dns_target(s), "/pkg.Svc/Echo")
        check_rc(r, 0)
        check(r.secs < 10, "done well before c-ares' 75 s", r)
        check_in("no TXT answer for _grpc_config.svc.test within 1000 ms",
                 err(r), "stderr", r)


def dns_usage():
    """--dns-server forms: a malformed one is a usage error (exit 2) that
    names the form; GRIT_TRACE with an unknown category says so once."""
    with H2Server() as s:
        r = grit("call", "--dns-server", "127.0.0.1", "dns:///svc.test:1",
                 "/pkg.Svc/Echo")
        check_rc(r, 2)
        check_in("addr:port", err(r), "stderr", r)
        r = grit("call", s.target, "/pkg.Svc/Echo",
                 env={"GRIT_TRACE": "bogus,dns"})
        check_rc(r, 0)
        check_eq(err(r).count("unknown category 'bogus'"), 1, "warned once",
                 r)


def dns_config_check_warnings():
    """issue 20 point 5: accepted-but-suspect fields are warnings (exit 0)
    that name the path: unknown fields (with a suggestion), integer and
    non-canonical status codes, a zero timeout, a truncated tokenRatio,
    skipped LB policies."""
    cfg = ('{"methodConfig":[{"name":[{"service":"a.B"}],"timout":"1s",'
           '"retryPolicy":{"maxAttemps":3,"maxAttempts":2,'
           '"initialBackoff":"0.1s","maxBackoff":"1s","backoffMultiplier":2,'
           '"retryableStatusCodes":[14,"unavailable"]}},'
           '{"name":[{"service":"c.D"}],"timeout":"0s"}],'
           '"retryThrottling":{"maxTokens":10,"tokenRatio":0.5466},'
           '"loadBalancingConfig":[{"grpclb":{}},{"round_robin":{}},'
           '{"pick_first":{}}]}')
    r = grit("config", "check", cfg)
    check_rc(r, 0)
    o = out(r)
    check_in("8 warnings (accepted, but check):", o, "count", r)
    for w in ('$.methodConfig[0]: unknown field "timout" ignored (did you '
              'mean "timeout"?)',
              '$.methodConfig[0].retryPolicy: unknown field "maxAttemps" '
              'ignored (did you mean "maxAttempts"?)',
              '$.methodConfig[0].retryPolicy.retryableStatusCodes[0]: '
              'integer status code 14 accepted here; grpc-core rejects it',
              '$.methodConfig[0].retryPolicy.retryableStatusCodes[1]: status '
              'code "unavailable" accepted here',
              '$.methodConfig[1].timeout: a zero timeout fails every call',
              '$.loadBalancingConfig[0]: "grpclb" skipped',
              '$.loadBalancingConfig[2]: "pick_first" not used',
              '$.retryThrottling.tokenRatio: 0.5466 is kept as 0.546'):
        check_in("  warning: " + w, o, "warning", r)
    # Invalid because of the typo: the warning says why.
    r = grit("config", "check", cfg.replace('"maxAttempts":2,', ''))
    check_rc(r, 1)
    check_in('unknown field "maxAttemps" ignored (did you mean '
             '"maxAttempts"?)', err(r), "warning with the problem", r)


def dns_config_check_txt_offline():
    """--txt checks a TXT value offline (text or file, with or without the
    grpc_config= prefix); every choice is validated and unreachable ones
    are named; --hostname and --language pick the client."""
    sc = '{"methodConfig":[{"name":[{}],"timeout":"%s"}]}'
    three = ('{"clientLanguage":["go"],"serviceConfig":%s},'
             '{"clientHostname":["web1"],"serviceConfig":%s},'
             '{"serviceConfig":%s}' % (sc % "1s", sc % "2s", sc % "3s"))
    value = '[%s,{"serviceConfig":%s}]' % (three, sc % "x")
    r = grit("config", "check", "--txt", value, "--hostname", "web2")
    check_rc(r, 1)  # choice [3] is invalid, though this client never gets it
    e = err(r)
    check_in("choice [0]: not for this client (clientLanguage", e, "[0]", r)
    check_in("choice [1]: not for this client (clientHostname", e, "[1]", r)
    check_in("choice [2]: chosen (every client that reaches it)", e, "[2]", r)
    check_in("choice [3]: never reached", e, "[3]", r)
    check_in("$[3].serviceConfig.methodConfig[0].timeout: must be a "
             "duration", e, "[3] validated", r)
    value = "[%s]" % three  # without choice [3]
    path = write_tmp("grpc_config=" + value + "\n", suffix=".txt")
    for who, chosen in ((["--hostname", "web1"], "choice [1]: chosen"),
                        (["--language", "Go"], "choice [0]: chosen"),
                        ([], "choice [2]: chosen")):
        r = grit("config", "check", "--txt", "@" + path, *who)
        check_rc(r, 0)
        check_in(chosen, out(r), " ".join(who), r)


def dns_config_check_dns_forms():
    """--dns takes HOST, HOST:PORT, dns:///HOST:PORT and
    dns://ADDR:PORT/HOST (the port is not part of the TXT name); a DNS
    failure is reported as one; --dns-server errors exit 2."""
    from dns_responder import DnsResponder, REFUSE
    cfg = '{"methodConfig":[{"name":[{}],"timeout":"1s"}]}'
    with DnsResponder(txt=txt_of(cfg)) as dns:
        for t in ("svc.test", "svc.test:443", "dns:///svc.test:443"):
            r = grit("config", "check", "--dns", t, "--dns-server",
                     dns.server)
            check_rc(r, 0)
            check_in("TXT _grpc_config.svc.test:", out(r), t, r)
        r = grit("config", "check", "--dns",
                 "dns://%s/svc.test:443" % dns.server)
        check_rc(r, 0)
        dns.txt_mode = REFUSE
        r = grit("config", "check", "--dns", "svc.test", "--dns-server",
                 dns.server)
        check_rc(r, 1)
        check_in("DNS failure:", err(r), "a failure, not 'no record'", r)
        check("no grpc_config record" not in err(r), "not 'no record'", r)
    for bad in ("127.0.0.1", "127.0.0.1:x", "host.test:53"):
        r = grit("config", "check", "--dns", "svc.test", "--dns-server", bad)
        check_rc(r, 2)
        check_in("ADDR:PORT", err(r), bad, r)


# ---- group 'demo' ----


def demo_runs():
    r = grit("demo", timeout=120)
    check_rc(r, 0)
    check(out(r).rstrip().endswith("demo: all good"), "demo verdict", r)
    # Scene 8 (issue 17): N calls, more requests, N rows, 0 duplicates.
    rows = re.findall(r"^  (hedging 5 ms, 3 attempts|retries, 5 attempts):"
                      r"\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$",
                      out(r), re.M)
    check(len(rows) == 2, "dedup scene rows", r)
    for _, calls, ok, sent, domain, dups in rows:
        check(ok == calls and domain == calls and dups == "0"
              and int(sent) > int(calls), "dedup scene figures", r)


def grpcio_metrics_trace():
    # Issue 16 (SPEC OB-01, OB-02): --metrics prints promtool-clean
    # Prometheus text after the run, with the run's counts; --traceparent
    # puts the caller's trace id on every attempt, each with its own span,
    # as the server saw and --attempts --json reports.
    key = "tools-obs-%d" % os.getpid()
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    path = write_tmp(RETRY_CONFIG % "obs.Svc")
    with GrpcioPeer("observe_server.py") as p:
        # Two UNAVAILABLE attempts, then OK (the peer's front also refuses
        # the first connection's stream: one transparent retry).
        r = grit("call", "--metrics", "--service-config", path,
                 "--metadata", "x-call-key:%s-m" % key,
                 "--data", b"f0=14 f1=14".hex(), p.target, "/obs.Svc/Retry")
        check_rc(r, 0)
        text = out(r)
        check(text.startswith("response (11 bytes)"), "result first", r)
        prom = text[text.index("# HELP"):]
        lbl = 'grpc_method="obs.Svc/Retry",grpc_target="%s"' % p.target
        check_in("\ngrpc_client_attempt_started_total{%s} 4\n" % lbl,
                 "\n" + prom, "attempts started", r)
        check_in("\ngrpc_client_call_retries_sum{%s} 2\n" % lbl,
                 "\n" + prom, "retries", r)
        check_in("\ngrpc_client_call_transparent_retries_sum{%s} 1\n" % lbl,
                 "\n" + prom, "transparent retries", r)
        if shutil.which("promtool"):
            pt = subprocess.run(["promtool", "check", "metrics"],
                                input=prom.encode(), capture_output=True,
                                timeout=CALL_TIMEOUT_S)
            check_eq(pt.returncode, 0, "promtool check metrics: %s" %
                     pt.stdout.decode() + pt.stderr.decode(), r)

        r = grit("call", "--json", "--attempts", "--traceparent", parent,
                 "--service-config", path, "--metadata",
                 "x-call-key:%s-t" % key, "--data", b"f0=14".hex(),
                 p.target, "/obs.Svc/Retry")
        check_rc(r, 0)
        tl = end_line(r)["timeline"]
        check_eq([a["trace_id"] for a in tl],
                 ["0af7651916cd43dd8448eb211c80319c"] * 2, "trace ids", r)
        check_eq([a["previous_rpc_attempts"] for a in tl], [0, 1], "prev", r)
        spans = [a["span_id"] for a in tl]
        check(len(set(spans)) == 2 and "b7ad6b7169203331" not in spans,
              "a new span per attempt", r)
        r = grit("call", "--data", ("%s-t" % key).encode().hex(),
                 p.target, "/obs.Svc/Log")
        check_rc(r, 0)
        log = bytes.fromhex(out(r).splitlines()[0].split(": ")[1]).decode()
        check_eq([ln.split()[2] for ln in log.splitlines()],
                 ["tp=00-0af7651916cd43dd8448eb211c80319c-%s-01" % s
                  for s in spans], "server's traceparents", r)

        # A malformed value is a usage error.
        for bad in ("00-xyz", parent.upper(), parent + "-x",
                    "00-%s-b7ad6b7169203331-01" % ("0" * 32)):
            r = grit("call", "--traceparent", bad, p.target, "/obs.Svc/Plain")
            check_rc(r, 2)
            check_in("--traceparent wants a W3C traceparent", err(r),
                     "says why", r)


GROUPS = {
    "call": [call_unary_ok, call_ca_implies_tls, call_non_ok_status, call_deadline,
             call_bin_trailers_base64, call_metadata,
             call_service_config_forms, call_count_summary,
             call_round_robin_peers, call_attempts_timeline,
             call_attempts_picked_by, call_method_forms, call_metadata_values, call_server_stream,
             call_several_messages, call_stdin_live, call_show_headers],
    "json": [json_single_call, json_non_ok_status, json_bin_metadata_base64,
             json_count_summary, json_deadline_and_timeline],
    "grpcio": [grpcio_calls, grpcio_streams, grpcio_compress,
               grpcio_metrics_trace, grpcio_token_file],
    "config": [config_valid, config_per_method, config_invalid,
               config_durations, config_lb_policies, config_bad_usage],
    "usage": [usage_commands, usage_call, usage_help_everywhere,
              usage_exit_codes, usage_issue29_flags],
    "demo": [demo_runs],
    "dns": [dns_txt_retry_policy, dns_show_config, dns_rejected_config_logged,
            dns_txt_dropped, dns_usage, dns_config_check_warnings,
            dns_config_check_txt_offline, dns_config_check_dns_forms],
}


def on_sigterm(signum, frame):
    raise SystemExit("killed by signal %d" % signum)


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grit", required=True)
    ap.add_argument("--h2server", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("group", choices=sorted(GROUPS))
    ARGS = ap.parse_args()
    sys.path.insert(0, ARGS.peers)  # dns_responder.py
    signal.signal(signal.SIGTERM, on_sigterm)
    failed = skipped = 0
    with tempfile.TemporaryDirectory(prefix="grit-tools-") as tmp:
        ARGS.tmp = tmp
        for case in GROUPS[ARGS.group]:
            t0 = time.monotonic()
            try:
                case()
                status = "ok"
            except Skip as e:
                status = "SKIP (%s)" % e
                skipped += 1
            except AssertionError as e:
                status = "FAIL\n%s" % e
                failed += 1
            except Exception:  # a crash in a case fails it, not the rest
                status = "FAIL\n%s" % traceback.format_exc()
                failed += 1
            print("%-28s %5.2fs %s" % (case.__name__, time.monotonic() - t0,
                                       status), flush=True)
    if failed:
        return 1
    return 77 if skipped == len(GROUPS[ARGS.group]) else 0


if __name__ == "__main__":
    sys.exit(main())
