#!/usr/bin/env python3
"""Write the seed corpus of the dns_ttl fuzz target (SPEC OP-04) into
test/fuzz/corpus/dns_ttl/: raw DNS responses as a server sends them. The
first byte of each seed picks the query type the target asks about
(0: TXT, 1: A, 2: AAAA); the rest is the message. The seeds are checked in;
this script documents how they were made and can regenerate them."""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                    "dns_ttl")
TXT, A, AAAA, CNAME, SOA = 16, 1, 28, 5, 6


def name(s):
    out = b""
    for label in s.split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\x00"


def header(an, ns=0, rcode=0, qd=1):
    return struct.pack(">HHHHHH", 0x1234, 0x8180 | rcode, qd, an, ns, 0)


def question(qname, qtype):
    return name(qname) + struct.pack(">HH", qtype, 1)


def rr(owner, rtype, ttl, rdata):
    return owner + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata


def txt(*strings):
    return b"".join(bytes([len(s)]) + s for s in strings)


def soa(ttl, minimum):
    rdata = (name("ns.test") + name("admin.test") +
             struct.pack(">IIIII", 1, 3600, 600, 86400, minimum))
    return rr(name("test"), SOA, ttl, rdata)


def put(fname, sel, data):
    os.makedirs(ROOT, exist_ok=True)
    with open(os.path.join(ROOT, fname), "wb") as f:
        f.write(bytes([sel]) + data)


def main():
    q = question("_grpc_config.svc.test", TXT)
    ptr = b"\xc0\x0c"
    put("txt_one", 0, header(1) + q + rr(ptr, TXT, 300, txt(b"grpc_config=[]")))
    put("txt_two_records", 0, header(2) + q +
        rr(ptr, TXT, 300, txt(b"grpc_config=[]")) +
        rr(ptr, TXT, 30, txt(b"other", b"strings")))
    put("txt_cname", 0, header(2) + q +
        rr(ptr, CNAME, 10, name("cfg.test")) +
        rr(name("cfg.test"), TXT, 600, txt(b"grpc_config=[]")))
    put("txt_nxdomain_soa", 0, header(0, 1, rcode=3) + q + soa(3600, 60))
    put("txt_nodata_soa", 0, header(0, 1) + q + soa(20, 900))
    put("txt_nxdomain_bare", 0, header(0, rcode=3) + q)
    put("txt_ttl_top_bit", 0, header(1) + q +
        rr(ptr, TXT, 0x80000001, txt(b"x")))
    put("txt_truncated", 0, (header(1) + q + rr(ptr, TXT, 5, txt(b"abc")))[:-2])
    put("txt_loop_ptr", 0, header(1) + q + b"\xc0\x0c\xc0")
    put("a_two", 1, header(2) + question("svc.test", A) +
        rr(ptr, A, 120, bytes([127, 0, 0, 1])) +
        rr(ptr, A, 60, bytes([127, 0, 0, 2])))
    put("aaaa_one", 2, header(1) + question("svc.test", AAAA) +
        rr(ptr, AAAA, 7, bytes(15) + b"\x01"))
    put("bad_label_type", 0, header(1) + b"\x40abc\x00" + b"\x00\x10\x00\x01")
    put("short", 0, b"\x12\x34\x81")


if __name__ == "__main__":
    main()
