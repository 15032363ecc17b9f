"""Transport layer: one server connection (Java ``NettyRemotingServer``'s channel pipeline:
``HandshakeHandler``, ``TlsModeHandler``, ``NettyDecoder``, ``IdleStateHandler``,
``NettyConnectManageHandler``, ``NettyServerHandler``). One small protocol does the same jobs:

* TLS mode on the first byte (0x16, a handshake): start TLS or refuse, per ``tls.server.mode``.
* Framing with one copy: a partial frame's chunks are joined once it is complete (a 1.5 MB
  registration costs one join, not a reallocation per read), and while a big frame is incomplete
  the socket is read in pieces as big as what is missing (up to ``READ_AHEAD_MAX``). A length
  over the limit closes the connection before any of that frame is buffered.
* Requests are answered in arrival order, one ``writeSequence`` per read (Java may answer
  pipelined requests out of order; in order is one of the orders it can produce). A Deferred
  answer is written when it fires.
* Work off the reactor thread (:mod:`rocketpy.transport.offload`): a
  :class:`~rocketpy.namesrv.pending.Pending` answer (a big REGISTER_BROKER body, a KV or config
  write) runs its ``work`` on its lane's pool while this connection is paused -- its later frames
  wait, so a broker's REGISTER and QUERY_DATA_VERSION, or a PUT and GET, stay in order -- and
  everyone else is served; ``finish`` runs on the reactor, then the connection resumes. A
  connection gone by then gets nothing (its registration is not applied; a write still happens).
  A full decode pool answers SYSTEM_BUSY; a lane without a pool runs at once.
* Flow control (Java turns auto-read off in ``channelWritabilityChanged``): the protocol is a
  streaming producer for its transport; paused past the high water mark, it neither reads nor
  serves buffered frames, so a client that never reads costs at most one read's answers.
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
from ..remoting.layout import bytes_needed, frame_at
from .limits import LARGE_FRAME, NOT_SHED, peer_gone
from .tls import HANDSHAKE_MAGIC, TlsMode

__all__ = ["RemotingServerProtocol", "format_address"]

SYSTEM_ERROR = 1
#: Answers are flushed to the transport at least every this many bytes, so a pause can stop
#: serving the rest of a read before it is all answered.
FLUSH_BYTES = 256 * 1024
#: Seconds a closed connection may take to flush its answers before it is reset.
CLOSE_GRACE = 5.0
#: Largest socket read while the rest of a big frame is awaited (``_read_ahead``).
READ_AHEAD_MAX = 1 << 20


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


@implementer(IPushProducer, IHalfCloseableProtocol)
class RemotingServerProtocol(Protocol):
    """One RocketMQ remoting connection on the server side."""

    log = Logger()

    channel = None
    remote_addr = ""
    closing = False
    paused = False
    _read_size = 0          # the transport's own read size (0: not adjustable)
    _reading_ahead = False  # the read size is raised for a big incomplete frame
    #: this turn's request budget is spent: not read again until the next turn (limits.py)
    throttled = False
    #: a request's work is on the decode pool: not read again until it is answered
    waiting = False
    #: the peer shut its sending side: answer what it sent, then close
    read_closed = False
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
        self._flow_paused = False
        self._holding = False
        self._frame_started = 0.0
        self._chunks = []
        self._have = 0
        self._need = 0
        self._sniff = False
        self._last_activity = 0.0
        self._idle_call = None
        self._abort_call = None
        self._close_reason = None
        self._producing = False

    # -- connection life -------------------------------------------------------------------

    def connectionMade(self):
        server = self.server
        self.remote_addr = format_address(self.transport.getPeer())
        self.channel = server.open_channel(self)
        self._last_activity = self._clock.seconds()
        server.configure_transport(self.transport)
        size = getattr(self.transport, "bufferSize", None)  # tcp/unix: recv size (_read_ahead)
        self._read_size = size if type(size) is int and size > 0 else 0
        self.transport.registerProducer(self, True)
        self._producing = True
        self._sniff = not ISSLTransport.providedBy(self.transport)
        self.log.debug("NETTY SERVER PIPELINE: channelActive, the channel[{addr}]", addr=self.remote_addr)
        if server.idle_seconds > 0:
            self._idle_call = self._clock.callLater(server.idle_seconds, self._check_idle)
        server.fire("on_channel_connect", self)

    def connectionLost(self, reason=connectionDone):
        self.closing = True
        self._chunks = []
        self._cancel_idle()
        if self._abort_call is not None and self._abort_call.active():
            self._abort_call.cancel()
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
        self.read_closed = True
        self._close_if_answered()

    def writeConnectionLost(self):
        """Our sending side closed (we never half-close it ourselves): nothing to do."""

    def _close_if_answered(self):
        """After a half-close: close once nothing the peer sent is left to answer (a frame
        still incomplete never will be)."""
        if (self.read_closed and not self.closing and not self.waiting
                and not (self.paused and self._chunks and self._have >= self._need)):
            self.close("peer closed")

    def close(self, why):
        """Close this connection, logging ``why`` (Java ``RemotingHelper.closeChannel``): written answers
        are flushed and the peer gets a FIN, as with Netty's ``close()``; a peer that does not read them
        is reset after ``CLOSE_GRACE`` seconds, so a dead peer cannot pin the connection open."""
        if self.closing:
            return
        self.closing = True
        self._close_reason = why
        self._chunks = []
        self._cancel_idle()
        if self._producing:
            self._producing = False
            self.transport.unregisterProducer()
        self.transport.loseConnection()
        self._abort_call = self._clock.callLater(CLOSE_GRACE, self.transport.abortConnection)

    def _cancel_idle(self):
        if self._idle_call is not None and self._idle_call.active():
            self._idle_call.cancel()
        self._idle_call = None

    def _check_idle(self):
        self._idle_call = None
        if self.closing:
            return
        idle = self.server.idle_seconds
        now = self._clock.seconds()
        quiet = now - self._last_activity
        # slow loris: a frame still incomplete after the idle time, however it trickles in
        slow = (now - self._frame_started
                if self._chunks and self._have < self._need and not self.paused else 0.0)
        if quiet < idle and slow < idle:
            self._idle_call = self._clock.callLater(idle - max(quiet, slow), self._check_idle)
            return
        if quiet >= idle:
            self._gate.expired(self, "idle", "NETTY SERVER PIPELINE: IDLE exception [{peer}]")
            self.close("idle")
        else:
            self._gate.expired(self, "slow frame", "closing {peer}: a frame still incomplete after "
                               "{seconds} s (serverChannelMaxIdleTimeSeconds)", seconds=idle)
            self.close("slow frame")
        self.server.fire("on_channel_idle", self)

    # -- producer (flow control) -----------------------------------------------------------

    def pauseProducing(self):
        self._flow_paused = True
        if not self.paused:
            self.paused = True
            self.log.debug("Channel[{addr}] auto-read is disabled: the peer is not reading",
                           addr=self.remote_addr)
            self.transport.pauseProducing()

    def resumeProducing(self):
        self._flow_paused = False
        if self.paused and not self.closing and not self.throttled and not self.waiting:
            self._resume()

    def _throttle(self):
        """This turn's budget is spent: stop reading until the governor's next turn."""
        self.throttled = True
        if not self.paused:
            self.paused = True
            self.transport.pauseProducing()
        self._gate.throttle(self)

    def unthrottle(self):
        """A new turn (called by the governor): serve what waits, read again."""
        self.throttled = False
        if self.paused and not self.closing and not self._flow_paused and not self.waiting:
            if peer_gone(self.transport):  # a queued socket is not read: is anyone still there?
                self.transport.abortConnection()
                return
            self._resume()

    def _resume(self):
        self.paused = False
        self.transport.resumeProducing()
        if self._chunks and self._have >= self._need:
            data = b"".join(self._chunks)
            self._chunks = []
            self._consume(data)
        if self.read_closed:
            self._close_if_answered()

    def stopProducing(self):
        self.closing = True
        self._chunks = []

    # -- input ------------------------------------------------------------------------------

    def dataReceived(self, data):
        if self.closing:
            return
        self._metrics.bytes_received += len(data)
        self._last_activity = self._clock.seconds()
        if self._sniff:
            self._sniff = False
            if not self._tls_mode(data):
                return
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need or self.paused:
                if self._reading_ahead:  # read no further than this frame's end
                    self._read_ahead(self._need - self._have)
                return
            data = b"".join(self._chunks)
            self._chunks = []
        elif self.paused:
            self._chunks = [data]
            self._have = len(data)
            self._need = 0
            return
        self._consume(data)

    def _tls_mode(self, data):
        """Java ``TlsModeHandler``; True when ``data`` should be read as plain remoting."""
        server = self.server
        mode = server.tls_mode
        if data[0] == HANDSHAKE_MAGIC:
            if mode is TlsMode.DISABLED:
                return self._refuse_tls("tls disabled", "Clients intend to establish an SSL "
                                        "connection while this server is running in SSL disabled "
                                        "mode ({peer})")
            context = server.tls_context_factory
            if context is None or not ITLSTransport.providedBy(self.transport):
                return self._refuse_tls("no tls context", "Trying to establish an SSL connection "
                                        "but sslContext is null ({peer})")
            self.transport.startTLS(context)
            self.log.debug("TLS started for {addr}", addr=self.remote_addr)
            # The TLS layer now sits between the socket and us: feed it the bytes we peeked at.
            self.transport.protocol.dataReceived(data)
            return False
        if mode is TlsMode.ENFORCING:
            return self._refuse_tls("tls enforcing", "Clients intend to establish an insecure "
                                    "connection while this server is running in SSL enforcing "
                                    "mode ({peer})")
        return True

    def _refuse_tls(self, reason, message):
        """Log and count a connection the TLS mode refuses, close it; False: nothing to read."""
        self._gate.refuse(self.remote_addr, reason, message)
        self.close(reason)
        return False

    def _read_ahead(self, missing):
        """Let the next reads take up to ``missing`` bytes (a big frame's rest), or go back to the usual
        size (``missing`` 0). Twisted reads ``bufferSize`` (64 KiB) per ``recv``: a 1.5 MB registration
        took 23 reads, each a reactor wake-up, and a read could end inside the next frame (a copy to
        split it off). The attribute is also the write high-water mark, so it is back to normal before
        anything is written."""
        if missing > self._read_size:
            self._reading_ahead = True
            self.transport.bufferSize = min(missing, READ_AHEAD_MAX)
        elif self._reading_ahead:
            self._reading_ahead = False
            self.transport.bufferSize = self._read_size

    def _consume(self, data):
        """Serve every whole frame in ``data``; keep the rest for the next read."""
        if self._reading_ahead:
            self._read_ahead(0)
        size = len(data)
        pos = 0
        out = []
        out_bytes = 0
        limit = self._max
        handle = self._handle
        lookup = self._cache.lookup if self._cache is not None else None
        gate = self._gate  # this turn's budget: serve, then shed, then stop (transport/limits.py)
        serve, stop = gate.allowance(self, data)
        taken = 0
        throttle = False
        metrics = self._metrics  # cached answers are timed per read: see transport/metrics.py
        started, slow, hits = perf_counter(), metrics.processed_seconds, 0
        while pos < size:
            end = frame_at(data, pos, size, limit)
            if end < 0:
                gate.bad_frame(self, "frame length", "decode exception, {peer}: frame length {n} "
                               "(limit {limit}); closing", n=-end, limit=limit)
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
            if taken > serve:  # over budget: SYSTEM_BUSY [OVERLOAD] instead of processing
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
            if self.paused or self.closing:
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
            self._chunks = [rest]
            self._have = size - pos
            self._need = bytes_needed(rest)
            if self._read_size and self._need - self._have > self._read_size:
                self._read_ahead(self._need - self._have)
            self._frame_started = self._last_activity
            if (self._need >= LARGE_FRAME or self._holding) and not self._hold_frame(self._need):
                return
            if throttle:
                self._throttle()
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
        if self._reading_ahead:  # a late (Deferred) answer while a big frame is incomplete
            self._read_ahead(0)
        if len(answers) == 1:
            self._metrics.bytes_sent += len(answers[0])
            self.transport.write(answers[0])
        else:
            self._metrics.bytes_sent += sum(map(len, answers))
            self.transport.writeSequence(answers)

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
        if response.__class__ is Pending:
            pool = self._pools.get(response.lane)
            if pool is not None:
                return self._offload(pool, response, request, started)
            response = response.run()
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
        """Run ``pending.work`` on ``pool`` (the pool of its lane) and stop reading until it is
        answered; the SYSTEM_BUSY answer when the pool is full. Returns what ``_handle``
        returns."""
        d = pool.submit(pending.work)
        if d is None:
            return self._gate.refuse_work(self, request, pool.refused)
        self.waiting = True
        if not self.paused:
            self.paused = True
            self.transport.pauseProducing()
        d.addCallbacks(self._finish, self._failed, callbackArgs=(pending.finish, request, started),
                       errbackArgs=(pending, request, started))
        d.addErrback(self._late_failure, request)
        d.addCallback(self._done_waiting)
        return None

    def _finish(self, result, finish, request, started):
        """Back on the reactor thread: apply the result and answer, unless the peer is gone."""
        if self.closing:
            return
        response = finish(result)
        code = None if response is None else getattr(response, "code", -1)
        self._metrics.request(request.code, code, perf_counter() - started)
        self._late_answer(response, request)

    def _failed(self, failure, pending, request, started):
        """The work raised: the Pending's own answer for that (``fail``), or a SYSTEM_ERROR."""
        if pending.fail is None:
            return failure
        return self._finish(failure.value, pending.fail, request, started)

    def _done_waiting(self, _):
        self.waiting = False
        if self.paused and not self.closing and not self._flow_paused and not self.throttled:
            self._resume()
        elif self.read_closed:
            self._close_if_answered()


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
