"""The pure frame splitter against genuine frames, in every chunking, and over the limit."""
import random

import pytest
from hypothesis import given, settings, strategies as st

from rocketpy.remoting import (FrameSplitter, FrameTooLargeError, RemotingCommand, decode_frame,
                               split_frames)

ROUTE_QUERY = (  # GET_ROUTEINFO_BY_TOPIC as a genuine 4.9.8 client sends it (rmq49-sc-probe.pcap)
    b'\x00\x00\x00\x84\x00\x00\x00\x80{"code":105,"extFields":{"topic":"TopicA"},"flag":0,'
    b'"language":"JAVA","opaque":4,"serializeTypeCurrentRPC":"JSON","version":409}')


def _stream():
    frames = [ROUTE_QUERY]
    for opaque in range(1, 6):
        cmd = RemotingCommand.request(105, {"topic": f"T{opaque}"}, body=b"x" * opaque * 7,
                                      opaque=opaque, serialize_type=opaque % 2)
        frames.append(cmd.encode())
    return frames


def test_genuine_frame_length_prefix():
    assert int.from_bytes(ROUTE_QUERY[:4], "big") == len(ROUTE_QUERY) - 4
    cmd = decode_frame(ROUTE_QUERY)
    assert (cmd.code, cmd.opaque, cmd.version, cmd.ext_fields) == (105, 4, 409, {"topic": "TopicA"})


def test_one_byte_at_a_time():
    frames = _stream()
    splitter = FrameSplitter()
    out = []
    for byte in b"".join(frames):
        out += splitter.feed(bytes([byte]))
    assert out == frames
    assert splitter.pending == 0


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_random_chunks(data):
    frames = _stream()
    stream = b"".join(frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    splitter = FrameSplitter()
    out = []
    for start, end in zip([0] + cuts, cuts + [len(stream)]):
        out += splitter.feed(stream[start:end])
    assert out == frames


def test_remainder_is_kept():
    frames, rest = split_frames(ROUTE_QUERY + ROUTE_QUERY[:10])
    assert frames == [ROUTE_QUERY] and rest == ROUTE_QUERY[:10]


def test_over_limit_refused_before_buffering():
    splitter = FrameSplitter(max_frame_length=1024)
    with pytest.raises(FrameTooLargeError, match="over the 1024-byte limit"):
        splitter.feed((2000).to_bytes(4, "big"))
    # exactly at the limit (length field counted, as Java's LengthFieldBasedFrameDecoder does)
    at_limit = (1020).to_bytes(4, "big") + b"\x00\x00\x00\x02{}" + b"\x00" * 1014
    assert split_frames(at_limit, 1024)[0] == [at_limit]


def test_garbage_prefix_is_refused():
    noise = random.Random(7).randbytes(64)
    with pytest.raises(FrameTooLargeError):
        split_frames(b"\xff" + noise)
