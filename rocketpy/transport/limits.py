"""Transport layer: the limits that keep one reactor serving under overload (Java's thread-pool
queues, ``RejectedExecutionException`` and ``SYSTEM_BUSY`` in ``NettyRemotingAbstract``, redone
for a single thread), and the structured log events for every kind of trouble.

Java answers ``SYSTEM_BUSY`` (2) with :data:`~rocketpy.remoting.codes.OVERLOAD_REMARK` only when
a request finds its executor queue full (50,000 route queries); clients then back off, and a
Java producer's send fails. rocketpy serves one reactor *turn* (one pass over the ready sockets,
ended by a ``callLater(0)``) at a time, and a turn spends at most so much:

* each connection's first ``serverFairRequestsPerTurn`` requests are served (a broker or a
  producer polling routes is served in the turn its request is read);
* beyond that, requests draw from one shared budget: ``serverRequestsPerTurn`` requests or
  ``serverTurnMillis``, whichever runs out first;
* once it is spent, the connection is *throttled*: what it sent waits for a later turn, and its
  socket is not read until then, so TCP pushes back on the client. A stretched turn (a
  contended CPU makes 50 ms pass sooner) only delays: nobody is refused for it.

Throttled connections wait in one queue; each turn resumes them in order while its budget lasts
(the first always), each with a quantum of ``max(fair share, serverRequestsPerTurn / queue
length)`` (its fair share at least). A read holding more than its fair share while the budget is
spent (a flood starting) is queued at once. So a light client is served in the first turn its
request is read, flooders share the rest round robin, and a turn costs about
``serverTurnMillis`` plus the light clients' requests.

The requests read and waiting in throttled connections are Java's queue: while they number
``serverMaxWaitingRequests`` (Java's 50,000) or more, a connection's requests past its share of
the turn get Java's SYSTEM_BUSY answer instead of waiting, pre-encoded with the opaque patched in
(no decode, no processing), at most ``serverShedRequestsPerTurn`` per turn, and then it is
throttled. The governor sees a connection only through
:class:`~rocketpy.transport.interfaces.IGovernedConnection`; a queued connection, resumed,
peeks at its socket first (``MSG_PEEK``), so a peer that reset is dropped instead of served what
it left behind (one that half-closed is still answered).

Other limits: ``serverMaxConnections`` (Java has none), ``serverMaxPendingFrameBytes`` (partly
received large frames, all connections together: 16 MiB frames trickled in by thousands of peers
would otherwise be memory without bound). A peer that does not read its answers is paused by flow
control and closed by the idle timeout, as is one trickling a frame (slow loris).

Every refused connection, bad frame, shed request, drop and expiry is logged once through
:func:`trouble` (a ``twisted.logger`` event with ``rocketpy_event``, one of
:data:`TROUBLE_EVENTS`, ``peer`` and ``reason``) and counted in
:class:`~rocketpy.transport.metrics.ServerMetrics`."""
import dataclasses
import resource
from time import perf_counter

from twisted.internet.protocol import Protocol
from twisted.logger import Logger, LogLevel

from ..remoting.codes import OVERLOAD_REMARK, ResponseCode
from ..remoting.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from ..remoting.frame import encode_template
from ..remoting.layout import frames_at_least, peek_request
from . import logs

__all__ = ["ServerLimits", "LoadGovernor", "RefusedConnection", "overload_answer", "LIMIT_KEYS",
           "TROUBLE_EVENTS", "NOT_SHED",
           "trouble", "raise_open_files_limit", "connection_cap", "OPEN_FILES_MARGIN",
           "MIN_DEFAULT_CONNECTIONS"]

log = Logger(observer=logs.observer)


#: The stable ``rocketpy_event`` values of :func:`trouble` (operators grep and alert on these).
TROUBLE_EVENTS = {
    "connection.refused": "a connection closed before it was served (max connections, TLS mode)",
    "frame.bad": "a frame over the length limit or that did not decode; its connection is closed",
    "request.shed": "requests answered SYSTEM_BUSY [OVERLOAD] instead of being processed "
                    "(logged once per connection and overload episode; a full decode pool: "
                    "reason 'decode queue', logged at the 1st, 2nd, 4th... refusal)",
    "overload.start": "serverMaxWaitingRequests requests wait in queued connections: shedding starts",
    "overload.end": "a turn served everything again; the episode's shed count",
    "connection.expired": "closed by a timeout: idle (no traffic), slow frame (slow loris)",
    "connection.dropped": "closed by a limit: too much memory in partly received frames",
    "queue.full": "the unregistration queue refused a request",
    "broker.expired": "a broker sent no heartbeat within its timeout; its channel is closed",
}

#: ``(property key, attribute, default, meaning)``; 0 turns a limit off.
LIMIT_KEYS = (
    ("serverMaxConnections", "max_connections", 50_000,
     "open connections at most; more are closed at once, logged (Java has no limit)"),
    ("serverRequestsPerTurn", "requests_per_turn", 10_000,
     "requests one reactor turn serves beyond the fair shares; past them (or serverTurnMillis) "
     "connections that send more wait for a later turn (queued)"),
    ("serverTurnMillis", "turn_millis", 50,
     "milliseconds one reactor turn may spend on requests beyond the fair shares"),
    ("serverFairRequestsPerTurn", "fair_requests_per_turn", 4,
     "requests per connection and turn served even when the turn's budget is spent (not for a "
     "connection that sends more in one read then; a queued one gets as many when its turn comes)"),
    ("serverShedRequestsPerTurn", "shed_requests_per_turn", 4,
     "SYSTEM_BUSY answers per connection and turn while serverMaxWaitingRequests wait; after "
     "them its socket is not read until its turn in the queue"),
    ("serverMaxWaitingRequests", "max_waiting_requests", 50_000,
     "requests read and waiting in queued connections past which requests over a connection's "
     "share get SYSTEM_BUSY [OVERLOAD] (Java's clientRequestThreadPoolQueueCapacity)"),
    ("serverMaxPendingFrameBytes", "max_pending_frame_bytes", 1 << 30,
     "bytes of partly received frames over 1 MiB, all connections together; the connection "
     "that would exceed it is closed"),
)

#: Connections named in ``request.shed`` events per overload episode (the rest are counted).
MAX_LOGGED_PEERS = 100
#: Partly received frames smaller than this are not accounted (they are at most one read).
LARGE_FRAME = 1 << 20
_UNLIMITED = 1 << 62


@dataclasses.dataclass(frozen=True)
class ServerLimits:
    """The values of :data:`LIMIT_KEYS` (0 = no limit)."""

    max_connections: int = 50_000
    requests_per_turn: int = 10_000
    turn_millis: int = 50
    fair_requests_per_turn: int = 4
    shed_requests_per_turn: int = 4
    max_waiting_requests: int = 50_000
    max_pending_frame_bytes: int = 1 << 30

    @classmethod
    def from_properties(cls, props):
        """From ``-D`` / ``-c`` properties; ValueError names a bad key."""
        values = {}
        for key, attr, _, _ in LIMIT_KEYS:
            text = props.get(key)
            if text is None or str(text).strip() == "":
                continue
            try:
                value = int(str(text).strip())
            except ValueError:
                raise ValueError(f"{key} is not a number: {text!r}") from None
            if value < 0:
                raise ValueError(f"{key} must be >= 0, got {value}")
            values[attr] = value
        return cls(**values)


#: Descriptors kept beside the connections: listening sockets, files, the reactor's, threads'.
OPEN_FILES_MARGIN = 256
#: A start without ``serverMaxConnections`` warns only when the open files limit leaves room for
#: fewer connections than this: a NameServer's brokers and clients rarely need more, and a hard
#: limit of 1,024 (which would leave 768) is the one that bites.
MIN_DEFAULT_CONNECTIONS = 1_000


def raise_open_files_limit(wanted):
    """Raise the soft RLIMIT_NOFILE towards ``wanted`` (at most the hard limit), logged; returns
    ``(old soft, new soft)``. The usual soft limit (1,024) would make ``accept`` fail long before
    ``serverMaxConnections``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or (soft >= wanted):
        return soft, soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warn("cannot raise the open files limit from {soft} to {target}: {why}",
                     soft=soft, target=target, why=exc)
            target = soft
        else:
            log.info("open files limit raised from {soft} to {target} (hard limit {hard})",
                     soft=soft, target=target, hard=hard)
    return soft, target


def connection_cap(max_connections, configured):
    """The ``serverMaxConnections`` the open files limit can honour, the soft limit raised for
    it first: past the limit ``accept`` itself would fail, so the cap is lowered to what fits
    (one descriptor each, :data:`OPEN_FILES_MARGIN` spare) and connections past it are refused
    like any over the cap. A ``configured`` value that does not fit is a warning; the default
    (50,000, far more than a NameServer needs) lowered is an info line, and a warning only
    when fewer than :data:`MIN_DEFAULT_CONNECTIONS` fit."""
    wanted = max_connections + OPEN_FILES_MARGIN
    _, limit = raise_open_files_limit(wanted)
    if limit == resource.RLIM_INFINITY or limit >= wanted:
        return max_connections
    cap = max(1, limit - OPEN_FILES_MARGIN)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if configured:
        log.warn("serverMaxConnections {wanted} does not fit the open files limit {limit} (hard "
                 "{hard}) with {margin} to spare: at most {cap} connections are served",
                 wanted=max_connections, limit=limit, hard=hard, margin=OPEN_FILES_MARGIN, cap=cap)
    elif cap < MIN_DEFAULT_CONNECTIONS:
        log.warn("the open files limit {limit} (hard {hard}) leaves room for {cap} connections "
                 "only: raise it (ulimit -n; LimitNOFILE= for systemd)", limit=limit, hard=hard,
                 cap=cap)
    else:
        log.info("serving at most {cap} connections (the open files limit is {limit}; "
                 "serverMaxConnections sets another cap)", cap=cap, limit=limit)
    return cap


class RefusedConnection(Protocol):
    """What ``buildProtocol`` returns for a refused connection: it is cut at once. (``None``
    would do for a plain TCP port, but not under a wrapping factory such as ``ssl:``'s.)"""

    def connectionMade(self):
        self.transport.abortConnection()


def trouble(logger, event, peer, reason, format, level=LogLevel.warn, **fields):
    """Log one trouble event with its stable fields (see :data:`TROUBLE_EVENTS`)."""
    logger.emit(level, format, rocketpy_event=event, peer=peer, reason=reason, **fields)


# -- the pre-encoded SYSTEM_BUSY answer -----------------------------------------------------------

#: :meth:`LoadGovernor.shed` result: this frame cannot be read cheaply; process it normally.
NOT_SHED = object()


def overload_answer(overload_response=None):
    """Java's SYSTEM_BUSY "[OVERLOAD]..." frame, encoded once, for any opaque (an
    :class:`~rocketpy.remoting.layout.OpaqueTemplate`), from ``overload_response`` (the processor's:
    the profile's version and serialisation), or as JSON from the request when None."""
    probe = RemotingCommand.request(0, None, opaque=0, version=0)
    if overload_response is not None:
        response = overload_response(probe)
    else:
        response = probe.create_response(ResponseCode.SYSTEM_BUSY, remark=OVERLOAD_REMARK)
    response.flag |= FLAG_RESPONSE
    return encode_template(response)


# -- the governor ---------------------------------------------------------------------------------

class LoadGovernor:
    """Applies :class:`ServerLimits` for one factory: connection admission, the per-turn request
    budget (serve / throttle, and shed while too many wait), and the pending large-frame memory.
    A turn ends with ``clock.callLater(0, ...)``; ``overload_response`` is the processor's (or
    None)."""

    log = Logger(observer=logs.observer)

    def __init__(self, limits=None, clock=None, overload_response=None, metrics=None):
        self.limits = limits = limits or ServerLimits()
        self._clock = clock
        self._metrics = metrics
        self.answer = overload_answer(overload_response)
        self._pool = limits.requests_per_turn
        self._unlimited = limits.requests_per_turn == 0
        self._fair = limits.fair_requests_per_turn
        self._shed_quota = limits.shed_requests_per_turn
        self._max_waiting = limits.max_waiting_requests
        self._turn_left = self._pool
        self._turn_seconds = limits.turn_millis / 1000.0 if limits.turn_millis else float("inf")
        self._turn_started = 0.0
        self._turn_call = None
        self._used = {}                # proto -> (served, shed) this turn
        self._queue = {}               # throttled protos waiting for a turn, in order
        self._heavy = set()            # protos that came from the queue this turn
        self._quantum = limits.fair_requests_per_turn
        self._waiting = {}             # queued proto -> requests of its read it holds
        #: requests read and waiting in queued connections (Java's executor queue)
        self.waiting = 0
        #: the turn's stopwatch (seconds): the clock's, so a test's Clock never stretches a turn
        #: by how fast the machine runs (tests that stretch turns replace it)
        self.timer = perf_counter if clock is None else clock.seconds
        self._pending = {}       # proto -> bytes of its partly received large frame
        self.pending_bytes = 0
        # overload episode
        self.overloaded = False
        self._episode_start = 0.0
        self._episode_shed = 0
        self._shed_this_turn = 0
        self._logged_peers = set()
        self._episode_peers = 0
        #: totals since start (the metrics carry the per-reason / per-code split)
        self.shed_total = 0
        self.refused = 0
        self.turns = 0
        #: reason -> connections the server closed for a timeout or a limit
        self.drops = {}

    # -- connections ---------------------------------------------------------------------------

    def admit_connection(self, open_connections, peer):
        """True when one more connection may be served; else logs and counts the refusal."""
        cap = self.limits.max_connections
        if cap and open_connections >= cap:
            self.refused += 1
            self.refuse(peer, "max connections",
                        "refusing the connection from {peer}: {open} connections are open "
                        "(serverMaxConnections {cap})", open=open_connections, cap=cap)
            return False
        return True

    def refuse(self, peer, reason, format, **fields):
        """Log and count a connection refused before being served."""
        trouble(self.log, "connection.refused", peer, reason, format, **fields)
        if self._metrics is not None:
            self._metrics.connection_refused(reason)

    def bad_frame(self, proto, reason, format, **fields):
        """Log and count a frame that closes its connection (length, decode)."""
        trouble(self.log, "frame.bad", proto.remote_addr, reason, format, **fields)
        if self._metrics is not None:
            self._metrics.bad_frame(reason)

    def expired(self, proto, reason, format, **fields):
        """Log and count a connection closed by a timeout (idle, slow frame)."""
        trouble(self.log, "connection.expired", proto.remote_addr, reason, format, **fields)
        self._count_drop(reason)

    def _count_drop(self, reason):
        self.drops[reason] = self.drops.get(reason, 0) + 1
        if self._metrics is not None:
            self._metrics.connection_dropped(reason)

    def forget(self, proto):
        """``proto``'s connection is gone: release what it held."""
        held = self._pending.pop(proto, 0)
        self.pending_bytes -= held
        self._used.pop(proto, None)
        self._heavy.discard(proto)
        self._logged_peers.discard(proto)
        self._queue.pop(proto, None)
        self.waiting -= self._waiting.pop(proto, 0)

    # -- the per-turn budget ---------------------------------------------------------------

    def _start_turn(self):
        self._turn_call = self._clock.callLater(0, self._end_turn)
        self._turn_started = self.timer()

    @property
    def queue_full(self):
        """As many requests wait as Java's queue holds: requests past a share are shed."""
        return 0 < self._max_waiting <= self.waiting

    def allowance(self, proto, data=None, held=False):
        """``(serve, stop)`` for one read ``data`` of ``proto``: serve the first ``serve`` frames,
        shed those after, and from frame ``stop`` on leave the rest for a later turn. Only a
        fresh read is shed, while :attr:`queue_full`: what a connection ``held`` was read before
        (into the queue, in Java's terms) and waits its turn."""
        if self._unlimited:
            return _UNLIMITED, _UNLIMITED
        if self._turn_call is None:
            self._start_turn()
        elif self._turn_left > 0 and self.timer() - self._turn_started > self._turn_seconds:
            self._turn_left = 0  # this turn has run long enough, whatever it served
        served, shed = self._used.get(proto, (0, 0))
        left = self._turn_left if self._turn_left > 0 else 0
        fair = self._fair - served if served < self._fair else 0
        if proto in self._heavy:
            # came from the queue: its quantum of the budget (its fair share, and one request,
            # at least: the queue moves however long a turn takes), then back to its end
            serve = self._quantum - served if served < self._quantum else 0
            if serve > left:
                floor = (self._fair or 1) - served
                serve = left if left > floor else floor if floor > 0 else 0
        else:
            serve = fair
            if left:
                serve += left
            elif serve and data is not None and frames_at_least(data, self._fair + 1):
                serve = 0  # a flood in one read while the budget is spent: queued at once
        if held or not self.queue_full:
            return serve, serve  # the rest waits: a turn that ran long delays, never refuses
        shed_left = self._shed_quota - shed
        return serve, serve + (shed_left if shed_left > 0 else 0)

    def spent(self, proto, served, shed):
        """``proto`` served ``served`` frames of its allowance and shed ``shed``."""
        if self._unlimited or not (served or shed):
            return
        before, before_shed = self._used.get(proto, (0, 0))
        if proto in self._heavy:
            beyond = served  # a queued connection's quantum is all budget
        else:
            fair_left = self._fair - before
            beyond = served - (fair_left if fair_left > 0 else 0)
        if beyond > 0:
            self._turn_left -= beyond
        self._used[proto] = (before + served, before_shed + shed)

    def shed(self, proto, frame):
        """The SYSTEM_BUSY answer for ``frame`` (None: no answer -- oneway, or a stray response),
        or :data:`NOT_SHED` when the frame's header cannot be read cheaply."""
        peeked = peek_request(frame)
        if peeked is None:
            return NOT_SHED
        code, opaque, flag = peeked
        if flag & FLAG_RESPONSE:
            return None  # not a request; the normal path would only log it
        self.shed_total += 1
        self._shed_this_turn += 1
        self._episode_shed += 1
        if not self.overloaded:
            self.overloaded = True
            self._episode_start = self._clock.seconds()
            trouble(self.log, "overload.start", proto.remote_addr, "overload",
                    "system busy: {waiting} requests wait (serverMaxWaitingRequests {cap}); "
                    "answering SYSTEM_BUSY [OVERLOAD] to connections past their share of a turn",
                    waiting=self.waiting, cap=self._max_waiting)
        if proto not in self._logged_peers:
            self._logged_peers.add(proto)
            self._episode_peers += 1
            if self._episode_peers <= MAX_LOGGED_PEERS:
                trouble(self.log, "request.shed", proto.remote_addr, "overload",
                        "{peer}, too many requests and system busy, request code: {code}; "
                        "answering SYSTEM_BUSY [OVERLOAD] (logged once per connection and episode)",
                        code=code)
        if self._metrics is not None:
            self._metrics.overload(code)
        if flag & FLAG_ONEWAY:
            return None  # Java's writeResponse sends nothing for a oneway request
        return self.answer.encode_for(opaque)

    def refuse_work(self, proto, request, pool):
        """``pool`` refused the work (:mod:`rocketpy.transport.offload`: full, or not running):
        Java's SYSTEM_BUSY "[OVERLOAD]..." answer to ``request`` (None for a oneway one), counted
        as shed and logged at the 1st, 2nd, 4th, 8th... of the pool's refusals, so a flood of
        big bodies costs a few log lines."""
        self.shed_total += 1
        refused = pool.refused
        if refused & (refused - 1) == 0:
            trouble(self.log, "request.shed", proto.remote_addr, "decode queue",
                    "{peer}: the decode pool is {why}; answering request code {code} with "
                    "SYSTEM_BUSY [OVERLOAD] ({refused} refused so far)", code=request.code,
                    why="full" if pool.accepting else "not running", refused=refused)
        if self._metrics is not None:
            self._metrics.overload(request.code)
        if request.flag & FLAG_ONEWAY:
            return None
        return self.answer.encode_for(request.opaque)

    def throttle(self, proto, held=0):
        """``proto`` used its share of this turn and holds ``held`` requests of its read: it
        joins the end of the queue."""
        self.waiting += held - self._waiting.get(proto, 0)
        self._waiting[proto] = held
        if proto in self._queue:
            return
        self._queue[proto] = None
        if self._turn_call is None:
            self._start_turn()

    def _end_turn(self):
        self._turn_call = None
        self.turns += 1
        self._turn_left = self._pool
        self._used.clear()
        waiting = list(self._queue)
        self._queue = {}
        if self.overloaded and not self._shed_this_turn and not waiting:
            self.overloaded = False
            trouble(self.log, "overload.end", "", "overload",
                    "system no longer busy: {shed} requests from {connections} connections shed "
                    "with SYSTEM_BUSY over {seconds:.1f} s", level=LogLevel.info,
                    shed=self._episode_shed, connections=self._episode_peers,
                    seconds=self._clock.seconds() - self._episode_start)
            self._episode_shed = 0
            self._episode_peers = 0
            self._logged_peers.clear()
        self._shed_this_turn = 0
        self._heavy = set(waiting)
        if not waiting:
            if self.overloaded:  # one more turn, even an empty one, to see the episode end
                self._start_turn()
            return
        # The next turn starts now: the queue in order, each with its quantum, for as long as the
        # budget lasts; the others keep their place at the head of the queue, unread.
        self._quantum = max(1, self._fair, self._pool // len(waiting))  # progress, always
        self._start_turn()
        for i, proto in enumerate(waiting):
            if i and (self._turn_left <= 0
                      or self.timer() - self._turn_started > self._turn_seconds):
                queue = dict.fromkeys(p for p in waiting[i:] if not p.is_closing())
                queue.update(self._queue)
                self._queue = queue
                break
            self.waiting -= self._waiting.pop(proto, 0)
            proto.unthrottle()

    # -- partly received large frames ------------------------------------------------------

    def hold_frame(self, proto, size):
        """``proto`` now holds a partial frame of ``size`` bytes in all (0: none); False when
        that would pass ``serverMaxPendingFrameBytes`` (the caller closes the connection)."""
        if size < LARGE_FRAME:
            size = 0
        before = self._pending.get(proto, 0)
        if size == before:
            return True
        cap = self.limits.max_pending_frame_bytes
        if size > before and cap and self.pending_bytes - before + size > cap:
            self.pending_bytes -= before
            self._pending.pop(proto, None)
            trouble(self.log, "connection.dropped", proto.remote_addr, "frame memory",
                    "closing {peer}: its {size}-byte frame would put partly received frames "
                    "over serverMaxPendingFrameBytes ({cap})", size=size, cap=cap)
            self._count_drop("frame memory")
            return False
        self.pending_bytes += size - before
        if size:
            self._pending[proto] = size
        else:
            self._pending.pop(proto, None)
        return True
