"""Handler bugs are bugs (issue 32 part 2): only the codec's own errors (RemotingCodecError and its
kin) are a request's fault, answered with Java's remark and logged as one line; anything else a
handler raises (TypeError, KeyError, AttributeError...) is answered the same but logged with its
traceback and counted (``rocketpy_handler_failures_total``), on the NameServer port and the
controller port."""
import errno
import logging

from processorutil import CH, call, make
from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.controller.replicas import NO_CHECK_CODE_REMARK
from rocketpy.controller.replicated import NotCommitted
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


def test_a_bug_in_writing_a_file_is_a_handler_bug_not_a_full_disk(tmp_path, caplog):
    """A change answered once its file is written (UPDATE_NAMESRV_CONFIG, the KV puts): the
    disk's own errors are answered "could not be written to disk" and are no bug; anything else
    the write raises is one, logged with its traceback and counted (it was answered as a disk
    error, with no traceback and no count)."""
    proc = make(tmp_path)
    configuration = proc.handlers[318].__self__.configuration

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def broken(path, text):
        raise TypeError("a store bug")

    configuration.store = full
    with caplog.at_level(logging.WARNING, logger="rocketpy.namesrv"):
        disk = call(proc, 318, body=b"orderMessageEnable=true\n")
        assert proc.handler_failures == {}
        configuration.store = broken
        bug = call(proc, 318, body=b"orderMessageEnable=false\n")
    assert (disk.code, disk.remark) == (
        RC.SYSTEM_ERROR, "the config file could not be written to disk: No space left on device")
    assert (bug.code, bug.remark) == (RC.SYSTEM_ERROR, "builtins.TypeError: a store bug")
    assert proc.handler_failures == {318: 1}
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info[0] is TypeError


def test_a_bug_in_writing_a_controller_change_is_a_handler_bug_not_a_failed_write(caplog):
    """The controller's changes are answered once durable (its file, or etcd): a full disk or
    a change etcd did not commit is answered "could not be written" and logged in one line;
    anything else the write raises is a bug, logged with its traceback and counted (it was
    logged as a disk error, with no traceback and no count)."""
    failures = []

    def persist(events):
        def job():
            raise failures[-1]
        return job

    processor = ControllerRequestProcessor(ControllerConfiguration.from_properties(PROPS),
                                           persist=persist)
    ext = {"clusterName": "c", "brokerName": "b", "appliedBrokerId": "1",
           "registerCheckCode": "127.0.0.1:30911;1"}
    answers = []
    with caplog.at_level(logging.WARNING, logger="rocketpy.controller"):
        for exc in (OSError(errno.ENOSPC, "No space left on device"),
                    NotCommitted("not committed in etcd: another controller leads"),
                    TypeError("a persist bug")):
            failures.append(exc)
            answers.append(processor.process(RemotingCommand.request(1013, ext, opaque=9), CH,
                                             1000))
    assert [a.code for a in answers] == [RC.SYSTEM_ERROR] * 3
    assert [a.remark.rsplit(": ", 1)[-1] for a in answers] == [
        "No space left on device", "another controller leads", "a persist bug"]
    assert processor.handler_failures == {1013: 1}
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.exc_info[0] if r.exc_info else None for r in errors] == [None, None, TypeError]
