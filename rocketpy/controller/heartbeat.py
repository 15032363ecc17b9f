"""Controller state layer: which controller-mode brokers are alive (Java
``DefaultBrokerHeartbeatManager`` and ``BrokerLiveInfo``).

Brokers send a oneway BROKER_HEARTBEAT (904) to the controller every second with their epoch,
offsets, election priority and timeout. A broker is alive while ``last + timeout >= now``. Pure:
time comes in as ``now_ms``, channels are :class:`~rocketpy.namesrv.channel.Channel` values.

Differences from Java, on purpose: brokers are also indexed by channel, so a closed connection
costs one lookup, and it marks *every* broker on it inactive (Java stops at the first it finds
in a scan of the whole table); a broker heartbeating on a new connection is indexed by it, so
the old connection's close does not make it inactive (Java keeps the first channel); the expiry
scan returns the channels to close instead of closing them.
"""
from dataclasses import dataclass

from .replicas import MAX_BROKERS

__all__ = ["BrokerLiveInfo", "BrokerHeartbeatManager", "DEFAULT_BROKER_CHANNEL_EXPIRED_TIME"]

#: ``NamesrvConfig``/``MixAll`` default of a heartbeat's timeout when the broker sends none.
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 1000 * 60 * 2

_INT_MAX = (1 << 31) - 1


@dataclass
class BrokerLiveInfo:
    """What the last heartbeats said about one broker."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    channel: object
    epoch: int
    max_offset: int
    confirm_offset: int
    election_priority: int


class BrokerHeartbeatManager:
    """The live table: ``(cluster, broker name, broker id)`` -> :class:`BrokerLiveInfo`."""

    def __init__(self, max_brokers=MAX_BROKERS):
        #: live entries held at most (a heartbeat is open and names any broker): a heartbeat
        #: of a broker not yet known beyond it is dropped
        self.max_brokers = max_brokers
        self.broker_live_table = {}
        self._by_channel = {}      # channel -> set of identities
        self._by_addr = {}         # broker address -> {identity: None}

    def on_broker_heartbeat(self, header, channel, now_ms, known=False):
        """Record a heartbeat (``header``: a BrokerHeartbeatRequestHeader with a broker id);
        False when it names a new broker and the table is full (nothing recorded). A ``known``
        broker (one whose id the controller holds, itself bounded) is recorded anyway, so
        strangers filling the table cannot keep a real broker from being alive."""
        key = (header.cluster_name, header.broker_name, header.broker_id)
        if (not known and key not in self.broker_live_table
                and len(self.broker_live_table) >= self.max_brokers):
            return False
        epoch = -1 if header.epoch is None else header.epoch
        max_offset = -1 if header.max_offset is None else header.max_offset
        confirm = -1 if header.confirm_offset is None else header.confirm_offset
        timeout = (DEFAULT_BROKER_CHANNEL_EXPIRED_TIME if header.heartbeat_timeout_mills is None
                   else header.heartbeat_timeout_mills)
        priority = _INT_MAX if header.election_priority is None else header.election_priority
        prev = self.broker_live_table.get(key)
        if prev is None:
            self.broker_live_table[key] = BrokerLiveInfo(
                header.cluster_name, header.broker_name, header.broker_addr, header.broker_id,
                now_ms, timeout, channel, epoch, max_offset, confirm, priority)
            self._by_channel.setdefault(channel, set()).add(key)
            self._by_addr.setdefault(header.broker_addr, {})[key] = None
            return True
        prev.last_update_timestamp = now_ms
        prev.heartbeat_timeout_millis = timeout
        prev.election_priority = priority
        if epoch > prev.epoch or (epoch == prev.epoch and max_offset > prev.max_offset):
            prev.epoch, prev.max_offset, prev.confirm_offset = epoch, max_offset, confirm
        if prev.channel != channel:
            # reconnected: the old connection's close must not make it inactive (Java keeps the
            # first channel, so that close deposes a live master)
            self._unindex(key, prev.channel)
            prev.channel = channel
            self._by_channel.setdefault(channel, set()).add(key)
        return True

    def is_broker_active(self, cluster_name, broker_name, broker_id, now_ms):
        info = self.broker_live_table.get((cluster_name, broker_name, broker_id))
        return info is not None and info.last_update_timestamp + info.heartbeat_timeout_millis >= now_ms

    def alive_predicate(self, now_ms):
        """``alive(cluster, broker name, broker id)`` at ``now_ms`` (Java's BrokerValidPredicate)."""
        return lambda cluster, name, broker_id: self.is_broker_active(cluster, name, broker_id, now_ms)

    def broker_live_info(self, cluster_name, broker_name, broker_id):
        return self.broker_live_table.get((cluster_name, broker_name, broker_id))

    def _unindex(self, key, channel):
        keys = self._by_channel.get(channel)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_channel[channel]

    def _remove(self, key):
        info = self.broker_live_table.pop(key)
        self._unindex(key, info.channel)
        keys = self._by_addr.get(info.broker_addr)
        if keys is not None:
            keys.pop(key, None)
            if not keys:
                del self._by_addr[info.broker_addr]
        return info

    def live_at(self, broker_addr):
        """The entries whose heartbeats name ``broker_addr`` (the identity binding's index)."""
        table = self.broker_live_table
        return [table[key] for key in self._by_addr.get(broker_addr, ())]

    def on_broker_channel_close(self, channel):
        """The brokers that were on ``channel``, now inactive: ``[(cluster, name, id)]``."""
        keys = sorted(self._by_channel.get(channel, ()), key=repr)
        for key in keys:
            self._remove(key)
        return keys

    def scan_not_active_broker(self, now_ms):
        """Expire brokers past their timeout: ``([(cluster, name, id)], {channels to close})``."""
        expired = [key for key, info in self.broker_live_table.items()
                   if now_ms - info.last_update_timestamp > info.heartbeat_timeout_millis]
        channels = set()
        for key in expired:
            info = self._remove(key)
            if info.channel is not None:
                channels.add(info.channel)
        return expired, channels
