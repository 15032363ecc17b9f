"""Raw control characters inside JSON strings, as fastjson reads them.

fastjson (what Java decodes headers and bodies with) takes 0x00-0x1F inside a string as they are,
and peers rely on it: the .NET client NewLife.RocketMQ separates SEND_MESSAGE_V2's message
properties with raw 0x01/0x02, and a Java broker answers it SUCCESS. rocketpy reads them the same
way, gives a decoded header back byte for byte, and still escapes every control character in what
it writes itself, as fastjson does.
"""
import pytest
from hypothesis import given, settings, strategies as st

from rocketpy.capture import Stats, decode_file
from rocketpy.remoting import RemotingCommand, decode_frame, fastjson
from rocketpy.remoting.errors import BodyDecodeError, HeaderDecodeError

import capture_synth as cs
from jsonheader import full_json_header, usual_json_header

# NameServer-bound requests and a SEND_MESSAGE_V2 as the .NET client writes them: the message
# properties joined with raw 0x01 (between key and value) and 0x02 (between pairs).
PROPERTIES = "TAGS\x01T0200\x02KEYS\x01order-17\x02WAIT\x01true\x02"
SEND_V2 = ('{"code":310,"extFields":{"a":"PID-x","b":"T0200","c":"TBW102","d":"4","e":"0",'
           '"f":"0","g":"1700000000000","h":"0","i":"' + PROPERTIES + '","j":"0","k":"false",'
           '"m":"false"},"flag":0,"language":"DOTNET","opaque":41,"serializeTypeCurrentRPC":"JSON",'
           '"version":401}').encode()


def frame(header, body=b""):
    return b"".join(((4 + len(header) + len(body)).to_bytes(4, "big"), b"\x00",
                     len(header).to_bytes(3, "big"), header, body))


def test_dotnet_send_message_header_decodes_on_the_fast_path():
    fast = usual_json_header(SEND_V2)
    assert fast is not None      # a capture full of these stays on the shortcut
    assert fast.ext_fields["i"] == PROPERTIES
    assert (fast.code, fast.opaque, fast.version) == (310, 41, 401)
    full = full_json_header(SEND_V2)
    assert full == fast and full.verbatim == fast.verbatim


def test_decoded_header_encodes_back_byte_for_byte():
    data = frame(SEND_V2, b"hello")
    cmd = decode_frame(data)
    assert cmd.encode() == data
    assert b"\\u0001" not in cmd.encode()


def test_every_control_character_round_trips_in_values_keys_and_remark():
    controls = "".join(map(chr, range(0x20)))
    header = ('{"code":0,"extFields":{"k' + controls.replace("\x1a", "") + '":"v' + controls
              + '"},"flag":1,"language":"JAVA","opaque":3,"remark":"r' + controls
              + '","serializeTypeCurrentRPC":"JSON","version":479}').encode()
    cmd = decode_frame(frame(header))
    assert cmd.remark == "r" + controls
    assert cmd.ext_fields == {"k" + controls.replace("\x1a", ""): "v" + controls}
    assert cmd.encode() == frame(header)


def test_what_rocketpy_writes_is_escaped_as_fastjson_writes_it():
    """An answer that quotes a peer's string (a TOPIC_NOT_EXIST remark naming the topic) and any
    string changed after decoding are written as fastjson writes them: escaped."""
    cmd = decode_frame(frame(SEND_V2))
    answer = cmd.create_response(17, remark=f"no route for {cmd.ext_fields['i']}")
    header = answer.encode()[8:]
    assert b"\\u0001" in header and b"\x01" not in header
    assert answer.verbatim is None
    cmd.ext_fields["i"] = PROPERTIES + "X"
    header = cmd.encode()[8:]
    assert b"\x01" not in header and b"T0200\\u0002" in header
    assert decode_frame(cmd.encode()).ext_fields["i"] == PROPERTIES + "X"


def test_escaped_and_raw_forms_read_alike():
    raw = decode_frame(frame(SEND_V2))
    escaped = decode_frame(frame(SEND_V2.replace(b"\x01", b"\\u0001").replace(b"\x02", b"\\u0002")))
    assert raw == escaped
    assert escaped.verbatim is None


def test_0x1a_ends_a_key_in_fastjson_but_not_a_value():
    """fastjson's key scanner stops at 0x1A (its end-of-input mark); its string scanner does
    not. Both readers refuse the key with the same named reason."""
    value = b'{"code":105,"extFields":{"topic":"T\x1aU"},"flag":0,"language":"JAVA","opaque":1}'
    assert decode_frame(frame(value)).ext_fields == {"topic": "T\x1aU"}
    key = b'{"code":105,"extFields":{"to\x1apic":"T"},"flag":0,"language":"JAVA","opaque":1}'
    assert usual_json_header(key) is None
    with pytest.raises(HeaderDecodeError, match="0x1A in the object key"):
        decode_frame(frame(key))
    with pytest.raises(BodyDecodeError, match="0x1A in the object key"):
        fastjson.loads(b'{"a\x1a":1}')


def test_broken_json_with_control_characters_still_names_the_problem():
    with pytest.raises(HeaderDecodeError, match="broken JSON header"):
        decode_frame(frame(b'{"code":1,"remark":"a\x01b",'))
    # a trailing comma is no break to fastjson (AllowArbitraryCommas)
    assert decode_frame(frame(b'{"code":1,"remark":"a\x01b",}')).remark == "a\x01b"


def test_bodies_read_raw_control_characters_and_write_them_escaped():
    """A body string (a topic attribute, a KV value) with raw control characters: read as fastjson
    reads it; written back escaped, as the Java NameServer writes what it stored."""
    body = b'{"table":{"k":"a\x01b"},0:"c\x02"}'
    obj = fastjson.loads(body)
    assert obj == {"table": {"k": "a\x01b"}, 0: "c\x02"}
    assert fastjson.dumps(obj) == b'{"table":{"k":"a\\u0001b"},0:"c\\u0002"}'


def test_raw_string_literals_lists_only_the_strings_written_raw():
    text = '{"a":"x\x01","b":"y\\u0001","c\\n":"z\x02\\""}'
    assert fastjson.raw_string_literals(text) == {"x\x01": '"x\x01"', 'z\x02"': '"z\x02\\""'}


def test_capture_decoder_reads_the_dotnet_frames(tmp_path):
    request = frame(SEND_V2, b"payload")
    answer = RemotingCommand(0, opaque=41, flag=1, ext_fields={"msgId": "M"}).encode()
    segs = cs.conversation([(0, request), (1, answer)])
    path = tmp_path / "dotnet.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs), cs.LINKTYPES["ether"]))
    rows = list(decode_file(str(path), stats=Stats()))
    assert [(r["code"], r["error"]) for r in rows] == [(310, None), (0, None)]
    assert rows[1]["latency_ms"] is not None        # paired with its request by opaque


# Characters fastjson writes as they are, and raw control characters (0x7F-0x9F and U+2028/9,
# which fastjson escapes too, make a header that is not byte-identical without a control character:
# only strings with a raw 0x00-0x1F are remembered as written).
_TEXT = st.text(st.characters(max_codepoint=0x7E) | st.sampled_from("\x00\x01\x02\x1f\né€"),
                max_size=8)


def _raw(text):
    """``text`` as a JSON literal a lenient writer makes: only '"' and '\\' escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@settings(max_examples=300, deadline=None)
@given(ext=st.dictionaries(_TEXT.filter(lambda k: "\x1a" not in k), _TEXT, max_size=4),
       remark=st.none() | _TEXT)
def test_fast_path_and_full_reader_agree_and_round_trip(ext, remark):
    fields = ['"code":0', '"extFields":{' + ",".join(f"{_raw(k)}:{_raw(v)}" for k, v in ext.items())
              + "}", '"flag":0', '"language":"JAVA"', '"opaque":9']
    if remark is not None:
        fields.append('"remark":' + _raw(remark))
    header = ("{" + ",".join(fields) + ',"serializeTypeCurrentRPC":"JSON","version":479}').encode()
    fast = usual_json_header(header)
    full = full_json_header(header)
    assert fast is not None and fast == full
    assert (fast.ext_fields, fast.remark) == (ext, remark)
    assert fast.encode() == frame(header)
