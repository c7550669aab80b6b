#!/usr/bin/python3
"""Three grpcio backends in one process, for health checking (gRFC A17)
and outlier detection (gRFC A50) tests: test/behaviour/test_health_grpcio.c
and the `grit demo` scenes.

Every backend serves, with raw bytes (no protos):

  /lb.Svc/Call        answers "b<i>" (its index), or fails UNAVAILABLE when
                      the backend is set to fail (every call, or a share)
  /grpc.health.v1.Health/Watch
                      the standard health Watch (grpc/health/v1/health.proto,
                      encoded by hand: HealthCheckResponse{status}, field 1);
                      the status of the backend, for any service name; a
                      backend in "nohealth" mode answers UNIMPLEMENTED
  /ctl.Ctl/Ports      "p0 p1 p2"
  /ctl.Ctl/Set        request "<i> <what>": what is SERVING, NOT_SERVING,
                      UNKNOWN, nohealth, ok, fail, or fail=<percent>
  /ctl.Ctl/Counts     "n0 n1 n2": /lb.Svc/Call calls seen per backend
  /ctl.Ctl/Reset      counts to zero
  /lb.Svc/Hold        answers "b<i>" once /ctl.Ctl/Release is called (at
                      most 30 s later); /ctl.Ctl/Held says how many wait

Debian's python3-grpcio has no grpc_health module, so the health service
is served by hand here. Prints "PORT <p0>" once serving; runs until its
stdin closes or it gets SIGTERM/SIGINT.
"""

import random
import threading
from concurrent import futures

import grpc

import peerlife  # noqa: E402  (beside this script)

N = 3
STATUS = {"UNKNOWN": 0, "SERVING": 1, "NOT_SERVING": 2}
COND = threading.Condition()
STATE = [{"status": 1, "nohealth": False, "fail": 0, "count": 0}
         for _ in range(N)]
PORTS = []
RNG = random.Random(1)
HOLD = {"held": 0, "gen": 0}  # calls waiting in /lb.Svc/Hold, releases


def health_msg(status):
    return b"" if status == 0 else bytes([0x08, status])


class Backend(grpc.GenericRpcHandler):
    def __init__(self, i):
        self.i = i

    def call(self, request, context):
        st = STATE[self.i]
        with COND:
            st["count"] += 1
            fail = st["fail"] >= 100 or (st["fail"] > 0 and
                                         RNG.randrange(100) < st["fail"])
        if fail:
            context.abort(grpc.StatusCode.UNAVAILABLE,
                          "backend %d fails" % self.i)
        return b"b%d" % self.i

    def hold(self, request, context):
        with COND:
            gen = HOLD["gen"]
            HOLD["held"] += 1
            COND.notify_all()
            COND.wait_for(lambda: HOLD["gen"] != gen, timeout=30)
            HOLD["held"] -= 1
        return b"b%d" % self.i

    def release(self, request, context):
        with COND:
            HOLD["gen"] += 1
            COND.notify_all()
        return b"ok"

    def held(self, request, context):
        with COND:
            return b"%d" % HOLD["held"]

    def watch(self, request, context):
        st = STATE[self.i]
        if st["nohealth"]:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "no health service")
        last = None
        while context.is_active():
            with COND:
                cur = st["status"]
                if cur == last:
                    COND.wait(0.2)
                    continue
            last = cur
            yield health_msg(cur)

    def ctl_set(self, request, context):
        i, what = request.decode().split()
        st = STATE[int(i)]
        with COND:
            if what in STATUS:
                st["status"] = STATUS[what]
            elif what == "nohealth":
                st["nohealth"] = True
            elif what == "ok":
                st["fail"] = 0
            elif what == "fail":
                st["fail"] = 100
            elif what.startswith("fail="):
                st["fail"] = int(what[5:])
            else:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, what)
            COND.notify_all()
        return b"ok"

    def ctl_counts(self, request, context):
        with COND:
            return " ".join(str(s["count"]) for s in STATE).encode()

    def ctl_reset(self, request, context):
        with COND:
            for s in STATE:
                s["count"] = 0
        return b"ok"

    def service(self, details):
        m = details.method
        uu = grpc.unary_unary_rpc_method_handler
        if m == "/lb.Svc/Call":
            return uu(self.call)
        if m == "/lb.Svc/Hold":
            return uu(self.hold)
        if m == "/ctl.Ctl/Release":
            return uu(self.release)
        if m == "/ctl.Ctl/Held":
            return uu(self.held)
        if m == "/grpc.health.v1.Health/Watch":
            return grpc.unary_stream_rpc_method_handler(self.watch)
        if m == "/ctl.Ctl/Ports":
            return uu(lambda r, c: " ".join(map(str, PORTS)).encode())
        if m == "/ctl.Ctl/Set":
            return uu(self.ctl_set)
        if m == "/ctl.Ctl/Counts":
            return uu(self.ctl_counts)
        if m == "/ctl.Ctl/Reset":
            return uu(self.ctl_reset)
        return None


def main():
    servers = []
    for i in range(N):
        s = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        s.add_generic_rpc_handlers((Backend(i),))
        PORTS.append(s.add_insecure_port("127.0.0.1:0"))
        s.start()
        servers.append(s)
    peerlife.announce_and_wait(PORTS[0])
    for s in servers:
        s.stop(0)


if __name__ == "__main__":
    main()
