"""Test helper: the hostile-input harness (issue 6) shared by tests/test_fuzz_*.py and
bench/fuzz_long.py.

What it drives, with what:

* inputs: the genuine frames of every capture in ``../shared/fixtures/pcap`` (read by the
  independent reader of :mod:`golden`), mutated by :class:`Mutator` -- byte-level damage,
  structure-aware damage that keeps the lengths consistent so the bytes reach the header and body
  parsers, semantic changes of JSON headers and bodies (wrong types, huge numbers, lone
  surrogates, deep nesting), request-code swaps (one code's body handed to another handler),
  recomputed ``bodyCrc32`` so a damaged body passes the checksum, zip bombs -- and plain random
  bytes;
* targets: the frame splitter (fed in random chunks), :func:`rocketpy.remoting.decode_frame`, the
  body codec (every body class on every body), and a
  :class:`~rocketpy.namesrv.processor.DefaultRequestProcessor` whose answers are encoded as the
  transport would encode them.

The contract it checks (a violation raises :class:`Finding`, carrying a reproducer):

* the codec raises only :class:`~rocketpy.remoting.errors.RemotingCodecError` subclasses;
* the processor never raises, answers every non-oneway request with a known response code, and a
  handler fails only with a codec error (a ``TypeError``/``KeyError``/... caught by the
  processor's safety net is a finding even though the client got SYSTEM_ERROR);
* every answer encodes (the transport writes it), and route state stays readable: after each
  batch the cluster info, topic list and every topic's route are read and encoded;
* memory stays bounded: the splitter never buffers more than it was given, an over-limit length
  prefix is refused on its first 4 bytes, and decoding allocates at most a fixed bound (checked
  with ``tracemalloc`` by the tests);
* no input costs far more per byte than the genuine ones (issue 31: a 29-byte header froze the
  server 37 s and passed every contract above): with a :class:`costmeter.CostContract`, the
  pure-Python reference's lines and memory for an input are held to a multiple of the genuine
  frames' medians per byte (:func:`codec_contract`, :func:`ProcessorTarget.contract`), counted,
  never timed; the bytes it inflates and the answer it writes count as its size
  (:func:`effective_size`).
"""
import base64
import json
import re
import struct
import zlib

import costmeter
import golden
from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv import Channel, Configuration, KVConfigManager, RouteInfoManager, profile_for
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.pending import Pending
from rocketpy.remoting import bodies, decode_frame
from rocketpy.remoting.catalogue import NAMESRV, served
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.errors import FrameTooLargeError, RemotingCodecError
from rocketpy.remoting.splitter import FrameSplitter

__all__ = ["Finding", "corpus", "request_corpus", "Mutator", "check_codec", "ProcessorTarget",
           "NAMESRV_CODES", "BODY_READERS", "golden_limit", "HOSTILE_NUMBERS", "codec_contract",
           "effective_size", "FuzzStats", "zip_bomb", "zip_bomb_fast", "topic_line_bomb",
           "register_body_codes", "SMALL_MAX_FRAME"]

#: A small frame limit for some splitter runs, so random length prefixes hit it often.
SMALL_MAX_FRAME = 1 << 16

_RESPONSE_CODES = {int(c) for c in ResponseCode}
#: every code a NameServer release serves (the catalogue's), and one no release knows
NAMESRV_CODES = [d.code for d in served(NAMESRV)] + [9999]


class Finding(AssertionError):
    """A hostile input broke the contract; ``data`` reproduces it."""

    def __init__(self, message, data=b"", target=""):
        self.data = bytes(data)
        self.target = target
        super().__init__(f"[{target}] {message}; reproducer (base64): "
                         f"{base64.b64encode(self.data[:4096]).decode()}"
                         + (" (first 4096 bytes)" if len(self.data) > 4096 else ""))


# ---------------------------------------------------------------------------- corpus

def corpus():
    """Every distinct genuine frame of the captures (requests and answers), in a stable order."""
    seen = {}
    for frame in golden.all_frames():
        seen.setdefault(frame.data, None)
    return list(seen)


def request_corpus():
    """Every distinct genuine request frame (flag bit 0 clear)."""
    return [f for f in corpus() if not golden.naive(f).flag & 1]


def register_body_codes():
    """(body, compressed, version) of every genuine REGISTER_BROKER request."""
    out = []
    for frame in request_corpus():
        n = golden.naive(frame)
        if n.code == 103 and n.body:
            compressed = (n.ext_fields or {}).get("compressed") == "true"
            out.append((n.body, compressed, n.version))
    return out


def zip_bomb(inflated_size, first_part_length=None):
    """A compressed RegisterBrokerBody that inflates to ``inflated_size`` bytes (a multiple of
    1 MiB is exact); built in milliseconds whatever the size.

    It starts like a genuine one (an int32 part length, by default the whole rest) and then is all
    zeros. A zlib block that encodes 1 MiB of zeros after a sync flush only refers back to zeros,
    so the same bytes can be repeated: ~1 KiB of body per MiB inflated, so a 16 MiB frame can
    carry ~16 GiB. The Adler-32 trailer is left wrong (nothing may read that far anyway).
    """
    mib = 1 << 20
    first = first_part_length if first_part_length is not None else min(inflated_size - 4, (1 << 31) - 1)
    co = zlib.compressobj(9)
    head = co.compress(struct.pack(">i", first) + bytes(mib - 4)) + co.flush(zlib.Z_SYNC_FLUSH)
    block = co.compress(bytes(mib)) + co.flush(zlib.Z_SYNC_FLUSH)
    return head + block * max(0, -(-inflated_size // mib) - 1) + co.flush()


def zip_bomb_fast(inflated_mib):
    """:func:`zip_bomb` of ``inflated_mib`` MiB whose first part claims all of it."""
    return zip_bomb(inflated_mib << 20)


def topic_line_bomb(count):
    """A compressed body of valid parts: a DataVersion, then ``count`` identical topic lines
    (a zip bomb that passes every per-part check and only stops at the total bound)."""
    dv = b'{"counter":1,"timestamp":1}'
    line = b"T 1 1 6 SINGLE_TAG"
    raw = (struct.pack(">i", len(dv)) + dv + struct.pack(">i", count)
           + (struct.pack(">i", len(line)) + line) * count)
    return zlib.compress(raw, 9)


def odd_line_bomb(count):
    """``count`` topic lines that each take the slow path (a ``+`` sign, a tail not seen before):
    1 M in 2.6 MB kept the decode thread busy 4 s; within the default decode budget it stops
    after ~0.6 s."""
    dv = b'{"counter":1,"timestamp":1}'
    parts = [struct.pack(">i", len(dv)), dv, struct.pack(">i", count)]
    for i in range(count):
        line = b"T +%d 1 6 SINGLE_TAG" % i
        parts += (struct.pack(">i", len(line)), line)
    return zlib.compress(b"".join(parts), 6)


# ---------------------------------------------------------------------------- mutation

_INTERESTING_INTS = [0, 1, -1, 2, 127, 128, 255, 256, 32767, 32768, 65535, 65536, (1 << 24) - 1,
                     1 << 24, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, (1 << 63) - 1,
                     1 << 63, -(1 << 31), -(1 << 63) - 1, 10 ** 30]
_INTERESTING_STRINGS = ["", " ", "0", "-1", "+7", "2147483648", "9223372036854775808", "1e3",
                        "0x10", "1_000", "true", "TRUE", "null", "\u0663", "\ud800", "\udfff",
                        "a\u0000b", "\u2028", "é", "\U0001F600", "%s%n", "../../etc/passwd",
                        "127.0.0.1:10911", "DefaultCluster", "TopicTest", "ORDER_TOPIC_CONFIG",
                        "x" * 300, "9" * 5000, "{", "[]", "{}", "\"", "\\"]


#: number texts whose value costs more than their bytes to make (issue 31): big exponents either
#: way, digit runs past Python's 4,300 and fastjson's 65,535, a scale past Java's int, and the
#: exact forms (a fraction of zeros, a zero with an exponent)
HOSTILE_NUMBERS = [b"1e1000000", b"-1E+999999", b"1e-1000000", b"1.5e999999", b"0e999999999",
                   b"1e2147483648", b"1e-2147483649", b"9" * 4301, b"9" * 70000, b"-" + b"9" * 5000,
                   b"9" * 60000 + b".5", b"1." + b"0" * 3000 + b"1", b"1." + b"0" * 200,
                   b"12345678901234567890e-101", b"4294967297", b"-0.0e-0"]
#: a JSON number in a text (not inside a string: the mutation only replaces what it matches)
_NUMBER = re.compile(rb'(?<=[:\[,])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?=[,}\]])')
#: a key of strict JSON, to write unquoted (fastjson's lenient form, read by the pure reader)
_QUOTED_KEY = re.compile(rb'"([A-Za-z_$][A-Za-z0-9_]*)":')


def effective_size(data, max_inflated=64 << 20):
    """The bytes an input makes a reader handle: its own, plus what the compressed bodies of
    its frames inflate to (a zlib stream of 1 KB may inflate to 1 MB, all of which a reader
    reads before its bounds stop it)."""
    size = len(data)
    parts = _split_frame(bytes(data))
    if parts and parts[2][:1] == b"x":
        inflater, body, inflated = zlib.decompressobj(), parts[2], 0
        try:          # in small steps: a stream cut short or with a bad trailer counts up to there
            for at in range(0, len(body), 256):
                inflated += len(inflater.decompress(body[at:at + 256], max_inflated - inflated))
                if inflater.unconsumed_tail or inflater.eof:
                    break
        except zlib.error:
            pass
        size += inflated
    return size


def _fix_lengths(header, body, serialize_type):
    length = 4 + len(header) + len(body)
    return (struct.pack(">I", length) + bytes((serialize_type & 0xFF,))
            + (len(header) & 0xFFFFFF).to_bytes(3, "big") + header + body)


def _json_frame(cmd):
    """``cmd`` with a JSON header written by ``json.dumps`` (ASCII, ``\\u`` escapes), so text the
    codec's own encoder would write as '?' (a lone surrogate) arrives as the escape."""
    obj = {"code": cmd.code, "flag": cmd.flag, "language": cmd.language, "opaque": cmd.opaque,
           "serializeTypeCurrentRPC": "JSON", "version": cmd.version}
    if cmd.ext_fields is not None:
        obj["extFields"] = cmd.ext_fields
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    return _fix_lengths(json.dumps(obj).encode("ascii"), cmd.body or b"", 0)


def _split_frame(frame):
    """(serialize type, header, body) of a frame whose lengths are consistent, else None."""
    if len(frame) < 8:
        return None
    length = int.from_bytes(frame[:4], "big")
    hlen = int.from_bytes(frame[5:8], "big")
    if length + 4 != len(frame) or hlen > length - 4:
        return None
    return frame[4], frame[8:8 + hlen], frame[8 + hlen:]


class Mutator:
    """Turns genuine frames into hostile ones; deterministic for a given ``random.Random``."""

    def __init__(self, rng, frames):
        self.rng = rng
        self.frames = frames
        self.bodies = [golden.naive(f).body for f in frames if golden.naive(f).body]
        self._bombs = [zip_bomb(1 << 20), zip_bomb(1 << 20, first_part_length=-5),
                       zip_bomb(1 << 22, first_part_length=1 << 30), zip_bomb(1 << 30, 27),
                       topic_line_bomb(5_000)]
        self.strategies = [
            (self.raw_bytes, 2), (self.random_bytes, 1), (self.truncate, 1), (self.splice, 1),
            (self.length_prefix, 2), (self.header_length, 1), (self.json_header, 6),
            (self.binary_header, 3), (self.json_body, 5), (self.swap_code, 4),
            (self.replace_body, 3), (self.compressed_body, 3), (self.ext_value, 6),
            (self.hostile_number, 4),
        ]
        self._weights = [w for _, w in self.strategies]

    def pick(self):
        return self.rng.choice(self.frames)

    def mutate(self, frame=None, rounds=None):
        """One hostile input derived from ``frame`` (a random genuine one by default)."""
        data = frame if frame is not None else self.pick()
        rng = self.rng
        for _ in range(rounds or rng.choice((1, 1, 1, 2, 3))):
            strategy = rng.choices(self.strategies, self._weights)[0][0]
            try:
                data = strategy(data)
            except (ValueError, TypeError, AttributeError, RecursionError, struct.error):
                data = self.raw_bytes(data)  # a strategy that does not fit this input
        return data

    # -- byte level ------------------------------------------------------------------------

    def random_bytes(self, data):
        rng = self.rng
        n = rng.choice((0, 1, 3, 4, 7, 8, 9, 16, 64, 300, 4096))
        out = bytes(rng.getrandbits(8) for _ in range(n))
        if rng.random() < 0.5 and n >= 8:  # a plausible prefix: the parser reads past it
            body = out[8:]
            out = _fix_lengths(out[8:8 + rng.randrange(len(body) + 1)], b"", rng.choice((0, 1, 2, 255)))
        return out

    def raw_bytes(self, data):
        rng = self.rng
        buf = bytearray(data)
        for _ in range(rng.choice((1, 2, 4, 16))):
            if not buf:
                break
            op = rng.randrange(6)
            i = rng.randrange(len(buf))
            if op == 0:
                buf[i] ^= 1 << rng.randrange(8)
            elif op == 1:
                buf[i] = rng.choice((0, 0xFF, 0x7F, 0x80, 0x22, 0x5C, 0x7B, 0x7D, rng.getrandbits(8)))
            elif op == 2:
                buf[i:i] = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 9)))
            elif op == 3:
                del buf[i:i + rng.randrange(1, 17)]
            elif op == 4:
                j = rng.randrange(len(buf))
                buf[i:i] = buf[j:j + rng.randrange(1, 33)]
            else:
                if i + 4 <= len(buf):
                    buf[i:i + 4] = struct.pack(">I", rng.choice(_INTERESTING_INTS) & 0xFFFFFFFF)
        if rng.random() < 0.5:  # keep the frame's lengths consistent so parsing goes deeper
            parts = _split_frame(bytes(data))
            if parts and len(buf) >= 8:
                hlen = min(int.from_bytes(buf[5:8], "big"), len(buf) - 8)
                return _fix_lengths(bytes(buf[8:8 + hlen]), bytes(buf[8 + hlen:]), buf[4])
        return bytes(buf)

    def truncate(self, data):
        return data[:self.rng.randrange(len(data) + 1)]

    def splice(self, data):
        other = self.pick()
        rng = self.rng
        return data[:rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1):]

    def length_prefix(self, data):
        value = self.rng.choice(_INTERESTING_INTS + [len(data) - 4 + self.rng.randrange(-8, 9)])
        return struct.pack(">I", value & 0xFFFFFFFF) + data[4:]

    def header_length(self, data):
        if len(data) < 8:
            return data
        value = self.rng.choice((0, 1, 4, (1 << 24) - 1, int.from_bytes(data[5:8], "big") + 1,
                                 int.from_bytes(data[5:8], "big") - 1, len(data)))
        return data[:5] + (value & 0xFFFFFF).to_bytes(3, "big") + data[8:]

    # -- structure aware -------------------------------------------------------------------

    def _value(self, depth=0):
        rng = self.rng
        kind = rng.randrange(9 if depth < 3 else 6)
        if kind == 0:
            return rng.choice(_INTERESTING_INTS)
        if kind == 1:
            return rng.choice(_INTERESTING_STRINGS)
        if kind == 2:
            return rng.choice((True, False, None))
        if kind == 3:
            return rng.choice((1.5, -0.0, 1e308, float(1 << 53)))
        if kind == 4:
            return "".join(chr(rng.randrange(0x20, 0x2FF)) for _ in range(rng.randrange(12)))
        if kind == 5:
            return str(rng.choice(_INTERESTING_INTS))
        if kind == 6:
            return [self._value(depth + 1) for _ in range(rng.randrange(4))]
        if kind == 7:
            return {str(self._value(depth + 1))[:20]: self._value(depth + 1) for _ in range(rng.randrange(4))}
        return "[" * 5000 + "]" * 5000 if rng.random() < 0.2 else {"a": {"b": [self._value(depth + 1)]}}

    def _mutate_tree(self, node, depth=0):
        """Change one random place of a parsed JSON tree (in place where possible)."""
        rng = self.rng
        if isinstance(node, dict) and node and depth < 8 and rng.random() < 0.75:
            key = rng.choice(list(node))
            op = rng.randrange(5)
            if op == 0:
                del node[key]
            elif op == 1:
                node[key] = self._value()
            elif op == 2:
                node[str(self._value())[:30]] = node[key]
            else:
                node[key] = self._mutate_tree(node[key], depth + 1)
            return node
        if isinstance(node, list) and node and depth < 8 and rng.random() < 0.75:
            i = rng.randrange(len(node))
            if rng.random() < 0.2:
                node.append(node[i])
            else:
                node[i] = self._mutate_tree(node[i], depth + 1)
            return node
        return self._value()

    def _dump(self, obj):
        text = json.dumps(obj, ensure_ascii=self.rng.random() < 0.5)
        if isinstance(obj, str) and obj.startswith("[["):  # deep nesting as raw text
            text = obj
        if self.rng.random() < 0.15:  # fastjson's unquoted numeric keys
            text = text.replace('"0":', "0:").replace('"1":', "1:")
        return text.encode("utf-8", "surrogatepass")

    def json_header(self, data):
        parts = _split_frame(data)
        if not parts or parts[0] != 0:
            return self.raw_bytes(data)
        _, header, body = parts
        try:
            obj = json.loads(header)
        except ValueError:
            return self.raw_bytes(data)
        obj = self._mutate_tree(obj)
        return _fix_lengths(self._dump(obj), body, 0)

    def hostile_number(self, data):
        """A number of a JSON header or body replaced by one of :data:`HOSTILE_NUMBERS`, or
        added as a value, the text sometimes in fastjson's lenient form (unquoted keys: the
        pure reader, where a number with an exponent is a BigDecimal); bodies' lengths kept."""
        parts = _split_frame(data)
        if not parts:
            return self.raw_bytes(data)
        stype, header, body = parts
        rng = self.rng
        number = rng.choice(HOSTILE_NUMBERS)
        part = "body" if body[:1] in (b"{", b"[") and (stype != 0 or rng.random() < 0.5) else "header"
        text = body if part == "body" else header
        if stype != 0 and part == "header":
            return self.raw_bytes(data)
        found = list(_NUMBER.finditer(text))
        if found and rng.random() < 0.8:
            match = rng.choice(found)
            text = text[:match.start()] + number + text[match.end():]
        elif text[:1] == b"{":
            key = rng.choice((b"code", b"opaque", b"flag", b"version", b"counter", b"perm",
                              b"epoch", b"serializeTypeCurrentRPC", b"x"))
            text = b'{"' + key + b'":' + number + (b"," if text[1:2] != b"}" else b"") + text[1:]
        if rng.random() < 0.5:
            text = _QUOTED_KEY.sub(rb"\1:", text)
        if part == "body":
            return self._with_body(stype, header, text)
        return _fix_lengths(text, body, stype)

    def ext_value(self, data):
        """Change, add or remove one extFields entry, keeping the rest of the frame genuine."""
        try:
            cmd = decode_frame(data)
        except RemotingCodecError:
            return self.raw_bytes(data)
        rng = self.rng
        ext = dict(cmd.ext_fields or {})
        op = rng.randrange(4)
        if ext and op < 2:
            key = rng.choice(list(ext))
            if op == 0:
                ext[key] = str(rng.choice(_INTERESTING_STRINGS + [str(i) for i in _INTERESTING_INTS]))
            else:
                del ext[key]
        elif op == 2:
            ext[rng.choice(("brokerId", "bodyCrc32", "compressed", "heartbeatTimeoutMillis",
                            "topic", "namespace", "key", "value", "brokerName", "clusterName",
                            "brokerAddr", "enableActingMaster", "__ZONE_NAME", "__ZONE_MODE",
                            "acceptStandardJsonOnly", "AccessKey", "Signature"))] = \
                rng.choice(_INTERESTING_STRINGS)
        else:
            ext = None if rng.random() < 0.5 else {}
        cmd.ext_fields = ext
        if cmd.serialize_type == 0 and rng.random() < 0.5:
            return _json_frame(cmd)   # \u escapes: lone surrogates reach the parser
        return self._encode(cmd, data)

    def _encode(self, cmd, fallback):
        try:
            return cmd.encode()
        except (ValueError, TypeError):
            return fallback

    def binary_header(self, data):
        """Re-encode as a ROCKETMQ binary header, then damage one of its fields."""
        try:
            cmd = decode_frame(data)
        except RemotingCodecError:
            return self.raw_bytes(data)
        cmd.serialize_type = 1
        if isinstance(cmd.code, int) and not -32768 <= cmd.code < 32768:
            return data
        out = self._encode(cmd, data)
        parts = _split_frame(out)
        if not parts:
            return out
        _, header, body = parts
        header = bytearray(header)
        rng = self.rng
        if header and rng.random() < 0.8:
            pos = rng.choice((0, 2, 3, 5, 9, 13, 17, len(header) - 4, rng.randrange(len(header))))
            pos = max(0, min(pos, len(header) - 1))
            width = rng.choice((1, 2, 4))
            value = rng.choice(_INTERESTING_INTS) & ((1 << (8 * width)) - 1)
            header[pos:pos + width] = value.to_bytes(width, "big")
        return _fix_lengths(bytes(header), body, 1)

    def json_body(self, data):
        parts = _split_frame(data)
        if not parts or not parts[2]:
            return self.replace_body(data)
        stype, header, body = parts
        try:
            obj = json.loads(body)
        except ValueError:
            return self.replace_body(data)
        obj = self._mutate_tree(obj)
        return self._with_body(stype, header, self._dump(obj))

    def _with_body(self, stype, header, body):
        """A frame with a new body; the ``bodyCrc32`` is recomputed most of the time."""
        if stype == 0 and self.rng.random() < 0.8:
            try:
                obj = json.loads(header)
                ext = obj.get("extFields") if isinstance(obj, dict) else None
                if isinstance(ext, dict) and "bodyCrc32" in ext:
                    ext["bodyCrc32"] = str(bodies.body_crc32(body))
                    header = json.dumps(obj).encode()
            except ValueError:
                pass
        return _fix_lengths(header, body, stype)

    def replace_body(self, data):
        parts = _split_frame(data)
        if not parts:
            return data
        stype, header, _ = parts
        rng = self.rng
        choice = rng.randrange(5)
        if choice == 0 and self.bodies:
            body = rng.choice(self.bodies)
        elif choice == 1:
            body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(64)))
        elif choice == 2:
            body = b""
        elif choice == 3:
            body = rng.choice((b"null", b"[]", b"{}", b"\"x\"", b"1", b"{\"table\":null}",
                               b"{\"topicConfigSerializeWrapper\":[]}", b"key=value\n\xff",
                               b"{\"keys\":[1,null,{}]}", b"\x00" * 100,
                               b"productEnvName=\\uD800\n", b"listenPort=\\uDFFFx\nclusterTest=true\n",
                               b"a\\\n=\\u12\n", b"configBlackList=x\n", b"kvConfigPath=/tmp/x\n",
                               "orderMessageEnable=\u00e9\ud83d\ude00\n".encode()))
        else:
            body = rng.choice(self._bombs)
        return self._with_body(stype, header, body)

    def compressed_body(self, data):
        """A REGISTER_BROKER with a compressed body built from damaged parts."""
        rng = self.rng
        topics = rng.randrange(4)
        parts = [struct.pack(">i", rng.choice((0, 4, -1, 1 << 20))) if rng.random() < 0.2 else b""]
        dv = rng.choice((b'{"counter":1,"timestamp":2}', b"{}", b"null", b"[", b"\xff\xfe"))
        parts.append(struct.pack(">i", len(dv)) + dv)
        parts.append(struct.pack(">i", rng.choice((topics, topics, -3, 1 << 30))))
        for i in range(topics):
            line = rng.choice((f"T{i} 8 8 6 SINGLE_TAG", f"T{i} 8 8 6 MULTI_TAG {{\"+a\":\"b\"}}",
                               f"T{i} x 8 6 SINGLE_TAG", f"T{i}", "", f"T{i} 8 8 6 BOGUS",
                               f"T{i} 99999999999 8 6 SINGLE_TAG", f"T{i} 8 8 6 SINGLE_TAG {{")).encode()
            parts.append(struct.pack(">i", len(line)) + line)
        fs = rng.choice((b"[]", b'["a:1"]', b"[1,2]", b"{", b""))
        parts.append(struct.pack(">i", len(fs)) + fs)
        if rng.random() < 0.7:
            parts.append(struct.pack(">i", rng.choice((0, 1, -1))))
            if rng.random() < 0.5:
                info = rng.choice((b'{"topic":"T0","totalQueues":1,"bname":"b","epoch":1,'
                                   b'"currIdMap":{0:1}}', b"{}", b"[]"))
                parts.append(struct.pack(">i", len(info)) + info)
        raw = b"".join(parts)
        body = zlib.compress(raw, rng.choice((0, 1, 9)))
        if rng.random() < 0.2:
            body = body[:rng.randrange(len(body) + 1)]
        cmd = RemotingCommand.request(
            103, {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "c",
                  "haServerAddr": "127.0.0.1:2", "brokerId": "0", "compressed": "true",
                  "bodyCrc32": str(bodies.body_crc32(body))}, body,
            version=rng.choice((409, 413, 479)), serialize_type=rng.choice((0, 1)))
        return cmd.encode()

    def swap_code(self, data):
        """The same header and body under another request code (bodies reach other handlers)."""
        parts = _split_frame(data)
        if not parts:
            return data
        stype, header, body = parts
        code = self.rng.choice(NAMESRV_CODES)
        if stype == 0:
            try:
                obj = json.loads(header)
                if isinstance(obj, dict):
                    obj["code"] = code
                    obj["flag"] = self.rng.choice((0, 0, 0, 2, obj.get("flag", 0)))
                    return _fix_lengths(json.dumps(obj).encode(), body, 0)
            except ValueError:
                pass
            return data
        if stype == 1 and len(header) >= 2:
            return _fix_lengths(struct.pack(">h", code) + header[2:], body, 1)
        return data


# ---------------------------------------------------------------------------- targets

class FuzzStats:
    """Counts of inputs and outcomes (outcome name -> count)."""

    def __init__(self):
        self.inputs = 0
        self.outcomes = {}

    def count(self, outcome):
        self.inputs += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def merge(self, other):
        self.inputs += other.inputs
        for k, v in other.outcomes.items():
            self.outcomes[k] = self.outcomes.get(k, 0) + v


def codec_contract():
    """The cost contract of :func:`check_codec`, calibrated once on the genuine frames."""
    global _CODEC_CONTRACT
    if _CODEC_CONTRACT is None:
        import random
        genuine = corpus()[::7][:300]
        with costmeter.reference():
            _CODEC_CONTRACT = costmeter.CostContract(
                "codec", [(f, lambda d: _check_codec(d, random.Random(0))) for f in genuine])
    return _CODEC_CONTRACT


_CODEC_CONTRACT = None


def check_codec(data, rng, stats=None, max_frame_length=None, cost=None):
    """Split ``data`` (in random chunks) and decode every frame and body. Raises :class:`Finding`,
    or with ``cost`` (a contract, :func:`codec_contract`) :class:`costmeter.CostFinding` for an
    input the pure-Python reference reads at a cost far above the genuine frames'."""
    if cost is None:
        return _check_codec(data, rng, stats, max_frame_length)
    outcome = []
    with costmeter.reference():
        error = cost.run(data, lambda: outcome.append(
            _check_codec(data, rng, stats, max_frame_length)), size=effective_size(data))
    if error is not None:
        raise error
    return outcome[0]


def _check_codec(data, rng, stats=None, max_frame_length=None):
    limit = max_frame_length or rng.choice((golden_limit(), SMALL_MAX_FRAME))
    split_error = None
    splitter = FrameSplitter(limit)
    pos = 0
    frames = []
    outcome = "ok"
    try:
        while pos < len(data):
            step = rng.choice((1, 3, 4, 5, 64, len(data)))
            chunk = data[pos:pos + step]
            pos += len(chunk)
            before = splitter.pending
            got = splitter.feed(chunk)
            frames += got
            if splitter.pending > before + len(chunk):
                raise Finding("splitter holds more than it was given", data, "splitter")
            if sum(len(f) for f in got) + splitter.pending != before + len(chunk):
                raise Finding("splitter lost or invented bytes", data, "splitter")
    except FrameTooLargeError:
        outcome = split_error = "frame-too-large"
    except RemotingCodecError as exc:
        outcome = split_error = f"split:{type(exc).__name__}"
    except Finding:
        raise
    except Exception as exc:  # noqa: BLE001 - the point of the harness
        raise Finding(f"splitter raised {type(exc).__name__}: {exc}", data, "splitter") from exc
    for frame in frames:
        if len(frame) > limit:
            raise Finding("splitter let an over-limit frame through", data, "splitter")
        outcome = _decode_one(frame, data, rng)
    # also the whole input as one frame (the transport hands decode_frame exactly one frame)
    whole = _decode_one(data, data, rng)
    if stats is not None:
        stats.count(split_error or (outcome if frames else whole))
    return outcome


def golden_limit():
    from rocketpy.remoting.frame import DEFAULT_MAX_FRAME_LENGTH
    return DEFAULT_MAX_FRAME_LENGTH


BODY_READERS = (bodies.DataVersion, bodies.TopicConfigSerializeWrapper,
                 bodies.TopicConfigAndMappingSerializeWrapper, bodies.TopicRouteData,
                 bodies.ClusterInfo, bodies.TopicList, bodies.KVTable, bodies.RegisterBrokerResult,
                 bodies.BrokerMemberGroup, bodies.GetBrokerMemberGroupResponseBody,
                 bodies.GetRemoteClientConfigBody)


def _decode_one(frame, data, rng):
    try:
        cmd = decode_frame(frame)
    except RemotingCodecError as exc:
        return f"decode:{type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001
        raise Finding(f"decode_frame raised {type(exc).__name__}: {exc}", data, "decode_frame") from exc
    if not isinstance(cmd, RemotingCommand):
        raise Finding("decode_frame returned no command", data, "decode_frame")
    if cmd.body:
        _decode_bodies(cmd, data, rng)
    return "decoded"


def _decode_bodies(cmd, data, rng):
    """The body through the RegisterBrokerBody reader its header implies, the zlib reader, and
    two random other body classes (every class gets every kind of body over a run)."""
    body = cmd.body
    compressed = (cmd.ext_fields or {}).get("compressed", "").lower() == "true"
    readers = [("RegisterBrokerBody", lambda b: bodies.RegisterBrokerBody.decode(
        b, compressed, broker_version=cmd.version if isinstance(cmd.version, int) else 0)),
               ("RegisterBrokerBody.zlib", lambda b: bodies.RegisterBrokerBody.decode(b, True))]
    readers += [(cls.__name__, cls.from_json) for cls in rng.sample(BODY_READERS, 2)]
    for name, read in readers:
        try:
            read(body)
        except RemotingCodecError:
            pass
        except Exception as exc:  # noqa: BLE001
            raise Finding(f"{name} raised {type(exc).__name__}: {exc}", data, f"body:{name}") from exc


def _no_disk(path, text):
    """A store that writes nothing: the manager still snapshots and renders every compaction
    (fuzzing must not fsync per input)."""


class _NoLog:
    """A KV log that keeps nothing (see :func:`_no_disk`); every append succeeds."""

    def segments(self):
        return []

    def read(self, number):
        return b""

    def append(self, number, data):
        pass

    def remove_through(self, number):
        pass


class ProcessorTarget:
    """A fresh NameServer core (processor + route tables + KV + synchronous unregistration)."""

    #: codes whose answers read the whole route state; asked after every batch
    PROBES = (RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)

    def __init__(self, profile_name="5.3", access_control=None, reset_every=500):
        self.profile_name = profile_name
        self.access_control = access_control
        self.reset_every = reset_every
        self.findings = []
        self.stats = FuzzStats()
        self._reset()

    def _reset(self):
        profile = profile_for(self.profile_name)
        props = {"kvConfigPath": "/nonexistent/rocketpy-fuzz/kvConfig.json",
                 "configStorePath": "/nonexistent/rocketpy-fuzz/namesrv.properties",
                 "deleteTopicWithBrokerRegistration": "false"}
        configuration = Configuration.from_properties(props, as_policies(profile), store=_no_disk)
        self.route = RouteInfoManager(configuration.namesrv_config, profile)
        self.kv = KVConfigManager(configuration.namesrv_config.kv_config_path, store=_no_disk,
                                  log=_NoLog())
        self.queue = []
        kwargs = {}
        if self.access_control is not None:
            kwargs["access_control"] = self.access_control
        self.processor = DefaultRequestProcessor(
            self.route, self.kv, submit_unregistration=self._submit, profile=profile,
            configuration=configuration, **kwargs)
        self.processor.handlers = {code: self._guard(code, fn)
                                   for code, fn in self.processor.handlers.items()}
        self.channels = [Channel(i, f"127.0.0.1:{40000 + i}") for i in range(4)] + [
            Channel(9, "10.9.8.7:1234")]
        self.handled = 0
        self.now_ms = 1_700_000_000_000

    def _submit(self, request):
        self.queue.append(request)
        return len(self.queue) < 64

    def _guard(self, code, fn):
        findings = self.findings

        def guarded(*args):
            try:
                reply = fn(*args)
            except RemotingCodecError:
                raise
            except Exception as exc:  # noqa: BLE001
                findings.append((code, exc))
                raise
            if isinstance(reply, Pending):   # a big body: its work and finish are guarded too
                return Pending(self._guard(code, reply.work), self._guard(code, reply.finish))
            return reply
        return guarded

    def contract(self):
        """A cost contract for :meth:`run`'s ``cost``: decoding a request and answering it, per
        byte of request and answer, calibrated on the genuine requests in a fresh target."""
        import random
        calibration = ProcessorTarget(self.profile_name, self.access_control, reset_every=10 ** 9)
        rng = random.Random(0)

        def run(data):
            handled = calibration._handle(data, rng)
            answer = handled[2] if handled else None
            return effective_size(data) + (len(answer.encode()) if answer is not None else 0)
        with costmeter.reference():
            return costmeter.CostContract(f"processor {self.profile_name}",   # a refusal's log
                                          [(f, run) for f in request_corpus()[::5][:200]],
                                          floor=64)                         # line: fixed

    def _handle(self, data, rng):
        """Decode ``data`` and answer it: ``(request, answer)``, None when there is nothing to
        answer. Raises :class:`Finding`."""
        try:
            request = decode_frame(data)
        except RemotingCodecError as exc:
            self.stats.count(f"decode:{type(exc).__name__}")
            return None
        except Exception as exc:  # noqa: BLE001
            raise Finding(f"decode_frame raised {type(exc).__name__}: {exc}", data, "decode_frame") from exc
        if request.is_response:
            self.stats.count("response-ignored")   # the transport drops unmatched responses
            return None
        self.now_ms += rng.choice((0, 1, 1000, 30_000, 130_000))
        channel = rng.choice(self.channels)
        return request, channel, self._process(request, channel, data)

    def run(self, data, rng, cost=None):
        """Decode ``data`` and, if it is a request, process it. Raises :class:`Finding`, or with
        ``cost`` (:meth:`contract`) :class:`costmeter.CostFinding` for a request whose decoding
        and answer cost the pure-Python reference far more than the genuine ones per byte (the
        answer's bytes count as its size: a route state answer is as big as the state)."""
        if cost is None:
            handled = self._handle(data, rng)
        else:
            out = []
            with costmeter.reference():
                cost_of, error = costmeter.measure(lambda: out.append(self._handle(data, rng)))
            if error is not None:
                raise error
            handled = out[0]
            answer = handled[2] if handled else None
            cost.check(data, cost_of, effective_size(data) + (
                len(answer.encode()) if answer is not None else 0))
        if handled is None:
            return
        request, channel, answer = handled
        if answer is None:
            self.stats.count("no-answer")
        else:
            self.stats.count(f"answer:{answer.code}")
        self.handled += 1
        if rng.random() < 0.05:
            self.queue.extend(self.route.on_channel_destroy(channel))
        if rng.random() < 0.05:
            for req, _cid in self.route.scan_not_active_broker(self.now_ms):
                self.queue.append(req)
        if self.queue:
            self.route.unregister_brokers(list(self.queue))
            self.queue.clear()
        if self.handled % 25 == 0:
            self.probe(data)
        if self.handled >= self.reset_every:
            self._reset()

    def _process(self, request, channel, data):
        del self.findings[:]
        try:
            answer = self.processor.process(request, channel, self.now_ms)
        except Exception as exc:  # noqa: BLE001
            raise Finding(f"process raised {type(exc).__name__}: {exc}", data, "processor") from exc
        if self.findings:
            code, exc = self.findings[0]
            raise Finding(f"handler {code} failed with {type(exc).__name__}: {exc} "
                          "(caught by the safety net, but not a codec error)", data, "processor")
        if answer is None:
            if not (request.is_oneway or (request.code not in self.processor.handlers
                                          and not self.processor.policies.handlers.answers_unknown_code)):
                raise Finding("no answer to a two-way request", data, "processor")
            return None
        if not isinstance(answer, RemotingCommand):
            raise Finding(f"answer is {type(answer).__name__}", data, "processor")
        if answer.code not in _RESPONSE_CODES:
            raise Finding(f"answer code {answer.code} is not a RocketMQ response code", data, "processor")
        if answer.opaque != request.opaque or not answer.is_response:
            raise Finding("answer does not match the request (opaque / flag)", data, "processor")
        try:
            frame = answer.encode()
            again = decode_frame(frame)
        except Exception as exc:  # noqa: BLE001
            raise Finding(f"the answer does not encode: {type(exc).__name__}: {exc}", data, "encode") from exc
        if again.code != answer.code:
            raise Finding("the answer does not survive encode/decode", data, "encode")
        return answer

    def probe(self, data=b""):
        """Read the whole route state through the processor; every answer must encode."""
        channel = self.channels[0]
        for code in self.PROBES:
            self._process(RemotingCommand.request(int(code), None, None, opaque=7, version=479),
                          channel, data)
        for topic in list(self.route.topic_queue_table)[:50]:
            self._process(RemotingCommand.request(
                int(RequestCode.GET_ROUTEINFO_BY_TOPIC), {"topic": topic}, None, opaque=8,
                version=self.processor.policies.wire.own_version), channel, data)
            self._process(RemotingCommand.request(
                int(RequestCode.GET_ROUTEINFO_BY_TOPIC), {"topic": topic}, None, opaque=9,
                version=37), channel, data)
