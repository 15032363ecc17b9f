"""``--logLevel`` through public API: rocketpy's loggers publish through one filtering observer
whose level predicate the service sets, so an observer attached after the start (the old code
wrapped only the observers present then, read from the publisher's private list) sees the same
lines, and the level is put back when the service stops."""
from twisted.internet.task import Clock
from twisted.logger import Logger, LogLevel, globalLogPublisher

from rocketpy.service.loglevel import LogLevelService
from rocketpy.transport import logs
from rocketpy.transport.protocol import RemotingServerProtocol


def test_a_level_holds_for_observers_attached_after_the_start_and_is_put_back():
    seen = []
    service = LogLevelService(LogLevel.warn, Clock())
    service.startService()
    try:
        globalLogPublisher.addObserver(seen.append)
        try:
            log = RemotingServerProtocol.log    # what writes channelActive / channelInactive
            log.debug("NETTY SERVER PIPELINE: channelActive, the remote address {a}", a="x")
            log.info("an info line")
            log.warn("a warning")
        finally:
            globalLogPublisher.removeObserver(seen.append)
    finally:
        service.stopService()
    assert [e["log_format"] for e in seen] == ["a warning"]
    assert logs.predicate.logLevelForNamespace("rocketpy.transport") is LogLevel.debug
    quiet = []
    globalLogPublisher.addObserver(quiet.append)
    try:
        Logger(observer=logs.observer).debug("after the stop")
    finally:
        globalLogPublisher.removeObserver(quiet.append)
    assert [e["log_format"] for e in quiet] == ["after the stop"]
