"""rocketpy-brokersim in controller mode, in memory: groups of simulated controller-mode brokers
against a complete ``twistd rocketnamesrv`` service tree with ``enableControllerInNamesrv=true``
(``makeService``) on one MemoryReactorClock, connected with iosim, the controller's pushes
included (it connects to the brokers' listen ports). Ids, election, heartbeats, the sync state
set, failover when masters are killed, and the verification: exactly one master per group,
the controller's, routed by the NameServer as brokerId 0."""
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.test import iosim
from twisted.trial.unittest import SynchronousTestCase

from rocketpy.broker.sim import BrokerSim, SimOptions
from rocketpy.remoting.codes import MQVersion
from rocketpy.service.tap import Options, makeService

from pumpworld import Pumped

T0 = 1_700_000_000
NAMESRV = "127.0.0.1:9876"
CONTROLLER = "127.0.0.1:9878"


class ControllerWorld(Pumped):
    """One NameServer hosting the controller, and every connection between it and the brokers."""

    def __init__(self, case):
        self.reactor = MemoryReactorClock()
        self.reactor.advance(T0)
        tmp = case.mktemp()
        options = Options()
        options.parseOptions(["--kvConfigPath", f"{tmp}-kv.json", "--listen", "tcp:0",
                              "-D", f"configStorePath={tmp}-namesrv.properties",
                              "-D", "tls.server.mode=disabled",
                              "-D", "enableControllerInNamesrv=true",
                              "-D", "controllerDLegerGroup=group1",
                              "-D", f"controllerDLegerPeers=n0-{CONTROLLER}",
                              "-D", "controllerDLegerSelfId=n0",
                              "-D", f"controllerStorePath={tmp}-controller"])
        self.top = makeService(options, reactor=self.reactor)
        self.top.startService()
        self.factories = {NAMESRV: self.top.factory, CONTROLLER: self.top.controller.factory}
        self.accepted = 0
        self.pumps = []
        self.ports = iter(range(30000, 65000))

    def _listener(self, host, port):
        """A factory listening there: the NameServer, the controller or a broker's port."""
        if f"{host}:{port}" in self.factories:
            return self.factories[f"{host}:{port}"]
        for listen_port, factory, _, interface in reversed(self.reactor.tcpServers):
            if listen_port == port and interface in (host, ""):
                if not getattr(factory, "closed", False):
                    return factory
        return None

    def _accept(self):
        while self.accepted < len(self.reactor.tcpClients):
            host, port, factory, _, _ = self.reactor.tcpClients[self.accepted]
            self.accepted += 1
            listener = self._listener(host, port)
            if listener is None:
                factory.clientConnectionFailed(None, Failure(ConnectionRefusedError()))
                continue
            peer = IPv4Address("TCP", "127.0.0.1", next(self.ports))
            server = listener.buildProtocol(peer)
            client = factory.buildProtocol(None)
            pump = iosim.connect(server, iosim.FakeTransport(server, True, peerAddress=peer),
                                 client, iosim.FakeTransport(client, False), greet=False)
            self.pumps.append(pump)


def _options(**kw):
    base = dict(namesrv_addrs=[NAMESRV], brokers=8, topics=2, replicas=2, clusters=1,
                period=2.0, ramp=0.5, seed=5, version=MQVersion.V5_3_3, controller_addr=CONTROLLER)
    base.update(kw)
    return SimOptions(**base)


class ControllerSimTests(SynchronousTestCase):

    def test_groups_elect_one_master_each_and_fail_over(self):
        world = ControllerWorld(self)
        sim = BrokerSim(world.reactor, _options())
        sim.start()
        world.run(8)
        masters = {b.config.broker_name: b for b in sim.brokers if b.config.broker_id == 0}
        self.assertEqual(len(masters), 4)                     # one per group
        self.assertEqual(sorted(b.controller.controller_id for b in sim.brokers), [1, 1, 1, 1, 2, 2, 2, 2])
        self.assertEqual(self._check(world, sim), [])
        world.run(6)                                          # masters grew their sync state sets
        for master in masters.values():
            master.kill()
        world.run(1)                                          # failover, within a second
        promoted = {b.config.broker_name: b for b in sim.live() if b.config.broker_id == 0}
        self.assertEqual(sorted(promoted), sorted(masters))
        self.assertTrue(all(b is not masters[n] for n, b in promoted.items()))
        self.assertEqual(self._check(world, sim), [])
        self.assertGreaterEqual(sim.stats.counts["controller: role pushes"], 4)

    def test_churn_then_exactly_one_master_per_group(self):
        world = ControllerWorld(self)
        sim = BrokerSim(world.reactor, _options(brokers=12, churn=40, down=3.0))
        sim.start()
        world.run(40)
        self.assertGreater(sum(v for k, v in sim.stats.counts.items() if k.startswith("churn")), 5)
        self.assertEqual(self._check(world, sim, settle=12.0), [])

    def _check(self, world, sim, settle=2.0):
        return world.wait(sim.verify(settle=settle))

    def test_controller_mode_needs_a_5x_release(self):
        with self.assertRaises(ValueError):
            BrokerSim(MemoryReactorClock(), _options(version=MQVersion.V4_9_8))
