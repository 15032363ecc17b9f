"""End to end (issue 12, part 3): the route state is bounded server-wide, and its memory goes
back once the brokers leave.

A real ``twistd rocketnamesrv`` with ``namesrvMaxTopicBrokerPairs=50000``: a flood of
registrations, each a new broker with 10,000 new topics, is accepted up to the bound and
refused past it with SYSTEM_ERROR naming the bound, the tables never hold more, the refusals
are counted on ``/metrics``, and route queries are answered throughout. When the flooding
brokers disconnect, the server releases the memory and says so. The resident size is printed
(``bench/route_memory.py`` measures it at 1 M entries).
"""
import json
import re
import urllib.request

import pytest

from brokerbody import flood_registration
from serverproc import PATIENCE, RemotingClient, running_server
from test_e2e_server import register, rss_kib

pytestmark = pytest.mark.network

PER_BROKER = 10_000
BOUND = 50_000


def _topic_count(port):
    client = RemotingClient(port)
    try:
        answer = client.call(206)
        return len(json.loads(answer.body)["topicList"])
    finally:
        client.close()


def test_registration_flood_past_the_bound_is_refused_and_memory_released():
    with running_server("-D", f"namesrvMaxTopicBrokerPairs={BOUND}",
                        "--web=tcp:0:interface=127.0.0.1") as server:
        web = server.wait_for_log(r"rocketpy web endpoint on (http://\S+)")
        url = re.search(r"(http://\S+?)/? ", web + " ").group(1)
        broker = RemotingClient(server.port)
        register(broker)
        before = rss_kib(server.proc.pid)
        floods, answers = [], []
        for index in range(8):
            client = RemotingClient(server.port)
            floods.append(client)
            answers.append(client.call(103, *flood_registration(index, PER_BROKER)))
            route = RemotingClient(server.port)
            assert route.call(105, {"topic": "TopicA"}).code == 0     # served throughout
            route.close()
        peak = rss_kib(server.proc.pid)
        accepted = [a for a in answers if a.code == 0]
        refused = [a for a in answers if a.code != 0]
        assert len(accepted) == BOUND // PER_BROKER - 1                # TopicA/B take 2 pairs
        assert {a.code for a in refused} == {1}
        assert refused[0].remark == (
            "[REFUSED] the route table would hold 50002 topic-broker pairs, over "
            f"namesrvMaxTopicBrokerPairs={BOUND}; nothing was applied")
        assert _topic_count(server.port) == 2 + len(accepted) * PER_BROKER
        metrics = urllib.request.urlopen(f"{url}/metrics", timeout=PATIENCE).read().decode()
        assert f'rocketpy_route_bound_refusals_total{{bound="namesrvMaxTopicBrokerPairs"}} ' \
               f'{float(len(refused))}' in metrics
        assert 'rocketpy_route_state{kind="topic_broker_pairs"} 40002.0' in metrics
        for client in floods:
            client.close()
        server.wait_for_log(r"memory released \(resident \d+ -> \d+ MiB\)")
        after = rss_kib(server.proc.pid)
        assert _topic_count(server.port) == 2
        broker.close()
        print(f"\nRSS before {before // 1024} MiB, peak {peak // 1024} MiB, after the flooding "
              f"brokers left {after // 1024} MiB")
