"""rocketpy-admin's controller commands send what genuine mqadmin 5.3.3 sent
(``rmq53-controller-mqadmin``) and print what it prints.

Each command runs in-process (``MemoryReactorClock``) against a controller peer that answers
each request with the answer the genuine controller gave to the request of that code in the
recorded command's connection. The requests must equal the recorded ones: code, flag, version,
language, serialisation, body and every header field in the recorded order (5.3.3's signing
hook creates a ``HashMap(256)`` before the header's fields go in), in the same sequence
(metadata first for the commands that look for the leader). Two values are volatile:
``invokeTime`` (the wall clock) and so the ``Signature`` over it; the keys are mqadmin's
default ``rocketmq2``/``12345678``.
"""
import io

import pytest
from twisted.internet.testing import MemoryReactorClock

from clientsim import Peer, accept, drive
from controller_replay import controller_streams
from rocketpy.admin.cli import run
from rocketpy.remoting import RemotingCommand, bodies as B, decode_frame
from rocketpy.remoting.codes import RequestCode
from rocketpy.remoting.layout import request_without_opaque

CONTROLLER = "127.0.0.1:59878"
KEYS = ["--accessKey", "rocketmq2", "--secretKey", "12345678"]
VOLATILE = {"invokeTime", "Signature"}
SYNC_STATE_DATA = RequestCode.CONTROLLER_GET_SYNC_STATE_DATA

#: controller-port connection of the capture -> the command line that made it
COMMANDS = {
    2: ["getControllerMetaData", "-a", CONTROLLER],
    3: ["getControllerConfig", "-a", CONTROLLER],
    4: ["updateControllerConfig", "-a", CONTROLLER, "-k", "enableElectUncleanMaster", "-v", "false"],
    5: ["getSyncStateSet", "-a", CONTROLLER, "-b", "broker-a"],
    6: ["electMaster", "-a", CONTROLLER, "-b", "1", "-bn", "broker-a", "-c", "DefaultCluster"],
    10: ["cleanBrokerMetadata", "-a", CONTROLLER, "-b", "2", "-bn", "broker-a", "-c", "DefaultCluster"],
    11: ["cleanBrokerMetadata", "-a", CONTROLLER, "-bn", "broker-a", "-c", "DefaultCluster"],
}


def _recorded(index):
    stream = next(s for s in controller_streams("rmq53-controller-mqadmin") if s.index == index)
    requests = [decode_frame(f) for _, f in stream.to_server]
    answers = {decode_frame(f).opaque: decode_frame(f) for _, f in stream.to_client}
    return [(r, answers.get(r.opaque)) for r in requests]


def _run(argv, exchanges):
    by_code = {}
    for request, answer in exchanges:
        by_code.setdefault(request.code, []).append(answer)

    def answer(request):
        recorded = by_code[request.code].pop(0)
        return RemotingCommand(recorded.code, recorded.language, recorded.version, 0, 0,
                               recorded.remark, recorded.ext_fields, recorded.body,
                               recorded.serialize_type)

    peer = Peer(auto=answer)
    reactor = MemoryReactorClock()
    out, err = io.StringIO(), io.StringIO()
    d = run(argv + KEYS, reactor=reactor, stdout=out, stderr=err)
    drive(reactor, d, lambda host, port: peer if f"{host}:{port}" == CONTROLLER else None)
    status = []
    d.addBoth(status.append)
    return status[0], out.getvalue(), err.getvalue(), peer.requests


def _comparable(request):
    ext = {k: v for k, v in (request.ext_fields or {}).items() if k not in VOLATILE}
    return (request.code, request.flag, request.version, request.language,
            request.serialize_type, request.body, ext, list(request.ext_fields or {}))


@pytest.mark.parametrize("index", sorted(COMMANDS))
def test_requests_equal_genuine_mqadmin(index):
    exchanges = _recorded(index)
    status, out, err, ours = _run(COMMANDS[index], exchanges)
    assert [_comparable(r) for r in ours] == [_comparable(r) for r, _ in exchanges], err
    failed = any(a is not None and a.code != 0 for _, a in exchanges)
    assert status == (1 if failed else 0), (out, err)


def test_printed_as_mqadmin():
    _, out, _, _ = _run(COMMANDS[2], _recorded(2))
    assert out == ("\n#ControllerGroup\tgroup1\n#ControllerLeaderId\tn0"
                   "\n#ControllerLeaderAddress\t127.0.0.1:59878\n#Peer:\tn0:127.0.0.1:59878\n")
    _, out, _, _ = _run(COMMANDS[6], _recorded(6))
    # mqadmin reads the answer body as a BrokerMemberGroup, so it lists no members
    assert out == ("\n#ClusterName\tDefaultCluster\n#BrokerName\tbroker-a"
                   "\n#BrokerMasterAddr\t127.0.0.1:50911\n#MasterEpoch\t3\n#SyncStateSetEpoch\t5\n")
    _, out, _, _ = _run(COMMANDS[5], _recorded(5))
    assert out == (
        "\n#brokerName\tbroker-a\n#MasterBrokerId\t2\n#MasterAddr\t127.0.0.1:50921\n"
        "#MasterEpoch\t2\n#SyncStateSetEpoch\t4\n#SyncStateSetNums\t2\n"
        "\nInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=1, "
        "brokerAddress='127.0.0.1:50911', alive=true}\n"
        "\nInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=2, "
        "brokerAddress='127.0.0.1:50921', alive=true}\n")
    status, out, err, _ = _run(COMMANDS[10], _recorded(10))
    assert status == 1 and "2009" in err and "is still alive" in err
    _, out, _, _ = _run(COMMANDS[4], _recorded(4))
    assert out == ("update controller config success![127.0.0.1:59878]\n"
                   "enableElectUncleanMaster : false\n")


@pytest.mark.parametrize("name", ["broker-a", "b\x01\x7f\u2028\"\\", "\u00e9\u4e2d",
                                  "bad\udcff"])
def test_sync_state_body_is_the_codecs(name):
    """getSyncStateSet's broker-name list is the codec's encoding (fastjson's escaping: upper-case
    \\u001F, DEL and U+2028 escaped, a lone surrogate from a non-UTF-8 argument as '?'), and the
    genuine body reads and writes back identically."""
    genuine = [r.body for r, _ in _recorded(5) if r.code == SYNC_STATE_DATA]
    assert genuine == [b'["broker-a"]']
    assert B.encode_broker_name_list(B.broker_name_list(genuine[0])) == genuine[0]
    exchanges = _recorded(5)
    status, out, err, ours = _run(["getSyncStateSet", "-a", CONTROLLER, "-b", name], exchanges)
    sent = [r.body for r in ours if r.code == SYNC_STATE_DATA]
    assert sent == [B.encode_broker_name_list([name])], err
    assert B.broker_name_list(sent[0]) == [name.replace("\udcff", "?")]


def test_get_broker_epoch_asks_the_nameserver_then_each_broker():
    """The NameServer request equals the recorded one (the brokers' answers were not kept:
    a broker peer answers here with an EpochEntryCache)."""
    import replay
    recorded = next(f for c in replay.conversations(
        replay.PCAP_DIR / "rmq53-controller-mqadmin.pcap") if c.server[1] == 59876
        for _, f in c.requests if decode_frame(f).code == 106)
    cluster = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:50911"},'
               b'"brokerName":"broker-a","cluster":"DefaultCluster"}},'
               b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')
    epochs = (b'{"brokerId":1,"brokerName":"broker-a","clusterName":"DefaultCluster",'
              b'"epochList":[{"endOffset":100,"epoch":1,"startOffset":0},'
              b'{"endOffset":9223372036854775807,"epoch":3,"startOffset":100}],"maxOffset":250}')
    namesrv = Peer(auto=lambda r: RemotingCommand(0, body=cluster, version=479))
    broker = Peer(auto=lambda r: RemotingCommand(0, body=epochs, version=479))
    reactor = MemoryReactorClock()
    out, err = io.StringIO(), io.StringIO()
    d = run(["getBrokerEpoch", "-b", "broker-a", "-n", "127.0.0.1:59876"] + KEYS, reactor=reactor,
            stdout=out, stderr=err)
    drive(reactor, d, lambda host, port: {59876: namesrv, 50911: broker}.get(port))
    # no header, so no clock in it: the signed request is byte-identical, opaque aside
    assert request_without_opaque(namesrv.frames[0])[0] == request_without_opaque(recorded)[0]
    assert [r.code for r in broker.requests] == [1007]
    assert out.getvalue() == (
        "\n#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t127.0.0.1:50911"
        "\n#brokerId\t1\n#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=100}"
        "\n#Epoch: EpochEntry{epoch=3, startOffset=100, endOffset=250}\n"), err.getvalue()


def test_interval_repeats_until_interrupted():
    """``getSyncStateSet -i 2``: the metadata and the sync state data again every 2 s."""
    exchanges = _recorded(5)
    answers = {r.code: a for r, a in exchanges}
    peer = Peer(auto=lambda r: RemotingCommand(answers[r.code].code, ext_fields=answers[
        r.code].ext_fields, body=answers[r.code].body, version=479))
    reactor = MemoryReactorClock()
    out, err = io.StringIO(), io.StringIO()
    d = run(COMMANDS[5] + ["-i", "2"] + KEYS, reactor=reactor, stdout=out, stderr=err)
    _, pump = accept(reactor, peer)
    for _ in range(4):
        for _ in range(20):
            pump.pump()
        reactor.advance(2)
    assert [r.code for r in peer.requests] == [1005, 1006] * 4
    assert out.getvalue().count("#brokerName\tbroker-a") == 4 and not d.called
