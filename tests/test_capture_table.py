"""The capture decoder's live connection table is bounded (issue 20 item 6): a capture of many
half-open connections, each holding the start of an unfinished frame, costs the same table at
every size past the bound -- in connections and in buffered bytes -- in both engines, which
evict the same connections (the one idle longest first), emit the same rows for them and count
them alike."""
import pyarrow as pa
import pytest

import capture_synth as cs
from capture_ranges import decode_in_ranges
from rocketpy.capture import engine
from rocketpy.capture.arrow import ARROW_SCHEMA
from rocketpy.capture.decoder import MAX_BUFFERED_BYTES, MAX_CONNECTIONS
from rocketpy.capture.source import open_capture
from rocketpy.remoting import RemotingCommand

FRAME = RemotingCommand.request(105, ext_fields={"topic": "T" * 900}, opaque=1).encode()
HEAD = 200                     # bytes of FRAME each connection sends before going quiet


def half_open(tmp_path, n: int):
    """``n`` connections from distinct clients: SYN, SYN+ACK, ACK, then the first HEAD bytes of
    a frame; never closed."""
    segs = []
    for i in range(n):
        client = (f"10.{1 + i // 65000}.{i // 250 % 260 % 256}.{1 + i % 250}", 20000 + i % 40000)
        conv = cs.conversation([(0, FRAME)], client=client, mss=HEAD, close=False, acks=False,
                               t0_ns=1_700_000_000_000_000_000 + i * 10_000, step_ns=1_000)
        segs += conv[:4]
    path = tmp_path / f"half-open-{n}.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs), cs.LINKTYPES["ether"]))
    return path


def run(cls, path, **options):
    d = cls(**options)
    with open_capture(str(path)) as (f, info):
        batches = list(d.decode(f, str(path), info))
    table = d.table
    batches += d.finish()
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA), dict(d.stats), table


def both(path, **options):
    """Both engines: identical rows and counters; the native table (equal to the reference's)."""
    want, want_stats, want_table = run(engine.PyBatchDecoder, path, **options)
    got, got_stats, got_table = run(engine.NativeBatchDecoder, path, **options)
    assert got.to_pylist() == want.to_pylist()
    assert got_stats == want_stats
    assert got_table == want_table
    return want, want_stats, want_table


def test_the_defaults_bound_the_table():
    assert MAX_CONNECTIONS == 100_000
    assert MAX_BUFFERED_BYTES == 256 << 20


@pytest.mark.parametrize("n", [1000, 2000, 4000])
def test_past_the_connection_bound_the_table_stays_the_same_size(tmp_path, n):
    bound = 500
    rows, stats, table = both(half_open(tmp_path, n), max_connections=bound)
    assert table["peak_connections"] == bound
    assert table["connections"] == bound
    assert table["peak_buffered_bytes"] == bound * HEAD
    assert stats["connections"] == n
    assert stats["evicted_connections"] == n - bound
    # every connection's unfinished frame is reported once: evicted ones when evicted
    incomplete = [r for r in rows.to_pylist() if r["error"]]
    assert len(incomplete) == n
    assert all(r["error"].startswith("capture ended mid-frame: 200 of") for r in incomplete)
    # the first connections went first (the ones idle longest)
    evicted_first = [r["conn"] for r in incomplete[:3]]
    assert evicted_first == [r["conn"] for r in sorted(incomplete, key=lambda r: r["ts_ns"])[:3]]


@pytest.mark.parametrize("n", [1000, 2000, 4000])
def test_past_the_byte_bound_the_table_holds_the_same_bytes(tmp_path, n):
    bound = 100 * HEAD + HEAD // 2          # room for 100 connections' unfinished frames
    _rows, stats, table = both(half_open(tmp_path, n), max_buffered_bytes=bound)
    assert table["peak_buffered_bytes"] <= bound
    assert table["peak_connections"] == 101       # the 101st is counted before its frame arrives
    assert table["buffered_bytes"] == 100 * HEAD
    assert stats["evicted_connections"] == n - 100


def test_without_a_bound_in_sight_nothing_is_evicted(tmp_path):
    _rows, stats, table = both(half_open(tmp_path, 1000))
    assert table["peak_connections"] == 1000
    assert table["peak_buffered_bytes"] == 1000 * HEAD
    assert "evicted_connections" not in stats


@pytest.mark.parametrize("n", [1000, 2000])
def test_a_range_decode_is_bounded_too(tmp_path, n):
    """The Spark job decodes big captures in byte ranges: a range's decoder keeps the same bound
    and counts its evictions, as the whole-capture one (it kept every connection a range
    opened: the peak was n)."""
    path = str(half_open(tmp_path, n))
    results = {}
    for name in ("python", "native"):
        peaks = []
        table, stats, _ = decode_in_ranges([path], 1 << 30, name, peaks=peaks,
                                           max_connections=300)
        assert peaks == [300]
        assert stats["evicted_connections"] == n - 300, stats
        rows = table.to_pylist()
        incomplete = [r for r in rows if r["error"]]
        assert len({r["conn"] for r in incomplete}) == n     # every connection still reported
        results[name] = rows, dict(stats)
    assert results["python"] == results["native"]
