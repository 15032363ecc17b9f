"""Test helper: fastjson's lenient reader as it was first written, one character at a time
(rocketpy 21f3da4): the reference :func:`rocketpy.remoting.fastjson.read_lenient` is held to
(``tests/test_lenient_reader.py``). The product's reader reads runs with regular expressions and
counts its work; this one is kept only as the oracle of what the language means."""
import re
from decimal import Decimal, InvalidOperation

_EOI = "\x1a"

_BLANKS = " \r\n\t\f\b"
_IDENT_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$")
_IDENT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "F": "\f",
            '"': '"', "'": "'", "/": "/", "\\": "\\"}
_LITERALS = (("true", True), ("false", False), ("null", None))
_QUOTE_OR_ESCAPE = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}


class _Reader:
    """One pass over ``text``, each character looked at a bounded number of times."""

    __slots__ = ("text", "pos", "depth", "object_pairs_hook")

    def __init__(self, text, object_pairs_hook):
        self.text, self.pos, self.depth = text, 0, 0
        self.object_pairs_hook = object_pairs_hook

    def fail(self, what):
        raise ValueError(f"{what} at offset {self.pos}")

    def blanks(self):
        """``skipWhitespace``: blanks and ``//`` or ``/* */`` comments."""
        text, pos, end = self.text, self.pos, len(self.text)
        while pos < end:
            ch = text[pos]
            if ch in _BLANKS:
                pos += 1
            elif ch == "/":
                nxt = text[pos + 1:pos + 2]
                if nxt == "/":
                    stop = text.find("\n", pos + 2)
                    pos = end if stop < 0 else stop + 1
                elif nxt == "*":
                    stop = text.find("*/", pos + 2)
                    pos = end if stop < 0 else stop + 2
                else:
                    self.pos = pos
                    self.fail("invalid comment")
            else:
                break
        self.pos = pos

    def string(self, quote):
        text, pos = self.text, self.pos + 1
        special = _QUOTE_OR_ESCAPE[quote]
        out = []
        while True:
            match = special.search(text, pos)    # the next quote or backslash: linear overall
            if match is None:
                self.fail("unclosed string")
            at = match.start()
            out.append(text[pos:at])
            if text[at] == quote:
                self.pos = at + 1
                return "".join(out)
            esc = text[at + 1:at + 2]
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                pos = at + 2
            elif esc == "u" or esc == "x":
                width = 4 if esc == "u" else 2
                digits = text[at + 2:at + 2 + width]
                if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    self.pos = at
                    self.fail("bad escape")
                out.append(chr(int(digits, 16)))
                pos = at + 2 + width
            elif esc and esc in "01234567":
                out.append(chr(int(esc)))
                pos = at + 2
            else:
                self.pos = at
                self.fail("bad escape")

    def key(self):
        ch = self.text[self.pos:self.pos + 1]
        if ch == '"' or ch == "'":
            key = self.string(ch)
            if _EOI in key:   # scanSymbol stops at its end-of-input mark
                self.fail("0x1A in the object key: fastjson reads it as the end of its input")
            return key
        match = _NUMBER.match(self.text, self.pos)
        if match is not None and match.group(1) is None and match.group(2) is None:
            self.pos = match.end()
            return int(match.group())       # a map's numeric key (fastjson's legacy dialect)
        if not ch or not (ch in _IDENT_FIRST or ord(ch) >= 256):
            self.fail("illegal identifier")
        text, pos, end = self.text, self.pos + 1, len(self.text)
        while pos < end and (text[pos] in _IDENT or ord(text[pos]) >= 256):
            pos += 1
        key, self.pos = text[self.pos:pos], pos
        return key

    def value(self):
        self.blanks()
        text, pos = self.text, self.pos
        ch = text[pos:pos + 1]
        if ch == "{":
            return self.container("}")
        if ch == "[":
            return self.container("]")
        if ch == '"' or ch == "'":
            return self.string(ch)
        match = _NUMBER.match(text, pos)
        if match is not None:
            self.pos = match.end()
            if match.group(1) is None and match.group(2) is None:
                return int(match.group())
            try:
                return Decimal(match.group())    # UseBigDecimal: a BigDecimal
            except InvalidOperation:
                self.fail("bad number")
        for word, literal in _LITERALS:
            if text.startswith(word, pos):
                self.pos = pos + len(word)
                return literal
        self.fail("unexpected character" if ch else "unexpected end")

    def container(self, close):
        """An object or array; ``AllowArbitraryCommas``: any run of commas between entries,
        before the first and after the last."""
        self.depth += 1
        if self.depth > 256:
            self.fail("too deep")
        self.pos += 1
        obj = []
        expect_entry = True
        while True:
            self.blanks()
            ch = self.text[self.pos:self.pos + 1]
            if ch == close:
                self.pos += 1
                self.depth -= 1
                return self.object_pairs_hook(obj) if close == "}" else obj
            if ch == ",":
                self.pos += 1
                expect_entry = True
                continue
            if not expect_entry:
                self.fail("expected ',' or '" + close + "'")
            if close == "}":
                key = self.key()
                self.blanks()
                if self.text[self.pos:self.pos + 1] != ":":
                    self.fail("expected ':'")
                self.pos += 1
                obj.append((key, self.value()))
            else:
                obj.append(self.value())
            expect_entry = False


def read_lenient(text, object_pairs_hook=dict):
    """Parse ``text`` as fastjson's parser does with its default features: single-quoted strings,
    unquoted keys, comments, arbitrary commas, ``\\x`` and ``\\v`` escapes; numbers with a
    fraction or exponent as :class:`~decimal.Decimal` (fastjson's BigDecimal); each object's
    ``(key, value)`` pairs given to ``object_pairs_hook``, as ``json.loads`` does. Nothing but
    blanks and comments may follow (``parser.close()``: "not close json text"). Raises
    ``ValueError``."""
    reader = _Reader(text, object_pairs_hook)
    obj = reader.value()
    reader.blanks()
    if reader.pos != len(text):
        reader.fail("not close json text")
    return obj
