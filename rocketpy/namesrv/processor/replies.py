"""NameServer processor layer: what a handler is given and what it returns, before frames.

A :func:`responder` method receives its code's typed request header, decoded by the dispatcher
(as AMP binds a command's arguments to its responder), and returns a :class:`Reply`: code,
remark, typed response header and body (a codec bean, or bytes). A ``None`` header writes no
``extFields``; a header with every field ``None`` writes ``"extFields":{}``, as Java's
``createResponseCommand(Class)``. ``reuse`` marks a reply computed from the request and one route
snapshot alone, so the transport may answer an identical request with the same bytes while that
version stands (:mod:`rocketpy.transport.answercache`)."""
from dataclasses import dataclass
from typing import Any, NamedTuple

from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.errors import (BodyDecodeError, DecodeBudgetExceeded, InvalidFieldError,
                                      MissingFieldError, shown)
from rocketpy.remoting.headers import request_header_class

from ..javaprops import PropertiesError, body_to_properties
from ..pending import DISK, Pending

__all__ = ["Reply", "ok", "error", "NOT_SET_REMARK", "java_exception_remark", "failure_remark",
           "java_string", "responder", "responders", "ReusableResponse", "durable", "update_properties"]

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


def update_properties(body, budget):
    """``(properties, None)`` of a config update's body (UPDATE_NAMESRV_CONFIG,
    UPDATE_CONTROLLER_CONFIG), or ``(None, remark)`` of the SYSTEM_ERROR that refuses it: Java's
    for text ``string2Properties`` refuses, rocketpy's for one that would cost more than
    ``budget`` allows."""
    try:
        return body_to_properties(body, budget), None
    except PropertiesError:
        return None, "string2Properties error"
    except DecodeBudgetExceeded as exc:
        return None, f"[REFUSED] {exc}; nothing was applied"


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


def responder(code, java_decode=False, writes=False):
    """Mark a method as the handler of request ``code``; the dispatcher decodes the code's
    header first and passes it (None when the code has none).

    ``writes``: the handler may change state (the route tables, the KV store, the settings):
    the one declaration the worker processes read (:mod:`rocketpy.transport.forwarding`): such
    a request goes to the route writer, every other one is answered from a replica.

    With ``java_decode`` the header is read as Java reads it: a missing or unparsable field keeps
    its default (``RemotingCommand.decodeCommandCustomHeader`` catches its own "the custom field
    <...> is null" exception and only logs it, in 4.9.8, 5.0.0 and 5.3.3 alike), and the handler
    does with that None what Java does. Without, a missing required field is answered
    SYSTEM_ERROR at once (handlers not yet checked against Java's null paths)."""
    def mark(method):
        method.responds_to = (int(code), java_decode)
        method.writes = writes
        return method
    return mark


def responders(*groups):
    """``{code: (header class or None, bound method, decoded as Java?)}`` of the marked methods
    of ``groups``."""
    table = {}
    for group in groups:
        for name in dir(type(group)):
            mark = getattr(getattr(type(group), name), "responds_to", None)
            if mark is not None:
                code, java_decode = mark
                table[code] = (request_header_class(code), getattr(group, name), java_decode)
    return table
