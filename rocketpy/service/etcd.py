"""Service layer: a non-blocking client of etcd's v3 JSON gateway (``POST /v3/...``) on the
reactor, with ``twisted.web.client`` (no thread, no new dependency: the gateway is plain JSON
over HTTP/1.1, and the maintained Python clients block -- ``etcd3gw`` on ``requests`` -- or need
gRPC).

Unary calls go to the endpoint that last answered; one that fails or times out passes the call to
the next endpoint. A watch is one long response whose body is a stream of JSON objects, one a
line; :meth:`EtcdGateway.watch` hands each to a callback.
"""
import json

from twisted.internet.defer import Deferred, inlineCallbacks, succeed
from twisted.internet.protocol import Protocol
from twisted.web.client import Agent, HTTPConnectionPool, ResponseDone, readBody
from twisted.web.http_headers import Headers
from twisted.web.iweb import IBodyProducer
from zope.interface import implementer

__all__ = ["EtcdGateway", "EtcdError", "EtcdRequestTooLarge", "MAX_WATCH_LINE"]

#: a watch message longer than this ends the watch (entries are a few hundred bytes)
MAX_WATCH_LINE = 16 * 1024 * 1024
_HEADERS = Headers({b"Content-Type": [b"application/json"]})


class EtcdError(Exception):
    """No endpoint answered, or one answered with an error."""


class EtcdRequestTooLarge(EtcdError):
    """etcd refused the request for its size (``etcdserver: request is too large`` past
    ``--max-request-bytes``, HTTP 400; the gateway's ``received message larger than max``, HTTP
    429): this request cannot succeed, but says nothing of the others or of the leadership."""


#: what etcd's answers to an oversized request say (rpctypes.ErrGRPCRequestTooLarge, gRPC's
#: ResourceExhausted of a message over the receive limit)
_TOO_LARGE = (b"request is too large", b"larger than max")


@implementer(IBodyProducer)
class _Body:
    """A request body already in memory, written at once."""

    def __init__(self, data):
        self.data = data
        self.length = len(data)

    def startProducing(self, consumer):
        consumer.write(self.data)
        return succeed(None)

    def pauseProducing(self):
        pass

    def resumeProducing(self):
        pass

    def stopProducing(self):
        pass


class _Lines(Protocol):
    """The body of a watch: each line one JSON message for ``on_message``. The bytes wait in one
    buffer scanned only past what was scanned before, and a line is cut once when complete, so
    a long line arriving in many chunks costs its length, not its length times its chunks
    (``bytes_touched`` counts what it appends, searches, cuts and moves, for the test that holds
    that by counting)."""

    def __init__(self, on_message, finished):
        self._on_message = on_message
        self._finished = finished
        self._buffer = bytearray()
        self._scanned = 0            # bytes of the buffer known to hold no newline
        self.bytes_touched = 0

    def _newline(self, start):
        """The buffer's first newline at or after ``start`` (-1: none), the bytes searched counted."""
        end = self._buffer.find(b"\n", start)
        self.bytes_touched += (end + 1 if end >= 0 else len(self._buffer)) - start
        return end

    def dataReceived(self, data):
        self._buffer += data
        self.bytes_touched += len(data)
        start = 0
        end = self._newline(self._scanned)
        while end >= 0:
            line = self._buffer[start:end]
            self.bytes_touched += end - start
            start = end + 1
            if line.strip():
                try:
                    message = json.loads(line)
                except ValueError:
                    self.transport.stopProducing()
                    return
                self._on_message(message)
            end = self._newline(start)
        if start:
            del self._buffer[:start]
            self.bytes_touched += len(self._buffer)      # the rest, moved to the front
        self._scanned = len(self._buffer)
        if self._scanned > MAX_WATCH_LINE:
            self.transport.stopProducing()

    def connectionLost(self, reason):
        finished, self._finished = self._finished, None
        if finished is not None:
            finished.callback(None if reason.check(ResponseDone) else str(reason.value))


class EtcdGateway:
    """``post(path, body)`` and ``watch(body, on_message)`` against ``endpoints``
    (``http://host:port``), each request bounded by ``timeout`` seconds (a watch only until its
    response starts)."""

    def __init__(self, reactor, endpoints, timeout):
        self.reactor = reactor
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.current = 0
        self._pool = HTTPConnectionPool(reactor, persistent=True)
        self._agent = Agent(reactor, connectTimeout=timeout, pool=self._pool)
        self._stream_agent = Agent(reactor, connectTimeout=timeout,
                                   pool=HTTPConnectionPool(reactor, persistent=False))
        self._watch_request = None
        self._watch_protocol = None

    def _url(self, index, path):
        return (self.endpoints[index % len(self.endpoints)] + path).encode("ascii")

    @inlineCallbacks
    def post(self, path, body):
        """The JSON answer of ``path``; EtcdError when no endpoint answers or etcd refuses."""
        data = json.dumps(body).encode("utf-8")
        last = None
        for step in range(len(self.endpoints)):
            index = (self.current + step) % len(self.endpoints)
            try:
                d = self._agent.request(b"POST", self._url(index, path), _HEADERS, _Body(data))
                d.addTimeout(self.timeout, self.reactor)
                response = yield d
                d = readBody(response)
                d.addTimeout(self.timeout, self.reactor)
                text = yield d
            except Exception as exc:  # refused, reset, timed out: the next endpoint
                last = exc
                continue
            self.current = index
            if response.code != 200:
                error = (EtcdRequestTooLarge if response.code in (400, 413, 429)
                         and any(words in text for words in _TOO_LARGE) else EtcdError)
                raise error(f"etcd {self.endpoints[index]}{path}: HTTP {response.code} "
                                f"{text[:200].decode('utf-8', 'replace')}")
            try:
                return json.loads(text)
            except ValueError:
                raise EtcdError(f"etcd {self.endpoints[index]}{path}: not JSON") from None
        raise EtcdError(f"no etcd endpoint answered {path}: {last}")

    @inlineCallbacks
    def watch(self, body, on_message):
        """Watch on the current endpoint (the next one after a failure); fires with None when the
        stream ends cleanly, with a reason (text) otherwise (:meth:`stop_watch` ends it)."""
        index = self.current
        data = json.dumps(body).encode("utf-8")
        d = self._stream_agent.request(b"POST", self._url(index, "/v3/watch"), _HEADERS, _Body(data))
        d.addTimeout(self.timeout, self.reactor)
        self._watch_request = d
        try:
            response = yield d
        except Exception as exc:
            self.current = (index + 1) % len(self.endpoints)
            return f"watch on {self.endpoints[index]}: {exc}"
        if response.code != 200:
            self.current = (index + 1) % len(self.endpoints)
            return f"watch on {self.endpoints[index]}: HTTP {response.code}"
        finished = Deferred()
        self._watch_protocol = _Lines(on_message, finished)
        response.deliverBody(self._watch_protocol)
        reason = yield finished
        self._watch_protocol = None
        if reason is not None:
            self.current = (index + 1) % len(self.endpoints)
        return reason

    def stop_watch(self):
        if self._watch_request is not None and not self._watch_request.called:
            self._watch_request.cancel()
        if self._watch_protocol is not None and self._watch_protocol.transport is not None:
            self._watch_protocol.transport.stopProducing()

    def close(self):
        self.stop_watch()
        return self._pool.closeCachedConnections()
