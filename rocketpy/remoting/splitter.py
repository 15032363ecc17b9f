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
    """Feed bytes in any chunking; get whole frames out.

    Chunks of an incomplete frame are kept in a list and joined once the frame is whole, so a
    large frame arriving in small pieces costs linear time (re-joining the buffer on every feed
    would be quadratic: minutes for a 16 MiB frame sent 4 KiB at a time).
    """

    def __init__(self, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
        self.max_frame_length = max_frame_length
        self._chunks = []
        self._have = 0
        self._need = 4

    @property
    def pending(self):
        """Bytes held for a frame not yet complete."""
        return self._have

    def feed(self, data):
        if not data:
            return []
        self._chunks.append(bytes(data))
        self._have += len(data)
        if self._have < self._need:
            return []
        frames, rest = split_frames(b"".join(self._chunks), self.max_frame_length)
        self._chunks = [rest] if rest else []
        self._have = len(rest)
        # split_frames has checked a whole prefix of what is left against the limit
        self._need = 4 + int.from_bytes(rest[:4], "big") if len(rest) >= 4 else 4
        return frames
