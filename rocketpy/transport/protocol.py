"""Transport layer: one server connection (Java ``NettyRemotingServer``'s channel pipeline:
``HandshakeHandler``, ``TlsModeHandler``, ``NettyDecoder``, ``IdleStateHandler``,
``NettyConnectManageHandler``, ``NettyServerHandler``). The protocol ties small parts together,
each written once: its states and pause reasons (:mod:`~rocketpy.transport.connstate`), the TLS
sniffer (:mod:`~rocketpy.transport.sniff`), the frame receiver
(:mod:`~rocketpy.transport.receiver`) and the adapter for Twisted internals
(:mod:`~rocketpy.transport.tuning`). What it does itself:

* TLS mode on the first byte (0x16, a handshake): start TLS or refuse, per ``tls.server.mode``.
* A length over the limit closes the connection before any of that frame is buffered.
* Requests are answered in arrival order, one write per read (Java may answer
  pipelined requests out of order; in order is one of the orders it can produce). A Deferred
  answer is written when it fires. Cached answers, most of the traffic, come from the compiled
  hit path a run at a time (:attr:`~rocketpy.transport.answercache.AnswerCache.answer_run`);
  the frame that ends a run, and every frame without the kernel, is served here one by one.
* Work off the reactor thread (:mod:`rocketpy.transport.offload`): a
  :class:`~rocketpy.namesrv.pending.Pending` answer (a big REGISTER_BROKER body, a KV or config
  write) runs its ``work`` on its lane's pool while this connection is paused -- its later frames
  wait, so a broker's REGISTER and QUERY_DATA_VERSION, or a PUT and GET, stay in order -- and
  everyone else is served; ``finish`` runs on the reactor, then the connection resumes. A
  connection gone by then gets nothing (its registration is not applied; a write still happens).
  Work the decode pool has no place for waits in its lobby (withdrawn if the connection
  closes first); a full lobby answers SYSTEM_BUSY (at once, or later for work that gave its
  place to another host's and found no room there); a lane without a pool runs at once.
* Flow control (Java turns auto-read off in ``channelWritabilityChanged``): the protocol is a
  streaming producer for its transport; paused for any reason (the peer not reading past the
  high-water mark, the turn's budget spent, work on a pool), it neither reads nor serves
  buffered frames, so a client that never reads costs at most one read's answers.
* A frame that does not decode is logged and closes that one connection (as ``NettyDecoder``).
* Idle (``IdleStateHandler`` ``ALL_IDLE``, ``serverChannelMaxIdleTimeSeconds``) closes the
  connection and reports ``idle``, then ``close``.
* Half-close (``IHalfCloseableProtocol``): a peer that shuts its sending side still gets every
  answer, then the connection closes.

Channel events go to an :class:`~rocketpy.transport.interfaces.IChannelEventListener`."""
from functools import partial
from time import perf_counter

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionAborted, ConnectionDone
from twisted.internet.interfaces import (IHalfCloseableProtocol, IPushProducer, ISSLTransport,
                                         ITLSTransport)
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger
from zope.interface import implementer

from ..namesrv.pending import Pending
from ..remoting.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from ..remoting.errors import RemotingCodecError
from ..remoting.fastjson import FASTJSON_1_2_83
from ..remoting.frame import decode_frame
from ..remoting.layout import frame_at, whole_frames
from .connstate import DECODE, DRAINING, FLOW, OVERLOAD, SNIFFING, ConnectionState, PauseReasons
from .interfaces import IGovernedConnection
from .limits import LARGE_FRAME, NOT_SHED
from .offload import WorkDisplaced
from .receiver import FrameReceiver
from .sniff import PLAIN, TLS, sniff, start_tls
from .tuning import READ_AHEAD_MAX, TransportTuning
from . import logs

__all__ = ["RemotingServerProtocol", "format_address", "READ_AHEAD_MAX"]

SYSTEM_ERROR = 1
#: Answers are flushed to the transport at least every this many bytes, so a pause can stop
#: serving the rest of a read before it is all answered.
FLUSH_BYTES = 256 * 1024
#: Seconds a closed connection may take to flush its answers before it is reset.
CLOSE_GRACE = 5.0


def format_address(address):
    """``"host:port"`` of a Twisted address, as Java's ``RemotingHelper.parseChannelRemoteAddr``."""
    host = getattr(address, "host", None)
    port = getattr(address, "port", None)
    if host is not None and port is not None:
        return f"{host}:{port}"
    name = getattr(address, "name", None)
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    return name or ""


@implementer(IPushProducer, IHalfCloseableProtocol, IGovernedConnection)
class RemotingServerProtocol(Protocol):
    """One RocketMQ remoting connection on the server side: its life is a
    :class:`~rocketpy.transport.connstate.ConnectionState`, why it is not read a
    :class:`~rocketpy.transport.connstate.PauseReasons`, what it holds of the next frame a
    :class:`~rocketpy.transport.receiver.FrameReceiver`."""

    log = Logger(observer=logs.observer)

    channel = None
    remote_addr = ""
    #: language and version of the peer's latest request (the status page shows them)
    peer_language = None
    peer_version = None

    def __init__(self, server):
        self.server = server
        self._pools = server.pools
        self._process = server.processor.process
        if self._pools:  # the processor may hand back Pending work for a pool
            self._process = partial(self._process, offload=True)
        self._clock = server.clock
        self._max = server.max_frame_length
        #: how JSON headers are read: the processor's release's fastjson (the newest without one)
        self._dialect = getattr(server.processor, "header_dialect", FASTJSON_1_2_83)
        self._cache = server.answer_cache
        self._metrics = server.metrics
        self._gate = server.governor  # limits.LoadGovernor: turn budget, shedding, frame memory
        self._state = ConnectionState()
        self._pause = PauseReasons()
        self._tuning = None
        self._frames = None
        self._holding = False   # a large partial frame is accounted with the governor
        self._frame_started = 0.0
        self._last_activity = 0.0
        self._abort_call = None
        self._close_reason = None
        self._waiting_on = None   # (pool.withdraw, Deferred) of work that may wait in a lobby

    # -- what others read --------------------------------------------------------------------

    @property
    def state(self):
        """Where the connection is in :data:`~rocketpy.transport.connstate.TRANSITIONS`."""
        return self._state.state

    @property
    def closing(self):
        """Closed by us or gone: nothing more is read, served or written."""
        return self._state.closing

    def is_closing(self):
        """(``IGovernedConnection``) True once it is closing: the governor drops it."""
        return self._state.closing

    @property
    def paused(self):
        """Not read, for at least one reason."""
        return bool(self._pause)

    @property
    def throttled(self):
        """This turn's request budget is spent: not read until the governor's next turn."""
        return OVERLOAD in self._pause

    @property
    def waiting(self):
        """A request's work is on a pool: not read again until it is answered."""
        return DECODE in self._pause

    @property
    def read_closed(self):
        """The peer shut its sending side: answer what it sent, then close."""
        return self._state.state == DRAINING

    # -- connection life -------------------------------------------------------------------

    def connectionMade(self):
        server = self.server
        transport = self.transport
        self.remote_addr = format_address(transport.getPeer())
        self.channel = server.open_channel(self)
        self._last_activity = self._clock.seconds()
        self._tuning = TransportTuning(transport, server.send_buffer, server.receive_buffer,
                                       server.write_high_water_mark)
        self._frames = FrameReceiver(self._tuning)
        transport.registerProducer(self, True)
        if ISSLTransport.providedBy(transport):  # TLS already (an ssl: endpoint): no sniffing
            self._state.fire(TLS)
        self.log.debug("NETTY SERVER PIPELINE: channelActive, the channel[{addr}]", addr=self.remote_addr)
        if server.idle_seconds > 0:
            server.idle_schedule.schedule(self, server.idle_seconds, self._check_idle)
        server.fire("on_channel_connect", self)

    def connectionLost(self, reason=connectionDone):
        self._state.fire("lost")
        if self._frames is not None:
            self._frames.clear()
        self._cancel_idle()
        if self._abort_call is not None and self._abort_call.active():
            self._abort_call.cancel()
        if self._waiting_on is not None:   # its work, still waiting for a place, is not done
            withdraw, waiting = self._waiting_on
            self._waiting_on = None
            withdraw(waiting)
        server = self.server
        server.close_channel_record(self)
        if self._close_reason is None and not reason.check(ConnectionDone, ConnectionAborted):
            self.log.warn("NETTY SERVER PIPELINE: exceptionCaught {addr}: {why}",
                          addr=self.remote_addr, why=reason.getErrorMessage())
            server.fire("on_channel_exception", self)
        self.log.debug("NETTY SERVER PIPELINE: channelInactive, the channel[{addr}]", addr=self.remote_addr)
        server.fire("on_channel_close", self)

    def readConnectionLost(self):
        """The peer half-closed (``shutdown(SHUT_WR)``) after its requests: they are still
        answered -- including one waiting for a pool, or queued behind a pause -- and then the
        connection is closed. (Without this Twisted closes at once and the answers are lost.)"""
        self._state.fire("read_closed")
        self._close_if_answered()

    def writeConnectionLost(self):
        """Our sending side closed (we never half-close it ourselves): nothing to do."""

    def _close_if_answered(self):
        """While draining: close once nothing the peer sent is left to answer -- no work on a
        pool, no whole frame held (a frame still incomplete never will be)."""
        if (self._state.state == DRAINING and DECODE not in self._pause
                and not self._frames.complete):
            self.close("peer closed")

    def close(self, why):
        """Close this connection, logging ``why`` (Java ``RemotingHelper.closeChannel``): written answers
        are flushed and the peer gets a FIN, as with Netty's ``close()``; a peer that does not read them
        is reset after ``CLOSE_GRACE`` seconds, so a dead peer cannot pin the connection open."""
        if not self._state.fire("close"):
            return
        self._close_reason = why
        self._frames.clear()
        self._cancel_idle()
        self.transport.unregisterProducer()
        self.transport.loseConnection()
        self._abort_call = self._clock.callLater(CLOSE_GRACE, self.transport.abortConnection)

    def _cancel_idle(self):
        self.server.idle_schedule.remove(self)

    def _check_idle(self):
        if self.closing:
            return
        idle = self.server.idle_seconds
        now = self._clock.seconds()
        quiet_until = self._last_activity + idle
        # slow loris: a frame still incomplete after the idle time, however it trickles in
        slow_until = (self._frame_started + idle if self._frames.incomplete and not self._pause
                      else quiet_until)
        if now < quiet_until and now < slow_until:
            # the deadline itself, compared as computed: a delay ``idle - quiet`` could round
            # back to now and have the check come due again at once
            self.server.idle_schedule.schedule_at(self, min(quiet_until, slow_until),
                                                  self._check_idle)
            return
        if now >= quiet_until:
            self._gate.expired(self, "idle", "NETTY SERVER PIPELINE: IDLE exception [{peer}]")
            self.close("idle")
        else:
            self._gate.expired(self, "slow frame", "closing {peer}: a frame still incomplete after "
                               "{seconds} s (serverChannelMaxIdleTimeSeconds)", seconds=idle)
            self.close("slow frame")
        self.server.fire("on_channel_idle", self)

    # -- pausing: one set of reasons -----------------------------------------------------------

    def _paused_for(self, reason):
        """Stop reading for ``reason`` (the transport is told at the first reason only)."""
        if self._pause.pause(reason) and not self.closing:
            self.transport.pauseProducing()

    def _resumed_from(self, reason, check_peer=False):
        """``reason`` no longer holds: read and serve again if it was the last one; then, while
        draining, close once everything is answered."""
        if self._pause.resume(reason) and not self.closing:
            if check_peer and self._tuning.peer_gone():
                self.transport.abortConnection()  # a queued socket was not read: anyone there?
                return
            self.transport.resumeProducing()
            if self._frames.complete:
                known = self._frames.frames
                self._consume(self._frames.take(), known, True)
        self._close_if_answered()

    def pauseProducing(self):
        """The peer does not read its answers (Java turns auto-read off in
        ``channelWritabilityChanged``): neither read nor serve buffered frames."""
        if FLOW not in self._pause:
            self.log.debug("Channel[{addr}] auto-read is disabled: the peer is not reading",
                           addr=self.remote_addr)
        self._paused_for(FLOW)

    def resumeProducing(self):
        self._resumed_from(FLOW)

    def unthrottle(self):
        """A new turn (called by the governor): serve what waits, read again."""
        self._resumed_from(OVERLOAD, check_peer=True)

    def stopProducing(self):
        self._state.fire("lost")
        if self._frames is not None:
            self._frames.clear()

    # -- input ------------------------------------------------------------------------------

    def dataReceived(self, data):
        if self._state.closing:
            return
        self._metrics.bytes_received += len(data)
        self._last_activity = self._clock.seconds()
        if self._state.state == SNIFFING and not self._sniff(data):
            return
        data = self._frames.receive(data, bool(self._pause))
        if data is not None:
            self._consume(data)

    def _sniff(self, data):
        """The first byte decides (:mod:`rocketpy.transport.sniff`); True when ``data`` is
        plain remoting to serve."""
        server = self.server
        context = server.tls_context_factory
        verdict = sniff(data[0], server.tls_mode,
                        context is not None and ITLSTransport.providedBy(self.transport))
        if verdict is PLAIN:
            return self._state.fire(PLAIN)
        if verdict is TLS:
            self._state.fire(TLS)
            self.log.debug("TLS started for {addr}", addr=self.remote_addr)
            start_tls(self.transport, context, data)  # decrypted bytes come back to us
            return False
        self._gate.refuse(self.remote_addr, verdict.reason, verdict.message)
        self.close(verdict.reason)
        return False

    def _consume(self, data, known=None, held=False):
        """Serve every whole frame in ``data`` (``known`` of them, when that was counted; what
        the connection ``held`` while paused, or a fresh read); keep the rest for the next
        read."""
        cache = self._cache
        run = cache.answer_run if cache is not None else None  # hits in C, a run per call
        gate = self._gate  # this turn's budget: serve, (shed,) then wait (transport/limits.py)
        serve, stop = gate.allowance(self, data, held)
        size = len(data)
        started = perf_counter()
        ran = run is not None and serve > 0
        if ran:  # most reads are route queries with cached answers, all of them: done at once,
            # sent on the socket by the kernel when nothing waits before them (transport/tuning.py)
            # (a read was the last activity: dataReceived noted it just now)
            tuning = self._tuning
            direct = tuning.direct()
            answered = run(data, 0, serve, FLUSH_BYTES, self._max, direct)
            if answered is not None and answered[1] == size:
                rest, _, n, sent = answered
                metrics = self._metrics
                metrics.cached_answers(n, perf_counter() - started)
                metrics.bytes_sent += sent + len(rest)
                gate.spent(self, n, 0)
                if rest:
                    if direct < 0:
                        tuning.write(rest)
                    else:
                        tuning.queue(rest)
                if self._holding:
                    self._hold_frame(0)
                return
        pos = 0
        out = []
        out_bytes = 0
        limit = self._max
        handle = self._handle
        lookup = cache.lookup if cache is not None else None
        taken = 0
        throttle = False
        pause = self._pause
        state = self._state
        metrics = self._metrics  # cached answers are timed per read: see transport/metrics.py
        slow, hits = metrics.processed_seconds, 0
        after_run = False
        while pos < size:
            answer = None
            if run is not None and taken < serve and not after_run:
                # the hits from here on, up to the first frame that is not one: that frame (if
                # any) takes the per-frame path next, as every frame does without the kernel
                if ran:
                    ran = False  # (the run from the start, above)
                else:
                    answered = run(data, pos, serve - taken, FLUSH_BYTES - out_bytes, limit)
                if answered is not None:  # (nothing sent: no descriptor given)
                    answer, pos, n, _ = answered
                    taken += n
                    hits += n
            after_run = answer is not None
            if answer is None:
                end = frame_at(data, pos, size, limit)
                if end < 0:
                    gate.bad_frame(self, "frame length", "decode exception, {peer}: frame length "
                                   "{n} (limit {limit}); closing", n=-end, limit=limit)
                    if out:
                        self._write(out)
                    self.close("frame length")
                    return
                if end == 0 or end > size:
                    break
                if taken >= stop:  # shed enough this turn: the rest waits for the next one
                    throttle = True
                    break
                frame = data if pos == 0 and end == size else data[pos:end]
                pos = end
                taken += 1
                if taken > serve:  # past a full queue's share: SYSTEM_BUSY [OVERLOAD], unprocessed
                    answer = gate.shed(self, frame)
                    if answer is NOT_SHED:
                        answer = handle(frame, None)
                elif lookup is None:
                    answer = handle(frame, None)
                else:  # the cached-answer shortcut, inlined: it is most of the traffic
                    answer = lookup(frame)
                    if answer.__class__ is not bytes:
                        answer = handle(frame, answer)
                    else:
                        hits += 1
            if answer is not None:
                out.append(answer)
                out_bytes += len(answer)
                if out_bytes >= FLUSH_BYTES:
                    self._write(out)
                    out = []
                    out_bytes = 0
            if pause or state.closing:
                break
        if hits:
            metrics.cached_answers(hits, perf_counter() - started - (metrics.processed_seconds - slow))
        if taken:
            gate.spent(self, min(taken, serve), taken - serve if taken > serve else 0)
        if out:
            self._write(out)
        if pos < size and not self.closing:
            # (a throttled read keeps its rest as a view: no copy into fresh pages per turn)
            rest = (memoryview(data)[pos:] if throttle else data[pos:]) if pos else data
            waiting = None
            if throttle:  # the requests it holds: counted once a read, then less those served
                waiting = known - taken if known is not None else whole_frames(rest)
            self._frames.keep(rest, waiting)
            self._frame_started = self._last_activity
            need = self._frames.need
            if (need >= LARGE_FRAME or self._holding) and not self._hold_frame(need):
                return
            if throttle:
                self._paused_for(OVERLOAD)
                gate.throttle(self, waiting)
        elif self._holding:
            self._hold_frame(0)

    def _hold_frame(self, size):
        """Account a partly received large frame (``serverMaxPendingFrameBytes``)."""
        self._holding = size >= LARGE_FRAME
        if self._gate.hold_frame(self, size):
            return True
        self._holding = False
        self.close("frame memory")
        return False

    def _write(self, answers):
        self._last_activity = self._clock.seconds()
        data = answers[0] if len(answers) == 1 else b"".join(answers)
        self._metrics.bytes_sent += len(data)
        # at once when nothing is queued, and with the usual high-water mark, even for a late
        # (Deferred) answer while a big frame is incomplete (transport/tuning.py)
        self._tuning.write(data)

    # -- one frame ----------------------------------------------------------------------------

    def _handle(self, frame, key):
        """Decode and process one frame; the encoded answer, or None. ``key`` is what the answer
        cache's ``lookup`` returned for it (store the answer under it), or None."""
        started = perf_counter()
        try:
            request = decode_frame(frame, self._max, self._dialect)
        except RemotingCodecError as exc:
            self._gate.bad_frame(self, "decode", "decode exception, {peer}: {why}; closing the "
                                 "connection", why=exc)
            self.close("decode")
            return None
        self.peer_language, self.peer_version = request.language, request.version
        flag = request.flag
        if flag & FLAG_RESPONSE:
            self.log.warn("receive response, but not matched any request, {addr} opaque {opaque}",
                          addr=self.remote_addr, opaque=request.opaque)
            return None
        now_ms = int(self._last_activity * 1000)
        try:
            response = self._process(request, self.channel, now_ms)
        except Exception:
            self.log.failure("process request exception, remoteAddr: {addr}, request: {request}",
                             addr=self.remote_addr, request=request)
            if flag & FLAG_ONEWAY:
                return None
            response = request.create_response(SYSTEM_ERROR, remark="internal error, see the server log")
            key = None
        while response.__class__ is Pending:
            pool = self._pools.get(response.lane)
            if pool is not None:
                return self._offload(pool, response, request, started)
            response = response.step()
        if response is None or flag & FLAG_ONEWAY:
            self._metrics.request(request.code, None, perf_counter() - started)
            return None
        if isinstance(response, Deferred):
            response.addCallbacks(self._late_answer, self._late_failure,
                                  callbackArgs=(request,), errbackArgs=(request,))
            return None
        if key is not None and isinstance(response, RemotingCommand):
            answer = self._cache.answer(key, request, response)
        else:
            answer = encode_answer(response, request)
        self._metrics.request(request.code, getattr(response, "code", -1), perf_counter() - started)
        return answer

    def _late_answer(self, response, request):
        if response is not None and not self.closing:
            self._write([encode_answer(response, request)])

    def _late_failure(self, failure, request):
        self.log.failure("process request exception, remoteAddr: {addr}", failure, addr=self.remote_addr)
        if not self.closing and not request.flag & FLAG_ONEWAY:
            self._write([request.create_response(SYSTEM_ERROR, remark=failure.getErrorMessage()).encode()])

    # -- work on a pool (decode, writer) ---------------------------------------------------

    def _offload(self, pool, pending, request, started):
        """Run ``pending.work`` on ``pool`` (the pool of its lane; the peer's host is its queue
        there) and stop reading until it is answered; the SYSTEM_BUSY answer when the pool is
        full. Returns what ``_handle`` returns."""
        d = self._submit(pool, pending, request, started)
        if d is None:
            return self._gate.refuse_work(self, request, pool)
        self._paused_for(DECODE)
        d.addErrback(self._late_failure, request)
        d.addCallback(self._done_waiting)
        return None

    def _submit(self, pool, pending, request, started):
        """``pending.work`` submitted to ``pool``, its finish (or failure) chained; None when
        the pool refuses it."""
        d = pool.submit(pending.work, getattr(self.transport.getPeer(), "host", None),
                        pending.cancel, pending.budget, len(request.body or b""))
        if d is not None:
            withdraw = getattr(pool, "withdraw", None)   # (a pool with a lobby)
            self._waiting_on = None if withdraw is None else (withdraw, d)
            d.addCallbacks(self._finish, self._failed,
                           callbackArgs=(pending.finish, request, started),
                           errbackArgs=(pending, request, started, pool))
        return d

    def _finish(self, result, finish, request, started):
        """Back on the reactor thread: apply the result and answer, unless the peer is gone. A
        finish that hands back more work (a change to write after a decode) has it run on its
        own lane first, the connection still paused (the Deferred returned is waited for)."""
        self._waiting_on = None
        if self.closing:
            return
        response = finish(result)
        while response.__class__ is Pending:
            pool = self._pools.get(response.lane)
            if pool is None:
                response = response.step()
                continue
            d = self._submit(pool, response, request, started)
            if d is None:
                self._refused_later(request, pool)
            return d
        code = None if response is None else getattr(response, "code", -1)
        self._metrics.request(request.code, code, perf_counter() - started)
        self._late_answer(response, request)

    def _failed(self, failure, pending, request, started, pool):
        """The work raised: the Pending's own answer for that (``fail``), or a SYSTEM_ERROR; work
        the pool gave up for another host's (``WorkDisplaced``) is answered as a full pool's."""
        self._waiting_on = None
        if failure.check(WorkDisplaced):
            return self._refused_later(request, pool)
        if pending.fail is None:
            return failure
        return self._finish(failure.value, pending.fail, request, started)

    def _refused_later(self, request, pool):
        """``pool`` refused (or gave up) work of a request already waiting: its SYSTEM_BUSY."""
        answer = self._gate.refuse_work(self, request, pool)
        if answer is not None and not self.closing:
            self._write([answer])

    def _done_waiting(self, _):
        self._resumed_from(DECODE)


def encode_answer(response, request):
    """The answer's frame bytes with the request's opaque and the response flag (Java
    ``writeResponse``); a processor may hand back ready bytes (an answer whose opaque it patched)."""
    if isinstance(response, (bytes, bytearray)):
        return response
    encode_for = getattr(response, "encode_for", None)
    if encode_for is not None:
        return encode_for(request.opaque)
    response.opaque = request.opaque
    response.flag |= FLAG_RESPONSE
    return response.encode()
