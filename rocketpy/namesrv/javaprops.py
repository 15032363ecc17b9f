"""NameServer state layer: Java ``.properties`` text, read and written as the Java NameServer does.

``mqnamesrv -c`` reads with ``Properties.load``; UPDATE_NAMESRV_CONFIG parses its body with
``MixAll.string2Properties`` (``Properties.load`` of the UTF-8 bytes as ISO-8859-1); answers are
unescaped ``key=value`` lines (``properties2String``). Java stores the config file that way too,
so a value holding a line break becomes several lines (the injection of issue 12); rocketpy
stores it with ``Properties.store``'s escaping (:func:`store_properties`), which reads back as
exactly the same keys and values."""

__all__ = ["PropertiesError", "parse_properties", "body_to_properties", "format_properties",
           "store_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """Text ``Properties.load`` refuses (a malformed ``\\uXXXX`` escape)."""


def _logical_lines(text):
    """Natural lines joined across backslash continuations, comments and blanks dropped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        yield line


def _continues(line):
    slashes = len(line) - len(line.rstrip("\\"))
    return slashes % 2 == 1


def _unescape(text):
    out = []
    surrogates = False
    i = 0
    while i < len(text):
        ch = text[i]
        i += 1
        if ch != "\\" or i >= len(text):
            out.append(ch)
            continue
        ch = text[i]
        i += 1
        if ch == "u":
            digits = text[i:i + 4]
            if len(digits) < 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError("Malformed \\uxxxx encoding.")
            code = int(digits, 16)
            surrogates |= 0xD800 <= code <= 0xDFFF
            out.append(chr(code))
            i += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    text = "".join(out)
    if surrogates:  # Java strings are UTF-16: an escaped surrogate pair is one character
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _split(line):
    """Key end at the first unescaped '=', ':' or whitespace; value after separators."""
    i = 0
    n = len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key = line[:i]
    while i < n and line[i] in " \t\f":
        i += 1
    if i < n and line[i] in "=:":
        i += 1
    while i < n and line[i] in " \t\f":
        i += 1
    return key, line[i:]


def parse_properties(text):
    """``Properties.load``: an ordered dict of key -> value (later duplicates win)."""
    result = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        result[_unescape(key)] = _unescape(value)
    return result


def body_to_properties(body):
    """``MixAll.string2Properties(new String(body, UTF-8))``: Java reads the UTF-8 bytes back
    as ISO-8859-1, so non-ASCII text arrives mangled exactly as the Java NameServer keeps it."""
    text = body.decode("utf-8", errors="replace").encode("utf-8").decode("latin-1")
    return parse_properties(text)


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
