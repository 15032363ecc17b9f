"""The header kernel's ``repeated_keys`` (one pass, each object's keys by hash) says what the
Python oracle says (``fastjson``: the colons outside string literals against the keys json
parsed) on every genuine JSON body of the captures and on random texts with keys written twice,
colons and escapes in strings; it leaves to the oracle (None) only a text it cannot read byte
for byte (a key with an escape, fastjson's lenient forms)."""
import json

import pytest
from hypothesis import given, settings, strategies as st

import costcount
import replay
from rocketpy.remoting import fastjson
from rocketpy.remoting.kernel import KERNEL

pytestmark = pytest.mark.skipif(KERNEL is None, reason="the header kernel is not built")


def oracle(text):
    return fastjson.written_keys(text) != fastjson.key_count(json.loads(text))


def _genuine_json_bodies():
    for path in sorted(replay.PCAP_DIR.glob("*.pcap")):
        for event in replay.replay_events(path):
            command = getattr(event, "request", None) or getattr(event, "response", None)
            body = getattr(command, "body", None)
            if body and body[:1] in (b"{", b"["):
                try:
                    json.loads(body)
                except ValueError:
                    continue
                yield path.name, body


def test_every_genuine_json_body_is_read_alike():
    checked = 0
    for name, body in _genuine_json_bodies():
        assert KERNEL.repeated_keys(body) is oracle(body) is False, name
        checked += 1
    assert checked > 250


KEYS = ["a", "b", "a:b", 'q"', "e\u00e9"] + [f"k{i}" for i in range(40)]
_strings = st.text(alphabet=st.sampled_from('ab:"\\\u00e9\u2200 {}[],'), max_size=6)


@st.composite
def texts(draw, depth=0):
    """JSON text (str) whose objects may write a key twice."""
    if depth < 3 and draw(st.booleans()):
        if draw(st.booleans()):
            return "[" + ",".join(draw(st.lists(texts(depth + 1), max_size=3))) + "]"
        # past 16 keys an object's keys are hashed, below compared one by one
        keys = draw(st.lists(st.sampled_from(KEYS), max_size=draw(st.sampled_from([4, 40]))))
        escaped = draw(st.booleans())
        items = [(json.dumps(k, ensure_ascii=escaped), draw(texts(depth + 1))) for k in keys]
        return "{" + ",".join(f"{k}{draw(st.sampled_from([':', ' : ']))}{v}" for k, v in items) + "}"
    return json.dumps(draw(st.one_of(st.integers(), _strings, st.none())), ensure_ascii=False)


@settings(max_examples=400, deadline=None)
@given(text=texts())
def test_random_texts_are_read_as_the_oracle_reads_them(text):
    data = text.encode()
    found = KERNEL.repeated_keys(data)
    if found is None:   # only a key written with an escape
        assert any("\\" in k for k in _key_literals(text))
    else:
        assert found is oracle(data)


def _key_literals(text):
    return [m.group() for m in fastjson._STRING_LITERAL.finditer(text)
            if fastjson._AFTER_KEY.match(text, m.end())]


def test_lenient_forms_and_escaped_keys_are_left_to_the_oracle():
    for text in (b"{a:1,a:2}", b"{'a':1}", b'{"a":1,/*c*/"a":2}', b'{"\\u0061":1,"a":2}'):
        assert KERNEL.repeated_keys(text) is None
    assert KERNEL.repeated_keys(b'{"a":{"a":1},"b":[{"a":1},{"a":2}]}') is False
    assert KERNEL.repeated_keys(b'{"a":"\\\\","a":1}') is True
    big = b"{" + b",".join(b'"k%d":{"a":1,"b":%d}' % (i, i) for i in range(40))
    assert KERNEL.repeated_keys(big + b"}") is False
    assert KERNEL.repeated_keys(big + b',"k39":0}') is True
    assert KERNEL.repeated_keys(big + b',"k3":0}') is True


def _one_big_object(n):
    """n distinct keys in one object (the hashed path), sharing a long prefix."""
    return b"{" + b",".join(b'"%s%d":%d' % (b"k" * 40, i, i) for i in range(n)) + b"}"


def _nested(n):
    """n objects each inside the last (the stack of open objects)."""
    return b'{"a":' * n + b"1" + b"}" * n


def _many_small_objects(n):
    """n objects of 16 keys (compared one by one), each last key written twice at the end."""
    one = b"{" + b",".join(b'"k%d":%d' % (i, i) for i in range(16)) + b"}"
    return b"[" + b",".join([one] * n) + b',{"a":1,"a":2}]'


@pytest.mark.parametrize("shape, repeats", [(_one_big_object, False), (_nested, False),
                                            (_many_small_objects, True)],
                         ids=["one big object", "nested", "many small objects"])
def test_cost_grows_linearly(shape, repeats, counting):
    """What a stranger writes (one object of many keys, deep nesting, many objects) costs work
    proportional to it, counted by the counting build (keys probed, table entries written, bytes
    searched or copied): 4x the input, each count at most 6x (linear: 4x; a key-by-key scan of a
    big object, or of every open object's keys, is 16x)."""
    kernel = counting.kernel
    costs = []
    for n in (20_000, 80_000):
        data = shape(n)
        kernel.take_cost()
        assert kernel.repeated_keys(data) is repeats
        costs.append(kernel.take_cost())
    assert costs[0]["bytes"] > 100_000, costs
    growth = costcount.growth(*costs)
    assert max(growth.values()) < 6, (shape.__name__, costs, growth)
