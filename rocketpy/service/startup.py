"""Service layer: how the process starts and stops (Java ``NamesrvStartup``: a bad setting prints
one line and exits 1; ``kill`` runs the shutdown hook and the process ends).

* :class:`StartError`: a ``SystemExit`` with one line (a bad value, an unreadable file, a port in
  use), so Python prints it and exits 1 -- not twistd's whole usage for a ``UsageError``, nor a
  traceback.
* :class:`GracefulExit`: SIGTERM stops every service in order and exits 0; twistd's own handler
  re-raises the signal at exit, so a clean stop looked like a crash (-15) to supervisors."""
import signal

from twisted.application.service import Service
from twisted.logger import Logger

from ..transport import logs

__all__ = ["StartError", "GracefulExit"]


class StartError(SystemExit):
    """A setting the server cannot start with: ``rocketnamesrv: <message>`` on stderr and
    exit status 1."""

    def __init__(self, message):
        super().__init__(f"rocketnamesrv: {message}")
        self.message = message


class GracefulExit(Service):
    """While running, SIGTERM stops the reactor without marking the exit as a signal's."""

    name = "graceful-exit"
    log = Logger(observer=logs.observer)

    def __init__(self, reactor):
        self._reactor = reactor
        self._previous = None
        self._stopping = False

    def startService(self):
        super().startService()
        # after the reactor has installed its own handlers, which this one replaces
        self._reactor.callWhenRunning(self._install)

    def _install(self):
        if self.running:
            self._previous = signal.signal(signal.SIGTERM, self._sigterm)

    def _sigterm(self, signum, frame):
        if self._stopping:
            return
        self._stopping = True
        self.log.info("Received SIGTERM, shutting down.")
        self._reactor.callFromThread(self._reactor.stop)

    def stopService(self):
        super().stopService()
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
