"""Service layer: one worker process of a server of several (``python -m
rocketpy.service.worker``, started by the route writer: :mod:`rocketpy.service.workers`, whose
docstring tells the whole of it).

It is handed the writer's listening socket (descriptor 4) and its end of the link (descriptor
3), parses the ``rocketnamesrv`` options the writer was started with (after ``--``), says hello,
applies the image and the records the writer sends (:class:`~rocketpy.namesrv.replica.Replica`),
acknowledging what it applied once per read, and once told the sequence number to serve from
and past it, accepts connections on the socket (``reactor.adoptStreamPort``) with the same
transport as the writer's: TLS sniffing, idle close, flow control, the answer cache and its
compiled hit path, its share of the limits. State-changing requests go to the writer
(:mod:`rocketpy.transport.forwarding`); every connection's open, close, idle and failure is
reported to it. It keeps no file: the writer alone writes the KV store, the config file and the
route snapshot.

Its log lines go to stdout as JSON (``{"level", "text"}``), one per line, which the writer logs
as its own. It stops on SIGTERM (gracefully: its connections are closed), and when the link
closes: the writer is gone."""
import argparse
import json
import os
import socket
import sys

from twisted.application.service import MultiService
from twisted.internet import defer, task
from twisted.logger import Logger, LogLevel, formatEvent, globalLogBeginner

from ..namesrv.acl import AclConfigError
from ..namesrv.kvconfig import KVConfigManager
from ..namesrv.replica import Replica, ReplicaError
from ..namesrv.routefile import ReadLimits
from ..transport import logs
from ..transport.answercache import AnswerCache
from ..transport.forwarding import WRITER, Forwarder, ForwardingProcessor
from ..transport.metrics import ServerMetrics
from ..transport.offload import DecodePool
from ..transport.remotechannels import first_channel_id
from ..transport.workerlink import Link
from .allocator import heap_trimmer, one_arena
from .memory import RouteMemoryService
from .server import RemotingServerService
from .startup import StartError

__all__ = ["WorkerService", "AdoptedPort", "main", "LINK_FD", "LISTEN_FD", "REPORT_SECONDS"]

#: the descriptors the writer hands a worker: its end of the link, the listening socket
LINK_FD, LISTEN_FD = 3, 4
#: seconds between two reports of the counters to the writer
REPORT_SECONDS = 1.0
_FAMILIES = {"inet": socket.AF_INET, "inet6": socket.AF_INET6, "unix": socket.AF_UNIX}


class AdoptedPort:
    """An ``IStreamServerEndpoint`` of a listening socket another process made
    (``reactor.adoptStreamPort``, public Twisted API)."""

    def __init__(self, reactor, fileno, family, description="the route writer's port"):
        self.reactor = reactor
        self.fileno = fileno
        self.family = family
        self.description = description

    def listen(self, factory):
        try:
            port = self.reactor.adoptStreamPort(self.fileno, self.family, factory)
        except Exception:
            return defer.fail()
        os.close(self.fileno)   # adopted as a copy
        return defer.succeed(port)

    def __repr__(self):
        return self.description


class _LinkEvents:
    """The channel event listener of a worker: each event goes to the writer."""

    def __init__(self, link):
        self.link = link

    def _send(self, event, remote_addr, channel):
        self.link.send("event", 0, event=event, channel=channel.channel_id, addr=remote_addr)

    def on_channel_connect(self, remote_addr, channel):
        self._send("connect", remote_addr, channel)

    def on_channel_close(self, remote_addr, channel):
        self._send("close", remote_addr, channel)

    def on_channel_exception(self, remote_addr, channel):
        self._send("exception", remote_addr, channel)

    def on_channel_idle(self, remote_addr, channel):
        self._send("idle", remote_addr, channel)

    def on_channel_active(self, remote_addr, channel):
        pass


class _One:
    def __init__(self, protocol):
        self.protocol = protocol

    def buildProtocol(self, addr):
        return self.protocol

    def doStart(self):
        pass

    def doStop(self):
        pass


class WorkerService(MultiService):
    """The worker's tree: the replica, its processor and transport, the link, the reports."""

    log = Logger(observer=logs.observer)

    def __init__(self, options, *, slot, epoch, family, startup_ms, reactor,
                 link_fd=LINK_FD, listen_fd=LISTEN_FD):
        from ..namesrv.processor import DefaultRequestProcessor
        from ..namesrv.route_info_manager import RouteInfoManager
        from .tap import (_limits, _process_services, _route_release, _route_size, _tls,
                          server_factory)
        super().__init__()
        self.options = options
        self.slot = slot
        self.reactor = reactor
        self.link_fd = link_fd
        policies = options["policies"]
        configuration = options["configuration"]
        configuration.store = None          # the writer alone writes the config file
        self.policies = policies
        self.route = RouteInfoManager(configuration.namesrv_config, policies)   # no notifier
        self.kv = KVConfigManager(configuration.namesrv_config.kv_config_path,
                                  limits=options.get("kv_limits"))   # memory only
        self.replica = Replica(self.route, self.kv, configuration)
        try:
            self.processor = DefaultRequestProcessor(
                self.route, self.kv, profile=policies, configuration=configuration,
                startup_ms=startup_ms)
        except AclConfigError as exc:
            raise StartError(str(exc)) from None
        self.link = Link(self, name="the link to the route writer")
        self.forwarder = Forwarder(self.link.send)
        self.metrics = ServerMetrics()
        self.cache = (AnswerCache(self.route.route_version, versions=self.route.snapshots)
                      if options["answerCache"] else None)
        self.decode_pool = DecodePool(reactor)
        self.factory = server_factory(
            options, reactor, ForwardingProcessor(self.processor),
            _LinkEvents(self.link), context=_tls(options["tls"]), limits=_limits(options),
            metrics=self.metrics, answer_cache=self.cache, decode_pool=self.decode_pool,
            write_pool=None, first_channel_id=first_channel_id(epoch))
        self.factory.pools[WRITER] = self.forwarder
        _process_services(options, reactor, self, self.factory)
        trim = not options.get("no-malloc-trim")   # the memory of departed brokers, as the writer
        if trim:
            one_arena()
        RouteMemoryService(_route_size(self.route), _route_release(
            self.processor, self.cache, heap_trimmer() if trim else None), reactor
        ).setServiceParent(self)
        #: fires once the replica has applied what the writer said to serve from
        self.serve = defer.Deferred()
        self.server = RemotingServerService(
            AdoptedPort(reactor, listen_fd, _FAMILIES[family]), self.factory, reactor,
            hold=self.serve)
        self.server.setServiceParent(self)
        self.applied = -1           # the last record applied (the image's, then each record's)
        self._acked = -1
        self._serve_at = None
        self._reports = task.LoopingCall(self._report)
        self._reports.clock = reactor
        #: the exit status (1 when the writer went away or the stream could not be applied)
        self.exit_status = 0

    # -- life ------------------------------------------------------------------------------

    def startService(self):
        self.decode_pool.start()
        super().startService()
        self.reactor.adoptStreamConnection(self.link_fd, socket.AF_UNIX, _One(self.link))
        os.close(self.link_fd)
        self.link.send("hello", 0, pid=os.getpid())
        self._reports.start(REPORT_SECONDS, now=False)

    def stopService(self):
        if self._reports.running:
            self._reports.stop()
        d = defer.maybeDeferred(super().stopService)
        d.addBoth(lambda result: (self.decode_pool.stop(), result)[1])
        return d

    def _stop(self, why, status):
        if self.exit_status == 0:
            self.exit_status = status
        self.log.info("{why}: stopping", why=why)
        if self.reactor.running:
            self.reactor.stop()

    def link_lost(self, reason):
        self.forwarder.stop()
        if self.running:
            self._stop("the link to the route writer closed (the writer is gone)", 1)

    # -- the stream ------------------------------------------------------------------------

    def message(self, kind, number, fields, body):
        handler = getattr(self, "_on_" + kind, None)
        if handler is None:
            self.log.error("the route writer sent a {kind} message: not a writer's", kind=kind)
            return
        try:
            handler(number, fields, body)
        except ReplicaError as exc:   # the replica would differ from the writer's tables
            self.log.critical("the route writer's {kind} {n} cannot be applied: {why}",
                              kind=kind, n=number, why=exc)
            self.link.close()
            self._stop("the replica cannot follow the writer", 1)

    def read_done(self):
        if self.applied > self._acked and self.link.connected:
            self._acked = self.applied
            self.link.send("ack", self.applied)

    def _on_image(self, seq, fields, body):
        self.replica.restore(body, ReadLimits.from_bounds(self.processor.route_bounds),
                             self.policies.name, self.policies.routes.live_key("", "")[0]
                             is not None)
        self.applied = seq
        self.log.info("the route writer's tables applied, at sequence number {seq}: {topics} "
                      "topics, {brokers} live brokers", seq=seq,
                      topics=len(self.route.topic_queue_table),
                      brokers=len(self.route.broker_live_table))

    def _on_record(self, seq, fields, body):
        self.replica.apply(fields.get("kind"), body)
        self.applied = seq
        self._maybe_serve()

    def _on_serve(self, seq, fields, body):
        self._serve_at = seq
        self._maybe_serve()

    def _maybe_serve(self):
        if self._serve_at is not None and self.applied >= self._serve_at and \
                not self.serve.called:
            self.serve.callback(None)
            self.link.send("serving", self.applied)

    def _on_answer(self, fid, fields, body):
        self.forwarder.answered(fid, fields, body)

    def _on_close(self, channel_id, fields, body):
        self.factory.close_channel(channel_id, fields.get("why", "closed by server"))

    def _report(self):
        cache = self.cache
        self.link.send("report", 0, json.dumps({
            "metrics": self.metrics.state(), "connections": len(self.factory.connections),
            "answerCacheEntries": None if cache is None else len(cache),
            "applied": self.applied}).encode("ascii"))


def _json_lines(out):
    """A log observer writing each event as one JSON line (the writer parses them)."""
    def observe(event):
        text = formatEvent(event)
        failure = event.get("log_failure")
        if failure is not None:
            text = f"{text}\n{failure.getTraceback()}"
        level = event.get("log_level", LogLevel.info)
        try:
            out.write(json.dumps({"level": level.name, "text": text}) + "\n")
            out.flush()
        except (OSError, ValueError):   # the writer's end is gone
            pass
    return observe


def main(argv=None):
    parser = argparse.ArgumentParser(prog="rocketpy.service.worker")
    parser.add_argument("--slot", type=int, required=True)
    parser.add_argument("--epoch", type=int, required=True)
    parser.add_argument("--family", choices=sorted(_FAMILIES), required=True)
    parser.add_argument("--startup-ms", type=int, required=True)
    parser.add_argument("options", nargs=argparse.REMAINDER)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    rest = args.options[1:] if args.options[:1] == ["--"] else args.options
    globalLogBeginner.beginLoggingTo([_json_lines(sys.stdout)], redirectStandardIO=False)
    from twisted.internet import reactor

    from .tap import Options
    options = Options()
    options.quiet = True
    options.parseOptions(rest)   # a StartError: its one line on stderr, status 1
    worker = WorkerService(options, slot=args.slot, epoch=args.epoch, family=args.family,
                           startup_ms=args.startup_ms, reactor=reactor)
    worker.startService()
    reactor.addSystemEventTrigger("before", "shutdown", worker.stopService)
    reactor.run()
    sys.stdout.flush()
    return worker.exit_status


if __name__ == "__main__":
    sys.exit(main())
