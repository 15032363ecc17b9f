"""Test helper: drive :class:`rocketpy.transport.client.RemotingClient` without sockets.

The client connects through a ``MemoryReactorClock``; :func:`accept` takes its latest
``connectTCP`` and joins it to a :class:`Peer` (the far end: a NameServer, a broker) with
``twisted.test.iosim``, so bytes move only when the returned pump is pumped.
"""
from twisted.internet.error import ConnectionRefusedError
from twisted.python.failure import Failure
from twisted.test import iosim
from twisted.internet.protocol import Protocol

from rocketpy.remoting import FrameSplitter, decode_frame

__all__ = ["Peer", "accept", "refuse"]


class Peer(Protocol):
    """The far end: records every frame it gets and answers when told to.

    ``auto`` (a callable ``request -> response or None``) answers each request as it comes.
    """

    def __init__(self, auto=None):
        self.splitter = FrameSplitter()
        self.frames = []
        self.requests = []
        self.auto = auto

    def dataReceived(self, data):
        for frame in self.splitter.feed(data):
            self.frames.append(frame)
            request = decode_frame(frame)
            self.requests.append(request)
            if self.auto is not None:
                response = self.auto(request)
                if response is not None:
                    self.answer(request, response)

    def answer(self, request, response):
        """Write ``response`` (a RemotingCommand) as the answer to ``request``."""
        response.opaque = request.opaque
        response.flag |= 1
        self.transport.write(response.encode())


def accept(reactor, peer=None, index=-1):
    """Connect the client's ``connectTCP`` number ``index`` to ``peer``; ``(peer, pump)``."""
    host, port, factory, timeout, _ = reactor.tcpClients[index]
    peer = peer if peer is not None else Peer()
    client = factory.buildProtocol(None)
    pump = iosim.connect(peer, iosim.makeFakeServer(peer), client, iosim.makeFakeClient(client),
                         greet=False)
    pump.flush()
    return peer, pump


def refuse(reactor, index=-1):
    """Fail the client's ``connectTCP`` number ``index`` as a refused connection."""
    factory = reactor.tcpClients[index][2]
    factory.clientConnectionFailed(None, Failure(ConnectionRefusedError("Connection refused")))


def drive(reactor, d, peer_for, rounds=10000):
    """Serve every connection the client opens (``peer_for(host, port)``: a Peer, or None to
    refuse it) and move bytes until ``d`` has fired and nothing moves any more."""
    accepted = 0
    pumps = []
    for _ in range(rounds):
        moved = False
        while accepted < len(reactor.tcpClients):
            host, port = reactor.tcpClients[accepted][:2]
            peer = peer_for(host, port)
            if peer is None:
                refuse(reactor, accepted)
            else:
                pumps.append(accept(reactor, peer, accepted)[1])
            accepted += 1
            moved = True
        for pump in pumps:
            moved = pump.pump() or moved
        if d.called and not moved:
            return
    raise AssertionError("the client is still talking after %d rounds" % rounds)
