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
(:data:`MAX_PENDING`): past it the protocol answers SYSTEM_BUSY, Java's answer to a full executor
queue (the broker registers again in 30 s). Only ``work`` runs on the thread; tables and caches
are touched by ``finish`` on the reactor.

Writer: Java's ``KVConfigManager.persist`` rewrites ``kvConfig.json`` on the request thread; on
the reactor, two connections putting 64 KiB values made every other client wait 150-460 ms
(issue 12). One named thread (``rocketpy-writer``) runs every file write in order, and each
PUT/DELETE/UPDATE is answered once its write is durable (``fsync`` of file and directory), so
no acknowledged change is lost to a ``kill -9``. Writes that wait together are one write (group
commit: the newest job of each file, a snapshot taken on the reactor). A connection whose answer
waits is not read, so the queue holds at most one job per connection."""
import sys
import threading

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

__all__ = ["DecodePool", "WritePool", "MAX_PENDING", "THREAD_NAME", "WRITER_THREAD_NAME",
           "SWITCH_INTERVAL"]

#: Decodes accepted at once (running or queued; a connection has at most one). A 10,000-topic
#: body decodes in ~20 ms, a hostile one (64 MiB inflated) in a few seconds: 16 genuine changed
#: registrations wait well under a second, while a flood of bombs is refused instead of
#: queueing for minutes.
MAX_PENDING = 16
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


class DecodePool:
    """A bounded queue (``max_pending``, running or waiting) of pure work for one worker thread;
    results come back on the reactor. ``switch_interval`` is ``sys.setswitchinterval`` while the
    pool runs (when lower than the one in force), restored when it stops."""

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

    log = Logger()

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

    def submit(self, job):
        """A Deferred that fires (on the reactor thread) once ``job`` -- or a later job of the
        same file -- has been written, or fails with the write's exception."""
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
