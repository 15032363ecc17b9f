"""Transport layer: the pools where the work of a :class:`~rocketpy.namesrv.pending.Pending`
runs, one per lane (Java runs every request on an executor thread; rocketpy serves on the
reactor thread and moves off it only what would stall it):

* :class:`DecodePool` (lane ``cpu``): the costly decode of big REGISTER_BROKER bodies;
* :class:`WritePool` (lane ``disk``): the KV and config file writes, with their ``fsync``.

Decode pool: one named thread (``rocketpy-decode``), since the work holds the GIL and a second
thread would only take it from the reactor more often. The reactor waits up to
``sys.getswitchinterval()`` for the GIL after each ``select``/``recv``/``send``; CPython's 5 ms
made route queries wait ~6 ms (worst 26 ms) during a bomb, so the pool lowers it to 1 ms while
it runs (~1.4 ms, worst 6-13 ms: ``bench/registration_bomb.py``). One long C call (``json.loads``
of 16 MiB) holds the GIL throughout (docs/reliability.md). The queue is bounded
(:data:`MAX_PENDING`, and :data:`MAX_PENDING_PER_PEER` per peer host): past it the protocol
answers SYSTEM_BUSY, Java's answer to a full executor queue (the broker registers again in 30 s).
The thread takes one job at a time from per-peer queues served in turn, so a peer sending bombs
(each bounded by its decode budget, ``rocketpy.remoting.budget``) delays another peer's
registration by at most one of its jobs, never by its whole queue (issue 20: 16 bombs of 87 KB
had every registration answered SYSTEM_BUSY for minutes). Only ``work`` runs on the thread;
tables and caches are touched by ``finish`` on the reactor. :meth:`DecodePool.stop` abandons the
queued work, cancels the running one (its budget's flag, seen at the next chunk) and waits for
it at most :data:`STOP_WAIT` seconds. Work offered while the pool is not running (before its
start, after its stop) is refused at once like work past the bound: SYSTEM_BUSY, which is what
Java's remoting answers when its executor is shut down (``RejectedExecutionException``); a job
kept for a thread that is not there would never be answered, and its connection, no longer
read, would wait for its idle timeout.

Writer: Java's ``KVConfigManager.persist`` rewrites ``kvConfig.json`` on the request thread; on
the reactor, two connections putting 64 KiB values made every other client wait 150-460 ms
(issue 12). One named thread (``rocketpy-writer``) runs every file write in order, and each
PUT/DELETE/UPDATE is answered once its write is durable (``fsync`` of file and directory), so
no acknowledged change is lost to a ``kill -9``. Writes that wait together are one write (group
commit: the newest job of each file, a snapshot taken on the reactor). A connection whose answer
waits is not read, so the queue holds at most one job per connection."""
import sys
import threading
from collections import deque
from queue import SimpleQueue

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from . import logs

__all__ = ["DecodePool", "WritePool", "MAX_PENDING", "MAX_PENDING_PER_PEER", "STOP_WAIT",
           "THREAD_NAME", "WRITER_THREAD_NAME", "SWITCH_INTERVAL"]

#: Decodes accepted at once (running or queued; a connection has at most one). A 10,000-topic
#: body decodes in ~20 ms, a hostile one (64 MiB inflated) in a few seconds: 16 genuine changed
#: registrations wait well under a second, while a flood of bombs is refused instead of
#: queueing for minutes.
MAX_PENDING = 16
#: Decodes accepted at once from one peer host: a broker has one registration in flight; its
#: master and slaves on one host a few.
MAX_PENDING_PER_PEER = 4
#: Seconds :meth:`DecodePool.stop` waits for the running decode once cancelled (a budget check
#: comes every 64 KiB of inflation or JSON part; the longest C call, a 16 MiB plain body's
#: ``json.loads``, takes about a second).
STOP_WAIT = 2.0
THREAD_NAME = "rocketpy-decode"
WRITER_THREAD_NAME = "rocketpy-writer"
#: Seconds a thread waiting for the GIL waits before it asks for it (CPython: 5 ms).
SWITCH_INTERVAL = 0.001


class _Threads(ThreadPool):
    """Daemon threads, made when work first comes: a decode holds nothing worth waiting for
    at exit, and a service tree built but never stopped (tests) must not keep the process."""

    def threadFactory(self, *args, **kwargs):
        thread = threading.Thread(*args, **kwargs)
        thread.daemon = True
        return thread


class _Job:
    """One piece of work of a peer, with its cancel hook and the Deferred of its result."""

    __slots__ = ("work", "peer", "cancel", "deferred")

    def __init__(self, work, peer, cancel):
        self.work = work
        self.peer = peer
        self.cancel = cancel
        self.deferred = Deferred()


class DecodePool:
    """Bounded per-peer queues (``max_pending`` jobs running or waiting, ``max_per_peer`` of one
    peer) of pure work for one worker thread, served round-robin by peer; results come back on
    the reactor. ``switch_interval`` is ``sys.setswitchinterval`` while the pool runs (when lower
    than the one in force), restored when it stops."""

    log = Logger(observer=logs.observer)

    def __init__(self, reactor, max_pending=MAX_PENDING, name=THREAD_NAME,
                 switch_interval=SWITCH_INTERVAL, max_per_peer=MAX_PENDING_PER_PEER,
                 stop_wait=STOP_WAIT):
        self._reactor = reactor
        self._switch_interval = switch_interval
        self._saved_interval = None
        self._name = name
        self._stop_wait = stop_wait
        self._jobs = None           # the worker's inbox (jobs, then None to stop)
        self._thread = None
        self._queues = {}           # peer -> deque of its waiting jobs, peers in arrival order
        self._running = None
        self._served = {}           # peer with work accepted -> when its last job was handed over
        self._turns = 0
        self.max_pending = max_pending
        self.max_per_peer = max_per_peer
        #: False before :meth:`start` and from :meth:`stop` on: every submit is refused
        self.accepting = False
        #: work accepted and not yet finished, in all and by peer
        self.pending = 0
        self.pending_by_peer = {}
        #: totals since start
        self.done = 0
        self.refused = 0
        self.abandoned = 0

    def start(self):
        self._saved_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._saved_interval, self._switch_interval))
        self._jobs = SimpleQueue()
        self._thread = threading.Thread(target=self._worker, name=self._name, daemon=True)
        self._thread.start()
        self.accepting = True
        self._next()

    def stop(self):
        """Abandon the queued work (its answers would go nowhere: the server has closed its
        connections first), cancel the running one and wait for it at most ``stop_wait``."""
        self.accepting = False
        abandoned = sum(map(len, self._queues.values()))
        self._queues.clear()
        self.abandoned += abandoned
        running = self._running
        if running is not None and running.cancel is not None:
            running.cancel()
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(self._stop_wait)
            if abandoned or running is not None:
                self.log.info("decode pool stopped: {abandoned} queued decodes abandoned, "
                              "{running} cancelled{left}", abandoned=abandoned,
                              running=int(running is not None),
                              left=", left running" if self._thread.is_alive() else "")
            self._thread = None
        if self._saved_interval is not None:
            sys.setswitchinterval(self._saved_interval)
            self._saved_interval = None

    def submit(self, work, peer=None, cancel=None):
        """A Deferred of ``work()`` run on the pool's thread, firing later on the reactor
        thread; None when the pool is not running (:attr:`accepting`), or when ``max_pending``
        pieces of work, or ``max_per_peer`` of ``peer``'s, are already accepted. ``cancel()``, if
        given, makes ``work`` stop early (shutdown)."""
        held = self.pending_by_peer.get(peer, 0)
        if (not self.accepting or self.pending >= self.max_pending
                or (self.max_per_peer and held >= self.max_per_peer)):
            self.refused += 1
            return None
        self.pending += 1
        self.pending_by_peer[peer] = held + 1
        job = _Job(work, peer, cancel)
        queue = self._queues.get(peer)
        if queue is None:
            queue = self._queues[peer] = deque()
        queue.append(job)
        self._next()
        return job.deferred

    def _next(self):
        """Hand the next job to the thread, if it is idle: of the waiting peer served longest
        ago (never served first, then in order of arrival): O(peers), at most ``max_pending``."""
        if self._running is not None or self._thread is None or not self._queues:
            return
        served = self._served
        peer = min(self._queues, key=lambda p: served.get(p, -1))
        queue = self._queues[peer]
        job = queue.popleft()
        if not queue:
            del self._queues[peer]
        self._turns += 1
        served[peer] = self._turns
        self._running = job
        self._jobs.put(job)

    def _worker(self):
        jobs, call = self._jobs, self._reactor.callFromThread
        while True:
            job = jobs.get()
            if job is None:
                return
            try:
                result = job.work()
            except BaseException:
                result = Failure()
            # handed over in a box the reactor empties: this frame would otherwise hold the last
            # job and its result (a decoded table, a 1 M-topic list) until the next job comes
            box = [job, result]
            job = result = None
            call(self._finished, box)

    def _finished(self, box):
        job, result = box
        box.clear()
        self._running = None
        self.pending -= 1
        self.done += 1
        held = self.pending_by_peer.pop(job.peer) - 1
        if held:
            self.pending_by_peer[job.peer] = held
        else:
            self._served.pop(job.peer, None)
        self._next()
        if isinstance(result, Failure):
            job.deferred.errback(result)
        else:
            job.deferred.callback(result)


def _write_all(prepared):
    """On the writer thread: each ``(job, snapshot)`` written; ``{key: exception}`` of those
    that failed."""
    failed = {}
    for job, snapshot in prepared:
        try:
            job.write(snapshot)
        except Exception as exc:  # handed back: answered on the reactor, not lost in a thread
            failed[job.key] = exc
    return failed


class WritePool:
    """The writer thread: :class:`~rocketpy.namesrv.pending.FileWrite` jobs, in order, the jobs of
    one file queued together written once. ``threads`` is the pool (tests step a fake one)."""

    log = Logger(observer=logs.observer)

    def __init__(self, reactor, name=WRITER_THREAD_NAME, threads=None):
        self._reactor = reactor
        self._threads = threads if threads is not None else _Threads(0, 1, name)
        self._queue = []           # [(job, Deferred)] waiting for the next write
        self._busy = False
        self._in_flight = 0        # jobs the write under way answers
        self._stopping = []        # Deferreds of stop(), fired once everything is written
        self._stopped = False
        #: totals since start: jobs accepted, files written, writes (batches), failed files
        self.jobs = 0
        self.files_written = 0
        self.writes = 0
        self.failures = 0

    @property
    def pending(self):
        """Jobs accepted and not yet answered."""
        return len(self._queue) + self._in_flight

    def start(self):
        self._threads.start()

    def stop(self):
        """A Deferred that fires once every accepted job is written and the thread is gone."""
        d = Deferred()
        self._stopping.append(d)
        if not self._busy:
            self._next()
        return d

    def submit(self, job, peer=None, cancel=None):
        """A Deferred that fires (on the reactor thread) once ``job`` -- or a later job of the
        same file -- has been written, or fails with the write's exception. ``peer`` and
        ``cancel`` are the decode pool's; a write is never cancelled (it answers once durable)."""
        self.jobs += 1
        if self._stopped:  # late (shutdown): written here and now
            try:
                job()
            except Exception:
                self.failures += 1
                return fail()
            self.files_written += 1
            return succeed(None)
        d = Deferred()
        self._queue.append((job, d))
        if not self._busy:
            self._next()
        return d

    def _next(self):
        batch, self._queue = self._queue, []
        if not batch:
            if self._stopping:
                self._stopped = True
                self._threads.stop()
                self.log.info("writer stopped: {jobs} writes asked for, {writes} done "
                              "({files} files written, {failures} failed)", jobs=self.jobs,
                              writes=self.writes, files=self.files_written, failures=self.failures)
                waiting, self._stopping = self._stopping, []
                for d in waiting:
                    d.callback(None)
            return
        newest = {}
        for job, _ in batch:
            newest[job.key] = job
        failed = {}
        prepared = []
        for key, job in newest.items():
            try:
                prepared.append((job, job.prepare()))
            except Exception as exc:
                failed[key] = exc
        self._busy = True
        self._in_flight = len(batch)
        self.writes += 1
        d = deferToThreadPool(self._reactor, self._threads, _write_all, prepared)
        d.addErrback(lambda f: {job.key: f.value for job, _ in prepared})
        d.addCallback(self._written, batch, failed, len(prepared))

    def _written(self, failures, batch, failed, files):
        failed.update(failures)
        self.failures += len(failed)
        self.files_written += files - len(failures)
        # still busy while the answers go out: a job they submit joins the next write
        for job, d in batch:
            exc = failed.get(job.key)
            if exc is None:
                d.callback(None)
            else:
                d.errback(Failure(exc))
        self._busy = False
        self._in_flight = 0
        self._next()
