"""Fuzz the compiled capture decoder under AddressSanitizer (it reads bytes from strangers).

Builds ``rocketpy.capture._native`` with ``-fsanitize=address`` into a scratch copy of the
package, then runs a fuzz loop in a Python with libasan preloaded: random bytes, mutated genuine
captures (bit flips, interesting integers at random offsets, absurd record/block/IP/TCP/frame
lengths, splices), truncated files, synthetic conversations carrying the codec fuzz harness's
hostile frames, and the hostile shapes of tests/capture_shapes.py (many extFields keys, segments
last-first, a hole before every segment) -- each decoded whole (sometimes with tiny connection,
buffer and waiting-segment bounds, so eviction and the bounds' paths run too), decoded as byte ranges (plan scan, range decode
with read-ahead), written as JSON Lines (from the core's buffers and from Arrow) and counted for
the summary (the core's Tally and SummaryBuilder).  A CaptureFormatError is an expected outcome; any
other exception is a finding, and an out-of-bounds access or a crash is caught by ASan (the
input that did it is kept).  With ``--differential N``, every Nth input is also decoded by the
pure-Python reference: the rows and the summaries must be equal, and that decode's cost is
counted (tests/costmeter.py: lines and memory, held to a multiple of the genuine captures' medians
per byte; issue 31: a 131-byte pcap took 26 s in both engines).  Prints the number of inputs.  Runs for
``--seconds`` or, with ``--inputs N``, exactly N inputs (what a test runs: the same inputs however
busy the machine is).  Not a test; tests/test_capture_fuzz.py runs a fixed few hundred inputs.

    python bench/capture_fuzz.py [--seconds 300 | --inputs N] [--seed 1] [--differential 50] [--keep DIR]
"""
from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "pcap"


def build_asan(where: Path) -> Path:
    """A copy of the package with the compiled core built under ASan; returns its root."""
    pkg = where / "src"
    shutil.copytree(ROOT / "rocketpy", pkg / "rocketpy",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    flags = "-fsanitize=address -fno-omit-frame-pointer -g -O1"
    env = dict(os.environ, CFLAGS=flags, LDFLAGS="-fsanitize=address")
    subprocess.run([sys.executable, str(ROOT / "setup.py"), "-q", "build_ext", "--build-lib",
                    str(pkg), "--build-temp", str(where / "tmp"), "--force"],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    if not list((pkg / "rocketpy" / "capture").glob("_native*.so")):
        raise SystemExit("capture_fuzz: the ASan build produced no extension")
    return pkg


def asan_env(pkg: Path) -> dict:
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                             text=True, check=True).stdout.strip()
    return dict(os.environ, LD_PRELOAD=libasan, PYTHONPATH=f"{pkg}{os.pathsep}{ROOT / 'tests'}",
                ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1",
                PYTHONMALLOC="malloc")


# ---- the fuzz loop (runs inside the ASan process) ----------------------------------------------

INTERESTING = [0, 1, 7, 8, 12, 20, 21, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000,
               0xFFFFFF, 0x1000000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


def corpus():
    """Genuine captures and synthetic ones (pcap, pcapng, link types, hostile frames, hostile
    shapes)."""
    import capture_shapes
    import capture_synth as cs
    from fuzzharness import Mutator, corpus as frames
    out = [p.read_bytes() for p in sorted(FIXTURES.glob("*.pcap"))]
    out += [shape(n) for shape in capture_shapes.SHAPES.values() for n in (20, 300)]
    rng = random.Random(0)
    genuine = frames()
    mutator = Mutator(rng, genuine)
    for k in range(12):
        fr = [(0, mutator.mutate() if rng.random() < 0.5 else rng.choice(genuine))
              for _ in range(40)]
        segs = cs.conversation(fr, mss=rng.choice([100, 700, 1460]))
        kind = rng.choice(["ether", "vlan", "sll2", "null", "raw"])
        pk = cs.packets(segs, kind, v6=rng.random() < 0.3)
        lt = cs.LINKTYPES[kind]
        out.append(cs.write_pcap(pk, lt) if k % 2 else cs.write_pcapng(pk, lt))
    return out


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        op = rng.randrange(7)
        if not b:
            b = bytearray(rng.randbytes(rng.randrange(64)))
            continue
        at = rng.randrange(len(b))
        if op == 0:
            b[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[at] = rng.randrange(256)
        elif op in (2, 3):               # an interesting integer, big or little endian
            v = rng.choice(INTERESTING)
            width = rng.choice((1, 2, 3, 4))
            raw = (v & ((1 << 8 * width) - 1)).to_bytes(width, rng.choice(("big", "little")))
            b[at:at + width] = raw
        elif op == 4:
            del b[rng.randrange(len(b)):]                            # truncated
        elif op == 5:
            j = rng.randrange(len(b))
            b[at:at] = b[j:j + rng.randrange(1, 300)]                 # spliced copy
        else:
            del b[at:at + rng.randrange(1, 64)]
    return bytes(b)


def random_capture(rng: random.Random) -> bytes:
    head = rng.choice([struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, rng.choice((1, 0, 101, 113, 276, 228, 229, 12345))),
                       struct.pack(">IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1),
                       struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1) + struct.pack("<I", 28)
                       + struct.pack("<IIHHI", 1, 20, 1, 0, 0) + struct.pack("<I", 20)])
    return head + rng.randbytes(rng.randrange(0, 4096))


def _decode_whole(cls, data, info, ports, bounds):
    """One engine's parts of the whole input; a CaptureFormatError is counted, not raised."""
    from rocketpy.capture.readers import CaptureFormatError
    dec = cls(ports=ports, arrow=False, **bounds)
    f = io.BytesIO(data)
    f.seek(info.data_offset)
    parts, refused = [], False
    try:
        parts += dec.decode(f, "fuzz", info)
    except CaptureFormatError:
        refused = True
    parts += dec.finish()
    return parts, refused


def cost_contract():
    """The pure-Python decoder's cost per byte on the genuine captures."""
    import costmeter
    from rocketpy.capture import engine
    from rocketpy.capture.readers import read_capture_info

    def run(data):
        _decode_whole(engine.PyBatchDecoder, data, read_capture_info(data[:1 << 16]), None, {})
    with costmeter.reference():
        return costmeter.CostContract("capture", [(p.read_bytes(), run)
                                                  for p in sorted(FIXTURES.glob("*.pcap"))])


def run_one(data: bytes, engines, checks: dict, contract=None) -> bool:
    """Whole-file and range decodes, the plan scan, the JSON writers and the summary's counts
    on one input; the pure-Python decoder's cost checked against ``contract``. False when it
    is not a capture at all (its file header refused: nothing decoded)."""
    from rocketpy.capture import engine, plan
    from rocketpy.capture.readers import CaptureFormatError, read_capture_info
    try:
        info = read_capture_info(data[:1 << 16])
    except CaptureFormatError:
        return False
    rng = random.Random(len(data))
    ports = [9876] if rng.random() < 0.1 else None
    bounds = {}
    if rng.random() < 0.3:          # tiny bounds: evictions and early skipped holes
        bounds = {"max_connections": rng.choice((1, 2, 5)),
                  "max_buffered_bytes": rng.choice((0, 100, 5000, 1 << 30)),
                  "max_pending_segments": rng.choice((0, 1, 3, 1 << 20))}
    from rocketpy.capture.summary import summary_builder
    for cls in engines:
        if contract is not None and cls is engine.PyBatchDecoder:
            import costmeter
            out = []
            with costmeter.reference():
                cost, error = costmeter.measure(lambda: out.append(
                    _decode_whole(cls, data, info, ports, bounds)))
            if error is not None:
                raise error
            contract.check(data, cost)
            parts, refused = out[0]
        else:
            parts, refused = _decode_whole(cls, data, info, ports, bounds)
        checks["format_errors"] += refused
        summary = summary_builder(cls.name)      # the compiled one counts the core's buffers
        for part in parts:
            part.jsonl()
            summary.add_part(part)
            b = part.to_arrow()
            engine.batch_jsonl(b)
            engine.ext_json_column(b.column("ext_fields"))
        summary.latencies()
        checks[cls.name] = ([part.to_arrow() for part in parts], summary.result())
    if engine.NATIVE is None:
        return True
    # as byte ranges: random cut points, the compiled scanner and range decode
    from rocketpy.capture.split import seek_record
    size = len(data)
    cuts = sorted({info.data_offset, size, *(rng.randrange(info.data_offset, size + 1)
                                               for _ in range(rng.randrange(0, 4)))})
    ranges = [plan.Range(i, 0, 0, "fuzz", "fuzz", a, b) for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    scans = {}
    for r in ranges:
        f = io.BytesIO(data)
        try:
            start = seek_record(f, info, r.start)
        except CaptureFormatError:
            return True
        scans[r.index] = engine.native_scan_range(f, info, start, r.end)
    planner = plan.Planner(ranges, scans)
    for r in ranges:
        dec = engine.NativeBatchDecoder(plan=planner.plan(r), **bounds)   # a range's bounds too
        f = io.BytesIO(data)
        start = seek_record(f, info, r.start)
        try:
            for _ in plan.decode_range(dec, r, info, f, start):
                pass
        except CaptureFormatError:
            list(dec.finish())
    return True


def fuzz_loop(seconds: float, seed: int, differential: int, keep: str, inputs: int = 0) -> None:
    """Runs ``inputs`` inputs when it is set, else for ``seconds``."""
    from rocketpy.capture import engine
    assert engine.NATIVE is not None, "the compiled decoder did not load"
    rng = random.Random(seed)
    base = corpus()
    contract = cost_contract() if differential else None
    checks = {"format_errors": 0}
    n = diffs = not_captures = 0
    current = os.path.join(keep, "current-input")
    started = time.monotonic()
    deadline = started + seconds
    while n < inputs if inputs else time.monotonic() < deadline:
        r = rng.random()
        if r < 0.1:
            data = random_capture(rng)
        elif r < 0.15:
            data = rng.choice(base)[:rng.randrange(0, 20000)]              # cut short anywhere
        else:
            data = mutate(rng.choice(base), rng)
        with open(current, "wb") as f:       # what to replay if ASan stops the process
            f.write(data)
        engines = [engine.NativeBatchDecoder]
        if differential and n % differential == 0:
            engines.append(engine.PyBatchDecoder)
        checks.pop("native", None)
        checks.pop("python", None)
        try:
            if not run_one(data, engines, checks, contract) and len(engines) > 1:
                not_captures += 1              # nothing to compare: both refuse it alike
        except Exception as exc:               # anything but a CaptureFormatError is a finding
            path = os.path.join(keep, f"finding-{n}")
            with open(path, "wb") as f:
                f.write(data)
            raise SystemExit(f"capture_fuzz: input {n}: {type(exc).__name__}: {exc} (kept in {path})")
        if "python" in checks:
            import pyarrow as pa
            from rocketpy.capture.arrow import ARROW_SCHEMA
            a = pa.Table.from_batches(checks["native"][0], schema=ARROW_SCHEMA)
            b = pa.Table.from_batches(checks["python"][0], schema=ARROW_SCHEMA)
            if not a.equals(b) or checks["native"][1] != checks["python"][1]:
                path = os.path.join(keep, f"difference-{n}")
                with open(path, "wb") as f:
                    f.write(data)
                raise SystemExit(f"capture_fuzz: input {n}: the engines disagree (kept in {path})")
            diffs += 1
        n += 1
    os.unlink(current)
    print(f"capture_fuzz: {n} inputs in {time.monotonic() - started:.0f} s under AddressSanitizer, no finding "
          f"({checks['format_errors']} refused as not a capture, {diffs} also checked against "
          f"the pure-Python decoder, {not_captures} more not a capture at all)", flush=True)
    if contract is not None:
        print(f"capture_fuzz: the pure-Python decoder's cost of those {diffs} counted, the "
              f"dearest {contract.worst[0]:.3f} of what the contract allows", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--inputs", type=int, default=0,
                   help="run exactly this many inputs instead of --seconds")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--differential", type=int, default=50,
                   help="check every Nth input against the pure-Python decoder (0: never)")
    p.add_argument("--keep", help="directory for reproducers (default: a temporary one)")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.inner:
        fuzz_loop(a.seconds, a.seed, a.differential, a.keep, a.inputs)
        return 0
    work = Path(tempfile.mkdtemp(prefix="rocketpy-asan-"))
    keep = Path(a.keep or work / "findings")
    keep.mkdir(parents=True, exist_ok=True)
    try:
        pkg = build_asan(work)
        out = subprocess.run([sys.executable, __file__, "--inner", "--seconds", str(a.seconds),
                              "--inputs", str(a.inputs),
                              "--seed", str(a.seed), "--differential", str(a.differential),
                              "--keep", str(keep)], env=asan_env(pkg), cwd=work)
        if out.returncode:
            current = keep / "current-input"
            print(f"capture_fuzz: the fuzz run failed (status {out.returncode}); the input it was "
                  f"on is {current if current.exists() else 'above'}", file=sys.stderr)
        return out.returncode
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
