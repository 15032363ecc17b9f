"""The frame layout module: what it derives from the construct schemas, and its readers and
writers against the schemas on every frame of every genuine capture (tests/golden.py)."""
import random
import struct

import pytest
from hypothesis import given, settings, strategies as st

import golden
from rocketpy.remoting import RemotingCommand, decode_frame
from rocketpy.remoting import layout as L
from rocketpy.remoting.errors import FrameTooLargeError, TruncatedFrameError
from rocketpy.remoting.frame import encode_template

FRAMES = [frame.data for frame in golden.all_frames()]


def test_derived_constants_are_the_schemas():
    """The prefix and the binary header's fixed fields, as construct sizes them."""
    assert L.PREFIX_SIZE == L.FRAME.length.sizeof() + L.FRAME.serialize_type.sizeof() \
        + L.FRAME.header_length.sizeof() == 8
    assert L.LENGTH_SIZE == 4
    fixed = L.ROCKETMQ_HEADER.subcons[:5]
    offset = 0
    for sub in fixed:
        assert L.ROCKETMQ_FIELDS[sub.name] == (offset, sub.sizeof())
        offset += sub.sizeof()
    assert L.ROCKETMQ_OPAQUE == (5, 9)
    assert L.ROCKETMQ_FIXED.size == offset + 4            # + the remark's length field
    assert L.ROCKETMQ_MIN_HEADER == L.ROCKETMQ_HEADER.build(
        {"code": 0, "language": 0, "version": 0, "opaque": 0, "flag": 0, "remark": b"",
         "ext_fields": []}).__len__()
    # one entry's two length fields, as the schema builds them
    entry = L.ROCKETMQ_HEADER.build({"code": 0, "language": 0, "version": 0, "opaque": 0,
                                     "flag": 0, "remark": b"",
                                     "ext_fields": [{"key": b"k", "value": b"vv"}]})
    at = L.ROCKETMQ_FIXED.size + L.ROCKETMQ_EXT_LENGTH.size
    assert L.ROCKETMQ_KEY_LENGTH.unpack_from(entry, at) == (1,)
    assert L.ROCKETMQ_VALUE_LENGTH.unpack_from(entry, at + L.ROCKETMQ_KEY_LENGTH.size + 1) == (2,)


def test_prefix_readers_agree_with_the_schema_on_every_captured_frame():
    assert len(FRAMES) > 3000
    for data in FRAMES:
        parsed = L.FRAME.parse(data)
        total, serialize_type, header_length = L.read_prefix(data)
        assert (total, serialize_type, header_length) == (
            parsed.length + 4, parsed.serialize_type, parsed.header_length)
        assert L.frame_total(data) == total == len(data)
        assert L.frame_length(data) == parsed.length
        assert L.header_span(data) == (serialize_type, 8, 8 + header_length)
        assert L.build_frame(serialize_type, parsed.header, parsed.body) == data
        assert L.pack_prefix(serialize_type, len(parsed.header), len(parsed.body)) == data[:8]
        assert L.header_bytes(data) == (serialize_type, parsed.header)
        assert L.body_length(total, header_length) == len(parsed.body)


def test_every_captured_frame_start_is_plausible_and_its_cuts_undecided():
    """The frame-start judgement a capture hunts with: every genuine frame passes it, whole or
    cut anywhere inside its prefix (UNDECIDED there, never IMPLAUSIBLE)."""
    for data in FRAMES:
        assert L.plausible_prefix(data, 0) == L.PLAUSIBLE
        assert L.plausible_binary_fields(data, 0)
        assert L.has_prefix(data)
        for cut in range(L.PREFIX_SIZE):
            assert L.plausible_prefix(data[:cut], 0) == L.UNDECIDED
            assert not L.has_prefix(data[:cut])
        assert L.header_bytes(data[:L.PREFIX_SIZE + L.read_prefix(data)[2] - 1])[1] is None
        if L.read_prefix(data)[1] == L.JSON:     # the pattern a hunt scans with sees its start
            assert L.FRAME_START_CANDIDATE.match(data)


@pytest.mark.parametrize("prefix, why", [
    (L.pack_prefix(2, 30, 0), "serialize type 2"),
    (L.pack_prefix(L.JSON, 0, 30), "no header"),
    (L.pack_prefix(L.JSON, 30, 0)[:7] + b"\x1f", "header past the frame's end"),
    (L.pack_prefix(L.ROCKETMQ, L.ROCKETMQ_MIN_HEADER - 1, 0), "binary header under its fixed part"),
    (struct.pack(">I", L.DEFAULT_MAX_FRAME_LENGTH) + L.pack_prefix(L.JSON, 1, 0)[4:], "over the limit"),
    (struct.pack(">I", 3) + b"\x00\x00\x00\x01", "shorter than its prefix"),
])
def test_implausible_frame_starts(prefix, why):
    assert L.plausible_prefix(prefix + b"{}", 0) == L.IMPLAUSIBLE, why


def test_a_json_header_must_open_with_a_brace_and_a_binary_one_hold_a_known_flag_and_language():
    json_start = L.pack_prefix(L.JSON, 2, 0)
    assert L.plausible_prefix(json_start + b"{}", 0) == L.PLAUSIBLE
    assert L.plausible_prefix(json_start + b"[]", 0) == L.IMPLAUSIBLE
    fixed = L.ROCKETMQ_HEADER.build({"code": 105, "language": 0, "version": 0, "opaque": 1,
                                     "flag": 0, "remark": b"", "ext_fields": []})
    start = L.pack_prefix(L.ROCKETMQ, len(fixed), 0) + fixed
    assert L.plausible_binary_fields(start, 0)
    at = L.PREFIX_SIZE + L.ROCKETMQ_FIELDS["flag"][0]
    assert not L.plausible_binary_fields(start[:at] + struct.pack(">i", 4) + start[at + 4:], 0)
    at = L.PREFIX_SIZE + L.ROCKETMQ_FIELDS["language"][0]
    for language, believed in ((L.MAX_LANGUAGE, True), (L.MAX_LANGUAGE + 1, False), (-1, False)):
        changed = start[:at] + struct.pack(">b", language) + start[at + 1:]
        assert L.plausible_binary_fields(changed, 0) is believed
    assert L.plausible_binary_fields(start[:L.PREFIX_SIZE + 3], 0)    # not there yet: no verdict


def test_opaque_readers_agree_with_the_schema_on_every_captured_frame():
    binary = 0
    for data in FRAMES:
        command = decode_frame(data)
        peeked = L.peek_request(data)
        if peeked is not None:
            assert peeked == (command.code, command.opaque, command.flag)
        split = L.request_without_opaque(data)
        assert split is not None
        (before, after), opaque = split
        if command.serialize_type == L.ROCKETMQ:
            binary += 1
            header = L.ROCKETMQ_HEADER.parse(data[8:8 + L.read_prefix(data)[2]])
            assert peeked == (header.code, header.opaque, header.flag)
            assert opaque == header.opaque
            raw = struct.pack(">i", opaque)
        else:
            assert int(opaque) == command.opaque
            raw = opaque
        assert data[8:] == before + raw + after


def test_every_captured_frame_re_encodes_through_its_template_with_any_opaque():
    for data in FRAMES:
        command = decode_frame(data)
        template = encode_template(command)
        assert template.encode_for(command.opaque) == data
        for other in (0, 7, -1, 2 ** 31 - 1, -2 ** 31, 123456789):
            command.opaque = other
            assert template.encode_for(other) == command.encode()


def test_split_frames_and_frames_at_least():
    stream = b"".join(FRAMES[:50])
    frames, rest = L.split_frames(stream + FRAMES[50][:-1])
    assert frames == FRAMES[:50] and rest == FRAMES[50][:-1]
    assert L.frames_at_least(stream, 50) and not L.frames_at_least(stream, 51)
    assert not L.frames_at_least(stream[:-1], 50)


def test_length_limits():
    with pytest.raises(FrameTooLargeError):
        L.frame_length((L.DEFAULT_MAX_FRAME_LENGTH - 3).to_bytes(4, "big"))
    assert L.frame_length((L.DEFAULT_MAX_FRAME_LENGTH - 4).to_bytes(4, "big")) \
        == L.DEFAULT_MAX_FRAME_LENGTH - 4
    with pytest.raises(TruncatedFrameError):
        L.frame_length((3).to_bytes(4, "big"))


def test_unreadable_opaques():
    assert L.request_without_opaque(L.build_frame(0, b'{"code":1,"flag":0}')) is None
    assert L.request_without_opaque(L.build_frame(0, b'{"code":1,"opaque":01,"flag":0}')) is None
    assert L.request_without_opaque(L.build_frame(1, b"\x00" * 20)) is None  # under the minimum
    assert L.request_without_opaque(L.build_frame(7, b"{}")) is None
    template = encode_template(RemotingCommand(code=0, serialize_type=1))
    assert template.opaque_bytes(2 ** 31) is None


@settings(max_examples=200, deadline=None)
@given(st.integers(-2 ** 31, 2 ** 31 - 1), st.integers(-2 ** 31, 2 ** 31 - 1),
       st.sampled_from([0, 1]), st.text(max_size=20),
       st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
       st.binary(max_size=40))
def test_templates_of_random_commands(opaque, other, serialize_type, remark, ext, body):
    command = RemotingCommand(code=105, opaque=opaque, flag=1, remark=remark or None,
                              ext_fields=ext or None, body=body or None,
                              serialize_type=serialize_type)
    template = encode_template(command)
    assert template.encode_for(opaque) == command.encode()
    command.opaque = other
    assert template.encode_for(other) == command.encode()
    split = L.request_without_opaque(command.encode())
    if split is not None:   # a JSON header whose ext or remark also says "opaque": is refused
        assert split[1] == (other if serialize_type else str(other).encode())


def _candidate_by_the_prefix(buf, i):
    """Where the hunt's pattern must match, stated with the prefix reader: a length within the
    default limit, then JSON with its ``{`` or ROCKETMQ with a header under the hunt's bound."""
    if len(buf) - i < L.PREFIX_SIZE:
        return False
    total, serialize_type, header_length = L.read_prefix(buf, i)
    if total - L.LENGTH_SIZE >= L.DEFAULT_MAX_FRAME_LENGTH:     # (to the byte: its top byte is 0)
        return False
    if serialize_type == L.JSON:
        return len(buf) - i > L.PREFIX_SIZE and buf[i + L.PREFIX_SIZE] == L.JSON_HEADER_START
    return serialize_type == L.ROCKETMQ and header_length < L.HUNT_BINARY_HEADER_LIMIT


def test_the_hunts_candidates_are_the_prefix_readers():
    """FRAME_START_CANDIDATE is built from the prefix's fields: it matches at exactly the
    offsets the prefix reader names (genuine frames, cut and mutated around their prefix), and
    at every offset where plausible_prefix believes a frame with a header in the hunt's bound."""
    rng = random.Random(22)
    streams = [b"".join(FRAMES[:5]), *FRAMES[:40]]
    for data in FRAMES[:40]:
        for _ in range(20):
            mutated = bytearray(data[:L.PREFIX_SIZE + 4])
            mutated[rng.randrange(len(mutated))] = rng.choice([0, 1, 2, 0x7B, 0xFF, rng.randrange(256)])
            streams.append(bytes(rng.choice([b"", b"\x00", b"\x00\x01"])) + bytes(mutated))
    for buf in streams:
        found = {m.start() for m in L.FRAME_START_CANDIDATE.finditer(buf)}
        assert found == {i for i in range(len(buf)) if _candidate_by_the_prefix(buf, i)}, buf[:16]
        for i in range(len(buf)):
            if (L.plausible_prefix(buf, i) == L.PLAUSIBLE and len(buf) - i > L.PREFIX_SIZE
                    and L.read_prefix(buf, i)[2] < L.HUNT_BINARY_HEADER_LIMIT):
                assert i in found
