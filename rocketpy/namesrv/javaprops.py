"""NameServer state layer: Java ``.properties`` text, read and written as the Java NameServer does.

``mqnamesrv -c`` reads with ``Properties.load``; UPDATE_NAMESRV_CONFIG parses its body with
``MixAll.string2Properties`` (``Properties.load`` of the UTF-8 bytes as ISO-8859-1); answers are
unescaped ``key=value`` lines (``properties2String``). Java stores the config file that way too,
so a value holding a line break becomes several lines (the injection of issue 12); rocketpy
stores it with ``Properties.store``'s escaping (:func:`store_properties`), which reads back as
exactly the same keys and values."""

import re

from rocketpy.remoting.budget import ITEM_COST

__all__ = ["PropertiesError", "parse_properties", "body_to_properties", "format_properties",
           "store_properties"]

#: Work units a line costs (~2 µs of Python: split, two unescapes), and an escape (~0.6 µs)
LINE_COST = 3 * ITEM_COST
ESCAPE_COST = ITEM_COST
#: lines read between two budget checks (where a decode pool may give another host a turn)
_CHECK_EVERY = 4096
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANKS = " \t\f"
#: a key: up to the first unescaped '=', ':' or blank (a backslash escapes what follows it)
_KEY = re.compile(r"(?:[^\\=: \t\f]+|\\.|\\\Z)*", re.S)
_SEPARATOR = re.compile(r"[ \t\f]*[=:]?[ \t\f]*")
_ESCAPE = re.compile(r"\\(.)", re.S)
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


class PropertiesError(ValueError):
    """Text ``Properties.load`` refuses (a malformed ``\\uXXXX`` escape)."""


def _continues(line):
    slashes = len(line) - len(line.rstrip("\\"))
    return slashes % 2 == 1


def _logical_lines(text):
    """Natural lines joined across backslash continuations, comments and blanks dropped; each
    joined once (a run of continuations is one join, not one per line)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i, count = 0, len(lines)
    while i < count:
        line = lines[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        if not _continues(line):
            yield line
            continue
        parts = []
        while _continues(line) and i < count:
            parts.append(line[:-1])
            line = lines[i].lstrip(_BLANKS)
            i += 1
        parts.append(line[:-1] if _continues(line) else line)
        yield "".join(parts)


def _unescape(text):
    """``loadConvert``: ``\\uXXXX``, ``\\t`` ``\\n`` ``\\r`` ``\\f``, any other escaped
    character as itself; one step per escape."""
    if "\\" not in text:
        return text
    out = []
    surrogates = False
    pos = 0
    for match in _ESCAPE.finditer(text):
        start = match.start()
        if start < pos:          # inside the four digits of a \\u escape: no backslash there
            continue
        out.append(text[pos:start])
        ch = match.group(1)
        pos = match.end()
        if ch == "u":
            digits = _HEX4.match(text, pos)
            if digits is None:
                raise PropertiesError("Malformed \\uxxxx encoding.")
            code = int(digits.group(), 16)
            surrogates |= 0xD800 <= code <= 0xDFFF
            out.append(chr(code))
            pos += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    out.append(text[pos:])
    text = "".join(out)
    if surrogates:  # Java strings are UTF-16: an escaped surrogate pair is one character
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _split(line):
    """Key end at the first unescaped '=', ':' or whitespace; value after separators."""
    end = _KEY.match(line).end()
    return line[:end], line[_SEPARATOR.match(line, end).end():]


def parse_properties(text, budget=None):
    """``Properties.load``: an ordered dict of key -> value (later duplicates win). Linear in
    the text, each run of plain characters a regular-expression step; with ``budget`` (a
    :class:`~rocketpy.remoting.budget.DecodeBudget`) its bytes, lines and escapes are charged
    before any is read, and checked every few thousand lines."""
    if budget is not None:
        lines = text.count("\n") + text.count("\r") + 1
        budget.spend(len(text) + LINE_COST * lines + ESCAPE_COST * text.count("\\"),
                     "properties")
    result = {}
    for count, line in enumerate(_logical_lines(text), 1):
        key, value = _split(line)
        result[_unescape(key)] = _unescape(value)
        if budget is not None and not count % _CHECK_EVERY:
            budget.spend(0, f"properties line {count}")
    return result


def body_to_properties(body, budget=None):
    """``MixAll.string2Properties(new String(body, UTF-8))``: Java reads the UTF-8 bytes back
    as ISO-8859-1, so non-ASCII text arrives mangled exactly as the Java NameServer keeps it.
    ``budget`` as :func:`parse_properties` charges it."""
    text = body.decode("utf-8", errors="replace").encode("utf-8").decode("latin-1")
    return parse_properties(text, budget)


def format_properties(items):
    """``properties2String``: ``key=value\\n`` per entry with a value, in the given order."""
    return "".join(f"{k}={v}\n" for k, v in items if v is not None)


_STORE_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
                  "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}


def _store_escape(text, is_key):
    """``Properties.saveConvert(text, escapeSpace=is_key, escUnicode=true)``: the escapes
    ``Properties.store(OutputStream)`` writes, so the file is ASCII and loads back unchanged."""
    out = []
    for i, ch in enumerate(text):
        code = ord(ch)
        if 61 < code < 127 and ch != "\\":
            out.append(ch)
        elif ch == " ":
            out.append("\\ " if i == 0 or is_key else " ")
        elif ch in _STORE_ESCAPES:
            out.append(_STORE_ESCAPES[ch])
        elif code < 0x20 or code > 0x7E:
            if code > 0xFFFF:   # a Java string holds it as two UTF-16 surrogates
                code -= 0x10000
                out.append("\\u%04X\\u%04X" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)))
            else:
                out.append("\\u%04X" % code)
        else:
            out.append(ch)
    return "".join(out)


def store_properties(items):
    """``key=value\\n`` per entry with a value, escaped as ``Properties.store`` escapes them
    (without its date comment, so an unchanged configuration writes the same bytes)."""
    return "".join(f"{_store_escape(k, True)}={_store_escape(v, False)}\n"
                   for k, v in items if v is not None)
