"""Hostile input against the wire codec: the frame splitter, decode_frame and every body reader.

The short CI run of the harness in :mod:`fuzzharness` (a few thousand mutated genuine frames and
random bytes, plus Hypothesis); ``bench/fuzz_long.py`` runs the same harness for as long as you
like. Contract: nothing but the codec's documented :class:`RemotingCodecError` subclasses comes
out, memory stays bounded -- a length prefix claiming 16 MiB that never arrives, a frame over
the limit, a compressed body that inflates to gigabytes -- and no input costs far more per byte
than the genuine frames (counted by tests/costmeter.py, never timed: issue 31's 29-byte header
took 37 s). Set ROCKETPY_FUZZ_SEED to vary the run.

The regression cases at the end are the bugs the harness found, each with its reproducer.
"""
import json
import os
import random
import struct
import tracemalloc
import zlib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import costmeter
import fuzzharness as fh
import golden
from jsonheader import full_json_header, usual_json_header
from rocketpy.remoting import bodies, decode_frame, fastjson
from rocketpy.remoting.errors import (BodyDecodeError, FrameTooLargeError, HeaderDecodeError,
                                      InvalidFieldError, RemotingCodecError, TruncatedFrameError)
from rocketpy.remoting import frame as codec_frame
from rocketpy.remoting.frame import DEFAULT_MAX_FRAME_LENGTH
from rocketpy.remoting.headers import RegisterBrokerRequestHeader
from rocketpy.remoting.splitter import FrameSplitter

SEED = int(os.environ.get("ROCKETPY_FUZZ_SEED", "20250601"))
CORPUS = fh.corpus()
MIB = 1 << 20


def test_corpus_is_every_genuine_frame():
    assert len(CORPUS) > 2000
    splitter = FrameSplitter()
    stream = b"".join(CORPUS[:300])
    frames = []
    for i in range(0, len(stream), 7):     # awkward chunks
        frames += splitter.feed(stream[i:i + 7])
    assert frames == CORPUS[:300] and splitter.pending == 0
    for frame in CORPUS:
        decode_frame(frame)


def test_mutated_genuine_frames():
    """~3,000 mutated genuine frames through the splitter (random chunks) and every decoder;
    every eighth one's cost counted too (counting costs ~10x the run)."""
    rng = random.Random(SEED)
    mutator = fh.Mutator(rng, CORPUS)
    stats = fh.FuzzStats()
    contract = fh.codec_contract()
    for i in range(3000):
        fh.check_codec(mutator.mutate(), rng, stats, cost=contract if i % 8 == 0 else None)
    assert stats.inputs == 3000
    seen = stats.outcomes
    # the mutations reach every layer: whole frames, bad lengths, bad headers, over-limit prefixes
    for outcome in ("decoded", "decode:TruncatedFrameError", "decode:HeaderDecodeError",
                    "frame-too-large"):
        assert seen.get(outcome, 0) > 30, seen


def test_hostile_numbers_and_forms_cost_what_genuine_frames_cost_per_byte():
    """Issue 31's seeds, each input counted: a number of a genuine header or body replaced by a
    big exponent, a long digit run or an exact form (fuzzharness.HOSTILE_NUMBERS), often in
    fastjson's lenient form; deep nesting and lenient texts from the other mutations."""
    rng = random.Random(f"{SEED}-numbers")
    mutator = fh.Mutator(rng, CORPUS)
    contract = fh.codec_contract()
    stats = fh.FuzzStats()
    for i in range(400):
        data = mutator.hostile_number(rng.choice(CORPUS))
        if i % 4 == 3:                                        # and one more mutation on top
            data = mutator.mutate(data, rounds=1)
        fh.check_codec(data, rng, stats, cost=contract)
    assert stats.outcomes.get("decoded", 0) > 40 and stats.outcomes.get(
        "decode:HeaderDecodeError", 0) > 40, stats.outcomes
    assert contract.worst[0] < 1


def test_the_cost_contract_fails_an_input_far_dearer_than_its_bytes():
    """The contract sees what issue 31's header cost: a 29-byte input holding 415 KB (what
    ``int(Decimal("1e1000000"))`` makes) is a finding, the same input holding 4 KB is not."""
    contract = fh.codec_contract()
    header = b'{"code":1e1000000,"opaque":1}'
    frame = struct.pack(">II", 4 + len(header), len(header)) + header
    contract.check(frame, costmeter.Cost(300, 4096))
    with pytest.raises(costmeter.CostFinding, match="29|37 bytes"):
        contract.check(frame, costmeter.Cost(300, 415 << 10))
    with pytest.raises(costmeter.CostFinding):
        contract.check(frame, costmeter.Cost(300_000, 4096))       # a loop per byte, say


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=1024))
def test_random_bytes(data):
    fh.check_codec(data, random.Random(len(data)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.sampled_from(CORPUS),
       edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=6),
       keep_lengths=st.booleans())
def test_byte_edits_of_genuine_frames(frame, edits, keep_lengths):
    """Hypothesis-driven edits (it shrinks a failure to the single byte that matters)."""
    buf = bytearray(frame)
    for pos, value in edits:
        buf[pos % len(buf)] = value
    if keep_lengths:
        buf[0:4] = struct.pack(">I", len(buf) - 4)
    fh.check_codec(bytes(buf), random.Random(0))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda kids: (st.lists(kids, max_size=4)
                                  | st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                    max_leaves=20))
def test_json_values_in_every_body_reader(value):
    body = json.dumps(value).encode()
    for reader in fh.BODY_READERS + (bodies.RegisterBrokerBody,):
        try:
            reader.from_json(body)
        except RemotingCodecError:
            pass


_JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                            lambda kids: (st.lists(kids, max_size=3)
                                          | st.dictionaries(st.text(max_size=6), kids, max_size=3)),
                            max_leaves=8)
_HEADER_FIELDS = ("code", "flag", "language", "opaque", "version", "remark", "extFields")


def _header_outcome(reader, header):
    try:
        command = reader(header)
    except HeaderDecodeError as exc:
        return "error", str(exc)
    return (command.code, command.language, command.version, command.opaque, command.flag,
            command.remark, command.ext_fields, command.serialize_type)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.sampled_from([f for f in CORPUS if f[4] == 0]),
       changes=st.dictionaries(st.sampled_from(_HEADER_FIELDS),
                               _JSON_VALUES | st.sampled_from(["JAVA", "CPP", "GO", "java"])
                               | st.sampled_from(fh._INTERESTING_INTS)
                               | st.dictionaries(st.text(max_size=6),
                                                 st.text(max_size=6) | _JSON_VALUES, max_size=3),
                               max_size=3),
       drop=st.lists(st.sampled_from(_HEADER_FIELDS), max_size=2))
def test_usual_json_header_shortcut_reads_as_the_full_reader(frame, changes, drop):
    """Genuine JSON headers with fields replaced or dropped: the shortcut every capture frame
    takes gives the full reader's command, and declines (None) whatever it does not handle."""
    obj = json.loads(frame[8:8 + int.from_bytes(frame[5:8], "big")])
    obj.update(changes)
    for field in drop:
        obj.pop(field, None)
    header = json.dumps(obj).encode()
    fast = usual_json_header(header)
    full = _header_outcome(full_json_header, header)
    if fast is not None:
        assert _header_outcome(lambda h: fast, header) == full
    assert _header_outcome(codec_frame._decode_json_header, header) == full


_PROPERTY_KEYS = ("code", "opaque", "flag", "version", "language", "remark", "extFields",
                  "serializeTypeCurrentRPC", "Code", "OPAQUE", "ext_fields", "body", "suspended")
_MEMBER_VALUES = ("1", "-7", "4294967297", "2147483648", "1e3", '"5"', "null", "true", '"JAVA"',
                  '"a\x01b"', '{"topic":"T"}', '{"a":{"b":1}}', "[1]", '"x\\"y"')


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_PROPERTY_KEYS), st.sampled_from(_MEMBER_VALUES),
                          st.sampled_from(['"%s":', "'%s':", "%s:", '"%s" :', ' "%s":']),
                          st.sampled_from(["", ",", " ", "/*c*/"])), min_size=1, max_size=8))
def test_a_header_with_properties_written_twice_in_any_form(members):
    """fastjson's reading of RemotingCommand (commandread) on headers whose properties come
    again in other spellings, quotes, blanks, comments and stray commas: a command or a
    HeaderDecodeError, and the kernel reads what the codec reads (or leaves it)."""
    text = "{" + ",".join(form % key + value + extra for key, value, form, extra in members) + "}"
    header = text.encode("utf-8")
    try:
        want = codec_frame.python_decode_header(0, header)
    except HeaderDecodeError:
        want = None
    from rocketpy.remoting.kernel import KERNEL
    got = KERNEL.read_header(0, header) if KERNEL is not None else None
    if got is not None:
        assert want is not None and _header_outcome(lambda h: got, header) == \
            _header_outcome(lambda h: want, header)


def test_usual_json_header_shortcut_on_every_odd_value_of_every_field():
    """Each header field set to each interesting value (and dropped), on genuine headers."""
    values = [*fh._INTERESTING_INTS, *fh._INTERESTING_STRINGS, None, True, 1.5, [], {}, {"a": 1},
              {"a": None}, {"a": "b"}, "JAVA", "CPP", "GO", "OTHER"]
    genuine = [f for f in CORPUS if f[4] == 0][::97]
    for frame in genuine:
        base = json.loads(frame[8:8 + int.from_bytes(frame[5:8], "big")])
        for field in _HEADER_FIELDS:
            for value in [*values, _HEADER_FIELDS]:     # the tuple stands for "dropped"
                obj = dict(base)
                if value is _HEADER_FIELDS:
                    obj.pop(field, None)
                else:
                    obj[field] = value
                header = json.dumps(obj).encode()
                fast = usual_json_header(header)
                full = _header_outcome(full_json_header, header)
                assert fast is None or _header_outcome(lambda h: fast, header) == full, (field, value)


def test_usual_json_header_shortcut_takes_every_genuine_json_header():
    headers = [f[8:8 + int.from_bytes(f[5:8], "big")] for f in CORPUS if f[4] == 0]
    assert len(headers) > 1900
    assert all(usual_json_header(h) is not None for h in headers)


# ------------------------------------------------------------------ memory stays bounded

def _peak(fn):
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def test_header_claiming_16_mib_that_never_arrives(monkeypatch):
    """The splitter holds what it was given, nothing more, and stays linear: the bytes it hands
    the frame reader (each join of what it holds) are counted, not timed (it took ~2 s for 4 MiB
    and 30 s for 16 when it joined on every feed)."""
    from rocketpy.remoting import splitter as splitter_module
    handed = []

    def counting(data, limit):
        handed.append(len(data))
        return split(data, limit)
    split = splitter_module.split_frames
    monkeypatch.setattr(splitter_module, "split_frames", counting)
    splitter = FrameSplitter()
    prefix = (DEFAULT_MAX_FRAME_LENGTH - 4).to_bytes(4, "big")   # the largest frame allowed
    chunk = bytes(4096)

    def trickle():
        assert splitter.feed(prefix) == []
        for _ in range(1024):                                     # 4 MiB of the 16 never come
            assert splitter.feed(chunk) == []

    peak = _peak(trickle)
    assert splitter.pending == 4 + 4 * MIB
    assert peak < 4 * MIB + 256 * 1024          # what arrived, not what was announced
    assert handed == [4]                        # the prefix, read once: nothing more till it is whole
    for _ in range(3 * 1024 - 1):               # the other 12 MiB, the frame whole at the end
        assert splitter.feed(chunk) == []
    rest = DEFAULT_MAX_FRAME_LENGTH - splitter.pending
    assert 0 < rest <= len(chunk) and handed == [4]
    assert len(splitter.feed(chunk[:rest])) == 1 and splitter.pending == 0
    assert handed == [4, DEFAULT_MAX_FRAME_LENGTH]  # joined once: linear in what arrived


def test_frame_over_the_limit_is_refused_on_its_prefix():
    for limit in (DEFAULT_MAX_FRAME_LENGTH, 1 << 16):
        splitter = FrameSplitter(limit)
        prefix = (limit - 3).to_bytes(4, "big")
        for byte in prefix[:3]:
            assert splitter.feed(bytes((byte,))) == []
        with pytest.raises(FrameTooLargeError):
            splitter.feed(prefix[3:])
        with pytest.raises(FrameTooLargeError):
            decode_frame(prefix + bytes(4), limit)
    with pytest.raises(TruncatedFrameError):   # a prefix that promises more than the frame has
        decode_frame((DEFAULT_MAX_FRAME_LENGTH - 4).to_bytes(4, "big") + bytes(100))
    with pytest.raises(FrameTooLargeError):
        decode_frame(b"\xff\xff\xff\xff" + bytes(8))


def test_zip_bomb_is_refused_before_it_inflates():
    """A 4 MiB registration body that would inflate to 4 GiB: refused after a few bytes (its
    lines run and memory held are counted, not timed: the same on a busy machine)."""
    bomb = fh.zip_bomb_fast(4096)
    assert len(bomb) < 16 * MIB
    for version in (409, 479):
        cost, error = costmeter.measure(bodies.RegisterBrokerBody.decode, bomb, True, version)
        assert isinstance(error, BodyDecodeError)
        assert cost.lines < 1000 and cost.memory < 2 * MIB, cost
    # a bomb made of valid parts stops at the bound without holding what it inflated
    many = fh.topic_line_bomb(40_000)       # ~880 KiB of topic lines in ~2 KiB

    def refuse():
        with pytest.raises(BodyDecodeError, match="inflates past"):
            bodies.RegisterBrokerBody.decode(many, True, 409, max_inflated=MIB // 4)

    assert _peak(refuse) < MIB // 2


# ------------------------------------------------------------------ regressions found by fuzzing

def test_deeply_nested_json_is_a_decode_error():
    """fastjson.loads let RecursionError out of its first parse attempt."""
    for text in ("[" * 100_000, '{"a":' * 50_000):
        with pytest.raises(BodyDecodeError):
            fastjson.loads(text)
        with pytest.raises(BodyDecodeError):
            bodies.RegisterBrokerBody.from_json(text.encode())


def test_numbers_past_pythons_digit_limit_are_invalid_fields():
    """int() refuses over 4300 digits with a plain ValueError; Java would say NumberFormat."""
    ext = {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "haServerAddr": "h",
           "brokerId": "9" * 5000}
    with pytest.raises(InvalidFieldError, match="brokerId"):
        RegisterBrokerRequestHeader.from_ext_fields(ext)
    with pytest.raises(BodyDecodeError, match="range"):
        bodies.DataVersion.from_json(b'{"counter":"' + b"9" * 5000 + b'"}')
    with pytest.raises(BodyDecodeError):
        bodies.TopicConfig.from_text("T " + "1" * 5000 + " 1 6 SINGLE_TAG", "t")


def test_json_header_ints_must_fit_a_java_int():
    """code/opaque/flag/version are Java ints: fastjson fails on overflow, so does rocketpy."""
    for field in ("code", "opaque", "flag", "version"):
        header = {"code": 105, "flag": 0, "language": "JAVA", "opaque": 1, "version": 479,
                  field: 1 << 40}
        raw = json.dumps(header).encode()
        frame = struct.pack(">II", 4 + len(raw), len(raw)) + raw
        with pytest.raises(HeaderDecodeError, match=field):
            decode_frame(frame)
    raw = b'{"code":105,"opaque":-2147483648,"flag":0,"version":2147483647}'
    assert decode_frame(struct.pack(">II", 4 + len(raw), len(raw)) + raw).opaque == -(1 << 31)


def test_lone_surrogates_encode_as_java_does():
    """A JSON "\\ud800" decodes to a lone surrogate; writing it raised UnicodeEncodeError.
    Java's String.getBytes(UTF-8) writes '?': so does rocketpy now."""
    assert fastjson.dumps({"t": "a\ud800b"}) == b'{"t":"a?b"}'
    assert fastjson.dumps({"t": "a\ud800b"}, standard=True) == b'{"t":"a\\uD800b"}'
    raw = b'{"code":105,"extFields":{"topic":"\\ud800x"},"flag":0,"opaque":5,"version":479}'
    cmd = decode_frame(struct.pack(">II", 4 + len(raw), len(raw)) + raw)
    assert cmd.ext_fields["topic"] == "\ud800x"
    again = decode_frame(cmd.encode())
    assert again.ext_fields["topic"] == "?x"
    cmd.serialize_type = 1
    assert decode_frame(cmd.encode()).ext_fields["topic"] == "?x"


def test_splitter_invariants_on_every_capture_stream():
    """Every capture's client stream, fed one byte at a time, gives back exactly its frames."""
    for path in golden.capture_paths()[:10]:
        frames = [f.data for f in golden.capture_frames(path.name) if f.to_server and f.conn == 0]
        stream = b"".join(frames)
        splitter = FrameSplitter()
        out = []
        for i in range(len(stream)):
            out += splitter.feed(stream[i:i + 1])
        assert out == frames, path.name


def test_zlib_reader_matches_the_old_eager_reader_on_real_bodies():
    """The lazy inflater gives every captured compressed body exactly what a full inflate gives."""
    seen = 0
    for body, compressed, version in fh.register_body_codes():
        if not compressed:
            continue
        seen += 1
        decoded = bodies.RegisterBrokerBody.decode(body, True, version)
        raw = zlib.decompress(body)
        assert decoded.data_version.to_json() == raw[4:4 + struct.unpack(">i", raw[:4])[0]]
        assert len(decoded.topic_config_table) == struct.unpack_from(
            ">i", raw, 4 + struct.unpack(">i", raw[:4])[0])[0]
    assert seen >= 4
