"""rocketpy-admin sends what genuine mqadmin sent: every NameServer request of the
``rmq49-mqadmin-*`` captures (and, with ``--remotingVersion 5.0.0``, of ``rmq50-mqadmin-*``) is
byte-identical to one of ours, opaque aside, and we send no other.

The command runs in-process on a ``MemoryReactorClock``; its NameServer is a peer that answers
each request with the answer the genuine Java NameServer gave to the identical genuine request
(an unknown request gets SYSTEM_ERROR, so a wrong byte fails the command as well as the
comparison). Brokers (clusterList's statistics, topicList -c's consumer groups, deleteTopic's
first half) are a peer answering like a broker; those requests are not in the captures.

mqadmin's client instance also asks the route of TBW102 once when it starts (its internal
producer's default topic, opaque 0 or 1); that request is not the command's and rocketpy-admin
does not send it, so it is left out of the genuine side.
"""
import io

import pytest
from twisted.internet.testing import MemoryReactorClock

import golden
from clientsim import Peer, drive
from rocketpy.admin.cli import run
from rocketpy.remoting import RemotingCommand, decode_frame
from rocketpy.remoting.layout import request_without_opaque

NAMESRV = "127.0.0.1:39876"
KEYS = ["--accessKey", "rocketmq2", "--secretKey", "12345678"]

#: capture suffix -> the command line that made it
COMMANDS = {
    "addWritePerm": ["addWritePerm", "-b", "broker-a"],
    "wipeWritePerm": ["wipeWritePerm", "-b", "broker-a"],
    "clusterList": ["clusterList"],
    "deleteKvConfig": ["deleteKvConfig", "-s", "anchor_ns", "-k", "key1"],
    "updateKvConfig": ["updateKvConfig", "-s", "anchor_ns", "-k", "key1", "-v", "value1"],
    "deleteTopic": ["deleteTopic", "-t", "TopicA", "-c", "DefaultCluster"],
    "getNamesrvConfig": ["getNamesrvConfig"],
    "updateNamesrvConfig": ["updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"],
    "rocketmq-serialize-topicRoute": ["topicRoute", "-t", "TBW102"],
    "topicRoute": ["topicRoute", "-t", "TopicA"],
    "topicRoute-notexist": ["topicRoute", "-t", "NoSuchTopic_anchor"],
    "topicClusterList": ["topicClusterList", "-t", "TopicA"],
    "topicList": ["topicList"],
    "topicList-c": ["topicList", "-c"],
    "updateOrderConf-put": ["updateOrderConf", "-t", "TopicA", "-m", "put", "-v", "broker-a:4"],
    "updateOrderConf-get": ["updateOrderConf", "-t", "TopicA", "-m", "get"],
    "updateOrderConf-delete": ["updateOrderConf", "-t", "TopicA", "-m", "delete"],
}
CAPTURES = [f"rmq{v}-mqadmin-{suffix}" for v in ("49", "50") for suffix in COMMANDS]


def genuine(capture):
    """``[(request frame, answer frame)]`` mqadmin exchanged with the NameServer, without the
    client instance's first TBW102 route update."""
    out = []
    for ex in golden.capture_exchanges(capture):
        naive = golden.naive(ex.request.data)
        if not ex.request.to_server or "AccessKey" not in (naive.ext_fields or {}):
            continue
        if naive.code == 105 and naive.ext_fields.get("topic") == "TBW102" and naive.opaque in (0, 1) \
                and not capture.endswith("rocketmq-serialize-topicRoute"):
            continue
        out.append((ex.request.data, ex.response.data))
    if capture.endswith("rocketmq-serialize-topicRoute"):  # both ask TBW102: drop the first
        out = out[1:]
    return out


def key(frame):
    return request_without_opaque(frame)[0]


class ReplayNameServer(Peer):
    """Answers each request with the genuine answer to the identical genuine request."""

    def __init__(self, exchanges):
        super().__init__()
        self.answers = {key(req): decode_frame(ans) for req, ans in exchanges}

    def dataReceived(self, data):
        for frame in self.splitter.feed(data):
            self.frames.append(frame)
            request = decode_frame(frame)
            answer = self.answers.get(key(frame))
            if answer is None:
                answer = RemotingCommand(code=1, remark="not a request mqadmin sent")
            self.answer(request, RemotingCommand(**{f: getattr(answer, f) for f in (
                "code", "language", "version", "remark", "ext_fields", "body", "serialize_type")}))


class FakeBroker(Peer):
    """A broker's answers to mqadmin's three broker requests."""

    def __init__(self):
        super().__init__(auto=self._answer)

    @staticmethod
    def _answer(request):
        if request.code == 28:
            return request.create_response(0, body=b'{"table":{"brokerVersionDesc":"V4_9_8",'
                                                    b'"putTps":"1.5 1.5 1.5","getTransferedTps":"2.0"}}')
        if request.code == 300:
            return request.create_response(0, body=b'{"groupList":["please_rename_unique_group_name_4"]}')
        return request.create_response(0)


def run_admin(argv, peer_for, env=None, monkeypatch=None):
    reactor = MemoryReactorClock()
    out, err = io.StringIO(), io.StringIO()
    d = run(argv, reactor=reactor, stdout=out, stderr=err)
    drive(reactor, d, peer_for)
    status = []
    d.addBoth(status.append)
    return status[0], out.getvalue(), err.getvalue()


@pytest.mark.parametrize("capture", CAPTURES)
def test_requests_identical_to_genuine_mqadmin(capture, monkeypatch):
    exchanges = genuine(capture)
    assert exchanges, capture
    suffix = capture.split("-mqadmin-", 1)[1]
    argv = COMMANDS[suffix] + ["-n", NAMESRV] + KEYS
    if capture.startswith("rmq50"):
        argv += ["--remotingVersion", "5.0.0"]
    if "rocketmq-serialize" in capture:
        monkeypatch.setenv("ROCKETMQ_SERIALIZE_TYPE", "ROCKETMQ")
    namesrv = ReplayNameServer(exchanges)
    brokers = []

    def peer_for(host, port):
        if f"{host}:{port}" == NAMESRV:
            return namesrv
        brokers.append(FakeBroker())
        return brokers[-1]
    status, out, err = run_admin(argv, peer_for)
    ours = sorted(key(f) for f in namesrv.frames)
    theirs = sorted(key(req) for req, _ in exchanges)
    assert ours == theirs, (capture, err)
    expected_status = 1 if suffix == "topicRoute-notexist" else 0
    assert status == expected_status, (capture, out, err)
