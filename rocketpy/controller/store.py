"""Controller state layer: the durable form of the replica state (rocketpy's stand-in for the
DLedger log Java's controller replays at start).

A single controller writes its whole state as one JSON snapshot after every change, through the
writer thread (:class:`~rocketpy.transport.offload.WritePool`, atomic replace and ``fsync``),
and answers a changing request only once its snapshot is on disk. The writer coalesces the
snapshots that wait together into one write of the newest (group commit), so a burst of changes
costs one write, and a snapshot is never older than the answers it allows. A restart loads it:
broker ids (and the next id of each group), masters, epochs and sync state sets come back; who
is alive is learnt again from the heartbeats. No I/O here: the service reads and writes.
"""
import json

from .replicas import BrokerReplicaInfo, SyncStateInfo, java_set

__all__ = ["snapshot_text", "load_snapshot", "SnapshotError", "SNAPSHOT_NAME"]

#: file name of the snapshot in ``controllerStorePath``
SNAPSHOT_NAME = "replicas.json"
_FORMAT = 1


class SnapshotError(ValueError):
    """The snapshot file is not one this version wrote."""


def snapshot_text(manager):
    """The state of ``manager`` (a ReplicasInfoManager) as JSON text."""
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
    return json.dumps({"format": _FORMAT, "replicaInfoTable": replicas,
                       "syncStateSetInfoTable": states}, sort_keys=True, indent=1)


def load_snapshot(manager, text):
    """Replace ``manager``'s state with the snapshot ``text``; SnapshotError when unreadable."""
    try:
        data = json.loads(text)
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
    except SnapshotError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SnapshotError(f"not a controller snapshot: {exc}") from None
    manager.replica_info_table = replicas
    manager.sync_state_info_table = states
