"""Transport layer: the server factory (Java ``NettyRemotingServer`` minus the thread pools).

It holds what every connection shares: the request processor, the channel event listener, the
frame limit, the idle time, the TLS mode and context, the socket options of
``NettyServerConfig``, and the table of open channels. The table lets services that only know a
channel id (the liveness scan) close that channel, and lets shutdown close them all.
"""
import itertools

from twisted.internet.defer import Deferred
from twisted.internet.protocol import ServerFactory
from twisted.logger import Logger

from ..namesrv.channel import Channel
from ..namesrv.pending import CPU, DISK
from ..remoting.frame import DEFAULT_MAX_FRAME_LENGTH
from .idle import IdleSchedule
from .limits import LoadGovernor, RefusedConnection
from .metrics import ServerMetrics
from .protocol import RemotingServerProtocol, format_address
from .tls import TlsMode
from . import logs

__all__ = ["RemotingServerFactory"]


class RemotingServerFactory(ServerFactory):
    """Builds :class:`RemotingServerProtocol` connections sharing one processor and listener.

    :param processor: an :class:`~rocketpy.transport.interfaces.IRequestProcessor`.
    :param listener: an :class:`~rocketpy.transport.interfaces.IChannelEventListener` or None.
    :param idle_seconds: ``serverChannelMaxIdleTimeSeconds``; 0 turns idle closing off.
    :param send_buffer, receive_buffer: ``serverSocketSndBufSize``/``RcvBufSize`` (0 = OS default).
    :param write_high_water_mark: ``writeBufferHighWaterMark``: bytes an unread peer may have
        buffered before its connection stops being served (0 = Twisted's 64 KiB).
    :param limits: a :class:`~rocketpy.transport.limits.ServerLimits`; None = the defaults.
    :param decode_pool, write_pool: the :mod:`~rocketpy.transport.offload` pools of lanes ``cpu``
        and ``disk``; None = on the reactor thread.
    :param first_channel_id: the id of the first connection (a worker process numbers its own
        apart from every other process's: :mod:`rocketpy.transport.remotechannels`)."""

    protocol = RemotingServerProtocol
    noisy = False
    log = Logger(observer=logs.observer)

    def __init__(self, processor, listener=None, *, clock, max_frame_length=DEFAULT_MAX_FRAME_LENGTH,
                 idle_seconds=120, tls_mode=TlsMode.PERMISSIVE, tls_context_factory=None,
                 send_buffer=0, receive_buffer=0, write_high_water_mark=0, answer_cache=None,
                 metrics=None, limits=None, decode_pool=None, write_pool=None,
                 first_channel_id=1):
        self.processor = processor
        self.listener = listener
        self.clock = clock
        self.max_frame_length = max_frame_length
        self.idle_seconds = idle_seconds
        #: the idle checks of every connection, on one reactor call
        self.idle_schedule = IdleSchedule(clock)
        self.tls_mode = tls_mode
        self.tls_context_factory = tls_context_factory
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.write_high_water_mark = write_high_water_mark
        self.answer_cache = answer_cache
        self.decode_pool = decode_pool
        self.write_pool = write_pool
        #: lane -> pool, for the Pending work the processor hands back
        self.pools = {lane: pool for lane, pool in ((CPU, decode_pool), (DISK, write_pool))
                      if pool is not None}
        self.metrics = metrics if metrics is not None else ServerMetrics()
        self.governor = LoadGovernor(limits, clock, getattr(processor, "overload_response", None),
                                     self.metrics)
        self.connections = {}
        #: the connections worker processes hold (a
        #: :class:`~rocketpy.transport.remotechannels.RemoteChannels`), or None
        self.remote = None
        self._ids = itertools.count(first_channel_id)
        self._all_closed = []

    def buildProtocol(self, addr):
        if not self.governor.admit_connection(len(self.connections), format_address(addr)):
            return RefusedConnection()  # cut at once (serverMaxConnections)
        return self.protocol(self)

    # -- channel table --------------------------------------------------------------------

    def open_channel(self, proto):
        channel = Channel(next(self._ids), proto.remote_addr)
        self.connections[channel.channel_id] = proto
        return channel

    def close_channel_record(self, proto):
        if proto.channel is not None:
            self.connections.pop(proto.channel.channel_id, None)
        self.governor.forget(proto)
        if not self.connections and self._all_closed:
            waiting, self._all_closed = self._all_closed, []
            for d in waiting:
                if not d.called:
                    d.callback(None)

    def close_channel(self, channel_id, why="closed by server"):
        """Close the connection of ``channel_id`` (a worker's too); False when it is already
        gone."""
        proto = self.connections.get(channel_id)
        if proto is None:
            return self.remote is not None and self.remote.close(channel_id, why)
        proto.close(why)
        return True

    def channel(self, channel_id):
        """The connection of ``channel_id``: a protocol of this process, a worker's
        :class:`~rocketpy.transport.remotechannels.RemoteConnection`, or None."""
        proto = self.connections.get(channel_id)
        if proto is None and self.remote is not None:
            return self.remote.get(channel_id)
        return proto

    def startFactory(self):
        """Listening (again): the idle checks of connections still open are armed."""
        self.idle_schedule.start()

    def stopFactory(self):
        """The last listening port has stopped: no idle check is left on the reactor."""
        self.idle_schedule.stop()

    def close_all(self, why="server shutdown"):
        """Close every connection; the Deferred fires once they are all gone."""
        d = Deferred()
        if not self.connections:
            d.callback(None)
            return d
        self._all_closed.append(d)
        for proto in list(self.connections.values()):
            proto.close(why)
        return d

    def fire(self, event, proto):
        """Tell the listener ``event`` about ``proto``'s channel; a listener bug is only logged."""
        listener = self.listener
        if listener is None:
            return
        try:
            getattr(listener, event)(proto.remote_addr, proto.channel)
        except Exception:
            self.log.failure("channel event listener failed on {event} of {addr}",
                             event=event, addr=proto.remote_addr)
