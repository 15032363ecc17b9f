"""Service layer: how the process starts and stops (Java ``NamesrvStartup``: a bad setting prints
one line and exits 1; ``kill`` runs the shutdown hook and the process ends).

* :class:`~rocketpy.transport.listening.StartError`: a ``SystemExit`` with one line (a bad value,
  an unreadable file, a port in use), so Python prints it and exits 1 -- not twistd's whole usage
  for a ``UsageError``, nor a traceback.
* :class:`GracefulExit`: SIGTERM stops every service in order and exits 0; twistd's own handler
  re-raises the signal at exit, so a clean stop looked like a crash (-15) to supervisors.
* :class:`DaemonLaunch` and :class:`ReportingService`: as a daemon (``twistd`` without ``-n``)
  a start that fails after the fork -- a port in use -- is that same one line on the launching
  ``twistd``'s stderr, and it exits 1, with no pidfile left."""
import os
import signal

from twisted.application.service import MultiService, Service
from twisted.logger import Logger

from ..transport import logs
from ..transport.listening import StartError

__all__ = ["StartError", "GracefulExit", "DaemonLaunch", "ReportingService"]


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


def _launch_failed(signum, frame):
    """The launching twistd's SIGUSR2: the daemon has printed why it did not start."""
    os._exit(1)


class DaemonLaunch:
    """What a daemon's start tells the ``twistd`` that launched it, when that start fails.

    twistd forks the daemon and waits on a status pipe the daemon writes once its services have
    started. A failure it catches is two lines there (``An error has occurred: ...``), and
    a :class:`StartError` it does not catch (a ``SystemExit``) is nothing at all: the launcher
    keeps the pipe's write end open itself, so it waited forever, the daemon gone, its pidfile
    left behind, the reason only in the log. Made in ``makeService``, which runs in the
    launcher before the fork: it keeps a copy of the launcher's stderr and makes SIGUSR2 end
    the launcher with status 1. In the daemon :meth:`failed` writes the one line to that
    stderr, removes the pidfile and signals the launcher; :meth:`started` lets both go (the
    launcher then exits 0, as twistd has it)."""

    def __init__(self, pidfile):
        self.launcher = os.getpid()
        self.pidfile = pidfile
        self._stderr = os.dup(2)
        signal.signal(signal.SIGUSR2, _launch_failed)

    @classmethod
    def of(cls, options):
        """The launch of ``options`` (rocketnamesrv's) when twistd is to daemonize, else None."""
        server = getattr(options, "parent", None)
        if server is None or server.get("nodaemon", True):
            return None
        return cls(server.get("pidfile"))

    def _done(self):
        if self._stderr is not None:
            signal.signal(signal.SIGUSR2, signal.SIG_DFL)
            os.close(self._stderr)
            self._stderr = None

    def started(self):
        self._done()

    def failed(self, message):
        if self._stderr is None:
            return
        try:
            os.write(self._stderr, f"{message}\n".encode("utf-8", "backslashreplace"))
        except OSError:
            pass
        self._done()
        if self.pidfile:
            try:
                with open(self.pidfile) as f:
                    ours = f.read().strip() == str(os.getpid())
                if ours:
                    os.remove(self.pidfile)
            except OSError:
                pass
        try:
            os.kill(self.launcher, signal.SIGUSR2)
        except OSError:   # gone already, or another user's after --uid
            pass


class ReportingService(MultiService):
    """The service tree's top: as a daemon, a :class:`StartError` from a service's start is
    logged and handed to the :class:`DaemonLaunch` before it ends the process."""

    log = Logger(observer=logs.observer)

    def __init__(self, launch=None):
        super().__init__()
        self.launch = launch

    def startService(self):
        try:
            super().startService()
        except StartError as exc:
            if self.launch is None:   # in the foreground: the line on stderr is the log's too
                raise
            self.log.critical("{message}", message=str(exc))   # the daemon's log file
            self.launch.failed(str(exc))
            raise SystemExit(1) from None   # the line is out (and logged): not again as stderr
        if self.launch is not None:
            self.launch.started()
