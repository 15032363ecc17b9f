"""Wire codec layer: JSON exactly as Alibaba fastjson 1.x writes and reads it (every RocketMQ
JSON header and body goes through it). Two dialects matter on the wire:

* **legacy** (``JSON.toJSONString(obj)``): map keys in the map's own order, numeric keys
  *unquoted* (``{"brokerAddrs":{0:"127.0.0.1:10911"}}``), ``/`` not escaped;
* **standard** (``BrowserCompatible, QuoteFieldNames, MapSortField``: routes to clients >=
  V4_9_4 or with ``acceptStandardJsonOnly``): every key quoted, map keys sorted, ``/`` and
  non-ASCII escaped.

``dumps(obj, pretty=True)`` is ``PrettyFormat`` (what ``mqadmin topicRoute`` prints): tab
indents, a line break before each bean property, string map key and list item (none before an
unquoted numeric key), closing brackets of non-empty containers on their own line; a
:class:`Bean` breaks the line even with no property to write.

``loads`` accepts both (and the C++ client's trailing newline), keeping key order and returning
unquoted numeric keys as ``int``, so ``dumps(loads(b))`` restores ``b``. Like fastjson's lexer it
takes raw control characters inside strings (the .NET client NewLife.RocketMQ separates message
properties with raw 0x01/0x02), except 0x1A, end of input inside a key (``scanSymbol``). The
strict parse runs first, so such rare strings cost nothing until one turns up;
:func:`raw_string_literals` gives their literals as written, for writing them back byte for byte."""
import json
import re
from decimal import Decimal

from .errors import BodyDecodeError
from .budget import LENIENT_OP_COST
from .kernel import KERNEL
from .numbers import java_decimal, java_integer_literal

__all__ = ["loads", "dumps", "dump_text", "escape_string", "lenient_decoder",
           "raw_string_literals", "Bean", "Dialect", "FASTJSON_1_2_69", "FASTJSON_1_2_83",
           "read_lenient", "loads_lenient", "members_start", "next_member", "Repeated",
           "key_count", "written_keys", "repeats_keys"]

_json_loads = json.loads
#: fastjson's reading of a string: raw control characters are taken as they are.
lenient_decoder = json.JSONDecoder(strict=False)
#: A string literal; outside strings JSON has no quotes, so a scan from the start meets the
#: literals in order.
_STRING = r'"(?:[^"\\]|\\.)*"'
_STRING_LITERAL = re.compile(_STRING, re.S)
# The same, unrolled (no alternation per character), for str and bytes
_STRINGS = {str: re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S),
            bytes: re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)}
_COLON = {str: ":", bytes: b":"}
_BACKSLASH = {str: "\\", bytes: b"\\"}
_RAW_CONTROL = re.compile("[\x00-\x1f]")
_EOI = "\x1a"              # fastjson's JSONLexer.EOI
_AFTER_KEY = re.compile(r"\s*:")
# An unquoted numeric object key, only outside string literals (the string branch keeps strings).
_UNQUOTED_KEY = re.compile(_STRING + r'|([{,]\s*)(-?\d+)(\s*:)', re.S)
_INT_KEY_MARK = "\ue000rocketpy-int-key:"  # private-use: never in real keys


def _mark_int_key(match):
    if match.group(1) is None:
        return match.group(0)
    return f'{match.group(1)}"{_INT_KEY_MARK}{match.group(2)}"{match.group(3)}'


# The same key, without telling strings apart: only right when no string holds a backslash (see
# _mark_int_keys).
_BARE_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


def _mark_int_keys(text):
    """``text`` with its unquoted numeric keys quoted and marked.

    Without a backslash in ``text`` no string holds an escaped quote, so the parity of the
    quotes before a match tells whether it lies inside a string (a match cannot straddle one:
    it has no quote); that skips the per-string callback of the general pattern, which is most
    of the cost of reading a route or cluster body."""
    if "\\" in text:
        return _UNQUOTED_KEY.sub(_mark_int_key, text)
    parts = []
    last = quotes_to = quotes = 0
    for match in _BARE_INT_KEY.finditer(text):
        start = match.start()
        quotes += text.count('"', quotes_to, start)
        quotes_to = start
        if quotes & 1:
            continue
        parts.append(text[last:start])
        parts.append(f'{match.group(1)}"{_INT_KEY_MARK}{match.group(2)}"{match.group(3)}')
        last = match.end()
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _restore_int_keys(pairs):
    out = {}
    for key, value in pairs:
        if key.startswith(_INT_KEY_MARK):
            key = int(key[len(_INT_KEY_MARK):])
        out[key] = value
    return out


_LENIENT_INT_KEYS = json.JSONDecoder(strict=False, object_pairs_hook=_restore_int_keys)
#: the same three readers, a number with a fraction or exponent read as fastjson's BigDecimal
#: (exact, within fastjson's limits: :func:`~rocketpy.remoting.numbers.java_decimal`)
_EXACT = (json.JSONDecoder(parse_float=java_decimal).decode,
          json.JSONDecoder(strict=False, parse_float=java_decimal),
          json.JSONDecoder(strict=False, parse_float=java_decimal,
                           object_pairs_hook=_restore_int_keys))
_FLOATS = (_json_loads, lenient_decoder, _LENIENT_INT_KEYS)


def loads(data, exact=False):
    """Parse fastjson output (bytes or str); unquoted numeric keys become ``int`` keys. A number
    with a fraction or exponent is a float, or with ``exact`` a :class:`~decimal.Decimal` as
    fastjson's ``BigDecimal`` (what a bean reads).

    Raises :class:`BodyDecodeError` for anything that is not JSON or not UTF-8.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    except UnicodeDecodeError as exc:
        raise BodyDecodeError(f"JSON is not valid UTF-8: {exc}") from None
    strict, lenient, int_keys = _EXACT if exact else _FLOATS
    try:
        return strict(text)
    except json.JSONDecodeError as exc:
        # the readers below differ from json's only in unquoted numeric keys and raw control
        # characters: JSON that fails first at anything else fails there too (and their scans
        # of a 16 MiB text are C calls that hold the GIL)
        if not (text[exc.pos:exc.pos + 1] in _INT_KEY_START
                or exc.msg.startswith("Invalid control character")):
            _broken(text, exc)
    except (ValueError, RecursionError):  # too deep: the second attempt says so below
        pass
    try:   # unquoted numeric keys, raw control characters in strings, or broken
        marked = _mark_int_keys(text)
        if marked == text:
            obj = lenient.decode(text)
        else:
            obj = int_keys.decode(marked)
        if _EOI in text:
            raw_string_literals(text)
        return obj
    except (ValueError, RecursionError) as exc:
        _broken(text, exc)


_INT_KEY_START = frozenset("-0123456789")


def _broken(text, exc):
    snippet = text[:60].encode("unicode_escape").decode("ascii")
    raise BodyDecodeError(f"broken JSON ({exc}) in {snippet!r}...") from None


def raw_string_literals(text):
    """``{string: its literal as written}`` for the strings of ``text`` (JSON that parsed
    leniently) that hold a raw control character. Raises ``ValueError`` for one that is an
    object key holding 0x1A, which fastjson refuses ("unclosed.str")."""
    found = {}
    for match in _STRING_LITERAL.finditer(text):
        literal = match.group()
        if _RAW_CONTROL.search(literal) is None:
            continue
        if _EOI in literal and _AFTER_KEY.match(text, match.end()):
            raise ValueError(f"0x1A in the object key {literal!r}: fastjson reads it as the end "
                             "of its input")
        found.setdefault(lenient_decoder.decode(literal), literal)
    return found


_PLAIN = re.compile(r'[ !#-\[\]-~]*\Z')  # printable ASCII without '"' and '\\'
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _u(ch):
    return "\\u%04X" % ord(ch)


def _escape_char_legacy(ch):
    short = _SHORT.get(ch)
    if short:
        return short
    code = ord(ch)
    if code < 0x20 or 0x7F <= code < 0xA0 or ch in "\u2028\u2029":
        return _u(ch)
    return ch


def _escape_char_standard(ch):
    short = _SHORT.get(ch)
    if short:
        return short
    if ch == "/":
        return "\\/"
    code = ord(ch)
    if code < 0x20 or code > 0x7E:
        if code > 0xFFFF:  # Java strings are UTF-16: escape each surrogate
            code -= 0x10000
            return "\\u%04X\\u%04X" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))
        return _u(ch)
    return ch


def escape_string(text, standard=False):
    """Quote ``text`` as fastjson does (legacy or BrowserCompatible escaping)."""
    if _PLAIN.match(text) and (not standard or "/" not in text):
        return f'"{text}"'
    esc = _escape_char_standard if standard else _escape_char_legacy
    return '"' + "".join(esc(ch) for ch in text) + '"'


class Bean(dict):
    """A Java bean's properties, as opposed to a Java map: only the pretty format tells them
    apart (``JavaBeanSerializer`` always breaks the line after ``{``; ``MapSerializer`` only
    before an entry with a string key)."""

    __slots__ = ()


def _sort_key(key):
    return (0, key, "") if isinstance(key, int) else (1, 0, key)


def _dump(obj, standard, out):
    if isinstance(obj, str):
        out.append(escape_string(obj, standard))
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(str(obj))
    elif obj is None:
        out.append("null")
    elif isinstance(obj, dict):
        items = obj.items()
        if standard:
            items = sorted(items, key=lambda kv: _sort_key(kv[0]))
        out.append("{")
        first = True
        for key, value in items:
            if value is None:  # fastjson skips null fields and null map values by default
                continue
            if not first:
                out.append(",")
            first = False
            if isinstance(key, int):
                out.append(f'"{key}":' if standard else f"{key}:")
            else:
                out.append(escape_string(key, standard))
                out.append(":")
            _dump(value, standard, out)
        out.append("}")
    elif isinstance(obj, (list, tuple, set, frozenset)):
        out.append("[")
        for i, value in enumerate(obj):
            if i:
                out.append(",")
            _dump(value, standard, out)
        out.append("]")
    elif isinstance(obj, float):
        out.append(repr(obj))
    elif isinstance(obj, Decimal):      # BigDecimalCodec: toString()
        out.append(str(obj))
    else:
        raise TypeError(f"fastjson.dumps cannot encode {type(obj).__name__}")


def _dump_pretty(obj, depth, out):
    """``SerializerFeature.PrettyFormat`` (legacy dialect): see the module docstring."""
    if isinstance(obj, dict):
        bean = isinstance(obj, Bean)
        items = [(k, v) for k, v in obj.items() if v is not None]
        out.append("{")
        if bean:
            out.append("\n" + "\t" * (depth + 1))
        for i, (key, value) in enumerate(items):
            if i:
                out.append(",")
                if bean:
                    out.append("\n" + "\t" * (depth + 1))
            if isinstance(key, int):
                out.append(f"{key}:")
            else:
                if not bean:
                    out.append("\n" + "\t" * (depth + 1))
                out.append(escape_string(key))
                out.append(":")
            _dump_pretty(value, depth + 1, out)
        if bean or obj:
            out.append("\n" + "\t" * depth)
        out.append("}")
    elif isinstance(obj, (list, tuple, set, frozenset)):
        if not obj:
            out.append("[]")
            return
        out.append("[")
        for i, value in enumerate(obj):
            if i:
                out.append(",")
            out.append("\n" + "\t" * (depth + 1))
            _dump_pretty(value, depth + 1, out)
        out.append("\n" + "\t" * depth + "]")
    else:
        _dump(obj, False, out)


def dumps(obj, standard=False, pretty=False):
    """Encode ``obj`` as fastjson would, to UTF-8 bytes.

    Dict keys keep their order in legacy mode (callers arrange Java's map order) and are sorted
    in standard mode (``MapSortField``); ``int`` keys are unquoted in legacy mode only.
    ``pretty`` is ``PrettyFormat`` over the legacy dialect.
    """
    if pretty:
        out = []
        _dump_pretty(obj, 0, out)
        return "".join(out).encode("utf-8", "replace")  # lone surrogate -> '?', as Java
    return dump_text(obj, standard).encode("utf-8", "replace")


def dump_text(obj, standard=False):
    """:func:`dumps` as text (a Java ``String``: a lone surrogate stays one)."""
    out = []
    _dump(obj, standard, out)
    return "".join(out)


# --- what fastjson's parser accepts beyond JSON ---------------------------------------------------
#
# RocketMQ reads a JSON header with ``JSON.parseObject(bytes, RemotingCommand.class)`` under
# fastjson's default parser features (``JSON.DEFAULT_PARSER_FEATURE``: AllowUnQuotedFieldNames,
# AllowSingleQuotes, AllowArbitraryCommas, ...), and its lexer skips comments wherever it skips
# blanks. :func:`read_lenient` reads that language; docs/protocol.md lists each form with the
# fastjson line that accepts it. Only headers that strict JSON refuses come here.

class Dialect:
    """What one fastjson release does beyond the lexer (4.9.8 and 5.0.0 ship 1.2.69, 5.3.3
    1.2.83): how a bean property is found for a key that is not its exact name
    (``JavaBeanDeserializer.smartMatch``)."""

    def __init__(self, version, ignores_separators, long_booleans):
        self.version = version
        #: 1.2.83 also matches a key with ``_`` and ``-`` left out (``fnv1a_64_extract``);
        #: 1.2.69 only ignores case (``fnv1a_64_lower``)
        self.ignores_separators = ignores_separators
        #: ``TypeUtils.castToLong`` takes ``true``/``false`` as 1/0 in 1.2.83; 1.2.69 refuses them
        #: ("can not cast to long"); ``castToInt`` takes them in both
        self.long_booleans = long_booleans

    def smart_key(self, key):
        """The form in which ``key`` matches a property name in the same form (lower case)."""
        key = key.lower() if key.isascii() else "".join(
            chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in key)
        if self.ignores_separators:
            key = key.replace("_", "").replace("-", "")
        return key

    def __repr__(self):
        return f"fastjson {self.version}"


FASTJSON_1_2_69 = Dialect("1.2.69", False, False)
FASTJSON_1_2_83 = Dialect("1.2.83", True, True)

_BLANK_RUN = r"[ \r\n\t\f\b]*"
_BLANKS = re.compile(_BLANK_RUN)
_NUMBER_TEXT = r"-?\d+(\.\d+)?([eE][+-]?\d+)?"
_NUMBER = re.compile(_NUMBER_TEXT)
#: What a token's first character makes it (anything else: a number or a word, by the regular
#: expressions below, or nothing fastjson reads). A run of blanks, digits or letters is one
#: regular-expression step, so a byte costs C time and only a token costs Python time.
_T_BLANKS, _T_NUMBER, _T_WORD, _T_OBJECT, _T_ARRAY, _T_END_OBJECT, _T_END_ARRAY, _T_COMMA, \
    _T_COLON, _T_QUOTE, _T_COMMENT = range(11)
_KINDS = {**dict.fromkeys(" \r\n\t\f\b", _T_BLANKS), **dict.fromkeys("-0123456789", _T_NUMBER),
          **dict.fromkeys("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$", _T_WORD),
          "{": _T_OBJECT, "[": _T_ARRAY, "}": _T_END_OBJECT, "]": _T_END_ARRAY, ",": _T_COMMA,
          ":": _T_COLON, '"': _T_QUOTE, "'": _T_QUOTE, "/": _T_COMMENT}
_WORD = re.compile(r"[A-Za-z_$\u0100-\U0010ffff][A-Za-z0-9_\u0100-\U0010ffff]*")
#: commas and blanks between two entries (``AllowArbitraryCommas``)
_COMMAS = re.compile(r"[ \r\n\t\f\b,]*")
# where the reader is: a value must come (the text's, or after ':'); in a container where an
# entry may come (after its opening or a comma); after an entry (',' or the end); after a key
_S_VALUE, _S_ENTRY, _S_NEXT, _S_COLON = range(4)
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "F": "\f",
            '"': '"', "'": "'", "/": "/", "\\": "\\"}
_HEX = re.compile(r"[0-9a-fA-F]+\Z")
_LITERALS = (("true", True), ("false", False), ("null", None))
_QUOTE_OR_ESCAPE = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_scanstring = json.decoder.scanstring
#: nesting fastjson's parser reads (deeper: refused)
MAX_DEPTH = 256
#: operations between two budget checks
_CHECK_EVERY = 4096


def _pair(match):
    high, low = match.group()
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


class _Reader:
    """One pass over ``text`` by tokens (:data:`_KINDS`) with an explicit stack: each byte is
    read by a regular expression a bounded number of times, and each token -- a number, a word,
    a mark, a comment -- and each escape in a string is one *operation* in Python, counted in
    ``ops`` and charged to ``budget`` (:data:`~rocketpy.remoting.budget.LENIENT_OP_COST` each)
    as the reading goes, so a text that would cost more than its budget stops at the bound."""

    __slots__ = ("text", "pos", "ops", "escapes", "object_pairs_hook", "budget", "_charged",
                 "_tokens")

    def __init__(self, text, object_pairs_hook, budget=None):
        self.text, self.pos, self.ops, self.escapes = text, 0, 0, 0
        self.object_pairs_hook = object_pairs_hook
        self.budget = budget
        self._charged = self._tokens = 0

    def fail(self, what, pos=None):
        if pos is not None:
            self.pos = pos
        raise ValueError(f"{what} at offset {self.pos}")

    def charge(self, tokens):
        """``tokens`` read so far, and the escapes: charge what was not charged yet."""
        self._tokens = tokens
        self.ops = tokens + self.escapes
        if self.budget is not None:
            self.budget.spend((self.ops - self._charged) * LENIENT_OP_COST,
                              f"lenient JSON offset {self.pos}")
        self._charged = self.ops

    def comment(self, pos):
        """``skipComment`` at the ``/`` at ``pos``: the offset after it."""
        text = self.text
        nxt = text[pos + 1:pos + 2]
        if nxt == "/":
            stop = text.find("\n", pos + 2)
            return len(text) if stop < 0 else stop + 1
        if nxt == "*":
            stop = text.find("*/", pos + 2)
            return len(text) if stop < 0 else stop + 2
        self.fail("invalid comment", pos)

    def string(self, pos):
        """``(the string, the offset after it)`` for the literal whose quote is at ``pos``:
        C's ``scanstring`` for a double-quoted one with JSON's escapes only, else one
        operation per escape."""
        text = self.text
        quote = text[pos]
        if quote == '"':
            try:
                return _scanstring(text, pos + 1, False)
            except ValueError:   # fastjson's own escapes (\x, \v, \', octal), or broken
                pass
        special = _QUOTE_OR_ESCAPE[quote]
        out = []
        pos += 1
        pairs = False
        while True:
            match = special.search(text, pos)    # the next quote or backslash: linear overall
            if match is None:
                self.fail("unclosed string")
            at = match.start()
            out.append(text[pos:at])
            if text[at] == quote:
                value = "".join(out)
                return (_SURROGATE_PAIR.sub(_pair, value) if pairs else value), at + 1
            self.escapes += 1
            if not self.escapes % _CHECK_EVERY:
                self.pos = at
                self.charge(self._tokens)
            esc = text[at + 1:at + 2]
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                pos = at + 2
            elif esc == "u" or esc == "x":
                width = 4 if esc == "u" else 2
                digits = text[at + 2:at + 2 + width]
                if len(digits) != width or _HEX.match(digits) is None:
                    self.fail("bad escape", at)
                code = int(digits, 16)
                pairs = pairs or 0xD800 <= code <= 0xDFFF
                out.append(chr(code))
                pos = at + 2 + width
            elif esc and esc in "01234567":
                out.append(chr(int(esc)))
                pos = at + 2
            else:
                self.fail("bad escape", at)

    def number(self, match):
        """A number token: an ``int``, or with a fraction or exponent a
        :class:`~decimal.Decimal` (fastjson's ``UseBigDecimal``: a BigDecimal)."""
        if match.group(1) is None and match.group(2) is None:
            return java_integer_literal(match.group())
        return java_decimal(match.group())   # UseBigDecimal: a BigDecimal

    def read(self):
        """The value the text holds; ``pos`` is then where it ends."""
        text, kinds, hook = self.text, _KINDS, self.object_pairs_hook
        stack = []            # (end token, entries, key) of each enclosing container
        close = items = key = None    # the open container's end token and entries
        state, pos, ops, check = _S_VALUE, self.pos, 0, _CHECK_EVERY
        while True:
            ops += 1
            if ops >= check:
                self.pos = pos
                self.charge(ops)
                check = ops + _CHECK_EVERY
            try:
                kind = kinds.get(text[pos])
            except IndexError:
                self.fail("unexpected end", pos)
            if kind == _T_BLANKS:
                pos = _BLANKS.match(text, pos).end()
                continue
            start = pos
            if kind == _T_COMMENT:
                pos = self.comment(pos)
                continue
            match = None
            if kind is None:      # past ASCII: a digit of another script, or a word's letter
                match = _NUMBER.match(text, pos)
                kind = _T_NUMBER
                if match is None:
                    match = _WORD.match(text, pos)
                    kind = _T_WORD
            elif kind == _T_NUMBER:
                match = _NUMBER.match(text, pos)
            elif kind == _T_WORD:
                match = _WORD.match(text, pos)
            else:
                pos += 1
            if match is not None:
                pos = match.end()
            elif kind == _T_NUMBER or kind == _T_WORD:
                self.fail("unexpected character", pos)
            if state == _S_COLON:
                if kind != _T_COLON:
                    self.fail("expected ':'", start)
                state = _S_VALUE
                continue
            if state != _S_VALUE:     # in a container
                if kind == close:
                    value = hook(items) if kind == _T_END_OBJECT else items
                    close, items, key = stack.pop()
                    if items is None:    # the whole text's value
                        self.pos = pos
                        self.ops = ops + self.escapes
                        return value
                    items.append((key, value) if close == _T_END_OBJECT else value)
                    state = _S_NEXT
                    continue
                if kind == _T_COMMA:     # AllowArbitraryCommas: a run of them is one
                    pos = _COMMAS.match(text, pos).end()
                    state = _S_ENTRY
                    continue
                if state == _S_NEXT:
                    self.fail("expected ',' or '" + ("}" if close == _T_END_OBJECT else "]")
                              + "'", start)
                if close == _T_END_OBJECT:   # a key
                    if kind == _T_QUOTE:
                        key, pos = self.string(start)
                        if _EOI in key:   # scanSymbol stops at its end-of-input mark
                            self.fail("0x1A in the object key: fastjson reads it as the end "
                                      "of its input", start)
                    elif kind == _T_NUMBER and match.group(1) is None and match.group(2) is None:
                        key = java_integer_literal(match.group())   # a map's numeric key
                    elif kind == _T_WORD:
                        key = match.group()
                    else:
                        self.fail("illegal identifier", start)
                    state = _S_COLON
                    continue
            # a value
            if kind == _T_OBJECT or kind == _T_ARRAY:
                stack.append((close, items, key))
                if len(stack) > MAX_DEPTH:
                    self.fail("too deep", start)
                close = _T_END_OBJECT if kind == _T_OBJECT else _T_END_ARRAY
                items, key, state = [], None, _S_ENTRY
                continue
            if kind == _T_QUOTE:
                value, pos = self.string(start)
            elif kind == _T_NUMBER:
                value = self.number(match)
            elif kind == _T_WORD:
                for word, value in _LITERALS:
                    if text.startswith(word, start):
                        pos = start + len(word)
                        break
                else:
                    self.fail("unexpected character", start)
            else:
                self.fail("unexpected character", start)
            if items is None:    # a scalar is the whole text
                self.pos = pos
                self.ops = ops + self.escapes
                return value
            items.append((key, value) if close == _T_END_OBJECT else value)
            state = _S_NEXT

    # One step at a time, for :func:`next_member` (a header's members walked in Java's order):
    def blanks(self):
        """Past the blanks and comments at ``pos``."""
        text, pos = self.text, self.pos
        while True:
            pos = _BLANKS.match(text, pos).end()
            if text[pos:pos + 1] != "/":
                self.pos = pos
                return
            pos = self.comment(pos)

    def key(self):
        """The object key at ``pos`` (quoted, a number: a map's numeric key, or a word)."""
        text, pos = self.text, self.pos
        ch = text[pos:pos + 1]
        if ch == '"' or ch == "'":
            key, self.pos = self.string(pos)
            if _EOI in key:   # scanSymbol stops at its end-of-input mark
                self.fail("0x1A in the object key: fastjson reads it as the end of its input")
            return key
        match = _NUMBER.match(text, pos)
        if match is not None and match.group(1) is None and match.group(2) is None:
            self.pos = match.end()
            return java_integer_literal(match.group())
        match = _WORD.match(text, pos)
        if match is None:
            self.fail("illegal identifier", pos)
        self.pos = match.end()
        return match.group()

    def value(self):
        """The value at ``pos`` (after blanks); ``pos`` is then where it ends."""
        self.blanks()
        return self.read()

    def end(self):
        """Blanks and comments to the end, or "not close json text"; everything charged."""
        text, pos, ops = self.text, self.pos, self.ops - self.escapes
        while True:
            pos = _BLANKS.match(text, pos).end()
            if pos >= len(text):
                break
            if text[pos] != "/":
                self.fail("not close json text", pos)
            ops += 1
            pos = self.comment(pos)
        self.pos = pos
        self.charge(ops)


_SKIP_STRICT = json.JSONDecoder(strict=False).scan_once   # the C scanner: where a JSON value ends
_STRICT_BLANKS = re.compile(r"[ \t\n\r]*")


def members_start(text):
    """Where the members of the object ``text`` (which parsed) start: just past its ``{``, after
    a byte order mark, blanks and comments (the lexer skips them)."""
    reader = _Reader(text, _keep_repeats)
    if text.startswith("\ufeff"):
        reader.pos = 1
    reader.blanks()
    return reader.pos + 1


def next_member(text, pos, strict):
    """What follows ``pos`` (where a member of an object that parsed may start) in ``text``:
    ``("end", None)`` at the object's ``}``, ``("empty", after)`` for a stray comma
    (``AllowArbitraryCommas``) and ``("member", after)`` for a ``key: value``, ``after`` being
    just past the comma that ends it (None when the object ends with it). A JSON text's value
    (``strict``) is skipped by the C scanner, any other by :func:`read_lenient`'s reader."""
    reader = _Reader(text, _keep_repeats)
    reader.pos = pos
    reader.blanks()
    ch = text[reader.pos:reader.pos + 1]
    if ch == "}":
        return "end", None
    if ch == ",":
        return "empty", reader.pos + 1
    reader.key()
    reader.blanks()
    reader.pos += 1                                   # the ':' (the text parsed)
    if strict:
        reader.pos = _STRICT_BLANKS.match(text, reader.pos).end()
        reader.pos = _SKIP_STRICT(text, reader.pos)[1]
    else:
        reader.value()
    reader.blanks()
    return "member", (reader.pos + 1 if text[reader.pos:reader.pos + 1] == "," else None)


def read_lenient(text, object_pairs_hook=dict, budget=None):
    """Parse ``text`` as fastjson's parser does with its default features: single-quoted strings,
    unquoted keys, comments, arbitrary commas, ``\\x`` and ``\\v`` escapes; numbers with a
    fraction or exponent as :class:`~decimal.Decimal` (fastjson's BigDecimal); each object's
    ``(key, value)`` pairs given to ``object_pairs_hook``, as ``json.loads`` does. Nothing but
    blanks and comments may follow (``parser.close()``: "not close json text"). Every token is
    charged to ``budget`` (a :class:`~rocketpy.remoting.budget.DecodeBudget`, or None) while it
    is read: its errors stop the reading. Raises ``ValueError``."""
    reader = _Reader(text, object_pairs_hook, budget)
    obj = reader.read()
    reader.end()
    return obj


class Repeated(dict):
    """An object with a key written more than once: as a dict the last value of each key (a
    Java ``Map``'s reading, ``MapDeserializer``'s ``map.put``), and ``pairs``, every
    ``(key, value)`` in order, for a bean, whose properties keep their first value."""

    __slots__ = ("pairs",)


def _keep_repeats(pairs):
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    obj = Repeated(obj)
    obj.pairs = pairs
    return obj


def key_count(obj):
    """The keys of every object in ``obj`` (parsed JSON), nested ones included."""
    count = 0
    stack = [obj]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        if isinstance(item, dict):
            count += len(item)
            extend(item.values())
        elif isinstance(item, list):
            extend(item)
    return count


def written_keys(text):
    """The keys written in ``text`` (str or bytes that ``json`` parsed, lenient forms of
    :func:`loads` too): each key is followed by one colon, and outside string literals JSON
    has no other."""
    kind = str if isinstance(text, str) else bytes
    colon = _COLON[kind]
    if text.count(colon) == 0:
        return 0
    return _STRINGS[kind].sub(colon[:0], text).count(colon)


def repeats_keys(text, obj, keys=None, string_colons=0):
    """Whether ``text`` (as in :func:`written_keys`), parsed into ``obj``, has a key written
    twice in one object (``json`` keeps one). Exact, and cheap for the usual text: with
    ``keys``, the keys the caller counted in ``obj`` (some objects may be left out), first the
    colons of the whole text (one C scan) against them plus ``string_colons``, those the caller
    knows in the parsed strings: equal, no colon is left for a key written twice. Then the
    header kernel's one pass (``repeated_keys``: each object's keys by hash), and where it cannot
    tell (a key with an escape, no kernel) the colons outside string literals against every key
    of ``obj``. ``string_colons`` counts only where the text has no backslash: an escape
    (``\\u003a``) writes a colon into a parsed string that the text does not show."""
    kind = str if isinstance(text, str) else bytes
    colon = _COLON[kind]
    if keys is None and KERNEL is None:
        keys = key_count(obj)
    if string_colons and _BACKSLASH[kind] in text:
        string_colons = 0
    if keys is not None and text.count(colon) == keys + string_colons:
        return False
    if KERNEL is not None:
        found = KERNEL.repeated_keys(text.encode("utf-8", "surrogatepass") if colon == ":" else text)
        if found is not None:
            return found
    return written_keys(text) != key_count(obj)


def loads_lenient(data, repeats=False, budget=None):
    """A request body as Java's ``JSON.parseObject`` reads it: :func:`loads`, and when that
    fails :func:`read_lenient` (what fastjson's parser reads beyond JSON), which charges its
    operations to ``budget`` (None: not counted). With ``repeats``, an object with a key written
    twice comes back as a :class:`Repeated` (the text is read again, only when
    :func:`repeats_keys` says so). Raises :class:`BodyDecodeError` with the strict parser's
    complaint, or the budget's error."""
    try:
        obj = loads(data, exact=True)
    except BodyDecodeError as exc:
        error = exc
    else:
        if not repeats:
            return obj
        text = bytes(data) if isinstance(data, (bytearray, memoryview)) else data
        if not repeats_keys(text, obj):
            return obj
        text = text.decode("utf-8") if isinstance(text, bytes) else text
        try:
            return json.loads(text, object_pairs_hook=_keep_repeats, strict=False,
                              parse_float=java_decimal)
        except (ValueError, RecursionError):   # fastjson's unquoted int keys
            return read_lenient(text, _keep_repeats, budget)
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
        return read_lenient(text, _keep_repeats if repeats else dict, budget)
    except BodyDecodeError:   # the budget's
        raise
    except (ValueError, RecursionError):   # UnicodeDecodeError is a ValueError
        raise error from None
