"""The KV store's log (issue 20, item 7 and the full disk): a put costs its own record whatever
the table's size, the entry count is bounded, a change the disk refused changes nothing, the
store recovers by itself when the disk does, and a start replays the file then the log."""
import errno
import json
import os

from rocketpy.namesrv.kvconfig import COMPACT_MIN_BYTES, KVConfigManager, KVLimits
from rocketpy.namesrv.pending import write_now
from rocketpy.service import fileio


class Disk:
    """A fake disk for the store and the log: counts the bytes written and fails like a full
    disk (``full``) or a file size limit (``file_limit``: EFBIG past it, per file)."""

    def __init__(self, file_limit=None):
        self.file_limit = file_limit
        self.full = False
        self.file = None
        self.files_written = 0
        self.segments_ = {}
        self.bytes_written = 0

    def _check(self, size):
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if self.file_limit is not None and size > self.file_limit:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    # the store
    def __call__(self, path, text):
        self._check(len(text))
        self.file = text
        self.files_written += 1
        self.bytes_written += len(text)

    # the log
    def segments(self):
        return sorted(self.segments_)

    def read(self, number):
        return self.segments_.get(number, b"")

    def append(self, number, data):
        self._check(len(self.segments_.get(number, b"")) + len(data))
        self.segments_[number] = self.segments_.get(number, b"") + data
        self.bytes_written += len(data)

    def remove_through(self, number):
        for old in [n for n in self.segments_ if n <= number]:
            del self.segments_[old]

    def restart(self, **limits):
        """What a restart loads from this disk."""
        kv = KVConfigManager("/kv.json", store=self, log=self, limits=KVLimits(**limits))
        kv.load_json(self.file)
        kv.replay_log()
        return kv


def _java_file(entries):
    return json.dumps({"configTable": {"ns": {f"key{i}": "v" for i in range(entries)}}})


def _put(kv, key, value, namespace="ns"):
    """A put as the processor does it: refused by a bound, or written and settled."""
    refusal = kv.refusal(namespace, key, value)
    if refusal is not None:
        return refusal
    return write_now(kv.put_kv_config(namespace, key, value))


def test_a_puts_cost_does_not_grow_with_the_table():
    """Bytes written by 200 puts into tables of 2^14 and 2^15 entries: the same (the whole
    file was rewritten per put: 2^15 entries cost twice as much)."""
    written = []
    for entries in (1 << 14, 1 << 15):
        disk = Disk()
        disk.file = _java_file(entries)
        kv = disk.restart(max_entries=0)
        assert kv.entries == entries
        for i in range(200):
            assert _put(kv, f"new{i % 10}", "x" * 100) is True
        assert disk.files_written == 0          # no compaction yet: the log is smaller
        written.append(disk.bytes_written)
    assert written[0] == written[1] == 200 * len(b'["ns","new0","' + b"x" * 100 + b'"]\n')


def test_compactions_are_amortised_over_the_log():
    """Many puts: the file is rewritten once the log holds as many bytes as the file, so the
    bytes written per byte logged stay below 3 at any table size."""
    ratios = []
    for entries in (1 << 12, 1 << 13):
        disk = Disk()
        disk.file = _java_file(entries)
        kv = disk.restart(max_entries=0)
        logged = 0
        for i in range(4000):
            assert _put(kv, f"new{i % 50}", "y" * 100) is True
            logged += len(b'["ns","new0","' + b"y" * 100 + b'"]\n') + (i % 50 >= 10)
        assert disk.files_written >= 2 and kv.compactions == disk.files_written
        ratios.append(disk.bytes_written / logged)
        assert json.loads(disk.file)["configTable"]["ns"]["new7"] == "y" * 100
    assert max(ratios) < 3, ratios


def test_the_entry_count_is_bounded_counting_changes_that_wait_for_the_disk():
    disk = Disk()
    kv = disk.restart(max_entries=3)
    for key in ("a", "b"):
        assert _put(kv, key, "v") is True
    waiting = kv.put_kv_config("ns", "c", "v")            # not written yet: still counted
    assert kv.refusal("ns", "d", "v") == "the KV table would hold 4 entries, over kvConfigMaxEntries=3"
    assert kv.refusal("ns", "a", "w") is None            # a replacement adds no entry
    assert kv.refused["kvConfigMaxEntries"] == 1
    assert write_now(waiting) is True
    assert _put(kv, "d", "v").startswith("the KV table would hold 4 entries")
    assert write_now(kv.delete_kv_config("ns", "a")) is True
    assert _put(kv, "d", "v") is True
    assert kv.entries == 3 and disk.restart().entries == 3


def test_a_put_the_disk_refused_changes_nothing_and_puts_recover_with_the_disk():
    disk = Disk()
    kv = disk.restart(max_total_bytes=200)
    assert _put(kv, "k", "old") is True
    before = (kv.total_bytes, kv.entries, {ns: dict(t) for ns, t in kv.config_table.items()})
    disk.full = True
    for key, value in (("k", "new"), ("other", "v" * 100)):
        job = kv.put_kv_config("ns", key, value)
        assert write_now(job) is False
    assert write_now(kv.delete_kv_config("ns", "k")) is False
    assert kv.get_kv_config("ns", "k") == "old" and kv.get_kv_config("ns", "other") is None
    assert (kv.total_bytes, kv.entries, kv.config_table) == before
    assert kv.refusal("ns", "big", "v" * 100) is None     # refused puts reserve nothing
    disk.full = False                                     # the disk is back: so are the puts
    assert _put(kv, "k", "new") is True
    assert kv.get_kv_config("ns", "k") == "new"
    assert disk.restart().config_table == {"ns": {"k": "new"}}


def test_after_deletes_the_table_fits_in_the_file_again():
    """A file size limit: a compaction the limit refuses keeps the log (every segment is
    started by a compaction, so each stays small enough), and once deletes shrink the table it
    fits in the file again."""
    limit = 3 * COMPACT_MIN_BYTES
    disk = Disk(file_limit=limit)
    kv = disk.restart(max_total_bytes=0, max_value_bytes=0)
    value = "v" * (COMPACT_MIN_BYTES // 2)
    answers = [_put(kv, f"k{i}", value) for i in range(12)]   # 2 x the limit in all
    assert all(answers), answers
    assert kv.compactions_failed >= 1 and kv.compactions >= 1   # the table outgrew the file
    assert disk.file is not None and len(disk.file) <= limit
    written = {f"k{i}" for i, ok in enumerate(answers) if ok}
    assert set(kv.config_table["ns"]) == written          # exactly the acknowledged puts
    assert set(disk.restart().config_table["ns"]) == written
    for key in sorted(written)[2:]:
        assert write_now(kv.delete_kv_config("ns", key)) is True
    assert kv.persist() is True                           # fits again
    assert len(json.loads(disk.file)["configTable"]["ns"]) == 2
    assert disk.segments() == []


def test_changes_reach_memory_in_log_order_whatever_order_they_are_settled_in():
    disk = Disk()
    kv = disk.restart()
    first = kv.put_kv_config("ns", "k", "1")
    second = kv.put_kv_config("ns", "k", "2")
    batch = second.prepare()          # group commit: the newest job takes every change queued
    second.write(batch)
    assert second.settle() is True and kv.get_kv_config("ns", "k") == "2"
    assert first.settle() is True and kv.get_kv_config("ns", "k") == "2"
    assert disk.restart().get_kv_config("ns", "k") == "2"


def test_a_start_replays_the_file_then_the_log_skipping_a_torn_last_line(tmp_path):
    path = str(tmp_path / "kvConfig.json")
    log = fileio.AppendLog(path)
    fileio.write_file_java(path, '{"configTable":{"ns":{"a":"file","b":"file"}}}')
    log.append(1, b'["ns","a","log"]\n["ns","b"]\nnot a record\n')
    log.append(2, b'["ns","c","\\ud800"]\n["ns","d","torn')   # a kill -9 mid-append
    kv = KVConfigManager(path, store=fileio.write_file_java, log=log)
    kv.load_json(fileio.read_text(path))
    assert kv.replay_log() == 2
    assert kv.config_table == {"ns": {"a": "log", "c": "\ud800"}}
    assert write_now(kv.put_kv_config("ns", "e", "v")) is True
    assert log.segments() == [1, 2, 3]                    # never appended after a torn line
    assert kv.persist() is True
    assert log.segments() == []
    assert json.loads(open(path).read()) == {"configTable": {"ns": {"a": "log", "c": "?", "e": "v"}}}


def test_an_append_that_fails_is_cut_back(tmp_path, monkeypatch):
    log = fileio.AppendLog(str(tmp_path / "kv.json"))
    log.append(1, b'["ns","a","1"]\n')
    real_write = os.write

    def short_then_full(fd, data):
        monkeypatch.setattr(fileio.os, "write", lambda fd, data: (_ for _ in ()).throw(
            OSError(errno.ENOSPC, "No space left on device")))
        return real_write(fd, bytes(data[:5]))

    monkeypatch.setattr(fileio.os, "write", short_then_full)
    try:
        log.append(1, b'["ns","b","2"]\n')
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    else:
        raise AssertionError("the append did not fail")
    monkeypatch.undo()
    assert log.read(1) == b'["ns","a","1"]\n'


def test_puts_a_full_disk_refuses_leave_no_segment_behind(tmp_path, monkeypatch):
    """Issue 31 point 9: every refused put moves to a new segment; each used to stay as an empty
    file for good (1,994 files for 2,000 puts)."""
    path = str(tmp_path / "kvConfig.json")
    log = fileio.AppendLog(path)
    kv = KVConfigManager(path, store=fileio.write_file_java, log=log)
    assert write_now(kv.put_kv_config("ns", "kept", "v")) is True
    monkeypatch.setattr(fileio.os, "write", lambda fd, data: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, "No space left on device")))
    for i in range(50):
        assert write_now(kv.put_kv_config("ns", f"k{i}", "v")) is False
    assert log.segments() == [1]
    assert sorted(os.listdir(tmp_path)) == ["kvConfig.json.log.1"]
    monkeypatch.undo()
    assert write_now(kv.put_kv_config("ns", "after", "v")) is True     # the disk has room again
    restarted = KVConfigManager(path, store=fileio.write_file_java, log=log)
    restarted.load_json(fileio.read_text(path))
    restarted.replay_log()
    assert restarted.config_table == {"ns": {"kept": "v", "after": "v"}}


def test_a_compaction_due_with_a_failed_append_is_tried_again():
    """Without a compactor the compaction runs right after the append that made it due; when
    that append fails, it is counted as failed and the next is due after another file's worth
    of log (it used to be waited for forever)."""
    disk = Disk()
    kv = disk.restart(max_value_bytes=0)
    big = "v" * COMPACT_MIN_BYTES
    assert _put(kv, "a", big) is True                     # the log now calls for a compaction
    disk.full = True
    assert _put(kv, "b", "1") is False
    assert disk.files_written == 0 and kv.compactions_failed == 1
    disk.full = False
    assert _put(kv, "b", "2") is True
    assert _put(kv, "c", big) is True
    assert disk.files_written == 0
    assert _put(kv, "d", "3") is True                     # another file's worth: compacted
    assert disk.files_written == 1 and kv.compactions == 1
    assert json.loads(disk.file)["configTable"]["ns"] == {"a": big, "b": "2", "c": big}
    assert disk.restart().config_table["ns"] == {"a": big, "b": "2", "c": big, "d": "3"}
