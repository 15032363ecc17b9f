"""Apache's C++ client (PyPI ``rocketmq==0.4.4``, client 1.0.1) against our NameServer.

Real sockets on 127.0.0.1 only: our NameServer runs as ``twistd -n rocketnamesrv`` (via
``serverproc``), a genuine broker's registrations are replayed to it pointing at a
``FakeBroker`` (``clientutil``, which also explains the two worlds), and the genuine client runs
in a subprocess (``send_sync`` blocks in C++, so never beside a reactor) with a temporary HOME
for its ``$HOME/logs``.

The C++ client sends ``version:63``, so our route answers it in fastjson's legacy form
(``"brokerAddrs":{0:"ip:port"}``); it must then connect to the broker address in that route
and send SEND_MESSAGE (10).  For a topic with no route it asks for the topic, then for the
default topic ``TBW102`` (``MQClientFactory::tryToFindTopicPublishInfo``): when both are
answered with code 17 it fails at once with "No route info of this topic"; when ``TBW102`` has
a route it sends the message through it, naming ``TBW102`` as ``defaultTopic``.

The wheel is built for x86_64 Linux only: elsewhere these tests fail (they do not skip), so a
CI machine that cannot run the genuine client is noticed.
"""
import platform
import sys
import uuid

import pytest

import serverproc
from extras import require
from rocketpy.remoting.codes import LanguageCode, RequestCode, ResponseCode
from clientutil import (CLIENTS, DEFAULT_TOPIC, TOPIC, WORLDS, RecordingProxy, query_route,
                        registered_fake_broker, run_client)

pytestmark = pytest.mark.network

DRIVER = CLIENTS / "cpp_producer.py"
CPP_VERSION, CPP_LANGUAGE = 63, LanguageCode.CPP    # what the C++ client 1.0.1 sends
#: the bound for one client run (a run against a NameServer that answers takes < 1 s): far
#: above any machine, only a client that hangs reaches it
RUN_TIMEOUT = serverproc.PATIENCE


@pytest.fixture(scope="module", params=WORLDS, ids=str)
def setup(request):
    assert platform.machine() in ("x86_64", "AMD64"), (
        f"PyPI rocketmq==0.4.4 bundles an x86_64 librocketmq.so; this machine is "
        f"{platform.machine()}")
    require("clients", "rocketmq")
    world = request.param
    with serverproc.running_server(*world.server_args) as server, \
            registered_fake_broker(server.port, world.capture) as broker:
        yield server, broker


def cpp_send(server, topic, body, namesrv=None):
    return run_client([sys.executable, str(DRIVER), namesrv or server.addr, topic, body],
                      timeout=RUN_TIMEOUT)


def test_route_answer_is_legacy_json_for_the_cpp_client(setup):
    server, broker = setup
    response = query_route(server.port, TOPIC, version=CPP_VERSION, language=CPP_LANGUAGE)
    assert response.code == 0, response.remark
    assert b'"brokerAddrs":{0:"%s"}' % broker.addr.encode() in response.body


def test_send_goes_to_the_broker_in_our_route(setup):
    server, broker = setup
    body = f"rocketpy-cpp-{uuid.uuid4().hex}"
    result = cpp_send(server, TOPIC, body)
    assert result["ok"], (f"send_sync failed: {result['error']}\n{result['stderr']}\n"
                          f"server log:\n{server.log_text()[-3000:]}")
    assert result["status"] == 0                                   # SendStatus.OK
    sends = [r for r in broker.sends() if r["body"] == body]
    assert len(sends) == 1, broker.requests
    sent = sends[0]
    assert sent["code"] == RequestCode.SEND_MESSAGE
    assert sent["topic"] == TOPIC
    assert sent["language"] == CPP_LANGUAGE and sent["version"] == CPP_VERSION
    assert sent["ext_fields"]["producerGroup"] == "PID-rocketpy-cpp"
    queues = broker.registered_topics[TOPIC]["writeQueueNums"]
    assert int(sent["ext_fields"]["queueId"]) in range(queues)
    # the message id the client reports is its own unique key, carried in the properties
    assert f"UNIQ_KEY\x01{result['msg_id']}\x02" in sent["ext_fields"]["properties"]


def test_unknown_topic(setup):
    server, broker = setup
    topic = f"RocketpyNoSuchTopic{uuid.uuid4().hex[:8]}"
    proxy = RecordingProxy(server.port)   # what the client asked the NameServer, and was told
    try:
        result = cpp_send(server, topic, "unknown-topic", namesrv=proxy.addr)
    finally:
        proxy.close()
    routes = {r.ext_fields["topic"]: a for r, a in proxy.exchanges()
              if r.code == RequestCode.GET_ROUTEINFO_BY_TOPIC}
    assert routes[topic] is not None and routes[topic].code == ResponseCode.TOPIC_NOT_EXIST, (
        "the NameServer did not answer the route query 17", routes)
    sent = [r for r in broker.sends() if r["topic"] == topic]
    if DEFAULT_TOPIC in broker.registered_topics:
        # the auto-create path: TBW102's route, at most 4 of its queues (C++ caps them)
        assert result["ok"], result
        assert len(sent) == 1 and sent[0]["ext_fields"]["defaultTopic"] == DEFAULT_TOPIC
        assert int(sent[0]["ext_fields"]["queueId"]) in range(4)
    else:
        assert routes[DEFAULT_TOPIC].code == ResponseCode.TOPIC_NOT_EXIST, routes
        assert not result["ok"], result
        assert result["error"].startswith(f"No route info of this topic: {topic}"), result
        assert not sent
