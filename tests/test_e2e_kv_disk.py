"""End to end (issue 20, item 7 and the full disk): the KV store of a real ``twistd
rocketnamesrv``.

* A put into a big table appends its record to the log and leaves ``kvConfig.json`` alone (it
  used to rewrite the whole file: ~9 s at 16 MiB), and the entry count has a bound.
* A full disk, made with ``RLIMIT_FSIZE`` on the server process: a put the disk refuses is
  answered SYSTEM_ERROR and changes nothing (it used to stay in memory, served by GET); the
  next goes to a new log segment; a table too big for the file stays whole in the log, fits
  in the file again after deletes, and once the limit is lifted every put and the final file
  write succeed.
"""
import json
import os
import re
import urllib.request

import pytest

from serverproc import PATIENCE, RemotingClient, running_server, wait_until

pytestmark = pytest.mark.network


def _put(client, key, value):
    return client.call(100, {"namespace": "ns", "key": key, "value": value})


def _get(client, key):
    answer = client.call(101, {"namespace": "ns", "key": key})
    return (answer.ext_fields or {}).get("value") if answer.code == 0 else answer.code


def test_a_put_into_a_big_table_leaves_the_file_alone_and_entries_are_bounded(tmp_path):
    kv_path = tmp_path / "kvConfig.json"
    entries = 1 << 15
    kv_path.write_text(json.dumps({"configTable": {"ns": {f"k{i}": "v" for i in range(entries)}}}))
    before = kv_path.read_bytes()
    with running_server("-D", f"kvConfigMaxEntries={entries + 1}", kv_path=str(kv_path)) as server:
        client = RemotingClient(server.port)
        try:
            assert _put(client, "new", "value").code == 0
            assert _get(client, "new") == "value"
            assert kv_path.read_bytes() == before            # the put went to the log only
            assert (tmp_path / "kvConfig.json.log.1").read_bytes() == b'["ns","new","value"]\n'
            refused = _put(client, "one-more", "v")
            assert (refused.code, refused.remark) == (29, (
                f"Can not put KV config: the KV table would hold {entries + 2} entries, over "
                f"kvConfigMaxEntries={entries + 1}"))
            assert _put(client, "k7", "replaced").code == 0  # a replacement adds no entry
        finally:
            client.close()
        assert server.stop() in (0, -15)
    table = json.loads(kv_path.read_text())["configTable"]["ns"]   # the stop compacted
    assert len(table) == entries + 1 and table["new"] == "value" and table["k7"] == "replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kvConfig.json", "kvConfig.json.bak"]


def _file_table(kv_path):
    try:
        return json.loads(kv_path.read_text())["configTable"]["ns"]
    except FileNotFoundError:
        return None


def test_a_full_disk_refuses_puts_without_changing_anything_and_the_store_recovers(tmp_path):
    kv_path = tmp_path / "kvConfig.json"
    limit = 100 * 1024                                       # bytes any one file may hold
    big = 70 * 1024                                          # > 64 KiB: a log this big compacts
    with running_server("-D", "kvConfigMaxValueBytes=131072", "--web=tcp:0:interface=127.0.0.1",
                        kv_path=str(kv_path), file_size_limit=limit) as server:
        web = server.wait_for_log(r"rocketpy web endpoint on (http://\S+)")
        url = re.search(r"(http://\S+?)/? ", web + " ").group(1)
        client = RemotingClient(server.port)
        try:
            assert _put(client, "a", "1" * big).code == 0
            refused = _put(client, "b", "x" * (limit + 1))   # its record does not fit
            assert refused.code == 1, refused
            assert refused.remark.startswith("the KV config could not be written to disk: "), refused
            assert _get(client, "b") == 22                   # the refused put changed nothing
            assert _get(client, "a") == "1" * big
            acked = {"a": "1" * big}
            for i in range(20):                              # the table outgrows the file
                answer = _put(client, f"k{i}", str(i % 10) * big)
                assert answer.code in (0, 1), answer         # a full segment: the next is new
                if answer.code == 0:
                    acked[f"k{i}"] = str(i % 10) * big
                assert _get(client, f"k{i}") == acked.get(f"k{i}", 22)
                if "compaction failed" in server.log_text() and len(acked) > 4:
                    break
            server.wait_for_log("kv config compaction failed.*File too large")
            assert server.kv_table() == {"ns": acked}        # the log keeps every acked put
            for key in sorted(acked)[1:]:                    # deletes shrink it...
                assert client.call(102, {"namespace": "ns", "key": key}).code == 0

            def fits_again():                                # ...and it fits again
                if _file_table(kv_path) == {"a": "4" * big}:
                    return True
                assert _put(client, "a", "4" * big).code in (0, 1)   # the log grows: due
                return False
            wait_until(fits_again, lambda: "the compacted file:\n" + server.log_text()[-2000:],
                       step=0.05)
            metrics = urllib.request.urlopen(f"{url}/metrics", timeout=PATIENCE).read().decode()
            counts = dict(re.findall(r"^rocketpy_kv_(compactions|compaction_failures)_total (\S+)$",
                                     metrics, re.M))
            assert float(counts["compactions"]) >= 1 and float(counts["compaction_failures"]) >= 1
            server.free_disk()                               # the disk is back
            assert _put(client, "b", "5" * (limit + 1)).code == 0
            assert _put(client, "d", "6" * big).code == 0
        finally:
            client.close()
        assert server.stop() in (0, -15)
    assert _file_table(kv_path) == {"a": "4" * big, "b": "5" * (limit + 1), "d": "6" * big}
    assert os.path.getsize(kv_path) > limit                  # the final write passed the old limit
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kvConfig.json", "kvConfig.json.bak"]
