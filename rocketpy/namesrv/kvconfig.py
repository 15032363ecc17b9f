"""NameServer state layer: namespaced key/value settings (Java ``KVConfigManager``).

Same file as Java, same default place (``~/namesrv/kvConfig.json``, NamesrvConfig
``kvConfigPath``), same format (``{"configTable":{"namespace":{"key":"value"}}}``, fastjson,
maps in Java ``HashMap`` order) and the same ``.bak`` copy of the previous content, so a Java
NameServer and rocketpy can take over each other's file. Unlike Java, every write is atomic (see
:mod:`rocketpy.namesrv.fileio`). Like Java, every put and delete persists at once, and deleting a
namespace's last key keeps the (now empty) namespace: GET_KVLIST_BY_NAMESPACE then answers
``{"table":{}}``, and REGISTER_BROKER answers carry that body.
"""
from rocketpy.remoting import fastjson
from rocketpy.remoting.bodies import KVTable
from rocketpy.remoting.errors import BodyDecodeError
from rocketpy.remoting.javahash import hashmap_order

from .fileio import read_text, write_file_java

__all__ = ["KVConfigManager", "KVConfigError"]


class KVConfigError(ValueError):
    """The KV file exists but is not the JSON Java writes (Java fails to start on it too)."""


def _java_order(mapping, high_water):
    from .javaorder import hashmap_capacity
    return {k: mapping[k] for k in hashmap_order(list(mapping), hashmap_capacity(high_water))}


class KVConfigManager:
    def __init__(self, path=None):
        if path is None:
            from .config import NamesrvConfig
            path = NamesrvConfig().kv_config_path
        self.path = path
        self.config_table = {}
        self._high = {}            # namespace -> largest key count (HashMap capacity)
        self._namespaces_high = 0

    def load(self):
        """``load()``: merge the file's table into memory; a missing file is an empty table."""
        content = read_text(self.path)
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
                target = self.config_table.setdefault(str(namespace), {})
                target.update({str(k): None if v is None else str(v) for k, v in kv.items()})
                self._saw(str(namespace))

    def _saw(self, namespace):
        self._high[namespace] = max(self._high.get(namespace, 0), len(self.config_table[namespace]))
        self._namespaces_high = max(self._namespaces_high, len(self.config_table))

    def to_json(self):
        """``KVConfigSerializeWrapper.toJson()``."""
        table = {ns: _java_order(kv, self._high.get(ns, 0)) for ns, kv in self.config_table.items()}
        return fastjson.dumps({"configTable": _java_order(table, self._namespaces_high)})

    def persist(self):
        """Write the table (old content kept as ``.bak``); errors are logged-and-ignored in Java."""
        try:
            write_file_java(self.path, self.to_json().decode("utf-8"))
        except OSError:
            return False
        return True

    def put_kv_config(self, namespace, key, value):
        self.config_table.setdefault(namespace, {})[key] = value
        self._saw(namespace)
        self.persist()

    def delete_kv_config(self, namespace, key):
        table = self.config_table.get(namespace)
        if table is not None:
            table.pop(key, None)
        self.persist()

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
