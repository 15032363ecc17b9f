"""Controller processor layer: who may speak for a broker on the controller port (a rocketpy
addition; Java's controller takes every broker request from anyone).

Anyone who reaches the controller port could apply for broker ids or heartbeat new brokers until
the 10,000 bounds (:data:`~rocketpy.controller.replicas.MAX_BROKERS`) lock real brokers out,
heartbeat as a live broker from elsewhere, or shrink a master's sync state set. The NameServer's
two protections (:mod:`rocketpy.namesrv.broker_access`, the same keys, off by default) apply
here too, refusing with NO_PERMISSION and a remark (a oneway heartbeat is dropped), counted in
:attr:`ControllerBrokerAccess.refused`:

* ``brokerAllowNetworks``: the requests brokers send that change the controller's state
  (:data:`BROKER_CODES`, and a broker's own CONTROLLER_ELECT_MASTER) are served only from these
  networks; reads stay open, a designated election is an administrative request.
* ``brokerIdentityBinding=true``: a broker identity is bound to the host whose heartbeats keep
  it live: its slot (cluster, broker name, broker id) and its address. A request naming a slot
  or an address that another host's live heartbeats hold is refused, as is an
  ALTER_SYNC_STATE_SET for a group whose master another host holds.
"""
from rocketpy.namesrv.acl import describe_code, networks_refusal, parse_networks
from rocketpy.namesrv.broker_access import BROKER_ALLOW_NETWORKS, BROKER_IDENTITY_BINDING, host_of
from rocketpy.remoting import headers as H
from rocketpy.remoting.catalogue import BROKER, CONTROLLER, codes_with, declaration
from rocketpy.remoting.codes import RequestCode as R
from rocketpy.remoting.errors import RemotingCodecError

__all__ = ["ControllerBrokerAccess", "BROKER_CODES"]

#: What brokers send that changes the controller's state (the catalogue's broker requests; a
#: broker's own CONTROLLER_ELECT_MASTER too: a designated one is administrative).
BROKER_CODES = codes_with(CONTROLLER, lambda r: bool(r.access & BROKER))


def _identity(code, header, replicas):
    """``(cluster, broker name, broker id, address or None)`` a request speaks for, or None."""
    if code == R.BROKER_HEARTBEAT:
        return header.cluster_name, header.broker_name, header.broker_id, header.broker_addr
    if code == R.CONTROLLER_REGISTER_BROKER:
        return header.cluster_name, header.broker_name, header.broker_id, header.broker_address
    if code == R.CONTROLLER_APPLY_BROKER_ID:   # the check code is "address;timestamp"
        addr = (header.register_check_code or "").partition(";")[0] or None
        return header.cluster_name, header.broker_name, header.applied_broker_id, addr
    if code == R.CONTROLLER_ELECT_MASTER:
        return header.cluster_name, header.broker_name, header.broker_id, None
    group = replicas.replica_info_table.get(header.broker_name)   # ALTER_SYNC_STATE_SET
    if group is None:
        return None
    return group.cluster_name, header.broker_name, header.master_broker_id, None


class ControllerBrokerAccess:
    """Decides whether a broker request to the controller may run (see the module docstring).

    :param heartbeats: the :class:`~rocketpy.controller.heartbeat.BrokerHeartbeatManager` whose
        live entries say who holds an identity.
    :param replicas: the :class:`~rocketpy.controller.replicas.ReplicasInfoManager` (a group's
        cluster, for ALTER_SYNC_STATE_SET).
    """

    def __init__(self, heartbeats, replicas, allow_networks=(), bind_identity=False):
        self.heartbeats = heartbeats
        self.replicas = replicas
        self.allow_networks = tuple(allow_networks)
        self.bind_identity = bool(bind_identity)
        #: refusals since start, by reason
        self.refused = {"network": 0, "identity": 0}

    @classmethod
    def from_properties(cls, props, heartbeats, replicas):
        """From the NameServer's properties; ``AclConfigError`` for a bad network."""
        props = props or {}
        networks = parse_networks(props.get(BROKER_ALLOW_NETWORKS, ""), BROKER_ALLOW_NETWORKS)
        bind = str(props.get(BROKER_IDENTITY_BINDING, "false")).strip().lower() == "true"
        return cls(heartbeats, replicas, networks, bind)

    @property
    def enabled(self):
        return bool(self.allow_networks) or self.bind_identity

    def decide(self, request, channel, now_ms):
        """None when ``request`` from ``channel`` may run, else the refusal remark."""
        code = request.code
        if code not in BROKER_CODES:
            return None
        try:
            header = H.REQUEST_HEADERS[code].from_ext_fields(request.ext_fields, strict=False)
        except RemotingCodecError:
            return None   # the handler answers a malformed header as Java does
        admin_when = declaration(code).admin_when
        if admin_when is not None and getattr(header, admin_when):
            return None   # administrative: adminAllowNetworks / ACL
        if self.allow_networks:
            refusal = networks_refusal(self.allow_networks, channel, BROKER_ALLOW_NETWORKS,
                                       f"request code {describe_code(code)} is a broker request "
                                       "to the controller")
            if refusal is not None:
                self.refused["network"] += 1
                return refusal
        if self.bind_identity:
            identity = _identity(code, header, self.replicas)
            if identity is not None:
                return self._identity_refusal(code, identity, channel, now_ms)
        return None

    def _identity_refusal(self, code, identity, channel, now_ms):
        cluster, name, broker_id, addr = identity
        host = host_of(channel)
        hb = self.heartbeats
        holders = [(f"broker {name} id {broker_id} of cluster {cluster}",
                    hb.broker_live_table.get((cluster, name, broker_id)))]
        if addr is not None:
            holders += [(f"broker address {addr}", info) for info in hb.live_at(addr)]
        for what, info in holders:
            if info is None or info.last_update_timestamp + info.heartbeat_timeout_millis < now_ms:
                continue
            owner = host_of(info.channel)
            if owner != host:
                self.refused["identity"] += 1
                return (f"{what} is held by {owner} while its heartbeats are live; refused "
                        f"request code {describe_code(code)} from {host} "
                        f"({BROKER_IDENTITY_BINDING})")
        return None
