"""UPDATE_NAMESRV_CONFIG cannot reach the file system (issue 12, part 1): a key or value that
would not read back as itself is refused with INVALID_PARAMETER naming the key, the black list
holds in every profile, and the config file is written with ``Properties.store``'s escaping.
"""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.namesrv.config import Configuration, NamesrvConfig, NettyServerConfig
from rocketpy.namesrv.processor.configguard import (ConfigUpdateGuard, is_protected,
                                                   round_trip_problem)
from rocketpy.namesrv.javaprops import (body_to_properties, format_properties, parse_properties,
                                        store_properties)
from rocketpy.service.fileio import load_properties, write_file_java
from rocketpy.service.propcheck import value_problem

JAVA_BLACK_LIST = "configBlackList;configStorePath;kvConfigPath"

#: bodies that smuggle a second key into one value, or a key that is not one key
INJECTIONS = [
    (b"productEnvName=x\\nkvConfigPath=/some/path\\naclEnable=false", "productEnvName"),
    (b"productEnvName=x\\rkvConfigPath=/p", "productEnvName"),
    (b"productEnvName=x\\u000akvConfigPath=/p", "productEnvName"),
    (b"productEnvName=x\\u000DkvConfigPath=/p", "productEnvName"),
    (b"productEnvName=x\\u0000", "productEnvName"),
    (b"productEnvName=x\\\\nkvConfigPath=/p", "productEnvName"),     # a backslash: read back as \n
    (b"productEnvName=x\\\\", "productEnvName"),                     # a trailing backslash
    (b"kv\\=ConfigPath=/p", "kv=ConfigPath"),
    (b"kv\\:ConfigPath=/p", "kv:ConfigPath"),
    (b"kv\\u003dConfigPath=/p", "kv=ConfigPath"),
    (b"a\\ b=1", "a b"),
    (b"\\#x=1", "#x"),
    (b"productEnvName=\\ lead", "productEnvName"),
    (b"productEnvName=x\\uD800", "productEnvName"),
]


@pytest.mark.parametrize("body, key", INJECTIONS)
def test_injections_are_refused_naming_the_key(body, key):
    guard = ConfigUpdateGuard(JAVA_BLACK_LIST)
    reply = guard.refusal(body_to_properties(body))
    assert reply is not None and reply.code == 29, (body, reply)
    assert reply.remark.startswith(f"Can not update config key '{key}': "), reply.remark
    assert guard.refused["round_trip"] == 1


def test_black_list_holds_and_reaches_path_acl_tls_keys():
    guard = ConfigUpdateGuard("listenPort;", protected=["serverMaxConnections"])
    for key in ("configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome",
                "listenPort", "aclEnable", "aclConfigPath", "adminAllowNetworks", "bindAddress",
                "tls.server.mode", "tls.server.keyPath", "com.rocketmq.remoting.frameMaxLength",
                "registerBrokerMaxTopics", "serverMaxConnections", "someLogDir", "myHome",
                "anyFile", ""):
        reply = guard.refusal({key: "x", "orderMessageEnable": "true"})
        assert (reply.code, reply.remark) == (16, "Can not update config in black list."), key
    for key in ("orderMessageEnable", "productEnvName", "supportActingMaster", "brokerClusterName"):
        assert guard.refusal({key: "true"}) is None, key
        assert not is_protected(key)


def test_values_the_next_start_would_refuse_are_refused():
    guard = ConfigUpdateGuard(JAVA_BLACK_LIST, value_check=value_problem)
    reply = guard.refusal({"scanNotActiveBrokerInterval": "5s"})
    assert reply.code == 29
    assert reply.remark == ("Can not update config key 'scanNotActiveBrokerInterval': '5s' is not "
                            "milliseconds >= 1.")
    assert guard.refusal({"scanNotActiveBrokerInterval": "6000", "unknownKey": "5s"}) is None


# a value made of anything a body can carry, once decoded (including escapes)
_TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from("\n\r\\=: \t\0#!\x85\u2028"),
                max_size=12)


@settings(max_examples=300, deadline=None)
@given(key=_TEXT, value=_TEXT)
def test_whatever_the_guard_lets_through_reads_back_as_itself(key, value):
    if round_trip_problem(key, value) is None:
        line = format_properties([(key, value)])          # GET_NAMESRV_CONFIG, Java's file
        assert parse_properties(line) == {key: value}
        assert line.count("\n") == 1


@settings(max_examples=300, deadline=None)
@given(items=st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=5))
def test_stored_file_reads_back_exactly_and_is_ascii(items):
    text = store_properties(items.items())
    text.encode("ascii")
    assert parse_properties(text) == items


def test_store_escaping_is_javas():
    text = store_properties([("a b", " x=y:z#!\\\t\n"), ("k", "\u00e9\U0001F600")])
    assert text == "a\\ b=\\ x\\=y\\:z\\#\\!\\\\\\t\\n\nk=\\u00E9\\uD83D\\uDE00\n"


def test_config_file_is_stored_escaped(tmp_path):
    store = tmp_path / "namesrv.properties"
    # e.g. from a -c file holding productEnvName=a\nkvConfigPath\=/evil
    configuration = Configuration(NamesrvConfig(config_store_path=str(store),
                                                product_env_name="a\nkvConfigPath=/evil"),
                                  NettyServerConfig(), store=write_file_java)
    configuration.persist()
    text = store.read_text(encoding="ascii")
    assert "productEnvName=a\\nkvConfigPath\\=/evil\n" in text
    assert "\nkvConfigPath=/evil" not in text
    loaded = Configuration.from_properties(load_properties(str(store)), config_path=str(store))
    assert loaded.all_configs["productEnvName"] == "a\nkvConfigPath=/evil"
    assert loaded.namesrv_config.kv_config_path == NamesrvConfig().kv_config_path
