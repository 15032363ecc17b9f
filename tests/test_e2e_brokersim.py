"""End to end: ``rocketpy-brokersim`` (a subprocess) with 200 brokers against two ``twistd -n
rocketnamesrv`` subprocesses on 127.0.0.1: all 200 are in both NameServers' tables and every
topic is routed, then churn (kills, graceful restarts, new topics), then ``--verify`` finds both
NameServers consistent with the brokers that are up, and after the brokers' graceful stop both
tables are empty.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from rocketpy.remoting import fastjson
from serverproc import REPO_ROOT, RemotingClient, running_server

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


def test_200_brokers_two_nameservers_churn_then_consistent():
    with running_server() as one, running_server() as two:
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        sim = subprocess.Popen(
            [sys.executable, "-m", "rocketpy.broker.simcli", "-n", f"{one.addr};{two.addr}",
             "--brokers", "200", "--replicas", "2", "--clusters", "2", "--topics", "5",
             "--topic-spread", "2", "--period", "3", "--ramp", "1", "--churn", "240",
             "--churn-after", "8", "--down", "2", "--duration", "22", "--progress", "2",
             "--verify", "--settle", "2", "--seed", "7", "--json"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 7.5
            counts = {}
            while time.monotonic() < deadline:
                counts = {s.port: sum(len(m) for m in cluster_members(s.port).values())
                          for s in (one, two)}
                if all(n == 200 for n in counts.values()):
                    break
                time.sleep(0.25)
            assert counts == {one.port: 200, two.port: 200}
            topics = [f"SimTopic-{i}" for i in range(250)] + ["TBW102", "broker-0", "broker-99"]
            for server in (one, two):
                assert set(route_codes(server.port, topics).values()) == {0}
            out, err = sim.communicate(timeout=120)
        finally:
            if sim.poll() is None:
                sim.kill()
                sim.wait()
        assert sim.returncode == 0, err[-2000:]
        report = json.loads(out)
        assert report["verify"] == [], report["verify"]
        churned = {k: v for k, v in report["counts"].items() if k.startswith("churn")}
        assert sum(churned.values()) >= 20, report["counts"]
        assert report["verified"]["brokers_up"] < 200 and report["verified"]["topics"] > 250
        for addr, row in report["namesrv"].items():
            assert row["ok"] > 1000 and row["failed"] == 0 and row["p99_ms"] is not None, row
        assert "[    2.0s] live" in err
        for server in (one, two):  # the brokers unregistered when the simulation ended
            assert cluster_members(server.port) == {}
