"""Wire codec layer: the frame layout, stated once (Java ``RemotingCommand.encode``/``decode``,
``NettyDecoder``'s ``LengthFieldBasedFrameDecoder``, ``RocketMQSerializable``)::

    int32   length            bytes that follow (header-length field + header + body)
    int8    serialize type    0 JSON, 1 ROCKETMQ
    int24   header length
    bytes   header            fastjson object, or ROCKETMQ binary (ROCKETMQ_HEADER)
    bytes   body

The ``construct`` schemas :data:`FRAME` and :data:`ROCKETMQ_HEADER` are the specification; the
``struct`` formats and offsets here are derived from them, and are all the rest of rocketpy uses
to touch frame bytes (framing, answer reuse, the overload answer, the capture decoder). No other
module slices a frame; ``tests/test_remoting_layout.py`` checks that these readers agree with
the schemas on every captured frame."""
import re
import struct

from construct import (Bytes, FormatField, GreedyBytes, GreedyRange, Int8sb, Int8ub, Int16sb,
                       Int16ub, Int24ub, Int32sb, Int32ub, Prefixed, Rebuild, Struct, len_, this)

from .errors import FrameTooLargeError, TruncatedFrameError
from .kernel import KERNEL

__all__ = ["FRAME", "FRAME_COMPILED", "ROCKETMQ_HEADER", "ROCKETMQ_HEADER_COMPILED",
           "DEFAULT_MAX_FRAME_LENGTH", "JSON", "ROCKETMQ", "JSON_HEADER_START", "PREFIX_SIZE", "LENGTH_SIZE",
           "ROCKETMQ_FIXED", "ROCKETMQ_FIELDS", "ROCKETMQ_OPAQUE", "ROCKETMQ_MIN_HEADER",
           "ROCKETMQ_EXT_LENGTH", "ROCKETMQ_KEY_LENGTH", "ROCKETMQ_VALUE_LENGTH",
           "frame_length", "frame_total", "read_prefix", "pack_prefix", "build_frame",
           "header_span", "has_prefix", "header_bytes", "body_length", "rocketmq_field",
           "frame_at", "bytes_needed", "frames_at_least", "whole_frames", "split_frames",
           "FRAME_START_CANDIDATE", "CANDIDATE_TAIL", "HUNT_BINARY_HEADER_LIMIT", "PLAUSIBLE", "IMPLAUSIBLE", "UNDECIDED",
           "MAX_LANGUAGE", "opens_json_header", "plausible_prefix", "plausible_binary_fields",
           "request_without_opaque", "peek_request", "OpaqueTemplate"]

#: Java ``NettySystemConfig.frameMaxLength`` default; counts the 4-byte length field too.
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024

JSON, ROCKETMQ = 0, 1
#: the first byte of a JSON header (fastjson writes an object)
JSON_HEADER_START = ord("{")

FRAME = Struct(
    "length" / Rebuild(Int32ub, 4 + len_(this.header) + len_(this.body)),
    "serialize_type" / Int8ub,
    "header_length" / Rebuild(Int24ub, len_(this.header)),
    "header" / Bytes(this.header_length),
    "body" / Bytes(this.length - 4 - this.header_length),
)

#: ``RocketMQSerializable``: a zero length stands for null (remark) or an absent map (extFields).
ROCKETMQ_HEADER = Struct(
    "code" / Int16sb,
    "language" / Int8sb,
    "version" / Int16sb,
    "opaque" / Int32sb,
    "flag" / Int32sb,
    "remark" / Prefixed(Int32ub, GreedyBytes),
    "ext_fields" / Prefixed(Int32ub, GreedyRange(Struct(
        "key" / Prefixed(Int16ub, GreedyBytes),
        "value" / Prefixed(Int32ub, GreedyBytes),
    ))),
)

FRAME_COMPILED = FRAME.compile()
ROCKETMQ_HEADER_COMPILED = ROCKETMQ_HEADER.compile()


# -- derived from the schemas ------------------------------------------------------------------

def _sizes(schema):
    """``{field: (offset, size)}`` of the schema's fixed-size leading fields."""
    out, offset = {}, 0
    for sub in schema.subcons:
        try:
            size = sub.sizeof()
        except Exception:  # the first field whose size depends on the data ends the fixed part
            break
        out[sub.name] = (offset, size)
        offset += size
    return out


def _format(sub):
    """The ``struct`` format letter of a fixed-width construct integer field."""
    while not isinstance(sub, FormatField):
        sub = sub.subcon
    return sub.fmtstr[1:]


_PREFIX_FIELDS = _sizes(FRAME)                       # length, serialize_type, header_length
#: bytes before the header: the length field, the serialize type and the header length
PREFIX_SIZE = sum(size for _, size in _PREFIX_FIELDS.values())
#: the length field, which the length it holds does not count
LENGTH_SIZE = _PREFIX_FIELDS["length"][1]
_HEADER_AT = _PREFIX_FIELDS["header_length"][0]
_TYPE_AT = _PREFIX_FIELDS["serialize_type"][0]
# Java reads the serialize type and the header length as one int32 (type in the top byte)
assert (_TYPE_AT, _HEADER_AT) == (LENGTH_SIZE, LENGTH_SIZE + 1) and PREFIX_SIZE == 2 * LENGTH_SIZE
_PREFIX = struct.Struct(">" + _format(FRAME.length) * 2)
_LENGTH = struct.Struct(">" + _format(FRAME.length))
_HEADER_LENGTH_MASK = (1 << 8 * _PREFIX_FIELDS["header_length"][1]) - 1

_BINARY_FIELDS = _sizes(ROCKETMQ_HEADER)             # code ... flag, and the remark's length
#: code, language, version, opaque, flag and the remark length, as one ``struct``
ROCKETMQ_FIXED = struct.Struct(">" + "".join(_format(ROCKETMQ_HEADER.subcons[i])
                                             for i in range(len(_BINARY_FIELDS)))
                               + _format(ROCKETMQ_HEADER.remark.lengthfield))
_OPAQUE_AT, _OPAQUE_SIZE = _BINARY_FIELDS["opaque"]
#: ``{field: (offset, size)}`` of a binary header's fixed fields
ROCKETMQ_FIELDS = dict(_BINARY_FIELDS)
#: where a binary header holds its opaque: ``header[start:end]``
ROCKETMQ_OPAQUE = (_OPAQUE_AT, _OPAQUE_AT + _OPAQUE_SIZE)
_FLAG_AT = _BINARY_FIELDS["flag"][0]
_FIELD_READERS = {sub.name: struct.Struct(">" + _format(sub)).unpack_from
                  for sub in ROCKETMQ_HEADER.subcons[:len(_BINARY_FIELDS)]}
_CODE = struct.Struct(">" + _format(ROCKETMQ_HEADER.code))
_INT32 = struct.Struct(">" + _format(ROCKETMQ_HEADER.opaque))
_ENTRY = ROCKETMQ_HEADER.ext_fields
while not isinstance(_ENTRY, Struct):
    _ENTRY = _ENTRY.subcon
#: the binary header's variable part: the extFields block's length, then per entry the key's
#: and the value's length
ROCKETMQ_EXT_LENGTH = struct.Struct(">" + _format(ROCKETMQ_HEADER.ext_fields.lengthfield))
ROCKETMQ_KEY_LENGTH = struct.Struct(">" + _format(_ENTRY.key.lengthfield))
ROCKETMQ_VALUE_LENGTH = struct.Struct(">" + _format(_ENTRY.value.lengthfield))
#: the shortest binary header: the fixed fields, an empty remark and an absent extFields
ROCKETMQ_MIN_HEADER = ROCKETMQ_FIXED.size + ROCKETMQ_EXT_LENGTH.size


# -- the prefix ------------------------------------------------------------------------------

def frame_total(buf, pos=0):
    """The whole size of the frame at ``buf[pos]``, prefix included, as its length field says
    (unchecked: :func:`frame_length` applies the limits)."""
    return _LENGTH.unpack_from(buf, pos)[0] + LENGTH_SIZE


def frame_length(prefix, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
    """The value of a length field, refused past the limit (as Java's frame decoder)."""
    length = _LENGTH.unpack_from(prefix, 0)[0]
    if length + LENGTH_SIZE > max_frame_length:
        raise FrameTooLargeError(
            f"frame of {length + LENGTH_SIZE} bytes is over the {max_frame_length}-byte limit "
            "(com.rocketmq.remoting.frameMaxLength)")
    if length < LENGTH_SIZE:
        raise TruncatedFrameError(f"frame length {length} is shorter than the 4-byte header length field")
    return length


def read_prefix(buf, pos=0):
    """``(total, serialize_type, header_length)`` of the frame at ``buf[pos]`` (8 bytes there)."""
    length, mark = _PREFIX.unpack_from(buf, pos)
    return length + LENGTH_SIZE, mark >> 24, mark & _HEADER_LENGTH_MASK


def pack_prefix(serialize_type, header_length, body_length):
    """The 8 prefix bytes of a frame with that header and body."""
    return _PREFIX.pack(LENGTH_SIZE + header_length + body_length,
                        serialize_type << 24 | header_length)


def build_frame(serialize_type, header, body=b""):
    """A whole frame from its parts."""
    return b"".join((pack_prefix(serialize_type, len(header), len(body)), header, body))


def header_span(frame):
    """``(serialize_type, header_start, header_end)`` of a whole frame; the body follows."""
    _, serialize_type, header_length = read_prefix(frame)
    return serialize_type, PREFIX_SIZE, PREFIX_SIZE + header_length


def has_prefix(buf, pos=0):
    """True when the prefix of the frame at ``buf[pos]`` is all there."""
    return len(buf) - pos >= PREFIX_SIZE


def header_bytes(buf, pos=0):
    """``(serialize_type, header)`` of the frame at ``buf[pos]``: its header as bytes, or None
    while the header is not all in ``buf``."""
    _, serialize_type, header_length = read_prefix(buf, pos)
    start = pos + PREFIX_SIZE
    if len(buf) < start + header_length:
        return serialize_type, None
    return serialize_type, bytes(buf[start:start + header_length])


def body_length(total, header_length):
    """The body's length in a frame of ``total`` bytes (prefix included) with that header."""
    return total - PREFIX_SIZE - header_length


def rocketmq_field(buf, header_at, name):
    """The fixed field ``name`` (code, language, version, opaque, flag) of the binary header
    that starts at ``buf[header_at]``."""
    return _FIELD_READERS[name](buf, header_at + _BINARY_FIELDS[name][0])[0]


# -- cutting a stream --------------------------------------------------------------------------

def frame_at(buf, pos, size, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
    """Where the frame at ``buf[pos:size]`` ends (past ``size``: not all there yet); 0 when not
    even its length field is there; ``-total`` when its length is one Java's decoder refuses
    (over the limit, or shorter than the prefix): the caller drops the connection."""
    if size - pos < LENGTH_SIZE:
        return 0
    total = _LENGTH.unpack_from(buf, pos)[0] + LENGTH_SIZE
    if total > max_frame_length or total < PREFIX_SIZE:
        return -total
    return pos + total


def bytes_needed(buf):
    """How many bytes the frame at the start of ``buf`` takes in all, as far as ``buf`` tells
    (the length field itself while that is not all there)."""
    return frame_total(buf) if len(buf) >= LENGTH_SIZE else LENGTH_SIZE


def frames_at_least(data, n):
    """True when ``data`` starts with at least ``n`` whole frames."""
    pos, size = 0, len(data)
    for _ in range(n):
        if size - pos < LENGTH_SIZE:
            return False
        pos += frame_total(data, pos)
        if pos > size:
            return False
    return True


def whole_frames(buf, pos=0):
    """How many whole frames follow ``buf[pos]`` (up to the first not all there)."""
    n, size = 0, len(buf)
    while size - pos >= LENGTH_SIZE:
        pos += frame_total(buf, pos)
        if pos > size:
            break
        n += 1
    return n


def split_frames(buf, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
    """Return ``(frames, remainder)``: every whole frame at the front of ``buf``, and the rest.

    Raises :class:`~rocketpy.remoting.errors.FrameTooLargeError` as soon as a length field
    announces a frame over the limit, before any of it is buffered.
    """
    frames = []
    pos = 0
    size = len(buf)
    while True:
        end = frame_at(buf, pos, size, max_frame_length)
        if end < 0:
            frame_length(buf[pos:pos + LENGTH_SIZE], max_frame_length)   # raises the error
        if end == 0 or end > size:
            break
        frames.append(bytes(buf[pos:end]))
        pos = end
    return frames, bytes(buf[pos:])


#: hunting believes a binary header only when it is shorter than this (a JSON one must open
#: with ``{``); a usual binary header is far shorter
HUNT_BINARY_HEADER_LIMIT = 1 << 16


def _field_below(size, bound):
    """A pattern for a ``size``-byte big-endian field holding a value below ``bound``, to the
    byte: its leading bytes zero, as many as ``bound`` leaves no room in."""
    free = ((bound - 1).bit_length() + 7) // 8
    return b"\\x00" * (size - free) + b"[\\x00-\\xff]" * free


def _byte(value):
    return re.escape(bytes([value]))


def _frame_start_pattern():
    """:data:`FRAME_START_CANDIDATE`, from the prefix's fields: a length within the default
    limit, then the serialize type JSON with the header's first byte ``{``, or ROCKETMQ with a
    header below :data:`HUNT_BINARY_HEADER_LIMIT`."""
    header_length = _PREFIX_FIELDS["header_length"][1]
    length = _field_below(LENGTH_SIZE, DEFAULT_MAX_FRAME_LENGTH - LENGTH_SIZE + 1)
    json = _byte(JSON) + _field_below(header_length, 1 << 8 * header_length) + _byte(JSON_HEADER_START)
    binary = _byte(ROCKETMQ) + _field_below(header_length, HUNT_BINARY_HEADER_LIMIT)
    return re.compile(b"(?=" + length + b"(?:" + json + b"|" + binary + b"))", re.S)


#: Where a frame may start in a stream of unknown alignment (a capture that begins mid-stream,
#: or after a loss), a superset of the frame starts :func:`plausible_prefix` believes (at the
#: default limit, binary headers below :data:`HUNT_BINARY_HEADER_LIMIT`). A lookahead, so
#: overlapping candidates are all found; each still has to pass the real checks.
FRAME_START_CANDIDATE = _frame_start_pattern()
#: how many bytes at the end of a buffer may hold a frame start the candidate pattern cannot
#: see yet (it needs the whole prefix, and a JSON header's ``{``)
CANDIDATE_TAIL = PREFIX_SIZE


# Verdicts on where a frame may start in a stream of unknown alignment.
PLAUSIBLE, IMPLAUSIBLE, UNDECIDED = 1, 0, -1
#: the highest ``LanguageCode`` a frame start is believed with (Java's tops at 12, RUST; room
#: is left for codes a newer peer may send)
MAX_LANGUAGE = 30
#: where a binary header's fixed fields end, up to and including the flag
_FLAG_END = PREFIX_SIZE + _FLAG_AT + _BINARY_FIELDS["flag"][1]


def plausible_prefix(buf, i, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
    """Whether a frame may start at ``buf[i]`` as far as its prefix tells: a length within the
    limit, serialize type JSON or ROCKETMQ, a header inside the frame that opens with ``{`` (JSON)
    or is at least a binary header's fixed part. UNDECIDED while the prefix is not all there."""
    n = len(buf) - i
    if n < PREFIX_SIZE:
        if n >= LENGTH_SIZE and not (PREFIX_SIZE <= frame_total(buf, i) <= max_frame_length):
            return IMPLAUSIBLE
        if n > LENGTH_SIZE and buf[i + _TYPE_AT] > ROCKETMQ:
            return IMPLAUSIBLE
        return UNDECIDED
    total, serialize_type, header_length = read_prefix(buf, i)
    if (total > max_frame_length or serialize_type > ROCKETMQ or header_length == 0
            or header_length > total - PREFIX_SIZE):
        return IMPLAUSIBLE
    if serialize_type == JSON:
        if n > PREFIX_SIZE and buf[i + PREFIX_SIZE] != JSON_HEADER_START:
            return IMPLAUSIBLE
    elif header_length < ROCKETMQ_MIN_HEADER:
        return IMPLAUSIBLE
    return PLAUSIBLE


_JSON_OPEN = bytes([JSON_HEADER_START])


def opens_json_header(header):
    """True when ``header`` (a header's bytes, without the prefix) opens as fastjson writes a
    JSON header: with ``{``."""
    return header[:1] == _JSON_OPEN


def plausible_binary_fields(buf, i):
    """False when the frame at ``buf[i]`` has a binary header, arrived as far as its flag, that
    holds a flag or a language no peer writes; True otherwise (also while it has not arrived)."""
    if len(buf) - i < _FLAG_END or buf[i + _TYPE_AT] != ROCKETMQ:
        return True
    header_at = i + PREFIX_SIZE
    return not (rocketmq_field(buf, header_at, "flag") & ~3
                or not 0 <= rocketmq_field(buf, header_at, "language") <= MAX_LANGUAGE)


# -- the opaque ----------------------------------------------------------------------------------

_OPAQUE_KEY = b'"opaque":'
_OPAQUE = re.compile(rb'"opaque":(-?[0-9]{1,10})(?=[,}\s])')
_NUMBERS = re.compile(rb'"(code|flag|opaque)":\s*(-?[0-9]{1,10})')


def _canonical(digits):
    """Digits that ``json`` would read back to the same text (no leading zero, no ``-0``)."""
    if digits[:1] == b"-":
        return len(digits) > 1 and digits[1] != 48
    return digits[0] != 48 or len(digits) == 1


def request_without_opaque(frame):
    """``(key, opaque)``: a whole request frame without its opaque (two byte strings around it)
    and the opaque (a JSON header's digits as bytes, a binary header's value as an int); None
    when the opaque cannot be found cheaply and unambiguously.

    Two requests with equal keys differ at most in their opaque, which is what lets an answer be
    reused (:mod:`rocketpy.transport.answercache`). Java's own form, ``"opaque":123,``, is cut
    out by two searches, which cost less than reading the header whole (the kernel's
    ``request_key``: 0.7 against 1.1 us for a route query, and a cached answer is most of the
    traffic); the header kernel reads the other usual headers, the rest are searched here.
    """
    mark = _PREFIX.unpack_from(frame, 0)[1]      # (inlined read_prefix: this is the hot path)
    serialize_type, start = mark >> 24, PREFIX_SIZE
    header_end = PREFIX_SIZE + (mark & _HEADER_LENGTH_MASK)
    if serialize_type == JSON:
        at = frame.find(_OPAQUE_KEY, start, header_end) + len(_OPAQUE_KEY)
        if at != len(_OPAQUE_KEY) - 1:
            end = frame.find(b",", at, header_end)
            digits = frame[at:end]
            if end > 0 and digits.isdigit() and (digits[0] != 48 or len(digits) == 1):
                return (frame[start:at], frame[end:]), digits
        if KERNEL is not None:
            found = KERNEL.request_key(frame)
            if found is not None:
                return found
        if at == len(_OPAQUE_KEY) - 1:
            return None
        # not Java's `"opaque":123,` form: the general (rarer) path
        m = _OPAQUE.match(frame, at - len(_OPAQUE_KEY), header_end)
        if m is None:
            return None
        digits = m.group(1)
        if digits[0] in b"0-" and not _canonical(digits):
            return None
        return (frame[start:at], frame[m.end(1):]), digits
    if (serialize_type == ROCKETMQ and header_end - start >= ROCKETMQ_MIN_HEADER
            and header_end <= len(frame)):   # (a header past the frame: the decoder says so)
        at = start + _OPAQUE_AT
        return ((frame[start:at], frame[at + _OPAQUE_SIZE:]),
                _INT32.unpack_from(frame, at)[0])
    return None


def peek_request(frame):
    """``(code, opaque, flag)`` of a whole frame without decoding it, or None when that cannot
    be done cheaply and unambiguously (the caller then decodes it properly). The header kernel
    reads a usual header whole; other forms are searched here."""
    if KERNEL is not None:
        found = KERNEL.peek(frame)
        if found is not None:
            return found
    if len(frame) < PREFIX_SIZE:
        return None
    serialize_type, start, end = header_span(frame)
    if end > len(frame):
        return None
    if serialize_type == JSON:
        found = _NUMBERS.findall(frame, start, end)
        if len(found) != 3:
            return None  # missing, or also a key inside extFields: let the decoder decide
        numbers = dict(found)
        if len(numbers) != 3:
            return None
        return int(numbers[b"code"]), int(numbers[b"opaque"]), int(numbers[b"flag"])
    if serialize_type == ROCKETMQ and end - start >= ROCKETMQ_MIN_HEADER:
        return (_CODE.unpack_from(frame, start)[0], _INT32.unpack_from(frame, start + _OPAQUE_AT)[0],
                _INT32.unpack_from(frame, start + _FLAG_AT)[0])
    return None


class OpaqueTemplate:
    """An encoded frame with a hole where its opaque goes: the same answer for any request.

    Built by the encoder (:func:`rocketpy.remoting.frame.encode_template`), which knows where it
    wrote the opaque, so nothing searches encoded bytes for it.
    """

    __slots__ = ("serialize_type", "pre", "post", "body", "_heads")

    def __init__(self, serialize_type, pre, post, body=b""):
        self.serialize_type = serialize_type
        self.pre = pre       # the header up to the opaque
        self.post = post     # the header after the opaque
        self.body = body
        self._heads = {}

    def opaque_bytes(self, opaque):
        """How ``opaque`` is written in this frame's header; None if it cannot be."""
        if self.serialize_type == JSON:
            return str(opaque).encode()
        if -0x80000000 <= opaque <= 0x7FFFFFFF:
            return _INT32.pack(opaque)
        return None

    def frame(self, opaque_bytes):
        """The whole frame with ``opaque_bytes`` (from :meth:`opaque_bytes`) in the hole."""
        head = self._heads.get(len(opaque_bytes))
        if head is None:
            header_length = len(self.pre) + len(opaque_bytes) + len(self.post)
            head = self._heads[len(opaque_bytes)] = (
                pack_prefix(self.serialize_type, header_length, len(self.body)) + self.pre)
        return b"".join((head, opaque_bytes, self.post, self.body))

    def encode_for(self, opaque):
        """The whole frame for ``opaque`` (an int)."""
        return self.frame(self.opaque_bytes(opaque))
