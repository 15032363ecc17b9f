#!/usr/bin/env python3
"""What a work unit of the decode budget costs in time, per kind of body
(``rocketpy.remoting.budget``: inflated bytes, JSON values and topic lines, lenient operations).

    python3 bench/decode_units.py

Each body is decoded once by the NameServer's reader (``registration.read_body``) with an
unbounded budget; printed: its size, the units it spent, the time, and nanoseconds per unit.
The costs are calibrated so that the kinds come out alike (a unit ~20-60 ns here): then the
default budget (64 Mi units) bounds a decode's time, whatever its kind, and the decode pool's
quantum (``rocketpy.transport.offload.QUANTUM``) a turn's. Numbers vary with the machine's
load: run it on a quiet one.
"""
import os
import struct
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from brokerbody import register_body  # noqa: E402
from fuzzharness import odd_line_bomb, topic_line_bomb  # noqa: E402
from rocketpy.namesrv.processor.registration import read_body  # noqa: E402
from rocketpy.remoting import bodies  # noqa: E402
from rocketpy.remoting.budget import DecodeBudget  # noqa: E402

V5 = 479
PART = 4 * 1024 * 1024 - 64


def _part(raw):
    return struct.pack(">i", len(raw)) + raw


def compressed(data_version=b'{"counter":1,"timestamp":1}', mappings=()):
    """A compressed 5.x body of no topic with these DataVersion and mapping parts."""
    raw = (_part(data_version) + struct.pack(">i", 0) + _part(b"[]")
           + struct.pack(">i", len(mappings)) + b"".join(map(_part, mappings)))
    return zlib.compress(raw, 9)


def cases():
    topics = [f"Topic{i}" for i in range(10_000)]
    yield "genuine plain, 10,000 topics", register_body(topics), False
    yield "genuine plain, 100,000 topics", register_body(
        [f"Topic{i}" for i in range(100_000)]), False
    yield "genuine compressed, 10,000", bodies.RegisterBrokerBody.from_json(
        register_body(topics)).encode(compress=True), True
    yield "3 M identical topic lines", topic_line_bomb(3_000_000), True
    yield "1 M odd topic lines", odd_line_bomb(1_000_000), True
    yield "lenient part: a:1,", compressed(b"{counter:1," + b"a:1," * (PART // 4) + b"}"), True
    yield "lenient part: [1,1,...]", compressed(
        b"{counter:1,x:[" + b"1," * (PART // 2) + b"]}"), True
    yield "lenient part: /**/", compressed(b"{counter:1" + b"/**/" * (PART // 4) + b"}"), True
    yield "lenient part: blanks", compressed(b"{counter:1," + b" " * PART + b"}"), True
    yield "strict part: a key many times", compressed(
        b'{"counter":1,' + b'"a":1,' * (PART // 6) + b'"b":1}'), True
    yield "mapping: 250,000 currIdMap entries", compressed(mappings=[
        b'{"bname":"b","currIdMap":{' + b",".join(b"%d:%d" % (i, i) for i in range(250_000))
        + b'},"topic":"T"}']), True


def main():
    print(f"{'body':36s} {'bytes':>10s} {'M units':>9s} {'ms':>8s} {'ns/unit':>8s}")
    for name, body, is_compressed in cases():
        budget = DecodeBudget(0)
        started = time.perf_counter()
        try:
            read_body(body, is_compressed, V5, budget=budget)
            error = ""
        except Exception as exc:   # a bomb's refusal is its answer: the units spent still count
            error = type(exc).__name__
        seconds = time.perf_counter() - started
        print(f"{name:36s} {len(body):10d} {budget.spent / 1e6:9.1f} {seconds * 1e3:8.0f} "
              f"{seconds * 1e9 / max(budget.spent, 1):8.1f} {error}")


if __name__ == "__main__":
    main()
