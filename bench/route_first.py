#!/usr/bin/env python3
"""Benchmark: a broker's first registration of 10,000 / 100,000 / 500,000 new topics (issue
21), its new topics added in bulk (``FreshTopics``) and walked one by one. Prints numbers; not
a test.

    python3 bench/route_first.py                        # into empty tables
    python3 bench/route_first.py --held 1000000         # beside 1 M topics of other brokers

The decode's work runs first (the decode thread's part, timed apart); ``finish`` is the
reactor's one step: its time is how long a route query would wait. The collector is frozen
after the seeding, as the memory service does once the tables grew.
"""
import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from brokerbody import register_body  # noqa: E402
from processorutil import CH, make  # noqa: E402
from rocketpy.remoting import RemotingCommand  # noqa: E402


def request(name, topics, counter=1):
    ext = {"brokerName": name, "brokerAddr": f"10.1.0.{len(name)}:10911", "clusterName": "C",
           "haServerAddr": "ha", "brokerId": "0", "compressed": "false", "bodyCrc32": "0"}
    return RemotingCommand.request(103, ext, register_body(topics, counter), opaque=1, version=479)


def registered(proc, name, topics):
    pending = proc.process(request(name, topics), CH, 1000, offload=True)
    t0 = time.perf_counter()
    result = pending.work()
    t1 = time.perf_counter()
    answer = pending.finish(result)
    t2 = time.perf_counter()
    assert answer.code == 0, answer.remark
    return t1 - t0, t2 - t1


def run(topics, held, bulk):
    proc = make(Path(tempfile.mkdtemp(prefix="route-first-")))
    proc.handlers[103].__self__.narrow_walk_from = 20_000 if bulk else 10 ** 12
    reader = proc.handlers[103].__self__.reader   # 500,000 topics pass the default bounds
    reader.decode_budget = reader.max_topics = 0
    for start in range(0, held, 100_000):
        end = min(held, start + 100_000)
        registered(proc, f"held-{start}", [f"H{k}" for k in range(start, end)])
    gc.collect()
    gc.freeze()
    work, reactor = registered(proc, "first", [f"N{k}" for k in range(topics)])
    return {"new_topics": topics, "held_topics": held, "apply": "bulk" if bulk else "walk",
            "decode_thread_ms": round(work * 1000, 1), "reactor_ms": round(reactor * 1000, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--held", type=int, default=0)
    parser.add_argument("--topics", type=int, nargs="*", default=[10_000, 100_000, 500_000])
    parser.add_argument("--apply", choices=("bulk", "walk", "both"), default="both")
    args = parser.parse_args()
    for topics in args.topics:
        for bulk in {"bulk": (True,), "walk": (False,), "both": (True, False)}[args.apply]:
            print(json.dumps(run(topics, args.held, bulk)), flush=True)


if __name__ == "__main__":
    main()
