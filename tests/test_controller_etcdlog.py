"""The controller group on etcd: the watch's line buffer and the write queue cost what passes
through them, not its square."""
import json
import time

from twisted.internet.defer import succeed
from twisted.internet.task import Clock

from rocketpy.controller.replicas import ReplicasInfoManager
from rocketpy.controller.replicated import EtcdSettings, Leadership
from rocketpy.service import controllergroup, etcd as etcd_module
from rocketpy.service.controllergroup import ControllerGroup

SETTINGS = EtcdSettings(["http://127.0.0.1:1"])


class _Transport:
    def __init__(self):
        self.stopped = False

    def stopProducing(self):
        self.stopped = True


def _feed(size, chunk=1024):
    messages = []
    lines = etcd_module._Lines(messages.append, None)
    lines.transport = _Transport()
    line = json.dumps({"result": {"events": [], "pad": "x" * (size - 40)}}).encode() + b"\n"
    started = time.process_time()
    for offset in range(0, len(line), chunk):
        lines.dataReceived(line[offset:offset + chunk])
    spent = time.process_time() - started
    assert len(messages) == 1 and len(messages[0]["result"]["pad"]) == size - 40
    return spent


def test_watch_lines_cost_their_length_not_length_times_chunks():
    messages = []
    lines = etcd_module._Lines(messages.append, None)
    lines.transport = _Transport()
    for piece in (b'{"a": 1}\n{"b"', b': 2}\n\n{"c": 3', b'}\n{"d": '):
        lines.dataReceived(piece)
    assert messages == [{"a": 1}, {"b": 2}, {"c": 3}] and not lines.transport.stopped
    # one 1 MiB and one 4 MiB line in 1 KiB chunks: rebuilding the buffer per chunk makes the
    # second cost 16 times the first; kept linear it costs about 4 times (best of 3 each)
    small = min(_feed(1 << 20) for _ in range(3))
    large = min(_feed(4 << 20) for _ in range(3))
    assert large < 8 * small, (small, large)


class _Committing:
    """A gateway that commits every transaction at once (and counts them)."""

    def __init__(self):
        self.txns = 0

    def post(self, path, body):
        self.txns += 1
        return succeed({"succeeded": True, "header": {"revision": "2"}})


def _burst(monkeypatch, entries):
    monkeypatch.setattr(controllergroup, "MAX_TXN_ENTRIES", 1)
    gateway = _Committing()
    group = ControllerGroup(Clock(), ReplicasInfoManager(), Leadership("n0", "a"), SETTINGS, "g",
                            gateway=gateway)
    group._leader_revision = 1
    group._writing = True                  # the burst waits behind a write in flight
    jobs = [group.record([]) for _ in range(entries)]
    done = [group.submit(job) for job in jobs]
    group._writing = False
    started = time.process_time()
    group._write()
    spent = time.process_time() - started
    assert gateway.txns == entries and all(d.called for d in done)
    return spent


def test_a_write_burst_costs_its_size_not_its_square(monkeypatch):
    """One entry per transaction, so the queue is cut once per entry: slicing the rest off each
    time made 40,000 entries cost 16 times 10,000; a deque costs about 4 times (best of 3)."""
    small = min(_burst(monkeypatch, 10_000) for _ in range(3))
    large = min(_burst(monkeypatch, 40_000) for _ in range(3))
    assert large < 8 * small, (small, large)
