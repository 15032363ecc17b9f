"""KVConfigManager: Java's file format, default place and .bak copy; crash-safe writes
(rocketpy.service.fileio); the bounds of a put."""
import json
import os

import pytest

from rocketpy.namesrv import KVConfigManager
from rocketpy.namesrv.kvconfig import KVConfigError, KVLimits
from rocketpy.namesrv.pending import write_now
from rocketpy.service import fileio


def _kv(path, **limits):
    """A manager writing through the server's store and log, its file and log loaded."""
    kv = KVConfigManager(str(path), store=fileio.write_file_java, limits=KVLimits(**limits),
                         log=fileio.AppendLog(str(path)))
    kv.load_json(fileio.read_text(str(path)))
    kv.replay_log()
    return kv


def _durable(job):
    """Run a change's write here, as the writer thread and the answer would."""
    assert write_now(job) is True

# What a Java 5.x NameServer writes (KVConfigSerializeWrapper.toJson(), HashMap order).
JAVA_FILE = '{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4"},"anchor_ns":{"k2":"{\\"a\\":1}"}}}'


def test_default_path_is_javas():
    assert KVConfigManager().path == os.path.join(os.path.expanduser("~"), "namesrv", "kvConfig.json")


def test_loads_a_java_written_file(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text(JAVA_FILE)
    kv = _kv(path)
    assert kv.get_kv_config("ORDER_TOPIC_CONFIG", "TopicA") == "broker-a:4"
    assert kv.get_kv_config("anchor_ns", "k2") == '{"a":1}'
    assert kv.get_kv_list_by_namespace("anchor_ns") == b'{"table":{"k2":"{\\"a\\":1}"}}'
    assert kv.get_kv_list_by_namespace("missing") is None


def test_missing_or_empty_file_is_an_empty_table(tmp_path):
    assert _kv(tmp_path / "none.json").config_table == {}
    (tmp_path / "empty.json").write_text("")
    assert _kv(tmp_path / "empty.json").config_table == {}


def test_broken_file_refuses_to_load(tmp_path):
    (tmp_path / "kv.json").write_text('{"configTable":')
    with pytest.raises(KVConfigError):
        _kv(tmp_path / "kv.json")


def test_every_change_is_logged_and_a_persist_writes_the_file_with_a_bak(tmp_path):
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = _kv(path)
    _durable(kv.put_kv_config("ns", "k1", "v1"))     # each change returns its FileWrite
    assert not path.exists()                          # the log has it
    assert _kv(path).config_table == {"ns": {"k1": "v1"}}
    assert kv.persist() is True
    first = path.read_text()
    assert json.loads(first) == {"configTable": {"ns": {"k1": "v1"}}}
    assert not (tmp_path / "namesrv" / "kvConfig.json.bak").exists()
    _durable(kv.put_kv_config("ns", "k2", "v2"))
    assert kv.persist() is True
    assert (tmp_path / "namesrv" / "kvConfig.json.bak").read_text() == first
    _durable(kv.delete_kv_config("ns", "k1"))
    assert _kv(path).config_table == {"ns": {"k2": "v2"}}
    assert kv.persist() is True
    assert json.loads(path.read_text()) == {"configTable": {"ns": {"k2": "v2"}}}
    # a namespace emptied by deletes stays, as in Java
    _durable(kv.delete_kv_config("ns", "k2"))
    assert kv.get_kv_list_by_namespace("ns") == b'{"table":{}}'
    assert _kv(path).config_table == {"ns": {}}
    assert kv.persist() is True
    assert sorted(p.name for p in path.parent.iterdir()) == ["kvConfig.json", "kvConfig.json.bak"]


def test_the_bak_is_the_previous_file_not_a_second_write(tmp_path, monkeypatch):
    """The .bak is the previous file hard-linked into place: one data write and fsync per
    persist (Java writes the old content a second time)."""
    path = tmp_path / "kv.json"
    kv = _kv(path)
    _durable(kv.put_kv_config("ns", "k", "v1"))
    kv.persist()
    previous = os.stat(path)
    _durable(kv.put_kv_config("ns", "k", "v2"))
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(fileio.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    kv.config_table["ns"]["k"] = "v2"
    kv.persist()
    assert os.stat(str(path) + ".bak").st_ino == previous.st_ino
    assert len(synced) == 3           # the new file, the directory, the directory after the log
    assert json.loads((tmp_path / "kv.json.bak").read_text())["configTable"]["ns"]["k"] == "v1"


def test_the_bak_is_copied_where_there_are_no_hard_links(tmp_path, monkeypatch):
    path = tmp_path / "kv.json"
    kv = _kv(path)
    _durable(kv.put_kv_config("ns", "k", "v1"))
    kv.persist()
    first = path.read_bytes()

    def no_links(src, dst):
        raise PermissionError("no hard links here")

    monkeypatch.setattr(fileio.os, "link", no_links)
    _durable(kv.put_kv_config("ns", "k", "v2"))
    kv.persist()
    assert (tmp_path / "kv.json.bak").read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kv.json", "kv.json.bak"]


def test_without_a_store_nothing_is_written(tmp_path):
    kv = KVConfigManager(str(tmp_path / "kv.json"))
    assert kv.put_kv_config("ns", "k", "v") is None and kv.persist() is True
    assert list(tmp_path.iterdir()) == []


def test_puts_past_a_bound_are_refused_naming_it(tmp_path):
    kv = _kv(tmp_path / "kv.json", max_namespace_bytes=8, max_key_bytes=8, max_value_bytes=16,
             max_total_bytes=100)
    assert kv.refusal("ns", "k", "v" * 16) is None
    assert kv.refusal("n" * 9, "k", "v") == "the namespace is 9 bytes, over kvConfigMaxNamespaceBytes=8"
    assert kv.refusal("ns", "\u00e9" * 5, "v") == "the key is 10 bytes, over kvConfigMaxKeyBytes=8"
    assert kv.refusal("ns", "k", "v" * 17) == "the value is 17 bytes, over kvConfigMaxValueBytes=16"
    for i in range(3):
        assert kv.refusal("ns", f"k{i}", "v" * 16) is None
        _durable(kv.put_kv_config("ns", f"k{i}", "v" * 16))
    assert kv.refusal("ns", "k3", "v" * 16).endswith("over kvConfigMaxTotalBytes=100")
    assert kv.refusal("ns", "k0", "w" * 16) is None          # a replacement does not grow it
    _durable(kv.delete_kv_config("ns", "k0"))
    assert kv.refusal("ns", "k3", "v" * 16) is None
    unbounded = _kv(tmp_path / "kv2.json", max_value_bytes=0, max_total_bytes=0)
    assert unbounded.refusal("ns", "k", "v" * 100_000) is None


def test_the_total_counts_a_loaded_file(tmp_path):
    (tmp_path / "kv.json").write_text(JAVA_FILE)
    assert _kv(tmp_path / "kv.json", max_total_bytes=60).refusal("ns", "k", "v") is not None
    assert _kv(tmp_path / "kv.json", max_total_bytes=200).refusal("ns", "k", "v") is None


def test_output_is_in_java_hashmap_order(tmp_path):
    kv = _kv(tmp_path / "kv.json")
    for key in ("k1", "k2", "k10", "zz", "TopicA"):
        _durable(kv.put_kv_config("ns", key, "v"))
    body = kv.get_kv_list_by_namespace("ns").decode()
    from rocketpy.remoting.javahash import hashmap_order
    assert list(json.loads(body)["table"]) == hashmap_order(["k1", "k2", "k10", "zz", "TopicA"])


def test_a_crash_before_the_rename_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "kv.json"
    kv = _kv(path)
    _durable(kv.put_kv_config("ns", "k", "old"))
    kv.persist()
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("power cut")

    monkeypatch.setattr(fileio.os, "replace", crash)
    kv.config_table["ns"]["k"] = "new"
    assert kv.persist() is False         # Java logs and carries on
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("crash_at", range(10))
def test_a_crash_at_any_step_leaves_old_or_new(tmp_path, monkeypatch, crash_at):
    """Kill the write at each os-level step: the file is always the complete old or new text."""
    path = tmp_path / "kv.json"
    kv = _kv(path)
    _durable(kv.put_kv_config("ns", "k", "old"))
    kv.persist()
    old = path.read_bytes()
    steps = []
    real = {name: getattr(fileio.os, name) for name in ("open", "fsync", "replace", "close", "link")}

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
