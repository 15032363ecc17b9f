"""End to end: ``rocketpy-brokersim`` (a subprocess) with 200 brokers against two ``twistd -n
rocketnamesrv`` subprocesses on 127.0.0.1: all 200 are in both NameServers' tables and every
topic is routed, then churn (kills, graceful restarts, new topics), then ``--verify`` finds both
NameServers consistent with the brokers that are up, and after the brokers' graceful stop both
tables are empty.

The simulators run ``--until-stdin-closes``: each phase ends on what the NameServers answer or
what the simulator says it did (a line on stdin starts the churn, the end of stdin ends the
run), never on a clock, so a busy machine runs the same scenario as a quiet one.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from rocketpy.remoting import fastjson
from serverproc import PATIENCE, REPO_ROOT, RemotingClient, running_server, wait_until

pytestmark = pytest.mark.network


def cluster_members(port):
    conn = RemotingClient(port)
    try:
        answer = conn.call(106)
        assert answer.code == 0
        table = fastjson.loads(answer.body)["brokerAddrTable"]
        return {name: data["brokerAddrs"] for name, data in table.items()}
    finally:
        conn.close()


def route_codes(port, topics):
    conn = RemotingClient(port)
    try:
        return {t: conn.call(105, {"topic": t}).code for t in topics}
    finally:
        conn.close()


class _Progress:
    """A simulator's stderr, read as it comes: its progress lines and its churn count."""

    def __init__(self, stream):
        self.lines = []
        self._thread = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self._thread.start()

    def churned(self):
        counts = [int(m.group(1)) for line in list(self.lines)
                  if (m := re.search(r"  churn (\d+)  ", line))]
        return counts[-1] if counts else 0

    def text(self):
        self._thread.join(PATIENCE)
        return "".join(self.lines)


@pytest.mark.parametrize("processes", [(), ("--workers=2",)], ids=["1-process", "2-process"])
def test_200_brokers_two_nameservers_churn_then_consistent(processes):
    """With ``--workers=2`` (issue 33 part 2) each NameServer is a route writer and a worker:
    the simulator's registrations, its queries and ``--verify``'s land on either process."""
    with running_server(*processes) as one, running_server(*processes) as two:
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        sim = subprocess.Popen(
            [sys.executable, "-m", "rocketpy.broker.simcli", "-n", f"{one.addr};{two.addr}",
             "--brokers", "200", "--replicas", "2", "--clusters", "2", "--topics", "5",
             "--topic-spread", "2", "--period", "3", "--ramp", "1", "--churn", "240",
             "--down", "2", "--until-stdin-closes", "--duration", "900", "--progress", "0.5",
             "--verify", "--settle", "60", "--seed", "7", "--json"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.PIPE)
        progress = _Progress(sim.stderr)
        try:
            counts = {}

            def all_registered():
                counts.update({s.port: sum(len(m) for m in cluster_members(s.port).values())
                               for s in (one, two)})
                return all(n == 200 for n in counts.values())
            wait_until(all_registered, lambda: f"200 brokers in both NameServers: {counts}",
                       step=0.25)
            topics = [f"SimTopic-{i}" for i in range(250)] + ["TBW102", "broker-0", "broker-99"]
            for server in (one, two):
                assert set(route_codes(server.port, topics).values()) == {0}
            sim.stdin.write("churn\n")                   # the churn begins now...
            sim.stdin.flush()
            wait_until(lambda: progress.churned() >= 20,  # ...and ends after 20 events
                       lambda: f"20 churn events (the simulator counted {progress.churned()})")
            sim.stdin.close()
            out = sim.stdout.read()
            sim.wait(PATIENCE)
        finally:
            if sim.poll() is None:
                sim.kill()
                sim.wait()
        err = progress.text()
        assert sim.returncode == 0, err[-2000:]
        report = json.loads(out)
        assert report["verify"] == [], report["verify"]
        churned = {k: v for k, v in report["counts"].items() if k.startswith("churn")}
        assert sum(churned.values()) >= 20, report["counts"]
        assert report["verified"]["brokers_up"] < 200 and report["verified"]["topics"] > 250
        for addr, row in report["namesrv"].items():   # every broker registered at each, at least
            assert row["ok"] >= 200 and row["failed"] == 0 and row["p99_ms"] is not None, row
        assert re.search(r"\] live \d+/200  registrations \d+", err), err[-2000:]
        for server in (one, two):  # the brokers unregistered when the simulation ended
            assert cluster_members(server.port) == {}


def _free_base_port(brokers):
    """A port p with p, p+2, ... free on 127.0.0.1 (the brokers' listen ports), as far as a
    bind now can tell."""
    import socket
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + 2 * brokers > 65535:
            continue
        socks = []
        try:
            for i in range(brokers):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", base + 2 * i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free run of ports")


def _admin(*argv):
    proc = subprocess.run([sys.executable, "-m", "rocketpy.admin.cli", *argv], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    return proc.returncode, proc.stdout, proc.stderr


def _simulator(addr, *args):
    """A simulator; with ``--until-stdin-closes`` among ``args`` it runs until its stdin is
    closed (``p.stdin.close()``)."""
    return subprocess.Popen([sys.executable, "-m", "rocketpy.broker.simcli", "-n", addr, *args],
                            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.PIPE if "--until-stdin-closes" in args
                            else subprocess.DEVNULL)


def _wait_members(port, names):
    members = {}

    def registered():
        members.update(cluster_members(port))
        return names <= set(members)
    wait_until(registered, lambda: f"{sorted(names)} registered: {sorted(members)}", step=0.2)
    return cluster_members(port)


def test_listening_brokers_answer_cluster_list_delete_topic_and_topic_list():
    """``--listen``: clusterList, deleteTopic and topicList -c succeed against a simulated
    cluster (before: every broker request refused, one error line per broker, status 1)."""
    with running_server() as server:
        base = _free_base_port(4)
        sim = _simulator(server.addr, "--brokers", "4", "--replicas", "2", "--topics", "3",
                         "--period", "2", "--ramp", "0", "--duration", "900", "--progress", "0",
                         "--base-port", str(base), "--listen")     # stopped below (Ctrl-C)
        try:
            _wait_members(server.port, {"broker-0", "broker-1"})
            n = ["-n", server.addr]
            status, out, err = _admin("clusterList", *n)
            assert (status, err) == (0, ""), err
            rows = [line.split() for line in out.splitlines()[1:]]
            assert sorted((r[1], r[2], r[3], r[4]) for r in rows) == [
                (f"broker-{g}", str(i), f"127.0.0.1:{base + 2 * (2 * g + i)}", "V4_9_8")
                for g in (0, 1) for i in (0, 1)]
            status, out, err = _admin("topicList", "-c", *n)
            assert (status, err) == (0, "")
            assert any(line.split()[:2] == ["DefaultCluster", "SimTopic-0"] for line in out.splitlines())
            status, out, err = _admin("deleteTopic", "-t", "SimTopic-0", "-c", "DefaultCluster", *n)
            assert (status, err) == (0, ""), err
            assert out == ("delete topic [SimTopic-0] from cluster [DefaultCluster] success.\n"
                           "delete topic [SimTopic-0] from NameServer success.\n")
            time.sleep(4.5)   # two registration periods: the master no longer registers it
            assert route_codes(server.port, ["SimTopic-0", "SimTopic-1"]) == {
                "SimTopic-0": 17, "SimTopic-1": 0}
            sim.send_signal(__import__("signal").SIGINT)
            out, err = sim.communicate(timeout=PATIENCE)
        finally:
            if sim.poll() is None:
                sim.kill()
                sim.wait()
        assert sim.returncode == 0, err[-2000:]
        # the brokers stopped listening with the simulator
        status, _, err = _admin("clusterList", "-n", server.addr)
        assert status == 0 and err == ""


def test_two_simulators_keep_apart_and_failures_exit_1():
    with running_server() as server:
        first_base, second_base = 21911, 22911   # addresses only: nothing listens
        first = _simulator(server.addr, "--brokers", "2", "--topics", "2", "--period", "1",
                           "--ramp", "0", "--until-stdin-closes", "--progress", "0",
                           "--base-port", str(first_base), "--verify", "--settle", "60")
        second = _simulator(server.addr, "--brokers", "2", "--topics", "2", "--period", "1",
                            "--ramp", "0", "--until-stdin-closes", "--progress", "0",
                            "--base-port", str(second_base), "--broker-prefix", "other-",
                            "--verify", "--settle", "60")
        try:
            members = _wait_members(server.port, {"broker-0", "broker-1", "other-0", "other-1"})
            assert members["other-0"] == {0: f"127.0.0.1:{second_base}"}
            results = [p.communicate(timeout=PATIENCE) for p in (first, second)]   # stdin closed
        finally:
            for p in (first, second):
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for p, (out, err) in zip((first, second), results):
            assert p.returncode == 0, err[-2000:]
            assert "verify: consistent (2 brokers up" in out

    # nothing listens at the NameServer's address: every registration fails, status 1
    sim = _simulator("127.0.0.1:1", "--brokers", "2", "--period", "1", "--ramp", "0",
                     "--duration", "2", "--progress", "0")
    out, err = sim.communicate(timeout=60)
    assert sim.returncode == 1
    [line] = err.splitlines()
    assert line.startswith("rocketpy-brokersim: ") and " registrations failed (last error: " \
        "127.0.0.1:1: connect to 127.0.0.1:1 failed" in line


def test_a_listen_port_in_use_is_one_line_and_status_1():
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        sim = _simulator("127.0.0.1:1", "--brokers", "1", "--base-port", str(port), "--listen",
                         "--duration", "5", "--progress", "0")
        out, err = sim.communicate(timeout=60)
    assert sim.returncode == 1
    assert err.startswith(f"rocketpy-brokersim: Couldn't listen on 127.0.0.1:{port}: ")
    assert len(err.splitlines()) == 1, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopped_early_after_failed_registrations_is_status_1_with_its_line(signum):
    """Ctrl-C or SIGTERM once registrations have failed (issue 30): the report, the same error
    line as a run that ends by itself, status 1 (it was 0, with no line)."""
    sim = _simulator("127.0.0.1:1", "--brokers", "2", "--ramp", "0", "--duration", "600",
                     "--progress", "0.2")
    try:
        for line in sim.stderr:   # progress lines: wait for the first failed registrations
            if re.search(r"errors [1-9]", line):
                break
        sim.send_signal(signum)
        out, err = sim.communicate(timeout=60)
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.wait()
    assert sim.returncode == 1
    assert "errors: registration: connect " in out
    [line] = [ln for ln in err.splitlines() if not ln.startswith("[")]   # not a progress line
    assert re.fullmatch(r"rocketpy-brokersim: (\d+) of \1 registrations failed \(last error: "
                        r"127\.0\.0\.1:1: connect to 127\.0\.0\.1:1 failed: .*\)", line), line
