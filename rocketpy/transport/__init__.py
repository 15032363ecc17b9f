"""rocketpy.transport: the Twisted side of RocketMQ remoting (Java ``NettyRemotingServer``).

``RemotingServerFactory`` + ``RemotingServerProtocol`` serve remoting frames to an
``IRequestProcessor`` and report channel events to an ``IChannelEventListener``;
``RemotingClient`` is the client half (Java ``NettyRemotingClient``); ``OnewayNotifier`` sends the
NameServer's few outbound oneway requests through it.
"""
from .client import OnewayNotifier, RemotingClient
from .factory import RemotingServerFactory
from .interfaces import IChannelEventListener, IRequestProcessor
from .protocol import RemotingServerProtocol
from .tls import TlsMode, TlsSettings, TlsUnavailableError, build_context_factory

__all__ = ["RemotingServerFactory", "RemotingServerProtocol", "IChannelEventListener",
           "IRequestProcessor", "OnewayNotifier", "RemotingClient", "TlsMode", "TlsSettings", "TlsUnavailableError",
           "build_context_factory"]
