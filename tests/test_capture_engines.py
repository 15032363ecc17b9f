"""The compiled capture decoder (rocketpy.capture._native) gives the reference decoder's rows,
column by column, and the same counters and errors: on every genuine capture, on every file
format, link type and TCP defect the synthetic captures exercise, on frames the codec's fuzz
harness mutates, and on broken files."""
import json
import random
import re
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import capture_synth as cs
from rocketpy.capture import engine, schema
from rocketpy.capture.arrow import ARROW_SCHEMA
from rocketpy.capture.readers import CaptureFormatError
from rocketpy.capture.source import open_capture
from rocketpy.remoting import RemotingCommand
from rocketpy.remoting.layout import build_frame

ROOT = Path(__file__).resolve().parents[1]
NATIVE_SRC = ROOT / "rocketpy" / "capture" / "_native"
FIXTURES = ROOT.parent / "shared" / "fixtures" / "pcap"
FRAMES = cs.sample_exchange(6)


def test_the_compiled_decoder_is_built():
    assert engine.NATIVE is not None, \
        "the compiled decoder is not built: python3 setup.py build_ext --inplace"
    assert engine.BatchDecoder is engine.NativeBatchDecoder


def run(cls, path, **options):
    """(table, stats, error message) of one engine on one file."""
    d = cls(**options)
    batches, error = [], None
    try:
        with open_capture(str(path)) as (f, info):
            batches += d.decode(f, str(path), info)
    except CaptureFormatError as exc:
        error = str(exc)
    batches += d.finish()
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA), dict(d.stats), error


def assert_same(path, **options):
    """Both engines on ``path``: identical columns, counters and error; returns the table."""
    want, want_stats, want_error = run(engine.PyBatchDecoder, path, **options)
    got, got_stats, got_error = run(engine.NativeBatchDecoder, path, **options)
    assert got.num_rows == want.num_rows, path
    for name in want.column_names:
        assert got[name].to_pylist() == want[name].to_pylist(), (path, name)
    assert got_stats == want_stats
    assert got_error == want_error
    return want


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.pcap")))
def test_every_fixture(name):
    assert assert_same(FIXTURES / name).num_rows > 0


def _write(tmp_path, segs, kind="ether", v6=False, fmt="pcap", order="<", nanos=False,
           name="x", **kw):
    pk = cs.packets(segs, kind, v6)
    data = (cs.write_pcap(pk, cs.LINKTYPES[kind], order, nanos) if fmt == "pcap"
            else cs.write_pcapng(pk, cs.LINKTYPES[kind], order, **kw))
    path = tmp_path / f"{name}.{fmt}"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("fmt,order,nanos,kw", [
    ("pcap", "<", False, {}), ("pcap", ">", True, {}), ("pcapng", ">", False, {}),
    ("pcapng", "<", False, {"tsresol": 9}), ("pcapng", "<", False, {"tsresol": 0x80 | 20}),
    ("pcapng", "<", False, {"simple": True, "extra_iface": False})])
def test_file_formats(tmp_path, fmt, order, nanos, kw):
    segs = cs.conversation(FRAMES, t0_ns=1_700_000_000_123_456_789, step_ns=1_001)
    assert assert_same(_write(tmp_path, segs, fmt=fmt, order=order, nanos=nanos, **kw)).num_rows


@pytest.mark.parametrize("kind", ["ether", "vlan", "qinq", "sll", "sll2", "null", "null_be",
                                  "loop", "raw"])
@pytest.mark.parametrize("v6", [False, True])
def test_link_types(tmp_path, kind, v6):
    assert assert_same(_write(tmp_path, cs.conversation(FRAMES), kind, v6)).num_rows


def _damaged(seed):
    """A conversation with random drops, duplicates, swaps and snap-length cuts."""
    rng = random.Random(seed)
    frames = cs.sample_exchange(rng.randint(2, 10), rng, big_every=rng.randint(1, 3))
    segs = cs.conversation(frames, mss=rng.choice([60, 100, 536, 1460]),
                           acks=rng.random() < 0.7, coalesce=rng.random() < 0.5,
                           handshake=rng.random() < 0.8)
    for _ in range(rng.randint(0, 8)):
        i = rng.randrange(len(segs))
        op = rng.choice(["drop", "dup", "swap", "snap", "overlap"])
        if op == "drop":
            segs = cs.drop(segs, i)
        elif op == "dup" and segs[i].payload:
            segs = cs.retransmit(segs, i, at=min(len(segs), i + rng.randint(1, 6)))
        elif op == "swap" and i + 2 < len(segs):
            segs = cs.reorder(segs, i, i + rng.randint(1, 2))
        elif op == "snap":
            segs[i].snap = rng.randint(0, 80)
        elif op == "overlap" and len(segs[i].payload) > 20:
            cut = rng.randint(10, len(segs[i].payload) - 5)
            segs = cs.overlap_split(segs, i, cut, rng.randint(1, cut - 1))
    return segs


@pytest.mark.parametrize("seed", range(60))
def test_tcp_damage(tmp_path, seed):
    assert_same(_write(tmp_path, _damaged(seed)))


def test_many_connections_reordered_retransmitted_reused_and_wrapped(tmp_path):
    segs = cs.many_conversations(300, seed=11, damage=True)
    segs += cs.conversation(FRAMES, t0_ns=1_700_000_100_000_000_000)             # ISN wraps
    segs += cs.conversation(FRAMES, t0_ns=1_700_000_200_000_000_000, isn=(5, 7))  # 4-tuple reused
    http = [(0, b"GET / HTTP/1.1\r\n\r\n" * 40), (1, bytes(range(256)) * 30)]
    segs += cs.conversation(http, server=("10.0.0.3", 80), t0_ns=1_700_000_300_000_000_000)
    table = assert_same(_write(tmp_path, segs))
    assert table.num_rows > 2000
    assert_same(_write(tmp_path, segs, name="ports"), ports=[9876])


def test_sweeps_time_out_holes_and_retire_closed_connections_as_the_reference(tmp_path):
    """Thousands of connections over two minutes of capture time, so that sweeps run many
    times: holes that only a sweep's timeout closes, connections that stay open, closed ones
    retired after their linger, 4-tuples reused after it.  The compiled core sweeps only the
    connections a sweep can act on; not a row, stamp or counter may differ."""
    rng = random.Random(5)
    segs = []
    for c in range(2500):
        frames = cs.sample_exchange(rng.randint(1, 3), rng, big_every=3,
                                    start_opaque=rng.randint(0, 1 << 20))
        if rng.random() < 0.3:     # ends mid-frame: a row when the connection is retired
            frames.append((0, frames[0][1][:rng.randint(9, 40)]))
        conv = cs.conversation(frames, client=("10.2.0.1", 20000 + c % 400),
                               t0_ns=1_700_000_000_000_000_000 + c * 48_000_000,
                               step_ns=rng.randint(100_000, 3_000_000),
                               close=rng.random() < 0.8,
                               isn=(rng.randrange(1 << 32), rng.randrange(1 << 32)))
        d = cs.data_segments(conv)
        if rng.random() < 0.3 and len(d) > 2:
            conv = cs.drop(conv, d[1])
        segs += conv
    segs.sort(key=lambda s: s.ts_ns)
    path = _write(tmp_path, segs, name="sweeps")
    table = assert_same(path, hole_timeout_ns=400_000_000)
    stats = run(engine.NativeBatchDecoder, path, hole_timeout_ns=400_000_000)[1]
    assert stats["gaps"] > 100 and stats["connections"] == 2500
    assert table.num_rows > 10_000


def test_one_body_under_several_brokers_gets_each_its_own_summary(tmp_path):
    """The compiled core remembers summaries by body, with a variant per (broker, cluster,
    registration): the same registration body from two brokers, and the same bytes under a
    code that is no registration, each get the reference's summary."""
    body = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{},"B":{}}}}'
    heads = [(103, {"brokerName": "b1", "clusterName": "c1"}),
             (103, {"brokerName": "b2", "clusterName": "c1"}),
             (103, {"brokerName": "b1", "clusterName": "c2"}),
             (103, {"brokerName": "b1"}),
             (310, {"brokerName": "b1", "clusterName": "c1"})]
    frames = [RemotingCommand.request(code, ext_fields=ext, body=body, opaque=i).encode()
              for i, (code, ext) in enumerate(heads * 3)]
    summaries = assert_same(_stream(tmp_path, frames, "variants"))["body_summary"].to_pylist()
    assert summaries[:5] == ["broker=b1 cluster=c1 topics=2", "broker=b2 cluster=c1 topics=2",
                             "broker=b1 cluster=c2 topics=2", "broker=b1 cluster=None topics=2",
                             "broker=b1 cluster=c1 topics=2"]
    assert summaries[5:] == summaries[:5] * 2
    # more names than a body keeps variants for (16): the rest are answered, not remembered
    many = [RemotingCommand.request(103, ext_fields={"brokerName": f"n{i % 40}"}, body=body,
                                    opaque=i).encode() for i in range(120)]
    summaries = assert_same(_stream(tmp_path, many, "many"))["body_summary"].to_pylist()
    assert summaries == [f"broker=n{i % 40} cluster=None topics=2" for i in range(120)]


def test_connections_reused_after_one_with_thousands_of_open_requests(tmp_path):
    """A dropped connection's buffers serve the next one, trimmed when they grew big: one with
    3,000 unanswered requests, 2,000 of them in one segment, then hundreds of short ones on the
    same 4-tuples (new generations) and others."""
    big = [(0, RemotingCommand.request(105, opaque=i, serialize_type=1).encode())
           for i in range(3000)]
    segs = cs.conversation(big, client=("10.3.0.1", 30000), coalesce=True, mss=65_000)
    t0 = segs[-1].ts_ns + 5_000_000_000
    rng = random.Random(3)
    for c in range(400):
        frames = cs.sample_exchange(rng.randint(1, 3), rng, start_opaque=c * 10)
        segs += cs.conversation(frames, client=("10.3.0.1", 30000 + c % 7),
                                t0_ns=t0 + c * 2_500_000_000)
    table = assert_same(_write(tmp_path, segs, name="spares"))
    assert table.num_rows > 3000 + 400 * 3
    assert "10.0.0.2:9876-10.3.0.1:30000#2" in set(table["conn"].to_pylist())


def test_midstream_start_and_loss(tmp_path):
    segs = cs.conversation(FRAMES, mss=700)
    d = cs.data_segments(segs, ("10.0.0.1", 40000))
    assert_same(_write(tmp_path, segs[d[1] + 1:], name="mid"))
    assert_same(_write(tmp_path, cs.drop(segs, d[1], d[3]), name="loss"))


def _stream(tmp_path, frames, name, **kw):
    """One conversation carrying these frame bytes, client to server."""
    return _write(tmp_path, cs.conversation([(0, f) for f in frames], **kw), name=name)


def test_odd_headers(tmp_path):
    """Headers the compiled core reads itself and headers it leaves to the codec give the
    codec's columns and error texts."""
    json_headers = [
        b'{"code":105,"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}',
        b'{"code":105,"extFields":{"topic":"T\\u00e9\\ud83d\\ude00\\n\\"x\\"\\/"},"opaque":2}\n',
        b' {"code":1}', b'{"code":1.0}', b'{"code":true}', b'{"code":2147483648}', b'{"code":-0}',
        b'{"code":01}', b'{"code":1,"code":2}', b'{"language":"NOPE"}', b'{"language":3}',
        b'{"remark":null,"extFields":null}', b'{"remark":5}', b'{"extFields":{"a":1,"b":true}}',
        b'{"extFields":{"a":"1","a":"2"}}', b'{"extFields":{"a":null}}', b'{"extFields":[]}',
        b'{"x":[1,-2.5e3,{"y":[true,false,null,NaN,-Infinity]}],"opaque":7}',
        b'{"remark":"\\ud800"}', b'{"remark":"\\udc00x"}', b'{"remark":"\xed\xa0\x80"}',
        b'{"remark":"\xff"}', b'{"code":1,}', b'{"code":1} x', b'{"code":1', b'{}',
        b'{"remark":"' + b"x" * 70000 + b'"}', b'{' + b'"a":[' * 40 + b']' * 40 + b'}',
    ]
    frames = [build_frame(0, h, b'{"topicList":["A","B"]}' if i % 3 else b"")
              for i, h in enumerate(json_headers)]
    ok = RemotingCommand.request(105, {"topic": "T"}, opaque=9, serialize_type=1).encode()
    rocketmq = [ok, ok[:8] + ok[8:-1], ok[:-2] + b"\xff\xfe"]
    header = ok[8:]
    frames += [build_frame(1, header[:13] + b"\x00\x00\x00\x02\xc3\x28" + header[17:], b""),
               build_frame(1, header + b"\x00", b""),
               build_frame(1, header[:17] + b"\x00\x00\x00\x0e" + b"\x00\x01a\x00\x00\x00\x01b" * 2, b"")]
    frames += rocketmq
    table = assert_same(_stream(tmp_path, frames, "odd"))
    errors = [e for e in table["error"].to_pylist() if e]
    assert any("HeaderDecodeError" in e for e in errors)
    assert table.num_rows > 20


def test_control_characters_in_json_headers(tmp_path):
    """A .NET client's SEND_MESSAGE_V2 carries raw 0x01/0x02 in its properties string."""
    props = b"TAGS\x01T0200\x02KEYS\x01k1\x02"
    frames = [build_frame(0, b'{"code":310,"extFields":{"properties":"' + props + b'"},"opaque":%d}' % i,
                          b"body") for i in range(3)]
    frames.append(build_frame(0, b'{"code":310,"extFields":{"k\x1a":"v"},"opaque":4}', b""))
    frames.append(build_frame(0, b'{"code":310,"remark":"a\x1ab","opaque":5}', b""))
    table = assert_same(_stream(tmp_path, frames, "ctl"))
    assert table.num_rows == len(frames)
    assert table["ext_fields"].to_pylist()[0] == [("properties", props.decode())]
    errors = table["error"].to_pylist()
    assert errors[:3] == [None] * 3 and "HeaderDecodeError" in errors[3] and errors[4] is None


#: headers fastjson's parser reads though strict JSON does not (docs/protocol.md's table)
FASTJSON_FORMS = [
    b'{"Code":105,"ExtFields":{"topic":"T"},"Opaque":7}',
    b'{"CODE":105,"ext_fields":{"topic":"T"},"OPAQUE":8}',
    b'{"code":105,"ext-fields":{"topic":"T"},"opaque":9,"language":"java"}',
    b"{'code':105,'extFields':{'topic':'T'},'opaque':10}",
    b'{code:105,extFields:{topic:"T"},opaque:11}',
    b'{"code":"105","extFields":{"topic":"T"},"opaque":"12"}',
    b'{"code":105.0,"extFields":{"topic":"T"},"opaque":13.9,"flag":"0.00"}',
    b'{"code":105,"extFields":{"topic":"T",},"opaque":14,,}',
    b'{/* a */"code":105, // b\n"extFields":{"topic":"T"},"opaque":15}',
    b'{"code":105,"extFields":{"topic":"T","k":null},"opaque":16,"remark":null,"version":null}',
    b'{"code":105,"extFields":{"t\x1aopic":"T"},"opaque":17,}',      # refused: 0x1A in a key
    b'{"code":105,"opaque":18,"remark":5.50,"extFields":{"n":1.0}}',
]


def test_fastjson_forms_read_alike_by_both_engines(tmp_path):
    """The compiled core leaves a header it does not read to the codec: each of fastjson's
    lenient forms gets the codec's columns (or its refusal) from both engines."""
    frames = [build_frame(0, h, b"") for h in FASTJSON_FORMS]
    table = assert_same(_stream(tmp_path, frames, "fastjson"))
    assert table["code"].to_pylist()[:10] == [105] * 10
    assert table["opaque"].to_pylist()[:10] == [7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    assert table["ext_fields"].to_pylist()[:10] == [[("topic", "T")]] * 10
    errors = table["error"].to_pylist()
    assert errors[:10] == [None] * 10 and "0x1A" in errors[10] and errors[11] is None
    assert table["remark"].to_pylist()[11] == "5.50"


def test_mutated_genuine_frames(tmp_path):
    """The codec fuzz harness's hostile frames, many to a stream: hunting, resynchronising and
    every odd header the mutator makes."""
    from fuzzharness import Mutator, corpus
    rng = random.Random(5)
    genuine = corpus()
    mutator = Mutator(rng, genuine)
    for k in range(6):
        frames = [mutator.mutate() if rng.random() < 0.6 else rng.choice(genuine)
                  for _ in range(150)]
        assert_same(_stream(tmp_path, frames, f"mut{k}", mss=rng.choice([300, 1460, 65000])))


def test_broken_files(tmp_path):
    """Cut short anywhere, records claiming absurd lengths, unknown interfaces: the same rows
    before the damage, the same counters, the same error."""
    good = cs.write_pcap(cs.packets(cs.conversation(FRAMES)), 1)
    ng = cs.write_pcapng(cs.packets(cs.conversation(FRAMES)), 1)
    rng = random.Random(3)
    cases = [good[:n] for n in (24, 30, 40, 200, len(good) // 2, len(good) - 1)]
    cases += [ng[:n] for n in (60, 100, len(ng) // 3, len(ng) - 2)]
    for data in (good, ng):
        for _ in range(25):
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(24, len(b) - 4)
                b[at:at + 4] = rng.choice([b"\xff\xff\xff\xff", b"\x00\x00\x00\x00",
                                           b"\x00\x00\x10\x00", bytes(rng.getrandbits(8) for _ in range(4))])
            cases.append(bytes(b))
    for i, data in enumerate(cases):
        path = tmp_path / f"b{i}.{'pcap' if data[:4] != ng[:4] else 'pcapng'}"
        path.write_bytes(data)
        assert_same(path)


def test_feed_lets_other_threads_run_and_refuses_them_the_same_decoder(tmp_path):
    """The compiled decoder's feed runs without the GIL (the CLI's writer thread works beside
    it); another thread calling into the same decoder meanwhile gets an error, not a decoder
    changed under its feet."""
    frames = [RemotingCommand.request(105, ext_fields={"topic": f"Topic{i}"}, opaque=i).encode()
              for i in range(200_000)]
    path = _stream(tmp_path, frames, "gil", coalesce=True, acks=False, mss=60_000)
    with open_capture(str(path)) as (f, info):
        data = f.read()
    d = engine.NATIVE.Decoder(batch_rows=1 << 30)       # no batch (and no Python) mid-feed
    d.begin_file(None, 0, engine._info_tuple(info), info.data_offset)
    started, fed = threading.Event(), []

    def feed():
        started.set()
        fed.append(d.feed(data))

    t = threading.Thread(target=feed)
    t.start()
    started.wait()
    refused = []
    while t.is_alive():
        try:
            d.stats()
        except RuntimeError as exc:
            refused.append(str(exc))
    t.join()
    assert refused and "another thread" in refused[0]
    assert fed == [True]
    d.finish()
    assert sum(n for n, _ in d.take(True)) == len(frames)


def test_decoders_and_tables_are_set_up_once():
    """feed runs without the GIL: nothing may swap a decoder's or the module's state under it."""
    d = engine.NATIVE.Decoder()
    with pytest.raises(RuntimeError, match="initialised once"):
        d.__init__()
    with open_capture(str(FIXTURES / "rmq49-mqadmin-topicRoute.pcap")) as (f, info):
        s = engine.NATIVE.Scanner(engine._info_tuple(info), info.data_offset, 1 << 30)
    with pytest.raises(RuntimeError, match="initialised once"):
        s.__init__(engine._info_tuple(info), info.data_offset, 1 << 30)
    with pytest.raises(RuntimeError, match="configured already"):
        engine.NATIVE.configure(columns=[], request_names={}, response_names={},
                                version_names={}, language_names={}, language_by_name={},
                                header_fallback=None, summary=None, capture_format_error=None)


def test_json_lines_are_json_dumps():
    """The compiled JSON Lines writer writes each row as json.dumps(row, ensure_ascii=False)."""
    for path in sorted(FIXTURES.glob("*.pcap")):
        table, _, _ = run(engine.NativeBatchDecoder, path)
        for batch in table.to_batches():
            want = "".join(json.dumps(r, ensure_ascii=False) + "\n"
                           for r in engine._json_rows(batch))
            assert engine.batch_jsonl(batch).decode("utf-8") == want
            ext = engine.ext_json_column(batch.column("ext_fields")).to_pylist()
            assert ext == [None if r["ext_fields"] is None else
                           json.dumps(r["ext_fields"], ensure_ascii=False)
                           for r in engine._json_rows(batch)]


def test_layout_constants_are_the_codec_s():
    from rocketpy.remoting import layout
    native = engine.NATIVE.LAYOUT
    assert native["PREFIX_SIZE"] == layout.PREFIX_SIZE
    assert native["LENGTH_SIZE"] == layout.LENGTH_SIZE
    assert native["DEFAULT_MAX_FRAME_LENGTH"] == layout.DEFAULT_MAX_FRAME_LENGTH
    assert (native["JSON"], native["ROCKETMQ"]) == (layout.JSON, layout.ROCKETMQ)
    assert native["ROCKETMQ_FIXED_SIZE"] == layout.ROCKETMQ_FIXED.size
    assert native["ROCKETMQ_MIN_HEADER"] == layout.ROCKETMQ_MIN_HEADER
    assert native["FLAG_AT"] == layout.ROCKETMQ_FIELDS["flag"][0]
    assert native["LANGUAGE_AT"] == layout.ROCKETMQ_FIELDS["language"][0]
    assert native["MAX_LANGUAGE"] == layout.MAX_LANGUAGE


def test_the_compiled_limits_and_defaults_are_the_reference_s():
    import inspect
    from rocketpy.capture import decoder, framing, readers, reassembly

    def default(cls, name):
        return inspect.signature(cls.__init__).parameters[name].default

    assert engine.NATIVE.LIMITS == {
        "MAX_HUNT_HEADER": framing._MAX_HUNT_HEADER,
        "MAX_PENDING_REQUESTS": decoder.MAX_PENDING_REQUESTS,
        "MAX_RECORD": readers.MAX_RECORD,
        "REORDER_NS": default(reassembly.Reassembler, "reorder_ns"),
        "ABANDON_AFTER": default(framing.FrameExtractor, "abandon_after"),
        "MAX_PENDING_BYTES": default(reassembly.Reassembler, "max_pending_bytes"),
        "MAX_PENDING_SEGMENTS": default(reassembly.Reassembler, "max_pending_segments"),
        "HOLE_TIMEOUT_NS": default(reassembly.Reassembler, "hole_timeout_ns"),
        "LINGER_NS": default(decoder.CaptureDecoder, "linger_ns"),
        "MAX_CONNECTIONS": default(decoder.CaptureDecoder, "max_connections"),
        "MAX_BUFFERED_BYTES": default(decoder.CaptureDecoder, "max_buffered_bytes"),
    }


def test_json_lines_write_the_extreme_integers_as_json_dumps():
    from rocketpy.capture.arrow import rows_to_batch
    rows = []
    for v32, v64 in ((-2 ** 31, -2 ** 63), (2 ** 31 - 1, 2 ** 63 - 1), (0, 0), (-1, -10 ** 18)):
        r = dict.fromkeys(schema.COLUMNS)
        r.update(code=v32, opaque=v32, flag=-v32 - 1, frame_len=v32, ts_ns=v64, stream_offset=v64,
                 ts=1.5, is_response=False)
        rows.append(r)
    batch = rows_to_batch(rows)
    assert engine.batch_jsonl(batch).decode() == "".join(
        json.dumps(r, ensure_ascii=False) + "\n" for r in engine._json_rows(batch))


#: a fixture whose rows have every kind of column (requests, responses, oneway, bodies)
RICH = FIXTURES / "rmq49-client-api-probe.pcap"

CONFIGURED = """
import json, sys
from rocketpy.capture import schema
{patch}
from rocketpy.capture import engine
from rocketpy.capture.source import open_capture
out = []
for cls in (engine.PyBatchDecoder, engine.NativeBatchDecoder):
    d = cls()
    with open_capture(sys.argv[1]) as (f, info):
        batches = list(d.decode(f, "x", info)) + list(d.finish())
    out.append([b.schema.names for b in batches[:1]] + [r for b in batches for r in b.to_pylist()])
print(json.dumps(out, default=str))
"""


def _configured(patch, path=RICH):
    """(reference rows, compiled rows) of ``path`` in a fresh interpreter where ``patch`` ran
    before the engines were configured (the first item of each: the batches' column names)."""
    out = subprocess.run([sys.executable, "-c", CONFIGURED.format(patch=patch), str(path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_compiled_core_writes_the_columns_in_the_schema_s_order():
    """The column order is the schema's, given to the C core at configure time: reversed, both
    engines still give the same rows, in the reversed order."""
    want, got = _configured("schema.SCHEMA.reverse(); schema.COLUMNS.reverse()")
    assert want[0] == got[0] == [name for name, _ in reversed(schema.SCHEMA)]
    assert len(got) > 10 and got == want


def test_the_compiled_core_writes_a_schema_without_some_of_its_columns():
    want, got = _configured("del schema.SCHEMA[21]; del schema.COLUMNS[21]")   # body_summary
    assert "body_summary" not in got[0] and got == want


def test_the_summary_prefilter_keys_come_from_the_codec():
    """The keys a body needs for a summary are rows.SUMMARY_MARKERS, which the C core asks of
    Python: with none of them, the JSON object bodies (without a backslash, which it leaves to
    the codec) get no summary there, and nothing else changes."""
    want, got = _configured("from rocketpy.capture import rows; rows.SUMMARY_MARKERS = ()")
    lost = [w for w, g in zip(want[1:], got[1:]) if w["body_summary"] != g["body_summary"]]
    assert len(lost) > 5 and all(g["body_summary"] in (None, w["body_summary"])
                                 for w, g in zip(want[1:], got[1:]))
    strip = [{**r, "body_summary": None} for r in want[1:]]
    assert strip == [{**r, "body_summary": None} for r in got[1:]]


@pytest.mark.parametrize("patch,says", [
    ("schema.SCHEMA.append(('colour', 'string'))",
     "the compiled decoder has no value for a column 'colour'"),
    ("schema.SCHEMA[9] = ('code', 'bigint')",
     "column 'code': the compiled decoder does not write bigint values there"),
    ("schema.SCHEMA.append(('code', 'int'))",
     "the compiled decoder has no value for a second column 'code'"),
])
def test_a_schema_the_compiled_core_cannot_write_is_refused_at_start(patch, says):
    out = subprocess.run([sys.executable, "-c", f"from rocketpy.capture import schema\n{patch}\n"
                          "from rocketpy.capture import engine"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1 and f"ValueError: {says}" in out.stderr


def test_the_compiled_core_names_no_flag_bit_or_request_code():
    """is_response, is_oneway and the registration's summary use the flag bits and the code
    that configure hands over (rocketpy.capture.schema), not literals of the C source."""
    literal = re.compile(r"flag\w*\s*&\s*~?\d|[.>]code\s*==\s*\d")
    found = [f"{c.name}:{n}: {line.strip()}" for c in sorted(NATIVE_SRC.glob("*.[ch]"))
             for n, line in enumerate(c.read_text().splitlines(), 1) if literal.search(line)]
    assert found == []
    assert literal.search("int registration = r->code == 103 && !(r->flag & 1);")


def test_parts_write_json_lines_and_rows_from_the_compiled_buffers():
    """A compiled batch's JSON Lines and rows, read from its own buffers without pyarrow, are
    what its Arrow batch gives."""
    for path in sorted(FIXTURES.glob("*.pcap"))[::3]:
        d = engine.NativeBatchDecoder(arrow=False)
        with open_capture(str(path)) as (f, info):
            parts = list(d.decode(f, str(path), info)) + list(d.finish())
        for part in parts:
            text = part.jsonl()
            assert isinstance(part, engine.NativePart) and text == engine.batch_jsonl(part.to_arrow())
            assert part.rows() == list(engine._json_rows(part.to_arrow()))
            assert part.nbytes >= len(text) // 4


BLOCK_NATIVE = """
import sys, warnings
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "rocketpy.capture._native":
            raise ImportError("blocked for the test")
sys.meta_path.insert(0, Block())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from rocketpy.capture import engine
    import rocketpy.capture.cli
    from rocketpy.capture import engine as again
print(engine.BatchDecoder.name, len(caught), caught[0].category.__name__)
"""


def test_without_the_compiled_decoder_the_reference_is_used_with_one_warning():
    out = subprocess.run([sys.executable, "-c", BLOCK_NATIVE], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["python", "1", "NativeDecoderMissing"]
