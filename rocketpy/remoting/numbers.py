"""Wire codec layer: the one reader of a number a stranger wrote, in a header, a body, a bean,
a controller request, a capture or an answer (Java's ``Integer.parseInt``/``Long.parseLong``,
fastjson's ``IntegerCodec``/``LongCodec``, ``TypeUtils.castToInt``/``castToLong`` and its
``BigDecimal`` readings, and the lexer's length limits).

A number's text is small; what it means need not be. ``int()`` of ``Decimal("1e1000000")``
builds a million-digit integer (36 s for a 29-byte header). Java answers such numbers at once:
``BigDecimal.intValueExact`` refuses one whose integer part passes 19 digits before making it,
``BigDecimal.longValue`` of a scale of -64 or less is 0 (10**64 is a multiple of 2**64), and the
lexer refuses a number of over 65,535 characters. So every reading here looks at a number's
digit count and exponent first and does work bounded by its text, never by its value: the low
32 or 64 bits of an integer part are the bits of its last 64 decimal digits (10**64 is a multiple
of 2**64), so no integer longer than that is ever made. Each refusal raises
:class:`NumberError` naming the Java exception it stands for; the callers turn it into their own
codec error."""
import re
from decimal import Decimal, InvalidOperation

from .errors import shown as _shown

__all__ = ["INT32", "INT64", "MAX_NUMBER_LENGTH", "NumberError", "java_decimal",
           "java_integer_literal", "parse_java_integer", "decimal_integer", "cast_to_integer"]

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
#: fastjson's limit on a number's text: ``JSONLexerBase.scanNumber`` ("scanNumber overflow", the
#: digits before any exponent) and ``JSONScanner.decimalValue`` ("decimal overflow", all of it)
MAX_NUMBER_LENGTH = 65535
#: the digits of an integer part that decide its low 64 bits (10**64 = 2**64 * 5**64)
_LOW_DIGITS = 64
#: ``BigDecimal``'s scale is a Java int
_SCALE_MAX = (1 << 31) - 1

# Integer.parseInt / Long.parseLong: a sign, then decimal digits (Character.digit takes any
# Unicode decimal digit, as Python's \d and int() do); no blanks or underscores, which int() takes
_JAVA_INTEGER = re.compile(r"([+-]?)(\d+)")
#: TypeUtils.castToInt drops a ``.000`` tail (NUMBER_WITH_TRAILING_ZEROS_PATTERN); castToLong
#: does not
_TRAILING_ZEROS = re.compile(r"\.0*\Z")
#: the strings castToInt and castToLong read as null
_NULL_TEXTS = frozenset(("", "null", "NULL"))


class NumberError(ValueError):
    """A number Java refuses (``NumberFormatException``, ``ArithmeticException``, fastjson's
    ``JSONException``); the message says which rule refused it."""


def _significant(digits):
    """``digits`` (a ``\\d+`` match) without its leading zeros, in ASCII: ``parseLong`` reads
    ``"000...0001"`` as 1 whatever its length."""
    if not digits.isascii():
        digits = "".join(str(int(ch)) for ch in digits)   # one Unicode digit each: linear
    return digits.lstrip("0")


def parse_java_integer(text, bounds=INT64):
    """``Integer.parseInt(text)`` (``bounds`` :data:`INT32`) or ``Long.parseLong(text)``: an
    optional sign and decimal digits, within the range; no more than 19 digits (after leading
    zeros) are ever converted. Raises :class:`NumberError`."""
    match = _JAVA_INTEGER.fullmatch(text)
    if match is None:
        raise NumberError(f"NumberFormatException: For input string: {_shown(text)}")
    sign, digits = match.groups()
    if len(digits) > 19 or not digits.isascii():
        digits = _significant(digits)
        if len(digits) > 19:
            raise NumberError(f"NumberFormatException: For input string: {_shown(text)} "
                              "(out of the Java range)")
    value = int(digits or "0")
    if sign == "-":
        value = -value
    if not bounds[0] <= value <= bounds[1]:
        raise NumberError(f"NumberFormatException: For input string: {_shown(text)} "
                          "(out of the Java range)")
    return value


def java_decimal(text):
    """The ``BigDecimal`` fastjson's lexer makes of a number with a fraction or an exponent
    (``UseBigDecimal``), as :class:`~decimal.Decimal` (the same coefficient and exponent): over
    :data:`MAX_NUMBER_LENGTH` characters fastjson refuses it ("decimal overflow"), and so does
    ``new BigDecimal`` an exponent whose scale leaves the Java int range. The ``parse_float`` of
    every JSON reader here. Raises :class:`NumberError`."""
    if len(text) > MAX_NUMBER_LENGTH:
        raise NumberError(f"JSONException: decimal overflow ({len(text)} characters)")
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise NumberError(f"NumberFormatException: {_shown(text)}") from None
    if not value.is_finite():
        raise NumberError(f"NumberFormatException: {_shown(text)}")
    if not -_SCALE_MAX <= value.as_tuple().exponent <= _SCALE_MAX:
        raise NumberError(f"NumberFormatException: {_shown(text)} (exponent overflow)")
    return value


def java_integer_literal(text):
    """The integer a JSON integer literal is (``-?digits``): refused over
    :data:`MAX_NUMBER_LENGTH` characters as fastjson's lexer refuses it ("scanNumber overflow");
    ``int()`` refuses past Python's digit limit (4300) before converting. Raises ``ValueError``."""
    if len(text) > MAX_NUMBER_LENGTH:
        raise NumberError(f"JSONException: scanNumber overflow ({len(text)} characters)")
    return int(text)


def _wrap(value, bounds):
    low, high = bounds
    return (value - low) % (high - low + 1) + low


def decimal_integer(value, bounds=INT64):
    """``TypeUtils.intValue`` / ``longValue`` of a ``BigDecimal``: a scale within [-100, 100]
    is cut to its integer part and keeps its low 32 or 64 bits (``BigDecimal.intValue``,
    ``longValue``); any other scale must be exact (``intValueExact``, ``longValueExact``: 0, or
    an integral value within the range). Work bounded by the text: the integer part's last 64
    digits decide its low bits, and no other digit is converted. Raises :class:`NumberError`."""
    if not value.is_finite():
        raise NumberError(f"NumberFormatException: {value}")
    sign, digits, exponent = value.as_tuple()
    scale = -exponent
    if not any(digits):                              # zero, any scale: signum() == 0
        return 0
    precision = len(digits)
    if -100 <= scale <= 100:
        if scale > 0:
            digits = digits[:max(0, precision - scale)]     # cut the fraction
        low = digits[-_LOW_DIGITS:]
        if not low:
            return 0
        number = int("".join(map(str, low)))
        if scale < 0:
            number *= 10 ** -scale                   # at most 10**100: a small number
        return _wrap(-number if sign else number, bounds)
    # intValueExact / longValueExact
    if precision - scale <= 0:
        raise NumberError(f"ArithmeticException: Rounding necessary ({_shown(str(value))})")
    if precision - scale > 19:
        raise NumberError(f"ArithmeticException: Overflow ({_shown(str(value))})")
    if any(digits[precision - scale:]):              # scale > 100 here: a fraction is left
        raise NumberError(f"ArithmeticException: Rounding necessary ({_shown(str(value))})")
    number = int("".join(map(str, digits[:precision - scale])))
    number = -number if sign else number
    if not bounds[0] <= number <= bounds[1]:
        raise NumberError(f"ArithmeticException: Overflow ({_shown(str(value))})")
    return number


def cast_to_integer(value, bounds=INT64, booleans=True):
    """A parsed JSON value as fastjson's ``IntegerCodec`` (``bounds`` :data:`INT32`) or
    ``LongCodec`` sets an ``int``/``long`` property: an integer literal within the range (the
    lexer's ``intValue``/``longValue`` fail past it), a number with a fraction or exponent by
    :func:`decimal_integer`, a string by ``castToInt``/``castToLong`` (commas dropped, for an
    int a ``.0...`` tail too; ``""``, ``"null"``, ``"NULL"`` are null), ``true``/``false`` as 1/0
    (``castToLong`` of 1.2.69 takes no boolean: ``booleans=False``), ``null`` as None. Raises
    :class:`NumberError` for anything else."""
    if value.__class__ is int:
        if bounds[0] <= value <= bounds[1]:
            return value
        raise NumberError(f"NumberFormatException: {_shown(str(value))} (out of the Java range)")
    if value is None:
        return None
    if value is True or value is False:
        if booleans:
            return int(value)
        raise NumberError(f"JSONException: can not cast to long, value : {value}")
    if isinstance(value, Decimal):
        return decimal_integer(value, bounds)
    if isinstance(value, float):      # a json float: within 1e308, its integer part is small
        if value != value or value in (float("inf"), float("-inf")):
            raise NumberError(f"NumberFormatException: {value}")
        return _wrap(int(value), bounds)
    if isinstance(value, str):
        if value in _NULL_TEXTS:
            return None
        text = value.replace(",", "") if "," in value else value
        if bounds is INT32 and "." in text:
            text = _TRAILING_ZEROS.sub("", text, count=1)
        return parse_java_integer(text, bounds)
    if isinstance(value, int):        # an IntEnum, say
        return cast_to_integer(int(value), bounds, booleans)
    raise NumberError(f"JSONException: can not cast to {'int' if bounds is INT32 else 'long'}, "
                      f"value : a {type(value).__name__}")
