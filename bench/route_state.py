#!/usr/bin/env python3
"""Benchmark: the route state alone, in one process (issue 21): bytes per topic-broker pair at
the peak, RSS after the brokers leave, what a route query waits for during a re-registration
storm, and seconds per registration of a big broker. Prints numbers; not a test.

    python3 bench/route_state.py                       # 1 M pairs, both shapes, this tree
    python3 bench/route_state.py --old 2d0f817         # the same for an older commit, first
    python3 bench/route_state.py --pairs 10000000 --shape spread

Shapes (as ``nsload.py seed``): ``spread``, 100 brokers each with its own topics; ``shared``,
100 brokers with the same topics. Each broker's table is made afresh (new strings, new
records), as a decoded body is, and dropped once applied. The storm re-registers every broker
with a new data version (the walk Java does every time a broker's topics change; narrowed
off the reactor as the server does it for big bodies, unless ``--whole``); a route
query (snapshot + body, legacy JSON) is asked after every registration, and on the reactor it
waits for the registration in progress: its latency is reported as the registration's time plus
its own. A single big broker's first registration is timed likewise (its new topics found off
the reactor, as the server does). ``full_gc_ms_held``: one full collection with the tables held (what a pause costs).
Java's figures (4.9.8, live heap after a full GC, measured on this machine class):
292 B/pair (spread) and 78 B/pair (shared); see ``../shared/fixtures/perf.md``.

``bench/route_memory.py`` measures the whole server (caches of registration bodies included)."""
import argparse
import gc
from dataclasses import replace
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if "--child" not in sys.argv:
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(HERE))


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentiles(values):
    values = sorted(values)
    pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 2)
    return {"p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": round(values[-1] * 1000, 2)}


def child(shape, pairs, brokers, big, freeze, whole):
    from rocketpy.namesrv import Channel, NamesrvConfig, RouteInfoManager
    from rocketpy.namesrv import model
    from rocketpy.namesrv.model import DataVersion, TopicConfig, TopicConfigWrapper, UnRegisterBrokerRequest
    from rocketpy.remoting.codes import MQVersion  # noqa: F401  (the codec loaded before "before")

    def registration(addr, name, wrapper, channel_id, now):
        """The call a commit's register_broker takes (one Registration since issue 32)."""
        if hasattr(model, "Registration"):
            return (model.Registration("C", addr, name, 0, "ha", wrapper, None, channel_id, now),)
        return "C", addr, name, 0, "ha", wrapper, None, Channel(channel_id, ""), now

    try:
        from rocketpy.namesrv.processor.broker import NARROW_WALK_FROM as walk_from
    except ImportError:
        walk_from = 0
    per_broker = pairs // brokers
    config = NamesrvConfig()
    rim = RouteInfoManager(config)

    def table(index):
        first = 0 if shape == "shared" else index * per_broker
        return {name: TopicConfig(name, 8, 8, 6) for name in
                (f"TopicTest_{i:08d}" for i in range(first, first + per_broker))}

    def as_server(rim, addr, name, wrapper):
        """What the decode thread adds to a big body (``processor.broker``): the topics whose
        queue data would change, and those the tables lack (not timed: off the reactor)."""
        if whole or not hasattr(rim, "fresh_view") or len(wrapper.topic_config_table) < walk_from:
            return wrapper
        view = rim.walk_view(*registration(addr, name, None, 0, 0)[:1] if hasattr(
            model, "Registration") else ("C", addr, name, 0))
        changed = view[0](wrapper) if view is not None else None
        fresh = rim.fresh_view()(wrapper.topic_config_table if changed is None else changed)
        if changed is not None:
            wrapper = replace(wrapper, topic_config_table=changed)
        return replace(wrapper, fresh=fresh)

    def register(index, counter, now):
        addr, name = f"10.0.{index // 250}.{index % 250}:10911", f"broker-{index}"
        wrapper = as_server(rim, addr, name, TopicConfigWrapper(DataVersion(counter, 1, 0),
                                                                table(index)))
        t0 = time.perf_counter()
        rim.register_broker(*registration(addr, name, wrapper, index + 1, now))
        return time.perf_counter() - t0

    def query(topic):
        t0 = time.perf_counter()
        snapshot = rim.route_snapshot(topic)
        snapshot.body(False, lambda: rim.wire.route(snapshot.route).to_json(False))
        return time.perf_counter() - t0

    gc.collect()
    before = peak = rss_mib()
    for index in range(brokers):
        register(index, 1, 0)
        peak = max(peak, rss_mib())
    gc.collect()
    held = rss_mib()
    if freeze:      # what the memory service does once the route state has grown
        gc.freeze()
    t0 = time.perf_counter()
    gc.collect()
    full_gc = time.perf_counter() - t0
    storm, latency = [], []
    for index in range(brokers):
        took = register(index, 2, 1000)
        storm.append(took)
        latency.append(took + query(f"TopicTest_{(index * per_broker + 7) % pairs:08d}"
                                    if shape == "spread" else "TopicTest_00000007"))
        peak = max(peak, rss_mib())
    rim.unregister_brokers([UnRegisterBrokerRequest("C", f"10.0.{i // 250}.{i % 250}:10911",
                                                    f"broker-{i}", 0) for i in range(brokers)])
    gc.collect()
    after = rss_mib()
    result = {"shape": shape, "pairs": pairs, "topics": pairs if shape == "spread" else pairs // brokers,
              "rss_before_mib": round(before, 1), "rss_peak_mib": round(peak, 1),
              "rss_held_mib": round(held, 1), "rss_after_mib": round(after, 1),
              "bytes_per_pair_at_peak": round((peak - before) * 1048576 / pairs),
              "bytes_per_pair_held": round((held - before) * 1048576 / pairs),
              "full_gc_ms_held": round(full_gc * 1000, 1),
              "storm_registration": percentiles(storm), "storm_route_query": percentiles(latency)}
    seconds = {}
    for size in big:
        rim = RouteInfoManager(config)
        per_broker = size
        wrapper = as_server(rim, "10.1.0.1:10911", "big",
                            TopicConfigWrapper(DataVersion(1, 1, 0), table(0)))
        t0 = time.perf_counter()
        rim.register_broker(*registration("10.1.0.1:10911", "big", wrapper, 1, 0))
        seconds[str(size)] = round(time.perf_counter() - t0, 3)
        del rim, wrapper
        gc.collect()
    result["seconds_per_registration"] = seconds
    print(json.dumps(result), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--shape", choices=("spread", "shared", "both"), default="both")
    parser.add_argument("--big", default="10000,100000,500000",
                        help="topics of the single brokers timed (comma separated; '' for none)")
    parser.add_argument("--old", default="", help="also run this commit, first")
    parser.add_argument("--freeze", action="store_true",
                        help="gc.freeze() once the brokers registered (rocketpy.service.memory)")
    parser.add_argument("--whole", action="store_true",
                        help="walk every topic on the reactor (the server narrows big bodies)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    big = [int(n) for n in args.big.split(",") if n]
    if args.child:
        child(args.shape, args.pairs, args.brokers, big, args.freeze, args.whole)
        return
    from benchserver import ROOT, export
    shapes = ("spread", "shared") if args.shape == "both" else (args.shape,)
    with tempfile.TemporaryDirectory(prefix="route-state-") as workdir:
        trees = [(export(args.old, workdir), f"old {args.old}")] if args.old else []
        trees.append((ROOT, "new"))
        for tree, label in trees:
            for shape in shapes:
                out = subprocess.run(
                    [sys.executable, str(HERE / "route_state.py"), "--child", "--shape", shape,
                     "--pairs", str(args.pairs), "--brokers", str(args.brokers), "--big", args.big]
                    + (["--freeze"] if args.freeze else []) + (["--whole"] if args.whole else []),
                    env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True, text=True)
                if out.returncode:
                    print(json.dumps({"server": label, "shape": shape, "error": out.stderr[-400:]}))
                    continue
                result = json.loads(out.stdout)
                result["server"] = label + (" (collector frozen)" if args.freeze else "")
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
