#!/usr/bin/env python3
"""Write the seed corpus of the orca fuzz target (SPEC LP-01) into
test/fuzz/corpus/orca/. The reports are encoded here by hand from the
OrcaLoadReport definition (field numbers of cncf/xds
xds/data/orca/v3/orca_load_report.proto); "full" is byte for byte what
python3-protobuf 4.21 writes for the report test/unit/test_lbpol.c
decodes. The seeds are checked in; this script documents them."""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                    "orca")


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def dbl(field, v):
    return varint(field << 3 | 1) + struct.pack("<d", v)


def entry(field, key, value):
    body = b"\x0a" + varint(len(key)) + key + dbl(2, value)
    return varint(field << 3 | 2) + varint(len(body)) + body


def put(name, data):
    os.makedirs(ROOT, exist_ok=True)
    with open(os.path.join(ROOT, name), "wb") as f:
        f.write(data)


put("empty", b"")
put("cpu", dbl(1, 0.2))
put("full", dbl(1, 0.25) + dbl(2, 0.5) + varint(3 << 3) + varint(7) +
    entry(4, b"db", 3.5) + entry(5, b"gpu", 0.125) + dbl(6, 123.5) +
    dbl(7, 1.5) + entry(8, b"q2", 1.0) + entry(8, b"queue", 42.0) +
    dbl(9, 0.75))
put("app_util_qps_eps", dbl(9, 0.6) + dbl(6, 1000.0) + dbl(7, 10.0))
put("unknown_fields", varint(15 << 3) + varint(5) + varint(16 << 3 | 1) +
    b"\0" * 8 + varint(17 << 3 | 2) + b"\x02hi" + varint(18 << 3 | 5) +
    b"\0" * 4 + dbl(1, 1.0))
put("truncated_double", dbl(1, 0.5)[:5])
put("wrong_wire_type", varint(1 << 3) + varint(1))
put("entry_no_key", varint(8 << 3 | 2) + b"\x09" + dbl(2, 1.0))
put("entry_bad_value", varint(8 << 3 | 2) + b"\x02\x10\x01")
put("long_varint", varint(3 << 3) + b"\xff" * 10 + b"\x01")
put("many_entries", b"".join(entry(8, b"m%d" % i, float(i))
                              for i in range(64)))
