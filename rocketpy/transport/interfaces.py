"""Transport layer: the two interfaces between the Twisted transport and everything above it:
``IChannelEventListener`` (Java ``ChannelEventListener``: connect, close, exception, idle and
active of every channel) and ``IRequestProcessor`` (Java ``NettyRequestProcessor`` reduced to one
call per request, time passed in). Both speak ``rocketpy.namesrv.channel.Channel`` values, never
protocol objects, so route state can hold channels without holding sockets."""
from zope.interface import Interface

__all__ = ["IChannelEventListener", "IRequestProcessor"]


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
