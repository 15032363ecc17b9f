"""Service layer: a service that listens on a Twisted endpoint and fails loudly.

Shared by the remoting server and the web endpoint: the endpoint may be given as a string
(``tcp:9876``, ``ssl:...``, ``unix:...``), and a listen that fails at once (address in use, bad
interface) raises from ``startService`` so ``twistd`` exits instead of running a server nobody can
reach -- with one line saying why (:class:`~rocketpy.service.startup.StartError`), not a
traceback. Subclasses say what to do once listening (``_listening``) and how to stop.
"""
from twisted.application.service import Service
from twisted.internet.endpoints import serverFromString
from twisted.logger import Logger

from .startup import StartError

__all__ = ["ListeningService"]


class ListeningService(Service):
    """Listen with ``factory`` on ``endpoint`` (an ``IStreamServerEndpoint`` or its string)."""

    log = Logger()

    def __init__(self, endpoint, factory, reactor, description=None):
        if isinstance(endpoint, str):
            description = description or endpoint
            endpoint = serverFromString(reactor, endpoint)
        self.endpoint = endpoint
        self.description = description or repr(endpoint)
        self.listen_factory = factory
        self.reactor = reactor
        self.port = None

    def startService(self):
        super().startService()
        failures = []
        d = self.endpoint.listen(self.listen_factory)
        d.addCallbacks(self._listening, failures.append)
        if failures:  # synchronous failure: stop twistd, with one line (no traceback)
            self.running = 0
            raise StartError(f"cannot listen on {self.description}: "
                             f"{failures[0].getErrorMessage()}")
        d.addErrback(lambda f: self.log.failure("cannot listen on {what}", f, what=self.description))

    def _listening(self, port):
        self.port = port
        return port
