#!/usr/bin/env python3
"""Writes the committed seed corpora, fuzz/seeds/<target>/<name>.

The seeds are the real taskflow bytes in ../shared/fixtures/taskflow/
(golden postings, datetimes, lock bodies, the reader verdicts) plus a few
hand-made inputs that reach branches the fixtures do not (oslo ext types
inside details, bin keys, NaN, escapes, jobworker's lease and record).
Run it again after the fixtures change; the output is deterministic.

    python3 fuzz/make_seeds.py [FIXTURES_DIR]
"""

import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    HERE, "..", "..", "shared", "fixtures", "taskflow")
SEEDS = os.path.join(HERE, "seeds")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


def write(target, name, data):
    folder = os.path.join(SEEDS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# A minimal msgpack writer (str as str, ints smallest), enough for the
# hand-made seeds; the golden seeds are taskflow's own bytes.
class Ext:
    def __init__(self, code, data):
        self.code, self.data = code, data


def pack(v):
    if v is None:
        return b"\xc0"
    if v is True or v is False:
        return b"\xc3" if v else b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if -32 <= v < 0:
            return struct.pack("b", v)
        if 0 <= v < 1 << 16:
            return b"\xcd" + struct.pack(">H", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b
    if isinstance(v, bytes):
        return b"\xc4" + bytes([len(v)]) + v
    if isinstance(v, list):
        return bytes([0x90 | len(v)]) + b"".join(pack(x) for x in v)
    if isinstance(v, dict):
        return bytes([0x80 | len(v)]) + b"".join(pack(k) + pack(x) for k, x in v.items())
    if isinstance(v, Ext):
        return b"\xc7" + bytes([len(v.data), v.code & 0xff]) + v.data
    raise TypeError(v)


def oslo_datetime(y, mo, d, h=0, mi=0, s=0, us=0, **extra):
    fields = {"day": d, "month": mo, "year": y, "hour": h, "minute": mi,
              "second": s, "microsecond": us}
    fields.update(extra)
    return Ext(1, pack(fields))


def redis_seeds(golden, verdicts):
    for job in "abcd":
        write("redis_posting", f"golden_job_{job}",
              bytes.fromhex(golden["samples"][f"posting_job_{job}"]["value_hex"]))
    for case, spec in sorted(verdicts["cases"].items()):
        write("redis_posting", f"verdict_{case}", bytes.fromhex(spec["value_hex"]))
    base = {"uuid": "0b5a1d2e-3c4f-4a6b-8c7d-9e0f1a2b3c09", "name": "n",
            "priority": "LOW", "created_on": oslo_datetime(2024, 2, 29, 23, 59, 59, 999999)}
    details = {
        "uuid": Ext(0, b"0b5a1d2e3c4f4a6b8c7d9e0f1a2b3c01"),
        "set": Ext(4, pack([1, "two", None])),
        "frozen": Ext(5, pack([])),
        "date": Ext(7, pack({"year": 2024, "month": 5, "day": 6})),
        "xmlrpc": Ext(6, oslo_datetime(1999, 12, 31, tz="UTC").data),
        "stamp": Ext(-1, b"\x00\x00\x00\x01"),
        "app": Ext(33, b"\x01\x02"),
        "bytes": b"\x00\xff",
        "floats": [0.5, float("nan"), float("-inf"), -0.0],
        "ints": [-1, -33, 300, 70000, -(1 << 40)],
        "nested": {"a": [{"b": [True, False]}]},
    }
    write("redis_posting", "handmade_oslo_exts",
          pack(dict(base, details=details, book={"name": "bk", "uuid": "u"}, sequence=70000)))
    write("redis_posting", "handmade_bin_key_details",
          pack(dict(base, details={b"old": 1}, sequence=1)))


def datetime_seeds(golden):
    for name, sample in sorted(golden["datetime_ext_samples"].items()):
        write("oslo_datetime", name, bytes.fromhex(sample["value_hex"]))
    write("oslo_datetime", "last_modified",
          bytes.fromhex(golden["samples"]["last_modified_value"]["value_hex"]))
    bin_keys = Ext(1, pack({k.encode(): v for k, v in
                            {"day": 1, "month": 1, "year": 1, "hour": 0, "minute": 0,
                             "second": 0, "microsecond": 0, "tz": b"UTC"}.items()}))
    write("oslo_datetime", "handmade_bin_keys", pack(bin_keys))
    write("oslo_datetime", "handmade_leap_day_zone",
          pack(oslo_datetime(2000, 2, 29, 12, 30, 45, 1, tz="Europe/Paris")))


def zookeeper_seeds(zk):
    for job in "abcd":
        write("zookeeper_posting", f"golden_job_{job}",
              bytes.fromhex(zk["samples"][f"job_job_{job}"]["data_hex"]))
    write("zookeeper_posting", "golden_trash_c",
          bytes.fromhex(zk["samples"]["trash_job_c"]["data_hex"]))
    handmade = {
        "lowercase_priority": b'{"uuid": "u-1", "name": "n", "priority": "very_low"}',
        "specials": b'{"name":"n","uuid":"u-2","details":{"f":[NaN,-Infinity,1e400,-0.0,'
                    b'1.5e-7,18446744073709551615,99999999999999999999,-0],"\\u00e9\\ud83d\\ude00'
                    b'\\ud800":"\\"\\\\\\/\\b\\f\\n\\r\\t"},"book":{"name":"b","uuid":"u"}}',
        "duplicate_keys": b'{"uuid": "a", "name": "n", "uuid": "b", "details": {"k": 1, "k": 2}}',
        "deep": b'{"uuid": "u", "name": "n", "details": ' + b"[" * 40 + b"]" * 40 + b"}",
    }
    for name, data in handmade.items():
        write("zookeeper_posting", f"handmade_{name}", data)


def lock_seeds(zk):
    write("zookeeper_lock_body", "golden_lock",
          bytes.fromhex(zk["samples"]["lock_job_a"]["data_hex"]))
    write("zookeeper_lock_body", "golden_entity",
          bytes.fromhex(zk["samples"]["entity_conductor"]["data_hex"]))
    write("zookeeper_lock_body", "lease",
          b'{"owner": "w1", "lease_deadline_ms": 1700000000123, "lease_ms": 30000, '
          b'"claim_id": "c0ffee"}')
    write("zookeeper_lock_body", "lease_odd_types",
          b'{"owner": "\\u00e9", "lease_deadline_ms": 1.5, "lease_ms": -9223372036854775808, '
          b'"claim_id": null}')
    write("zookeeper_lock_body", "record",
          json.dumps({"job": "job0000000003", "name": "resize", "priority": 7,
                      "max_attempts": 5, "attempts": 1, "run_at_ms": 1700000000000,
                      "token": 12, "ending": "trashed", "reason": "stalled: lease expired",
                      "group": "stalled", "tags": ["a", "b"], "posted_ms": 1,
                      "finished_ms": 2, "nonce": "n0"}, separators=(",", ":")).encode())
    write("zookeeper_lock_body", "record_minimal", b'{"name": "x", "ending": "live"}')


def main():
    golden = fixture("redis_golden.json")
    redis_seeds(golden, fixture("redis_reader_verdicts.json"))
    datetime_seeds(golden)
    zk = fixture("zookeeper_golden.json")
    zookeeper_seeds(zk)
    lock_seeds(zk)


if __name__ == "__main__":
    main()
