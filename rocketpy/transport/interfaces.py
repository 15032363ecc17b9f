"""Transport layer: the two interfaces between the Twisted transport and everything above it:
``IChannelEventListener`` (Java ``ChannelEventListener``: connect, close, exception, idle and
active of every channel) and ``IRequestProcessor`` (Java ``NettyRequestProcessor`` reduced to one
call per request, time passed in). Both speak ``rocketpy.namesrv.channel.Channel`` values, never
protocol objects, so route state can hold channels without holding sockets."""
from zope.interface import Interface

__all__ = ["IChannelEventListener", "IRequestProcessor"]


class IChannelEventListener(Interface):
    """Told about every server channel's life (Java ``ChannelEventListener``).

    ``remote_addr`` is ``"host:port"`` as Java's ``RemotingHelper.parseChannelRemoteAddr`` writes
    it. Methods are called on the reactor thread and must not block. One dead peer can be
    reported more than once (idle then close, expiry then close): listeners must be idempotent.
    """

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
        """Return the response :class:`~rocketpy.remoting.RemotingCommand`, or ``None``.

        ``None`` means no answer (oneway requests; Java 4.9's unknown codes). The transport copies
        the request's opaque into the response and sets the response flag, as Java's
        ``writeResponse`` does. A :class:`~twisted.internet.defer.Deferred` of the same is also
        accepted, for work that must leave the reactor thread. With pools (the decode pool, the
        writer) the transport calls ``process(request, channel, now_ms, offload=True)``, and a
        :class:`~rocketpy.namesrv.pending.Pending` answer has its ``work`` run on the pool of
        its ``lane`` and its ``finish`` -- or ``fail``, when the work raised -- give the answer
        on the reactor thread.
        """
