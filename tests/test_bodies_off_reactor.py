"""Request bodies decoded off the reactor, each with its own budget (issue 31, hole 4).

The registration bodies were decoded by a CPU Pending already; every other request body was
decoded on the reactor whatever its size: a 16 MiB QUERY_DATA_VERSION body in fastjson's
lenient forms held the NameServer 32 s, 15 MiB lenient controller bodies 5-12 s, a 16 MiB
UPDATE_NAMESRV_CONFIG body of properties 17 s. Now a body past ``INLINE_BODY_MAX`` bytes is
decoded by a CPU Pending (the transport runs its work on the decode pool, in turns with other
hosts' work), and its decode stops at its budget. Counted (decodes run, units spent), never
timed; each answer is the one the same content gets decoded on the spot."""
from functools import partial
from pathlib import Path

import pytest
from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from processorutil import make, register
from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.namesrv import Channel
from rocketpy.namesrv.pending import CPU, DISK, INLINE_BODY_MAX, FileWrite, Pending
from rocketpy.namesrv.profile import PROFILE_50, PROFILE_53
from rocketpy.remoting import RemotingCommand, bodies, decode_frame, headers as H
from rocketpy.remoting.budget import DEFAULT_DECODE_BUDGET
from rocketpy.remoting.codes import ResponseCode as RC
from rocketpy.transport import RemotingServerFactory, TlsMode
from test_transport_offload import ManualPool, answers

CH = Channel(1, "127.0.0.1:50000")
BROKER = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
          "brokerId": "0"}
PAD = b" " * INLINE_BODY_MAX          # blanks: the same JSON, past the bound


def _request(code, ext, body, opaque=7):
    return RemotingCommand.request(code, ext, body, opaque=opaque, version=479)


def _same(a, b):
    return (a.code, a.remark, a.ext_fields, a.body) == (b.code, b.remark, b.ext_fields, b.body)


# (id, profile, request code, ext fields, a small body)
NAMESRV = [
    ("QUERY_DATA_VERSION", PROFILE_53, 322, BROKER, b"{counter:1,timestamp:1,stateVersion:0}"),
    ("REGISTER_TOPIC_IN_NAMESRV", PROFILE_53, 217, {"topic": "TNew"},
     b"{'queueDatas':[{'brokerName':'broker-a','perm':6,'readQueueNums':4,'writeQueueNums':4,"
     b"'topicSysFlag':0}]}"),
    ("GET_CLIENT_CONFIG", PROFILE_50, 47, None, b"{keys:['a']}"),
    ("UPDATE_NAMESRV_CONFIG", PROFILE_53, 318, None, b"orderMessageEnable=true\n"),
]


@pytest.mark.parametrize("name,profile,code,ext,body", NAMESRV, ids=[n[0] for n in NAMESRV])
def test_a_namesrv_body_past_the_bound_is_decoded_by_a_pending(tmp_path, name, profile, code,
                                                              ext, body):
    inline, later = make(tmp_path / "a", profile), make(tmp_path / "b", profile)
    for proc in (inline, later):
        assert register(proc).code == 0
    expected = inline.process(_request(code, ext, body), CH, 1000)
    big = body + PAD if code != 318 else body + b"\n" * INLINE_BODY_MAX
    pending = later.process(_request(code, ext, big), CH, 1000, offload=True)
    assert isinstance(pending, Pending) and pending.lane == CPU and pending.budget is not None
    assert pending.budget.spent == 0                  # nothing decoded on the reactor
    answer = pending.run()
    assert _same(answer, expected), name
    assert 0 < pending.budget.spent <= DEFAULT_DECODE_BUDGET


def test_a_config_update_decoded_off_the_reactor_then_waits_for_its_write(tmp_path):
    """UPDATE_NAMESRV_CONFIG: the decode's finish hands back the write (DISK), answered once
    written."""
    proc = make(tmp_path, PROFILE_53)
    proc.configuration.store = lambda path, text: Path(path).write_text(text)
    body = b"orderMessageEnable=true\n" + b"#" * INLINE_BODY_MAX + b"\n"
    pending = proc.process(_request(318, None, body), CH, 0, offload=True)
    assert pending.lane == CPU
    write = pending.step()
    assert isinstance(write, Pending) and write.lane == DISK
    assert proc.configuration.namesrv_config.order_message_enable   # applied in memory
    assert write.step().code == RC.SUCCESS
    assert "orderMessageEnable=true" in Path(tmp_path / "namesrv.properties").read_text()


def test_a_16_mib_lenient_body_stops_at_its_budget(tmp_path):
    """The issue's reproducer: 4 M ``a:1,`` pairs (~4 operations each) in one DataVersion."""
    proc = make(tmp_path, PROFILE_53)
    body = b"{counter:1," + b"a:1," * (4 * 1024 * 1024 - 4) + b"}"
    pending = proc.process(_request(322, BROKER, body), CH, 0, offload=True)
    answer = pending.run()
    assert answer.code == RC.SYSTEM_ERROR and "work units" in answer.remark
    assert DEFAULT_DECODE_BUDGET < pending.budget.spent <= DEFAULT_DECODE_BUDGET + (1 << 20)


def test_a_small_body_is_still_decoded_on_the_spot(tmp_path):
    proc = make(tmp_path, PROFILE_53)
    answer = proc.process(_request(322, BROKER, b'{"counter":1}'), CH, 0, offload=True)
    assert answer.code == RC.SUCCESS


# -- the controller ---------------------------------------------------------------------------

PROPS = {"controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9878",
         "controllerDLegerSelfId": "n0", "bindAddress": "127.0.0.1"}
GROUP = dict(cluster_name="c", broker_name="b")


def _controller(**kwargs):
    processor = ControllerRequestProcessor(ControllerConfiguration.from_properties(PROPS),
                                           **kwargs)
    for broker_id in (1, 2):
        addr = f"127.0.0.1:{10000 + broker_id}"
        request = RemotingCommand.request(1013, H.ApplyBrokerIdRequestHeader(
            applied_broker_id=broker_id, register_check_code=f"{addr};1", **GROUP
        ).to_ext_fields(), opaque=1)
        assert processor.process(request, CH, 1000).code == 0
        request = RemotingCommand.request(904, H.BrokerHeartbeatRequestHeader(
            broker_addr=addr, broker_id=broker_id, epoch=0, max_offset=broker_id,
            heartbeat_timeout_mills=10_000, **GROUP).to_ext_fields(), oneway=True)
        processor.process(request, CH, 1000)
    request = RemotingCommand.request(1002, H.ElectMasterRequestHeader(
        broker_id=1, designate_elect=False, **GROUP).to_ext_fields(), opaque=2)
    assert processor.process(request, CH, 1000).code == 0
    return processor


def _alter(body):
    header = H.AlterSyncStateSetRequestHeader(broker_name="b", master_broker_id=1,
                                              master_epoch=1, invoke_time=0)
    return RemotingCommand.request(1001, header.to_ext_fields(), body, opaque=7)


CONTROLLER = [
    ("ALTER_SYNC_STATE_SET", lambda pad: _alter(b"{syncStateSet:[1,2],syncStateSetEpoch:1" + pad
                                                + b"}")),
    ("GET_SYNC_STATE_DATA", lambda pad: RemotingCommand.request(1006, None, b"['b'" + pad + b"]",
                                                                opaque=7)),
    ("UPDATE_CONTROLLER_CONFIG", lambda pad: RemotingCommand.request(
        1009, None, b"electMasterMaxRetryCount=5\n" + pad.replace(b" ", b"\n"), opaque=7)),
]


@pytest.mark.parametrize("name,request_of", CONTROLLER, ids=[c[0] for c in CONTROLLER])
def test_a_controller_body_past_the_bound_is_decoded_by_a_pending(name, request_of):
    expected = _controller().process(request_of(b""), CH, 2000)
    processor = _controller()
    pending = processor.process(request_of(PAD), CH, 2000, offload=True)
    assert isinstance(pending, Pending) and pending.lane == CPU
    assert pending.budget.spent == 0
    assert _same(pending.run(), expected), name


def test_a_controller_change_decoded_off_the_reactor_then_waits_for_its_write():
    writes = []
    processor = _controller(persist=lambda events: FileWrite(
        "state", lambda: None, lambda _: writes.append(len(events))))
    writes.clear()                   # the set-up's
    pending = processor.process(_alter(b"{syncStateSet:[1,2],syncStateSetEpoch:1" + PAD + b"}"),
                                CH, 2000, offload=True)
    write = pending.step()
    assert (write.lane, writes) == (DISK, [])
    answer = write.step()
    assert (answer.code, writes) == (RC.SUCCESS, [1])


def test_the_transport_runs_the_decode_then_the_write_on_their_pools():
    """A controller port with both pools: the connection waits for the decode, then for the
    write, then is answered (and its next request after it)."""
    from test_namesrv_pending import on_a_thread
    writes, decode_pool, write_pool = [], ManualPool(), ManualPool()
    processor = _controller(persist=lambda events: FileWrite(
        "state", lambda: None, lambda _: writes.append(1)))
    writes.clear()                   # the set-up's
    factory = RemotingServerFactory(processor, clock=task.Clock(), tls_mode=TlsMode.DISABLED,
                                    decode_pool=decode_pool, write_pool=write_pool)
    proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 9878))
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
    proto.makeConnection(transport)
    metadata = RemotingCommand.request(1005, None, opaque=8)
    proto.dataReceived(_alter(b"{syncStateSet:[1,2],syncStateSetEpoch:1" + PAD + b"}").encode()
                       + metadata.encode())
    assert (len(decode_pool.waiting), len(write_pool.waiting), transport.value()) == (1, 0, b"")
    decode_pool.run_next()
    assert (len(write_pool.waiting), writes, transport.value()) == (1, [], b"")
    work, d = write_pool.waiting.pop(0)
    d.callback(on_a_thread(work))
    first, second = answers(transport)
    assert [(a.opaque, a.code) for a in (first, second)] == [(7, RC.SUCCESS), (8, RC.SUCCESS)]
    assert writes == [1]


def test_no_guard_reads_a_big_config_body_on_the_reactor(tmp_path, monkeypatch):
    """Access control refuses an UPDATE_NAMESRV_CONFIG naming its own keys; it parsed the body
    itself, on the reactor, before the handler (16 MiB of properties: 17 s). It now asks the
    properties the handler decoded."""
    import rocketpy.namesrv.javaprops as javaprops
    parsed = []
    real = javaprops.parse_properties
    monkeypatch.setattr(javaprops, "parse_properties",
                        lambda text, budget=None: parsed.append(1) or real(text, budget))
    proc = make(tmp_path, PROFILE_53)
    body = b"aclEnable=false\n" + b"#" * INLINE_BODY_MAX + b"\n"
    pending = proc.process(_request(318, None, body), CH, 0, offload=True)
    assert isinstance(pending, Pending) and parsed == []
    answer = pending.run()
    assert (answer.code, parsed) == (RC.NO_PERMISSION, [1])
    assert "at runtime" in answer.remark
    assert proc.access_control.counters["refused_config_key"] == 1
