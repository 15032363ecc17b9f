"""Wire codec layer: cut a TCP byte stream into whole frames (Java ``NettyDecoder``'s framing).

Pure and incremental, for the capture tool and tests; the Twisted transport frames the live
stream itself but applies the same limit through :func:`frame_length`.
"""
from .frame import DEFAULT_MAX_FRAME_LENGTH, frame_length

__all__ = ["split_frames", "FrameSplitter"]


def split_frames(buf, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
    """Return ``(frames, remainder)``: every whole frame at the front of ``buf``, and the rest.

    Raises :class:`~rocketpy.remoting.errors.FrameTooLargeError` as soon as a length prefix
    announces a frame over the limit, before any of it is buffered.
    """
    frames = []
    pos = 0
    size = len(buf)
    while size - pos >= 4:
        end = pos + 4 + frame_length(buf[pos:pos + 4], max_frame_length)
        if end > size:
            break
        frames.append(bytes(buf[pos:end]))
        pos = end
    return frames, bytes(buf[pos:])


class FrameSplitter:
    """Feed bytes in any chunking; get whole frames out."""

    def __init__(self, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
        self.max_frame_length = max_frame_length
        self._buffer = b""

    @property
    def pending(self):
        """Bytes held for a frame not yet complete."""
        return len(self._buffer)

    def feed(self, data):
        frames, self._buffer = split_frames(self._buffer + data, self.max_frame_length)
        return frames
