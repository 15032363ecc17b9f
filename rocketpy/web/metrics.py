"""Web layer: the Prometheus exposition of one NameServer (``/metrics``).

Nothing here runs per request: :class:`NameServerCollector` turns the transport's plain counters
(:class:`~rocketpy.transport.metrics.ServerMetrics`) into families and computes the gauges from
the state when Prometheus scrapes. Each server has its own ``CollectorRegistry``
(:func:`build_registry`), so two servers in one process (or two tests) do not mix numbers.

``prometheus_client``'s Twisted resource formats in the reactor's thread pool, but the route
tables may only be read on the reactor thread, so :class:`MetricsPage` collects a consistent
snapshot there and hands it frozen to a ``MetricsResource``.

Label values are names (``GET_ROUTEINFO_BY_TOPIC``, ``SUCCESS``); unknown codes are ``OTHER``,
and an unanswered (oneway) request has ``response_code="NONE"``."""
from prometheus_client import CollectorRegistry
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily,
                                    InfoMetricFamily)
from prometheus_client.exposition import choose_encoder
from prometheus_client.utils import floatToGoString
from twisted.internet.interfaces import IReactorThreads
from twisted.web.resource import Resource

from ..remoting.codes import RequestCode, ResponseCode, request_code_name, response_code_name
from ..transport.metrics import OTHER_CODE

__all__ = ["NameServerCollector", "build_registry", "MetricsPage", "PREFIX", "code_label",
           "response_label"]

PREFIX = "rocketpy_"
_REGISTER_BROKER = int(RequestCode.REGISTER_BROKER)
_SUCCESS = int(ResponseCode.SUCCESS)
#: reasons always exported (as 0 until they happen), so alert rules can use rate() from the start
BAD_FRAME_REASONS = ("frame length", "decode")
REFUSED_REASONS = ("tls disabled", "tls enforcing", "no tls context")
ACL_COUNTERS = (("refused_network", "network"), ("refused_signature", "signature"),
                ("refused_config_key", "config_key"))


def code_label(code):
    """The ``request_code`` label value of a request code."""
    if code == OTHER_CODE:
        return "OTHER"
    return request_code_name(code) or "OTHER"


def response_label(code):
    """The ``response_code`` label value of a response code (None: no answer was sent)."""
    if code is None:
        return "NONE"
    if code == OTHER_CODE:
        return "OTHER"
    return response_code_name(code) or "OTHER"


def _buckets(histogram):
    return [(floatToGoString(bound), count) for bound, count in histogram.cumulative()]


class NameServerCollector:
    """Every rocketpy family, from a :class:`~rocketpy.web.state.NameServerView` at scrape time."""

    def __init__(self, view):
        self.view = view

    def describe(self):
        return []  # collected only on demand: never at registration (the state may be empty)

    def collect(self):
        view = self.view
        metrics = view.metrics
        p = PREFIX

        info = InfoMetricFamily(p + "build", "The rocketpy version and the Java NameServer "
                                "version it answers like.")
        info.add_metric([], {"version": view.version, "profile": view.policies.name})
        yield info
        yield GaugeMetricFamily(p + "start_time_seconds", "Start of this server, Unix time.",
                                value=view.started)

        counts = view.counts()
        for key, name, doc in (
                ("clusters", "clusters", "Clusters with at least one broker group."),
                ("brokerGroups", "broker_groups", "Broker groups (broker names) registered."),
                ("brokers", "brokers", "Live broker addresses (the broker live table)."),
                ("provisionalBrokers", "provisional_brokers", "Live brokers loaded from a route "
                 "snapshot (a warm restart) that have not registered since."),
                ("topics", "topics", "Topics with a route (the topic queue table)."),
                ("connections", "open_connections", "Open remoting connections."),
                ("unregistrationQueueDepth", "unregistration_queue_depth",
                 "Unregistrations queued for the next batch."),
                ("unregistrationQueueCapacity", "unregistration_queue_capacity",
                 "unRegisterBrokerQueueCapacity."),
                ("kvNamespaces", "kv_namespaces", "KV config namespaces.")):
            yield GaugeMetricFamily(p + name, doc, value=counts[key])

        cache = view.answer_cache
        if cache is not None:
            yield GaugeMetricFamily(p + "answer_cache_entries", "Encoded answers kept for reuse.",
                                    value=len(cache))
        queue = view.unregistration
        if queue is not None and hasattr(queue, "batches"):
            yield CounterMetricFamily(p + "unregistration_batches", "Unregistration batches applied.",
                                      value=queue.batches)

        access = view.access_control
        if access is not None:
            refused = CounterMetricFamily(
                p + "admin_requests_refused", "Administrative requests refused by access "
                "control (adminAllowNetworks, aclEnable), by reason.", labels=["reason"])
            for counter, reason in ACL_COUNTERS:
                refused.add_metric([reason], access.counters.get(counter, 0))
            yield refused

        if metrics is None:
            return
        sources = view.traffic_sources()
        yield from self._traffic(metrics, sources)
        if len(sources) > 1:
            yield from self._workers(view.workers())

    def _traffic(self, metrics, sources):
        """The per-connection families of each process (``sources``: ``[(worker label or
        None, ServerMetrics)]``; one process: no ``worker`` label, as before workers)."""
        p = PREFIX
        worker = [] if sources[0][0] is None else ["worker"]
        requests = CounterMetricFamily(
            p + "requests", "Requests answered by the processor, by request and response code "
            "(answers from the answer cache are in rocketpy_cached_answers_total).",
            labels=worker + ["request_code", "response_code"])
        latency = HistogramMetricFamily(
            p + "request_duration_seconds", "Time from a request's first byte decoded to its "
            "answer encoded, by request code.", labels=worker + ["request_code"])
        cached_answers = CounterMetricFamily(p + "cached_answers", "Answers served from the "
                                             "answer cache (route queries answered without "
                                             "decoding).", labels=worker)
        cached = HistogramMetricFamily(
            p + "cached_answer_duration_seconds", "Time per cached answer; the answers of one "
            "socket read are timed together and recorded at their mean.", labels=worker)
        registrations = 0
        for label, source in sources:
            own = [] if label is None else [label]
            for (code, response), n in sorted(source.requests.items(),
                                              key=lambda kv: (kv[0][0], str(kv[0][1]))):
                requests.add_metric(own + [code_label(code), response_label(response)], n)
                if code == _REGISTER_BROKER and response == _SUCCESS:
                    registrations += n
            for code, histogram in sorted(source.latency.items()):
                latency.add_metric(own + [code_label(code)], _buckets(histogram), histogram.total)
            cached_answers.add_metric(own, source.cached)
            cached.add_metric(own, _buckets(source.cached_latency), source.cached_latency.total)
        yield requests
        yield latency
        yield cached_answers
        yield cached

        yield CounterMetricFamily(p + "broker_registrations", "REGISTER_BROKER requests "
                                  "answered SUCCESS.", value=registrations)
        yield CounterMetricFamily(p + "broker_expiries", "Brokers expired by the liveness scan "
                                  "(no heartbeat within their timeout).", value=metrics.expired_brokers)
        yield CounterMetricFamily(p + "channel_unregistrations", "Unregistrations caused by a "
                                  "broker's connection closing, failing or idling out.",
                                  value=metrics.channel_unregistrations)
        yield CounterMetricFamily(p + "unregistration_rejections", "Unregistrations refused "
                                  "because the queue was full.", value=metrics.unregistration_rejections)

        yield self._by_reason(p + "bad_frames", "Frames that closed their connection (too "
                              "long, undecodable), by reason.", sources, "bad_frames",
                              BAD_FRAME_REASONS)
        yield self._by_reason(p + "refused_connections", "Connections closed before being "
                              "served, by reason.", sources, "refused_connections",
                              REFUSED_REASONS)
        yield self._by_reason(p + "dropped_connections", "Served connections closed by a "
                              "timeout or limit (idle, slow frame), by reason.", sources,
                              "dropped_connections", ())
        overloaded = CounterMetricFamily(p + "overloaded_requests", "Requests shed with "
                                         "SYSTEM_BUSY instead of processed, by request code.",
                                         labels=worker + ["request_code"])
        received = CounterMetricFamily(p + "received_bytes", "Remoting bytes received (after "
                                       "TLS).", labels=worker)
        sent = CounterMetricFamily(p + "sent_bytes", "Remoting bytes sent (before TLS).",
                                   labels=worker)
        for label, source in sources:
            own = [] if label is None else [label]
            for code, n in sorted(source.overloaded.items()):
                overloaded.add_metric(own + [code_label(code)], n)
            received.add_metric(own, source.bytes_received)
            sent.add_metric(own, source.bytes_sent)
        yield overloaded
        yield received
        yield sent

    @staticmethod
    def _by_reason(name, doc, sources, attr, always):
        worker = [] if sources[0][0] is None else ["worker"]
        family = CounterMetricFamily(name, doc, labels=worker + ["reason"])
        for label, source in sources:
            table = getattr(source, attr)
            own = [] if label is None else [label]
            for reason in sorted(set(always) | set(table)):
                family.add_metric(own + [str(reason)], table.get(reason, 0))
        return family

    @staticmethod
    def _workers(workers):
        """What the route writer knows of each process (:mod:`rocketpy.service.workers`)."""
        p = PREFIX
        info = InfoMetricFamily(p + "worker", "One process accepting on the listening port: "
                                "worker 0 writes the route tables, the others answer from "
                                "replicas of them.", labels=["worker"])
        connections = GaugeMetricFamily(p + "worker_connections", "Open remoting connections, "
                                        "by process.", labels=["worker"])
        applied = GaugeMetricFamily(p + "worker_applied_sequence", "The last record of the "
                                    "route writer's stream a process has applied.",
                                    labels=["worker"])
        restarts = CounterMetricFamily(p + "worker_restarts", "Times a worker was started "
                                       "again after it ended.", labels=["worker"])
        for entry in workers:
            label = [str(entry["worker"])]
            info.add_metric(label, {"pid": str(entry["pid"]), "role": entry["role"],
                                    "state": entry["state"]})
            connections.add_metric(label, entry["connections"])
            applied.add_metric(label, entry["applied"])
            restarts.add_metric(label, entry["restarts"])
        yield info
        yield connections
        yield applied
        yield restarts
        yield GaugeMetricFamily(p + "replication_sequence", "The route writer's stream: the "
                                "sequence number of its last record.",
                                value=workers[0]["sequence"])


def build_registry(view, process=True):
    """A fresh ``CollectorRegistry`` for one server: rocketpy's families, plus (``process``)
    the standard ``process_*``, ``python_info`` and ``python_gc_*`` collectors."""
    registry = CollectorRegistry()
    registry.register(NameServerCollector(view))
    if process:
        from prometheus_client import GCCollector, PlatformCollector, ProcessCollector
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
    return registry


class _Snapshot:
    """Families collected on the reactor thread, served as a collector."""

    def __init__(self, families):
        self._families = families

    def collect(self):
        return self._families

    describe = collect   # so the ``name[]`` filter of the exposition finds them


class MetricsPage(Resource):
    """``/metrics``: a snapshot collected on the reactor thread, formatted by
    ``prometheus_client``'s WSGI app on the reactor's thread pool (what
    ``prometheus_client.twisted.MetricsResource`` does), for GET and HEAD."""

    isLeaf = True

    def __init__(self, registry, reactor=None):
        super().__init__()
        self.registry = registry
        self.reactor = reactor

    def snapshot_registry(self):
        frozen = CollectorRegistry()
        frozen.register(_Snapshot(list(self.registry.collect())))
        return frozen

    def render_GET(self, request):
        frozen = self.snapshot_registry()
        if self.reactor is not None and not IReactorThreads.providedBy(self.reactor):
            # a fake reactor (unit tests) has no thread pool: the same library call, inline
            encoder, content_type = choose_encoder(request.getHeader("accept") or "")
            request.setHeader("content-type", content_type)
            return encoder(frozen)
        from prometheus_client import make_wsgi_app
        from twisted.internet import reactor   # prometheus_client.twisted's, on its thread pool
        from twisted.web.wsgi import WSGIResource
        return WSGIResource(reactor, reactor.getThreadPool(),
                            _head_as_get(make_wsgi_app(frozen))).render(request)


def _head_as_get(app):
    """prometheus_client's WSGI app answers HEAD with 405 (GET only); the endpoint answers GET
    and HEAD: a HEAD is handed to it as a GET, and twisted.web sends the headers only."""
    def wsgi(environ, start_response):
        if environ.get("REQUEST_METHOD") == "HEAD":
            environ = dict(environ, REQUEST_METHOD="GET")
        return app(environ, start_response)
    return wsgi
