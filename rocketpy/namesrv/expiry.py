"""NameServer state layer: when each live broker expires, in deadline order (Java's
``scanNotActiveBroker`` walks every live broker; this index finds the expired ones alone).

A heap of ``(deadline, entry)`` with lazy updates: a heartbeat only moves a deadline later, so it
notes it, and the entry is pushed back at it when it comes up (a registration costs a dict
write, not a heap push). Removed brokers' entries are skipped, and the heap is rebuilt when stale
ones outnumber live ones. An expired broker stays *overdue* (reported by every scan) until
removed or refreshed, as Java reports it until its unregistration is applied, in live-table
order (as Java's scan finds them)."""
import heapq
from itertools import count

__all__ = ["ExpiryIndex"]


class ExpiryIndex:
    def __init__(self):
        self._entries = {}        # key -> [deadline, insertion sequence, deadline in the heap]
        self._heap = []           # (deadline, tie-break, key)
        self._overdue = {}        # key -> insertion sequence
        self._ties = count()
        self._sequence = count()

    def __len__(self):
        return len(self._entries)

    def _queue(self, key, entry, deadline):
        entry[2] = deadline
        heapq.heappush(self._heap, (deadline, next(self._ties), key))

    def set(self, key, deadline):
        """``key`` (a live-table key) expires once ``deadline`` is passed; a new key goes last."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = [deadline, next(self._sequence), None]
        else:
            entry[0] = deadline
            if self._overdue.pop(key, None) is None and deadline >= entry[2]:
                return                          # queued no later than due: noted, no push
        self._queue(key, entry, deadline)       # new, out of the heap, or due sooner
        self._bound()                           # also when one broker's deadline keeps shrinking

    def _bound(self):
        if not self._entries:
            self._heap = []
        elif len(self._heap) > 2 * len(self._entries) + 64:
            self._rebuild()

    def _rebuild(self):
        self._heap = [(entry[0], next(self._ties), key) for key, entry in self._entries.items()
                      if key not in self._overdue]
        heapq.heapify(self._heap)
        for deadline, _, key in self._heap:
            self._entries[key][2] = deadline

    def remove(self, key):
        if self._entries.pop(key, None) is not None:
            self._overdue.pop(key, None)
            self._bound()

    def expired(self, now):
        """Keys whose deadline is before ``now``, in live-table order."""
        heap, entries, overdue = self._heap, self._entries, self._overdue
        while heap and heap[0][0] < now:
            queued, _, key = heapq.heappop(heap)
            entry = entries.get(key)
            if entry is None or entry[2] != queued:
                continue                     # removed, or queued again since
            if entry[0] < now:
                overdue[key] = entry[1]
                entry[2] = None
            else:
                self._queue(key, entry, entry[0])   # refreshed meanwhile: back at its deadline
        return sorted(overdue, key=overdue.__getitem__)
