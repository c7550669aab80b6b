#!/usr/bin/python3
"""Three grpcio backends in one process that report their load the ORCA
way (SPEC LP-01..LP-04; gRFC A51), for test/behaviour/test_lbpol_grpcio.c.

The OrcaLoadReport and OrcaLoadReportRequest messages come from
test/peers/orca/ (the cncf/xds field numbers), compiled with protoc at
start into a temporary directory, so every report is a real serialized
xds.data.orca.v3.OrcaLoadReport.

Every backend serves, with raw bytes for its own methods:

  /lb.Svc/Call        answers "b<i>" after the backend's delay, with the
                      report in the endpoint-load-metrics-bin trailer
                      (unless the backend's trailer is off)
  /xds.service.orca.v3.OpenRcaService/StreamCoreMetrics
                      the out-of-band stream: a report at once, then one
                      every report_interval the client asked for
  /ctl.Ctl/Ports      "p0 p1 p2"
  /ctl.Ctl/Set        "<i> <key>=<value> ...": cpu, app, qps, eps, delay_ms
                      (numbers), trailer (0/1)
  /ctl.Ctl/Counts     "n0 n1 n2": /lb.Svc/Call calls seen per backend
  /ctl.Ctl/Reset      counts to zero
  /ctl.Ctl/Oob        "<streams> <interval_ms> <sent> ..." per backend:
                      StreamCoreMetrics streams opened, the last interval
                      asked for, reports sent
  /ctl.Ctl/RingOwner  request "<min> <max> <key> <addr0> <addr1> ...": the
                      index of the address grpc-core's ring_hash sends the
                      key to (its Ring construction and ketama search, on
                      Debian's libxxhash through ctypes), or "none"
                      without libxxhash

Prints "PORT <p0>" once serving; runs until its stdin closes or it gets
SIGTERM/SIGINT.
"""

import bisect
import ctypes
import ctypes.util
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

import peerlife  # noqa: E402  (beside this script)

N = 3
COND = threading.Condition()
STATE = [{"cpu": 0.0, "app": 0.0, "qps": 100.0, "eps": 0.0, "delay_ms": 0.0,
          "trailer": 1, "count": 0, "oob_streams": 0, "oob_interval_ms": 0,
          "oob_sent": 0} for _ in range(N)]
PORTS = []
HERE = os.path.dirname(os.path.abspath(__file__))


def compile_protos(out_dir):
    src = os.path.join(HERE, "orca")
    files = ["xds/data/orca/v3/orca_load_report.proto",
             "xds/service/orca/v3/orca.proto"]
    cmd = ["protoc", "-I" + src, "-I/usr/include", "--python_out=" + out_dir]
    res = subprocess.run(cmd + files, cwd=src, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit("orca_server: protoc failed:\n" + res.stderr)
    sys.path.insert(0, out_dir)
    from xds.data.orca.v3 import orca_load_report_pb2
    from xds.service.orca.v3 import orca_pb2
    return orca_load_report_pb2, orca_pb2


TMP = tempfile.TemporaryDirectory(prefix="grit-orca-")
REPORT_PB, SERVICE_PB = compile_protos(TMP.name)


def report_bytes(i):
    with COND:
        st = dict(STATE[i])
    r = REPORT_PB.OrcaLoadReport(cpu_utilization=st["cpu"],
                                 application_utilization=st["app"],
                                 rps_fractional=st["qps"], eps=st["eps"],
                                 mem_utilization=0.5)
    r.named_metrics["backend"] = float(i)
    r.utilization["gpu"] = 0.125
    return r.SerializeToString()


def xxh64_lib():
    for name in ("libxxhash.so.0", ctypes.util.find_library("xxhash")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.XXH64.restype = ctypes.c_uint64
        lib.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                              ctypes.c_uint64]
        return lib
    return None


XXH = xxh64_lib()


def ring_owner(min_size, max_size, key, addrs):
    """grpc-core's RingHash::Ring and Picker::Pick, all weights 1."""
    def h(b):
        return XXH.XXH64(b, len(b), 0)
    n = len(addrs)
    w = 1.0 / n
    scale = min(math.ceil(w * min(min_size, 4096)) / w, min(max_size, 4096))
    ring, cur, target = [], 0.0, 0.0
    for i, a in enumerate(addrs):
        target += scale * w
        c = 0
        while cur < target:
            ring.append((h(("%s_%d" % (a, c)).encode()), i))
            c += 1
            cur += 1
    ring.sort()
    hashes = [e[0] for e in ring]
    k = bisect.bisect_left(hashes, h(key.encode()))
    return ring[0 if k == len(ring) else k][1]


class Backend(grpc.GenericRpcHandler):
    def __init__(self, i):
        self.i = i

    def call(self, request, context):
        st = STATE[self.i]
        with COND:
            st["count"] += 1
            delay = st["delay_ms"]
            trailer = st["trailer"]
        if delay > 0:
            time.sleep(delay / 1000.0)
        if trailer:
            context.set_trailing_metadata(
                (("endpoint-load-metrics-bin", report_bytes(self.i)),))
        return b"b%d" % self.i

    def stream_core_metrics(self, request, context):
        req = SERVICE_PB.OrcaLoadReportRequest.FromString(request)
        ms = (req.report_interval.seconds * 1000 +
              req.report_interval.nanos // 1000000)
        st = STATE[self.i]
        with COND:
            st["oob_streams"] += 1
            st["oob_interval_ms"] = ms
        while context.is_active():
            with COND:
                st["oob_sent"] += 1
            yield report_bytes(self.i)
            time.sleep(max(ms, 20) / 1000.0)

    def ctl_set(self, request, context):
        words = request.decode().split()
        st = STATE[int(words[0])]
        with COND:
            for kv in words[1:]:
                k, v = kv.split("=", 1)
                if k not in ("cpu", "app", "qps", "eps", "delay_ms",
                             "trailer"):
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, k)
                st[k] = float(v)
        return b"ok"

    def ctl_counts(self, request, context):
        with COND:
            return " ".join(str(s["count"]) for s in STATE).encode()

    def ctl_reset(self, request, context):
        with COND:
            for s in STATE:
                s["count"] = 0
        return b"ok"

    def ctl_oob(self, request, context):
        with COND:
            return " ".join("%d %d %d" % (s["oob_streams"],
                                          s["oob_interval_ms"], s["oob_sent"])
                            for s in STATE).encode()

    def ctl_ring_owner(self, request, context):
        if XXH is None:
            return b"none"
        words = request.decode().split()
        owner = ring_owner(int(words[0]), int(words[1]), words[2], words[3:])
        return str(owner).encode()

    def service(self, details):
        m = details.method
        uu = grpc.unary_unary_rpc_method_handler
        if m == "/lb.Svc/Call":
            return uu(self.call)
        if m == "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics":
            return grpc.unary_stream_rpc_method_handler(
                self.stream_core_metrics)
        if m == "/ctl.Ctl/Ports":
            return uu(lambda r, c: " ".join(map(str, PORTS)).encode())
        if m == "/ctl.Ctl/Set":
            return uu(self.ctl_set)
        if m == "/ctl.Ctl/Counts":
            return uu(self.ctl_counts)
        if m == "/ctl.Ctl/Reset":
            return uu(self.ctl_reset)
        if m == "/ctl.Ctl/Oob":
            return uu(self.ctl_oob)
        if m == "/ctl.Ctl/RingOwner":
            return uu(self.ctl_ring_owner)
        return None


def main():
    servers = []
    for i in range(N):
        s = grpc.server(futures.ThreadPoolExecutor(max_workers=40))
        s.add_generic_rpc_handlers((Backend(i),))
        PORTS.append(s.add_insecure_port("127.0.0.1:0"))
        s.start()
        servers.append(s)
    peerlife.announce_and_wait(PORTS[0])
    for s in servers:
        s.stop(0)
    TMP.cleanup()


if __name__ == "__main__":
    main()
