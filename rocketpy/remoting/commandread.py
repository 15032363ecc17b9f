"""Wire codec layer: which member of a JSON header sets each ``RemotingCommand`` property, as
fastjson fills the bean (``JSON.parseObject(header, RemotingCommand.class)``).

For a body bean a property keeps its first value (``JavaBeanDeserializer``'s ``setFlags``), but
Java decodes ``RemotingCommand`` with the class ``ASMDeserializerFactory`` generates for it, and
that reads otherwise (a differential against the genuine 5.3.3 NameServer: ``{"code":999,...,
"code":105}`` is a route query there). Its ``deserialze`` walks the setter properties in sorted
order once, each trying the fast scan of its type (``scanFieldInt``, ``scanFieldString``,
``scanEnum``, ``matchField`` for an object) at the lexer's position, which only matches
``"name":`` written there exactly; on the first value no fast scan takes (``NOT_MATCH``), or
after the last property, it hands the rest to ``JavaBeanDeserializer.parseRest`` with the flags
of what it set. That loop starts again at the first sorted property (``fieldIndex`` 0) and for
as many turns as there are setters tries the fast scan of property ``fieldIndex`` first: a fast
match sets the property whatever its flag says, so a key written again in Java's order (``code``
after ``version``) takes its last value. Only a member the fast scans leave (past those turns,
or a value no fast scan reads) goes through ``smartMatch`` and keeps a property's first value.

Two more facts of the fast scans: ``scanFieldInt`` reads up to 13 digits into a Java ``int``
and wraps (``4294967297`` is 1; a negative result or a 14th digit is ``NOT_MATCH``), and
``matchField`` skips the blanks before a key even when the name then does not match (so a blank
before a key costs the following fast scans nothing). Lines are
``parser/JSONLexerBase.java`` (``scanFieldInt`` 1906, ``scanFieldString`` 1243,
``scanEnumSymbol`` 1501, ``scanFieldBoolean`` 2239, ``matchField`` 1170),
``parser/deserializer/ASMDeserializerFactory.java`` (``_deserialze`` 580) and
``JavaBeanDeserializer.java`` (the fast loop 520-690, ``parseField`` 1125) at alibaba/fastjson
1.2.83; 1.2.69 has the same code.

:func:`read_properties` is used for a header whose result depends on it: a property given more
than once (in any spelling), or an ``int`` property outside the Java range (which a fast scan may
wrap). It walks the text only while the fast scans can act (one turn a setter in each phase), so
its work is bounded by the members it looks at; the values are the parsed ones."""
import re

from .fastjson import next_member

__all__ = ["SORTED_PROPERTIES", "read_properties"]

INT, STRING, ENUM, BOOLEAN, OBJECT = "int", "String", "enum", "boolean", "object"
_COMMAND_4_9 = (("body", OBJECT), ("code", INT), ("extFields", OBJECT), ("flag", INT),
                ("language", ENUM), ("opaque", INT), ("remark", STRING),
                ("serializeTypeCurrentRPC", ENUM), ("version", INT))
#: ``RemotingCommand``'s setters as fastjson sorts them (``JavaBeanInfo.sortedFields``), each with
#: the fast scan of its type, by the fastjson release that reads them: 1.2.69 ships with 4.9.8
#: and 5.0.0 (nine setters), 1.2.83 with 5.3.3, which adds ``callbackList``, ``processTimer``
#: and ``suspended``. ``body`` and those three are setters too (fastjson does not skip transient
#: fields): they take a turn of the loops, and their values change nothing the NameServer
#: answers (``decode`` replaces the body)
SORTED_PROPERTIES = {
    "1.2.69": _COMMAND_4_9,
    "1.2.83": tuple(sorted(_COMMAND_4_9 + (("callbackList", OBJECT), ("processTimer", OBJECT),
                                           ("suspended", BOOLEAN))))}
_NAMES = {name: "".join(('"', name, '":')) for name, _ in SORTED_PROPERTIES["1.2.83"]}
_EOI = "\x1a"                        # JSONLexer.EOI: what charAt gives past the end
NOT_MATCH_NAME, NOT_MATCH, VALUE, END = -2, -1, 3, 4
_DIGITS = re.compile(r"[0-9]*")
_BLANKS = " \n\r\t\f\b"              # JSONLexerBase.isWhitespace


def _at(text, i):
    return text[i] if i < len(text) else _EOI


def _ending(text, i):
    """What follows a fast-scanned value at ``i``: ``(VALUE, next position)`` after a comma,
    ``(END, None)`` at the object's end, else ``(NOT_MATCH, None)``."""
    ch = _at(text, i)
    if ch == ",":
        return VALUE, i + 1
    if ch == "}" and _at(text, i + 1) in ",]}" + _EOI:
        return END, None
    return NOT_MATCH, None


def _value_at(text, bp, name):
    """Where the value of ``"name":`` written at ``bp`` starts (``charArrayCompare``), else None."""
    prefix = _NAMES[name]
    return bp + len(prefix) if text.startswith(prefix, bp) else None


def _scan_int(text, i):
    """``scanFieldInt`` from the value at ``i``: ``(status, value, next position)``."""
    negative = _at(text, i) == "-"
    if negative:
        i += 1
    digits = _DIGITS.match(text, i).group()
    if not digits:
        return NOT_MATCH, None, None
    i += len(digits)
    if _at(text, i) == "." or len(digits) > (12 if negative else 13):
        return NOT_MATCH, None, None
    value = int(digits) & 0xFFFFFFFF              # int arithmetic wraps on each digit
    if value & 0x80000000:                        # a negative int: NOT_MATCH (the MIN_VALUE
        return NOT_MATCH, None, None              # exception fits no name of this bean)
    status, after = _ending(text, i)
    return status, (-value if negative else value), after


def _scan_string(text, i, escapes):
    """``scanFieldString`` (``escapes``) or ``scanEnumSymbol`` (a string without a backslash)
    from the value at ``i``; its value is the parsed one."""
    if _at(text, i) != '"':
        return NOT_MATCH, None
    end = text.find('"', i + 1)
    while escapes and end > 0:
        slashes = len(text[i + 1:end]) - len(text[i + 1:end].rstrip("\\"))
        if not slashes & 1:
            break
        end = text.find('"', end + 1)
    if end < 0 or not escapes and "\\" in text[i + 1:end]:
        return NOT_MATCH, None                    # (an unclosed string: the parse refused it)
    return _ending(text, end + 1)


def _scan_boolean(text, i):
    for word in ("true", "false"):
        if text.startswith(word, i):
            return _ending(text, i + len(word))
    return NOT_MATCH, None


def _match_field(text, bp, name):
    """``matchField``: ``(matched, position)``; blanks before the key are skipped either way."""
    while not text.startswith(_NAMES[name], bp) and _at(text, bp) in _BLANKS:
        bp += 1
    return text.startswith(_NAMES[name], bp), bp


def _fast(kind, text, bp, name):
    """The fast scan of a non-object property: ``(status, int value or None, next position)``."""
    i = _value_at(text, bp, name)
    if i is None:
        return NOT_MATCH_NAME, None, None
    if kind is INT:
        return _scan_int(text, i)
    status, after = (_scan_boolean(text, i) if kind is BOOLEAN
                     else _scan_string(text, i, kind is STRING))
    return status, None, after


def read_properties(text, start, pairs, strict, match, dialect):
    """``{property: value}`` as ``dialect``'s fastjson sets them from the header ``text`` whose
    object's members start at ``start`` (just past its ``{``) and parse to ``pairs`` (``(key,
    value)`` in order). ``strict`` says the text is JSON (its values are skipped by the C
    scanner); ``match(key)`` is the property ``smartMatch`` finds for a key (None for none). A
    value a fast ``scanFieldInt`` read is that int (wrapped); any other is the parsed value."""
    setters = SORTED_PROPERTIES[dialect.version]
    values, flags = {}, set()
    state = {"bp": start, "taken": 0}             # the lexer's position, pairs consumed

    def take(name, value=None, flag=True):
        """The next member sets ``name`` (a fast scan: whatever its flag says)."""
        values[name] = pairs[state["taken"]][1] if value is None else value
        state["taken"] += 1
        if flag:
            flags.add(name)

    def first(key, value):
        """``parseField``: a property keeps its first value (its ``setFlags`` bit)."""
        name = match(key)
        if name is not None and name not in flags:
            values[name] = value
            flags.add(name)

    def turns(rest):
        """One turn a setter: ``deserialze``'s (``rest`` False) stops at a value no fast scan
        reads; ``parseRest``'s reads that member through ``parseField``. True when the object
        ended."""
        for name, kind in setters:
            bp = state["bp"]
            if kind is OBJECT:
                matched, bp = _match_field(text, bp, name)
                state["bp"] = bp
                if matched:                       # parseRest's leaves the flag as it was
                    take(name, flag=not rest)
                    state["bp"] = next_member(text, bp, strict)[1]
                    if state["bp"] is None:
                        return True
                continue
            status, number, after = _fast(kind, text, bp, name)
            if status == NOT_MATCH_NAME:
                continue
            if status == NOT_MATCH:
                if not rest:
                    return False
                what, after = next_member(text, bp, strict)
                if what == "member":
                    first(*pairs[state["taken"]])
                    state["taken"] += 1
                if after is None:
                    return True
                state["bp"] = after
                continue
            take(name, number)
            if status == END:
                return True
            state["bp"] = after
        return False

    if not turns(False) and not turns(True):
        for key, value in pairs[state["taken"]:]:     # smartMatch for every member left
            first(key, value)
    return values
