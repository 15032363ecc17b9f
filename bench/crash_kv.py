#!/usr/bin/env python3
"""kill -9 the real server while it writes the KV config, many times (issue 6, crash safety).

tests/crashkv.py in a loop: start ``twistd -n rocketnamesrv`` on 127.0.0.1 on the KV file the
last run left, check it serves that file, flood PUT_KV_CONFIG with large values, SIGKILL it at a
random instant (half of the kills aimed at a write under way), check kvConfig.json and its .bak
are complete versions the server had and no acknowledged put is lost (in the file and its log);
one clean stop at the end.

    python3 bench/crash_kv.py --runs 200
    python3 bench/crash_kv.py --seconds 600 --value-size 262144

Prints every run and the totals as a table and one JSON line; exit status 1 on the first broken
file (the work directory is kept for inspection).
"""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import crashkv  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--value-size", type=int, default=96 * 1024)
    parser.add_argument("--aim", type=float, default=0.5, help="share of kills aimed at a write under way")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    if args.runs is None and args.seconds is None:
        args.runs = 100
    workdir = tempfile.mkdtemp(prefix="rocketpy-crash-kv-")
    crash = crashkv.CrashKV(workdir, seed=args.seed, value_size=args.value_size, in_write=args.aim,
                            log=None if args.quiet else (lambda line: print(line, flush=True)))
    started = time.monotonic()
    try:
        while True:
            if args.runs is not None and crash.stats.kills >= args.runs:
                break
            if args.seconds is not None and time.monotonic() - started >= args.seconds:
                break
            crash.run()
        crash.finish()
    except crashkv.CrashError as exc:
        print(f"BROKEN after {crash.stats.kills} kills: {exc}\nwork directory kept: {workdir}")
        return 1
    seconds = time.monotonic() - started
    stats = crash.stats
    figures = {"kills": stats.kills, "server_runs": stats.runs, "aimed": stats.aimed,
               "mid_write": stats.mid_write, "puts_sent": stats.puts_sent,
               "puts_acked": stats.puts_acked, "versions": len(stats.versions_seen),
               "seconds": round(seconds, 1),
               "mean_boot_seconds": round(sum(stats.boot_seconds) / len(stats.boot_seconds), 2)}
    print()
    print(stats.line())
    print(f"every file after every kill: complete Java-format JSON, a version the server had, "
          f"no acknowledged put lost; {seconds:.0f} s")
    print(json.dumps(figures, sort_keys=True))
    import shutil
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
