#!/usr/bin/env python3
"""Benchmark: PUT_KV_CONFIG into a big KV table (issue 20, item 7), this tree against an older
commit, back to back on the same machine.

    python3 bench/kv_big_table.py                        # 1.1 M entries, against 2d0f817
    python3 bench/kv_big_table.py --entries 100000 --puts 50 --old ''

Each server starts on a ``kvConfig.json`` of ``--entries`` tiny entries (``"k123":"v"``: 15 MB
for 1.1 M), with the KV bounds off, and one client puts ``--puts`` new keys one at a time.
Printed per server: its boot, the put latency (median and max) and how long the clean stop
(the last full write) took. The old server rewrites the whole file for every put, so it gets
``--old-puts`` (3) puts only.
"""
import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from benchserver import ROOT, export, start_server  # noqa: E402
from serverproc import RemotingClient  # noqa: E402


def run(tree, workdir, entries, puts, label):
    kv = Path(workdir) / f"{label}-kvConfig.json"
    kv.write_text(json.dumps({"configTable": {"ns": {f"k{i}": "v" for i in range(entries)}}},
                             separators=(",", ":")))
    started = time.monotonic()
    proc, port, _ = start_server(tree, workdir, ["-D", "kvConfigMaxEntries=0", "-D",
                                                 "kvConfigMaxTotalBytes=0"], kv_path=kv)
    boot = time.monotonic() - started
    client = RemotingClient(port, timeout=120)
    latencies = []
    for i in range(puts):
        sent = time.monotonic()
        answer = client.call(100, {"namespace": "ns", "key": f"new{i}", "value": "x" * 100})
        latencies.append(time.monotonic() - sent)
        assert answer.code == 0, answer
    client.close()
    stopping = time.monotonic()
    proc.terminate()
    proc.wait(300)
    stop = time.monotonic() - stopping
    line = {"server": label, "entries": entries, "file_bytes": kv.stat().st_size, "boot_s": round(boot, 2),
            "puts": puts, "put_ms_median": round(statistics.median(latencies) * 1000, 1),
            "put_ms_max": round(max(latencies) * 1000, 1), "stop_s": round(stop, 2)}
    print(json.dumps(line))
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_100_000)
    parser.add_argument("--puts", type=int, default=20)
    parser.add_argument("--old-puts", type=int, default=3)
    parser.add_argument("--old", default="2d0f817", help="commit to compare with ('' for none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kv-big-") as workdir:
        run(ROOT, workdir, args.entries, args.puts, "this tree")
        if args.old:
            run(export(args.old, workdir), workdir, args.entries, args.old_puts, args.old)


if __name__ == "__main__":
    main()
