"""Controller state layer: the durable form of the replica state (rocketpy's stand-in for the
DLedger log Java's controller replays at start).

A single controller keeps in ``controllerStorePath`` a snapshot of the whole state,
``replicas.json``, with the sequence number of the last event it includes, and the events since
in log segments beside it (``replicas.json.log.<n>``, the KV store's
:class:`~rocketpy.service.fileio.AppendLog`), one JSON line per event
(:mod:`rocketpy.controller.events`) with its sequence number. Every change appends its events
(and ``fsync``) through the writer thread before the request that made it is answered, so a
change costs what its events cost, not what the whole state costs; the writer turns the appends
that wait together into one (group commit: :class:`Journal` hands the newest job every event not
yet taken). Every :data:`COMPACT_EVENTS` events, and after a failed write, the next write is a
snapshot instead (atomic replace), after which the segments it covers are removed.

A restart loads the snapshot and applies the logged events after its sequence number (segments a
crash left behind a snapshot hold events it has: skipped) and appends to a new segment; a torn
last line (a crash mid-append, never acknowledged) is dropped. Broker ids and each group's next
id, masters, epochs and sync state sets come back; who is alive is learnt again from the
heartbeats. No I/O here: the service passes the log and the function that writes a snapshot.
"""
import json

from .events import event_from_obj, event_to_obj
from .replicas import BrokerReplicaInfo, SyncStateInfo, java_set

__all__ = ["Journal", "snapshot_text", "load_snapshot", "load_state", "SnapshotError",
           "SNAPSHOT_NAME", "COMPACT_EVENTS"]

#: the snapshot's file name in ``controllerStorePath`` (the log segments are beside it)
SNAPSHOT_NAME = "replicas.json"
#: events appended before the next write is a snapshot
COMPACT_EVENTS = 10_000
_FORMAT = 1


class SnapshotError(ValueError):
    """The stored state is not one this version wrote."""


def snapshot_text(manager, seq=0):
    """The state of ``manager`` (a ReplicasInfoManager), including events up to ``seq``."""
    replicas = {}
    for name, info in manager.replica_info_table.items():
        replicas[name] = {
            "clusterName": info.cluster_name, "nextAssignBrokerId": info.next_assign_broker_id,
            "brokers": [[i, info.brokers[i][0], info.brokers[i][1]] for i in java_set(info.brokers)]}
    states = {}
    for name, state in manager.sync_state_info_table.items():
        states[name] = {
            "clusterName": state.cluster_name, "masterBrokerId": state.master_broker_id,
            "masterEpoch": state.master_epoch, "syncStateSet": java_set(state.sync_state_set),
            "syncStateSetEpoch": state.sync_state_set_epoch}
    return json.dumps({"format": _FORMAT, "seq": seq, "replicaInfoTable": replicas,
                       "syncStateSetInfoTable": states}, sort_keys=True, indent=1)


def load_snapshot(manager, text):
    """Replace ``manager``'s state with the snapshot ``text`` (or the object it reads as); its
    sequence number."""
    try:
        data = json.loads(text) if isinstance(text, (str, bytes)) else text
        if data.get("format") != _FORMAT:
            raise SnapshotError(f"unknown snapshot format {data.get('format')!r}")
        replicas, states = {}, {}
        for name, obj in data["replicaInfoTable"].items():
            info = BrokerReplicaInfo(str(obj["clusterName"]), name)
            for broker_id, address, check in obj["brokers"]:
                info.brokers[int(broker_id)] = (address, check)
            info.next_assign_broker_id = int(obj["nextAssignBrokerId"])
            replicas[name] = info
        for name, obj in data["syncStateSetInfoTable"].items():
            state = SyncStateInfo(str(obj["clusterName"]), name)
            master = obj["masterBrokerId"]
            state.master_broker_id = None if master is None else int(master)
            state.master_epoch = int(obj["masterEpoch"])
            state.sync_state_set = frozenset(int(i) for i in obj["syncStateSet"])
            state.sync_state_set_epoch = int(obj["syncStateSetEpoch"])
            states[name] = state
        seq = int(data.get("seq", 0))
    except SnapshotError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise SnapshotError(f"not a controller snapshot: {exc}") from None
    manager.replica_info_table = replicas
    manager.sync_state_info_table = states
    manager.recount()
    return seq


def load_state(manager, snapshot, segments=()):
    """Load ``snapshot`` (text or None), then apply the events after it of ``segments`` (the
    log segments' texts, oldest first); the last sequence number. A segment's last line without
    its newline (a torn append) is dropped; any other bad line raises SnapshotError."""
    seq = load_snapshot(manager, snapshot) if snapshot is not None else 0
    for segment, text in enumerate(segments, 1):
        # the part after the last newline is a torn append, never acknowledged: dropped
        for number, line in enumerate((text or "").split("\n")[:-1], 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                line_seq = int(obj["seq"])
                event = event_from_obj(obj["event"])
            except (ValueError, KeyError, TypeError) as exc:
                raise SnapshotError(f"log segment {segment} line {number}: {exc}") from None
            if line_seq <= seq:
                continue
            manager.apply_event(event)
            seq = line_seq
    return seq


class Journal:
    """What is still to be written: events since the last job took them, or a whole snapshot.

    :param manager: the ReplicasInfoManager (read for snapshots).
    :param log: the segments (``append(number, data)``, ``remove_through(number)``: an
        :class:`~rocketpy.service.fileio.AppendLog`; writer thread).
    :param replace: ``replace(data)``: make the snapshot file hold ``data`` (writer thread).
    :param key: the writer's coalescing key (the snapshot's path).
    :param segment: the segment to append to (a new one at each start)."""

    def __init__(self, manager, log, replace, key, seq=0, segment=1,
                 compact_events=COMPACT_EVENTS):
        self.manager = manager
        self._log = log
        self._replace = replace
        self.key = key
        self.seq = seq
        self.segment = segment
        self.compact_events = compact_events
        self._pending = []
        self._logged = 0           # events in the log since the last snapshot
        self._broken = False       # a write failed: what the log holds is unknown

    def record(self, events):
        """Number ``events`` (already applied in memory); the FileWrite that makes them
        durable, with everything recorded before it that is not on disk yet."""
        from rocketpy.namesrv.pending import FileWrite
        for event in events:
            self.seq += 1
            self._pending.append(json.dumps({"seq": self.seq, "event": event_to_obj(event)},
                                            sort_keys=True) + "\n")
        return FileWrite(self.key, self._take, self._write)

    def _take(self):
        """On the state's thread: the lines to append, or a snapshot when one is due (later
        events then go to the next segment)."""
        lines, self._pending = self._pending, []
        self._logged += len(lines)
        segment = self.segment
        if self._broken or self._logged >= self.compact_events:
            self._broken = False
            self._logged = 0
            self.segment += 1
            return ("snapshot", segment, snapshot_text(self.manager, self.seq).encode("utf-8"))
        return ("append", segment, "".join(lines).encode("utf-8"))

    def _write(self, prepared):
        kind, segment, data = prepared
        try:
            if kind == "snapshot":
                self._replace(data)
                self._log.remove_through(segment)
            elif data:
                self._log.append(segment, data)
        except BaseException:
            self._broken = True    # the next write is a whole snapshot
            raise
