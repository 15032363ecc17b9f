"""rocketpy-admin's printed layouts (mqadmin 4.9.8's printf formats), ``--json``, exit status and
one-line errors, ACL keys from tools.yml, and the choice among several NameServers.

The NameServer is the replay peer of ``test_admin_requests`` (genuine answers); the layouts are
spelled out here from the Java format strings they come from.
"""
import io
import json

from twisted.internet.testing import MemoryReactorClock

from test_admin_requests import (KEYS, NAMESRV, FakeBroker, ReplayNameServer, genuine, key,
                                 run_admin)
from clientsim import Peer, drive
from rocketpy.admin.cli import run


def replay(capture, argv, extra=(), brokers=FakeBroker):
    namesrv = ReplayNameServer(genuine(capture))

    def peer_for(host, port):
        if f"{host}:{port}" == NAMESRV:
            return namesrv
        return brokers() if brokers is not None else None
    return run_admin(list(argv) + ["-n", NAMESRV] + KEYS + list(extra), peer_for)


def test_cluster_list_layout():
    # "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s%n"; the broker's runtime info
    # lacks the queue sizes and page-cache time, which Java's %s prints as null
    status, out, err = replay("rmq49-mqadmin-clusterList", ["clusterList"])
    assert (status, err) == (0, "")
    assert out == (
        "#Cluster Name     #Broker Name            #BID  #Addr                  #Version        "
        "        #InTPS(LOAD)       #OutTPS(LOAD) #PCWait(ms) #Hour #SPACE\n"
        "DefaultCluster    broker-a                0     127.0.0.1:30911        V4_9_8          "
        "      1.50(null,nullms)      2.00(null,nullms)       null  0.00 0.0000\n")


def test_cluster_list_unreachable_broker_prints_the_row_and_fails_in_one_line():
    status, out, err = replay("rmq49-mqadmin-clusterList", ["clusterList"], brokers=None)
    assert status == 1
    assert out.splitlines()[1] == ("DefaultCluster    broker-a                0     127.0.0.1:30911"
                                   "                                   0.00(,ms)           "
                                   "0.00(,ms)             0.00 0.0000")
    assert err.count("\n") == 1 and "broker broker-a (127.0.0.1:30911): connect to" in err


def test_cluster_list_more_stats_and_json():
    status, out, _ = replay("rmq49-mqadmin-clusterList", ["clusterList", "-m"])
    assert out.splitlines() == [
        "#Cluster Name     #Broker Name                       #InTotalYest  #OutTotalYest  "
        "#InTotalToday #OutTotalToday",
        "DefaultCluster    broker-a                                      0              0    "
        "          0              0"]
    status, out, _ = replay("rmq49-mqadmin-clusterList", ["clusterList", "--json"])
    [row] = json.loads(out)
    assert row["addr"] == "127.0.0.1:30911" and row["stats"]["putTps"] == "1.5 1.5 1.5"


def test_topic_route_pretty_json_list_format_and_json():
    status, out, _ = replay("rmq49-mqadmin-topicRoute", ["topicRoute", "-t", "TopicA"])
    assert out == ('{\n\t"brokerDatas":[\n\t\t{\n\t\t\t"brokerAddrs":{0:"127.0.0.1:30911"\n\t\t\t},'
                   '\n\t\t\t"brokerName":"broker-a",\n\t\t\t"cluster":"DefaultCluster"\n\t\t}\n\t],'
                   '\n\t"filterServerTable":{},\n\t"queueDatas":[\n\t\t{\n\t\t\t"brokerName":'
                   '"broker-a",\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":4,\n\t\t\t"topicSysFlag":0,'
                   '\n\t\t\t"writeQueueNums":4\n\t\t}\n\t]\n}\n')
    status, out, _ = replay("rmq49-mqadmin-topicRoute", ["topicRoute", "-t", "TopicA", "-l"])
    fmt = "%-45s %-32s %-50s %-10s %-11s %-5s\n"
    assert out == (fmt % ("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
                   + fmt % ("DefaultCluster", "broker-a", "{0=127.0.0.1:30911}", 4, 4, 6)
                   + "-" * 158 + "\n" + fmt % ("Total:", 1, "", 4, 4, ""))
    status, out, _ = replay("rmq49-mqadmin-topicRoute", ["topicRoute", "-t", "TopicA", "--json"])
    assert json.loads(out)["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:30911"}


def test_topic_route_of_a_missing_topic_is_one_line_and_status_1():
    status, out, err = replay("rmq49-mqadmin-topicRoute-notexist",
                              ["topicRoute", "-t", "NoSuchTopic_anchor"])
    assert (status, out) == (1, "")
    assert err == ("rocketpy-admin topicRoute: CODE: 17 (TOPIC_NOT_EXIST) DESC: No topic route info "
                   "in name server for the topic: NoSuchTopic_anchor See "
                   "http://rocketmq.apache.org/docs/faq/ for further details.\n")


def test_topic_list_and_cluster_model():
    status, out, _ = replay("rmq49-mqadmin-topicList", ["topicList"])
    assert out.splitlines() == ["SCHEDULE_TOPIC_XXXX", "DefaultCluster_REPLY_TOPIC", "TopicA",
                                "BenchmarkTest", "OFFSET_MOVED_EVENT", "broker-a", "TBW102",
                                "SELF_TEST_TOPIC", "DefaultCluster"]
    status, out, _ = replay("rmq49-mqadmin-topicList-c", ["topicList", "-c"])
    lines = out.splitlines()
    assert lines[0] == "%-20s  %-48s  %-48s" % ("#Cluster Name", "#Topic", "#Consumer Group")
    assert lines[3] == "%-20s  %-64s  %-64s" % ("DefaultCluster", "TopicA",
                                                 "please_rename_unique_group_name_4")
    assert len(lines) == 10


def test_topic_cluster_list_and_getnamesrvconfig_layout():
    status, out, _ = replay("rmq49-mqadmin-topicClusterList", ["topicClusterList", "-t", "TopicA"])
    assert out == "DefaultCluster\n"
    status, out, _ = replay("rmq49-mqadmin-getNamesrvConfig", ["getNamesrvConfig"])
    lines = out.splitlines()
    assert lines[0] == "============127.0.0.1:39876============"
    assert "%-50s=  %s" % ("listenPort", "39876") in lines
    assert len(lines) > 20 and all("=  " in line for line in lines[1:])


def test_messages_of_the_write_commands():
    cases = [
        ("rmq49-mqadmin-updateKvConfig", ["updateKvConfig", "-s", "anchor_ns", "-k", "key1", "-v", "value1"],
         "create or update kv config to namespace success.\n"),
        ("rmq49-mqadmin-deleteKvConfig", ["deleteKvConfig", "-s", "anchor_ns", "-k", "key1"],
         "delete kv config from namespace success.\n"),
        ("rmq49-mqadmin-wipeWritePerm", ["wipeWritePerm", "-b", "broker-a"],
         "wipe write perm of broker[broker-a] in name server[127.0.0.1:39876] OK, 10\n"),
        ("rmq49-mqadmin-addWritePerm", ["addWritePerm", "-b", "broker-a"],
         "add write perm of broker[broker-a] in name server[127.0.0.1:39876] OK, 10\n"),
        ("rmq49-mqadmin-updateNamesrvConfig", ["updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"],
         "update name server config success![127.0.0.1:39876]\norderMessageEnable : true\n"),
        ("rmq49-mqadmin-deleteTopic", ["deleteTopic", "-t", "TopicA", "-c", "DefaultCluster"],
         "delete topic [TopicA] from cluster [DefaultCluster] success.\n"
         "delete topic [TopicA] from NameServer success.\n"),
        # mqadmin prints no newline after these three
        ("rmq49-mqadmin-updateOrderConf-put", ["updateOrderConf", "-t", "TopicA", "-m", "put", "-v", "broker-a:4"],
         "update orderConf success. topic=[TopicA], orderConf=[broker-a:4]"),
        ("rmq49-mqadmin-updateOrderConf-get", ["updateOrderConf", "-t", "TopicA", "-m", "get"],
         "get orderConf success. topic=[TopicA], orderConf=[broker-a:4] "),
        ("rmq49-mqadmin-updateOrderConf-delete", ["updateOrderConf", "-t", "TopicA", "-m", "delete"],
         "delete orderConf success. topic=[TopicA]"),
    ]
    for capture, argv, expected in cases:
        status, out, err = replay(capture, argv)
        assert (status, out, err) == (0, expected, ""), capture


def test_write_perm_failure_on_one_namesrv_is_printed_and_fails_the_command():
    ok = ReplayNameServer(genuine("rmq49-mqadmin-wipeWritePerm"))
    bad = Peer(auto=lambda r: r.create_response(1, remark="boom\nmore"))

    def peer_for(host, port):
        return ok if port == 39876 else bad
    status, out, err = run_admin(["wipeWritePerm", "-b", "broker-a", "-n",
                                  "127.0.0.1:39876;127.0.0.1:39877"] + KEYS, peer_for)
    assert status == 1
    assert out.splitlines() == [
        "wipe write perm of broker[broker-a] in name server[127.0.0.1:39876] OK, 10",
        "wipe write perm of broker[broker-a] in name server[127.0.0.1:39877] Failed"]
    assert err == ("rocketpy-admin wipeWritePerm: 127.0.0.1:39877: CODE: 1 (SYSTEM_ERROR) "
                   "DESC: boom more\n")


def test_kv_writes_go_to_every_namesrv_reads_to_one():
    peers = {}

    def peer_for(host, port):
        peers[port] = Peer(auto=lambda r: r.create_response(
            0, ext_fields={"value": "v"} if r.code == 101 else None))
        return peers[port]
    run_admin(["updateKvConfig", "-s", "ns", "-k", "k", "-v", "v", "-n",
               "127.0.0.1:1001;127.0.0.1:1002;127.0.0.1:1003"], peer_for)
    assert sorted(peers) == [1001, 1002, 1003]
    assert all([r.code for r in p.requests] == [100] for p in peers.values())
    peers.clear()
    status, out, _ = run_admin(["getKvConfig", "-s", "ns", "-k", "k", "-n",
                                "127.0.0.1:1001;127.0.0.1:1002;127.0.0.1:1003"], peer_for)
    assert (status, out, len(peers)) == (0, "v\n", 1)


def test_read_fails_over_to_the_next_namesrv_that_connects(monkeypatch):
    answered = []
    starts = iter([0, 1, 0, 1])  # Java's random first index: both ways round
    monkeypatch.setattr("rocketpy.transport.client.random.randrange", lambda n: next(starts))

    def peer_for(host, port):
        if port == 1001:
            return None  # refused
        answered.append(port)
        return Peer(auto=lambda r: r.create_response(0, body=b'{"topicList":["T"]}'))
    for _ in range(4):  # whichever comes first, the answer comes from 1002
        status, out, _ = run_admin(["topicList", "-n", "127.0.0.1:1001;127.0.0.1:1002"], peer_for)
        assert (status, out) == (0, "T\n")
    assert set(answered) == {1002}


def test_keys_from_tools_yml_sign_like_mqadmin(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    exchanges = genuine("rmq49-mqadmin-topicRoute")
    namesrv = ReplayNameServer(exchanges)
    status, _, _ = run_admin(["topicRoute", "-t", "TopicA", "-n", NAMESRV], lambda h, p: namesrv)
    assert status == 0
    assert [key(f) for f in namesrv.frames] == [key(req) for req, _ in exchanges]
    monkeypatch.delenv("ROCKETMQ_HOME")
    unsigned = Peer(auto=lambda r: r.create_response(0, body=b'{"topicList":[]}'))
    run_admin(["topicList", "-n", NAMESRV], lambda h, p: unsigned)
    assert unsigned.requests[0].ext_fields is None


def test_usage_errors_are_one_line_and_status_1(capsys):
    for argv, message in [
        (["topicRoute", "-n", NAMESRV], "rocketpy-admin topicRoute: Missing required option: t\n"),
        (["topicRoute", "-t", "T"], "rocketpy-admin topicRoute: no NameServer address: give -n "
                                    "host:port[;host:port...] or set NAMESRV_ADDR\n"),
        (["topicList", "-n", "nohost"], "rocketpy-admin topicList: -n: 'nohost' is not a host:port address\n"),
        (["topicList", "-n", NAMESRV, "--bogus"], "rocketpy-admin topicList: unrecognized arguments: --bogus\n"),
        (["topicList", "-n", NAMESRV, "--remotingVersion", "x.y"],
         "rocketpy-admin topicList: --remotingVersion: 'x.y' is neither a release (4.9.8) nor a number\n"),
        (["topicList", "-n", NAMESRV, "--accessKey", "a"],
         "rocketpy-admin topicList: --accessKey and --secretKey go together\n"),
        (["noSuchCommand"], "rocketpy-admin: The sub command noSuchCommand not exist.\n"),
    ]:
        assert run(argv) == 1, argv
        captured = capsys.readouterr()
        assert (captured.out, captured.err) == ("", message), argv


def test_help(capsys):
    assert run([]) == 0
    listing = capsys.readouterr().out
    for flag in ("-h", "--help", "help"):  # was "The sub command --help not exist."
        assert run([flag]) == 0 and capsys.readouterr().out == listing
    assert listing.startswith("The most commonly used rocketpy-admin commands are:\n")
    assert "   clusterList          List all of clusters\n" in listing
    assert run(["help", "topicRoute"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: rocketpy-admin topicRoute [-h] [-l] [-n <arg>] -t <arg>\n")
    assert " -t,--topic <arg>" in text
    assert run(["topicRoute", "-h"]) == 0
    assert capsys.readouterr().out == text


def test_update_order_conf_put_needs_a_value():
    status, out, err = replay("rmq49-mqadmin-updateOrderConf-put",
                              ["updateOrderConf", "-t", "TopicA", "-m", "put"])
    assert (status, err) == (1, "rocketpy-admin updateOrderConf: please set orderConf with option -v.\n")


def test_delete_topic_of_an_unknown_cluster():
    status, out, err = replay("rmq49-mqadmin-deleteTopic", ["deleteTopic", "-t", "TopicA", "-c", "Nope"])
    assert status == 1 and out == ""
    assert "no cluster Nope: Make sure the specified clusterName exists" in err


def test_json_of_a_write_command():
    status, out, _ = replay("rmq49-mqadmin-updateKvConfig",
                            ["updateKvConfig", "-s", "anchor_ns", "-k", "key1", "-v", "value1", "--json"])
    assert json.loads(out) == {"namespace": "anchor_ns", "key": "key1", "value": "value1"}


def test_rocketmq_serialize_env(monkeypatch):
    monkeypatch.setenv("ROCKETMQ_SERIALIZE_TYPE", "ROCKETMQ")
    peer = Peer(auto=lambda r: r.create_response(0, body=b'{"topicList":[]}'))
    run_admin(["topicList", "-n", NAMESRV], lambda h, p: peer)
    assert peer.frames[0][4] == 1  # the serialize-type byte
    monkeypatch.setenv("ROCKETMQ_SERIALIZE_TYPE", "XML")
    assert run(["topicList", "-n", NAMESRV]) == 1



def cluster_info(brokers, cluster="DefaultCluster"):
    """GET_BROKER_CLUSTER_INFO's body listing ``{broker name: address}`` as masters of ``cluster``."""
    from rocketpy.remoting.bodies import BrokerData, ClusterInfo
    return ClusterInfo(
        broker_addr_table={name: BrokerData(broker_addrs={0: addr}, broker_name=name, cluster=cluster)
                           for name, addr in brokers.items()},
        cluster_addr_table={cluster: list(brokers)}).to_json()


class CountingReactor(MemoryReactorClock):
    """Records, at each connection it is asked to open, how many broker connections the
    client holds open or opening (the file descriptors a real run would take)."""

    def __init__(self):
        super().__init__()
        self.most = 0

    def connectTCP(self, host, port, factory, timeout=30, bindAddress=None):
        held = sum(1 for h, p, f, *_ in self.tcpClients
                   if f"{h}:{p}" != NAMESRV and not f.channel.closed)
        self.most = max(self.most, held + 1)
        return super().connectTCP(host, port, factory, timeout, bindAddress)


def test_cluster_list_asks_at_most_concurrency_brokers_at_once():
    brokers = {f"broker-{i}": f"127.0.0.2:{20000 + i}" for i in range(80)}
    body = cluster_info(brokers)
    namesrv = Peer(auto=lambda r: r.create_response(0, body=body))

    def peer_for(host, port):
        return namesrv if f"{host}:{port}" == NAMESRV else FakeBroker()
    for argv, bound in (([], 32), (["--concurrency", "4"], 4)):  # all 80 at once before
        reactor, out, err = CountingReactor(), io.StringIO(), io.StringIO()
        d = run(["clusterList", "-n", NAMESRV] + argv, reactor=reactor, stdout=out, stderr=err)
        drive(reactor, d, peer_for)
        assert (d.result, err.getvalue()) == (0, "")
        rows = out.getvalue().splitlines()
        assert len(rows) == 81 and all("1.50(null,nullms)" in row for row in rows[1:])
        assert reactor.most == bound and len(reactor.tcpClients) == 81
    assert run(["clusterList", "-n", NAMESRV, "--concurrency", "0"]) == 1


def test_cluster_list_against_silent_brokers_ends_at_its_deadline_with_what_it_got():
    """Issue 31 point 9: 2,000 brokers that accept and never answer, 32 at a time x 5 s, kept
    clusterList ~5 min; now it answers within its overall deadline (30 s of the reactor's clock)
    with the rows of the brokers that answered and one error line per broker cut off."""
    from clientsim import accept
    brokers = {f"broker-{i:04d}": f"127.0.0.2:{20000 + i}" for i in range(2000)}
    body = cluster_info(brokers)
    namesrv = Peer(auto=lambda r: r.create_response(0, body=body))
    reactor, out, err = MemoryReactorClock(), io.StringIO(), io.StringIO()
    d = run(["clusterList", "-n", NAMESRV], reactor=reactor, stdout=out, stderr=err)
    accepted, pumps = 0, []
    while not d.called and reactor.seconds() < 1000:
        while accepted < len(reactor.tcpClients):
            host, port = reactor.tcpClients[accepted][:2]
            answering = f"{host}:{port}" == NAMESRV or port < 20010     # ten brokers answer
            pumps.append(accept(reactor, namesrv if f"{host}:{port}" == NAMESRV else
                                FakeBroker() if answering else Peer(), accepted)[1])
            accepted += 1
        for pump in pumps:
            pump.flush()
        reactor.advance(0.5)
    assert d.called and reactor.seconds() <= 31, reactor.seconds()   # ~313 s before
    assert d.result == 1
    rows = out.getvalue().splitlines()
    assert len(rows) == 2001
    assert sum("1.50(null,nullms)" in row for row in rows) == 10
    errors = err.getvalue().splitlines()
    assert len(errors) == 1990
    late = [e for e in errors if e.endswith("no answer within the overall deadline of 30 s")]
    timed_out = [e for e in errors if e.endswith("timeout, 5000(ms) (request code 28)")]
    assert len(late) + len(timed_out) == 1990 and len(timed_out) <= 6 * 32
    assert "broker-1999 (127.0.0.2:21999)" in err.getvalue()
    for bad in ("0", "-1", "x", "1e400", "9" * 30):
        assert run(["clusterList", "-n", NAMESRV, "--deadline", bad], stderr=io.StringIO()) == 1


ESC = "\x1b]0;owned\x07\x1b[2J"


def test_names_with_control_characters_are_escaped_in_text_not_in_json():
    brokers = {f"b{ESC}\u202e": "127.0.0.2:20000"}
    body = cluster_info(brokers, cluster=f"c\n{ESC}")
    namesrv = Peer(auto=lambda r: r.create_response(0, body=body))

    def peer_for(host, port):
        return namesrv if f"{host}:{port}" == NAMESRV else FakeBroker()
    status, out, err = run_admin(["clusterList", "-n", NAMESRV], peer_for)
    assert status == 0 and "\x1b" not in out and "\u202e" not in out and len(out.splitlines()) == 2
    assert out.splitlines()[1].startswith("c\\x0a\\x1b]0;owned\\x07\\x1b[2J  b\\x1b]0;owned\\x07"
                                          "\\x1b[2J\\u202e ")
    status, out, err = run_admin(["clusterList", "-n", NAMESRV, "--json"], peer_for)
    assert json.loads(out)[0]["brokerName"] == f"b{ESC}\u202e"

    # an error remark from the wire is escaped too, and a route's pretty JSON keeps its layout
    namesrv.auto = lambda r: r.create_response(17, remark=f"no topic {ESC}")
    status, out, err = run_admin(["topicRoute", "-t", "T", "-n", NAMESRV], peer_for)
    assert status == 1 and err.count("\n") == 1 and "\x1b" not in err and "\\x1b[2J" in err
    route = ('{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.2:20000"},"brokerName":"b\u202e",'
             '"cluster":"c"}],"queueDatas":[]}').encode()
    namesrv.auto = lambda r: r.create_response(0, body=route)
    status, out, err = run_admin(["topicRoute", "-t", "T", "-n", NAMESRV], peer_for)
    assert status == 0 and '\n\t\t\t"brokerName":"b\\u202e",\n' in out


def test_line_separators_and_bidi_marks_are_escaped_in_text_and_in_json():
    """Issue 31: U+2028 and U+2029 (a line break to many terminals and log viewers) and the
    bidi marks were printed raw, in text and in ``--json`` (json leaves them, DEL and C1 raw)."""
    name = "b\u2028forged line\u2029\u200f\x7f\x9b"
    namesrv = Peer(auto=lambda r: r.create_response(0, body=cluster_info({name: "127.0.0.2:20000"})))

    def peer_for(host, port):
        return namesrv if f"{host}:{port}" == NAMESRV else FakeBroker()
    status, out, err = run_admin(["clusterList", "-n", NAMESRV], peer_for)
    assert status == 0 and len(out.splitlines()) == 2
    assert not set("\u2028\u2029\u200f\x7f\x9b") & set(out)
    assert "b\\u2028forged line\\u2029\\u200f\\x7f\\x9b" in out
    status, out, err = run_admin(["clusterList", "-n", NAMESRV, "--json"], peer_for)
    assert status == 0 and not set("\u2028\u2029\u200f\x7f\x9b") & set(out)
    assert json.loads(out)[0]["brokerName"] == name


def test_a_moved_broker_is_one_difference_not_one_per_topic():
    from rocketpy.namesrv.consistency import compare_views, view_of
    from rocketpy.remoting.bodies import ClusterInfo, TopicRouteData

    def view(addr, broker_addr):
        info = ClusterInfo.from_json(cluster_info({"broker-a": broker_addr}))
        route = TopicRouteData.from_json(
            b'{"brokerDatas":[{"brokerAddrs":{0:"' + broker_addr.encode() + b'"},"brokerName":'
            b'"broker-a","cluster":"DefaultCluster"}],"queueDatas":[{"brokerName":"broker-a",'
            b'"perm":6,"readQueueNums":8,"writeQueueNums":8,"topicSysFlag":0}]}')
        return view_of(addr, info, {f"T{i}": route for i in range(100)} | {"Gone": None})

    same = compare_views([view("ns1", "10.0.0.1:10911"), view("ns2", "10.0.0.1:10911")])
    assert same.consistent and same.views[0].digests() == same.views[1].digests()
    moved = compare_views([view("ns1", "10.0.0.1:10911"), view("ns2", "10.0.0.2:10911")])
    assert not moved.consistent
    assert [(d.kind, d.name, d.values) for d in moved.differences] == [
        ("broker", "broker-a", {"ns1": "cluster DefaultCluster 0=10.0.0.1:10911",
                                "ns2": "cluster DefaultCluster 0=10.0.0.2:10911"})]
    assert moved.views[0].topics["T0"] == "broker-a r8 w8 p6" and moved.views[0].topics["Gone"] is None
