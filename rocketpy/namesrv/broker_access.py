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
  host holds is refused; so is a REGISTER_TOPIC_IN_NAMESRV adding queues to a group with live
  members of which this host registered none, and a REGISTER_BROKER whose static topic mappings
  name such a group (``bname``: the Java 5.x client routes a topic with mappings to their logical
  queues, ``topicRouteData2TopicPublishInfo``, so a mapping of another group rewrites that
  group's route). Those two are checked on the body as the handler decoded it
  (:meth:`BrokerAccessPolicy.topic_refusal`, :meth:`~BrokerAccessPolicy.mapping_refusal`), off
  the reactor for a big one. A restart on the same host takes it over at once; on another host
  once the old registration is gone (closed, or expired after 120 s). A live entry loaded from a
  route snapshot at a warm restart (provisional) stays bound to the host that registered it
  (:meth:`BrokerAccessPolicy.bind_provisional`).

It cannot tell a genuine broker from an impostor that gets there first, and the peer address is
what TCP says; against an attacker on the brokers' network use TLS with client certificates
(``docs/security.md``)."""
from rocketpy.remoting.catalogue import BROKER, NAMESRV, codes_with
from rocketpy.remoting.codes import RequestCode
from rocketpy.remoting.errors import RemotingCodecError
from rocketpy.remoting.headers import REQUEST_HEADERS

from .acl import client_address, describe_code, networks_refusal, parse_networks

__all__ = ["BrokerAccessPolicy", "host_of", "BROKER_ALLOW_NETWORKS", "BROKER_IDENTITY_BINDING",
           "BROKER_ACCESS_KEYS", "BROKER_CODES"]

BROKER_ALLOW_NETWORKS = "brokerAllowNetworks"
BROKER_IDENTITY_BINDING = "brokerIdentityBinding"
BROKER_ACCESS_KEYS = (BROKER_ALLOW_NETWORKS, BROKER_IDENTITY_BINDING)

#: The requests brokers send that change routes or liveness (the catalogue's broker requests).
BROKER_CODES = codes_with(NAMESRV, lambda r: bool(r.access & BROKER))
#: The broker requests that name a broker identity, with their header.
_IDENTITY_HEADERS = {code: REQUEST_HEADERS[code]
                     for code in codes_with(NAMESRV, lambda r: r.names_broker) & BROKER_CODES}
_REGISTER = int(RequestCode.REGISTER_BROKER)
_REGISTER_TOPIC = int(RequestCode.REGISTER_TOPIC_IN_NAMESRV)
_LOCAL = "local"   # a peer without an IP address (a UNIX socket): this host


def host_of(channel):
    """The IP a channel's peer connects from (the host an identity binds to)."""
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
        # broker address -> {host: {live key: (id, address)}}, broker name -> the same: what
        # registrations through this policy gave each host (checked against the tables on use)
        self._by_addr = {}
        self._by_name = {}
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
            # read as leniently as any handler reads it (Java's decoding: an absent or odd field
            # is None), so no header a handler takes escapes the check; what even this refuses,
            # every handler refuses too, changing nothing
            header = _IDENTITY_HEADERS[request.code].from_ext_fields(request.ext_fields,
                                                                     strict=False)
        except RemotingCodecError:
            return None
        host = host_of(channel)
        held = self._held(header, host)
        if held is not None:
            return self._refuse(*held, request.code, host)
        if request.code == _REGISTER:
            self._note(channel, host, header)
        return None

    def _refuse(self, what, owner, code, host):
        self.refused["identity"] += 1
        return (f"{what} is held by {owner} while its registration is live; refused "
                f"request code {describe_code(code)} from {host} ({BROKER_IDENTITY_BINDING})")

    def _held(self, header, host):
        """``(what, owner)`` of the first live registration of another host ``header`` names
        -- its address in any cluster, the (name, id) slot, the whole group when it names
        another cluster -- or None. O(1) per request, amortized: see :meth:`_other_host`."""
        addr = header.broker_addr
        owner = self._other_host(self._by_addr.get(addr), host, self._addr_valid)
        if owner is not None:
            return f"broker address {addr}", owner
        broker_data = self.rim.broker_addr_table.get(header.broker_name)
        if broker_data is None:
            return None
        if header.cluster_name != broker_data.cluster:
            owner = self._other_host(self._by_name.get(header.broker_name), host,
                                     self._member_valid(header.broker_name))
            if owner is not None:
                return (f"broker {header.broker_name} of cluster {broker_data.cluster} "
                        f"(named in cluster {header.cluster_name})"), owner
            return None
        slot_addr = broker_data.broker_addrs.get(header.broker_id)
        if slot_addr is not None:
            owner = self._other_host(self._by_addr.get(slot_addr), host, self._addr_valid)
            if owner is not None:
                return f"broker {header.broker_name} id {header.broker_id}", owner
        return None

    def topic_refusal(self, route, channel):
        """None when REGISTER_TOPIC_IN_NAMESRV's ``route`` (its body, as the handler decoded
        it) from ``channel`` may run, else the refusal remark: each group it adds queues to that
        has live members must have one registered by this host."""
        if not self.bind_identity or route is None:
            return None
        names = dict.fromkeys(qd.broker_name for qd in route.queue_datas or ())
        return self._groups_refusal(names, host_of(channel), _REGISTER_TOPIC)

    def mapping_refusal(self, broker_name, mappings, channel):
        """The same for the static topic ``mappings`` (topic -> TopicQueueMappingInfo) of a
        REGISTER_BROKER of group ``broker_name``: each other group a mapping names."""
        if not self.bind_identity or not mappings:
            return None
        names = dict.fromkeys(info.bname for info in mappings.values()
                              if info.bname != broker_name)
        return self._groups_refusal(names, host_of(channel), _REGISTER)

    def _groups_refusal(self, names, host, code):
        for name in names:
            holders = self._by_name.get(name)
            valid = self._member_valid(name)
            if holders and not self._live_key(holders.get(host), host, valid):
                owner = self._other_host(holders, host, valid)
                if owner is not None:
                    return self._refuse(f"broker {name}", owner, code, host)
        return None

    # -- the index: identity -> host -> live keys its registrations gave it ----------------

    def _addr_valid(self, host, key, member):
        live = self.rim.broker_live_table.get(key)
        if live is None:
            return False
        if live.channel_id is None and key in self.rim.provisional:
            return self.rim.provisional[key] == host   # (a host the snapshot did not know: none)
        return self._hosts.get(live.channel_id) == host

    def bind_provisional(self):
        """Bind each provisional live entry (loaded from a route snapshot) to the host that
        registered it, as its registration did: an identity stays its host's across a warm
        restart until it expires or its host registers it again."""
        if not self.bind_identity:
            return
        rim = self.rim
        for key, host in rim.provisional.items():
            live = rim.broker_live_table.get(key)
            data = None if live is None else rim.broker_addr_table.get(live.broker_name)
            if host is None or data is None:
                continue
            addr = key[1]
            for broker_id, held in data.broker_addrs.items():
                if held == addr:
                    member = (broker_id, addr)
                    by_addr = self._by_addr.setdefault(addr, {}).setdefault(host, {})
                    by_name = self._by_name.setdefault(live.broker_name, {}).setdefault(host, {})
                    self._key_count += (key not in by_addr) + (key not in by_name)
                    by_addr[key] = member
                    by_name[key] = member

    def _member_valid(self, name):
        broker_data = self.rim.broker_addr_table.get(name)

        def valid(host, key, member):
            return (broker_data is not None and self._addr_valid(host, key, member)
                    and broker_data.broker_addrs.get(member[0]) == member[1])
        return valid

    def _other_host(self, holders, host, valid):
        """The first host but ``host`` with a valid key in ``holders``, or None. What it passes
        that is no longer valid is dropped for good (a key comes back only through a new
        registration, :meth:`_note`), so a check costs O(1) amortized over the registrations."""
        if not holders:
            return None
        gone, owner = [], None
        for other, keys in holders.items():
            if other == host:
                continue
            if self._live_key(keys, other, valid):
                owner = other
                break
            gone.append(other)
        for other in gone:
            del holders[other]
        return owner

    def _live_key(self, keys, host, valid):
        """Whether ``keys`` (of ``host``) holds a valid key; the invalid ones before it go."""
        if not keys:
            return False
        gone, found = [], False
        for key, member in keys.items():
            if valid(host, key, member):
                found = True
                break
            gone.append(key)
        for key in gone:
            del keys[key]
        self._key_count -= len(gone)
        return found

    def _note(self, channel, host, header):
        """Remember the host of a registering connection and the live key it gives its address
        and its group's member; sweep what holds no live entry any more whenever the index has
        doubled since the last sweep."""
        channel_id = getattr(channel, "channel_id", channel)
        addr, name = header.broker_addr, header.broker_name
        key = self.rim.live_key(header.cluster_name, addr)
        member = (header.broker_id, addr)
        known = self._by_name.get(name, {}).get(host, {}).get(key) == member
        if (channel_id not in self._hosts or not known) and \
                len(self._hosts) + self._key_count >= self._sweep_at:
            self._sweep()
        self._hosts[channel_id] = host
        by_addr = self._by_addr.setdefault(addr, {}).setdefault(host, {})
        by_name = self._by_name.setdefault(name, {}).setdefault(host, {})
        self._key_count += (key not in by_addr) + (key not in by_name)
        by_addr[key] = member
        by_name[key] = member

    def _sweep(self):
        table = self.rim.broker_live_table
        live = {entry.channel_id for entry in table.values()}
        self._hosts = {cid: h for cid, h in self._hosts.items() if cid in live}
        self._by_addr = self._kept(self._by_addr, lambda ident: self._addr_valid)
        self._by_name = self._kept(self._by_name, self._member_valid)
        self._key_count = sum(len(keys) for index in (self._by_addr, self._by_name)
                              for holders in index.values() for keys in holders.values())
        self._sweep_at = max(64, 2 * (len(self._hosts) + self._key_count))

    @staticmethod
    def _kept(index, valid_for):
        out = {}
        for ident, holders in index.items():
            valid = valid_for(ident)
            kept = {}
            for host, keys in holders.items():
                live = {key: m for key, m in keys.items() if valid(host, key, m)}
                if live:
                    kept[host] = live
            if kept:
                out[ident] = kept
        return out
