"""Transport layer: where rocketpy's own log events go (``--logLevel``).

Every rocketpy :class:`~twisted.logger.Logger` publishes to :data:`observer`, a
:class:`~twisted.logger.FilteringLogObserver` in front of Twisted's global publisher, whose
:data:`predicate` (a :class:`~twisted.logger.LogLevelFilterPredicate`) the service sets to the
configured level: the filter sits where the events come from, so whatever observers twistd or a
test attaches to the global publisher, before or after the start, see the same lines. It passes
everything until a level is set.

The pure layers (``rocketpy.namesrv``, ``rocketpy.controller``: no Twisted) log through Python's
:mod:`logging`, under the ``rocketpy`` logger. :func:`bridge_stdlib_logging` (once, at start)
hands those records to :data:`observer` too, each at its level, so they reach twistd's log file
with the rest, filtered by the same ``--logLevel``: nothing forwarded them before, so their
warnings reached the log only as ``[stderr#error]`` lines (Python's last-resort handler) and
their info lines (an election, an inactive broker) nowhere."""
import logging

from twisted.logger import (FilteringLogObserver, LogLevel, LogLevelFilterPredicate,
                            globalLogPublisher)
from twisted.python.failure import Failure

__all__ = ["observer", "predicate", "bridge_stdlib_logging", "STDLIB_LOGGER"]

#: the least severe level of rocketpy's events let through (debug: all of them)
predicate = LogLevelFilterPredicate(defaultLogLevel=LogLevel.debug)
#: what rocketpy's loggers publish to
observer = FilteringLogObserver(globalLogPublisher, [predicate])

#: the stdlib logger the pure layers' loggers descend from
STDLIB_LOGGER = "rocketpy"
#: twisted.logger's levels as the stdlib numbers them
_STDLIB_LEVELS = {LogLevel.debug: logging.DEBUG, LogLevel.info: logging.INFO,
                  LogLevel.warn: logging.WARNING, LogLevel.error: logging.ERROR,
                  LogLevel.critical: logging.CRITICAL}


def _twisted_level(levelno):
    level = LogLevel.debug
    for candidate, number in _STDLIB_LEVELS.items():   # least severe first
        if levelno >= number:
            level = candidate
    return level


class _ToTwisted(logging.Handler):
    """A stdlib record as a twisted.logger event to :data:`observer`: its level, its logger's
    name as the namespace, its message, its exception as the event's failure (a traceback)."""

    def emit(self, record):
        try:
            text = record.getMessage()
        except Exception:   # a bad format: the stdlib's own report, not a lost line
            self.handleError(record)
            return
        event = {"log_level": _twisted_level(record.levelno), "log_namespace": record.name,
                 "log_source": None, "log_format": "{text}", "text": text,
                 "log_time": record.created}
        if record.exc_info and record.exc_info[1] is not None:
            exc_type, exc, tb = record.exc_info
            event["log_failure"] = Failure(exc, exc_type, tb)
        observer(event)


_BRIDGE = _ToTwisted()


def bridge_stdlib_logging(level):
    """Hand the ``rocketpy`` stdlib logger's records to :data:`observer` (the handler is
    added once however often this runs) and let through those at ``level`` (a
    :class:`~twisted.logger.LogLevel`) and above; the level it had before."""
    logger = logging.getLogger(STDLIB_LOGGER)
    if _BRIDGE not in logger.handlers:
        logger.addHandler(_BRIDGE)
    before = logger.level
    logger.setLevel(_STDLIB_LEVELS[level])
    return before
