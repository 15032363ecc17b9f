"""Wire codec layer: the RocketMQ remoting frame and its two header serialisations.

The ``construct`` schemas below are the single statement of the format (Java
``RemotingCommand.encode``/``decode``, ``RocketMQSerializable``)::

    int32   length            bytes that follow (header-length field + header + body)
    int8    serialize type    0 JSON, 1 ROCKETMQ
    int24   header length
    bytes   header            fastjson object, or ROCKETMQ binary (ROCKETMQ_HEADER)
    bytes   body

Frames are on every request's path, so ``decode_frame``/``encode_frame`` slice with
``int.from_bytes``/``struct`` instead of running the schema (construct costs ~10 µs compiled and
~100 µs for a binary header with extFields; the slices ~1-4 µs). The golden tests parse and build
every captured frame with the schemas *and* the fast path and require identical results, so the
schemas stay the specification and the fast path a proven-equal shortcut.
"""
import json
import struct

from construct import (Bytes, GreedyBytes, GreedyRange, Int8sb, Int8ub, Int16sb, Int16ub,
                       Int24ub, Int32sb, Int32ub, Prefixed, Rebuild, Struct, len_, this)

from . import codes
from .command import RemotingCommand
from .errors import FrameTooLargeError, HeaderDecodeError, TruncatedFrameError
from .fastjson import escape_string

__all__ = ["FRAME", "FRAME_COMPILED", "ROCKETMQ_HEADER", "ROCKETMQ_HEADER_COMPILED",
           "DEFAULT_MAX_FRAME_LENGTH", "decode_frame", "encode_frame", "decode_header",
           "encode_header", "frame_length"]

#: Java ``NettySystemConfig.frameMaxLength`` default; counts the 4-byte length field too.
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024

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

_SERIALIZE_NAMES = {0: "JSON", 1: "ROCKETMQ"}
_FIXED = struct.Struct(">hbhiii")
_I32 = struct.Struct(">i")
#: Java's ``String.getBytes(UTF_8)`` writes '?' for a lone surrogate (a JSON "\\ud800" a peer
#: sent); Python's "replace" does the same instead of raising.
_JAVA_UTF8 = "replace"
_U16 = struct.Struct(">H")


def frame_length(prefix, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
    """The value of a 4-byte length prefix, refused past the limit (as Java's frame decoder)."""
    length = int.from_bytes(prefix[:4], "big")
    if length + 4 > max_frame_length:
        raise FrameTooLargeError(
            f"frame of {length + 4} bytes is over the {max_frame_length}-byte limit "
            "(com.rocketmq.remoting.frameMaxLength)")
    if length < 4:
        raise TruncatedFrameError(f"frame length {length} is shorter than the 4-byte header length field")
    return length


def _text(raw, what):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderDecodeError(f"{what} is not valid UTF-8: {exc}") from None


def _decode_rocketmq_header(header):
    try:
        code, language, version, opaque, flag, remark_len = _FIXED.unpack_from(header, 0)
        pos = _FIXED.size
        if remark_len < 0 or pos + remark_len > len(header):
            raise HeaderDecodeError(f"remark length {remark_len} runs past the {len(header)}-byte header")
        remark = _text(header[pos:pos + remark_len], "remark") if remark_len else None
        pos += remark_len
        (ext_len,) = _I32.unpack_from(header, pos)
        pos += 4
        end = pos + ext_len
        if ext_len < 0 or end > len(header):
            raise HeaderDecodeError(f"extFields length {ext_len} runs past the {len(header)}-byte header")
        ext_fields = None
        if ext_len:
            ext_fields = {}
            while pos < end:
                (key_len,) = _U16.unpack_from(header, pos)
                pos += 2
                key = _text(header[pos:pos + key_len], "extFields key")
                pos += key_len
                (value_len,) = _I32.unpack_from(header, pos)
                pos += 4
                if value_len < 0 or pos + value_len > end or pos > end:
                    raise HeaderDecodeError(f"extFields entry {key!r} runs past the extFields block")
                ext_fields[key] = _text(header[pos:pos + value_len], "extFields value")
                pos += value_len
        if pos != len(header):
            raise HeaderDecodeError(f"{len(header) - pos} stray bytes after the ROCKETMQ header")
    except struct.error as exc:
        raise HeaderDecodeError(f"truncated ROCKETMQ header: {exc}") from None
    return RemotingCommand(code, language, version, opaque, flag, remark, ext_fields, None, 1)


def _ext_value(key, value):
    if isinstance(value, str):
        return value
    if isinstance(value, bool):  # the C++ client writes some extFields as JSON literals
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise HeaderDecodeError(f"extFields value of {key!r} is {type(value).__name__}, not a string")


def _int_field(obj, name):
    value = obj.get(name, 0)
    if type(value) is not int:
        raise HeaderDecodeError(f"JSON header field {name} is {value!r}, not an integer")
    if not -0x80000000 <= value <= 0x7FFFFFFF:  # Java int fields: fastjson fails "int overflow"
        raise HeaderDecodeError(f"JSON header field {name} is {value}, outside the Java int range")
    return value


_scan_json = json.decoder.JSONDecoder().scan_once  # the C scanner json.loads runs, minus its wrapping
_LANGUAGES = dict(codes.LanguageCode.__members__)
_INT_MIN, _INT_MAX = -0x80000000, 0x7FFFFFFF


def _decode_usual_json_header(header):
    """The header as :func:`_decode_json_header` reads it, for the usual shape only (UTF-8, an
    object with int fields, a known language name, string extFields); None for anything else,
    which the full reader then judges. Every frame of a capture takes this path, so it skips
    ``json.loads``'s encoding sniffing and per-field calls."""
    if header[:1] != b"{" or header[1:2] == b"\x00":
        return None
    try:
        text = header.decode("utf-8")
        obj, end = _scan_json(text, 0)
    except (ValueError, StopIteration, RecursionError):
        return None
    if end != len(text) or obj.__class__ is not dict:
        return None
    get = obj.get
    code, version, opaque, flag = get("code", 0), get("version", 0), get("opaque", 0), get("flag", 0)
    if not (code.__class__ is version.__class__ is opaque.__class__ is flag.__class__ is int
            and _INT_MIN <= code <= _INT_MAX and _INT_MIN <= version <= _INT_MAX
            and _INT_MIN <= opaque <= _INT_MAX and _INT_MIN <= flag <= _INT_MAX):
        return None
    language = get("language", "JAVA")
    language = _LANGUAGES.get(language) if language.__class__ is str else None
    remark = get("remark")
    ext = get("extFields")
    if language is None or (remark is not None and remark.__class__ is not str):
        return None
    if ext is not None:
        if ext.__class__ is not dict:
            return None
        for value in ext.values():
            if value.__class__ is not str:
                return None
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, None, 0)


def _decode_json_header(header):
    command = _decode_usual_json_header(header)
    return command if command is not None else _decode_any_json_header(header)


def _decode_any_json_header(header):
    """Any JSON header, with a specific :class:`HeaderDecodeError` for what is wrong with it."""
    try:
        obj = json.loads(header)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise HeaderDecodeError(f"broken JSON header: {exc}") from None
    if not isinstance(obj, dict):
        raise HeaderDecodeError("JSON header is not an object")
    language = obj.get("language", "JAVA")
    if isinstance(language, str):
        known = codes.language_from_name(language)
        language = language if known is None else known
    elif type(language) is not int:
        raise HeaderDecodeError(f"JSON header field language is {language!r}")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise HeaderDecodeError(f"JSON header field remark is {remark!r}, not a string")
    ext = obj.get("extFields")
    if ext is not None:
        if not isinstance(ext, dict):
            raise HeaderDecodeError("JSON header field extFields is not an object")
        ext = {k: _ext_value(k, v) for k, v in ext.items() if v is not None}
    return RemotingCommand(_int_field(obj, "code"), language, _int_field(obj, "version"),
                           _int_field(obj, "opaque"), _int_field(obj, "flag"), remark, ext, None, 0)


def decode_header(serialize_type, header):
    """A command (without body) from header bytes of the given serialize type."""
    if serialize_type == 0:
        return _decode_json_header(header)
    if serialize_type == 1:
        return _decode_rocketmq_header(header)
    raise HeaderDecodeError(f"unknown serialize type {serialize_type} (0 JSON, 1 ROCKETMQ)")


def decode_frame(data, max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
    """Decode one whole frame (length prefix included) into a :class:`RemotingCommand`."""
    if len(data) < 8:
        raise TruncatedFrameError(f"{len(data)} bytes is shorter than the 8-byte frame prefix")
    length = frame_length(data, max_frame_length)
    if length + 4 != len(data):
        raise TruncatedFrameError(f"length prefix says {length + 4} bytes, got {len(data)}")
    serialize_type = data[4]
    header_length = int.from_bytes(data[5:8], "big")
    if header_length > length - 4:
        raise TruncatedFrameError(
            f"header length {header_length} is larger than the {length - 4} bytes the frame holds")
    command = decode_header(serialize_type, bytes(data[8:8 + header_length]))
    body = data[8 + header_length:]
    command.body = bytes(body) if body else None
    return command


def _language_json(language):
    if isinstance(language, str):
        return escape_string(language)
    name = codes.language_name(language)
    return f'"{name}"' if name else str(language)


def _encode_json_header(cmd):
    parts = ['{"code":', str(cmd.code)]
    if cmd.ext_fields is not None:
        parts.append(',"extFields":{')
        parts.append(",".join(f"{escape_string(k)}:{escape_string(_ext_value(k, v))}"
                              for k, v in cmd.ext_fields.items() if v is not None))
        parts.append("}")
    parts += [',"flag":', str(cmd.flag), ',"language":', _language_json(cmd.language),
              ',"opaque":', str(cmd.opaque)]
    if cmd.remark is not None:
        parts += [',"remark":', escape_string(cmd.remark)]
    parts += [',"serializeTypeCurrentRPC":"', _SERIALIZE_NAMES[cmd.serialize_type],
              '","version":', str(cmd.version), "}"]
    return "".join(parts).encode("utf-8", _JAVA_UTF8)


def _encode_rocketmq_header(cmd):
    language = cmd.language if isinstance(cmd.language, int) else codes.language_from_name(cmd.language)
    remark = (cmd.remark or "").encode("utf-8", _JAVA_UTF8)
    try:
        ext = []
        for key, value in (cmd.ext_fields or {}).items():
            if value is not None:
                raw_key = key.encode("utf-8", _JAVA_UTF8)
                raw_value = _ext_value(key, value).encode("utf-8", _JAVA_UTF8)
                ext += (_U16.pack(len(raw_key)), raw_key, _I32.pack(len(raw_value)), raw_value)
        ext = b"".join(ext)
        return b"".join((_FIXED.pack(cmd.code, language or 0, cmd.version, cmd.opaque, cmd.flag,
                                     len(remark)), remark, _I32.pack(len(ext)), ext))
    except struct.error as exc:  # e.g. a pop code (200050) does not fit the int16 code field
        raise ValueError(f"cannot encode a ROCKETMQ header: {exc}") from None


def encode_header(cmd):
    """Header bytes of ``cmd`` in its own serialize type."""
    if cmd.serialize_type == 0:
        return _encode_json_header(cmd)
    if cmd.serialize_type == 1:
        return _encode_rocketmq_header(cmd)
    raise ValueError(f"cannot encode serialize type {cmd.serialize_type}")


def encode_frame(cmd):
    """The frame bytes of ``cmd``, length prefix included."""
    header = encode_header(cmd)
    body = cmd.body or b""
    length = 4 + len(header) + len(body)
    return b"".join((length.to_bytes(4, "big"), bytes((cmd.serialize_type,)),
                     len(header).to_bytes(3, "big"), header, body))
