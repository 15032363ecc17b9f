"""The epoll reactor's lean dispatch (rocketpy.transport.dispatch): the same events reach the
same ``_doReadOrWrite`` without ``callWithLogger`` per event; what escapes it is logged and the
other events of the poll still run; any other reactor is left alone."""
import socket

from twisted.internet import epollreactor, selectreactor
from twisted.internet.abstract import FileDescriptor
from twisted.internet.testing import MemoryReactorClock
from twisted.python import log
from twisted.trial.unittest import SynchronousTestCase

from rocketpy.transport.dispatch import lean_dispatch


class _Reader(FileDescriptor):
    """One end of a socket pair, recording what it reads; ``lost`` raises from connectionLost
    when set (an application bug Twisted's own handler cannot absorb)."""

    def __init__(self, reactor, sock, fail=False):
        super().__init__(reactor)
        self.sock = sock
        self.read = []
        self.fail = fail
        self.lost = []

    def fileno(self):
        return self.sock.fileno()

    def doRead(self):
        data = self.sock.recv(4096)
        self.read.append(data)
        if self.fail:
            return ValueError("done")     # a reason: the reactor disconnects the selectable

    def connectionLost(self, reason):
        self.lost.append(reason)
        if self.fail:
            raise RuntimeError("a bug in connectionLost")

    def logPrefix(self):
        return "reader"


class LeanDispatchTests(SynchronousTestCase):
    def setUp(self):
        self.reactor = epollreactor.EPollReactor()
        self.addCleanup(self.reactor._poller.close)

    def reader(self, fail=False):
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        reader = _Reader(self.reactor, a, fail)
        self.reactor.addReader(reader)
        self.addCleanup(self.reactor.removeReader, reader)
        return reader, b

    def count_contexts(self):
        calls = []
        real = log.callWithLogger

        def counting(logger, func, *args, **kw):
            calls.append(logger)
            return real(logger, func, *args, **kw)
        self.patch(log, "callWithLogger", counting)
        return calls

    def test_each_event_reaches_do_read_without_a_log_context(self):
        calls = self.count_contexts()
        first, peer1 = self.reader()
        second, peer2 = self.reader()
        peer1.send(b"one")
        peer2.send(b"two")
        self.reactor.doIteration(0)           # Twisted's own doPoll: a context per event
        self.assertEqual((first.read, second.read), ([b"one"], [b"two"]))
        self.assertEqual(len(calls), 2)
        self.assertTrue(lean_dispatch(self.reactor))
        peer1.send(b"three")
        peer2.send(b"four")
        self.reactor.doIteration(0)
        self.assertEqual((first.read, second.read), ([b"one", b"three"], [b"two", b"four"]))
        self.assertEqual(len(calls), 2, "no callWithLogger for the lean dispatch's events")

    def test_what_escapes_is_logged_under_its_prefix_and_the_poll_goes_on(self):
        self.assertTrue(lean_dispatch(self.reactor))
        events = []
        log.addObserver(events.append)
        self.addCleanup(log.removeObserver, events.append)
        bad, peer1 = self.reader(fail=True)
        good, peer2 = self.reader()
        peer1.send(b"x")
        peer2.send(b"y")
        self.reactor.doIteration(0)
        self.assertEqual(good.read, [b"y"])
        self.assertEqual(len(bad.lost), 1)
        errors = self.flushLoggedErrors(RuntimeError)
        self.assertEqual(len(errors), 1)
        self.assertIn("reader", [e.get("system") for e in events if e.get("isError")])

    def test_an_interrupted_poll_is_no_event(self):
        self.assertTrue(lean_dispatch(self.reactor))

        class Interrupted:
            def poll(self, timeout, most):
                raise InterruptedError(4, "EINTR")
        self.patch(self.reactor, "_poller", Interrupted())
        self.reactor.doIteration(0)            # returns, as doPoll does on EINTR


class OtherReactorsTests(SynchronousTestCase):
    def test_a_memory_reactor_is_left_alone(self):
        reactor = MemoryReactorClock()
        self.assertFalse(lean_dispatch(reactor))
        self.assertNotIn("doIteration", vars(reactor))

    def test_a_select_reactor_is_left_alone(self):
        reactor = selectreactor.SelectReactor()
        before = reactor.doIteration
        self.assertFalse(lean_dispatch(reactor))
        self.assertEqual(reactor.doIteration, before)

    def test_an_epoll_reactor_whose_class_changed_its_poll_is_left_alone(self):
        class Own(epollreactor.EPollReactor):
            def doPoll(self, timeout):
                return epollreactor.EPollReactor.doPoll(self, timeout)
            doIteration = doPoll
        reactor = Own()
        self.addCleanup(reactor._poller.close)
        self.assertFalse(lean_dispatch(reactor))
        self.assertNotIn("doIteration", vars(reactor))


def test_the_server_and_every_worker_process_start_it():
    """The hook sits among the services every process builds (the writer's and a worker's
    share ``_process_services``)."""
    from twisted.application.service import MultiService

    from rocketpy.service import tap
    from rocketpy.service.tap import Options

    options = Options()
    options.parseOptions([])
    top = MultiService()
    tap._process_services(options, MemoryReactorClock(), top, factory=None)
    assert "lean-dispatch" in [s.name for s in top]
