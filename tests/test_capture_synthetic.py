"""Capture decoder on generated captures: every file format and link type, and TCP damage
(reordering, retransmission, overlap, loss, mid-stream start, snap length) with exact
expectations for the recovered frames."""
import random

import pytest

from rocketpy.capture import Stats, decode_file
from rocketpy.capture.readers import iter_packets, read_capture_info
from rocketpy.capture.split import plan_ranges, seek_record
from rocketpy.remoting import decode_frame

import capture_synth as cs

CLIENT = ("10.0.0.1", 40000)
SERVER = ("10.0.0.2", 9876)


def expected(frames):
    """Per direction: [(stream offset, frame length, code, opaque, flag)]."""
    out = {0: [], 1: []}
    off = {0: 0, 1: 0}
    for d, fr in frames:
        cmd = decode_frame(fr)
        out[d].append((off[d], len(fr), cmd.code, cmd.opaque, cmd.flag))
        off[d] += len(fr)
    return out


def decode_segs(tmp_path, segs, kind="ether", v6=False, fmt="pcap", order="<", nanos=False,
                name="x", **kw):
    pk = cs.packets(segs, kind, v6)
    lt = cs.LINKTYPES[kind]
    data = (cs.write_pcap(pk, lt, order, nanos) if fmt == "pcap"
            else cs.write_pcapng(pk, lt, order, **kw))
    p = tmp_path / f"{name}.{fmt}"
    p.write_bytes(data)
    stats = Stats()
    rows = list(decode_file(str(p), stats=stats))
    return rows, stats


def by_direction(rows, client="10.0.0.1:40000"):
    out = {0: [], 1: []}
    for r in rows:
        d = 0 if r["src"].endswith(client.split(":")[-1]) and r["src"].startswith(
            client.split(":")[0].split(".")[0]) or r["src"] == client else 1
        out[d].append(r)
    return out


def intact(rows):
    return [(r["stream_offset"], r["frame_len"], r["code"], r["opaque"], r["flag"])
            for r in rows if r["error"] is None]


def assert_rows(rows, frames, client="10.0.0.1:40000"):
    exp = expected(frames)
    got = {0: [], 1: []}
    for r in rows:
        assert r["error"] is None, r
        got[0 if r["src"] == client else 1].append(
            (r["stream_offset"], r["frame_len"], r["code"], r["opaque"], r["flag"]))
    assert got == exp


FRAMES = cs.sample_exchange(6)


# ---- formats and link types -----------------------------------------------------------------

@pytest.mark.parametrize("fmt,order,nanos", [("pcap", "<", False), ("pcap", ">", False),
                                              ("pcap", "<", True), ("pcap", ">", True),
                                              ("pcapng", "<", False), ("pcapng", ">", False)])
def test_file_formats(tmp_path, fmt, order, nanos):
    segs = cs.conversation(FRAMES, t0_ns=1_700_000_000_123_456_789, step_ns=1_001)
    rows, stats = decode_segs(tmp_path, segs, fmt=fmt, order=order, nanos=nanos)
    assert_rows(rows, FRAMES)
    # each frame is stamped with the capture time of the packet completing it: exact for
    # nanosecond files, truncated to microseconds otherwise (pcapng here uses if_tsresol=6)
    res = 1 if nanos else 1000
    stamps = {s.ts_ns // res * res for s in segs if s.payload}
    assert all(r["ts_ns"] in stamps for r in rows)
    assert any(r["ts_ns"] % 1000 for r in rows) == nanos
    assert all(r["ts"] == r["ts_ns"] / 1e9 for r in rows)
    assert stats["packets"] == len(segs)


@pytest.mark.parametrize("tsresol", [6, 9, 3 | 0x80 * 0, 0x80 | 20])
def test_pcapng_tsresol_and_simple_blocks(tmp_path, tsresol):
    segs = cs.conversation(FRAMES, t0_ns=1_700_000_000_000_000_000, step_ns=1_000_000)
    rows, _ = decode_segs(tmp_path, segs, fmt="pcapng", tsresol=tsresol)
    assert_rows(rows, FRAMES)
    per = 10 ** tsresol if not tsresol & 0x80 else 2 ** (tsresol & 0x7F)
    data_ts = {s.ts_ns * per // 1_000_000_000 * 1_000_000_000 // per for s in segs}
    assert all(r["ts_ns"] in data_ts for r in rows)


def test_pcapng_simple_packet_blocks(tmp_path):
    segs = cs.conversation(FRAMES)
    rows, _ = decode_segs(tmp_path, segs, fmt="pcapng", extra_iface=False, simple=True)
    assert_rows(rows, FRAMES)


LINK_KINDS = ["ether", "vlan", "qinq", "sll", "sll2", "null", "null_be", "loop", "raw"]


# LINKTYPE_IPV4 carries IPv4 only, so it has no IPv6 case.
@pytest.mark.parametrize("kind, v6", [(k, v6) for k in LINK_KINDS for v6 in (False, True)]
                         + [("ipv4", False)])
def test_link_types(tmp_path, kind, v6):
    segs = cs.conversation(FRAMES)
    rows, _ = decode_segs(tmp_path, segs, kind=kind, v6=v6)
    client = "[fd00::10:0:0:1]:40000" if v6 else "10.0.0.1:40000"
    assert_rows(rows, FRAMES, client=client)
    assert {r["src"] for r in rows} == {client, "[fd00::10:0:0:2]:9876" if v6 else "10.0.0.2:9876"}


def test_pairing_latency_oneway_and_any_port(tmp_path):
    segs = cs.conversation(FRAMES, server=("10.0.0.2", 31337), step_ns=2_000_000)
    rows, stats = decode_segs(tmp_path, segs)
    reqs = {r["opaque"]: r for r in rows if not r["is_response"]}
    for r in rows:
        if r["is_response"]:
            req = reqs[r["opaque"]]
            assert r["request_code"] == req["code"]
            assert r["latency_ms"] == pytest.approx((r["ts_ns"] - req["ts_ns"]) / 1e6)
            assert r["latency_ms"] > 0
    oneway = [r for r in rows if r["is_oneway"]]
    assert len(oneway) == 1 and oneway[0]["code"] == 104
    assert stats["unanswered_requests"] == {}


def test_unanswered_requests_counted(tmp_path):
    frames = FRAMES[:-3] + [FRAMES[-3]] + [FRAMES[-1]]    # drop the last response
    segs = cs.conversation(frames)
    rows, stats = decode_segs(tmp_path, segs)
    assert stats["unanswered_requests"] == {decode_frame(FRAMES[-3][1]).code: 1}


def test_port_filter(tmp_path):
    segs = cs.conversation(FRAMES, server=("10.0.0.2", 10911))
    p = tmp_path / "a.pcap"
    p.write_bytes(cs.write_pcap(cs.packets(segs), 1))
    assert len(list(decode_file(str(p), ports=[10911]))) == len(FRAMES)
    assert list(decode_file(str(p), ports=[9876])) == []


def test_non_rocketmq_traffic_ignored(tmp_path):
    http = [(0, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 50), (1, b"HTTP/1.1 200 OK\r\n\r\n" + bytes(range(256)) * 40)]
    segs = cs.conversation(http, server=("10.0.0.3", 80)) + cs.conversation(
        FRAMES, t0_ns=1_700_000_001_000_000_000)
    rows, stats = decode_segs(tmp_path, segs)
    assert_rows(rows, FRAMES)
    assert stats["connections"] == 2 and stats["rocketmq_connections"] == 1


def test_connection_reuse_and_sequence_wrap(tmp_path):
    # the server's ISN wraps past 2**32 inside the conversation (default isn)
    a = cs.conversation(FRAMES)
    b = cs.conversation(FRAMES, t0_ns=1_700_000_010_000_000_000, isn=(777, 123))
    rows, _ = decode_segs(tmp_path, a + b)
    assert len(rows) == 2 * len(FRAMES) and not any(r["error"] for r in rows)
    conns = sorted({r["conn"] for r in rows})
    assert conns == ["10.0.0.1:40000-10.0.0.2:9876", "10.0.0.1:40000-10.0.0.2:9876#2"]


# ---- TCP damage -----------------------------------------------------------------------------

def _data_idx(segs, src=CLIENT):
    return cs.data_segments(segs, src)


def test_out_of_order(tmp_path):
    segs = cs.conversation(FRAMES, acks=False)
    d = _data_idx(segs)
    segs = cs.reorder(segs, d[0], d[2])          # first data segment arrives after the third
    segs = cs.reorder(segs, d[4], d[4] + 3)
    rows, stats = decode_segs(tmp_path, segs)
    assert_rows(rows, FRAMES)
    assert stats.get("gaps", 0) == 0


def test_response_before_its_request_is_reassembled(tmp_path):
    # the request's first segment is captured after the response: pairing still works
    segs = cs.conversation(FRAMES[:2], acks=False)
    d = _data_idx(segs)
    srv = _data_idx(segs, SERVER)
    segs = cs.reorder(segs, d[0], srv[-1])
    rows, _ = decode_segs(tmp_path, segs)
    resp = [r for r in rows if r["is_response"]][0]
    assert resp["request_code"] == decode_frame(FRAMES[0][1]).code


def test_retransmission_and_overlap(tmp_path):
    segs = cs.conversation(FRAMES)
    d = _data_idx(segs)
    segs = cs.retransmit(segs, d[1], at=d[1] + 5)            # plain duplicate, later
    segs = cs.retransmit(segs, d[3], extend=300)            # duplicate running into the next one
    d = _data_idx(segs)
    segs = cs.overlap_split(segs, d[6], cut=500, back=120)   # two segments overlapping 120 bytes
    rows, stats = decode_segs(tmp_path, segs)
    assert_rows(rows, FRAMES)
    assert stats["retransmitted_bytes"] > 0


def test_midstream_start(tmp_path):
    segs = cs.conversation(FRAMES, mss=700)
    d = _data_idx(segs)
    cut = d[1] + 1         # drop the handshake and the first two client data segments
    segs = segs[cut:]
    rows, stats = decode_segs(tmp_path, segs)
    exp = expected(FRAMES)
    first_seen = 1400      # the client stream is seen from byte 1400 on
    want0 = [f for f in exp[0] if f[0] >= first_seen]
    got0 = intact([r for r in rows if r["src"] == "10.0.0.1:40000"])
    # stream offsets count from the first byte seen
    assert [(o + first_seen, *rest) for o, *rest in got0] == want0
    got1 = intact([r for r in rows if r["src"] == "10.0.0.2:9876"])
    assert got1 == exp[1]
    assert not [r for r in rows if r["error"]]
    assert stats["skipped_bytes"] == want0[0][0] - first_seen


def test_loss_inside_a_frame_keeps_step(tmp_path):
    # the first request is 4 segments long (mss 1000); lose its second segment
    segs = cs.conversation(FRAMES)
    d = _data_idx(segs)
    lost = segs[d[1]]
    segs = cs.drop(segs, d[1])
    rows, stats = decode_segs(tmp_path, segs)
    exp = expected(FRAMES)
    client = [r for r in rows if r["src"] == "10.0.0.1:40000"]
    damaged = [r for r in client if r["error"]]
    assert len(damaged) == 1
    assert damaged[0]["code"] == exp[0][0][2] and damaged[0]["opaque"] == exp[0][0][3]
    assert "1000 of its" in damaged[0]["error"]
    assert intact(client) == exp[0][1:]
    assert intact([r for r in rows if r["src"] != "10.0.0.1:40000"]) == exp[1]
    assert stats["gaps"] == 1 and stats["gap_bytes"] == len(lost.payload)
    # the damaged request is still paired with its response
    resp = [r for r in rows if r["is_response"] and r["opaque"] == exp[0][0][3]][0]
    assert resp["request_code"] == exp[0][0][2]


def test_loss_across_frames_resynchronises(tmp_path):
    ex = cs.sample_exchange(8)
    frames = [f for f in ex if f[0] == 0] + [f for f in ex if f[0] == 1]   # pipelined
    segs = cs.conversation(frames, mss=1000, coalesce=True, acks=False)
    exp = expected(frames)
    # lose a client segment spanning a frame boundary
    d = _data_idx(segs)
    starts = {}
    off = 0
    for i in d:
        starts[i] = off
        off += len(segs[i].payload)
    bounds = [o for o, *_ in exp[0]] + [off]
    victim = next(i for i in d if any(starts[i] < b < starts[i] + len(segs[i].payload)
                                      for b in bounds) and starts[i] > 0)
    lo, hi = starts[victim], starts[victim] + len(segs[victim].payload)
    segs = cs.drop(segs, victim)
    rows, stats = decode_segs(tmp_path, segs)
    client = [r for r in rows if r["src"] == "10.0.0.1:40000"]
    want = [f for f in exp[0] if f[0] + f[1] <= lo or f[0] >= hi]
    assert intact(client) == want
    # the frame the loss started in is reported damaged (its start arrived)
    damaged = [r for r in client if r["error"]]
    hit = [f for f in exp[0] if f[0] < lo < f[0] + f[1]]
    assert [(r["stream_offset"], r["code"], r["opaque"]) for r in damaged] == \
        [(f[0], f[2], f[3]) for f in hit if lo - f[0] >= 8]
    assert stats["resyncs"] >= 1 and stats["gap_bytes"] == hi - lo
    assert intact([r for r in rows if r["src"] != "10.0.0.1:40000"]) == exp[1]


def test_snaplen_truncation(tmp_path):
    frames = cs.sample_exchange(6)
    segs = cs.conversation(frames, mss=1000)
    segs = cs.snap(segs, 600)          # every packet keeps only 600 payload bytes
    rows, stats = decode_segs(tmp_path, segs)
    exp = expected(frames)
    for d, src in ((0, "10.0.0.1:40000"), (1, "10.0.0.2:9876")):
        mine = [r for r in rows if r["src"] == src]
        small = [f for f in exp[d] if f[1] <= 600 and _fits_in_one(segs, src, f)]
        assert set(small) <= set(intact(mine))
        for r in mine:
            if r["error"]:
                assert "lost in the capture" in r["error"]
    assert stats["snaplen_cut_bytes"] > 0
    total = len(rows)
    assert total >= len(frames) - 4


def _fits_in_one(segs, src, f):
    # frames wholly inside the first 600 bytes of one segment survive a 600-byte snap
    off = 0
    for s in segs:
        if f"{s.src}:{s.sport}" != src or not s.payload:
            continue
        if off <= f[0] and f[0] + f[1] <= off + min(len(s.payload), 600):
            return True
        off += len(s.payload)
    return False


def test_snaplen_exact_small_frames(tmp_path):
    # one frame per segment, snap length cutting only the big ones: small frames all decode,
    # big ones are damaged rows with their header decoded, nothing is lost from step
    frames = cs.sample_exchange(6)
    segs = cs.conversation(frames, mss=100_000)
    segs = cs.snap(segs, 400)
    rows, _ = decode_segs(tmp_path, segs)
    exp = expected(frames)
    got = {0: [], 1: []}
    for r in rows:
        got[0 if r["src"] == "10.0.0.1:40000" else 1].append(
            (r["stream_offset"], r["frame_len"], r["code"], r["opaque"], r["flag"],
             r["error"] is None))
    for d in (0, 1):
        assert got[d] == [(*f, f[1] <= 400) for f in exp[d]]


def test_random_damage_never_crashes(tmp_path):
    rng = random.Random(7)
    frames = cs.sample_exchange(10, rng)
    for k in range(20):
        segs = cs.conversation(frames, mss=rng.choice([100, 536, 1460]))
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(segs))
            op = rng.choice(["drop", "dup", "swap", "snap"])
            if op == "drop":
                segs = cs.drop(segs, i)
            elif op == "dup" and segs[i].payload:
                segs = cs.retransmit(segs, i)
            elif op == "swap" and i + 1 < len(segs):
                segs = cs.reorder(segs, i, i + 1)
            elif op == "snap":
                segs[i].snap = rng.randint(0, 50)
        rows, _ = decode_segs(tmp_path, segs, name=f"r{k}")
        for r in rows:
            assert r["error"] is None or isinstance(r["error"], str)
            if r["error"] is None:
                assert r["code"] is not None


# ---- splitting into byte ranges ---------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_split_ranges_read_every_packet_once(tmp_path, fmt, monkeypatch):
    import rocketpy.capture.split as split
    monkeypatch.setattr(split, "RESYNC_WINDOW", 64 << 10)
    segs = []
    for c in range(60):
        segs += cs.conversation(FRAMES, client=("10.0.1.%d" % c, 40000 + c),
                                t0_ns=1_700_000_000_000_000_000 + c * 7_000_000)
    segs.sort(key=lambda s: s.ts_ns)
    pk = cs.packets(segs)
    data = cs.write_pcap(pk, 1) if fmt == "pcap" else cs.write_pcapng(pk, 1)
    p = tmp_path / f"big.{fmt}"
    p.write_bytes(data)
    info = read_capture_info(data[:65536])
    with open(p, "rb") as f:
        f.seek(info.data_offset)
        whole = [(x.offset, x.data) for x in iter_packets(f, info)]
    assert len(whole) == len(segs)
    ranges = plan_ranges(info, len(data), 1)          # chunk clamps to 2 windows = 128 KiB
    assert len(ranges) >= 3
    def range_packets(a, b):
        with open(p, "rb") as f:
            start = seek_record(f, info, a)
            return [(x.offset, x.data) for x in iter_packets(f, info, start=start, end=b)]
    got = []
    for a, b in ranges:
        got += range_packets(a, b)
    assert got == whole
    # arbitrary (unaligned) cut points too
    cuts = sorted({info.data_offset, len(data)} | {random.Random(3).randrange(info.data_offset, len(data)) for _ in range(9)})
    got = []
    for a, b in zip(cuts, cuts[1:]):
        got += range_packets(a, b)
    assert got == whole


def test_ethernet_ipv4_shortcut_reads_as_the_general_path():
    """``decode_tcp``'s one-read shortcut for untagged Ethernet + IPv4 + TCP gives the segment
    the general path gives for the same IP packet (read as raw IP), on genuine packets and on
    damaged copies: cut short, options, fragments, other protocols, odd total lengths."""
    import struct
    from pathlib import Path
    from rocketpy.capture.layers import decode_tcp
    fixtures = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pcap"
    rng = random.Random(7)
    packets = []
    for path in sorted(fixtures.glob("*.pcap"))[:12]:
        with open(path, "rb") as f:
            info = read_capture_info(f.read(1 << 16))
            f.seek(info.data_offset)
            packets += [p.data for p in iter_packets(f, info) if info.linktype == 1]
    assert len(packets) > 1000
    checked = 0
    for data in packets[::3]:
        variants = [data, data[:rng.randrange(14, len(data) + 1)]]
        for pos, value in ((14, 0x46), (23, 17), (20, 0x20), (21, 0x01), (16, 0), (17, 0),
                           (16, 0xFF), (46, 0x30), (46, 0xF0)):
            if len(data) > pos:
                variants.append(data[:pos] + bytes((value,)) + data[pos + 1:])
        for v in variants:
            if len(v) <= 14 or v[12:14] != b"\x08\x00":
                continue
            stats_fast, stats_general = {}, {}
            assert decode_tcp(1, v, stats_fast) == decode_tcp(101, v[14:], stats_general), v.hex()
            assert stats_fast == stats_general
            checked += 1
    assert checked > 3000
    assert struct.calcsize("!12xHBxH2xHxB2x4s4sHHIIBB") == 48
