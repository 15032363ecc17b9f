"""NamesrvConfig / NettyServerConfig / Configuration: Java's keys, defaults, files and updates."""
import os

import pytest

import replay
from rocketpy.controller.config import ControllerConfig, ControllerConfiguration
from rocketpy.namesrv import Configuration, NamesrvConfig, NettyServerConfig
from rocketpy.namesrv.acl import default_acl_config_path
from rocketpy.namesrv.home import Home
from rocketpy.namesrv.config import attr_name, java_key, java_keys
from rocketpy.service.fileio import load_properties, write_file_java
from rocketpy.namesrv.javaprops import (PropertiesError, body_to_properties, format_properties,
                                        parse_properties)
from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv.profile import PROFILE_49, PROFILE_50, PROFILE_53

# Java 5.3.3 NamesrvConfig and NettyServerConfig: every key and its default (listenPort as
# mqnamesrv sets it; paths and rocketmqHome depend on the machine).
JAVA_53_DEFAULTS = {
    "productEnvName": "center", "clusterTest": "false", "orderMessageEnable": "false",
    "returnOrderTopicConfigToBroker": "true", "clientRequestThreadPoolNums": "8",
    "defaultThreadPoolNums": "16", "clientRequestThreadPoolQueueCapacity": "50000",
    "defaultThreadPoolQueueCapacity": "10000", "scanNotActiveBrokerInterval": "5000",
    "unRegisterBrokerQueueCapacity": "3000", "supportActingMaster": "false",
    "enableAllTopicList": "true", "enableTopicList": "true", "notifyMinBrokerIdChanged": "false",
    "enableControllerInNamesrv": "false", "needWaitForService": "false",
    "waitSecondsForService": "45", "deleteTopicWithBrokerRegistration": "false",
    "configBlackList": "configBlackList;configStorePath;kvConfigPath",
    "bindAddress": "0.0.0.0", "listenPort": "9876", "serverWorkerThreads": "8",
    "serverCallbackExecutorThreads": "0", "serverSelectorThreads": "3",
    "serverOnewaySemaphoreValue": "256", "serverAsyncSemaphoreValue": "64",
    "serverChannelMaxIdleTimeSeconds": "120", "serverSocketSndBufSize": "0",
    "serverSocketRcvBufSize": "0", "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0", "serverSocketBacklog": "1024",
    "serverNettyWorkerGroupEnable": "true", "serverPooledByteBufAllocatorEnable": "true",
    "enableShutdownGracefully": "false", "shutdownWaitTimeSeconds": "30",
    "useEpollNativeSelector": "false",
}
PATHS = {"kvConfigPath", "configStorePath", "rocketmqHome"}


def test_every_java_53_key_with_its_default():
    shape = as_policies(PROFILE_53)
    props = {**NamesrvConfig().to_properties(shape), **NettyServerConfig().to_properties(shape)}
    assert {k: v for k, v in props.items() if k not in PATHS} == JAVA_53_DEFAULTS
    assert set(java_keys(as_policies(PROFILE_53))) == set(JAVA_53_DEFAULTS) | PATHS


def test_attribute_names_are_the_java_keys_in_snake_case():
    assert attr_name("scanNotActiveBrokerInterval") == "scan_not_active_broker_interval"
    assert attr_name("unRegisterBrokerQueueCapacity") == "un_register_broker_queue_capacity"
    assert java_key("server_channel_max_idle_time_seconds") == "serverChannelMaxIdleTimeSeconds"
    config = NamesrvConfig()
    for key in java_keys(as_policies(PROFILE_53))[:22]:
        assert hasattr(config, attr_name(key)), key
    assert NettyServerConfig().server_channel_max_idle_time_seconds == 120


@pytest.mark.parametrize("name", ["rmq49-sc-probe.pcap", "rmq50-sc-probe.pcap"])
def test_reported_keys_are_those_of_the_recorded_version(name):
    """GET_NAMESRV_CONFIG of the genuine NameServer: its classes' keys plus the -c file's keys
    (the test NameServers' files held listenPort, bindAddress and kvConfigPath)."""
    answer = next(e.expected for e in replay.replay_events(replay.PCAP_DIR / name)
                  if e.kind == "request" and e.request.code == 319)
    recorded = set(parse_properties(answer.body.decode()))
    profile = PROFILE_49 if name.startswith("rmq49") else PROFILE_50
    assert recorded == set(java_keys(as_policies(profile))) | {"bindAddress"}


def test_profiles_differ_as_the_java_classes_do():
    assert "configBlackList" in java_keys(as_policies(PROFILE_49)) and "configBlackList" not in java_keys(as_policies(PROFILE_50))
    assert "bindAddress" not in java_keys(as_policies(PROFILE_49))
    assert "deleteTopicWithBrokerRegistration" in java_keys(as_policies(PROFILE_53))
    assert "shutdownWaitTimeSeconds" not in java_keys(as_policies(PROFILE_50))


def test_properties_file_syntax():
    text = ("# comment\n! also\n  listenPort = 9877\nbindAddress:127.0.0.1\n"
            "rocketmqHome /opt/rmq\nlong=a\\\n    b\nesc=tab\\there\\u0041\n\nempty=\n")
    props = parse_properties(text)
    assert props == {"listenPort": "9877", "bindAddress": "127.0.0.1", "rocketmqHome": "/opt/rmq",
                     "long": "ab", "esc": "tab\thereA", "empty": ""}
    with pytest.raises(PropertiesError):
        parse_properties("bad=\\u12")


def test_update_body_is_read_as_java_reads_it():
    """string2Properties: Properties.load(InputStream) reads the UTF-8 bytes as ISO-8859-1."""
    assert body_to_properties("k=é\n".encode()) == {"k": "Ã©"}


def test_loading_follows_properties2object(tmp_path):
    path = tmp_path / "namesrv.conf"
    path.write_text("listenPort=9988\nclusterTest=TRUE\nscanNotActiveBrokerInterval=12x\n"
                    "productEnvName=  prod  \nunknownKey=1\n")
    configuration = Configuration.from_properties(load_properties(str(path)), config_path=str(path))
    assert configuration.netty_server_config.listen_port == 9988
    assert configuration.namesrv_config.cluster_test is True
    assert configuration.namesrv_config.scan_not_active_broker_interval == 5000  # unparsable: kept
    assert configuration.namesrv_config.product_env_name == "prod"
    assert configuration.namesrv_config.config_store_path == str(path)   # -c sets it
    text = configuration.all_configs_text()
    assert "unknownKey=1\n" in text and "listenPort=9988\n" in text
    assert load_properties(str(path))["listenPort"] == "9988"


def test_print_lines_show_every_field_nulls_empty():
    lines = Configuration(NamesrvConfig(rocketmq_home=None), NettyServerConfig()).print_lines()
    assert "rocketmqHome=" in lines and "listenPort=9876" in lines
    assert len(lines) == len(java_keys(as_policies(PROFILE_53)))


def test_update_merges_known_keys_and_persists(tmp_path):
    store = tmp_path / "namesrv.properties"
    configuration = Configuration(NamesrvConfig(config_store_path=str(store)), NettyServerConfig(),
                                  store=write_file_java)
    configuration.update({"orderMessageEnable": "true", "notAKey": "x"})()   # its FileWrite
    assert configuration.namesrv_config.order_message_enable is True
    assert "notAKey" not in configuration.all_configs
    assert "orderMessageEnable=true\n" in store.read_text()
    configuration.update({"supportActingMaster": "true"})()
    assert "orderMessageEnable=true\n" in (tmp_path / "namesrv.properties.bak").read_text()


def test_update_and_file_apply_only_the_keys_of_the_profiles_release():
    """Java's properties2Object ignores keys its class lacks: 5.0.0 has no
    deleteTopicWithBrokerRegistration, 4.9 no supportActingMaster."""
    for profile, absent, present in ((PROFILE_50, "deleteTopicWithBrokerRegistration", "supportActingMaster"),
                                     (PROFILE_49, "supportActingMaster", "orderMessageEnable")):
        configuration = Configuration(NamesrvConfig(), NettyServerConfig(), profile=as_policies(profile))
        configuration.update({absent: "true", present: "true"})
        assert getattr(configuration.namesrv_config, attr_name(absent)) is False
        assert getattr(configuration.namesrv_config, attr_name(present)) is True
        loaded = Configuration.from_properties({absent: "true", present: "true"}, as_policies(profile))
        assert getattr(loaded.namesrv_config, attr_name(absent)) is False
        assert getattr(loaded.namesrv_config, attr_name(present)) is True
    configuration = Configuration(NamesrvConfig(), NettyServerConfig(), profile=as_policies(PROFILE_53))
    configuration.update({"deleteTopicWithBrokerRegistration": "true"})
    assert configuration.namesrv_config.delete_topic_with_broker_registration is True


def test_protection_keys_are_read_from_the_file_in_every_profile():
    """4.9's class has no bindAddress, 5.0.0's no configBlackList; a file naming them is
    obeyed anyway: a profile never widens what the server exposes."""
    props = {"bindAddress": "127.0.0.1", "configBlackList": "listenPort"}
    for profile in (PROFILE_49, PROFILE_50, PROFILE_53):
        loaded = Configuration.from_properties(props, as_policies(profile))
        assert loaded.netty_server_config.bind_address == "127.0.0.1"
        assert loaded.namesrv_config.config_black_list == "listenPort"


def test_49_config_text_is_unsorted_5x_sorted():
    text49 = Configuration(NamesrvConfig(), NettyServerConfig(), profile=as_policies(PROFILE_49)).all_configs_text()
    text53 = Configuration(NamesrvConfig(), NettyServerConfig(), profile=as_policies(PROFILE_53)).all_configs_text()
    keys53 = [line.split("=")[0] for line in text53.splitlines()]
    assert keys53 == sorted(keys53)
    assert text49.splitlines()[0].startswith("serverSocketBacklog=")   # as recorded from 4.9.8
    assert format_properties([("a", "1"), ("b", None)]) == "a=1\n"


def test_both_servers_take_their_home_defaults_from_one_injected_environment():
    """The NameServer's and the controller's paths and rocketmqHome come from one Home, built
    from the environment a test hands it (the process's is neither read nor patched)."""
    home = Home({"HOME": "/srv/mq/", "ROCKETMQ_HOME": "/opt/rocketmq"})
    namesrv = Configuration.from_properties({"productEnvName": "x"}, home=home).namesrv_config
    assert (namesrv.rocketmq_home, namesrv.kv_config_path, namesrv.config_store_path) == (
        "/opt/rocketmq", "/srv/mq/namesrv/kvConfig.json", "/srv/mq/namesrv/namesrv.properties")
    controller = ControllerConfiguration.from_properties({
        "controllerDLegerPeers": "n0-127.0.0.1:9878", "controllerDLegerSelfId": "n0",
        "controllerType": "jRaft"}, home=home).controller_config
    assert (controller.rocketmq_home, controller.config_store_path, controller.store_path) == (
        "/opt/rocketmq", "/srv/mq/controller/controller.properties", "/srv/mq/jRaftController")
    assert ControllerConfig(home, controller_store_path="/d").store_path == "/d"
    assert NamesrvConfig(home, rocketmq_home=None).rocketmq_home is None
    assert Home({"HOME": "/"}).path("namesrv") == "/namesrv"
    assert Home({}).rocketmq_home is None
    # without an environment, the process's: what the servers have always read
    process = NamesrvConfig()
    assert (process.rocketmq_home, process.kv_config_path) == (
        os.environ.get("ROCKETMQ_HOME"), os.path.join(os.path.expanduser("~"), "namesrv",
                                                      "kvConfig.json"))
    assert default_acl_config_path() == os.path.join(os.path.expanduser("~"), "namesrv",
                                                     "plain_acl.yml")
