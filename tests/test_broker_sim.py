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
from rocketpy.broker.sim import BrokerSim, SimOptions, describe_difference, percentile
from rocketpy.broker.simcli import (build_parser, failure_lines, format_report, options_from_args,
                                    _OptionError)
from rocketpy.remoting.codes import MQVersion
from rocketpy.remoting import RemotingCommand
from rocketpy.remoting.bodies import KVTable
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
            listening = {f"{i}:{p}": f for p, f, _, i in self.reactor.tcpServers if i}
            if top is None and f"{host}:{port}" in listening:   # a --listen simulated broker
                top = type("Listening", (), {"factory": listening[f"{host}:{port}"]})
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
        self.assertIn(f"{NAMESRVS[1]}: cluster table differs: missing broker-0", problems)
        self.assertIn(f"{NAMESRVS[1]}: route of TBW102 differs: missing broker-0", problems)
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

    def test_listening_brokers_and_a_restart_whose_port_is_taken(self):
        from twisted.internet.error import CannotListenError
        world = World(self)
        sim = BrokerSim(world.reactor, options(brokers=2, replicas=1, clusters=1, listen=True))
        sim.start()
        world.run(1.5)
        self.assertEqual([(port, interface) for port, _, _, interface in world.reactor.tcpServers[-2:]],
                         [(20911, "127.0.0.1"), (20913, "127.0.0.1")])
        broker = sim.brokers[0]
        broker.kill()
        self.assertIsNone(broker.port)

        def taken(port, factory, backlog=50, interface=""):
            raise CannotListenError(interface, port, OSError("Address already in use"))
        world.reactor.listenTCP = taken
        sim._back(broker)   # was an unhandled error in a DelayedCall
        self.assertFalse(broker.alive)
        self.assertEqual(sim.stats.errors["restart: listen"], 1)
        self.assertIn("127.0.0.1:20911: Couldn't listen on 127.0.0.1:20911", sim.stats.last_error)

    def test_listening_brokers_answer_the_broker_side_admin_requests(self):
        from rocketpy.broker.answers import SLAVE_REMARK
        world = World(self)
        sim = BrokerSim(world.reactor, options(brokers=2, replicas=2, clusters=1, listen=True))
        sim.start()
        world.run(1.5)
        master, slave = (b.config.broker_addr for b in sim.brokers)
        client = RemotingClient(world.reactor)

        def ask(addr, code, fields=None):
            return world.wait(client.invoke(addr, RemotingCommand.request(code, fields, version=409)))
        runtime = ask(master, 28)
        self.assertEqual(runtime.code, 0)
        self.assertEqual(KVTable.from_json(runtime.body).table["brokerVersionDesc"], "V4_9_8")
        create = {"topic": "Created", "defaultTopic": "TBW102", "readQueueNums": "2",
                  "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG",
                  "topicSysFlag": "0", "order": "false"}
        self.assertEqual((ask(slave, 17, create).code, ask(slave, 17, create).remark),
                         (1, SLAVE_REMARK))
        self.assertEqual(ask(master, 17, create).code, 0)
        world.run(0.2)   # registered at once, not a period later
        for addr in NAMESRVS:
            route = world.route(addr, "Created")
            self.assertEqual([(q.broker_name, q.read_queue_nums) for q in route.queue_datas],
                             [("broker-0", 2)])
        self.assertEqual(ask(master, 17, dict(create, topicFilterType="NO")).remark,
                         "topicFilterType = [NO] value invalid")
        self.assertEqual(ask(master, 300, {"topic": "Created"}).body, b'{"groupList":[]}')
        self.assertEqual(ask(master, 215, {"topic": "Created"}).code, 0)
        self.assertNotIn("Created", sim.brokers[0].manager)
        unknown = ask(master, 999)
        self.assertEqual((unknown.code, unknown.remark), (3, " request type 999 not supported"))

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
        [line] = failure_lines(sim, None)   # the simulator's exit status is 1
        self.assertRegex(line, r"^\d+ of \d+ registrations failed \(last error: 127\.0\.0\.1:1: "
                               r"connect to 127\.0\.0\.1:1 failed")
        self.assertEqual(failure_lines(sim, ["x", "y"])[1],
                         "verify found 2 differences between the NameServers and the brokers up")


def test_verify_differences_name_the_members():
    # was "route of Dual-0 has ['broker-0'], expected ['broker-0']": same names, other members
    assert describe_difference({"broker-0": {0: "a:1"}}, {"broker-0": {0: "a:1", 1: "a:3"}}) == \
        "broker-0 has {0=a:1} where {0=a:1, 1=a:3}"
    have = {f"b{i}": {0: "x"} for i in range(8)}
    want = {f"w{i}": {0: "x"} for i in range(2)}
    assert describe_difference(have, want, at_most=3) == \
        "missing w0, w1; unexpected b0, b1, b2 and 5 more"


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
