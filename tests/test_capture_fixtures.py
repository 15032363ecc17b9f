"""Capture decoder on every genuine capture in shared/fixtures/pcap, checked against what the
Java side sent, read three independent ways: frame by frame against ``tests/golden.py`` (a
reader sharing no code with rocketpy), and by count against the fixture README's table and
against tshark's TCP payload export cut into frames by the codec's own splitter."""
import collections
import json
import re
import shutil
import subprocess
from pathlib import Path

import golden
import pyarrow as pa
import pytest

from rocketpy.capture import Stats, decode_file, decode_paths, engine
from rocketpy.capture.arrow import ARROW_SCHEMA
from rocketpy.remoting import decode_frame, split_frames

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pcap"
FILES = sorted(FIXTURES.glob("*.pcap"))



def readme_table():
    """file -> (frames, {request code: count}) from the fixture README."""
    table = {}
    for line in (FIXTURES / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].endswith(".pcap"):
            counts = {int(a): int(b) for a, b in re.findall(r"(\d+)\s*×\s*(\d+)", cells[4])}
            table[cells[0]] = (int(cells[3]), counts)
    return table


@pytest.fixture(scope="module")
def decoded():
    out = {}
    for f in FILES:
        stats = Stats()
        out[f.name] = (list(decode_file(str(f), stats=stats)), stats)
    return out


def test_readme_lists_every_fixture():
    assert sorted(readme_table()) == [f.name for f in FILES]


@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_counts_match_readme(decoded, name):
    rows, stats = decoded[name]
    frames, requests = readme_table()[name]
    assert len(rows) == frames
    got = collections.Counter(r["code"] for r in rows if not r["is_response"])
    assert dict(got) == requests


def test_every_frame_decodes_and_pairs(decoded):
    for name, (rows, stats) in decoded.items():
        assert [r for r in rows if r["error"]] == [], name
        for key in ("gaps", "resyncs", "skipped_bytes", "damaged_frames", "truncated_records"):
            assert not stats.get(key), (name, key, stats)
        for r in rows:
            assert r["code"] is not None and r["serialize_type"] in ("JSON", "ROCKETMQ")
            assert r["language"] and r["version"] > 0
            if r["is_response"]:
                assert r["request_code"] is not None and r["latency_ms"] >= 0, (name, r)
        # requests without an answer: only oneway ones, and 9999 sent to a 4.9.8 NameServer
        unanswered = stats.get("unanswered_requests") or {}
        if name.startswith("rmq49-") and "probe" in name:
            assert unanswered == {9999: 1}, name
        else:
            assert unanswered == {}, name


def test_fields_of_known_frames(decoded):
    rows, _ = decoded["rmq49-broker-register-rocketmq-serialize.pcap"]
    reg = [r for r in rows if r["code"] == 103 and not r["is_response"]]
    assert reg and all(r["serialize_type"] == "ROCKETMQ" for r in reg)
    assert reg[0]["ext_fields"]["brokerName"] and reg[0]["version_name"] == "V4_9_8"
    assert reg[0]["body_summary"].startswith(f"broker={reg[0]['ext_fields']['brokerName']} ")
    rows, _ = decoded["rmq49-broker-register-compressed.pcap"]
    reg = [r for r in rows if r["code"] == 103 and not r["is_response"]]
    assert reg[0]["ext_fields"]["compressed"] == "true"
    assert reg[0]["body_summary"].endswith("compressed") and "topics=" in reg[0]["body_summary"]
    rows, _ = decoded["rmq49-mqadmin-topicRoute-notexist.pcap"]
    miss = [r for r in rows if r["is_response"] and r["code"] == 17]
    assert miss and miss[0]["code_name"] == "TOPIC_NOT_EXIST"
    assert miss[0]["remark"].startswith("No topic route info in name server for the topic: ")
    assert miss[0]["request_code_name"] == "GET_ROUTEINFO_BY_TOPIC"
    rows, _ = decoded["rmq49-mqadmin-topicRoute.pcap"]
    route = [r for r in rows if r["is_response"] and r["code"] == 0 and r["request_code"] == 105]
    assert any(r["body_summary"] and r["body_summary"].startswith("brokers=1[") for r in route)
    rows, _ = decoded["rmq50-broker-register-actingmaster-newproto.pcap"]
    hb = [r for r in rows if r["code"] == 904]
    assert hb and all(r["is_oneway"] and r["code_name"] == "BROKER_HEARTBEAT" for r in hb)


def _ext(fields):
    """ext fields as sorted (key, text) pairs, numbers and booleans as JSON writes them."""
    items = fields.items() if isinstance(fields, dict) else (fields or [])
    return tuple(sorted((k, v if isinstance(v, str) else json.dumps(v)) for k, v in items))


def _per_direction(pairs):
    """[(direction key, frame tuple)] in stream order -> sorted tuple of per-direction runs."""
    runs = collections.defaultdict(list)
    for key, frame in pairs:
        runs[key].append(frame)
    return sorted(map(tuple, runs.values()))


@pytest.mark.parametrize("engine_name", ["python", "native"])
@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_every_frame_is_what_the_java_side_sent(name, engine_name):
    """Every frame of every direction of every connection, in order, against golden's
    independent reading (length, serialisation, code, version, opaque, flag, remark, ext
    fields, body length), and each response's request code against golden's opaque pairing."""
    frames = golden.capture_frames(name)
    want = _per_direction(
        ((f.conn, f.to_server),
         (len(f.data), ("JSON", "ROCKETMQ")[n.serialize_type], n.code, n.version, n.opaque,
          n.flag, n.remark, _ext(n.ext_fields), len(n.body)))
        for f in frames for n in [golden.naive(f.data)])
    table = pa.Table.from_batches(list(engine.decode_batches(
        [str(FIXTURES / name)], engine=engine.ENGINES[engine_name])), schema=ARROW_SCHEMA)
    rows = sorted(table.to_pylist(), key=lambda r: (r["conn"], r["src"], r["stream_offset"]))
    got = _per_direction(
        ((r["conn"], r["src"]),
         (r["frame_len"], r["serialize_type"], r["code"], r["version"], r["opaque"], r["flag"],
          r["remark"], _ext(r["ext_fields"]), r["body_len"]))
        for r in rows)
    assert got == want
    paired = collections.Counter()
    for ex in golden.capture_exchanges(name):
        if ex.response is not None:
            answer = golden.naive(ex.response.data)
            paired[(answer.opaque, answer.code, golden.naive(ex.request.data).code)] += 1
    assert collections.Counter((r["opaque"], r["code"], r["request_code"])
                               for r in rows if r["is_response"]) == paired


def test_directory_input_equals_files(decoded):
    rows = list(decode_paths([str(FIXTURES)]))
    assert len(rows) == sum(len(r) for r, _ in decoded.values())


# ---- tshark: an independent reassembly --------------------------------------------------------

def test_counts_match_tshark_payload_export(decoded, tmp_path):
    assert shutil.which("tshark") and shutil.which("mergecap"), \
        "tshark is needed for the independent count: apt-get install tshark"
    # one tshark run over all fixtures concatenated (mergecap -a keeps file order), mapped back
    # to files by packet numbers
    merged = tmp_path / "all.pcap"
    subprocess.run(["mergecap", "-a", "-F", "pcap", "-w", str(merged), *map(str, FILES)],
                   check=True, capture_output=True)
    bounds, total = [], 0
    for f in FILES:
        total += sum(1 for _ in golden.packets(f.read_bytes()))
        bounds.append(total)
    out = subprocess.run(
        # sequence analysis off: the broker's long-lived connections recur across fixtures, so
        # in the concatenation tshark would flag their later packets as retransmissions (the
        # loopback captures have none; a duplicate would leave bytes the splitter rejects)
        ["tshark", "-n", "-o", "tcp.analyze_sequence_numbers:FALSE", "-r", str(merged),
         "-Y", "tcp.len>0",
         "-T", "fields", "-e", "frame.number", "-e", "tcp.stream", "-e", "ip.src", "-e",
         "tcp.srcport", "-e", "tcp.payload"],
        check=True, capture_output=True, text=True).stdout
    streams = collections.defaultdict(bytearray)
    for line in out.splitlines():
        num, stream, src, sport, payload = line.split("\t")
        fi = next(i for i, b in enumerate(bounds) if int(num) <= b)
        streams[(fi, stream, src, sport)] += bytes.fromhex(payload)
    frames = collections.Counter()
    requests = collections.defaultdict(collections.Counter)
    responses = collections.defaultdict(collections.Counter)
    for (fi, *_), data in streams.items():
        chunks, rest = split_frames(bytes(data))
        assert rest == b""
        for fr in chunks:
            cmd = decode_frame(fr)
            frames[fi] += 1
            (responses if cmd.is_response else requests)[fi][cmd.code] += 1
    for fi, f in enumerate(FILES):
        rows, _ = decoded[f.name]
        assert len(rows) == frames[fi], f.name
        assert collections.Counter(r["code"] for r in rows if not r["is_response"]) == requests[fi]
        assert collections.Counter(r["code"] for r in rows if r["is_response"]) == responses[fi]


def test_compressed_registration_summary_counts_as_the_codec():
    """The summary reads only a compressed body's first parts; its topic count is the one the
    codec's whole decode finds, for every compressed registration captured."""
    from fuzzharness import corpus
    from rocketpy.capture.rows import body_summary
    from rocketpy.remoting.bodies import RegisterBrokerBody
    seen = 0
    for frame in corpus():
        cmd = decode_frame(frame)
        if cmd.code == 103 and not cmd.flag & 1 and (cmd.ext_fields or {}).get("compressed") == "true":
            whole = RegisterBrokerBody.decode(cmd.body, True, broker_version=cmd.version)
            assert body_summary(cmd).endswith(f" topics={len(whole.topic_config_table)} compressed")
            seen += 1
    assert seen >= 10


def test_compressed_summary_of_a_zip_bomb_inflates_almost_nothing():
    import tracemalloc
    from fuzzharness import topic_line_bomb, zip_bomb_fast
    from rocketpy.capture.rows import body_summary
    from rocketpy.remoting.command import RemotingCommand
    for body, expect in ((zip_bomb_fast(1024), None),
                         (topic_line_bomb(3_000_000), "broker=b cluster=c topics=3000000 compressed")):
        cmd = RemotingCommand.request(103, {"brokerName": "b", "clusterName": "c",
                                            "compressed": "true"}, body)
        tracemalloc.start()
        try:
            summary = body_summary(cmd)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert summary == expect and peak < 4 << 20   # the body itself is ~1 MiB; inflated 1 GiB


def test_memoised_body_summaries_are_the_summaries():
    """A body seen again gets the summary computed afresh, for every captured frame (the memo
    is keyed on everything a summary reads: body, broker and cluster names, registration)."""
    from fuzzharness import corpus
    from rocketpy.capture import rows
    rows._memo_summary.cache_clear()
    frames = [decode_frame(f) for f in corpus()]
    with_body = [cmd for cmd in frames if cmd.body]
    assert len(with_body) > 1000
    first = [rows.body_summary(cmd) for cmd in with_body]
    again = [rows.body_summary(cmd) for cmd in with_body]
    ext = [cmd.ext_fields or {} for cmd in with_body]
    fresh = [rows._summary(e.get("brokerName"), e.get("clusterName"),
                           cmd.code == 103 and not cmd.flag & 1, cmd.body)
             for cmd, e in zip(with_body, ext)]
    assert first == again == fresh
    assert rows._memo_summary.cache_info().hits >= len(with_body)
    assert sum(s is not None for s in fresh) > 500
