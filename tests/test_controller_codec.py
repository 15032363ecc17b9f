"""The controller's headers and bodies held to the genuine 5.3.3 frames of the
``rmq53-controller-*`` captures: every header and body on the controller port (and every
NOTIFY_BROKER_ROLE_CHANGED push) decodes into its typed form and re-encodes to the same bytes."""
import pytest

from controller_replay import CAPTURES, controller_frames
from rocketpy.remoting import RemotingCommand, bodies as B, decode_frame, headers as H

#: request code -> (request body bean, answer body bean)
#: (request body bean, answer body bean) by code: the catalogue's declarations
BODIES = {code: (B.REQUEST_BODIES.get(code), B.REPLY_BODIES.get(code))
          for code in set(B.REQUEST_BODIES) | set(B.REPLY_BODIES)}
ACL = {"AccessKey", "Signature"}


def _exchanges(name):
    frames = controller_frames(name)
    requests = {}
    for stream, up, _, data in frames:
        cmd = decode_frame(data)
        if not cmd.is_response:
            requests[(stream.index, cmd.opaque)] = cmd
    for stream, up, _, data in frames:
        cmd = decode_frame(data)
        request = cmd if not cmd.is_response else requests.get((stream.index, cmd.opaque))
        yield request, cmd, data


def _rebuilt(cmd, cls, bean):
    """The frame rebuilt from the typed header and body alone (nothing copied but the
    envelope's own fields)."""
    ext = cmd.ext_fields
    if cls is not None:
        typed = cls.from_ext_fields(ext)
        declared = {s.wire for s in cls.FIELDS}
        extra = {k: v for k, v in (ext or {}).items() if k not in declared}
        assert set(extra) <= ACL
        if extra:   # mqadmin's signed requests: same fields, in its ACL hook's map order
            assert typed.to_ext_fields() == {k: v for k, v in ext.items() if k in declared}
        else:
            ext = typed.to_ext_fields() or None
    body = cmd.body
    if bean is not None:
        body = bean.from_json(cmd.body).canonical().to_json()
    return RemotingCommand(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
                           ext, body, cmd.serialize_type)


@pytest.mark.parametrize("name", CAPTURES)
def test_every_controller_frame_reencodes_byte_identical(name):
    checked = set()
    for request, cmd, data in _exchanges(name):
        if cmd.is_response:
            if request is None or cmd.code != 0:
                cls = bean = None
            else:
                cls = H.response_header_class(request.code)
                bean = BODIES.get(request.code, (None, None))[1]
        else:
            cls = H.request_header_class(cmd.code)
            bean = BODIES.get(cmd.code, (None, None))[0]
        if cls is not None or bean is not None:
            checked.add((cmd.is_response, request.code if request else None))
        assert _rebuilt(cmd, cls, bean).encode() == data, (name, cmd)
    assert checked


def test_every_controller_code_seen_has_typed_forms():
    """Each header-carrying controller code in the captures is covered by a typed class."""
    seen = set()
    for name in CAPTURES:
        for request, cmd, _ in _exchanges(name):
            if not cmd.is_response and set(cmd.ext_fields or {}) - ACL:
                assert H.request_header_class(cmd.code) is not None, cmd
            if cmd.is_response and cmd.code == 0 and request is not None and cmd.ext_fields:
                assert H.response_header_class(request.code) is not None, request.code
            seen.add(cmd.code if not cmd.is_response else request.code)
    assert {1001, 1002, 1003, 1004, 1005, 1006, 1008, 1009, 1010, 1011, 1012, 1013, 904} <= seen


def test_sync_state_set_values():
    body = b'{"syncStateSet":[1,2],"syncStateSetEpoch":2}'
    sss = B.SyncStateSet.from_json(body)
    assert (sss.sync_state_set, sss.sync_state_set_epoch) == ([1, 2], 2)
    assert B.SyncStateSet(sync_state_set=[1, 2], sync_state_set_epoch=2).to_json() == body


def test_elect_master_body_keeps_unquoted_long_keys():
    body = (b'{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:50911",2:"127.0.0.1:50921"},'
            b'"brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[1]}')
    parsed = B.ElectMasterResponseBody.from_json(body)
    assert parsed.broker_member_group.broker_addrs == {1: "127.0.0.1:50911", 2: "127.0.0.1:50921"}
    assert parsed.canonical().to_json() == body


def test_broker_name_list():
    assert B.broker_name_list(b'["broker-a","b"]') == ["broker-a", "b"]
    for bad in (b'{"a":1}', b'[{}]', b"[", None):
        with pytest.raises(B.BodyDecodeError):
            B.broker_name_list(bad)


def test_elect_master_request_defaults_as_java():
    """Java's field initialisers: an empty header reads as clusterName "", brokerId -1."""
    header = H.ElectMasterRequestHeader.from_ext_fields({}, strict=False)
    assert (header.cluster_name, header.broker_name, header.broker_id,
            header.designate_elect) == ("", "", -1, False)


def test_notify_role_changed_header_order():
    """The push declares its fields in another order than the elect answer: masterAddress and
    masterBrokerId share a HashMap bucket, so the two come out in different orders."""
    values = dict(master_broker_id=2, master_address="127.0.0.1:50921", master_epoch=2,
                  sync_state_set_epoch=3)
    assert list(H.NotifyBrokerRoleChangedRequestHeader(**values).to_ext_fields()) == [
        "masterAddress", "masterBrokerId", "syncStateSetEpoch", "masterEpoch"]
    assert list(H.ElectMasterResponseHeader(**values).to_ext_fields()) == [
        "masterBrokerId", "masterAddress", "syncStateSetEpoch", "masterEpoch"]
