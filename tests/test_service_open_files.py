"""The open files limit at start-up (issue 30): every default start logged an alarming "open
files limit 20000 (hard 20000) is below serverMaxConnections + margin (50256): connections past
it fail at accept". A start without serverMaxConnections needs far fewer connections than its
default cap of 50,000: the cap is lowered to what the limit holds (connections past it are
refused like any over the cap, not failed at accept) with one info line, and it warns only when
fewer than MIN_DEFAULT_CONNECTIONS fit, or when a configured serverMaxConnections does not."""
import os
import resource
import subprocess

import pytest

from rocketpy.transport.limits import MIN_DEFAULT_CONNECTIONS, OPEN_FILES_MARGIN
from serverproc import REPO_ROOT, RemotingClient, ServerProcess, server_command

pytestmark = pytest.mark.network


class _Server:
    """``twistd -n rocketnamesrv`` started with RLIMIT_NOFILE (soft, hard)."""

    def __init__(self, tmp_path, nofile, *args):
        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1", HOME=str(tmp_path))
        proc = subprocess.Popen(server_command(f"--kvConfigPath={tmp_path / 'kv.json'}", *args),
                                cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=limit)
        self.server = ServerProcess(proc, tmp_path, tmp_path / "kv.json")

    def __enter__(self):
        self.server.wait_booted(60)
        return self.server

    def __exit__(self, *exc):
        self.server.stop()


def test_a_default_start_under_a_fair_limit_warns_of_nothing(tmp_path):
    with _Server(tmp_path, (1024, 20_000)) as server:
        text = server.log_text()
    assert "#warn]" not in text and "below serverMaxConnections" not in text, text
    assert f"serving at most {20_000 - OPEN_FILES_MARGIN} connections (the open files limit is " \
           "20000" in text


def test_a_configured_cap_that_does_not_fit_warns(tmp_path):
    with _Server(tmp_path, (1024, 20_000), "-D", "serverMaxConnections=50000") as server:
        text = server.log_text()
    assert (f"serverMaxConnections 50000 does not fit the open files limit 20000 (hard 20000) "
            f"with {OPEN_FILES_MARGIN} to spare: at most {20_000 - OPEN_FILES_MARGIN} "
            "connections are served") in text


def test_a_limit_too_low_for_a_default_start_warns_and_the_cap_refuses_cleanly(tmp_path):
    hard = OPEN_FILES_MARGIN + 40
    assert hard - OPEN_FILES_MARGIN < MIN_DEFAULT_CONNECTIONS
    with _Server(tmp_path, (hard, hard)) as server:
        assert (f"the open files limit {hard} (hard {hard}) leaves room for 40 connections only"
                in server.log_text())
        clients = [RemotingClient(server.port) for _ in range(40)]
        assert all(c.call(206, {}).code == 0 for c in clients)   # each served
        extra = RemotingClient(server.port)
        assert extra.is_closed_by_server()                         # the 41st refused at once
        server.wait_for_log(r"refusing the connection from .*: 40 connections are open "
                            r"\(serverMaxConnections 40\)")
        for client in clients + [extra]:
            client.close()
