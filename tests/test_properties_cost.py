"""Java properties text read by runs, its cost charged before it is read (issue 31, hole 4:
UPDATE_NAMESRV_CONFIG and UPDATE_CONTROLLER_CONFIG parse their bodies on the reactor; 16 MiB
of ``a=1`` lines took 17 s, one line of 15 MiB 7.6 s, and a run of continuation lines was joined
one line at a time, quadratic).

``tests/properties_reference.py`` keeps the reader it replaced as the oracle: both give the same
properties, or both refuse. Costs are counted (the budget), never timed."""
import pytest
from hypothesis import given, settings, strategies as st

import properties_reference
from rocketpy.namesrv.javaprops import ESCAPE_COST, LINE_COST, PropertiesError, parse_properties
from rocketpy.remoting.budget import DecodeBudget
from rocketpy.remoting.errors import DecodeBudgetExceeded


def _both(text):
    out = []
    for parse in (properties_reference.parse_properties, parse_properties):
        try:
            out.append(parse(text))
        except ValueError:
            out.append("refused")
    return out


FORMS = ["", "a=1", "a = 1\nb:2\nc 3", "  #c\n!d\n\n e=\\\n  f\\\n g", "k\\=x=\\u0041\\t\\q",
         "a=\\u12", "a=\\u12zz", "x\\", "x\\\\", "x=\\\\\\", "\\\n\\\n", "a\\\r\nb=1\rc=2",
         "k=\\ud83d\\ude00", "k=\\uD800", "=v", ":v", " \t\fk\f=\tv ", "a=1\na=2",
         "k=v\\", "k\\ v=1", "é=ü\\u00e9", "a\\\n#b=1"]


@pytest.mark.parametrize("text", FORMS)
def test_each_form_reads_as_the_reference_reads_it(text):
    reference, reader = _both(text)
    assert reader == reference


@settings(max_examples=800, deadline=None)
@given(st.text(st.sampled_from("ab=: \t\f\\\n\r#!u0A9fé"), max_size=40))
def test_generated_texts_read_as_the_reference_reads_them(text):
    reference, reader = _both(text)
    assert reader == reference


def test_the_cost_is_charged_before_anything_is_read(monkeypatch):
    """A text's bytes, lines and escapes are charged first: one the budget cannot pay is
    refused before its first line is split."""
    import rocketpy.namesrv.javaprops as javaprops
    split = []
    monkeypatch.setattr(javaprops, "_split", lambda line: split.append(line) or ("k", "v"))
    text = "a=1\n" * 1000 + "k=" + "\\t" * 1000
    cost = len(text) + LINE_COST * 1001 + ESCAPE_COST * 1000
    with pytest.raises(DecodeBudgetExceeded):
        parse_properties(text, DecodeBudget(cost - 1))
    assert split == []
    budget = DecodeBudget(cost)
    parse_properties(text, budget)
    assert budget.spent == cost


def test_the_charge_grows_linearly_with_the_text():
    spent = []
    for n in (1000, 2000, 4000):
        budget = DecodeBudget(0)
        parse_properties("x\\\n" * n + "k=" + "\\n" * n, budget)
        spent.append(budget.spent)
    assert spent[1] - spent[0] == (spent[2] - spent[1]) / 2


def test_a_malformed_escape_is_refused():
    with pytest.raises(PropertiesError):
        parse_properties("k=\\u00zz")
