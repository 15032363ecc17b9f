"""NameServer processor layer: who may speak for a broker (a rocketpy addition; the Java
NameServer takes every broker request from anyone, in every version).

Route poisoning: any peer can REGISTER_BROKER another broker's cluster, name and id with its own
address (clients are then routed to it), UNREGISTER_BROKER another cluster's broker, or keep a
dead broker "alive"; ACL (:mod:`rocketpy.namesrv.acl`) does not help, as brokers sign nothing.
Two protections, off by default (rocketpy answers like Java until configured), refuse with
NO_PERMISSION and a remark (a oneway is dropped), counted in :attr:`BrokerAccessPolicy.refused`:

* ``brokerAllowNetworks``: the broker requests (103, 104, 217, 322, 904) are served only from
  these networks; clients' reads stay open.
* ``brokerIdentityBinding=true``: a broker identity is bound to the IP whose connection
  registered it while that registration is live -- its address (in whatever cluster a request
  names: 5.x keys live brokers by (cluster, address), so naming another cluster must not free
  it), its (name, id) slot, and its name's cluster (naming the group under another cluster is
  refused while another host holds a live member). A broker request naming an identity another
  host holds is refused. A restart on the same host takes it over at once; on another host once
  the old registration is gone (closed, or expired after 120 s).

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
        self._keys_by_addr = {}     # broker address -> {live key a registration gave it: None}
        self._key_count = 0
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

    def decide(self, request, channel, now_ms=0):
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
        for live, what in self._held(header):
            owner = self._hosts.get(live.channel_id)
            if owner is not None and owner != host:
                self.refused["identity"] += 1
                return (f"{what} is held by {owner} while its registration is live; refused "
                        f"request code {describe_code(request.code)} from {host} "
                        f"({BROKER_IDENTITY_BINDING})")
        if request.code == _REGISTER:
            self._note(channel, host, header)
        return None

    def _held(self, header):
        """``(live entry, what)`` of every live registration ``header`` names: its address in
        any cluster, the (name, id) slot, and the whole group when it names another cluster."""
        addr = header.broker_addr
        for live in self._live_at(addr):
            yield live, f"broker address {addr}"
        broker_data = self.rim.broker_addr_table.get(header.broker_name)
        if broker_data is None:
            return
        addrs = broker_data.broker_addrs
        if header.cluster_name != broker_data.cluster:
            for member in addrs.values():
                for live in self._live_at(member):
                    yield live, (f"broker {header.broker_name} of cluster {broker_data.cluster} "
                                 f"(named in cluster {header.cluster_name})")
        elif header.broker_id in addrs:
            for live in self._live_at(addrs[header.broker_id]):
                yield live, f"broker {header.broker_name} id {header.broker_id}"

    def _live_at(self, addr):
        """The live entries of ``addr`` under any cluster (the live keys registrations through
        this policy created, checked against the live table)."""
        table = self.rim.broker_live_table
        for key in self._keys_by_addr.get(addr, ()):
            live = table.get(key)
            if live is not None:
                yield live

    def _note(self, channel, host, header):
        """Remember the host of a registering connection and the live key its address gets;
        forget connections and keys that hold no live entry any more whenever either index has
        doubled since the last sweep."""
        channel_id = getattr(channel, "channel_id", channel)
        addr = header.broker_addr
        key = self.rim.live_key(header.cluster_name, addr)
        keys = self._keys_by_addr.get(addr)
        new_key = keys is None or key not in keys
        if (channel_id not in self._hosts or new_key) and \
                len(self._hosts) + self._key_count >= self._sweep_at:
            self._sweep()
        self._hosts[channel_id] = host
        if new_key:
            self._keys_by_addr.setdefault(addr, {})[key] = None
            self._key_count += 1

    def _sweep(self):
        table = self.rim.broker_live_table
        live = {entry.channel_id for entry in table.values()}
        self._hosts = {cid: h for cid, h in self._hosts.items() if cid in live}
        by_addr = {}
        for addr, keys in self._keys_by_addr.items():
            kept = {key: None for key in keys if key in table}
            if kept:
                by_addr[addr] = kept
        self._keys_by_addr = by_addr
        self._key_count = sum(map(len, by_addr.values()))
        self._sweep_at = max(64, 2 * (len(self._hosts) + self._key_count))
