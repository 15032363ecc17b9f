"""rocketpy.remoting: the RocketMQ remoting wire codec (pure: stdlib + construct, no Twisted).

The small public API other code and scripts use::

    from rocketpy.remoting import decode_frame, RemotingCommand
    cmd = decode_frame(frame_bytes)          # one whole frame, length prefix included
    cmd.code, cmd.opaque, cmd.ext_fields, cmd.body
    frame_bytes == cmd.encode()
"""
from .command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from .errors import (BodyDecodeError, CrcMismatchError, FrameTooLargeError, HeaderDecodeError,
                     InvalidFieldError, MissingFieldError, RemotingCodecError, TruncatedFrameError)
from .frame import DEFAULT_MAX_FRAME_LENGTH, decode_frame, encode_frame
from .splitter import FrameSplitter, split_frames

__all__ = [
    "RemotingCommand", "FLAG_RESPONSE", "FLAG_ONEWAY", "decode_frame", "encode_frame",
    "split_frames", "FrameSplitter", "DEFAULT_MAX_FRAME_LENGTH", "RemotingCodecError",
    "FrameTooLargeError", "TruncatedFrameError", "HeaderDecodeError", "BodyDecodeError",
    "CrcMismatchError", "MissingFieldError", "InvalidFieldError",
]
