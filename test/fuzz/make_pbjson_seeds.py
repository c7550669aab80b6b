#!/usr/bin/python3
"""Write the seed corpora of the pbjson fuzz targets into
test/fuzz/corpus/pbjson_{wire,json}/ (and pbjson_wkt, status_details: issue 29) from test/pbjson/kitchen.proto, with
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
    wkt_and_status_seeds(kp, json_format, tmp)


def wkt_and_status_seeds(kp, json_format, tmp):
    """Issue 29: pbjson_wkt (JSON of grit.test.Wkt) and status_details
    (google.rpc.Status bytes, built from pbjson/rpc/google/rpc/*.proto)."""
    from google.protobuf import duration_pb2, struct_pb2
    w = kp.Wkt()
    w.any.Pack(kp.Inner(name="x\u0000", nums=[1]))
    w.st.update({"a": [1, None, {"b": "c"}], "t": True})
    w.val.null_value = 0
    w.list.extend([1.5, "s"])
    w.mask.paths.extend(["foo_bar.x", "y"])
    w.empty.SetInParent()
    w.w_uint64.value = (1 << 64) - 1
    w.anys.add().Pack(duration_pb2.Duration(seconds=1, nanos=5))
    w.anys.add().Pack(struct_pb2.Value(string_value="v"))
    w.vmap["k"].bool_value = False
    w.pick_null = 0
    w.renamed = "r"
    put("pbjson_wkt", "wkt", json_format.MessageToJson(w, indent=None))
    put("pbjson_wkt", "wkt_wire", w.SerializeToString())
    put("pbjson_wkt", "big_numbers", '{"kitchen":{"u64":18446744073709551615,'
        '"db":123456789012345678901234567890},"st":{"n":-99999999999999999999}}')
    put("pbjson_wkt", "raw_any", '{"any":{"@type":"x/y.Z","@value":"AQI="}}')
    put("pbjson_wkt", "nested_any", '{"any":{"@type":"type.googleapis.com/'
        'google.protobuf.Any","value":{"@type":"type.googleapis.com/'
        'google.protobuf.Value","value":[null,{"a":[]}]}}}')
    put("pbjson_wkt", "bad_mask", '{"mask":"a_b"}')
    rpc = os.path.join(HERE, "..", "..", "pbjson", "rpc")
    subprocess.check_call(["protoc", "--python_out=" + tmp, "-I" + rpc,
                           "google/rpc/status.proto",
                           "google/rpc/error_details.proto"])
    def load(name):  # by path: "google" is python-protobuf's package
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(tmp, "google", "rpc", name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    st_pb = load("status_pb2")
    ed_pb = load("error_details_pb2")
    st = st_pb.Status(code=3, message="bad \u00e9")
    br = ed_pb.BadRequest()
    br.field_violations.add(field="a", description="b")
    st.details.add().Pack(br)
    st.details.add().Pack(ed_pb.RetryInfo(
        retry_delay=duration_pb2.Duration(seconds=1)))
    st.details.add().Pack(ed_pb.ErrorInfo(reason="r", domain="d",
                                          metadata={"k": "v"}))
    st.details.add().Pack(ed_pb.DebugInfo(stack_entries=["s"], detail="d"))
    unknown = st.details.add()
    unknown.type_url = "type.googleapis.com/x.Unknown"
    unknown.value = b"\x08\x01"
    put("status_details", "all", st.SerializeToString())
    put("status_details", "empty", b"")
    put("status_details", "truncated", st.SerializeToString()[:-3])
    put("status_details", "no_url", bytes([0x1a, 0x02, 0x12, 0x00]))


if __name__ == "__main__":
    main()
