"""Service layer: ``--logLevel``, the least severe log line written.

twistd writes every event it is given, debug ones included, and a busy NameServer's log was
mostly the per-connection debug lines (``channelActive``/``channelInactive``). twistd sets up its
observers (stdout, ``--logfile``, ``--syslog``) itself, after the service tree is made and before
it starts; so when the reactor runs the started tree, each of them is wrapped in a level
filter (a reactor that never runs, in tests, changes nothing), and unwrapped again once the tree
has stopped (after the reactor's shutdown when it runs: connections still close
while the tree stops, and their debug lines stay out)."""
from twisted.application.service import Service
from twisted.logger import (FilteringLogObserver, LogLevel, LogLevelFilterPredicate,
                            globalLogPublisher)

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
    """While running, the observers of ``publisher`` see only events at ``level`` or above."""

    name = "log-level"

    def __init__(self, level, reactor, publisher=globalLogPublisher):
        self.level = level
        self.reactor = reactor
        self.publisher = publisher
        self._wrapped = []

    def startService(self):
        super().startService()
        if self.level is not LogLevel.debug:   # once twistd's observers are all there
            self.reactor.callWhenRunning(self._wrap)

    def _wrap(self):
        if not self.running:
            return
        predicate = LogLevelFilterPredicate(defaultLogLevel=self.level)
        for observer in list(self.publisher._observers):   # twistd's: no public list of them
            wrapped = FilteringLogObserver(observer, [predicate])
            self.publisher.removeObserver(observer)
            self.publisher.addObserver(wrapped)
            self._wrapped.append((observer, wrapped))

    def stopService(self):
        super().stopService()
        if getattr(self.reactor, "running", False):
            self.reactor.addSystemEventTrigger("after", "shutdown", self._unwrap)
        else:
            self._unwrap()

    def _unwrap(self):
        for observer, wrapped in self._wrapped:
            self.publisher.removeObserver(wrapped)
            self.publisher.addObserver(observer)
        self._wrapped = []
