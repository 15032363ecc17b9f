"""End to end: ``rocketpy-brokersim --controller`` (a subprocess) with 5 groups of 2
controller-mode brokers against ``twistd -n rocketnamesrv`` hosting the controller, on
127.0.0.1: ids, elections, heartbeats, then churn (masters and slaves killed and restarted),
then ``--verify``: exactly one master per group with a live broker in sync, the controller's,
routed by the NameServer as brokerId 0, and the NameServer's tables equal to the brokers up."""
import json
import os
import socket
import subprocess
import sys
import tempfile

import pytest

from serverproc import REPO_ROOT, running_server

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


def test_controller_mode_churn_then_one_master_per_group():
    controller_port = _free_port()
    with tempfile.TemporaryDirectory(prefix="rocketpy-controller-") as store, running_server(
            "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=group1",
            "-D", f"controllerDLegerPeers=n0-127.0.0.1:{controller_port}",
            "-D", "controllerDLegerSelfId=n0", "-D", f"controllerStorePath={store}",
            "-D", "bindAddress=127.0.0.1") as server:
        server.wait_for_log(r"The ControllerManager boot success\.")
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        done = subprocess.run(
            [sys.executable, "-m", "rocketpy.broker.simcli", "-n", server.addr,
             "--controller", f"127.0.0.1:{controller_port}", "--version", "5.3.3",
             "--brokers", "10", "--replicas", "2", "--topics", "3", "--period", "3",
             "--ramp", "1", "--churn", "30", "--churn-after", "6", "--down", "2",
             "--duration", "14", "--progress", "0", "--verify", "--settle", "8", "--seed", "11",
             "--base-port", str(_free_range(20)), "--json"],
            env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
        report = json.loads(done.stdout)
        assert report["verify"] == []
        counts = report["counts"]
        assert counts["controller: groups verified"] == 5
        assert counts["controller: became master"] >= 5
        assert sum(v for k, v in counts.items() if k.startswith("churn: kill")) >= 1
