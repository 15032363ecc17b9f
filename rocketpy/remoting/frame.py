"""Wire codec layer: a frame to a :class:`RemotingCommand` and back, in both header
serialisations (Java ``RemotingCommand.encode``/``decode``, ``RocketMQSerializable``).

Frames are on every request's path, so the header codecs here use ``struct`` and the C JSON
scanner instead of running the :mod:`rocketpy.remoting.layout` schemas (~1-4 µs against
construct's ~10-100 µs). The golden tests run every captured frame through both and require
identical results: the schemas stay the specification, this a proven-equal shortcut. Usual
headers go first to the compiled header kernel (:mod:`rocketpy.remoting.kernel`, ~0.7 µs), held
equal to :func:`python_decode_header` here, which reads whatever it leaves."""
import json
import struct
from decimal import Decimal

from . import codes
from .command import RemotingCommand
from .commandread import read_properties
from .encoder import (SERIALIZE_NAMES, JsonObject, encode_frame, encode_header, encode_template,
                      ext_value, java_text)
from .errors import HeaderDecodeError, TruncatedFrameError
from .fastjson import FASTJSON_1_2_83, members_start, raw_string_literals, read_lenient
from .kernel import KERNEL
from .numbers import INT32, NumberError, cast_to_integer, java_decimal
from .layout import (DEFAULT_MAX_FRAME_LENGTH, FRAME, FRAME_COMPILED, JSON,
                     PREFIX_SIZE, ROCKETMQ, ROCKETMQ_EXT_LENGTH, ROCKETMQ_FIXED, ROCKETMQ_HEADER,
                     ROCKETMQ_KEY_LENGTH, ROCKETMQ_VALUE_LENGTH, ROCKETMQ_HEADER_COMPILED,
                     frame_length, opens_json_header, read_prefix)

if KERNEL is not None:   # what its read_header and read_frame build
    KERNEL.configure(RemotingCommand, dict(codes.LanguageCode.__members__))

__all__ = ["FRAME", "FRAME_COMPILED", "ROCKETMQ_HEADER", "ROCKETMQ_HEADER_COMPILED",
           "DEFAULT_MAX_FRAME_LENGTH", "decode_frame", "encode_frame", "encode_template",
           "decode_header", "python_decode_header", "encode_header", "frame_length", "HEADER_PROPERTIES",
           "MAX_LENIENT_HEADER", "MAX_HEADER_KEYS"]


def _text(raw, what):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderDecodeError(f"{what} is not valid UTF-8: {exc}") from None


def _decode_rocketmq_header(header):
    try:
        code, language, version, opaque, flag, remark_len = ROCKETMQ_FIXED.unpack_from(header, 0)
        pos = ROCKETMQ_FIXED.size
        if pos + remark_len > len(header):
            raise HeaderDecodeError(f"remark length {remark_len} runs past the {len(header)}-byte header")
        remark = _text(header[pos:pos + remark_len], "remark") if remark_len else None
        pos += remark_len
        (ext_len,) = ROCKETMQ_EXT_LENGTH.unpack_from(header, pos)
        pos += ROCKETMQ_EXT_LENGTH.size
        end = pos + ext_len
        if end > len(header):
            raise HeaderDecodeError(f"extFields length {ext_len} runs past the {len(header)}-byte header")
        ext_fields = None
        if ext_len:
            ext_fields = {}
            while pos < end:
                (key_len,) = ROCKETMQ_KEY_LENGTH.unpack_from(header, pos)
                pos += ROCKETMQ_KEY_LENGTH.size
                key = _text(header[pos:pos + key_len], "extFields key")
                pos += key_len
                (value_len,) = ROCKETMQ_VALUE_LENGTH.unpack_from(header, pos)
                pos += ROCKETMQ_VALUE_LENGTH.size
                if pos + value_len > end:
                    raise HeaderDecodeError(f"extFields entry {key!r} runs past the extFields block")
                ext_fields[key] = _text(header[pos:pos + value_len], "extFields value")
                pos += value_len
        if pos != len(header):
            raise HeaderDecodeError(f"{len(header) - pos} stray bytes after the ROCKETMQ header")
    except struct.error as exc:
        raise HeaderDecodeError(f"truncated ROCKETMQ header: {exc}") from None
    return RemotingCommand(code, language, version, opaque, flag, remark, ext_fields, None, ROCKETMQ)


def _int_field(name, value):
    """An ``int`` property as fastjson sets it (``IntegerCodec``): :func:`numbers.cast_to_integer`
    with :data:`~rocketpy.remoting.numbers.INT32`, a null leaving Java's 0 (``null``, ``""``,
    ``"null"``); what Java's parse refuses fails, named."""
    if value.__class__ is int and _INT_MIN <= value <= _INT_MAX:
        return value
    try:
        number = cast_to_integer(value, INT32)
    except NumberError as exc:
        raise HeaderDecodeError(f"JSON header field {name} is not a Java int: {exc}") from None
    return 0 if number is None else number


# fastjson reads a number with a fraction as a BigDecimal (Feature.UseBigDecimal): Decimal here,
# refused past fastjson's own limits (numbers.java_decimal)
_scan_json = json.decoder.JSONDecoder(parse_float=java_decimal).scan_once  # json.loads's C scanner
_lenient_decoder = json.JSONDecoder(strict=False, parse_float=java_decimal,
                                    object_pairs_hook=JsonObject)
_LANGUAGES = dict(codes.LanguageCode.__members__)
#: EnumDeserializer also matches a name in another case
_LANGUAGES_LOWER = {name.lower(): code for name, code in _LANGUAGES.items()}
#: RemotingCommand's bean properties (fastjson's names; the rest are transient or read-only)
HEADER_PROPERTIES = ("code", "language", "version", "opaque", "flag", "remark", "extFields",
                     "serializeTypeCurrentRPC")
_PROPERTIES = frozenset(HEADER_PROPERTIES)
_INT_MIN, _INT_MAX = -0x80000000, 0x7FFFFFFF
#: Bytes of a JSON header read whatever its form. The readers past the usual path spend Python
#: time per key, token or string (~0.5-3 µs), on the reactor: a 15 MiB header of ``a:1,`` held
#: the server 11.9 s (issue 31), one of ``"a":1,`` 7.6 s. The largest genuine header in the
#: captures has 402 bytes, and no genuine client writes fastjson's forms. A larger header that
#: the usual path does not take is read only as strict JSON with at most
#: :data:`MAX_HEADER_KEYS` colons (each key has one): anything else is refused, and the
#: connection closed as for any header that does not decode.
MAX_LENIENT_HEADER = 4096
#: Colons a header over :data:`MAX_LENIENT_HEADER` may hold off the usual path (genuine ones
#: have a few dozen; a colon in a string counts too, so this bounds the keys from above).
MAX_HEADER_KEYS = 1024


def _header_values(header, dialect=FASTJSON_1_2_83):
    """``(code, language, version, opaque, flag, remark, extFields, verbatim)`` of a JSON header
    as it says them (Java's defaults for absent fields). The usual header (UTF-8, an object,
    nothing after it) takes the C scanner alone: every frame of a capture comes this way, so it
    skips ``json.loads``'s encoding sniffing and wrapping. Anything else goes through
    ``json.loads`` (its error messages, trailing blanks); raw control characters in strings,
    which fastjson takes, through the lenient decoder, remembering how they were written; the
    other forms fastjson's parser takes (quotes, comments, commas) through
    :func:`~rocketpy.remoting.fastjson.read_lenient`. Keys that are not a property's exact name,
    or name one twice, are read as ``dialect``'s fastjson reads them (:func:`_bean_properties`)."""
    if opens_json_header(header) and json.detect_encoding(header) == "utf-8":
        try:
            text = header.decode("utf-8")
            obj, end = _scan_json(text, 0)
            usual = end == len(text) and _PROPERTIES.issuperset(obj)
        except (ValueError, StopIteration, RecursionError):
            usual = False
        if usual:
            # A dict keeps a key's last value, fastjson a property's first: strict JSON has one
            # comma between members and no other outside strings, so as many commas as the
            # members read means no key came twice (and no string holds a comma).
            ext = obj.get("extFields")
            members = len(obj) - 1 if obj else 0
            if ext.__class__ is dict and ext:
                members += len(ext) - 1
            get = obj.get
            values = (get("code", 0), get("language", "JAVA"), get("version", 0),
                      get("opaque", 0), get("flag", 0), get("remark"), ext, None)
            if obj and text.count(",") == members and not _wraps(*values[:5]):
                _check_serialize_type(get("serializeTypeCurrentRPC"))
                return values
    verbatim = None
    large = len(header) > MAX_LENIENT_HEADER
    if large and header.count(b":") > MAX_HEADER_KEYS:
        raise HeaderDecodeError(f"JSON header of {len(header)} bytes holds over "
                                f"{MAX_HEADER_KEYS} colons: refused before it is parsed "
                                f"(headers over {MAX_LENIENT_HEADER} bytes are read only with "
                                "few keys)")
    strict = True
    try:
        try:
            pairs = json.loads(header, parse_float=java_decimal, object_pairs_hook=JsonObject)
        except ValueError:   # raw control characters in strings, fastjson's forms, or broken
            if large:
                raise ValueError(f"not strict JSON, and {len(header)} bytes: over the "
                                 f"{MAX_LENIENT_HEADER} bytes read in other forms") from None
            text = header.decode("utf-8")
            try:
                pairs = _lenient_decoder.decode(text)
            except ValueError:
                pairs = read_lenient(text, JsonObject)
                strict = False
            else:
                verbatim = raw_string_literals(text) or None
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise HeaderDecodeError(f"broken JSON header: {exc}") from None
    if pairs.__class__ is not JsonObject:
        raise HeaderDecodeError("JSON header is not an object")
    if not pairs:
        # the genuine 5.3.3 NameServer answers no header without a member (a differential;
        # fastjson's source shows no reason, so no other header is read this way)
        raise HeaderDecodeError("JSON header is an empty object: Java answers none")
    obj = dict(pairs)
    if len(obj) != len(pairs) or not _PROPERTIES.issuperset(obj) or _wraps(
            obj.get("code"), None, obj.get("version"), obj.get("opaque"), obj.get("flag")):
        obj = _bean_properties(header, pairs, strict, dialect)
    _check_serialize_type(obj.get("serializeTypeCurrentRPC"))
    ext = obj.get("extFields")
    if ext.__class__ is JsonObject:
        ext = dict(ext)                  # a HashMap: a later key replaces an earlier one
    get = obj.get
    return (get("code", 0), get("language", "JAVA"), get("version", 0), get("opaque", 0),
            get("flag", 0), get("remark"), ext, verbatim)


def _wraps(code, _language, version, opaque, flag):
    """Whether an int property holds an integer outside the Java range, which fastjson's
    ``scanFieldInt`` may read wrapped (:mod:`~rocketpy.remoting.commandread`)."""
    return any(value.__class__ is int and not _INT_MIN <= value <= _INT_MAX
               for value in (code, version, opaque, flag))


def _check_serialize_type(value):
    """``serializeTypeCurrentRPC`` as ``EnumDeserializer`` reads it (``decode`` then replaces
    it by the frame's): a name (any: an unknown one is null), null, or an ordinal of
    ``SerializeType``; anything else fails the header."""
    if value is None or value.__class__ is str:
        return
    if value.__class__ is int and 0 <= value < len(SERIALIZE_NAMES):
        return
    raise HeaderDecodeError("JSON header field serializeTypeCurrentRPC is a "
                            f"{type(value).__name__}, not a SerializeType (parse enum error)")


def _smart_keys(dialect):
    return {dialect.smart_key(name): name for name in HEADER_PROPERTIES}


_SMART_KEYS = {}


def _bean_properties(header, pairs, strict, dialect):
    """RemotingCommand's properties among a header's keys, as fastjson finds them: a key that is
    not a property's exact name is matched as ``dialect``'s ``smartMatch`` matches it (the key in
    lower case in 1.2.69 and 1.2.83, also without ``_`` and ``-`` in 1.2.83); other keys are left
    out (``Feature.IgnoreNotMatch``). A key that is a number is no identifier to a bean
    (``scanSymbolUnQuoted``: "illegal identifier"). Which member sets a property given more than
    once, or an int property fastjson may read wrapped, :func:`commandread.read_properties`
    says; otherwise each member sets its own."""
    names = _SMART_KEYS.get(dialect)
    if names is None:
        names = _SMART_KEYS[dialect] = _smart_keys(dialect)

    def match(key):
        if key.__class__ is not str:
            raise HeaderDecodeError(f"JSON header key {key!r} is not an identifier")
        return key if key in _PROPERTIES else names.get(dialect.smart_key(key))

    out = {}
    again = False
    for key, value in pairs:
        name = match(key)
        if name is not None:
            again = again or name in out
            out.setdefault(name, value)
    if again or _wraps(out.get("code"), None, out.get("version"), out.get("opaque"),
                       out.get("flag")):
        try:
            text = header.decode("utf-8")
        except UnicodeDecodeError as exc:    # json.loads took another UTF (Java reads UTF-8)
            raise HeaderDecodeError(f"JSON header is not valid UTF-8: {exc}") from None
        out = read_properties(text, members_start(text), pairs, strict, match, dialect)
    return out


def _usual(values):
    """The command of a header in the usual shape (int fields, a known language name, string
    extFields) taken as it is; None for anything else (:func:`_field_by_field` judges it)."""
    code, language, version, opaque, flag, remark, ext, verbatim = values
    known = _LANGUAGES.get(language) if language.__class__ is str else None
    if not (known is not None and (remark is None or remark.__class__ is str)
            and code.__class__ is version.__class__ is opaque.__class__ is flag.__class__ is int
            and _INT_MIN <= code <= _INT_MAX and _INT_MIN <= version <= _INT_MAX
            and _INT_MIN <= opaque <= _INT_MAX and _INT_MIN <= flag <= _INT_MAX):
        return None
    if ext is not None:
        if ext.__class__ is not dict:
            return None
        for value in ext.values():
            if value.__class__ is not str:
                return None
    return RemotingCommand(code, known, version, opaque, flag, remark, ext, None, JSON, verbatim)


def _field_by_field(values):
    """Any header's command, with a specific :class:`HeaderDecodeError` for what is wrong."""
    code, language, version, opaque, flag, remark, ext, verbatim = values
    if isinstance(language, str):
        known = _LANGUAGES.get(language)
        if known is None:
            known = _LANGUAGES_LOWER.get(language.lower())
        language = language if known is None else known
    elif language is None:
        language = _LANGUAGES["JAVA"]    # RemotingCommand's initial value: a null leaves it
    elif type(language) is not int:
        raise HeaderDecodeError(f"JSON header field language is {language!r}")
    if remark is not None and remark.__class__ is not str:
        try:
            remark = java_text(remark)
        except TypeError:
            raise HeaderDecodeError(f"JSON header field remark is a {type(remark).__name__}, "
                                    "not a string") from None
    if ext is not None:
        if not isinstance(ext, dict):
            raise HeaderDecodeError("JSON header field extFields is not an object")
        ext = {str(k): ext_value(k, v) for k, v in ext.items() if v is not None}
    return RemotingCommand(_int_field("code", code), language, _int_field("version", version),
                           _int_field("opaque", opaque), _int_field("flag", flag), remark, ext,
                           None, JSON, verbatim)


def _decode_json_header(header, dialect=FASTJSON_1_2_83):
    """The one reader of a JSON header: its values, then the usual shape as it is, anything
    else field by field (tests/test_fuzz_codec.py holds the two equal)."""
    values = _header_values(header, dialect)
    return _usual(values) or _field_by_field(values)


def decode_header(serialize_type, header, dialect=FASTJSON_1_2_83):
    """A command (without body) from header bytes of the given serialize type; a JSON header
    read as ``dialect`` (the fastjson release of the Java side) reads it. The compiled header
    kernel reads the usual headers (the same for every dialect); what it leaves, and every
    header when it is not built, is read here."""
    if KERNEL is not None:
        command = KERNEL.read_header(serialize_type, header)
        if command is not None:
            return command
    return python_decode_header(serialize_type, header, dialect)


def python_decode_header(serialize_type, header, dialect=FASTJSON_1_2_83):
    """:func:`decode_header` without the kernel: the oracle the kernel is held to."""
    if serialize_type == JSON:
        return _decode_json_header(header, dialect)
    if serialize_type == ROCKETMQ:
        return _decode_rocketmq_header(header)
    raise HeaderDecodeError(f"unknown serialize type {serialize_type} (0 JSON, 1 ROCKETMQ)")


def decode_frame(data, max_frame_length=DEFAULT_MAX_FRAME_LENGTH, dialect=FASTJSON_1_2_83):
    """Decode one whole frame (length prefix included) into a :class:`RemotingCommand`. The
    header kernel reads a usual frame whole; anything else (and every frame without it) is read
    here, which names what is wrong."""
    if KERNEL is not None:
        command = KERNEL.read_frame(data, max_frame_length)
        if command is not None:
            return command
    if len(data) < PREFIX_SIZE:
        raise TruncatedFrameError(f"{len(data)} bytes is shorter than the 8-byte frame prefix")
    total, serialize_type, header_length = read_prefix(data)
    if not PREFIX_SIZE <= total <= max_frame_length:
        frame_length(data, max_frame_length)   # raises the limit's error
    if total != len(data):
        raise TruncatedFrameError(f"length prefix says {total} bytes, got {len(data)}")
    if header_length > total - PREFIX_SIZE:
        raise TruncatedFrameError(
            f"header length {header_length} is larger than the {total - PREFIX_SIZE} bytes the frame holds")
    command = decode_header(serialize_type, bytes(data[PREFIX_SIZE:PREFIX_SIZE + header_length]),
                            dialect)
    body = data[PREFIX_SIZE + header_length:]
    command.body = bytes(body) if body else None
    return command
