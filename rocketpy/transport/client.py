"""Transport layer: the NameServer's outbound oneway requests (Java ``NettyRemotingClient.invokeOneway``
as used by ``RouteInfoManager.notifyMinBrokerIdChanged``).

With ``notifyMinBrokerIdChanged`` on, a 5.x NameServer tells the brokers of a group that the
group's minimum brokerId changed (NOTIFY_MIN_BROKER_ID_CHANGE, 905, oneway). Java does it through
its own remoting *client*: it connects to each broker's ``brokerAddr`` (the broker's listen port,
not the connection the broker registered on), keeps that channel for later calls, and writes the
request flagged oneway with an opaque from its process-wide counter. This module does the same:
one cached connection per address, frames queued while it connects, failures logged and dropped
(a oneway call has nobody to report to).
"""
import dataclasses
import itertools

from twisted.internet.protocol import ClientFactory, Protocol
from twisted.logger import Logger

from ..remoting.command import FLAG_ONEWAY

__all__ = ["OnewayNotifier"]

#: Java ``NettyClientConfig.connectTimeoutMillis`` default.
CONNECT_TIMEOUT = 3.0


class _OnewayClientProtocol(Protocol):
    def __init__(self, notifier, addr):
        self.notifier = notifier
        self.addr = addr

    def dataReceived(self, data):
        pass  # oneway: a broker sends nothing back that we need

    def connectionMade(self):
        self.notifier._connected_ok(self, self.addr)

    def connectionLost(self, reason):
        self.notifier._lost(self.addr, self)


class _NotifyFactory(ClientFactory):
    noisy = False

    def __init__(self, notifier, addr):
        self.notifier = notifier
        self.addr = addr

    def buildProtocol(self, addr):
        proto = _OnewayClientProtocol(self.notifier, self.addr)
        proto.factory = self
        return proto

    def clientConnectionFailed(self, connector, reason):
        self.notifier._connect_failed(reason, self.addr)


class OnewayNotifier:
    """``notifier(broker_addrs, command)`` sends ``command`` oneway to every ``host:port``.

    :param reactor: provides ``IReactorTCP`` and ``IReactorTime``.
    """

    log = Logger()

    def __init__(self, reactor, connect_timeout=CONNECT_TIMEOUT):
        self._reactor = reactor
        self._timeout = connect_timeout
        self._opaque = itertools.count(1)
        self._connected = {}
        self._pending = {}
        self.sent = 0

    def __call__(self, broker_addrs, command):
        for addr in broker_addrs:
            self.send_oneway(addr, command)

    def send_oneway(self, addr, command):
        frame = dataclasses.replace(command, opaque=next(self._opaque),
                                    flag=command.flag | FLAG_ONEWAY).encode()
        proto = self._connected.get(addr)
        if proto is not None:
            proto.transport.write(frame)
            self.sent += 1
            return
        queue = self._pending.get(addr)
        if queue is not None:
            queue.append(frame)
            return
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            self.log.warn("cannot notify {addr}: not a host:port address", addr=addr)
            return
        self._pending[addr] = [frame]
        self._reactor.connectTCP(host.strip("[]"), int(port), _NotifyFactory(self, addr),
                                 timeout=self._timeout)

    def _connected_ok(self, proto, addr):
        frames = self._pending.pop(addr, [])
        self._connected[addr] = proto
        proto.transport.writeSequence(frames)
        self.sent += len(frames)

    def _connect_failed(self, failure, addr):
        dropped = self._pending.pop(addr, [])
        self.log.warn("invokeOneway to {addr} failed ({n} requests dropped): {why}",
                      addr=addr, n=len(dropped), why=failure.getErrorMessage())

    def _lost(self, addr, proto):
        if self._connected.get(addr) is proto:
            del self._connected[addr]

    def close(self):
        """Close every cached connection (NameServer shutdown)."""
        for proto in list(self._connected.values()):
            proto.transport.loseConnection()
        self._connected.clear()
