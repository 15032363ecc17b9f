"""End to end: ``rocketpy-brokersim --controller`` (a subprocess) with 5 groups of 2
controller-mode brokers against ``twistd -n rocketnamesrv`` hosting the controller, on
127.0.0.1: ids, elections, heartbeats, then churn (masters and slaves killed and restarted),
then ``--verify``: exactly one master per group with a live broker in sync, the controller's,
routed by the NameServer as brokerId 0, and the NameServer's tables equal to the brokers up."""
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from serverproc import REPO_ROOT, running_server
from test_e2e_brokersim import cluster_members

pytestmark = pytest.mark.network


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_range(n):
    """A first port with ``n`` free ones after it (the brokers' listen ports, every other)."""
    for _ in range(50):
        base = _free_port()
        if base + n >= 65535:
            continue
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


@contextlib.contextmanager
def _controller_server():
    """``twistd -n rocketnamesrv`` hosting the controller; yields ``(server, controller addr)``."""
    controller_port = _free_port()
    with tempfile.TemporaryDirectory(prefix="rocketpy-controller-") as store, running_server(
            "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=group1",
            "-D", f"controllerDLegerPeers=n0-127.0.0.1:{controller_port}",
            "-D", "controllerDLegerSelfId=n0", "-D", f"controllerStorePath={store}",
            "-D", "bindAddress=127.0.0.1") as server:
        server.wait_for_log(r"The ControllerManager boot success\.")
        yield server, f"127.0.0.1:{controller_port}"


def _simulator(server, controller, *args):
    """``rocketpy-brokersim --controller`` (5.3.3 brokers) against them: the argv."""
    return [sys.executable, "-m", "rocketpy.broker.simcli", "-n", server.addr,
            "--controller", controller, "--version", "5.3.3", *args]


_ENV = dict(os.environ, PYTHONPATH=str(REPO_ROOT))


def test_controller_mode_churn_then_one_master_per_group():
    with _controller_server() as (server, controller):
        done = subprocess.run(
            _simulator(server, controller,
                       "--brokers", "10", "--replicas", "2", "--topics", "3", "--period", "3",
                       "--ramp", "1", "--churn", "30", "--churn-after", "6", "--down", "2",
                       "--duration", "14", "--progress", "0", "--verify", "--settle", "8",
                       "--seed", "11", "--base-port", str(_free_range(20)), "--json"),
            env=_ENV, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
        report = json.loads(done.stdout)
        assert report["verify"] == []
        counts = report["counts"]
        assert counts["controller: groups verified"] == 5
        assert counts["controller: became master"] >= 5
        assert sum(v for k, v in counts.items() if k.startswith("churn: kill")) >= 1


def test_controller_mode_with_listening_brokers_takes_the_pushes_on_the_broker_port():
    """``--controller --listen`` (issue 30): each broker listens once, on its own port, where the
    controller's NOTIFY_BROKER_ROLE_CHANGED arrives with the admin requests (as Java's broker
    takes it in AdminBrokerProcessor); it once also listened there for the pushes alone, failed
    with CannotListenError, printed a traceback per broker, registered nothing and said
    "errors: none", status 0. Runs until both groups are registered with their roles (a master
    as brokerId 0, its slave with its controller id), then Ctrl-C."""
    with _controller_server() as (server, controller):
        # the brokers' ports, chosen once the server and controller listen (a range chosen
        # before could hold the ports they then took: the brokers' listen failed, status 1)
        base = _free_range(8)
        sim = subprocess.Popen(
            _simulator(server, controller, "--brokers", "4", "--replicas", "2", "--topics", "2",
                       "--ramp", "0", "--duration", "3600", "--progress", "0", "--listen",
                       "--base-port", str(base), "--json"),
            env=_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while True:
                members = cluster_members(server.port)
                if len(members) == 2 and all(len(m) == 2 and 0 in m for m in members.values()):
                    break
                if sim.poll() is not None:
                    raise AssertionError(f"brokersim ended ({sim.returncode}): "
                                         f"{sim.communicate()[1][-3000:]}")
                assert time.monotonic() < deadline, members
                time.sleep(0.2)
            sim.send_signal(signal.SIGINT)
            out, err = sim.communicate(timeout=120)
        finally:
            if sim.poll() is None:
                sim.kill()
                sim.wait()
    assert sim.returncode == 0 and err == "", err[-3000:]
    report = json.loads(out)
    assert report["errors"] == {}
    assert report["counts"]["controller: became master"] == 2
    assert {addr for m in members.values() for addr in m.values()} == {
        f"127.0.0.1:{base + 2 * i}" for i in range(4)}
