"""rocketpy-admin's controller commands against a real controller (``twistd rocketnamesrv`` with
``enableControllerInNamesrv=true``), where the walk-through of issue 30 found them quiet:
``updateControllerConfig -v abc`` said "success" and the controller dropped the value (the
NameServer's own update refuses it: INVALID_PARAMETER 29), and ``getSyncStateSet -b nosuch``
printed nothing with status 0."""
import os
import socket
import subprocess
import sys

import pytest

from serverproc import REPO_ROOT, running_server

pytestmark = pytest.mark.network


def _admin(*args):
    done = subprocess.run([sys.executable, "-m", "rocketpy.admin.cli", *args], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
                          stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = tmp_path_factory.mktemp("controller")
    with running_server("-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=g",
                        "-D", f"controllerDLegerPeers=n0-127.0.0.1:{port}",
                        "-D", "controllerDLegerSelfId=n0", "-D", f"controllerStorePath={store}",
                        "-D", "bindAddress=127.0.0.1") as server:
        server.wait_for_log(r"The ControllerManager boot success\.", timeout=30)
        yield server, f"127.0.0.1:{port}"


def _config(address):
    status, out, err = _admin("getControllerConfig", "-a", address)
    assert status == 0, err
    return {line.split("=")[0].strip(): line.split("=", 1)[1].strip()
            for line in out.splitlines() if "=" in line}


def test_update_controller_config_refuses_a_value_the_next_start_would_refuse(controller):
    _server, address = controller
    before = _config(address)["scanNotActiveBrokerInterval"]
    status, out, err = _admin("updateControllerConfig", "-a", address, "-k",
                              "scanNotActiveBrokerInterval", "-v", "abc")
    assert status == 1 and "success" not in out, out
    [line] = err.splitlines()
    assert line.startswith("rocketpy-admin updateControllerConfig: ") and "CODE: 29" in line, line
    assert "scanNotActiveBrokerInterval" in line and "'abc'" in line, line
    assert _config(address)["scanNotActiveBrokerInterval"] == before
    status, out, err = _admin("updateControllerConfig", "-a", address, "-k",
                              "scanNotActiveBrokerInterval", "-v", "7000")
    assert status == 0 and "update controller config success!" in out, err
    assert _config(address)["scanNotActiveBrokerInterval"] == "7000"


def test_get_sync_state_set_of_an_unknown_broker_group_is_an_error_line(controller):
    _server, address = controller
    status, out, err = _admin("getSyncStateSet", "-a", address, "-b", "nosuch")
    assert status == 1 and out == ""
    assert err.splitlines() == [
        f"rocketpy-admin getSyncStateSet: no broker group nosuch at the controller {address}"]
