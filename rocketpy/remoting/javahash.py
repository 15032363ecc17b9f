"""Wire codec layer: Java ``HashMap``/``HashSet`` iteration order, for byte-identical output.

fastjson writes a Java map in the map's own iteration order, so the Java NameServer's headers
(``extFields`` is a ``HashMap<String,String>``) and legacy-JSON bodies (``HashMap`` tables,
``HashSet`` topic lists) come out in hash-bucket order. Reproducing that order makes rocketpy's
bytes equal to Java's, not merely equivalent. Model: ``java.util.HashMap`` of Java 8+ (table of
16 doubling past a 0.75 load factor, bucket = ``(h ^ h >>> 16) & (n - 1)``, insertion order
within a bucket); tree bins only change the order of 8+ colliding keys, which we ignore.
"""

__all__ = ["string_hash", "long_hash", "java_hash", "hashmap_order", "hashmap_ordered"]


def string_hash(text):
    """``String.hashCode()``: 31-polynomial over UTF-16 code units, as a signed 32-bit int."""
    if text.isascii():
        units = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be", "surrogatepass")  # a lone surrogate is one unit too
        units = [int.from_bytes(raw[i:i + 2], "big") for i in range(0, len(raw), 2)]
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
