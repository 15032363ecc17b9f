"""Test helper: kill -9 the real server while it writes the KV config, again and again (issue 6,
part 4), shared by tests/test_crash_kv.py and bench/crash_kv.py.

One run: start ``twistd -n rocketnamesrv`` (tests/serverproc.py) on the KV file the previous run
left; check GET_KV_CONFIG and GET_KVLIST_BY_NAMESPACE answer exactly what that file holds; flood
PUT_KV_CONFIG with large values (pipelined on two connections, JSON and ROCKETMQ headers, so the
server is rewriting a multi-megabyte kvConfig.json and its .bak back to back); SIGKILL it at a
random instant; then read the file as the Java NameServer would. It must be a complete version:
it parses as ``{"configTable":{namespace:{key:value}}}``, and equals the table the server started
from with exactly the first *n* puts applied, for some *n*. What the server loads -- the file,
then its log (issue 20: a put appends a record; the file is rewritten by compactions) -- must
be such a version too, for an *n* at least the last put the server acknowledged (it answers
once the record is durable, as Java answers after persisting), so no acknowledged write is
lost. ``kvConfig.json.bak`` must be a complete earlier version too. The next run restarts on
it.

A kill that lands mid-write leaves the sibling temporary file behind (``.kvConfig.json.tmp`` or
``.kvConfig.json.bak.tmp``): its presence proves the kill hit a write; it is counted, the restart
must ignore it, and it must not pile up (one name per file, replaced by the next write).

What this shows is atomicity against a process crash. Power loss is what the fsync calls are
for; it cannot be simulated here.
"""
import json
import os
import random
import signal
import socket
import threading
import time
from pathlib import Path

import serverproc
from rocketpy.remoting import RemotingCommand, decode_frame, fastjson

__all__ = ["KillStats", "CrashKV"]

NAMESPACES = ("crash_ns_a", "crash_ns_b")
KEYS = ("k0", "k1", "k2", "k3")


class CrashError(AssertionError):
    """The file on disk (or the restarted server) broke the crash-safety contract."""


class KillStats:
    def __init__(self):
        self.runs = 0
        self.puts_sent = 0
        self.puts_acked = 0
        self.versions_seen = set()
        self.mid_write = 0          # kills that left a temporary file behind
        self.aimed = 0              # kills sent the moment a temp file appeared
        self.kills = 0
        self.unchanged = 0          # kills before the first put of the run reached the disk
        self.boot_seconds = []

    def line(self):
        return (f"{self.runs} server runs ({self.kills} ended by kill -9, {self.aimed} "
                f"of them aimed at a write under way): {self.puts_sent} puts sent, "
                f"{self.puts_acked} acked, {self.mid_write} kills mid-write (temp file left), "
                f"{self.unchanged} before any "
                f"new version, {len(self.versions_seen)} distinct versions found on disk")


def _value(seq, size, rng):
    head = f"{seq:09d}:"
    chunk = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(64))
    return head + chunk * (size // 64)


def _seq(value):
    return int(value.split(":", 1)[0])


def parse_java_kv(text, where):
    """The table of a kvConfig.json, checked to be Java's format (fastjson and standard JSON)."""
    try:
        data = json.loads(text)
        again = fastjson.loads(text)
    except ValueError as exc:
        raise CrashError(f"{where} is not complete JSON ({exc}): {text[:80]!r}...{text[-80:]!r}") from None
    if data != again or set(data) != {"configTable"} or not isinstance(data["configTable"], dict):
        raise CrashError(f"{where} is not a KVConfigSerializeWrapper: {text[:200]!r}")
    for ns, table in data["configTable"].items():
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise CrashError(f"{where}: namespace {ns} is not a string map")
    return data["configTable"]


class _Flood:
    """Pipelined PUT_KV_CONFIG on one connection (JSON and ROCKETMQ headers mixed), with a
    reader counting the answers. One connection: the server applies its requests in order, so
    the versions the file may hold are exactly the prefixes of the send order."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=serverproc.PATIENCE)
        self.acked = -1                  # highest seq answered SUCCESS
        self.error = None
        self.stop = threading.Event()

    def send(self, seq, ns, key, value, serialize_type):
        frame = RemotingCommand.request(100, {"namespace": ns, "key": key, "value": value},
                                        opaque=seq, version=479,
                                        serialize_type=serialize_type).encode()
        self.sock.sendall(frame)

    def read_loop(self):
        buf = b""
        try:
            while not self.stop.is_set():
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return
                buf += chunk
                while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                    end = 4 + int.from_bytes(buf[:4], "big")
                    answer = decode_frame(buf[:end])
                    buf = buf[end:]
                    if answer.code != 0:
                        self.error = f"PUT_KV_CONFIG answered {answer.code} {answer.remark}"
                        return
                    self.acked = max(self.acked, answer.opaque)
        except OSError:
            return

    def close(self):
        self.stop.set()
        try:
            self.sock.close()
        except OSError:
            pass


class CrashKV:
    """Repeated kill -9 runs on one KV file in ``workdir``."""

    def __init__(self, workdir, seed=1, value_size=96 * 1024, log=None, in_write=0.5):
        self.in_write = in_write
        self.workdir = Path(workdir)
        self.home = self.workdir / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.kv_path = self.workdir / "namesrv" / "kvConfig.json"
        self.rng = random.Random(seed)
        self.value_size = value_size
        self.table = {}            # what the file held after the last run
        self.bak_versions = []     # complete earlier versions the file and .bak may hold
        self.seq = 0
        self.stats = KillStats()
        self.log = log or (lambda line: None)

    # -- one run ------------------------------------------------------------------------------------

    def run(self, kill=True, min_delay=0.03, max_delay=0.35):
        started = time.monotonic()
        self._run_started = time.time()
        # values past the default kvConfigMaxValueBytes (64 KiB): multi-megabyte files
        with serverproc.running_server("-D", f"kvConfigMaxValueBytes={2 * self.value_size}",
                                       kv_path=str(self.kv_path), home=str(self.home)) as server:
            self.stats.boot_seconds.append(time.monotonic() - started)
            self._verify_served(server)
            puts, acked = self._flood(server, kill, min_delay, max_delay)
        self._verify_disk(puts, acked)
        self.stats.runs += 1

    def _verify_served(self, server):
        """The restarted server answers from the file the last run left."""
        client = serverproc.RemotingClient(server.port)
        try:
            for ns in NAMESPACES:
                for key in KEYS:
                    answer = client.call(101, {"namespace": ns, "key": key})
                    want = self.table.get(ns, {}).get(key)
                    got = (answer.ext_fields or {}).get("value") if answer.code == 0 else None
                    if got != want:
                        raise CrashError(f"GET_KV_CONFIG {ns}/{key} after restart: "
                                         f"{(got or '')[:20]!r} (code {answer.code}), file has "
                                         f"{(want or '')[:20]!r}")
                listing = client.call(219, {"namespace": ns})
                if ns in self.table:
                    if listing.code != 0 or fastjson.loads(listing.body)["table"] != self.table[ns]:
                        raise CrashError(f"GET_KVLIST_BY_NAMESPACE {ns} differs from the file")
                elif listing.code != 22:
                    raise CrashError(f"GET_KVLIST_BY_NAMESPACE {ns}: {listing.code}, "
                                     "but the file has no such namespace")
        finally:
            client.close()

    def _flood(self, server, kill, min_delay, max_delay):
        puts = []
        flood = _Flood(server.port)
        reader = threading.Thread(target=flood.read_loop, daemon=True)
        reader.start()
        stop = threading.Event()
        rng = random.Random(self.rng.random())
        delay = self.rng.uniform(min_delay, max_delay)

        def writer():
            try:
                while not stop.is_set():
                    self.seq += 1
                    ns, key = rng.choice(NAMESPACES), rng.choice(KEYS)
                    value = _value(self.seq, rng.choice((self.value_size // 4, self.value_size)), rng)
                    puts.append((self.seq, ns, key, value))
                    flood.send(self.seq, ns, key, value, rng.choice((0, 1)))
            except OSError:
                pass

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and server.proc.poll() is None:
            time.sleep(0.002)
        if kill and self.rng.random() < self.in_write:
            # aim: wait until a write is under way (its temp file exists), then kill at once
            tmps = [self.kv_path.with_name(f".{self.kv_path.name}.tmp"),
                    self.kv_path.with_name(f".{self.kv_path.name}.bak.tmp")]
            give_up = time.monotonic() + 2.0
            while (not any(os.path.exists(t) for t in tmps) and time.monotonic() < give_up
                   and server.proc.poll() is None):
                pass
            self.stats.aimed += 1
        if server.proc.poll() is not None:
            raise CrashError("the server died by itself:\n" + server.log_text()[-2000:])
        if kill:
            self.stats.kills += 1
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(10)
            stop.set()
        else:
            stop.set()
            thread.join(10)
            serverproc.wait_until(lambda: flood.acked >= self.seq or not reader.is_alive(),
                                  "every put answered", step=0.01)
        thread.join(10)
        flood.close()
        reader.join(5)
        self.stats.puts_sent += len(puts)
        self.stats.puts_acked += sum(1 for p in puts if p[0] <= flood.acked)
        if flood.error:
            raise CrashError(flood.error)
        return puts, flood.acked

    # -- the file after the kill -------------------------------------------------------------------

    def _state(self, puts, n_seq):
        """The table the server started from with every put up to seq ``n_seq`` applied."""
        table = {ns: dict(kv) for ns, kv in self.table.items()}
        for seq, ns, key, value in puts:
            if seq > n_seq:
                break
            table.setdefault(ns, {})[key] = value
        return table

    def _version_of(self, table, puts, where):
        """The seq n with table == state(n), or raise: the file is no version the server had."""
        first = puts[0][0] if puts else None
        run_seqs = [_seq(v) for kv in table.values() for v in kv.values()
                    if first is not None and _seq(v) >= first]
        n = max(run_seqs) if run_seqs else (first - 1 if first is not None else self.seq)
        if table != self._state(puts, n):
            raise CrashError(f"{where} holds no version the server ever had (looks like put {n})")
        return n

    def _verify_disk(self, puts, acked):
        tmp_files = [p for p in self.kv_path.parent.glob(".*.tmp")
                     if p.stat().st_mtime >= self._run_started - 1] if self.kv_path.parent.exists() else []
        if len(list(self.kv_path.parent.glob(".*"))) > 2:
            raise CrashError(f"stale files pile up: {sorted(self.kv_path.parent.iterdir())}")
        if tmp_files:
            self.stats.mid_write += 1
        file_table = None
        if self.kv_path.exists():   # what Java would read: a complete version (maybe older)
            file_table = parse_java_kv(self.kv_path.read_text(encoding="utf-8"), "kvConfig.json")
            if file_table not in self.bak_versions:
                self._version_of(file_table, puts, "kvConfig.json")
        table = serverproc.load_kv_table(self.kv_path)   # what rocketpy loads: file, then log
        n = self._version_of(table, puts, "kvConfig.json with its log")
        if acked > n:
            raise CrashError(f"put {acked} was acknowledged but the file and log only have up to {n}")
        bak = self.kv_path.with_name(self.kv_path.name + ".bak")
        bak_table = None
        if bak.exists():
            bak_table = parse_java_kv(bak.read_text(encoding="utf-8"), "kvConfig.json.bak")
            if bak_table not in self.bak_versions:
                self._version_of(bak_table, puts, "kvConfig.json.bak")
        if puts and n < puts[0][0]:
            self.stats.unchanged += 1
        self.stats.versions_seen.add(hash(json.dumps(table, sort_keys=True)))
        # complete versions the file or its .bak may still hold after the next run: a run that
        # compacts nothing leaves both as they are
        self.bak_versions = [v for v in (self.table, table, file_table, bak_table) if v is not None]
        self.table = table
        self.log(f"run {self.stats.runs + 1}: {len(puts)} puts sent, acked up to {acked}, "
                 f"file at put {n}{', temp file left' if tmp_files else ''}")

    def finish(self):
        """One clean run (SIGTERM) to show the last restart serves the file and stops cleanly."""
        self.run(kill=False, min_delay=0.2, max_delay=0.3)
