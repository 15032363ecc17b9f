"""The controller group's log in etcd stays bounded and is read in bounded pieces: the leader
snapshots the state every SNAPSHOT_ENTRIES entries in the transaction of an entry and deletes
the entries before it, a start reads the snapshot and the tail in pages pinned to one revision,
and the state after a restart equals the state the whole log gave. The watch's line buffer and
the write queue cost what passes through them, not its square. etcd is the in-memory
:mod:`fakeetcd` (its answers checked against a real etcd), time a ``Clock``."""
import json
import zlib

from twisted.internet.defer import succeed
from twisted.internet.task import Clock

from fakeetcd import FakeEtcd
from rocketpy.controller.events import (AlterSyncStateSetEvent, ApplyBrokerIdEvent,
                                        ElectMasterEvent)
from rocketpy.controller.replicas import ReplicasInfoManager
from rocketpy.controller.replicated import (RANGE_PAGE, SNAPSHOT_ENTRIES, EtcdSettings, Leadership,
                                            key_prefix, unb64)
from rocketpy.controller.store import snapshot_text
from rocketpy.service import controllergroup, etcd as etcd_module
from rocketpy.service.controllergroup import ControllerGroup

SETTINGS = EtcdSettings(["http://127.0.0.1:1"])
PREFIX = key_prefix("g")


def _group(fake, self_id):
    group = ControllerGroup(Clock(), ReplicasInfoManager(), Leadership(self_id, f"{self_id}:9878"),
                            SETTINGS, "g", gateway=fake)
    group.startService()
    return group


def _change(i):
    """The events of change ``i``: brokers join 40 groups, masters are elected, sets change."""
    name, broker_id = f"b{i % 40}", i // 40 + 1
    if i % 7 == 3:
        return [ElectMasterEvent(name, broker_id)]
    if i % 11 == 5:
        return [AlterSyncStateSetEvent(name, (broker_id, broker_id + 1))]
    return [ApplyBrokerIdEvent("c", name, f"10.0.{i % 40}.{broker_id}:10911", broker_id,
                               f"10.0.{i % 40}.{broker_id}:10911;{i}")]


def _lead_and_write(group, changes, start=0):
    assert group.leadership.leading
    for i in range(start, start + changes):
        events = _change(i)
        for event in events:
            group.replica_log.manager.apply_event(event)
        done = []
        group.submit(group.record(events)).addCallback(done.append)
        assert done == [None]


def _snapshot(fake):
    return json.loads(zlib.decompress(fake.state()[(PREFIX + "snapshot").encode()][0]))


def _log_keys(fake):
    return sorted(k for k in fake.state() if k.startswith((PREFIX + "log/").encode()))


def test_restart_reads_the_snapshot_and_a_short_tail_with_the_whole_logs_state():
    fake = FakeEtcd()
    leader = _group(fake, "n0")
    watcher = _group(fake, "n1")          # follows from the first entry on, through the watch
    changes = 2 * SNAPSHOT_ENTRIES + RANGE_PAGE + 7
    _lead_and_write(leader, changes)
    whole = ReplicasInfoManager()         # the state of the whole log, applied in order
    for i in range(changes):
        for event in _change(i):
            whole.apply_event(event)
    assert snapshot_text(leader.replica_log.manager) == snapshot_text(whole)
    assert snapshot_text(watcher.replica_log.manager) == snapshot_text(whole)
    # etcd keeps the snapshot of entry 2,000 and the entries from the last snapshot's batch on
    assert _snapshot(fake)["seq"] == 2 * SNAPSHOT_ENTRIES
    assert len(_log_keys(fake)) == changes - 2 * SNAPSHOT_ENTRIES + 1
    fake.reads = fake.largest_page = 0
    restarted = _group(fake, "n2")
    assert restarted.loaded and restarted.replica_log.seq == changes
    assert snapshot_text(restarted.replica_log.manager) == snapshot_text(whole)
    assert fake.reads == changes - 2 * SNAPSHOT_ENTRIES      # the entries after the snapshot
    assert fake.largest_page == RANGE_PAGE
    # it follows the leader's next entries through the watch
    _lead_and_write(leader, 3, start=changes)
    assert snapshot_text(restarted.replica_log.manager) == snapshot_text(leader.replica_log.manager)
    assert restarted.replica_log.seq == changes + 3


def test_pages_read_at_one_revision_survive_a_snapshot_between_them():
    """A snapshot written between two pages deletes the entries the next page starts at: the
    pages are read at the first read's revision, so the start still sees every entry, and the
    watch from that revision brings the rest."""
    fake = FakeEtcd()
    leader = _group(fake, "n0")
    _lead_and_write(leader, SNAPSHOT_ENTRIES - 100)
    pages = []

    def interleave(body):
        if b"/log/" in unb64(body["key"]):
            pages.append(body)
            if len(pages) == 1:          # after the first page, the leader passes a snapshot
                _lead_and_write(leader, 200, start=SNAPSHOT_ENTRIES - 100)

    fake.on_range = interleave
    reader = _group(fake, "n1")
    fake.on_range = None
    assert len(pages) >= 2 and len({p.get("revision") for p in pages}) == 1
    assert _snapshot(fake)["seq"] > RANGE_PAGE
    assert reader.loaded and reader.replica_log.seq == SNAPSHOT_ENTRIES + 100
    assert snapshot_text(reader.replica_log.manager) == snapshot_text(leader.replica_log.manager)


def test_a_step_down_reads_the_snapshot_and_tail_again():
    fake = FakeEtcd()
    leader = _group(fake, "n0")
    _lead_and_write(leader, SNAPSHOT_ENTRIES + 50)
    expected = snapshot_text(leader.replica_log.manager)
    fake.reads = 0
    leader._fire("lost", "test")                   # a step-down
    assert fake.reads == 50                        # the tail after the snapshot, not the log
    assert snapshot_text(leader.replica_log.manager) == expected
    assert leader.leadership.leading               # it campaigned again and won


def test_the_snapshot_of_10000_broker_ids_fits_one_etcd_request(monkeypatch):
    """At the controller's bound (10,000 ids: 5,000 groups of two) the state's text is over
    2 MB; compressed it is written under etcd's 1.5 MiB request limit, and read back equal."""
    monkeypatch.setattr(controllergroup, "SNAPSHOT_ENTRIES", 5)
    fake = FakeEtcd()
    leader = _group(fake, "n0")
    manager = leader.replica_log.manager
    for part in range(10):
        events = []
        for g in range(part * 500, part * 500 + 500):
            address = f"10.1.{g // 250}.{g % 250}"
            events += [ApplyBrokerIdEvent("DefaultCluster", f"broker-{g:05d}", f"{address}:1091{b}",
                                          b, f"{address}:1091{b};1732665600000") for b in (1, 2)]
            events += [ElectMasterEvent(f"broker-{g:05d}", 1),
                       AlterSyncStateSetEvent(f"broker-{g:05d}", (1, 2))]
        for event in events:
            manager.apply_event(event)
        leader.submit(leader.record(events))
    assert manager.broker_count() == 10_000
    text = snapshot_text(manager, 10)
    value = fake.state()[(PREFIX + "snapshot").encode()][0]
    assert len(text) > 2 * 1024 * 1024 and len(value) < 1024 * 1024
    assert zlib.decompress(value).decode() == text
    restarted = _group(fake, "n1")
    assert snapshot_text(restarted.replica_log.manager, 10) == text


def test_a_snapshot_that_is_not_one_stops_the_start_until_etcd_holds_one():
    """A value that is not zlib, inflates past MAX_SNAPSHOT_TEXT or nests too deep to read is a
    logged ReplicationError:
    the start waits and reads again; nothing is loaded meanwhile."""
    fake = FakeEtcd()
    leader = _group(fake, "n0")
    _lead_and_write(leader, 3)
    key = (PREFIX + "snapshot").encode()
    for bad in (b'{"seq": 9}', zlib.compress(b" " * (9 * 1024 * 1024), 9),
                zlib.compress(b"[" * 200_000, 9)):      # nested past any parser's depth
        fake.current[key] = (bad, fake.revision, fake.revision)
        reader = _group(fake, "n1")
        assert not reader.loaded and reader.replica_log.seq == 0
        fake.current[key] = (zlib.compress(snapshot_text(leader.replica_log.manager, 3).encode()),
                             fake.revision, fake.revision)
        reader.reactor.advance(controllergroup.RETRY_SECONDS)
        assert reader.loaded and reader.replica_log.seq == 3
        assert snapshot_text(reader.replica_log.manager) == snapshot_text(
            leader.replica_log.manager)
        del fake.current[key]


class _Transport:
    def __init__(self):
        self.stopped = False

    def stopProducing(self):
        self.stopped = True


def _feed(size, chunk=1024):
    """The bytes a watch's reader touches (appends, searches, cuts, moves) for one line of
    ``size`` bytes arriving ``chunk`` bytes at a time."""
    messages = []
    lines = etcd_module._Lines(messages.append, None)
    lines.transport = _Transport()
    line = json.dumps({"result": {"events": [], "pad": "x" * (size - 40)}}).encode() + b"\n"
    for offset in range(0, len(line), chunk):
        lines.dataReceived(line[offset:offset + chunk])
    assert len(messages) == 1 and len(messages[0]["result"]["pad"]) == size - 40
    return lines.bytes_touched


def test_watch_lines_cost_their_length_not_length_times_chunks():
    messages = []
    lines = etcd_module._Lines(messages.append, None)
    lines.transport = _Transport()
    for piece in (b'{"a": 1}\n{"b"', b': 2}\n\n{"c": 3', b'}\n{"d": '):
        lines.dataReceived(piece)
    assert messages == [{"a": 1}, {"b": 2}, {"c": 3}] and not lines.transport.stopped
    # one 1 MiB and one 4 MiB line in 128-byte chunks, the bytes touched counted: searching
    # the whole buffer again per chunk made the second 16 times the first; searched only past
    # what was searched it is 4 times (a few bytes a byte: appended, searched, cut once)
    small, large = _feed(1 << 20, 128), _feed(4 << 20, 128)
    assert small < 4 * (1 << 20) and large < 4.5 * small, (small, large)


class _Committing:
    """A gateway that commits every transaction at once (and counts them)."""

    def __init__(self):
        self.txns = 0

    def post(self, path, body):
        self.txns += 1
        return succeed({"succeeded": True, "header": {"revision": "2"}})


def _burst(monkeypatch, entries):
    """The queue entries moved to write a burst of ``entries`` waiting behind a write."""
    monkeypatch.setattr(controllergroup, "MAX_TXN_ENTRIES", 1)
    gateway = _Committing()
    group = ControllerGroup(Clock(), ReplicasInfoManager(), Leadership("n0", "a"), SETTINGS, "g",
                            gateway=gateway)
    group._leader_revision = 1
    group._writing = True                  # the burst waits behind a write in flight
    jobs = [group.record([]) for _ in range(entries)]
    done = [group.submit(job) for job in jobs]
    group._writing = False
    group._write()
    assert gateway.txns == entries and all(d.called for d in done)
    return group.entries_moved


def test_a_write_burst_costs_its_size_not_its_square(monkeypatch):
    """One entry per transaction, so the queue is cut once per entry: slicing the rest off each
    time moved 40,000 entries' worth 16 times 10,000's; a deque moves each entry once (counted)."""
    small, large = _burst(monkeypatch, 10_000), _burst(monkeypatch, 40_000)
    assert small == 10_000 and large == 40_000, (small, large)


def test_a_winner_that_cannot_read_the_state_gives_the_election_key_up():
    """It holds the key: retrying its campaign would find itself there and follow itself, and
    the group would have no leader until that controller restarts. It steps down (its lease
    revoked, the key gone), and then a controller leads."""
    from twisted.internet.defer import fail
    from rocketpy.service.etcd import EtcdError

    class FailsTheReadAfterTheCampaign(FakeEtcd):
        armed = True
        after_campaign = False

        def post(self, path, body):
            if path == "/v3/kv/range" and self.after_campaign:
                self.after_campaign = False
                return fail(EtcdError("timed out"))
            answer = super().post(path, body)
            if path == "/v3/kv/txn" and "lease" in str(body) and self.armed:
                self.armed, self.after_campaign = False, True
            return answer
    fake = FailsTheReadAfterTheCampaign()
    first = _group(fake, "n0")
    for _ in range(10):
        first.reactor.advance(1)
    assert first.leadership.leading and first.leadership.leader_id == "n0"
    assert b"n0" in fake.current[(PREFIX + "leader").encode()][0]


def test_a_log_entry_nested_past_the_parsers_depth_is_a_replication_error():
    """Whoever can write etcd's keys can write one: it is refused as the entry it is, not an
    exception that ends the start for good."""
    import pytest
    from rocketpy.controller.replicated import ReplicaLog, ReplicationError, b64, entry_key
    log = ReplicaLog(ReplicasInfoManager(), PREFIX)
    with pytest.raises(ReplicationError):
        log.apply_kv({"key": b64(entry_key(PREFIX, 1)), "value": b64("[" * 200_000)})
    assert log.seq == 0
