"""The decode pool fair across hosts in places and in turns (issue 31, hole 5).

4 hosts x 4 compressed bodies in fastjson's lenient forms (~3 s of decoding each) held all 16
places of the pool for 49.5 s, and a genuine registration from a fifth host was answered
SYSTEM_BUSY at once. Now a full pool takes a host holding two places fewer than another (the
other's newest waiting job is answered SYSTEM_BUSY), and jobs run in turns by host of one
quantum of work units each, yielding at their budget's checks: the fifth host's registration
waits for at most one quantum of each other host's work. Counted (units, turns, answers),
never timed."""
import struct
import threading
import zlib
from pathlib import Path

from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from rocketpy.remoting import RemotingCommand, bodies, decode_frame, split_frames
from rocketpy.remoting.budget import DecodeBudget
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.errors import DecodeCancelled
from rocketpy.transport import RemotingServerFactory, TlsMode
from rocketpy.transport.offload import DecodePool, WorkDisplaced
import test_decode_fairness
from test_decode_fairness import TOPICS_V, _compressed
from test_fuzz_processor import _processor
from test_transport_offload import ThreadReactor


def _part(raw):
    return struct.pack(">i", len(raw)) + raw


def lenient_bomb(parts=4, size=4 * 1024 * 1024 - 64):
    """A compressed 5.x body of ~7 KB whose DataVersion and static topic mappings are JSON
    parts of fastjson's comments (``/**/``): nothing in them that a JSON parser counts as a
    value, and every comment a step of the lenient reader (~3 s a body before its steps were
    charged)."""
    dv = b"{counter:1" + b"/**/" * ((size - 11) // 4) + b"}"
    mapping = b"{topic:'T',bname:'b'" + b"/**/" * ((size - 21) // 4) + b"}"
    raw = (_part(dv) + struct.pack(">i", 0) + _part(b"[]") + struct.pack(">i", parts - 1)
           + _part(mapping) * (parts - 1))
    return zlib.compress(raw, 9)


class PlacesTests(SynchronousTestCase):
    _pool = test_decode_fairness.PoolTests._pool

    def test_a_new_host_takes_the_newest_waiting_place_of_the_host_holding_most(self):
        reactor, pool = self._pool(max_pending=16, max_per_peer=4)
        gate = threading.Event()
        self.addCleanup(gate.set)
        gave_way = []

        def submit(host):
            d = pool.submit(lambda: gate.wait(30), host)
            if d is not None:
                d.addErrback(lambda f: gave_way.append((host, f.check(WorkDisplaced))))
            return d

        for host in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"):
            for _ in range(4):
                submit(host)
        self.assertEqual(pool.pending, 16)
        self.assertIsNotNone(submit("10.0.0.5"))
        self.assertEqual(gave_way, [("10.0.0.1", WorkDisplaced)])   # the newest, not started
        self.assertEqual((pool.pending, pool.displaced, pool.pending_by_peer["10.0.0.1"]),
                         (16, 1, 3))
        for host in ("10.0.0.6", "10.0.0.5", "10.0.0.5"):
            self.assertIsNotNone(submit(host))
        self.assertEqual(sorted(pool.pending_by_peer.values()), [1, 3, 3, 3, 3, 3])
        # max-min: a host never loses a place to one that would then hold as many
        self.assertIsNone(submit("10.0.0.5"))
        self.assertIsNotNone(submit("10.0.0.6"))
        self.assertEqual((pool.pending, pool.displaced, pool.refused), (16, 5, 6))
        self.assertEqual(len(gave_way), 5)

    def test_a_started_job_is_never_displaced(self):
        reactor, pool = self._pool(max_pending=2, max_per_peer=4)
        gate, started = threading.Event(), threading.Event()
        self.addCleanup(gate.set)
        gave_way = []

        def first():
            started.set()
            gate.wait(30)

        pool.submit(first, "10.0.0.1")
        self.assertTrue(started.wait(30))
        pool.submit(lambda: gate.wait(30), "10.0.0.1").addErrback(gave_way.append)
        # the first runs, the second waits: the newcomer takes the waiting one's place
        self.assertIsNotNone(pool.submit(lambda: 1, "10.0.0.2"))
        self.assertEqual([f.check(WorkDisplaced) for f in gave_way], [WorkDisplaced])
        self.assertIsNone(pool.submit(lambda: 2, "10.0.0.3"))   # 1 and 1: nobody gives way


class TurnsTests(SynchronousTestCase):
    def test_a_job_yields_its_turn_after_a_quantum_to_another_hosts_work(self):
        """Host A's decode of 100 quanta used to run whole before host B's; now B runs as soon
        as A has spent its first quantum."""
        reactor = ThreadReactor()
        quantum = 1 << 16
        pool = DecodePool(reactor, quantum=quantum)
        pool.start()
        self.addCleanup(pool.stop)
        go, budget_a, seen = threading.Event(), DecodeBudget(0), []

        def long_decode():
            go.wait(30)
            for _ in range(400):           # 100 quanta, a check each quarter
                budget_a.spend(quantum // 4, "chunk")
            return "a"

        done = []
        pool.submit(long_decode, "10.0.0.1", budget_a.cancel, budget_a).addCallback(done.append)
        pool.submit(lambda: seen.append(budget_a.spent) or "b", "10.0.0.2").addCallback(
            done.append)
        go.set()
        reactor.run_one()
        reactor.run_one()
        self.assertEqual(done, ["b", "a"])
        self.assertEqual(seen, [quantum])        # A had spent one quantum when B ran
        self.assertEqual(pool.yields, 1)

    def test_hosts_take_turns_of_one_quantum_each(self):
        """Three hosts' long decodes are interleaved quantum by quantum: none runs twice in a
        row while another waits."""
        reactor = ThreadReactor()
        quantum = 1 << 12
        pool = DecodePool(reactor, quantum=quantum)
        pool.start()
        self.addCleanup(pool.stop)
        go, order = threading.Event(), []

        def decode(name, budget):
            go.wait(30)
            for _ in range(10):
                order.append(name)
                budget.spend(quantum, "chunk")
            return name

        for name in "abc":
            budget = DecodeBudget(0)
            pool.submit(lambda n=name, b=budget: decode(n, b), f"10.0.0.{ord(name)}",
                        budget.cancel, budget)
        go.set()
        for _ in range(3):
            reactor.run_one()
        self.assertEqual("".join(order), "abc" * 10)

    def test_a_big_plain_registration_gives_turns_as_it_decodes(self):
        """A plain body is charged before one ``json.loads`` parses it, then read into records
        topic by topic: each few thousand topics are reported, so another host's long work
        takes its turns in the middle, not only before (a 16 MiB genuine body is ~1.5 s of
        decoding)."""
        from brokerbody import register_body
        from rocketpy.namesrv.model import DataVersion, TopicConfig
        reactor = ThreadReactor()
        quantum = 1 << 20
        pool = DecodePool(reactor, quantum=quantum)
        pool.start()
        self.addCleanup(pool.stop)
        go, budget, other_budget, seen = threading.Event(), DecodeBudget(0), DecodeBudget(0), []
        body = register_body([f"Topic{i}" for i in range(40_000)])

        def decode():
            go.wait(30)
            return len(bodies.read_register_broker_body(body, False, 479, TopicConfig,
                                                        DataVersion, budget=budget)[1])

        def other():
            for _ in range(20):
                seen.append(budget.worked)
                other_budget.spend(quantum, "chunk")
            return "other"

        done = []
        pool.submit(decode, "10.0.0.1", budget.cancel, budget).addCallback(done.append)
        pool.submit(other, "10.0.0.2", other_budget.cancel, other_budget).addCallback(
            done.append)
        go.set()
        reactor.run_one()
        reactor.run_one()
        self.assertEqual(sorted(done, key=str), [40_000, "other"])
        charged = budget.spent            # the values, charged before the parse
        # the other host ran at the charge, and again after each report of 4,096 topics
        between = sorted(set(seen))
        self.assertEqual(between[:3], [charged, charged + 4096 * 16 * 32,
                                       charged + 2 * 4096 * 16 * 32])
        self.assertGreaterEqual(pool.yields, 2 * 9)

    def test_a_job_alone_keeps_its_turn(self):
        reactor = ThreadReactor()
        pool = DecodePool(reactor, quantum=1)
        pool.start()
        self.addCleanup(pool.stop)
        budget = DecodeBudget(0)

        def decode():
            for _ in range(100):
                budget.spend(10, "chunk")
            return budget.spent
        done = []
        pool.submit(decode, "10.0.0.1", budget.cancel, budget).addCallback(done.append)
        reactor.run_one()
        self.assertEqual((done, pool.yields), ([1000], 0))

    def test_stop_cancels_a_job_waiting_for_its_turn(self):
        reactor = ThreadReactor()
        pool = DecodePool(reactor, quantum=1, stop_wait=30)
        pool.start()
        failures, started = [], []
        for host in ("10.0.0.1", "10.0.0.2"):
            budget, running = DecodeBudget(0), threading.Event()
            started.append(running)

            def endless(budget=budget, running=running):
                running.set()
                while True:
                    budget.spend(1, "chunk")
            pool.submit(endless, host, budget.cancel, budget).addErrback(failures.append)
        self.assertTrue(all(running.wait(30) for running in started))   # turns taken
        pool.stop()
        reactor.run_one()
        reactor.run_one()
        self.assertEqual([f.check(DecodeCancelled) for f in failures], [DecodeCancelled] * 2)


class FifthHostTests(SynchronousTestCase):
    """Hole 5 with the real processor, real frames and the real pool."""

    def _connect(self, factory, host):
        proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 9876))
        transport = StringTransport(peerAddress=IPv4Address("TCP", host, 40000))
        proto.makeConnection(transport)
        return proto, transport

    def _register(self, proto, body, opaque, name, addr):
        fields = {"brokerName": name, "brokerAddr": addr, "clusterName": "C", "brokerId": "0",
                  "haServerAddr": addr, "compressed": "true",
                  "bodyCrc32": str(bodies.body_crc32(body))}
        proto.dataReceived(RemotingCommand.request(103, fields, body, opaque=opaque,
                                                   version=479).encode())

    def test_a_genuine_registration_is_served_while_four_hosts_fill_the_pool(self):
        tmp = Path(self.mktemp())
        tmp.mkdir()
        reactor = ThreadReactor()
        quantum = 1 << 18
        pool = DecodePool(reactor, quantum=quantum, stop_wait=30)
        factory = RemotingServerFactory(_processor(tmp), clock=task.Clock(),
                                        tls_mode=TlsMode.DISABLED, decode_pool=pool)
        pool.start()
        self.addCleanup(pool.stop)
        bomb = lenient_bomb()
        bombers = []
        for host in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):
            for i in range(4):
                proto, transport = self._connect(factory, host)
                self._register(proto, bomb, 9, "bomb", "10.9.9.9:1")
                bombers.append(transport)
        self.assertEqual(pool.pending, 16)
        proto, victim = self._connect(factory, "127.0.0.6")
        self._register(proto, _compressed(TOPICS_V, 1), 1, "broker-v", "127.0.0.6:10911")
        # one bomb gave its place way: back to the front of its host's line, not refused
        self.assertEqual(([t.value() for t in bombers if t.value()], pool.displaced,
                          pool.waiting, pool.refused), ([], 1, 1, 0))
        while not victim.value():
            reactor.run_one()
        [answer] = [decode_frame(f) for f in split_frames(victim.value())[0]]
        self.assertEqual((answer.opaque, answer.code), (1, ResponseCode.SUCCESS))
        # served after one quantum of each other host's work, before any bomb was done
        self.assertEqual((pool.done, pool.yields), (1, 4))
        self.assertEqual(sum(1 for t in bombers if t.value()), 0)
