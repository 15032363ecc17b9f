"""Controller state layer: who becomes master (Java ``DefaultElectPolicy``, 5.3.3).

Candidates are first the sync state set, then (only with ``enableElectUncleanMaster``) every
replica, each kept only while alive. The old master stays if it is a candidate and no other
broker is designated; a designated broker (``mqadmin electMaster``) wins if it is a candidate,
else nobody; otherwise the best by the heartbeats: highest epoch, then highest max offset, then
lowest election priority number.
"""
import functools

from .replicas import java_set

__all__ = ["DefaultElectPolicy"]


def _int32(value):
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _compare(a, b):
    """Java's comparator, truncating casts included: epoch descending, then max offset
    descending, then election priority ascending."""
    if a.epoch == b.epoch:
        if a.max_offset == b.max_offset:
            return _int32(a.election_priority - b.election_priority)
        return _int32(b.max_offset - a.max_offset)
    return _int32(b.epoch - a.epoch)


class DefaultElectPolicy:
    """The default policy.

    :param alive: ``alive(cluster, broker name, id)``.
    :param live_info: the heartbeat table's ``broker_live_info(cluster, broker name, id)``
        (None: pick the first candidate)."""

    def __init__(self, alive=None, live_info=None):
        self.alive = alive
        self.live_info = live_info

    def elect(self, cluster, broker_name, sync_state_brokers, all_replica_brokers, old_master,
              prefer_broker_id):
        new_master = None
        if sync_state_brokers is not None:
            new_master = self._try(cluster, broker_name, sync_state_brokers, old_master,
                                   prefer_broker_id)
        if new_master is None and all_replica_brokers is not None:
            new_master = self._try(cluster, broker_name, all_replica_brokers, old_master,
                                   prefer_broker_id)
        return new_master

    def _try(self, cluster, broker_name, brokers, old_master, prefer):
        candidates = java_set(brokers)
        if self.alive is not None:
            candidates = [b for b in candidates if self.alive(cluster, broker_name, b)]
        if not candidates:
            return None
        if old_master in candidates and (prefer is None or prefer == old_master):
            return old_master
        if prefer is not None:
            return prefer if prefer in candidates else None
        if self.live_info is not None:
            infos = [self.live_info(cluster, broker_name, b) for b in candidates]
            infos = [i for i in infos if i is not None]
            if infos:
                # TreeSet.first(): the least by the comparator; among equals the first added
                return min(infos, key=functools.cmp_to_key(_compare)).broker_id
        return candidates[0]
