"""Service layer: ``--logLevel``, the least severe log line written.

twistd writes every event it is given, debug ones included, and a busy NameServer's log was
mostly the per-connection debug lines (``channelActive``/``channelInactive``). rocketpy's loggers
publish through one :class:`~twisted.logger.FilteringLogObserver`
(:mod:`rocketpy.transport.logs`); while the service runs, its
:class:`~twisted.logger.LogLevelFilterPredicate` lets through only ``--logLevel`` and above, to
every observer (twistd's stdout, ``--logfile``, ``--syslog``, or any added later), and the pure
layers' stdlib records are handed to the same filter at their levels
(:func:`~rocketpy.transport.logs.bridge_stdlib_logging`). The level is
put back once the tree has stopped (after the reactor's shutdown when it runs: connections still
close while the tree stops, and their debug lines stay out). Twisted's own events are not
filtered (it writes no per-connection lines)."""
import logging

from twisted.application.service import Service
from twisted.logger import LogLevel

from ..transport import logs

__all__ = ["LogLevelService", "log_level", "LOG_LEVELS"]

#: What ``--logLevel`` accepts, least severe first.
LOG_LEVELS = tuple(level.name for level in LogLevel.iterconstants())


def log_level(name):
    """The :class:`~twisted.logger.LogLevel` called ``name`` (any case); ``ValueError`` naming
    the choices otherwise."""
    text = (name or "").strip().lower()
    if text not in LOG_LEVELS:
        raise ValueError(f"--logLevel={name!r}: one of {', '.join(LOG_LEVELS)}")
    return LogLevel.levelWithName(text)


class LogLevelService(Service):
    """While running, rocketpy's events below ``level`` reach no observer.

    :param predicate: the :class:`~twisted.logger.LogLevelFilterPredicate` to set (default:
        the one rocketpy's loggers publish through).
    """

    name = "log-level"

    def __init__(self, level, reactor, predicate=None):
        self.level = level
        self.reactor = reactor
        self.predicate = logs.predicate if predicate is None else predicate
        self._before = None
        self._stdlib_before = logging.NOTSET

    def startService(self):
        super().startService()
        self._before = self.predicate.logLevelForNamespace("")
        self.predicate.setLogLevelForNamespace("", self.level)   # "": every namespace
        self._stdlib_before = logs.bridge_stdlib_logging(self.level)   # the pure layers' too

    def stopService(self):
        super().stopService()
        if getattr(self.reactor, "running", False):
            self.reactor.addSystemEventTrigger("after", "shutdown", self._restore)
        else:
            self._restore()

    def _restore(self):
        if self._before is not None and not self.running:
            self.predicate.setLogLevelForNamespace("", self._before)
            logging.getLogger(logs.STDLIB_LOGGER).setLevel(self._stdlib_before)
        self._before = None
