"""NameServer state layer: namespaced key/value settings (Java ``KVConfigManager``).

Java's file, place (``~/namesrv/kvConfig.json``, ``kvConfigPath``), format (fastjson, maps in
``HashMap`` order) and ``.bak`` copy, so a Java NameServer and rocketpy can take over each
other's file. As in Java, deleting a namespace's last key keeps the empty namespace
(GET_KVLIST_BY_NAMESPACE and REGISTER_BROKER answers then carry ``{"table":{}}``).

Unlike Java (which rewrites the whole file inside ``putKVConfig`` on the request thread, ~9 s for
a 16 MiB table of a million tiny entries), this layer does no I/O, and a change costs its own
size: a put or delete returns the :class:`~rocketpy.namesrv.pending.FileWrite` that appends its
record to a log beside the file (``log``, the service layer's
:class:`~rocketpy.service.fileio.AppendLog`), answered once durable on the server's writer thread
(records queued together are one append: :mod:`rocketpy.transport.offload`). The table in memory
changes only when the record is durable, in log order, so a change the disk refused changes
nothing. Once the log holds as many bytes as the file (at least :data:`COMPACT_MIN_BYTES`), the
next write starts a new log segment and hands a snapshot of the table to ``compact`` (another
thread), which rewrites ``kvConfig.json`` (``store``, atomic, with its ``.bak``) and removes the
segments it covers: the file is then what Java reads. A start replays the file, then the
segments in order; a clean stop compacts once more.

rocketpy bounds what a put may store (:data:`KV_LIMIT_KEYS`; Java has no bound), refusing with a
remark naming the bound."""
import json
from collections import deque

from rocketpy.remoting import fastjson
from rocketpy.remoting.bodies import KVTable
from rocketpy.remoting.errors import BodyDecodeError
from rocketpy.remoting.javahash import hashmap_order

from .javaorder import hashmap_capacity
from .pending import FileWrite, write_now
from .settings import IntSettings

__all__ = ["KVConfigManager", "KVConfigError", "KVLimits", "KV_LIMIT_KEYS", "KVSnapshot",
           "COMPACT_MIN_BYTES"]

#: ``(property key, attribute, default, meaning)``; sizes are UTF-8 bytes, 0 turns a bound off.
KV_LIMIT_KEYS = (
    ("kvConfigMaxNamespaceBytes", "max_namespace_bytes", 256,
     "longest namespace PUT_KV_CONFIG accepts"),
    ("kvConfigMaxKeyBytes", "max_key_bytes", 1024, "longest key PUT_KV_CONFIG accepts"),
    ("kvConfigMaxValueBytes", "max_value_bytes", 64 * 1024, "longest value PUT_KV_CONFIG accepts"),
    ("kvConfigMaxTotalBytes", "max_total_bytes", 16 * 1024 * 1024,
     "the whole KV table (namespaces, keys and values); a put that would pass it is refused"),
    ("kvConfigMaxEntries", "max_entries", 100_000,
     "keys in the whole KV table; a put of a new key past it is refused"),
)
#: The log is compacted into the file once it holds as many bytes as the file, and at least
#: this many: a change then costs its own record plus, amortised, about as many bytes again.
COMPACT_MIN_BYTES = 64 * 1024
#: Bytes counted per entry on top of its key and value (the JSON around them).
_ENTRY_OVERHEAD = 6


class KVConfigError(ValueError):
    """The KV file exists but is not the JSON Java writes (Java fails to start on it too)."""


class KVLimits(IntSettings):
    """The bounds of :data:`KV_LIMIT_KEYS`."""

    KEYS = KV_LIMIT_KEYS


def _size(text):
    return 0 if text is None else len(text.encode("utf-8", "replace"))


def _java_order(mapping, high_water):
    return {k: mapping[k] for k in hashmap_order(list(mapping), hashmap_capacity(high_water))}


class KVSnapshot:
    """The table as it was when taken (a copy: the manager goes on changing), rendered to the
    file's text on any thread."""

    __slots__ = ("table", "high", "namespaces_high")

    def __init__(self, table, high, namespaces_high):
        self.table = table
        self.high = high
        self.namespaces_high = namespaces_high

    def to_json(self):
        """``KVConfigSerializeWrapper.toJson()``."""
        table = {ns: _java_order(kv, self.high.get(ns, 0)) for ns, kv in self.table.items()}
        return fastjson.dumps({"configTable": _java_order(table, self.namespaces_high)})


class _Change:
    """A put (``value`` a string or None) or delete waiting for its log record; ``written`` is
    None until the writer says whether the record is durable."""

    __slots__ = ("namespace", "key", "value", "delete", "line", "grows", "new_entry", "written")

    def __init__(self, namespace, key, value, delete):
        self.namespace = namespace
        self.key = key
        self.value = value
        self.delete = delete
        record = [namespace, key] if delete else [namespace, key, value]
        # ASCII only: one line per record whatever the text (lone surrogates included)
        self.line = (json.dumps(record, separators=(",", ":")) + "\n").encode("ascii")
        self.grows = 0
        self.new_entry = 0
        self.written = None


class _Batch:
    """What one append writes: the records taken, their bytes, the segment, and a compaction
    to run right after the append (when there is no ``compact`` thread, or at the last write)."""

    __slots__ = ("changes", "data", "segment", "compaction")

    def __init__(self, changes, segment, compaction):
        self.changes = changes
        self.data = b"".join(change.line for change in changes)
        self.segment = segment
        self.compaction = compaction


class _Compaction:
    """A snapshot to write as the file, and the last log segment it covers; ``ok`` and ``size``
    are set by the thread that writes it."""

    __slots__ = ("snapshot", "covers", "ok", "size", "noted")

    def __init__(self, snapshot, covers):
        self.snapshot = snapshot
        self.covers = covers
        self.ok = None
        self.size = 0
        self.noted = False


def _log_records(data):
    """``(record, size)`` of each complete line of a log segment; a torn last line (a crash
    mid-append) and lines that are not records are left out (their count is ``skipped``)."""
    lines = data.split(b"\n")
    skipped = 1 if lines[-1] else 0
    records = []
    for line in lines[:-1]:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if (isinstance(record, list) and len(record) in (2, 3)
                and all(isinstance(x, str) for x in record[:2])
                and (len(record) == 2 or record[2] is None or isinstance(record[2], str))):
            records.append((record, len(line) + 1))
        else:
            skipped += 1
    return records, skipped


class KVConfigManager:
    """The KV table. ``store(path, text)`` makes the file hold ``text`` durably and ``log`` (an
    :class:`~rocketpy.service.fileio.AppendLog`) keeps the changes since (both blocking; run by
    the writer threads); ``compact(job)``, when given, runs a compaction
    :class:`~rocketpy.namesrv.pending.FileWrite` on another thread and calls its ``settle``
    after; ``limits`` bounds what a put may store. Without ``store`` the table lives in memory."""

    def __init__(self, path=None, store=None, limits=None, log=None, compact=None, journal=None):
        if path is None:
            from .config import NamesrvConfig
            path = NamesrvConfig().kv_config_path
        if (store is None) != (log is None):
            raise ValueError("a KV store needs both the file's store and its log")
        self.path = path
        self.store = store
        self.log = log
        self.compact = compact
        self.limits = limits or KVLimits()
        #: ``journal(namespace, key, value, delete)``: told each change as the table makes it
        #: (a replica's feed, :mod:`rocketpy.namesrv.replica`); None: nobody is
        self.journal = journal
        self.config_table = {}
        self._high = {}            # namespace -> largest key count (HashMap capacity)
        self._namespaces_high = 0
        self._total = 0            # bytes of the table, as the bounds count them
        self._entries = 0          # keys of the table
        self._waiting = deque()    # changes not applied yet, in log order
        self._untaken = []         # changes no write has taken yet
        self._reserved_bytes = 0   # what the waiting changes may add, for the bounds
        self._reserved_entries = 0
        self._segment = 1          # the log segment appends go to
        self._rotate = False       # start a new segment (an append failed: the file may be full)
        self._log_bytes = 0        # bytes logged since the last compaction began
        self._file_bytes = 0       # size of the file as last loaded or written
        self._compaction = None    # the compaction under way
        #: puts refused since start, by bound (the property key)
        self.refused = {key: 0 for key, *_ in KV_LIMIT_KEYS}
        #: compactions done and failed since start
        self.compactions = 0
        self.compactions_failed = 0

    def load_json(self, content):
        """``load()`` of the file's text: merge its table into memory; None or empty text is an
        empty table."""
        if not content:
            return
        self._file_bytes = len(content)
        try:
            data = fastjson.loads(content)
        except BodyDecodeError as exc:
            raise KVConfigError(f"{self.path}: {exc}") from None
        table = data.get("configTable") if isinstance(data, dict) else None
        if not isinstance(table, dict):
            return
        for namespace, kv in table.items():
            if isinstance(kv, dict):
                self._namespace(str(namespace))
                for key, value in kv.items():
                    self._set(str(namespace), str(key), None if value is None else str(value))

    def replay_log(self):
        """Apply the log's segments (after :meth:`load_json`), oldest first; later appends go to
        a new segment (never after a torn line). The number of lines skipped."""
        if self.log is None:
            return 0
        segments = self.log.segments()
        skipped = 0
        for number in segments:
            records, torn = _log_records(self.log.read(number))
            skipped += torn
            for record, size in records:
                self._log_bytes += size
                if len(record) == 2:
                    self._delete(*record)
                else:
                    self._set(*record)
        self._segment = segments[-1] + 1 if segments else 1
        return skipped

    @property
    def total_bytes(self):
        """The table's size as the bounds count it."""
        return self._total

    @property
    def waiting(self):
        """Changes waiting for the disk."""
        return len(self._waiting)

    @property
    def entries(self):
        """The keys of the table."""
        return self._entries

    def _saw(self, namespace):
        self._high[namespace] = max(self._high.get(namespace, 0), len(self.config_table[namespace]))
        self._namespaces_high = max(self._namespaces_high, len(self.config_table))

    def _namespace(self, namespace):
        table = self.config_table.get(namespace)
        if table is None:
            table = self.config_table[namespace] = {}
            self._total += _size(namespace) + _ENTRY_OVERHEAD
            self._saw(namespace)
        return table

    def _set(self, namespace, key, value):
        table = self._namespace(namespace)
        if key in table:
            self._total -= _size(key) + _size(table[key]) + _ENTRY_OVERHEAD
        else:
            self._entries += 1
        table[key] = value
        self._total += _size(key) + _size(value) + _ENTRY_OVERHEAD
        self._saw(namespace)

    def _delete(self, namespace, key):
        table = self.config_table.get(namespace)
        if table is not None and key in table:
            self._total -= _size(key) + _size(table.pop(key)) + _ENTRY_OVERHEAD
            self._entries -= 1

    # -- bounds ------------------------------------------------------------------------------

    def _growth(self, namespace, key, value):
        """(bytes, entries) a put adds to the table as it is now."""
        table = self.config_table.get(namespace)
        grows = _size(key) + _size(value) + _ENTRY_OVERHEAD
        if table is None:
            grows += _size(namespace) + _ENTRY_OVERHEAD
        elif key in table:
            return grows - (_size(key) + _size(table[key]) + _ENTRY_OVERHEAD), 0
        return grows, 1

    def refusal(self, namespace, key, value):
        """None when a put of ``value`` at ``namespace``/``key`` is within the bounds (counting
        the changes still waiting for the disk), else the remark that refuses it (and the
        refusal is counted)."""
        limits = self.limits
        sizes = (("namespace", namespace, limits.max_namespace_bytes, "kvConfigMaxNamespaceBytes"),
                 ("key", key, limits.max_key_bytes, "kvConfigMaxKeyBytes"),
                 ("value", value, limits.max_value_bytes, "kvConfigMaxValueBytes"))
        for what, text, bound, name in sizes:
            size = _size(text)
            if bound and size > bound:
                self.refused[name] += 1
                return f"the {what} is {size} bytes, over {name}={bound}"
        grows, new_entry = self._growth(namespace, key, value)
        entries = self._entries + self._reserved_entries + new_entry
        if limits.max_entries and new_entry and entries > limits.max_entries:
            self.refused["kvConfigMaxEntries"] += 1
            return (f"the KV table would hold {entries} entries, over "
                    f"kvConfigMaxEntries={limits.max_entries}")
        total = self._total + self._reserved_bytes + grows
        if limits.max_total_bytes and total > limits.max_total_bytes:
            self.refused["kvConfigMaxTotalBytes"] += 1
            return (f"the KV table would hold {total} bytes, over "
                    f"kvConfigMaxTotalBytes={limits.max_total_bytes}")
        return None

    # -- changes: each returns the write that makes it durable --------------------------------

    def put_kv_config(self, namespace, key, value):
        if self.log is None:
            self._set(namespace, key, value)
            self._journal(namespace, key, value, False)
            return None
        change = _Change(namespace, key, value, False)
        grows, change.new_entry = self._growth(namespace, key, value)
        change.grows = max(grows, 0)
        return self._logged(change)

    def delete_kv_config(self, namespace, key):
        if self.log is None:
            self._delete(namespace, key)
            self._journal(namespace, key, None, True)
            return None
        return self._logged(_Change(namespace, key, None, True))

    def _logged(self, change):
        self._reserved_bytes += change.grows
        self._reserved_entries += change.new_entry
        self._waiting.append(change)
        self._untaken.append(change)
        return FileWrite(self._log_key, self._take, self._append,
                         lambda: self._settle(change))

    @property
    def _log_key(self):
        return self.path + ".log"

    def _take(self, final=False):
        """Prepare an append (on the state's thread, the writer idle): the changes queued so
        far, and, when due, a compaction of the table as it is now -- every change the
        segments so far hold is applied, none after -- with appends moving to a new segment."""
        self._apply_written()
        changes, self._untaken = self._untaken, []
        compaction = None
        due = self._log_bytes >= max(COMPACT_MIN_BYTES, self._file_bytes)
        if final:   # the file gets these changes too: written only once they are appended
            compaction = self._compaction = _Compaction(self._snapshot_with(changes), self._segment)
            batch = _Batch(changes, self._segment, compaction)
            self._segment += 1
            self._log_bytes = 0
            return batch
        if due and self._compaction is None:
            compaction = self._compaction = _Compaction(self.snapshot(), self._segment)
            self._segment += 1
            self._log_bytes = 0
            self._rotate = False
            if self.compact is not None:
                self._hand_over(compaction)
                compaction = None
        elif self._rotate:
            self._segment += 1
            self._rotate = False
        return _Batch(changes, self._segment, compaction)

    def _hand_over(self, compaction):
        self.compact(FileWrite(self.path, lambda: compaction, self._write_compaction,
                               lambda: self._compacted(compaction)))

    def _append(self, batch):
        """Append a batch (a writer thread): its changes are durable, or none is."""
        try:
            if batch.data:
                self.log.append(batch.segment, batch.data)
        except BaseException:
            for change in batch.changes:
                change.written = False
            if batch.compaction is not None:
                batch.compaction.ok = False   # not tried: the file would miss these changes
            self._rotate = True
            raise
        for change in batch.changes:
            change.written = True
        if batch.compaction is not None:
            self._write_compaction(batch.compaction)

    def _write_compaction(self, compaction):
        """Write the snapshot as the file and drop the segments it covers (any thread)."""
        try:
            text = compaction.snapshot.to_json().decode("utf-8")
            self.store(self.path, text)
            self.log.remove_through(compaction.covers)
        except BaseException:
            compaction.ok = False
            raise
        compaction.size = len(text)
        compaction.ok = True

    def _compacted(self, compaction):
        """A compaction is over (the state's thread); whether it succeeded."""
        if self._compaction is compaction:
            self._compaction = None
        if compaction.noted:
            return bool(compaction.ok)
        compaction.noted = True
        if compaction.ok:
            self.compactions += 1
            self._file_bytes = compaction.size
        else:
            self.compactions_failed += 1
        return bool(compaction.ok)

    def _settle(self, change):
        self._apply_written()
        return change.written is True

    def _apply_written(self):
        """Apply, in log order, the changes the writer has settled (a refused one is dropped);
        note a compaction that ran with the last append."""
        waiting = self._waiting
        while waiting and waiting[0].written is not None:
            change = waiting.popleft()
            self._reserved_bytes -= change.grows
            self._reserved_entries -= change.new_entry
            if change.written:
                self._log_bytes += len(change.line)
                if change.delete:
                    self._delete(change.namespace, change.key)
                else:
                    self._set(change.namespace, change.key, change.value)
                self._journal(change.namespace, change.key, change.value, change.delete)
        compaction = self._compaction
        if compaction is not None and compaction.ok is not None:
            self._compacted(compaction)

    def _journal(self, namespace, key, value, delete):
        if self.journal is not None:
            self.journal(namespace, key, value, delete)

    def restore(self, snapshot):
        """Fill an empty table with ``snapshot`` (a :class:`KVSnapshot`, its dicts in the
        order the table held them), high-water marks included: the table then answers as the
        one it was taken from (a replica's start)."""
        for namespace, kv in snapshot.table.items():
            self._namespace(namespace)
            for key, value in kv.items():
                self._set(namespace, key, value)
        self._high.update(snapshot.high)
        self._namespaces_high = max(self._namespaces_high, snapshot.namespaces_high)

    # -- persistence -----------------------------------------------------------------------------

    def snapshot(self):
        """The table now, for rendering elsewhere (copies of the dicts, O(entries))."""
        return KVSnapshot({ns: dict(kv) for ns, kv in self.config_table.items()},
                          dict(self._high), self._namespaces_high)

    def _snapshot_with(self, changes):
        """The table as it will be once ``changes`` are applied."""
        snapshot = self.snapshot()
        table, high = snapshot.table, snapshot.high
        for change in changes:
            kv = table.get(change.namespace)
            if change.delete:
                if kv is not None:
                    kv.pop(change.key, None)
                continue
            if kv is None:
                kv = table[change.namespace] = {}
            kv[change.key] = change.value
            high[change.namespace] = max(high.get(change.namespace, 0), len(kv))
        snapshot.namespaces_high = max(snapshot.namespaces_high, len(table))
        return snapshot

    def to_json(self):
        """``KVConfigSerializeWrapper.toJson()``."""
        return self.snapshot().to_json()

    def persist_job(self):
        """The :class:`~rocketpy.namesrv.pending.FileWrite` that appends what waits and writes
        the whole table to the file (Java's ``persist()``; the last write at a clean stop), or
        None without a ``store``. Run it once no compaction is under way elsewhere."""
        if self.store is None:
            return None
        taken = []

        def prepare():
            batch = self._take(final=True)
            taken.append(batch.compaction)
            return batch

        def settle():
            self._apply_written()
            compaction = taken[0] if taken else None
            return compaction is not None and self._compacted(compaction)

        return FileWrite(self._log_key, prepare, self._append, settle)

    def persist(self):
        """Write it now, here (tests, tools); False when that failed (Java logs it and carries on)."""
        return write_now(self.persist_job())

    # -- reads -------------------------------------------------------------------------------------
    def get_kv_config(self, namespace, key):
        table = self.config_table.get(namespace)
        return None if table is None else table.get(key)

    def get_kv_list_by_namespace(self, namespace):
        """The ``KVTable`` body (the namespace in HashMap order), or None if the namespace never
        existed."""
        table = self.config_table.get(namespace)
        if table is None:
            return None
        return KVTable(table=_java_order(table, self._high.get(namespace, 0))).to_json()
