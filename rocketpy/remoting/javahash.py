"""Wire codec layer: Java ``HashMap``/``HashSet`` iteration order, for byte-identical output.

fastjson writes a map in its own iteration order, so Java's headers (``extFields`` is a
``HashMap``) and legacy-JSON bodies come out in hash-bucket order; reproducing it makes
rocketpy's bytes equal to Java's, not merely equivalent. Model: Java 8+ ``HashMap`` (16 buckets,
doubling past a 0.75 load, bucket ``(h ^ h >>> 16) & (n - 1)``, insertion order within one; tree
bins, which reorder 8+ colliding keys, are ignored). ``ConcurrentHashMap`` (a broker's topic
table, ``java.util.Properties`` since Java 9) iterates by bucket too, but a resize may reverse
part of a bucket (``transfer`` prepends the nodes before "lastRun"), so
:func:`concurrent_hashmap_order` replays the insertions, resizes included."""
import struct
import sys
from array import array

__all__ = ["string_hash", "long_hash", "java_hash", "hashmap_order", "hashmap_ordered",
           "concurrent_hashmap_capacity", "concurrent_hashmap_order",
           "concurrent_hashmap_copy_order"]

#: UTF-16 in this machine's byte order, which ``array("H")`` reads as code units
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def string_hash(text):
    """``String.hashCode()``: 31-polynomial over UTF-16 code units, as a signed 32-bit int."""
    if text.isascii():
        units = text.encode("ascii")
    else:
        # a lone surrogate is one unit too
        units = array("H", text.encode(_UTF16_NATIVE, "surrogatepass"))
    h = 0
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def long_hash(value):
    """``Long.hashCode()``."""
    value &= 0xFFFFFFFFFFFFFFFF
    h = (value ^ (value >> 32)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_hash(key):
    """hashCode of a ``String`` or ``Long`` key (the only key types RocketMQ's maps use)."""
    return long_hash(key) if isinstance(key, int) else string_hash(key)


def _capacity(size, initial=16):
    cap = initial
    while size > cap * 3 // 4:
        cap *= 2
    return cap


def hashmap_order(keys, initial_capacity=16):
    """The order a ``HashMap`` iterates ``keys`` inserted in the given order."""
    keys = list(keys)
    mask = _capacity(len(keys), initial_capacity) - 1

    def bucket(indexed):
        h = java_hash(indexed[1]) & 0xFFFFFFFF
        return ((h ^ (h >> 16)) & mask, indexed[0])

    return [key for _, key in sorted(enumerate(keys), key=bucket)]


def hashmap_ordered(mapping, initial_capacity=16):
    """A copy of ``mapping`` whose iteration order is the ``HashMap``'s."""
    return {key: mapping[key] for key in hashmap_order(mapping, initial_capacity)}


def _table_size_for(n):
    cap = 1
    while cap < n:
        cap <<= 1
    return cap


def _float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def concurrent_hashmap_capacity(initial_capacity=None):
    """The first table size of ``new ConcurrentHashMap<>(initial)`` (Java 11+:
    ``tableSizeFor((int) (1.0 + initial / 0.75f))``; 16 without an argument)."""
    if initial_capacity is None:
        return 16
    return _table_size_for(int(1.0 + _float32(initial_capacity / _float32(0.75))))


def concurrent_hashmap_order(keys, initial_capacity=None):
    """The order a ``ConcurrentHashMap`` iterates ``keys`` put in the given order (duplicates
    keep their first place), replaying Java 11+'s ``putVal`` (append to the bucket),
    ``addCount`` (double the table once the count reaches 3/4 of it) and ``transfer`` (split
    each bucket at its lastRun: that tail keeps its order, the nodes before it are prepended to
    their half, so they come out reversed). Tree bins are not modelled.
    """
    return _put_all(keys, concurrent_hashmap_capacity(initial_capacity))


def concurrent_hashmap_copy_order(keys):
    """The order of ``new ConcurrentHashMap<>(m.size())`` after ``putAll(m)``, ``m`` iterating
    ``keys``. ``putAll`` first presizes for ``m.size()`` (``tryPresize``), which doubles a
    table that is already big enough once more: 13 keys land in 64 buckets, not the 32 the
    constructor made (a 5.3.3 broker's compressed REGISTER_BROKER body shows it)."""
    keys = list(keys)
    n = concurrent_hashmap_capacity(len(keys))
    wanted = _table_size_for(len(keys) + (len(keys) >> 1) + 1)
    while wanted > n - (n >> 2):
        n <<= 1
    return _put_all(keys, n)


def _put_all(keys, n):
    """Put ``keys`` in order into a ``ConcurrentHashMap`` of ``n`` buckets; its order."""
    table = [[] for _ in range(n)]
    seen = set()
    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        h = java_hash(key) & 0xFFFFFFFF
        spread = (h ^ (h >> 16)) & 0x7FFFFFFF
        table[spread & (n - 1)].append((spread, key))
        if len(seen) >= n - (n >> 2):
            table = _transfer(table, n)
            n <<= 1
    return [key for bucket in table for _, key in bucket]


def _transfer(table, n):
    """``ConcurrentHashMap.transfer`` of one table of ``n`` buckets into ``2 n``."""
    out = [[] for _ in range(2 * n)]
    for i, bucket in enumerate(table):
        if not bucket:
            continue
        last_run = 0
        for j in range(1, len(bucket)):
            if bucket[j][0] & n != bucket[j - 1][0] & n:
                last_run = j
        low, high = [], []
        tail = bucket[last_run:]
        (high if tail[0][0] & n else low).extend(tail)
        for node in bucket[:last_run]:  # prepended, one by one
            (high if node[0] & n else low).insert(0, node)
        out[i], out[i + n] = low, high
    return out
