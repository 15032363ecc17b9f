"""Test helper: ``Properties.load`` as rocketpy first read it, one character at a time
(rocketpy 21f3da4): the oracle :func:`rocketpy.namesrv.javaprops.parse_properties` is held to
(``tests/test_properties_cost.py``); the product's reads by runs, in linear time."""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    pass


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
