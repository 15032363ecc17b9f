"""Transport layer: the connections worker processes hold, as the route writer knows them (a
rocketpy addition; :mod:`rocketpy.service.workers`).

A worker reports each connection's open and its close, idle or failure as it happens (in its
link's order, so before and after anything forwarded from it); the writer keeps one
:class:`RemoteConnection` per open one. It stands where a protocol of the writer's own stands:
``remote_addr`` for broker identity binding and the warm restart's host of a live broker,
``peer_language``/``peer_version`` (of its latest forwarded request) and ``closing`` for the
status page, :meth:`RemoteChannels.close` for the liveness scan's close of an expired broker's
channel. Channel ids are unique across the processes: a worker started as the writer's
``epoch``-th numbers its channels from ``epoch << EPOCH_SHIFT`` (:func:`first_channel_id`), the
writer's own from 1, so an id also says which worker holds it."""
from collections.abc import Mapping

from ..namesrv.channel import Channel

__all__ = ["RemoteConnection", "RemoteChannels", "AllConnections", "first_channel_id",
           "EPOCH_SHIFT"]

#: channel ids of a worker's ``epoch``-th start begin at ``epoch << EPOCH_SHIFT`` (2^40
#: connections each, 2^23 starts: both far beyond a server's life, within a 64-bit id)
EPOCH_SHIFT = 40


def first_channel_id(epoch):
    """The first channel id of the process started as ``epoch`` (0: the writer)."""
    return (epoch << EPOCH_SHIFT) + 1


class RemoteConnection:
    """One connection a worker holds."""

    __slots__ = ("channel", "worker", "peer_language", "peer_version", "closing", "paused")

    def __init__(self, channel, worker):
        self.channel = channel
        self.worker = worker
        self.peer_language = None
        self.peer_version = None
        self.closing = False
        self.paused = False

    @property
    def remote_addr(self):
        return self.channel.remote_addr

    @property
    def channel_id(self):
        return self.channel.channel_id


class RemoteChannels:
    """``channel id -> RemoteConnection`` of every worker; ``close_remote(worker, channel_id,
    why)`` asks the worker holding one to close it."""

    def __init__(self, close_remote):
        self._close_remote = close_remote
        self._open = {}
        self._by_worker = {}        # worker -> {channel id: None}

    def __len__(self):
        return len(self._open)

    def __contains__(self, channel_id):
        return channel_id in self._open

    def __iter__(self):
        return iter(self._open)

    def get(self, channel_id, default=None):
        return self._open.get(channel_id, default)

    def values(self):
        return self._open.values()

    def opened(self, worker, channel_id, remote_addr):
        remote = self._open[channel_id] = RemoteConnection(Channel(channel_id, remote_addr),
                                                           worker)
        self._by_worker.setdefault(worker, {})[channel_id] = None
        return remote

    def closed(self, channel_id):
        """The connection is gone (None when it was not known)."""
        remote = self._open.pop(channel_id, None)
        if remote is not None:
            remote.closing = True
            held = self._by_worker.get(remote.worker)
            if held is not None:
                held.pop(channel_id, None)
        return remote

    def of_worker(self, worker):
        """The open connections ``worker`` holds."""
        return [self._open[cid] for cid in self._by_worker.get(worker, ())]

    def forget_worker(self, worker):
        """``worker`` is gone: its connections, each taken out (closed)."""
        gone = [self.closed(cid) for cid in list(self._by_worker.pop(worker, ()))]
        return [remote for remote in gone if remote is not None]

    def close(self, channel_id, why="closed by server"):
        """Ask the worker holding ``channel_id`` to close it; False when none does."""
        remote = self._open.get(channel_id)
        if remote is None:
            return False
        return bool(self._close_remote(remote.worker, channel_id, why))


class AllConnections(Mapping):
    """The writer's own connections (``{channel id: protocol}``) and the workers'
    (:class:`RemoteChannels`) as one read-only mapping, for what shows or reads every
    connection (the status page, the warm restart's hosts)."""

    def __init__(self, local, remote):
        self.local = local
        self.remote = remote

    def __getitem__(self, channel_id):
        found = self.local.get(channel_id)
        if found is None:
            found = self.remote.get(channel_id)
            if found is None:
                raise KeyError(channel_id)
        return found

    def get(self, channel_id, default=None):
        found = self.local.get(channel_id)
        return found if found is not None else self.remote.get(channel_id, default)

    def __len__(self):
        return len(self.local) + len(self.remote)

    def __iter__(self):
        yield from self.local
        yield from self.remote
