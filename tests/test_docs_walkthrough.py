"""What issue 30's walk-through of the docs found, as tests that run the pages' own lines: the
two NameServers server.md starts from one directory (each with its ``--pidfile``), and
admin.md's TOPIC_NOT_EXIST line, which is what the default profile prints."""
import os
import re
import shlex
import subprocess
import sys

import pytest

from serverproc import BOOT_RE, REPO_ROOT, _TWISTD, RemotingClient, running_server

pytestmark = pytest.mark.network

DOCS = REPO_ROOT / "docs"


def _sh_lines(page):
    return [line for block in re.findall(r"```sh\n(.*?)```", (DOCS / page).read_text(), re.S)
            for line in block.splitlines() if line.strip()]


def _start(line, cwd):
    """A page's ``twistd ...`` line, its port on 127.0.0.1 picked by the kernel."""
    argv = shlex.split(re.sub(r"-D listenPort=\d+", "--listen tcp:0:interface=127.0.0.1", line))
    assert argv[0] == "twistd", line
    return subprocess.Popen([sys.executable, "-c", _TWISTD, *argv[1:]], cwd=cwd,
                            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1",
                                     HOME=str(cwd)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL)


def _booted(proc):
    """True once ``proc`` answers a request on the port its boot line names (its reactor runs:
    a SIGTERM from then on is a clean stop)."""
    for line in proc.stdout:
        boot = BOOT_RE.search(line)
        if boot:
            client = RemotingClient(int(boot.group(2)))
            try:
                return client.call(206, {}).code == 0   # GET_ALL_TOPIC_LIST_FROM_NAMESERVER
            finally:
                client.close()
    return False


def test_two_nameservers_from_one_directory_as_server_md_starts_them(tmp_path):
    """twistd writes twistd.pid even with -n: a second server from the same directory was
    refused ("Another twistd server is running") and the pages never said --pidfile."""
    lines = [line for line in _sh_lines("server.md") if "--pidfile=" in line and " -n " in line]
    assert len(lines) == 2, lines
    procs = [_start(line, tmp_path) for line in lines]
    try:
        assert all(_booted(proc) for proc in procs)
        assert sorted(p.name for p in tmp_path.glob("*.pid")) == ["ns1.pid", "ns2.pid"]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(60)
    assert [proc.returncode for proc in procs] == [0, 0]


def test_admin_page_topic_not_exist_line_is_what_the_default_profile_prints():
    documented = next(line for line in (DOCS / "admin.md").read_text().splitlines()
                      if line.startswith("rocketpy-admin topicRoute: CODE: 17"))
    with running_server() as server:
        done = subprocess.run([sys.executable, "-m", "rocketpy.admin.cli", "topicRoute", "-n",
                               server.addr, "-t", "T"], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
                              stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [documented]
