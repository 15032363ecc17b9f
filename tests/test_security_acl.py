"""Access control of the administrative requests (rocketpy.namesrv.acl), proved on real bytes.

The captures hold 377 requests that mqadmin and the Java admin API signed with the stock
``rocketmq2`` account (``AclClientRPCHook``); the secret comes from the stock ``tools.yml``. Every
captured Signature is recomputed here from the captured fields and body, through both rocketpy's
decoder and the independent reader of :mod:`golden`. Then whole captures replay through a
processor with the guard on: brokers and clients get Java's answers byte for byte, and the signed
admin calls still succeed; unsigned, tampered or foreign ones get NO_PERMISSION.
"""
import base64
import hashlib
import hmac
import ipaddress

import pytest

import golden
import replay
from rocketpy.namesrv import Channel
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv import acl as acl_module
from rocketpy.namesrv.acl import (ACL_CONFIG_KEYS, ACL_REPLAY_WINDOW, ADMIN_CODES, AccessControl,
                                  AclConfigError, Account,
                                  calculate_signature, client_address, describe_code,
                                  parse_accounts,
                                  parse_networks, sign, signing_content)
from rocketpy.remoting import RemotingCommand, decode_frame

#: The two lines of the stock distribution/conf/tools.yml (4.9.8 and 5.3.3 alike) that matter.
STOCK_TOOLS_YML = "accessKey: rocketmq2\nsecretKey: 12345678\n"
#: A plain_acl.yml shaped like the stock 4.9.8 one (one plain account, one admin).
PLAIN_ACL_YML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""
LOCAL = Channel(1, "127.0.0.1:50000")
REMOTE = Channel(2, "10.9.8.7:41234")


def signed_frames():
    out = []
    for frame in golden.all_frames():
        n = golden.naive(frame.data)
        if not n.flag & 1 and n.ext_fields and "Signature" in n.ext_fields:
            out.append(frame)
    return out


# ------------------------------------------------------------------ the signature, on real bytes

def test_every_captured_signature_recomputes_with_the_stock_secret():
    secret = parse_accounts(STOCK_TOOLS_YML)["rocketmq2"].secret_key
    frames = signed_frames()
    codes = {golden.naive(f.data).code for f in frames}
    serialize = {golden.naive(f.data).serialize_type for f in frames}
    assert len(frames) == 503
    assert {100, 101, 102, 105, 106, 205, 206, 216, 318, 319, 327} <= codes and serialize == {0, 1}
    for frame in frames:
        naive = golden.naive(frame.data)
        cmd = decode_frame(frame.data)
        assert cmd.ext_fields["AccessKey"] == "rocketmq2", frame.where
        ours = calculate_signature(signing_content(cmd.ext_fields, cmd.body), secret)
        assert ours == cmd.ext_fields["Signature"], frame.where
        # the same from the independent parse and a from-scratch HMAC
        ext = naive.ext_fields
        text = "".join(ext[k] for k in sorted(ext, key=lambda k: k.encode("utf-16-be"))
                       if k != "Signature")
        mac = hmac.new(b"12345678", text.encode() + naive.body, hashlib.sha1).digest()
        assert base64.b64encode(mac).decode() == ext["Signature"], frame.where
        # and sign() rebuilds the request's fields exactly as AclClientRPCHook did
        unsigned = {k: v for k, v in cmd.ext_fields.items() if k not in ("AccessKey", "Signature")}
        assert sign(unsigned, cmd.body, "rocketmq2", secret) == {**unsigned, **{
            "AccessKey": "rocketmq2", "Signature": ext["Signature"]}}


def test_signature_covers_every_field_and_the_body():
    frame = next(f for f in signed_frames() if golden.naive(f.data).code == 100)
    cmd = decode_frame(frame.data)
    good = calculate_signature(signing_content(cmd.ext_fields, cmd.body), "12345678")
    for key in cmd.ext_fields:
        if key != "Signature":
            changed = dict(cmd.ext_fields, **{key: cmd.ext_fields[key] + "x"})
            assert calculate_signature(signing_content(changed, cmd.body), "12345678") != good, key
    assert calculate_signature(signing_content(cmd.ext_fields, b"x"), "12345678") != good
    assert calculate_signature(signing_content(cmd.ext_fields, cmd.body), "12345679") != good
    # the Java validator leaves out _UNIQUE_KEY_QUERY (added after signing)
    extra = dict(cmd.ext_fields, _UNIQUE_KEY_QUERY="true")
    assert calculate_signature(signing_content(extra, cmd.body), "12345678") == good


def test_keys_sort_like_java_treemap():
    # String.compareTo compares UTF-16 units: a supplementary character (surrogate D83D) sorts
    # before U+FFFF, where Python's code-point order puts it after.
    ext = {"\uffff": "B", "\U0001F600": "A", "a": "0"}
    assert signing_content(ext, None) == "0AB".encode()


# ------------------------------------------------------------------ configuration

def test_accounts_files():
    plain = parse_accounts(PLAIN_ACL_YML)
    assert plain == {"RocketMQ": Account("RocketMQ", "12345678", False),
                     "rocketmq2": Account("rocketmq2", "12345678", True)}
    assert parse_accounts(STOCK_TOOLS_YML) == {"rocketmq2": Account("rocketmq2", "12345678", True)}
    quoted = parse_accounts("accounts:\n- accessKey: 'a:b'  # note\n  secretKey: \"s#1\"\n  admin: TRUE\n")
    assert quoted == {"a:b": Account("a:b", "s#1", True)}
    assert "12345678" not in repr(plain)
    import yaml  # the subset reader agrees with a real YAML parser (PyYAML: the test extra's myst-parser)
    for text in (PLAIN_ACL_YML, STOCK_TOOLS_YML):
        doc = yaml.safe_load(text)
        entries = doc.get("accounts") or [dict(doc, admin=True)]
        assert {e["accessKey"]: (str(e["secretKey"]), bool(e.get("admin"))) for e in entries} == {
            a.access_key: (a.secret_key, a.admin) for a in parse_accounts(text).values()}


def test_networks_and_addresses():
    nets = parse_networks("127.0.0.0/8, 10.1.2.3/16;::1  fd00::/8")
    assert nets == (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("10.1.0.0/16"),
                    ipaddress.ip_network("::1/128"), ipaddress.ip_network("fd00::/8"))
    assert parse_networks("") == ()
    with pytest.raises(AclConfigError, match="adminAllowNetworks"):
        parse_networks("10.0.0.0/33")
    assert client_address("10.1.2.3:4567") == ipaddress.ip_address("10.1.2.3")
    assert client_address("::1:4567") == ipaddress.ip_address("::1")
    assert client_address("[fe80::1%eth0]:9876") == ipaddress.ip_address("fe80::1")
    assert client_address("::ffff:10.1.2.3:80") == ipaddress.ip_address("10.1.2.3")
    assert client_address("10.1.2.3") == ipaddress.ip_address("10.1.2.3")
    assert client_address("") is None and client_address("/tmp/sock") is None


def test_from_properties(tmp_path):
    assert not AccessControl.from_properties({}).enabled
    path = tmp_path / "plain_acl.yml"
    path.write_text(PLAIN_ACL_YML)
    acl = AccessControl.from_properties({"aclEnable": "true", "aclConfigPath": str(path),
                                         "adminAllowNetworks": "127.0.0.1"})
    assert acl.enabled and set(acl.accounts) == {"RocketMQ", "rocketmq2"}
    with pytest.raises(AclConfigError, match="aclConfigPath"):
        AccessControl.from_properties({"aclEnable": "true", "aclConfigPath": str(tmp_path / "no")})
    (tmp_path / "empty.yml").write_text("accounts:\n")
    with pytest.raises(AclConfigError, match="no account"):
        AccessControl.from_properties({"aclEnable": "true", "aclConfigPath": str(tmp_path / "empty.yml")})
    with pytest.raises(AclConfigError):  # the processor refuses to start with a bad guard
        replay.build_processor(replay.sc_captures()[0], tmp_path, adminAllowNetworks="nonsense")


# ------------------------------------------------------------------ the guard in the processor

def _processor(tmp_path, capture="rmq50-sc-admin-all.pcap", **settings):
    path = golden.PCAP_DIR / capture
    return replay.build_processor(path, tmp_path, **settings)


@pytest.fixture
def accounts_file(tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(PLAIN_ACL_YML)
    return str(path)


@pytest.mark.parametrize("capture", ["rmq49-sc-admin-all.pcap", "rmq50-sc-admin-all.pcap"])
def test_signed_mqadmin_session_replays_exactly_with_the_guard_on(tmp_path, accounts_file, capture):
    """A whole genuine session (broker, clients, every mqadmin command) through a guarded
    NameServer: every answer is still Java's (the admin calls are signed and local)."""
    proc = _processor(tmp_path, capture, aclEnable="true", aclConfigPath=accounts_file,
                      adminAllowNetworks="127.0.0.0/8,::1")
    answers = {}
    process = proc.process
    proc.process = lambda request, channel, now_ms: answers.setdefault(
        id(request), process(request, channel, now_ms))
    result = replay.replay_capture(golden.PCAP_DIR / capture, tmp_path, processor=proc)
    assert result.answered > 30
    for event, diffs in result.mismatches:
        # GET_NAMESRV_CONFIG lists the -c file's extra keys, as Java does: here ours
        assert event.request.code == 319 and len(diffs) == 1 and diffs[0].startswith("body"), diffs
        ours = replay.parsed_body(319, answers[id(event.request)].body)
        assert set(ACL_CONFIG_KEYS) - {ACL_REPLAY_WINDOW} <= set(ours)   # the keys it was given
        assert {k: v for k, v in ours.items() if k not in ACL_CONFIG_KEYS} == \
            replay.parsed_body(319, event.expected.body)
    counters = proc.access_control.counters
    assert counters["allowed"] >= 6 and counters["refused_network"] == counters["refused_signature"] == 0


@pytest.mark.parametrize("capture", ["rmq49-sc-two-clusters.pcap", "rmq50-sc-two-clusters.pcap",
                                     "rmq49-sc-clients.pcap", "rmq50-sc-clients.pcap",
                                     "rmq50-broker-register-actingmaster-newproto.pcap"])
def test_brokers_and_clients_are_unaffected(tmp_path, accounts_file, capture):
    """Brokers registering, expiring and unregistering, producers, consumers: with the strictest
    guard (no admin network at all, signatures required) every answer is still Java's."""
    settings = {"supportActingMaster": "true"} if "actingmaster" in capture else {}
    proc = _processor(tmp_path, capture, aclEnable="true", aclConfigPath=accounts_file,
                      adminAllowNetworks="192.0.2.0/24", **settings)
    result = replay.replay_capture(golden.PCAP_DIR / capture, tmp_path, processor=proc)
    assert result.answered > 10 and not result.mismatches, result.mismatches[:2]
    assert result.exact_frames == result.answered
    assert proc.access_control.counters["checked"] == 0


def _admin_requests():
    return [decode_frame(f.data) for f in signed_frames()
            if golden.naive(f.data).code in ADMIN_CODES]


def test_tampered_unsigned_and_foreign_requests_are_refused(tmp_path, accounts_file):
    proc = _processor(tmp_path, aclEnable="true", aclConfigPath=accounts_file)
    requests = _admin_requests()
    assert {r.code for r in requests} == {100, 102, 205, 216, 318, 327}
    for request in requests:
        ext = request.ext_fields
        cases = {
            "No accessKey is configured": {k: v for k, v in ext.items()
                                           if k not in ("AccessKey", "Signature")},
            "No acl config for nobody": dict(ext, AccessKey="nobody"),
            "Check signature failed for accessKey=rocketmq2": dict(ext, Signature=ext["Signature"][::-1]),
            "Need admin permission for request code=%d, but accessKey=RocketMQ is not" % request.code:
                sign({k: v for k, v in ext.items() if k not in ("AccessKey", "Signature")},
                     request.body, "RocketMQ", "12345678"),
        }
        for remark, fields in cases.items():
            bad = RemotingCommand(request.code, request.language, request.version, request.opaque,
                                  0, None, fields, request.body, request.serialize_type)
            answer = proc.process(bad, LOCAL, 1000)
            assert answer.code == 16 and answer.opaque == request.opaque
            assert answer.remark.startswith(remark) and "aclEnable" in answer.remark, answer.remark
        if request.body:  # a changed body breaks the signature too
            bad = RemotingCommand(request.code, request.language, request.version, request.opaque,
                                  0, None, ext, request.body + b"\n", request.serialize_type)
            assert proc.process(bad, LOCAL, 1000).code == 16
        answer = proc.process(request, LOCAL, 1000)   # the genuine request passes
        assert answer.code != 16, answer.remark
    assert proc.access_control.counters["refused_signature"] >= 4 * len(requests)


def test_network_allow_list(tmp_path):
    seen = []
    proc = _processor(tmp_path, adminAllowNetworks="127.0.0.0/8,fd00::/8")
    proc.access_control.on_refused = lambda code, addr, why: seen.append((code, addr))
    put = RemotingCommand.request(100, {"namespace": "ns", "key": "k", "value": "v"}, opaque=3,
                                  version=479)
    for channel, allowed in ((LOCAL, True), (REMOTE, False), (Channel(3, "fd00::7:1000"), True),
                             (Channel(4, "::ffff:127.0.0.2:5"), True), (Channel(5, ""), False),
                             (Channel(6, "fe80::1:5"), False)):
        answer = proc.process(put, channel, 1000)
        assert (answer.code == 0) is allowed, (channel, answer)
        if not allowed:
            assert answer.code == 16 and "adminAllowNetworks" in answer.remark
    assert "client 10.9.8.7 is not in adminAllowNetworks" in proc.process(put, REMOTE, 1000).remark
    # a refused oneway request gets no answer and changes nothing
    oneway = RemotingCommand.request(100, {"namespace": "ns", "key": "k", "value": "evil"},
                                      oneway=True, version=479)
    assert proc.process(oneway, REMOTE, 1000) is None
    assert proc.kv_config_manager.get_kv_config("ns", "k") == "v"
    assert seen[0] == (100, "10.9.8.7:41234") and len(seen) == 5
    # open codes stay open from anywhere, UNREGISTER_BROKER included
    for code, ext in ((105, {"topic": "TopicTest"}), (106, None), (101, {"namespace": "ns", "key": "k"}),
                      (104, {"brokerName": "b", "brokerAddr": "1.2.3.4:5", "clusterName": "c",
                             "brokerId": "0"})):
        answer = proc.process(RemotingCommand.request(code, ext, version=479), REMOTE, 1000)
        assert answer.code != 16, code
    assert proc.process(RemotingCommand.request(101, {"namespace": "ns", "key": "k"}, version=479),
                        REMOTE, 1000).ext_fields == {"value": "v"}


def test_acl_keys_cannot_change_at_runtime(tmp_path):
    proc = _processor(tmp_path)   # even with access control off
    for body in (b"aclEnable=false\n", b"adminAllowNetworks=0.0.0.0/0\n", b"aclConfigPath=/tmp/x\n",
                 b"aclReplayWindowSeconds=0\n"):
        answer = proc.process(RemotingCommand.request(318, None, body, version=479), LOCAL, 1000)
        assert answer.code == 16 and "at runtime" in answer.remark
    update = RemotingCommand.request(318, None, b"clusterTest=false\n", version=479)
    answer = proc.process(update, LOCAL, 1000)
    assert answer.code == 0
    assert proc.access_control.counters["refused_config_key"] == 4


# ------------------------------------------------------------------ replays (issue 20)

def _resent(request):
    """The same bytes again, as a replaying attacker sends them (a new opaque is not signed)."""
    return RemotingCommand(request.code, request.language, request.version, request.opaque + 1000,
                           0, None, dict(request.ext_fields), request.body, request.serialize_type)


def test_a_captured_signature_verifies_again_unless_the_replay_window_is_on(tmp_path, accounts_file):
    """Java's hook signs the header's fields, the keys and the body: no time, no nonce. So a
    captured request passes again (as on a Java broker); with aclReplayWindowSeconds the same
    signature is refused within the window -- and passes once it is over."""
    requests = _admin_requests()
    open_proc = _processor(tmp_path, aclEnable="true", aclConfigPath=accounts_file)
    proc = _processor(tmp_path, aclEnable="true", aclConfigPath=accounts_file,
                      aclReplayWindowSeconds="60")
    for i, request in enumerate(requests):
        start = (i + 1) * 1_000_000
        assert open_proc.process(request, LOCAL, start).code != 16
        assert open_proc.process(_resent(request), LOCAL, start + 1).code != 16   # Java's way
        assert proc.process(request, LOCAL, start).code != 16
        replayed = proc.process(_resent(request), REMOTE, start + 59_999)
        assert (replayed.code, replayed.remark) == (16, (
            f"The same signed request was accepted 59999 ms ago: refused as a replay (request "
            f"code {describe_code(request.code)}, aclReplayWindowSeconds=60)"))
        assert proc.process(_resent(request), LOCAL, start + 60_000).code != 16   # window over
    counters = proc.access_control.counters
    assert counters["refused_replay"] == len(requests) and len(requests) >= 6
    assert open_proc.access_control.counters["refused_replay"] == 0


def test_the_replay_window_remembers_a_bounded_number_of_signatures(monkeypatch):
    monkeypatch.setattr(acl_module, "MAX_REMEMBERED_SIGNATURES", 8)
    acl = AccessControl(accounts=parse_accounts(STOCK_TOOLS_YML), replay_window_ms=10_000)

    def put(i):
        fields = sign({"namespace": "ns", "key": f"k{i}", "value": "v"}, None, "rocketmq2", "12345678")
        return RemotingCommand.request(100, fields, version=479)

    for i in range(8):
        assert acl.decide(put(i), LOCAL, 1000 + i) is None
    assert acl.decide(put(8), LOCAL, 1010).startswith("More than 8 signed requests within the "
                                                      "replay window")
    assert len(acl._seen) == 8
    assert acl.decide(put(8), LOCAL, 11_000) is None      # the first has left the window
    assert len(acl._seen) == 8
    assert acl.decide(put(9), LOCAL, 20_500) is None      # all but put(8) have
    assert len(acl._seen) == 2


def test_replay_window_settings(tmp_path, accounts_file):
    assert AccessControl.from_properties({}).replay_window_ms == 0      # off, like Java
    acl = AccessControl.from_properties({"aclEnable": "true", "aclConfigPath": accounts_file,
                                         "aclReplayWindowSeconds": "300"})
    assert acl.replay_window_ms == 300_000
    for value, problem in (("300", "needs aclEnable=true"), ("-1", "not a number of seconds"),
                           ("86401", "not a number of seconds"), ("5m", "not a number of seconds")):
        props = {"aclReplayWindowSeconds": value}
        if value != "300":
            props.update(aclEnable="true", aclConfigPath=accounts_file)
        with pytest.raises(AclConfigError, match=problem):
            AccessControl.from_properties(props)


def test_check_hook_and_default_processor_is_open(tmp_path):
    acl = AccessControl(parse_networks("127.0.0.1"))
    request = RemotingCommand.request(216, {"topic": "T"}, opaque=77, version=409)
    answer = acl.check(request, REMOTE, version=479)
    assert (answer.code, answer.opaque, answer.is_response, answer.version) == (16, 77, True, 479)
    assert acl.check(request, LOCAL) is None
    assert acl.check(RemotingCommand.request(216, {"topic": "T"}, oneway=True), REMOTE) is None
    proc = _processor(tmp_path)
    assert isinstance(proc, DefaultRequestProcessor) and not proc.access_control.enabled
    put = RemotingCommand.request(100, {"namespace": "n", "key": "k", "value": "v"}, version=479)
    assert proc.process(put, REMOTE, 1000).code == 0   # Java's behaviour until configured


# ------------------------------------------------------------------ through the real server

@pytest.mark.network
def test_real_server_reads_the_guard_from_its_config_file(tmp_path):
    import serverproc
    conf = tmp_path / "namesrv.conf"
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(PLAIN_ACL_YML)
    conf.write_text(f"aclEnable=true\naclConfigPath={acl}\nadminAllowNetworks=127.0.0.0/8\n")
    with serverproc.running_server("-c", str(conf)) as server:
        client = serverproc.RemotingClient(server.port)
        try:
            fields = {"namespace": "ns", "key": "k", "value": "v"}
            refused = client.call(100, fields)
            assert refused.code == 16 and "No accessKey is configured" in refused.remark
            assert client.call(100, sign(fields, None, "rocketmq2", "12345678")).code == 0
            assert client.call(101, {"namespace": "ns", "key": "k"}).ext_fields["value"] == "v"
            assert client.call(105, {"topic": "nope"}).code == 17   # clients unaffected
        finally:
            client.close()


@pytest.mark.network
def test_real_server_refuses_a_replayed_signed_request_within_its_window(tmp_path):
    import serverproc
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(PLAIN_ACL_YML)
    with serverproc.running_server("-D", "aclEnable=true", "-D", f"aclConfigPath={acl}",
                                   "-D", "aclReplayWindowSeconds=600") as server:
        client = serverproc.RemotingClient(server.port)
        attacker = serverproc.RemotingClient(server.port)
        try:
            delete = sign({"namespace": "ns", "key": "k"}, None, "rocketmq2", "12345678")
            put = sign({"namespace": "ns", "key": "k", "value": "v"}, None, "rocketmq2", "12345678")
            assert client.call(102, delete).code == 0                 # the admin deletes k
            assert client.call(100, put).code == 0                    # then puts it back
            replayed = attacker.call(102, delete)                     # the captured delete again
            assert replayed.code == 16, replayed
            assert replayed.remark.startswith("The same signed request was accepted "), replayed
            assert client.call(101, {"namespace": "ns", "key": "k"}).ext_fields == {"value": "v"}
        finally:
            client.close()
            attacker.close()
