"""NameServer state layer: namespaced key/value settings (Java ``KVConfigManager``).

Java's file, place (``~/namesrv/kvConfig.json``, ``kvConfigPath``), format (fastjson, maps in
``HashMap`` order) and ``.bak`` copy, so a Java NameServer and rocketpy can take over each
other's file. As in Java, deleting a namespace's last key keeps the empty namespace
(GET_KVLIST_BY_NAMESPACE and REGISTER_BROKER answers then carry ``{"table":{}}``).

Unlike Java (which persists inside ``putKVConfig`` on the request thread), this layer does no
I/O: a put or delete returns the :class:`~rocketpy.namesrv.pending.FileWrite` that makes it
durable, answered once written on the server's writer thread (several puts in one write:
:mod:`rocketpy.transport.offload`), from a snapshot taken on the reactor thread. The builder
hands in ``store(path, text)`` (the service layer's atomic write); without it the table lives in
memory only.

rocketpy bounds what a put may store (:data:`KV_LIMIT_KEYS`; Java has no bound), refusing with a
remark naming the bound."""
from rocketpy.remoting import fastjson
from rocketpy.remoting.bodies import KVTable
from rocketpy.remoting.errors import BodyDecodeError
from rocketpy.remoting.javahash import hashmap_order

from .javaorder import hashmap_capacity
from .pending import FileWrite, write_now
from .settings import IntSettings

__all__ = ["KVConfigManager", "KVConfigError", "KVLimits", "KV_LIMIT_KEYS", "KVSnapshot"]

#: ``(property key, attribute, default, meaning)``; sizes are UTF-8 bytes, 0 turns a bound off.
KV_LIMIT_KEYS = (
    ("kvConfigMaxNamespaceBytes", "max_namespace_bytes", 256,
     "longest namespace PUT_KV_CONFIG accepts"),
    ("kvConfigMaxKeyBytes", "max_key_bytes", 1024, "longest key PUT_KV_CONFIG accepts"),
    ("kvConfigMaxValueBytes", "max_value_bytes", 64 * 1024, "longest value PUT_KV_CONFIG accepts"),
    ("kvConfigMaxTotalBytes", "max_total_bytes", 16 * 1024 * 1024,
     "the whole KV table (namespaces, keys and values); a put that would pass it is refused"),
)
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


class KVConfigManager:
    """The KV table. ``store(path, text)`` makes the file hold ``text`` durably (blocking; run
    by the writer thread); ``limits`` bounds what a put may store."""

    def __init__(self, path=None, store=None, limits=None):
        if path is None:
            from .config import NamesrvConfig
            path = NamesrvConfig().kv_config_path
        self.path = path
        self.store = store
        self.limits = limits or KVLimits()
        self.config_table = {}
        self._high = {}            # namespace -> largest key count (HashMap capacity)
        self._namespaces_high = 0
        self._total = 0            # bytes of the table, as the bounds count them
        #: puts refused since start, by bound (the property key)
        self.refused = {key: 0 for key, *_ in KV_LIMIT_KEYS}

    def load_json(self, content):
        """``load()`` of the file's text: merge its table into memory; None or empty text is an
        empty table."""
        if not content:
            return
        try:
            data = fastjson.loads(content)
        except BodyDecodeError as exc:
            raise KVConfigError(f"{self.path}: {exc} (the previous content is in {self.path}.bak)") from None
        table = data.get("configTable") if isinstance(data, dict) else None
        if not isinstance(table, dict):
            return
        for namespace, kv in table.items():
            if isinstance(kv, dict):
                self._namespace(str(namespace))
                for key, value in kv.items():
                    self._set(str(namespace), str(key), None if value is None else str(value))

    @property
    def total_bytes(self):
        """The table's size as the bounds count it."""
        return self._total

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
        table[key] = value
        self._total += _size(key) + _size(value) + _ENTRY_OVERHEAD
        self._saw(namespace)

    # -- bounds ------------------------------------------------------------------------------

    def refusal(self, namespace, key, value):
        """None when a put of ``value`` at ``namespace``/``key`` is within the bounds, else the
        remark that refuses it (and the refusal is counted)."""
        limits = self.limits
        sizes = (("namespace", namespace, limits.max_namespace_bytes, "kvConfigMaxNamespaceBytes"),
                 ("key", key, limits.max_key_bytes, "kvConfigMaxKeyBytes"),
                 ("value", value, limits.max_value_bytes, "kvConfigMaxValueBytes"))
        for what, text, bound, name in sizes:
            size = _size(text)
            if bound and size > bound:
                self.refused[name] += 1
                return f"the {what} is {size} bytes, over {name}={bound}"
        if limits.max_total_bytes:
            table = self.config_table.get(namespace)
            grows = _size(key) + _size(value) + _ENTRY_OVERHEAD
            if table is None:
                grows += _size(namespace) + _ENTRY_OVERHEAD
            elif key in table:
                grows -= _size(key) + _size(table[key]) + _ENTRY_OVERHEAD
            if self._total + grows > limits.max_total_bytes:
                self.refused["kvConfigMaxTotalBytes"] += 1
                return (f"the KV table would hold {self._total + grows} bytes, over "
                        f"kvConfigMaxTotalBytes={limits.max_total_bytes}")
        return None

    # -- changes: each returns the write that makes it durable --------------------------------

    def put_kv_config(self, namespace, key, value):
        self._set(namespace, key, value)
        return self.persist_job()

    def delete_kv_config(self, namespace, key):
        table = self.config_table.get(namespace)
        if table is not None and key in table:
            self._total -= _size(key) + _size(table.pop(key)) + _ENTRY_OVERHEAD
        return self.persist_job()

    # -- persistence -----------------------------------------------------------------------------

    def snapshot(self):
        """The table now, for rendering elsewhere (copies of the dicts, O(entries))."""
        return KVSnapshot({ns: dict(kv) for ns, kv in self.config_table.items()},
                          dict(self._high), self._namespaces_high)

    def to_json(self):
        """``KVConfigSerializeWrapper.toJson()``."""
        return self.snapshot().to_json()

    def persist_job(self):
        """The :class:`~rocketpy.namesrv.pending.FileWrite` of the whole table (Java's
        ``persist()``), or None without a ``store``."""
        if self.store is None:
            return None
        return FileWrite(self.path, self.snapshot, self._write)

    def _write(self, snapshot):
        self.store(self.path, snapshot.to_json().decode("utf-8"))

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
