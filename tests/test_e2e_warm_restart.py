"""End to end (issue 34): a real ``twistd rocketnamesrv`` restarted -- SIGTERM then start, and
``kill -9`` then start -- with ``routeSnapshotPath`` answers its broker's route from its first
connection, byte for byte as before, where without it (as Java) it answers TOPIC_NOT_EXIST until
the broker registers again; ``--warm-from`` takes a peer's tables; ``/healthz`` and ``/readyz``
answer with the codes Kubernetes reads. Each test stops its servers."""
import json
import re
import time
import urllib.error
import urllib.request
import zlib

import pytest

from brokerbody import register_body
from serverproc import RemotingClient, running_server

pytestmark = pytest.mark.network

WEB = "rocketpy web endpoint on (http://[\\d.]+:\\d+/)"


def register(port, topics=("TopicA", "TopicB")):
    client = RemotingClient(port)
    body = register_body(topics, 1)
    answer = client.call(103, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                               "clusterName": "DefaultCluster", "haServerAddr": "127.0.0.1:10912",
                               "brokerId": "0", "compressed": "false",
                               "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, body)
    assert answer.code == 0, answer
    return client


def route(port, topic="TopicA"):
    """The answer's code and body (the answer is asked on a new connection, as a new client)."""
    client = RemotingClient(port)
    try:
        answer = client.call(105, {"topic": topic})
        return answer.code, answer.body
    finally:
        client.close()


def http(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def web_url(server):
    return re.search(WEB, server.wait_for_log(WEB, timeout=10)).group(1)


def wait_written(server, writes=1, timeout=20.0):
    url = web_url(server) + "metrics"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = http(url)[1].decode()
        found = re.search(r"^rocketpy_route_snapshot_writes_total (\S+)", text, re.M)
        if found and float(found.group(1)) >= writes:
            return
        time.sleep(0.2)
    raise AssertionError("no route snapshot written")


@pytest.mark.parametrize("stop", ["SIGTERM", "kill -9"])
def test_a_restart_with_the_option_has_no_route_hole(tmp_path, stop):
    snapshot = f"--routeSnapshotPath={tmp_path}/routes.snap"
    web = "--web=tcp:0:interface=127.0.0.1"
    with running_server(snapshot, web) as first:
        broker = register(first.port)
        before = route(first.port)
        assert before[0] == 0
        if stop == "kill -9":
            wait_written(first)      # the periodic snapshot (every 5 s) is all a kill leaves
            first.kill()
        else:
            assert first.stop() == 0
        broker.close()
    with running_server(snapshot, web) as second:
        assert route(second.port) == before          # from the first connection on
        assert route(second.port, "TopicB")[0] == 0
        base = web_url(second)
        status, body = http(base + "readyz")
        assert (status, json.loads(body)["ready"]) == (200, True)
        assert http(base + "healthz")[0] == 200
        assert "rocketpy_provisional_brokers 1.0" in http(base + "metrics")[1].decode()
        assert second.wait_for_log("route snapshot loaded from the file: 2 topics")


def test_a_restart_without_the_option_answers_topic_not_exist_as_java(tmp_path):
    with running_server() as first:
        broker = register(first.port)
        assert route(first.port)[0] == 0
        broker.close()
    with running_server() as second:
        assert route(second.port)[0] == 17    # TOPIC_NOT_EXIST until the broker registers


def test_warm_from_a_peer_takes_its_tables(tmp_path):
    with running_server("--web=tcp:0:interface=127.0.0.1") as peer:
        broker = register(peer.port)
        before = route(peer.port)
        with running_server(f"--warm-from={web_url(peer)}") as second:
            assert route(second.port) == before
            assert second.wait_for_log("route snapshot loaded from the peer: 2 topics")
        broker.close()


def test_warm_from_an_unreachable_peer_starts_empty_with_one_line(tmp_path):
    with running_server("--warm-from=http://127.0.0.1:9/") as second:
        assert route(second.port)[0] == 17
        line = second.wait_for_log("route snapshot from the peer ignored")
        assert "cannot ask the peer" in line


def test_probes_answer_outside_admin_allow_networks():
    """Kubernetes probes come from the node: /healthz and /readyz answer whoever asks, the
    rest of the endpoint stays behind adminAllowNetworks."""
    with running_server("--web=tcp:0:interface=127.0.0.1", "-D",
                        "adminAllowNetworks=10.9.9.0/24") as server:
        base = web_url(server)
        assert http(base + "healthz")[0] == 200
        assert http(base + "readyz")[0] == 200
        assert http(base + "metrics")[0] == 403
        assert http(base + "api/route-snapshot")[0] == 403
