"""Fuzz the header kernel (rocketpy.remoting._kernel) under AddressSanitizer.

Builds the compiled modules with ``-fsanitize=address`` into a scratch copy of the package (as
bench/capture_fuzz.py does), then, in a Python with libasan preloaded, reads hostile headers and
frames with the kernel: mutated genuine frames (tests/fuzzharness.py's Mutator: bit flips, bad
lengths, mutated JSON trees, bad binary headers), the same headers as the other serialize type,
truncations at every length of a few, and random bytes.  Each is read four ways
(``read_header``, ``read_frame``, ``request_key``, ``peek``) and every reading is compared with the Python codec's;
the header and the frame, and the header with its first key written twice, also go through
``repeated_keys``, compared with ``fastjson``'s exact count where json reads the text
(the oracle), as does every tenth input a body-shaped object of 17 to 1,000 keys; ``configure``
is given language tables it must refuse: a different command, or a command where the codec refuses the header, is a finding;
an out-of-bounds access is caught by ASan.  Every ``--cost-every``-th frame is also read by the
pure-Python codec with its cost counted (tests/costmeter.py: lines and memory, held to a multiple
of the genuine frames' medians per byte): an input far dearer per byte is a finding too (issue
31: the header the kernel leaves to the codec is what froze the server).  Runs ``--inputs N``
inputs (tests/test_kernel_fuzz.py runs a fixed number) or ``--seconds``.

    python bench/kernel_fuzz.py [--seconds 300 | --inputs N] [--seed 1]
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from capture_fuzz import asan_env, build_asan  # noqa: E402  (one ASan build recipe)


def _headers(rng, mutator, layout):
    """Hostile ``(serialize_type, header, frame)`` inputs."""
    kind = rng.random()
    if kind < 0.1:
        frame = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
    else:
        frame = mutator.mutate()
    if len(frame) >= layout.PREFIX_SIZE:
        serialize_type, start, end = layout.header_span(frame)
        header = frame[start:end]
    else:
        serialize_type, header = rng.randrange(2), frame
    if rng.random() < 0.2:
        serialize_type = 1 - serialize_type if serialize_type in (0, 1) else rng.randrange(3)
    if rng.random() < 0.2:
        header = header[:rng.randrange(len(header) + 1)]
    return serialize_type, header, frame


def _check_repeated_keys(kernel, fastjson, texts):
    """``repeated_keys`` of each text equals the Python oracle's answer, or leaves it (None)."""
    for text in texts:
        found = kernel.repeated_keys(text)
        if found is None:
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if found is not (fastjson.written_keys(text) != fastjson.key_count(obj)):
            raise SystemExit(f"kernel_fuzz: finding: repeated_keys({text!r}) is {found}")


def _body(rng):
    """A body-shaped text for ``repeated_keys``: an object of 17 to 1,000 keys (past 16 the
    kernel hashes them, past 128 its table grows), drawn so that some repeat, sometimes cut
    short or with a byte changed."""
    n = rng.randrange(17, 1001)
    topics = ",".join(f'"T{rng.randrange(2 * n)}":{{"perm":6,"readQueueNums":{rng.randrange(16)}}}'
                      for _ in range(n))
    text = ('{"filterServerList":[],"topicConfigTable":{' + topics + "}}").encode()
    cut = rng.random()
    if cut < 0.2:
        text = text[:rng.randrange(len(text))]
    elif cut < 0.4:
        at = rng.randrange(len(text))
        text = text[:at] + bytes([rng.randrange(256)]) + text[at + 1:]
    return text


def _check_bad_language_tables(kernel, command):
    """``configure`` refuses tables it cannot use (and keeps the one it has)."""
    for bad in ({"JAVA": "0"}, {1: 0}, {"JAVA": 999}, {"JAVA": -1}, {"JAVA": 2 ** 80}):
        try:
            kernel.configure(command, bad)
        except (TypeError, ValueError, OverflowError):
            continue
        raise SystemExit(f"kernel_fuzz: finding: configure took the language table {bad!r}")


def fuzz_loop(seconds, seed, inputs, cost_every=5):
    import costmeter
    from fuzzharness import Mutator, corpus
    from rocketpy.remoting import fastjson, frame as codec_frame, layout
    from rocketpy.remoting.errors import HeaderDecodeError, RemotingCodecError
    from rocketpy.remoting.kernel import KERNEL
    if KERNEL is None:
        raise SystemExit("kernel_fuzz: rocketpy.remoting._kernel is not built")
    from rocketpy.remoting import RemotingCommand
    _check_bad_language_tables(KERNEL, RemotingCommand)
    rng = random.Random(seed)
    mutator = Mutator(rng, corpus())
    contract = None
    if cost_every:
        with costmeter.reference():
            contract = costmeter.CostContract(
                "decode_frame", [(f, codec_frame.decode_frame) for f in corpus()[::9]])
    started, n, read, counted = time.monotonic(), 0, 0, 0
    while (n < inputs) if inputs else (time.monotonic() - started < seconds):
        serialize_type, header, frame = _headers(rng, mutator, layout)
        got = KERNEL.read_header(serialize_type, header)
        KERNEL.request_key(frame)
        KERNEL.peek(frame)
        _check_repeated_keys(KERNEL, fastjson, (header, frame,
                                                header.replace(b'{"', b'{"a":1,"a":0,"', 1)))
        if n % 10 == 0:
            _check_repeated_keys(KERNEL, fastjson, (_body(rng),))
        limit = rng.choice([layout.DEFAULT_MAX_FRAME_LENGTH, 64, 300])
        if contract is not None and n % cost_every == 0:
            with costmeter.reference():
                try:
                    contract.run(frame, codec_frame.decode_frame, frame, limit)
                except costmeter.CostFinding as finding:
                    raise SystemExit(f"kernel_fuzz: finding: {finding}") from None
            counted += 1
        whole = KERNEL.read_frame(frame, limit)
        if whole is not None:
            saved, codec_frame.KERNEL = codec_frame.KERNEL, None
            try:
                want = codec_frame.decode_frame(frame, limit)
            except RemotingCodecError as exc:
                raise SystemExit(f"kernel_fuzz: finding: the kernel read frame {frame!r}, the codec says {exc}")
            finally:
                codec_frame.KERNEL = saved
            if (whole, whole.body, type(whole.language)) != (want, want.body, type(want.language)):
                raise SystemExit(f"kernel_fuzz: finding: frame {frame!r} read as {whole!r}, the codec reads {want!r}")
        if got is not None:
            read += 1
            try:
                want = codec_frame.python_decode_header(serialize_type, header)
            except HeaderDecodeError as exc:
                raise SystemExit(f"kernel_fuzz: finding: the kernel read {header!r}, the codec says {exc}")
            if (got, got.verbatim, type(got.language)) != (want, want.verbatim, type(want.language)):
                raise SystemExit(f"kernel_fuzz: finding: {header!r} read as {got!r}, the codec reads {want!r}")
        n += 1
    print(f"kernel_fuzz: {n} inputs under AddressSanitizer, no finding ({read} read by the kernel "
          "and equal to the codec's command, the rest left to the codec)", flush=True)
    if contract is not None:
        print(f"kernel_fuzz: cost of {counted} inputs in the pure-Python codec counted, the "
              f"dearest {contract.worst[0]:.3f} of what the contract allows", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--inputs", type=int, default=0, help="run exactly this many inputs")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cost-every", type=int, default=5, dest="cost_every",
                   help="count the codec's cost of every Nth input (0: never)")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.inner:
        fuzz_loop(a.seconds, a.seed, a.inputs, a.cost_every)
        return 0
    work = Path(tempfile.mkdtemp(prefix="rocketpy-kernel-asan-"))
    try:
        pkg = build_asan(work)
        if not list((pkg / "rocketpy" / "remoting").glob("_kernel*.so")):
            raise SystemExit("kernel_fuzz: the ASan build produced no kernel")
        return subprocess.run([sys.executable, __file__, "--inner", "--seconds", str(a.seconds),
                               "--inputs", str(a.inputs), "--seed", str(a.seed),
                               "--cost-every", str(a.cost_every)],
                              env=asan_env(pkg), cwd=work).returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
