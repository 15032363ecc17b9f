#!/usr/bin/env python3
"""Benchmark: what the memory service's release holds the reactor for at scale (issue 21):
brokers leave a large route state, then the unregistration batch, ``release()``
(``rocketpy.service.tap``) and a full collection after it are timed apart, and every collection
the collector makes meanwhile is timed through ``gc.callbacks``. Prints numbers; not a test.

    python3 bench/route_release.py                          # 1 M pairs, 10 % of brokers leave
    python3 bench/route_release.py --pairs 10000000 --leave 10

The tables are seeded as ``bench/route_state.py`` seeds them (100 brokers, each its own
topics), the collector frozen as the service freezes it once the state grew; ``--leave``
brokers then unregister in one batch, which ``BatchUnregistrationService`` applies in slices of
``TOPICS_PER_TURN`` topics, one reactor turn each (each slice's time is a step; ``--whole``:
the batch in one step, as before the slices).
"""
import argparse
import gc
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rocketpy.namesrv import NamesrvConfig, RouteInfoManager  # noqa: E402
from rocketpy.namesrv.model import (DataVersion, Registration, TopicConfig,  # noqa: E402
                                    TopicConfigWrapper, UnRegisterBrokerRequest)
from rocketpy.service.allocator import heap_trimmer  # noqa: E402
from twisted.internet import task  # noqa: E402

from rocketpy.service import tap, unregistration  # noqa: E402

PAUSES = []


def timed_collections(phase, info):
    if phase == "start":
        PAUSES.append([info["generation"], time.perf_counter()])
    elif PAUSES and len(PAUSES[-1]) == 2:
        PAUSES[-1][1] = time.perf_counter() - PAUSES[-1][1]
        PAUSES[-1].append(info["collected"])


def ms(seconds):
    return round(seconds * 1000, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--leave", type=int, default=10)
    parser.add_argument("--whole", action="store_true", help="the batch in one step")
    args = parser.parse_args()
    per = args.pairs // args.brokers
    rim = RouteInfoManager(NamesrvConfig())
    addr = lambda i: f"10.0.{i // 250}.{i % 250}:10911"
    for i in range(args.brokers):
        table = {n: TopicConfig(n, 8, 8, 6) for n in (f"T{k:08d}" for k in range(i * per, (i + 1) * per))}
        rim.register_broker(Registration("C", addr(i), f"broker-{i}", 0, "ha",
                                         TopicConfigWrapper(DataVersion(1, 1, 0), table), None,
                                         i + 1, 0))
        del table
    gc.collect()
    gc.freeze()
    gc.callbacks.append(timed_collections)
    steps = {}
    slices = []

    def unregister_timed(batch):
        t0 = time.perf_counter()
        rim.unregister_brokers(batch)
        slices.append(ms(time.perf_counter() - t0))
    clock = task.Clock()
    service = unregistration.BatchUnregistrationService(
        unregister_timed, clock, weight=lambda r: rim.topic_count_of_broker(r.broker_name))
    if args.whole:
        unregistration.TOPICS_PER_TURN = args.pairs
    service.startService()
    for i in range(args.leave):
        service.submit(UnRegisterBrokerRequest("C", addr(i), f"broker-{i}", 0))
    clock.advance(0)
    steps["unregister_slices"] = len(slices)
    steps["unregister_longest_slice"] = max(slices)
    steps["unregister_total"] = round(sum(slices), 1)
    route_size = tap._route_size(rim)
    processor = SimpleNamespace(reader=SimpleNamespace(forget_departed_brokers=lambda: None),
                                route_info_manager=rim)
    for name, step in [
            ("unfreeze (the memory service)", gc.unfreeze),
            ("release", tap._route_release(processor, None, trim=heap_trimmer())),
            ("a later full collection", lambda: gc.collect(2))]:
        t0 = time.perf_counter()
        step()
        steps[name] = ms(time.perf_counter() - t0)
    gc.callbacks.remove(timed_collections)
    print(json.dumps({"pairs": args.pairs, "left": args.leave * per, "route_size": route_size(),
                      "steps_ms": steps,
                      "collections": [(g, ms(t), c) for g, t, c in PAUSES[:20]]}), flush=True)


if __name__ == "__main__":
    main()
