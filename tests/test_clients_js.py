"""The pure-JavaScript ``ali-ons@3.12.0`` producer (npm) against our NameServer.

Real sockets on 127.0.0.1 only: our NameServer runs as ``twistd -n rocketnamesrv`` (via
``serverproc``), a genuine broker's registrations are replayed to it pointing at a
``FakeBroker`` (``clientutil``, which also explains the two worlds), and
``node tests/clients/ons_producer.js`` sends one message.

ali-ons sends ``version:121`` (``language:"JAVA"``), so our route answers it in fastjson's
legacy form, which its ``JSON2.parse`` accepts; it must then connect to the broker address in
that route and send SEND_MESSAGE_V2 (310, one-letter header fields).  For a topic with no route
it throws ``MQClientException`` with the NameServer's code (17) and remark verbatim, whether or
not ``TBW102`` has a route: its first lookup throws before any fallback
(``MQProducer.tryToFindTopicPublishInfo``).

ali-ons is installed with ``npm ci`` in ``tests/clients`` (see .ci/run); without node or that
install these tests fail, they do not skip.
"""
import re
import urllib.request
import uuid

import pytest

import serverproc
import workersutil
from rocketpy.namesrv.profile import profile_for
from rocketpy.remoting.codes import LanguageCode, RequestCode, ResponseCode
from clientutil import (CLIENTS, TOPIC, WORLDS, query_route, registered_fake_broker, run_client,
                        tool)

pytestmark = pytest.mark.network

DRIVER = CLIENTS / "ons_producer.js"
ONS_VERSION, JAVA = 121, LanguageCode.JAVA          # what ali-ons 3.12.0 sends
RUN_TIMEOUT = serverproc.PATIENCE
NO_ROUTE_REMARK = ("No topic route info in name server for the topic: {}\n"
                   "See {} for further details.")   # the FAQ page moved in Java 5.1


@pytest.fixture(scope="module", params=WORLDS, ids=str)
def setup(request):
    node = tool("node")
    assert (CLIENTS / "node_modules" / "ali-ons" / "package.json").is_file(), (
        f"ali-ons is not installed: run `npm ci` in {CLIENTS} (see .ci/run)")
    world = request.param
    with serverproc.running_server("--web=tcp:0:interface=127.0.0.1", *world.server_args) as server, \
            registered_fake_broker(server.port, world.capture) as broker:
        yield node, server, broker, world


def _route_lookups_not_found(server, world):
    """GET_ROUTEINFO_BY_TOPIC requests the server answered TOPIC_NOT_EXIST so far (its
    ``/metrics``, every process's: with workers, once each has reported after this call)."""
    if world.processes > 1:
        since = {w["worker"]: w["reports"] for w in workersutil.api(server, "/api/workers")
                 ["workers"] if w["role"] == "replica"}
        serverproc.wait_until(lambda: all(
            w["reports"] >= since[w["worker"]] + 2 for w in workersutil.api(
                server, "/api/workers")["workers"] if w["role"] == "replica"),
            "a report of every worker made after the client ended")
    with urllib.request.urlopen(f"{workersutil.web_url(server)}/metrics",
                                timeout=serverproc.PATIENCE) as answer:
        text = answer.read().decode()
    return sum(int(float(n)) for n in re.findall(
        r'^rocketpy_requests_total\{request_code="GET_ROUTEINFO_BY_TOPIC",'
        r'response_code="TOPIC_NOT_EXIST"(?:,worker="\d+")?\} (\S+)$', text, re.M))


def ons_send(node, server, topic, body):
    return run_client([node, str(DRIVER), server.addr, topic, body],
                      timeout=RUN_TIMEOUT, cwd=CLIENTS)


def test_route_answer_is_legacy_json_for_ali_ons(setup):
    _, server, broker, _ = setup
    response = query_route(server.port, TOPIC, version=ONS_VERSION, language=JAVA)
    assert response.code == 0, response.remark
    assert b'"brokerAddrs":{0:"%s"}' % broker.addr.encode() in response.body


def test_send_goes_to_the_broker_in_our_route(setup):
    node, server, broker, _ = setup
    body = f"rocketpy-js-{uuid.uuid4().hex}"
    result = ons_send(node, server, TOPIC, body)
    assert result["ok"], f"send failed: {result}\nserver log:\n{server.log_text()[-3000:]}"
    assert result["sendStatus"] == "SEND_OK"
    assert result["brokerName"] == "broker-a"
    sends = [r for r in broker.sends() if r["body"] == body]
    assert len(sends) == 1, broker.requests
    sent = sends[0]
    assert sent["code"] == RequestCode.SEND_MESSAGE_V2
    assert sent["topic"] == TOPIC
    assert sent["language"] == JAVA and sent["version"] == ONS_VERSION
    assert sent["ext_fields"]["a"] == "PID-rocketpy-js"
    queues = broker.registered_topics[TOPIC]["writeQueueNums"]
    assert int(sent["ext_fields"]["e"]) in range(queues)      # e: queueId
    assert result["msgId"] == sent["reply"]["msgId"]


def test_unknown_topic_fails_with_no_route(setup):
    node, server, broker, world = setup
    topic = f"RocketpyNoSuchTopic{uuid.uuid4().hex[:8]}"
    before = _route_lookups_not_found(server, world)
    result = ons_send(node, server, topic, "never-sent")
    assert not result["ok"], result
    assert result["name"] == "MQClientException" and result["code"] == ResponseCode.TOPIC_NOT_EXIST, result
    faq = profile_for(world.profile).topic_not_exist_faq_url
    assert result["message"] == NO_ROUTE_REMARK.format(topic, faq)
    # it threw at its first lookup: one route query answered TOPIC_NOT_EXIST, no retry
    assert _route_lookups_not_found(server, world) - before == 1
    assert not [r for r in broker.sends() if r["topic"] == topic]
