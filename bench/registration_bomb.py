#!/usr/bin/env python3
"""Costly REGISTER_BROKER bodies: how long they take to decode, and whether the reactor still
serves everyone else while one decodes (docs/reliability.md, "Costly registration bodies").

    python3 bench/registration_bomb.py                 # every part (a few minutes)
    python3 bench/registration_bomb.py --part decode --codec   # also time the codec's beans

Parts:

* ``decode``: µs per topic of the NameServer's compressed decode
  (``registration.read_body``: the codec's record reader) -- and with ``--codec`` of the codec's
  reference path (``RegisterBrokerBody.decode`` + ``register_broker_body_records``) -- for the 160 KB body of 3
  million identical topic lines (``tests/fuzzharness.py: topic_line_bomb``) and a 5 MB body of 2
  million distinct topics; and the worst plain-JSON body (16 MiB, ~1.4 million tiny topics):
  how long ``json.loads`` alone holds the GIL, and the whole decode.
* ``thresholds``: what a trip to the decode pool costs (``deferToThreadPool`` round trip on a
  running reactor) against decoding bodies of growing size on the spot, plain and compressed
  (genuine-looking, and the worst a compressed body of that size can inflate to).
* ``server``: a real ``twistd rocketnamesrv`` on 127.0.0.1: one connection sends the 3 million
  line bomb (then the 16 MiB tiny-topics JSON body) while a second asks QUERY_DATA_VERSION and
  GET_ROUTEINFO_BY_TOPIC in a loop; prints when the body was answered and the second client's
  latencies meanwhile (max = the reactor's worst stall). The topic bound is off for it.
* ``bound``: the worst that ``registerBrokerMaxTopics`` still lets through: ``json.loads`` of
  the most JSON containers a plain body may hold, and 200,000 new topics applied to the tables.
"""
import argparse
import json
import os
import statistics
import struct
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from brokerbody import register_body  # noqa: E402
from fuzzharness import topic_line_bomb  # noqa: E402
from rocketpy.namesrv.model import (DataVersion, Registration, TopicConfig,  # noqa: E402
                                    TopicConfigWrapper)
from rocketpy.namesrv.processor import registration  # noqa: E402
from rocketpy.remoting import RemotingCommand, bodies, decode_frame  # noqa: E402
from rocketpy.remoting.frame import DEFAULT_MAX_FRAME_LENGTH  # noqa: E402

V5 = 479


def distinct_topics_body(count):
    """A compressed 5.x body of ``count`` distinct topics (``t0000000 8 8 6 SINGLE_TAG``)."""
    dv = b'{"counter":1,"stateVersion":0,"timestamp":1}'
    parts = [struct.pack(">i", len(dv)), dv, struct.pack(">i", count)]
    for i in range(count):
        line = b"t%07d 8 8 6 SINGLE_TAG" % i
        parts += (struct.pack(">i", len(line)), line)
    parts += (struct.pack(">i", 2), b"[]", struct.pack(">i", 0))
    return zlib.compress(b"".join(parts), 9)


def tiny_topics_json(limit=DEFAULT_MAX_FRAME_LENGTH - 4096):
    """The plain JSON body with the most topics ``limit`` bytes can carry (``"1a":{}``)."""
    head = b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1},' \
           b'"topicConfigTable":{'
    entries, size, i = [], len(head) + 4, 0
    while True:
        entry = b'"%x":{}' % i
        if size + len(entry) + 1 > limit:
            break
        entries.append(entry)
        size += len(entry) + 1
        i += 1
    return head + b",".join(entries) + b"}}}", i


def filled_json(unit, limit=DEFAULT_MAX_FRAME_LENGTH - 4096):
    """A plain body whose wrapper carries an unknown key (ignored, as fastjson ignores it)
    holding an array of ``unit`` as long as ``limit`` allows: the most values to parse."""
    head, tail = b'{"topicConfigSerializeWrapper":{"x":[', b"]}}"
    return head + b",".join([unit] * ((limit - len(head) - len(tail)) // (len(unit) + 1))) + tail


def timed(fn):
    started = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 -- a bomb ends with the codec's error
        result = exc
    return time.perf_counter() - started, result


def outcome(result):
    if isinstance(result, Exception):
        return f"{type(result).__name__}: {result}"
    return f"{len(result[0].topic_config_table)} topics"


def codec_path(body, compressed=True):
    version, table, filters, infos = bodies.register_broker_body_records(
        bodies.RegisterBrokerBody.decode(body, compressed, V5), TopicConfig, DataVersion)
    return TopicConfigWrapper(version, table, infos), filters


def part_decode(args):
    print("== decode (µs per topic)")
    cases = [("3M identical lines (bomb)", topic_line_bomb(3_000_000), 3_000_000),
             ("2M distinct topics", distinct_topics_body(2_000_000), 2_000_000)]
    for label, body, count in cases:
        paths = [("fast", lambda: registration.read_body(body, True, V5))]
        if args.codec:
            paths.append(("codec", lambda: codec_path(body)))
        for name, fn in paths:
            seconds, result = timed(fn)
            print(f"{label:28s} {len(body):>9,} B  {name:5s} {seconds:7.2f} s "
                  f"{seconds / count * 1e6:6.2f} µs/topic  -> {outcome(result)}")
    body, count = tiny_topics_json()
    whole, result = timed(lambda: registration.read_body(body, False, V5))
    print(f"{'plain JSON, tiny topics':28s} {len(body):>9,} B  whole decode {whole:.2f} s "
          f"{whole / count * 1e6:.2f} µs/topic -> {outcome(result)}")
    print("== json.loads of 16 MiB plain bodies: one C call, the GIL held throughout")
    genuine = register_body([f"Topic{i:05d}" for i in range(10_000)])
    for label, body in (("10,000 genuine topics", genuine), ("tiny topics", body),
                        ("array of []", filled_json(b"[]")), ("array of {}", filled_json(b"{}")),
                        ("array of 1", filled_json(b"1")), ('array of "a"', filled_json(b'"a"'))):
        print(f"{label:28s} {len(body):>10,} B  {timed(lambda: json.loads(body))[0]:.3f} s")


def part_thresholds(args):
    from twisted.internet import reactor, threads
    from twisted.python.threadpool import ThreadPool

    print("== thresholds: one trip to the decode pool vs decoding on the spot")
    pool = ThreadPool(1, 1, "bench")
    pool.start()
    trips = []

    def trip(n):
        started = time.perf_counter()
        d = threads.deferToThreadPool(reactor, pool, lambda: None)
        d.addCallback(lambda _: trips.append(time.perf_counter() - started))
        d.addCallback(lambda _: trip(n - 1) if n > 1 else reactor.stop())

    reactor.callWhenRunning(trip, 500)
    reactor.run()
    pool.stop()
    print(f"deferToThreadPool round trip: median {statistics.median(trips) * 1e6:.0f} µs, "
          f"p90 {sorted(trips)[len(trips) * 9 // 10] * 1e6:.0f} µs")
    for topics in (30, 100, 300, 1000, 3000):
        plain = register_body([f"Topic{i:05d}" for i in range(topics)])
        bean = bodies.RegisterBrokerBody.from_json(plain)
        packed = bean.encode(compress=True, broker_version=V5)
        plain_s = min(timed(lambda: registration.read_body(plain, False, V5))[0] for _ in range(5))
        packed_s = min(timed(lambda: registration.read_body(packed, True, V5))[0]
                       for _ in range(5))
        print(f"{topics:5d} topics: plain {len(plain):>8,} B {plain_s * 1e6:8.0f} µs | "
              f"compressed {len(packed):>7,} B {packed_s * 1e6:8.0f} µs")
    for size in (8192, 32768, 262144):
        body, count = tiny_topics_json(size)
        seconds, _ = timed(lambda: registration.read_body(body, False, V5))
        print(f"worst plain body of {len(body):>7,} B ({count:,} tiny topics): "
              f"{seconds * 1e3:6.1f} ms")
    for size in (128, 1024, 4096):
        lines = 100
        while len(topic_line_bomb(lines * 2)) <= size:
            lines *= 2
        while len(topic_line_bomb(lines + lines // 8)) <= size:
            lines += lines // 8
        bomb = topic_line_bomb(lines)
        seconds, _ = timed(lambda: registration.read_body(bomb, True, V5))
        print(f"worst compressed body of {len(bomb):>5,} B ({lines:,} lines): "
              f"{seconds * 1e3:6.1f} ms")


def _frame(code, ext, body=None, opaque=1):
    return RemotingCommand.request(code, ext, body, opaque=opaque, version=V5).encode()


def part_server(args):
    from serverproc import RemotingClient, running_server
    from test_e2e_server import register

    print("== server: a costly body on one connection, queries on another "
          "(registerBrokerMaxTopics=0: the whole body is read)")
    with running_server("-D", "registerBrokerMaxTopics=0") as server:
        querier = RemotingClient(server.port, timeout=120)
        register(querier)
        data_version = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                        "clusterName": "DefaultCluster", "brokerId": "0"}
        queries = ((322, data_version), (105, {"topic": "TopicA"}))
        for label, body, compressed in (("3M-line bomb", topic_line_bomb(3_000_000), True),
                                        ("16 MiB of tiny topics", tiny_topics_json()[0], False)):
            bomber = RemotingClient(server.port, timeout=120)
            done = threading.Event()
            threading.Thread(target=lambda: (bomber.read_frame(), done.set()), daemon=True).start()
            latencies = []
            started = time.perf_counter()
            bomber.send_frame(_frame(103, {
                "brokerName": "bomber", "brokerAddr": "127.0.0.1:10999", "clusterName": "C",
                "haServerAddr": "127.0.0.1:10998", "brokerId": "0",
                "compressed": str(compressed).lower(), "bodyCrc32": str(bodies.body_crc32(body))},
                body, opaque=99))
            while not done.is_set() and time.perf_counter() - started < 120:
                for code, fields in queries:
                    t = time.perf_counter()
                    assert querier.call(code, fields).code == 0
                    latencies.append(time.perf_counter() - t)
            done.wait(120)
            took = time.perf_counter() - started
            latencies.sort()
            print(f"{label} ({len(body):,} B) answered after {took:.2f} s; other connection "
                  f"meanwhile: {len(latencies)} queries, p50 "
                  f"{latencies[len(latencies) // 2] * 1e3:.2f} ms, p99 "
                  f"{latencies[len(latencies) * 99 // 100] * 1e3:.2f} ms, max "
                  f"{latencies[-1] * 1e3:.2f} ms")
            bomber.close()
        querier.close()


def part_bound(args):
    """What ``registerBrokerMaxTopics`` (default 200,000) still lets through, at its worst."""
    from test_namesrv_topic_bound import _packed, _processor
    import tempfile
    from pathlib import Path

    print("== bound: the worst bodies registerBrokerMaxTopics lets through")
    proc = _processor(Path(tempfile.mkdtemp(prefix="rocketpy-bound-")))
    most = proc.reader.max_topics
    n = registration._CONTAINERS_PER_TOPIC * most + registration._CONTAINERS_SLACK - 24
    body = ('{"x":[' + ",".join(["[]"] * n) + '],"topicConfigSerializeWrapper":{"dataVersion":'
            '{"counter":1},"topicConfigTable":{}}}').encode()
    started = time.perf_counter()
    json.loads(body)
    print(f"json.loads (holds the GIL) of {n:,} [] ({len(body):,} B): "
          f"{time.perf_counter() - started:.3f} s")
    packed = _packed([f"Topic{i:07d}" for i in range(most)])
    started = time.perf_counter()
    wrapper, filters = registration.read_body(packed, True, 479)
    decoded = time.perf_counter() - started
    started = time.perf_counter()
    proc.route_info_manager.register_broker(Registration(
        "C", "127.0.0.1:10911", "b", 0, "127.0.0.1:10912", wrapper, filters, 1, 1000))
    print(f"{most:,} distinct topics ({len(packed):,} B compressed): decode {decoded:.2f} s "
          f"(worker thread), applied to the route tables in "
          f"{time.perf_counter() - started:.2f} s (reactor thread)")


PARTS = {"decode": part_decode, "thresholds": part_thresholds, "server": part_server,
         "bound": part_bound}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=sorted(PARTS), action="append",
                   help="run only this part (repeatable; default: all)")
    p.add_argument("--codec", action="store_true",
                   help="also time the codec's reference path (~20 s per body)")
    args = p.parse_args()
    for name in args.part or list(PARTS):
        PARTS[name](args)


if __name__ == "__main__":
    main()
