"""Transport layer: requests that change state, with worker processes (a rocketpy addition;
:mod:`rocketpy.service.workers`). Java's NameServer serves every connection from one process
whose request threads take a read/write lock over the route tables: a broker's REGISTER_BROKER
is answered once its routes are in the tables, so any client's later route query sees them.
rocketpy's workers each hold a replica of the one route writer's tables
(:mod:`rocketpy.namesrv.replica`), and keep that guarantee so:

* which requests change state is the handlers' own declaration
  (``responder(writes=True)``, the processor's :attr:`writes`); nothing here lists codes;
* a worker answers every other request from its replica, and hands a state-changing one to the
  writer (:class:`ForwardingProcessor`): a :class:`~rocketpy.namesrv.pending.Pending` of lane
  :data:`WRITER`, whose "pool", :class:`Forwarder`, sends the request over the worker's link
  and fires with the writer's answer. Its connection is not read meanwhile, as with any
  Pending, so a broker's REGISTER_BROKER and QUERY_DATA_VERSION stay in order;
* the writer runs a forwarded request as it runs one of its own connections'
  (:class:`ForwardedRequests`: its decode pool, its file writer, its access rules, with the
  connection's channel id and peer address), through :class:`BarrierProcessor`: the answer to
  a state-changing request waits, as a Pending of lane :data:`REPLICAS`, until every worker
  has acknowledged the stream up to the writer's sequence number when it was answered
  (:class:`ReplicaBarrier`), so whichever worker a client's next query lands on has applied it.

Bounded: a worker forwards at most :data:`MAX_FORWARDS` requests at once (each paused
connection has one; past the bound, and with the link gone, the request is answered
SYSTEM_BUSY, Java's answer to a full executor queue); the barrier holds one waiting answer per
paused connection."""
from collections import deque

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger

from ..namesrv.broker_access import host_of
from ..namesrv.pending import Pending
from ..remoting.codes import ResponseCode
from ..remoting.command import FLAG_ONEWAY
from ..remoting.errors import RemotingCodecError
from ..remoting.frame import decode_frame
from .offload import WorkDisplaced
from .protocol import SYSTEM_ERROR, encode_answer
from . import logs

__all__ = ["WRITER", "REPLICAS", "MAX_FORWARDS", "ForwardingProcessor", "Forwarder",
           "ForwardedAnswer", "ReplicaBarrier", "BarrierProcessor", "ForwardedRequests"]

#: lanes: a worker's request answered by the writer; an answer waiting for the replicas
WRITER = "writer"
REPLICAS = "replicas"
#: requests one worker has at the writer at once
MAX_FORWARDS = 10_000


def _same(result):
    return result


class ForwardedAnswer:
    """The writer's answer to a forwarded request: its response code (for the worker's
    metrics) and its frame, encoded for the request's opaque by the writer."""

    __slots__ = ("code", "frame")

    def __init__(self, code, frame):
        self.code = code
        self.frame = frame

    def encode_for(self, opaque):
        return self.frame


class _Wrapping:
    """A processor in front of ``processor``, with what the transport reads of it."""

    def __init__(self, processor):
        self.processor = processor
        self.writes = processor.writes
        self.header_dialect = processor.header_dialect
        self.overload_response = processor.overload_response
        self._process = processor.process


class ForwardingProcessor(_Wrapping):
    """A worker's processor: ``processor`` (over the replica) answers what only reads; a code
    in its :attr:`writes` is answered by the writer (a Pending of lane :data:`WRITER`, which
    the :class:`Forwarder` runs)."""

    def process(self, request, channel, now_ms, offload=False):
        if request.code in self.writes:
            return Pending(lambda: (request, channel), _same, WRITER)
        return self._process(request, channel, now_ms, offload)


class Forwarder:
    """The :data:`WRITER` lane of a worker: ``submit(work)`` sends ``work()`` (a request and
    its channel) to the writer with ``send("forward", id, frame, channel=, addr=)`` and
    returns a Deferred of its :class:`ForwardedAnswer` (None: nothing to send back); None when
    :data:`MAX_FORWARDS` wait already or the link is gone."""

    log = Logger(observer=logs.observer)

    def __init__(self, send, limit=MAX_FORWARDS):
        self._send = send
        self.limit = limit
        self._waiting = {}          # forward id -> Deferred
        self._next = 0
        self.accepting = True
        #: requests refused (bound reached, link gone) and forwarded since start
        self.refused = 0
        self.forwarded = 0

    def __len__(self):
        return len(self._waiting)

    def submit(self, work, peer=None, cancel=None, budget=None, size=0):
        if not self.accepting or len(self._waiting) >= self.limit:
            self.refused += 1
            return None
        request, channel = work()
        self._next += 1
        fid = self._next
        if not self._send("forward", fid, request.encode(), channel=channel.channel_id,
                          addr=channel.remote_addr):
            self.refused += 1
            return None
        self.forwarded += 1
        d = self._waiting[fid] = Deferred()
        return d

    def answered(self, fid, fields, frame):
        """The writer's answer to forward ``fid``."""
        d = self._waiting.pop(fid, None)
        if d is None:
            self.log.warn("an answer to forward {fid}, which is not waiting", fid=fid)
            return
        d.callback(ForwardedAnswer(int(fields.get("code", "-1")), frame) if frame else None)

    def stop(self):
        """The link is gone: nothing more is forwarded; what waits is never answered (the
        worker stops, its connections with it)."""
        self.accepting = False
        self._waiting.clear()


class ReplicaBarrier:
    """The :data:`REPLICAS` lane of the writer: ``submit(work)`` fires once every member
    (a worker holding a replica) has acknowledged the sequence number ``work()`` returns."""

    def __init__(self):
        self._acked = {}            # member -> the sequence number it acknowledged
        self._waiting = deque()     # (sequence number, Deferred), in order
        self.accepting = True
        self.refused = 0
        #: answers that waited, since start
        self.waited = 0

    def __len__(self):
        return len(self._waiting)

    @property
    def members(self):
        return tuple(self._acked)

    def floor(self):
        """The least sequence number every member has applied (None: no member)."""
        return min(self._acked.values()) if self._acked else None

    def holds(self, seq):
        """Whether an answer at ``seq`` must wait."""
        floor = self.floor()
        return floor is not None and floor < seq

    def join(self, member, acked):
        self._acked[member] = acked

    def leave(self, member):
        if self._acked.pop(member, None) is not None:
            self._release()

    def acked(self, member, seq):
        if member in self._acked and seq > self._acked[member]:
            self._acked[member] = seq
            self._release()

    def submit(self, work, peer=None, cancel=None, budget=None, size=0):
        """``work()`` is a sequence number, or a Deferred of one (work the writer still has
        queued: the number is known once it is done)."""
        seq = work()
        if isinstance(seq, Deferred):
            self.waited += 1
            out = Deferred()
            seq.addCallback(lambda seq: self._hold(seq).chainDeferred(out))
            return out
        return self._hold(seq)

    def _hold(self, seq):
        if not self.holds(seq):
            return succeed(None)
        self.waited += 1
        d = Deferred()
        self._waiting.append((seq, d))
        return d

    def _release(self):
        floor = self.floor()
        waiting = self._waiting
        while waiting and (floor is None or waiting[0][0] <= floor):
            waiting.popleft()[1].callback(None)


class BarrierProcessor(_Wrapping):
    """The writer's processor with workers: a state-changing request's answer (after any work
    of its own: a decode, a file write) waits on ``barrier`` for the stream position
    ``sequence()`` gives when it is ready -- or, when ``queued()`` gives a Deferred (an
    unregistration Java's 5.x answers once queued, applied on the next turn), the position once
    that fires: so a broker's UNREGISTER_BROKER answer, too, is seen by its next query on any
    process, as on one."""

    def __init__(self, processor, barrier, sequence, queued=lambda: None):
        super().__init__(processor)
        self._queued = queued
        self._barrier = barrier
        self._sequence = sequence

    def __getattr__(self, name):   # route_info_manager, reader, ... as the processor's
        return getattr(self.processor, name)

    def process(self, request, channel, now_ms, offload=False):
        answer = self._process(request, channel, now_ms, offload)
        if request.code in self.writes:
            return self._after(answer)
        return answer

    def _after(self, answer):
        if answer.__class__ is Pending:
            pending = answer
            fail = pending.fail
            return Pending(pending.work, lambda result: self._after(pending.finish(result)),
                           pending.lane, None if fail is None else (lambda exc: self._after(fail(exc))),
                           pending.cancel, pending.budget)
        queued = self._queued()
        if queued is not None:
            sequence = self._sequence
            return Pending(lambda: queued.addCallback(lambda _: sequence()), lambda _: answer,
                           REPLICAS)
        seq = self._sequence()
        if not self._barrier.holds(seq):
            return answer
        return Pending(lambda: seq, lambda _: answer, REPLICAS)


class ForwardedRequests:
    """The writer's side of forwarding: each forwarded request is decoded and processed (by
    the :class:`BarrierProcessor`) for its connection, a
    :class:`~rocketpy.transport.remotechannels.RemoteConnection` of ``channels``; Pending work
    runs on ``pools`` (lane -> pool, the writer factory's), a full pool's refusal is answered
    by ``governor.refuse_work``; the answer goes back with ``reply(worker, id, code, frame)``.
    An answer whose connection closed meanwhile is not computed (as a closed connection's
    Pending is not finished): its id is answered empty."""

    log = Logger(observer=logs.observer)

    def __init__(self, processor, channels, pools, governor, clock, max_frame_length, reply):
        self.processor = processor
        self.channels = channels
        self.pools = pools
        self.governor = governor
        self.clock = clock
        self.max_frame_length = max_frame_length
        self.reply = reply
        self._dialect = processor.header_dialect
        #: forwarded requests served, since start
        self.served = 0

    def received(self, worker, fid, fields, frame):
        remote = self.channels.get(int(fields.get("channel", "0")))
        if remote is None or remote.closing:
            return self.reply(worker, fid, None, b"")
        try:
            request = decode_frame(frame, self.max_frame_length, self._dialect)
        except RemotingCodecError as exc:   # the worker decoded it: not a peer's fault
            self.log.error("a forwarded request from worker {worker} does not decode: {why}",
                           worker=worker, why=exc)
            return self.reply(worker, fid, None, b"")
        self.served += 1
        remote.peer_language, remote.peer_version = request.language, request.version
        now_ms = int(self.clock.seconds() * 1000)
        try:
            response = self.processor.process(request, remote.channel, now_ms, offload=True)
        except Exception:
            self.log.failure("process request exception, remoteAddr: {addr}, request: "
                             "{request}", addr=remote.remote_addr, request=request)
            response = None if request.flag & FLAG_ONEWAY else request.create_response(
                SYSTEM_ERROR, remark="internal error, see the server log")
        self._run(response, request, remote, worker, fid)
        return None

    def _run(self, response, request, remote, worker, fid):
        while response.__class__ is Pending:
            pool = self.pools.get(response.lane)
            if pool is None:
                response = response.step()
                continue
            d = pool.submit(response.work, host_of(remote), response.cancel, response.budget,
                            len(request.body or b""))
            if d is None:
                return self._busy(remote, request, pool, worker, fid)
            d.addCallbacks(self._finished, self._failed,
                           callbackArgs=(response.finish, request, remote, worker, fid),
                           errbackArgs=(response, request, remote, worker, fid, pool))
            return None
        if isinstance(response, Deferred):
            response.addCallbacks(self._answer, self._late_failure,
                                  callbackArgs=(request, worker, fid),
                                  errbackArgs=(request, worker, fid))
            return None
        return self._answer(response, request, worker, fid)

    def _finished(self, result, finish, request, remote, worker, fid):
        if remote.closing:   # gone: nothing is applied, nothing answered
            return self._answer(None, request, worker, fid)
        try:
            response = finish(result)
        except Exception as exc:
            self.log.failure("process request exception, remoteAddr: {addr}",
                             addr=remote.remote_addr)
            response = None if request.flag & FLAG_ONEWAY else request.create_response(
                SYSTEM_ERROR, remark=str(exc))
        return self._run(response, request, remote, worker, fid)

    def _failed(self, failure, pending, request, remote, worker, fid, pool):
        if failure.check(WorkDisplaced):
            return self._busy(remote, request, pool, worker, fid)
        if pending.fail is None:
            return self._late_failure(failure, request, worker, fid)
        return self._finished(failure.value, pending.fail, request, remote, worker, fid)

    def _busy(self, remote, request, pool, worker, fid):
        """``pool`` refused the work: SYSTEM_BUSY, as for a connection of the writer's own."""
        frame = self.governor.refuse_work(remote, request, pool)
        return self.reply(worker, fid, int(ResponseCode.SYSTEM_BUSY), frame or b"")

    def _late_failure(self, failure, request, worker, fid):
        self.log.failure("process request exception", failure)
        response = None if request.flag & FLAG_ONEWAY else request.create_response(
            SYSTEM_ERROR, remark=failure.getErrorMessage())
        return self._answer(response, request, worker, fid)

    def _answer(self, response, request, worker, fid):
        if response is None or request.flag & FLAG_ONEWAY:
            return self.reply(worker, fid, None, b"")
        return self.reply(worker, fid, getattr(response, "code", None),
                          encode_answer(response, request))
