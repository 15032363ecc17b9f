"""NameServer state layer: the route ops (:mod:`rocketpy.namesrv.delta`) as bytes, for a
replica of the route tables in another process (a rocketpy addition: the writer's op stream
is what a replica applies through the same ``RouteInfoManager.apply``).

A *batch* is the ops one outermost change of the tables applied (the unit the writer's
``journal`` reports: a replica applies a batch as one change, so its gate reports, and its
route versions move, exactly as the writer's did). Format 1, every integer big-endian::

    batch   = format u8 (1) | op count u32 | op*
    op      = tag u8 | its fields, in the order of its record
    int     = i64                        opt int = u8 (0 null, 1 present) [i64]
    bool    = u8 (0 or 1)                opt bool = u8 (0 null, 1 false, 2 true)
    string  = u32 (UTF-8 length + 1; 0 null) | UTF-8 bytes (lone surrogates kept)
    bytes   = u32 (length + 1; 0 null) | bytes
    tuple   = u32 count | item*          pair = first | second
    names   = u32 count | u32 UTF-8 length of them all | u32 length of each (code points) | UTF-8
    configs = names | i64 readQueueNums x count | writeQueueNums | perm | topicSysFlag

Records are their fields: DataVersion (int counter, timestamp, stateVersion), QueueData
(string brokerName, int read, write, perm, topicSysFlag), MappingInfo (string bname, opt
tuple of (int, opt int) currIdMap, opt bool dirty, opt int epoch, string scope, string topic,
opt int totalQueues), a live key (string cluster, string address). Tags and fields are in
:data:`SCHEMA` (one entry per op type, checked against the records when imported). A
registration's topic table is columns, not a record per topic: 500,000 topics encode in a few
C-level passes.

The decoder trusts nothing it reads (a replica gets bytes, not objects): every count and length
is checked against the bytes left before anything is made from it, tags and flags against
their few values, text as UTF-8, and the batch must end where its last op does; any failure is
one :exc:`OpStreamError`. Encoding refuses a value the format cannot hold (an integer past 64
bits, a type the field does not take) with the same error."""
import struct
import sys
from array import array
from itertools import accumulate, chain
from operator import attrgetter

from . import delta as ops
from .model import DataVersion, MappingInfo, QueueData, TopicConfig

__all__ = ["FORMAT", "SCHEMA", "OpStreamError", "encode_batch", "decode_batch"]

FORMAT = 1
_HEAD = struct.Struct(">BI")
_U8, _U32, _I64 = struct.Struct(">B"), struct.Struct(">I"), struct.Struct(">q")
_SWAP = sys.byteorder == "little"


class OpStreamError(ValueError):
    """Bytes that are not an op batch (or a value no batch can hold), and why (one line)."""


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def left(self):
        return len(self.data) - self.pos

    def take(self, n, what):
        start = self.pos
        end = start + n
        if end > len(self.data):
            self._short(n, what)
        self.pos = end
        return self.data[start:end]

    def unpack(self, fmt, what):
        """The one value of ``fmt`` here, read in place (no slice: most fields are numbers)."""
        start = self.pos
        end = start + fmt.size
        if end > len(self.data):
            self._short(fmt.size, what)
        self.pos = end
        return fmt.unpack_from(self.data, start)[0]

    def _short(self, n, what):
        raise OpStreamError(f"cut short: {what} needs {n} bytes, {self.left()} left at "
                            f"byte {self.pos}")


# ------------------------------------------------------------------ field codecs
# Each is (encode(out, value), decode(reader), least bytes an item takes).

def _int_enc(out, value):
    if type(value) is not int:
        raise OpStreamError(f"not an integer: {value!r:.60}")
    try:
        out.append(_I64.pack(value))
    except struct.error:
        raise OpStreamError(f"an integer past 64 bits: {value}") from None


def _int_dec(reader):
    return reader.unpack(_I64, "an integer")


INT = (_int_enc, _int_dec, 8)


def _bool_enc(out, value):
    if type(value) is not bool:
        raise OpStreamError(f"not true or false: {value!r:.60}")
    out.append(b"\x01" if value else b"\x00")


def _bool_dec(reader):
    flag = reader.unpack(_U8, "a flag")
    if flag > 1:
        raise OpStreamError(f"a flag of {flag}, not 0 or 1")
    return flag == 1


BOOL = (_bool_enc, _bool_dec, 1)


def _opt_bool_enc(out, value):
    if value is not None and type(value) is not bool:
        raise OpStreamError(f"not true, false or null: {value!r:.60}")
    out.append(b"\x00" if value is None else b"\x02" if value else b"\x01")


def _opt_bool_dec(reader):
    flag = reader.unpack(_U8, "a flag")
    if flag > 2:
        raise OpStreamError(f"a flag of {flag}, not 0, 1 or 2")
    return None if flag == 0 else flag == 2


OPT_BOOL = (_opt_bool_enc, _opt_bool_dec, 1)


def optional(codec):
    enc, dec, _ = codec

    def encode(out, value):
        if value is None:
            out.append(b"\x00")
        else:
            out.append(b"\x01")
            enc(out, value)

    def decode(reader):
        flag = reader.unpack(_U8, "a presence flag")
        if flag > 1:
            raise OpStreamError(f"a presence flag of {flag}, not 0 or 1")
        return dec(reader) if flag else None
    return encode, decode, 1


OPT_INT = optional(INT)


def _text(value):
    if type(value) is not str:
        raise OpStreamError(f"not a string: {value!r:.60}")
    return value.encode("utf-8", "surrogatepass")


def _str_enc(out, value):
    if value is None:
        out.append(b"\x00\x00\x00\x00")
        return
    data = _text(value)
    out.append(_U32.pack(len(data) + 1))
    out.append(data)


def _utf8(data):
    try:
        return str(data, "utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise OpStreamError(f"a string that is not UTF-8 ({exc.reason})") from None


def _str_dec(reader):
    length = reader.unpack(_U32, "a string's length")
    return None if not length else _utf8(reader.take(length - 1, "a string"))


STR = (_str_enc, _str_dec, 4)


def _bytes_enc(out, value):
    if value is None:
        out.append(b"\x00\x00\x00\x00")
        return
    if type(value) is not bytes:
        raise OpStreamError(f"not bytes: {value!r:.60}")
    out.append(_U32.pack(len(value) + 1))
    out.append(value)


def _bytes_dec(reader):
    length = reader.unpack(_U32, "a length")
    return None if not length else bytes(reader.take(length - 1, "bytes"))


BYTES = (_bytes_enc, _bytes_dec, 4)


def _count(reader, least, what):
    if reader.left() < 4:   # (the message is built only then)
        reader.unpack(_U32, f"the count of {what}")
    count = reader.unpack(_U32, what)
    if count * least > reader.left():
        raise OpStreamError(f"{count} {what} declared, {reader.left()} bytes left at byte "
                            f"{reader.pos}")
    return count


def tuple_of(codec, what="items"):
    enc, dec, least = codec

    def encode(out, value):
        if type(value) is not tuple:
            raise OpStreamError(f"not a tuple: {value!r:.60}")
        out.append(_U32.pack(len(value)))
        for item in value:
            enc(out, item)

    def decode(reader):
        return tuple(dec(reader) for _ in range(_count(reader, least, what)))
    return encode, decode, 4


def pair(first, second):
    enc1, dec1, least1 = first
    enc2, dec2, least2 = second

    def encode(out, value):
        if type(value) is not tuple or len(value) != 2:
            raise OpStreamError(f"not a pair: {value!r:.60}")
        enc1(out, value[0])
        enc2(out, value[1])

    def decode(reader):
        return dec1(reader), dec2(reader)
    return encode, decode, least1 + least2


def record(cls, *codecs):
    """A frozen record as its fields, in order."""
    fields = cls.__slots__ if hasattr(cls, "__slots__") else cls._fields
    assert len(fields) == len(codecs), cls
    names = tuple(fields)

    def encode(out, value):
        if type(value) is not cls:
            raise OpStreamError(f"not a {cls.__name__}: {value!r:.60}")
        for name, (enc, _, _) in zip(names, codecs):
            enc(out, getattr(value, name))

    def decode(reader):
        return cls(*[dec(reader) for _, dec, _ in codecs])
    return encode, decode, sum(least for _, _, least in codecs)


def _column_bytes(values):
    column = array("q", values)
    if _SWAP:
        column.byteswap()
    return column.tobytes()


def _column(reader, count, what):
    column = array("q")
    column.frombytes(reader.take(8 * count, what))
    if _SWAP:
        column.byteswap()
    return column


def _names_enc(out, names):
    """``names`` (strings) as one count, one blob and one length each, in code points: a few
    C-level passes whatever their number."""
    if type(names) is not tuple and type(names) is not list:
        raise OpStreamError(f"not a tuple of names: {names!r:.60}")
    try:
        lengths = array("I", map(len, names))
        blob = "".join(names).encode("utf-8", "surrogatepass")
    except TypeError:
        raise OpStreamError("a name that is not a string") from None
    if _SWAP:
        lengths.byteswap()
    out.append(_U32.pack(len(names)))
    out.append(_U32.pack(len(blob)))
    out.append(lengths.tobytes())
    out.append(blob)


def _names_dec(reader):
    count = _count(reader, 4, "names")
    size = reader.unpack(_U32, "the names' length")
    lengths = array("I")
    lengths.frombytes(reader.take(4 * count, "the names' lengths"))
    if _SWAP:
        lengths.byteswap()
    text = _utf8(reader.take(size, "names"))
    ends = list(accumulate(lengths))
    if (ends[-1] if ends else 0) != len(text):
        raise OpStreamError("the names' lengths do not add up to their text")
    return tuple(map(text.__getitem__, map(slice, chain((0,), ends), ends)))


NAMES = (_names_enc, _names_dec, 8)
_CONFIG_COLUMNS = ("read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
_TOPIC_NAME = attrgetter("topic_name")


def _configs_enc(out, configs):
    if type(configs) is not tuple or not all(type(c) is TopicConfig for c in configs):
        raise OpStreamError("topic configs that are not a tuple of TopicConfig")
    _names_enc(out, list(map(_TOPIC_NAME, configs)))
    try:
        for attr in _CONFIG_COLUMNS:
            out.append(_column_bytes(map(attrgetter(attr), configs)))
    except (OverflowError, TypeError):
        raise OpStreamError("a topic config's number is not a 64-bit integer") from None


def _configs_dec(reader):
    names = _names_dec(reader)
    count = len(names)
    if count * 8 * len(_CONFIG_COLUMNS) > reader.left():
        raise OpStreamError(f"{count} topic configs, {reader.left()} bytes left for their numbers")
    columns = [_column(reader, count, "a column of topic numbers") for _ in _CONFIG_COLUMNS]
    return tuple(map(TopicConfig, names, *columns))


CONFIGS = (_configs_enc, _configs_dec, 8)
KEY = pair(STR, STR)
ADDRS = tuple_of(pair(INT, STR), "broker addresses")
DATA_VERSION = record(DataVersion, INT, INT, INT)
QUEUE_DATA = record(QueueData, STR, INT, INT, INT, INT)
MAPPING_INFO = record(MappingInfo, STR, optional(tuple_of(pair(INT, OPT_INT), "queue ids")),
                      OPT_BOOL, OPT_INT, STR, STR, OPT_INT)

#: op type -> (tag, field codecs in the record's order): the format, once
SCHEMA = {
    ops.AddToCluster: (1, (STR, STR)),
    ops.RemoveFromCluster: (2, (STR, STR)),
    ops.SetBroker: (3, (STR, STR, ADDRS, BOOL, STR)),
    ops.RemoveBroker: (4, (STR,)),
    ops.PutLive: (5, (KEY, INT, INT, DATA_VERSION, OPT_INT, STR, STR, optional(NAMES), BOOL,
                      STR)),
    ops.RefreshLive: (6, (KEY, INT)),
    ops.RemoveLive: (7, (KEY,)),
    ops.RemoveFilterServers: (8, (KEY, STR)),
    ops.MergeTopics: (9, (STR, CONFIGS, BOOL, BOOL, BYTES, BOOL)),
    ops.PutTopics: (10, (STR, CONFIGS, BOOL, BOOL)),
    ops.PutQueueData: (11, (STR, QUEUE_DATA)),
    ops.RemoveQueueData: (12, (STR, STR)),
    ops.RemoveBrokerTopics: (13, (STR,)),
    ops.DropTopic: (14, (STR,)),
    ops.SetMapping: (15, (STR, MAPPING_INFO, STR)),
    ops.RemoveBrokerMappings: (16, (STR,)),
    ops.RestoreHighWater: (17, (INT, INT, INT)),
    ops.RestoreCluster: (18, (STR, NAMES, INT)),
    ops.RestoreAppliedDigest: (19, (STR, BYTES)),
    ops.RestoreTopics: (20, (tuple_of(QUEUE_DATA, "queue datas"), INT, NAMES)),
    ops.NotifyMinBrokerIdChanged: (21, (ADDRS, STR, STR)),
    ops.InvalidateRoutes: (22, ()),
}
for _type, (_tag, _codecs) in SCHEMA.items():   # a start-up error, not a torn stream later
    assert len(_codecs) == len(_type._fields), f"{_type.__name__}: {len(_codecs)} codecs"
assert tuple(SCHEMA) == ops.OPS and len({tag for tag, _ in SCHEMA.values()}) == len(SCHEMA)
_ENCODERS = {cls: (_U8.pack(tag), tuple(enc for enc, _, _ in codecs))
             for cls, (tag, codecs) in SCHEMA.items()}
_DECODERS = {tag: (cls, tuple(dec for _, dec, _ in codecs))
             for cls, (tag, codecs) in SCHEMA.items()}


def encode_batch(batch):
    """The bytes of ``batch`` (a sequence of ops)."""
    out = [_HEAD.pack(FORMAT, len(batch))]
    for op in batch:
        entry = _ENCODERS.get(type(op))
        if entry is None:
            raise OpStreamError(f"not a route op: {op!r:.60}")
        tag, encoders = entry
        out.append(tag)
        for encode, value in zip(encoders, op):
            encode(out, value)
    return b"".join(out)


def decode_batch(data):
    """The ops of ``data`` (bytes of :func:`encode_batch`), a tuple; :exc:`OpStreamError` when
    it is not one."""
    reader = _Reader(memoryview(data))
    form = reader.unpack(_U8, "the format")
    if form != FORMAT:
        raise OpStreamError(f"format {form}, this server reads {FORMAT}")
    count = _count(reader, 1, "ops")
    batch = []
    for _ in range(count):
        tag = reader.unpack(_U8, "an op's tag")
        entry = _DECODERS.get(tag)
        if entry is None:
            raise OpStreamError(f"an op tag {tag} at byte {reader.pos - 1}, not a route op")
        cls, decoders = entry
        batch.append(cls(*[decode(reader) for decode in decoders]))
    if reader.left():
        raise OpStreamError(f"{reader.left()} bytes after the last op")
    return tuple(batch)
