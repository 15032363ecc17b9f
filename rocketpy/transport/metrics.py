"""Transport layer: the server's counters (the Java NameServer only logs). The transport and the
services count into this; :mod:`rocketpy.web.metrics` turns it into Prometheus text only when
someone scrapes ``/metrics``.

Plain Python rather than ``prometheus_client`` objects: everything runs on the reactor thread, so
a request is one dict lookup and two list updates, where a ``prometheus_client`` metric takes a
``threading.Lock`` per call. Gauges (connections, brokers, topics, queue depth) are computed from
the state at scrape time, not kept here.

Latency: processed requests are timed one by one, from the start of decoding to the encoded
answer. Answers from :mod:`rocketpy.transport.answercache` (most of the traffic) are counted
exactly but timed per socket read (:meth:`ServerMetrics.cached_answers`: the read's time less
what the processor took, recorded at its mean), so the histogram's count and sum are exact, its
buckets per-read means, and a cached frame costs only an increment.

Label values are bounded: codes outside :class:`~rocketpy.remoting.codes.RequestCode` (and
unknown response codes) are counted under :data:`OTHER_CODE`, so random codes cannot grow the
table."""
from bisect import bisect_left

from ..remoting.codes import RequestCode, ResponseCode

__all__ = ["ServerMetrics", "LATENCY_BUCKETS", "OTHER_CODE", "NO_RESPONSE"]

#: Upper bounds (seconds) of the latency buckets: a NameServer answers in tens of microseconds
#: to a few milliseconds (a 1.5 MB registration), so the Prometheus default buckets (5 ms ...
#: 10 s) would put everything in the first one.
LATENCY_BUCKETS = (0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                   0.025, 0.05, 0.1, 0.25, 1.0)
#: The code recorded for request or response codes rocketpy does not know.
OTHER_CODE = -1
#: The response code recorded for a request that got no answer (oneway, or 4.9's unknown codes).
NO_RESPONSE = None

_REQUEST_CODES = frozenset(int(c) for c in RequestCode)
_RESPONSE_CODES = frozenset(int(c) for c in ResponseCode) | {NO_RESPONSE}
_NBUCKETS = len(LATENCY_BUCKETS) + 1   # + the +Inf bucket


class Histogram:
    """Counts per bucket (not cumulative; the exposition accumulates) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self):
        self.counts = [0] * _NBUCKETS
        self.total = 0.0

    @property
    def count(self):
        return sum(self.counts)

    def cumulative(self):
        """``[(upper bound, cumulative count)]`` ending with ``(inf, count)``."""
        out = []
        running = 0
        for bound, n in zip(LATENCY_BUCKETS + (float("inf"),), self.counts):
            running += n
            out.append((bound, running))
        return out


class ServerMetrics:
    """Counters of one NameServer (the METRICS API in CONTRACT.md): plain attributes and dicts, read
    at scrape time; ``requests``, ``latency`` and ``cached_latency`` are views computed on access."""

    def __init__(self):
        #: (request code, response code or None) -> [count per latency bucket ..., seconds]
        self._records = {}
        #: total seconds of every :meth:`request` (the protocol subtracts it per read)
        self.processed_seconds = 0.0
        self.cached = 0
        self._cached = [0] * _NBUCKETS + [0.0]   # latency buckets ..., seconds
        self.bytes_received = 0
        self.bytes_sent = 0
        #: reason -> count
        self.bad_frames = {}
        self.refused_connections = {}
        self.dropped_connections = {}
        #: request code -> count
        self.overloaded = {}
        self.expired_brokers = 0
        self.channel_unregistrations = 0
        self.unregistration_rejections = 0

    # -- the transport's hot path -----------------------------------------------------------

    def request(self, code, response_code, seconds):
        """One request answered by the processor in ``seconds`` (None: no answer sent)."""
        record = self._records.get((code, response_code))
        if record is None:
            record = self._record(code, response_code)
        record[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        record[-1] += seconds
        self.processed_seconds += seconds

    def _record(self, code, response_code):
        """The record of a first-seen pair; unknown codes share the OTHER_CODE record, and are
        never keys themselves (so random codes cannot grow the table)."""
        if code not in _REQUEST_CODES:
            code = OTHER_CODE
        if response_code not in _RESPONSE_CODES:
            response_code = OTHER_CODE
        record = self._records.get((code, response_code))
        if record is None:
            record = self._records[(code, response_code)] = [0] * _NBUCKETS + [0.0]
        return record

    @property
    def requests(self):
        """``{(request code, response code or None): count}``."""
        return {key: sum(record[:-1]) for key, record in self._records.items()}

    @property
    def latency(self):
        """``{request code: Histogram}`` over every response code."""
        out = {}
        for (code, _), record in self._records.items():
            histogram = out.get(code)
            if histogram is None:
                histogram = out[code] = Histogram()
            for i, n in enumerate(record[:-1]):
                histogram.counts[i] += n
            histogram.total += record[-1]
        return out

    def cached_answers(self, count, seconds):
        """``count`` answers of one read served from the answer cache in ``seconds`` in all."""
        self.cached += count
        if seconds > 0.0:
            record = self._cached
            record[bisect_left(LATENCY_BUCKETS, seconds / count)] += count
            record[-1] += seconds
        else:   # clock noise: recorded as instantaneous
            self._cached[0] += count

    @property
    def cached_latency(self):
        """The cached answers' :class:`Histogram`."""
        histogram = Histogram()
        histogram.counts[:] = self._cached[:-1]
        histogram.total = self._cached[-1]
        return histogram

    # -- rare events (connections, frames, load) -------------------------------------------

    def bad_frame(self, reason):
        """A frame that did not decode or was too long; its connection is closed."""
        self.bad_frames[reason] = self.bad_frames.get(reason, 0) + 1

    def connection_refused(self, reason):
        """A connection closed before being served (TLS mode, limits, allow-list)."""
        self.refused_connections[reason] = self.refused_connections.get(reason, 0) + 1

    def connection_dropped(self, reason):
        """A served connection closed by a timeout or limit (idle, slow frame, frame memory)."""
        self.dropped_connections[reason] = self.dropped_connections.get(reason, 0) + 1

    def overload(self, code):
        """A request shed with SYSTEM_BUSY instead of being processed."""
        if code not in _REQUEST_CODES:
            code = OTHER_CODE
        self.overloaded[code] = self.overloaded.get(code, 0) + 1

    # -- a worker process's counters, at its route writer (rocketpy.service.workers) ------

    def state(self):
        """The per-connection counters as JSON-ready data (what a worker reports)."""
        return {"records": [[code, response, *record] for (code, response), record
                            in self._records.items()],
                "cached": self.cached, "cachedLatency": list(self._cached),
                "bytesReceived": self.bytes_received, "bytesSent": self.bytes_sent,
                "badFrames": self.bad_frames, "refusedConnections": self.refused_connections,
                "droppedConnections": self.dropped_connections,
                "overloaded": [[code, n] for code, n in self.overloaded.items()]}

    @classmethod
    def from_state(cls, state):
        """The counters of :meth:`state` (ValueError when ``state`` is not such data)."""
        metrics = cls()
        try:
            for code, response, *record in state["records"]:
                if len(record) != _NBUCKETS + 1:
                    raise ValueError("a latency record of another length")
                metrics._record(int(code), None if response is None else int(response))[:] = [
                    int(n) for n in record[:-1]] + [float(record[-1])]
            metrics.cached = int(state["cached"])
            cached = state["cachedLatency"]
            if len(cached) != _NBUCKETS + 1:
                raise ValueError("a cached-answer record of another length")
            metrics._cached[:] = [int(n) for n in cached[:-1]] + [float(cached[-1])]
            metrics.bytes_received = int(state["bytesReceived"])
            metrics.bytes_sent = int(state["bytesSent"])
            for name, table in (("badFrames", metrics.bad_frames),
                                ("refusedConnections", metrics.refused_connections),
                                ("droppedConnections", metrics.dropped_connections)):
                table.update({str(reason): int(n) for reason, n in state[name].items()})
            for code, n in state["overloaded"]:
                metrics.overloaded[int(code)] = int(n)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a worker's counters: {exc!r}") from None
        return metrics

    # -- wrappers for the services (tap.makeService applies them) --------------------------

    def counting_scan(self, scan):
        """Wrap ``RouteInfoManager.scan_not_active_broker``: count the brokers it expires."""
        def counted(now_ms):
            expired = scan(now_ms)
            if expired:
                self.expired_brokers += len(expired)
            return expired
        return counted

    def counting_channel_destroy(self, on_channel_destroy):
        """Wrap ``RouteInfoManager.on_channel_destroy``: count the unregistrations a closed,
        failed or idle channel causes."""
        def counted(channel):
            requests = on_channel_destroy(channel)
            if requests:
                self.channel_unregistrations += len(requests)
            return requests
        return counted

    def counting_submit(self, submit):
        """Wrap ``BatchUnregistrationService.submit``: count refusals (queue full)."""
        def counted(request):
            accepted = submit(request)
            if not accepted:
                self.unregistration_rejections += 1
            return accepted
        return counted
