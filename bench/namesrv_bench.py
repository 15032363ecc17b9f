#!/usr/bin/env python3
"""Benchmark of the NameServer core alone (no sockets, no reactor): route lookups/s and
registrations/s through ``DefaultRequestProcessor``.

Seeds N brokers x M topics (every broker carries every topic, like ``shared/bench/nsload.py
seed``), then measures

* route lookups: GET_ROUTEINFO_BY_TOPIC for random topics through ``process`` alone (command in,
  command out), then frame bytes in -> frame bytes out (codec decode, process, encode) for a
  >= 4.9.4 client (standard JSON) and an old/C++ client (legacy JSON), with the route snapshots
  warm (the steady state: every client polls every 30 s); also with every snapshot dropped
  before each lookup, to show the cost of building an answer;
* registrations: REGISTER_BROKER of one broker carrying 1,000 and 10,000 topics, frame in ->
  frame out: the periodic re-registration (same DataVersion) and a changed one (new
  DataVersion), JSON and zlib-compressed bodies.

    python3 bench/namesrv_bench.py                    # defaults: 10 brokers x 1000 topics
    python3 bench/namesrv_bench.py --brokers 20 --topics 5000 --seconds 3

Prints a table and one JSON line of figures.
"""
import argparse
import json
import os
import random
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rocketpy.namesrv.policy import as_policies  # noqa: E402
from rocketpy.namesrv import (Channel, Configuration, KVConfigManager,  # noqa: E402
                              NamesrvConfig, NettyServerConfig, RouteInfoManager, profile_for)
from rocketpy.namesrv.processor import DefaultRequestProcessor  # noqa: E402
from rocketpy.remoting import RemotingCommand, bodies, decode_frame  # noqa: E402


def register_body(topics, counter, compressed=False):
    table = {t: {"order": False, "perm": 6, "readQueueNums": 8, "topicFilterType": "SINGLE_TAG",
                 "topicName": t, "topicSysFlag": 0, "writeQueueNums": 8} for t in topics}
    raw = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": 1700000000000},
        "topicConfigTable": table}}, separators=(",", ":")).encode()
    if compressed:
        return bodies.RegisterBrokerBody.from_json(raw).encode(compress=True)
    return raw


def register_frame(i, body, compressed=False, opaque=1):
    ext = {"brokerName": f"broker-{i}", "brokerAddr": f"127.0.0.1:{20000 + i}",
           "clusterName": "DefaultCluster", "haServerAddr": f"127.0.0.1:{30000 + i}",
           "brokerId": "0", "compressed": "true" if compressed else "false",
           "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF), "enableActingMaster": "false"}
    return RemotingCommand.request(103, ext, body, opaque=opaque, version=479).encode()


def make_processor(profile, tmp):
    namesrv = NamesrvConfig(kv_config_path=os.path.join(tmp, "kv.json"),
                            config_store_path=os.path.join(tmp, "namesrv.properties"))
    configuration = Configuration(namesrv, NettyServerConfig(), profile=as_policies(profile))
    rim = RouteInfoManager(namesrv, profile)
    return DefaultRequestProcessor(rim, KVConfigManager(namesrv.kv_config_path),
                                   submit_unregistration=lambda r: True, profile=profile,
                                   configuration=configuration)


def rate(fn, seconds, batch=100):
    """Calls per second of ``fn`` over about ``seconds``."""
    fn()                                   # warm up
    done = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            fn()
        done += batch
        now = time.perf_counter()
        if now >= deadline:
            return done / (now - start)


def round_trip(processor, channel, frame):
    answer = processor.process(decode_frame(frame), channel, 0)
    return answer.encode()


def bench_routes(processor, topics, seconds, version, cached=True, frames=True):
    """Lookups/s; ``frames``: bytes in -> bytes out, else command objects in and out."""
    channel = Channel(1, "127.0.0.1:1")
    requests = [RemotingCommand.request(105, {"topic": t}, opaque=i, version=version)
                for i, t in enumerate(random.Random(7).choices(topics, k=4096))]
    encoded = [r.encode() for r in requests]
    state = {"i": 0}
    drop_snapshots = processor.route_info_manager.invalidate_routes
    process = processor.process

    def one():
        i = state["i"] = (state["i"] + 1) & 4095
        if not cached:
            drop_snapshots()
        if frames:
            round_trip(processor, channel, encoded[i])
        else:
            process(requests[i], channel, 0)
    return rate(one, seconds)


def bench_registration(profile, tmp, topic_count, seconds, compressed):
    processor = make_processor(profile, tmp)
    channel = Channel(2, "127.0.0.1:2")
    topics = [f"Topic{i}" for i in range(topic_count)]
    same = register_frame(0, register_body(topics, 1, compressed), compressed)
    round_trip(processor, channel, same)
    unchanged = rate(lambda: round_trip(processor, channel, same), seconds, batch=1)
    changed_frames = [register_frame(0, register_body(topics, c, compressed), compressed)
                      for c in range(2, 12)]
    state = {"i": 0}

    def changed_one():
        state["i"] += 1
        round_trip(processor, channel, changed_frames[state["i"] % len(changed_frames)])
    changed = rate(changed_one, seconds, batch=1)
    return unchanged, changed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=10)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--profile", default="5.3")
    args = parser.parse_args(argv)
    profile = profile_for(args.profile)
    figures = {"brokers": args.brokers, "topics": args.topics, "profile": profile.name,
               "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        processor = make_processor(profile, tmp)
        topics = [f"Topic{i}" for i in range(args.topics)]
        t0 = time.perf_counter()
        for i in range(args.brokers):
            answer = processor.process(decode_frame(register_frame(i, register_body(topics, 1))),
                                       Channel(100 + i, ""), 0)
            assert answer.code == 0, answer.remark
        figures["seed_seconds"] = round(time.perf_counter() - t0, 3)
        figures["route_lookups_per_s_processor_only"] = round(
            bench_routes(processor, topics, args.seconds, 479, frames=False))
        figures["route_lookups_per_s_standard"] = round(bench_routes(processor, topics, args.seconds, 479))
        figures["route_lookups_per_s_legacy"] = round(bench_routes(processor, topics, args.seconds, 63))
        figures["route_lookups_per_s_uncached"] = round(
            bench_routes(processor, topics, args.seconds, 479, cached=False))
        for count in (1000, 10000):
            for compressed in (False, True):
                unchanged, changed = bench_registration(profile, tmp, count, args.seconds, compressed)
                kind = "zlib" if compressed else "json"
                figures[f"registrations_per_s_{count}_{kind}_unchanged"] = round(unchanged, 1)
                figures[f"registrations_per_s_{count}_{kind}_changed"] = round(changed, 1)
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
