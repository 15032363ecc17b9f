"""NameServer state layer: when each live broker expires, in deadline order (Java's
``scanNotActiveBroker`` walks every live broker every 5 s; this index finds the expired ones
without looking at the others).

A heap of ``(deadline, entry)`` with lazy deletion: a refreshed or removed broker leaves its old
entry behind, skipped when it comes up; the heap is rebuilt when stale entries outnumber live
ones, so it stays within a constant factor of the live table. A broker past its deadline stays
*overdue* (reported by every scan) until it is removed or refreshed, as Java reports it on every
scan until its unregistration is applied. Reports come in the order the live table iterates
(the order Java's scan finds them), kept as an insertion sequence.
"""
import heapq
from itertools import count

__all__ = ["ExpiryIndex"]


class ExpiryIndex:
    def __init__(self):
        self._deadlines = {}      # key -> (deadline, insertion sequence)
        self._heap = []           # (deadline, tie-break, key)
        self._overdue = {}        # key -> insertion sequence
        self._ties = count()
        self._sequence = count()

    def __len__(self):
        return len(self._deadlines)

    def set(self, key, deadline):
        """``key`` (a live-table key) expires once ``deadline`` is passed; a new key goes last."""
        old = self._deadlines.get(key)
        if old is not None and old[0] == deadline:
            return
        sequence = next(self._sequence) if old is None else old[1]
        self._deadlines[key] = (deadline, sequence)
        self._overdue.pop(key, None)
        heap = self._heap
        heapq.heappush(heap, (deadline, next(self._ties), key))
        if len(heap) > 2 * len(self._deadlines) + 64:
            self._heap = [(d, next(self._ties), k) for k, (d, _) in self._deadlines.items()
                          if k not in self._overdue]
            heapq.heapify(self._heap)

    def remove(self, key):
        self._deadlines.pop(key, None)
        self._overdue.pop(key, None)

    def expired(self, now):
        """Keys whose deadline is before ``now``, in live-table order."""
        heap, deadlines, overdue = self._heap, self._deadlines, self._overdue
        while heap and heap[0][0] < now:
            deadline, _, key = heapq.heappop(heap)
            entry = deadlines.get(key)
            if entry is not None and entry[0] == deadline:
                overdue[key] = entry[1]
        return sorted(overdue, key=overdue.__getitem__)
