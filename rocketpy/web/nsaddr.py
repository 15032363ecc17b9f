"""Web layer: the address server (``/rocketmq/nsaddr``), the HTTP endpoint Java brokers and
clients poll for the NameServer list instead of being given ``namesrvAddr``.

Java builds the URL in ``MixAll.getWSAddr``: ``http://<rocketmq.namesrv.domain>:8080/rocketmq/
<rocketmq.namesrv.domain.subgroup>`` (the domain defaults to ``jmenv.tbsite.net``, the subgroup
to ``nsaddr``; a domain holding ``:`` is used as ``host:port`` without ``:8080``).
``DefaultTopAddressing.fetchNSAddr`` appends ``-<unitName>?nofix=1`` when the client has a unit
name, sends a plain GET (headers ``Client-Version``, ``Content-Type``,
``Metaq-Client-RequestTS``), and on 200 keeps the body up to its first line break, trimmed: the
list ``host:port;host:port`` it hands to ``updateNameServerAddressList``. Anything but 200 is
logged by the client, which keeps its old list.

The lists are given on the command line (``--nsaddr LIST`` for ``/rocketmq/nsaddr``,
``--nsaddr NAME=LIST`` for ``/rocketmq/NAME``, e.g. ``nsaddr-unit1`` or another subgroup)."""
from twisted.web import http
from twisted.web.resource import Resource

__all__ = ["parse_nsaddr", "AddressServer", "DEFAULT_SUBGROUP", "PATH_PREFIX"]

#: Java ``MixAll.WS_DOMAIN_SUBGROUP``'s default: the last path segment without a unit
DEFAULT_SUBGROUP = "nsaddr"
#: the path every address-server URL starts with (``MixAll.getWSAddr``)
PATH_PREFIX = b"/rocketmq/"


def _address(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not host:port")
    if any(c.isspace() or ord(c) < 32 or c in ";/?#" for c in host):
        raise ValueError(f"{text!r} is not host:port")
    return f"{host}:{int(port)}"


def parse_nsaddr(value):
    """``(name, "a:9876;b:9876")`` of one ``--nsaddr`` value: ``LIST`` (name ``nsaddr``) or
    ``NAME=LIST``; ValueError says what is wrong."""
    name, sep, addresses = value.partition("=")
    if not sep:
        name, addresses = DEFAULT_SUBGROUP, value
    name = name.strip()
    if not name or any(not (c.isalnum() or c in "-_.") for c in name):
        raise ValueError(f"{name!r} is not a subgroup name (letters, digits, '-', '_', '.')")
    parts = [p.strip() for p in addresses.split(";") if p.strip()]
    if not parts:
        raise ValueError("no NameServer address (expected host:port;host:port)")
    return name, ";".join(_address(p) for p in parts)


class AddressServer(Resource):
    """``/rocketmq/<name>``: the configured list as ``text/plain``; 404 for other names."""

    isLeaf = True

    def __init__(self, lists):
        super().__init__()
        self.lists = dict(lists)

    def render_GET(self, request):
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        name = b"/".join(request.postpath).decode("utf-8", "replace")
        answer = self.lists.get(name)
        if answer is None:
            request.setResponseCode(http.NOT_FOUND)
            return f"No NameServer list {name!r} here.\n".encode("utf-8")
        return answer.encode("ascii") + b"\n"
