"""Issue 31, holes 1 and 9: the reproducers of "a number's exponent", replayed through every
place a stranger's number is read, each with its cost counted (tests/costmeter.py: lines run and
memory held, in the pure-Python reference), never timed: the input must cost what the same input
with a plain number costs (``_as_dear_as``), or, through the bare codec, no more per byte than
the genuine frames. Before the fix each took 25-57 s (a 29-byte header froze the server 36.8 s):
``int()`` of ``Decimal("1e1000000")`` builds a 415 KB integer, which the memory count sees. Each
test fails on the code before the fix, on its cost or on its answer (a REGISTER_BROKER remark
said ``decimal.Overflow``)."""
import struct
import zlib

import pytest

import capture_synth as cs
import costmeter
import fuzzharness as fh
from processorutil import make, register
from rocketpy.capture import engine
from rocketpy.capture.source import open_capture
from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.namesrv import Channel
from rocketpy.remoting import RemotingCommand, bodies, decode_frame
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.errors import BodyDecodeError, HeaderDecodeError

#: the header of hole 1 (29 bytes): 36.8 s of one reactor turn, from any host
HEADER = b'{"code":1e1000000,"opaque":1}'
HUGE = (b"1e1000000", b"1e999999", b"-1E+999999", b"1.5e1000000", b"1e-1000000",
        b"0.000001e1000005")
#: 60,001 digits with a fraction: fastjson reads it (a scale of 1: intValue, the low bits)
LONG = b"9" * 60000 + b".5"
CH = Channel(1, "127.0.0.1:50000")


def _frame(header, body=b""):
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


@pytest.fixture(scope="module")
def codec():
    """The cost of decode_frame per byte on the genuine frames: what a reproducer is held to."""
    with costmeter.reference():
        yield costmeter.CostContract("decode_frame", [(f, decode_frame) for f in fh.corpus()[::9]],
                                     factor=32, floor=16)


def _cheap(contract, data, fn, *args):
    """``fn(*args)``'s exception, its cost checked against ``contract`` for ``data``."""
    with costmeter.reference():
        return contract.run(data, fn, *args, warm=True)


def _as_dear_as(hostile, plain, slack_lines=500, slack_memory=32 << 10):
    """``hostile()`` costs what ``plain()`` (the same input with a plain number) costs, give or
    take a little (both measured warm); returns what ``hostile()`` raised."""
    with costmeter.reference():
        want, _ = costmeter.measure(plain, warm=True)
        got, error = costmeter.measure(hostile, warm=True)
    assert got.lines <= want.lines + slack_lines, (got, want)
    assert got.memory <= want.memory + slack_memory, (got, want)
    return error


def test_a_header_number_costs_its_bytes(codec):
    for number in HUGE:
        header = b'{"code":' + number + b',"opaque":1}'
        error = _cheap(codec, _frame(header), decode_frame, _frame(header))
        assert isinstance(error, HeaderDecodeError) and "code" in str(error), (number[:20], error)
    for field in (b"opaque", b"flag", b"version"):
        header = b'{"code":105,"' + field + b'":1e1000000}'
        assert isinstance(_cheap(codec, _frame(header), decode_frame, _frame(header)),
                          HeaderDecodeError)
    assert decode_frame(_frame(b'{"code":105.0e0,"opaque":7.9}')).opaque == 7  # still read
    header = b'{"code":' + LONG + b',"opaque":1}'
    assert _cheap(codec, _frame(header), decode_frame, _frame(header)) is None
    assert decode_frame(_frame(header)).code == (10 ** 60000 - 1) % (1 << 32) - (1 << 32)


def test_the_29_byte_header_through_the_server_closes_the_connection(tmp_path):
    """The protocol the server runs: the header is refused at once, the connection closed, at
    the cost of a header refused for a plain reason (each on a connection of its own)."""
    from twisted.internet.address import IPv4Address
    from twisted.internet.task import Clock
    from twisted.internet.testing import StringTransport
    from rocketpy.transport import RemotingServerFactory
    factory = RemotingServerFactory(make(tmp_path), clock=Clock())
    transports = []

    def send(header):
        def run():
            proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 9876))
            transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 50000))
            proto.makeConnection(transport)
            transports.append(transport)
            proto.dataReceived(_frame(header))
        return run
    assert len(HEADER) == 29
    _as_dear_as(send(HEADER), send(b'{"code":"1x","opaque":1}'))
    assert transports[-1].value() == b"" and transports[-1].disconnecting


def _lenient_body_costs(contract, cls, body):
    error = _cheap(contract, body, cls.from_json, body)
    assert isinstance(error, BodyDecodeError), error
    return str(error)


def test_a_body_number_costs_its_bytes(codec):
    """Bodies, beans and a Map<Long, ...>'s keys, in fastjson's lenient forms (where a number
    with an exponent is a BigDecimal) and strict JSON alike."""
    for number in HUGE:
        for body, cls in ((b"{counter:" + number + b"}", bodies.DataVersion),
                          (b'{"counter":' + number + b"}", bodies.DataVersion),
                          (b"{'queueDatas':[{perm:" + number + b"}]}", bodies.TopicRouteData),
                          (b"{'brokerDatas':[{brokerAddrs:{" + number + b":'a:1'}}]}",
                           bodies.TopicRouteData)):
            _lenient_body_costs(codec, cls, body)
    body = b'{"counter":' + LONG + b'}'
    assert _cheap(codec, body, bodies.DataVersion.from_json, body) is None


def test_a_query_data_version_body(tmp_path, codec):
    proc = make(tmp_path)
    ext = {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "c", "brokerId": "0"}
    answers = []

    def query(number):
        body = b"{counter:" + number + b",timestamp:1}"
        request = RemotingCommand.request(int(RequestCode.QUERY_DATA_VERSION), ext, body, opaque=3)
        return lambda: answers.append(proc.process(request, CH, 1000))
    _as_dear_as(query(b"1e1000000"), query(b"1"))
    assert answers[-1].code == ResponseCode.SYSTEM_ERROR
    assert "ArithmeticException: Overflow" in answers[-1].remark


def _stream(*parts):
    out = b""
    for part in parts:
        out += struct.pack(">i", part) if isinstance(part, int) else struct.pack(">i", len(part)) + part
    return zlib.compress(out)


@pytest.mark.parametrize("epoch", [b"1e999999", b"1e1000000"])
def test_a_compressed_registration_mapping(tmp_path, codec, epoch):
    """A 5.x compressed RegisterBrokerBody whose static topic mapping says ``epoch:1e999999``
    (26 s in one C call holding the GIL) or ``1e1000000`` (whose remark said
    ``decimal.Overflow: [<class 'decimal.Overflow'>]``): refused as Java refuses a long it
    cannot read exactly, "Failed to decode RegisterBrokerBody"."""
    proc = make(tmp_path)
    answers = []

    def registration(number):
        mapping = b"{topic:'T',bname:'broker-a',epoch:" + number + b",totalQueues:1}"
        body = _stream(b'{"counter":1,"timestamp":1}', 0, b"[]", 1, mapping)
        assert len(body) < 110
        return lambda: answers.append(register(proc, body=body, compressed="true", topics=()))
    # as dear as one refused for a plain reason (a refusal logs and answers: ~47 KB either way)
    _as_dear_as(registration(epoch), registration(b"'x'"))
    answer = answers[-1]
    if hasattr(answer, "finish"):       # a body the decode pool would take
        answer = answer.finish(answer.work())
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == ("org.apache.rocketmq.remoting.exception.RemotingCommandException: "
                             "Failed to decode RegisterBrokerBody")
    assert proc.route_info_manager.broker_addr_table == {}


def test_an_alter_sync_state_set_body_on_the_controller_port(codec):
    """The controller port: a 45-byte ALTER_SYNC_STATE_SET body took 25 s."""
    props = {"controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9878",
             "controllerDLegerSelfId": "n0"}
    processor = ControllerRequestProcessor(ControllerConfiguration.from_properties(props))
    ext = {"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"}
    answers = []

    def alter(template, number):
        body = template.replace(b"N", number)
        request = RemotingCommand.request(int(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET), ext,
                                          body, opaque=5)
        return lambda: answers.append(processor.process(request, CH, 1000))
    for template in (b"{syncStateSet:[N],syncStateSetEpoch:1}", b"{syncStateSet:[1],syncStateSetEpoch:N}"):
        assert len(template.replace(b"N", b"1e1000000")) <= 47
        _as_dear_as(alter(template, b"1e1000000"), alter(template, b"1"))
        assert answers[-1].opaque == 5 and answers[-1].code != ResponseCode.SUCCESS


def _pcap(frame):
    seg = cs.Seg(1_700_000_000_000_000_000, "10.0.0.1", 40000, "10.0.0.2", 9876, 1, 1,
                 cs.PSH | cs.ACK, frame)
    return cs.write_pcap(cs.packets([seg]), cs.LINKTYPES["ether"])


@pytest.mark.parametrize("name", sorted(engine.ENGINES))
def test_a_131_byte_pcap_in_both_capture_engines(tmp_path, name, monkeypatch):
    """The capture decoder (26 s in both engines): the frame is no RocketMQ frame it can read
    (its header fails), so its bytes are skipped, as a plain frame's are read. (The reader's
    4 MiB read buffer is made small: at the peak it would hide a 415 KB integer.)"""
    from rocketpy.capture import readers
    monkeypatch.setattr(readers, "BLOCK_SIZE", 4096)
    rows, stats = [], {}

    def decode(header):
        path = tmp_path / f"{name}-{len(header)}.pcap"
        path.write_bytes(_pcap(_frame(header)))

        def run():
            decoder = engine.ENGINES[name]()
            with open_capture(str(path)) as (f, info):
                rows[:] = list(decoder.decode(f, str(path), info)) + list(decoder.finish())
            stats.update(decoder.stats)
        return run
    assert len(_pcap(_frame(HEADER))) == 131
    decode(b'{"code":1,"opaque":1}')()
    assert sum(batch.num_rows for batch in rows) == 1
    stats.clear()
    _as_dear_as(decode(HEADER), decode(b'{"code":1,"opaque":1}'))
    decode(HEADER)()
    assert sum(batch.num_rows for batch in rows) == 0 and stats["skipped_bytes"] == 37


def test_answers_from_a_hostile_nameserver(codec):
    """What rocketpy-admin, rocketpy-brokersim and RemotingClient read from a NameServer: the
    answer's header and its bodies through the same readers."""
    for header in (b'{"code":0,"flag":1,"opaque":1,"version":1e1000000}',
                   b'{"code":1e1000000,"flag":1,"opaque":1}'):
        assert isinstance(_cheap(codec, _frame(header), decode_frame, _frame(header)),
                          HeaderDecodeError)
    for cls, body in ((bodies.ClusterInfo, b"{brokerAddrTable:{b:{brokerAddrs:{1e1000000:'x'}}}}"),
                      (bodies.TopicRouteData, b"{queueDatas:[{readQueueNums:1e1000000}]}"),
                      (bodies.KVTable, b"{table:{a:1e1000000}}"),
                      (bodies.SyncStateSet, b"{syncStateSet:[1],syncStateSetEpoch:1e1000000}"),
                      (bodies.EpochEntryCache, b"{epochList:[{epoch:1e1000000}]}")):
        error = _cheap(codec, body, cls.from_json, body)
        if cls is bodies.KVTable:       # a String value: its text, as Java's StringCodec
            assert error is None and cls.from_json(body).table == {"a": "1E+1000000"}
        else:
            assert isinstance(error, BodyDecodeError), (cls, error)
