"""Replay of the ``rmq53-controller-*`` captures' controller traffic against rocketpy's
controller: every recorded answer and every NOTIFY_BROKER_ROLE_CHANGED push must be equal.

The three captures are one session of one 5.3.3 NameServer (the brokers' connections keep their
ports from one file to the next): ``sc-elect`` starts it fresh, ``failover`` kills the master,
``mqadmin`` runs the admin commands. They are replayed in that order against one controller.
Between two files the brokers kept sending heartbeats that were not recorded, so each later
file starts by refreshing every broker's liveness with its first recorded heartbeat; between
``failover`` and ``mqadmin`` the killed broker 1 came back, registered again and joined the
sync state set unrecorded (``mqadmin`` starts with master 2, sync state set [1, 2] at epoch 4):
:func:`_rejoin` makes those two requests, and they must succeed.

Volatile fields, left out of the comparison: GET_CONTROLLER_CONFIG's ``jraftConfig``, which Java
prints as the identity of an object (``JraftConfig@5990e6c5``) and rocketpy leaves out; the
paths (``configStorePath``, ``controllerStorePath``, ``rocketmqHome``) are given the recorded
values through the config, as a Java controller would read them from its file.
"""
import pytest

from controller_replay import CAPTURES, controller_events
from replay import compare
from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.namesrv import Channel
from rocketpy.namesrv.javaprops import parse_properties
from rocketpy.remoting import RemotingCommand, headers as H

#: the controller settings of the recorded NameServer (fixtures README), and its paths
PROPS = {
    "listenPort": "59876", "bindAddress": "127.0.0.1", "enableControllerInNamesrv": "true",
    "controllerDLegerGroup": "group1", "controllerDLegerPeers": "n0-127.0.0.1:59878",
    "controllerDLegerSelfId": "n0", "rocketmqHome": "/opt/rocket/dist53",
    "configStorePath": "/opt/rocket/run/ctl53-ns/controller/controller.properties",
    "controllerStorePath": "/opt/rocket/run/ctl53-ns/DLedgerController",
}
VOLATILE_CONFIG_KEYS = {"jraftConfig"}


def _channel(stream):
    return Channel(stream.client[1], f"{stream.client[0]}:{stream.client[1]}")


def _comparable(request, answer):
    if answer is None or request.code != 1010 or answer.body is None:
        return answer
    props = parse_properties(answer.body.decode())
    text = "".join(f"{k}={v}\n" for k, v in props.items() if k not in VOLATILE_CONFIG_KEYS)
    return RemotingCommand(answer.code, answer.language, answer.version, answer.opaque,
                           answer.flag, answer.remark, answer.ext_fields, text.encode(),
                           answer.serialize_type)


def _refresh_heartbeats(processor, events, now_ms):
    """The first recorded heartbeat of each connection, at the file's start."""
    seen = set()
    for event in events:
        if event.kind == "request" and event.request.code == 904 and event.stream.index not in seen:
            seen.add(event.stream.index)
            processor.process(event.request, _channel(event.stream), now_ms)


def _rejoin(processor, now_ms):
    """What broker 1 and master 2 did, unrecorded, between ``failover`` and ``mqadmin``."""
    register = RemotingCommand.request(1003, H.RegisterBrokerToControllerRequestHeader(
        cluster_name="DefaultCluster", broker_name="broker-a", broker_id=1,
        broker_address="127.0.0.1:50911", invoke_time=now_ms).to_ext_fields())
    alter = RemotingCommand.request(1001, H.AlterSyncStateSetRequestHeader(
        broker_name="broker-a", master_broker_id=2, master_epoch=2,
        invoke_time=now_ms).to_ext_fields(), b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}')
    for request in (register, alter):
        answer = processor.process(request, Channel(0, "unrecorded"), now_ms)
        assert answer.code == 0, answer


class Session:
    def __init__(self):
        self.pushes = []
        self.processor = ControllerRequestProcessor(
            ControllerConfiguration.from_properties(PROPS),
            notify=lambda address, command: self.pushes.append((address, command)))
        self.answered = 0
        self.exact = 0             # answers whose bytes equal Java's
        self.pushed = 0
        self.mismatches = []

    def replay(self, name):
        events = controller_events(name)
        processor = self.processor
        if name != CAPTURES[0]:
            start = int(events[0].ts * 1000)
            _refresh_heartbeats(processor, events, start)
            if name == "rmq53-controller-mqadmin":
                _rejoin(processor, start)
        for event in events:
            now_ms = int(event.ts * 1000)
            processor.scan_not_active_broker(now_ms)
            processor.scan_inactive_master(now_ms)
            if event.kind == "close":
                processor.on_channel_close(_channel(event.stream), now_ms)
            elif event.kind == "push":
                self._check_push(name, event)
            else:
                actual = processor.process(event.request, _channel(event.stream), now_ms)
                if event.expected is None:
                    if actual is not None:
                        self.mismatches.append((name, event.request, ["rocketpy answered"]))
                    continue
                self.answered += 1
                self.exact += actual is not None and actual.encode() == event.expected_frame
                diffs = compare(event.request, _comparable(event.request, event.expected),
                                _comparable(event.request, actual))
                if diffs:
                    self.mismatches.append((name, event.request, diffs))
        assert not self.pushes, f"{name}: pushes Java did not send: {self.pushes}"

    def _check_push(self, name, event):
        """A recorded push must be one rocketpy sent to the same broker (any order within one
        election: Java sends them from a thread pool)."""
        address = f"127.0.0.1:{event.stream.server[1]}"
        for i, (to, command) in enumerate(self.pushes):
            if to == address:
                del self.pushes[i]
                diffs = []
                expected = event.request
                for field in ("code", "flag", "version", "language", "ext_fields", "body",
                              "serialize_type", "remark"):
                    if getattr(command, field) != getattr(expected, field):
                        diffs.append(f"{field}: Java {getattr(expected, field)!r}, "
                                     f"rocketpy {getattr(command, field)!r}")
                if list(command.ext_fields) != list(expected.ext_fields):
                    diffs.append("extFields order")
                if diffs:
                    self.mismatches.append((name, expected, diffs))
                self.pushed += 1
                return
        self.mismatches.append((name, event.request, [f"rocketpy sent no push to {address}"]))


@pytest.fixture(scope="module")
def session():
    session = Session()
    for name in CAPTURES:
        session.replay(name)
    return session


def test_every_recorded_answer_equal(session):
    assert session.mismatches == []
    assert session.answered == 120   # every answer the three files hold
    # byte for byte, all but GET_CONTROLLER_CONFIG's (its jraftConfig is an object identity)
    assert session.exact == 119


def test_every_recorded_push_sent(session):
    """failover: one push to the new master; mqadmin's electMaster: one to each broker."""
    assert session.pushed == 3


def test_failover_elects_the_live_replica():
    """The master's connection closing is enough: broker 2 is master at epoch 2 before any
    heartbeat times out (the capture's push comes 38 ms after the close)."""
    session = Session()
    session.replay(CAPTURES[0])
    events = controller_events(CAPTURES[1])
    processor = session.processor
    _refresh_heartbeats(processor, events, int(events[0].ts * 1000))
    close = next(e for e in events if e.kind == "close")
    now_ms = int(close.ts * 1000)
    processor.on_channel_close(_channel(close.stream), now_ms)
    state = processor.replicas.sync_state_info_table["broker-a"]
    assert (state.master_broker_id, state.master_epoch, sorted(state.sync_state_set),
            state.sync_state_set_epoch) == (2, 2, [2], 3)
    assert [to for to, _ in session.pushes] == ["127.0.0.1:50921"]


class ControllerRole:
    """The controller as a role of ``replay.replay_capture`` (the suite's plug point): the same
    three calls as its NameServer role."""

    def __init__(self, processor):
        self.processor = processor

    def tick(self, now_ms):
        self.processor.scan_not_active_broker(now_ms)
        self.processor.scan_inactive_master(now_ms)

    def close(self, channel, now_ms):
        self.processor.on_channel_close(channel, now_ms)

    def process(self, request, channel, now_ms):
        return self.processor.process(request, channel, now_ms)


def test_self_contained_capture_replays_with_the_nameserver_on_one_clock(tmp_path):
    """``rmq53-controller-sc-elect`` whole: the NameServer's and the controller's connections in
    the recorded order, every answer of both equal, byte for byte."""
    import replay
    path = replay.PCAP_DIR / "rmq53-controller-sc-elect.pcap"
    processor = ControllerRequestProcessor(ControllerConfiguration.from_properties(PROPS))
    namesrv = replay.NamesrvRole(replay.build_processor(path, tmp_path, "5.3"))
    result = replay.replay_capture(path, tmp_path, roles={"namesrv": namesrv,
                                                          "controller": ControllerRole(processor)})
    assert result.mismatches == []
    # 37 NameServer answers (103 x10, 106 x27) and 55 controller answers, every one byte-identical
    assert result.answered == result.exact_frames == 92
