#!/usr/bin/python3
"""Write the seed corpora of the pbjson fuzz targets into
test/fuzz/corpus/pbjson_{wire,json}/ from test/pbjson/kitchen.proto, with
Debian's python3-protobuf (run with /usr/bin/python3). The seeds are
checked in; this script documents how they were made."""
import importlib
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "pbjson")


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    tmp = tempfile.mkdtemp()
    subprocess.check_call(["protoc", "--python_out=" + tmp, "-I" + PROTO_DIR,
                           "kitchen.proto"])
    sys.path.insert(0, tmp)
    kp = importlib.import_module("kitchen_pb2")
    from google.protobuf import json_format
    k = kp.Kitchen(i32=-7, i64=-(1 << 40), u64=(1 << 64) - 1, s32=-3,
                   s64=-5, f32=7, f64=9, sf32=-9, sf64=-11, fl=1.5, db=0.1,
                   flag=True, text="h\u00e9", blob=b"\x00\xff",
                   color=kp.GREEN, tags=["a"], ratios=[0.25],
                   colors=[kp.RED], opt_i32=0, choice_text="c",
                   server_note="unknown to the fuzz pool")
    k.inner.nums.extend([1, -2])
    k.counts["one"] = 1
    k.by_id[3].name = "three"
    k.when.seconds = 1700000000
    k.when.nanos = 5000
    k.took.seconds = -3
    k.took.nanos = -1000
    k.maybe_i64.value = 0
    k.maybe_text.value = "w"
    put("pbjson_wire", "kitchen", k.SerializeToString())
    put("pbjson_wire", "empty", b"")
    put("pbjson_wire", "unpacked_ints", bytes([0x72, 0x02, 0x10, 0x01,
                                               0x10, 0x02]))
    put("pbjson_wire", "bad_varint", bytes([0x08, 0xff, 0xff]))
    k.ClearField("server_note")
    put("pbjson_json", "kitchen", json_format.MessageToJson(k, indent=None))
    put("pbjson_json", "names", '{"i32":1,"opt_i32":2,"by_id":{"-1":{}}}')
    put("pbjson_json", "special", '{"fl":"NaN","db":"-Infinity",'
        '"when":"1970-01-01T00:00:00+01:00","took":"0.5s"}')
    put("pbjson_json", "bad", '{"color":"BLUE"}')


if __name__ == "__main__":
    main()
