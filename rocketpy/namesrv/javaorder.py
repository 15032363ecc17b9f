"""NameServer state layer: the iteration order of the Java collections behind each answer.

Java's answers list map values and set members (``queueDatas``, ``brokerDatas``, a cluster's
broker names, ``topicList``) in ``HashMap``/``HashSet``/``ConcurrentHashMap`` order, which
follows from each key's hash and the table's capacity -- and that from the initial size and the
largest size ever held (Java tables never shrink). rocketpy keeps insertion-ordered dicts and
sorts with :func:`rocketpy.remoting.javahash.hashmap_order` when it writes; this module computes
the capacities. ``HashMap`` doubles when its size passes 3/4 of the capacity,
``ConcurrentHashMap`` when it reaches 3/4; ``new ConcurrentHashMap<>(n)`` starts at the power of
two above 1.5 n, ``new HashSet<>(collection)`` at ``max(size / .75 + 1, 16)``."""
from rocketpy.remoting.javahash import hashmap_order

__all__ = ["table_size_for", "hashmap_capacity", "chm_capacity", "hashset_copy_capacity",
           "ordered", "HighWater"]


def table_size_for(n):
    """Java's ``tableSizeFor``: the smallest power of two >= ``n`` (at least 1)."""
    cap = 1
    while cap < n:
        cap <<= 1
    return cap


def hashmap_capacity(high_water, initial=16):
    """Capacity of a ``HashMap(initial)`` that once held ``high_water`` entries."""
    cap = table_size_for(initial)
    while high_water > cap * 3 // 4:
        cap <<= 1
    return cap


def chm_capacity(high_water, initial=None):
    """Capacity of a ``ConcurrentHashMap`` (``new ConcurrentHashMap<>(initial)`` or default)."""
    cap = 16 if initial is None else table_size_for(initial + (initial >> 1) + 1)
    while high_water >= cap * 3 // 4:
        cap <<= 1
    return cap


def hashset_copy_capacity(size):
    """Capacity of ``new HashSet<>(collection)`` for a collection of ``size`` elements."""
    return table_size_for(max(int(size / 0.75) + 1, 16))


def ordered(keys, capacity):
    """``keys`` (in insertion order) in the order a Java hash table of ``capacity`` iterates."""
    return hashmap_order(keys, capacity)


class HighWater:
    """The largest size a Java table ever reached, hence its capacity."""

    __slots__ = ("mark", "initial", "concurrent")

    def __init__(self, initial=None, concurrent=False):
        self.mark = 0
        self.initial = initial
        self.concurrent = concurrent

    def saw(self, size):
        if size > self.mark:
            self.mark = size

    def capacity(self):
        if self.concurrent:
            return chm_capacity(self.mark, self.initial)
        return hashmap_capacity(self.mark, 16 if self.initial is None else self.initial)
