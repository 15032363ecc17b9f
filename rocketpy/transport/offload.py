"""Transport layer: the pools where the work of a :class:`~rocketpy.namesrv.pending.Pending`
runs, one per lane (Java runs every request on an executor thread; rocketpy serves on the
reactor thread and moves off it only what would stall it):

* :class:`DecodePool` (lane ``cpu``): the costly decode of big request bodies (REGISTER_BROKER's,
  any other past 1 KiB, on both the NameServer's and the controller's port);
* :class:`WritePool` (lane ``disk``): the KV and config file writes, with their ``fsync``.

Decode pool: one decode runs at a time, since the work holds the GIL and a second would only
take it from the reactor more often. The reactor waits up to ``sys.getswitchinterval()`` for
the GIL after each ``select``/``recv``/``send``; CPython's 5 ms made route queries wait ~6 ms
(worst 26 ms) during a bomb, so the pool lowers it to 1 ms while it runs (~1.4 ms, worst 6-13 ms:
``bench/registration_bomb.py``). One long C call (``json.loads`` of 16 MiB) holds the GIL
throughout (docs/reliability.md).

Fair across hosts, in places and in time:

* The places are bounded (:data:`MAX_PENDING`, and :data:`MAX_PENDING_PER_PEER` per peer host):
  a job with a place may hold a thread and a partly decoded body. Work past them waits in the
  *lobby*, in line by host, holding nothing but its request (Java's executor queue holds 50,000
  requests and answers none SYSTEM_BUSY; brokers behind one address registering at once were
  refused here): places go to the lobby's hosts in turn as jobs finish. Only past
  :data:`MAX_WAITING_BYTES` of waiting bodies does the protocol answer SYSTEM_BUSY, Java's answer
  to a full executor queue (the broker registers again in 30 s). A full pool still gives a place
  to a host holding two places fewer than another: the other host's newest job with a place goes
  back to the front of its host's line (:class:`WorkDisplaced` when the lobby has no room for
  it), so a few hosts cannot hold every place (issue 31: 4 hosts x 4 slow bodies had a fifth
  host's registration refused at once). A job whose connection closes while it waits is
  withdrawn (:meth:`DecodePool.withdraw`), never decoded.
* Work is served in turns by host, one *quantum* of work units at a time (:data:`QUANTUM`,
  counted by the job's :class:`~rocketpy.remoting.budget.DecodeBudget`, whose every check is a
  point where the job may yield): a host's decode waits for at most a quantum of each other
  host's work, never for their whole decodes (4 hosts' lenient bodies held the pool 49.5 s).
  Each job has a thread of its own, blocked while it is not its turn, so only one runs.

Only ``work`` runs on the threads; tables and caches are touched by ``finish`` on the reactor.
:meth:`DecodePool.stop` abandons the waiting work, cancels the started ones (their budget's
flag, seen at the next check) and waits for them at most :data:`STOP_WAIT` seconds. Work
offered while the pool is not running (before its start, after its stop) is refused at once like
work past the bound: SYSTEM_BUSY, which is what Java's remoting answers when its executor is
shut down (``RejectedExecutionException``); a job kept for a thread that is not there would never
be answered, and its connection, no longer read, would wait for its idle timeout.

Writer: Java's ``KVConfigManager.persist`` rewrites ``kvConfig.json`` on the request thread; on
the reactor, two connections putting 64 KiB values made every other client wait 150-460 ms
(issue 12). One named thread (``rocketpy-writer``) runs every file write in order, and each
PUT/DELETE/UPDATE is answered once its write is durable (``fsync`` of file and directory), so
no acknowledged change is lost to a ``kill -9``. Writes that wait together are one write (group
commit: the newest job of each file, a snapshot taken on the reactor). A connection whose answer
waits is not read, so the queue holds at most one job per connection."""
import sys
import threading
import time
from collections import deque
from functools import partial

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from . import logs

__all__ = ["DecodePool", "WritePool", "WorkDisplaced", "MAX_PENDING", "MAX_PENDING_PER_PEER",
           "MAX_WAITING_BYTES",
           "QUANTUM", "STOP_WAIT", "THREAD_NAME", "WRITER_THREAD_NAME", "SWITCH_INTERVAL"]

#: Decodes with a place at once (running or queued; a connection has at most one). A 10,000-topic
#: body decodes in ~20 ms, a hostile one (64 MiB inflated) in a few seconds: at most 16 hold a
#: thread and a partly decoded body; the rest wait in the lobby, holding only their requests.
MAX_PENDING = 16
#: Decodes accepted at once from one peer host: a broker has one registration in flight; its
#: master and slaves on one host a few.
MAX_PENDING_PER_PEER = 4
#: Bytes of request bodies waiting for a place (the lobby), all hosts together; a connection has
#: at most one there. 64 brokers' 10,000-topic plain bodies (~1 MiB each) fit four times over.
MAX_WAITING_BYTES = 256 << 20
#: Work units (``rocketpy.remoting.budget``) a decode runs before another host's waiting work
#: takes a turn: ~20-60 ms of decoding (a genuine 10,000-topic compressed body is ~0.6 M).
QUANTUM = 1 << 20
#: Seconds :meth:`DecodePool.stop` waits for the started decodes once cancelled (a budget check
#: comes every 64 KiB of inflation or JSON part; the longest C call, a 16 MiB plain body's
#: ``json.loads``, takes about a second).
STOP_WAIT = 2.0
THREAD_NAME = "rocketpy-decode"
WRITER_THREAD_NAME = "rocketpy-writer"
#: Seconds a thread waiting for the GIL waits before it asks for it (CPython: 5 ms).
SWITCH_INTERVAL = 0.001


class WorkDisplaced(Exception):
    """Accepted work that a full pool gave up for another host's, with no room for it in the
    lobby (answered SYSTEM_BUSY)."""


class _Threads(ThreadPool):
    """Daemon threads, made when work first comes: a decode holds nothing worth waiting for
    at exit, and a service tree built but never stopped (tests) must not keep the process."""

    def threadFactory(self, *args, **kwargs):
        thread = threading.Thread(*args, **kwargs)
        thread.daemon = True
        return thread


class _Job:
    """One piece of work of a peer: its cancel hook, its budget (whose checks are its yield
    points), the Deferred of its result, and its thread once started."""

    __slots__ = ("work", "peer", "cancel", "budget", "deferred", "thread", "turn_from", "size")

    def __init__(self, work, peer, cancel, budget, size):
        self.work = work
        self.peer = peer
        self.cancel = cancel
        self.budget = budget
        self.deferred = Deferred()
        self.thread = None
        self.turn_from = 0      # the budget's units worked when this turn began
        self.size = size        # the bytes its request holds while it waits in the lobby


class DecodePool:
    """Bounded per-peer queues (``max_pending`` jobs with a place, running or waiting,
    ``max_per_peer`` of one peer) of pure work, run one at a time in turns by peer of
    ``quantum`` work units each, and the lobby before them (``max_waiting_bytes`` of waiting
    requests, in line by peer; 0: none, work past the places is refused); results come back
    on the reactor. ``switch_interval`` is ``sys.setswitchinterval`` while the pool runs (when
    lower than the one in force), restored when it stops."""

    log = Logger(observer=logs.observer)

    def __init__(self, reactor, max_pending=MAX_PENDING, name=THREAD_NAME,
                 switch_interval=SWITCH_INTERVAL, max_per_peer=MAX_PENDING_PER_PEER,
                 stop_wait=STOP_WAIT, quantum=QUANTUM, max_waiting_bytes=MAX_WAITING_BYTES):
        self._reactor = reactor
        self._switch_interval = switch_interval
        self._saved_interval = None
        self._name = name
        self._stop_wait = stop_wait
        self.quantum = quantum
        # shared with the job threads, under the lock: each peer's jobs accepted and not
        # finished (only the first of each may have started), which job may run, when each
        # peer last got a turn
        self._lock = threading.Condition()
        self._queues = {}
        self._holder = None
        self._served = {}
        self._turns = 0
        self._stopping = False
        self.max_pending = max_pending
        self.max_per_peer = max_per_peer
        #: False before :meth:`start` and from :meth:`stop` on: every submit is refused
        self.accepting = False
        #: work with a place and not yet finished, in all and by peer (on the reactor thread)
        self.pending = 0
        self.pending_by_peer = {}
        #: the lobby (on the reactor thread): each peer's line of waiting jobs (a withdrawn one
        #: stays, emptied, until its line reaches it: O(1) either way), the peers in turn, and
        #: the jobs and request bytes waiting in all
        self.max_waiting_bytes = max_waiting_bytes
        self._lobby = {}
        self._rotation = deque()    # the lobby's peers, the next to get a place first
        self._waiting_jobs = {}     # the job's Deferred -> the job
        self.waiting = 0
        self.waiting_bytes = 0
        #: totals since start: finished, refused (displaced ones without room in the lobby
        #: too), displaced, that waited in the lobby, withdrawn from it, abandoned at stop, and
        #: turns handed from one job to another host's before it finished
        self.done = 0
        self.refused = 0
        self.displaced = 0
        self.lobbied = 0
        self.withdrawn = 0
        self.abandoned = 0
        self.yields = 0

    def start(self):
        self._saved_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._saved_interval, self._switch_interval))
        with self._lock:
            self._stopping = False
        self.accepting = True

    def stop(self):
        """Abandon the waiting work (its answers would go nowhere: the server has closed its
        connections first), cancel the started work and wait for it at most ``stop_wait``."""
        self.accepting = False
        with self._lock:
            self._stopping = True
            started, abandoned = [], 0
            for queue in self._queues.values():
                for job in queue:
                    if job.thread is None:
                        abandoned += 1
                    else:
                        started.append(job)
                        if job.cancel is not None:
                            job.cancel()
            self._queues = {peer: deque(job for job in queue if job.thread is not None)
                            for peer, queue in self._queues.items()}
            self._queues = {peer: queue for peer, queue in self._queues.items() if queue}
            self._lock.notify_all()
        abandoned += self.waiting
        self._lobby, self._waiting_jobs = {}, {}
        self._rotation.clear()
        self.waiting = self.waiting_bytes = 0
        self.abandoned += abandoned
        deadline = time.monotonic() + self._stop_wait
        for job in started:
            job.thread.join(max(0.0, deadline - time.monotonic()))
        if abandoned or started:
            left = any(job.thread.is_alive() for job in started)
            self.log.info("decode pool stopped: {abandoned} queued decodes abandoned, "
                          "{running} cancelled{left}", abandoned=abandoned, running=len(started),
                          left=", left running" if left else "")
        if self._saved_interval is not None:
            sys.setswitchinterval(self._saved_interval)
            self._saved_interval = None

    def submit(self, work, peer=None, cancel=None, budget=None, size=0):
        """A Deferred of ``work()`` run on a pool thread, firing later on the reactor thread;
        None when the pool is not running (:attr:`accepting`), or when the job has no place
        (``max_pending`` jobs have one, and no other host holds two more than ``peer``, or
        ``max_per_peer`` of ``peer``'s) and its request (``size`` bytes) would put the lobby past
        ``max_waiting_bytes``. ``cancel()``, if given, makes ``work`` stop early (shutdown);
        ``budget``, if given, is the job's :class:`~rocketpy.remoting.budget.DecodeBudget`: at
        its checks the job yields its turn once it has spent a quantum."""
        if not self.accepting:
            self.refused += 1
            return None
        job = _Job(work, peer, cancel, budget, size)
        held = self.pending_by_peer.get(peer, 0)
        if peer in self._lobby or (self.max_per_peer and held >= self.max_per_peer):
            return self._wait(job, first=False)
        displaced = None
        if self.pending >= self.max_pending:
            displaced = self._displace(held)
            if displaced is None:
                return self._wait(job, first=False)
        self._place(job)
        if displaced is not None:   # back to the front of its host's line, or refused
            if self._wait(displaced, first=True) is None:
                displaced.deferred.errback(Failure(WorkDisplaced(
                    "the decode pool is full: a job of a host holding more places gave way")))
        return job.deferred

    def withdraw(self, deferred):
        """Take the job of ``deferred`` (a :meth:`submit`'s) out of the lobby, if it still
        waits there: its connection closed, so it is never run and its Deferred never fires.
        (It keeps its spot in its host's line, emptied of its request, until the line reaches it.)"""
        job = self._waiting_jobs.pop(deferred, None)
        if job is None:
            return False
        job.work = job.budget = job.cancel = None
        self.waiting -= 1
        self.waiting_bytes -= job.size
        self.withdrawn += 1
        return True

    def _place(self, job):
        """Give ``job`` a place: its host's queue, and the turn if nobody holds it."""
        self.pending += 1
        self.pending_by_peer[job.peer] = self.pending_by_peer.get(job.peer, 0) + 1
        if job.budget is not None:
            job.budget.checkpoint = partial(self._checkpoint, job)
        with self._lock:
            queue = self._queues.get(job.peer)
            if queue is None:
                queue = self._queues[job.peer] = deque()
            queue.append(job)
            if self._holder is None:
                self._hand(self._next())

    def _wait(self, job, first):
        """Put ``job`` in its host's line of the lobby (at its front when ``first``: a job that
        gave its place away); its Deferred, or None (counted refused) when the lobby is full."""
        if not self.max_waiting_bytes or self.waiting_bytes + job.size > self.max_waiting_bytes:
            self.refused += 1
            return None
        line = self._lobby.get(job.peer)
        if line is None:
            line = self._lobby[job.peer] = deque()
            self._rotation.append(job.peer)
        if first:
            line.appendleft(job)
        else:
            line.append(job)
        self._waiting_jobs[job.deferred] = job
        self.waiting += 1
        self.waiting_bytes += job.size
        self.lobbied += 1
        if self.lobbied & (self.lobbied - 1) == 0:   # the 1st, 2nd, 4th... (a flood: a few lines)
            self.log.info("decode pool: {peer}'s request waits for a place ({waiting} waiting, "
                          "{bytes} bytes; {lobbied} so far)", peer=job.peer, waiting=self.waiting,
                          bytes=self.waiting_bytes, lobbied=self.lobbied)
        self._admit()   # a place may be free (its host's line held only withdrawn jobs)
        return job.deferred

    def _admit(self):
        """Give the free places to the lobby's peers in turn, each while it holds fewer than
        ``max_per_peer``; withdrawn jobs are dropped as their line reaches them. A peer at its
        share is passed over for this round (at most ``max_pending / max_per_peer`` can be), so
        a place costs O(1) however many peers wait."""
        lobby, rotation, cap = self._lobby, self._rotation, self.max_per_peer
        passed = 0
        while rotation and passed < len(rotation) and self.pending < self.max_pending:
            peer = rotation.popleft()
            if cap and self.pending_by_peer.get(peer, 0) >= cap:
                rotation.append(peer)
                passed += 1
                continue
            line = lobby[peer]
            job = line.popleft()
            if line:
                rotation.append(peer)
            else:
                del lobby[peer]
            if job.work is None:        # withdrawn
                continue
            passed = 0
            del self._waiting_jobs[job.deferred]
            self.waiting -= 1
            self.waiting_bytes -= job.size
            self._place(job)

    def _displace(self, held):
        """Take out the newest waiting job of the host holding the most places, if it holds at
        least ``held`` + 2 (max-min fairness: a host never loses a place to one that would then
        hold more); the job, or None."""
        with self._lock:
            peer = max(self._queues, key=lambda p: len(self._queues[p]), default=None)
            queue = self._queues.get(peer)
            if queue is None or len(queue) < max(2, held + 2) or queue[-1].thread is not None:
                return None
            job = queue.pop()
        self.pending -= 1
        self.pending_by_peer[peer] -= 1
        self.displaced += 1
        return job

    # -- the turns (under the lock) -----------------------------------------------------------

    def _next(self, after=None):
        """The first job of the peer whose last turn is the oldest (never first, then in order of
        arrival), other than ``after``'s; None when there is none or the pool stops."""
        if self._stopping:
            return None
        served = self._served
        peers = [p for p in self._queues if after is None or p != after.peer]
        if not peers:
            return None
        return self._queues[min(peers, key=lambda p: served.get(p, -1))][0]

    def _hand(self, job):
        """Let ``job`` run (started on a thread of its own the first time)."""
        self._holder = job
        if job is None:
            return
        self._turns += 1
        self._served[job.peer] = self._turns
        if job.budget is not None:
            job.turn_from = job.budget.worked
        if job.thread is None:
            job.thread = threading.Thread(target=self._run, args=(job,), name=self._name,
                                          daemon=True)
            job.thread.start()
        else:
            self._lock.notify_all()

    def _checkpoint(self, job):
        """At a budget check on ``job``'s thread: once it has spent a quantum in this turn, give
        the turn to another peer's work, if any waits, and wait for the next."""
        if job.budget.worked - job.turn_from < self.quantum:
            return
        with self._lock:
            other = self._next(after=job)
            if other is None:
                job.turn_from = job.budget.worked
                return
            self.yields += 1
            self._hand(other)
            while self._holder is not job and not self._stopping:
                self._lock.wait()

    def _run(self, job):
        try:
            result = job.work()
        except BaseException:
            result = Failure()
        with self._lock:
            queue = self._queues.get(job.peer)
            if queue and queue[0] is job:
                queue.popleft()
                if not queue:
                    del self._queues[job.peer]
                    self._served.pop(job.peer, None)
            if self._holder is job:
                self._hand(self._next())
        # handed over in a box the reactor empties: this frame would otherwise hold the job and
        # its result (a decoded table, a 1 M-topic list) as long as the thread lives
        box = [job, result]
        job = result = None
        self._reactor.callFromThread(self._finished, box)

    def _finished(self, box):
        job, result = box
        box.clear()
        self.pending -= 1
        self.done += 1
        held = self.pending_by_peer.pop(job.peer) - 1
        if held:
            self.pending_by_peer[job.peer] = held
        if self._lobby:
            self._admit()
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

    def submit(self, job, peer=None, cancel=None, budget=None, size=0):
        """A Deferred that fires (on the reactor thread) once ``job`` -- or a later job of the
        same file -- has been written, or fails with the write's exception. ``peer``, ``cancel``,
        ``budget`` and ``size`` are the decode pool's; a write is never cancelled (it answers
        once durable)."""
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
