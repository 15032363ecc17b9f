"""The whole NameServer service tree of ``makeService`` on a fake reactor (MemoryReactorClock):
channel events reach BatchUnregistrationService, liveness scans expire brokers, idle closes,
queue-full answers, stale closes, acting-master notifications, and the KV flush on stop.

Connections are StringTransports handed to the factory's protocols; time is the fake reactor's.
"""
import json
import zlib

from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from rocketpy.remoting import RemotingCommand, decode_frame, split_frames
from rocketpy.service.tap import Options, makeService
from brokerbody import register_body
from processorutil import exchange

T0 = 1_700_000_000


class NameServer:
    def __init__(self, case, *args, **props):
        self.reactor = MemoryReactorClock()
        self.reactor.advance(T0)
        self.tmp = case.mktemp()
        argv = ["--kvConfigPath", f"{self.tmp}-kv.json", "--listen", "tcp:9876",
                "-D", f"configStorePath={self.tmp}-namesrv.properties",
                "-D", "tls.server.mode=disabled", *args]
        for key, value in props.items():
            argv += ["-D", f"{key}={value}"]
        options = Options()
        options.parseOptions(argv)
        self.top = makeService(options, reactor=self.reactor)
        self.top.startService()
        self.factory = self.top.factory
        self.rim = self.top.route_info_manager
        self.opaque = 0

    def connect(self, host="127.0.0.1", port=40000):
        from twisted.internet.address import IPv4Address
        proto = self.factory.buildProtocol(None)
        transport = StringTransport(peerAddress=IPv4Address("TCP", host, port))
        proto.makeConnection(transport)
        return proto, transport

    def request(self, proto, code, ext=None, body=None, version=413, oneway=False):
        self.opaque += 1
        return exchange(proto, RemotingCommand.request(code, ext, body, opaque=self.opaque,
                                                       version=version, oneway=oneway))

    def register(self, proto, broker="broker-a", broker_id=0, addr="127.0.0.1:10911", topics=("T", "U"),
                 counter=1, **ext):
        body = register_body(topics, counter)
        fields = {"brokerName": broker, "brokerAddr": addr, "clusterName": "DefaultCluster",
                  "haServerAddr": addr.replace(":109", ":108"), "brokerId": str(broker_id),
                  "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
        fields.update(ext)
        [answer] = self.request(proto, 103, fields, body)
        assert answer.code == 0, answer
        return answer

    def route(self, topic="T"):
        proto, _ = self.connect(port=50000)
        [answer] = self.request(proto, 105, {"topic": topic})
        proto.connectionLost(Failure(ConnectionDone()))
        return answer

    def brokers_in_route(self, topic="T"):
        answer = self.route(topic)
        if answer.code != 0:
            return []
        return sorted(b["brokerName"] for b in json.loads(answer.body)["brokerDatas"])

    def turn(self):
        self.reactor.advance(0)

    def advance(self, seconds, step=1.0):
        while seconds > 0:
            self.reactor.advance(min(step, seconds))
            seconds -= step


class ChannelEventTests(SynchronousTestCase):
    def test_route_gone_one_reactor_turn_after_close(self):
        ns = NameServer(self)
        broker, t = ns.connect()
        ns.register(broker)
        self.assertEqual(ns.brokers_in_route(), ["broker-a"])
        broker.connectionLost(Failure(ConnectionLost("killed")))
        # reset by peer: exception then close, two (identical) requests queued for this turn
        self.assertEqual(len(ns.top.getServiceNamed("batch-unregistration")), 2)
        self.assertEqual(ns.brokers_in_route(), ["broker-a"])
        ns.turn()
        self.assertEqual(ns.route().code, 17)

    def test_close_of_a_connection_carrying_several_brokers_unregisters_them_all(self):
        """A 5.x BrokerContainer registers several brokers over one connection. Java's
        onChannelDestroy stops at the first broker it finds on the channel and leaves the others'
        routes up until their heartbeat times out; rocketpy removes them all, on purpose
        (docs/architecture.md, "What is different from Java")."""
        ns = NameServer(self)
        container, _ = ns.connect()
        ns.register(container, broker="broker-a", addr="127.0.0.1:10911", topics=("T", "A"))
        ns.register(container, broker="broker-b", addr="127.0.0.1:20911", topics=("T", "U"))
        ns.register(container, broker="broker-c", addr="127.0.0.1:30911", topics=("U", "C"))
        alone, _ = ns.connect(port=40001)
        ns.register(alone, broker="broker-d", addr="127.0.0.1:40911", topics=("T", "D"))
        self.assertEqual(ns.brokers_in_route("T"), ["broker-a", "broker-b", "broker-d"])
        container.connectionLost(Failure(ConnectionDone()))
        ns.turn()
        self.assertEqual(ns.brokers_in_route("T"), ["broker-d"])
        self.assertEqual(ns.route("U").code, 17)
        self.assertEqual(sorted(ns.rim.broker_addr_table), ["broker-d"])

    def test_routes_survive_while_the_broker_talks(self):
        ns = NameServer(self)
        broker, t = ns.connect()
        ns.register(broker)
        for _ in range(10):  # 300 s of re-registrations every 30 s
            ns.advance(30, step=5)
            ns.register(broker)
        self.assertEqual(ns.brokers_in_route(), ["broker-a"])
        self.assertFalse(t.disconnecting)

    def test_idle_connection_closed_after_120_seconds_and_unregistered(self):
        ns = NameServer(self, "--profile=4.9")  # 4.9: fixed 120 s expiry too; idle comes first
        broker, t = ns.connect()
        ns.register(broker)
        ns.advance(119.5, step=0.5)
        self.assertFalse(t.disconnecting)
        ns.advance(0.5)
        self.assertTrue(t.disconnecting)
        ns.turn()
        self.assertEqual(ns.route().code, 17)  # the idle event alone unregisters
        broker.connectionLost(Failure(ConnectionDone()))  # the close that follows: harmless
        ns.turn()
        self.assertEqual(ns.route().code, 17)

    def test_expiry_after_the_brokers_own_timeout(self):
        ns = NameServer(self)
        broker, t = ns.connect()
        ns.register(broker, heartbeatTimeoutMillis="10000", enableActingMaster="false")
        ns.advance(10)
        self.assertEqual(ns.brokers_in_route(), ["broker-a"])
        ns.advance(5)  # the scan after 10 s of silence
        self.assertTrue(t.disconnecting, "the expired broker's channel is closed")
        self.assertEqual(ns.route().code, 17)
        broker.connectionLost(Failure(ConnectionDone()))
        ns.turn()
        self.assertEqual(ns.route().code, 17)

    def test_heartbeats_keep_the_broker_alive(self):
        ns = NameServer(self)
        broker, t = ns.connect()
        ns.register(broker, heartbeatTimeoutMillis="10000", enableActingMaster="false")
        for _ in range(6):
            ns.advance(5)
            ns.request(broker, 904, {"clusterName": "DefaultCluster", "brokerAddr": "127.0.0.1:10911",
                                     "brokerName": "broker-a"}, oneway=True)
        self.assertEqual(ns.brokers_in_route(), ["broker-a"])
        self.assertFalse(t.disconnecting)

    def test_default_expiry_is_120_seconds(self):
        ns = NameServer(self, serverChannelMaxIdleTimeSeconds="0")
        broker, t = ns.connect()
        ns.register(broker)
        ns.advance(120)
        self.assertEqual(ns.brokers_in_route(), ["broker-a"])
        ns.advance(5)
        self.assertEqual(ns.route().code, 17)

    def test_one_batch_per_turn(self):
        ns = NameServer(self)
        batch = ns.top.getServiceNamed("batch-unregistration")
        conns = []
        for i in range(3):
            proto, t = ns.connect(port=41000 + i)
            ns.register(proto, broker=f"broker-{i}", addr=f"127.0.0.1:{11000 + i}")
            conns.append(proto)
        before = batch.batches
        for proto in conns:
            proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(len(ns.brokers_in_route()), 3)
        ns.turn()
        self.assertEqual(batch.batches, before + 1)
        self.assertEqual(ns.route().code, 17)

    def test_queue_full_answers_system_error(self):
        ns = NameServer(self, unRegisterBrokerQueueCapacity="2")
        admin, t = ns.connect()
        frames = b"".join(RemotingCommand.request(
            104, {"brokerName": f"b{i}", "brokerAddr": f"127.0.0.1:{i}", "clusterName": "C",
                  "brokerId": "0"}, opaque=100 + i, version=413).encode() for i in range(3))
        admin.dataReceived(frames)
        answers = [decode_frame(f) for f in split_frames(t.value())[0]]
        self.assertEqual([(a.opaque, a.code) for a in answers], [(100, 0), (101, 0), (102, 1)])
        ns.turn()
        self.assertEqual(ns.request(admin, 104, {"brokerName": "b", "brokerAddr": "127.0.0.1:9",
                                                 "clusterName": "C", "brokerId": "0"})[0].code, 0)

    def test_stale_close_after_reregistration_is_ignored(self):
        ns = NameServer(self)
        old, _ = ns.connect(port=42000)
        ns.register(old)
        new, _ = ns.connect(port=42001)  # the broker restarted and registered again
        ns.register(new, counter=2)
        old.connectionLost(Failure(ConnectionDone()))
        ns.turn()
        self.assertEqual(ns.brokers_in_route(), ["broker-a"])
        new.connectionLost(Failure(ConnectionDone()))
        ns.turn()
        self.assertEqual(ns.route().code, 17)

    def test_idle_then_close_is_harmless_for_a_reregistered_broker(self):
        ns = NameServer(self, serverChannelMaxIdleTimeSeconds="60")
        old, t_old = ns.connect(port=43000)
        ns.register(old)
        ns.advance(30)
        new, _ = ns.connect(port=43001)
        ns.register(new, counter=2)
        for _ in range(8):  # the new channel keeps talking; the old one idles out
            ns.advance(5)
            ns.register(new, counter=2)
        self.assertTrue(t_old.disconnecting)
        old.connectionLost(Failure(ConnectionDone()))
        ns.turn()
        self.assertEqual(ns.brokers_in_route(), ["broker-a"])


class LenientHeaderTests(SynchronousTestCase):
    def test_raw_control_characters_in_a_header_are_answered_not_disconnected(self):
        """A .NET client (NewLife.RocketMQ) writes raw 0x01/0x02 inside JSON strings; Java's
        fastjson reads them, so the connection lives and the request is answered."""
        ns = NameServer(self)
        broker, _ = ns.connect()
        ns.register(broker)
        client, transport = ns.connect(port=45000)
        header = (b'{"code":105,"extFields":{"topic":"T","tag":"a\x01b\x02"},"flag":0,'
                  b'"language":"DOTNET","opaque":7,"serializeTypeCurrentRPC":"JSON","version":401}')
        client.dataReceived(b"".join(((4 + len(header)).to_bytes(4, "big"), b"\x00",
                                      len(header).to_bytes(3, "big"), header)))
        frames, _ = split_frames(transport.value())
        [answer] = [decode_frame(f) for f in frames]
        self.assertEqual((answer.code, answer.opaque), (0, 7))
        self.assertEqual(json.loads(answer.body)["brokerDatas"][0]["brokerName"], "broker-a")
        self.assertFalse(transport.disconnecting)


class NotifyMinBrokerIdTests(SynchronousTestCase):
    def test_slave_told_when_master_comes_and_goes(self):
        ns = NameServer(self, notifyMinBrokerIdChanged="true", supportActingMaster="true")
        slave, _ = ns.connect(port=44001)
        ns.register(slave, broker_id=1, addr="127.0.0.1:10921", enableActingMaster="true")
        master, _ = ns.connect(port=44000)
        ns.register(master, broker_id=0, addr="127.0.0.1:10911", enableActingMaster="true")
        # the NameServer connects out to the slave's own address and writes a oneway 905
        host, port, factory, timeout, _ = ns.reactor.tcpClients[-1]
        self.assertEqual((host, port), ("127.0.0.1", 10921))
        out = StringTransport()
        proto = factory.buildProtocol(None)
        proto.makeConnection(out)
        [note] = [decode_frame(f) for f in split_frames(out.value())[0]]
        self.assertEqual(note.code, 905)
        self.assertTrue(note.is_oneway)
        self.assertEqual(note.ext_fields["minBrokerId"], "0")
        self.assertEqual(note.ext_fields["minBrokerAddr"], "127.0.0.1:10911")
        self.assertTrue(out.disconnecting)          # a push channel is not kept (issue 31)
        master.connectionLost(Failure(ConnectionDone()))
        ns.turn()
        host, port, factory, timeout, _ = ns.reactor.tcpClients[-1]
        self.assertEqual((host, port, len(ns.reactor.tcpClients)), ("127.0.0.1", 10921, 2))
        out = StringTransport()
        factory.buildProtocol(None).makeConnection(out)
        [note] = [decode_frame(f) for f in split_frames(out.value())[0]]
        self.assertEqual(note.ext_fields["minBrokerId"], "1")
        self.assertEqual(note.ext_fields["offlineBrokerAddr"], "127.0.0.1:10911")
        self.assertNotEqual(note.opaque, 0)

    def test_switched_on_at_run_time(self):
        """UPDATE_NAMESRV_CONFIG notifyMinBrokerIdChanged=true takes effect at once: Java reads
        the switch on every registration and unregistration."""
        ns = NameServer(self, supportActingMaster="true")
        admin, _ = ns.connect(port=45000)
        [answer] = ns.request(admin, 318, body=b"notifyMinBrokerIdChanged=true\n")
        self.assertEqual(answer.code, 0)
        slave, _ = ns.connect(port=44001)
        ns.register(slave, broker_id=1, addr="127.0.0.1:10921", enableActingMaster="true")
        master, _ = ns.connect(port=44000)
        ns.register(master, broker_id=0, addr="127.0.0.1:10911", enableActingMaster="true")
        [(host, port, factory, _, _)] = ns.reactor.tcpClients
        self.assertEqual((host, port), ("127.0.0.1", 10921))
        out = StringTransport()
        factory.buildProtocol(None).makeConnection(out)
        [note] = [decode_frame(f) for f in split_frames(out.value())[0]]
        self.assertEqual((note.code, note.ext_fields["minBrokerId"]), (905, "0"))
        # and off again: the master's departure is not announced
        [answer] = ns.request(admin, 318, body=b"notifyMinBrokerIdChanged=false\n")
        out.clear()
        master.connectionLost(Failure(ConnectionDone()))
        ns.turn()
        self.assertEqual(out.value(), b"")
        self.assertEqual(len(ns.reactor.tcpClients), 1)      # and no new push connection

    def test_off_by_default(self):
        ns = NameServer(self)
        slave, _ = ns.connect(port=44001)
        ns.register(slave, broker_id=1, addr="127.0.0.1:10921", enableActingMaster="true")
        master, _ = ns.connect(port=44000)
        ns.register(master, broker_id=0, addr="127.0.0.1:10911", enableActingMaster="true")
        self.assertEqual(ns.reactor.tcpClients, [])


class LifecycleTests(SynchronousTestCase):
    def test_stop_flushes_kv_and_closes_connections(self):
        ns = NameServer(self)
        admin, t = ns.connect()
        [answer] = ns.request(admin, 100, {"namespace": "NS", "key": "k", "value": "v"})
        self.assertEqual(answer.code, 0)
        d = ns.top.stopService()
        self.assertTrue(t.disconnecting)
        admin.connectionLost(Failure(ConnectionDone()))
        self.successResultOf(d)
        with open(f"{ns.tmp}-kv.json") as f:
            self.assertEqual(json.load(f)["configTable"], {"NS": {"k": "v"}})

    def test_boot_line_logged_with_address(self):
        from twisted.logger import globalLogPublisher
        seen = []
        globalLogPublisher.addObserver(seen.append)
        try:
            NameServer(self)
        finally:
            globalLogPublisher.removeObserver(seen.append)
        from twisted.logger import formatEvent
        lines = [formatEvent(e) for e in seen]
        self.assertTrue(any(l.startswith("The Name Server boot success. serializeType=JSON, address ")
                            and l.endswith(":9876") for l in lines), lines)

    def test_graceful_shutdown_keys_do_not_delay_the_stop(self):
        """5.3's enableShutdownGracefully/shutdownWaitTimeSeconds are read and reported, but the
        stop closes every connection at once and sends no GO_AWAY (docs/java-5.3-changes.md)."""
        ns = NameServer(self, enableShutdownGracefully="true", shutdownWaitTimeSeconds="30")
        client, t = ns.connect()
        [answer] = ns.request(client, 319)
        self.assertIn(b"enableShutdownGracefully=true", answer.body)
        self.assertIn(b"shutdownWaitTimeSeconds=30", answer.body)
        t.clear()
        d = ns.top.stopService()
        self.assertTrue(t.disconnecting)
        self.assertEqual(t.value(), b"")
        client.connectionLost(Failure(ConnectionDone()))
        self.successResultOf(d)
