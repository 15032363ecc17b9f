#!/usr/bin/env python3
"""Long broker-churn soak of the NameServer core against a reference model (issue 6, churn).

tests/churnsim.py for as long as you like: hundreds of simulated brokers per profile register,
re-register, freeze and expire, drop connections, restart on new addresses and unregister, all
through frames built from the genuine captures; after every step the route tables, live table
and channel index must equal the model; at the end of each round every broker goes away and
nothing may be left. Rounds rotate over the 4.9, 5.0 and 5.3 profiles with fresh seeds.

    python3 bench/churn_soak.py --seconds 300
    python3 bench/churn_soak.py --rounds 3 --groups 400 --ticks 200

Prints each round and the totals (steps, steps/s, actions by kind, stale unregistrations
ignored) as a table and one JSON line. Exit status 1 on the first mismatch (with its seed).
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import churnsim  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=None, help="run rounds until this much time passed")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--groups", type=int, default=300,
                        help="broker groups per round (~30%% with a slave)")
    parser.add_argument("--ticks", type=int, default=120, help="5-second ticks of simulated time per round")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profiles", default="4.9,5.0,5.3")
    args = parser.parse_args()
    if args.seconds is None and args.rounds is None:
        args.rounds = 3
    profiles = args.profiles.split(",")
    totals = {"steps": 0, "ticks": 0, "brokers": 0, "stale_ignored": 0, "rounds": 0, "counts": {}}
    started = time.monotonic()
    round_no = 0
    while True:
        if args.rounds is not None and round_no >= args.rounds:
            break
        if args.seconds is not None and time.monotonic() - started >= args.seconds:
            break
        profile = profiles[round_no % len(profiles)]
        seed = args.seed + round_no
        t0 = time.monotonic()
        sim = churnsim.Simulation(profile, groups=args.groups, seed=seed)
        try:
            sim.run(args.ticks)
            sim.finish()
        except churnsim.Mismatch as exc:
            print(f"MISMATCH in round {round_no} (profile {profile}, seed {seed}, step {sim.steps}): {exc}")
            return 1
        elapsed = time.monotonic() - t0
        round_no += 1
        totals["rounds"] += 1
        totals["steps"] += sim.steps
        totals["ticks"] += sim.ticks
        totals["brokers"] += len(sim.instances)
        totals["stale_ignored"] += sim.model.stale_ignored
        for k, v in sim.counts.items():
            totals["counts"][k] = totals["counts"].get(k, 0) + v
        print(f"round {round_no:3d}  profile {profile}  seed {seed}  {len(sim.instances)} brokers  "
              f"{sim.steps:,} steps in {elapsed:.1f} s ({sim.steps / elapsed:,.0f}/s)  "
              f"{sim._addresses} new addresses  {sim.model.stale_ignored} stale unregistrations ignored",
              flush=True)
    seconds = time.monotonic() - started
    totals["seconds"] = round(seconds, 1)
    totals["steps_per_second"] = round(totals["steps"] / seconds) if seconds else 0
    print()
    print(f"rounds            {totals['rounds']}")
    print(f"steps             {totals['steps']:,}  ({totals['steps_per_second']:,}/s, every one checked)")
    print(f"simulated time    {totals['ticks'] * churnsim.TICK_MS / 3_600_000:.2f} h over all rounds")
    print("actions           " + ", ".join(f"{k}={v:,}" for k, v in sorted(totals["counts"].items())))
    print(f"stale ignored     {totals['stale_ignored']:,} (apache/rocketmq#11043 races)")
    print("leaks             none (every round ends with all tables, indexes and caches empty)")
    print(json.dumps(totals, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
