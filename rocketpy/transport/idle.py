"""Transport: every connection's idle check (``serverChannelMaxIdleTimeSeconds``) on one
reactor call per server (Netty gives each channel an ``IdleStateHandler`` task and removes a
cancelled one from its scheduler's queue at once).

A reactor call per connection cannot leave when its connection closes: Twisted's reactor drops
a cancelled call only at its time (or once more than half of its timer heap is cancelled), and
moving a call sooner searches the whole heap. So a closing connection either left its check,
and the allocator's pages it was made on, for up to the idle time (100 brokers leaving after a
10 M-topic seed kept ~19 MiB for two minutes, issue 21), or paid a search as long as the
connection count. Here a connection leaves the schedule at once, in time logarithmic in the
connection count, and the one reactor call never has to move sooner: a new connection's
deadline is the latest of all, and the call re-arms itself for the next deadline when it fires
(early, when the connection it was armed for has left: it then finds nothing due, and arms
for the next deadline if there is one). It is never cancelled while the server runs: a
cancelled call too would stay until its time, one for each time the last connection left
(a client's one request; 17 MiB of allocator arenas kept after a 10 M-topic seed, with the
benchmark asking every 0.5 s); :meth:`IdleSchedule.stop` cancels it when the server stops."""
from itertools import count

from twisted.logger import Logger

from . import logs

__all__ = ["IdleSchedule"]


class IdleSchedule:
    """Callbacks by key at deadlines on ``clock``, a key at most once; :meth:`schedule` and
    :meth:`remove` take O(log n) for n keys. An indexed binary heap of ``[deadline, sequence,
    key, callback]`` entries (the sequence keeps equal deadlines in the order scheduled). A
    callback that raises is logged; the others still run, as with a reactor call each."""

    log = Logger(observer=logs.observer)

    def __init__(self, clock):
        self._clock = clock
        self._heap = []
        self._where = {}          # key -> its entry's index in the heap
        self._sequence = count()
        self._call = None         # the reactor call, while armed
        self._firing = False      # callbacks are running: the firing arms once they are done

    def __len__(self):
        return len(self._heap)

    def __contains__(self, key):
        return key in self._where

    def schedule(self, key, delay, callback):
        """Call ``callback()`` ``delay`` seconds from now, instead of whatever ``key`` had."""
        self.schedule_at(key, self._clock.seconds() + delay, callback)

    def schedule_at(self, key, when, callback):
        """Call ``callback()`` once the clock reads ``when`` (an absolute deadline, compared
        as computed), instead of whatever ``key`` had. What is scheduled while the schedule
        fires waits for its next firing, however early its deadline."""
        self.remove(key)
        entry = [when, next(self._sequence), key, callback]
        self._heap.append(entry)
        self._sift_up(len(self._heap) - 1)
        self._arm()

    def remove(self, key):
        """Forget ``key``'s callback (nothing when it has none)."""
        index = self._where.pop(key, None)
        if index is None:
            return
        last = self._heap.pop()
        if index < len(self._heap):
            self._put(index, last)
            self._sift_down(self._sift_up(index))

    def start(self):
        """Arm the reactor call again after :meth:`stop` (keys scheduled meanwhile are kept)."""
        self._arm()

    def stop(self):
        """Cancel the reactor call (the server stops: no call left behind)."""
        if self._call is not None:
            self._call.cancel()
            self._call = None

    def _arm(self):
        """A reactor call at the first deadline, unless one armed already fires no later."""
        if self._firing or not self._heap:
            return
        first = self._heap[0][0]
        if self._call is not None:
            if self._call.getTime() <= first:
                return
            self._call.cancel()   # only if a shorter delay was scheduled outside a firing
        self._call = self._clock.callLater(max(first - self._clock.seconds(), 0), self._fire)

    def _fire(self):
        self._call = None
        now = self._clock.seconds()
        limit = next(self._sequence)   # entries scheduled from here on wait for the next firing
        heap = self._heap
        self._firing = True
        try:
            while heap and heap[0][0] <= now and heap[0][1] < limit:
                _, _, key, callback = heap[0]
                self.remove(key)
                try:
                    callback()
                except Exception:
                    self.log.failure("idle check of {key} failed", key=key)
        finally:
            self._firing = False
        self._arm()

    def _put(self, index, entry):
        self._heap[index] = entry
        self._where[entry[2]] = index

    def _sift_up(self, index):
        heap = self._heap
        entry = heap[index]
        while index:
            parent = (index - 1) >> 1
            if heap[parent] <= entry:
                break
            self._put(index, heap[parent])
            index = parent
        self._put(index, entry)
        return index

    def _sift_down(self, index):
        heap = self._heap
        size = len(heap)
        entry = heap[index]
        child = 2 * index + 1
        while child < size:
            if child + 1 < size and heap[child + 1] < heap[child]:
                child += 1
            if entry <= heap[child]:
                break
            self._put(index, heap[child])
            index, child = child, 2 * child + 1
        self._put(index, entry)
