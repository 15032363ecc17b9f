#!/usr/bin/env python3
"""Benchmark load: re-registrations with a *changed* data version every time (a broker whose
topic config keeps changing: here one topic comes and goes), the case the identical-body
shortcuts of the registration path do not cover.

    python3 bench/register_changed.py --addr 127.0.0.1:9876 --topics 1000 --seconds 10

Same output and pipelining as ``../shared/bench/nsload.py register`` (4 connections x 2 in
flight by default), whose load loop it reuses; only the bodies differ: each request carries the
broker's table plus or minus one topic and a new DataVersion counter, with its own bodyCrc32.
"""
import argparse
import asyncio
import json
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "bench"))
import nsload  # noqa: E402  (the neutral load generator's load loop and frame builder)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", default="127.0.0.1:9876")
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--conns", type=int, default=4)
    p.add_argument("--window", type=int, default=2)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=2)
    a = p.parse_args()
    a.ok_codes = {0}
    names = [f"Topic{i}" for i in range(a.topics)]
    marker = b"123456789"
    templates = []
    for extra in ([], ["NewTopic"]):
        table = {t: {"order": False, "perm": 6, "readQueueNums": 8, "topicFilterType": "SINGLE_TAG",
                     "topicName": t, "topicSysFlag": 0, "writeQueueNums": 8} for t in names + extra}
        body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": int(marker), "stateVersion": 0, "timestamp": 1},
            "topicConfigTable": table}}, separators=(",", ":")).encode()
        templates.append(body.split(marker))
    ext = {"brokerName": "broker-999", "brokerAddr": "127.0.0.1:20999",
           "clusterName": "DefaultCluster", "haServerAddr": "127.0.0.1:30999", "brokerId": "0",
           "compressed": "false"}
    counter = [1_000_000_000]

    def make(opaque):
        counter[0] += 1
        pre, post = templates[counter[0] & 1]
        body = pre + str(counter[0]).encode() + post
        return nsload.frame(103, dict(ext, bodyCrc32=str(zlib.crc32(body) & 0x7FFFFFFF)), opaque,
                            body)

    print(json.dumps(asyncio.run(nsload.load(a, make))))


if __name__ == "__main__":
    main()
