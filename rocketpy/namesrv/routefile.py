"""NameServer state layer: the route snapshot file format, version 2 (a rocketpy addition; the
images are :mod:`rocketpy.namesrv.routeimage`'s). Pure: bytes in, bytes out; the service layer
reads and writes the files (:mod:`rocketpy.service.routesnapshot`).

A snapshot is two *parts*, each a file: the main part (``routeSnapshotPath``: clusters, broker
groups, live brokers, rewritten every few seconds) names the routes part (layouts, topics,
mappings, ``<path>.routes-<digest>``, rewritten only when the routes changed) by its size and
digest. A part is::

    preamble  = magic "\\x89RPYROUTES\\r\\n" (12 bytes), format u16 (2), part u16 (1 main, 2 routes)
    record    = length u32 | kind u8 | payload (length bytes) | CRC-32 u32 of the 5+length bytes before
    part      = preamble HEAD record* END          (integers big-endian)

Every payload is ASCII JSON (strings escaped, so any name fits) of at most
:data:`MAX_RECORD` bytes; the writer cuts sections into records of about
:data:`TARGET_RECORD`. HEAD declares what follows (profile, counts, high-water marks; the main
part: when it was taken and its routes part), the records come in kind order, and END holds the
record count, its own offset and the BLAKE2b-256 of every byte before it; nothing follows END.
:doc:`/server` (warm restart) documents every record's fields.

The reader trusts nothing (a stranger may have written the file): it checks each record's length
against :data:`MAX_RECORD` before reading it and its CRC before parsing it, the declared counts
against the route bounds before reading on and the running totals against the declared counts
as it goes, every value's type and range, names unique where the tables key by them, and at
the end the digest and every total. It parses one record per :meth:`PartReader.step`, so a
caller lets other work in between. Any failure is one :exc:`SnapshotRefused` naming the reason;
nothing of a refused snapshot is used; a snapshot of another format version (version 1 had no
static mapping's owner) is refused the same way."""
import hashlib
import json
import struct
import zlib

from rocketpy import __version__
from rocketpy.remoting import bodies
from rocketpy.remoting.errors import RemotingCodecError

from .model import BrokerData, DataVersion, MappingInfo, QueueData
from .routeimage import LiveImage, MainImage, RoutesImage

__all__ = ["FORMAT_VERSION", "MAGIC", "MAX_RECORD", "TARGET_RECORD", "SnapshotRefused",
           "ReadLimits", "MainReader", "RoutesReader", "encode_main", "encode_routes",
           "RoutesRef", "routes_file_name", "part_length"]

MAGIC = b"\x89RPYROUTES\r\n"
FORMAT_VERSION = 2
MAIN, ROUTES = 1, 2
_PREAMBLE = struct.Struct(">12sHH")
_RECORD = struct.Struct(">IB")
_CRC = struct.Struct(">I")
#: the largest record payload read (checked before it is read); a static-topic mapping of
#: 65,536 queues takes ~1 MiB
MAX_RECORD = 4 * 1024 * 1024
#: the size the writer cuts records at (a record parses in a few milliseconds)
TARGET_RECORD = 256 * 1024
#: topic names the writer puts in one record before it measures (ASCII JSON: ~30 bytes each)
_NAMES_PER_RECORD = 8192

HEAD, CLUSTERS, GROUPS, LIVE, SHAPES, TOPICS, MAPPINGS, END = 1, 2, 3, 4, 5, 6, 7, 255
_SECTIONS = {MAIN: (CLUSTERS, GROUPS, LIVE), ROUTES: (SHAPES, TOPICS, MAPPINGS)}
_PART_NAMES = {MAIN: "main", ROUTES: "routes"}

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_SEEN_SETS = 16
#: a high-water mark beyond any table (they size Java capacities)
_HIGH_MAX = (1 << 31) - 1


class SnapshotRefused(ValueError):
    """A snapshot that is not used, and why (one line)."""


def routes_file_name(main_name, digest_hex):
    """The routes part's file name beside the main part's."""
    return f"{main_name}.routes-{digest_hex[:16]}"


class RoutesRef:
    """What the main part says of its routes part: file name (beside it), size, digest."""

    __slots__ = ("file", "size", "digest")

    def __init__(self, file, size, digest):
        self.file, self.size, self.digest = file, size, digest

    def __eq__(self, other):
        return isinstance(other, RoutesRef) and (self.file, self.size, self.digest) == (
            other.file, other.size, other.digest)

    def __repr__(self):
        return f"RoutesRef({self.file!r}, {self.size}, {self.digest[:16]}...)"


class ReadLimits:
    """The bounds a snapshot must keep (0 = none): the route state's (``namesrvMaxTopics``,
    ``namesrvMaxTopicBrokerPairs``, ``namesrvMaxBrokers``, ``namesrvMaxFilterServers``) and a
    part's size in bytes (checked before it is read)."""

    #: bytes a part may take per entry the bounds allow, plus a fixed allowance
    BYTES_PER_ENTRY = 512
    BASE_BYTES = 64 * 1024 * 1024

    def __init__(self, max_topics=0, max_pairs=0, max_brokers=0, max_filter_servers=0):
        self.max_topics = max_topics
        self.max_pairs = max_pairs
        self.max_brokers = max_brokers
        self.max_filter_servers = max_filter_servers

    @classmethod
    def from_bounds(cls, bounds):
        """From a :class:`~rocketpy.namesrv.route_bounds.RouteBounds`."""
        return cls(bounds.max_topics, bounds.max_topic_broker_pairs, bounds.max_brokers,
                   bounds.max_filter_servers)

    def max_bytes(self, part):
        """The largest file a part may be (None: no bound, some bound being off)."""
        if part == MAIN:
            if not (self.max_brokers and self.max_filter_servers):
                return None
            entries = 3 * self.max_brokers + self.max_filter_servers
        else:
            if not (self.max_topics and self.max_pairs):
                return None
            entries = self.max_topics + 2 * self.max_pairs
        return self.BASE_BYTES + self.BYTES_PER_ENTRY * entries

    def check(self, what, count, bound, key):
        if bound and count > bound:
            raise SnapshotRefused(f"over the bounds: {count} {what}, over {key}={bound}")


# ------------------------------------------------------------------ writing

def _dumps(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


class _PartWriter:
    def __init__(self, part):
        self.chunks = [_PREAMBLE.pack(MAGIC, FORMAT_VERSION, part)]
        self.size = len(self.chunks[0])
        self.records = 0

    def record(self, kind, payload):
        if len(payload) > MAX_RECORD:
            raise SnapshotRefused(f"a record of {len(payload)} bytes, over {MAX_RECORD} (a name "
                                  "or mapping too large for a snapshot)")
        header = _RECORD.pack(len(payload), kind)
        crc = zlib.crc32(payload, zlib.crc32(header))
        self.chunks += (header, payload, _CRC.pack(crc))
        self.size += len(header) + len(payload) + 4
        self.records += 1

    def items(self, kind, items):
        """``items`` (JSON-ready) in records of about :data:`TARGET_RECORD` bytes."""
        batch, size = [], 2
        for item in items:
            text = _dumps(item)
            if batch and size + len(text) + 1 > TARGET_RECORD:
                self.record(kind, b"[" + b",".join(batch) + b"]")
                batch, size = [], 2
            batch.append(text)
            size += len(text) + 1
        if batch:
            self.record(kind, b"[" + b",".join(batch) + b"]")

    def finish(self):
        digest = hashlib.blake2b(digest_size=32)
        for chunk in self.chunks:
            digest.update(chunk)
        digest = digest.hexdigest()
        self.record(END, _dumps({"records": self.records + 1, "bytes": self.size,
                                 "blake2b": digest}))
        return b"".join(self.chunks), digest


def _qd(qd):
    return [qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag]


def _mapping_text(info):
    """A static-topic mapping as the route answer reads it: its seven fields, through the
    codec's own bean."""
    return bodies.TopicQueueMappingInfo(
        bname=info.bname, curr_id_map=info.ids(), dirty=info.dirty, epoch=info.epoch,
        scope=info.scope, topic=info.topic, total_queues=info.total_queues,
    ).to_json(standard=True).decode("utf-8")


def _topic_records(writer, image):
    """TOPICS records: ``[[names...], [shape, count, ...]]``, about
    :data:`_NAMES_PER_RECORD` names each, halved until a record fits."""
    topics, runs = image.topics, iter(image.runs)
    run = None
    position = 0
    while position < len(topics):
        take = min(_NAMES_PER_RECORD, len(topics) - position)
        while True:
            names = topics[position:position + take]
            payload = _dumps(names)
            if len(payload) <= TARGET_RECORD or take == 1:
                break
            take = max(1, take // 2)
        chunk_runs, need = [], take
        while need:
            if run is None or not run[1]:
                index, count = next(runs)
                run = [index, count]
            used = min(need, run[1])
            chunk_runs += (run[0], used)
            run[1] -= used
            need -= used
        writer.record(TOPICS, b"[" + payload + b"," + _dumps(chunk_runs) + b"]")
        position += take


def encode_routes(image):
    """The routes part of ``image`` (a :class:`~rocketpy.namesrv.routeimage.RoutesImage`):
    ``(bytes, digest hex)``. :exc:`SnapshotRefused` when something cannot be written."""
    writer = _PartWriter(ROUTES)
    writer.record(HEAD, _dumps({
        "part": "routes", "profile": image.profile,
        "counts": {"shapes": len(image.shapes), "topics": len(image.topics),
                   "pairs": image.pairs, "mappings": len(image.mappings)},
        "highWater": {"topics": image.topics_high}}))
    writer.items(SHAPES, ([high, [_qd(qd) for qd in queue_datas]]
                          for queue_datas, high in image.shapes))
    _topic_records(writer, image)
    writer.items(MAPPINGS, ([topic, _mapping_text(info), owner]
                            for topic, info, owner in image.mappings))
    return writer.finish()


def encode_main(image, routes_ref, writer_name=f"rocketpy {__version__}"):
    """The main part of ``image`` (a :class:`~rocketpy.namesrv.routeimage.MainImage`) naming
    ``routes_ref`` (a :class:`RoutesRef`): bytes."""
    writer = _PartWriter(MAIN)
    writer.record(HEAD, _dumps({
        "part": "main", "profile": image.profile, "takenMs": image.taken_ms,
        "writer": writer_name,
        "counts": {"clusters": len(image.clusters), "groups": len(image.groups),
                   "live": len(image.live), "filterServers": image.filter_servers},
        "highWater": {"brokers": image.brokers_high, "clusters": image.clusters_high},
        "routes": {"file": routes_ref.file, "bytes": routes_ref.size,
                   "blake2b": routes_ref.digest}}))
    writer.items(CLUSTERS, ([cluster, list(names), high]
                            for cluster, names, high in image.clusters))
    writer.items(GROUPS, ([data.cluster, data.broker_name,
                           [[bid, addr] for bid, addr in data.broker_addrs.items()],
                           data.enable_acting_master, data.zone_name,
                           None if applied is None else applied.hex()]
                          for data, applied in image.groups))
    writer.items(LIVE, ([e.cluster, e.addr, e.last_update_ms, e.timeout_ms,
                         [e.data_version.counter, e.data_version.timestamp,
                          e.data_version.state_version],
                         e.ha_server_addr, e.broker_name, e.host, e.filter_servers]
                        for e in image.live))
    return writer.finish()[0]


def part_length(data):
    """The length of the part at the start of ``data`` (up to and with its END record), for
    a stream holding one part after another; :exc:`SnapshotRefused` when it has none."""
    offset = _PREAMBLE.size
    while True:
        if offset + _RECORD.size > len(data):
            raise SnapshotRefused("torn: no END record")
        length, kind = _RECORD.unpack_from(data, offset)
        if length > MAX_RECORD:
            raise SnapshotRefused(f"torn: a record of {length} bytes, over {MAX_RECORD}")
        offset += _RECORD.size + length + _CRC.size
        if offset > len(data):
            raise SnapshotRefused("torn: ends inside a record")
        if kind == END:
            return offset


# ------------------------------------------------------------------ reading

def _refuse_constant(name):
    raise ValueError(f"{name} is not a snapshot value")


def _loads(payload, what):
    try:
        return json.loads(payload, parse_float=_refuse_constant, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:   # UnicodeDecodeError is a ValueError
        raise SnapshotRefused(f"torn: {what} record is not JSON ({exc})") from None


def _fail(what, value):
    text = repr(value)
    raise SnapshotRefused(f"torn: {what}: got {text[:60] + '...' if len(text) > 63 else text}")


def _list(value, what, length=None):
    if type(value) is not list or (length is not None and len(value) != length):
        _fail(f"{what} is not a list" + (f" of {length}" if length is not None else ""), value)
    return value


def _str(value, what):
    if type(value) is not str:
        _fail(f"{what} is not a string", value)
    return value


def _opt_str(value, what):
    return None if value is None else _str(value, what)


def _int(value, what, bounds=_INT64):
    if type(value) is not int or not bounds[0] <= value <= bounds[1]:
        _fail(f"{what} is not an integer in {bounds[0]}..{bounds[1]}", value)
    return value


def _bool(value, what):
    if type(value) is not bool:
        _fail(f"{what} is not true or false", value)
    return value


def _dict(value, what, keys):
    if type(value) is not dict or set(value) != set(keys):
        _fail(f"{what} does not have the keys {sorted(keys)}", value)
    return value


class PartReader:
    """Reads one part from ``data`` (bytes), a record per :meth:`step`; ``work`` is the payload
    bytes the last step parsed."""

    PART = None

    def __init__(self, data, limits, profile):
        self.data = data
        self.limits = limits
        self.profile = profile
        self.work = 0
        self._offset = 0
        self._hashed = 0
        self._records = 0
        self._kinds = (HEAD,)
        self._digest = hashlib.blake2b(digest_size=32)
        self.done = False
        self.head = None

    def _record(self):
        data, offset = self.data, self._offset
        if offset == 0:
            if len(data) < _PREAMBLE.size:
                raise SnapshotRefused("torn: shorter than its preamble")
            magic, version, part = _PREAMBLE.unpack_from(data, 0)
            if magic != MAGIC:
                raise SnapshotRefused("not a rocketpy route snapshot (no magic)")
            if version != FORMAT_VERSION:
                raise SnapshotRefused(f"format {version}, this server reads {FORMAT_VERSION}")
            if part != self.PART:
                raise SnapshotRefused(f"a {_PART_NAMES.get(part, part)} part where the "
                                      f"{_PART_NAMES[self.PART]} part belongs")
            offset = _PREAMBLE.size
        if offset + _RECORD.size > len(data):
            raise SnapshotRefused(f"torn: ends at byte {len(data)} before its END record")
        length, kind = _RECORD.unpack_from(data, offset)
        if length > MAX_RECORD:
            raise SnapshotRefused(f"torn: a record of {length} bytes, over {MAX_RECORD}")
        end = offset + _RECORD.size + length
        if end + _CRC.size > len(data):
            raise SnapshotRefused(f"torn: ends at byte {len(data)} inside a record")
        view = memoryview(data)
        (crc,) = _CRC.unpack_from(data, end)
        if zlib.crc32(view[offset:end]) != crc:
            raise SnapshotRefused(f"torn: the CRC of the record at byte {offset} does not match")
        if kind not in self._kinds:
            raise SnapshotRefused(f"torn: record kind {kind} at byte {offset} out of order")
        if kind != END:   # END holds the digest of every byte before it
            self._digest.update(view[self._hashed:end + _CRC.size])
            self._hashed = end + _CRC.size
        self._offset = end + _CRC.size
        self._records += 1
        self.work = length
        return kind, bytes(view[offset + _RECORD.size:end]), offset

    def step(self):
        """Parse the next record; True once the part is read whole and checked."""
        kind, payload, at = self._record()
        if kind == HEAD:
            self.head = head = _loads(payload, "the HEAD")
            if type(head) is not dict:
                _fail("the HEAD is not an object", head)
            if head.get("part") != _PART_NAMES[self.PART]:
                _fail("the HEAD's part", head.get("part"))
            if head.get("profile") != self.profile:
                raise SnapshotRefused(f"from another release profile: "
                                      f"{head.get('profile')!r}, this server answers like "
                                      f"{self.profile!r}")
            self._head(head)
            self._kinds = _SECTIONS[self.PART] + (END,)
            return False
        if kind == END:
            end = _loads(payload, "the END")
            _dict(end, "the END", ("records", "bytes", "blake2b"))
            if end["records"] != self._records or end["bytes"] != at:
                raise SnapshotRefused("torn: the END's record count or offset does not match")
            if end["blake2b"] != self._digest.hexdigest():
                raise SnapshotRefused("torn: the digest does not match")
            if self._offset != len(self.data):
                raise SnapshotRefused("torn: bytes after the END record")
            self._finish()
            self.done = True
            return True
        items = _list(_loads(payload, f"a kind {kind}"), f"record kind {kind}")
        self._kinds = tuple(k for k in self._kinds if k >= kind)
        self._section(kind, items)
        return False

    def _counts(self, head, keys):
        counts = _dict(head.get("counts"), "the HEAD's counts", keys)
        for key in keys:
            _int(counts[key], f"the count of {key}", (0, _INT64[1]))
        return counts

    def _high(self, head, keys):
        high = _dict(head.get("highWater"), "the HEAD's high-water marks", keys)
        for key in keys:
            _int(high[key], f"the high-water mark of {key}", (0, _HIGH_MAX))
        return high

    @staticmethod
    def _more(count, declared, what):
        if count > declared:
            raise SnapshotRefused(f"torn: more {what} than its HEAD declares ({declared})")


class MainReader(PartReader):
    """The main part: a :class:`~rocketpy.namesrv.routeimage.MainImage` (``image``) and its
    :class:`RoutesRef` (``routes``). ``now_ms`` and ``max_age_ms``: a part taken longer ago is
    too old (its brokers have all expired); ``now_ms`` None: taken just now (by a peer, asked
    for it). ``v5_keys``: live brokers are keyed by (cluster, address), not by address."""

    PART = MAIN

    def __init__(self, data, limits, profile, now_ms, max_age_ms, v5_keys):
        super().__init__(data, limits, profile)
        self.now_ms = now_ms
        self.max_age_ms = max_age_ms
        self._v5_keys = v5_keys
        self.image = None
        self.routes = None
        self._groups = set()
        self._live = set()
        self._filters = 0
        self._cluster_names = 0

    def _head(self, head):
        counts = self._counts(head, ("clusters", "groups", "live", "filterServers"))
        high = self._high(head, ("brokers", "clusters"))
        taken = _int(head.get("takenMs"), "the HEAD's takenMs")
        age = 0 if self.now_ms is None else self.now_ms - taken
        if age > self.max_age_ms:
            raise SnapshotRefused(f"too old: taken {age / 1000:.1f} s ago, over "
                                  f"{self.max_age_ms / 1000:g} s (every broker in it expired)")
        if -age > self.max_age_ms:
            raise SnapshotRefused(f"taken {-age / 1000:.1f} s in the future")
        routes = _dict(head.get("routes"), "the HEAD's routes", ("file", "bytes", "blake2b"))
        self.routes = RoutesRef(_str(routes["file"], "the routes file"),
                                _int(routes["bytes"], "the routes size", (0, _INT64[1])),
                                _str(routes["blake2b"], "the routes digest"))
        if "/" in self.routes.file or self.routes.file in ("", ".", ".."):
            _fail("the routes file is not a name beside it", self.routes.file)
        limits = self.limits
        limits.check("broker groups", counts["groups"], limits.max_brokers, "namesrvMaxBrokers")
        limits.check("live brokers", counts["live"], limits.max_brokers, "namesrvMaxBrokers")
        limits.check("clusters", counts["clusters"], limits.max_brokers, "namesrvMaxBrokers")
        limits.check("filter servers", counts["filterServers"], limits.max_filter_servers,
                     "namesrvMaxFilterServers")
        self.counts = counts
        self.image = MainImage(self.profile, taken, brokers_high=high["brokers"],
                               clusters_high=high["clusters"])

    def _section(self, kind, items):
        image, limits = self.image, self.limits
        if kind == CLUSTERS:
            self._more(len(image.clusters) + len(items), self.counts["clusters"], "clusters")
            for item in items:
                cluster, names, high = _list(item, "a cluster", 3)
                names = tuple(_str(n, "a cluster's broker name") for n in _list(names, "names"))
                self._cluster_names += len(names)
                limits.check("broker names in clusters", self._cluster_names,
                             limits.max_brokers and 2 * limits.max_brokers, "namesrvMaxBrokers")
                if len(set(names)) != len(names):
                    _fail("a cluster names a broker twice", cluster)
                image.clusters.append((_str(cluster, "a cluster name"), names,
                                       _int(high, "a cluster's high-water mark", (0, _HIGH_MAX))))
        elif kind == GROUPS:
            self._more(len(image.groups) + len(items), self.counts["groups"], "broker groups")
            for item in items:
                cluster, name, addrs, acting, zone, applied = _list(item, "a broker group", 6)
                name = _str(name, "a broker name")
                if name in self._groups:
                    _fail("a broker group twice", name)
                self._groups.add(name)
                table = {}
                for pair in _list(addrs, "a group's addresses"):
                    bid, addr = _list(pair, "a broker id and address", 2)
                    table[_int(bid, "a broker id")] = _str(addr, "a broker address")
                if len(table) != len(addrs):
                    _fail("a broker id twice in a group", name)
                if applied is not None:
                    try:
                        applied = bytes.fromhex(_str(applied, "an applied digest"))
                    except ValueError:
                        _fail("an applied digest is not hex", applied)
                image.groups.append((BrokerData(_str(cluster, "a group's cluster"), name, table,
                                                _bool(acting, "an acting-master switch"),
                                                _opt_str(zone, "a zone name")), applied))
        else:
            self._more(len(image.live) + len(items), self.counts["live"], "live brokers")
            for item in items:
                (cluster, addr, updated, timeout, version, ha, name, host,
                 filters) = _list(item, "a live broker", 9)
                if (cluster is None) == self._v5_keys:
                    _fail("a live broker's cluster (5.x keys live brokers by cluster and "
                          "address, 4.9 by address)", cluster)
                key = (_opt_str(cluster, "a live broker's cluster"), _str(addr, "an address"))
                if key in self._live:
                    _fail("a live broker twice", key)
                self._live.add(key)
                counter, timestamp, state = _list(version, "a data version", 3)
                if filters is not None:
                    filters = [_str(f, "a filter server") for f in _list(filters, "filters")]
                    self._filters += len(filters)
                    self._more(self._filters, self.counts["filterServers"], "filter servers")
                image.live.append(LiveImage(
                    key[0], key[1], _int(updated, "a last update"), _int(timeout, "a timeout"),
                    DataVersion(_int(counter, "a counter"), _int(timestamp, "a timestamp"),
                                _int(state, "a state version")),
                    _opt_str(ha, "an HA address"), _str(name, "a live broker's name"),
                    _opt_str(host, "a host"), filters))

    def _finish(self):
        image, counts = self.image, self.counts
        if (len(image.clusters), len(image.groups), len(image.live), self._filters) != (
                counts["clusters"], counts["groups"], counts["live"], counts["filterServers"]):
            raise SnapshotRefused("torn: fewer entries than its HEAD declares")


class RoutesReader(PartReader):
    """The routes part named by ``ref`` (a :class:`RoutesRef`): a
    :class:`~rocketpy.namesrv.routeimage.RoutesImage` (``image``)."""

    PART = ROUTES

    def __init__(self, data, limits, profile, ref):
        super().__init__(data, limits, profile)
        if len(data) != ref.size:
            raise SnapshotRefused(f"torn: the routes part has {len(data)} bytes, its main part "
                                  f"says {ref.size}")
        self.ref = ref
        self.image = None
        self._queue_datas = {}
        # the topic names read, in sets by hash: one growing set of a million names doubles
        # in one long step, sixteen sets of a sixteenth each in sixteen short ones
        self._seen = [set() for _ in range(_SEEN_SETS)]
        self._mapped = set()
        self._pairs = 0

    def _head(self, head):
        counts = self._counts(head, ("shapes", "topics", "pairs", "mappings"))
        high = self._high(head, ("topics",))
        limits = self.limits
        limits.check("topics", counts["topics"], limits.max_topics, "namesrvMaxTopics")
        limits.check("topic-broker pairs", counts["pairs"], limits.max_pairs,
                     "namesrvMaxTopicBrokerPairs")
        limits.check("static topic mappings", counts["mappings"], limits.max_pairs,
                     "namesrvMaxTopicBrokerPairs")
        if counts["shapes"] > max(counts["topics"], 0) or high["topics"] < counts["topics"]:
            _fail("the HEAD's counts are not consistent", counts)
        self.counts = counts
        self.image = RoutesImage(self.profile, topics_high=high["topics"])

    def _queue_data(self, item):
        name, read, write, perm, flag = _list(item, "a queue data", 5)
        value = (_str(name, "a queue data's broker"), _int(read, "a read queue count", _INT32),
                 _int(write, "a write queue count", _INT32), _int(perm, "a permission", _INT32),
                 _int(flag, "a topic flag", _INT32))
        found = self._queue_datas.get(value)
        if found is None:   # one record per distinct value, as the registrations make them
            found = self._queue_datas[value] = QueueData(*value)
        return found

    def _unseen(self, names):
        """Note ``names``; False when one was read before (or repeats in ``names``)."""
        parts = [[] for _ in range(_SEEN_SETS)]
        for name in names:
            parts[hash(name) % _SEEN_SETS].append(name)
        for seen, part in zip(self._seen, parts):
            before = len(seen)
            seen.update(part)
            if len(seen) - before != len(part):
                return False
        return True

    def _section(self, kind, items):
        image = self.image
        if kind == SHAPES:
            self._more(len(image.shapes) + len(items), self.counts["shapes"], "layouts")
            for item in items:
                high, queue_datas = _list(item, "a layout", 2)
                queue_datas = tuple(self._queue_data(qd) for qd in _list(queue_datas, "a layout"))
                if not queue_datas or len({qd.broker_name for qd in queue_datas}) != len(queue_datas):
                    _fail("a layout without brokers or with one twice", item)
                if not len(queue_datas) <= _int(high, "a layout's high-water mark", (1, _HIGH_MAX)):
                    _fail("a layout's high-water mark below its size", item)
                image.shapes.append((queue_datas, high))
        elif kind == TOPICS:
            names, runs = _list(items, "a topics record", 2)
            names = _list(names, "topic names")
            runs = _list(runs, "topic runs")
            self._more(len(image.topics) + len(names), self.counts["topics"], "topics")
            if not all(type(name) is str for name in names):
                _fail("a topic name is not a string", next(n for n in names if type(n) is not str))
            if not self._unseen(names):
                _fail("a topic twice", names[0])
            if len(runs) % 2:
                _fail("topic runs are not (layout, count) pairs", runs[:4])
            total, shapes = 0, image.shapes
            for i in range(0, len(runs), 2):
                index = _int(runs[i], "a layout index", (0, len(shapes) - 1))
                count = _int(runs[i + 1], "a run's length", (1, len(names)))
                total += count
                self._pairs += count * len(shapes[index][0])
                if image.runs and image.runs[-1][0] == index:
                    image.runs[-1] = (index, image.runs[-1][1] + count)
                else:
                    image.runs.append((index, count))
            if total != len(names):
                _fail("topic runs do not cover the record's topics", runs[:4])
            self._more(self._pairs, self.counts["pairs"], "topic-broker pairs")
            image.topics.extend(names)
        else:
            self._more(len(image.mappings) + len(items), self.counts["mappings"], "mappings")
            for item in items:
                topic, text, owner = _list(item, "a mapping", 3)
                _loads(_str(text, "a mapping"), "a mapping's")   # strict JSON, as written
                try:
                    info = MappingInfo.of(bodies.TopicQueueMappingInfo.from_json(text))
                except RemotingCodecError as exc:
                    raise SnapshotRefused(f"torn: a mapping does not decode ({exc})") from None
                key = (_str(topic, "a mapping's topic"), info.bname)
                if key in self._mapped:
                    _fail("a mapping twice", key)
                self._mapped.add(key)
                image.mappings.append((topic, info, _opt_str(owner, "a mapping's owner")))

    def _finish(self):
        image, counts = self.image, self.counts
        if (len(image.shapes), len(image.topics), self._pairs, len(image.mappings)) != (
                counts["shapes"], counts["topics"], counts["pairs"], counts["mappings"]):
            raise SnapshotRefused("torn: fewer entries than its HEAD declares")
        if self._digest.hexdigest() != self.ref.digest:
            raise SnapshotRefused("the routes part is not the one its main part names "
                                  "(its digest differs)")
        self._seen = self._mapped = self._queue_datas = None
