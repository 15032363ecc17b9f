#!/usr/bin/env python3
"""Benchmark: what the reactor does for a big re-registration with a new data version (issue 21,
part 5), its walk narrowed off the reactor (``RouteInfoManager.walk_view``) and whole. Prints
numbers; not a test.

    python3 bench/route_walk.py                          # 10 brokers x 100,000 topics (1 M pairs)
    python3 bench/route_walk.py --brokers 100            # 10 M pairs (~1.2 GiB)

Each broker registers its own topics through the processor, then again with a new data version
and the same topics (what a 5.x master sends after any topic change, and with split
registration every time). The decode's work runs first (the decode thread's part, timed
apart); ``finish`` is what the reactor runs: its time is how long a route query would wait.
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


def request(index, topics, counter):
    ext = {"brokerName": f"broker-{index}", "brokerAddr": f"10.0.{index // 250}.{index % 250}:10911",
           "clusterName": "C", "haServerAddr": "ha", "brokerId": "0", "compressed": "false",
           "bodyCrc32": "0"}
    names = [f"T{index}-{k}" for k in range(topics)]
    return RemotingCommand.request(103, ext, register_body(names, counter), opaque=1, version=479)


def run(brokers, topics, walk_from):
    proc = make(Path(tempfile.mkdtemp(prefix="route-walk-")))
    proc.handlers[103].__self__.narrow_walk_from = walk_from
    for index in range(brokers):
        pending = proc.process(request(index, topics, 1), CH, 1000, offload=True)
        pending.finish(pending.work())
    gc.collect()
    gc.freeze()            # what the memory service does once the tables grew
    work, reactor = [], []
    for index in range(brokers):
        pending = proc.process(request(index, topics, 2), CH, 2000, offload=True)
        t0 = time.perf_counter()
        result = pending.work()
        t1 = time.perf_counter()
        answer = pending.finish(result)
        reactor.append(time.perf_counter() - t1)
        work.append(t1 - t0)
        assert answer.code == 0, answer.remark
    reactor.sort()
    work.sort()
    ms = lambda values, q: round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 1)
    return {"walk": "narrowed" if walk_from <= topics else "whole", "pairs": brokers * topics,
            "reactor_ms_p50": ms(reactor, 0.5), "reactor_ms_max": ms(reactor, 1.0),
            "decode_thread_ms_p50": ms(work, 0.5)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, default=10)
    parser.add_argument("--topics", type=int, default=100_000)
    args = parser.parse_args()
    for walk_from in (20_000, 10 ** 12):
        print(json.dumps(run(args.brokers, args.topics, walk_from)), flush=True)


if __name__ == "__main__":
    main()
