"""The README's first command, as a user runs it: rocketpy built into a wheel and an sdist from
this checkout, each installed into a fresh virtual environment (dependencies from the package
index), then every command README.md and docs/ tell a user to run, from that environment, in a
directory outside the checkout (:mod:`installedenv`).

The suite's own runs use the editable install of the checkout, which always has the source tree
on the path: a package left out of the wheel (rocketpy.controller once was, and every start
died on it) is invisible there. Marked ``installed``; it runs in every ``python3 -m pytest``
(CI's ``.ci/run``). One build and one venv per distribution serve every test (session fixtures):
the module took 3.5 minutes on the shared 2-core development machine (load average 8 to 9),
about 80 s per venv to build and install (pip fetching the dependencies, the C extensions
compiled once for the wheel and again from the sdist) and under a minute for the commands.
"""
import json
import os
import re
import signal
import socket
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from installedenv import REPO_ROOT, Venv, build_dists
from serverproc import BOOT_RE, RemotingClient, ServerProcess
from test_e2e_brokersim_controller import _free_range

pytestmark = [pytest.mark.installed, pytest.mark.network]

FIXTURES = REPO_ROOT.parent / "shared" / "fixtures" / "pcap"
LOOPBACK = "tcp:0:interface=127.0.0.1"
#: bound on a server's boot and on waits for a state the commands reach in a few seconds
BOOT_TIMEOUT = 120


@pytest.fixture(scope="session")
def dists(tmp_path_factory):
    return build_dists(tmp_path_factory.mktemp("installed"))


@pytest.fixture(scope="session", params=["wheel", "sdist"])
def venv(request, dists, tmp_path_factory):
    """A fresh venv with the wheel, or with the sdist (pip builds its own wheel from it)."""
    env = Venv.create(tmp_path_factory.mktemp(f"venv-{request.param}") / "venv")
    env.pip_install(getattr(dists, request.param))
    return env


def _start_server(venv, script, *args, cwd=None):
    """``script`` (``twistd`` or ``rocketnamesrv``) from the venv, booted (a ServerProcess)."""
    argv = (["-n", "rocketnamesrv"] if script == "twistd" else []) + ["--listen", LOOPBACK,
                                                                         *args]
    proc = venv.popen(script, *argv, cwd=cwd)
    server = ServerProcess(proc, venv.home, venv.home / "namesrv" / "kvConfig.json")
    server.wait_booted(BOOT_TIMEOUT)
    return server


def _until(check, what, timeout=BOOT_TIMEOUT):
    """Call ``check()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


def _stopped(sim):
    """Ctrl-C to a brokersim that did what it was run for (it runs until told): its report."""
    sim.send_signal(signal.SIGINT)
    try:
        out, _ = sim.communicate(timeout=BOOT_TIMEOUT)
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.wait()
    report = out.decode()
    assert sim.returncode == 0 and "errors: none" in report, report
    return report


def _succeeds(venv, *args):
    """A ``rocketpy-admin`` run that succeeded, or None."""
    done = venv.run("rocketpy-admin", *args)
    return done if done.returncode == 0 else None


def _serve_routes(venv, server, tmp_path):
    """brokersim registers a broker (listening, so clusterList can ask it) while rocketpy-admin
    asks the server for its route and for clusterList; then Ctrl-C stops it."""
    base = _free_range(1)
    sim = venv.popen("rocketpy-brokersim", "-n", server.addr, "--brokers", "1", "--topics", "2",
                     "--topic-prefix", "Installed-", "--duration", "3600", "--ramp", "0",
                     "--progress", "0", "--listen", "--base-port", base, cwd=tmp_path)
    try:
        route = _until(lambda: _succeeds(venv, "topicRoute", "-n", server.addr, "-t",
                                         "Installed-0", "--json"), "the simulated broker's route")
        data = json.loads(route.stdout)
        assert [b["brokerName"] for b in data["brokerDatas"]] == ["broker-0"]
        assert data["brokerDatas"][0]["brokerAddrs"] == {"0": f"127.0.0.1:{base}"}
        clusters = venv.run("rocketpy-admin", "clusterList", "-n", server.addr)
        assert clusters.returncode == 0, clusters.stderr
        assert re.search(rf"DefaultCluster\s+broker-0\s+0\s+127\.0\.0\.1:{base}\s", clusters.stdout)
    finally:
        report = _stopped(sim)
    assert re.search(rf"{server.addr}\s+[1-9]\d*\s+0\s", report), report


def test_the_commands_and_modules_are_the_venvs_own(venv):
    script = ("import json, rocketpy, twisted.plugins.rocketnamesrv as plugin\n"
              "from rocketpy.capture import engine\nfrom rocketpy.remoting import kernel\n"
              "print(json.dumps({'package': rocketpy.__file__, 'plugin': plugin.__file__,\n"
              "    'kernel': getattr(kernel.KERNEL, '__file__', None),\n"
              "    'native': getattr(engine.NATIVE, '__file__', None),\n"
              "    'engine': engine.BatchDecoder.name}))")
    done = venv.run("python", "-c", script)
    assert done.returncode == 0, done.stderr
    where = json.loads(done.stdout)
    site = str(venv.path / "lib")
    assert all(where[key] and where[key].startswith(site)
               for key in ("package", "plugin", "kernel", "native")), where
    assert where["engine"] == "native"


@pytest.mark.parametrize("script", ["twistd", "rocketnamesrv"])
def test_the_server_answers_a_route_query_and_cluster_list(venv, tmp_path, script):
    """The README's first command, ``twistd -n rocketnamesrv`` (on a loopback port; its default
    pidfile in its directory), and the ``rocketnamesrv`` console script."""
    server = _start_server(venv, script, cwd=tmp_path)
    try:
        _serve_routes(venv, server, tmp_path)
    finally:
        assert server.stop() == 0
    text = server.log_text()
    assert "Traceback" not in text and "Server Shut Down." in text
    assert not (tmp_path / "twistd.pid").exists()   # twistd's removed at the stop


def test_rocketnamesrv_p_prints_every_config_item(venv):
    printed = venv.run("rocketnamesrv", "-p")
    assert printed.returncode == 0 and printed.stderr == "", printed.stderr
    assert "listenPort=9876" in printed.stdout.splitlines()
    assert "enableControllerInNamesrv=false" in printed.stdout.splitlines()


def test_rocketpy_admin_lists_its_commands(venv):
    done = venv.run("rocketpy-admin")
    assert done.returncode == 0 and done.stderr == ""
    for name in ("clusterList", "topicRoute", "compareNamesrv", "getSyncStateSet"):
        assert re.search(rf"^\s+{name}\s", done.stdout, re.M), name


def test_rocketpy_capture_decodes_a_fixture_with_the_compiled_core(venv):
    """The README's capture command; the compiled core (no fallback line on stderr)."""
    done = venv.run("rocketpy-capture", FIXTURES / "rmq49-mqadmin-topicRoute.pcap", "--format",
                    "table")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "GET_ROUTEINFO_BY_TOPIC" in done.stdout and "p50 ms" in done.stdout
    frames = venv.run("rocketpy-capture", FIXTURES / "rmq49-mqadmin-topicRoute.pcap",
                      "--format", "json")
    rows = [json.loads(line) for line in frames.stdout.splitlines()]
    assert rows and all(row["error"] is None for row in rows)
    assert {row["code_name"] for row in rows if not row["is_response"]} >= {"GET_ROUTEINFO_BY_TOPIC"}


def test_the_controller_mode_elects_a_master_for_brokersim(venv, tmp_path):
    """docs/brokersim.md's controller mode: a NameServer hosting the controller, then
    ``rocketpy-brokersim --controller`` (listening brokers) until a master is elected and
    routed, then Ctrl-C."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        controller_port = probe.getsockname()[1]
    server = _start_server(
        venv, "twistd", "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=g",
        "-D", f"controllerDLegerPeers=n0-127.0.0.1:{controller_port}",
        "-D", "controllerDLegerSelfId=n0", "-D", f"controllerStorePath={tmp_path / 'ctl'}",
        cwd=tmp_path)
    controller = f"127.0.0.1:{controller_port}"
    try:
        assert "The ControllerManager boot success" in server.log_text()
        base = _free_range(3)   # the two brokers' ports, base and base + 2
        sim = venv.popen("rocketpy-brokersim", "-n", server.addr, "--controller", controller,
                         "--version", "5.3.3", "--brokers", "2", "--replicas", "2", "--topics", "1",
                         "--duration", "3600", "--ramp", "0", "--progress", "0", "--listen",
                         "--base-port", base, cwd=tmp_path)
        try:
            def elected():
                sync = _succeeds(venv, "getSyncStateSet", "-a", controller, "-b", "broker-0",
                                 "--json")
                group = sync and json.loads(sync.stdout)["replicasInfoTable"]["broker-0"]
                # before the election the group has no master: its JSON leaves the field out
                route = group and group.get("masterBrokerId") is not None and _succeeds(
                    venv, "topicRoute", "-n", server.addr, "-t", "SimTopic-0", "--json")
                return route and (group, json.loads(route.stdout))
            group, route = _until(elected, "an elected master, routed by the NameServer")
        finally:
            report = _stopped(sim)
        master = group["masterAddress"]
        assert group["masterBrokerId"] in (1, 2) and master.startswith("127.0.0.1:")
        assert route["brokerDatas"][0]["brokerAddrs"]["0"] == master   # routed as brokerId 0
        assert "controller: became master 1" in report
    finally:
        assert server.stop() == 0
    assert "Traceback" not in server.log_text()


def test_twistd_rocketnamesrv_as_a_daemon_is_stopped_by_its_pidfile(venv, tmp_path):
    """docs/server.md's daemon line: the launcher returns 0 once the server is up; the pidfile
    names the daemon; kill stops it and takes the pidfile away."""
    started = venv.run("twistd", "--logfile=namesrv.log", "--pidfile=namesrv.pid",
                       "rocketnamesrv", "--listen", LOOPBACK, cwd=tmp_path, timeout=BOOT_TIMEOUT)
    assert started.returncode == 0 and started.stdout == started.stderr == "", started
    pid = int((tmp_path / "namesrv.pid").read_text())
    log = tmp_path / "namesrv.log"
    try:
        boot = _until(lambda: BOOT_RE.search(log.read_text()), "the daemon's boot line")
        client = RemotingClient(int(boot.group(2)))
        assert client.call(206, {}).code == 0   # GET_ALL_TOPIC_LIST_FROM_NAMESERVER
        client.close()
    finally:
        os.kill(pid, signal.SIGTERM)
    _until(lambda: not (tmp_path / "namesrv.pid").exists(), "the pidfile to go")
    _until(lambda: not Path(f"/proc/{pid}").exists() or
           Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", "the daemon to exit")
    text = log.read_text()
    assert "Server Shut Down." in text and "Traceback" not in text


def test_every_package_and_module_of_the_checkout_is_in_the_wheel(dists):
    """Every directory under rocketpy/ with an __init__.py, every module, and the plugin."""
    names = set(zipfile.ZipFile(dists.wheel).namelist())
    source = dists.source
    wanted = {str(p.relative_to(source)) for p in (source / "rocketpy").rglob("*.py")}
    packages = {str(p.parent.relative_to(source)) for p in (source / "rocketpy").rglob("__init__.py")}
    assert "rocketpy/controller" in packages and len(packages) > 10
    assert {f"{p}/__init__.py" for p in packages} <= names
    assert wanted - names == set()
    assert "twisted/plugins/rocketnamesrv.py" in names
    compiled = {n for n in names if n.endswith(".so")}
    assert {n.split(".")[0] for n in compiled} == {"rocketpy/remoting/_kernel",
                                                   "rocketpy/capture/_native"}


def test_the_sdist_carries_every_c_source_and_the_generated_layout_header(dists):
    """The sdist must build the compiled modules: every C source and header of the checkout's
    _kernel and _native, and layout_gen.h (written from layout.py when the sdist is made)."""
    with tarfile.open(dists.sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    source = dists.source
    c_files = {str(p.relative_to(source)) for pattern in ("*.c", "*.h")
               for p in (source / "rocketpy").rglob(pattern)}
    assert {n for n in c_files if "/_kernel/" in n} and {n for n in c_files if "/_native/" in n}
    assert c_files - names == set()
    assert "rocketpy/remoting/_kernel/layout_gen.h" in names
    assert {"setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "README.md",
            "twisted/plugins/rocketnamesrv.py"} <= names
