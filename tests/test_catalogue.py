"""The protocol catalogue (issue 32 part 1): one declaration per request code, every table about
codes derived from it, releases as ordered values, and each way a table used to fail silently
now an error when the server starts."""
import dataclasses

import pytest

from processorutil import make
from rocketpy.controller import ControllerConfiguration, ControllerRequestProcessor
from rocketpy.namesrv.acl import ADMIN_CODES
from rocketpy.namesrv.broker_access import BROKER_CODES, _IDENTITY_HEADERS
from rocketpy.namesrv.config import ConfigShape, NettyServerConfig, java_keys
from rocketpy.namesrv.policy import policies_for
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.processor.kv import KVHandlers
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53, PROFILES, profile_for
from rocketpy.remoting import bodies, headers as H
from rocketpy.remoting import catalogue as C
from rocketpy.remoting.catalogue import CATALOGUE, CatalogueError, Release, Request, RequestCode
from rocketpy.remoting.codes import ResponseCode as RC, version_ordinal
from rocketpy.controller import access as controller_access, processor as controller_processor

R = Release
PROPS = {"controllerDLegerGroup": "g", "controllerDLegerPeers": "n0-127.0.0.1:9878",
         "controllerDLegerSelfId": "n0"}


# ------------------------------------------------------------------ releases

def test_releases_are_ordered_by_version_and_named_as_people_write_them():
    assert R.V4_9_8 < R.V5_0_0_PREVIEW < R.V5_0_0_ALPHA < R.V5_0_0 < R.V5_1_4 < R.V5_3_3 < R.V5_4_0
    assert sorted(R, key=lambda r: r) == list(R)      # declared in release order
    assert max(R) is R.V5_5_0 and min(R) is R.V4_0_0_INCUBATING
    assert R.of("5.3.3") is R.of("V5_3_3") is R.of("rocketmq-all-5.3.3") is R.V5_3_3
    assert R.of("5.0.0-preview") is R.V5_0_0_PREVIEW
    with pytest.raises(ValueError, match="unknown RocketMQ release"):
        R.of("5.3")
    assert (R.V5_3_3.line, R.V5_3_3.version_name) == ("5.3", "V5_3_3")


def test_release_ranges_hold_what_they_say_and_read_as_the_docs_write_them():
    black_list = C.only(R.V4_9_8, R.V4_9_8) | C.since(R.V5_2_0)
    assert [r.value for r in R if r in black_list][:3] == ["4.9.8", "5.2.0", "5.3.0"]
    assert R.V5_0_0 not in black_list and R.V5_5_0 in black_list
    assert str(black_list) == "4.9.8, 5.2.0+"
    assert str(C.only(R.V4_5_2, R.V5_3_2)) == "4.5.2 - 5.3.2"
    assert str(C.ALWAYS) == "every release" and all(r in C.ALWAYS for r in R)


# ------------------------------------------------------------------ one declaration per code

def test_every_table_about_codes_is_the_one_it_replaced():
    """The sets each module kept by hand before the catalogue, now derived from it."""
    assert ADMIN_CODES == {100, 102, 205, 216, 217, 318, 327}
    assert BROKER_CODES == {103, 104, 217, 322, 904}
    assert _IDENTITY_HEADERS == {103: H.RegisterBrokerRequestHeader,
                                 104: H.UnRegisterBrokerRequestHeader,
                                 322: H.QueryDataVersionRequestHeader,
                                 904: H.BrokerHeartbeatRequestHeader}
    assert controller_processor.ADMIN_CODES == {1002, 1009, 1011}
    assert controller_processor.LEADER_CODES == {1001, 1002, 1003, 1004, 1006, 1011, 1012, 1013}
    assert controller_access.BROKER_CODES == {904, 1001, 1002, 1003, 1013}
    assert set(H.REQUEST_HEADERS) == {100, 101, 102, 103, 104, 105, 205, 215, 216, 217, 219, 224,
                                      300, 322, 327, 901, 904, 905, 1001, 1002, 1003, 1004, 1008,
                                      1011, 1012, 1013}
    assert set(H.RESPONSE_HEADERS) == {101, 103, 205, 322, 327, 1001, 1002, 1003, 1004, 1005,
                                       1012, 1013}
    assert bodies.REQUEST_BODIES[103] is bodies.RegisterBrokerBody
    assert bodies.REPLY_BODIES[1006] is bodies.BrokerReplicasInfo


def test_served_codes_per_release_come_from_the_catalogue():
    """GET_CLIENT_CONFIG is served by the 5.0.0-5.1.3 NameServers (DefaultRequestProcessor of
    5.1.4 dropped it); 217, 901 and 904 from 5.0.0; the controller's 1012 and 1013 from 5.1.1."""
    codes = {release: {r.code for r in C.served(C.NAMESRV, release)}
             for release in (R.V4_9_8, R.V5_0_0, R.V5_1_3, R.V5_1_4, R.V5_3_3)}
    assert codes[R.V5_0_0] - codes[R.V4_9_8] == {47, 217, 901, 904}
    assert 47 in codes[R.V5_1_3] and 47 not in codes[R.V5_1_4]
    assert codes[R.V5_3_3] == codes[R.V5_1_4]
    assert {r.code for r in C.served(C.CONTROLLER, R.V5_1_0)} == {
        904, 1001, 1002, 1003, 1004, 1005, 1006, 1009, 1010, 1011}
    assert {r.code for r in C.served(C.CONTROLLER, R.V5_3_3)} - {
        r.code for r in C.served(C.CONTROLLER, R.V5_1_0)} == {1012, 1013}


def test_the_codes_of_later_releases_are_named_with_their_source():
    """What Java 5.5.0 defines that a capture may hold (rocketmq-rust's inventory of it)."""
    lite = {RequestCode(c).name for c in range(200070, 200080)}
    assert "POP_LITE_MESSAGE" in lite and "TRIGGER_LITE_DISPATCH" in lite and len(lite) == 10
    assert {RequestCode(c).name for c in (5001, 5002, 5003)} == {
        "SWITCH_TIMER_ENGINE", "DELETE_TOPIC_IN_BROKER_LIST", "DELETE_SUBSCRIPTION_GROUP_LIST"}
    assert (RC(2017).name, RC(2018).name) == ("LMQ_QUOTA_EXCEEDED",
                                              "LITE_SUBSCRIPTION_QUOTA_EXCEEDED")
    for code in list(range(200070, 200080)) + [5001, 5002, 5003]:
        decl = C.declaration(code)
        assert R.V5_3_3 not in decl.releases and R.V5_5_0 in decl.releases
        assert "java-5.5-core-inventory.json" in decl.source
        assert not decl.served_by(C.NAMESRV) and not decl.served_by(C.CONTROLLER)


def test_every_named_class_exists_and_every_served_code_states_its_access():
    for decl in CATALOGUE:
        for attr, classes in (("request", H.__dict__), ("reply", H.__dict__),
                              ("body", bodies.__dict__), ("reply_body", bodies.__dict__)):
            name = getattr(decl, attr)
            if name is not None and name not in (C.PROPERTIES_TEXT, C.BROKER_NAMES):
                assert isinstance(classes.get(name), type), (decl.name, attr, name)
        if decl.served_by(C.NAMESRV) or decl.served_by(C.CONTROLLER):
            assert decl.access is not None, decl.name


# ------------------------------------------------------------------ silent failures, now errors

def test_a_header_class_the_headers_lack_is_an_error_at_import():
    """Dropping a header class used to make its handler answer builtins.AttributeError as if
    the input were bad; now the codec refuses to import."""
    classes = {name: cls for name, cls in vars(H).items()
               if isinstance(cls, type) and issubclass(cls, H.CommandHeader)}
    assert C.resolve("request", classes, "headers") == H.REQUEST_HEADERS
    del classes["GetRouteInfoRequestHeader"]
    with pytest.raises(CatalogueError, match=r"GET_ROUTEINFO_BY_TOPIC \(105\) names request "
                                             r"GetRouteInfoRequestHeader"):
        C.resolve("request", classes, "headers")


def test_a_served_code_without_its_access_is_an_error_at_import():
    """A new administrative code left out of ADMIN_CODES used to be served unguarded; now a
    served code must say who may send it."""
    unguarded = Request("NEW_ADMIN_CODE", 9001, namesrv=C.since(R.V5_3_3))
    with pytest.raises(CatalogueError, match="9001.*declares no access"):
        C._check(CATALOGUE + (unguarded,))
    C._check(CATALOGUE + (dataclasses.replace(unguarded, access=C.ADMIN),))
    with pytest.raises(CatalogueError, match="declared twice"):
        C._check(CATALOGUE + (Request("AGAIN", 103),))


def test_a_54_profile_is_one_release_and_the_facts_that_differ():
    """PROFILE_53.but(name="5.4") used to report 0 config keys (GET_NAMESRV_CONFIG answered an
    empty configuration, -p printed nothing); a profile is named by its release now, the keys
    and codes follow from it, and a fact the profile does not have is refused."""
    with pytest.raises(TypeError):
        PROFILE_53.but(name="5.4")
    profile_54 = PROFILE_53.but(release=R.V5_4_0)
    assert (profile_54.name, profile_54.server_version) == ("5.4", version_ordinal("V5_4_0"))
    policies = policies_for(profile_54)
    assert (len(policies.config.namesrv_keys), len(policies.config.netty_keys)) == (22, 18)
    assert java_keys(policies) == java_keys(policies_for(PROFILE_53))
    assert {r.code for r in C.served(C.NAMESRV, R.V5_4_0)} == {
        r.code for r in C.served(C.NAMESRV, R.V5_3_3)}
    with pytest.raises(TypeError, match="of a Release"):
        ConfigShape.of_release("5.4")          # which used to answer no key at all


def test_the_config_keys_of_every_profile_follow_from_its_release():
    """22 + 18 keys in 5.3.3 (the issue's count), fewer in the older releases."""
    counts = {p.name: tuple(map(len, (policies_for(p).config.namesrv_keys,
                                       policies_for(p).config.netty_keys))) for p in PROFILES}
    assert counts == {"4.9": (7, 14), "5.0": (18, 15), "5.3": (22, 18)}
    assert [p.name for p in PROFILES] == ["4.9", "5.0", "5.3"]
    assert profile_for("5.0.0") is PROFILE_50 and profile_for("4.9") is PROFILE_49
    with pytest.raises(ValueError, match="known: 4.9, 5.0, 5.3"):
        profile_for("5.4")
    assert len(NettyServerConfig().keys()) == 18


def test_a_served_code_without_a_handler_stops_the_processor_at_start(tmp_path):
    kv = KVHandlers(None)
    with pytest.raises(CatalogueError, match=r"namesrv 5\.3\.3 serves .*REGISTER_BROKER \(103\)"
                                             r".*with no handler"):
        C.bind((kv,), C.NAMESRV, R.V5_3_3)

    class Broken(ControllerRequestProcessor):
        apply_broker_id = None          # a handler dropped
    with pytest.raises(CatalogueError, match=r"CONTROLLER_APPLY_BROKER_ID \(1013\) with no "
                                             r"handler"):
        Broken(ControllerConfiguration.from_properties(PROPS))


def test_a_handler_without_a_declaration_stops_the_processor_at_start():
    with pytest.raises(CatalogueError, match="no declaration for request code 9001"):
        C.responder(9001)

    class Stray:
        @C.responder(RequestCode.SEND_MESSAGE)      # declared, but no NameServer serves it
        def send(self, header, request, channel, now_ms):
            return None
    with pytest.raises(CatalogueError, match=r"Stray.send answers SEND_MESSAGE \(10\), which no "
                                             r"namesrv release serves"):
        C.bind((Stray(),), C.NAMESRV, R.V5_3_3)

    class Twice:
        @C.responder(RequestCode.GET_KV_CONFIG)
        def again(self, header, request, channel, now_ms):
            return None
    with pytest.raises(CatalogueError, match="GET_KV_CONFIG .* two handlers"):
        C.bind((KVHandlers(None), Twice()), C.NAMESRV, R.V5_3_3)


def test_a_processor_serves_exactly_what_the_catalogue_says(tmp_path):
    for profile in PROFILES:
        proc = make(tmp_path, profile)
        assert set(proc.handlers) == {r.code for r in C.served(C.NAMESRV, profile.release)}
        assert isinstance(proc, DefaultRequestProcessor)
    controller = ControllerRequestProcessor(ControllerConfiguration.from_properties(PROPS))
    assert set(controller.handlers) == {r.code for r in C.served(C.CONTROLLER, R.V5_3_3)}
