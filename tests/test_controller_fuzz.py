"""Bad input on the controller port: any code, any header values, any body, from any number of
channels in any order, is answered (or dropped, when oneway) and never raises, nor makes a handler
raise anything but the codec's errors (a handler bug is counted: none may be); the state's
invariants hold afterwards; and no request costs far more per byte of request and answer than
the genuine controller requests of the captures (counted, never timed: tests/costmeter.py)."""
import random

from hypothesis import HealthCheck, given, settings, strategies as st

import controller_replay
import costmeter
import fuzzharness as fh
from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.namesrv import Channel
from rocketpy.remoting import RemotingCommand, decode_frame
from rocketpy.remoting.codes import ResponseCode as RC

PROPS = {"controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9878",
         "controllerDLegerSelfId": "n0"}
CODES = st.sampled_from([904, 1001, 1002, 1003, 1004, 1005, 1006, 1009, 1010, 1011, 1012, 1013,
                         105, 0, -1, 65535])
KEYS = st.sampled_from(["clusterName", "brokerName", "brokerId", "appliedBrokerId",
                        "registerCheckCode", "brokerAddress", "masterBrokerId", "masterEpoch",
                        "designateElect", "brokerControllerIdsToClean", "isCleanLivingBroker",
                        "epoch", "maxOffset", "heartbeatTimeoutMills", "electionPriority",
                        "brokerAddr", "invokeTime"])
VALUES = st.one_of(st.sampled_from(["1", "2", "-1", "0", "c", "b", "true", "false", "", "1;2",
                                    "x;1", "127.0.0.1:1;1", "99999999999999999999", ";",
                                    "0" * 5000 + "1", "9" * 5000, "1;" + "9" * 5000]),
                   st.text(max_size=8))
BODIES = st.one_of(st.none(), st.sampled_from([
    b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}', b'{"syncStateSet":[1],"syncStateSetEpoch":0}',
    b'["b"]', b"[]", b"{", b'{"syncStateSet":"x"}', b"enableElectUncleanMaster=true\n",
    b"\xff\xfe", b"[1,2]"]), st.binary(max_size=16),
    # issue 31: a big exponent or digit run, strict or in fastjson's lenient form
    st.sampled_from(fh.HOSTILE_NUMBERS).map(lambda n: b"{syncStateSet:[" + n + b"],syncStateSetEpoch:1}"),
    st.sampled_from(fh.HOSTILE_NUMBERS).map(lambda n: b'{"syncStateSet":[1],"syncStateSetEpoch":' + n + b"}"),
    st.sampled_from(fh.HOSTILE_NUMBERS).map(lambda n: b"[" + n + b"]"))
REQUESTS = st.tuples(CODES, st.dictionaries(KEYS, VALUES, max_size=6), BODIES,
                     st.integers(1, 3), st.booleans(), st.integers(0, 30000))


def _answered_size(processor, frame, now=1):
    """Decode and answer one request frame; the bytes of request and answer."""
    answer = processor.process(decode_frame(frame), Channel(1, "127.0.0.1:1"), now)
    return len(frame) + (len(answer.encode()) if answer is not None else 0)


def _contract():
    """Calibrated on the genuine controller requests of the rmq53-controller captures."""
    if not _CONTRACT:
        processor = ControllerRequestProcessor(ControllerConfiguration.from_properties(PROPS))
        genuine = [f for name in controller_replay.CAPTURES
                   for _, to_server, _, f in controller_replay.controller_frames(name)
                   if to_server and not decode_frame(f).flag & 1]
        assert len(genuine) > 20
        with costmeter.reference():
            _CONTRACT.append(costmeter.CostContract(     # a request's fixed costs (a refusal's
                "controller", [(f, lambda d: _answered_size(processor, d)) for f in genuine],
                floor=64))                               # log line) within 64 bytes' worth
    return _CONTRACT[0]


_CONTRACT = []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(REQUESTS, max_size=40), st.lists(st.integers(1, 3), max_size=3))
def test_any_request_answered_never_raises(requests, closes):
    processor = ControllerRequestProcessor(ControllerConfiguration.from_properties(PROPS))
    contract = _contract()
    now = 0
    for code, ext, body, channel, oneway, step in requests:
        now += step
        request = RemotingCommand.request(code, ext or None, body, opaque=5, oneway=oneway)
        answers = []
        with costmeter.reference():       # decoded from its bytes, as the port reads it
            frame = request.encode()
            cost, error = costmeter.measure(lambda: answers.append(processor.process(
                decode_frame(frame), Channel(channel, "127.0.0.1:1"), now)))
        assert error is None, error
        answer = answers[0]
        contract.check(frame, cost, len(frame) + (len(answer.encode()) if answer else 0))
        if oneway:
            assert answer is None
        else:
            assert answer.opaque == 5 and answer.flag & 1
            assert answer.code != RC.SYSTEM_ERROR or answer.remark
        processor.scan_not_active_broker(now)
        processor.scan_inactive_master(now)
    for channel in closes:
        processor.on_channel_close(Channel(channel, "127.0.0.1:1"), now)
    for state in processor.replicas.sync_state_info_table.values():
        assert state.master_broker_id is None or state.master_broker_id in state.sync_state_set
    assert processor.handler_failures == {}
