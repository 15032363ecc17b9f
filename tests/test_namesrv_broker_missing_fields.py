"""REGISTER_BROKER and UNREGISTER_BROKER headers without a field, answered as each release's
source shows (Java's ``decodeCommandCustomHeader`` only logs a missing ``@CFNotNull`` field):

* without ``brokerId`` the processor unboxes the header's null ``Long`` for the route manager's
  ``long``: SYSTEM_ERROR with the NullPointerException (DefaultRequestProcessor.java:252 at
  4.9.8, :239 at 5.0.0, :253 at 5.3.3; UNREGISTER_BROKER :359 at 4.9.8), nothing changed;
* without a cluster, address or name ``registerBroker`` catches what it throws (5.x) or files
  the broker under null keys (4.9.8): SUCCESS, and rocketpy registers nothing;
* 5.x queues an unregistration and answers SUCCESS; ``BatchUnregistrationService`` then throws
  on the malformed one and loses the rest of its batch, where rocketpy skips that one alone.

Before, each was SYSTEM_ERROR "the custom field <...> is null"."""
import logging

import pytest

from processorutil import call, make, register, register_body
from rocketpy.namesrv.processor.registration import PLAIN_INLINE_MAX
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53
from rocketpy.remoting import fastjson
from rocketpy.remoting.codes import RequestCode, ResponseCode

PROFILES = [PROFILE_49, PROFILE_50, PROFILE_53]
FIELDS = {"brokerName": "broker-b", "brokerAddr": "127.0.0.1:10921", "clusterName": "C",
          "haServerAddr": "ha", "brokerId": "0", "compressed": "false", "bodyCrc32": "0"}
#: (package, method, line) of the unboxing in each release's DefaultRequestProcessor
REGISTER_SITE = {"4.9": ("common", "registerBrokerWithFilterServer", 252),
                 "5.0": ("common", "registerBroker", 239),
                 "5.3": ("remoting", "registerBroker", 253)}


def _npe(package, header, method, line):
    return ('java.lang.NullPointerException: Cannot invoke "java.lang.Long.longValue()" because '
            f'the return value of "org.apache.rocketmq.{package}.protocol.header.namesrv.{header}'
            f'.getBrokerId()" is null, org.apache.rocketmq.namesrv.processor.'
            f"DefaultRequestProcessor.{method}(DefaultRequestProcessor.java:{line})")


def _without(field, **more):
    fields = dict(FIELDS, **more)
    del fields[field]
    return fields


def _route(proc, topic):
    return call(proc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
@pytest.mark.parametrize("field", ["brokerId", "clusterName", "brokerAddr", "brokerName"])
@pytest.mark.parametrize("more", [0, 400], ids=["small body", "body decoded by a Pending"])
def test_registration_without_a_field_answers_as_java_and_registers_nothing(tmp_path, profile,
                                                                            field, more):
    proc = make(tmp_path, profile)
    assert register(proc, topics=("T1", "T3"), version=profile.server_version).code == 0
    before = _route(proc, "T1").body
    body = register_body("T9", "T1", *(f"X{i}" for i in range(more)))
    assert (len(body) > PLAIN_INLINE_MAX) is bool(more)
    answer = call(proc, RequestCode.REGISTER_BROKER, _without(field), body,
                  version=profile.server_version)
    if field == "brokerId":
        package, method, line = REGISTER_SITE[profile.name]
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, _npe(
            package, "RegisterBrokerRequestHeader", method, line))
    else:
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
        assert not (answer.ext_fields or {}).get("masterAddr")
    assert _route(proc, "T9").code == ResponseCode.TOPIC_NOT_EXIST
    assert _route(proc, "T1").body == before
    cluster = fastjson.loads(call(proc, RequestCode.GET_BROKER_CLUSTER_INFO).body)
    assert list(cluster["brokerAddrTable"]) == ["broker-a"]
    assert cluster["clusterAddrTable"] == {"C": ["broker-a"]}
    assert len(proc.reader.cache._last) == 1   # the body registered nothing: not kept


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_registration_without_ha_server_addr_registers(tmp_path, profile):
    """``haServerAddr`` is only stored: Java registers the broker with a null one."""
    proc = make(tmp_path, profile)
    answer = call(proc, RequestCode.REGISTER_BROKER, _without("haServerAddr"),
                  register_body("T9", "T8"), version=profile.server_version)
    assert answer.code == ResponseCode.SUCCESS
    assert _route(proc, "T9").code == ResponseCode.SUCCESS


def test_4_9_unregistration_without_broker_id_answers_the_unboxing_exception(tmp_path):
    proc = make(tmp_path, PROFILE_49)
    assert register(proc, topics=("T1", "T3"), version=409).code == 0
    answer = call(proc, RequestCode.UNREGISTER_BROKER,
                  _without("brokerId", brokerName="broker-a", brokerAddr="127.0.0.1:10911"))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, _npe(
        "common", "UnRegisterBrokerRequestHeader", "unregisterBroker", 359))
    assert _route(proc, "T1").code == ResponseCode.SUCCESS


@pytest.mark.parametrize("field", ["clusterName", "brokerAddr", "brokerName"])
def test_4_9_unregistration_without_a_name_changes_nothing(tmp_path, field, caplog):
    """4.9.8 removes what its HashMaps find under null (the live entry or the group's address)
    and leaves the rest: rocketpy answers SUCCESS too, changes nothing and logs it."""
    proc = make(tmp_path, PROFILE_49)
    assert register(proc, topics=("T1", "T3"), version=409).code == 0
    before = _route(proc, "T1").body
    with caplog.at_level(logging.WARNING, "rocketpy.namesrv"):
        answer = call(proc, RequestCode.UNREGISTER_BROKER,
                      _without(field, brokerName="broker-a", brokerAddr="127.0.0.1:10911"))
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    assert _route(proc, "T1").body == before
    assert any("UNREGISTER_BROKER without a field" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("profile", [PROFILE_50, PROFILE_53], ids=lambda p: p.name)
@pytest.mark.parametrize("field", ["brokerId", "clusterName", "brokerAddr", "brokerName"])
def test_5x_queues_a_malformed_unregistration_and_the_batch_keeps_the_rest(tmp_path, profile,
                                                                           field, caplog):
    """SUCCESS (queued, as Java); in the batch the malformed request changes nothing and is
    logged, and the other broker's unregistration in the same batch is applied (Java's batch
    stops at the exception)."""
    proc = make(tmp_path, profile)
    assert register(proc, topics=("T1", "T3"), version=profile.server_version).code == 0
    assert register(proc, name="broker-b", addr="127.0.0.1:10921", topics=("T2", "T4"),
                    version=profile.server_version).code == 0
    before = _route(proc, "T1").body
    answer = call(proc, RequestCode.UNREGISTER_BROKER,
                  _without(field, brokerName="broker-a", brokerAddr="127.0.0.1:10911"))
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    assert call(proc, RequestCode.UNREGISTER_BROKER, FIELDS).code == ResponseCode.SUCCESS
    assert len(proc.submitted) == 2
    with caplog.at_level(logging.WARNING, "rocketpy.namesrv"):
        proc.route_info_manager.unregister_brokers(list(proc.submitted))
    assert _route(proc, "T1").body == before
    assert _route(proc, "T2").code == ResponseCode.TOPIC_NOT_EXIST
    rim = proc.route_info_manager
    assert rim.broker_live_info("C", "127.0.0.1:10911") is not None
    assert rim.broker_live_info("C", "127.0.0.1:10921") is None
    assert [r for r in caplog.records if "UNREGISTER_BROKER without a field" in r.getMessage()]

