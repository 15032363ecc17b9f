"""Wire codec layer: cut a TCP byte stream into whole frames (Java ``NettyDecoder``'s framing).

Pure and incremental, for tools and tests; the layout and the limit are
:mod:`rocketpy.remoting.layout`'s.
"""
from .layout import DEFAULT_MAX_FRAME_LENGTH, LENGTH_SIZE, bytes_needed, split_frames

__all__ = ["split_frames", "FrameSplitter"]


class FrameSplitter:
    """Feed bytes in any chunking; get whole frames out. An incomplete frame's chunks are joined once
    it is whole: linear time, where re-joining on every feed would take minutes for a 16 MiB frame
    sent 4 KiB at a time."""

    def __init__(self, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
        self.max_frame_length = max_frame_length
        self._chunks = []
        self._have = 0
        self._need = LENGTH_SIZE

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
        self._need = bytes_needed(rest)
        return frames
