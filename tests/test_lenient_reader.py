"""fastjson's lenient reader (issue 31, hole 4): the same language as the reference reader, read
by runs, and its work counted.

The reader (:func:`rocketpy.remoting.fastjson.read_lenient`) reads every form fastjson's parser
takes beyond JSON; ``tests/lenient_reference.py`` keeps the reader it replaced, one character at
a time, as the oracle of what the forms mean: both give the same value, or both refuse. Costs
are counted, never timed: a run of blanks, letters, commas or plain string characters is one
operation whatever its length; every other token is one; the operations grow linearly with
the text; and a budget stops the reading at its bound, having done work proportional to the
bound, not to the text."""
import re

import pytest
from hypothesis import given, settings, strategies as st

import lenient_reference
from rocketpy.remoting import fastjson
from rocketpy.remoting.budget import LENIENT_OP_COST, DecodeBudget
from rocketpy.remoting.errors import DecodeBudgetExceeded, DecodeCancelled

_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _joined(value):
    """``value`` with each UTF-16 surrogate pair one character: the reference left the two
    halves of a ``\\uD83D\\uDE00`` apart, where ``json`` (the strict path) joins them."""
    if isinstance(value, str):
        return _PAIR.sub(lambda m: m.group().encode("utf-16-le", "surrogatepass")
                         .decode("utf-16-le"), value)
    if isinstance(value, list):
        return [_joined(v) for v in value]
    if isinstance(value, dict):
        return {_joined(k): _joined(v) for k, v in value.items()}
    return value


def _both(text):
    """(reference result or "refused", reader result or "refused")."""
    out = []
    for read in (lenient_reference.read_lenient, fastjson.read_lenient):
        try:
            out.append(_joined(read(text)))
        except ValueError:
            out.append("refused")
    return out


def _ops(text):
    budget = DecodeBudget(0)
    fastjson.read_lenient(text, budget=budget)
    assert budget.spent % LENIENT_OP_COST == 0
    return budget.spent // LENIENT_OP_COST


FORMS = [
    "{}", "[]", "1", "-7", "1.50", "2E-3", "true", "null", " false ", "'x'", '"y"',
    "{a:1,$b:'two',c_3:[1,2.5,null,true,false],\"d\":{}}",
    "{,a:1,,b:2,}", "[,1,,2,]", "[/**/1/**/,//x\n2]", "{a /* c */ : // d\n 1}",
    "{'k':'v\\'q\\x41\\v\\F\\0\\7'}", '{"k":"\\u00e9\\ud83d\\ude00\\/"}', "{'k':'\\ud83d\\ude00'}",
    "{0:'a',-1:'b',12:'c'}", "{\u0663:1}", "{\u00e9:1}", "{\u0100x\u0663:1}", "[\u0663]",
    "{\"a\x1ab\":1}", "{a:'x\x1ay'}", "{'a':1}x", "{'a':1}//end", "{'a':1}/*end",
    "{a:1/", "{a:1}/x", "{a:1 b:2}", "[1 2]", "{a}", "{a:}", "{:1}", "{1.5:1}", "{-:1}",
    "[-]", "[tru]", "[truex]", "[nullnull]", "[true,false,null]", "{a:'\\q'}", "{a:'\\x4'}",
    "{a:'\\u12'}", "{a:\"\\x41\"}", "{a:'unclosed}", "{a:\"unclosed}", "[" * 256 + "]" * 256,
    "[" * 257 + "]" * 257, "{a:[{b:[{}]}]}", "{]", "[}", "", "   ", "/**/", "[1,]]",
    "{\"a\":1,\"a\":2}", "'\\'", "\"\\\"", "{a:1}\x00", "\t\r\n\f\b[\b1\f]",
]


@pytest.mark.parametrize("text", FORMS)
def test_each_form_reads_as_the_reference_reads_it(text):
    reference, reader = _both(text)
    assert reader == reference


_SCALARS = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.none(),
                     st.text("ab'\"\\/\x01\x1a\u00e9\u0663 ,:{}", max_size=6),
                     st.decimals(allow_nan=False, allow_infinity=False, places=2))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.from_regex(r"[a-z_$][a-z0-9_]{0,3}", fullmatch=True),
                              st.integers(-99, 99), st.text("ab'\" :", max_size=3)),
                    inner, max_size=4)), max_leaves=12)
_GAPS = st.sampled_from(["", " ", "\n", ",", ",,", " , ", "/*c*/", "//c\n", "\b\f", "/**/,"])


def _write(draw, value):
    """``value`` in a lenient form chosen at each step: quotes, unquoted keys, gaps."""
    gap = lambda: draw(_GAPS) if draw(st.booleans()) else ""   # noqa: E731
    blank = lambda: draw(st.sampled_from(["", " ", "/*x*/", "//y\n"]))   # noqa: E731
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        quote = draw(st.sampled_from("'\""))
        escaped = value.replace("\\", "\\\\").replace(quote, "\\" + quote)
        if draw(st.booleans()):
            escaped = escaped.replace("A", "\\x41").replace("/", "\\/")
        return quote + escaped + quote
    if isinstance(value, list):
        return "[" + gap() + ",".join(blank() + _write(draw, v) + gap() for v in value) + "]"
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            if isinstance(key, int) or re.fullmatch(r"[a-z_$][a-z0-9_]*", key):
                written = str(key)
            else:
                written = _write(draw, key)
            parts.append(blank() + written + blank() + ":" + _write(draw, item) + gap())
        return "{" + gap() + ",".join(parts) + "}"
    return str(value)


@st.composite
def lenient_texts(draw):
    text = _write(draw, draw(_VALUES))
    if draw(st.integers(0, 3)) == 0 and text:   # a mutation: what both must refuse alike
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + draw(st.sampled_from(["", "x", ",", ":", "}", "]", "'", "/",
                                                 "\\", "{", "1"])) + text[at + 1:]
    return text


@settings(max_examples=600, deadline=None)
@given(lenient_texts())
def test_generated_texts_read_as_the_reference_reads_them(text):
    reference, reader = _both(text)
    assert reader == reference, text


# -- what the reading costs, counted ----------------------------------------------------------

#: forms where a run is one step: the operations do not grow with the run's length
RUNS = {
    "blanks": lambda n: "{" + " " * n + "}",
    "an unquoted key": lambda n: "{" + "k" * n + ":1}",
    "commas": lambda n: "[" + "," * n + "]",
    "a string": lambda n: "['" + "x" * n + "']",
    "escapes in double quotes": lambda n: '["' + "\\n" * n + '"]',
    "a comment": lambda n: "[/*" + "*" * n + "*/]",
}
#: forms of one token every few bytes: the operations grow as the text does, no faster
TOKENS = {
    "pairs": lambda n: "{code:105,opaque:1," + "a:1," * n + "}",
    "numbers": lambda n: "[" + "1," * n + "]",
    "comments": lambda n: "[" + "/**/" * n + "]",
    "escapes in single quotes": lambda n: "['" + "\\x41" * n + "']",
    "containers": lambda n: "[" + "[]," * n + "]",
    "line comments": lambda n: "{" + "//\n" * n + "}",
}


@pytest.mark.parametrize("form", sorted(RUNS))
def test_a_run_is_one_operation_whatever_its_length(form):
    make = RUNS[form]
    counts = {_ops(make(n)) for n in (1_000, 2_000, 4_000, 1 << 20)}
    assert len(counts) == 1 and counts.pop() <= 8, form


@pytest.mark.parametrize("form", sorted(TOKENS))
def test_operations_grow_linearly_with_the_text(form):
    make = TOKENS[form]
    sizes = (2_000, 4_000, 8_000, 16_000)
    ops = [_ops(make(n)) for n in sizes]
    per_byte = [o / len(make(n)) for o, n in zip(ops, sizes)]
    for smaller, larger in zip(ops, ops[1:]):
        assert 1.9 <= larger / smaller <= 2.1, (form, ops)
    assert max(per_byte) <= 1.0, (form, per_byte)   # never more than one a byte


@pytest.mark.parametrize("form", sorted(TOKENS))
def test_a_budget_stops_the_reading_after_work_bounded_by_the_budget(form):
    make = TOKENS[form]
    limit = 10_000 * LENIENT_OP_COST
    spent = []
    for n in (50_000, 100_000, 200_000):
        budget = DecodeBudget(limit)
        with pytest.raises(DecodeBudgetExceeded):
            fastjson.read_lenient(make(n), budget=budget)
        spent.append(budget.spent)
    # stopped at the first check past the bound: the same work whatever the text's size
    assert len(set(spent)) == 1 and spent[0] <= limit + 4096 * LENIENT_OP_COST, spent


def test_a_cancelled_budget_stops_the_reading():
    budget = DecodeBudget(0)
    budget.cancel()
    with pytest.raises(DecodeCancelled):
        fastjson.read_lenient(TOKENS["pairs"](10_000), budget=budget)


def test_a_body_read_leniently_is_charged_to_its_budget():
    """``loads_lenient`` (every request body) hands its budget to the reader: a body of 2 M
    tokens is refused at the bound instead of read whole."""
    body = TOKENS["numbers"](1_000_000).encode()
    budget = DecodeBudget(100_000 * LENIENT_OP_COST)
    with pytest.raises(DecodeBudgetExceeded):
        fastjson.loads_lenient(body, budget=budget)
    assert budget.spent <= 105_000 * LENIENT_OP_COST


def test_fastjsons_own_forms_skip_the_scans_that_cannot_read_them(monkeypatch):
    """``loads`` reads unquoted numeric keys and raw control characters beyond json; text that
    json refuses first for anything else goes straight on: the int-key scan of a 16 MiB text is
    one C call holding the GIL (the reactor waited ~1 s for it while a pool thread read a
    lenient body)."""
    scans = []
    real = fastjson._mark_int_keys
    monkeypatch.setattr(fastjson, "_mark_int_keys", lambda text: scans.append(1) or real(text))
    for text, scanned in ((b"{a:1,b:2}", False), (b"{'a':1}", False), (b"[1,/**/2]", False),
                          (b'{0:"x"}', True), (b'{"a":"x\x01y"}', True), (b'{"a":1}', False)):
        scans.clear()
        assert fastjson.loads_lenient(text) is not None
        assert bool(scans) is scanned, text
