"""NameServer core: an answer that needs CPU work first (rocketpy's own; Java runs every
request on an executor thread, rocketpy runs requests on the reactor thread and moves only the
costly part off it: decoding a big REGISTER_BROKER body).

A handler returns a :class:`Pending` instead of its reply when that work is worth a thread:
``work()`` is pure CPU work on the request's own bytes -- it reads no route table and no cache,
so it may run on any thread -- and ``finish(result)`` takes its result on the reactor thread,
where all state lives, and gives the answer. The processor runs both at once for synchronous
callers (tests, the replay and fuzz harnesses); the transport runs ``work`` on its decode pool
(:mod:`rocketpy.transport.offload`) and serves everyone else meanwhile.
"""

__all__ = ["Pending"]


class Pending:
    """``finish(work())``, to be run by whoever holds it: ``work`` anywhere, ``finish`` on the
    thread that owns the state."""

    __slots__ = ("work", "finish")

    def __init__(self, work, finish):
        self.work = work
        self.finish = finish

    def then(self, after):
        """The same work, its finished value handed on to ``after``."""
        finish = self.finish
        return Pending(self.work, lambda result: after(finish(result)))

    def run(self):
        """Do it all here and now."""
        return self.finish(self.work())
