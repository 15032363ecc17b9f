"""The counters behind ``/metrics`` (rocketpy.transport.metrics) and their Prometheus exposition
(rocketpy.web.metrics): bounded labels, histogram buckets, the trouble counters fed by the
transport on real bad bytes, access-control refusals, the ``/metrics`` resource itself, and the
layering rule that the transport never imports ``prometheus_client``.
"""
import subprocess
import sys

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from rocketpy.remoting import RemotingCommand
from rocketpy.transport.metrics import LATENCY_BUCKETS, OTHER_CODE, ServerMetrics
from rocketpy.web.metrics import MetricsPage, code_label, response_label

from serverproc import REPO_ROOT
from test_web_pages import Server as WebServer


def samples(registry):
    text = generate_latest(registry).decode("utf-8")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}




class Server(WebServer):
    """makeService on a fake reactor, with the web view (no socket is opened)."""

    @property
    def registry(self):
        return self.top.web.registry

    def connect(self, host="127.0.0.1", port=40000):
        proto = self.top.factory.buildProtocol(IPv4Address("TCP", host, port))
        proto.makeConnection(StringTransport(peerAddress=IPv4Address("TCP", host, port)))
        return proto


class ServerMetricsTests(SynchronousTestCase):
    def test_unknown_codes_are_one_label(self):
        metrics = ServerMetrics()
        for code in range(20000, 20500):        # a client sending random codes
            metrics.request(code, 0, 0.0001)
        metrics.request(105, 424242, 0.0001)
        self.assertEqual(metrics.requests[(OTHER_CODE, 0)], 500)
        self.assertEqual(metrics.requests[(105, OTHER_CODE)], 1)
        self.assertEqual(set(metrics.latency), {OTHER_CODE, 105})
        self.assertEqual(code_label(OTHER_CODE), "OTHER")
        self.assertEqual(response_label(OTHER_CODE), "OTHER")
        self.assertEqual(response_label(None), "NONE")
        self.assertEqual(code_label(105), "GET_ROUTEINFO_BY_TOPIC")

    def test_histogram_buckets_are_cumulative_and_inclusive(self):
        metrics = ServerMetrics()
        for seconds in (LATENCY_BUCKETS[0], LATENCY_BUCKETS[0] * 1.01, 0.003, 5.0):
            metrics.request(103, 0, seconds)
        cumulative = dict(metrics.latency[103].cumulative())
        self.assertEqual(cumulative[LATENCY_BUCKETS[0]], 1)        # le is "less or equal"
        self.assertEqual(cumulative[LATENCY_BUCKETS[1]], 2)
        self.assertEqual(cumulative[0.005], 3)
        self.assertEqual(cumulative[float("inf")], 4)
        self.assertAlmostEqual(metrics.latency[103].total, LATENCY_BUCKETS[0] * 2.01 + 5.003)

    def test_cached_answers_recorded_at_their_mean(self):
        metrics = ServerMetrics()
        metrics.cached_answers(10, 0.0002)       # 20 us each
        metrics.cached_answers(1, -1e-7)         # clock noise never goes negative
        self.assertEqual(metrics.cached, 11)
        cumulative = dict(metrics.cached_latency.cumulative())
        self.assertEqual(cumulative[0.000025], 11)
        self.assertAlmostEqual(metrics.cached_latency.total, 0.0002)

    def test_service_wrappers_count(self):
        metrics = ServerMetrics()
        scan = metrics.counting_scan(lambda now: [("req", 1), ("req", 2)])
        self.assertEqual(len(scan(0)), 2)
        destroy = metrics.counting_channel_destroy(lambda channel: ["a"])
        destroy(None)
        submit = metrics.counting_submit(lambda request: False)
        self.assertFalse(submit("x"))
        self.assertEqual((metrics.expired_brokers, metrics.channel_unregistrations,
                          metrics.unregistration_rejections), (2, 1, 1))


class TroubleOnRealBytesTests(SynchronousTestCase):
    """The reliability counters, fed by the transport itself."""

    def test_bad_frames_and_refused_connections(self):
        server = Server(self, "-D", "tls.server.mode=disabled")
        before = samples(server.registry)
        self.assertEqual(before[("rocketpy_bad_frames_total", (("reason", "frame length"),))], 0)
        too_long = (64 * 1024 * 1024).to_bytes(4, "big") + b"\x00" * 16
        garbage = b"\x00\x00\x00\x0f\x00\x00\x00\x04{{{{garbage"
        client_hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
        for data in (too_long, garbage, client_hello):
            server.connect().dataReceived(data)
        after = samples(server.registry)
        self.assertEqual(after[("rocketpy_bad_frames_total", (("reason", "frame length"),))], 1)
        self.assertEqual(after[("rocketpy_bad_frames_total", (("reason", "decode"),))], 1)
        self.assertEqual(after[("rocketpy_refused_connections_total", (("reason", "tls disabled"),))], 1)
        self.assertEqual(after[("rocketpy_received_bytes_total", ())],
                         len(too_long) + len(garbage) + len(client_hello))

    def test_overload_family(self):
        server = Server(self)
        server.top.factory.metrics.overload(105)
        server.top.factory.metrics.overload(31337)
        after = samples(server.registry)
        self.assertEqual(after[("rocketpy_overloaded_requests_total",
                                (("request_code", "GET_ROUTEINFO_BY_TOPIC"),))], 1)
        self.assertEqual(after[("rocketpy_overloaded_requests_total", (("request_code", "OTHER"),))], 1)

    def test_admin_refusals_from_access_control(self):
        server = Server(self, "-D", "adminAllowNetworks=10.0.0.0/8")
        proto = server.connect("127.0.0.1")
        proto.dataReceived(RemotingCommand.request(100, {"namespace": "ns", "key": "k", "value": "v"},
                                                   opaque=7).encode())
        after = samples(server.registry)
        self.assertEqual(after[("rocketpy_admin_requests_refused_total", (("reason", "network"),))], 1)
        self.assertEqual(after[("rocketpy_requests_total", (("request_code", "PUT_KV_CONFIG"),
                                                            ("response_code", "NO_PERMISSION")))], 1)


class MetricsPageTests(SynchronousTestCase):
    def _render(self, accept=None):
        server = Server(self)
        page = MetricsPage(server.registry, server.reactor)
        request = DummyRequest([b""])
        if accept:
            request.requestHeaders.setRawHeaders(b"accept", [accept])
        body = page.render_GET(request)
        return request, body

    def test_plain_text(self):
        request, body = self._render()
        content_type = request.responseHeaders.getRawHeaders("content-type")[0]
        self.assertTrue(content_type.startswith("text/plain; version=0.0.4"), content_type)
        families = {f.name for f in text_string_to_metric_families(body.decode())}
        for name in ("rocketpy_requests", "rocketpy_request_duration_seconds", "rocketpy_brokers",
                     "rocketpy_topics", "rocketpy_open_connections", "rocketpy_bad_frames",
                     "rocketpy_refused_connections", "rocketpy_unregistration_queue_depth",
                     "rocketpy_received_bytes", "rocketpy_sent_bytes", "rocketpy_broker_expiries",
                     "rocketpy_channel_unregistrations", "rocketpy_broker_registrations",
                     "rocketpy_unregistration_rejections", "process_resident_memory_bytes"):
            self.assertIn(name, families)

    def test_openmetrics(self):
        request, body = self._render("application/openmetrics-text; version=1.0.0")
        content_type = request.responseHeaders.getRawHeaders("content-type")[0]
        self.assertTrue(content_type.startswith("application/openmetrics-text"), content_type)
        self.assertTrue(body.rstrip().endswith(b"# EOF"))


def test_transport_does_not_import_prometheus():
    """Layering: counting costs the transport no prometheus_client import (only --web loads it)."""
    code = ("import sys; import rocketpy.transport.protocol, rocketpy.transport.factory, "
            "rocketpy.service.tap; assert 'prometheus_client' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)


class DocumentedMetricsTests(SynchronousTestCase):
    """docs/operations.md and the exposition name the same metrics (the alert rules included)."""

    def test_every_metric_is_documented_and_every_documented_one_exists(self):
        import re
        server = Server(self)
        metrics = server.top.factory.metrics
        metrics.overload(105)                     # families with labels appear once used
        metrics.request(105, 0, 0.001)
        metrics.connection_dropped("idle")
        samples_ = {s.name for f in server.registry.collect() if f.name.startswith("rocketpy_")
                    for s in f.samples}
        # what only a hosted controller adds (enableControllerInNamesrv)
        from types import SimpleNamespace
        from rocketpy.service.guardmetrics import GuardCollector
        controller = SimpleNamespace(broker_access=SimpleNamespace(refused={"network": 0}),
                                     elections={"elected": 0, "failed": 0})
        # and a warm restart's route snapshot service (routeSnapshotPath)
        snapshot = SimpleNamespace(writes=0, write_failures=0, last_write_ms=None, last_bytes=0,
                                   load_report=None)
        samples_ |= {s.name for f in GuardCollector(server.top.processor, controller=controller,
                                                    snapshot=snapshot)
                     .collect() for s in f.samples}
        # and what a server of several processes adds (--workers)
        from rocketpy.web.metrics import NameServerCollector
        samples_ |= {s.name for f in NameServerCollector._workers([
            {"worker": 0, "pid": 1, "role": "writer", "state": "serving", "connections": 0,
             "sequence": 0, "applied": 0, "restarts": 0}]) for s in f.samples}
        shown = {re.sub(r"_(bucket|sum|count)$", "", n) for n in samples_}
        doc = (REPO_ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
        documented = set(re.findall(r"\brocketpy_[a-z_]+", doc)) - {"rocketpy_event"}  # a log field
        self.assertEqual(shown - documented, set(), "exposed but not documented")
        for name in documented:
            self.assertTrue(name in samples_ or name in shown, f"{name} is documented but not exposed")
