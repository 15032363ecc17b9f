"""Web layer: the ``twisted.web`` resources of the web endpoint and its site: ``/`` (the status
page, ``?q=&page=&per=&refresh=``), ``/metrics`` and ``/api/`` (an index of the JSON endpoints).

Read-only: GET and HEAD only (405 otherwise). :class:`WebSite` refuses (403) clients outside
``adminAllowNetworks`` when it is set -- the list that guards the administrative remoting
requests; clients of a UNIX socket are local and always allowed (the file's permissions guard
it), except for the address server's ``/rocketmq/`` (:mod:`~rocketpy.web.nsaddr`), which every
broker and client must reach and which tells only what they are told anyway. Both checks, and
the body bound (:data:`MAX_BODY`, 413 above it), are made by the channel as soon as the headers
are in, before any body byte is kept: twisted.web's own ``Request`` spools a body over 100 KB
to a temporary file, so a stranger could fill the disk with a body that is refused
afterwards."""
import io
import ipaddress
import json
from urllib.parse import unquote

from twisted.logger import Logger
from twisted.web import http
from twisted.web import pages
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

from .health import PROBE_PATHS, HealthPage, ReadyPage, RouteSnapshotPage
from .metrics import MetricsPage
from .nsaddr import PATH_PREFIX, AddressServer
from .page import CONTENT_SECURITY_POLICY, page_parameters, render_status_page
from .state import DEFAULT_LIMIT, MAX_LIMIT
from .topicsearch import SearchBusy
from ..transport import logs

__all__ = ["StatusPage", "ApiResource", "WebRoot", "WebSite", "client_allowed", "API_ENDPOINTS",
           "MAX_BODY"]

#: The largest request body kept (in memory; a read-only site needs none): a declared
#: Content-Length above it, or a chunked body growing past it, is answered 413 and closed.
MAX_BODY = 64 * 1024
#: Digits of a Content-Length read at all (a larger one is refused 400, before conversion; one
#: above :data:`MAX_BODY` is refused 413)
MAX_LENGTH_DIGITS = 18
#: Seconds a refused connection is still read (and what comes discarded) after its answer,
#: so that a client still sending its body gets the answer, not a reset (nginx's
#: ``lingering_time`` idea): bandwidth at most, never memory or disk.
LINGER_SECONDS = 10.0

API_ENDPOINTS = {
    "/api/summary": "server version, profile, uptime and the counts of the status page",
    "/api/clusters": "clusters -> broker groups -> brokers (address, id, version, data version, "
                     "heartbeat age and timeout, topic count, connection state)",
    "/api/brokers": "every broker address as one flat list",
    "/api/groups": f"broker groups with their brokers, in natural order; ?q= filter (cluster, "
                   f"group or address), ?offset=, ?limit= (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})",
    "/api/topics": f"topics with queue data and route; ?q= filter, ?offset=, ?limit= "
                   f"(default {DEFAULT_LIMIT}, at most {MAX_LIMIT})",
    "/api/topics/<topic>": "one topic (404 when it has no route)",
    "/api/kv": "KV config: namespace -> key -> value",
    "/api/kv/<namespace>": "one KV namespace",
    "/api/peers": "the latest comparison with the --peers NameServers (404 without --peers)",
    "/api/route-snapshot": "the route tables as a route snapshot stream (what --warm-from loads)",
    "/api/workers": "the processes of a server of several (serverWorkerProcesses): pid, state, "
                    "connections, the stream's sequence number and what each applied; "
                    "?peer=host:port says which one holds that connection (404 with one process)",
}


def _args(request):
    """``{name: first value}`` of the query string, as text."""
    return {k.decode("utf-8", "replace"): v[0].decode("utf-8", "replace")
            for k, v in (request.args or {}).items() if v}


def _common_headers(request):
    request.setHeader(b"cache-control", b"no-store")
    request.setHeader(b"x-content-type-options", b"nosniff")
    request.setHeader(b"referrer-policy", b"no-referrer")
    request.setHeader(b"x-frame-options", b"DENY")


def _page_bounds(args):
    """``(offset, limit)`` of the query; ValueError when one is not an integer."""
    offset, limit = args.get("offset", "0"), args.get("limit", str(DEFAULT_LIMIT))
    if len(offset) > 18 or len(limit) > 18:
        raise ValueError("too many digits")
    return int(offset), int(limit)


def _when_found(request, names, render, *args):
    """``render(request, names, *args)`` once the Deferred ``names`` has the topic names: at
    once when it has them already, else later (NOT_DONE_YET) unless the client left; 503 when
    too many searches are under way (:class:`~rocketpy.web.topicsearch.SearchBusy`)."""
    result = []
    names.addBoth(result.append)
    if result:
        return _rendered(request, result[0], render, args)
    gone = []
    request.notifyFinish().addBoth(gone.append)

    def found(_):
        if not gone:
            request.write(_rendered(request, result[0], render, args))
            request.finish()
    names.addCallback(found)
    return NOT_DONE_YET


def _rendered(request, outcome, render, args):
    if isinstance(outcome, Failure):
        outcome.trap(SearchBusy)
        request.setResponseCode(http.SERVICE_UNAVAILABLE)
        request.setHeader(b"retry-after", b"1")
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return f"Busy: {outcome.getErrorMessage()}; try again in a second.\n".encode("utf-8")
    return render(request, outcome, *args)


class StatusPage(Resource):
    """``/``: the HTML status page."""

    isLeaf = True

    def __init__(self, view):
        super().__init__()
        self.view = view

    def render_GET(self, request):
        if request.postpath and request.postpath != [b""]:
            request.setResponseCode(http.NOT_FOUND)
            request.setHeader(b"content-type", b"text/plain; charset=utf-8")
            return b"Not found. The status page is /, metrics /metrics, JSON /api/.\n"
        params = page_parameters(_args(request))
        names = self.view.topic_names(params["q"], hide_system=not params["sys"])
        return _when_found(request, names, self._page, params)

    def _page(self, request, names, params):
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        request.setHeader(b"content-security-policy", CONTENT_SECURITY_POLICY.encode())
        return render_status_page(self.view, params, names)


class ApiResource(Resource):
    """``/api/...``: the status page's data as JSON."""

    isLeaf = True

    def __init__(self, view, snapshot=None):
        super().__init__()
        self.view = view
        self.snapshot = snapshot   # /api/route-snapshot (a RouteSnapshotPage), or None

    def render_GET(self, request):
        path = [unquote(p.decode("utf-8", "replace")) for p in request.postpath]
        while path and path[-1] == "":
            path.pop()
        if path == ["route-snapshot"] and self.snapshot is not None:
            return self.snapshot.render_GET(request)
        args = _args(request)
        if path == ["topics"]:
            try:
                offset, limit = _page_bounds(args)
            except ValueError:
                return self._json(request, http.BAD_REQUEST,
                                  {"error": "offset and limit must be integers"})
            names = self.view.topic_names(args.get("q"))
            return _when_found(request, names, lambda request, names: self._json(
                request, http.OK, self.view.topics(names, args.get("q"), offset, limit)))
        return self._json(request, *self.answer(path, args))

    @staticmethod
    def _json(request, status, data):
        request.setResponseCode(status)
        request.setHeader(b"content-type", b"application/json; charset=utf-8")
        return json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"

    def answer(self, path, args):
        """``(HTTP status, JSON-ready data)`` for the path segments after ``/api`` (but
        ``/api/topics``, which waits for its search)."""
        view = self.view
        if not path:
            return http.OK, {"endpoints": API_ENDPOINTS}
        head, rest = path[0], path[1:]
        if head == "summary" and not rest:
            return http.OK, view.summary()
        if head == "clusters" and not rest:
            return http.OK, {"clusters": view.clusters()}
        if head == "brokers" and not rest:
            return http.OK, {"brokers": view.brokers()}
        if head == "groups" and not rest:
            try:
                offset, limit = _page_bounds(args)
            except ValueError:
                return http.BAD_REQUEST, {"error": "offset and limit must be integers"}
            return http.OK, view.broker_groups(args.get("q"), offset, limit)
        if head == "topics":
            topic = view.topic("/".join(rest))
            if topic is None:
                return http.NOT_FOUND, {"error": f"no route for topic {'/'.join(rest)!r}"}
            return http.OK, topic
        if head == "peers" and not rest:
            peers = view.peers()
            if peers is None:
                return http.NOT_FOUND, {"error": "no --peers given"}
            return http.OK, peers
        if head == "workers" and not rest:
            workers = view.workers()
            if workers is None:
                return http.NOT_FOUND, {"error": "one process (serverWorkerProcesses=1)"}
            out = {"sequence": workers[0]["sequence"], "workers": workers,
                   "unregistrationQueueDepth": view.counts()["unregistrationQueueDepth"]}
            if "peer" in args:
                out["peer"] = args["peer"]
                out["worker"] = view.worker_of(args["peer"])
            return http.OK, out
        if head == "kv":
            kv = view.kv()
            if not rest:
                return http.OK, {"namespaces": kv}
            namespace = "/".join(rest)
            if namespace not in kv:
                return http.NOT_FOUND, {"error": f"no KV namespace {namespace!r}"}
            return http.OK, {"namespace": namespace, "entries": kv[namespace]}
        return http.NOT_FOUND, {"error": "unknown endpoint", "endpoints": API_ENDPOINTS}


class WebRoot(Resource):
    """The tree: ``/`` status page, ``/metrics``, ``/api/``, ``/healthz`` and ``/readyz`` (with
    a ``pulse`` and a ``readiness``, :mod:`rocketpy.web.health`), and ``/rocketmq/`` (the
    address server) when ``nsaddr`` (``{name: "a:9876;b:9876"}``) is given."""

    def __init__(self, view, registry, reactor=None, nsaddr=None, pulse=None, readiness=None,
                 snapshot_stream=None):
        super().__init__()
        self.status = StatusPage(view)
        self.putChild(b"metrics", MetricsPage(registry, reactor))
        self.putChild(b"api", ApiResource(view, None if snapshot_stream is None
                                          else RouteSnapshotPage(snapshot_stream)))
        if pulse is not None:
            self.putChild(b"healthz", HealthPage(pulse))
        if readiness is not None:
            self.putChild(b"readyz", ReadyPage(readiness))
        if nsaddr:
            self.putChild(b"rocketmq", AddressServer(nsaddr))

    def getChild(self, path, request):
        request.postpath.insert(0, path)
        request.prepath.pop()
        return self.status


def client_allowed(address, networks):
    """True when ``address`` (a Twisted address) may use the endpoint under ``networks``."""
    if not networks:
        return True
    host = getattr(address, "host", None)
    if host is None:
        return True   # a UNIX socket: local, guarded by the file's permissions
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in networks if net.version == ip.version)


_REASONS = {414: b"URI Too Long", 413: b"Content Too Large", 431: b"Request Header Fields Too Large"}


def _status_line(code):
    return b"HTTP/1.1 %d %s" % (code, _REASONS.get(code) or http.RESPONSES[code])


class _BoundedRequest(Request):
    """twisted.web's request with its body in memory, at most :data:`MAX_BODY` bytes (the
    channel refuses a larger declared length; a chunked body is cut here)."""

    def gotLength(self, length):
        self.content = io.BytesIO()
        self._body_size = 0

    def handleContentChunk(self, data):
        self._body_size += len(data)
        if self._body_size > MAX_BODY:
            self.channel.refuse(http.REQUEST_ENTITY_TOO_LARGE, b"The request body is too large.\n")
            return
        self.content.write(data)


class _Channel(http.HTTPChannel):
    """twisted.web's channel, except that:

    - a line over its limit (16 KiB) is answered instead of dropping the connection: 414 URI
      Too Long for a request line, 431 for a header; a Content-Length of over
      :data:`MAX_LENGTH_DIGITS` digits gets 400;
    - once the headers are in, and before any body byte is read, a peer outside the allow-list
      gets 403 and a declared body over :data:`MAX_BODY` 413 (then the connection closes)."""

    _refused = False

    def headerReceived(self, line):
        """A Content-Length of more digits than any body this site takes is answered 400 before
        twisted.web converts it (``int()`` of 5,000 digits raised out of the channel: a logged
        traceback, no answer)."""
        name, _, value = line.partition(b":")
        if name.strip(b" \t").lower() == b"content-length":
            digits = value.strip(b" \t").lstrip(b"0")
            if len(digits) > MAX_LENGTH_DIGITS and digits.isdigit():
                self.refuse(http.BAD_REQUEST, b"The Content-Length is not a number this server "
                            b"reads (at most %d digits).\n" % MAX_LENGTH_DIGITS)
                return False
        return super().headerReceived(line)

    def lineLengthExceeded(self, line):
        first = self._receivedHeaderSize == 0   # nothing of this request's head seen yet
        if first:
            self.refuse(http.REQUEST_URI_TOO_LONG, b"The request line is too long.\n")
        else:
            self.refuse(431, b"A request header is too long.\n")

    def refuse(self, code, body):
        """Answer ``code`` with ``body`` and close. Nothing more is kept: what the peer still
        sends is read and dropped for :data:`LINGER_SECONDS` at most (after our end is shut),
        so that the answer is not lost to a reset while its body is on its way."""
        if self._refused:
            return
        self._refused = True
        self.setTimeout(None)
        self.dataReceived = self.rawDataReceived = self.lineReceived = lambda data: None
        self.transport.write(_status_line(code) + b"\r\ncontent-type: text/plain; "
                             b"charset=utf-8\r\ncontent-length: " + str(len(body)).encode()
                             + b"\r\nconnection: close\r\n\r\n" + body)
        if hasattr(self.transport, "loseWriteConnection"):
            self.transport.loseWriteConnection()
            self._abortingCall = self.callLater(LINGER_SECONDS, self.forceAbortClient)
        else:
            self.loseConnection()

    def allHeadersReceived(self):
        site = self.site
        if not (client_allowed(self.transport.getPeer(), site.allow_networks)
                or site.open_to_all(self._command, self._path)):
            site.refuse_client(self.transport.getPeer())
            self.refuse(http.FORBIDDEN, b"This client is not in adminAllowNetworks.\n")
            return
        if self.length is not None and self.length > MAX_BODY:
            self.refuse(http.REQUEST_ENTITY_TOO_LARGE, b"The request body is too large.\n")
            return
        super().allHeadersReceived()

    def allContentReceived(self):
        if not self._refused:
            super().allContentReceived()


class WebSite(Site):
    """A ``Site`` that honours the allow-list, sets the common headers and logs only refusals
    and errors (a scrape every 15 s and a page refreshing every 10 s would drown the log).
    An oversized request line gets 414, not a dropped connection, and out-of-list peers and
    large bodies are refused before the body is read (:class:`_Channel`)."""

    _logger = Logger(observer=logs.observer)
    protocol = _Channel
    requestFactory = _BoundedRequest

    def __init__(self, resource, allow_networks=(), **kwargs):
        kwargs.setdefault("timeout", 60)
        super().__init__(resource, **kwargs)
        self.noisy = False
        self.allow_networks = tuple(allow_networks)
        self.refused = 0

    def open_to_all(self, method, path):
        """True for a read of the address server or of a probe (``/healthz``, ``/readyz``),
        which the allow-list does not guard."""
        if method not in (b"GET", b"HEAD"):
            return False
        children = getattr(self.resource, "children", {})
        if path.split(b"?", 1)[0] in PROBE_PATHS:
            return children.get(path[1:].split(b"?", 1)[0]) is not None
        return path.startswith(PATH_PREFIX) and children.get(b"rocketmq") is not None

    def refuse_client(self, address):
        self.refused += 1
        self._logger.warn("web: refusing {client}: not in adminAllowNetworks",
                          client=getattr(address, "host", "?"))

    def getResourceFor(self, request):
        _common_headers(request)
        if not (client_allowed(request.getClientAddress(), self.allow_networks)
                or self.open_to_all(request.method, b"/" + b"/".join(request.postpath))):
            self.refuse_client(request.getClientAddress())   # requests not from a _Channel
            return pages.forbidden("Forbidden", "This client is not in adminAllowNetworks.")
        if request.method not in (b"GET", b"HEAD"):
            return _ReadOnly()
        return super().getResourceFor(request)

    def log(self, request):
        """twisted.web's access-log hook: only errors and refusals are logged."""
        if request.code >= 400:
            self._logger.warn("web: {method} {uri} -> {code}",
                              method=request.method.decode("ascii", "replace"),
                              uri=request.uri.decode("utf-8", "replace"), code=request.code)


class _ReadOnly(Resource):
    isLeaf = True

    def render(self, request):
        request.setResponseCode(http.NOT_ALLOWED)
        request.setHeader(b"allow", b"GET, HEAD")
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return b"Read-only: GET and HEAD only.\n"
