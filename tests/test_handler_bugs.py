"""Handler bugs are bugs (issue 32 part 2): only the codec's own errors (RemotingCodecError and its
kin) are a request's fault, answered with Java's remark and logged as one line; anything else a
handler raises (TypeError, KeyError, AttributeError...) is answered the same but logged with its
traceback and counted (``rocketpy_handler_failures_total``), on the NameServer port and the
controller port."""
import logging

from processorutil import CH, call, make
from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.controller.replicas import NO_CHECK_CODE_REMARK
from rocketpy.remoting import RemotingCommand
from rocketpy.remoting.codes import ResponseCode as RC

PROPS = {"controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9878",
         "controllerDLegerSelfId": "n0"}


def _bug(*args):
    raise KeyError("a handler bug")


def test_a_namesrv_handler_bug_is_logged_with_its_traceback_and_counted(tmp_path, caplog):
    proc = make(tmp_path)
    proc.handlers[106] = _bug
    with caplog.at_level(logging.WARNING, logger="rocketpy.namesrv"):
        answer = call(proc, 106)
        fine = call(proc, 101, {"namespace": "n", "key": "k"})
        bad = call(proc, 217, {"topic": "T"}, body=b"{")                        # bad input
    assert (answer.code, answer.remark) == (RC.SYSTEM_ERROR, "builtins.KeyError: 'a handler bug'")
    assert proc.handler_failures == {106: 1}
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info[0] is KeyError
    assert fine.code == RC.QUERY_NOT_FOUND
    assert bad.code == RC.SYSTEM_ERROR and bad.remark.startswith("com.alibaba.fastjson")
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warned and all(r.exc_info is None for r in warned)      # bad input: one line


def test_a_controller_handler_bug_is_logged_with_its_traceback_and_counted(caplog):
    processor = ControllerRequestProcessor(ControllerConfiguration.from_properties(PROPS))
    processor.handlers[1005] = _bug
    with caplog.at_level(logging.WARNING, logger="rocketpy.controller"):
        answer = processor.process(RemotingCommand.request(1005, opaque=3), CH, 1000)
        bad = processor.process(RemotingCommand.request(1013, {"appliedBrokerId": "x"}, opaque=4),
                                CH, 1000)
    assert (answer.code, answer.remark) == (RC.SYSTEM_ERROR, "builtins.KeyError: 'a handler bug'")
    assert bad.code == RC.SYSTEM_ERROR and "appliedBrokerId" in bad.remark   # the codec's error
    assert processor.handler_failures == {1005: 1}
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info[0] is KeyError


def test_apply_broker_id_without_a_check_code_is_answered_as_java_not_as_a_bug():
    """It raised AttributeError (``None.split``), answered as if the input were bad."""
    processor = ControllerRequestProcessor(ControllerConfiguration.from_properties(PROPS))
    ext = {"clusterName": "c", "brokerName": "b", "appliedBrokerId": "1"}
    answer = processor.process(RemotingCommand.request(1013, ext, opaque=9), CH, 1000)
    assert (answer.code, answer.remark) == (RC.SYSTEM_ERROR, NO_CHECK_CODE_REMARK)
    assert processor.handler_failures == {} and not processor.replicas.replica_info_table
    ext["registerCheckCode"] = "127.0.0.1:30911;1"
    assert processor.process(RemotingCommand.request(1013, ext, opaque=9), CH, 1000).code == 0
    assert "b" in processor.replicas.replica_info_table


def test_handler_failures_are_exported(tmp_path):
    from rocketpy.service.guardmetrics import _handler_failures
    proc = make(tmp_path)
    proc.handler_failures[105] = 2
    family = _handler_failures((("namesrv", proc), ("controller", None)))
    assert family.name == "rocketpy_handler_failures"
    counts = {s.labels["request_code"]: s.value for s in family.samples}
    assert len(counts) == len(proc.handlers) and {s.labels["server"] for s in family.samples} == {
        "namesrv"}
    assert counts["GET_ROUTEINFO_BY_TOPIC"] == 2 and counts["REGISTER_BROKER"] == 0
