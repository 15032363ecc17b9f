"""The documentation's snippets and commands run as pasted: every Python block of
docs/client.md as a whole script against a real NameServer (its address in place of
127.0.0.1:9876), and docs/configuration.md's word on a value that does not parse and its
commands that need no running server."""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from serverproc import REPO_ROOT, running_server, server_command

pytestmark = pytest.mark.network

DOCS = REPO_ROOT / "docs"


def _blocks(page, language):
    return re.findall(rf"```{language}\n(.*?)```", (DOCS / page).read_text(), re.S)


def _python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), stdin=subprocess.DEVNULL)


def test_client_page_scripts_run_as_pasted():
    cluster_info, register = _blocks("client.md", "python")
    with running_server() as server:
        proc = _python(cluster_info.replace("127.0.0.1:9876", server.addr))
        assert (proc.returncode, proc.stderr) == (0, "")
        assert json.loads(proc.stdout) == {"brokerAddrTable": {}, "clusterAddrTable": {}}
        proc = _python(register.replace("127.0.0.1:9876", server.addr))
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "registered\n", "")
        # (the broker is gone again once the script ends: its connection closed)
        server.wait_for_log(r"the broker's channel destroyed.*broker-a")
    proc = _python(cluster_info.replace("127.0.0.1:9876", "127.0.0.1:1"))   # nothing listens
    assert proc.returncode == 0 and proc.stdout.startswith("connect to 127.0.0.1:1 failed")


def _server(*args):
    return subprocess.run(server_command(*args, listen=None), capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))


def test_configuration_page_says_what_a_bad_number_does(tmp_path):
    text = " ".join((DOCS / "configuration.md").read_text().split())
    example = re.search(r"A value that does not parse \(`(\w+)=(\w+)`\) stops the start with one "
                        r"line naming the key, the value and what was expected", text)
    assert example, "configuration.md no longer says what a value that does not parse does"
    key, value = example.groups()
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"{key}={value}\n")
    proc = _server("-c", str(conf))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert f"{key}={value!r} in {conf}: expected" in proc.stderr


def test_configuration_page_print_command_runs():
    [print_line] = [line for block in _blocks("configuration.md", "sh") for line in block.splitlines()
                    if line.endswith("like mqnamesrv -p")]
    argv = shlex.split(print_line.split("#")[0])
    assert argv[:3] == ["twistd", "-n", "rocketnamesrv"]
    proc = _server(*argv[3:])
    assert proc.returncode == 0 and "listenPort=9876" in proc.stdout.splitlines()
