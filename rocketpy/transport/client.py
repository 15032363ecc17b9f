"""Transport layer: the remoting *client* (Java ``NettyRemotingClient`` + the client half of
``NettyRemotingAbstract``), on Twisted and the codec. What it keeps from Java:

* **One cached channel per address** (``channelTables``): the first call connects
  (``connectTimeoutMillis``, 3 s), later calls reuse it, a failed or closed one is opened again by
  the next call; frames sent while it connects wait in order.
* **Opaque matching** (``responseTable``): opaques from this client's counter (Java's
  ``requestId``: from 0, wrapping like an ``int``); an answer nobody waits for is logged and
  dropped.
* **Timeouts from a scan** (``scanResponseTable``): one timer, running only while something
  waits; the deadline counts from the call, connecting included (as ``invokeSync`` does). A late
  answer is dropped; the connection stays (``clientCloseSocketIfTimeout`` false).
* **Bounded in-flight requests** (``clientAsyncSemaphoreValue`` / ``clientOnewaySemaphoreValue``,
  65535, per connection here): a call without a permit waits until its deadline, then fails with
  :class:`RemotingTooMuchRequestError`. A oneway's permit comes back once the socket takes its
  frame (the client is a streaming producer), so the bound also bounds buffered frames.
* **Fail fast** (``failFast``): a connection's end fails every request waiting on it.
* **Requests from the peer** (NOTIFY_MIN_BROKER_ID_CHANGE, CHECK_TRANSACTION_STATE) go to
  ``request_handler``; without one they get REQUEST_CODE_NOT_SUPPORTED, as in Java. A peer
  that sends requests without reading their answers is not read until the answers drain.
* **NameServer choice** (``invokeSync(null, ...)``): :meth:`RemotingClient.invoke_any` sticks to
  its NameServer while that connection lives, else tries the list from a random start.
* **RPC hooks** (``RPCHook.doBeforeRequest``): ``rpc_hook(addr, request)`` may change a request
  before it is encoded (ACL signing, a broker's ``__ZONE_NAME``).

``invoke`` answers with whatever code the peer sent; :func:`check_response` turns an unexpected
one into :class:`RemotingCommandError` (Java's ``MQClientException``, "CODE: 17 DESC: ...").
:class:`OnewayNotifier` is the NameServer's and the controller's use of it:
NOTIFY_MIN_BROKER_ID_CHANGE and NOTIFY_BROKER_ROLE_CHANGED, oneway, to a broker group, a bounded
number of addresses at once."""
import collections
import dataclasses
import random

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IPushProducer
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from zope.interface import implementer

from ..remoting.codes import (FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode, not_supported_remark,
                              response_code_name)
from ..remoting.errors import RemotingCodecError
from ..remoting.frame import DEFAULT_MAX_FRAME_LENGTH, decode_frame
from ..remoting.splitter import FrameSplitter
from . import logs

__all__ = ["RemotingClient", "OnewayNotifier", "check_response", "split_address",
           "namesrv_addr_list",
           "RemotingError", "RemotingConnectError", "RemotingTimeoutError",
           "RemotingSendRequestError", "RemotingTooMuchRequestError", "RemotingCommandError",
           "CONNECT_TIMEOUT", "SEMAPHORE_VALUE", "SCAN_INTERVAL", "PUSH_CONCURRENCY",
           "MAX_QUEUED_PUSHES"]

#: Java ``NettyClientConfig.connectTimeoutMillis`` default.
CONNECT_TIMEOUT = 3.0
#: Java ``clientAsyncSemaphoreValue`` and ``clientOnewaySemaphoreValue`` defaults.
SEMAPHORE_VALUE = 65535
#: Java runs ``scanResponseTable`` every second.
SCAN_INTERVAL = 1.0
#: Java ``clientChannelMaxIdleTimeSeconds``: a connection with no traffic this long is closed
MAX_IDLE = 120.0
#: addresses :class:`OnewayNotifier` pushes to at once (``clusterList``'s ``BROKER_CONCURRENCY``)
PUSH_CONCURRENCY = 32
#: pushes :class:`OnewayNotifier` keeps waiting for a place (a group's brokers are bounded by the
#: controller's live brokers, 10,000)
MAX_QUEUED_PUSHES = 20000

_SUCCESS = int(ResponseCode.SUCCESS)
_NOT_SUPPORTED = int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


# -- errors ------------------------------------------------------------------------------------

class RemotingError(Exception):
    """Base of the client's errors; ``addr`` is the peer's ``host:port``."""

    def __init__(self, addr, message):
        super().__init__(message)
        self.addr = addr


class RemotingConnectError(RemotingError):
    """Java ``RemotingConnectException``: the connection could not be made."""

    def __init__(self, addr, why):
        super().__init__(addr, f"connect to {addr} failed: {why}")


class RemotingTimeoutError(RemotingError):
    """Java ``RemotingTimeoutException``: no answer within the timeout."""

    def __init__(self, addr, timeout, code=None):
        what = f"request code {code}" if code is not None else "request"
        super().__init__(addr, f"wait response on the channel <{addr}> timeout, "
                               f"{int(timeout * 1000)}(ms) ({what})")
        self.timeout = timeout


class RemotingSendRequestError(RemotingError):
    """Java ``RemotingSendRequestException``: the connection ended before the answer."""

    def __init__(self, addr, why):
        super().__init__(addr, f"send request to <{addr}> failed: {why}")


class RemotingTooMuchRequestError(RemotingError):
    """Java ``RemotingTooMuchRequestException``: no in-flight permit within the timeout."""

    def __init__(self, addr, kind, permits, waiting):
        super().__init__(addr, f"invoke{kind}Impl tryAcquire semaphore timeout on <{addr}>, "
                               f"waiting requests: {waiting}, semaphore value: {permits}")


class RemotingCommandError(RemotingError):
    """The peer answered with an error code (Java ``MQClientException``/``MQBrokerException``)."""

    def __init__(self, addr, code, remark):
        name = response_code_name(code)
        label = f"{code} ({name})" if name else str(code)
        super().__init__(addr, f"CODE: {label} DESC: {remark or ''}".rstrip())
        self.code = code
        self.remark = remark


def check_response(response, addr, expected=_SUCCESS):
    """``response`` if its code is ``expected``, else raise :class:`RemotingCommandError`."""
    if response.code != expected:
        raise RemotingCommandError(addr, response.code, response.remark)
    return response


def split_address(addr):
    """``(host, port)`` of ``"host:port"`` (``"[::1]:9876"`` too, as Java's
    ``RemotingHelper.string2SocketAddress`` splits at the last colon); ValueError if it is not."""
    host, sep, port = (addr or "").strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{addr!r} is not a host:port address")
    return host, int(port)


def namesrv_addr_list(text):
    """The addresses of ``"host:port;host:port"`` (``updateNameServerAddressList``'s ``;``
    list, blanks around each ignored); ValueError naming the first that is not host:port or
    when there is none."""
    addrs = [addr.strip() for addr in (text or "").split(";") if addr.strip()]
    if not addrs:
        raise ValueError("no NameServer address: give -n host:port[;host:port...] or set NAMESRV_ADDR")
    for addr in addrs:
        split_address(addr)
    return addrs


# -- the per-address channel ----------------------------------------------------------------------

class _Waiter:
    """A call waiting for a permit: ``grant()`` once one frees, or fail at ``deadline``."""

    __slots__ = ("grant", "deadline", "deferred", "done")

    def __init__(self, grant, deadline, deferred):
        self.grant = grant
        self.deadline = deadline
        self.deferred = deferred
        self.done = False


class _Permits:
    """One semaphore of one connection: ``free`` permits and the calls waiting, in order."""

    __slots__ = ("kind", "value", "free", "waiting")

    def __init__(self, kind, value):
        self.kind = kind
        self.value = value
        self.free = value
        self.waiting = collections.deque()

    def acquire(self, waiter):
        """Grant at once if a permit is free (True), else queue the waiter (False)."""
        if self.free > 0 and not self.waiting:
            self.free -= 1
            waiter.done = True
            waiter.grant()
            return True
        self.waiting.append(waiter)
        return False

    def release(self):
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done:
                waiter.done = True
                waiter.grant()
                return
        self.free += 1

    def expire(self, now):
        """Take the waiters whose deadline has passed out of the queue; return them."""
        expired = [w for w in self.waiting if not w.done and w.deadline <= now]
        for waiter in expired:
            waiter.done = True
        if expired:
            self.waiting = collections.deque(w for w in self.waiting if not w.done)
        return expired

    def take_all(self):
        """Every waiter still waiting (the connection is gone)."""
        waiting = [w for w in self.waiting if not w.done]
        for waiter in waiting:
            waiter.done = True
        self.waiting = collections.deque()
        return waiting


class _Channel:
    """Java ``ChannelWrapper``: one connection to one address, connecting or open."""

    __slots__ = ("addr", "proto", "connector", "closed", "outbox", "async_permits",
                 "oneway_permits", "pending", "last_active", "idle_call", "unmatched")

    def __init__(self, addr, async_value, oneway_value):
        self.addr = addr
        self.proto = None          # set once connected
        self.connector = None
        self.closed = False
        #: (frame, oneway Deferred or None) waiting for the connection or for a resume
        self.outbox = collections.deque()
        self.async_permits = _Permits("Async", async_value)
        self.oneway_permits = _Permits("Oneway", oneway_value)
        self.pending = set()       # opaques of requests waiting for an answer on this channel
        self.last_active = 0.0     # clock time of the last frame written or read
        self.idle_call = None      # the DelayedCall that closes it when idle
        self.unmatched = 0         # answers that matched no request (logged 1st, 2nd, 4th, ...)

    @property
    def writable(self):
        return self.proto is not None and not self.proto.paused and not self.closed


class _Pending:
    __slots__ = ("deferred", "channel", "deadline", "timeout", "code")

    def __init__(self, deferred, channel, deadline, timeout, code):
        self.deferred = deferred
        self.channel = channel
        self.deadline = deadline
        self.timeout = timeout
        self.code = code


@implementer(IPushProducer)
class _ClientProtocol(Protocol):
    """One client connection: frames in, answers matched by the client; a streaming producer of
    its transport so a full write buffer holds further frames back."""

    paused = False
    holding_reads = False

    def __init__(self, client, channel):
        self.client = client
        self.channel = channel
        self.splitter = FrameSplitter(client.max_frame_length)

    def connectionMade(self):
        self.transport.registerProducer(self, True)
        if hasattr(self.transport, "setTcpNoDelay"):
            self.transport.setTcpNoDelay(True)
        self.client._connected(self.channel, self)

    def dataReceived(self, data):
        try:
            frames = self.splitter.feed(data)
        except RemotingCodecError as exc:
            self.client._bad_input(self, exc)
            return
        for frame in frames:
            try:
                command = decode_frame(frame, self.client.max_frame_length)
            except RemotingCodecError as exc:
                self.client._bad_input(self, exc)
                return
            self.client._received(self.channel, command)

    def connectionLost(self, reason):
        self.client._lost(self.channel, reason)

    def hold_reads(self):
        """Stop reading the peer: it sends requests while it does not read our answers."""
        if not self.holding_reads:
            self.holding_reads = True
            self.transport.pauseProducing()

    def pauseProducing(self):
        self.paused = True

    def resumeProducing(self):
        self.paused = False
        if self.holding_reads:
            self.holding_reads = False
            self.transport.resumeProducing()
        self.client._flush(self.channel)

    def stopProducing(self):
        self.paused = True


class _ChannelFactory(ClientFactory):
    noisy = False

    def __init__(self, client, channel):
        self.client = client
        self.channel = channel

    def buildProtocol(self, addr):
        proto = _ClientProtocol(self.client, self.channel)
        proto.factory = self
        return proto

    def clientConnectionFailed(self, connector, reason):
        self.client._connect_failed(self.channel, reason)


# -- the client --------------------------------------------------------------------------------

class RemotingClient:
    """``invoke(addr, request, timeout)`` and ``invoke_oneway`` over cached connections.

    :param reactor: provides ``IReactorTCP`` (``connectTCP``) and, unless ``clock`` is given,
        ``IReactorTime``.
    :param clock: the ``IReactorTime`` for deadlines and the scan (``task.Clock`` in tests).
    :param connect_timeout: seconds to connect (Java ``connectTimeoutMillis``).
    :param async_permits, oneway_permits: in-flight bounds per connection.
    :param scan_interval: seconds between two scans for timed-out requests.
    :param max_idle: seconds without traffic after which a connection is closed (Java's idle
        handler; None keeps connections until closed), so connections to addresses that are
        no longer used do not pile up.
    :param rpc_hook: ``rpc_hook(addr, request) -> request`` applied before each request is sent.
    :param request_handler: ``request_handler(addr, request) -> response | None`` for requests
        the peer sends us.
    :param rng: a ``random.Random`` for the first NameServer :meth:`invoke_any` tries.
    """

    log = Logger(observer=logs.observer)

    def __init__(self, reactor, clock=None, *, connect_timeout=CONNECT_TIMEOUT,
                 async_permits=SEMAPHORE_VALUE, oneway_permits=SEMAPHORE_VALUE,
                 scan_interval=SCAN_INTERVAL, rpc_hook=None, request_handler=None,
                 max_frame_length=DEFAULT_MAX_FRAME_LENGTH, rng=None, max_idle=MAX_IDLE):
        self._reactor = reactor
        self._clock = clock if clock is not None else reactor
        self.connect_timeout = connect_timeout
        self.async_permits = async_permits
        self.oneway_permits = oneway_permits
        self.scan_interval = scan_interval
        self.max_idle = max_idle
        self.rpc_hook = rpc_hook
        self.request_handler = request_handler
        self.max_frame_length = max_frame_length
        self._next_opaque = 0
        self._channels = {}        # addr -> _Channel (Java channelTables)
        self._pending = {}         # opaque -> _Pending (Java responseTable)
        self._scan = None
        self._closing = False
        self._chosen = None
        self._index = (rng or random).randrange(999)  # Java initValueIndex()

    # -- public API ------------------------------------------------------------------------------

    def invoke(self, addr, request, timeout=3.0):
        """Send ``request`` to ``addr``; a Deferred of the answer (any code), or a
        :class:`RemotingError`."""
        return self._send(addr, request, timeout, oneway=False)

    def invoke_oneway(self, addr, request, timeout=3.0):
        """Send ``request`` flagged oneway; a Deferred that fires (None) once the frame is
        handed to the socket, or fails (connect error, no permit within ``timeout``)."""
        return self._send(addr, request, timeout, oneway=True)

    def invoke_any(self, addrs, request, timeout=3.0):
        """Send ``request`` to one of ``addrs`` (Java ``invokeSync(null, ...)``, see the module
        docstring); a Deferred of ``(addr, answer)``."""
        addrs = list(addrs)
        if not addrs:
            return fail(RemotingConnectError("", "no NameServer address given"))
        if self._chosen in addrs and self._chosen in self._channels:
            first = addrs.index(self._chosen)
        else:
            self._index += 1
            first = self._index % len(addrs)
        order = addrs[first:] + addrs[:first]
        deadline = self._clock.seconds() + timeout

        def attempt(i):
            addr = order[i]
            d = self.invoke(addr, request, max(deadline - self._clock.seconds(), 0.0))
            d.addCallbacks(chosen, next_one, callbackArgs=(addr,), errbackArgs=(i,))
            return d

        def chosen(answer, addr):
            self._chosen = addr
            return addr, answer

        def next_one(failure, i):
            failure.trap(RemotingConnectError)
            if i + 1 < len(order) and self._clock.seconds() < deadline:
                return attempt(i + 1)
            return failure
        return attempt(0)

    @property
    def clock(self):
        """The ``IReactorTime`` deadlines are measured on."""
        return self._clock

    @property
    def addresses(self):
        """Addresses with a connection open or opening."""
        return list(self._channels)

    def in_flight(self, addr=None):
        """Requests waiting for an answer (on ``addr``'s connection, or in all)."""
        if addr is None:
            return len(self._pending)
        channel = self._channels.get(addr)
        return len(channel.pending) if channel is not None else 0

    def close_channel(self, addr):
        """Close the connection to ``addr`` (waiting requests fail); False if there is none."""
        channel = self._channels.get(addr)
        if channel is None:
            return False
        self._close(channel, "closed by the client")
        return True

    def shutdown(self):
        """Close every connection; requests still waiting fail. Later calls fail at once."""
        self._closing = True
        for channel in list(self._channels.values()):
            self._close(channel, "client shut down")
        self._stop_scan()

    # -- sending ---------------------------------------------------------------------------------

    def _opaque(self):
        opaque = self._next_opaque
        self._next_opaque = opaque + 1 if opaque < 0x7FFFFFFF else -0x80000000
        return opaque

    def _send(self, addr, request, timeout, oneway):
        if self._closing:
            return fail(RemotingSendRequestError(addr, "the client is shut down"))
        flag = (request.flag | FLAG_ONEWAY) if oneway else (request.flag & ~FLAG_ONEWAY)
        command = dataclasses.replace(request, opaque=self._opaque(), flag=flag & ~FLAG_RESPONSE)
        if self.rpc_hook is not None:
            command = self.rpc_hook(addr, command) or command
        try:
            frame = command.encode()
            channel = self._channel(addr)
        except ValueError as exc:  # a field that does not fit the header; not host:port
            return fail(RemotingSendRequestError(addr, exc))
        deadline = self._clock.seconds() + timeout
        d = Deferred()
        if oneway:
            waiter = _Waiter(lambda: self._enqueue(channel, frame, d), deadline, d)
            permits = channel.oneway_permits
        else:
            pending = _Pending(d, channel, deadline, timeout, command.code)

            def grant():
                self._pending[command.opaque] = pending
                channel.pending.add(command.opaque)
                self._enqueue(channel, frame, None)
                self._start_scan()
            waiter = _Waiter(grant, deadline, d)
            permits = channel.async_permits
        if not permits.acquire(waiter):
            self._start_scan()
        return d

    def _channel(self, addr):
        channel = self._channels.get(addr)
        if channel is not None:
            return channel
        host, port = split_address(addr)
        channel = _Channel(addr, self.async_permits, self.oneway_permits)
        self._channels[addr] = channel
        channel.last_active = self._clock.seconds()
        if self.max_idle is not None:
            channel.idle_call = self._clock.callLater(self.max_idle, self._idle_check, channel)
        channel.connector = self._reactor.connectTCP(host, port, _ChannelFactory(self, channel),
                                                     timeout=self.connect_timeout)
        return channel

    def _idle_check(self, channel):
        """Close ``channel`` once nothing was written or read for ``max_idle`` seconds and
        nothing waits on it; otherwise look again when it could next be idle that long."""
        channel.idle_call = None
        if channel.closed:
            return
        idle = self._clock.seconds() - channel.last_active
        if idle >= self.max_idle and not channel.pending and not channel.outbox:
            self._close(channel, f"idle for {self.max_idle:g} s (clientChannelMaxIdleTimeSeconds)")
            return
        wait = self.max_idle - idle if idle < self.max_idle else self.max_idle
        channel.idle_call = self._clock.callLater(wait, self._idle_check, channel)

    def _enqueue(self, channel, frame, oneway):
        """Write ``frame`` now if the connection takes it, else keep it in order."""
        channel.last_active = self._clock.seconds()
        if channel.writable and not channel.outbox:
            self._write(channel, frame, oneway)
        else:
            channel.outbox.append((frame, oneway))

    def _flush(self, channel):
        """Write what waits for the connection (or for the write buffer to drain)."""
        while channel.outbox and channel.writable:
            self._write(channel, *channel.outbox.popleft())

    def _write(self, channel, frame, oneway):
        channel.proto.transport.write(frame)
        if oneway is not None:  # a oneway is done once the socket has it
            channel.oneway_permits.release()
            oneway.callback(None)

    # -- connection events -----------------------------------------------------------------------

    def _connected(self, channel, proto):
        if channel.closed:
            proto.transport.loseConnection()
            return
        channel.proto = proto
        self._flush(channel)

    def _connect_failed(self, channel, reason):
        self._drop(channel, RemotingConnectError(channel.addr, reason.getErrorMessage()))

    def _lost(self, channel, reason):
        self._drop(channel, RemotingSendRequestError(
            channel.addr, f"the connection closed ({reason.getErrorMessage()})"))

    def _close(self, channel, why):
        if channel.proto is not None:
            channel.proto.transport.loseConnection()
        elif channel.connector is not None:
            channel.connector.stopConnecting()
        self._drop(channel, RemotingSendRequestError(channel.addr, why))

    def _bad_input(self, proto, exc):
        """Java's decoder closes the channel on anything it cannot read."""
        self.log.warn("closing the connection to {addr}: {why}", addr=proto.channel.addr, why=exc)
        proto.transport.loseConnection()
        self._drop(proto.channel, RemotingSendRequestError(proto.channel.addr, f"bad answer: {exc}"))

    def _drop(self, channel, error):
        """Forget ``channel`` and fail everything that waits on it (Java ``failFast``); the next
        call to its address connects again."""
        if channel.closed:
            return
        channel.closed = True
        if channel.idle_call is not None and channel.idle_call.active():
            channel.idle_call.cancel()
        channel.idle_call = None
        if self._channels.get(channel.addr) is channel:
            del self._channels[channel.addr]
        failed = [self._pending.pop(opaque).deferred for opaque in list(channel.pending)
                  if opaque in self._pending]
        channel.pending.clear()
        failed += [oneway for _, oneway in channel.outbox if oneway is not None]
        channel.outbox.clear()
        for permits in (channel.async_permits, channel.oneway_permits):
            failed += [waiter.deferred for waiter in permits.take_all()]
        for d in failed:
            d.errback(error)

    # -- answers and requests from the peer ------------------------------------------------------

    def _received(self, channel, command):
        channel.last_active = self._clock.seconds()
        if command.flag & FLAG_RESPONSE:
            pending = self._pending.pop(command.opaque, None)
            if pending is None or pending.channel is not channel:
                if pending is not None:  # same opaque, other channel: not ours
                    self._pending[command.opaque] = pending
                channel.unmatched += 1
                if channel.unmatched & (channel.unmatched - 1) == 0:   # a peer cannot flood the log
                    self.log.warn("receive response, but not matched any request, {addr} opaque "
                                  "{opaque} ({n} so far on this connection)",
                                  addr=channel.addr, opaque=command.opaque, n=channel.unmatched)
                return
            channel.pending.discard(command.opaque)
            channel.async_permits.release()
            pending.deferred.callback(command)
            return
        self._serve(channel, command)

    def _serve(self, channel, request):
        response = None
        if self.request_handler is not None:
            try:
                response = self.request_handler(channel.addr, request)
            except Exception:
                self.log.failure("request handler failed on a request from {addr}", addr=channel.addr)
                response = request.create_response(int(ResponseCode.SYSTEM_ERROR),
                                                   remark="request handler failed")
        elif not request.is_oneway:
            response = request.create_response(_NOT_SUPPORTED,
                                               remark=not_supported_remark(request.code))
        proto = channel.proto
        if response is not None and not request.is_oneway and proto is not None:
            response.opaque = request.opaque
            response.flag |= FLAG_RESPONSE
            proto.transport.write(response.encode())
            if proto.paused:  # answers pile up unread: read no more requests until they drain
                proto.hold_reads()

    # -- the response-table scan -------------------------------------------------------------------

    def _start_scan(self):
        if self._scan is None:
            self._scan = LoopingCall(self._scan_response_table)
            self._scan.clock = self._clock
            self._scan.start(self.scan_interval, now=False)

    def _stop_scan(self):
        if self._scan is not None:
            if self._scan.running:
                self._scan.stop()
            self._scan = None

    def _scan_response_table(self):
        """Java ``scanResponseTable``: fail what is past its deadline (answers, permits)."""
        now = self._clock.seconds()
        expired = [(opaque, pending) for opaque, pending in self._pending.items()
                   if pending.deadline <= now]
        for opaque, pending in expired:
            del self._pending[opaque]
            pending.channel.pending.discard(opaque)
        late = []
        waiting = False
        for channel in list(self._channels.values()):
            for permits in (channel.async_permits, channel.oneway_permits):
                late += [(waiter, permits, channel.addr) for waiter in permits.expire(now)]
                waiting = waiting or bool(permits.waiting)
        if not self._pending and not waiting:
            self._stop_scan()
        for opaque, pending in expired:
            pending.channel.async_permits.release()
            self.log.debug("remove timeout request to {addr}, opaque {opaque}",
                           addr=pending.channel.addr, opaque=opaque)
            pending.deferred.errback(RemotingTimeoutError(pending.channel.addr, pending.timeout,
                                                          pending.code))
        for waiter, permits, addr in late:
            waiter.deferred.errback(RemotingTooMuchRequestError(
                addr, permits.kind, permits.value, len(permits.waiting)))


class OnewayNotifier:
    """``notifier(broker_addrs, command)`` sends ``command`` oneway to every ``host:port`` through a
    :class:`RemotingClient` (NOTIFY_MIN_BROKER_ID_CHANGE, NOTIFY_BROKER_ROLE_CHANGED). A failure
    is logged and dropped: a oneway has nobody to tell.

    Java connects to each broker's listen address and keeps the channel; the addresses are what
    the brokers said, so a peer can make them up by the thousand (5,000 brokers of one group
    asked an election, and 5,000 connections opened at once, each held 120 s). Here the fan-out
    is bounded as ``clusterList``'s is: at most ``concurrency`` addresses are being connected to
    or written at once, each connection is closed once its pushes are written (so no channel is
    cached), and at most ``max_queued`` pushes wait for a place. A push waiting for an address
    replaces the one of the same request code that waits there (the newer role or smallest id
    supersedes it); one that finds the queue full is dropped and counted."""

    log = Logger(observer=logs.observer)

    def __init__(self, reactor, connect_timeout=CONNECT_TIMEOUT, *, concurrency=PUSH_CONCURRENCY,
                 max_queued=MAX_QUEUED_PUSHES):
        self.client = RemotingClient(reactor, connect_timeout=connect_timeout, max_idle=None)
        self.concurrency = concurrency
        self.max_queued = max_queued
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._waiting = collections.OrderedDict()   # addr -> {code: command}, not in flight
        self._later = {}                            # addr in flight -> {code: command} after it
        self._active = set()                        # addresses being connected to or written
        self._queued = 0
        self._pumping = False

    def __call__(self, broker_addrs, command):
        for addr in broker_addrs:
            self.send_oneway(addr, command)

    @property
    def queued(self):
        """Pushes waiting for a place."""
        return self._queued

    @property
    def active(self):
        """Addresses a push is being connected to or written to now."""
        return len(self._active)

    def send_oneway(self, addr, command):
        """Queue ``command`` for ``addr``; it goes once a place is free."""
        table = self._later if addr in self._active else self._waiting
        commands = table.get(addr)
        if commands is None or command.code not in commands:
            if self._queued >= self.max_queued:
                self.dropped += 1
                if self.dropped & (self.dropped - 1) == 0:   # 1st, 2nd, 4th, ...: no log flood
                    self.log.warn("oneway push to {addr} dropped: {n} pushes wait already "
                                  "({dropped} dropped so far)", addr=addr, n=self._queued,
                                  dropped=self.dropped)
                return
            self._queued += 1
            if commands is None:
                commands = table[addr] = {}
        commands[command.code] = command
        self._pump()

    def _pump(self):
        if self._pumping:      # a push that failed at once frees its place inside the loop
            return
        self._pumping = True
        try:
            self._start_waiting()
        finally:
            self._pumping = False

    def _start_waiting(self):
        while self._waiting and len(self._active) < self.concurrency:
            addr, commands = self._waiting.popitem(last=False)
            self._queued -= len(commands)
            self._active.add(addr)
            sent = [self.client.invoke_oneway(addr, command) for command in commands.values()]
            # frames go out in order: the last one written means all were
            sent[-1].addCallbacks(self._sent, self._failed, callbackArgs=(len(sent),),
                                  errbackArgs=(addr,))
            sent[-1].addBoth(self._done, addr)
            for d in sent[:-1]:
                d.addErrback(lambda _: None)     # counted with the last

    def _sent(self, _, count):
        self.sent += count

    def _failed(self, failure, addr):
        self.failed += 1
        if self.failed & (self.failed - 1) == 0:
            self.log.warn("invokeOneway to {addr} failed: {why} ({n} failed pushes so far)",
                          addr=addr, why=failure.getErrorMessage(), n=self.failed)

    def _done(self, _, addr):
        self.client.close_channel(addr)          # written (or failed): its place is free
        self._active.discard(addr)
        later = self._later.pop(addr, None)
        if later is not None:
            self._waiting[addr] = later
        self._pump()

    def close(self):
        """Close every connection and forget what waits (NameServer shutdown)."""
        self._waiting.clear()
        self._later.clear()
        self._queued = 0
        self.client.shutdown()
