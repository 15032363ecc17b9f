"""The writer thread (issue 12, part 2): KV and config writes leave the reactor thread, go out
in order, writes queued together are one write (group commit), and a PUT is answered only once
its write is done -- its connection waiting, everyone else served.

The pool's thread is a stand-in stepped by the test (``ManualThreads``), so every interleaving
is exact; ``test_real_thread`` runs the real one.
"""
import errno
import os
import threading
from pathlib import Path

from twisted.internet import reactor as real_reactor
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase, TestCase

from rocketpy.namesrv import Configuration, KVConfigManager, RouteInfoManager
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.pending import FileWrite
from rocketpy.remoting import RemotingCommand
from rocketpy.remoting.codes import ResponseCode
from rocketpy.service.fileio import AppendLog, read_text, write_file_java
from rocketpy.transport import RemotingServerFactory, TlsMode
from rocketpy.transport.offload import WritePool
from test_transport_offload import answers


class ManualThreads:
    """A thread pool whose work runs when the test says so (on the test's thread)."""

    def __init__(self):
        self.calls = []
        self.stopped = False

    def callInThreadWithCallback(self, on_result, func, *args, **kwargs):
        self.calls.append((on_result, func, args, kwargs))

    def run_next(self):
        on_result, func, args, kwargs = self.calls.pop(0)
        try:
            result = func(*args, **kwargs)
        except Exception as exc:
            on_result(False, exc)
        else:
            on_result(True, result)

    def start(self):
        pass

    def stop(self):
        self.stopped = True


class ImmediateReactor:
    def callFromThread(self, f, *args, **kwargs):
        f(*args, **kwargs)


def _job(key, log, state, fail=None):
    """A FileWrite recording what it prepared (a snapshot of ``state``) and wrote."""
    def write(snapshot):
        if fail:
            raise fail
        log.append((key, snapshot))
    return FileWrite(key, lambda: dict(state), write)


class WritePoolTests(SynchronousTestCase):
    def setUp(self):
        self.threads = ManualThreads()
        self.pool = WritePool(ImmediateReactor(), threads=self.threads)
        self.written = []

    def test_writes_queued_together_are_one_write_of_the_newest_state(self):
        state = {}
        done = []
        state["n"] = 1
        first = self.pool.submit(_job("kv", self.written, state))
        first.addCallback(done.append)
        for n in (2, 3, 4):                               # arrive while the first is written
            state["n"] = n
            self.pool.submit(_job("kv", self.written, state)).addCallback(done.append)
        self.pool.submit(_job("conf", self.written, {"c": 1})).addCallback(done.append)
        self.assertEqual(len(self.threads.calls), 1)     # one write under way
        self.threads.run_next()
        self.assertEqual(self.written, [("kv", {"n": 1})])
        self.assertEqual(len(done), 1)
        self.threads.run_next()                           # one write for the four waiting
        self.assertEqual(self.written[1:], [("kv", {"n": 4}), ("conf", {"c": 1})])
        self.assertEqual(len(done), 5)
        self.assertEqual((self.pool.jobs, self.pool.writes, self.pool.files_written), (5, 2, 3))
        self.assertEqual(self.pool.pending, 0)

    def test_a_failed_write_fails_its_jobs_only(self):
        results = []
        self.pool.submit(_job("x", self.written, {}))
        self.pool.submit(_job("kv", self.written, {}, fail=OSError(28, "No space left on device"))) \
            .addErrback(lambda f: results.append(f.value.strerror))
        self.pool.submit(_job("conf", self.written, {"c": 1})).addCallback(results.append)
        self.threads.run_next()
        self.threads.run_next()
        self.assertEqual(results, ["No space left on device", None])
        self.assertEqual(self.pool.failures, 1)

    def test_stop_writes_what_it_holds_first(self):
        self.pool.submit(_job("a", self.written, {}))
        self.pool.submit(_job("b", self.written, {}))
        stopped = self.pool.stop()
        self.assertNoResult(stopped)
        self.threads.run_next()
        self.assertNoResult(stopped)
        self.threads.run_next()
        self.successResultOf(stopped)
        self.assertTrue(self.threads.stopped)
        self.assertEqual([key for key, _ in self.written], ["a", "b"])
        late = self.pool.submit(_job("late", self.written, {}))   # after stop: here and now
        self.successResultOf(late)
        self.assertEqual(self.written[-1][0], "late")

    def test_a_job_submitted_by_an_answer_joins_the_next_write(self):
        state = {"n": 0}

        def resubmit(_):
            state["n"] += 1
            self.pool.submit(_job("kv", self.written, state))
        for _ in range(3):
            self.pool.submit(_job("kv", self.written, state)).addCallback(resubmit)
        self.threads.run_next()                 # the first
        self.threads.run_next()                 # the other two, whose answers submit two more
        self.assertEqual(len(self.threads.calls), 1)
        self.threads.run_next()
        self.assertEqual(self.pool.writes, 3)


def _processor(tmp):
    configuration = Configuration.from_properties(
        {"kvConfigPath": str(tmp / "kv.json")}, config_path=str(tmp / "namesrv.properties"),
        store=write_file_java)
    rim = RouteInfoManager(configuration.namesrv_config)
    kv = KVConfigManager(configuration.namesrv_config.kv_config_path, store=write_file_java,
                         log=AppendLog(configuration.namesrv_config.kv_config_path))
    return DefaultRequestProcessor(rim, kv, configuration=configuration)


def _put(opaque, key, value="v"):
    return RemotingCommand.request(100, {"namespace": "ns", "key": key, "value": value},
                                   opaque=opaque, version=479).encode()


def _get(opaque, key):
    return RemotingCommand.request(101, {"namespace": "ns", "key": key}, opaque=opaque,
                                   version=479).encode()


class WriterTransportTests(SynchronousTestCase):
    def setUp(self):
        self.tmp = Path(self.mktemp())
        self.tmp.mkdir()
        self.threads = ManualThreads()
        self.pool = WritePool(ImmediateReactor(), threads=self.threads)
        self.factory = RemotingServerFactory(_processor(self.tmp), clock=Clock(),
                                             tls_mode=TlsMode.DISABLED, write_pool=self.pool)

    def connect(self):
        proto = self.factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        return proto, transport

    def file(self):
        """What a restart would load: the file, then the log."""
        path = str(self.tmp / "kv.json")
        kv = KVConfigManager(path, store=write_file_java, log=AppendLog(path))
        kv.load_json(read_text(path))
        kv.replay_log()
        return kv.config_table["ns"]

    def test_put_answered_once_durable_in_order_others_served(self):
        proto, t = self.connect()
        other, other_t = self.connect()
        proto.dataReceived(_put(1, "a") + _get(2, "a") + _put(3, "b"))
        self.assertEqual(t.value(), b"")                  # nothing before the write is done
        self.assertFalse((self.tmp / "kv.json.log.1").exists())
        other.dataReceived(_get(7, "a"))                  # the reactor serves everyone else:
        [got] = answers(other_t)                          # not yet there (it may be refused)
        self.assertEqual(got.code, ResponseCode.QUERY_NOT_FOUND)
        self.threads.run_next()
        self.assertEqual(self.file(), {"a": "v"})
        put_a, get_a = answers(t)                         # PUT, then the GET behind it
        self.assertEqual([(put_a.opaque, put_a.code), (get_a.opaque, get_a.code)], [(1, 0), (2, 0)])
        t.clear()
        self.threads.run_next()
        [put_b] = answers(t)
        self.assertEqual((put_b.opaque, put_b.code), (3, 0))
        self.assertEqual(self.file(), {"a": "v", "b": "v"})

    def test_puts_of_many_connections_are_one_write(self):
        conns = [self.connect() for _ in range(6)]
        for i, (proto, _) in enumerate(conns):
            proto.dataReceived(_put(i, f"k{i}"))
        self.assertEqual(len(self.threads.calls), 1)
        self.threads.run_next()
        self.threads.run_next()
        self.assertEqual((self.pool.jobs, self.pool.writes), (6, 2))
        self.assertEqual(sorted(self.file()), [f"k{i}" for i in range(6)])
        for i, (_, t) in enumerate(conns):
            self.assertEqual([(a.opaque, a.code) for a in answers(t)], [(i, 0)])

    def test_failed_write_answers_system_error_and_changes_nothing(self):
        proto, t = self.connect()
        proto.dataReceived(_put(1, "a", "old"))
        self.threads.run_next()
        log = self.factory.processor.kv_config_manager.log
        real_append = log.append

        def disk_full(number, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        log.append = disk_full
        t.clear()
        proto.dataReceived(_put(2, "a", "new") + _put(3, "b") + _get(4, "a") + _get(5, "b"))
        self.threads.run_next()
        self.threads.run_next()
        failed, failed_too, got_a, got_b = answers(t)
        self.assertEqual((failed.code, failed_too.code), (ResponseCode.SYSTEM_ERROR,) * 2)
        self.assertTrue(failed.remark.startswith("the KV config could not be written to disk: "),
                        failed.remark)
        # Java keeps a change it failed to persist; rocketpy never changed anything
        self.assertEqual((got_a.code, got_a.ext_fields), (0, {"value": "old"}))
        self.assertEqual(got_b.code, ResponseCode.QUERY_NOT_FOUND)
        self.assertEqual(self.file(), {"a": "old"})
        log.append = real_append                          # the disk is back: so are the puts
        t.clear()
        proto.dataReceived(_put(6, "b"))
        self.threads.run_next()
        [ok] = answers(t)
        self.assertEqual(ok.code, 0)
        self.assertEqual(self.file(), {"a": "old", "b": "v"})

    def test_update_namesrv_config_waits_for_its_file(self):
        proto, t = self.connect()
        proto.dataReceived(RemotingCommand.request(318, None, b"orderMessageEnable=true\n",
                                                   opaque=5, version=479).encode())
        self.assertEqual(t.value(), b"")
        self.threads.run_next()
        [answer] = answers(t)
        self.assertEqual((answer.opaque, answer.code), (5, 0))
        self.assertIn("orderMessageEnable=true\n", (self.tmp / "namesrv.properties").read_text())

    def test_half_close_waits_for_the_answer_then_closes(self):
        proto, t = self.connect()
        proto.dataReceived(_put(1, "a") + _get(2, "a"))
        proto.readConnectionLost()                        # the peer: shutdown(SHUT_WR)
        self.assertFalse(t.disconnecting)                 # its PUT is not answered yet
        self.threads.run_next()
        self.assertEqual([(a.opaque, a.code) for a in answers(t)], [(1, 0), (2, 0)])
        self.assertTrue(t.disconnecting)

    def test_oversized_put_refused_naming_the_bound(self):
        proto, t = self.connect()
        proto.dataReceived(_put(1, "a", "v" * (64 * 1024 + 1)))
        [answer] = answers(t)
        self.assertEqual((answer.code, answer.remark), (
            ResponseCode.INVALID_PARAMETER,
            "Can not put KV config: the value is 65537 bytes, over kvConfigMaxValueBytes=65536"))
        self.assertEqual(self.threads.calls, [])


class RealThreadTests(TestCase):
    """The real writer thread and reactor: the write happens off the reactor thread."""

    def test_real_thread(self):
        pool = WritePool(real_reactor)
        pool.start()
        seen = []

        def write(snapshot):
            seen.append((snapshot, threading.current_thread().name))
        d = pool.submit(FileWrite("k", lambda: threading.current_thread().name, write))

        def check(_):
            self.assertEqual(seen, [(threading.main_thread().name, "PoolThread-rocketpy-writer-0")])
            return pool.stop()
        return d.addCallback(check)
