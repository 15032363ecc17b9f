"""NameServer processor layer: who may speak for a broker (a rocketpy addition; the Java
NameServer takes every broker request from anyone, in every version).

Route poisoning: any peer can REGISTER_BROKER another broker's cluster, name and id with its own
address (clients are then routed to it), UNREGISTER_BROKER another cluster's broker, or keep a
dead broker "alive"; ACL (:mod:`rocketpy.namesrv.acl`) does not help, as brokers sign nothing.
Two protections, off by default (rocketpy answers like Java until configured), refuse with
NO_PERMISSION and a remark (a oneway is dropped), counted in :attr:`BrokerAccessPolicy.refused`:

* ``brokerAllowNetworks``: the broker requests (103, 104, 217, 322, 904) are served only from
  these networks; clients' reads stay open.
* ``brokerIdentityBinding=true``: a broker identity -- (name, id) and (cluster, address) -- is
  bound to the IP whose connection registered it while that registration is live; a broker
  request for an identity another host holds is refused. A restart on the same host takes it over
  at once; on another host once the old registration is gone (closed, or expired after 120 s).

It cannot tell a genuine broker from an impostor that gets there first, and the peer address is
what TCP says; against an attacker on the brokers' network use TLS with client certificates
(``docs/security.md``)."""
from rocketpy.remoting.codes import RequestCode
from rocketpy.remoting.errors import RemotingCodecError
from rocketpy.remoting.headers import (BrokerHeartbeatRequestHeader, QueryDataVersionRequestHeader,
                                       RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader)

from .acl import client_address, describe_code, networks_refusal, parse_networks

__all__ = ["BrokerAccessPolicy", "BROKER_ALLOW_NETWORKS", "BROKER_IDENTITY_BINDING",
           "BROKER_ACCESS_KEYS", "BROKER_CODES"]

BROKER_ALLOW_NETWORKS = "brokerAllowNetworks"
BROKER_IDENTITY_BINDING = "brokerIdentityBinding"
BROKER_ACCESS_KEYS = (BROKER_ALLOW_NETWORKS, BROKER_IDENTITY_BINDING)

#: The requests brokers send that change routes or liveness.
BROKER_CODES = frozenset(int(c) for c in (
    RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV, RequestCode.QUERY_DATA_VERSION,
    RequestCode.BROKER_HEARTBEAT))
#: The requests that name a broker identity, with their header.
_IDENTITY_HEADERS = {
    int(RequestCode.REGISTER_BROKER): RegisterBrokerRequestHeader,
    int(RequestCode.UNREGISTER_BROKER): UnRegisterBrokerRequestHeader,
    int(RequestCode.QUERY_DATA_VERSION): QueryDataVersionRequestHeader,
    int(RequestCode.BROKER_HEARTBEAT): BrokerHeartbeatRequestHeader,
}
_REGISTER = int(RequestCode.REGISTER_BROKER)
_LOCAL = "local"   # a peer without an IP address (a UNIX socket): this host


def _host(channel):
    address = client_address(getattr(channel, "remote_addr", "") or "")
    return _LOCAL if address is None else str(address)


class BrokerAccessPolicy:
    """Decides whether a broker request may run (see the module docstring).

    :param route_info_manager: the tables whose live entries say who holds an identity.
    :param allow_networks: networks broker requests may come from (empty: any).
    :param bind_identity: refuse requests for an identity another host holds.
    """

    def __init__(self, route_info_manager, allow_networks=(), bind_identity=False):
        self.rim = route_info_manager
        self.allow_networks = tuple(allow_networks)
        self.bind_identity = bool(bind_identity)
        codes = set()
        if self.allow_networks:
            codes |= BROKER_CODES
        if self.bind_identity:
            codes |= set(_IDENTITY_HEADERS)
        #: every code :meth:`decide` looks at (none when both protections are off)
        self.codes = frozenset(codes)
        self._hosts = {}            # channel id -> host of the connection that registered
        self._sweep_at = 64
        #: refusals since start, by reason
        self.refused = {"network": 0, "identity": 0}

    @classmethod
    def from_properties(cls, props, route_info_manager):
        """From the ``-c`` file / ``-D`` properties; ``AclConfigError`` for a bad network."""
        props = props or {}
        networks = parse_networks(props.get(BROKER_ALLOW_NETWORKS, ""), BROKER_ALLOW_NETWORKS)
        bind = str(props.get(BROKER_IDENTITY_BINDING, "false")).strip().lower() == "true"
        return cls(route_info_manager, networks, bind)

    def decide(self, request, channel):
        """None when ``request`` from ``channel`` may run, else the refusal remark."""
        code = request.code
        if code not in self.codes:
            return None
        if self.allow_networks and code in BROKER_CODES:
            refusal = networks_refusal(self.allow_networks, channel, BROKER_ALLOW_NETWORKS,
                                       f"request code {describe_code(code)} is a broker request")
            if refusal is not None:
                self.refused["network"] += 1
                return refusal
        if self.bind_identity and code in _IDENTITY_HEADERS:
            return self._identity_refusal(request, channel)
        return None

    def _identity_refusal(self, request, channel):
        try:
            header = _IDENTITY_HEADERS[request.code].from_ext_fields(request.ext_fields)
        except RemotingCodecError:
            return None   # the handler answers a malformed header as Java does
        host = _host(channel)
        rim = self.rim
        held = []
        live = rim.broker_live_info(header.cluster_name, header.broker_addr)
        if live is not None:
            held.append((live, f"broker address {header.broker_addr} of cluster "
                               f"{header.cluster_name}"))
        broker_data = rim.broker_addr_table.get(header.broker_name)
        if broker_data is not None and header.broker_id is not None:
            addr = broker_data.broker_addrs.get(header.broker_id)
            slot = rim.broker_live_info(broker_data.cluster, addr) if addr is not None else None
            if slot is not None:
                held.append((slot, f"broker {header.broker_name} id {header.broker_id}"))
        for holder, what in held:
            owner = self._hosts.get(holder.channel_id)
            if owner is not None and owner != host:
                self.refused["identity"] += 1
                return (f"{what} is held by {owner} while its registration is live; refused "
                        f"request code {describe_code(request.code)} from {host} "
                        f"({BROKER_IDENTITY_BINDING})")
        if request.code == _REGISTER:
            self._note(channel, host)
        return None

    def _note(self, channel, host):
        """Remember the host of a registering connection; forget connections that hold no
        live entry any more whenever the table has doubled."""
        channel_id = getattr(channel, "channel_id", channel)
        if channel_id not in self._hosts and len(self._hosts) >= self._sweep_at:
            live = {entry.channel_id for entry in self.rim.broker_live_table.values()}
            self._hosts = {cid: h for cid, h in self._hosts.items() if cid in live}
            self._sweep_at = max(64, 2 * len(self._hosts))
        self._hosts[channel_id] = host
