"""Crash safety of the KV config: kill -9 while kvConfig.json is being written, many times.

The real server (``twistd -n rocketnamesrv`` via tests/serverproc.py) is flooded with large
PUT_KV_CONFIG requests and SIGKILLed at random instants -- half of them aimed at the moment a
write is under way -- ~20 times in a row on the same file; after every kill the file is a complete
version the server had (Java's format, no acknowledged put lost), and the restarted server answers
GET_KV_CONFIG from it (see :mod:`crashkv`; bench/crash_kv.py does many more runs).

Server-less tests kill a process that does nothing but rewrite the file through
:class:`~rocketpy.namesrv.kvconfig.KVConfigManager`: a hundred times at random instants, then
thirty times stopped exactly before each fsync and rename of a write in turn. A negative control
kills Java's in-place write (``MixAll.string2File``) mid-write the same way and finds the broken
files, so the checks have teeth.
"""
import os
import random
import signal
import time

import pytest

import crashkv
from rocketpy.namesrv.kvconfig import KVConfigManager
from rocketpy.service import fileio

SEED = int(os.environ.get("ROCKETPY_CRASH_SEED", "11"))


def _kv(path):
    """The manager as the server builds it (its store looked up when called, so the
    negative control's replacement of ``write_atomic`` reaches it), its file loaded."""
    kv = KVConfigManager(path, store=lambda p, text: fileio.write_file_java(p, text),
                         log=fileio.AppendLog(path))
    kv.load_json(fileio.read_text(path))
    return kv


@pytest.mark.network
def test_kill_9_the_server_while_it_writes_the_kv_config(tmp_path):
    lines = []
    crash = crashkv.CrashKV(tmp_path, seed=SEED, log=lines.append)
    for _ in range(20):
        crash.run()
    crash.finish()                                   # the last restart serves it, stops cleanly
    stats = crash.stats
    assert stats.kills == 20 and stats.runs == 21
    assert stats.aimed >= 3 and stats.mid_write >= 2, stats.line()   # kills did land mid-write
    assert stats.puts_acked > 20 and len(stats.versions_seen) >= 15, stats.line()
    assert sorted(p.name for p in (tmp_path / "namesrv").iterdir()) == [
        "kvConfig.json", "kvConfig.json.bak"]        # the clean stop left no temp file


def _writer(path, seed, progress=None, in_place=True):
    """Child: rewrite the file forever, each version numbered (sizes vary 1 KiB .. 1 MiB).

    With ``progress`` (a pair of pipe ends) it stops at every step of a write, reports and waits
    for a go-ahead, so the parent can kill it exactly mid-write: with ``in_place`` it writes as
    Java's ``string2File`` does -- in place, through an 8 KiB buffer -- and stops after each chunk
    of the file (the negative control); otherwise it uses rocketpy's atomic write and stops before
    each fsync and rename."""
    if progress is not None and not in_place:
        report, go = progress
        real_fsync, real_replace = os.fsync, os.replace

        def pause():
            os.write(report, b".")
            os.read(go, 1)

        os.fsync = lambda fd: (pause(), real_fsync(fd))[1]
        os.replace = lambda a, b: (pause(), real_replace(a, b))[1]
    elif progress is not None:
        report, go = progress

        def write_in_place(target, data):
            with open(target, "wb") as f:
                for i in range(0, len(data), 8192):
                    f.write(data[i:i + 8192])
                    f.flush()
                    if target == path:            # not for the .bak copy
                        os.write(report, b".")
                        os.read(go, 1)
        fileio.write_atomic = write_in_place
    rng = random.Random(seed)
    kv = _kv(path)
    n = int(kv.get_kv_config("meta", "n") or 0)
    while True:
        n += 1
        size = rng.choice((1 << 20,) if progress is not None and in_place else (1 << 10, 1 << 16, 1 << 20))
        kv.config_table.setdefault("data", {})["blob"] = f"{n}:" + "x" * size
        kv.config_table.setdefault("meta", {})["n"] = str(n)
        kv.persist()


def test_kill_9_a_process_rewriting_the_file(tmp_path):
    path = str(tmp_path / "kvConfig.json")
    rng = random.Random(SEED)
    last = 0
    hits = 0
    for i in range(100):
        pid = os.fork()
        if pid == 0:                                  # pragma: no cover - the child
            try:
                _writer(path, i)
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0.005, 0.06))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        hits += os.path.exists(os.path.join(tmp_path, ".kvConfig.json.tmp"))
        if not os.path.exists(path):
            assert last == 0
            continue
        for name in (path, path + ".bak"):
            if os.path.exists(name):
                with open(name, encoding="utf-8") as f:
                    table = crashkv.parse_java_kv(f.read(), name)
                n = int(table["meta"]["n"])
                assert table["data"]["blob"].startswith(f"{n}:")   # blob and counter agree
                if name == path:
                    assert n >= last                  # never an older version than before
                    last = n
        kv = _kv(path)                                 # what a restart reads
        assert int(kv.get_kv_config("meta", "n")) == last
    assert hits >= 5 and last > 20, (hits, last)     # kills did land inside writes


def test_the_check_catches_in_place_writes(tmp_path):
    """Negative control: the same check on Java's in-place write, killed after it has written
    a random number of 8 KiB chunks, finds the broken files (so the tests above have teeth)."""
    path = str(tmp_path / "kvConfig.json")
    good = _kv(path)
    good.config_table = {"meta": {"n": "0"}, "data": {"blob": "0:" + "x" * (1 << 20)}}
    rng = random.Random(SEED)
    broken = 0
    for i in range(30):
        good.persist()                                # start from a complete file
        report_r, report_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:                                  # pragma: no cover - the child
            try:
                _writer(path, i, progress=(report_w, go_r))
            finally:
                os._exit(0)
        for _ in range(rng.randrange(1, 120)):        # let it write some chunks of the file
            os.read(report_r, 1)
            os.write(go_w, b".")
        os.read(report_r, 1)                          # it is between two chunks now
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        for fd in (report_r, report_w, go_r, go_w):
            os.close(fd)
        try:
            with open(path, encoding="utf-8") as f:
                crashkv.parse_java_kv(f.read(), path)
        except crashkv.CrashError:
            broken += 1
    assert broken == 30, broken


def test_kill_9_at_every_step_of_the_atomic_write(tmp_path):
    """The same precise kills on rocketpy's own write: stopped before any fsync or rename, at
    every step of a .bak + file write in turn, the file is always a complete version."""
    path = str(tmp_path / "kvConfig.json")
    rng = random.Random(SEED)
    last = 0
    for i in range(30):
        report_r, report_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:                                  # pragma: no cover - the child
            try:
                _writer(path, i, progress=(report_w, go_r), in_place=False)
            finally:
                os._exit(0)
        for _ in range(i % 10 + rng.randrange(3)):    # steps: fsync .bak, dir, rename, ...
            os.read(report_r, 1)
            os.write(go_w, b".")
        os.read(report_r, 1)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        for fd in (report_r, report_w, go_r, go_w):
            os.close(fd)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            table = crashkv.parse_java_kv(f.read(), path)
        n = int(table["meta"]["n"])
        assert table["data"]["blob"].startswith(f"{n}:") and n >= last
        last = n
    assert last > 5
