"""Wire codec layer: a :class:`~rocketpy.remoting.command.RemotingCommand` to its frame, in both
header serialisations (Java ``RemotingCommand.encode``/``headerEncode``, ``NettyEncoder``,
``RocketMQSerializable.rocketMQProtocolEncode``), and Java's text of a value fastjson parsed,
which the decoder (:mod:`rocketpy.remoting.frame`) keeps in extFields and the encoder writes.

It reads nothing of a frame and builds no command, so the command's ``encode()`` can use it
without the decoder (which builds commands) being imported by the command."""
import struct
from decimal import Decimal

from . import codes
from .errors import HeaderDecodeError
from .fastjson import dump_text, escape_string
from .javahash import hashmap_ordered
from .layout import (JSON, ROCKETMQ, ROCKETMQ_EXT_LENGTH, ROCKETMQ_FIXED, ROCKETMQ_KEY_LENGTH,
                     ROCKETMQ_OPAQUE, ROCKETMQ_VALUE_LENGTH, OpaqueTemplate, pack_prefix)

__all__ = ["encode_frame", "encode_header", "encode_template", "ext_value", "java_text",
           "JsonObject", "SERIALIZE_NAMES"]

#: the ``serializeTypeCurrentRPC`` a JSON header names
SERIALIZE_NAMES = {JSON: "JSON", ROCKETMQ: "ROCKETMQ"}
#: Java's ``String.getBytes(UTF_8)`` writes '?' for a lone surrogate (a JSON "\\ud800" a peer
#: sent); Python's "replace" does the same instead of raising.
_JAVA_UTF8 = "replace"


class JsonObject(list):
    """A JSON object's ``(key, value)`` pairs as written: a bean keeps a property's first value,
    a map (``extFields``) its last."""

    __slots__ = ()


def ext_value(key, value):
    """An extFields value as Java's ``HashMap<String, String>`` holds it (:func:`java_text`)."""
    if value.__class__ is str:
        return value
    try:
        return java_text(value)
    except TypeError:
        raise HeaderDecodeError(f"extFields value of {key!r} is a {type(value).__name__}, "
                                "not a string") from None


def java_text(value):
    """``toString()`` of what fastjson's parser makes of a JSON value where a ``String`` is set
    (``StringCodec``: an extFields value, the remark): a number's text, ``true``/``false``, an
    object or array as fastjson writes the ``JSONObject`` (a ``HashMap``: a key's last value,
    hash order, nulls left out) or ``JSONArray`` it parsed. The C++ client writes some extFields
    as JSON literals."""
    if isinstance(value, str):
        return value
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return str(value)
    return dump_text(_java_value(value))


def _java_value(value):
    if value.__class__ is JsonObject:
        return hashmap_ordered({key: _java_value(item) for key, item in value})
    if value.__class__ is list:
        return [_java_value(item) for item in value]
    return value


#: a language byte as the JSON header writes it (the enum name, quoted)
_LANGUAGE_JSON = {code.value: f'"{code.name}"' for code in reversed(codes.LanguageCode)}


def _language_json(language, quote):
    if isinstance(language, str):
        return quote(language)
    return _LANGUAGE_JSON.get(language) or str(language)


def _verbatim_quote(verbatim):
    """fastjson's quoting, except for the strings a peer wrote with raw control characters."""
    def quote(text):
        return verbatim.get(text) or escape_string(text)
    return quote


def _json_header_parts(cmd):
    """The JSON header's text as parts, and the index of the opaque's part (fastjson order:
    sorted keys, nulls left out)."""
    quote = escape_string if cmd.verbatim is None else _verbatim_quote(cmd.verbatim)
    parts = ['{"code":', str(cmd.code)]
    if cmd.ext_fields is not None:
        parts.append(',"extFields":{')
        parts.append(",".join(f"{quote(k)}:{quote(ext_value(k, v))}"
                              for k, v in cmd.ext_fields.items() if v is not None))
        parts.append("}")
    parts += [',"flag":', str(cmd.flag), ',"language":', _language_json(cmd.language, quote),
              ',"opaque":', str(cmd.opaque)]
    at = len(parts) - 1
    if cmd.remark is not None:
        parts += [',"remark":', quote(cmd.remark)]
    parts += [',"serializeTypeCurrentRPC":"', SERIALIZE_NAMES[cmd.serialize_type],
              '","version":', str(cmd.version), "}"]
    return parts, at


def _encode_rocketmq_header(cmd):
    language = cmd.language if isinstance(cmd.language, int) else codes.language_from_name(cmd.language)
    remark = (cmd.remark or "").encode("utf-8", _JAVA_UTF8)
    try:
        ext = []
        for key, value in (cmd.ext_fields or {}).items():
            if value is not None:
                raw_key = key.encode("utf-8", _JAVA_UTF8)
                raw_value = ext_value(key, value).encode("utf-8", _JAVA_UTF8)
                ext += (ROCKETMQ_KEY_LENGTH.pack(len(raw_key)), raw_key,
                        ROCKETMQ_VALUE_LENGTH.pack(len(raw_value)), raw_value)
        ext = b"".join(ext)
        return b"".join((ROCKETMQ_FIXED.pack(cmd.code, language or 0, cmd.version, cmd.opaque,
                                             cmd.flag, len(remark)), remark, ROCKETMQ_EXT_LENGTH.pack(len(ext)), ext))
    except struct.error as exc:  # e.g. a pop code (200050) does not fit the int16 code field
        raise ValueError(f"cannot encode a ROCKETMQ header: {exc}") from None


def encode_header(cmd):
    """Header bytes of ``cmd`` in its own serialize type."""
    if cmd.serialize_type == JSON:
        return "".join(_json_header_parts(cmd)[0]).encode("utf-8", _JAVA_UTF8)
    if cmd.serialize_type == ROCKETMQ:
        return _encode_rocketmq_header(cmd)
    raise ValueError(f"cannot encode serialize type {cmd.serialize_type}")


def encode_frame(cmd):
    """The frame bytes of ``cmd``, length prefix included."""
    header = encode_header(cmd)
    body = cmd.body or b""
    return b"".join((pack_prefix(cmd.serialize_type, len(header), len(body)), header, body))


def encode_template(cmd):
    """``cmd`` encoded with a hole for its opaque (:class:`~rocketpy.remoting.layout.OpaqueTemplate`):
    one answer sent to many requests (a reused route answer, the overload answer)."""
    if cmd.serialize_type == JSON:
        parts, at = _json_header_parts(cmd)
        pre = "".join(parts[:at]).encode("utf-8", _JAVA_UTF8)
        post = "".join(parts[at + 1:]).encode("utf-8", _JAVA_UTF8)
    elif cmd.serialize_type == ROCKETMQ:
        header = _encode_rocketmq_header(cmd)
        pre, post = header[:ROCKETMQ_OPAQUE[0]], header[ROCKETMQ_OPAQUE[1]:]
    else:
        raise ValueError(f"cannot encode serialize type {cmd.serialize_type}")
    return OpaqueTemplate(cmd.serialize_type, pre, post, cmd.body or b"")
