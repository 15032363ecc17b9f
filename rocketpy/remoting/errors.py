"""Wire codec layer: the exceptions a bad frame raises.

Java's ``NettyDecoder`` logs and closes the channel on *any* decode failure; rocketpy keeps that
behaviour at the transport but names each failure, so the log line (and the capture tool's error
column) tells a person what was wrong with the bytes.
"""


def shown(value, limit=60):
    """``repr(value)`` cut for a message or a remark (a refused value may be megabytes)."""
    text = repr(value if not isinstance(value, str) or len(value) <= limit else value[:limit])
    return text if len(text) <= limit else text[:limit - 3] + "..."


class RemotingCodecError(ValueError):
    """Base of every error raised while decoding or encoding RocketMQ remoting data."""


class FrameTooLargeError(RemotingCodecError):
    """The length prefix announces a frame over the configured limit (Java: frameMaxLength)."""


class TruncatedFrameError(RemotingCodecError):
    """Fewer (or more) bytes than the length prefix and header length announce."""


class HeaderDecodeError(RemotingCodecError):
    """The header is not valid JSON / ROCKETMQ binary, not UTF-8, or has an unknown serialize type."""


class BodyDecodeError(RemotingCodecError):
    """A body is not the JSON or compressed form its request code implies, or inflates past the limit."""


class CrcMismatchError(BodyDecodeError):
    """A REGISTER_BROKER body does not match its ``bodyCrc32`` (Java answers "crc32 not match")."""


class MissingFieldError(RemotingCodecError):
    """A required (Java ``@CFNotNull``) header field is absent."""

    def __init__(self, field, header=None):
        self.field = field
        self.header = header
        where = f" in {header}" if header else ""
        super().__init__(f"the field {field} is null{where}")


class InvalidFieldError(RemotingCodecError):
    """A header field does not convert to its Java type (Long, Integer, Boolean)."""

    def __init__(self, field, value, expected):
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"the field {field} has value {shown(value)}, expected {expected}")


class DecodeBudgetExceeded(BodyDecodeError):
    """A body would cost more decoding work than its :class:`~rocketpy.remoting.budget.DecodeBudget`
    allows (``limit`` work units); nothing past the bound was inflated or parsed."""

    def __init__(self, limit, what):
        self.limit = limit
        self.what = what
        super().__init__(f"decoding the body costs over {limit} work units (at {what})")


class DecodeCancelled(BodyDecodeError):
    """The decode was cancelled (server shutdown) at a budget check."""
