#!/usr/bin/env python3
"""A scripted UDP DNS responder for the grit command's tests (issue 20),
the Python twin of test/peers/dnsresp.h: every name gets the same answers,
A from |a_ip| and TXT from |txt| as one record in 255-byte strings; each
type can instead be dropped (no reply), NXDOMAIN or REFUSED. AAAA gets no
data. Runs in a thread on 127.0.0.1, ephemeral port; use as a context
manager (stopped on exit, bounded by its 50 ms poll).

    with DnsResponder(txt='grpc_config=[...]') as dns:
        ... --dns-server dns.server ...
"""

import socket
import struct
import threading

ANSWER, DROP, NXDOMAIN, REFUSE = "answer", "drop", "nxdomain", "refuse"


class DnsResponder:
    def __init__(self, a_ip="127.0.0.1", txt=None, a_mode=ANSWER,
                 txt_mode=None):
        self.a_ip, self.txt = a_ip, txt
        self.a_mode = a_mode
        self.txt_mode = txt_mode or (ANSWER if txt is not None else NXDOMAIN)
        self.counts = {"A": 0, "AAAA": 0, "TXT": 0}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.server = "127.0.0.1:%d" % self.port
        self.stopping = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.stopping = True
        self.thread.join(5)
        self.sock.close()

    def run(self):
        while not self.stopping:
            try:
                q, peer = self.sock.recvfrom(1500)
            except socket.timeout:
                continue
            except OSError:
                return
            r = self.answer(q)
            if r:
                self.sock.sendto(r, peer)

    def answer(self, q):
        if len(q) < 17:
            return None
        i = 12
        while i < len(q) and q[i] != 0:
            i += 1 + q[i]
        qend = i + 5
        if qend > len(q):
            return None
        qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
        mode, rdata = ANSWER, None
        if qtype == 1:
            self.counts["A"] += 1
            mode, rdata = self.a_mode, socket.inet_aton(self.a_ip)
        elif qtype == 28:
            self.counts["AAAA"] += 1
            mode = self.a_mode
        elif qtype == 16:
            self.counts["TXT"] += 1
            mode = self.txt_mode
            t = (self.txt or "").encode()
            rdata = b"".join(bytes([len(t[o:o + 255])]) + t[o:o + 255]
                             for o in range(0, max(len(t), 1), 255))
        if mode == DROP:
            return None
        rcode = {NXDOMAIN: 3, REFUSE: 5}.get(mode, 0)
        flags = 0x8000 | (struct.unpack(">H", q[2:4])[0] & 0x7900) | 0x80
        an = 1 if rcode == 0 and rdata is not None else 0
        head = q[:2] + struct.pack(">HHHHH", flags | rcode, 1, an, 0, 0)
        body = q[12:qend]
        if an:
            body += struct.pack(">HHHIH", 0xc00c, qtype, 1, 0, len(rdata))
            body += rdata
        return head + body
