"""Service layer: the listening remoting server (Java ``NettyRemotingServer.start``/``shutdown``
and the boot line of ``NamesrvStartup.createAndStartNamesrvController``).

Once listening (failing loudly, :mod:`rocketpy.transport.listening`) and told every other listener
is bound (:meth:`RemotingServerService.announce`), it logs Java's line, ``The Name Server boot
success. serializeType=JSON, address 0.0.0.0:9876``, with the address actually bound.
Stopping closes every connection (their close events still reach the housekeeping service);
the returned Deferred fires when they are gone, or after ``close_timeout``.

Held (``hold``, a Deferred: a warm restart loading its route snapshot), it binds the port at
once (a port in use still stops the start) but accepts no connection until ``hold`` fires: the
listening port, a push producer, is paused, the kernel's backlog keeps the connections that
arrive meanwhile, and the boot line waits too."""
from twisted.internet import defer
from twisted.internet.interfaces import IPushProducer

from ..transport.listening import ListeningService
from ..transport.protocol import format_address

__all__ = ["RemotingServerService", "BOOT_LINE_PREFIX"]

#: Java's boot line starts so; tests and scripts wait for it.
BOOT_LINE_PREFIX = "The Name Server boot success."


class RemotingServerService(ListeningService):
    """Listen with ``factory`` on ``endpoint`` (an ``IStreamServerEndpoint`` or its string)."""

    name = "remoting-server"

    def __init__(self, endpoint, factory, reactor, close_timeout=1.0, description=None,
                 hold=None, bound=None):
        """``bound(address)``: told the address once listening (the configuration's);
        ``hold``: a Deferred until which the port accepts nothing (the route snapshot's load)."""
        super().__init__(endpoint, factory, reactor, description)
        self.factory = factory
        self.close_timeout = close_timeout
        self.address = None
        self._announce = False
        self._bound = bound
        self._held = hold is not None and not hold.called
        if self._held:
            hold.addBoth(self._release)

    @property
    def accepting(self):
        """Listening and taking connections (not held)."""
        return self.port is not None and not self._held

    def _listening(self, port):
        self.port = port
        self.address = format_address(port.getHost())
        if self._bound is not None:
            self._bound(port.getHost())
        if self._held and IPushProducer.providedBy(port):
            port.pauseProducing()
        self.log.info("listening on {what} (TLS mode {mode}){held}",
                      what=self.description, mode=self.factory.tls_mode.value,
                      held=", accepting once the route snapshot is loaded" if self._held else "")
        if self._announce and not self._held:
            self._boot_line()
        return port

    def _release(self, result):
        self._held = False
        if self.port is not None:
            if IPushProducer.providedBy(self.port):
                self.port.resumeProducing()
            if self._announce:
                self._boot_line()
        return result

    def announce(self):
        """Log the boot line once listening: called when every other listener (``--web``) is
        bound too, so the line never precedes a failed start (nor a held port's opening)."""
        self._announce = True
        if self.address is not None and not self._held:
            self._boot_line()

    def _boot_line(self):
        self.log.info("{prefix} serializeType=JSON, address {address}",
                      prefix=BOOT_LINE_PREFIX, address=self.address)

    def stopService(self):
        super().stopService()
        stopping = []
        if self.port is not None:
            stopping.append(defer.maybeDeferred(self.port.stopListening))
            self.port = None
        closed = self.factory.close_all()
        timeout = self.reactor.callLater(self.close_timeout, self._abort_stragglers, closed)
        closed.addBoth(lambda r: timeout.cancel() if timeout.active() else None)
        stopping.append(closed)
        return defer.DeferredList(stopping, consumeErrors=True)

    def _abort_stragglers(self, closed):
        self.log.warn("{n} connections did not close in {t} s; aborting them",
                      n=len(self.factory.connections), t=self.close_timeout)
        for proto in list(self.factory.connections.values()):
            proto.transport.abortConnection()
        if not closed.called:
            closed.callback(None)
