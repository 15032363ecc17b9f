"""Services one by one, with fakes and task.Clock: BatchUnregistrationService,
BrokerHousekeepingService, ScanNotActiveBrokerService, KVConfigService, RemotingServerService."""
import json
import os
import pathlib

from twisted.internet import defer, task
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from processorutil import make, register
from rocketpy.namesrv import Channel, UnRegisterBrokerRequest
from rocketpy.namesrv.kvconfig import KVConfigManager
from rocketpy.namesrv.pending import write_now
from rocketpy.service.fileio import AppendLog, write_file_java
from rocketpy.service.housekeeping import BrokerHousekeepingService
from rocketpy.service.kvconfig import MAX_LOGGED_ENTRIES, KVConfigService, kv_config_log_lines
from rocketpy.service.liveness import ScanNotActiveBrokerService
from rocketpy.service.server import RemotingServerService
from rocketpy.service.startup import StartError
from rocketpy.service import unregistration
from rocketpy.service.unregistration import TOPICS_PER_TURN, BatchUnregistrationService
from rocketpy.transport import IChannelEventListener, RemotingServerFactory, TlsMode


class BatchTests(SynchronousTestCase):
    def setUp(self):
        self.clock = task.Clock()
        self.batches = []
        self.service = BatchUnregistrationService(self.batches.append, self.clock, capacity=3)
        self.service.startService()

    def test_everything_submitted_in_one_turn_is_one_batch(self):
        for r in ("a", "b", "c"):
            self.assertTrue(self.service.submit(r))
        self.assertEqual(self.batches, [])
        self.clock.advance(0)
        self.assertEqual(self.batches, [["a", "b", "c"]])
        self.service.submit("d")
        self.clock.advance(0)
        self.assertEqual(self.batches, [["a", "b", "c"], ["d"]])

    def test_full_queue_refuses(self):
        for r in ("a", "b", "c"):
            self.assertTrue(self.service.submit(r))
        self.assertFalse(self.service.submit("d"))
        self.clock.advance(0)
        self.assertTrue(self.service.submit("d"))

    def test_duplicates_in_a_batch_are_applied_once(self):
        for r in ("a", "a", "b"):
            self.service.submit(r)
        self.clock.advance(0)
        self.assertEqual(self.batches, [["a", "b"]])

    def test_apply_failure_is_logged_and_service_goes_on(self):
        def boom(batch):
            raise RuntimeError("x")
        service = BatchUnregistrationService(boom, self.clock)
        service.startService()
        service.submit("a")
        self.clock.advance(0)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertTrue(service.submit("b"))

    def test_queued_before_start_is_applied_on_start(self):
        service = BatchUnregistrationService(self.batches.append, self.clock)
        service.submit("early")
        service.startService()
        self.clock.advance(0)
        self.assertEqual(self.batches, [["early"]])

    def test_stop_applies_what_is_left(self):
        self.service.submit("a")
        self.service.stopService()
        self.assertEqual(self.batches, [["a"]])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_immediate_mode_applies_at_once(self):
        service = BatchUnregistrationService(self.batches.append, self.clock, immediate=True)
        service.startService()
        self.assertTrue(service.submit("a"))
        self.assertEqual(self.batches, [["a"]])


class TurnClock(task.Clock):
    """A clock whose :meth:`turn` runs the calls due now and not those they schedule, as one
    iteration of a reactor does (``advance(0)`` runs both)."""

    def turn(self):
        due = [call for call in self.calls if call.getTime() <= self.seconds()]
        for call in due:
            self.calls.remove(call)
            call.called = 1
            call.func(*call.args, **call.kw)


class BatchSliceTests(SynchronousTestCase):
    """A batch is cut where its brokers' topics pass TOPICS_PER_TURN: the rest waits a turn."""

    def setUp(self):
        self.clock = TurnClock()
        self.batches = []
        self.weights = {}
        self.service = BatchUnregistrationService(self.batches.append, self.clock,
                                                  weight=self.weights.__getitem__)
        self.service.startService()

    def submit(self, **weights):
        self.weights.update(weights)
        for name in weights:
            self.service.submit(name)

    def test_a_batch_is_cut_at_its_topic_budget(self):
        self.submit(a=TOPICS_PER_TURN // 2, b=TOPICS_PER_TURN // 3, c=TOPICS_PER_TURN // 4, d=1)
        self.clock.turn()
        self.assertEqual(self.batches, [["a", "b"]])
        self.clock.turn()
        self.assertEqual(self.batches, [["a", "b"], ["c", "d"]])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_broker_over_the_budget_goes_alone(self):
        self.submit(a=3 * TOPICS_PER_TURN, b=1, c=TOPICS_PER_TURN)
        for _ in range(3):
            self.clock.turn()
        self.assertEqual(self.batches, [["a"], ["b"], ["c"]])

    def test_a_request_that_cannot_be_weighed_is_logged_and_applied(self):
        """A failing weight (a bug) must not leave its request at the head of the queue,
        stalling every unregistration after it."""
        self.weights.update(b=1)
        for name in ("x", "b"):          # "x" has no weight: __getitem__ raises KeyError
            self.service.submit(name)
        self.clock.turn()
        self.assertEqual(self.batches, [["x", "b"]])
        self.assertEqual(len(self.flushLoggedErrors(KeyError)), 1)

    def test_an_apply_that_submits_leaves_one_drain_call(self):
        def apply(batch):
            self.batches.append(batch)
            if batch == ["a"]:
                self.weights.update(c=1)
                service.submit("c")
        service = BatchUnregistrationService(apply, self.clock, weight=self.weights.__getitem__)
        service.startService()
        self.weights.update(a=TOPICS_PER_TURN, b=TOPICS_PER_TURN)
        service.submit("a")
        service.submit("b")
        self.clock.turn()
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        service.stopService()
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_stop_applies_every_slice(self):
        self.submit(a=TOPICS_PER_TURN, b=TOPICS_PER_TURN, c=TOPICS_PER_TURN)
        self.service.stopService()
        self.assertEqual(self.batches, [["a"], ["b"], ["c"]])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_departure_of_big_brokers_is_one_turn_each(self):
        """Against the route state, with a budget of 100 topics: four groups of 75 topics leave
        in one batch; each turn removes one group's topics, and every topic is gone at the end."""
        self.patch(unregistration, "TOPICS_PER_TURN", 100)
        path = pathlib.Path(self.mktemp())
        path.mkdir(parents=True)
        proc = make(path)
        rim = proc.route_info_manager
        n = 75
        names = [f"broker-{i}" for i in range(4)]
        for i, name in enumerate(names):
            topics = [f"{name}-T{j}" for j in range(n)]
            register(proc, name=name, addr=f"127.0.0.1:{10911 + i}", topics=topics)
        applied = []

        def unregister(batch):
            applied.append([r.broker_name for r in batch])
            rim.unregister_brokers(batch)
        service = BatchUnregistrationService(
            unregister, self.clock, weight=lambda r: rim.topic_count_of_broker(r.broker_name))
        service.startService()
        for i, name in enumerate(names):
            service.submit(UnRegisterBrokerRequest("C", f"127.0.0.1:{10911 + i}", name, 0))
        left = []
        while self.clock.getDelayedCalls():
            self.clock.turn()
            left.append(len(rim.topic_queue_table))
        self.assertEqual(applied, [[name] for name in names])
        self.assertEqual(left, [3 * n, 2 * n, n, 0])


class HousekeepingTests(SynchronousTestCase):
    def setUp(self):
        self.submitted = []
        self.destroyed = []

        def on_destroy(channel):
            self.destroyed.append(channel)
            return [("unreg", channel.channel_id)] if channel.channel_id == 1 else []

        self.service = BrokerHousekeepingService(on_destroy, lambda r: self.submitted.append(r) or True)

    def test_interface(self):
        verifyObject(IChannelEventListener, self.service)

    def test_close_exception_idle_unregister(self):
        broker, client = Channel(1, "a:1"), Channel(2, "b:2")
        for event in ("on_channel_close", "on_channel_exception", "on_channel_idle"):
            getattr(self.service, event)("a:1", broker)
            getattr(self.service, event)("b:2", client)
        self.assertEqual(self.submitted, [("unreg", 1)] * 3)
        self.assertEqual(len(self.destroyed), 6)

    def test_connect_and_active_do_nothing(self):
        self.service.on_channel_connect("a:1", Channel(1, "a:1"))
        self.service.on_channel_active("a:1", Channel(1, "a:1"))
        self.assertEqual(self.destroyed, [])


class LivenessTests(SynchronousTestCase):
    def test_scans_every_interval_and_expires(self):
        clock = task.Clock()
        clock.advance(1000)
        scans, closed, submitted = [], [], []

        def scan(now_ms):
            scans.append(now_ms)
            return [("req", 7)] if len(scans) == 2 else []

        service = ScanNotActiveBrokerService(scan, lambda cid, why: closed.append(cid),
                                             submitted.append, clock, interval_ms=5000)
        service.startService()
        self.assertEqual(scans, [])  # Java: first run after the initial delay
        clock.advance(5)
        clock.advance(5)
        self.assertEqual(scans, [1_005_000, 1_010_000])
        self.assertEqual(closed, [7])
        self.assertEqual(submitted, ["req"])
        service.stopService()
        clock.advance(100)
        self.assertEqual(len(scans), 2)

    def test_scan_failure_is_logged_and_loop_goes_on(self):
        clock = task.Clock()
        calls = []

        def scan(now_ms):
            calls.append(now_ms)
            raise RuntimeError("bug")

        service = ScanNotActiveBrokerService(scan, None, None, clock, interval_ms=1000)
        service.startService()
        clock.advance(1)
        clock.advance(1)
        self.assertEqual(len(calls), 2)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 2)


class KVConfigServiceTests(SynchronousTestCase):
    def test_log_lines_as_java(self):
        lines = kv_config_log_lines({"ORDER_TOPIC_CONFIG": {"T": "b:4"}})
        self.assertEqual(lines, ["--------------------------------------------------------",
                                 "configTable SIZE: 1",
                                 "configTable NS: ORDER_TOPIC_CONFIG Key: T Value: b:4"])

    def test_log_lines_stop_at_the_limit_and_count_what_is_left_out(self):
        table = {"NS1": {f"k{i}": "v" for i in range(150)}, "NS2": {f"k{i}": "v" for i in range(50)}}
        lines = kv_config_log_lines(table, 1234)
        self.assertEqual(len(lines), 2 + 100 + 1)
        self.assertEqual(lines[1], "configTable SIZE: 2")
        self.assertEqual(lines[101], "configTable NS: NS1 Key: k99 Value: v")
        self.assertEqual(lines[-1], "configTable: 200 entries, 1234 bytes in all; 100 more not logged")
        self.assertEqual(len(kv_config_log_lines(table, limit=160)), 2 + 160 + 1)
        self.assertEqual(kv_config_log_lines(table, limit=160)[-2],
                         "configTable NS: NS2 Key: k9 Value: v")

    def test_the_service_logs_a_bounded_number_of_lines_of_a_huge_table(self):
        kv = KVConfigManager(self.mktemp())            # in memory
        for i in range(5000):
            kv.put_kv_config("NS", f"k{i}", "v")
        service = KVConfigService(kv, task.Clock(), load=False)
        logged = []
        service.log = type("Log", (), {"info": lambda _, fmt, line: logged.append(line)})()
        service.run_once()
        self.assertEqual(len(logged), 2 + MAX_LOGGED_ENTRIES + 1)
        self.assertEqual(logged[-1], f"configTable: 5000 entries, {kv.total_bytes} bytes in all; "
                                     f"{5000 - MAX_LOGGED_ENTRIES} more not logged")

    def test_logs_after_a_minute_then_every_ten_and_flushes_on_stop(self):
        path = self.mktemp()
        kv = KVConfigManager(path, store=write_file_java, log=AppendLog(path))
        kv.config_table = {"NS": {"k": "v"}}
        clock = task.Clock()
        logged = []
        service = KVConfigService(kv, clock, load=False)
        service.run_once = lambda: logged.append(clock.seconds())
        service.startService()
        clock.advance(59)
        self.assertEqual(logged, [])
        clock.advance(1)
        clock.advance(600)
        clock.advance(600)
        self.assertEqual(logged, [60, 660, 1260])
        service.stopService()
        with open(path) as f:
            self.assertEqual(json.load(f), {"configTable": {"NS": {"k": "v"}}})
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_the_last_write_goes_through_the_writer(self):
        path = self.mktemp()
        kv = KVConfigManager(path, store=write_file_java, log=AppendLog(path))
        put = kv.put_kv_config("NS", "k", "v")         # not written yet when the stop comes
        submitted = []
        written = defer.Deferred()
        service = KVConfigService(kv, task.Clock(), load=False,
                                  write=lambda job: submitted.append(job) or written)
        service.startService()
        stopped = service.stopService()
        self.assertNoResult(stopped)                   # twistd waits for the writer
        self.assertEqual([job.key for job in submitted], [path + ".log"])
        submitted[0]()                                 # its append, then the whole file
        written.callback(None)
        self.successResultOf(stopped)
        self.assertTrue(put.settle())
        with open(path) as f:
            self.assertEqual(json.load(f), {"configTable": {"NS": {"k": "v"}}})
        self.assertEqual(AppendLog(path).segments(), [])   # the file holds everything

    def test_compactions_run_on_the_compactor_and_the_stop_waits_for_it(self):
        path = self.mktemp()
        kv = KVConfigManager(path, store=write_file_java, log=AppendLog(path))
        compactor = _StepPool()
        service = KVConfigService(kv, task.Clock(), load=False, compactor=compactor)
        service.startService()
        self.assertTrue(compactor.started)
        value = "v" * 1000
        for i in range(80):                            # 80 KB of log: a compaction is due
            self.assertTrue(write_now(kv.put_kv_config("NS", f"k{i}", value)))
        self.assertEqual(len(compactor.jobs), 1)       # handed over, not run by the appends
        self.assertFalse(os.path.exists(path))
        self.assertEqual(AppendLog(path).segments(), [1, 2])
        stopped = service.stopService()
        self.assertNoResult(stopped)                   # waits for the compaction under way
        compactor.run_all()
        self.successResultOf(stopped)
        with open(path) as f:
            self.assertEqual(len(json.load(f)["configTable"]["NS"]), 80)
        self.assertEqual(AppendLog(path).segments(), [])
        self.assertEqual((kv.compactions, kv.compactions_failed), (2, 0))

    def test_empty_table_leaves_no_file(self):
        import os
        path = self.mktemp()
        service = KVConfigService(KVConfigManager(path, store=write_file_java, log=AppendLog(path)),
                                  task.Clock(), load=False)
        service.startService()
        service.stopService()
        self.assertFalse(os.path.exists(path))


class _StepPool:
    """A compactor whose jobs run when the test says (a WritePool's interface)."""

    def __init__(self):
        self.jobs = []
        self.started = False
        self._stopped = defer.Deferred()

    def start(self):
        self.started = True

    def submit(self, job):
        d = defer.Deferred()
        self.jobs.append((job, d))
        return d

    def stop(self):
        if not self.jobs:
            return defer.succeed(None)
        return self._stopped

    def run_all(self):
        while self.jobs:
            job, d = self.jobs.pop(0)
            try:
                job()
            except OSError as exc:
                d.errback(exc)
            else:
                d.callback(None)
        self._stopped.callback(None)


class ServerServiceTests(SynchronousTestCase):
    def test_listens_and_stops(self):
        reactor = MemoryReactorClock()
        factory = RemotingServerFactory(None, None, clock=reactor, tls_mode=TlsMode.DISABLED)
        service = RemotingServerService("tcp:9876:interface=127.0.0.1", factory, reactor)
        service.startService()
        [(port, f, backlog, interface)] = reactor.tcpServers
        self.assertEqual((port, interface), (9876, "127.0.0.1"))
        self.assertIs(f, factory)
        self.assertTrue(service.address.endswith(":9876"))  # MemoryReactor reports 0.0.0.0
        d = service.stopService()
        self.successResultOf(d)

    def test_listen_failure_raises_from_start(self):
        from twisted.internet.error import CannotListenError

        class Refusing:
            def listen(self, factory):
                return defer.fail(CannotListenError("127.0.0.1", 9876, OSError("in use")))

        factory = RemotingServerFactory(None, None, clock=task.Clock(), tls_mode=TlsMode.DISABLED)
        service = RemotingServerService(Refusing(), factory, task.Clock(), description="tcp:9876")
        refused = self.assertRaises(StartError, service.startService)   # one line, exit 1
        self.assertEqual(str(refused), "rocketnamesrv: cannot listen on tcp:9876: Couldn't "
                                       "listen on 127.0.0.1:9876: in use.")
        self.assertFalse(service.running)


class InterfaceTests(SynchronousTestCase):
    """verifyObject for every @implementer class and every service of the tree."""

    def test_every_component_provides_its_interface(self):
        from twisted.application.service import IService
        from twisted.internet.interfaces import IProtocolFactory

        from rocketpy.namesrv import KVConfigManager, RouteInfoManager
        from rocketpy.namesrv.processor import DefaultRequestProcessor
        from rocketpy.service.tap import Options, makeService
        from rocketpy.transport import IRequestProcessor

        rim = RouteInfoManager()
        processor = DefaultRequestProcessor(rim, KVConfigManager(self.mktemp()))
        verifyObject(IRequestProcessor, processor, tentative=True)
        options = Options()
        options.parseOptions(["--kvConfigPath", self.mktemp(), "--listen", "tcp:0",
                              "-D", "tls.server.mode=disabled"])
        top = makeService(options, reactor=MemoryReactorClock())
        verifyObject(IProtocolFactory, top.factory)
        verifyObject(IChannelEventListener, top.factory.listener)
        verifyObject(IRequestProcessor, top.factory.processor, tentative=True)
        names = set()
        for service in top:
            verifyObject(IService, service)
            names.add(service.name)
        self.assertEqual(names, {"batch-unregistration", "kv-config", "scan-not-active-broker",
                                 "route-memory", "remoting-server", "graceful-exit",
                                 "oneway-notifier", "log-level", "boot-line", "allocator-arena",
                                 "lean-dispatch"})


class AllocatorOptionTests(SynchronousTestCase):
    """The process-wide allocator tuning is the operator's explicit choice (--tune-allocator),
    applied when the service starts, never while the tree is built."""

    def _service(self, *flags):
        from rocketpy.service import tap
        calls = []
        self.patch(tap, "tune_allocator", lambda limit: calls.append(limit))
        options = tap.Options()
        options.parseOptions(["--kvConfigPath", self.mktemp(), "--listen", "tcp:0",
                              "-D", "tls.server.mode=disabled", *flags])
        return tap.makeService(options, reactor=MemoryReactorClock()), calls

    def test_one_arena_when_the_server_starts_before_its_threads(self):
        """malloc_trim(0) cannot return a thread arena's free top: unless --no-malloc-trim,
        every thread allocates from the main arena, set when the server starts and before
        the services that start threads (the KV compactor's, the writer's, the decode
        pool's)."""
        from rocketpy.service import tap
        calls = []
        self.patch(tap, "one_arena", lambda: calls.append("arena"))
        top, _ = self._service()
        self.assertEqual(calls, [])                      # building the tree changes nothing
        names = [service.name for service in top]
        self.assertLess(names.index("allocator-arena"), names.index("kv-config"))
        self.assertLess(names.index("allocator-arena"), names.index("batch-unregistration"))
        top.getServiceNamed("allocator-arena").startService()
        self.assertEqual(calls, ["arena"])
        top, _ = self._service("--no-malloc-trim")
        self.assertNotIn("allocator-arena", {service.name for service in top})

    def test_not_tuned_unless_asked(self):
        top, calls = self._service()
        self.assertNotIn("allocator", {service.name for service in top})
        self.assertEqual(calls, [])

    def test_tuned_when_the_server_starts(self):
        top, calls = self._service("--tune-allocator", "-D",
                                   "com.rocketmq.remoting.frameMaxLength=1048576")
        self.assertEqual(calls, [])                      # building the tree changes nothing
        top.getServiceNamed("allocator").startService()
        self.assertEqual(calls, [1048576])
