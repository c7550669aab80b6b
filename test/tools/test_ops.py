#!/usr/bin/env python3
"""The operator's view (issue 28 parts 1-3; SPEC OP-01, OP-02, OP-03),
through the grit command against real components:

  test_ops.py --grit PATH --h2server PATH --peers DIR GROUP

admin: `grit call --rate --admin` serves GET /metrics and /channelz while
       it runs; --rate never runs ahead of its rate; an idle connection does not block another scraper;
       promtool checks the exposition; Prometheus 2.42 scrapes the
       endpoint and a PromQL query over its HTTP API returns grit's series
       with the canonical target and the method without its slash; the
       channelz JSON read mid-run names the channel, its state, its calls
       and its subchannel.
otlp:  `grit call --otlp` exports the call and attempt spans of a retried
       call to an OTLP/gRPC receiver on grpcio (the OTLP messages compiled
       by protoc at test time): names, kinds, parent ids, the trace id the
       server saw in traceparent, attributes; and a collector that is down
       costs the calls nothing (every call OK, the drop counter up).

Helpers (grit runs, servers, checks) come from test_grit.py beside it.
Exit status: 0 all cases passed, 1 a case failed, 77 every case skipped.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_grit as tg  # noqa: E402
from test_grit import (Skip, check, check_eq, check_in, die_with_parent,  # noqa
                       stop, H2Server)

ARGS = None
WAIT_S = 30  # bound on anything this file waits for


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_get(port, path, sock=None, timeout=10):
    """GET |path| on 127.0.0.1:|port| over |sock| (a keep-alive
    connection) or a new one; returns (status, headers, body)."""
    own = sock is None
    if own:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.settimeout(timeout)
    sock.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" %
                  path).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        check(chunk, "connection closed before the response head")
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in
               (ln.split(":", 1) for ln in lines[1:])}
    n = int(headers["content-length"])
    while len(body) < n:
        chunk = sock.recv(65536)
        check(chunk, "connection closed inside the body")
        body += chunk
    if own:
        sock.close()
    return status, headers, body


class GritRun:
    """A `grit call` in the background, stopped on the way out."""

    def __init__(self, *argv):
        self.proc = subprocess.Popen([ARGS.grit, "call"] + list(argv),
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE,
                                     env=tg.grit_env(),
                                     preexec_fn=die_with_parent)

    def admin_port(self):
        """The port of "grit: admin endpoint on http://127.0.0.1:P/"."""
        end = time.monotonic() + WAIT_S
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < end:
            c = self.proc.stderr.read(1)
            if not c:
                break
            line += c
        text = line.decode()
        check("admin endpoint on http://127.0.0.1:" in text,
              "no admin line on stderr: %r" % text)
        return int(text.rsplit(":", 1)[1].strip(" /\n"))

    def finish(self, timeout=WAIT_S):
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out.decode(), err.decode()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        stop(self.proc)


# ---- group 'admin' (SPEC OP-01, OP-03) ----


def admin_concurrent_and_channelz():
    with H2Server() as s:
        target = s.peer  # bare host:port: labelled dns:///host:port
        with GritRun("--count", "100000", "--rate", "50", "--admin",
                     "127.0.0.1:0", target, "/pkg.Svc/Echo") as g:
            port = g.admin_port()
            # An idle scraper (half a request, then nothing) holds a
            # connection; another is served all the same.
            idle = socket.create_connection(("127.0.0.1", port), timeout=5)
            idle.sendall(b"GET /metr")
            first = None
            end = time.monotonic() + WAIT_S
            while time.monotonic() < end:
                st, hdr, body = http_get(port, "/channelz")
                check_eq(st, 200, "GET /channelz")
                check_eq(hdr["content-type"], "application/json", "type")
                cz = json.loads(body)
                chans = cz["channels"]
                check_eq(len(chans), 1, "channels: %s" % body)
                c = chans[0]
                if first is None:
                    first = c["calls_started"]
                if (c["state"] == "READY" and c["subchannels"] and
                        c["calls_started"] > first + 5):
                    break
                time.sleep(0.1)
            check_eq(c["target"], target, "target")
            check_eq(c["metrics_target"], "dns:///" + target, "label")
            check_eq(c["state"], "READY", "state")
            check(c["calls_started"] > first, "calls go up mid-run: %s" % c)
            check(c["calls_succeeded"] >= c["calls_started"] - 5,
                  "calls succeed: %s" % c)
            check_eq(c["calls_failed"], 0, "no failure")
            check(c["last_call_started"].endswith("Z"), "RFC 3339 UTC")
            check_eq(c["service_config"]["source"], "none", "config source")
            sc = c["subchannels"]
            check_eq(len(sc), 1, "one subchannel")
            check_eq(sc[0]["address"], s.peer, "subchannel address")
            check_eq(sc[0]["state"], "READY", "subchannel state")
            # Read a moment apart (the subchannels on the loop first): a
            # near-consistent snapshot, within the calls of that moment.
            check(sc[0]["calls_started"] >= c["calls_succeeded"] - 5,
                  "subchannel calls: %s" % sc[0])
            check(sc[0]["calls_succeeded"] > 0, "subchannel calls OK")
            check_eq(sc[0]["last_failure"], None, "no failure yet")
            # Keep-alive: two requests on one connection.
            ka = socket.create_connection(("127.0.0.1", port), timeout=5)
            st, hdr, text = http_get(port, "/metrics", sock=ka)
            check_eq(st, 200, "GET /metrics")
            check(hdr["content-type"].startswith("text/plain; version=0.0.4"),
                  "type %r" % hdr["content-type"])
            st2, _, _ = http_get(port, "/nope", sock=ka)
            check_eq(st2, 404, "unknown path")
            ka.close()
            # The idle one finishes its request late and is answered.
            idle.sendall(b"ics HTTP/1.1\r\nConnection: close\r\n\r\n")
            got = b""
            idle.settimeout(10)
            while True:
                chunk = idle.recv(65536)
                if not chunk:
                    break
                got += chunk
            check(got.startswith(b"HTTP/1.1 200 OK"), "late request answered")
            idle.close()
            prom = text.decode()
            lbl = ('grpc_method="pkg.Svc/Echo",grpc_target="dns:///%s"' %
                   target)
            check_in("grpc_client_attempt_started_total{%s} " % lbl, prom,
                     "method without '/', canonical target")
            check_in('grit_client_subchannels{grpc_connectivity_state="READY",'
                     'grpc_target="dns:///%s"} 1\n' % target, prom,
                     "subchannel gauge per target")
            if not shutil.which("promtool"):
                raise Skip("promtool not installed (scripts/install-deps)")
            pt = subprocess.run(["promtool", "check", "metrics"], input=text,
                                capture_output=True, timeout=WAIT_S)
            check_eq(pt.returncode, 0, "promtool check metrics: %s%s" %
                     (pt.stdout.decode(), pt.stderr.decode()))


def admin_prometheus_scrape():
    if not shutil.which("prometheus"):
        raise Skip("prometheus not installed (scripts/install-deps)")
    with H2Server() as s:
        target = s.peer
        with GritRun("--count", "100000", "--rate", "50", "--admin",
                     "127.0.0.1:0", target, "/pkg.Svc/Echo") as g:
            port = g.admin_port()
            tmp = tempfile.mkdtemp(dir=ARGS.tmp)
            cfg = os.path.join(tmp, "prometheus.yml")
            with open(cfg, "w") as f:
                f.write("global:\n  scrape_interval: 1s\n"
                        "  scrape_timeout: 1s\n"
                        "scrape_configs:\n  - job_name: grit\n"
                        "    static_configs:\n"
                        "      - targets: ['127.0.0.1:%d']\n" % port)
            web = free_port()
            prom = subprocess.Popen(
                ["prometheus", "--config.file=" + cfg,
                 "--storage.tsdb.path=" + os.path.join(tmp, "data"),
                 "--web.listen-address=127.0.0.1:%d" % web],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, preexec_fn=die_with_parent)
            try:
                q = ('grpc_client_attempt_started_total{grpc_method='
                     '"pkg.Svc/Echo",grpc_target="dns:///%s"}' % target)
                url = ("http://127.0.0.1:%d/api/v1/query?query=%s" %
                       (web, urllib.parse.quote(q)))
                res, last = None, None
                end = time.monotonic() + WAIT_S
                while time.monotonic() < end and prom.poll() is None:
                    try:
                        with urllib.request.urlopen(url, timeout=5) as r:
                            last = json.loads(r.read())
                        if last["data"]["result"]:
                            res = last["data"]["result"]
                            break
                    except OSError:
                        pass  # not listening yet
                    time.sleep(0.3)
                check(res, "PromQL %s: no series (last answer %r)" % (q, last))
                check_eq(res[0]["metric"]["job"], "grit", "job label")
                check(float(res[0]["value"][1]) > 0, "a count: %r" % res)
                # The scrape itself was healthy.
                url = ("http://127.0.0.1:%d/api/v1/query?query=%s" %
                       (web, urllib.parse.quote('up{job="grit"}')))
                with urllib.request.urlopen(url, timeout=5) as r:
                    up = json.loads(r.read())["data"]["result"]
                check_eq(up[0]["value"][1], "1", "up")
            finally:
                stop(prom)


def admin_usage():
    """--admin refuses what it cannot or must not serve, clearly; --rate
    wants a positive number."""
    with H2Server() as s:
        for arg, why in (("10.1.2.3:0", "not loopback"),
                         ("localhost:0", "not an IP literal"),
                         ("127.0.0.1", "wants ADDR:PORT"),
                         ("127.0.0.1:70000", "wants ADDR:PORT")):
            r = tg.grit("call", "--admin", arg, s.target, "/pkg.Svc/Echo")
            tg.check_rc(r, 2)
            check_in(why, tg.err(r), "--admin %s" % arg, r)
        r = tg.grit("call", "--count", "3", "--rate", "0", s.target,
                    "/pkg.Svc/Echo")
        tg.check_rc(r, 2)
        check_in("--rate wants a positive integer", tg.err(r), "--rate 0", r)


def rate_paces():
    """--rate N never runs ahead of N calls a second: at 3 000 a second,
    where calls leave in bursts once a millisecond, and at 40, where each
    waits for its own time (a lower bound only: the client controls it)."""
    with H2Server() as s:
        for count, rate in ((3001, 3000), (21, 40)):
            t0 = time.monotonic()
            r = tg.grit("call", "--count", str(count), "--rate", str(rate),
                        s.target, "/pkg.Svc/Echo")
            took = time.monotonic() - t0
            tg.check_rc(r, 0)
            check_in("calls=%d ok=%d failed={}" % (count, count), tg.out(r),
                     "summary", r)
            check(took >= (count - 1) / rate,
                  "%d calls at %d a second took %.3f s" % (count, rate, took),
                  r)


def metrics_http_example():
    """examples/metrics_http serves a second scraper while a first holds
    an idle connection (issue 28: it used to answer one at a time)."""
    exe = os.path.join(os.path.dirname(os.path.dirname(ARGS.grit)),
                       "examples", "metrics_http")
    if not os.access(exe, os.X_OK):
        raise Skip("examples/metrics_http not built")
    with H2Server() as s:
        port = free_port()
        p = subprocess.Popen([exe, s.target, "/pkg.Svc/Echo", str(port)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, preexec_fn=die_with_parent)
        try:
            line = tg.read_line(p, WAIT_S)
            check_in("serving http://127.0.0.1:%d/metrics" % port, line,
                     "metrics_http start")
            idle = socket.create_connection(("127.0.0.1", port), timeout=5)
            end = time.monotonic() + WAIT_S
            body = b""
            while b"pkg.Svc/Echo" not in body and time.monotonic() < end:
                st, _, body = http_get(port, "/metrics", timeout=5)
                check_eq(st, 200, "second scraper answered")
                time.sleep(0.2)
            check_in(b'grpc_method="pkg.Svc/Echo"', body, "its calls")
            idle.close()
        finally:
            p.send_signal(signal.SIGTERM)
            stop(p)


# ---- group 'otlp' (SPEC OP-02, gRFC A72) ----

RETRY_CONFIG = ('{"methodConfig":[{"name":[{"service":"obs.Svc"}],'
                '"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s",'
                '"maxBackoff":"0.01s","backoffMultiplier":1,'
                '"retryableStatusCodes":["UNAVAILABLE"]}}]}')


class OtlpReceiver:
    """test/peers/otlp_receiver.py on grpcio, its messages compiled from
    test/peers/otlp_trace.proto by protoc here; spans() reads the JSON
    lines it prints, one per span received."""

    def __init__(self, *flags):
        for tool in ("protoc", "/usr/bin/grpc_python_plugin",
                     tg.PYPEER_PYTHON):
            if not shutil.which(tool):
                raise Skip("%s not installed" % tool)
        if subprocess.run([tg.PYPEER_PYTHON, "-c", "import grpc, "
                           "google.protobuf"], capture_output=True,
                          timeout=WAIT_S).returncode != 0:
            raise Skip("no grpcio/protobuf for %s" % tg.PYPEER_PYTHON)
        gen = tempfile.mkdtemp(dir=ARGS.tmp)
        r = subprocess.run(["protoc", "-I" + ARGS.peers, "--python_out=" + gen,
                            "--grpc_out=" + gen,
                            "--plugin=protoc-gen-grpc=/usr/bin/"
                            "grpc_python_plugin",
                            os.path.join(ARGS.peers, "otlp_trace.proto")],
                           capture_output=True, timeout=WAIT_S)
        check_eq(r.returncode, 0, "protoc: %s" % r.stderr.decode())
        self.proc = subprocess.Popen(
            [tg.PYPEER_PYTHON, os.path.join(ARGS.peers, "otlp_receiver.py"),
             gen] + list(flags), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            preexec_fn=die_with_parent)
        line = tg.read_line(self.proc, WAIT_S)
        check(line.startswith("PORT "), "receiver gave no port: %r" % line)
        self.port = int(line.split()[1])
        self.buf = b""

    def spans(self, n):
        """At least |n| spans (within WAIT_S), as dicts."""
        import select
        end = time.monotonic() + WAIT_S
        while self.buf.count(b"\n") < n and time.monotonic() < end:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                self.buf += chunk
        return [json.loads(ln) for ln in self.buf.decode().splitlines()]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop(self.proc)


def otlp_retried_call():
    parent_span = "b7ad6b7169203331"
    parent = "00-0af7651916cd43dd8448eb211c80319c-%s-01" % parent_span
    key = "ops-otlp-%d" % os.getpid()
    path = tg.write_tmp(RETRY_CONFIG)
    with OtlpReceiver() as rx, tg.GrpcioPeer("observe_server.py") as p:
        # The front refuses the first stream (a transparent retry); then
        # one UNAVAILABLE attempt and a retry that succeeds.
        r = tg.grit("call", "--otlp", "127.0.0.1:%d" % rx.port,
                    "--traceparent", parent, "--service-config", path,
                    "--metadata", "x-call-key:%s" % key,
                    "--data", b"f0=14".hex(), p.target, "/obs.Svc/Retry")
        tg.check_rc(r, 0)
        check_in("4 spans exported, 0 dropped", tg.err(r), "export counts", r)
        spans = rx.spans(4)
        check_eq(len(spans), 4, "spans received: %r" % spans)
        call = [s for s in spans if s["name"] == "Sent.obs.Svc/Retry"]
        att = [s for s in spans if s["name"] == "Attempt.obs.Svc/Retry"]
        check_eq((len(call), len(att)), (1, 3), "names: %r" % spans)
        call = call[0]
        trace = "0af7651916cd43dd8448eb211c80319c"
        check_eq(call["kind"], 3, "call span is CLIENT")
        check_eq(call["trace_id"], trace, "the caller's trace")
        check_eq(call["parent_span_id"], parent_span, "child of the caller")
        check_eq(call["status_code"], 0, "OK leaves the status unset")
        check_eq(call["attributes"]["grpc.attempts"], 3, "attempts")
        check_eq((call["service"], call["scope"]), ("grit", "grit"),
                 "resource and scope")
        att.sort(key=lambda s: s["start"])
        for a in att:
            check_eq(a["kind"], 1, "attempt span is INTERNAL")
            check_eq(a["trace_id"], trace, "trace id")
            check_eq(a["parent_span_id"], call["span_id"],
                     "attempt is a child of the call span")
            check_eq(a["flags"], 1, "sampled")
            check(call["start"] <= a["start"] <= a["end"] <= call["end"],
                  "attempt inside the call: %r %r" % (a, call))
        check(abs(call["end"] / 1e9 - time.time()) < 120, "wall clock")
        check_eq([(a["attributes"]["previous-rpc-attempts"],
                   a["attributes"]["transparent-retry"],
                   a["attributes"]["rpc.grpc.status_code"],
                   a["status_code"]) for a in att],
                 [(0, False, 14, 2), (0, True, 14, 2), (1, False, 0, 0)],
                 "A72 attributes and status per attempt")
        check_in("GOAWAY", att[0]["status_message"], "refused stream's status")
        # The server saw the attempts' span ids in traceparent.
        r = tg.grit("call", "--data", key.encode().hex(), p.target,
                    "/obs.Svc/Log")
        tg.check_rc(r, 0)
        log = bytes.fromhex(tg.out(r).splitlines()[0].split(": ")[1]).decode()
        check_eq([ln.split()[2] for ln in log.splitlines()],
                 ["tp=00-%s-%s-01" % (trace, a["span_id"]) for a in att[1:]],
                 "traceparents the server saw", r)


def otlp_collector_down():
    count = 200
    with H2Server() as s:
        dead = free_port()  # nothing listens there
        r = tg.grit("call", "--otlp", "127.0.0.1:%d" % dead, "--count",
                    str(count), "--concurrency", "8", s.target,
                    "/pkg.Svc/Echo")
        tg.check_rc(r, 0)  # every call OK
        check_in("calls=%d ok=%d failed={}" % (count, count), tg.out(r),
                 "summary", r)
        # A call span and one attempt span per call, all dropped.
        check_in("0 spans exported, %d dropped" % (2 * count), tg.err(r),
                 "drop counter", r)


def otlp_collector_slow():
    """A collector slower than the export timeout (2 s): the calls do not
    wait for it, every span is dropped and counted, and the command still
    ends (its destroy waits a bounded time)."""
    count = 100
    with OtlpReceiver("--delay-ms", "5000") as rx, H2Server() as s:
        r = tg.grit("call", "--otlp", "127.0.0.1:%d" % rx.port, "--count",
                    str(count), "--concurrency", "8", s.target,
                    "/pkg.Svc/Echo")
        tg.check_rc(r, 0)
        check_in("calls=%d ok=%d failed={}" % (count, count), tg.out(r),
                 "summary", r)
        check_in("0 spans exported, %d dropped" % (2 * count), tg.err(r),
                 "drop counter", r)


GROUPS = {
    "admin": [admin_concurrent_and_channelz, admin_prometheus_scrape,
              admin_usage, rate_paces, metrics_http_example],
    "otlp": [otlp_retried_call, otlp_collector_down, otlp_collector_slow],
}


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grit", required=True)
    ap.add_argument("--h2server", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("group", choices=sorted(GROUPS))
    ARGS = ap.parse_args()
    tg.ARGS = ARGS
    sys.path.insert(0, ARGS.peers)
    signal.signal(signal.SIGTERM, tg.on_sigterm)
    failed = skipped = 0
    with tempfile.TemporaryDirectory(prefix="grit-ops-") as tmp:
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
            print("%-32s %5.2fs %s" % (case.__name__, time.monotonic() - t0,
                                       status), flush=True)
    if failed:
        return 1
    return 77 if skipped == len(GROUPS[ARGS.group]) else 0


if __name__ == "__main__":
    sys.exit(main())
