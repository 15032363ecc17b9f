"""Metrics on real bytes: the genuine self-contained captures replayed through the whole service
tree of ``makeService`` (fake reactor, StringTransports), scraped with ``prometheus_client``
after each step and read back with its own parser.

What the captures say must show up in the counters and gauges: every request by request code
and by the response code the Java NameServer recorded, the latency histogram per code, the bytes
both ways, a broker's registration in the registration counter and in the cluster / broker /
topic gauges, a broker connection that closes while registered as one channel-caused
unregistration, and an expiry once a broker stops heartbeating.
"""
import collections

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

import replay
from rocketpy.remoting import fastjson
from rocketpy.remoting.codes import request_code_name, response_code_name
from rocketpy.service.tap import Options, makeService

TWO_CLUSTERS = ["rmq49-sc-two-clusters.pcap", "rmq50-sc-two-clusters.pcap"]
SC = [p.name for p in replay.sc_captures()]


def scrape(registry):
    """``{(sample name, ((label, value), ...)): value}`` as Prometheus would read it."""
    text = generate_latest(registry).decode("utf-8")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def gauge(sample, name):
    return sample[("rocketpy_" + name, ())]


def request_count(sample, code, response):
    key = ("rocketpy_requests_total", (("request_code", request_code_name(code) or "OTHER"),
                                       ("response_code", "NONE" if response is None
                                        else response_code_name(response) or "OTHER")))
    return sample.get(key, 0)


class ReplayedServer:
    """One capture's NameServer, in process, with the web view built (no socket: a fake reactor)."""

    def __init__(self, case, path, *args):
        self.events = replay.replay_events(path)
        convos = replay.conversations(path)
        self.reactor = MemoryReactorClock()
        self.reactor.advance(self.events[0].ts)
        tmp = case.mktemp()
        options = Options()
        options.parseOptions([
            "--profile", replay.capture_profile(path), "--kvConfigPath", f"{tmp}-kv.json",
            "--listen", "tcp:9876", "--web", "tcp:8080:interface=127.0.0.1",
            "-D", f"configStorePath={tmp}-namesrv.properties", "-D", "tls.server.mode=disabled",
            "-D", f"listenPort={convos[0].server[1]}", *args])
        self.top = makeService(options, reactor=self.reactor)
        self.top.startService()
        self.factory = self.top.factory
        self.rim = self.top.route_info_manager
        self.registry = self.top.web.registry
        self.protos = {}
        self.sent = 0

    def step(self, event):
        """Apply one capture event at its time; the bytes answered."""
        self.reactor.advance(max(0.0, event.ts - self.reactor.seconds()))
        convo = event.conversation
        if event.kind == "close":
            proto = self.protos.pop(convo.index, None)
            if proto is not None:
                self.sent += len(proto.transport.value())
                proto.connectionLost(Failure(ConnectionDone()))
            self.reactor.advance(0)   # the batch unregistration drains on the next turn
            return b""
        proto = self.protos.get(convo.index)
        if proto is None:
            proto = self.protos[convo.index] = self.factory.buildProtocol(None)
            proto.makeConnection(StringTransport(peerAddress=IPv4Address("TCP", *convo.client)))
        before = len(proto.transport.value())
        proto.dataReceived(event.request_frame)
        self.reactor.advance(0)
        return proto.transport.value()[before:]

    def sent_bytes(self):
        return self.sent + sum(len(p.transport.value()) for p in self.protos.values())


@pytest.mark.parametrize("name", SC)
def test_requests_by_code_and_response_code_match_the_capture(name, tmp_path):
    """With the answer cache off every request goes through the processor, so the counter by
    (request code, response code) is exactly the capture's tally; the histogram counts them too,
    and the byte counters are the frames' lengths."""
    case = SynchronousTestCase()
    case.mktemp = lambda: str(tmp_path / "ns")
    server = ReplayedServer(case, replay.PCAP_DIR / name, "--no-answer-cache")
    tally = collections.Counter()
    received = 0
    for event in server.events:
        server.step(event)
        if event.kind == "request":
            tally[(event.request.code, event.expected.code if event.expected else None)] += 1
            received += len(event.request_frame)
    sample = scrape(server.registry)
    for (code, response), n in tally.items():
        assert request_count(sample, code, response) == n, (code, response)
    assert sum(v for (k, _), v in sample.items() if k == "rocketpy_requests_total") == sum(tally.values())
    per_code = collections.Counter()
    for (code, _), n in tally.items():
        per_code[request_code_name(code) or "OTHER"] += n
    for label, n in per_code.items():
        assert sample[("rocketpy_request_duration_seconds_count", (("request_code", label),))] == n
        assert sample[("rocketpy_request_duration_seconds_bucket", (("le", "+Inf"), ("request_code", label)))] == n
    assert gauge(sample, "received_bytes_total") == received
    assert gauge(sample, "sent_bytes_total") == server.sent_bytes()
    assert gauge(sample, "broker_registrations_total") == tally[(103, 0)]
    assert gauge(sample, "cached_answers_total") == 0


@pytest.mark.parametrize("name", TWO_CLUSTERS)
def test_registrations_show_up_in_counters_and_gauges(name, tmp_path):
    case = SynchronousTestCase()
    case.mktemp = lambda: str(tmp_path / "ns")
    server = ReplayedServer(case, replay.PCAP_DIR / name)
    sample = scrape(server.registry)
    for name_ in ("clusters", "broker_groups", "brokers", "topics", "broker_registrations_total",
                  "channel_unregistrations_total", "open_connections"):
        assert gauge(sample, name_) == 0, name_

    # the independent model: what the capture's own requests say is registered
    live = {}     # broker address -> (conversation, cluster, group, broker id)
    served = {}   # group -> topics its master registered (a registration adds; Java never drops
                  # a topic on re-registration unless deleteTopicWithBrokerRegistration)
    channel_unregistrations = 0
    requests = 0
    for event in server.events:
        before = scrape(server.registry)
        answer = server.step(event)
        after = scrape(server.registry)
        convo = event.conversation.index
        if event.kind == "close":
            left = [addr for addr, entry in live.items() if entry[0] == convo]
            for addr in left:
                _, _, group, broker_id = live.pop(addr)
                if broker_id == "0":
                    served.pop(group, None)
            channel_unregistrations += len(left)
            assert gauge(after, "channel_unregistrations_total") == channel_unregistrations
            assert gauge(after, "brokers") == gauge(before, "brokers") - len(left)
        else:
            requests += 1
            request = event.request
            ext = request.ext_fields or {}
            if request.code == 104 and ext["brokerAddr"] in live:
                if live.pop(ext["brokerAddr"])[3] == "0":
                    served.pop(ext["brokerName"], None)
            if request.code == 103:
                table = fastjson.loads(request.body)["topicConfigSerializeWrapper"]["topicConfigTable"]
                live[ext["brokerAddr"]] = (convo, ext["clusterName"], ext["brokerName"], ext["brokerId"])
                if ext["brokerId"] == "0":
                    served.setdefault(ext["brokerName"], set()).update(table)
                if event.expected is not None and event.expected.code == 0:
                    assert answer, "a registration Java answered must be answered"
                    assert gauge(after, "broker_registrations_total") == \
                        gauge(before, "broker_registrations_total") + 1
                    key = ("rocketpy_request_duration_seconds_count", (("request_code", "REGISTER_BROKER"),))
                    assert after[key] == before.get(key, 0) + 1
            assert gauge(after, "received_bytes_total") == \
                gauge(before, "received_bytes_total") + len(event.request_frame)
            assert gauge(after, "sent_bytes_total") == gauge(before, "sent_bytes_total") + len(answer)
        # the registrations (and what undid them) are in the gauges at once
        assert gauge(after, "brokers") == len(live)
        assert gauge(after, "clusters") == len({e[1] for e in live.values()})
        assert gauge(after, "broker_groups") == len({e[2] for e in live.values()})
        assert gauge(after, "topics") == len(set().union(*served.values()))
        assert gauge(after, "open_connections") == len(server.protos)
    assert channel_unregistrations >= 1      # the ClusterB broker closes without unregistering
    final = scrape(server.registry)
    assert gauge(final, "brokers") == 0
    processed = sum(v for (k, _), v in final.items() if k == "rocketpy_requests_total")
    assert processed + gauge(final, "cached_answers_total") == requests
    assert gauge(final, "cached_answers_total") > 0    # repeated route queries hit the cache
    assert final[("rocketpy_cached_answer_duration_seconds_count", ())] == gauge(final, "cached_answers_total")


def test_expiry_and_its_channel_close(tmp_path):
    """A broker that stops heartbeating is expired by the scan: counted, gone from the gauges."""
    case = SynchronousTestCase()
    case.mktemp = lambda: str(tmp_path / "ns")
    server = ReplayedServer(case, replay.PCAP_DIR / "rmq50-sc-two-clusters.pcap")
    first = next(e for e in server.events if e.kind == "request" and e.request.code == 103)
    server.step(first)
    sample = scrape(server.registry)
    assert gauge(sample, "brokers") == 1 and gauge(sample, "broker_expiries_total") == 0
    server.reactor.advance(121)      # 120 s timeout, then a 5 s scan
    server.reactor.advance(5)
    server.reactor.advance(0)
    sample = scrape(server.registry)
    assert gauge(sample, "broker_expiries_total") == 1
    assert gauge(sample, "brokers") == 0
    proto = server.protos[first.conversation.index]
    assert proto.closing                  # the scan closes the expired broker's channel


def test_queue_full_is_counted(tmp_path):
    """unRegisterBrokerQueueCapacity=1: a second channel-caused unregistration in one reactor turn
    is refused and counted."""
    case = SynchronousTestCase()
    case.mktemp = lambda: str(tmp_path / "ns")
    server = ReplayedServer(case, replay.PCAP_DIR / "rmq50-sc-two-clusters.pcap",
                            "-D", "unRegisterBrokerQueueCapacity=1")
    registrations = [e for e in server.events if e.kind == "request" and e.request.code == 103][:3]
    for event in registrations:
        server.step(event)
    assert gauge(scrape(server.registry), "brokers") == 3
    for proto in list(server.protos.values()):    # all close in the same reactor turn
        proto.connectionLost(Failure(ConnectionDone()))
    sample = scrape(server.registry)
    assert gauge(sample, "unregistration_queue_depth") == 1
    assert gauge(sample, "unregistration_rejections_total") == 2
    assert gauge(sample, "channel_unregistrations_total") == 3
    server.reactor.advance(0)
    assert gauge(scrape(server.registry), "unregistration_queue_depth") == 0


def test_each_server_has_its_own_registry(tmp_path):
    case = SynchronousTestCase()
    case.mktemp = lambda: str(tmp_path / "a")
    one = ReplayedServer(case, replay.PCAP_DIR / "rmq49-sc-two-clusters.pcap")
    case.mktemp = lambda: str(tmp_path / "b")
    two = ReplayedServer(case, replay.PCAP_DIR / "rmq49-sc-two-clusters.pcap")
    one.step(next(e for e in one.events if e.kind == "request" and e.request.code == 103))
    assert gauge(scrape(one.registry), "broker_registrations_total") == 1
    assert gauge(scrape(two.registry), "broker_registrations_total") == 0
    from prometheus_client import REGISTRY
    assert REGISTRY.get_sample_value("rocketpy_broker_registrations_total") is None
