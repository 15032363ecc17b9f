"""What the server's command line says when it cannot start (issue 30's walk-through): one line
on stderr naming the problem and exit status 1 -- as a daemon too, from the launching
``twistd`` -- for a port in use, an unknown or malformed option, a binary ``-c`` file and a
broken KV file; never the whole ``--help``, a hang, a traceback or a pidfile left behind."""
import os
import socket
import subprocess
import sys
import time

import pytest

from serverproc import BOOT_RE, REPO_ROOT, _TWISTD, RemotingClient, server_command

PORT_IN_USE = "rocketnamesrv: cannot listen on tcp:{port}:interface=127.0.0.1: Couldn't listen on " \
              "127.0.0.1:{port}: [Errno 98] Address already in use."


def _env(tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1", HOME=str(home))


def _twistd(tmp_path, *args, timeout=120):
    return subprocess.run([sys.executable, "-c", _TWISTD, *args], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _rocketnamesrv(tmp_path, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "rocketpy.service.cli", *args], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_a_daemon_on_a_port_in_use_is_one_line_and_status_1_from_the_launcher(tmp_path):
    """``twistd --logfile --pidfile rocketnamesrv`` on a taken port: the launching twistd
    waited forever (the daemon had exited, its pidfile stayed, the reason only in the log)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        done = _twistd(tmp_path, "--logfile=bad.log", "--pidfile=bad.pid", "rocketnamesrv",
                       "--listen", f"tcp:{port}:interface=127.0.0.1",
                       f"--kvConfigPath={tmp_path / 'kv.json'}")
        took = time.monotonic() - started
    assert done.returncode == 1, (done, took)
    assert done.stdout == "" and done.stderr == PORT_IN_USE.format(port=port) + "\n", done
    assert not (tmp_path / "bad.pid").exists()
    log = (tmp_path / "bad.log").read_text()
    assert PORT_IN_USE.format(port=port) in log and "[stderr#" not in log, log


def test_a_daemon_that_starts_lets_its_launcher_go_at_once(tmp_path):
    """The launcher exits 0 once the daemon listens, and does not hold the pipes of whoever
    started it (a dup of its stderr is kept for a failure only until the start is over)."""
    done = _twistd(tmp_path, "--logfile=ns.log", "--pidfile=ns.pid", "rocketnamesrv", "--listen",
                   "tcp:0:interface=127.0.0.1", f"--kvConfigPath={tmp_path / 'kv.json'}")
    assert done.returncode == 0 and done.stdout == done.stderr == "", done
    pid = int((tmp_path / "ns.pid").read_text())
    deadline = time.monotonic() + 60
    while not BOOT_RE.search((tmp_path / "ns.log").read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    client = RemotingClient(int(BOOT_RE.search((tmp_path / "ns.log").read_text()).group(2)))
    assert client.call(206, {}).code == 0   # answered: the reactor runs, its SIGTERM handler too
    client.close()
    os.kill(pid, 15)
    deadline = time.monotonic() + 60
    while (tmp_path / "ns.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (tmp_path / "ns.pid").exists()
    assert "The Name Server boot success" in (tmp_path / "ns.log").read_text()


@pytest.mark.parametrize("args, line", [
    (["--peers", "garbage"], "rocketnamesrv: --peers='garbage': "),
    (["--no-such-option"], "rocketnamesrv: option --no-such-option not recognized"),
    (["-Z"], "rocketnamesrv: option -Z not recognized"),
    (["--listen"], "rocketnamesrv: option --listen requires argument"),
    (["stray"], "rocketnamesrv: "),
])
@pytest.mark.parametrize("runner", ["twistd", "rocketnamesrv"])
def test_a_bad_option_is_one_line_on_stderr_not_the_help(tmp_path, runner, args, line):
    """It was the whole 82-line --help on stdout, under the name 'rocketnamesrv --nodaemon:'."""
    if runner == "twistd":
        done = _twistd(tmp_path, "-n", "--pidfile=", "rocketnamesrv", *args)
    else:
        done = _rocketnamesrv(tmp_path, *args)
    assert done.returncode == 1, done
    assert done.stdout == "", done.stdout[:500]
    [printed] = done.stderr.splitlines()
    assert printed.startswith(line) and "--nodaemon" not in printed, printed
    assert "rocketnamesrv --help" in printed


def test_a_bad_twistd_option_of_the_console_script_is_one_line(tmp_path):
    done = _rocketnamesrv(tmp_path, "--twistd=--no-such-twistd-option")
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.splitlines() == [
        "rocketnamesrv: option --no-such-twistd-option not recognized (rocketnamesrv --help "
        "lists the options)"]


def test_a_binary_config_file_is_one_line_not_a_properties_file(tmp_path):
    """``-c`` a copy of /usr/bin/ls booted a server with 568 warning lines of mojibake."""
    binary = tmp_path / "ls-copy"
    binary.write_bytes(open("/usr/bin/ls", "rb").read())
    done = subprocess.run(server_command("-c", str(binary), "-p", listen=None), cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and done.stdout == "", done.stdout[:300]
    assert done.stderr.splitlines() == [
        f"rocketnamesrv: cannot read config file {binary}: not a properties file (byte 0x02 at "
        f"offset 4: a binary file?)"]


def test_a_broken_kv_file_names_its_bak_only_when_there_is_one(tmp_path):
    """The message pointed to a .bak that did not exist."""
    kv = tmp_path / "kvConfig.json"
    kv.write_text('{"configTable": {"ns": {"k": ')
    done = _rocketnamesrv(tmp_path, "--listen", "tcp:0:interface=127.0.0.1", f"--kvConfigPath={kv}")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"rocketnamesrv: cannot load the KV config: {kv}: ") and ".bak" not in line
    (tmp_path / "kvConfig.json.bak").write_text('{"configTable": {}}')
    done = _rocketnamesrv(tmp_path, "--listen", "tcp:0:interface=127.0.0.1", f"--kvConfigPath={kv}")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.endswith(f" (the previous content is in {kv}.bak)"), line
