"""Transport layer: the decode pool, where the CPU work of a request that would stall the
reactor runs (Java runs every request on an executor thread; rocketpy serves requests on the
reactor thread and moves only the costly decode of big REGISTER_BROKER bodies off it, see
:mod:`rocketpy.namesrv.pending`).

One named thread (``rocketpy-decode``) is enough: the work is Python code holding the GIL, so a
second thread would not decode faster, only take the GIL from the reactor more often. While it
runs, the reactor thread waits for the GIL each time it takes it back -- after ``select``, each
``recv``, each ``send`` -- up to ``sys.getswitchinterval()``. CPython's 5 ms made every route
query wait ~6 ms (worst 26 ms) while a bomb decoded; the pool lowers the interval to 1 ms
while it runs: ~1.4 ms per query, worst 6-13 ms (``bench/registration_bomb.py``). No
interval helps during one long C call: ``json.loads`` of a 16 MiB body holds the GIL from start
to end (docs/reliability.md has the numbers).

The queue is bounded (:data:`MAX_PENDING`): past it :meth:`DecodePool.submit` refuses, and the
protocol answers SYSTEM_BUSY "[OVERLOAD]...", Java's answer when its executor queue is full
(the broker registers again at its next 30 s round). Only the work runs on the thread; the
route tables and caches are touched by ``finish`` on the reactor thread.
"""
import sys
import threading

from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

__all__ = ["DecodePool", "MAX_PENDING", "THREAD_NAME", "SWITCH_INTERVAL"]

#: Decodes accepted at once (running or queued; a connection has at most one). A 10,000-topic
#: body decodes in ~20 ms, a hostile one (64 MiB inflated) in a few seconds: 16 genuine changed
#: registrations wait well under a second, while a flood of bombs is refused instead of
#: queueing for minutes.
MAX_PENDING = 16
THREAD_NAME = "rocketpy-decode"
#: Seconds a thread waiting for the GIL waits before it asks for it (CPython: 5 ms).
SWITCH_INTERVAL = 0.001


class _Threads(ThreadPool):
    """Daemon threads, made when work first comes: a decode holds nothing worth waiting for
    at exit, and a service tree built but never stopped (tests) must not keep the process."""

    def threadFactory(self, *args, **kwargs):
        thread = threading.Thread(*args, **kwargs)
        thread.daemon = True
        return thread


class DecodePool:
    """A bounded queue of pure work for one worker thread; results come back on the reactor.

    :param reactor: an ``IReactorFromThreads`` (the reactor).
    :param max_pending: work accepted at once (running or waiting).
    :param switch_interval: ``sys.setswitchinterval`` while the pool runs (when lower than the
        interval in force), restored when it stops.
    """

    def __init__(self, reactor, max_pending=MAX_PENDING, threads=1, name=THREAD_NAME,
                 switch_interval=SWITCH_INTERVAL):
        self._reactor = reactor
        self._switch_interval = switch_interval
        self._saved_interval = None
        self._threads = _Threads(0, threads, name)
        self.max_pending = max_pending
        #: work accepted and not yet finished
        self.pending = 0
        #: totals since start
        self.done = 0
        self.refused = 0

    def start(self):
        self._saved_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._saved_interval, self._switch_interval))
        self._threads.start()

    def stop(self):
        """Stop the thread once the accepted work is done (its answers go nowhere then: the
        server has closed its connections first)."""
        self._threads.stop()
        if self._saved_interval is not None:
            sys.setswitchinterval(self._saved_interval)
            self._saved_interval = None

    def submit(self, work):
        """A Deferred of ``work()`` run on the pool's thread, firing later on the reactor
        thread; None when ``max_pending`` pieces of work are already accepted."""
        if self.pending >= self.max_pending:
            self.refused += 1
            return None
        self.pending += 1
        d = deferToThreadPool(self._reactor, self._threads, work)
        d.addBoth(self._finished)
        return d

    def _finished(self, result):
        self.pending -= 1
        self.done += 1
        return result
