"""NameServer core: an answer that must wait for work off the reactor thread (rocketpy's own; Java
runs every request on an executor thread, rocketpy moves off the reactor only what would stall
it).

A handler returns a :class:`Pending` instead of its reply, naming the *lane* of its ``work``:
:data:`CPU`, pure work on the request's own bytes (a big REGISTER_BROKER body's decode: it reads
no table and no cache, so any thread may run it), or :data:`DISK`, a :class:`FileWrite` of a
change already applied in memory (PUT/DELETE_KV_CONFIG, UPDATE_NAMESRV_CONFIG), answered once on
disk as Java answers after ``persist()``. ``finish(result)`` gives the answer on the reactor
thread, where all state lives; ``fail(exc)``, when set, the answer for work that raised;
``cancel()``, when set, stops the work early (at shutdown: it then raises); ``budget``, when
set, is the work's :class:`~rocketpy.remoting.budget.DecodeBudget` (the pool that runs it
lets other work take turns at its checks). A ``finish`` may hand back another Pending (a body
decoded first, then a change written): its work goes to its own lane.
Synchronous callers (tests, replay, fuzzing) run it at once; the transport hands ``work`` to its
lane's pool (:mod:`rocketpy.transport.offload`).

A request body that may cost more to decode than a trip to a pool (:func:`decoded`: past
:data:`INLINE_BODY_MAX` bytes) is decoded by a CPU Pending with its own budget: a 16 MiB
QUERY_DATA_VERSION body in fastjson's lenient forms held the reactor 32 s (issue 31)."""
from functools import partial

from rocketpy.remoting.budget import DEFAULT_DECODE_BUDGET, DecodeBudget

__all__ = ["Pending", "FileWrite", "CPU", "DISK", "write_now", "decoded", "INLINE_BODY_MAX"]

#: Lanes: pure CPU work on a request's own bytes; a durable file write.
CPU = "cpu"
DISK = "disk"


class Pending:
    """``finish(work())`` (or ``fail(exc)``), to be run by whoever holds it: ``work`` on its
    lane, ``finish`` and ``fail`` on the thread that owns the state."""

    __slots__ = ("work", "finish", "lane", "fail", "cancel", "budget")

    def __init__(self, work, finish, lane=CPU, fail=None, cancel=None, budget=None):
        self.work = work
        self.finish = finish
        self.lane = lane
        self.fail = fail
        self.cancel = cancel
        self.budget = budget

    def then(self, after):
        """The same work, its finished value handed on to ``after``."""
        finish = self.finish
        return Pending(self.work, lambda result: after(finish(result)), self.lane, self.fail,
                       self.cancel, self.budget)

    def run(self):
        """Do it all here and now, and the work a finish hands back too."""
        out = self.step()
        while out.__class__ is Pending:
            out = out.step()
        return out

    def step(self):
        """The work and its finish here and now: the answer, or the next Pending."""
        try:
            result = self.work()
        except Exception as exc:
            if self.fail is None:
                raise
            return self.fail(exc)
        return self.finish(result)


#: Request bodies of at most this many bytes are decoded on the spot: a genuine one has a few
#: hundred (a DataVersion, a route's queue data, a SyncStateSet); the costliest forms of JSON
#: take ~1 µs a byte in Python, so one on the spot costs at most ~1 ms.
INLINE_BODY_MAX = 1024


def decoded(body, decode, then, budget=DEFAULT_DECODE_BUDGET):
    """``then(decode(body, budget))``: here and now for a body of at most
    :data:`INLINE_BODY_MAX` bytes (or none), else a CPU :class:`Pending` whose work is the decode
    alone (pure: any thread), charged to a :class:`~rocketpy.remoting.budget.DecodeBudget` of
    ``budget`` units, and whose finish is ``then``. A decode that raises is the handler's
    exception either way."""
    meter = DecodeBudget(budget)
    if body is None or len(body) <= INLINE_BODY_MAX:
        return then(decode(body, meter))
    return Pending(partial(decode, body, meter), then, CPU, cancel=meter.cancel, budget=meter)


class FileWrite:
    """The work of a :data:`DISK` Pending: make the file ``key`` hold the state as of ``prepare()``
    (a snapshot, on the state's thread) by ``write(prepared)`` (render and store, on any thread).
    Writes of one file queued together are one write (group commit): only the newest is prepared,
    and its snapshot holds every change the others wait for.

    ``settle()``, when set, is called on the state's thread once the write has succeeded or
    failed, by whoever ran it; it applies what the write made durable (a change that waits for
    its write before it touches memory) and says whether this job's change holds."""

    __slots__ = ("key", "prepare", "write", "settle")

    def __init__(self, key, prepare, write, settle=None):
        self.key = key
        self.prepare = prepare
        self.write = write
        self.settle = settle

    def __call__(self):
        return self.write(self.prepare())


def write_now(job):
    """Run a :class:`FileWrite` here and now (None: nothing to write); False when the file
    could not be written (Java logs a failed persist and carries on)."""
    if job is None:
        return True
    try:
        job()
    except OSError:
        return job.settle() if job.settle is not None else False
    return job.settle() if job.settle is not None else True
