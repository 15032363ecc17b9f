#!/usr/bin/env python3
"""Long fuzzing run of the codec and the request processors (issue 6, hostile input).

The same harness as tests/test_fuzz_*.py (tests/fuzzharness.py): genuine frames of
../shared/fixtures/pcap mutated (byte damage, length fix-ups, JSON/binary header and body
mutations, code swaps, recomputed CRCs, zip bombs) and random bytes, through the frame splitter
(random chunking), decode_frame, every body reader, and the 4.9 / 5.0 / 5.3 processors plus one
with access control on, every answer encoded. A contract violation is a *finding*: its reproducer
is written to ``--out`` and the run goes on. The contract includes cost (issue 31): every
``--cost-every``-th input's lines and memory in the pure-Python reference are held to a multiple
of the genuine frames' medians per byte (tests/costmeter.py; counting slows a run ~10x), and the
worst ratio seen is printed.

Engines:

* ``mutate`` (default): the harness's structure-aware mutator, one process per ``--workers``
  (seeds differ), counts summed;
* ``atheris``: coverage-guided (libFuzzer via atheris, if installed), seeded with the genuine
  frames; each input goes through the codec *and* a processor. libFuzzer prints its own totals
  (``Done N runs in S second(s)``, ``stat::...``) and exits; a finding stops the run with the
  reproducer saved as ``--out/crash-*``.

    python3 bench/fuzz_long.py --seconds 600                 # ~10 minutes, 2 workers
    python3 bench/fuzz_long.py --seconds 600 --engine atheris
    ROCKETPY_FUZZ_SEED=7 python3 bench/fuzz_long.py --seconds 60 --workers 1

Prints inputs/s every ``--report`` seconds and the totals (inputs, rate, outcomes, findings) as a
table and one JSON line. Exit status 1 when anything was found.
"""
import argparse
import json
import logging
import multiprocessing
import os
import random
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def _targets():
    import fuzzharness as fh
    from rocketpy.namesrv.acl import AccessControl, Account, parse_networks
    guarded = AccessControl(parse_networks("127.0.0.0/8"),
                            {"rocketmq2": Account("rocketmq2", "12345678", True)})
    return [fh.ProcessorTarget("4.9"), fh.ProcessorTarget("5.0"), fh.ProcessorTarget("5.3"),
            fh.ProcessorTarget("5.3", access_control=guarded)]


def _record(out_dir, finding, counter):
    os.makedirs(out_dir, exist_ok=True)
    name = os.path.join(out_dir, f"finding-{os.getpid()}-{counter}.bin")
    with open(name, "wb") as f:
        f.write(finding.data)
    with open(name + ".txt", "w") as f:
        f.write(str(finding) + "\n")
    return name


def worker(seed, seconds, report, out_dir, queue, cost_every=1):
    """One mutate-engine process: alternates codec and processor inputs until time is up."""
    logging.disable(logging.CRITICAL)
    import costmeter
    import fuzzharness as fh
    rng = random.Random(seed)
    frames = fh.corpus()
    requests = fh.request_corpus()
    codec_mut = fh.Mutator(rng, frames)
    proc_mut = fh.Mutator(rng, requests)
    targets = _targets()
    codec_cost = fh.codec_contract() if cost_every else None
    contracts = {id(t): t.contract() for t in targets} if cost_every else {}
    codec_stats = fh.FuzzStats()
    findings = {}
    start = time.monotonic()
    next_report = start + report
    n = 0
    while True:
        now = time.monotonic()
        if now - start >= seconds:
            break
        if now >= next_report:
            queue.put(("progress", seed, codec_stats.inputs + sum(t.stats.inputs for t in targets)))
            next_report += report
        n += 1
        counted = cost_every and n % cost_every == 0
        try:
            if n % 8 == 0:
                fh.check_codec(bytes(rng.getrandbits(8) for _ in range(rng.randrange(64))), rng,
                               codec_stats, cost=codec_cost if counted else None)
            elif n % 2:
                fh.check_codec(codec_mut.mutate(), rng, codec_stats,
                               cost=codec_cost if counted else None)
            else:
                target = rng.choice(targets)
                target.run(proc_mut.mutate(), rng,
                           cost=contracts.get(id(target)) if counted else None)
        except (fh.Finding, costmeter.CostFinding) as finding:
            key = str(finding).split(";")[0]
            if key not in findings:
                findings[key] = _record(out_dir, finding, len(findings))
    outcomes = dict(codec_stats.outcomes)
    proc_outcomes = {}
    for t in targets:
        for k, v in t.stats.outcomes.items():
            proc_outcomes[k] = proc_outcomes.get(k, 0) + v
    queue.put(("done", seed, {
        "codec_inputs": codec_stats.inputs, "processor_inputs": sum(t.stats.inputs for t in targets),
        "codec_outcomes": outcomes, "processor_outcomes": proc_outcomes,
        "findings": findings, "seconds": time.monotonic() - start,
        "worst_cost_ratio": round(max([codec_cost.worst[0] if codec_cost else 0.0]
                                      + [c.worst[0] for c in contracts.values()]), 3),
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))


def run_mutate(args):
    seed0 = int(os.environ.get("ROCKETPY_FUZZ_SEED", args.seed))
    queue = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(seed0 + i, args.seconds, args.report,
                                                          args.out, queue, args.cost_every))
             for i in range(args.workers)]
    for p in procs:
        p.start()
    progress = {}
    results = []
    started = time.monotonic()
    while len(results) < len(procs):
        kind, seed, payload = queue.get()
        if kind == "progress":
            progress[seed] = payload
            total = sum(progress.values())
            elapsed = time.monotonic() - started
            print(f"[{elapsed:7.0f} s] {total:,} inputs ({total / elapsed:,.0f}/s)", flush=True)
        else:
            results.append(payload)
    for p in procs:
        p.join()
    summary = {"engine": "mutate", "workers": args.workers, "seed": seed0,
               "seconds": max(r["seconds"] for r in results),
               "codec_inputs": sum(r["codec_inputs"] for r in results),
               "processor_inputs": sum(r["processor_inputs"] for r in results),
               "codec_outcomes": {}, "processor_outcomes": {}, "findings": {}}
    for r in results:
        for part in ("codec_outcomes", "processor_outcomes"):
            for k, v in r[part].items():
                summary[part][k] = summary[part].get(k, 0) + v
        summary["findings"].update(r["findings"])
    summary["inputs"] = summary["codec_inputs"] + summary["processor_inputs"]
    summary["worst_cost_ratio"] = max(r["worst_cost_ratio"] for r in results)
    summary["max_rss_mib"] = max(r["max_rss_mib"] for r in results)
    summary["inputs_per_second"] = round(summary["inputs"] / summary["seconds"])
    return summary


def run_atheris(args):
    try:
        import atheris
    except ImportError:
        sys.exit("atheris is not installed: python3 -m pip install atheris")
    logging.disable(logging.CRITICAL)
    with atheris.instrument_imports(include=["rocketpy"]):
        import rocketpy.namesrv  # noqa: F401
        import rocketpy.remoting  # noqa: F401
    import fuzzharness as fh
    corpus_dir = os.path.join(args.out, "atheris-corpus")
    os.makedirs(corpus_dir, exist_ok=True)
    for i, frame in enumerate(fh.corpus()):
        path = os.path.join(corpus_dir, f"genuine-{i:05d}")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(frame)
    targets = _targets()
    state = {"n": 0}

    def one_input(data):
        state["n"] += 1
        rng = random.Random(state["n"])
        fh.check_codec(data, rng, max_frame_length=fh.golden_limit())
        targets[state["n"] % len(targets)].run(data, rng)

    started = time.monotonic()
    argv = [sys.argv[0], corpus_dir, f"-max_total_time={int(args.seconds)}", "-print_final_stats=1",
            f"-artifact_prefix={os.path.join(args.out, '')}", "-max_len=65536", "-timeout=30",
            "-rss_limit_mb=4096"]
    atheris.Setup(argv, one_input)
    atheris.Fuzz()      # libFuzzer reports and exits the process itself
    elapsed = time.monotonic() - started
    return {"engine": "atheris", "seconds": elapsed, "inputs": state["n"],
            "inputs_per_second": round(state["n"] / max(elapsed, 1e-9)), "findings": {}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--engine", choices=("mutate", "atheris"), default="mutate")
    parser.add_argument("--workers", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--report", type=float, default=30)
    parser.add_argument("--out", default=os.path.join(HERE, "fuzz-findings"))
    parser.add_argument("--cost-every", type=int, default=1, dest="cost_every",
                        help="count the cost of every Nth input (0: never)")
    args = parser.parse_args()
    summary = run_mutate(args) if args.engine == "mutate" else run_atheris(args)
    print()
    print(f"engine            {summary['engine']}")
    print(f"seconds           {summary['seconds']:.0f}")
    print(f"inputs            {summary['inputs']:,}")
    print(f"inputs/s          {summary['inputs_per_second']:,}")
    if "max_rss_mib" in summary:
        print(f"peak RSS/worker   {summary['max_rss_mib']} MiB")
    for part in ("codec_outcomes", "processor_outcomes"):
        if summary.get(part):
            top = sorted(summary[part].items(), key=lambda kv: -kv[1])
            print(f"{part:17s} " + ", ".join(f"{k}={v:,}" for k, v in top))
    if "worst_cost_ratio" in summary:
        print(f"worst cost        {summary['worst_cost_ratio']} of what the contract allows")
    print(f"findings          {len(summary['findings'])}")
    for key, path in summary["findings"].items():
        print(f"  {key}\n    reproducer: {path}")
    print(json.dumps(summary, sort_keys=True))
    return 1 if summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
