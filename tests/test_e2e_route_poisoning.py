"""End to end (issue 12, part 4): route poisoning refused.

A real ``twistd rocketnamesrv`` with ``brokerIdentityBinding=true`` and
``brokerAllowNetworks=127.0.0.1,127.0.0.2``. Peers connect from different loopback addresses
(127.0.0.1, .2, .3: different hosts as far as the server can tell; everything goes to
127.0.0.1). A genuine broker registers from 127.0.0.1; a peer on 127.0.0.2 can neither point
that broker's route at itself (REGISTER_BROKER with the same cluster, name and id), nor
unregister it, nor keep its address alive with heartbeats, while the genuine registration is
live; a peer on 127.0.0.3 cannot send broker requests at all. Clients' reads stay open to
everyone. Once the genuine broker's connection closes, the identity is free again.
"""
import json
import zlib

import pytest

from brokerbody import register_body
from serverproc import RemotingClient, running_server

pytestmark = pytest.mark.network

GENUINE, OTHER, OUTSIDE = "127.0.0.1", "127.0.0.2", "127.0.0.3"


def _register(client, addr, name="broker-a", broker_id="0", topics=("TopicA", "TopicB"),
              cluster="DefaultCluster"):
    body = register_body(topics, 1)
    return client.call(103, {"brokerName": name, "brokerAddr": addr, "clusterName": cluster,
                             "haServerAddr": addr, "brokerId": broker_id, "compressed": "false",
                             "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, body, version=413)


def _route_addrs(port, topic="TopicA"):
    client = RemotingClient(port, source=OUTSIDE)          # reads are open to anyone
    try:
        answer = client.call(105, {"topic": topic})
        if answer.code != 0:
            return answer.code
        route = json.loads(answer.body.decode().replace("{0:", '{"0":'))
        return sorted(addr for bd in route["brokerDatas"] for addr in bd["brokerAddrs"].values())
    finally:
        client.close()


def test_a_live_broker_cannot_be_poisoned_from_another_host():
    with running_server("-D", "brokerIdentityBinding=true",
                        "-D", f"brokerAllowNetworks={GENUINE},{OTHER}") as server:
        genuine = RemotingClient(server.port, source=GENUINE)
        assert _register(genuine, "127.0.0.1:10911").code == 0
        assert _route_addrs(server.port) == ["127.0.0.1:10911"]

        attacker = RemotingClient(server.port, source=OTHER)
        hijack = _register(attacker, "127.0.0.2:10911")
        assert hijack.code == 16, hijack
        assert hijack.remark.startswith("broker broker-a id 0 is held by 127.0.0.1 while its "
                                        "registration is live; refused request code 103 "
                                        "(REGISTER_BROKER) from 127.0.0.2"), hijack.remark
        takeover = _register(attacker, "127.0.0.1:10911", name="broker-evil")   # its address
        assert takeover.code == 16 and "broker address 127.0.0.1:10911" in takeover.remark
        unregister = attacker.call(104, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                                         "clusterName": "DefaultCluster", "brokerId": "0"})
        assert unregister.code == 16, unregister
        query = attacker.call(322, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                                    "clusterName": "DefaultCluster", "brokerId": "0"})
        assert query.code == 16, query
        assert _route_addrs(server.port) == ["127.0.0.1:10911"]

        # its own broker, from an allowed network: fine
        assert _register(attacker, "127.0.0.2:10911", name="broker-b", topics=("TopicB", "TopicC")).code == 0
        outsider = RemotingClient(server.port, source=OUTSIDE)
        refused = _register(outsider, "127.0.0.3:10911", name="broker-c")
        assert refused.code == 16 and refused.remark == (
            "request code 103 (REGISTER_BROKER) is a broker request and client 127.0.0.3 is not "
            "in brokerAllowNetworks"), refused.remark
        assert _route_addrs(server.port, "TopicC") == ["127.0.0.2:10911"]

        genuine.close()                                   # the genuine broker goes away...
        server.wait_for_log(r"broker's channel destroyed.*broker-a")
        for _ in range(100):
            if _route_addrs(server.port) == ["127.0.0.2:10911"]:
                break
            retry = _register(attacker, "127.0.0.2:10911")     # ...and its name is free again
            assert retry.code in (0, 16)
        assert _route_addrs(server.port) == ["127.0.0.2:10911"]
        for client in (attacker, outsider):
            client.close()


@pytest.mark.parametrize("profile", ["5.0", "5.3"])
def test_naming_another_cluster_or_an_unused_id_does_not_free_a_live_identity(profile):
    """Issue 20, item 1: in 5.x the live table is keyed by (cluster, address), so another
    cluster + the victim's address, name and an unused id got past the binding: an
    UNREGISTER_BROKER (id 99) removed the live broker and its topics (5.3), a REGISTER_BROKER
    (id 1) left its group without a master (5.0, 5.3). And a REGISTER_TOPIC_IN_NAMESRV from
    another host added a topic to the live group."""
    with running_server(f"--profile={profile}", "-D", "brokerIdentityBinding=true",
                        "-D", f"brokerAllowNetworks={GENUINE}/32,{OTHER}/32") as server:
        genuine = RemotingClient(server.port, source=GENUINE)
        attacker = RemotingClient(server.port, source=OTHER)
        try:
            assert _register(genuine, "127.0.0.1:10911").code == 0
            unregister = attacker.call(104, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                                             "clusterName": "OtherCluster", "brokerId": "99"})
            assert unregister.code == 16, unregister
            assert unregister.remark.startswith("broker address 127.0.0.1:10911 is held by "
                                                "127.0.0.1 while its registration is live"), unregister
            no_master = _register(attacker, "127.0.0.1:10911", broker_id="1", cluster="OtherCluster")
            assert no_master.code == 16, no_master
            # REGISTER_TOPIC_IN_NAMESRV adding a topic to the live group from another host
            topic_body = json.dumps({"brokerDatas": [], "queueDatas": [
                {"brokerName": "broker-a", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6,
                 "topicSysFlag": 0}]}).encode()
            hijack = attacker.call(217, {"topic": "Hijacked"}, topic_body)
            assert hijack.code == 16 and hijack.remark == (
                "broker broker-a is held by 127.0.0.1 while its registration is live; refused "
                "request code 217 (REGISTER_TOPIC_IN_NAMESRV) from 127.0.0.2 "
                "(brokerIdentityBinding)"), hijack
            assert _route_addrs(server.port, "Hijacked") == 17     # TOPIC_NOT_EXIST
            assert genuine.call(217, {"topic": "Own"}, topic_body).code == 0
            assert _route_addrs(server.port, "Own") == ["127.0.0.1:10911"]
            assert _route_addrs(server.port) == ["127.0.0.1:10911"]
            route = RemotingClient(server.port, source=OUTSIDE)
            try:
                answer = route.call(105, {"topic": "TopicA"})
                assert answer.code == 0, answer
                data = json.loads(answer.body.decode().replace("{0:", '{"0":'))
                assert [bd["brokerAddrs"] for bd in data["brokerDatas"]] == [{"0": "127.0.0.1:10911"}]
            finally:
                route.close()
        finally:
            genuine.close()
            attacker.close()
