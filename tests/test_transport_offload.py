"""Transport: big REGISTER_BROKER bodies decoded on the decode pool
(``rocketpy.transport.offload``).

With the real processor and real frames: a connection whose registration is being decoded is
paused and answered in order afterwards, other connections are served meanwhile, a connection
closed in the meantime gets nothing and registers nothing, a full pool answers SYSTEM_BUSY
"[OVERLOAD]...", a failed work is answered SYSTEM_ERROR. The pool itself runs work on its named
daemon thread. And against the real server: a 3-million-line topic bomb on one connection does
not keep another connection from being answered first.
"""
import gc
import queue
import select
import sys
import threading
import weakref
from functools import partial
from pathlib import Path

import pytest
from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from brokerbody import register_body
from fuzzharness import topic_line_bomb
from rocketpy.remoting import RemotingCommand, bodies, decode_frame, split_frames
from rocketpy.remoting.codes import OVERLOAD_REMARK, ResponseCode
from rocketpy.service.tap import Options, makeService
from rocketpy.transport import RemotingServerFactory, TlsMode
from rocketpy.transport.limits import LoadGovernor
from rocketpy.transport.offload import SWITCH_INTERVAL, THREAD_NAME, DecodePool
from test_fuzz_processor import _processor
from serverproc import PATIENCE
from test_namesrv_pending import on_a_thread

BROKER = {"brokerName": "broker-big", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
          "brokerId": "0"}
BIG = register_body([f"Topic{i:05d}" for i in range(3000)])


def register_frame(body, opaque, compressed=False, oneway=False, **ext):
    fields = dict(BROKER, haServerAddr="127.0.0.1:10912", compressed=str(compressed).lower(),
                  bodyCrc32=str(bodies.body_crc32(body)), **ext)
    return RemotingCommand.request(103, fields, body, opaque=opaque, version=479,
                                   oneway=oneway).encode()


def query_frame(opaque, counter=1):
    body = bodies.DataVersion(counter=counter, timestamp=1, state_version=0).to_json()
    return RemotingCommand.request(322, dict(BROKER), body, opaque=opaque, version=479).encode()


def route_frame(opaque, topic="Topic00001"):
    return RemotingCommand.request(105, {"topic": topic}, opaque=opaque, version=479).encode()


def answers(transport):
    frames, rest = split_frames(transport.value())
    assert rest == b""
    return [decode_frame(f) for f in frames]


class ManualPool:
    """A decode pool whose work runs (on another thread) when the test says so."""

    accepting = True

    def __init__(self, max_pending=16):
        self.max_pending = max_pending
        self.waiting = []
        self.refused = 0

    def submit(self, work, peer=None, cancel=None, budget=None, size=0):
        if len(self.waiting) >= self.max_pending:
            self.refused += 1
            return None
        d = Deferred()
        self.waiting.append((work, d))
        return d

    def run_next(self):
        work, d = self.waiting.pop(0)
        d.callback(on_a_thread(work))

    def fail_next(self, exc):
        _, d = self.waiting.pop(0)
        d.errback(Failure(exc))


class Harness:
    def __init__(self, tmp, max_pending=16, pool=None):
        Path(tmp).mkdir()
        self.processor = _processor(Path(tmp))
        self.pool = ManualPool(max_pending) if pool is None else pool
        self.clock = task.Clock()
        self.factory = RemotingServerFactory(self.processor, clock=self.clock,
                                             tls_mode=TlsMode.DISABLED, decode_pool=self.pool)

    def connect(self):
        proto = self.factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        return proto, transport

    @property
    def brokers(self):
        return self.processor.route_info_manager.broker_addr_table


class DecodePoolTransportTests(SynchronousTestCase):
    def test_one_connection_waits_and_is_answered_in_order(self):
        h = Harness(self.mktemp())
        proto, t = h.connect()
        proto.dataReceived(register_frame(BIG, 1) + query_frame(2) + route_frame(3))
        self.assertEqual(t.value(), b"")            # nothing answered, nothing else processed
        self.assertEqual(t.producerState, "paused")
        self.assertEqual(len(h.pool.waiting), 1)
        self.assertEqual(h.brokers, {})
        h.pool.run_next()
        first, second, third = answers(t)
        self.assertEqual([a.opaque for a in (first, second, third)], [1, 2, 3])
        self.assertEqual((first.code, second.code, third.code), (0, 0, 0))
        self.assertEqual(second.ext_fields["changed"], "false")   # saw the registration
        self.assertEqual(t.producerState, "producing")
        self.assertIn("broker-big", h.brokers)

    def test_other_connections_are_served_meanwhile(self):
        h = Harness(self.mktemp())
        busy, busy_t = h.connect()
        other, other_t = h.connect()
        busy.dataReceived(register_frame(BIG, 1))
        other.dataReceived(route_frame(7, topic="TBW102"))
        [answer] = answers(other_t)
        self.assertEqual((answer.opaque, answer.code), (7, ResponseCode.TOPIC_NOT_EXIST))
        self.assertEqual(busy_t.value(), b"")
        h.pool.run_next()
        self.assertEqual([a.code for a in answers(busy_t)], [0])

    def test_a_connection_closed_meanwhile_gets_nothing_and_registers_nothing(self):
        h = Harness(self.mktemp())
        proto, t = h.connect()
        proto.dataReceived(register_frame(BIG, 1) + query_frame(2))
        proto.connectionLost(Failure(ConnectionError("peer went away")))
        h.pool.run_next()
        self.assertEqual(t.value(), b"")
        self.assertEqual(h.brokers, {})
        self.assertFalse(proto.waiting)

    def test_more_input_while_waiting_is_held(self):
        h = Harness(self.mktemp())
        proto, t = h.connect()
        proto.dataReceived(register_frame(BIG, 1))
        proto.dataReceived(query_frame(2))
        proto.resumeProducing()                       # the write buffer drained: still waiting
        self.assertEqual(t.value(), b"")
        h.pool.run_next()
        self.assertEqual([a.opaque for a in answers(t)], [1, 2])

    def test_full_pool_answers_overload_at_once(self):
        h = Harness(self.mktemp(), max_pending=1)
        first, first_t = h.connect()
        second, second_t = h.connect()
        first.dataReceived(register_frame(BIG, 1))
        second.dataReceived(register_frame(BIG, 2) + query_frame(3))
        busy, query = answers(second_t)
        self.assertEqual((busy.opaque, busy.code, busy.remark),
                         (2, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK))
        self.assertEqual(query.opaque, 3)
        self.assertEqual(h.factory.governor.shed_total, 1)
        self.assertEqual(h.factory.metrics.overloaded, {103: 1})
        h.pool.run_next()
        self.assertEqual([a.code for a in answers(first_t)], [0])

    def test_a_pool_not_running_answers_overload_at_once(self):
        """Before the pool's start and after its stop, a big registration is answered
        SYSTEM_BUSY on the spot and the connection read on; the job used to wait for a thread
        that was not there, never answered, the connection paused until its idle timeout."""
        pool = DecodePool(ThreadReactor())
        h = Harness(self.mktemp(), pool=pool)
        events = []
        self.patch(LoadGovernor, "log", Logger(observer=events.append))
        for when in ("before start", "after stop"):
            proto, t = h.connect()
            proto.dataReceived(register_frame(BIG, 1) + route_frame(2, topic="TBW102"))
            busy, route = answers(t)
            self.assertEqual((busy.opaque, busy.code, busy.remark),
                             (1, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK), when)
            self.assertEqual((route.opaque, route.code), (2, ResponseCode.TOPIC_NOT_EXIST))
            self.assertEqual(t.producerState, "producing")
            shed = events.pop()
            self.assertEqual((shed["rocketpy_event"], shed["why"]), ("request.shed", "not running"))
            self.assertEqual((pool.pending, h.brokers), (0, {}))
            pool.start()
            pool.stop()
        self.assertEqual(pool.refused, 2)

    def test_failed_work_is_answered_system_error_and_the_connection_goes_on(self):
        h = Harness(self.mktemp())
        proto, t = h.connect()
        proto.dataReceived(register_frame(BIG, 1) + route_frame(2, topic="TBW102"))
        with self.assertLogs("rocketpy.namesrv", "ERROR") as logged:   # the processor's own
            h.pool.fail_next(RuntimeError("pool broke"))
        failed, route = answers(t)
        self.assertEqual((failed.opaque, failed.code), (1, ResponseCode.SYSTEM_ERROR))
        self.assertIn("pool broke", failed.remark)
        self.assertEqual((route.opaque, route.code), (2, ResponseCode.TOPIC_NOT_EXIST))
        self.assertIn("RuntimeError: pool broke", "\n".join(logged.output))

    def test_a_bomb_is_refused_like_on_the_reactor(self):
        h = Harness(self.mktemp())
        proto, t = h.connect()
        proto.dataReceived(register_frame(topic_line_bomb(100_000), 1, compressed=True)
                           + route_frame(2, topic="T"))
        h.pool.run_next()
        refused, route = answers(t)
        self.assertEqual(refused.code, ResponseCode.SYSTEM_ERROR)
        self.assertIn("Failed to decode RegisterBrokerBody", refused.remark)
        self.assertEqual(route.code, ResponseCode.TOPIC_NOT_EXIST)

    def test_oneway_registration_is_applied_silently(self):
        h = Harness(self.mktemp())
        proto, t = h.connect()
        proto.dataReceived(register_frame(BIG, 1, oneway=True) + query_frame(2))
        h.pool.run_next()
        [answer] = answers(t)
        self.assertEqual((answer.opaque, answer.ext_fields["changed"]), (2, "false"))


class ThreadReactor:
    """What the pool needs of a reactor: ``callFromThread``, queued for the test's thread."""

    def __init__(self):
        self.from_threads = queue.Queue()

    def callFromThread(self, f, *args, **kwargs):
        self.from_threads.put((f, args, kwargs))

    def run_one(self):
        f, args, kwargs = self.from_threads.get(timeout=PATIENCE)
        f(*args, **kwargs)


class DecodePoolTests(SynchronousTestCase):
    def test_work_runs_on_the_named_daemon_thread_and_the_queue_is_bounded(self):
        reactor = ThreadReactor()
        pool = DecodePool(reactor, max_pending=2, max_waiting_bytes=0)   # no lobby
        gate = threading.Event()
        pool.start()
        self.addCleanup(pool.stop)

        def work():
            gate.wait(PATIENCE)
            thread = threading.current_thread()
            return thread.name, thread.daemon, threading.get_ident()

        results = []
        for _ in range(2):
            pool.submit(work).addCallback(results.append)
        self.assertIsNone(pool.submit(work))
        self.assertEqual((pool.pending, pool.refused), (2, 1))
        gate.set()
        reactor.run_one()
        reactor.run_one()
        self.assertEqual(len(results), 2)
        for name, daemon, ident in results:
            self.assertIn(THREAD_NAME, name)
            self.assertTrue(daemon)
            self.assertNotEqual(ident, threading.get_ident())
        self.assertEqual((pool.pending, pool.done), (0, 2))
        self.assertIsNotNone(pool.submit(lambda: None))

    def test_work_offered_before_start_or_after_stop_is_refused(self):
        reactor = ThreadReactor()
        pool = DecodePool(reactor)
        self.assertIsNone(pool.submit(lambda: 1, "host"))
        pool.start()
        done = []
        pool.submit(lambda: 2, "host").addCallback(done.append)
        reactor.run_one()
        pool.stop()
        self.assertIsNone(pool.submit(lambda: 3, "host"))
        self.assertEqual((done, pool.refused, pool.pending, pool.pending_by_peer), ([2], 2, 0, {}))

    def test_the_thread_keeps_nothing_of_a_finished_job(self):
        """A job's work and result are freed once answered: the idle thread held the last of
        each (a decoded table, a 1 M-topic list) until the next job, 21 MiB after every broker
        had left."""
        reactor = ThreadReactor()
        pool = DecodePool(reactor)
        pool.start()
        self.addCleanup(pool.stop)

        class Held:
            pass

        argument, result = Held(), Held()
        work_gone, result_gone = weakref.ref(argument), weakref.ref(result)
        answered = []
        pool.submit(partial(lambda held, out: out, argument, result)).addCallback(answered.append)
        del argument, result
        reactor.run_one()
        self.assertIs(answered.pop(), result_gone())
        gc.collect()
        self.assertIsNone(work_gone())
        self.assertIsNone(result_gone())

    def test_the_reactor_gets_the_gil_back_sooner_while_the_pool_runs(self):
        before = sys.getswitchinterval()
        pool = DecodePool(ThreadReactor())
        pool.start()
        try:
            self.assertEqual(sys.getswitchinterval(), min(before, SWITCH_INTERVAL))
        finally:
            pool.stop()
        self.assertEqual(sys.getswitchinterval(), before)


@implementer(IReactorFromThreads)
class ThreadedMemoryReactor(MemoryReactorClock, ThreadReactor):
    """A fake reactor that takes calls from threads, as the real one does."""

    def __init__(self):
        MemoryReactorClock.__init__(self)
        ThreadReactor.__init__(self)


class ServiceTreeTests(SynchronousTestCase):
    def _tree(self, reactor):
        options = Options()
        options.parseOptions(["--kvConfigPath", self.mktemp(), "--listen", "tcp:0",
                              "-D", "tls.server.mode=disabled"])
        return makeService(options, reactor=reactor)

    def test_the_service_tree_owns_the_pool(self):
        before = sys.getswitchinterval()
        top = self._tree(ThreadedMemoryReactor())
        pool = top.factory.decode_pool
        self.assertIsInstance(pool, DecodePool)
        self.assertIn("decode-pool", {service.name for service in top})
        top.startService()
        self.assertEqual(sys.getswitchinterval(), min(before, SWITCH_INTERVAL))
        top.stopService()
        self.assertEqual(sys.getswitchinterval(), before)

    def test_a_reactor_without_threads_gets_everything_on_the_spot(self):
        top = self._tree(MemoryReactorClock())
        self.assertIsNone(top.factory.decode_pool)
        self.assertNotIn("decode-pool", {service.name for service in top})


# ------------------------------------------------------------------ the real server

@pytest.mark.network
def test_a_topic_line_bomb_does_not_block_the_reactor():
    """3 million topic lines in 160 KB took ~22 s on the reactor thread; now another
    connection's queries are answered while it decodes, and the bomb gets its SYSTEM_ERROR.

    Counted, not timed: the querier asks again and again until the bomb's answer has reached
    the bomber's socket (the server writes it before any answer it makes after it), and counts
    the answers it got before that. A reactor stuck in the decode answers no query in between
    but those it read before the bomb was whole (a few); one that goes on serving answers
    hundreds (one decode is thousands of route answers' work)."""
    from serverproc import RemotingClient, running_server
    from test_e2e_server import register

    bomb = topic_line_bomb(3_000_000)
    # without the topic bound (registerBrokerMaxTopics, on by default) nor the decode budget
    # (registerBrokerDecodeBudget) the whole body is read
    with running_server("-D", "registerBrokerMaxTopics=0",
                        "-D", "registerBrokerDecodeBudget=0") as server:
        querier = RemotingClient(server.port)
        bomber = RemotingClient(server.port)
        register(querier)
        bomber.send_frame(register_frame(bomb, 9, compressed=True)
                          + query_frame(10))     # same connection: answered after the bomb
        data_version = dict(BROKER, brokerName="broker-a", clusterName="DefaultCluster")
        answered = 0
        while not select.select([bomber.sock], [], [], 0)[0]:
            code, ext = ((322, data_version), (105, {"topic": "TopicA"}))[answered % 2]
            assert querier.call(code, ext).code == 0
            answered += 1
            assert answered < 1_000_000, "the bomb was never answered"
        assert answered >= 50, f"the reactor was blocked by the bomb: {answered} answers before it"
        refused = bomber.read_frame()
        assert (refused.opaque, refused.code) == (9, ResponseCode.SYSTEM_ERROR)
        assert "Failed to decode RegisterBrokerBody" in refused.remark
        assert bomber.read_frame().opaque == 10
        querier.close()
        bomber.close()


@pytest.mark.network
def test_the_default_topic_bound_refuses_the_bomb_on_its_declared_count():
    from serverproc import RemotingClient, running_server

    with running_server() as server:
        bomber = RemotingClient(server.port)
        bomber.send_frame(register_frame(topic_line_bomb(3_000_000), 9, compressed=True))
        refused = bomber.read_frame()
        assert (refused.opaque, refused.code) == (9, ResponseCode.SYSTEM_ERROR)
        assert refused.remark == ("[REFUSED] the registration body declares 3000000 topics, "
                                  "over registerBrokerMaxTopics=200000")
        bomber.close()


def test_processor_and_transport_overload_answers_share_one_remark(tmp_path):
    """Both SYSTEM_BUSY answers (the processor's, the transport's own) take the codec's
    OVERLOAD_REMARK; nothing else in the package writes the remark or the code's number."""
    import rocketpy
    from processorutil import make
    from rocketpy.transport.limits import overload_answer
    processor = make(tmp_path)
    for template in (overload_answer(), overload_answer(processor.overload_response)):
        answer = decode_frame(template.encode_for(5))
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
    written = [path for path in Path(rocketpy.__file__).parent.rglob("*.py")
               if "system busy, start flow control" in path.read_text()]
    assert [p.name for p in written] == ["codes.py"]
