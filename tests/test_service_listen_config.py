"""GET_NAMESRV_CONFIG reports where the server listens (issue 30): with ``--listen`` elsewhere it
said the defaults, 9876 on 0.0.0.0. ``--listen`` overrides listenPort and bindAddress, so both
are the bound ones; without it, Java's rule: a listenPort of 0 becomes the port bound."""
import subprocess
import sys
import os

import pytest

from serverproc import REPO_ROOT, RemotingClient, running_server

pytestmark = pytest.mark.network


def _config(port):
    client = RemotingClient(port)
    try:
        answer = client.call(319)   # GET_NAMESRV_CONFIG
    finally:
        client.close()
    assert answer.code == 0
    return dict(line.split("=", 1) for line in answer.body.decode().splitlines() if "=" in line)


def test_listen_elsewhere_is_what_get_namesrv_config_reports():
    with running_server() as server:   # --listen=tcp:0:interface=127.0.0.1
        config = _config(server.port)
        admin = subprocess.run([sys.executable, "-m", "rocketpy.admin.cli", "getNamesrvConfig",
                                "-n", server.addr], capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert (config["listenPort"], config["bindAddress"]) == (str(server.port), "127.0.0.1")
    assert admin.returncode == 0, admin.stderr
    shown = {line.split("=")[0].strip(): line.split("=", 1)[1].strip()
             for line in admin.stdout.splitlines() if "=" in line}
    assert (shown["listenPort"], shown["bindAddress"]) == (str(server.port), "127.0.0.1")


def test_a_listen_port_of_0_becomes_the_bound_port_as_in_java():
    with running_server("-D", "listenPort=0", "-D", "bindAddress=127.0.0.1", listen=None) as server:
        config = _config(server.port)
    assert (config["listenPort"], config["bindAddress"]) == (str(server.port), "127.0.0.1")
