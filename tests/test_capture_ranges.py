"""The byte-range pipeline (rocketpy.capture.plan: plan, range decode with read-ahead, stitch)
run without Spark gives the rows and counters of a whole-capture decode, with both engines, on
captures cut into many small ranges: damaged conversations crossing boundaries, one long
connection whose frames straddle several ranges, streams seen from the middle, rotated sets."""
import random

import pytest

import capture_synth as cs
from capture_ranges import decode_in_ranges
from rocketpy.capture import Stats, decode_paths
from rocketpy.capture.arrow import rows_to_batch


@pytest.fixture(autouse=True)
def small_ranges(monkeypatch):
    import rocketpy.capture.split as split
    monkeypatch.setattr(split, "RESYNC_WINDOW", 16 << 10)    # ranges of 32 KiB and up


def _key(r):
    return tuple((k, round(v, 6) if k == "latency_ms" and v is not None else v)
                 for k, v in r.items() if k != "ext_fields") + (
        tuple(sorted(dict(r["ext_fields"] or {}).items())),)


def assert_like_whole(paths, chunk, engine, one_capture=False, min_ranges=3):
    """The range pipeline's rows and counters are the whole-capture decode's.  One documented
    difference: a response the whole decode held behind a hole in its request's direction and
    then paired with a request completed after it (a negative latency) may stay unpaired when
    that hole straddles a range boundary (counted as unanswered instead)."""
    stats = Stats()
    want = rows_to_batch(list(decode_paths([str(p) for p in paths], stats=stats,
                                           one_capture=one_capture))).to_pylist()
    got, got_stats, sizes = decode_in_ranges([str(p) for p in paths], chunk, engine,
                                             one_capture=one_capture)
    assert len(sizes) >= min_ranges
    got = got.to_pylist()
    held = {(r["conn"], r["stream_offset"], r["src"]) for r in want
            if r["latency_ms"] is not None and r["latency_ms"] < 0}
    unpaired = [r for r in got if (r["conn"], r["stream_offset"], r["src"]) in held
                and r["request_code"] is None]
    for r in unpaired:
        r.update(next(w for w in want if (w["conn"], w["stream_offset"], w["src"])
                      == (r["conn"], r["stream_offset"], r["src"])))
    assert sorted(map(_key, got)) == sorted(map(_key, want))
    stats.pop("files", None)
    for code in [w["request_code"] for w in want if (w["conn"], w["stream_offset"], w["src"])
                 in {(r["conn"], r["stream_offset"], r["src"]) for r in unpaired}]:
        got_stats["unanswered_requests"][code] -= 1
    got_stats["unanswered_requests"] = {k: v for k, v in got_stats["unanswered_requests"].items() if v}
    assert dict(got_stats) == dict(stats)
    assert len(unpaired) <= 2
    return want


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("seed", [5, 6, 7])
def test_damaged_conversations_across_boundaries(tmp_path, engine, seed):
    segs = cs.many_conversations(250, seed=seed, damage=True)
    path = tmp_path / "c.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs), 1))
    assert_like_whole([path], 64 << 10, engine, min_ranges=20)


def _long(n_pairs, seed, **kw):
    rng = random.Random(seed)
    frames = cs.sample_exchange(n_pairs, rng, big_every=rng.randint(2, 4))
    return frames, cs.conversation(frames, **kw)


@pytest.mark.parametrize("engine", ["python", "native"])
def test_one_long_connection_with_frames_straddling_ranges(tmp_path, engine):
    frames, segs = _long(400, 1, mss=9000)
    big = RemotingBig()
    segs += cs.conversation(big, client=("10.0.0.7", 41000), mss=1460,
                            t0_ns=1_700_000_000_500_000_000)
    segs.sort(key=lambda s: s.ts_ns)
    path = tmp_path / "l.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs), 1))
    want = assert_like_whole([path], 32 << 10, engine, min_ranges=10)
    assert any(r["frame_len"] > 100_000 for r in want)


def RemotingBig():
    """A request whose body spans several ranges, and its answer."""
    from rocketpy.remoting import RemotingCommand
    req = RemotingCommand.request(310, {"topic": "T"}, body=bytes(range(256)) * 600, opaque=42)
    return [(0, req.encode()), (1, req.create_response(0, remark="ok").encode())]


@pytest.mark.parametrize("engine", ["python", "native"])
def test_streams_seen_from_the_middle(tmp_path, engine):
    _frames, segs = _long(300, 2, mss=1200)
    path = tmp_path / "m.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs[37:]), 1))        # no handshake, cut mid-frame
    assert_like_whole([path], 32 << 10, engine)


@pytest.mark.parametrize("engine", ["python", "native"])
def test_loss_and_retransmissions_at_boundaries(tmp_path, engine):
    _frames, segs = _long(300, 3, mss=700)
    rng = random.Random(3)
    data = cs.data_segments(segs)
    for i in sorted(rng.sample(data, 12), reverse=True):
        segs = cs.retransmit(segs, i, at=min(len(segs), i + 5)) if rng.random() < 0.5 \
            else cs.drop(segs, i)
    path = tmp_path / "d.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs), 1))
    assert_like_whole([path], 32 << 10, engine)


@pytest.mark.parametrize("engine", ["python", "native"])
def test_pcapng_ranges(tmp_path, engine):
    segs = cs.many_conversations(120, seed=8, damage=True)
    path = tmp_path / "n.pcapng"
    path.write_bytes(cs.write_pcapng(cs.packets(segs), 1))
    assert_like_whole([path], 64 << 10, engine)


@pytest.mark.parametrize("engine", ["python", "native"])
def test_rotated_set(tmp_path, engine):
    _frames, segs = _long(500, 4, mss=1460)
    segs += cs.many_conversations(60, seed=4)
    segs.sort(key=lambda s: s.ts_ns)
    pk = cs.packets(segs)
    paths = []
    for i, (a, b) in enumerate([(0, 700), (700, 1900), (1900, len(pk))]):
        paths.append(tmp_path / f"r{i}.pcap")
        paths[-1].write_bytes(cs.write_pcap(pk[a:b], 1))
    assert_like_whole(paths, 32 << 10, engine, one_capture=True)


def test_plans_of_both_scanners_are_equal(tmp_path):
    from rocketpy.capture import engine
    from rocketpy.capture.source import open_capture
    from rocketpy.capture.split import plan_ranges, seek_record
    segs = cs.many_conversations(150, seed=3, damage=True)
    path = tmp_path / "s.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs), 1))
    with open_capture(str(path)) as (_f, info):
        ranges = plan_ranges(info, path.stat().st_size, 32 << 10)
    assert len(ranges) > 10
    for a, b in ranges:
        scans = []
        for name in ("python", "native"):
            with open_capture(str(path)) as (f, info):
                scans.append(engine.SCANNERS[name](f, info, seek_record(f, info, a), b, [9876]))
        assert scans[0] == scans[1]
