"""Transport layer: a service that listens on a Twisted endpoint (a string such as ``tcp:9876``,
``ssl:...``, ``unix:...``) and fails loudly, for the remoting server and the web endpoint (both
above, so it lives here): a listen that fails at once raises :class:`StartError` from
``startService``, so ``twistd`` exits with one line saying why instead of running a server nobody
can reach. Subclasses say what to do once listening (``_listening``) and how to stop."""
from twisted.application.service import Service
from twisted.internet.endpoints import serverFromString
from twisted.logger import Logger

from . import logs

__all__ = ["ListeningService", "StartError"]


class StartError(SystemExit):
    """A setting the server cannot start with: ``rocketnamesrv: <message>`` on stderr and
    exit status 1 (:mod:`rocketpy.service.startup` says how the process starts and stops)."""

    def __init__(self, message):
        super().__init__(f"rocketnamesrv: {message}")
        self.message = message

    @classmethod
    def of_usage(cls, error):
        """A bad option (a ``UsageError``): its line, pointing to the help."""
        return cls(f"{error} (rocketnamesrv --help lists the options)")


class ListeningService(Service):
    """Listen with ``factory`` on ``endpoint`` (an ``IStreamServerEndpoint`` or its string)."""

    log = Logger(observer=logs.observer)

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
