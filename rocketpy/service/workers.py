"""Service layer: worker processes, the route writer's side (``serverWorkerProcesses=N``,
``--workers N``; a rocketpy addition: Java's NameServer serves from one JVM's thread pools,
rocketpy's one reactor from one core).

With N > 1 the server is N processes accepting on the one listening port: this one, the route
writer (``twistd``'s, the only ``RouteInfoManager.apply``, the KV file, the config file, the
controller, the web endpoint, the warm restart), and N - 1 workers it starts with
``reactor.spawnProcess`` (:mod:`rocketpy.service.worker`), each handed the listening socket and
one end of a socket pair, its link (:mod:`rocketpy.transport.workerlink`). Every process
answers the connections it accepted; a worker from a replica of the writer's state:

* **The stream.** Every change of the writer's tables, KV table and settings is a record
  (:mod:`rocketpy.namesrv.replica`) with the next sequence number, sent to every worker
  (:class:`Replicator`), which applies it and acknowledges it.
* **A worker's start.** It says hello; the writer takes an image of its state (the route tables
  as the warm restart takes them, in steps between which the reactor turns, encoded on a
  thread), at sequence number S, and sends it, then the records after S. Once the worker has
  acknowledged S it counts in the barrier and is told the sequence number J of that moment; it
  accepts connections once it has applied J (every answer given before J is in what it
  applied, every one after waits for it).
* **Writes.** A request whose handler declares ``writes`` goes to the writer, and its answer
  waits until every joined worker has applied the stream that far
  (:mod:`rocketpy.transport.forwarding`).
* **Channel events.** A worker reports each connection's open and close, failure or idle; the
  writer's housekeeping turns them into unregistrations as for its own
  (:mod:`rocketpy.transport.remotechannels`); the liveness scan's close of an expired broker
  goes to the worker holding its connection.
* **Supervision.** A worker that exits (``kill -9`` included) takes only its connections with
  it: the writer closes their channels (their brokers unregister as on a close) and starts it
  again (after :data:`RESTART_DELAY`, doubled while it keeps dying young, up to
  :data:`MAX_RESTART_DELAY`); one whose op stream backlog passes :data:`MAX_BACKLOG_BYTES`
  is killed and started again. When the writer ends, however it ends, its links close and the
  workers stop. SIGTERM to the writer stops the workers (SIGTERM; SIGKILL after
  :data:`STOP_SECONDS`), then itself. A worker that exits before it first serves stops the
  start.
* **Logs and counters.** A worker's log lines are the writer's (``worker N: ...``); it reports
  its counters every second, shown with a ``worker`` label on ``/metrics`` and on the status
  page (:meth:`WorkerSupervisor.status`).

Server-wide bounds (``serverMaxConnections``, ``serverMaxWaitingRequests``,
``serverMaxPendingFrameBytes``) are shared: each process gets 1/N (:func:`shared_limits`), so
together they never pass the bound."""
import json
import os
import signal
import socket
import sys
import time
from collections import deque
from dataclasses import replace
from functools import partial

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.address import IPv4Address, IPv6Address, UNIXAddress
from twisted.internet.error import ProcessExitedAlready
from twisted.internet.interfaces import IReactorThreads
from twisted.internet.protocol import Factory, ProcessProtocol
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger, LogLevel

from ..namesrv.replica import Feed, encode_image
from ..transport import logs
from ..transport.forwarding import REPLICAS, BarrierProcessor, ForwardedRequests
from ..transport.metrics import ServerMetrics
from ..transport.remotechannels import AllConnections, RemoteChannels
from ..transport.workerlink import Link
from .startup import StartError

__all__ = ["WorkerSupervisor", "Replicator", "attach_workers", "worker_processes",
           "shared_limits", "WORKER_PROCESSES_KEY", "WORKER_KEYS", "MAX_WORKERS",
           "RESTART_DELAY", "MAX_RESTART_DELAY", "MAX_BACKLOG_BYTES", "STOP_SECONDS"]

WORKER_PROCESSES_KEY = "serverWorkerProcesses"
#: ``(property key, attribute, default, meaning)`` (the configuration page's table)
WORKER_KEYS = (
    (WORKER_PROCESSES_KEY, "worker_processes", 1,
     "processes accepting on the listening port: one route writer and N - 1 workers, each "
     "answering from a replica of its tables (1: one process, as before); also --workers"),
)
MAX_WORKERS = 64
#: seconds before a worker that exited is started again, doubled while it keeps exiting
#: within :data:`YOUNG_SECONDS` of its start, up to :data:`MAX_RESTART_DELAY`
RESTART_DELAY = 0.5
MAX_RESTART_DELAY = 30.0
YOUNG_SECONDS = 10.0
#: bytes of records a worker may leave unacknowledged before it is restarted
MAX_BACKLOG_BYTES = 512 << 20
#: seconds the workers get to stop after SIGTERM before SIGKILL
STOP_SECONDS = 10.0

_FAMILIES = ((IPv4Address, "inet"), (IPv6Address, "inet6"), (UNIXAddress, "unix"))
_LEVELS = {level.name: level for level in LogLevel.iterconstants()}


def worker_processes(props, option=None):
    """The process count: ``--workers`` (``option``) or ``serverWorkerProcesses``, 1 without
    either; ValueError naming the bad one."""
    text, what = (option, "--workers") if option is not None else (
        props.get(WORKER_PROCESSES_KEY), WORKER_PROCESSES_KEY)
    if text is None or not str(text).strip():
        return 1
    try:
        count = int(str(text).strip())
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_WORKERS:
        raise ValueError(f"{what}={text!r}: expected a number of processes 1..{MAX_WORKERS}")
    return count


def shared_limits(limits, processes):
    """``limits`` for one of ``processes`` processes: each server-wide bound divided among them
    (at least 1 each; 0, no bound, stays 0)."""
    if processes <= 1:
        return limits

    def share(value):
        return 0 if not value else max(1, value // processes)
    return replace(limits, max_connections=share(limits.max_connections),
                   max_waiting_requests=share(limits.max_waiting_requests),
                   max_pending_frame_bytes=share(limits.max_pending_frame_bytes))


def _in_thread(reactor, work, *args):
    if IReactorThreads.providedBy(reactor):
        return deferToThreadPool(reactor, reactor.getThreadPool(), work, *args)
    return defer.maybeDeferred(work, *args)


class Replicator:
    """The writer's stream: each record gets the next sequence number and goes to every
    session that streams; :attr:`barrier` holds the answers that wait for the workers, up to
    the last *visible* record (:meth:`sequence`): one a request may read back."""

    def __init__(self, barrier):
        self.seq = 0
        self.visible = 0
        self.barrier = barrier
        self.sessions = {}          # epoch -> WorkerSession
        #: records published and bytes sent, since start
        self.records = 0
        self.sent_bytes = 0

    def sequence(self):
        """Where an answer given now waits for: the last record a request may read back."""
        return self.visible

    def publish(self, kind, payload, visible=True):
        self.seq += 1
        self.records += 1
        if visible:
            self.visible = self.seq
        for session in list(self.sessions.values()):
            session.record(self.seq, kind, payload)


class WorkerSession:
    """One start of one worker: its link, its process, where it is in the stream.

    States: ``starting`` (spawned), ``imaging`` (its image is being taken and encoded; records
    after the image's are kept), ``booting`` (image and records sent, not yet applied),
    ``joined`` (counts in the barrier, told when to serve), ``serving``, ``gone``."""

    log = Logger(observer=logs.observer)

    def __init__(self, supervisor, slot, epoch):
        self.supervisor = supervisor
        self.slot = slot
        self.epoch = epoch
        self.state = "starting"
        self.link = None
        self.process = None
        self.pid = None
        self.started = time.monotonic()
        self.image_seq = None
        self.acked = -1
        self.kept = []              # (seq, kind, payload) while imaging
        self.unacked = deque()      # (seq, bytes) sent, not acknowledged
        self.unacked_bytes = 0
        self.report = {}
        self.reports = 0            # reports received (one after a moment has all before it)
        self.metrics = ServerMetrics()
        self.served = False

    def __repr__(self):
        return f"worker {self.slot}"

    @property
    def alive(self):
        return self.state != "gone"

    # -- the stream ----------------------------------------------------------------------

    def record(self, seq, kind, payload):
        if self.state == "imaging":
            if self.image_seq is not None:   # after the image: kept until it is sent
                self.kept.append((seq, kind, payload))
                self._count(seq, len(payload))
        elif self.state in ("booting", "joined", "serving"):
            self._send(seq, kind, payload)

    def _send(self, seq, kind, payload):
        if self.link.send("record", seq, payload, kind=kind):
            self.supervisor.replicator.sent_bytes += len(payload)
            self._count(seq, len(payload))

    def _count(self, seq, size):
        self.unacked.append((seq, size))
        self.unacked_bytes += size
        if self.unacked_bytes > MAX_BACKLOG_BYTES and self.state != "gone":
            self.supervisor.behind(self)

    def imaged(self, seq, image):
        """The image (at ``seq``) is encoded: send it and what came after it."""
        if self.state != "imaging":
            return
        self.link.send("image", seq, image)
        self.state = "booting"
        kept, self.kept = self.kept, []
        for entry in kept:
            self.link.send("record", entry[0], entry[2], kind=entry[1])

    def message(self, kind, number, fields, body):
        handler = getattr(self, "_on_" + kind, None)
        if handler is None:
            self.log.error("{worker} sent a {kind} message: not a worker's", worker=self,
                           kind=kind)
            return
        handler(number, fields, body)

    def read_done(self):
        pass

    def _on_hello(self, number, fields, body):
        self.pid = int(fields.get("pid", "0")) or self.pid
        self.supervisor.bootstrap(self)

    def _on_ack(self, seq, fields, body):
        if seq <= self.acked:
            return
        self.acked = seq
        unacked = self.unacked
        while unacked and unacked[0][0] <= seq:
            self.unacked_bytes -= unacked.popleft()[1]
        barrier = self.supervisor.replicator.barrier
        if self.state == "booting" and seq >= self.image_seq:
            barrier.join(self, seq)
            self.state = "joined"
            self.link.send("serve", self.supervisor.replicator.seq)
        else:
            barrier.acked(self, seq)

    def _on_serving(self, number, fields, body):
        if self.state == "joined":
            self.state = "serving"
            self.served = True
            self.supervisor.serving(self)

    def _on_forward(self, fid, fields, body):
        self.supervisor.forwarded.received(self, fid, fields, body)

    def _on_event(self, number, fields, body):
        self.supervisor.event(self, fields.get("event"), int(fields.get("channel", "0")),
                              fields.get("addr", ""))

    def _on_report(self, number, fields, body):
        try:
            report = json.loads(body)
            self.metrics = ServerMetrics.from_state(report.pop("metrics"))
        except (ValueError, KeyError, AttributeError) as exc:
            self.log.warn("{worker}'s report is not one: {why}", worker=self, why=exc)
            return
        self.report = report
        self.reports += 1

    def answer(self, fid, code, frame):
        if self.alive:
            self.link.send("answer", fid, frame, code=code)

    def link_lost(self, reason):
        self.supervisor.lost(self, "its link closed")


class WorkerProcess(ProcessProtocol):
    """A worker's process: its log lines (JSON, one per line, :mod:`rocketpy.service.worker`)
    become the writer's, prefixed ``worker N:``; its end is the session's."""

    log = Logger(namespace="rocketpy.worker", observer=logs.observer)

    def __init__(self, session):
        self.session = session
        self._pending = {1: b"", 2: b""}

    def connectionMade(self):
        self.transport.closeStdin()

    def childDataReceived(self, fd, data):
        lines = (self._pending.get(fd, b"") + data).split(b"\n")
        self._pending[fd] = lines.pop()
        for line in lines:
            self._line(line, fd)

    def _line(self, raw, fd):
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if not text:
            return
        level = LogLevel.info if fd == 1 else LogLevel.warn
        if text.startswith("{"):
            try:
                event = json.loads(text)
                level = _LEVELS.get(event.get("level"), level)
                text = str(event.get("text", ""))
            except (ValueError, AttributeError):
                pass
        self.log.emit(level, "worker {slot}: {text}", slot=self.session.slot, text=text)

    def processEnded(self, reason):
        for fd in list(self._pending):
            if self._pending[fd]:
                self._line(self._pending.pop(fd), fd)
        value = reason.value
        status = getattr(value, "exitCode", None)
        sig = getattr(value, "signal", None)
        how = f"signal {sig}" if sig else f"status {status}"
        self.session.supervisor.exited(self.session, how)


class _One(Factory):
    """The factory of one adopted connection: the link made beforehand."""

    def __init__(self, protocol):
        self.protocol_instance = protocol

    def buildProtocol(self, addr):
        return self.protocol_instance


class WorkerSupervisor(Service):
    """Starts, links, feeds and restarts the worker processes (see the module docstring).

    :param processes: N, the processes accepting (this one and N - 1 workers).
    :param argv: the ``rocketnamesrv`` options the server was started with (a worker parses
        them as this process did).
    :param server: the :class:`~rocketpy.service.server.RemotingServerService` (its port).
    :param hold: a Deferred before which no worker starts (the warm restart's load), or None.
    :param replicator: the :class:`Replicator` the writer's journals feed.
    :param channels: the :class:`~rocketpy.transport.remotechannels.RemoteChannels`.
    :param listener: the channel event listener (the housekeeping) of the workers' channels.
    :param snapshot: ``snapshot()`` -> Deferred of the image parts ``(main, routes)``, taken
        in steps (``RouteSnapshotter.capture``); ``encode_routes(main, routes)`` their bytes.
    :param state: ``state()`` -> ``(properties, KVSnapshot)`` now (the settings and KV table).
    :param startup_ms: the writer's start (``waitSecondsForService``)."""

    name = "workers"
    log = Logger(observer=logs.observer)

    def __init__(self, processes, *, reactor, argv, server, hold, replicator, channels,
                 listener, snapshot, encode_routes, state, startup_ms,
                 executable=sys.executable):
        self.processes = processes
        self.reactor = reactor
        self.argv = list(argv)
        self.server = server
        self.hold = hold
        self.replicator = replicator
        self.channels = channels
        self.listener = listener
        self.snapshot = snapshot
        self.encode_routes = encode_routes
        self.state = state
        self.startup_ms = startup_ms
        self.executable = executable
        self.forwarded = None       # the ForwardedRequests (attach_workers sets it)
        #: fires once every worker has served (the boot line waits for it)
        self.ready = defer.Deferred()
        self.stopping = False
        self.slots = {}             # slot -> WorkerSession (the newest start)
        self.restarts = {}          # slot -> starts after the first
        self._delays = {}           # slot -> next restart delay
        self._calls = {}            # slot -> IDelayedCall of its restart
        self._epochs = 0
        self._listen = None         # (fd, family name)
        self._stopped = None

    # -- start ----------------------------------------------------------------------------

    def startService(self):
        super().startService()
        port = self.server.port
        fileno = getattr(port, "fileno", None)
        family = next((name for cls, name in _FAMILIES if isinstance(port.getHost(), cls)),
                      None)
        if fileno is None or family is None or getattr(port, "factory", None) is not \
                self.server.factory:
            self.running = 0
            raise StartError(f"{WORKER_PROCESSES_KEY}={self.processes} needs a tcp: or unix: "
                             f"listening endpoint, not {self.server.description} (TLS is "
                             "decided per connection: tls.server.mode)")
        self._listen = (fileno(), family)
        begin = partial(self.reactor.callWhenRunning, self._spawn_all)
        if self.hold is not None and not self.hold.called:
            self.hold.addCallback(lambda result: (begin(), result)[1])
        else:
            begin()

    def _spawn_all(self):
        for slot in range(1, self.processes):
            self.spawn(slot)

    def spawn(self, slot):
        """Start worker ``slot`` (again): its link, then its process."""
        if self.stopping:
            return None
        self._calls.pop(slot, None)
        self._epochs += 1
        session = WorkerSession(self, slot, self._epochs)
        self.slots[slot] = session
        self.replicator.sessions[session.epoch] = session
        writer_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            session.link = Link(session, name=f"the link to worker {slot}")
            self.reactor.adoptStreamConnection(writer_end.fileno(), socket.AF_UNIX,
                                               _One(session.link))
            fd, family = self._listen
            args = [self.executable, "-m", "rocketpy.service.worker", f"--slot={slot}",
                    f"--epoch={session.epoch}", f"--family={family}",
                    f"--startup-ms={self.startup_ms}", "--", *self.argv]
            session.process = self.reactor.spawnProcess(
                WorkerProcess(session), self.executable, args, env=_child_env(),
                childFDs={0: "w", 1: "r", 2: "r", 3: worker_end.fileno(), 4: fd})
        finally:
            writer_end.close()
            worker_end.close()
        session.pid = session.process.pid
        self.log.info("worker {slot} started (pid {pid})", slot=slot, pid=session.pid)
        return session

    def bootstrap(self, session):
        """``session`` said hello: take the image, encode it (a thread), send it."""
        if session.state != "starting":
            return
        session.state = "imaging"

        def taken(parts):
            if session.state != "imaging":
                return None
            session.image_seq = seq = self.replicator.seq   # the tables at this moment
            props, kv = self.state()
            return _in_thread(self.reactor, self._encode, parts, props, kv).addCallback(
                lambda image: session.imaged(seq, image))
        d = self.snapshot()
        d.addCallback(taken)
        d.addErrback(lambda failure: (self.log.failure("the image for {worker} failed",
                                                        failure, worker=session),
                                      self.kill(session)))

    def _encode(self, parts, props, kv):
        return encode_image(props, kv, self.encode_routes(*parts))

    def serving(self, session):
        self.log.info("worker {slot} (pid {pid}) serving, at sequence number {seq}",
                      slot=session.slot, pid=session.pid, seq=session.acked)
        self._delays.pop(session.slot, None)
        if not self.ready.called and all(s.served for s in self.slots.values()) \
                and len(self.slots) == self.processes - 1:
            self.ready.callback(None)

    # -- channel events --------------------------------------------------------------------

    def event(self, session, kind, channel_id, remote_addr):
        channels = self.channels
        if kind == "connect":
            remote = channels.opened(session, channel_id, remote_addr)
            self._tell("on_channel_connect", remote)
        elif kind == "close":
            remote = channels.closed(channel_id)
            if remote is not None:
                self._tell("on_channel_close", remote)
        elif kind in ("exception", "idle"):
            remote = channels.get(channel_id)
            if remote is not None:
                self._tell("on_channel_" + kind, remote)
        else:
            self.log.error("{worker} reported a channel event {kind!r}", worker=session,
                           kind=kind)

    def _tell(self, event, remote):
        try:
            getattr(self.listener, event)(remote.remote_addr, remote.channel)
        except Exception:
            self.log.failure("channel event listener failed on {event} of {addr}",
                             event=event, addr=remote.remote_addr)

    def close_remote(self, session, channel_id, why):
        return session.alive and session.link.send("close", channel_id, why=why)

    # -- ends ------------------------------------------------------------------------------

    def behind(self, session):
        self.log.error("worker {slot} (pid {pid}) is {n} bytes behind the op stream: "
                       "restarting it", slot=session.slot, pid=session.pid,
                       n=session.unacked_bytes)
        self.kill(session)

    def kill(self, session):
        if session.process is not None and session.alive:
            try:
                session.process.signalProcess("KILL")
            except (OSError, ProcessExitedAlready):
                pass

    def lost(self, session, why):
        """``session`` is over (its link closed or its process ended): its channels close, it
        leaves the barrier, and (unless stopping) it is started again."""
        if not session.alive:
            return
        self.kill(session)   # (a link closed under a running worker: it must not serve on)
        previous = session.state
        session.state = "gone"
        self.replicator.sessions.pop(session.epoch, None)
        self.replicator.barrier.leave(session)
        if session.link is not None:
            session.link.close()
        for remote in self.channels.forget_worker(session):
            self._tell("on_channel_close", remote)
        if self.stopping:
            return
        self.log.warn("worker {slot} (pid {pid}) is gone ({why}, while {state}); its "
                      "connections are closed", slot=session.slot, pid=session.pid, why=why,
                      state=previous)
        if not self.ready.called and not session.served:
            self._failed_start(session, why)
            return
        young = time.monotonic() - session.started < YOUNG_SECONDS
        delay = self._delays.get(session.slot, RESTART_DELAY) if young else RESTART_DELAY
        self._delays[session.slot] = min(delay * 2, MAX_RESTART_DELAY)
        self.restarts[session.slot] = self.restarts.get(session.slot, 0) + 1
        self._calls[session.slot] = self.reactor.callLater(delay, self.spawn, session.slot)

    def exited(self, session, how):
        self.lost(session, f"its process ended, {how}")
        if session.process is not None:
            session.process = None
        if self._stopped is not None and not any(s.process for s in self.slots.values()):
            stopped, self._stopped = self._stopped, None
            stopped.callback(None)

    def _failed_start(self, session, why):
        """An initial worker ended before serving: the server does not start."""
        self.log.critical("rocketnamesrv: worker {slot} ended before it served ({why}): see "
                          "its log lines above", slot=session.slot, why=why)
        self.stopping = True
        self.reactor.addSystemEventTrigger("after", "shutdown", _exit_failed)
        if self.reactor.running:
            self.reactor.stop()

    def stopService(self):
        super().stopService()
        self.stopping = True
        for call in self._calls.values():
            if call.active():
                call.cancel()
        self._calls.clear()
        live = [s for s in self.slots.values() if s.process is not None]
        if not live:
            return None
        for session in live:
            try:
                session.process.signalProcess("TERM")
            except (OSError, ProcessExitedAlready):
                pass
        self._stopped = stopped = defer.Deferred()
        timeout = self.reactor.callLater(STOP_SECONDS, self._stragglers)
        stopped.addBoth(lambda result: (timeout.cancel() if timeout.active() else None,
                                        result)[1])
        return stopped

    def _stragglers(self):
        for session in self.slots.values():
            if session.process is not None:
                self.log.warn("worker {slot} (pid {pid}) did not stop in {t} s: killing it",
                              slot=session.slot, pid=session.pid, t=STOP_SECONDS)
                self.kill(session)

    # -- what the web endpoint shows ------------------------------------------------------

    def status(self, own_connections=0, own_metrics=None):
        """One entry per process: this one (worker 0, the writer), then each worker."""
        writer = {"worker": 0, "pid": os.getpid(), "role": "writer", "state": "serving",
                  "connections": own_connections, "sequence": self.replicator.seq,
                  "applied": self.replicator.seq, "restarts": 0}
        out = [writer]
        for slot in sorted(self.slots):
            session = self.slots[slot]
            report = session.report
            out.append({"worker": slot, "pid": session.pid, "role": "replica",
                        "state": session.state,
                        "connections": len(self.channels.of_worker(session)),
                        "sequence": self.replicator.seq, "applied": session.acked,
                        "restarts": self.restarts.get(slot, 0), "reports": session.reports,
                        "answerCacheEntries": report.get("answerCacheEntries")})
        return out

    def metrics_sources(self, own):
        """``[(worker label, ServerMetrics)]``: this process's, then each worker's last report."""
        return [("0", own)] + [(str(slot), self.slots[slot].metrics)
                               for slot in sorted(self.slots)]


def _exit_failed():
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _child_env():
    """The environment of a worker: this one, with the directory rocketpy was imported from
    first on ``PYTHONPATH`` (the same code, however it was installed)."""
    import rocketpy
    root = os.path.dirname(os.path.dirname(os.path.abspath(rocketpy.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def attach_workers(top, options, *, route, kv, configuration, processor, factory, listener,
                   server, snapshotter, hold, startup_ms, reactor, unregistration=None):
    """Make the writer of an N-process server out of the one-process tree ``top``: the
    journals feed a :class:`Replicator`, state-changing answers wait for the replicas
    (``factory.processor``), forwarded requests are run for the workers' connections, and a
    :class:`WorkerSupervisor` (stopped before the server, after the warm restart's last
    snapshot) starts the workers once the server listens. Returns the supervisor."""
    from ..transport.forwarding import ReplicaBarrier
    replicator = Replicator(ReplicaBarrier())
    Feed(replicator.publish).attach(route, kv, configuration)
    supervisor = WorkerSupervisor(
        options["worker_processes"], reactor=reactor, argv=options.get("argv", ()),
        server=server, hold=hold, replicator=replicator, channels=None, listener=listener,
        snapshot=snapshotter.capture, encode_routes=snapshotter.encode,
        state=lambda: (dict(configuration.items()), kv.snapshot()),
        startup_ms=startup_ms)
    supervisor.channels = factory.remote = RemoteChannels(supervisor.close_remote)
    factory.processor = BarrierProcessor(
        processor, replicator.barrier, replicator.sequence,
        queued=unregistration.drained if unregistration is not None else (lambda: None))
    factory.pools[REPLICAS] = replicator.barrier
    supervisor.forwarded = ForwardedRequests(
        factory.processor, supervisor.channels, factory.pools, factory.governor, reactor,
        factory.max_frame_length, lambda session, fid, code, frame: session.answer(fid, code,
                                                                                  frame))
    supervisor.connections = AllConnections(factory.connections, supervisor.channels)
    supervisor.setServiceParent(top)
    return supervisor
