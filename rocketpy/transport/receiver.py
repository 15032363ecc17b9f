"""Transport layer: the frame receiver of one connection (Java ``NettyDecoder``, a
``LengthFieldBasedFrameDecoder``): it holds what has arrived of the next frame, owns the
read-ahead, and hands over bytes that start with a whole frame.

Framing with one copy: a partial frame's chunks are joined once it is complete (a 1.5 MB
registration costs one join, not a reallocation per read), and while a big frame is incomplete
the socket is read in pieces as big as what is missing
(:meth:`~rocketpy.transport.tuning.TransportTuning.read_up_to`). Lengths come from the codec's
prefix reader (:func:`~rocketpy.remoting.layout.bytes_needed`); the caller cuts frames with
:func:`~rocketpy.remoting.layout.frame_at`, which applies the 16 MiB limit before any of an
oversized frame is kept."""
from ..remoting.layout import bytes_needed

__all__ = ["FrameReceiver"]


class FrameReceiver:
    """Bytes held between reads: ``have`` of the ``need`` the frame at their start takes."""

    __slots__ = ("_tuning", "_chunks", "have", "need", "frames")

    def __init__(self, tuning):
        self._tuning = tuning
        self._chunks = []
        self.have = 0
        self.need = 0
        #: whole frames in what is held, when the caller said (:meth:`keep`); None: not known
        self.frames = None

    @property
    def holding(self):
        """Something is held (a partial frame, or a paused connection's unread frames)."""
        return bool(self._chunks)

    @property
    def complete(self):
        """What is held starts with a whole frame."""
        return bool(self._chunks) and self.have >= self.need

    @property
    def incomplete(self):
        """A frame has started and is not all there."""
        return bool(self._chunks) and self.have < self.need

    def receive(self, data, paused):
        """One read: the bytes to serve now (they start with a whole frame, or are a first
        read), or None when they are held -- the frame is incomplete, or reading is ``paused``
        (bytes a TLS layer had decrypted already still arrive)."""
        if self._chunks:
            self._chunks.append(data)
            self.have += len(data)
            self.frames = None
            if self.have < self.need or paused:
                self._tuning.read_up_to(self.need - self.have)  # no further than its end
                return None
            return self.take()
        if paused:
            self._chunks = [data]
            self.have = len(data)
            self.need = 0  # not looked at yet: served as a whole when reading resumes
            self.frames = None
            return None
        return data

    def take(self):
        """Everything held, joined, and nothing held any more."""
        data = b"".join(self._chunks) if len(self._chunks) > 1 else bytes(self._chunks[0])
        self._chunks = []
        self.frames = None
        self._tuning.read_up_to(0)
        return data

    def keep(self, rest, frames=None):
        """Hold ``rest`` (what a read left after its whole frames, ``frames`` of them when the
        caller knows); read ahead for a big frame."""
        self._chunks = [rest]
        self.have = len(rest)
        self.need = bytes_needed(rest)
        self.frames = frames
        self._tuning.read_up_to(self.need - self.have)

    def clear(self):
        self._chunks = []
