#!/usr/bin/env python3
"""The operator's view (issue 28 parts 1-3; SPEC OP-01, OP-02, OP-03),
through the grit command against real components:

  test_ops.py --grit PATH --h2server PATH --peers DIR GROUP

admin: `grit call --rate --admin` serves GET /metrics and /channelz while
       it runs; an idle connection does not block another scraper;
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
            check(sc[0]["calls_started"] >= c["calls_succeeded"],
                  "subchannel calls: %s" % sc[0])
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


GROUPS = {
    "admin": [admin_concurrent_and_channelz, admin_prometheus_scrape,
              metrics_http_example],
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
