"""Transport layer: the one adapter for what Twisted has no public API for -- a connection's
read size, its write high-water mark, a look at its socket, and a write straight to it.

Twisted's TCP and UNIX transports keep a single attribute, ``bufferSize``: ``doRead`` passes it
to ``recv`` and ``write`` pauses the producer once more than that many bytes wait to be sent.
Java keeps them apart (``SO_RCVBUF`` / the channel's read allocator, and
``writeBufferHighWaterMark``); here they are two names on one attribute:

* :attr:`TransportTuning.high_water_mark` is set once (``writeBufferHighWaterMark``);
* :meth:`TransportTuning.read_up_to` raises the read size while a big frame is incomplete, and
  :meth:`TransportTuning.before_write` puts the high-water mark back before anything is written,
  so an answer is never measured against a raised read size.

A TCP transport's ``write`` only queues: the bytes go out on the reactor's next pass, which
registers the socket for writing (``startWriting``, an ``epoll_ctl``), dispatches ``doWrite``
(``send``) and unregisters it (``stopWriting``, another ``epoll_ctl``) -- for a route query's
answer, more than the answer itself costs. :meth:`TransportTuning.write` sends at once on the
transport's socket (``getHandle``) when the transport has nothing queued (its ``dataBuffer`` and
``_tempDataLen``, the one other private state read here) and is a plain, open TCP connection;
whatever the socket does not take, every write while something is queued or on TLS, and a
socket error (which the transport's own write then meets and closes the connection for) go
through ``transport.write`` as before, so bytes keep their order and flow control (the
high-water mark, ``pauseProducing``) is the transport's. The compiled hit path sends a read's
cached answers itself (:attr:`~rocketpy.transport.answercache.AnswerCache.answer_run`): to the
descriptor :meth:`TransportTuning.direct` gives under the same conditions, what the socket did
not take going to :meth:`TransportTuning.queue`.

Everything else goes through public interfaces (``ITCPTransport.setTcpNoDelay``,
``ISystemHandle.getHandle``); a transport without them (a TLS layer of tests, a
``StringTransport``) is left alone."""
import socket

from twisted.internet.tcp import Connection
from twisted.logger import Logger

from . import logs

__all__ = ["TransportTuning", "READ_AHEAD_MAX"]

#: Largest socket read while the rest of a big frame is awaited.
READ_AHEAD_MAX = 1 << 20

log = Logger(observer=logs.observer)


class TransportTuning:
    """The adapter of one connection's transport (see the module docstring)."""

    __slots__ = ("_transport", "_sized", "_usual", "_raised", "_tcp", "_socket")

    def __init__(self, transport, send_buffer=0, receive_buffer=0, high_water_mark=0):
        size = getattr(transport, "bufferSize", None)
        adjustable = type(size) is int and size > 0
        self._transport = transport
        #: the transport when it is Twisted's TCP connection (written to at once when it can
        #: be), and its socket
        self._tcp = transport if isinstance(transport, Connection) else None
        self._socket = self.handle(transport) if self._tcp is not None else None
        self._sized = transport if adjustable else None  # its bufferSize may be changed
        if adjustable and high_water_mark > 0:
            transport.bufferSize = size = high_water_mark
        self._usual = size if adjustable else 0
        self._raised = False
        if hasattr(transport, "setTcpNoDelay"):  # Java sets TCP_NODELAY on every child
            transport.setTcpNoDelay(True)
        sock = self.handle(transport)
        if sock is not None:
            try:
                if send_buffer > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
                if receive_buffer > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            except OSError as exc:
                log.warn("cannot set socket buffer sizes: {exc}", exc=exc)

    @staticmethod
    def handle(transport):
        """The transport's socket (``ISystemHandle.getHandle``), or None."""
        get = getattr(transport, "getHandle", None)
        sock = get() if get is not None else None
        return sock if isinstance(sock, socket.socket) else None

    @property
    def high_water_mark(self):
        """Unsent bytes past which the transport pauses us (0: not adjustable)."""
        return self._usual

    @property
    def read_size(self):
        """Bytes one ``recv`` may take now (0: not adjustable)."""
        return self._sized.bufferSize if self._sized is not None else 0

    def read_up_to(self, missing):
        """Let the next reads take up to ``missing`` bytes (the rest of a big frame, at most
        :data:`READ_AHEAD_MAX`), or the usual size when that is more. One ``recv`` per
        ``bufferSize`` (64 KiB) would make a 1.5 MB registration 23 reactor wake-ups, and a
        read could end inside the next frame (a copy to split it off)."""
        if self._sized is None:
            return
        if missing > self._usual:
            self._raised = True
            self._sized.bufferSize = min(missing, READ_AHEAD_MAX)
        elif self._raised:
            self.before_write()

    def before_write(self):
        """Put the high-water mark back (the same attribute as the read size)."""
        if self._raised:
            self._raised = False
            self._sized.bufferSize = self._usual

    def direct(self):
        """The socket's descriptor when a write may go straight to it now, else -1: the
        high-water mark put back (:meth:`before_write`), nothing queued in the transport, a
        plain, open TCP connection (see the module docstring)."""
        if self._raised:
            self.before_write()
        t = self._tcp
        if (t is not None and not t.dataBuffer and not t._tempDataLen and t.connected
                and not t.disconnecting and not t.TLS):
            return self._socket.fileno()
        return -1

    def write(self, data):
        """Write ``data`` (bytes) with the high-water mark in place: sent at once when nothing
        is queued before it (:meth:`direct`), the rest queued by the transport."""
        if self.direct() >= 0:
            try:
                sent = self._socket.send(data)
            except OSError:    # full (EAGAIN), or gone: the transport's write finds out which
                sent = 0
            if sent == len(data):
                return
            if sent:
                data = memoryview(data)[sent:].tobytes()
        self._transport.write(data)

    def queue(self, data):
        """What a write straight to :meth:`direct`'s descriptor left: the transport's (behind
        nothing: that write was first), sent as the socket takes it."""
        self._transport.write(data)

    def peer_gone(self):
        """True when a TCP peer has reset the connection. A throttled connection is not read, so
        without this look (``MSG_PEEK``: nothing consumed) a flooder that went away would hold
        its slot until its buffered requests were all served. An end of stream is *not* gone:
        a peer that shut only its sending side (``shutdown(SHUT_WR)``) still wants the answers
        to what it sent, and the reactor reads the end and drains the connection
        (``readConnectionLost``); one that closed for good answers our next write with a reset."""
        sock = self.handle(self._transport)
        if sock is None:
            return False
        try:
            sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        return False
