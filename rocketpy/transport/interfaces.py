"""Transport layer: the interfaces between the Twisted transport and everything above it:
``IChannelEventListener`` (Java ``ChannelEventListener``: connect, close, exception, idle and
active of every channel) and ``IRequestProcessor`` (Java ``NettyRequestProcessor`` reduced to one
call per request, time passed in). Both speak ``rocketpy.namesrv.channel.Channel`` values, never
protocol objects, so route state can hold channels without holding sockets. And, inside the
transport, ``IGovernedConnection``: all the load governor may ask of a connection."""
from zope.interface import Attribute, Interface

__all__ = ["IChannelEventListener", "IRequestProcessor", "IGovernedConnection"]


class IGovernedConnection(Interface):
    """A connection as :class:`~rocketpy.transport.limits.LoadGovernor` sees it: two methods
    (and its address for log events), so the governor never touches a connection's flags or
    its socket."""

    remote_addr = Attribute("``host:port`` of the peer, for the trouble log events")

    def unthrottle():
        """A new turn: this connection, queued when its turn's budget ran out, may be served
        and read again (unless something else still pauses it). A peer that has gone meanwhile
        is dropped instead of served what it left behind."""

    def is_closing():
        """True once the connection is closing or gone: the governor drops it from its queue."""


class IChannelEventListener(Interface):
    """Told about every server channel's life (Java ``ChannelEventListener``), on the reactor thread,
    with ``remote_addr`` as Java's ``parseChannelRemoteAddr`` writes it. Methods must not block and
    must be idempotent: one dead peer may be reported more than once (idle then close)."""

    def on_channel_connect(remote_addr, channel):
        """A peer connected (Netty ``channelActive`` on the server)."""

    def on_channel_close(remote_addr, channel):
        """The connection ended, for whatever reason (Netty ``channelInactive``)."""

    def on_channel_exception(remote_addr, channel):
        """The connection failed with an error (reset by peer, TLS failure); close follows."""

    def on_channel_idle(remote_addr, channel):
        """No traffic either way for ``serverChannelMaxIdleTimeSeconds``; the server closed it."""

    def on_channel_active(remote_addr, channel):
        """Java 5.x's ACTIVE event (fired by its remoting client); kept for interface parity."""


class IRequestProcessor(Interface):
    """Answers requests (Java ``NettyRequestProcessor.processRequest``)."""

    def process(request, channel, now_ms):
        """Return the response :class:`~rocketpy.remoting.RemotingCommand`, or ``None`` for no answer
        (oneway requests; Java 4.9's unknown codes); a Deferred of either is accepted too. The transport
        sets the opaque and the response flag, as Java's ``writeResponse`` does. With pools it calls
        ``process(..., offload=True)`` and runs a :class:`~rocketpy.namesrv.pending.Pending` answer's
        ``work`` on its lane's pool, then ``finish`` (or ``fail``) on the reactor thread."""
