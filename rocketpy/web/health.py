"""Web layer: the probes Kubernetes reads (a rocketpy addition; the Java NameServer has none),
and the route snapshot a peer warms itself from.

* ``/healthz`` (liveness): 200 while the reactor turns -- a :class:`ReactorPulse` ticking on the
  reactor's clock has ticked within :data:`PULSE_DEADLINE` seconds --, else 503. A wedged
  process answers nothing at all, which a probe counts as a failure too.
* ``/readyz`` (readiness): 200 once every :class:`Readiness` check passes (the remoting port
  takes connections, ``waitSecondsForService`` is past where ``needWaitForService`` is on, the
  route snapshot is loaded), else 503; the body names each check.
* ``/api/route-snapshot``: the tables as a route snapshot stream
  (:mod:`rocketpy.namesrv.routefile`, main part then routes part), for ``--warm-from``.

The probes say nothing a stranger could use, so like the address server they answer whoever
asks (probes come from the node, rarely inside ``adminAllowNetworks``); the snapshot, which
holds the whole route state, is guarded as the rest of ``/api/`` is."""
import json

from twisted.internet import task
from twisted.logger import Logger
from twisted.web import http
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from ..transport import logs

__all__ = ["ReactorPulse", "Readiness", "HealthPage", "ReadyPage", "RouteSnapshotPage",
           "PULSE_SECONDS", "PULSE_DEADLINE", "PROBE_PATHS"]

#: seconds between two pulses, and the longest silence still counted as turning
PULSE_SECONDS = 1.0
PULSE_DEADLINE = 10.0
#: the paths any client may read (:meth:`rocketpy.web.resource.WebSite.open_to_all`)
PROBE_PATHS = (b"/healthz", b"/readyz")


class ReactorPulse:
    """A call on the reactor every :data:`PULSE_SECONDS`; ``alive()`` while the last one is at
    most :data:`PULSE_DEADLINE` seconds old."""

    def __init__(self, clock, interval=PULSE_SECONDS, deadline=PULSE_DEADLINE):
        self.clock = clock
        self.interval = interval
        self.deadline = deadline
        self.last = clock.seconds()
        self.beats = 0
        self._loop = None

    def beat(self):
        self.last = self.clock.seconds()
        self.beats += 1

    def start(self):
        self.last = self.clock.seconds()
        self._loop = task.LoopingCall(self.beat)
        self._loop.clock = self.clock
        self._loop.start(self.interval, now=False)

    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def silence(self):
        """Seconds since the last pulse."""
        return self.clock.seconds() - self.last

    def alive(self):
        return self.silence() <= self.deadline


class Readiness:
    """Named checks, each a callable returning True when that part is ready."""

    def __init__(self, checks=()):
        self.checks = list(checks)

    def report(self):
        """``(ready, {name: bool})``."""
        results = {name: bool(check()) for name, check in self.checks}
        return all(results.values()), results


def _plain(request, status, text):
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    return text.encode("utf-8")


class HealthPage(Resource):
    """``/healthz``."""

    isLeaf = True

    def __init__(self, pulse):
        super().__init__()
        self.pulse = pulse

    def render_GET(self, request):
        silence = self.pulse.silence()
        if self.pulse.alive():
            return _plain(request, http.OK, f"ok (last reactor pulse {silence:.1f} s ago)\n")
        return _plain(request, http.SERVICE_UNAVAILABLE,
                      f"the reactor has not turned for {silence:.1f} s\n")


class ReadyPage(Resource):
    """``/readyz``: ``{"ready": bool, "checks": {name: bool}}``."""

    isLeaf = True

    def __init__(self, readiness):
        super().__init__()
        self.readiness = readiness

    def render_GET(self, request):
        ready, checks = self.readiness.report()
        request.setResponseCode(http.OK if ready else http.SERVICE_UNAVAILABLE)
        request.setHeader(b"content-type", b"application/json; charset=utf-8")
        return json.dumps({"ready": ready, "checks": checks}).encode("utf-8") + b"\n"


class RouteSnapshotPage(Resource):
    """``/api/route-snapshot``: ``stream()`` (a Deferred of the snapshot's bytes) as the body."""

    isLeaf = True
    log = Logger(observer=logs.observer)

    def __init__(self, stream):
        super().__init__()
        self.stream = stream

    def render_GET(self, request):
        request.setHeader(b"content-type", b"application/octet-stream")
        finished = []
        request.notifyFinish().addErrback(finished.append)

        def send(data):
            if not finished:
                request.setHeader(b"content-length", str(len(data)).encode())
                request.write(data)
                request.finish()

        def failed(failure):
            self.log.failure("route snapshot for a peer failed", failure)
            if not finished:
                request.setResponseCode(http.INTERNAL_SERVER_ERROR)
                request.finish()
        self.stream().addCallbacks(send, failed)
        return NOT_DONE_YET
