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
the answer cache's hit path (``HitPath``) runs on streams of the mutated frame, cached route
queries with other opaques (some mutated) and cut frames, against a cache that the inputs
themselves fill, evict, clear and make stale (the route generation moving with a version or
alone), and must give what the Python path gives (``lookup`` frame by frame, up to the first
that is not a hit) with the same cache state after, a run of a whole read sometimes sent by the
kernel itself on a socket pair and read back;
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
import socket
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


class HitPathFuzz:
    """Two answer caches filled alike: the kernel's run on one, the Python path on the other."""

    def __init__(self, rng, mutator):
        from rocketpy.namesrv.replies import ReusableResponse
        from rocketpy.transport.answercache import AnswerCache
        self.rng, self.mutator, self.reusable = rng, mutator, ReusableResponse
        self.versions = {}
        self.generation = 1            # moves whenever a version does (RouteSnapshots')
        size = rng.choice([4000, 20000, 1 << 20])
        self.caches = [AnswerCache(self.version_of, max_bytes=size, max_request=600,
                                   versions=self) for _ in range(2)]
        self.sockets = socket.socketpair()   # the kernel's own send of a whole read's run
        for sock in self.sockets:
            sock.setblocking(False)
        self.stored = []             # request frames whose answers went in
        self.runs = self.hits = self.compiled_hits = 0
        run = self.caches[0].answer_run

        def counted(*args):
            answered = run(*args)
            if answered is not None:
                self.compiled_hits += answered[2]
            return answered
        self.caches[0].answer_run = counted

    def version_of(self, topic):
        v = self.versions.get(topic, 0)
        return (v, 1) if topic.endswith("2") else v

    def store(self, frame):
        """``frame``'s answer into both caches, as the protocol would (None when it is not one
        the cache takes)."""
        from rocketpy.remoting import decode_frame
        from rocketpy.remoting.errors import RemotingCodecError
        from rocketpy.remoting.layout import frame_at
        if not 0 < frame_at(frame, 0, len(frame)) == len(frame) <= 600:
            return                     # not one whole frame the cache looks up
        key = self.caches[0].lookup(frame)
        self.caches[1].lookup(frame)
        if key is None or key.__class__ is bytes:
            return
        try:
            request = decode_frame(frame)
        except RemotingCodecError:
            return
        topic = str((request.ext_fields or {}).get("topic", ""))
        rng = self.rng
        shape = dict(remark=rng.choice([None, "r"]), body=b"x" * rng.randrange(0, 300),
                     ext_fields={"v": "1"} if rng.random() < 0.5 else None,
                     serialize_type=rng.choice([None, 0, 1]))
        for cache in self.caches:
            response = request.create_response(0, **shape)
            reply = self.reusable(reuse=(topic, self.version_of(topic)), **{
                name: getattr(response, name) for name in response.__dataclass_fields__})
            cache.answer(key, request, reply)
        self.stored = self.stored[-200:] + [frame]

    def _stream(self, frame):
        rng, parts = self.rng, []
        for _ in range(rng.randrange(1, 6)):
            pick = rng.random()
            if pick < 0.15 or not self.stored:
                parts.append(frame)
            else:
                hit = rng.choice(self.stored[-8:])      # (the recent ones are still cached)
                if pick < 0.25:
                    hit = self.mutator.mutate(hit)
                elif pick < 0.9:
                    hit = _reopaque(rng, hit)
                parts.append(hit)
        data = b"".join(parts)
        if rng.random() < 0.2:
            data = data[:rng.randrange(len(data) + 1)]
        return data

    def step(self, frame, layout):
        rng = self.rng
        if rng.random() < 0.3:
            self.store(frame)
        if rng.random() < 0.05:
            topic = rng.choice(["", "TopicTest", "T2", "%RETRY%x"])
            self.versions[topic] = self.versions.get(topic, 0) + 1
            self.generation += 1
        elif rng.random() < 0.03:      # the generation moves without a version: asked again
            self.generation += 1
        elif rng.random() < 0.01:
            for cache in self.caches:
                cache.clear()
        data = self._stream(frame)
        pos = 0 if rng.random() < 0.8 else rng.randrange(len(data) + 1)
        most, room = rng.choice([1, 3, 100]), rng.choice([1, 600, 1 << 20])
        limit = rng.choice([layout.DEFAULT_MAX_FRAME_LENGTH, 64, 300])
        kernel, python = self.caches
        sockets = self.sockets if rng.random() < 0.3 else True
        got = _runs(kernel, data, pos, most, room, limit, layout, sockets)
        want = _runs(python, data, pos, most, room, limit, layout, False)
        if got != want:
            raise SystemExit(f"kernel_fuzz: finding: HitPath.run on {data!r} from {pos} (most {most}, "
                             f"room {room}, limit {limit}) gives {got!r}, the Python path {want!r}")
        if _cache_state(kernel) != _cache_state(python):
            raise SystemExit(f"kernel_fuzz: finding: the cache state differs after {data!r}")
        self.runs += 1
        self.hits += got[2] - sum(x.__class__ is tuple for x in got[0])


def _reopaque(rng, frame):
    """A stored request with another opaque: a JSON header's digits replaced by others (often
    odd ones), a binary header's four bytes by random ones."""
    import re
    from rocketpy.remoting.layout import (PREFIX_SIZE, ROCKETMQ, ROCKETMQ_OPAQUE, build_frame,
                                          header_span)
    m = re.search(rb'"opaque":\s*(-?\d+)', frame)
    if m is None or header_span(frame)[0] == ROCKETMQ:   # a binary header's opaque
        at, end = PREFIX_SIZE + ROCKETMQ_OPAQUE[0], PREFIX_SIZE + ROCKETMQ_OPAQUE[1]
        return frame[:at] + bytes(rng.randrange(256) for _ in range(end - at)) + frame[end:]
    digits = rng.choice([str(rng.randrange(2 ** 31))] * 6 + [
        str(rng.randrange(10)), "00", "-1", "2147483647", "2147483648", "9" * rng.randrange(1, 30),
        ""]).encode()
    out = frame[:m.start(1)] + digits + frame[m.end(1):]
    stype, start, end = header_span(frame)
    grown = len(digits) - len(m.group(1))
    return build_frame(stype, out[start:end + grown], out[end + grown:])


def _python_step(cache, data, pos, limit, layout):
    """The protocol's Python path on the frame at ``data[pos]``: ``(answer or None, end)`` --
    None when it would be processed --, or None when no whole frame is there."""
    end = layout.frame_at(data, pos, len(data), limit)
    if end <= 0 or end > len(data):
        return None
    frame = data[pos:end]
    answer = cache.lookup(frame) if len(frame) <= cache.max_request else None
    return (answer if answer.__class__ is bytes else None), end


def _runs(cache, data, pos, most, room, limit, layout, compiled):
    """What the protocol does with ``data[pos:]``, up to ``most`` frames: a list of cached answers
    and of ``("processed", pos)`` for each frame it would process, and where it stopped.
    ``compiled``: the kernel's runs, and a Python step for the frame that ends each (as
    ``_consume`` does); else the Python path alone. ``compiled`` a socket pair: the kernel's
    runs, the first given the first socket's descriptor, and what the kernel sent is read off
    the second."""
    out, n = [], 0
    fd = compiled[0].fileno() if isinstance(compiled, tuple) else -1
    while n < most:
        if compiled:
            run = cache.answer_run(data, pos, most - n, room, limit, fd)
            if run is not None:
                rest, end, count, sent = run
                if sent and (end != len(data) or fd < 0):
                    raise SystemExit(f"kernel_fuzz: finding: a run to {end} of {len(data)} "
                                     f"bytes sent {sent}")
                if sent:
                    rest = _read_exactly(compiled[1], sent) + rest
                out.append(rest)
                pos, n, fd = end, n + count, -1
                continue
            fd = -1
        step = _python_step(cache, data, pos, limit, layout)
        if step is None:
            break
        out.append(step[0] if step[0] is not None else ("processed", pos))
        pos, n = step[1], n + 1
    merged = []                        # (answers next to each other joined: a run is one)
    for x in out:
        if x.__class__ is bytes and merged and merged[-1].__class__ is bytes:
            merged[-1] += x
        else:
            merged.append(x)
    return merged, pos, n


def _read_exactly(sock, n):
    """``n`` bytes the kernel sent on the pair's other end (all there: a socket pair's buffer
    took them in one send, or the kernel said it sent less)."""
    out = b""
    while len(out) < n:
        out += sock.recv(n - len(out))
    return out


def _cache_state(cache):
    return ([(k, e[0], e[1], e[3], e[4], e[5]) for k, e in cache._entries.items()], cache.bytes,
            cache.hits)


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
    hitpath = HitPathFuzz(rng, mutator)
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
        hitpath.step(frame, layout)
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
          f"and equal to the codec's command, the rest left to the codec; {hitpath.runs} streams "
          f"had {hitpath.hits} cached answers, {hitpath.compiled_hits} of them by HitPath, "
          "all as the Python path's)", flush=True)
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
