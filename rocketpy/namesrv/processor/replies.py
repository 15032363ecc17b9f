"""NameServer processor layer: the answer a handler returns, before it becomes a frame.

A handler returns a :class:`Reply` (code, remark, extFields, body); the dispatcher turns it into
the :class:`~rocketpy.remoting.command.RemotingCommand` Java writes (same opaque, response
flag, the server's version, serialisation per profile). ``ext_fields`` follows Java's
``createResponseCommand``: ``None`` when the answer has no custom header (no ``extFields`` key
on the wire), a dict (possibly empty, ``"extFields":{}``) when it has one.
"""
from typing import NamedTuple

from rocketpy.remoting.codes import ResponseCode

from ..pending import DISK, Pending

__all__ = ["Reply", "ok", "error", "NOT_SET_REMARK", "java_exception_remark", "durable"]

#: ``createResponseCommand(Class)``'s placeholder remark, left in place by handlers that never
#: reset it (GET_BROKER_MEMBER_GROUP answers SUCCESS with it).
NOT_SET_REMARK = "not set any response code"


class Reply(NamedTuple):
    code: int = ResponseCode.SUCCESS
    remark: "str | None" = None
    ext_fields: "dict | None" = None
    body: "bytes | None" = None


def ok(body=None, ext_fields=None, remark=None):
    return Reply(ResponseCode.SUCCESS, remark, ext_fields, body)


def error(code, remark, ext_fields=None):
    return Reply(code, remark, ext_fields, None)


def java_exception_remark(java_class, message=None, where=None):
    """``RemotingHelper.exceptionSimpleDesc``: ``toString()`` of the exception, then its first
    stack frame."""
    text = java_class if message is None else f"{java_class}: {message}"
    return text if where is None else f"{text}, {where}"


def durable(write, reply, what):
    """``reply`` once ``write`` (a :class:`~rocketpy.namesrv.pending.FileWrite`, or None for
    nothing to write) is on disk; a write that fails is answered SYSTEM_ERROR naming ``what``
    (Java logs the failed persist and answers SUCCESS: rocketpy does not acknowledge a change
    it could not make durable; the change stays in memory and goes out with the next write)."""
    if write is None:
        return reply

    def failed(exc):
        why = getattr(exc, "strerror", None) or exc
        return error(ResponseCode.SYSTEM_ERROR, f"{what} could not be written to disk: {why}")

    return Pending(write, lambda _: reply, DISK, failed)
