"""KVConfigManager: Java's file format, default place and .bak copy; crash-safe writes."""
import json
import os

import pytest

from rocketpy.namesrv import KVConfigManager
from rocketpy.namesrv import fileio
from rocketpy.namesrv.kvconfig import KVConfigError

# What a Java 5.x NameServer writes (KVConfigSerializeWrapper.toJson(), HashMap order).
JAVA_FILE = '{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4"},"anchor_ns":{"k2":"{\\"a\\":1}"}}}'


def test_default_path_is_javas():
    assert KVConfigManager().path == os.path.join(os.path.expanduser("~"), "namesrv", "kvConfig.json")


def test_loads_a_java_written_file(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text(JAVA_FILE)
    kv = KVConfigManager(str(path))
    kv.load()
    assert kv.get_kv_config("ORDER_TOPIC_CONFIG", "TopicA") == "broker-a:4"
    assert kv.get_kv_config("anchor_ns", "k2") == '{"a":1}'
    assert kv.get_kv_list_by_namespace("anchor_ns") == b'{"table":{"k2":"{\\"a\\":1}"}}'
    assert kv.get_kv_list_by_namespace("missing") is None


def test_missing_or_empty_file_is_an_empty_table(tmp_path):
    kv = KVConfigManager(str(tmp_path / "none.json"))
    kv.load()
    assert kv.config_table == {}
    (tmp_path / "empty.json").write_text("")
    kv = KVConfigManager(str(tmp_path / "empty.json"))
    kv.load()
    assert kv.config_table == {}


def test_broken_file_refuses_to_load(tmp_path):
    (tmp_path / "kv.json").write_text('{"configTable":')
    with pytest.raises(KVConfigError):
        KVConfigManager(str(tmp_path / "kv.json")).load()


def test_every_change_persists_with_a_bak_of_the_previous_content(tmp_path):
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigManager(str(path))
    kv.put_kv_config("ns", "k1", "v1")
    first = path.read_text()
    assert json.loads(first) == {"configTable": {"ns": {"k1": "v1"}}}
    assert not (tmp_path / "namesrv" / "kvConfig.json.bak").exists()
    kv.put_kv_config("ns", "k2", "v2")
    assert (tmp_path / "namesrv" / "kvConfig.json.bak").read_text() == first
    kv.delete_kv_config("ns", "k1")
    assert json.loads(path.read_text()) == {"configTable": {"ns": {"k2": "v2"}}}
    # a namespace emptied by deletes stays, as in Java
    kv.delete_kv_config("ns", "k2")
    assert kv.get_kv_list_by_namespace("ns") == b'{"table":{}}'
    reloaded = KVConfigManager(str(path))
    reloaded.load()
    assert reloaded.config_table == {"ns": {}}


def test_output_is_in_java_hashmap_order(tmp_path):
    kv = KVConfigManager(str(tmp_path / "kv.json"))
    for key in ("k1", "k2", "k10", "zz", "TopicA"):
        kv.put_kv_config("ns", key, "v")
    body = kv.get_kv_list_by_namespace("ns").decode()
    from rocketpy.remoting.javahash import hashmap_order
    assert list(json.loads(body)["table"]) == hashmap_order(["k1", "k2", "k10", "zz", "TopicA"])


def test_a_crash_before_the_rename_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "kv.json"
    kv = KVConfigManager(str(path))
    kv.put_kv_config("ns", "k", "old")
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("power cut")

    monkeypatch.setattr(fileio.os, "replace", crash)
    kv.config_table["ns"]["k"] = "new"
    assert kv.persist() is False         # Java logs and carries on
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("crash_at", range(12))
def test_a_crash_at_any_step_leaves_old_or_new(tmp_path, monkeypatch, crash_at):
    """Kill the write at each os-level step: the file is always the complete old or new text."""
    path = tmp_path / "kv.json"
    kv = KVConfigManager(str(path))
    kv.put_kv_config("ns", "k", "old")
    old = path.read_bytes()
    steps = []
    real = {name: getattr(fileio.os, name) for name in ("open", "fsync", "replace", "close")}

    def make(name):
        def step(*args, **kwargs):
            steps.append(name)
            if len(steps) == crash_at + 1:
                raise KeyboardInterrupt("killed")   # a process death, not an I/O error
            return real[name](*args, **kwargs)
        return step

    for name in real:
        monkeypatch.setattr(fileio.os, name, make(name))
    kv.config_table["ns"]["k"] = "new"
    try:
        kv.persist()
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    content = path.read_bytes()
    assert content in (old, kv.to_json())
    assert json.loads(content)["configTable"]["ns"]["k"] in ("old", "new")


def test_fsync_before_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(fileio.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(fileio.os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b)))
    fileio.write_atomic(str(tmp_path / "f"), b"x")
    assert calls[:2] == ["fsync", "replace"]
    assert (tmp_path / "f").read_bytes() == b"x"
