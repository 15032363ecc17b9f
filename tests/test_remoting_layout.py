"""The frame layout module: what it derives from the construct schemas, and its readers and
writers against the schemas on every frame of every genuine capture (tests/golden.py)."""
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
