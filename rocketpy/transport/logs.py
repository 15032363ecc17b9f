"""Transport layer: where rocketpy's own log events go (``--logLevel``).

Every rocketpy :class:`~twisted.logger.Logger` publishes to :data:`observer`, a
:class:`~twisted.logger.FilteringLogObserver` in front of Twisted's global publisher, whose
:data:`predicate` (a :class:`~twisted.logger.LogLevelFilterPredicate`) the service sets to the
configured level: the filter sits where the events come from, so whatever observers twistd or a
test attaches to the global publisher, before or after the start, see the same lines. It passes
everything until a level is set."""
from twisted.logger import (FilteringLogObserver, LogLevel, LogLevelFilterPredicate,
                            globalLogPublisher)

__all__ = ["observer", "predicate"]

#: the least severe level of rocketpy's events let through (debug: all of them)
predicate = LogLevelFilterPredicate(defaultLogLevel=LogLevel.debug)
#: what rocketpy's loggers publish to
observer = FilteringLogObserver(globalLogPublisher, [predicate])
