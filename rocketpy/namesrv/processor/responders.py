"""NameServer processor layer: which method answers which request code.

A :func:`responder` method receives its code's typed request header, decoded by the dispatcher
(as AMP binds a command's arguments to its responder), and returns a
:class:`~rocketpy.namesrv.replies.Reply`."""
from rocketpy.remoting.headers import request_header_class

__all__ = ["responder", "responders"]


def responder(code, java_decode=False):
    """Mark a method as the handler of request ``code``; the dispatcher decodes the code's
    header first and passes it (None when the code has none).

    With ``java_decode`` the header is read as Java reads it: a missing or unparsable field keeps
    its default (``RemotingCommand.decodeCommandCustomHeader`` catches its own "the custom field
    <...> is null" exception and only logs it, in 4.9.8, 5.0.0 and 5.3.3 alike), and the handler
    does with that None what Java does. Without, a missing required field is answered
    SYSTEM_ERROR at once (handlers not yet checked against Java's null paths)."""
    def mark(method):
        method.responds_to = (int(code), java_decode)
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
