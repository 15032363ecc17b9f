"""The compiled header kernel (rocketpy/remoting/_kernel) against the Python codec, its oracle.

Wherever the kernel answers, its command is the Python codec's, field for field (the language's
type and the verbatim strings too); wherever the codec refuses a header, the kernel answers None
(the codec then says why). Held on every genuine capture frame, on a fixed 4,000 mutated ones and
on headers built to sit on the kernel's edges. The answer cache's key and the overload peek read
through the kernel must equal what the byte search finds where both answer."""
import random

import pytest

import costcount
import fuzzharness as fh
from rocketpy.remoting import RemotingCommand, frame as codec_frame
from rocketpy.remoting import layout
from rocketpy.remoting.codes import LanguageCode
from rocketpy.remoting.errors import HeaderDecodeError, RemotingCodecError
from rocketpy.remoting.fastjson import FASTJSON_1_2_69, FASTJSON_1_2_83
from rocketpy.remoting.kernel import KERNEL

CORPUS = fh.corpus()
MUTATED = 4000


def _fields(cmd):
    return (cmd, cmd.verbatim, type(cmd.language), type(cmd.remark),
            None if cmd.ext_fields is None else sorted(cmd.ext_fields.items()))


def _oracle(serialize_type, header, dialect=FASTJSON_1_2_83):
    try:
        return codec_frame.python_decode_header(serialize_type, header, dialect)
    except HeaderDecodeError:
        return None


def _check(serialize_type, header, counts):
    """The kernel's reading of one header against the codec's; counts what it answered."""
    got = KERNEL.read_header(serialize_type, header)
    if got is None:
        counts["fallback"] += 1
        return
    want = _oracle(serialize_type, header)
    assert want is not None, (serialize_type, header)
    assert _fields(got) == _fields(want), (serialize_type, header)
    counts["kernel"] += 1


def _header(frame):
    serialize_type, start, end = layout.header_span(frame)
    return serialize_type, frame[start:end]


def test_the_kernel_is_built_and_is_the_codecs_reader():
    assert KERNEL is not None
    assert codec_frame.KERNEL is KERNEL and layout.KERNEL is KERNEL


def test_a_refused_language_table_leaves_the_kernel_as_it_was():
    """The one language-table set-up (``_kernel/languages.c``, linked into both compiled
    modules) refuses a value outside 0..127 and keeps the table it had: the kernel's own copy
    had already overwritten its first entries (JAVA's name, then the int where the member was)
    when it raised, so JAVA's headers read as PYTHON's."""
    header = (b'{"code":105,"flag":0,"language":"JAVA","opaque":1,'
              b'"serializeTypeCurrentRPC":"JSON","version":479}')
    before = _fields(KERNEL.read_header(0, header))
    with pytest.raises(ValueError, match="language BAD = 500 is outside 0..127"):
        KERNEL.configure(RemotingCommand, {"PYTHON": 0, "BAD": 500})
    try:
        assert _fields(KERNEL.read_header(0, header)) == before
        assert KERNEL.read_header(0, header).language is LanguageCode.JAVA
    finally:
        KERNEL.configure(RemotingCommand, dict(LanguageCode.__members__))


def test_every_genuine_frame_reads_as_the_codec_reads_it():
    counts = {"kernel": 0, "fallback": 0}
    for frame in CORPUS:
        _check(*_header(frame), counts)
    # every genuine header is a usual one: none needs the Python codec
    assert counts == {"kernel": len(CORPUS), "fallback": 0}
    assert len(CORPUS) > 2000


def test_mutated_frames_read_as_the_codec_reads_them():
    rng = random.Random(20261126)
    mutator = fh.Mutator(rng, CORPUS)
    counts = {"kernel": 0, "fallback": 0}
    for _ in range(MUTATED):
        frame = mutator.mutate()
        if len(frame) < layout.PREFIX_SIZE:
            continue
        serialize_type, start, end = layout.header_span(frame)
        _check(serialize_type, frame[start:end], counts)
        _check(1 - serialize_type if serialize_type in (0, 1) else 0, frame[start:end], counts)
    # both ways are taken many times
    assert counts["kernel"] > 500 and counts["fallback"] > 500, counts


EDGES = [
    b'{"code":1,"opaque":2,"flag":0,"language":"JAVA","version":3}',
    b'{"code":1,"code":2}',                        # a property twice: fastjson's reading says
    b'{"code":999,"opaque":1,"code":105}', b'{"code":1,"Code":2}', b'{"Code":1,"code":2}',
    b'{"code":4294967297,"opaque":1}', b'{"opaque":1,"code":-4294967297}',   # scanFieldInt wraps
    b'{"code":1,"extFields":{"a":"1","a":"2"}}',            # a map key twice: the last counts
    b'{"Code":7,"opaque":1}',                               # smart match: the dialect's
    b'{"ext_fields":{"a":"b"}}',
    b'{"code":-0,"opaque":-0}', b'{"code":01}', b'{"code":2147483648}', b'{"code":-2147483648}',
    b'{"code":1.0}', b'{"code":"5"}', b'{"code":null}', b'{"code":true}',
    b'{"language":"java"}', b'{"language":"NOPE"}', b'{"language":null}', b'{"language":3}',
    b'{"remark":"a\\u00e9\\ud83d\\ude00\\n\\"\\\\\\/"}', b'{"remark":"\\ud800"}', b'{"remark":"\\udc00x"}',
    b'{"remark":"raw\x01control"}', b'{"remark":"sub\x1a"}', b'{"remark":5}', b'{"remark":""}',
    b'{"extFields":{}}', b'{"extFields":null}', b'{"extFields":{"a":null}}', b'{"extFields":{"a":1}}',
    b'{"extFields":{"a":"b",}}', b"{'code':1}", b'{code:1}', b'{"code":1}/*x*/', b'{"code":1} ',
    b' {"code":1}', b'{"code":1}x', b'{}', b'{', b'', b'{\x00}', b'[1]', b'"x"',
    b'{"serializeTypeCurrentRPC":"JSON","code":4}', b'{"serializeTypeCurrentRPC":[1,{"a":NaN}]}',
    b'{"serializeTypeCurrentRPC":' + b'[' * 40 + b']' * 40 + b'}',
    b'{"code":1,"serializeTypeCurrentRPC":1}', b'{"code":1,"serializeTypeCurrentRPC":2}',
    b'{"code":1,"serializeTypeCurrentRPC":null}', b'{"code":1,"serializeTypeCurrentRPC":"X"}',
    b'{"code":1,"serializeTypeCurrentRPC":1.0}', b'{ }', b'{"x":1}',
    b'{"code":1,"serializeTypeCurrentRPC":' + b"9" * 5000 + b'}',
    b'{"code":1,"other":2}', b'{"code" : 1 , "flag"\t:\n2}', b'\xff{"code":1}', b'{"remark":"\xc3"}',
    b'{"extFields":{' + b",".join(b'"k%d":"v"' % i for i in range(50)) + b'}}',
    b'{"extFields":{' + b",".join(b'"k%d":"v"' % (i % 30) for i in range(50)) + b'}}',
]


@pytest.mark.parametrize("header", EDGES)
def test_edge_headers_read_as_each_dialect_reads_them(header):
    for dialect in (FASTJSON_1_2_69, FASTJSON_1_2_83):
        got = KERNEL.read_header(0, header)
        want = _oracle(0, header, dialect)
        if got is not None:
            assert want is not None and _fields(got) == _fields(want)
        try:
            through_codec = codec_frame.decode_header(0, header, dialect)
        except HeaderDecodeError:
            through_codec = None
        assert (want is None and through_codec is None) or _fields(through_codec) == _fields(want)


def test_the_kernel_reads_no_number_the_codec_refuses():
    """Issue 31: a serializeTypeCurrentRPC of 5,000 digits (past Python's 4,300) was skipped by
    the kernel, which read the header the codec refuses; Java's EnumDeserializer takes only an
    ordinal of SerializeType there, and the kernel now leaves any number there to the codec."""
    for header in (b'{"code":105,"opaque":1,"serializeTypeCurrentRPC":' + b"9" * 5000 + b'}',
                   b'{"code":105,"opaque":1,"serializeTypeCurrentRPC":7}'):
        assert KERNEL.read_header(0, header) is None
        with pytest.raises(HeaderDecodeError):
            codec_frame.decode_header(0, header)
    ordinal = b'{"code":105,"opaque":1,"serializeTypeCurrentRPC":1}'
    assert codec_frame.decode_header(0, ordinal).code == 105


def test_the_kernel_leaves_what_it_does_not_read_to_the_codec():
    # lenient forms, names in another spelling, a key twice, a lone surrogate, raw controls
    for header in (b"{'code':1}", b'{"Code":7}', b'{"code":1,"code":2}', b'{"remark":"\\ud800"}',
                   b'{"remark":"raw\x01"}', b'{"code":"5"}', b'{"language":"java"}'):
        assert KERNEL.read_header(0, header) is None, header
    assert codec_frame.decode_header(0, b'{"Code":7}', FASTJSON_1_2_83).code == 7


def test_binary_headers_read_as_the_codec_reads_them():
    rng = random.Random(7)
    counts = {"kernel": 0, "fallback": 0}
    binary = [f for f in CORPUS if layout.header_span(f)[0] == layout.ROCKETMQ]
    for frame in binary:
        _, header = _header(frame)
        for _ in range(3):
            cut = bytearray(header)
            i = rng.randrange(len(cut))
            cut[i] = rng.randrange(256)
            _check(1, bytes(cut[:rng.randrange(len(cut) + 1)] if rng.random() < 0.3 else cut), counts)
    assert counts["kernel"] > 50 and counts["fallback"] > 50, counts


def _searched(monkeypatch, fn, frame):
    monkeypatch.setattr(layout, "KERNEL", None)
    try:
        return fn(frame)
    finally:
        monkeypatch.setattr(layout, "KERNEL", KERNEL)


def test_the_cache_key_and_the_peek_equal_the_byte_search(monkeypatch):
    read = 0
    for frame in fh.request_corpus():
        key, peeked = KERNEL.request_key(frame), KERNEL.peek(frame)
        searched_key = _searched(monkeypatch, layout.request_without_opaque, frame)
        searched_peek = _searched(monkeypatch, layout.peek_request, frame)
        if key is not None and searched_key is not None:
            assert key == searched_key
        if peeked is not None and searched_peek is not None:
            assert peeked == searched_peek
        if key is not None:
            read += 1
            (pre, post), opaque = key
            assert pre + (opaque if isinstance(opaque, bytes) else b"") in frame
            assert codec_frame.decode_frame(frame).opaque == int(opaque)
        assert layout.request_without_opaque(frame) == (key or searched_key)
    assert read > 100


def test_the_peek_reads_what_the_byte_search_could_not():
    # no flag written (Java's 0): the search wants all three numbers written
    frame = layout.build_frame(0, b'{"code":105,"extFields":{"a":"9"},"opaque":42}')
    assert _searched(pytest.MonkeyPatch(), layout.peek_request, frame) is None
    assert layout.peek_request(frame) == (105, 42, 0)


@pytest.mark.parametrize("how", ["json", "binary"])
def test_cost_grows_linearly_with_the_extfields_a_stranger_writes(how, counting):
    """n and 4n distinct extFields keys (the duplicate check is hashed past a few), read by the
    counting build: each count (keys probed, index entries written, bytes copied) may grow at
    most 6x (linear: 4x; its index quadruples when it grows, so 4x the keys is one more growth
    whatever n is; a key-by-key scan made the probes 16x)."""
    def header(n):
        cmd = codec_frame.RemotingCommand(105, ext_fields={f"key{i:06d}": "v" for i in range(n)},
                                          serialize_type=0 if how == "json" else 1)
        return codec_frame.encode_header(cmd)
    stype = 0 if how == "json" else 1
    kernel = counting.kernel
    costs = []
    for n in (5000, 20000):
        data = header(n)
        kernel.take_cost()
        assert len(kernel.read_header(stype, data).ext_fields) == n
        costs.append(kernel.take_cost())
    assert costs[0]["probes"] > 5000, costs
    growth = costcount.growth(*costs)
    assert max(growth.values()) < 6, (costs, growth)


def _python_frame(frame, max_frame_length):
    saved, codec_frame.KERNEL = codec_frame.KERNEL, None
    try:
        return codec_frame.decode_frame(frame, max_frame_length)
    except RemotingCodecError:
        return None
    finally:
        codec_frame.KERNEL = saved


def test_whole_frames_read_as_the_codec_reads_them():
    """read_frame (decode_frame's kernel path): the prefix's checks, the header and the body."""
    rng = random.Random(11)
    mutator = fh.Mutator(rng, CORPUS)
    read = 0
    frames = [(f, layout.DEFAULT_MAX_FRAME_LENGTH) for f in CORPUS]
    frames += [(mutator.mutate(), rng.choice([layout.DEFAULT_MAX_FRAME_LENGTH, 64, 300]))
               for _ in range(MUTATED)]
    for frame, limit in frames:
        got = KERNEL.read_frame(frame, limit)
        if got is not None:
            want = _python_frame(frame, limit)
            assert want is not None and _fields(got) + (got.body,) == _fields(want) + (want.body,), frame
            read += 1
    assert read > len(CORPUS)
    # a frame over the limit, or with a length that is not its own, is the codec's to refuse
    big = CORPUS[0]
    assert KERNEL.read_frame(big, len(big) - 1) is None
    assert KERNEL.read_frame(big + b"x", layout.DEFAULT_MAX_FRAME_LENGTH) is None
    with pytest.raises(RemotingCodecError):
        codec_frame.decode_frame(big, len(big) - 1)


def test_a_tree_where_nothing_was_built_reads_frames_in_python(tmp_path):
    """Without the compiled modules (no compiler) only the C source directories ``_kernel`` and
    ``_native`` are there, which Python imports as empty namespace packages: the codec and the
    capture decoder must fall back to Python, not fail on the missing functions."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "rocketpy", tmp_path / "rocketpy",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    from rocketpy.remoting.command import RemotingCommand
    request = RemotingCommand.request(105, {"topic": "T"}, version=479)
    frame = codec_frame.encode_frame(request)
    script = ("import sys, warnings\n"
              "from rocketpy.remoting.kernel import KERNEL\n"
              "from rocketpy.remoting import decode_frame\n"
              "from rocketpy.capture import engine\n"
              "with warnings.catch_warnings(record=True) as caught:\n"
              "    warnings.simplefilter('always')\n"
              "    native = engine._native_module()\n"
              "command = decode_frame(sys.stdin.buffer.read())\n"
              "print(KERNEL, native, command.code, command.opaque, command.ext_fields['topic'],\n"
              "      [type(w.message).__name__ for w in caught])\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], input=frame, capture_output=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["None", "None", "105", str(request.opaque), "T",
                                            "['NativeDecoderMissing']"]


def test_a_cached_answers_key_in_javas_form_is_cut_without_reading_the_header(monkeypatch):
    """The answer cache's key of Java's ``"opaque":123,`` is two searches, not a whole header
    read (which cost more per cached answer than it saved: the server's CPU per route query
    was higher with the kernel than without); other forms still go to the kernel."""
    calls = []

    class Counting:
        def request_key(self, frame):
            calls.append(frame)
            return KERNEL.request_key(frame)

    monkeypatch.setattr(layout, "KERNEL", Counting())
    java = layout.build_frame(0, b'{"code":105,"extFields":{"topic":"T1"},"flag":0,'
                                 b'"language":"JAVA","opaque":77,"serializeTypeCurrentRPC":"JSON",'
                                 b'"version":401}')
    key = layout.request_without_opaque(java)
    assert key[1] == b"77" and calls == []
    spaced = layout.build_frame(0, b'{"code":105,"flag":0,"opaque" : 77, "version":401}')
    assert layout.request_without_opaque(spaced) == KERNEL.request_key(spaced)
    assert calls == [spaced]


def test_the_shipped_build_has_no_cost_counters(counting):
    """The counters are a test build's (cost.h): what setup.py builds by default has none."""
    from rocketpy.capture import engine
    assert not hasattr(KERNEL, "take_cost") and not hasattr(engine.NATIVE, "take_cost")
    assert set(counting.kernel.take_cost()) == set(counting.native.take_cost()) == {
        "probes", "moves", "bytes"}
