"""Service layer: the route state's memory goes back to the system after brokers leave (issue
12, part 3; a JVM keeps its heap at the peak).

When brokers go, the memory stays: a Python dict never shrinks, the processor's caches hold the
departed brokers' bodies and answers, and glibc keeps freed pages. With 1 M topic-broker pairs
(``bench/route_memory.py``): 53 MiB before, 822 MiB at the peak and still after every broker
had gone.

:class:`RouteMemoryService` looks at the route state's size every few seconds (O(1)) and before
every batch of unregistrations (:meth:`~RouteMemoryService.watching`, so brokers that came and
went between two looks count). Once it has dropped ``min_drop`` entries below its high-water
mark (or, after a release that left entries, once the tables are empty), ``release()`` (built
by ``makeService``) drops the cached bodies and answers, rebuilds the
big dicts to fit (:func:`compact_dicts`; those still holding 100,000 entries or more wait for a
later release: the rebuild is one step on the reactor), empties CPython's type attribute cache, makes a full
collection (which also empties the interpreter's free lists: each of those few objects kept a
1 MiB arena of the flood) and, unless ``--no-malloc-trim``, calls
:func:`rocketpy.service.allocator.heap_trimmer`'s call; each release is logged with the resident size
before and after.

It also keeps full garbage collections short: once the route state has grown by ``min_drop``
entries, the collector's current objects are frozen (``gc.freeze``), so later full collections
skip the long-lived tables instead of walking them (``bench/route_state.py``, ``full_gc_ms_held``);
reference counting still frees them. A release unfreezes first and, once the tables hold fewer
than 50,000 entries, makes a full collection, so what the departed brokers left in cycles is
collected; while they still hold more it makes a young pass instead and freezes again (a full
pass, now or automatically later, would walk what they hold: 40 ms at 1 M topic-broker pairs,
~0.5 s at 10 M), and those cycles wait for the release that finds the tables small."""
import gc
import sys

from ..transport.periodic import PeriodicService

__all__ = ["RouteMemoryService", "compact_dicts", "resident_mib"]

#: dicts smaller than this (bytes, ``sys.getsizeof``) are left as they are
_COMPACT_FROM = 64 * 1024

#: dicts holding this many entries or more are left as they are too: a rebuild is one step on
#: the reactor, ~0.25 s a million entries (``bench/route_release.py``); such a dict is rebuilt
#: by a later release, once it holds fewer
COMPACT_BELOW = 100_000


def compact_dicts(namespace, below=COMPACT_BELOW):
    """Rebuild, in place, every big dict among ``namespace``'s values (an object's ``vars()``)
    with fewer than ``below`` entries (its identity kept, so whoever holds it still does; its
    order kept): a dict's table is sized for its peak until then. Returns how many were
    rebuilt."""
    rebuilt = 0
    for value in list(namespace.values()):
        if type(value) is dict and len(value) < below and sys.getsizeof(value) >= _COMPACT_FROM:
            entries = dict(value)
            value.clear()
            value.update(entries)
            rebuilt += 1
    return rebuilt


def resident_mib():
    """This process's resident memory (MiB), or None where ``/proc`` has no answer."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class RouteMemoryService(PeriodicService):
    """Release memory once the route state has shrunk by ``min_drop`` entries: ``size()`` gives its
    entries now (topics, topic-broker pairs, live brokers), ``release()`` frees what the departed
    brokers left."""

    name = "route-memory"

    def __init__(self, size, release, clock, interval=5.0, min_drop=50_000, freeze=gc.freeze,
                 unfreeze=gc.unfreeze):
        super().__init__(interval, clock)
        self.size = size
        self.release = release
        self.min_drop = min_drop
        self.freeze = freeze
        self.unfreeze = unfreeze
        self.high = 0
        #: the size when the collector was last frozen
        self.frozen_at = 0
        #: releases since start
        self.releases = 0
        #: the last release left entries: once the tables are empty, release what those held
        #: too, however few (brokers leave over seconds: the last 20,000 of 1 M entries went
        #: after the release and their pages stayed with the allocator)
        self.tail = False

    def watching(self, unregister):
        """``unregister`` (``RouteInfoManager.unregister_brokers``), noting the route state's
        size before each batch: brokers leave that way."""
        def unregister_noted(requests):
            self.high = max(self.high, self.size())
            return unregister(requests)
        return unregister_noted

    def run_once(self):
        size = self.size()
        if size >= self.high:
            self.high = size
            if size - self.frozen_at >= self.min_drop:
                self.freeze()
                self.frozen_at = size
            return
        if self.high - size < self.min_drop and not (size == 0 and self.tail):
            return
        before = resident_mib()
        self.unfreeze()
        self.frozen_at = 0
        self.release()
        self.releases += 1
        after = resident_mib()
        self.log.info("route state shrank from {high} to {size} entries: memory released "
                      "(resident {before} -> {after} MiB)", high=self.high, size=size,
                      before=None if before is None else round(before),
                      after=None if after is None else round(after))
        self.high = size
        self.tail = size > 0
