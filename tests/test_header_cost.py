"""What a JSON header may cost the reactor (issue 31, hole 4).

A header the usual path does not take is read by readers that spend Python time per key, token
or string: a 15 MiB header of ``{code:105,opaque:1,a:1,a:1,...}`` froze the server 11.9 s, and
one of ``"a":1,`` pairs in strict JSON 7.6 s. Such a header is read only up to
``MAX_LENIENT_HEADER`` bytes (the largest genuine header in the captures has 402); a larger one
is read only as strict JSON with at most ``MAX_HEADER_KEYS`` colons, else refused before any
of it is parsed. Costs are counted (the readers' calls), never timed."""
import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from processorutil import make, register
from rocketpy.namesrv.profile import PROFILE_53
from rocketpy.remoting import decode_frame, frame
from rocketpy.remoting.codes import ResponseCode
from rocketpy.remoting.errors import HeaderDecodeError
from rocketpy.remoting.frame import MAX_HEADER_KEYS, MAX_LENIENT_HEADER, python_decode_header
from rocketpy.transport import RemotingServerFactory

MIB = 1024 * 1024


class Readers:
    """Counts the calls of every reader past the usual path."""

    def __init__(self, monkeypatch):
        self.calls = {}
        for name in ("read_lenient", "_bean_properties", "raw_string_literals"):
            self._count(monkeypatch, frame, name)
        self._count(monkeypatch, frame.json, "loads")

    def _count(self, monkeypatch, owner, name):
        real = getattr(owner, name)

        def counted(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            return real(*args, **kwargs)
        monkeypatch.setattr(owner, name, counted)


def _lenient(size):
    """``{code:105,opaque:1,a:1,a:1,...}`` of ``size`` bytes (the issue's reproducer at 15 MiB)."""
    head, tail = b"{code:105,opaque:1,", b"}"
    body = b"a:1," * ((size - len(head) - len(tail)) // 4)
    return (head + body + b" " * (size - len(head) - len(body) - len(tail)) + tail)


def _strict(size):
    """``{"code":105,"opaque":1,"a":1,"a":1,...}``: strict JSON, a key written many times."""
    head, tail = b'{"code":105,"opaque":1,', b'"b":1}'
    body = b'"a":1,' * ((size - len(head) - len(tail)) // 6)
    return head + body + b" " * (size - len(head) - len(body) - len(tail)) + tail


@pytest.mark.parametrize("make_header", [_lenient, _strict], ids=["lenient", "strict"])
def test_a_15_mib_header_off_the_usual_path_is_refused_before_it_is_parsed(monkeypatch,
                                                                          make_header):
    header = make_header(15 * MIB)
    readers = Readers(monkeypatch)
    with pytest.raises(HeaderDecodeError, match="refused before it is parsed"):
        python_decode_header(0, header)
    assert readers.calls == {}


@pytest.mark.parametrize("make_header", [_lenient, _strict], ids=["lenient", "strict"])
def test_a_header_up_to_the_bound_is_read_in_any_form(make_header):
    command = python_decode_header(0, make_header(MAX_LENIENT_HEADER))
    assert (command.code, command.opaque) == (105, 1)


def test_past_the_bound_only_strict_json_with_few_keys_is_read(monkeypatch):
    size = MAX_LENIENT_HEADER + 1
    with pytest.raises(HeaderDecodeError):   # few colons, but not strict JSON
        python_decode_header(0, b"{code:105,opaque:1,remark:'" + b"x" * size + b"'}")
    readers = Readers(monkeypatch)
    with pytest.raises(HeaderDecodeError, match="refused before it is parsed"):
        python_decode_header(0, _strict(size + 6 * MAX_HEADER_KEYS))
    assert readers.calls == {}
    # a long value, a key written twice: strict JSON with few keys is read as before
    header = (b'{"code":105,"opaque":1,"opaque":2,"extFields":{"topic":"T1","k":"'
              + b"v,:" * (MAX_HEADER_KEYS // 2) + b"v" * MAX_LENIENT_HEADER + b'"}}')
    assert len(header) > MAX_LENIENT_HEADER
    command = python_decode_header(0, header)
    # (a property written twice keeps its last value, as Java 5.3.3's RemotingCommand reader)
    assert (command.code, command.opaque, command.ext_fields["topic"]) == (105, 2, "T1")


def test_the_usual_shape_of_any_size_is_read():
    """A genuine header is the usual shape, read by the C scanner whatever its size (a PUT of a
    long KV value)."""
    header = (b'{"code":100,"extFields":{"namespace":"n","key":"k","value":"'
              + b"a:1;" * (2 * MAX_HEADER_KEYS) + b'"},"flag":0,"language":"JAVA",'
              b'"opaque":3,"serializeTypeCurrentRPC":"JSON","version":479}')
    assert python_decode_header(0, header).ext_fields["value"] == "a:1;" * (2 * MAX_HEADER_KEYS)


def test_the_server_closes_a_connection_whose_header_is_refused(tmp_path):
    proc = make(tmp_path / "ns", PROFILE_53)
    assert register(proc).code == 0
    factory = RemotingServerFactory(proc, clock=Clock())
    sent = []
    for header in (_lenient(2 * MIB), b'{code:105,extFields:{topic:"T1"},opaque:7}'):
        proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 9876))
        transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 50000))
        proto.makeConnection(transport)
        proto.dataReceived((4 + len(header)).to_bytes(4, "big")
                           + len(header).to_bytes(4, "big") + header)
        sent.append((transport.value(), transport.disconnecting))
    assert sent[0] == (b"", True)
    answer = decode_frame(sent[1][0])
    assert (answer.code, answer.opaque, sent[1][1]) == (ResponseCode.SUCCESS, 7, False)
