"""A friendly command line: ``--help`` explains every option; an unknown key of the properties file
is warned about by name (and kept, as Java keeps it); a bad value stops the start with the key,
the value and what was expected, before anything listens.
"""
import os
import subprocess

import pytest

from rocketpy.service.propcheck import PropertyError, Spec, check_properties, known_keys, register_key
from rocketpy.service.startup import StartError
from rocketpy.service.tap import Options
from serverproc import REPO_ROOT, RemotingClient, running_server, server_command


def _run(*args, timeout=60):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    return subprocess.run(server_command(*args, listen=None), capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)


def _parse(*args):
    options = Options()
    options.parseOptions(list(args))
    return options


# ------------------------------------------------------------------ --help

def test_help_explains_every_option():
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    options = Options()
    for long_name, short, *_ in options.optParameters + options.optFlags:
        doc = options.docs[long_name]
        assert len(doc.split()) >= 8, (long_name, doc)        # a sentence, not a word
        assert f"--{long_name}" in text
        if short:
            assert f"-{short}," in text
    for phrase in ("--web", "tcp:8080:interface=127.0.0.1", "Prometheus", "status page",
                   "-D listenPort=9877", "namesrvAddr=a:9876;b:9876", "Unknown keys are warned",
                   "tls.server.mode", "adminAllowNetworks", "Examples:"):
        assert phrase in text, phrase


# ------------------------------------------------------------------ unknown keys

def test_unknown_keys_are_warned_about_by_name(tmp_path, capsys):
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=9876\nscanNotActiveBrokerIntervall=5000\nmyOwnSetting=x\n")
    options = _parse("-c", str(conf), "-D", "anotherTypo=1", "-D", "rocketmq.some.property=1")
    err = capsys.readouterr().err
    assert "unknown key 'scanNotActiveBrokerIntervall' in " + str(conf) in err
    assert "did you mean scanNotActiveBrokerInterval?" in err
    assert "unknown key 'myOwnSetting'" in err
    assert "unknown key 'anotherTypo' in -D" in err
    assert "rocketmq.some.property" not in err           # a Java system property
    assert "listenPort" not in err
    # kept, as Java keeps every key of the file (GET_NAMESRV_CONFIG reports it)
    assert options["configuration"].all_configs["myOwnSetting"] == "x"


def test_unknown_key_warned_and_server_still_starts(tmp_path):
    conf = tmp_path / "namesrv.properties"
    conf.write_text("clusterTest=false\nbrokerClusterName=DefaultCluster\n")
    with running_server("-c", str(conf)) as server:
        assert any("unknown key 'brokerClusterName'" in line for line in server.lines[:40]), \
            server.log_text()
        client = RemotingClient(server.port)
        answer = client.call(319)                          # GET_NAMESRV_CONFIG
        client.close()
        assert answer.code == 0 and b"brokerClusterName=DefaultCluster" in answer.body


def test_other_components_register_their_keys():
    register_key("testOnlyKey", Spec(lambda v: v in ("a", "b"), "a or b"))
    assert "testOnlyKey" in known_keys()
    assert check_properties({"testOnlyKey": "a"}) == []
    with pytest.raises(PropertyError, match="testOnlyKey='c': expected a or b"):
        check_properties({"testOnlyKey": "c"})
    assert "serverMaxConnections" in known_keys()           # transport/limits.py's keys


# ------------------------------------------------------------------ bad values

BAD = [
    ("listenPort", "98766", "a port number 0..65535"),
    ("listenPort", "9876 ", "a port number 0..65535"),       # Java would skip it silently
    ("scanNotActiveBrokerInterval", "5s", "milliseconds >= 1"),
    ("scanNotActiveBrokerInterval", "0", "milliseconds >= 1"),
    ("serverChannelMaxIdleTimeSeconds", "-1", "seconds >= 0"),
    ("unRegisterBrokerQueueCapacity", "1_000", "an integer >= 1"),
    ("orderMessageEnable", "yes", "true or false"),
    ("tls.server.mode", "strict", "disabled or permissive or enforcing"),
    ("tls.server.need.client.auth", "always", "none or optional or require"),
    ("com.rocketmq.remoting.frameMaxLength", "16M", "bytes >= 1024"),
    ("adminAllowNetworks", "10.0.0.0/33", "IP addresses or networks"),
    ("aclEnable", "1", "true or false"),
]


@pytest.mark.parametrize("key, value, expected", BAD)
def test_bad_value_refused_with_key_value_and_expectation(tmp_path, key, value, expected):
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"{key}={value}\n", encoding="latin-1")
    with pytest.raises(StartError) as refused:
        _parse("-c", str(conf))
    message = refused.value.message
    assert message.startswith(f"{key}={value!r} in {conf}: expected {expected}"), message
    with pytest.raises(StartError) as refused:
        _parse("-D", f"{key}={value}")
    assert f"{key}={value!r} in -D: expected {expected}" in refused.value.message


def test_good_values_pass():
    options = _parse("-D", "listenPort=9877", "-D", "orderMessageEnable=TRUE",
                     "-D", "tls.server.mode=enforcing", "-D", "adminAllowNetworks=10.0.0.0/8, ::1",
                     "-D", "serverMaxConnections=0", "--web", "tcp:8080:interface=127.0.0.1")
    assert options["configuration"].netty_server_config.listen_port == 9877
    assert options["configuration"].namesrv_config.order_message_enable is True


def test_bad_endpoints_refused():
    with pytest.raises(StartError, match="--web='bogus:8080': not a Twisted server endpoint"):
        _parse("--web", "bogus:8080")
    with pytest.raises(StartError, match="--listen='tcp:notaport'"):
        _parse("--listen", "tcp:notaport")


def test_bad_value_stops_the_start_before_listening(tmp_path):
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=9876\nserverSocketBacklog=lots\n")
    proc = _run("--listen=tcp:0:interface=127.0.0.1", "--web=tcp:0:interface=127.0.0.1", "-c", str(conf))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert proc.stderr == (f"rocketnamesrv: serverSocketBacklog='lots' in {conf}: expected "
                           "an integer >= 1\n")                # one line: no --help, no traceback
    assert "boot success" not in output and "web endpoint on" not in output


# ------------------------------------------------------------------ issue 24.7

def test_version_is_rocketpys():
    import rocketpy
    proc = _run("--version")
    assert proc.returncode == 0 and proc.stdout.startswith(f"rocketpy {rocketpy.__version__} (Twisted ")


def test_a_malformed_define_is_one_line():
    proc = _run("-D", "foo")   # was 60 lines of usage before the error
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "rocketnamesrv: -D wants key=value, got 'foo'\n"
    proc = _run("--logLevel=loud")
    assert proc.stderr == ("rocketnamesrv: --logLevel='loud': one of debug, info, warn, error, "
                           "critical\n")


def test_boot_line_only_once_every_listener_is_bound():
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _run("--listen=tcp:0:interface=127.0.0.1", f"--web=tcp:{port}:interface=127.0.0.1")
    assert proc.returncode == 1
    assert "boot success" not in proc.stdout + proc.stderr
    assert f"rocketnamesrv: cannot listen on tcp:{port}:interface=127.0.0.1: " in proc.stdout


def test_log_level_quiets_the_per_connection_lines_and_the_default_boot_warns_of_nothing():
    with running_server() as server:   # defaults: info and above
        conn = RemotingClient(server.port)
        conn.call(206, {})   # GET_ALL_TOPIC_LIST_FROM_NAMESERVER
        conn.close()
        server.stop()
        text = server.log_text()
    assert "The Name Server boot success" in text and "Server Shut Down." in text
    assert "channelActive" not in text and "channelInactive" not in text
    assert "#warn]" not in text, text   # the open files limit is no warning unless configured
    with running_server("--logLevel=debug") as server:
        conn = RemotingClient(server.port)
        conn.call(206, {})
        conn.close()
        server.wait_for_log(r"NETTY SERVER PIPELINE: channelInactive")


def test_controller_etcd_keys_are_known_and_checked():
    """controllerType=etcd's own keys are not reported unknown, and a bad TTL stops the start."""
    props = {"controllerEtcdEndpoints": "http://127.0.0.1:2379", "controllerEtcdLeaseTtl": "2",
             "controllerEtcdTimeoutMillis": "3000"}
    assert check_properties(props) == []
    with pytest.raises(PropertyError, match="controllerEtcdLeaseTtl"):
        check_properties({"controllerEtcdLeaseTtl": "0"})
