"""NameServer state layer: what a request handler returns, before frames, and the remarks Java
writes (the NameServer's processors and the controller's share them).

A handler returns a :class:`Reply`: code, remark, typed response header and body (a codec bean,
or bytes). A ``None`` header writes no ``extFields``; a header with every field ``None`` writes
``"extFields":{}``, as Java's ``createResponseCommand(Class)``. ``reuse`` marks a reply computed
from the request and one route snapshot alone, so the transport may answer an identical request
with the same bytes while that version stands (:mod:`rocketpy.transport.answercache`). The
guards below the processors (:mod:`~rocketpy.namesrv.route_bounds`) refuse with a Reply too."""
from dataclasses import dataclass
from typing import Any, NamedTuple

from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.errors import BodyDecodeError, InvalidFieldError, MissingFieldError, shown

from .pending import DISK, Pending

__all__ = ["Reply", "ok", "error", "NOT_SET_REMARK", "java_exception_remark", "failure_remark",
           "java_string", "ReusableResponse", "durable"]

#: ``createResponseCommand(Class)``'s placeholder remark, left in place by handlers that never
#: reset it (GET_BROKER_MEMBER_GROUP answers SUCCESS with it).
NOT_SET_REMARK = "not set any response code"


class Reply(NamedTuple):
    code: int = ResponseCode.SUCCESS
    remark: "str | None" = None
    header: Any = None
    body: Any = None
    #: ``(topic, snapshot version)`` of a reply that depends on nothing else
    reuse: "tuple | None" = None


def ok(body=None, header=None, remark=None, reuse=None):
    return Reply(ResponseCode.SUCCESS, remark, header, body, reuse)


def java_string(value):
    """``String.valueOf``: how Java's ``"..." + value`` writes a header field that was absent."""
    return "null" if value is None else value


def error(code, remark, header=None):
    return Reply(code, remark, header, None)


def java_exception_remark(java_class, message=None, where=None):
    """``RemotingHelper.exceptionSimpleDesc``: ``toString()`` of the exception, then its first
    stack frame."""
    text = java_class if message is None else f"{java_class}: {message}"
    return text if where is None else f"{text}, {where}"


_REMOTING_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingCommandException"


def failure_remark(exc):
    """A Java-like ``exceptionSimpleDesc`` for a request that failed with ``exc`` (the
    NameServer's and the controller's processors answer it alike)."""
    if isinstance(exc, MissingFieldError):
        return java_exception_remark(_REMOTING_EXCEPTION, f"the custom field <{exc.field}> is null")
    if isinstance(exc, InvalidFieldError):
        return java_exception_remark(
            _REMOTING_EXCEPTION, f"the custom field <{exc.field}> is not a valid value: "
                                 f"{shown(exc.value)}")
    if isinstance(exc, BodyDecodeError):
        return java_exception_remark("com.alibaba.fastjson.JSONException", str(exc))
    return java_exception_remark(f"{type(exc).__module__}.{type(exc).__name__}", str(exc) or None)


def durable(write, reply, what):
    """``reply`` once ``write`` (a :class:`~rocketpy.namesrv.pending.FileWrite`, or None for
    nothing to write) is on disk; a write that fails is answered SYSTEM_ERROR naming ``what``
    (Java logs the failed persist and answers SUCCESS: rocketpy does not acknowledge a change
    it could not make durable). A write with ``settle`` (the KV store's) changes memory only
    once durable, so a refused change changes nothing; otherwise the change stays in memory and
    goes out with the next write."""
    if write is None:
        return reply
    settle = write.settle

    def refused(why):
        return error(ResponseCode.SYSTEM_ERROR, f"{what} could not be written to disk: {why}")

    def finished(_):
        if settle is None or settle():
            return reply
        return refused("its write failed")

    def failed(exc):
        if settle is not None and settle():   # its own record was durable before the failure
            return reply
        return refused(getattr(exc, "strerror", None) or exc)

    return Pending(write, finished, DISK, failed)


@dataclass(slots=True)
class ReusableResponse(RemotingCommand):
    """An answer the transport may send again to an identical request while the route snapshot
    named by ``reuse`` (``(topic, version)``) stays current."""

    reuse: "tuple | None" = None
