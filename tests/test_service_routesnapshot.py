"""Warm restart, the whole service tree on a fake reactor (MemoryReactorClock): a NameServer
stopped and started again on its ``routeSnapshotPath`` answers as before, its brokers
provisional until they register, expiring as they would have; without the option it starts
empty, as Java; a torn, stale, another profile's or over-bounds snapshot is ignored with one log
line; brokerIdentityBinding keeps a provisional broker its host's; the load runs in steps of
bounded work between which the reactor answers (counted, not timed); /healthz and /readyz."""
import json
import struct
import os
import zlib

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IPushProducer
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.logger import formatEvent, globalLogPublisher
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest
from zope.interface import implementer

from rocketpy.namesrv.routeimage import RESTORE_SLICE_PAIRS, delta_work
from rocketpy.namesrv.routefile import TARGET_RECORD
from rocketpy.remoting import RemotingCommand, decode_frame, split_frames
from rocketpy.service.server import RemotingServerService
from rocketpy.service.tap import Options, makeService

from brokerbody import register_body

T0 = 1_700_000_000


class StepClock(MemoryReactorClock):
    """A fake reactor whose :meth:`step` runs only the calls due when it is called (one reactor
    turn: what a call schedules for now waits for the next step)."""

    def step(self):
        due = [c for c in self.calls if c.getTime() <= self.seconds()]
        for call in due:
            if call in self.calls:
                self.calls.remove(call)
                call.called = 1
                call.func(*call.args, **call.kw)
        return len(due)


class Server:
    """makeService on a fake reactor started at ``at`` (seconds), with ``--web``."""

    def __init__(self, case, path, *args, at=T0, snapshot=True, finish=True):
        self.reactor = StepClock()
        self.reactor.advance(at)
        self.tmp = case.mktemp()
        argv = ["--kvConfigPath", f"{self.tmp}-kv.json", "--listen", "tcp:9876", "--web",
                "tcp:8080", "-D", f"configStorePath={self.tmp}-ns.properties",
                "-D", "tls.server.mode=disabled", *args]
        if snapshot:
            argv += ["--routeSnapshotPath", path]
        options = Options()
        options.parseOptions(argv)
        self.top = makeService(options, reactor=self.reactor)
        self.top.startService()
        self.rim = self.top.route_info_manager
        self.snapshot = self.top.route_snapshot
        self.opaque = 0
        if finish:
            self.finish_load()

    def finish_load(self, most=100_000):
        for _ in range(most):
            if self.snapshot is None or self.snapshot.ready.called:
                return
            self.reactor.step()
        raise AssertionError("the load never ended")

    def connect(self, host="127.0.0.1", port=40000):
        proto = self.top.factory.buildProtocol(None)
        proto.makeConnection(StringTransport(peerAddress=IPv4Address("TCP", host, port)))
        return proto

    def call(self, proto, code, ext=None, body=None, version=479):
        self.opaque += 1
        proto.transport.clear()
        proto.dataReceived(RemotingCommand.request(code, ext, body, opaque=self.opaque,
                                                   version=version).encode())
        frames, _ = split_frames(proto.transport.value())
        return decode_frame(frames[0]) if frames else None

    def register(self, proto, name="broker-a", addr="127.0.0.1:10911", broker_id=0,
                 topics=("T", "U"), counter=1):
        body = register_body(topics, counter)
        return self.call(proto, 103, {
            "brokerName": name, "brokerAddr": addr, "clusterName": "DefaultCluster",
            "haServerAddr": addr.replace(":109", ":108"), "brokerId": str(broker_id),
            "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, body)

    def reads(self):
        """The read answers a client gets, as bytes (opaques renumbered)."""
        client = self.connect(port=50000)
        out = []
        for code, ext in [(105, {"topic": t}) for t in ("T", "U", "V", "Nope")] + [
                (106, None), (206, None), (224, {"cluster": "DefaultCluster"})]:
            self.opaque = 0
            answer = self.call(client, code, ext)
            out.append(answer.encode())
        client.connectionLost(Failure(ConnectionDone()))
        return out

    def route_code(self, topic="T"):
        client = self.connect(port=50001)
        answer = self.call(client, 105, {"topic": topic})
        client.connectionLost(Failure(ConnectionDone()))
        return answer.code

    def get(self, path):
        request = DummyRequest([p.encode() for p in path.lstrip("/").split("/")])
        request.uri = path.encode()
        request.client = IPv4Address("TCP", "127.0.0.1", 55555)
        request.postpath = [p.encode() for p in path.lstrip("/").split("/")]
        body = self.top.web.site.getResourceFor(request).render(request)
        if not isinstance(body, bytes):   # the page waits for its topic search: reactor turns
            for _ in range(10_000):
                if request.finished:
                    break
                self.reactor.step()
            body = b"".join(request.written)
        return request.responseCode or 200, body

    def metric(self, name):
        _, body = self.get("/metrics")
        for line in body.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"no {name} in /metrics")

    def stop(self):
        d = self.top.stopService()
        for _ in range(10):
            self.reactor.advance(0)
        return d


class Logged:
    def __enter__(self):
        self.events = []
        globalLogPublisher.addObserver(self.events.append)
        return self

    def __exit__(self, *exc):
        globalLogPublisher.removeObserver(self.events.append)

    def lines(self, needle):
        return [formatEvent(e) for e in self.events if needle in (formatEvent(e) or "")]


class WarmRestartTests(SynchronousTestCase):
    def setUp(self):
        self.path = os.path.join(self.mktemp(), "routes.snap")

    def first(self, *args):
        """A server with a master and a slave registered at T0, stopped at T0 + 10 s."""
        server = Server(self, self.path, *args)
        self.master = server.connect(port=41000)
        self.assertEqual(server.register(self.master, topics=("T", "U", "V")).code, 0)
        self.slave = server.connect(port=41001)
        self.assertEqual(server.register(self.slave, addr="127.0.0.1:10921", broker_id=1,
                                         topics=("T", "U", "V")).code, 0)
        server.reactor.advance(10)
        self.reads_before = server.reads()
        server.stop()
        return server

    def test_a_restart_with_the_option_answers_byte_for_byte_with_provisional_brokers(self):
        first = self.first()
        second = Server(self, self.path, at=T0 + 12)
        self.assertEqual(second.reads(), self.reads_before)
        self.assertEqual(set(second.rim.provisional),
                         {("DefaultCluster", "127.0.0.1:10911"), ("DefaultCluster", "127.0.0.1:10921")})
        self.assertEqual(second.snapshot.load_report["pairs"], 3)
        self.assertEqual(second.metric("rocketpy_provisional_brokers"), 2)
        self.assertEqual(second.metric("rocketpy_route_snapshot_loaded_pairs"), 3)
        status, page = second.get("/")
        self.assertIn(b"provisional", page)
        api = json.loads(second.get("/api/clusters")[1])
        brokers = api["clusters"][0]["brokerGroups"][0]["brokers"]
        self.assertEqual([b["provisional"] for b in brokers], [True, True])
        self.assertEqual(second.get("/readyz")[0], 200)
        # the broker's own registration replaces its entry: live again, bound to its connection
        master = second.connect(port=42000)
        self.assertEqual(second.register(master, topics=("T", "U", "V")).code, 0)
        self.assertEqual(set(second.rim.provisional), {("DefaultCluster", "127.0.0.1:10921")})
        self.assertEqual(second.metric("rocketpy_provisional_brokers"), 1)
        master.connectionLost(Failure(ConnectionDone()))   # its close unregisters it at once
        second.reactor.advance(0)
        self.assertNotIn(0, second.rim.broker_addr_table["broker-a"].broker_addrs)
        del first

    def test_a_restart_without_the_option_starts_empty_as_java(self):
        server = Server(self, self.path, snapshot=False)
        proto = server.connect()
        self.assertEqual(server.register(proto).code, 0)
        server.stop()
        second = Server(self, self.path, snapshot=False)
        self.assertEqual(second.route_code(), 17)   # TOPIC_NOT_EXIST until the broker registers
        self.assertFalse(os.path.exists(os.path.dirname(self.path)))
        self.assertIsNone(second.top.route_snapshot)
        self.assertEqual(second.get("/readyz")[0], 200)

    def _ignored(self, expect, *args, at=T0 + 12):
        with Logged() as log:
            second = Server(self, self.path, *args, at=at)
        lines = log.lines("route snapshot")
        ignored = [line for line in lines if "ignored" in line]
        self.assertEqual(len(ignored), 1, lines)
        self.assertIn(expect, ignored[0])
        self.assertEqual(second.route_code(), 17)
        self.assertFalse(second.rim.broker_live_table)
        self.assertTrue(second.snapshot.ready.called)
        self.assertEqual(second.get("/readyz")[0], 200)
        return second

    def test_a_torn_snapshot_is_ignored_with_one_line(self):
        self.first()
        with open(self.path, "rb") as f:
            data = f.read()
        with open(self.path, "wb") as f:
            f.write(data[:-9])
        self._ignored("torn")

    def test_a_snapshot_whose_routes_part_is_gone_is_ignored(self):
        self.first()
        directory = os.path.dirname(self.path)
        for name in os.listdir(directory):
            if ".routes-" in name:
                os.unlink(os.path.join(directory, name))
        self._ignored("routes part")

    def test_a_snapshot_naming_another_file_as_its_routes_part_is_ignored(self):
        """Only the routes part the main part's own name and digest make is read (a stranger's
        main part cannot make the server read another file of the directory)."""
        self.first()
        from test_namesrv_routefile import _resign
        from rocketpy.namesrv.routefile import HEAD
        with open(self.path, "rb") as f:
            main = f.read()

        def rename(kind, payload):
            if kind != HEAD:
                return payload
            head = json.loads(payload)
            head["routes"]["file"] = "kv.json\x00"
            return json.dumps(head).encode()
        with open(self.path, "wb") as f:
            f.write(_resign(main, rename))
        self._ignored("names 'kv.json")

    def test_a_snapshot_of_the_format_before_is_ignored(self):
        """Format 1 kept no static mapping's owner (a restart gave each mapping to the group it
        names): its files are ignored with one line, not read as format 2."""
        self.first()
        with open(self.path, "rb") as f:
            data = bytearray(f.read())
        struct.pack_into(">H", data, 12, 1)   # the preamble's format, after the 12-byte magic
        with open(self.path, "wb") as f:
            f.write(data)
        self._ignored("format 1, this server reads 2")

    def test_a_stale_snapshot_is_ignored(self):
        self.first()
        self._ignored("too old", at=T0 + 10 + 121)

    def test_another_profiles_snapshot_is_ignored(self):
        self.first("--profile=5.0")
        self._ignored("another release profile")

    def test_a_snapshot_over_the_bounds_is_ignored(self):
        self.first()
        self._ignored("over the bounds", "-D", "namesrvMaxTopics=2")

    def test_after_an_ignored_snapshot_the_next_one_is_written_afresh(self):
        self.first()
        with open(self.path, "wb") as f:
            f.write(b"garbage" * 20)
        second = self._ignored("not a rocketpy route snapshot")
        proto = second.connect()
        self.assertEqual(second.register(proto, topics=("W", "X")).code, 0)
        second.reactor.advance(5)
        self.assertEqual(second.snapshot.writes, 1)
        second.stop()
        third = Server(self, self.path, at=T0 + 20)
        self.assertEqual(third.route_code("W"), 0)

    def test_a_broker_that_never_comes_back_expires_when_a_live_one_would(self):
        """The control server keeps running with the broker silent from T0 (its connection
        open: idle closes are off, so the liveness scan alone decides); the restarted one loaded
        it at T0 + 20. Both scan every 5 s on the same phase; the broker leaves both at the first
        scan past T0 + 120 s, and not one scan earlier."""
        no_idle = ("-D", "serverChannelMaxIdleTimeSeconds=0")
        control = Server(self, self.path + "-control", *no_idle, snapshot=False)
        proto = control.connect()
        control.register(proto)
        first = Server(self, self.path, *no_idle)
        first.register(first.connect())
        first.reactor.advance(10)
        first.stop()
        restarted = Server(self, self.path, *no_idle, at=T0 + 20)
        control.reactor.advance(20)
        gone = {}
        for second in range(1, 120):
            for name, server in (("control", control), ("restarted", restarted)):
                server.reactor.advance(1)
                if name not in gone and server.route_code() == 17:
                    gone[name] = server.reactor.seconds()
        self.assertEqual(gone, {"control": T0 + 125, "restarted": T0 + 125})
        self.assertFalse(restarted.rim.provisional)
        self.assertEqual(restarted.metric("rocketpy_broker_expiries_total"), 1)

    def test_query_data_version_tells_a_provisional_broker_to_register(self):
        self.first()
        second = Server(self, self.path, at=T0 + 12)
        proto = second.connect(port=43000)
        body = json.dumps({"counter": 1, "timestamp": 0, "stateVersion": 0}).encode()
        ask = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
               "clusterName": "DefaultCluster", "brokerId": "0"}
        answer = second.call(proto, 322, ask, body)
        self.assertEqual((answer.code, answer.ext_fields["changed"], answer.body),
                         (0, "true", None))
        data_version = second.rim.broker_live_table[("DefaultCluster", "127.0.0.1:10911")].data_version
        second.register(proto, topics=("T", "U", "V"))
        body = json.dumps({"counter": data_version.counter, "timestamp": data_version.timestamp,
                           "stateVersion": data_version.state_version}).encode()
        self.assertEqual(second.call(proto, 322, ask, body).ext_fields["changed"], "false")

    def test_broker_identity_binding_keeps_a_provisional_broker_its_hosts(self):
        binding = ("-D", "brokerIdentityBinding=true")
        first = Server(self, self.path, *binding)
        first.register(first.connect(host="10.0.0.1"), addr="10.0.0.1:10911")
        first.stop()
        second = Server(self, self.path, *binding, at=T0 + 5)
        self.assertEqual(second.rim.provisional[("DefaultCluster", "10.0.0.1:10911")], "10.0.0.1")
        impostor = second.connect(host="10.6.6.6")
        answer = second.register(impostor, addr="10.0.0.1:10911")
        self.assertEqual(answer.code, 16)   # NO_PERMISSION
        self.assertIn("10.0.0.1", answer.remark)
        self.assertEqual(second.route_code(), 0)
        # the same identity under another address, for the slot: refused too
        self.assertEqual(second.register(impostor, addr="10.6.6.6:10911").code, 16)
        # its own host takes it back at once
        owner = second.connect(host="10.0.0.1", port=40001)
        self.assertEqual(second.register(owner, addr="10.0.0.1:10911").code, 0)
        self.assertFalse(second.rim.provisional)

    def test_without_binding_a_provisional_broker_is_open_as_a_live_one_is(self):
        first = Server(self, self.path)
        first.register(first.connect(host="10.0.0.1"), addr="10.0.0.1:10911")
        first.stop()
        second = Server(self, self.path, at=T0 + 5)
        self.assertEqual(second.register(second.connect(host="10.6.6.6"),
                                         addr="10.0.0.1:10911").code, 0)

    def test_snapshots_are_written_every_interval_and_the_routes_part_only_when_it_changed(self):
        server = Server(self, self.path)
        proto = server.connect()
        server.register(proto)
        server.reactor.advance(5)
        self.assertEqual(server.snapshot.writes, 1)
        routes = [n for n in os.listdir(os.path.dirname(self.path)) if ".routes-" in n]
        for _ in range(3):
            server.register(proto)      # the same registration: the routes do not change
            server.reactor.advance(5)
        self.assertEqual(server.snapshot.writes, 4)
        self.assertEqual([n for n in os.listdir(os.path.dirname(self.path)) if ".routes-" in n],
                         routes)
        server.register(proto, topics=("T", "U", "W"), counter=2)
        server.reactor.advance(5)
        now = [n for n in os.listdir(os.path.dirname(self.path)) if ".routes-" in n]
        self.assertEqual(len(now), 1)
        self.assertNotEqual(now, routes)   # a new routes part, the old one removed
        self.assertGreater(server.metric("rocketpy_route_snapshot_bytes"), 0)
        self.assertEqual(server.metric("rocketpy_route_snapshot_writes_total"), 5)


class SlicedLoadTests(SynchronousTestCase):
    """The load counted step by step on a reactor that runs one turn at a time."""

    def snapshot_of(self, topics, brokers=4):
        path = os.path.join(self.mktemp(), "routes.snap")
        server = Server(self, path)
        per = topics // brokers
        for b in range(brokers):
            proto = server.connect(port=41000 + b)
            answer = server.register(proto, name=f"b{b}", addr=f"127.0.0.{b + 1}:10911",
                                     topics=[f"T{b}-{i}" for i in range(per)])
            self.assertEqual(answer.code, 0, answer)
        server.stop()
        return path

    def load(self, path):
        second = Server(self, path, "-D", "namesrvMaxTopics=1000000", at=T0 + 5, finish=False)
        work, healthy = [], []
        real_apply = second.rim.apply

        def apply(delta):
            work.append(delta_work(delta))
            return real_apply(delta)
        second.rim.apply = apply
        steps = 0
        while not second.snapshot.ready.called:
            self.assertFalse(second.top.server.accepting)
            healthy.append(second.get("/healthz")[0])     # answered between two steps
            self.assertEqual(second.get("/readyz")[0], 503)
            second.reactor.step()
            steps += 1
        self.assertTrue(second.top.server.accepting)
        self.assertEqual(set(healthy), {200})
        return second, steps, work

    def test_each_step_does_bounded_work_and_the_steps_grow_linearly(self):
        counts = {}
        for topics in (20_000, 40_000, 80_000):
            second, steps, work = self.load(self.snapshot_of(topics))
            self.assertEqual(second.rim.queue_data_count, topics)
            self.assertLessEqual(max(work), RESTORE_SLICE_PAIRS)
            self.assertLessEqual(second.snapshot.largest_parse_step, 2 * TARGET_RECORD)
            self.assertLessEqual(second.snapshot.largest_apply_step, RESTORE_SLICE_PAIRS)
            counts[topics] = steps
        a, b, c = counts[20_000], counts[40_000], counts[80_000]
        self.assertTrue(b > a and abs((c - b) - 2 * (b - a)) <= 2, counts)

    def test_stopping_during_the_load_leaves_the_snapshot_as_it_was(self):
        path = self.snapshot_of(20_000)
        with open(path, "rb") as f:
            before = f.read()
        second = Server(self, path, at=T0 + 5, finish=False)
        for _ in range(3):
            second.reactor.step()
        self.assertFalse(second.snapshot.ready.called)
        with Logged() as log:
            second.stop()
        self.assertTrue(log.lines("load stopped"))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertEqual(second.snapshot.writes, 0)

    def test_the_periodic_capture_is_stepped_too(self):
        path = self.snapshot_of(120_000, brokers=3)
        second = Server(self, path, "-D", "namesrvMaxTopics=1000000", at=T0 + 5)
        second.register(second.connect(port=45000), name="b9", addr="127.0.0.9:10911",
                        topics=("New", "Newer"))          # the routes changed: a capture
        second.reactor.advance(5)
        capture = second.top.route_snapshot.snapshotter
        while second.top.route_snapshot._writing:
            second.reactor.step()
        self.assertGreaterEqual(capture.capture_steps, 3)
        self.assertLessEqual(capture.largest_capture_step, 50_000)


@implementer(IPushProducer)
class _Port:
    def __init__(self):
        self.paused = []

    def pauseProducing(self):
        self.paused.append(True)

    def resumeProducing(self):
        self.paused.append(False)

    def stopProducing(self):
        pass

    def getHost(self):
        return IPv4Address("TCP", "127.0.0.1", 9876)

    def stopListening(self):
        return None


class _Endpoint:
    def __init__(self, port):
        self.port = port

    def listen(self, factory):
        from twisted.internet.defer import succeed
        return succeed(self.port)


class HeldPortTests(SynchronousTestCase):
    def test_a_held_server_binds_at_once_and_accepts_once_released(self):
        from rocketpy.transport.tls import TlsMode

        class Factory:
            tls_mode = TlsMode.DISABLED
            connections = {}

        hold, port = Deferred(), _Port()
        service = RemotingServerService(_Endpoint(port), Factory(), MemoryReactorClock(), hold=hold)
        with Logged() as log:
            service.startService()
            service.announce()
            self.assertEqual(port.paused, [True])
            self.assertFalse(service.accepting)
            self.assertFalse(log.lines("boot success"))
            hold.callback(None)
        self.assertEqual(port.paused, [True, False])
        self.assertTrue(service.accepting)
        self.assertEqual(len(log.lines("boot success")), 1)


class ProbeTests(SynchronousTestCase):
    def test_healthz_is_503_once_the_reactor_has_not_turned_for_ten_seconds(self):
        from rocketpy.web.health import HealthPage, ReactorPulse
        clock = MemoryReactorClock()
        pulse = ReactorPulse(clock)
        pulse.start()
        page = HealthPage(pulse)
        for _ in range(30):
            clock.advance(1)
            request = DummyRequest([b""])
            self.assertTrue(page.render_GET(request).startswith(b"ok"))
            self.assertEqual(request.responseCode, 200)
        self.assertEqual(pulse.beats, 30)
        clock.rightNow += 10.5     # time passes and no call runs: a reactor held
        request = DummyRequest([b""])
        self.assertIn(b"has not turned", page.render_GET(request))
        self.assertEqual(request.responseCode, 503)
        clock.advance(0)           # it turns again
        request = DummyRequest([b""])
        page.render_GET(request)
        self.assertEqual(request.responseCode, 200)

    def test_readyz_waits_for_wait_seconds_for_service_where_needed(self):
        server = Server(self, os.path.join(self.mktemp(), "r.snap"), "-D",
                        "needWaitForService=true", "-D", "waitSecondsForService=45")
        status, body = server.get("/readyz")
        self.assertEqual((status, json.loads(body)["checks"]), (503, {
            "listening": True, "waitSecondsForService": False, "routeSnapshotLoaded": True}))
        server.reactor.advance(45)
        self.assertEqual(server.get("/readyz")[0], 200)
        self.assertEqual(server.get("/healthz")[0], 200)

    def test_a_snapshot_that_cannot_be_written_is_one_line_until_it_can(self):
        blocker = self.mktemp()
        with open(blocker, "w") as f:
            f.write("a file where the snapshot's directory should be")
        server = Server(self, os.path.join(blocker, "routes.snap"))
        server.register(server.connect())
        with Logged() as log:
            for _ in range(30):
                server.reactor.advance(1)
        self.assertEqual(server.snapshot.write_failures, 6)
        self.assertEqual(len(log.lines("not written")), 1)
        self.assertEqual(server.metric("rocketpy_route_snapshot_write_failures_total"), 6)
        os.unlink(blocker)
        with Logged() as log:
            for _ in range(5):
                server.reactor.advance(1)
        self.assertEqual(server.snapshot.writes, 1)
        self.assertEqual(len(log.lines("written to")), 1)


class WarmFromTests(SynchronousTestCase):
    """``--warm-from``'s fetch: bounded, one-line failures (the e2e tests fetch a real peer)."""

    def _fetch(self, code=200, length=None, chunks=(), max_bytes=100):
        from twisted.internet.defer import succeed
        from twisted.web.client import ResponseDone
        from rocketpy.service.warmfrom import fetch_snapshot

        class Transport:
            stopped = False

            def stopProducing(self):
                self.stopped = True

        class Response:
            def __init__(self):
                from twisted.web.iweb import UNKNOWN_LENGTH
                self.code = code
                self.length = UNKNOWN_LENGTH if length is None else length
                self.transport = Transport()

            def deliverBody(self, protocol):
                protocol.makeConnection(self.transport)
                for chunk in chunks:
                    protocol.dataReceived(chunk)
                    if self.transport.stopped:
                        return
                protocol.connectionLost(Failure(ResponseDone()))

        class Agent:
            def request(self, method, url, headers=None):
                return succeed(Response())
        return fetch_snapshot(MemoryReactorClock(), "http://peer:8080/api/route-snapshot",
                              max_bytes, agent=Agent())

    def test_a_whole_answer_is_the_stream(self):
        self.assertEqual(self.successResultOf(self._fetch(chunks=(b"ab", b"cd"))), b"abcd")

    def test_over_the_bound_is_refused_before_or_while_the_body_comes(self):
        from rocketpy.namesrv.routefile import SnapshotRefused
        failure = self.failureResultOf(self._fetch(length=101), SnapshotRefused)
        self.assertIn("over the bounds", failure.getErrorMessage())
        failure = self.failureResultOf(self._fetch(chunks=(b"x" * 60, b"x" * 60, b"x" * 60)),
                                       SnapshotRefused)
        self.assertIn("passed 100 bytes", failure.getErrorMessage())

    def test_an_error_answer_is_refused(self):
        from rocketpy.namesrv.routefile import SnapshotRefused
        failure = self.failureResultOf(self._fetch(code=403), SnapshotRefused)
        self.assertIn("HTTP 403", failure.getErrorMessage())

    def test_a_peer_url_is_checked_when_the_options_are(self):
        from rocketpy.service.startup import StartError
        from rocketpy.service.warmfrom import snapshot_url
        self.assertEqual(snapshot_url("ns1:8080"), "http://ns1:8080/api/route-snapshot")
        self.assertEqual(snapshot_url("https://ns1:8443/"), "https://ns1:8443/api/route-snapshot")
        for bad in ("ftp://ns1", "http://", "http://ns1:99999", "http://ns1/?x=1"):
            options = Options()
            with self.assertRaises(StartError) as caught:
                options.parseOptions(["--warm-from", bad])
            self.assertIn("--warm-from", str(caught.exception))
