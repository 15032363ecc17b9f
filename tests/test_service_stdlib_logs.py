"""One logging path (issue 30): the pure layers (``rocketpy.namesrv``, ``rocketpy.controller``)
log through Python's ``logging``, which nothing forwarded to Twisted's log: "broker N is
inactive" and the controller's elections never reached twistd's log file, and warnings reached
it as ``[stderr#error]`` lines. The service bridges the ``rocketpy`` stdlib logger into
twisted.logger once, at start, each record at its level, filtered by ``--logLevel`` as the
rest; read here from twistd's own ``--logfile``."""
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from twisted.internet.task import Clock
from twisted.logger import LogLevel, globalLogPublisher

from rocketpy.service.loglevel import LogLevelService
from rocketpy.transport import logs
from serverproc import BOOT_RE, REPO_ROOT, _TWISTD, RemotingClient
from test_e2e_brokersim import cluster_members


def _seen(level, emit):
    """The events rocketpy's filter lets through while a LogLevelService at ``level`` runs."""
    seen = []
    service = LogLevelService(level, Clock())
    service.startService()
    globalLogPublisher.addObserver(seen.append)
    try:
        emit()
    finally:
        globalLogPublisher.removeObserver(seen.append)
        service.stopService()
    return [e for e in seen if e.get("log_namespace", "").startswith("rocketpy.")]


def test_stdlib_records_reach_twisted_at_their_level_filtered_by_the_log_level():
    namesrv, controller = logging.getLogger("rocketpy.namesrv"), logging.getLogger("rocketpy.controller")

    def emit():
        controller.info("broker %s of %s is inactive", 1, "broker-a")
        namesrv.warning("registration refused: %s", "too many topics")
        namesrv.debug("a debug line")
    events = _seen(LogLevel.info, emit)
    assert [(e["log_namespace"], e["log_level"], e["text"]) for e in events] == [
        ("rocketpy.controller", LogLevel.info, "broker 1 of broker-a is inactive"),
        ("rocketpy.namesrv", LogLevel.warn, "registration refused: too many topics")]
    assert [e["text"] for e in _seen(LogLevel.warn, emit)] == ["registration refused: too many topics"]
    assert [e["log_level"] for e in _seen(LogLevel.debug, emit)] == [LogLevel.info, LogLevel.warn,
                                                                     LogLevel.debug]
    assert logging.getLogger("rocketpy").level == logging.NOTSET   # put back at the stop


def test_a_records_exception_is_its_events_failure():
    def emit():
        try:
            {}["missing"]
        except KeyError as exc:
            logging.getLogger("rocketpy.namesrv").error("request %s failed", 105, exc_info=exc)
    [event] = _seen(LogLevel.info, emit)
    assert event["log_level"] is LogLevel.error and event["text"] == "request 105 failed"
    assert event["log_failure"].check(KeyError)


def _both_registered(port):
    """The group's two brokers are at the NameServer, a master (brokerId 0) and its slave."""
    members = cluster_members(port).get("broker-0", {})
    return len(members) == 2 and 0 in members


def test_the_controllers_and_the_nameservers_lines_are_in_twistds_log_file(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        controller_port = probe.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HOME=str(tmp_path))
    log = tmp_path / "ns.log"
    server = subprocess.Popen(
        [sys.executable, "-c", _TWISTD, "-n", "--pidfile=", f"--logfile={log}", "rocketnamesrv",
         "--listen", "tcp:0:interface=127.0.0.1", f"--kvConfigPath={tmp_path / 'kv.json'}",
         "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=g",
         "-D", f"controllerDLegerPeers=n0-127.0.0.1:{controller_port}",
         "-D", "controllerDLegerSelfId=n0", "-D", f"controllerStorePath={tmp_path / 'ctl'}"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (log.exists() and BOOT_RE.search(log.read_text())):
            assert server.poll() is None and time.monotonic() < deadline, "the server did not boot"
            time.sleep(0.1)
        port = int(BOOT_RE.search(log.read_text()).group(2))
        # two controller-mode brokers, until both are registered with their roles; then they
        # stop (Ctrl-C), and the controller finds them inactive
        sim = subprocess.Popen(
            [sys.executable, "-m", "rocketpy.broker.simcli", "-n", f"127.0.0.1:{port}",
             "--controller", f"127.0.0.1:{controller_port}", "--version", "5.3.3", "--brokers",
             "2", "--replicas", "2", "--duration", "3600", "--ramp", "0", "--progress", "0"],
            env=env, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not _both_registered(port):
                assert sim.poll() is None and time.monotonic() < deadline, cluster_members(port)
                time.sleep(0.2)
            sim.send_signal(signal.SIGINT)
            assert sim.wait(120) == 0
        finally:
            if sim.poll() is None:
                sim.kill()
                sim.wait()
        inactive = re.compile(r"\[rocketpy\.controller#info\] broker \d of broker-0 is inactive")
        deadline = time.monotonic() + 120
        while not inactive.search(log.read_text()):
            assert time.monotonic() < deadline, "no inactive broker in the log"
            time.sleep(0.2)
        client = RemotingClient(port)   # UPDATE_NAMESRV_CONFIG of a black-listed key: a warning
        refused = client.call(318, body=b"kvConfigPath=/tmp/elsewhere\n")
        client.close()
        assert refused.code == 16
    finally:
        server.terminate()
        server.wait(60)
    text = log.read_text()
    assert re.search(r"\[rocketpy\.namesrv#warn\] UPDATE_NAMESRV_CONFIG from 127\.0\.0\.1:\d+ "
                     r"refused: Can not update config in black list\. \(kvConfigPath\)", text), text
    assert "[stderr#" not in text, text
