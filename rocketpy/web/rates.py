"""Web layer: request and error rates over the last minute, from the counters the transport
already keeps (:class:`~rocketpy.transport.metrics.ServerMetrics`: nothing new on the hot path).

:meth:`TrafficRates.sample` runs every few seconds on the injected clock and keeps a minute of
totals; a rate is the difference to the oldest sample over the time between. A request is
anything answered or applied (cached route answers count as GET_ROUTEINFO_BY_TOPIC, shed ones
too); an error is any code but SUCCESS. The answer cache does not record codes, so a cached
TOPIC_NOT_EXIST counts as a request, not an error."""
from collections import deque

from ..remoting.codes import RequestCode, ResponseCode
from .metrics import code_label

__all__ = ["TrafficRates", "MergedMetrics", "WINDOW_SECONDS", "SAMPLE_SECONDS"]

WINDOW_SECONDS = 60.0
SAMPLE_SECONDS = 5.0
_ROUTE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)
_SUCCESS = int(ResponseCode.SUCCESS)


def _totals(metrics):
    """``{request code: [requests, errors]}`` since the start."""
    out = {}
    for (code, response), n in metrics.requests.items():
        entry = out.setdefault(code, [0, 0])
        entry[0] += n
        if response is not None and response != _SUCCESS:
            entry[1] += n
    if metrics.cached:
        out.setdefault(_ROUTE, [0, 0])[0] += metrics.cached
    for code, n in metrics.overloaded.items():
        entry = out.setdefault(code, [0, 0])
        entry[0] += n
        entry[1] += n
    return out


def _summed(tables):
    out = {}
    for table in tables:
        for key, n in table.items():
            out[key] = out.get(key, 0) + n
    return out


class MergedMetrics:
    """The counters of every process of a server of several (``sources()``: ``[(worker label,
    ServerMetrics)]``), summed where :class:`TrafficRates` reads them."""

    def __init__(self, sources):
        self._sources = sources

    @property
    def requests(self):
        return _summed(metrics.requests for _, metrics in self._sources())

    @property
    def cached(self):
        return sum(metrics.cached for _, metrics in self._sources())

    @property
    def overloaded(self):
        return _summed(metrics.overloaded for _, metrics in self._sources())


class TrafficRates:
    """Per-second rates of requests and error answers over the last ``window`` seconds, from the
    transport's :class:`~rocketpy.transport.metrics.ServerMetrics`."""

    def __init__(self, metrics, clock, window=WINDOW_SECONDS):
        self.metrics = metrics
        self.clock = clock
        self.window = window
        self._samples = deque()
        self.sample()

    def sample(self):
        """Remember the totals now; forget samples older than the window (keeping one, the
        base of the rates)."""
        now = self.clock.seconds()
        self._samples.append((now, _totals(self.metrics)))
        while len(self._samples) > 1 and self._samples[1][0] <= now - self.window:
            self._samples.popleft()

    def rates(self):
        """``{"seconds", "requests", "errors", "byCode": [{"code", "name", "requests",
        "errors"}]}``: per-second rates since the oldest sample (at most ``window`` seconds
        ago), the busiest request codes first."""
        now = self.clock.seconds()
        since, base = self._samples[0]
        seconds = now - since
        current = _totals(self.metrics)
        by_code = []
        for code, (requests, errors) in current.items():
            old_requests, old_errors = base.get(code, (0, 0))
            if requests > old_requests or errors > old_errors:
                by_code.append((code, requests - old_requests, errors - old_errors))
        by_code.sort(key=lambda row: (-row[1], row[0]))

        def per_second(n):
            return round(n / seconds, 3) if seconds > 0 else 0.0

        return {"seconds": round(seconds, 3),
                "requests": per_second(sum(row[1] for row in by_code)),
                "errors": per_second(sum(row[2] for row in by_code)),
                "byCode": [{"code": code, "name": code_label(code),
                            "requests": per_second(requests), "errors": per_second(errors)}
                           for code, requests, errors in by_code]}
