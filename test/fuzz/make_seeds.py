#!/usr/bin/env python3
"""Write the seed corpora of the deframer, headers, timeout_percent and
transport fuzz targets into test/fuzz/corpus/<target>/. The seeds are checked
in; this script documents how they were made and can regenerate them."""
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("latin-1")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- deframer: [limit][nsplit][cuts...][payload] ----
def msg(body, flag=0, length=None):
    n = len(body) if length is None else length
    return bytes([flag]) + struct.pack(">I", n) + body


def deframer():
    put("deframer", "one", bytes([0, 0]) + msg(b"hello"))
    put("deframer", "two_split", bytes([0, 3, 1, 7, 200]) + msg(b"ab") + msg(b"cdef"))
    put("deframer", "empty_msgs", bytes([0, 1, 128]) + msg(b"") * 4)
    put("deframer", "compressed", bytes([0, 0]) + msg(b"zz", flag=1))
    put("deframer", "bad_flag", bytes([0, 0]) + msg(b"zz", flag=0x80))
    put("deframer", "huge_prefix", bytes([0, 2, 2, 3]) + msg(b"abc", length=0xFFFFFFFF))
    put("deframer", "over_limit", bytes([4, 0]) + msg(b"x" * 101))
    put("deframer", "limit_zero", bytes([1, 0]) + msg(b"") + msg(b"a"))
    put("deframer", "partial_hdr", bytes([0, 1, 100]) + msg(b"abc") + b"\x00\x00")
    put("deframer", "partial_body", bytes([0, 0]) + msg(b"abc", length=10))
    put("deframer", "big", bytes([5, 4, 10, 60, 61, 250]) + msg(b"y" * 70000))
    put("deframer", "every_byte", bytes([0, 15]) + bytes(range(1, 16)) + msg(b"0123456789") * 2)


# ---- headers: "name:value" lines ----
def headers():
    put("headers", "ok", ":status:200\ncontent-type:application/grpc\ngrpc-status:0\n")
    put("headers", "status_bad", "grpc-status:17\ngrpc-status:-1\ngrpc-status:abc\ngrpc-status:007\ngrpc-status:\n")
    put("headers", "http", ":status:503\n:status:4x4\n:status:99999\n:status:\n")
    put("headers", "message", "grpc-message:caf%C3%A9 100%25 %zz %\ngrpc-message:%\ngrpc-message:%4\n")
    put("headers", "bin", "x-bin:AAH//g\nx-bin:AAH//g==\nx-bin:A\nx-bin:====\nx-bin:AB=C\ntrace-bin:\n")
    put("headers", "pushback", "grpc-retry-pushback-ms:100\n")
    put("headers", "pushback_neg", "grpc-retry-pushback-ms:-1\n")
    put("headers", "pushback_twice", "grpc-retry-pushback-ms:1\ngrpc-retry-pushback-ms:2\n")
    put("headers", "pushback_huge", "grpc-retry-pushback-ms:999999999999999999999\n")
    put("headers", "reserved", "Upper:x\ngrpc-foo:y\nte:trailers\nx-ok:\x01\x7f\nbad key:v\n")
    put("headers", "no_colon", "justaname\n:\n::\n")
    put("headers", "nul", "x-a\x00b:v\x00w\n")


# ---- timeout_percent: raw values ----
def timeout_percent():
    for name, v in [("1n", "1n"), ("max_h", "99999999H"), ("1S", "1S"),
                    ("bad_unit", "100x"), ("nine_digits", "123456789S"),
                    ("empty", ""), ("sign", "-1S"), ("zero", "0m"),
                    ("pct", "a%20b%zz%"), ("pct_tail", "%4"),
                    ("binary", "\xff\xff\xff\xff\xff\xff\xff\x7f%41"),
                    ("neg64", "\x00\x00\x00\x00\x00\x00\x00\x80")]:
        put("timeout_percent", name, v)


# ---- transport: [flags] + server frames after its SETTINGS ----
def frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def hint(n, prefix):
    maxp = (1 << prefix) - 1
    if n < maxp:
        return [n]
    out = [maxp]
    n -= maxp
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    out.append(n)
    return out


def hpack(hdrs):
    b = bytearray()
    for k, v in hdrs:
        k = k.encode("latin-1")
        v = v.encode("latin-1")
        b.append(0)  # literal without indexing, new name
        b += bytes(hint(len(k), 7)) + k
        b += bytes(hint(len(v), 7)) + v
    return bytes(b)


END_STREAM, END_HEADERS, ACK = 1, 4, 1
RESP = [(":status", "200"), ("content-type", "application/grpc")]


def headers_frame(sid, hdrs, end=False):
    return frame(1, END_HEADERS | (END_STREAM if end else 0), sid, hpack(hdrs))


def data(sid, payload, end=False):
    return frame(0, END_STREAM if end else 0, sid, payload)


def unary(sid, body=b"pong", status="0"):
    return headers_frame(sid, RESP) + data(sid, msg(body)) + \
        headers_frame(sid, [("grpc-status", status)], end=True)


def transport():
    settings_ack = frame(4, ACK, 0, b"")
    put("transport", "unary", bytes([1]) + settings_ack + unary(1))
    put("transport", "three_streams", bytes([3]) + settings_ack + unary(5) +
        headers_frame(1, RESP) + headers_frame(3, [(":status", "200"), ("content-type", "application/grpc+proto")]) +
        data(1, msg(b"a")[:3]) + data(3, msg(b"bb")) + data(1, msg(b"a")[3:]) +
        headers_frame(1, [("grpc-status", "14"), ("grpc-message", "try%20again"), ("grpc-retry-pushback-ms", "10")], end=True) +
        frame(3, 0, 3, struct.pack(">I", 8)))
    put("transport", "trailers_only", bytes([1]) + headers_frame(
        1, RESP + [("grpc-status", "5"), ("grpc-message", "caf%C3%A9"), ("x-why-bin", "AAH//g")], end=True))
    put("transport", "refused", bytes([1]) + frame(3, 0, 1, struct.pack(">I", 7)))
    put("transport", "goaway", bytes([2]) + frame(7, 0, 0, struct.pack(">II", 1, 0) + b"bye") + unary(1))
    put("transport", "goaway_calm", bytes([1]) + frame(7, 0, 0, struct.pack(">II", 0, 11) + b"too_many_pings"))
    put("transport", "compressed", bytes([1]) + headers_frame(1, RESP) + data(1, msg(b"zz", flag=1)) +
        headers_frame(1, [("grpc-status", "0")], end=True))
    put("transport", "huge_prefix", bytes([1]) + headers_frame(1, RESP) + data(1, msg(b"abc", length=0xFFFFFFFF)))
    put("transport", "small_limits", bytes([1 | 4 | 8]) + headers_frame(1, RESP + [("x-big", "v" * 300)]) +
        data(1, msg(b"x" * 40)) + headers_frame(1, [("grpc-status", "0")], end=True))
    put("transport", "ping_flood", bytes([1]) + frame(6, 0, 0, b"12345678") * 200 + unary(1))
    put("transport", "settings_flood", bytes([1]) + (frame(4, 0, 0, struct.pack(">HI", 3, 0)) +
        frame(4, 0, 0, struct.pack(">HI", 4, 0x7FFFFFFF))) * 20 + unary(1))
    put("transport", "window_overflow", bytes([1 | 16]) + frame(8, 0, 0, struct.pack(">I", 0x7FFFFFFF)) * 2)
    cont = frame(1, 0, 1, hpack(RESP)) + frame(9, 0, 1, hpack([("x-a", "b")])) * 20
    put("transport", "continuation_flood", bytes([1]) + cont)
    put("transport", "data_first", bytes([1]) + data(1, msg(b"early")) + unary(1))
    put("transport", "push_promise", bytes([1]) + frame(5, END_HEADERS, 1, struct.pack(">I", 2) + hpack([(":method", "GET")])))
    put("transport", "informational", bytes([1]) + headers_frame(1, [(":status", "100")]) + unary(1))
    put("transport", "http_503", bytes([1]) + headers_frame(1, [(":status", "503")], end=True))
    put("transport", "status_garbage", bytes([1 | 32]) + headers_frame(1, RESP) +
        headers_frame(1, [("grpc-status", "99999"), ("grpc-message", "%%%")], end=True))
    put("transport", "garbage", bytes([1]) + b"\xde\xad\xbe\xef" * 10)
    put("transport", "rst_stream0", bytes([1]) + frame(3, 0, 0, struct.pack(">I", 1)))
    put("transport", "half_open", bytes([1 | 16]) + headers_frame(1, RESP) + data(1, msg(b"one")) + data(1, msg(b"two")))


# ---- inflate: [codec bit 0, limit index in bits 1..3][compressed bytes] ----
def inflate():
    import zlib

    def gz(b):
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(b) + c.flush()

    def df(b):
        return zlib.compress(b)

    put("inflate", "gzip_hello", bytes([1]) + gz(b"hello hello hello"))
    put("inflate", "deflate_zeros", bytes([0]) + df(bytes(5000)))
    put("inflate", "gzip_over_limit", bytes([1 | 3 << 1]) + gz(bytes(1000)))
    put("inflate", "gzip_exact_limit", bytes([1 | 3 << 1]) + gz(bytes(100)))
    put("inflate", "bomb_1mib", bytes([1 | 4 << 1]) + gz(bytes(1 << 20)))
    put("inflate", "truncated", bytes([1]) + gz(b"abcdefgh" * 50)[:-6])
    put("inflate", "trailing", bytes([0]) + df(b"abc") + b"xyz")
    put("inflate", "wrong_wrapper", bytes([0]) + gz(b"abc"))
    bad = bytearray(gz(b"crc check" * 10))
    bad[-6] ^= 0xFF
    put("inflate", "bad_crc", bytes([1]) + bytes(bad))
    put("inflate", "empty", bytes([1]))
    put("inflate", "empty_message", bytes([1]) + gz(b""))
    put("inflate", "stored_block", bytes([0]) + zlib.compress(b"q" * 300, 0))


if __name__ == "__main__":
    deframer()
    headers()
    timeout_percent()
    transport()
    inflate()
    sys.exit(0)
