"""rocketpy-brokersim in memory: simulated brokers against two complete rocketpy NameServer
service trees (``makeService``) on one MemoryReactorClock, connected with iosim. The cadence
(registration with jitter, QUERY_DATA_VERSION when not forced, 5.x heartbeats and metadata
refreshes), churn and verification run on fake time.
"""
import collections

from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.test import iosim
from twisted.trial.unittest import SynchronousTestCase

from twisted.python.failure import Failure

from rocketpy.admin.api import MQAdmin
from rocketpy.broker.sim import BrokerSim, SimOptions, percentile
from rocketpy.broker.simcli import build_parser, format_report, options_from_args, _OptionError
from rocketpy.remoting.codes import MQVersion
from rocketpy.remoting import RemotingCommand
from rocketpy.remoting.headers import UnRegisterBrokerRequestHeader
from rocketpy.service.tap import Options, makeService
from rocketpy.transport.client import RemotingClient

from pumpworld import Pumped

T0 = 1_700_000_000
NAMESRVS = ("127.0.0.1:9876", "127.0.0.1:9877")


class World(Pumped):
    """Two NameServers and the brokers' connections to them, on one fake reactor."""

    def __init__(self, case, *server_args):
        self.reactor = MemoryReactorClock()
        self.reactor.advance(T0)
        self.servers = {}
        for addr in NAMESRVS:
            tmp = case.mktemp()
            options = Options()
            options.parseOptions(["--kvConfigPath", f"{tmp}-kv.json", "--listen", "tcp:0",
                                  "-D", f"configStorePath={tmp}-namesrv.properties",
                                  "-D", "tls.server.mode=disabled", *server_args])
            top = makeService(options, reactor=self.reactor)
            top.startService()
            self.servers[addr] = top
        self.accepted = 0
        self.pumps = []
        self.requests = collections.Counter()
        self.ports = iter(range(30000, 65000))

    def _accept(self):
        while self.accepted < len(self.reactor.tcpClients):
            host, port, factory, _, _ = self.reactor.tcpClients[self.accepted]
            self.accepted += 1
            top = self.servers.get(f"{host}:{port}")
            if top is None:  # nobody listens there
                factory.clientConnectionFailed(None, Failure(ConnectionRefusedError()))
                continue
            peer = IPv4Address("TCP", "127.0.0.1", next(self.ports))
            server = top.factory.buildProtocol(peer)
            client = factory.buildProtocol(None)
            server_transport = iosim.FakeTransport(server, True, peerAddress=peer)
            client_transport = iosim.FakeTransport(client, False)
            pump = iosim.connect(server, server_transport, client, client_transport, greet=False)
            pump.addr = f"{host}:{port}"
            self.pumps.append(pump)


    def admin(self, addr):
        """An MQAdmin on this reactor: the NameServers are only looked at over the wire."""
        return MQAdmin(RemotingClient(self.reactor), [addr], version=MQVersion.V5_3_3)

    def route(self, addr, topic):
        return self.wait(self.admin(addr).examine_topic_route_info(topic))

    def route_brokers(self, addr, topic):
        route = self.route(addr, topic)
        return None if isinstance(route, Failure) else sorted(b.broker_name for b in route.broker_datas)

    def cluster_brokers(self, addr):
        return self.wait(self.admin(addr).examine_broker_cluster_info()).broker_addr_table


def options(**kw):
    base = dict(namesrv_addrs=list(NAMESRVS), brokers=20, topics=4, replicas=2, clusters=2,
                period=2.0, ramp=1.0, seed=3)
    base.update(kw)
    return SimOptions(**base)


class SimTests(SynchronousTestCase):
    def test_all_brokers_registered_on_both_then_churn_then_consistent(self):
        world = World(self)
        sim = BrokerSim(world.reactor, options(churn=120, down=1.5))
        lines = []
        sim.emit = lines.append
        sim.start(progress=2.0)
        world.run(1.5)
        for addr in NAMESRVS:  # every group on every NameServer, each topic on its group
            self.assertEqual(len(world.cluster_brokers(addr)), 10)
            self.assertEqual(world.route_brokers(addr, "SimTopic-0"), ["broker-0"])
            self.assertEqual(len(world.route_brokers(addr, "TBW102")), 10)
        world.run(10)
        counts = sim.stats.counts
        self.assertGreater(sum(v for k, v in counts.items() if k.startswith("churn")), 10)
        problems = world.wait(sim.verify(settle=1.0))
        self.assertEqual(problems, [])
        down = len(sim.brokers) - len(sim.live())
        self.assertGreater(down, 0)  # some brokers stayed down, and verify saw them gone
        for addr, row in sim.stats.per_namesrv().items():
            self.assertGreater(row["ok"], 50)
            self.assertEqual(row["failed"], 0)
            self.assertIsNotNone(row["p99_ms"])
        self.assertTrue(lines and lines[0].startswith("[    2.0s] live "))
        world.wait(sim.stop())
        for addr in NAMESRVS:  # graceful stop: every broker unregistered
            self.assertEqual(world.cluster_brokers(addr), {})
        report = sim.report()
        self.assertEqual(report["live"], len(sim.brokers) - down)
        text = format_report(report, problems)
        self.assertIn("verify: consistent", text)

    def test_verify_finds_a_nameserver_that_lost_a_broker(self):
        world = World(self)
        sim = BrokerSim(world.reactor, options(brokers=4, replicas=1, clusters=1))
        sim.start()
        world.run(1.5)
        victim = sim.brokers[0].config  # unregistered from the second NameServer behind its back
        header = UnRegisterBrokerRequestHeader(
            broker_name=victim.broker_name, broker_addr=victim.broker_addr,
            cluster_name=victim.broker_cluster_name, broker_id=victim.broker_id)
        answer = world.wait(RemotingClient(world.reactor).invoke(
            NAMESRVS[1], RemotingCommand.request(104, header.to_ext_fields(), version=479)))
        self.assertEqual(answer.code, 0)
        world.run(0.1)
        problems = world.wait(sim.verify(settle=0.0))
        self.assertTrue(any(p.startswith(NAMESRVS[1]) and "cluster table differs" in p
                            for p in problems), problems)
        self.assertFalse(any(p.startswith(NAMESRVS[0]) for p in problems), problems)

    def test_no_force_asks_query_data_version_and_registers_only_on_change(self):
        world = World(self)
        sim = BrokerSim(world.reactor, options(brokers=2, replicas=1, clusters=1, force_register=False,
                                               jitter=0.0))
        sim.start()
        world.run(1.2)
        first = sim.stats.counts["registrations"]
        self.assertEqual(first, 2)  # the forced one at start
        world.run(4.0)
        self.assertEqual(sim.stats.counts["registrations"], first)  # nothing changed
        self.assertGreaterEqual(sim.stats.counts["query_data_version"], 4)
        sim.brokers[0].manager.update_topic(
            __import__("rocketpy.remoting.bodies", fromlist=["TopicConfig"]).TopicConfig(
                topic_name="Later"), sim.now_ms())
        world.run(2.1)
        self.assertEqual(sim.stats.counts["registrations"], first + 1)
        self.assertEqual(world.route_brokers(NAMESRVS[0], "Later"), ["broker-0"])

    def test_five_x_heartbeats_refreshes_and_zones(self):
        world = World(self, "--profile=5.3")
        sim = BrokerSim(world.reactor, options(brokers=2, replicas=1, clusters=1, zones=2,
                                               version=MQVersion.V5_3_3, acting_master=True,
                                               broker_heartbeat=True, period=30.0, ramp=0.0))
        sim.start()
        world.run(6.0)
        counts = sim.stats.counts
        self.assertEqual(counts["registrations"], 2)
        self.assertGreaterEqual(counts["heartbeats"], 10)
        self.assertGreaterEqual(counts["cluster info refreshes"], 2)
        route = world.route(NAMESRVS[0], "TBW102")
        self.assertEqual(sorted(b.zone_name for b in route.broker_datas), ["zone-0", "zone-1"])

    def test_a_dead_nameserver_is_counted_not_fatal(self):
        world = World(self)
        sim = BrokerSim(world.reactor, options(brokers=2, replicas=1, clusters=1,
                                               namesrv_addrs=[NAMESRVS[0], "127.0.0.1:1"]))
        sim.start()
        world.run(3.0)
        rows = sim.stats.per_namesrv()
        self.assertGreater(rows[NAMESRVS[0]]["ok"], 0)
        self.assertEqual(rows["127.0.0.1:1"]["ok"], 0)
        self.assertGreater(sim.stats.errors["registration: connect"], 0)


def test_percentile_nearest_rank():
    assert percentile([], 0.5) is None
    assert percentile([1.0], 0.99) == 1.0
    values = list(range(1, 101))
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile(values, 1.0)) == (50, 99, 100)


def test_cli_option_errors():
    parser = build_parser()
    for argv, message in [
        ([], "no NameServer address"),
        (["-n", "x"], "is not a host:port"),
        (["-n", "h:1", "--version", "9.9.9"], "not a broker release"),
        (["-n", "h:1", "--brokers", "0"], "--brokers must be at least 1"),
        (["-n", "h:1", "--period", "0"], "--period must be more than 0"),
        (["-n", "h:1", "--jitter", "1"], "--jitter must be in"),
        (["-n", "h:1", "--acting-master"], "need a 5.x --version"),
    ]:
        try:
            options_from_args(parser.parse_args(argv))
        except _OptionError as exc:
            assert message in str(exc), (argv, exc)
        else:
            raise AssertionError(argv)
    opts = options_from_args(parser.parse_args(["-n", "a:1;b:2", "--version", "5.0.0", "--no-force"]))
    assert opts.namesrv_addrs == ["a:1", "b:2"] and opts.version == MQVersion.V5_0_0
    assert opts.force_register is False
