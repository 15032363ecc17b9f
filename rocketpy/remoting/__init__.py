"""rocketpy.remoting: the RocketMQ remoting wire codec (pure: stdlib + construct, no Twisted).

The small public API other code and scripts use::

    from rocketpy.remoting import decode_frame, RemotingCommand
    cmd = decode_frame(frame_bytes)          # one whole frame, length prefix included
    cmd.code, cmd.opaque, cmd.ext_fields, cmd.body
    frame_bytes == cmd.encode()

The names are imported on first use (PEP 562), so that a program that needs only a table, e.g.
``rocketpy.remoting.codes`` for the capture decoder's names, does not pay for the frame schema
(construct) at start-up.
"""
from rocketpy._lazy import lazy_exports

#: public name -> the module that defines it
_EXPORTS = {
    "RemotingCommand": ".command", "FLAG_RESPONSE": ".command", "FLAG_ONEWAY": ".command",
    "decode_frame": ".frame", "encode_frame": ".frame", "DEFAULT_MAX_FRAME_LENGTH": ".frame",
    "split_frames": ".splitter", "FrameSplitter": ".splitter",
    **dict.fromkeys(("RemotingCodecError", "FrameTooLargeError", "TruncatedFrameError",
                     "HeaderDecodeError", "BodyDecodeError", "CrcMismatchError",
                     "MissingFieldError", "InvalidFieldError"), ".errors"),
}

__all__ = [
    "RemotingCommand", "FLAG_RESPONSE", "FLAG_ONEWAY", "decode_frame", "encode_frame",
    "split_frames", "FrameSplitter", "DEFAULT_MAX_FRAME_LENGTH", "RemotingCodecError",
    "FrameTooLargeError", "TruncatedFrameError", "HeaderDecodeError", "BodyDecodeError",
    "CrcMismatchError", "MissingFieldError", "InvalidFieldError",
]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
