"""Wire codec layer: the longest name, address or check code a stranger may give a field the
NameServer or the controller keeps (a rocketpy addition: Java bounds none of them, so a
registration could leave a broker name of 16 MiB in the tables for good).

One bound for all of them, far above any genuine one: a topic is at most 127 characters
(``TopicValidator.TOPIC_MAX_LENGTH``), a pop retry topic ``%RETRY%`` + group + ``_`` + topic at
most 390 (a group 255: ``Validators.CHARACTER_MAX_LENGTH``), a host name 253, a controller check
code an address, ``;`` and a time. A longer value is refused where it is read, naming the field
and the bound (:class:`NameTooLongError`): a header field by
:meth:`~rocketpy.remoting.headers.CommandHeader.from_ext_fields`, a body's by the bean properties
declared with :data:`~rocketpy.remoting.bodies.NAME` and the registration fast readers, which
call :func:`check_name`. The KV table's keys and values have their own bounds
(``kvConfigMax*Bytes``)."""
from .errors import BodyDecodeError

__all__ = ["MAX_NAME_LENGTH", "KEPT_HEADER_FIELDS", "NameTooLongError", "check_name"]

#: characters (Python's, code points)
MAX_NAME_LENGTH = 1024
#: the header fields (wire names) whose strings the tables keep: names, addresses, check codes
KEPT_HEADER_FIELDS = frozenset((
    "topic", "brokerName", "clusterName", "cluster", "brokerAddr", "haServerAddr", "masterAddr",
    "haBrokerAddr", "brokerAddress", "masterAddress", "registerCheckCode", "bname",
    "__ZONE_NAME"))


class NameTooLongError(BodyDecodeError):
    """A body's name, address or check code over :data:`MAX_NAME_LENGTH` characters."""

    def __init__(self, what, length):
        self.what = what
        self.length = length
        super().__init__(f"{what} is {length} characters long, over the {MAX_NAME_LENGTH} "
                         "a name, address or check code may have")


def check_name(text, what):
    """``text`` when it is within :data:`MAX_NAME_LENGTH`, else :class:`NameTooLongError`."""
    if len(text) > MAX_NAME_LENGTH:
        raise NameTooLongError(what, len(text))
    return text
