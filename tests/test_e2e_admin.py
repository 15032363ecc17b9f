"""End to end: every ``rocketpy-admin`` command, as a subprocess, against ``twistd -n
rocketnamesrv`` subprocesses on 127.0.0.1, with a broker registered whose address is a live
stand-in broker (statistics, consumer groups, topic deletion). Two NameServers for ``-n "a;b"``;
ACL signing against a NameServer with ``aclEnable``.
"""
import json
import os
import subprocess
import sys
import zlib

import pytest

from brokerbody import register_body
from fakebroker import FakeBroker
from serverproc import REPO_ROOT, RemotingClient, running_server

pytestmark = pytest.mark.network


class AdminBroker(FakeBroker):
    """The stand-in broker answering mqadmin's three broker requests like a broker."""

    def _answer(self, request, peer):
        response = super()._answer(request, peer)
        if request.code == 28:
            response.body = (b'{"table":{"brokerVersionDesc":"V4_9_8","putTps":"12.5 12.5 12.5",'
                             b'"getTransferedTps":"3.25","sendThreadPoolQueueSize":"0",'
                             b'"sendThreadPoolQueueHeadWaitTimeMills":"0","pullThreadPoolQueueSize":"0",'
                             b'"pullThreadPoolQueueHeadWaitTimeMills":"0","pageCacheLockTimeMills":"0",'
                             b'"commitLogDiskRatio":"0.25"}}')
        elif request.code == 300:
            response.body = b'{"groupList":["GID_e2e"]}'
        return response


def admin(*argv, env=None):
    """Run rocketpy-admin; ``(status, stdout, stderr)``."""
    full_env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    full_env.pop("ROCKETMQ_HOME", None)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "rocketpy.admin.cli", *argv], env=full_env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_command_failing_before_its_first_request_exits_with_one_line():
    # the reactor was stopped before it ran: the error line, then a hang (and ReactorNotRunning)
    for argv, message in [
        (["updateOrderConf", "-t", "T", "-m", "bogus"], "unknown method 'bogus': put, get or delete"),
        (["updateOrderConf", "-t", "T", "-m", "put"], "please set orderConf with option -v."),
        (["clusterList", "-i", "abc"], "-i: 'abc' is not a number of seconds"),
        (["clusterList", "-i", "0"], "-i: '0' is not a number of seconds"),
        (["clusterList", "-i", "-5"], "-i: '-5' is not a number of seconds")]:
        proc = subprocess.run([sys.executable, "-m", "rocketpy.admin.cli", *argv, "-n", "127.0.0.1:1"],
                              env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), capture_output=True,
                              text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert (proc.returncode, proc.stdout) == (1, ""), argv
        assert proc.stderr == f"rocketpy-admin {argv[0]}: {message}\n", argv


def register(port, broker_addr, topics=("TopicA", "TopicB"), broker_name="broker-a"):
    conn = RemotingClient(port)
    body = register_body(topics, queues=4)
    answer = conn.call(103, {"brokerName": broker_name, "brokerAddr": broker_addr,
                             "clusterName": "DefaultCluster", "haServerAddr": "127.0.0.1:10912",
                             "brokerId": "0", "compressed": "false",
                             "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, body, version=409)
    assert answer.code == 0
    return conn


@pytest.fixture(scope="module")
def world():
    with running_server() as one, running_server() as two, AdminBroker() as broker:
        conns = [register(server.port, broker.addr) for server in (one, two)]
        yield one, two, broker
        for conn in conns:
            conn.close()


def test_every_command_against_a_real_nameserver(world):
    one, two, broker = world
    n = ["-n", one.addr]

    status, out, err = admin("clusterList", *n)
    assert (status, err) == (0, "")
    row = out.splitlines()[1].split()
    assert row[:5] == ["DefaultCluster", "broker-a", "0", broker.addr, "V4_9_8"]
    assert row[5] == "12.50(0,0ms)" and row[6] == "3.25(0,0ms)" and row[-1] == "0.2500"

    status, out, _ = admin("topicRoute", "-t", "TopicA", *n)
    assert status == 0 and f'"brokerAddrs":{{0:"{broker.addr}"' in out and '"readQueueNums":4' in out
    status, out, _ = admin("topicRoute", "-t", "TopicA", "-l", *n)
    assert status == 0 and out.splitlines()[-1].split() == ["Total:", "1", "4", "4"]

    status, out, _ = admin("topicList", *n)
    assert (status, sorted(out.split())) == (0, ["TopicA", "TopicB"])
    status, out, _ = admin("topicList", "-c", *n)
    assert status == 0 and ["DefaultCluster", "TopicA", "GID_e2e"] in [line.split() for line in out.splitlines()]
    status, out, _ = admin("topicClusterList", "-t", "TopicB", *n)
    assert (status, out) == (0, "DefaultCluster\n")

    status, out, _ = admin("getNamesrvConfig", *n)
    assert status == 0 and out.startswith(f"============{one.addr}============\n")
    assert "%-50s=  %s" % ("orderMessageEnable", "false") in out.splitlines()
    status, out, _ = admin("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true", *n)
    assert (status, out) == (0, f"update name server config success![{one.addr}]\norderMessageEnable : true\n")
    assert "%-50s=  %s" % ("orderMessageEnable", "true") in admin("getNamesrvConfig", *n)[1].splitlines()

    assert admin("updateKvConfig", "-s", "ns1", "-k", "k1", "-v", "v1", *n)[:2] == (
        0, "create or update kv config to namespace success.\n")
    assert admin("getKvConfig", "-s", "ns1", "-k", "k1", *n)[:2] == (0, "v1\n")
    assert admin("getKvListByNamespace", "-s", "ns1", *n)[:2] == (0, "%-50s=  %s\n" % ("k1", "v1"))
    assert admin("deleteKvConfig", "-s", "ns1", "-k", "k1", *n)[:2] == (
        0, "delete kv config from namespace success.\n")
    status, _, err = admin("getKvConfig", "-s", "ns1", "-k", "k1", *n)
    assert status == 1 and err.startswith("rocketpy-admin getKvConfig: CODE: 22") and err.count("\n") == 1

    status, out, _ = admin("wipeWritePerm", "-b", "broker-a", *n)
    assert (status, out) == (0, f"wipe write perm of broker[broker-a] in name server[{one.addr}] OK, 2\n")
    assert '"perm":4' in admin("topicRoute", "-t", "TopicA", *n)[1]
    status, out, _ = admin("addWritePerm", "-b", "broker-a", *n)
    assert (status, out) == (0, f"add write perm of broker[broker-a] in name server[{one.addr}] OK, 2\n")
    assert '"perm":6' in admin("topicRoute", "-t", "TopicA", *n)[1]

    assert admin("updateOrderConf", "-t", "TopicA", "-m", "put", "-v", "broker-a:4", *n)[:2] == (
        0, "update orderConf success. topic=[TopicA], orderConf=[broker-a:4]")
    assert admin("updateOrderConf", "-t", "TopicA", "-m", "get", *n)[:2] == (
        0, "get orderConf success. topic=[TopicA], orderConf=[broker-a:4] ")
    assert admin("updateOrderConf", "-t", "TopicA", "-m", "delete", *n)[:2] == (
        0, "delete orderConf success. topic=[TopicA]")

    status, out, _ = admin("deleteTopic", "-t", "TopicB", "-c", "DefaultCluster", *n)
    assert (status, out) == (0, "delete topic [TopicB] from cluster [DefaultCluster] success.\n"
                                "delete topic [TopicB] from NameServer success.\n")
    assert [r["ext_fields"]["topic"] for r in broker.requests if r["code"] == 215] == ["TopicB"]
    status, _, err = admin("topicRoute", "-t", "TopicB", *n)
    assert status == 1 and "CODE: 17 (TOPIC_NOT_EXIST)" in err


def test_two_nameservers_and_json(world):
    one, two, _ = world
    both = ["-n", f"{one.addr};{two.addr}"]
    assert admin("updateKvConfig", "-s", "ns2", "-k", "k", "-v", "both", *both)[0] == 0
    for server in (one, two):
        assert admin("getKvConfig", "-s", "ns2", "-k", "k", "-n", server.addr)[:2] == (0, "both\n")
    status, out, _ = admin("getNamesrvConfig", "--json", *both)
    assert status == 0 and set(json.loads(out)) == {one.addr, two.addr}
    status, out, _ = admin("wipeWritePerm", "-b", "broker-a", "--json", *both)
    counts = json.loads(out)
    assert status == 0 and set(counts) == {one.addr, two.addr}
    assert all(count == len(admin("topicList", "-n", addr)[1].split()) for addr, count in counts.items())
    admin("addWritePerm", "-b", "broker-a", *both)
    status, out, err = admin("topicList", "-n", f"127.0.0.1:1;{one.addr}")  # one refuses: the other
    assert status == 0 and "TopicA" in out


def test_errors_are_one_line_with_status_1(world):
    status, out, err = admin("clusterList", "-n", "127.0.0.1:1")
    assert (status, out) == (1, "")
    assert err.startswith("rocketpy-admin clusterList: connect to 127.0.0.1:1 failed") and err.count("\n") == 1
    assert admin("topicRoute", "-n", world[0].addr)[::2] == (1, "rocketpy-admin topicRoute: Missing required option: t\n")


def test_acl_signing(tmp_path):
    accounts = tmp_path / "plain_acl.yml"
    accounts.write_text("accounts:\n  - accessKey: rocketmq2\n    secretKey: 12345678\n    admin: true\n")
    with running_server("-D", "aclEnable=true", "-D", f"aclConfigPath={accounts}") as server:
        n = ["-n", server.addr]
        status, _, err = admin("updateKvConfig", "-s", "ns", "-k", "k", "-v", "v", *n)
        assert status == 1 and "CODE: 16 (NO_PERMISSION)" in err and err.count("\n") == 1
        keys = ["--accessKey", "rocketmq2", "--secretKey", "12345678"]
        assert admin("updateKvConfig", "-s", "ns", "-k", "k", "-v", "v", *n, *keys)[0] == 0
        status, _, err = admin("updateKvConfig", "-s", "ns", "-k", "k", "-v", "v", *n,
                               "--accessKey", "rocketmq2", "--secretKey", "wrong")
        assert status == 1 and "Check signature failed" in err
        home = tmp_path / "rmqhome"
        (home / "conf").mkdir(parents=True)
        (home / "conf" / "tools.yml").write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
        assert admin("deleteKvConfig", "-s", "ns", "-k", "k", *n,
                     env={"ROCKETMQ_HOME": str(home)})[0] == 0


def test_compare_namesrv_finds_where_two_nameservers_diverge():
    with running_server() as one, running_server() as two:
        n = ["-n", f"{one.addr};{two.addr}"]
        conns = [register(server.port, "127.0.0.1:30911") for server in (one, two)]
        status, out, err = admin("compareNamesrv", *n)
        assert (status, err) == (0, "")
        head, row_one, row_two, verdict = out.splitlines()
        assert row_one.split()[1:] == row_two.split()[1:] and row_one.split()[1:4] == ["1", "1", "2"]
        assert verdict == "2 NameServers agree."

        # broker-b registers with the first NameServer only (a partial registration)
        conns.append(register(one.port, "127.0.0.1:30921", ("TopicB", "TopicC"), "broker-b"))
        status, out, err = admin("compareNamesrv", *n)
        assert status == 1
        assert err == ("rocketpy-admin compareNamesrv: the NameServers diverge: 1 cluster, "
                       "1 broker, 2 topics differ\n")
        lines = out.splitlines()
        assert lines[1].split()[1:4] == ["1", "2", "3"] and lines[2].split()[1:4] == ["1", "1", "2"]
        width = max(len(one.addr), len(two.addr))
        assert lines[3:] == [
            "cluster DefaultCluster differs:",
            f"  {one.addr:<{width}}  broker-a broker-b",
            f"  {two.addr:<{width}}  broker-a",
            "broker broker-b differs:",
            f"  {one.addr:<{width}}  cluster DefaultCluster 0=127.0.0.1:30921",
            f"  {two.addr:<{width}}  (absent)",
            "topic TopicB differs:",
            f"  {one.addr:<{width}}  broker-a r4 w4 p6; broker-b r4 w4 p6",
            f"  {two.addr:<{width}}  broker-a r4 w4 p6",
            "topic TopicC differs:",
            f"  {one.addr:<{width}}  broker-b r4 w4 p6",
            f"  {two.addr:<{width}}  (absent)",
            "2 NameServers diverge: 1 cluster, 1 broker, 2 topics differ."]

        status, out, _ = admin("compareNamesrv", *n, "--json")
        result = json.loads(out)
        assert status == 1 and result["consistent"] is False
        assert [(d["kind"], d["name"]) for d in result["differences"]] == [
            ("cluster", "DefaultCluster"), ("broker", "broker-b"), ("topic", "TopicB"),
            ("topic", "TopicC")]
        assert result["differences"][3]["values"] == {one.addr: "broker-b r4 w4 p6", two.addr: None}

        # a NameServer that cannot be read is one error line and fails the command
        status, out, err = admin("compareNamesrv", "-n", f"{one.addr};127.0.0.1:1")
        assert status == 1 and out.splitlines()[2] == f"{'127.0.0.1:1':<24} unreadable"
        assert err.startswith("rocketpy-admin compareNamesrv: 127.0.0.1:1: connect to 127.0.0.1:1")
        for conn in conns:
            conn.close()
