"""The route ops as bytes (rocketpy.namesrv.opcodec), for a replica of the route tables.

* every op type round-trips exactly (Hypothesis over every field's range, and one of each);
* the format is the documented one (ops spelled out byte by byte from docs/server.md's table
  here, not by the encoder) and stable (the digest of one batch of every op is pinned: a change
  needs a new format number);
* the decoder trusts no length: every truncation, every flipped byte and random bytes give
  OpStreamError or a batch, never another exception; a declared count is checked against the
  bytes left before anything is made for it (a 4-billion count costs no memory);
* the encoder refuses what the format cannot hold.
"""
import hashlib
import struct
import tracemalloc

import pytest
from hypothesis import given, settings, strategies as st

from rocketpy.namesrv import delta as ops
from rocketpy.namesrv.model import DataVersion, MappingInfo, QueueData, TopicConfig
from rocketpy.namesrv.opcodec import FORMAT, OpStreamError, decode_batch, encode_batch
from test_namesrv_route_delta import SAMPLES

# ------------------------------------------------------------------ strategies

text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
names = st.text("abcTé\U0001F600-_.:0123", min_size=1, max_size=8)
opt_text = st.none() | text
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
small = st.integers(-(1 << 31), (1 << 31) - 1)
key = st.tuples(st.none() | names, names)
addrs = st.lists(st.tuples(i64, names), max_size=3).map(tuple)
data_version = st.builds(DataVersion, i64, i64, i64)
queue_data = st.builds(QueueData, opt_text, small, small, small, small)
config = st.builds(TopicConfig, text, small, small, small, small)
mapping_info = st.builds(MappingInfo, opt_text,
                         st.none() | st.lists(st.tuples(small, st.none() | small), max_size=3).map(tuple),
                         st.none() | st.booleans(), st.none() | i64, opt_text, opt_text,
                         st.none() | small)
digest = st.none() | st.binary(max_size=20)
name_tuple = st.lists(text, max_size=5).map(tuple)

OP = st.one_of(
    st.builds(ops.AddToCluster, opt_text, opt_text),
    st.builds(ops.RemoveFromCluster, opt_text, opt_text),
    st.builds(ops.SetBroker, opt_text, opt_text, addrs, st.booleans(), opt_text),
    st.builds(ops.RemoveBroker, opt_text),
    st.builds(ops.PutLive, key, i64, i64, data_version, st.none() | i64, opt_text, opt_text,
              st.none() | name_tuple, st.booleans(), opt_text),
    st.builds(ops.RefreshLive, key, i64),
    st.builds(ops.RemoveLive, key),
    st.builds(ops.RemoveFilterServers, key, opt_text),
    st.builds(ops.MergeTopics, opt_text, st.lists(config, max_size=4).map(tuple), st.booleans(),
              st.booleans(), digest, st.booleans()),
    st.builds(ops.PutTopics, opt_text, st.lists(config, max_size=4).map(tuple), st.booleans(),
              st.booleans()),
    st.builds(ops.PutQueueData, opt_text, queue_data),
    st.builds(ops.RemoveQueueData, opt_text, opt_text),
    st.builds(ops.RemoveBrokerTopics, opt_text),
    st.builds(ops.DropTopic, opt_text),
    st.builds(ops.SetMapping, opt_text, mapping_info, opt_text),
    st.builds(ops.RemoveBrokerMappings, opt_text),
    st.builds(ops.RestoreHighWater, i64, i64, i64),
    st.builds(ops.RestoreCluster, opt_text, name_tuple, i64),
    st.builds(ops.RestoreAppliedDigest, opt_text, st.binary(max_size=20)),
    st.builds(ops.RestoreTopics, st.lists(queue_data, max_size=3).map(tuple), i64, name_tuple),
    st.builds(ops.NotifyMinBrokerIdChanged, addrs, opt_text, opt_text),
    st.builds(ops.InvalidateRoutes),
)


def test_every_op_round_trips():
    batch = decode_batch(encode_batch(SAMPLES))
    assert batch == SAMPLES and [type(op) for op in batch] == [type(op) for op in SAMPLES]
    assert decode_batch(encode_batch(())) == ()


@settings(max_examples=400, deadline=None)
@given(st.lists(OP, max_size=6))
def test_random_ops_round_trip(batch):
    assert decode_batch(encode_batch(batch)) == tuple(batch)


# ------------------------------------------------------------------ the documented format

def _u32(n):
    return struct.pack(">I", n)


def _str(value):
    if value is None:
        return _u32(0)
    data = value.encode("utf-8", "surrogatepass")
    return _u32(len(data) + 1) + data


def _i64(n):
    return struct.pack(">q", n)


def test_the_bytes_are_the_documented_ones():
    batch = (ops.AddToCluster("C", "broker-a"), ops.RefreshLive((None, "h:1"), 5),
             ops.SetBroker("C", "b", ((0, "h:1"),), True, None),
             ops.RestoreCluster("C", ("a", "é"), 2), ops.InvalidateRoutes())
    expected = (bytes([FORMAT]) + _u32(5)
                + b"\x01" + _str("C") + _str("broker-a")
                + b"\x06" + _str(None) + _str("h:1") + _i64(5)
                + b"\x03" + _str("C") + _str("b") + _u32(1) + _i64(0) + _str("h:1") + b"\x01"
                + _str(None)
                + b"\x12" + _str("C") + _u32(2) + _u32(3) + _u32(1) + _u32(1) + "aé".encode()
                + _i64(2)
                + b"\x16")
    assert encode_batch(batch) == expected
    assert decode_batch(expected) == batch


def test_the_format_is_stable():
    """One batch of every op type, pinned: changing how any op is written needs a new FORMAT
    (a replica of the other format refuses the stream, it does not misread it)."""
    data = encode_batch(SAMPLES)
    assert FORMAT == 1
    assert hashlib.blake2b(data, digest_size=16).hexdigest() == "9b7befd3e1305fd161c06ab7040b7f23", \
        hashlib.blake2b(data, digest_size=16).hexdigest()


# ------------------------------------------------------------------ trusting nothing

def _refused_or_decoded(data):
    try:
        decode_batch(data)
    except OpStreamError as exc:
        assert "\n" not in str(exc)


def test_every_truncation_is_refused():
    data = encode_batch(SAMPLES)
    for end in range(len(data)):
        with pytest.raises(OpStreamError):
            decode_batch(data[:end])
    with pytest.raises(OpStreamError, match="after the last op"):
        decode_batch(data + b"\x00")


def test_every_flipped_byte_is_refused_or_read_as_a_batch():
    data = encode_batch(SAMPLES)
    for i in range(len(data)):
        for flip in (0x01, 0x80, 0xFF):
            _refused_or_decoded(data[:i] + bytes([data[i] ^ flip]) + data[i + 1:])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_are_refused_or_read_as_a_batch(data):
    _refused_or_decoded(bytes([FORMAT]) + data)


@pytest.mark.parametrize("data, reason", [
    (bytes([2]) + _u32(0), "format 2"),
    (bytes([FORMAT]) + _u32(1) + b"\xee", "tag 238"),
    (bytes([FORMAT]) + _u32(1) + b"\x16\x16", "after the last op"),
    (bytes([FORMAT]) + _u32(1_000_000) + b"\x16", "1000000 ops declared"),
    (bytes([FORMAT]) + _u32(1) + b"\x04" + _u32(3) + b"\xff\xfe", "not UTF-8"),
    (bytes([FORMAT]) + _u32(1) + b"\x03" + _str("C") + _str("b") + _u32(0) + b"\x02" + _str(None),
     "a flag of 2"),
    (bytes([FORMAT]) + _u32(1) + b"\x12" + _str("C") + _u32(2) + _u32(1) + _u32(1) + _u32(1)
     + b"ab" + _i64(0), "do not add up"),
])
def test_what_is_refused_says_why(data, reason):
    with pytest.raises(OpStreamError, match=reason):
        decode_batch(data)


@pytest.mark.parametrize("field", ["ops", "names", "configs", "addresses"])
def test_a_declared_count_is_checked_before_anything_is_made_for_it(field):
    """A count of 4 billion in a few bytes: refused, with no allocation in proportion."""
    huge = _u32(0xFFFFFFFF)
    data = {"ops": bytes([FORMAT]) + huge + b"\x16",
            "names": bytes([FORMAT]) + _u32(1) + b"\x12" + _str("C") + huge + _u32(0),
            "configs": bytes([FORMAT]) + _u32(1) + b"\x0a" + _str("a") + huge + _u32(0),
            "addresses": bytes([FORMAT]) + _u32(1) + b"\x03" + _str("C") + _str("b") + huge}[field]
    tracemalloc.start()
    try:
        with pytest.raises(OpStreamError, match="declared"):
            decode_batch(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


@pytest.mark.parametrize("op", [
    ops.RestoreHighWater(1 << 63, 0, 0),                      # past 64 bits
    ops.SetBroker("C", "b", ((0, "h"),), 1, None),             # 1 is not a bool
    ops.SetBroker("C", "b", {0: "h"}, True, None),             # a dict, not a tuple
    ops.RestoreCluster("C", ("a", None), 1),                   # a name that is not a string
    ops.MergeTopics("a", ({"topic": "T"},), False, False, None),   # not a TopicConfig
    ops.PutTopics("a", (TopicConfig("T", 1 << 70),), False),
    ("add_to_cluster", ("C", "a")),                            # not an op
])
def test_what_the_format_cannot_hold_is_refused_when_encoded(op):
    with pytest.raises(OpStreamError):
        encode_batch((op,))
