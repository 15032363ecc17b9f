"""Transport layer: the channel between the route writer and one worker process (a rocketpy
addition; :mod:`rocketpy.service.workers` runs the processes), a stream socket of a
``socketpair`` the writer made before it started the worker.

A message is a kind (:data:`MESSAGES`), a number (a sequence number or a forward's id), a few
text fields and a body, carried as the remoting frames of the project's own codec
(:mod:`rocketpy.remoting.frame`: the kind is the command's code, the number and the fields its
``extFields``, the number in decimal, as a sequence number outgrows the 32-bit opaque). A body past :data:`CHUNK` bytes goes as several frames, every one
but the last marked ``more``; a message past :data:`MAX_MESSAGE` bytes, a frame that does not
decode and an unknown kind end the link (the peer is our own process: a bug, logged, and the
supervision restarts what is lost). What arrives is handed to ``receiver.message(kind, number,
fields, body)``, then ``receiver.read_done()`` once a read's messages are all handed over (a
worker acknowledges what it applied once per read); the link's end to
``receiver.link_lost(reason)``."""
from twisted.internet.protocol import Protocol
from twisted.logger import Logger

from ..remoting.command import RemotingCommand
from ..remoting.errors import RemotingCodecError
from ..remoting.frame import decode_frame
from ..remoting.layout import frame_at
from . import logs

__all__ = ["Link", "MESSAGES", "CHUNK", "MAX_MESSAGE"]

#: kind -> the code it travels as (negative: no RocketMQ request code is)
MESSAGES = {
    # worker -> writer
    "hello": -1, "ack": -2, "forward": -3, "event": -4, "report": -5, "serving": -6,
    # writer -> worker
    "image": -11, "record": -12, "answer": -13, "close": -14, "serve": -15,
}
_KINDS = {code: kind for kind, code in MESSAGES.items()}
#: body bytes one frame carries
CHUNK = 4 << 20
#: the frame limit on the link (a chunk and its header)
_FRAME_MAX = CHUNK + (64 << 10)
#: the largest message (a registration's op batch of a million topics is ~60 MB)
MAX_MESSAGE = 1 << 30
_MORE, _NUMBER = "more", "n"


class Link(Protocol):
    """One end of the channel; ``receiver`` is told what arrives."""

    log = Logger(observer=logs.observer)

    def __init__(self, receiver, name="link"):
        self.receiver = receiver
        self.name = name
        self._buffer = bytearray()
        self._parts = []          # the chunks of a message still arriving
        self._part_bytes = 0
        self.sent = 0
        self.received = 0
        self.connected = False

    def connectionMade(self):
        self.connected = True

    def send(self, kind, number=0, body=b"", /, **fields):
        """Send one message; False when the link is gone."""
        if not self.connected:
            return False
        code = MESSAGES[kind]
        ext = {key: str(value) for key, value in fields.items() if value is not None}
        ext[_NUMBER] = str(number)
        view = memoryview(body)
        chunks = [view[at:at + CHUNK] for at in range(0, len(view), CHUNK)] or [b""]
        last = len(chunks) - 1
        out = []
        for index, chunk in enumerate(chunks):
            fields_of = ext if index == last else {_MORE: "1"}
            out.append(RemotingCommand(code, ext_fields=fields_of,
                                       body=bytes(chunk) if chunk else None).encode())
        data = b"".join(out)
        self.sent += len(data)
        self.transport.write(data)
        return True

    def dataReceived(self, data):
        buffer = self._buffer
        buffer += data
        self.received += len(data)
        pos, size = 0, len(buffer)
        while True:
            end = frame_at(buffer, pos, size, _FRAME_MAX)
            if end < 0:
                return self._broken(f"a frame of {-end} bytes")
            if end == 0 or end > size:
                break
            try:
                command = decode_frame(bytes(buffer[pos:end]), _FRAME_MAX)
            except RemotingCodecError as exc:
                return self._broken(f"a frame that does not decode: {exc}")
            pos = end
            if not self._take(command):
                return None
            if not self.connected:
                return None
        del buffer[:pos]
        self.receiver.read_done()
        return None

    def _take(self, command):
        kind = _KINDS.get(command.code)
        if kind is None:
            self._broken(f"a message of kind {command.code}")
            return False
        body = command.body or b""
        fields = command.ext_fields or {}
        self._part_bytes += len(body)
        if self._part_bytes > MAX_MESSAGE:
            self._broken(f"a message of more than {MAX_MESSAGE} bytes")
            return False
        if fields.get(_MORE) == "1":
            self._parts.append(body)
            return True
        if self._parts:
            self._parts.append(body)
            body = b"".join(self._parts)
            self._parts = []
        self._part_bytes = 0
        try:
            number = int(fields.get(_NUMBER, "0"))
        except ValueError:
            self._broken(f"a message numbered {fields.get(_NUMBER)!r:.40}")
            return False
        self.receiver.message(kind, number, fields, body)
        return True

    def _broken(self, why):
        self.log.error("{name}: {why}; closing it", name=self.name, why=why)
        self.connected = False
        self.transport.loseConnection()

    def close(self):
        self.connected = False
        if self.transport is not None:
            self.transport.loseConnection()

    def connectionLost(self, reason):
        self.connected = False
        self._buffer = bytearray()
        self._parts = []
        self.receiver.link_lost(reason)
